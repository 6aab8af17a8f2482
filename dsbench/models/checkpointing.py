"""Activation checkpointing of a model's blocks (Chen et al., "Training Deep Nets with Sublinear
Memory Cost", 2016): each checkpointed block keeps only its inputs in forward and runs again in
backward to rebuild what its backward needs. What a ds_config's ``activation_checkpointing``
section turns on (:mod:`dsbench.zero.config.activation_config`), on either engine.

Blocks are what each model family names in ``checkpoint_units()``: the seed MLP's network, BERT's
layers, GPT's blocks. ``torch.utils.checkpoint`` runs in its non-reentrant form (the one PyTorch
recommends, and the one that composes with parameter hooks such as ZeRO stage 3's); it restores
the RNG state for the recomputation, so the recomputed activations are the original ones and
training is bit-identical to training without checkpointing.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from dsbench.errors import UsageError


def checkpoint_blocks(model: nn.Module, number: int | None = None) -> int:
    """Checkpoint the first ``number`` blocks of ``model`` (None: all); returns how many."""
    units = getattr(model, "checkpoint_units", None)
    if units is None:
        raise UsageError(
            f"activation_checkpointing: {type(model).__name__} names no blocks to checkpoint "
            "(dsbench's models: mlp, bert, gpt)"
        )
    blocks = list(units())
    chosen = blocks if number is None else blocks[:number]
    for block in chosen:
        block.forward = functools.partial(_checkpointed, block.forward)
    return len(chosen)


def _checkpointed(forward, *args, **kwargs):
    if not torch.is_grad_enabled():  # evaluation, inference: nothing to recompute
        return forward(*args, **kwargs)
    return checkpoint(forward, *args, use_reentrant=False, **kwargs)


def in_recomputation() -> bool:
    """True while autograd runs a backward pass, where a checkpointed block's forward runs again
    (ZeRO stage 3's forward hooks must then neither release parameters nor add backward hooks)."""
    return torch._C._current_graph_task_id() != -1


def summary(preset, number: int | None = None) -> str:
    """'activation checkpointing of 2 of 4 blocks' for a model preset (built on the meta
    device: nothing allocated)."""
    blocks = len(preset.build(device="meta").checkpoint_units())
    chosen = blocks if number is None else min(number, blocks)
    return f"activation checkpointing of {chosen} of {blocks} blocks"
