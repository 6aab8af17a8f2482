"""DeepSpeed's ds_config JSON, read as DeepSpeed 0.18 reads it, for dsbench's ZeRO engine.

:func:`load_config` turns a ds_config (file, JSON text or dict) into a :class:`DSConfig` of
kw-only dataclasses, one per section, each validated in ``__post_init__``. It follows DeepSpeed
(``deepspeed/runtime/config.py``, ``zero/config.py``, ``precision_config.py``, 0.18.4) where
DeepSpeed is well defined, and is stricter where DeepSpeed lets mistakes through:

* batch sizes: ``train_batch_size = train_micro_batch_size_per_gpu × gradient_accumulation_steps
  × world_size``; a missing one is derived as DeepSpeed's ``_set_batch_related_parameters``
  does (only ``train_batch_size`` or only the micro-batch: accumulation 1). The command line's
  batch sizes override the config's, which are re-derived around them
  (:mod:`dsbench.zero.batch`). Where DeepSpeed floor-divides and then fails its assertion, we
  say which division does not come out even, and which command-line flag would fit.
* fp16 and bf16 both enabled is an error (DeepSpeed only ``assert``-s it, gone under ``-O``).
* inside a section, an unknown key is an error with the closest valid name (DeepSpeed's pydantic
  models forbid extras too); unknown top-level keys get one warning (DeepSpeed ignores them).
* types: DeepSpeed's pydantic models coerce ``true`` to 1 and ``"2"`` to 2; we refuse both.
  Whole floats such as ``5e8`` are accepted where an integer is expected, as in DeepSpeed.
* settings DeepSpeed accepts but dsbench's engine does not implement are recorded: harmless ones
  in :attr:`DSConfig.ignored_keys` (one warning), ones that change what is computed or where it
  lives in :attr:`DSConfig.unsupported` (dsbench's engine refuses them; ``for_engine="deepspeed"``
  accepts them, and :meth:`DSConfig.to_deepspeed_dict` hands them to ``deepspeed.initialize``).
* Hugging Face Trainer configs write ``"auto"`` for values the Trainer fills in. We fill each as
  the Trainer would from its defaults (:mod:`dsbench.zero.hf_auto`), the command line first;
  one error lists those it has no default for.
* schedulers: DeepSpeed's five (:mod:`dsbench.zero.schedulers`).

Every error is a :class:`ConfigError` (a :class:`~dsbench.errors.UsageError`): one line, naming
the field, so the CLI prints it and exits 2.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from dsbench.errors import one_line
from dsbench.zero import hf_auto, offload_config
from dsbench.zero.activation_config import (
    ActivationCheckpointingConfig,
    read_activation_checkpointing,
)
from dsbench.zero.batch import resolve as resolve_batch
from dsbench.zero.fields import (
    ConfigError,
    _as_float,
    _as_int,
    _closest,
    _kind,
    _Section,
    _show,
)
from dsbench.zero.loss_scaler import DynamicLossScaler, StaticLossScaler
from dsbench.zero.offload_config import OffloadOptimizerConfig, OffloadParamConfig
from dsbench.zero.schedulers import (
    SCHEDULERS,
    WARMUP_TYPES,
    SchedulerConfig,
    WarmupDecayLRConfig,
    WarmupLRConfig,
)

__all__ = [
    "BF16Config",
    "BatchConfig",
    "ConfigError",
    "DSConfig",
    "FP16Config",
    "OptimizerConfig",
    "WarmupLRConfig",
    "ZeroConfig",
    "load_config",
]

AUTO = hf_auto.AUTO


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


@dataclass(kw_only=True, slots=True)
class BatchConfig(_Section):
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
        _Section.__post_init__(self)
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
class OptimizerConfig(_Section):
    """``optimizer`` of type Adam or AdamW, with its ``params``.

    DeepSpeed (``engine._configure_basic_optimizer``): both names build the same optimizer,
    ``FusedAdam`` (``DeepSpeedCPUAdam`` when offloading; ``torch.optim.Adam``/``AdamW`` with
    ``"torch_adam": true``) and weight decay is **decoupled** (AdamW) for type ``AdamW``, and
    for type ``Adam`` too unless ``"adam_w_mode": false`` is given (``ADAM_W_MODE_DEFAULT =
    True``). Only ``Adam`` with ``adam_w_mode: false`` is L2 regularisation (decay added to the
    gradient, ``torch.optim.Adam`` semantics). :attr:`decoupled_weight_decay` says which.
    """

    type: str = "adamw"
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
    bias_correction: bool = True
    """Adam's bias correction (a FusedAdam argument; dsbench's engine implements only True)."""
    amsgrad: bool = False
    """The AMSGrad variant (torch only; FusedAdam refuses it; dsbench's engine: False only)."""

    _PATH: ClassVar[str] = "optimizer.params"

    def __post_init__(self) -> None:
        _Section.__post_init__(self)
        if not isinstance(self.type, str) or self.type.lower() not in ("adam", "adamw"):
            raise ConfigError(f"optimizer.type must be Adam or AdamW here, got {_show(self.type)}")
        self.type = self.type.lower()
        betas = self.betas
        if not isinstance(betas, list | tuple) or len(betas) != 2:
            raise ConfigError(f"optimizer.params.betas must be two numbers, got {_show(betas)}")
        self.betas = tuple(_as_float("optimizer.params.betas", b) for b in betas)  # type: ignore[assignment]
        if not all(b < 1.0 for b in self.betas):
            raise ConfigError(f"optimizer.params.betas must each be in [0, 1), got {list(betas)}")
        if self.weight_decay is None:
            self.weight_decay = 0.01 if self.torch_adam and self.decoupled_weight_decay else 0.0

    @property
    def decoupled_weight_decay(self) -> bool:
        """True: AdamW (p -= lr·wd·p); False: L2 (g += wd·p), as DeepSpeed decides."""
        return self.type == "adamw" or self.adam_w_mode


@dataclass(kw_only=True, slots=True)
class FP16Config(_Section):
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
    auto_cast: bool = False
    """Cast module inputs to fp16 (DeepSpeed; not implemented by dsbench's engine)."""
    fp16_master_weights_and_grads: bool = False
    """fp16 master weights with CPU Adam (DeepSpeed; not implemented by dsbench's engine)."""

    _PATH: ClassVar[str] = "fp16"
    _MIN: ClassVar[Mapping[str, float]] = {"loss_scale_window": 1, "hysteresis": 1}

    def __post_init__(self) -> None:
        _Section.__post_init__(self)
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
class BF16Config(_Section):
    """``bf16`` (or the older ``bfloat16``): bf16 mixed precision, no loss scaling."""

    enabled: bool = False
    """Train in bf16 with fp32 master weights in the optimizer partition."""
    immediate_grad_update: bool = False
    """DeepSpeed's early gradient update (performance only; dsbench's engine ignores it)."""
    check_grad_overflow: bool = False
    """Skip bf16 steps with inf/NaN gradients (DeepSpeed; not implemented by dsbench's engine)."""
    bf16_master_weights_and_grads: bool = False
    """bf16 master weights (DeepSpeed; not implemented by dsbench's engine)."""
    bf16_optimizer_states: bool = False
    """bf16 optimizer states (DeepSpeed; not implemented by dsbench's engine)."""

    _PATH: ClassVar[str] = "bf16"


@dataclass(kw_only=True, slots=True)
class ZeroConfig(_Section):
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
    stage3_prefetch_bucket_size: int = 50_000_000
    """Stage 3: elements of parameters gathered ahead of use (alias prefetch_bucket_size)."""
    stage3_param_persistence_threshold: int = 100_000
    """Stage 3: parameters with fewer elements stay whole on every rank (alias
    param_persistence_threshold)."""
    stage3_max_reuse_distance: int = 1_000_000_000
    """Stage 3: a module's gathered parameters are kept after its forward when they will be used
    again (in backward) within this many parameter elements of other gathers (alias
    max_reuse_distance)."""
    stage3_max_live_parameters: int = 1_000_000_000
    """Stage 3: at most this many gathered parameter elements are kept that way (alias
    max_live_parameters)."""
    offload_optimizer: OffloadOptimizerConfig = field(default_factory=OffloadOptimizerConfig)
    """ZeRO-Offload of the optimizer state and step to host memory (stages 1–3)."""
    offload_param: OffloadParamConfig = field(default_factory=OffloadParamConfig)
    """Stage 3: parameter shards in host memory (:mod:`dsbench.zero.offload_config`)."""

    _PATH: ClassVar[str] = "zero_optimization"

    def __post_init__(self) -> None:
        if isinstance(self.stage, bool) or self.stage not in (0, 1, 2, 3):
            raise ConfigError(
                f"zero_optimization.stage must be 0, 1, 2 or 3, got {_show(self.stage)}"
            )
        _Section.__post_init__(self)
        if self.overlap_comm is None:
            self.overlap_comm = self.stage == 3


# --------------------------------------------------------------------------------------------
# Keys: what dsbench's engine reads, and what DeepSpeed accepts that it does not
# --------------------------------------------------------------------------------------------


def _never(value: Any) -> bool:
    return False


def _truthy(value: Any) -> bool:
    return bool(value)


def _is_set(value: Any) -> bool:
    return value is not None and value != {} and value is not False


def _enabled(value: Any) -> bool:
    if isinstance(value, dict):
        return bool(value.get("enabled", False))
    return _is_set(value)


# Active (True) means dsbench's engine must refuse; otherwise the key is ignored (harmless:
# logging, monitoring, checkpoint I/O, or memory/speed tuning that leaves the numbers alone).
_TOP_NOT_IMPLEMENTED: dict[str, Callable[[Any], bool]] = {
    "aio": _never,
    "allgather_size": _never,  # the old boolean zero_optimization format
    "amp": _enabled,
    "autotuning": _never,
    "checkpoint": _never,
    "comet": _never,
    "comms_logger": _never,
    "communication_data_type": _is_set,
    "compile": _enabled,
    "compression_training": _is_set,
    "csv_monitor": _never,
    "curriculum_learning": _enabled,
    "data_efficiency": _enabled,
    "data_types": lambda v: isinstance(v, dict) and v.get("grad_accum_dtype") is not None,
    "dataloader_drop_last": _never,
    "datastates_ckpt": _never,
    "disable_allgather": _never,
    "dump_state": _never,
    "eigenvalue": _enabled,
    "elasticity": _enabled,
    "flops_profiler": _never,
    "gradient_predivide_factor": lambda v: v != 1,
    "graph_harvesting": _never,
    "hybrid_engine": _enabled,
    "memory_breakdown": _never,
    "nebula": _never,
    "pipeline": _is_set,  # pipeline parallelism (PipelineModule)
    "prescale_gradients": _truthy,
    "progressive_layer_drop": _enabled,
    "quantize_training": _enabled,
    "seq_parallel_communication_data_type": _never,
    "sequence_parallel_size": lambda v: v not in (None, 1),
    "sparse_attention": _is_set,
    "sparse_gradients": _truthy,
    "tensor_parallel": lambda v: isinstance(v, dict) and v.get("autotp_size") not in (None, 0, 1),
    "tensorboard": _never,
    "timers": _never,
    "use_data_before_expert_parallelism": _truthy,  # mixture of experts
    "vocabulary_size": _never,
    "wandb": _never,
    "weight_quantization": _is_set,
    "zero_allow_untested_optimizer": _never,
    "zero_force_ds_cpu_optimizer": _never,
}

_TOP_IMPLEMENTED = (
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "optimizer",
    "scheduler",
    "gradient_clipping",
    "fp16",
    "bf16",
    "bfloat16",
    "zero_optimization",
    "steps_per_print",
    "wall_clock_breakdown",
    "activation_checkpointing",
)

_ZERO_ALIASES = {
    "prefetch_bucket_size": "stage3_prefetch_bucket_size",
    "param_persistence_threshold": "stage3_param_persistence_threshold",
    "max_reuse_distance": "stage3_max_reuse_distance",
    "max_live_parameters": "stage3_max_live_parameters",
}

_ZERO_NOT_IMPLEMENTED: dict[str, Callable[[Any], bool]] = {
    "sub_group_size": _never,
    "round_robin_gradients": _never,
    "zero_hpz_partition_size": lambda v: v not in (None, 0, 1),
    "zero_quantized_weights": _truthy,
    "zero_quantized_nontrainable_weights": _truthy,
    "zero_quantized_gradients": _truthy,
    "zeropp_loco_param": _is_set,
    "mics_shard_size": lambda v: v not in (None, -1),
    "mics_hierarchical_params_gather": _never,
    "zenflow": _is_set,
    "legacy_stage1": _truthy,
    "load_from_fp32_weights": _never,
    "elastic_checkpoint": _never,
    "ignore_unused_parameters": _never,
    "use_multi_rank_bucket_allreduce": _never,
    "memory_efficient_linear": _never,
    "pipeline_loading_checkpoint": _never,
    "override_module_apply": _never,
    "log_trace_cache_warnings": _never,
    "enable_sanity_checks": _never,
    # ZeRO-3 leaf modules (mixture-of-experts blocks gathered whole): refused when any is named
    "leaf_module": lambda v: isinstance(v, dict) and any(v.get(k) for k in v),
    "stage3_gather_fp16_weights_on_model_save": _never,  # deprecated spelling
}
for _name in (
    "gather_16bit_weights_on_model_save",
    "model_persistence_threshold",
    "module_granularity_threshold",
    "use_all_reduce_for_fetch_params",
):  # DeepSpeed accepts both the field name and its stage3_ alias
    _ZERO_NOT_IMPLEMENTED[_name] = _ZERO_NOT_IMPLEMENTED[f"stage3_{_name}"] = _never

_FP16_NOT_IMPLEMENTED = {"auto_cast": _truthy, "fp16_master_weights_and_grads": _truthy}
_BF16_NOT_IMPLEMENTED = {
    "immediate_grad_update": _never,
    "check_grad_overflow": _truthy,
    "bf16_master_weights_and_grads": _truthy,
    "bf16_optimizer_states": _truthy,
}

# Adam/AdamW params: those DeepSpeed's FusedAdam takes, and those only torch's Adam/AdamW take.
_ADAM_PARAMS = ("lr", "betas", "eps", "weight_decay", "torch_adam", "adam_w_mode", "amsgrad")
_FUSED_ONLY_PARAMS = {"bias_correction": _never, "set_grad_none": _never}
_TORCH_ONLY_PARAMS = {
    "maximize": _truthy,
    "foreach": _never,
    "capturable": _never,
    "differentiable": _never,
    "fused": _never,
}
# DeepSpeed's own optimizers (config.DEEPSPEED_OPTIMIZERS) besides adam/adamw; any other name
# is looked up in torch.optim.
_DS_OTHER_OPTIMIZERS = (
    "adagrad",
    "lamb",
    "onebitadam",
    "onebitlamb",
    "zerooneadam",
    "muadam",
    "muadamw",
    "musgd",
    "lion",
    "muon",
)
_BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


def _describe(path: str, value: Any) -> str:
    """``path=value`` for a refused setting; for a section, the switch that turned it on."""
    if isinstance(value, dict):
        for switch in ("device", "enabled", "autotp_size"):
            if switch in value:
                return f"{path}.{switch}={_show(value[switch])}"
        return path
    return f"{path}={_show(value)}"


class _Reader:
    """One pass over the raw dict: unknown keys, "auto" placeholders, keys dsbench ignores."""

    def __init__(self):
        self.autos: list[str] = []  # "auto" left for the batch resolution (batch sizes only)
        self.ignored: list[str] = []
        self.warnings: list[str] = []  # one line each, passed to warn()
        self.unsupported: list[str] = []

    def section(self, raw: Mapping, key: str) -> dict:
        value = raw.get(key, {})
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be an object {{...}}, got {_show(value)}")
        return value

    def keys(
        self,
        section: Mapping,
        path: str,
        implemented: tuple[str, ...],
        not_implemented: Mapping[str, Callable[[Any], bool]],
        *,
        active: bool = True,
    ) -> None:
        """Unknown keys are errors; keys dsbench does not implement are sorted into
        ``ignored`` and ``unsupported`` (only when the section is ``active``, e.g. fp16 on)."""
        valid = [*implemented, *not_implemented]
        for key, value in section.items():
            if key in implemented:
                continue
            if key not in not_implemented:
                raise ConfigError(f"unknown key {path}.{key}{_closest(key, valid)}")
            if not_implemented[key](value) and active:
                self.unsupported.append(_describe(f"{path}.{key}", value))
            else:
                self.ignored.append(f"{path}.{key}")

    def take(self, section: Mapping, path: str, key: str, out: dict, name: str | None = None):
        """Copy ``section[key]`` into ``out[name]``; absent keys and "auto" stay absent ("auto"
        is noted in ``autos``: only the batch sizes' are still there, see load_config)."""
        if key not in section:
            return
        value = section[key]
        if isinstance(value, str) and value == AUTO:
            self.autos.append(f"{path}.{key}" if path else key)
            return
        out[name or key] = value


# --------------------------------------------------------------------------------------------
# The whole config
# --------------------------------------------------------------------------------------------


@dataclass(kw_only=True, slots=True)
class DSConfig(_Section):
    """A ds_config as dsbench's engines use it. Build it with :func:`load_config`."""

    batch: BatchConfig
    """The resolved batch sizes."""
    optimizer: OptimizerConfig | None = None
    """Adam/AdamW settings; None when the config has no ``optimizer`` (the caller supplies
    one, as with DeepSpeed) or names one dsbench's engine does not implement."""
    scheduler: SchedulerConfig | None = None
    """One of DeepSpeed's five schedulers (:mod:`dsbench.zero.schedulers`); None when there is
    no ``scheduler`` or it names a ``torch.optim.lr_scheduler`` class (DeepSpeed engine only)."""
    gradient_clipping: float = 0.0
    """Clip gradients to this global L2 norm; 0 = off (DeepSpeed's default)."""
    fp16: FP16Config = field(default_factory=FP16Config)
    """fp16 mixed precision and loss scaling."""
    bf16: BF16Config = field(default_factory=BF16Config)
    """bf16 mixed precision."""
    zero_optimization: ZeroConfig = field(default_factory=ZeroConfig)
    """ZeRO stage and communication settings."""
    activation_checkpointing: ActivationCheckpointingConfig = field(
        default_factory=ActivationCheckpointingConfig
    )
    """Recompute the model's blocks in backward (:mod:`dsbench.zero.activation_config`)."""
    steps_per_print: int | None = None
    """Log every this many steps (DeepSpeed's default: None, never)."""
    wall_clock_breakdown: bool = False
    """DeepSpeed's per-phase timers (accepted; dsbench times steps itself)."""
    ignored_keys: tuple[str, ...] = ()
    """DeepSpeed settings (dotted paths) dsbench's engine accepts and ignores."""
    unsupported: tuple[str, ...] = ()
    """DeepSpeed settings (``path=value``) dsbench's engine refuses; DeepSpeed runs them."""
    unknown_keys: tuple[str, ...] = ()
    """Top-level keys DeepSpeed does not know (it ignores them; so do we, with a warning)."""
    notes: tuple[str, ...] = field(default=(), compare=False)
    """One line each: what the command line changed in the batch sizes, what "auto" became."""
    raw: dict = field(default_factory=dict, compare=False, repr=False)
    """The ds_config dict with batch sizes resolved and "auto" values filled in."""

    _MIN: ClassVar[Mapping[str, float]] = {"steps_per_print": 1}

    def __post_init__(self) -> None:
        _Section.__post_init__(self)
        if self.fp16.enabled and self.bf16.enabled:
            # DeepSpeed: `assert not (fp16 and bf16)`, which `python -O` removes.
            raise ConfigError(
                "fp16.enabled and bf16.enabled are both true; enable at most one precision"
            )

    @property
    def precision(self) -> Literal["fp16", "bf16", "fp32"]:
        """The training precision the config selects."""
        return "fp16" if self.fp16.enabled else "bf16" if self.bf16.enabled else "fp32"

    def to_deepspeed_dict(self) -> dict:
        """The dict for ``deepspeed.initialize(config=...)``: the user's config, every key kept,
        with the three batch sizes resolved and "auto" placeholders filled in."""
        out = copy.deepcopy(self.raw)
        out["train_batch_size"] = self.batch.train_batch_size
        out["train_micro_batch_size_per_gpu"] = self.batch.train_micro_batch_size_per_gpu
        out["gradient_accumulation_steps"] = self.batch.gradient_accumulation_steps
        return out


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _read_source(source: str | Path | Mapping) -> dict:
    """A dict from a dict, a path to a JSON file, or JSON text (duplicate keys are errors, as
    in DeepSpeed's loader)."""
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source))
    text = str(source)
    if isinstance(source, Path) or not text.lstrip().startswith(("{", "[")):
        path = Path(text)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        where = f"{path}: "
    else:
        where = ""
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise ConfigError(f"{where}duplicate key '{exc.args[0]}'") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{where}not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except (ValueError, RecursionError) as exc:  # json's limits: 4300 digits, nesting depth
        what = "nested too deeply" if isinstance(exc, RecursionError) else "a number too long"
        raise ConfigError(f"{where}not valid JSON: {what}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}the top level must be an object {{...}}, got {_kind(data)}")
    return data


