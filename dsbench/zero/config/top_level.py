"""The whole ds_config: :class:`DSConfig`, one field per top-level setting DeepSpeed 0.18 reads.

Its sections are the dataclasses of :mod:`.sections`, :mod:`.schedulers`
and :mod:`.activation_config`; DeepSpeed's top-level settings that dsbench's engine
does not implement are fields too, each marked ignored or refused ([Note: a field's DeepSpeed
status] in :mod:`.fields`). :func:`dsbench.zero.config.load_config` builds it (and
re-exports it)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from dsbench.zero.config.activation_config import ActivationCheckpointingConfig
from dsbench.zero.config.fields import NOT_A_KEY, ConfigError, Section, ignored, refused, setting
from dsbench.zero.config.keys import autotp_on, is_enabled, is_set, not_in, sets_grad_accum_dtype
from dsbench.zero.config.schedulers import SchedulerConfig
from dsbench.zero.config.sections import (
    BatchConfig,
    BF16Config,
    FP16Config,
    OptimizerConfig,
    ZeroConfig,
)

__all__ = ["DSConfig"]


@dataclass(kw_only=True, slots=True)
class DSConfig(Section):
    """A ds_config as dsbench's engines use it. Build it with
    :func:`dsbench.zero.config.load_config`."""

    batch: BatchConfig = field(metadata=NOT_A_KEY)
    """The resolved batch sizes (``train_batch_size``, ``train_micro_batch_size_per_gpu``,
    ``gradient_accumulation_steps``)."""
    optimizer: OptimizerConfig | None = None
    """Adam/AdamW settings; None when the config has no ``optimizer`` (the caller supplies
    one, as with DeepSpeed) or names one dsbench's engine does not implement."""
    scheduler: SchedulerConfig | None = None
    """One of DeepSpeed's five schedulers (:mod:`.schedulers`); None when there is
    no ``scheduler`` or it names a ``torch.optim.lr_scheduler`` class (DeepSpeed engine only)."""
    gradient_clipping: float = 0.0
    """Clip gradients to this global L2 norm; 0 = off (DeepSpeed's default)."""
    fp16: FP16Config = field(default_factory=FP16Config)
    """fp16 mixed precision and loss scaling."""
    bf16: BF16Config = setting(default_factory=BF16Config, alias="bfloat16")
    """bf16 mixed precision."""
    zero_optimization: ZeroConfig = field(default_factory=ZeroConfig)
    """ZeRO stage and communication settings."""
    activation_checkpointing: ActivationCheckpointingConfig = field(
        default_factory=ActivationCheckpointingConfig
    )
    """Recompute the model's blocks in backward (:mod:`.activation_config`)."""
    steps_per_print: int | None = None
    """Log every this many steps (DeepSpeed's default: None, never)."""
    wall_clock_breakdown: bool = False
    """DeepSpeed's per-phase timers (accepted; dsbench times steps itself)."""
    ignored_keys: tuple[str, ...] = field(default=(), metadata=NOT_A_KEY)
    """DeepSpeed settings (dotted paths) dsbench's engine accepts and ignores."""
    unsupported: tuple[str, ...] = field(default=(), metadata=NOT_A_KEY)
    """DeepSpeed settings (``path=value``) dsbench's engine refuses; DeepSpeed runs them."""
    unknown_keys: tuple[str, ...] = field(default=(), metadata=NOT_A_KEY)
    """Top-level keys DeepSpeed does not know (it ignores them; so do we, with a warning)."""
    notes: tuple[str, ...] = field(default=(), compare=False, metadata=NOT_A_KEY)
    """One line each: what the command line changed in the batch sizes, what "auto" became."""
    raw: dict = field(default_factory=dict, compare=False, repr=False, metadata=NOT_A_KEY)
    """The ds_config dict with batch sizes resolved and "auto" values filled in."""

    # DeepSpeed's top-level settings that dsbench's engine does not implement, as given (see
    # [Note: a field's DeepSpeed status]): ignored ones log, monitor, profile, checkpoint or
    # tune memory and speed, leaving the numbers alone; refused ones (when on) change what is
    # computed or where it lives.
    aio: Any = ignored()
    allgather_size: Any = ignored()  # the old boolean zero_optimization format
    amp: Any = refused(is_enabled)
    autotuning: Any = ignored()
    checkpoint: Any = ignored()
    comet: Any = ignored()
    comms_logger: Any = ignored()
    communication_data_type: Any = refused(is_set)
    compile: Any = refused(is_enabled)
    compression_training: Any = refused(is_set)
    csv_monitor: Any = ignored()
    curriculum_learning: Any = refused(is_enabled)
    data_efficiency: Any = refused(is_enabled)
    data_types: Any = refused(sets_grad_accum_dtype)
    dataloader_drop_last: Any = ignored()
    datastates_ckpt: Any = ignored()
    disable_allgather: Any = ignored()
    dump_state: Any = ignored()
    eigenvalue: Any = refused(is_enabled)
    elasticity: Any = refused(is_enabled)
    flops_profiler: Any = ignored()
    gradient_predivide_factor: Any = refused(not_in(1))
    graph_harvesting: Any = ignored()
    hybrid_engine: Any = refused(is_enabled)
    memory_breakdown: Any = ignored()
    nebula: Any = ignored()
    pipeline: Any = refused(is_set)  # pipeline parallelism (PipelineModule)
    prescale_gradients: Any = refused()
    progressive_layer_drop: Any = refused(is_enabled)
    quantize_training: Any = refused(is_enabled)
    seq_parallel_communication_data_type: Any = ignored()
    sequence_parallel_size: Any = refused(not_in(None, 1))
    sparse_attention: Any = refused(is_set)
    sparse_gradients: Any = refused()
    tensor_parallel: Any = refused(autotp_on)
    tensorboard: Any = ignored()
    timers: Any = ignored()
    use_data_before_expert_parallelism: Any = refused()  # mixture of experts
    vocabulary_size: Any = ignored()
    wandb: Any = ignored()
    weight_quantization: Any = refused(is_set)
    zero_allow_untested_optimizer: Any = ignored()
    zero_force_ds_cpu_optimizer: Any = ignored()

    _MIN: ClassVar[Mapping[str, float]] = {"steps_per_print": 1}

    def __post_init__(self) -> None:
        Section.__post_init__(self)
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
