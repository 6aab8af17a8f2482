"""The CPU memory ceiling with AdamW's access pattern: ``p += s*g; m += s*g; v += s*g`` in one
pass (``csrc/stream_update3.c``), four float32 streams read and three written in place.

A fused AdamW step moves those seven streams. torch's own in-place kernels write one array each
(``Tensor.add_``: two reads to a write), and a memory system serves another mix of reads and
writes at another rate: on a 2-vCPU EPYC VM a fused AdamW over 256 MiB of state ran 3-5% above
torch's axpy, so a ceiling of torch kernels alone put a healthy AdamW above 100% of it. This
kernel does AdamW's traffic with none of its arithmetic, so AdamW's share of it is what the
memory system allows (docs/decisions.md, "A memory ceiling with AdamW's access pattern").

It runs on ``threads`` threads of OpenMP's pool: in a process that imported torch, the pool of
torch's own kernels (the suite passes ``torch.get_num_threads()``). Threads of its own competed
with torch's spinning workers for the cores, and ran 10-25% below AdamW. Built by
:class:`dsbench.kernels.cbuild.CLibrary`; without a C compiler :func:`update3` raises and
:func:`why_not` says why.
"""

from __future__ import annotations

import ctypes

import torch

from dsbench.kernels.cbuild import CLibrary
from dsbench.kernels.collective_common import overlaps

_LIB = CLibrary("stream_update3.c", ("-O3", "-march=native", "-ffp-contract=off", "-fopenmp"))
_ARGTYPES = [*[ctypes.c_void_p] * 4, ctypes.c_int64, ctypes.c_float, ctypes.c_int]


def why_not() -> str | None:
    """Why the C kernel is unavailable here, or ``None`` when it builds."""
    return None if _LIB.function("dsb_stream_update3", _ARGTYPES) is not None else _LIB.why_not


def update3(p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, s: float,
            threads: int) -> None:  # fmt: skip
    """``p += s*g; m += s*g; v += s*g``, in one pass on ``threads`` threads; contiguous float32
    CPU tensors of one size, none overlapping (checked). Raises ``RuntimeError`` without the C
    build (:func:`why_not`)."""
    fn = _LIB.function("dsb_stream_update3", _ARGTYPES)
    if fn is None:
        raise RuntimeError(f"the C stream kernel is unavailable: {_LIB.why_not}")
    arrays = (p, m, v, g)
    if not all(t.dtype == torch.float32 and t.is_contiguous() and t.device.type == "cpu"
               and t.numel() == p.numel() for t in arrays):  # fmt: skip
        raise ValueError("update3 takes contiguous float32 CPU tensors of one size")
    if any(overlaps(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1 :]):
        raise ValueError("update3's four tensors must not overlap")
    fn(*(t.data_ptr() for t in arrays), p.numel(), float(s), int(threads))
