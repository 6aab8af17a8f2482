"""What dsbench's ZeRO engine (:mod:`dsbench.zero.engine`) takes from a ds_config: the stage,
the optimizer's hyper-parameters, precision, bucketing, stage-3 and offload settings (built by
:func:`dsbench.zero.config.load_config`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True, kw_only=True)
class ZeroSettings:
    """What the engine needs from a ds_config (see :func:`dsbench.zero.config.load_config`)."""

    stage: int = 0
    grad_accum: int = 1
    """Micro-steps per optimizer step; the loss is divided by it in ``backward``."""
    lr: float = 1e-3
    lr_at: Callable[[int], float] | None = None
    """Learning rate for applied optimizer step t (0-based), from one of DeepSpeed's schedulers
    (:mod:`.schedulers`); None: constant ``lr``."""
    betas: tuple[float, float] = (0.9, 0.999)
    betas_at: Callable[[int], tuple[float, float]] | None = None
    """Adam's (β1, β2) for applied step t where the schedule sets them (OneCycle's momentum
    cycle); None: constant ``betas``."""
    eps: float = 1e-8
    weight_decay: float = 0.0
    adamw_mode: bool = True
    """True: AdamW (decoupled decay); False: Adam with L2 decay added to the gradient."""
    gradient_clipping: float = 0.0
    """Clip to this global L2 norm (0: off)."""
    dtype: torch.dtype = torch.float32
    """Compute dtype of the model: float32, bfloat16 or float16 (fp32 master weights always)."""
    loss_scaler: object | None = None
    """fp16: an object with ``scale``, ``update(overflow) -> applied``, ``state_dict``."""
    overlap_comm: bool = False
    contiguous_gradients: bool = True
    reduce_scatter: bool = True
    reduce_bucket_size: int = 500_000_000
    """Elements per gradient bucket (stages 0–2)."""
    prefetch_bucket_size: int = 50_000_000
    """Stage 3: elements of upcoming units gathered ahead of use."""
    param_persistence_threshold: int = 100_000
    """Stage 3: parameters with at most this many elements are never partitioned."""
    max_reuse_distance: int = 1_000_000_000
    """Stage 3: keep a unit gathered after its forward if the elements gathered before its
    backward use it again are at most this many (DeepSpeed's stage3_max_reuse_distance)."""
    max_live_parameters: int = 1_000_000_000
    """Stage 3: but never keep more than this many gathered elements that way."""
    kernels: dict[str, str] = field(default_factory=dict)
    """Registry implementation per op (``adamw``, ``allreduce``...); missing: the default."""
    fused_optimizer: bool | None = None
    """Passed to the ``adamw`` kernel as ``fused`` (torch's fused kernel; others ignore it).
    None: torch decides, except for an offloaded step, which is fused (fastest on CPUs)."""
    offload_optimizer: bool = False
    """ZeRO-Offload: fp32 master weights, gradient shard and Adam moments in host memory, the
    optimizer step on the host (stages 1–3)."""
    offload_param: bool = False
    """Stage 3: parameter shards in host memory, copied to the device to be gathered."""
    pin_memory: bool = False
    """Page-locked host buffers for what is offloaded (GPU devices; ignored on CPU)."""
    grad_norm_every_step: bool = False
    """Compute the global gradient norm at every optimizer step, also when neither clipping nor
    the loss scaler needs it, as DeepSpeed's ZeRO optimizers do (:meth:`ZeroEngine.
    get_global_grad_norm` returns it). Off by default: it costs a pass over the gradient shard
    and an all-reduce. Benchmarks against DeepSpeed turn it on, so both engines do that work."""

    def __post_init__(self):
        if self.stage not in (0, 1, 2, 3):
            raise ValueError(f"stage must be 0, 1, 2 or 3, got {self.stage}")
        if self.grad_accum < 1:
            raise ValueError(f"grad_accum must be >= 1, got {self.grad_accum}")
        if self.offload_optimizer and self.stage == 0:
            raise ValueError("offload_optimizer needs stage 1, 2 or 3")
        if self.offload_param and self.stage != 3:
            raise ValueError("offload_param needs stage 3")