def load_config(
    source: str | Path | Mapping,
    *,
    world_size: int,
    micro_batch: int | None = None,
    grad_accum: int | None = None,
    train_batch: int | None = None,
    warn: Callable[[str], None] | None = None,
    for_engine: Literal["dsbench", "deepspeed"] = "dsbench",
    auto_values: Mapping[str, Any] | None = None,
    steps: int | None = None,
    hidden_size: int | None = None,
) -> DSConfig:
    """Read a ds_config (a dict, a JSON file path, or JSON text) as DeepSpeed does.

    ``world_size`` is the data-parallel size. ``micro_batch``, ``grad_accum`` and
    ``train_batch`` are the command line's batch sizes: they override the config's, which are
    re-derived around them (:mod:`dsbench.zero.batch`). Every "auto" placeholder is filled:
    from ``auto_values`` (dotted path → value, e.g. ``"optimizer.params.lr"``) first, else as
    the Hugging Face Trainer fills it from its defaults (:mod:`dsbench.zero.hf_auto`; ``steps``
    is the run's step count and ``hidden_size`` the model's, for the "auto"s that need them).
    What the command line changed and what "auto" became are one line each in
    :attr:`DSConfig.notes`. ``warn`` receives the one-line warnings: a warmup_type DeepSpeed
    replaces by 'log', unknown top-level keys, and settings dsbench's engine ignores.
    ``for_engine="dsbench"`` refuses settings dsbench's engine does not implement (pointing to
    ``--engine deepspeed``); ``"deepspeed"`` only records them.
    """
    if warn is None:

        def warn(msg: str) -> None:
            print(f"dsbench: warning: {msg}", file=sys.stderr)

    if for_engine not in ("dsbench", "deepspeed"):
        raise ValueError(f"for_engine must be 'dsbench' or 'deepspeed', got {for_engine!r}")
    world_size = _as_int("world size", world_size, 1)
    args = {
        "train_batch_size": train_batch,
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": grad_accum,
    }
    for key, value in args.items():
        if value is not None:
            args[key] = _as_int(f"the requested {key}", value, 1)
    raw = _read_source(source)
    autos_in_order = list(hf_auto.auto_paths(raw))
    filled, left = hf_auto.fill(raw, given=auto_values or {}, steps=steps, hidden_size=hidden_size)
    if left:
        raise ConfigError(
            '"auto" (a Hugging Face Trainer placeholder) has no value dsbench can fill for '
            + ", ".join(left)
            + "; write values into the config"
        )
    reader = _Reader()

    # Top level: implemented, known to DeepSpeed but not implemented here, or unknown.
    unknown = [k for k in raw if k not in _TOP_IMPLEMENTED and k not in _TOP_NOT_IMPLEMENTED]
    for key in raw:
        if key in _TOP_NOT_IMPLEMENTED:
            if _TOP_NOT_IMPLEMENTED[key](raw[key]):
                reader.unsupported.append(_describe(key, raw[key]))
            else:
                reader.ignored.append(key)

    top: dict[str, Any] = {}
    batch_in_config: dict[str, Any] = {}
    for key in _BATCH_KEYS:
        reader.take(raw, "", key, batch_in_config)
    batch_autos, reader.autos = reader.autos, []
    for key in ("gradient_clipping", "steps_per_print", "wall_clock_breakdown"):
        reader.take(raw, "", key, top)

    fp16 = _read_precision(reader, raw, "fp16", "fp16", FP16Config, _FP16_NOT_IMPLEMENTED)
    if "bf16" in raw and "bfloat16" in raw:
        raise ConfigError("give bf16 or its old name bfloat16, not both")
    bf16_key = "bfloat16" if "bfloat16" in raw else "bf16"
    bf16 = _read_precision(reader, raw, bf16_key, bf16_key, BF16Config, _BF16_NOT_IMPLEMENTED)
    zero = _read_zero(reader, raw)
    checkpointing, ac_ignored, ac_warnings = read_activation_checkpointing(
        raw.get("activation_checkpointing")
    )
    reader.ignored += ac_ignored
    reader.warnings += ac_warnings
    optimizer = _read_optimizer(reader, raw)
    scheduler = _read_scheduler(reader, raw, optimizer)

    # Batch sizes (checked for type here, so that "auto" and bad types are told apart).
    for key, value in batch_in_config.items():
        batch_in_config[key] = _as_int(key, value, 1)
    sizes = resolve_batch(batch_in_config, batch_autos, args, world_size)
    if sizes is None:
        raise ConfigError(
            "no batch size: set train_batch_size or train_micro_batch_size_per_gpu, "
            "or give the micro-batch size on the command line"
        )
    batch = BatchConfig(
        train_batch_size=sizes.train,
        train_micro_batch_size_per_gpu=sizes.micro,
        gradient_accumulation_steps=sizes.accum,
        world_size=world_size,
    )
    raw.update(
        train_batch_size=sizes.train,
        train_micro_batch_size_per_gpu=sizes.micro,
        gradient_accumulation_steps=sizes.accum,
    )
    shown = {path: _show(value) for path, value in filled.items()} | sizes.filled
    notes = [sizes.note] if sizes.note else []
    if shown:
        notes.append(
            '"auto" filled as the Hugging Face Trainer would (command line first): '
            + ", ".join(f"{path}={shown[path]}" for path in autos_in_order if path in shown)
        )
    config = DSConfig(
        batch=batch,
        optimizer=optimizer,
        scheduler=scheduler,
        fp16=fp16,
        bf16=bf16,
        zero_optimization=zero,
        activation_checkpointing=checkpointing,
        ignored_keys=tuple(reader.ignored),
        unsupported=tuple(reader.unsupported),
        unknown_keys=tuple(unknown),
        notes=tuple(notes),
        raw=raw,
        **top,
    )

    for message in reader.warnings:
        warn(message)
    if unknown:
        valid = [*_TOP_IMPLEMENTED, *_TOP_NOT_IMPLEMENTED]
        listed = ", ".join(f"'{one_line(k)}'{_closest(k, valid)}" for k in unknown)
        warn(f"ds_config: ignoring unknown top-level keys {listed} (DeepSpeed ignores them too)")
    if for_engine == "dsbench":
        if config.unsupported:
            raise ConfigError(
                "dsbench's engine does not implement "
                + ", ".join(config.unsupported)
                + "; run this config with --engine deepspeed"
            )
        if config.ignored_keys:
            warn(
                "ds_config: dsbench's engine ignores these DeepSpeed settings: "
                + ", ".join(config.ignored_keys)
            )
    return config


