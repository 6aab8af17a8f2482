"""The shm collectives' sum of a segment, optionally with the ZeRO engine's landing fused in.

A reduce-scatter's output is where the engine lands it: divided by the world size (the mean
over ranks) and written into, or added to, the rank's fp32 gradient shard; at the step's last
reduction the optimizer step then reads that shard once more for the gradient norm's
square-sum. As separate torch passes that is two to four passes over the shard;
:func:`sum_into` does each in one pass through ``csrc/shm_sum.c`` (timings: dsbench/decisions.md,
"The shm sum with the landing fused in"). Every fp32 operation is the one the separate passes apply,
in the same order, so the shard's bits are the same (``tests/test_shm_sum.py``); the square-sum
is accumulated in fp64 in another order than ``torch.dot``'s, which can move the fp64 value in
its last bits, far below what fp32 resolves.

The C file is compiled at first use by the host's C compiler (``cc``, ``gcc`` or ``clang``;
``-O3 -march=native -ffp-contract=off``, in seconds) into ``<cache>/cpu_kernels/`` (``<cache>``
as for the CUDA build: ``$DSBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/dsbench``, else
``~/.cache/dsbench``), named by a hash of the source, the compiler, the flags and the CPU; ranks
building at once each write their own file and rename it into place. Without a compiler, or when the
build fails, the same arithmetic runs as torch passes (same bits, the time above) and
:func:`backend` says why.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

from dsbench.kernels.collective_common import overlaps

SOURCE = Path(__file__).resolve().parent / "csrc" / "shm_sum.c"
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-shared", "-fPIC")

_lock = threading.Lock()
_fn = None
_why_not: str | None = None
_loaded = False


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _library_path(cc: str) -> Path:
    from dsbench.hardware import resolve_cache_dir

    h = hashlib.sha256(SOURCE.read_bytes())
    for part in (cc, *FLAGS, _cpu_identity()):  # -march=native: a build per kind of CPU
        h.update(part.encode())
    return resolve_cache_dir() / "cpu_kernels" / f"shm_sum_{h.hexdigest()[:16]}.so"


def _cpu_identity() -> str:
    """The machine and its CPU's model and feature flags (Linux), for a cache folder that other
    hosts may share."""
    text = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("model name", "flags"))]
        text += "".join(sorted(set(lines)))
    except OSError:
        text += platform.processor()
    return text


def _build() -> tuple[object | None, str | None]:
    cc = _compiler()
    if cc is None:
        return None, "no C compiler (cc, gcc or clang) on PATH: torch passes instead"
    lib = _library_path(cc)
    if not lib.is_file():
        lib.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib.parent)
        os.close(fd)
        try:
            run = subprocess.run(
                [cc, *FLAGS, str(SOURCE), "-o", tmp], capture_output=True, text=True
            )
            if run.returncode != 0:
                first = (run.stderr.strip().splitlines() or ["(no output)"])[0]
                return None, f"{Path(cc).name} failed on {SOURCE.name}: {first}"
            os.replace(tmp, lib)  # atomic: a rank building at the same time replaces it alike
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    fn = ctypes.CDLL(str(lib)).dsb_shm_sum_f32  # CDLL: the call releases the GIL
    fn.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_int,
        ctypes.c_int64,
        ctypes.c_float,
        ctypes.c_int,
        ctypes.c_void_p,
    ]
    fn.restype = None
    return fn, None


def _load():
    global _fn, _why_not, _loaded
    if not _loaded:
        with _lock:
            if not _loaded:
                try:
                    _fn, _why_not = _build()
                except OSError as exc:
                    _fn, _why_not = None, f"building {SOURCE.name} failed: {exc}"
                _loaded = True
    return _fn


def backend() -> str:
    """``"c"``, or ``"torch: <why>"`` when the C build is unavailable."""
    return "c" if _load() is not None else f"torch: {_why_not}"


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
