"""Hugging Face "auto": the values the Transformers Trainer writes over a ds_config's "auto"
placeholders when nothing else is given (``transformers/integrations/deepspeed.py``,
``HfTrainerDeepSpeedConfig.trainer_config_process`` and ``trainer_config_finalize``, with the
``TrainingArguments`` defaults).

=========================================================  ====================================
path                                                       value
=========================================================  ====================================
``optimizer.params.lr``                                    5e-5 (``learning_rate``)
``optimizer.params.betas``                                 [0.9, 0.999] (``adam_beta1/2``)
``optimizer.params.eps``                                   1e-8 (``adam_epsilon``)
``optimizer.params.weight_decay``                          0 (``weight_decay``)
``gradient_clipping``                                      1.0 (``max_grad_norm``)
``fp16.enabled``, ``bf16.enabled``, ``amp.enabled``        false (``fp16``/``bf16`` off)
``amp.opt_level``                                          "O1" (``fp16_opt_level``)
``scheduler.params.warmup_min_lr``                         0
``scheduler.params.warmup_max_lr``                         the optimizer's lr
``scheduler.params.warmup_num_steps``                      0 (``warmup_steps``)
``scheduler.params.total_num_steps``                       the run's steps (``max_steps``)
``scheduler.params.warmup_type``                           "log" (left by the Trainer; DeepSpeed
                                                           reads any unknown type as 'log')
``zero_optimization.reduce_bucket_size``                   hidden²
``zero_optimization.stage3_prefetch_bucket_size``          int(0.9·hidden²)
``zero_optimization.stage3_param_persistence_threshold``   10·hidden
=========================================================  ====================================

The batch sizes' "auto" (micro-batch 8, accumulation 1, ``train_batch_size`` derived, the command
line first) are resolved with the other batch sizes in :mod:`.batch`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

AUTO = "auto"

TRAINER_DEFAULTS: dict[str, Any] = {
    "optimizer.params.lr": 5e-5,
    "optimizer.params.betas": [0.9, 0.999],
    "optimizer.params.eps": 1e-8,
    "optimizer.params.weight_decay": 0.0,
    "gradient_clipping": 1.0,
    "fp16.enabled": False,
    "bf16.enabled": False,
    "bfloat16.enabled": False,
    "amp.enabled": False,
    "amp.opt_level": "O1",
    "scheduler.params.warmup_min_lr": 0,
    "scheduler.params.warmup_num_steps": 0,
}
"""Values that depend on nothing else."""

DEEPSPEED_READS: dict[str, Any] = {"scheduler.params.warmup_type": "log"}
""""auto"s the Trainer leaves alone, with what DeepSpeed makes of them (an unknown warmup_type is
'log' to its WarmupLR and WarmupDecayLR)."""

_OPTIMIZER_LR_DEFAULT = 1e-3
"""DeepSpeed's Adam/AdamW lr when ``optimizer.params`` has none (what warmup_max_lr follows)."""

_NEEDS_STEPS = ("scheduler.params.total_num_steps",)
_HIDDEN = {
    "zero_optimization.reduce_bucket_size": lambda h: h * h,
    "zero_optimization.stage3_prefetch_bucket_size": lambda h: int(0.9 * h * h),
    "zero_optimization.prefetch_bucket_size": lambda h: int(0.9 * h * h),
    "zero_optimization.stage3_param_persistence_threshold": lambda h: 10 * h,
    "zero_optimization.param_persistence_threshold": lambda h: 10 * h,
}
BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


def auto_paths(node: Any) -> Iterator[str]:
    """Dotted paths of every "auto" value, in document order."""
    return (path for path, _, _ in _autos(node))


def _autos(node: Any, prefix: str = "") -> Iterator[tuple[str, dict, str]]:
    """(dotted path, the dict holding it, its key) of every "auto" value, in document order.
    The dict is kept because a path does not lead back to it when a key holds a dot."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and value == AUTO:
                yield f"{prefix}{key}", node, key
            else:
                yield from _autos(value, f"{prefix}{key}.")


def _optimizer_lr(raw: Mapping) -> Any:
    """The lr the optimizer will have: the config's, or DeepSpeed's default; with no optimizer
    section, the Trainer's (it builds AdamW with ``learning_rate``)."""
    optimizer = raw.get("optimizer")
    if not isinstance(optimizer, dict):
        return TRAINER_DEFAULTS["optimizer.params.lr"]
    params = optimizer.get("params")
    if not isinstance(params, dict):
        return _OPTIMIZER_LR_DEFAULT
    return params.get("lr", _OPTIMIZER_LR_DEFAULT)


def fill(
    raw: dict,
    *,
    given: Mapping[str, Any],
    steps: int | None,
    hidden_size: int | None,
) -> tuple[dict[str, Any], list[str]]:
    """Replace every "auto" in ``raw`` (in place): from ``given`` (dotted path → value) first,
    else as the Trainer would (the batch sizes' are left to :mod:`.batch`). Returns
    the filled paths with their values and, with the reason in brackets, the paths nothing could
    fill."""
    filled: dict[str, Any] = {}
    left: list[str] = []
    later = []
    for path, node, key in list(_autos(raw)):
        if path in BATCH_KEYS and path not in given:
            continue  # resolved with the other batch sizes (dsbench.zero.config.batch)
        if path in given:
            value = given[path]
        elif path in TRAINER_DEFAULTS:
            value = TRAINER_DEFAULTS[path]
        elif path in DEEPSPEED_READS:
            value = DEEPSPEED_READS[path]
        elif path == "scheduler.params.warmup_max_lr":
            later.append((path, node, key))  # after the optimizer's lr is known
            continue
        elif path in _NEEDS_STEPS and steps is not None:
            value = steps
        elif path in _HIDDEN and hidden_size is not None:
            value = _HIDDEN[path](hidden_size)
        else:
            reason = (
                " (the run's steps)"
                if path in _NEEDS_STEPS
                else " (the model's hidden size)"
                if path in _HIDDEN
                else ""
            )
            left.append(path + reason)
            continue
        node[key] = filled[path] = value
    for path, node, key in later:
        node[key] = filled[path] = _optimizer_lr(raw)
    return filled, left