def _read_precision(reader, raw, key, path, cls, not_implemented):
    section = reader.section(raw, key)
    names = tuple(f.name for f in dataclasses.fields(cls) if f.name not in not_implemented)
    kwargs: dict[str, Any] = {}
    for name in (*names, *not_implemented):
        reader.take(section, path, name, kwargs)
    enabled = kwargs.get("enabled", False) is True
    reader.keys(section, path, names, not_implemented, active=enabled)
    return cls(**kwargs)


def _read_zero(reader: _Reader, raw: dict) -> ZeroConfig:
    value = raw.get("zero_optimization", {})
    if isinstance(value, bool):  # DeepSpeed's deprecated format: true = stage 1
        return ZeroConfig(stage=int(value), allgather_bucket_size=raw.get("allgather_size", 5e8))
    section = reader.section(raw, "zero_optimization")
    names = tuple(f.name for f in dataclasses.fields(ZeroConfig))
    for alias, name in _ZERO_ALIASES.items():
        if alias in section and name in section:
            raise ConfigError(f"give zero_optimization.{name} or its alias {alias}, not both")
    reader.keys(
        section,
        "zero_optimization",
        (*names, *_ZERO_ALIASES, *offload_config.DEPRECATED),
        _ZERO_NOT_IMPLEMENTED,
    )
    kwargs: dict[str, Any] = {}
    for name in names:
        if name not in ("offload_optimizer", "offload_param"):
            reader.take(section, "zero_optimization", name, kwargs)
    for alias, name in _ZERO_ALIASES.items():
        reader.take(section, "zero_optimization", alias, kwargs, name)
    zero = ZeroConfig(**kwargs)
    offload = offload_config.read_offload(section, zero.stage)
    reader.unsupported += offload.unsupported
    reader.ignored += offload.ignored
    zero.offload_optimizer, zero.offload_param = offload.optimizer, offload.param
    return zero


