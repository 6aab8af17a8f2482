"""``activation_checkpointing``: DeepSpeed's section (``deepspeed/runtime/activation_checkpointing/
config.py``), which configures ``deepspeed.checkpointing.checkpoint`` for models that call it, as
Megatron's do.

dsbench's models play that part: with the section present (on either engine) each model
checkpoints its blocks (:func:`dsbench.models.checkpointing.checkpoint_blocks`: the seed MLP's
network, BERT's layers, GPT's blocks) with ``torch.utils.checkpoint``, so their activations are
recomputed in backward instead of kept. ``number_checkpoints`` (DeepSpeed: the number of
checkpoints its contiguous buffer holds) limits that to the first N blocks. The switches that
tune DeepSpeed's own implementation (partitioning across model-parallel ranks, a contiguous
buffer, copies to the CPU, synchronisation, profiling) are reported once as ignored when on.
DeepSpeed reads this section without checking its keys; an unknown key gets a warning here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from dsbench.records.values import closest, show_json
from dsbench.zero.config.fields import ConfigError, Section, ignored, not_implemented


@dataclass(kw_only=True, slots=True)
class ActivationCheckpointingConfig(Section):
    """Whether the model checkpoints its blocks, and how many."""

    enabled: bool = False
    """The section is in the config."""
    number_checkpoints: int | None = None
    """Checkpoint the first N blocks (None: all of them)."""
    # DeepSpeed's own implementation's switches: ignored (reported when on)
    partition_activations: bool = ignored(False)
    contiguous_memory_optimization: bool = ignored(False)
    cpu_checkpointing: bool = ignored(False)
    synchronize_checkpoint_boundary: bool = ignored(False)
    profile: bool = ignored(False)

    _PATH: ClassVar[str] = "activation_checkpointing"
    _MIN: ClassVar[dict[str, float]] = {"number_checkpoints": 1}


def read_activation_checkpointing(
    raw: Any,
) -> tuple[ActivationCheckpointingConfig, list[str], list[str]]:
    """The section, the keys dsbench ignores (dotted paths) and one-line warnings."""
    if raw is None:
        return ActivationCheckpointingConfig(), [], []
    if not isinstance(raw, dict):
        raise ConfigError(
            f"activation_checkpointing must be an object {{...}}, got {show_json(raw)}"
        )
    valid = [f.name for f in fields(ActivationCheckpointingConfig) if f.name != "enabled"]
    unknown = [k for k in raw if k not in valid]
    warnings = [
        "ds_config: ignoring unknown keys in activation_checkpointing: "
        + ", ".join(f"'{k}'{closest(k, valid)}" for k in unknown)
        + " (DeepSpeed does not check them)"
    ] if unknown else []  # fmt: skip
    known = {k: v for k, v in raw.items() if k in valid}
    section = ActivationCheckpointingConfig(enabled=True, **known)
    off = not_implemented(ActivationCheckpointingConfig)
    ignored_keys = [f"activation_checkpointing.{k}" for k in off if getattr(section, k)]
    return section, ignored_keys, warnings
