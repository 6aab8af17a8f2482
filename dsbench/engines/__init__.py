"""Training engines behind one API: dsbench's ZeRO engine and DeepSpeed's, built from the same
ds_config, model and data, so a workload runs unchanged on either::

    engine = build_engine("dsbench" | "deepspeed", model, cfg, device=...)
    loss = preset.loss(engine, batch); engine.backward(loss); engine.step()
    engine.destroy()

Call the engine, not ``engine.module``: DeepSpeed's forward registers the backward hook that
divides gradients by ``gradient_accumulation_steps`` (through ``engine.module`` its gradients and
global norm come out that many times larger; dsbench's engine divides in ``backward``).
"""

from __future__ import annotations

import functools

import torch

from dsbench.errors import UsageError, choices_message
from dsbench.models.checkpointing import checkpoint_blocks
from dsbench.zero.config import DSConfig
from dsbench.zero.engine import ZeroEngine, ZeroSettings

ENGINES = ("dsbench", "deepspeed")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def zero_settings(
    cfg: DSConfig,
    *,
    kernels: dict[str, str] | None = None,
    fused_optimizer: bool | None = None,
    grad_norm_every_step: bool = False,
) -> ZeroSettings:
    """The engine settings a ds_config asks for (the keywords are not ds_config keys; see
    :class:`ZeroSettings`)."""
    opt, z = cfg.optimizer, cfg.zero_optimization
    if opt is None:
        raise UsageError("ds_config has no Adam/AdamW 'optimizer': dsbench's engine needs one")
    sched, betas = cfg.scheduler, tuple(opt.betas)
    return ZeroSettings(
        stage=z.stage,
        grad_accum=cfg.batch.gradient_accumulation_steps,
        lr=opt.lr,
        lr_at=functools.partial(sched.lr_for_step, base_lr=opt.lr) if sched else None,
        betas=betas,
        betas_at=(
            functools.partial(sched.betas_for_step, base_betas=betas)
            if sched and sched.changes_betas
            else None
        ),
        eps=opt.eps,
        weight_decay=opt.weight_decay,
        adamw_mode=opt.decoupled_weight_decay,
        gradient_clipping=cfg.gradient_clipping,
        dtype=DTYPES[cfg.precision],
        loss_scaler=cfg.fp16.loss_scaler() if cfg.fp16.enabled else None,
        overlap_comm=bool(z.overlap_comm),
        contiguous_gradients=z.contiguous_gradients,
        reduce_scatter=z.reduce_scatter,
        reduce_bucket_size=z.reduce_bucket_size,
        prefetch_bucket_size=z.stage3_prefetch_bucket_size,
        param_persistence_threshold=z.stage3_param_persistence_threshold,
        max_reuse_distance=z.stage3_max_reuse_distance,
        max_live_parameters=z.stage3_max_live_parameters,
        # as in DeepSpeed, offload_optimizer does nothing at stage 0, offload_param below 3
        offload_optimizer=z.offload_optimizer.enabled and z.stage >= 1,
        offload_param=z.offload_param.enabled and z.stage == 3,
        pin_memory=z.offload_optimizer.pin_memory or z.offload_param.pin_memory,
        kernels=dict(kernels or {}),
        fused_optimizer=fused_optimizer,
        grad_norm_every_step=grad_norm_every_step,
    )


def build_engine(
    kind: str,
    model: torch.nn.Module,
    cfg: DSConfig,
    *,
    device: str,
    kernels: dict[str, str] | None = None,
    fused_optimizer: bool | None = None,
    grad_norm_every_step: bool = False,
):
    """An engine with ``module``, ``backward(loss)``, ``step()`` and ``destroy()``.

    ``kernels`` and ``grad_norm_every_step`` apply to dsbench's engine only (DeepSpeed has its
    own collectives and computes the global gradient norm every step anyway). With an
    ``activation_checkpointing`` section, the model's blocks are checkpointed first, for either
    engine (:mod:`dsbench.models.checkpointing`)."""
    ac = cfg.activation_checkpointing
    if ac.enabled:
        checkpoint_blocks(model, ac.number_checkpoints)
    if kind == "dsbench":
        settings = zero_settings(
            cfg,
            kernels=kernels,
            fused_optimizer=fused_optimizer,
            grad_norm_every_step=grad_norm_every_step,
        )
        return ZeroEngine(model.to(device), settings, device=device)
    if kind == "deepspeed":
        from dsbench.engines.deepspeed import build_deepspeed_engine

        return build_deepspeed_engine(model, cfg, device=device, fused_optimizer=fused_optimizer)
    raise UsageError(choices_message("engine", kind, ENGINES))


def loss_scale(engine) -> float | None:
    """The engine's current fp16 loss scale, or None where there is none (bf16, fp32):
    dsbench's dynamic or static scaler, or DeepSpeed's ZeRO optimizer's ``cur_scale``."""
    if isinstance(engine, ZeroEngine):
        scaler = engine.settings.loss_scaler
        return float(scaler.scale) if scaler is not None else None
    if not getattr(engine, "fp16_enabled", lambda: False)():
        return None  # DeepSpeed's bf16/fp32 ZeRO optimizers keep a static scale of 1
    scale = getattr(getattr(engine, "optimizer", None), "cur_scale", None)
    return float(scale) if isinstance(scale, int | float) else None