def _read_optimizer(reader: _Reader, raw: dict) -> OptimizerConfig | None:
    if raw.get("optimizer") is None:
        return None
    section = reader.section(raw, "optimizer")
    reader.keys(section, "optimizer", ("type", "params"), {"legacy_fusion": _never})
    name = section.get("type")
    if not isinstance(name, str):
        raise ConfigError(f"optimizer.type must be a name such as AdamW, got {_show(name)}")
    params = section.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"optimizer.params must be an object {{...}}, got {_show(params)}")
    if name.lower() not in ("adam", "adamw"):
        import torch.optim

        if name.lower() in _DS_OTHER_OPTIMIZERS or hasattr(torch.optim, name):
            reader.unsupported.append(f"optimizer.type={_show(name)}")
            return None
        valid = ["Adam", "AdamW", *_DS_OTHER_OPTIMIZERS]
        raise ConfigError(
            f"unknown optimizer.type {_show(name)}{_closest(name, valid)}; DeepSpeed knows "
            "Adam, AdamW, " + ", ".join(_DS_OTHER_OPTIMIZERS) + " and torch.optim classes"
        )
    if "max_grad_norm" in params:  # DeepSpeed raises ValueError for it as well
        raise ConfigError(
            "optimizer.params.max_grad_norm is not supported (DeepSpeed refuses it too); "
            "use the top-level gradient_clipping instead"
        )
    torch_adam = params.get("torch_adam", False) is True
    # FusedAdam and torch.optim.Adam(W) take different keyword arguments; DeepSpeed passes the
    # params straight to whichever it builds, so a key the other one has is a TypeError there.
    wrong, right = (
        (_FUSED_ONLY_PARAMS, "torch.optim.Adam/AdamW")
        if torch_adam
        else (_TORCH_ONLY_PARAMS, "DeepSpeed's FusedAdam (torch_adam is false)")
    )
    for key in params:
        if key in wrong:
            raise ConfigError(f"optimizer.params.{key} is not an argument of {right}")
    other = _TORCH_ONLY_PARAMS if torch_adam else _FUSED_ONLY_PARAMS
    reader.keys(params, "optimizer.params", _ADAM_PARAMS, other)
    kwargs: dict[str, Any] = {"type": name}
    for key in (*_ADAM_PARAMS, "bias_correction"):
        reader.take(params, "optimizer.params", key, kwargs)
    config = OptimizerConfig(**kwargs)
    if not config.bias_correction:
        reader.unsupported.append("optimizer.params.bias_correction=false")
    if config.amsgrad:
        reader.unsupported.append("optimizer.params.amsgrad=true")
    if "bias_correction" in kwargs:  # implemented (True) or refused above: not "ignored"
        reader.ignored = [k for k in reader.ignored if k != "optimizer.params.bias_correction"]
    return config


