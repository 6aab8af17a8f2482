"""The sections of a ds_config as dataclasses (batch sizes, optimizer, fp16, bf16, ZeRO), each
checked field by field in ``__post_init__``; :func:`dsbench.zero.config.load_config` builds them.
Schedulers are in :mod:`.schedulers`, offload in :mod:`.offload_config`,
activation checkpointing in :mod:`.activation_config`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dsbench.records.values import show_json
from dsbench.zero.config.fields import (
    NOT_A_KEY,
    READ,
    ConfigError,
    Section,
    ignored,
    refused,
    setting,
)
from dsbench.zero.config.keys import is_set, names_a_module, not_in
from dsbench.zero.config.offload_config import OffloadOptimizerConfig, OffloadParamConfig
from dsbench.zero.loss_scaler import DynamicLossScaler, StaticLossScaler

# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


@dataclass(kw_only=True, slots=True)
class BatchConfig(Section):
    """The three batch sizes, resolved, and the data-parallel world size they were resolved for."""

    train_batch_size: int
    """Samples per optimizer step over all ranks: micro-batch × accumulation × world size."""
    train_micro_batch_size_per_gpu: int
    """Samples per forward/backward on one rank."""
    gradient_accumulation_steps: int
    """Micro-batches accumulated on each rank before one optimizer step."""
    world_size: int
    """Data-parallel ranks (DeepSpeed's ``world_size`` in its batch assertion)."""

    _MIN: ClassVar[Mapping[str, float]] = {
        "train_batch_size": 1,
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "world_size": 1,
    }

    def __post_init__(self) -> None:
        Section.__post_init__(self)
        product = (
            self.train_micro_batch_size_per_gpu * self.gradient_accumulation_steps * self.world_size
        )
        if self.train_batch_size != product:
            raise ConfigError(
                f"train_batch_size {self.train_batch_size} != train_micro_batch_size_per_gpu "
                f"{self.train_micro_batch_size_per_gpu} × gradient_accumulation_steps "
                f"{self.gradient_accumulation_steps} × world size {self.world_size} (= {product})"
            )


@dataclass(kw_only=True, slots=True)
class OptimizerConfig(Section):
    """``optimizer`` of type Adam or AdamW, with its ``params``.

    DeepSpeed (its engine's ``_configure_basic_optimizer``): both names build the same optimizer,
    ``FusedAdam`` (``DeepSpeedCPUAdam`` when offloading; ``torch.optim.Adam``/``AdamW`` with
    ``"torch_adam": true``) and weight decay is **decoupled** (AdamW) for type ``AdamW``, and
    for type ``Adam`` too unless ``"adam_w_mode": false`` is given (``ADAM_W_MODE_DEFAULT =
    True``). Only ``Adam`` with ``adam_w_mode: false`` is L2 regularisation (decay added to the
    gradient, ``torch.optim.Adam`` semantics). :attr:`decoupled_weight_decay` says which.
    """

    type: str = field(default="adamw", metadata=NOT_A_KEY)  # optimizer.type, beside the params
    """'adam' or 'adamw': DeepSpeed matches the name case-insensitively and lower-cases it."""
    lr: float = 1e-3
    """Learning rate (FusedAdam's and torch's default 1e-3); WarmupLR's default peak."""
    betas: tuple[float, float] = (0.9, 0.999)
    """Adam's (β1, β2), each in [0, 1)."""
    eps: float = 1e-8
    """Added to the denominator √v̂ + eps."""
    weight_decay: float | None = None
    """Decay coefficient. Unset: the default of the optimizer DeepSpeed would build, 0.01 for
    ``torch.optim.AdamW`` (``torch_adam`` with decoupled decay), else 0 (FusedAdam, torch Adam)."""
    torch_adam: bool = False
    """Use torch's Adam/AdamW instead of DeepSpeed's fused kernel (no JIT build; CPU runs)."""
    adam_w_mode: bool = True
    """DeepSpeed's switch between decoupled decay (True, default) and L2 decay (False) for
    type 'adam'; type 'adamw' is always decoupled."""
    bias_correction: bool = setting(True, only="fused")
    """Adam's bias correction (a FusedAdam argument; dsbench's engine implements only True)."""
    amsgrad: bool = False
    """The AMSGrad variant (torch only; FusedAdam refuses it; dsbench's engine: False only)."""
    set_grad_none: Any = ignored(only="fused")
    maximize: Any = refused(only="torch")
    foreach: Any = ignored(only="torch")
    capturable: Any = ignored(only="torch")
    differentiable: Any = ignored(only="torch")
    fused: Any = ignored(only="torch")

    _PATH: ClassVar[str] = "optimizer.params"

    def __post_init__(self) -> None:
        Section.__post_init__(self)
        if not isinstance(self.type, str) or self.type.lower() not in ("adam", "adamw"):
            raise ConfigError(
                f"optimizer.type must be Adam or AdamW here, got {show_json(self.type)}"
            )
        self.type = self.type.lower()
        betas = self.betas
        if not isinstance(betas, list | tuple) or len(betas) != 2:
            raise ConfigError(f"optimizer.params.betas must be two numbers, got {show_json(betas)}")
        self.betas = tuple(READ.number("optimizer.params.betas", b, 0.0) for b in betas)  # type: ignore[assignment]
        if not all(b < 1.0 for b in self.betas):
            raise ConfigError(f"optimizer.params.betas must each be in [0, 1), got {list(betas)}")
        if self.weight_decay is None:
            self.weight_decay = 0.01 if self.torch_adam and self.decoupled_weight_decay else 0.0

    @property
    def decoupled_weight_decay(self) -> bool:
        """True: AdamW (p -= lr·wd·p); False: L2 (g += wd·p), as DeepSpeed decides."""
        return self.type == "adamw" or self.adam_w_mode


@dataclass(kw_only=True, slots=True)
class FP16Config(Section):
    """``fp16``: fp16 mixed precision with loss scaling (DeepSpeed's ``DeepSpeedFP16Config``)."""

    enabled: bool = False
    """Train in fp16 with fp32 master weights in the optimizer partition."""
    loss_scale: float = 0.0
    """0: dynamic loss scaling; > 0: this static scale."""
    initial_scale_power: int = 16
    """Dynamic scaling starts at 2**initial_scale_power."""
    loss_scale_window: int = 1000
    """Clean steps between scale increases (see dsbench.zero.loss_scaler for the exact count)."""
    hysteresis: int = 2
    """Overflows tolerated before the scale is halved (DeepSpeed's delayed_shift)."""
    consecutive_hysteresis: bool = False
    """Refill the hysteresis budget after every clean step, not only when the scale grows."""
    min_loss_scale: int = 1
    """The dynamic scale never drops below this (an integer in DeepSpeed's schema)."""
    auto_cast: bool = refused(default=False)
    """Cast module inputs to fp16 (DeepSpeed; not implemented by dsbench's engine)."""
    fp16_master_weights_and_grads: bool = refused(default=False)
    """fp16 master weights with CPU Adam (DeepSpeed; not implemented by dsbench's engine)."""

    _PATH: ClassVar[str] = "fp16"
    _MIN: ClassVar[Mapping[str, float]] = {"loss_scale_window": 1, "hysteresis": 1}

    def __post_init__(self) -> None:
        Section.__post_init__(self)
        if self.initial_scale_power > 127:  # 2**power of a huge power never finishes
            raise ConfigError(
                "fp16.initial_scale_power must be at most 127 (2**127 is the largest power of "
                f"two a float32 holds), got {self.initial_scale_power}"
            )

    @property
    def dynamic(self) -> bool:
        return self.loss_scale == 0

    def loss_scaler(self) -> DynamicLossScaler | StaticLossScaler:
        """The scaler DeepSpeed would build for this section (``CreateLossScaler``)."""
        if not self.dynamic:
            return StaticLossScaler(self.loss_scale)
        return DynamicLossScaler(
            initial_scale_power=self.initial_scale_power,
            loss_scale_window=self.loss_scale_window,
            hysteresis=self.hysteresis,
            consecutive_hysteresis=self.consecutive_hysteresis,
            min_loss_scale=self.min_loss_scale,
        )


@dataclass(kw_only=True, slots=True)
class BF16Config(Section):
    """``bf16`` (or the older ``bfloat16``): bf16 mixed precision, no loss scaling."""

    enabled: bool = False
    """Train in bf16 with fp32 master weights in the optimizer partition."""
    immediate_grad_update: bool = ignored(False)
    """DeepSpeed's early gradient update (performance only; dsbench's engine ignores it)."""
    check_grad_overflow: bool = refused(default=False)
    """Skip bf16 steps with inf/NaN gradients (DeepSpeed; not implemented by dsbench's engine)."""
    bf16_master_weights_and_grads: bool = refused(default=False)
    """bf16 master weights (DeepSpeed; not implemented by dsbench's engine)."""
    bf16_optimizer_states: bool = refused(default=False)
    """bf16 optimizer states (DeepSpeed; not implemented by dsbench's engine)."""

    _PATH: ClassVar[str] = "bf16"


@dataclass(kw_only=True, slots=True)
class ZeroConfig(Section):
    """``zero_optimization``: the ZeRO stage and its communication settings.

    Sizes are element counts (DeepSpeed's defaults: buckets 5e8, prefetch 5e7, persistence 1e5).
    """

    stage: int = 0
    """0: data parallel; 1: optimizer state partitioned; 2: + gradients; 3: + parameters."""
    contiguous_gradients: bool = True
    """Copy gradients into one flat buffer as they are produced."""
    overlap_comm: bool | None = None
    """Launch bucket collectives during backward. Unset: True for stage 3 only (DeepSpeed)."""
    reduce_scatter: bool = True
    """Stage 2: reduce-scatter gradients (False: all-reduce, as in DeepSpeed)."""
    reduce_bucket_size: int = 500_000_000
    """Elements per gradient reduction bucket."""
    allgather_bucket_size: int = 500_000_000
    """Elements per parameter all-gather bucket after the step (stages 1-2)."""
    allgather_partitions: bool = True
    """All-gather updated partitions (False: a broadcast per rank, in DeepSpeed)."""
    stage3_prefetch_bucket_size: int = setting(50_000_000, alias="prefetch_bucket_size")
    """Stage 3: elements of parameters gathered ahead of use (alias prefetch_bucket_size)."""
    stage3_param_persistence_threshold: int = setting(100_000, alias="param_persistence_threshold")
    """Stage 3: parameters with fewer elements stay whole on every rank (alias
    param_persistence_threshold)."""
    stage3_max_reuse_distance: int = setting(1_000_000_000, alias="max_reuse_distance")
    """Stage 3: a module's gathered parameters are kept after its forward when they will be used
    again (in backward) within this many parameter elements of other gathers (alias
    max_reuse_distance)."""
    stage3_max_live_parameters: int = setting(1_000_000_000, alias="max_live_parameters")
    """Stage 3: at most this many gathered parameter elements are kept that way (alias
    max_live_parameters)."""
    offload_optimizer: OffloadOptimizerConfig = field(default_factory=OffloadOptimizerConfig)
    """ZeRO-Offload of the optimizer state and step to host memory (stages 1–3)."""
    offload_param: OffloadParamConfig = field(default_factory=OffloadParamConfig)
    """Stage 3: parameter shards in host memory (:mod:`.offload_config`)."""

    # DeepSpeed's settings that dsbench's engine does not implement, as given (see [Note: a
    # field's DeepSpeed status]): ignored ones tune memory, speed or checkpoint I/O; refused
    # ones (when on) change what is computed or where it lives.
    sub_group_size: Any = ignored()
    round_robin_gradients: Any = ignored()
    zero_hpz_partition_size: Any = refused(not_in(None, 0, 1))
    zero_quantized_weights: Any = refused()
    zero_quantized_nontrainable_weights: Any = refused()
    zero_quantized_gradients: Any = refused()
    zeropp_loco_param: Any = refused(is_set)
    mics_shard_size: Any = refused(not_in(None, -1))
    mics_hierarchical_params_gather: Any = ignored()
    zenflow: Any = refused(is_set)
    legacy_stage1: Any = refused()
    load_from_fp32_weights: Any = ignored()
    elastic_checkpoint: Any = ignored()
    ignore_unused_parameters: Any = ignored()
    use_multi_rank_bucket_allreduce: Any = ignored()
    memory_efficient_linear: Any = ignored()
    pipeline_loading_checkpoint: Any = ignored()
    override_module_apply: Any = ignored()
    log_trace_cache_warnings: Any = ignored()
    enable_sanity_checks: Any = ignored()
    leaf_module: Any = refused(names_a_module)
    """ZeRO-3 leaf modules (mixture-of-experts blocks gathered whole): refused when any is named."""
    stage3_gather_fp16_weights_on_model_save: Any = ignored()
    """The deprecated spelling of gather_16bit_weights_on_model_save."""
    gather_16bit_weights_on_model_save: Any = ignored(
        alias="stage3_gather_16bit_weights_on_model_save"
    )
    model_persistence_threshold: Any = ignored(alias="stage3_model_persistence_threshold")
    module_granularity_threshold: Any = ignored(alias="stage3_module_granularity_threshold")
    use_all_reduce_for_fetch_params: Any = ignored(alias="stage3_use_all_reduce_for_fetch_params")

    _PATH: ClassVar[str] = "zero_optimization"

    def __post_init__(self) -> None:
        if isinstance(self.stage, bool) or self.stage not in (0, 1, 2, 3):
            raise ConfigError(
                f"zero_optimization.stage must be 0, 1, 2 or 3, got {show_json(self.stage)}"
            )
        Section.__post_init__(self)
        if self.overlap_comm is None:
            self.overlap_comm = self.stage == 3
