"""The engine's unit of layout and reduction: a bucket of parameters flattened into one padded
run, each parameter's slot in the flat gradient buffer, and a submitted gradient reduction
(:mod:`dsbench.zero.engine`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from dsbench.kernels.autograd import set_grad_sink
from dsbench.kernels.reference import gemm as _TORCH_GEMM


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
        # the parameters' places in the flat gradient buffer (stages 0-2), or in a stage-3
        # unit's staged gradients ([Note: stage-3 staged gradients]); empty: neither
        self.slots: list[GradSlot] = []
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
        # the owned gradient's fp64 square-sum, written by its last reduction of this
        # accumulation when that fused it ([Note: landing in the reduction]); None: it did not
        self.sq: torch.Tensor | None = None
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


class GradSlot:
    """A parameter's place in the engine's flat gradient buffer (stages 0-2 with
    ``contiguous_gradients``) or in a stage-3 unit's staged gradients, and whether it holds
    anything of the current accumulation.

    Outside backward the parameter's ``grad`` is ``view``, or None while the slot is *stale*:
    its gradient was reduced (stages 2-3, every micro-step) or stepped (stages 0-1), and the next
    one overwrites it instead of adding to it, so nothing zeroes the buffer (what that saves: see
    :mod:`dsbench.zero.engine`, [Note: gradients overwrite stale slots]). A stale slot's
    parameter has no ``grad``, so autograd hands its next gradient over without adding it
    anywhere, and :meth:`landed` copies it in.

    It is also the weight's grad sink ([Note: weight gradients in place] in
    ``kernels/autograd.py``): the weight-gradient GEMM of a backward's first use of the weight
    writes into ``view`` directly (``torch.mm(out=)`` when stale, ``addmm_`` otherwise, for
    torch's GEMM on CPUs; else the product, copied or added), then the slot clears ``grad`` and
    returns a new alias of ``view``. Autograd adds any other use's gradient to that alias
    out of place (its storage is shared), and hands the alias, or that sum, to the parameter's
    empty ``grad``; :meth:`landed` then finds either ``view`` itself or a sum that it copies
    into ``view``. Later uses in the same backward return their product for autograd to add.
    The bits are those of computing the product and adding it to the zeroed or accumulated
    buffer (``tests/test_zero_engine.py``)."""

    def __init__(self, param: nn.Parameter, view: torch.Tensor | None):
        self.param = param
        # shaped like the parameter; None: no place now (a stage-3 unit's slots have one only
        # from its backward to its reduction, [Note: stage-3 staged gradients]), and the
        # parameter's gradient goes through autograd as without a slot
        self.view = view
        self.stale = False
        self.written = False  # a weight-gradient GEMM wrote into view during this backward
        set_grad_sink(param, self)  # [Note: weight gradients in place] (kernels/autograd.py)

    def __call__(self, a: torch.Tensor, b: torch.Tensor, gemm) -> torch.Tensor:
        """The weight's gradient ``a @ b`` from a linear layer's backward (see class)."""
        if self.written or self.view is None:  # a second use: autograd adds it
            return gemm(a, b)
        self.written = True
        v = self.view
        direct = gemm is _TORCH_GEMM and v.device.type == "cpu"
        if self.stale:
            if direct:
                torch.mm(a, b, out=v)
            else:
                v.copy_(gemm(a, b))
        elif direct and v.dtype == torch.float32:  # the same bits as v + a @ b (fp32, CPU)
            v.addmm_(a, b)
        else:
            v.add_(gemm(a, b))
        self.stale = False
        self.param.grad = None  # autograd hands over the alias instead of adding it to v
        return v.view(v.shape)

    def landed(self) -> None:
        """After autograd accumulated the parameter's gradient: ``view`` holds it, and is the
        parameter's ``grad``."""
        if self.view is None:
            return
        g = self.param.grad
        if g is not None and g.data_ptr() != self.view.data_ptr():
            self.view.copy_(g)  # the first gradient into a stale slot, or a sum with an alias
        self.param.grad = self.view
        self.stale = False

    def clear(self) -> None:
        """Nothing of the next accumulation is here yet: the next gradient overwrites it."""
        self.stale = True
        self.param.grad = None

    def zero(self) -> None:
        """No gradient arrived before the slot is reduced: zeros, as a buffer zeroed for it."""
        if self.stale and self.view is not None:
            self.view.zero_()
            self.param.grad = self.view
            self.stale = False


@dataclass(kw_only=True)
class Reduction:
    """A bucket's gradient reduction, submitted; the engine's ``_land`` finishes it."""

    bucket: Bucket
    out: torch.Tensor  # the reduced (summed) gradient of the owned slice, compute dtype
    full: torch.Tensor  # the bucket's full gradient run that was reduced
    add: bool  # add into the owned fp32 gradient (a later micro-step, stage >= 2), not write it
    fresh: bool  # ``out`` is a buffer of its own (may be scaled in place)
    clear_slots: bool  # ``full`` is the flat gradient buffer's, cleared once reduced (stage >= 2)
    landed: bool = False  # the collective landed it itself ([Note: landing in the reduction])


NORM_CHUNK = 1 << 16
"""Elements per fp64 chunk of the gradient norm on CPUs: 512 KiB, cache-resident."""


def sq_sum_fp64(g: torch.Tensor) -> torch.Tensor:
    """The sum of squares of ``g`` accumulated in fp64 (as DeepSpeed's ZeRO optimizers take the
    norm of ``g.double()``). On CPUs a chunk at a time through one reused fp64 buffer, each
    chunk's square-sum a BLAS dot product: a fraction of the time of converting the whole
    gradient to fp64 and squaring it (docs/decisions.md, "The gradient norm's fp64 square-sum
    in chunks"), with the same fp64 accumulation; on GPUs one fused reduction."""
    if g.device.type != "cpu" or g.numel() <= NORM_CHUNK:
        return torch.linalg.vector_norm(g, dtype=torch.float64).square()
    acc = torch.zeros((), dtype=torch.float64)
    buf = torch.empty(NORM_CHUNK, dtype=torch.float64)
    for chunk in g.reshape(-1).split(NORM_CHUNK):
        d = buf[: chunk.numel()]
        d.copy_(chunk)
        acc += torch.dot(d, d)
    return acc


def split_runs(params: list[nn.Parameter], limit: int) -> list[list[nn.Parameter]]:
    """Consecutive runs of at most ``limit`` elements, in reverse registration order (the
    order gradients roughly arrive in backward)."""
    groups, current, size = [], [], 0
    for p in reversed(params):
        if current and size + p.numel() > limit:
            groups.append(current)
            current, size = [], 0
        current.append(p)
        size += p.numel()
    if current:
        groups.append(current)
    return groups
