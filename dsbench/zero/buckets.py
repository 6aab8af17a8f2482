"""The engine's unit of layout and reduction: a bucket of parameters flattened into one padded
run, and a submitted gradient reduction (:mod:`dsbench.zero.engine`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


class Bucket:
    """Parameters flattened into one padded run; rank r owns ``[lo, lo + owned)``."""

    def __init__(self, params: list[nn.Parameter], world: int, rank: int, sharded: bool):
        # layout of the flat run
        self.params = params
        self.shapes = [p.shape for p in params]
        self.numels = [p.numel() for p in params]
        self.offsets = [sum(self.numels[:i]) for i in range(len(params))]
        self.numel = sum(self.numels)
        self.padded = math.ceil(self.numel / world) * world if sharded else self.numel
        self.owned = self.padded // world if sharded else self.numel
        self.lo = rank * self.owned if sharded else 0
        self.start = 0  # stages 0-2: where the run begins in the engine's flat buffers
        # backward: gradients that arrived, and whether the bucket was reduced (late hooks of
        # this backward are then ignored); both reset at the end of each backward
        self.arrived = 0
        self.reduced = False
        # optimizer state, set by ZeroEngine._build_optimizer_state
        self.master: torch.Tensor | None = None  # fp32 owned slice (optimizer input)
        self.master_is_param = False  # fp32 on the parameters' device: master is the storage
        self.grad: torch.Tensor | None = None  # fp32 owned gradient (optimizer input)
        # nothing reduced into ``grad`` since the last optimizer step: its contents are stale and
        # the next reduction writes it instead of adding to it
        self.grad_empty = True
        self.exp_avg: torch.Tensor | None = None
        self.exp_avg_sq: torch.Tensor | None = None

    def flatten(self, tensors, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A new padded buffer holding ``tensors`` (one per parameter; None: zeros)."""
        out = torch.zeros(self.padded, dtype=dtype, device=device)
        self.fill(out, tensors)
        return out

    def fill(self, flat: torch.Tensor, tensors) -> None:
        """Copy ``tensors`` (one per parameter; None: left as is) into their places in the
        padded run ``flat``."""
        for t, off, n in zip(tensors, self.offsets, self.numels, strict=True):
            if t is not None:
                flat[off : off + n].copy_(t.reshape(-1))

    def flat_grads(self, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """The bucket's gradients as one padded run: a single parameter's own gradient when it
        is that run already (no padding, contiguous), else a new buffer (the caller owns it:
        the engine drops the parameters' ``grad`` next)."""
        if len(self.params) == 1 and self.numel == self.padded:
            g = self.params[0].grad
            if g is not None and g.is_contiguous() and g.dtype == dtype and g.device == device:
                return g.view(-1)
        return self.flatten([p.grad for p in self.params], dtype, device)

    def bind(self, flat: torch.Tensor, attr: str = "data") -> None:
        """Point each parameter's ``data`` (or ``grad``) at its slice of ``flat``."""
        for p, off, n, shape in zip(
            self.params, self.offsets, self.numels, self.shapes, strict=True
        ):
            setattr(p, attr, flat[off : off + n].view(shape))


@dataclass
class Reduction:
    """A bucket's gradient reduction, submitted; the engine's ``_land`` finishes it."""

    bucket: Bucket
    out: torch.Tensor  # the reduced (summed) gradient of the owned slice, compute dtype
    full: torch.Tensor  # the bucket's full gradient run that was reduced
    add: bool  # add into the owned fp32 gradient (a later micro-step, stage >= 2), not write it
    fresh: bool  # ``out`` is a buffer of its own (may be scaled in place)
    zero_full: bool  # zero ``full`` once reduced: a view of the flat gradient buffer (stage >= 2)
