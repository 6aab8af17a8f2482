"""The shm collectives' sum of a segment, optionally with the ZeRO engine's landing fused in.

A reduce-scatter's output is where the engine lands it: divided by the world size (the mean
over ranks) and written into, or added to, the rank's fp32 gradient shard; at the step's last
reduction the optimizer step then reads that shard once more for the gradient norm's
square-sum. As separate torch passes that is two to four passes over the shard;
:func:`sum_into` does each in one pass through ``csrc/shm_sum.c`` (timings: docs/decisions.md,
"The shm sum with the landing fused in"). Every fp32 operation is the one the separate passes apply,
in the same order, so the shard's bits are the same (``tests/test_shm_sum.py``); the square-sum
is accumulated in fp64 in another order than ``torch.dot``'s, which can move the fp64 value in
its last bits, far below what fp32 resolves.

The C file is compiled at first use by the host's C compiler (``-O3 -march=native
-ffp-contract=off``, :class:`dsbench.kernels.cbuild.CLibrary`). Without a compiler, or when the
build fails, the same arithmetic runs as torch passes (same bits, the time above) and
:func:`backend` says why.
"""

from __future__ import annotations

import ctypes

import torch

from dsbench.kernels.cbuild import CLibrary
from dsbench.kernels.collective_common import overlaps

_LIB = CLibrary("shm_sum.c", ("-O3", "-march=native", "-ffp-contract=off"))
_ARGTYPES = [
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_int,
    ctypes.c_int64,
    ctypes.c_float,
    ctypes.c_int,
    ctypes.c_void_p,
]


def _load():
    return _LIB.function("dsb_shm_sum_f32", _ARGTYPES)


def backend() -> str:
    """``"c"``, or ``"torch: <why>"`` when the C build is unavailable."""
    return "c" if _load() is not None else f"torch: {_LIB.why_not}"


def sum_into(
    out: torch.Tensor,
    slots: list[torch.Tensor],
    *,
    divide_by: int = 1,
    accumulate: bool = False,
    sq: torch.Tensor | None = None,
) -> None:
    """``out = (slots[0] + slots[1] + ...) / divide_by``, summed in rank order, or ``out +=``
    that with ``accumulate``, all of ``out``'s size. ``sq`` (an fp64 scalar): set to the sum of
    ``out``'s squares. One C pass where all are contiguous fp32 on the host and ``out`` is apart
    from every slot, else torch passes (the same bits)."""
    fn = _load()
    apart = not any(overlaps(out, s) for s in slots)
    plain = all(t.dtype == torch.float32 and t.is_contiguous() and t.device.type == "cpu"
                and t.numel() == out.numel() for t in (out, *slots))  # fmt: skip
    if fn is not None and plain and apart:
        ptrs = (ctypes.c_void_p * len(slots))(*(s.data_ptr() for s in slots))
        fn(
            out.data_ptr(), ptrs, len(slots), out.numel(), float(divide_by), int(accumulate),
            sq.data_ptr() if sq is not None else None,
        )  # fmt: skip
        return
    dst = out if not accumulate and apart else None
    total = torch.add(slots[0], slots[1], out=dst) if len(slots) > 1 else slots[0].clone()
    for s in slots[2:]:
        total.add_(s)
    if divide_by != 1:
        total.div_(divide_by)
    if accumulate:
        out.add_(total)
    elif total is not out:
        out.copy_(total)
    if sq is not None:
        sq.copy_(torch.linalg.vector_norm(out, dtype=torch.float64).square())