def _read_scheduler(
    reader: _Reader, raw: dict, optimizer: OptimizerConfig | None
) -> SchedulerConfig | None:
    if raw.get("scheduler") is None:
        return None
    section = reader.section(raw, "scheduler")
    reader.keys(section, "scheduler", ("type", "params"), {})
    name = section.get("type")
    if not isinstance(name, str):
        raise ConfigError(f"scheduler.type must be a name such as WarmupLR, got {_show(name)}")
    params = section.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"scheduler.params must be an object {{...}}, got {_show(params)}")
    cls = SCHEDULERS.get(name)
    if cls is None:
        import torch.optim.lr_scheduler

        if hasattr(torch.optim.lr_scheduler, name):
            reader.unsupported.append(f"scheduler.type={_show(name)}")
            return None
        raise ConfigError(
            f"unknown scheduler.type {_show(name)}{_closest(name, list(SCHEDULERS))}; "
            "DeepSpeed knows " + ", ".join(SCHEDULERS) + " and torch.optim.lr_scheduler "
            "classes (names are case-sensitive)"
        )
    names = tuple(f.name for f in dataclasses.fields(cls))
    reader.keys(params, "scheduler.params", names, {})
    kwargs: dict[str, Any] = {}
    for key in names:
        reader.take(params, "scheduler.params", key, kwargs)
    if cls is WarmupLRConfig and kwargs.get("warmup_max_lr") is None and optimizer is not None:
        kwargs["warmup_max_lr"] = optimizer.lr  # DeepSpeed: the optimizer's param-group lr
    warmup_type = kwargs.get("warmup_type", "log")
    if cls in (WarmupLRConfig, WarmupDecayLRConfig) and warmup_type not in WARMUP_TYPES:
        # DeepSpeed's WarmupLR warns and warms up logarithmically (its WarmupCosineLR fails).
        reader.warnings.append(
            f"ds_config: scheduler.params.warmup_type {_show(warmup_type)} is not 'log' or "
            "'linear'; warming up with 'log', as DeepSpeed does"
        )
        kwargs["warmup_type"] = "log"
    return cls(**kwargs)
