"""Peak memory around a benchmark: device allocator peaks and the host's peak resident set.

Device (CUDA and ROCm alike): ``torch.cuda.reset_peak_memory_stats`` before the timed region,
``max_memory_allocated`` / ``max_memory_reserved`` after. Host: Linux keeps the high-water mark
of resident memory in ``VmHWM`` (/proc/self/status); writing ``5`` to /proc/self/clear_refs
resets it to the current RSS, so the peak can be taken over the benchmark alone. Where the reset
is not permitted the peak is since process start, and ``host_peak_reset`` says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from pathlib import Path

import torch

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _read_status_kib(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def reset_host_peak() -> bool:
    """Reset VmHWM to the current RSS; False where the kernel refuses (or not Linux)."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def host_rss() -> int | None:
    """The process's resident set size now, in bytes (VmRSS), or None off Linux."""
    return _read_status_kib("VmRSS")


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (glibc 2.33 on)."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")
    ]  # fmt: skip


@functools.cache
def _mallinfo2():
    libc = ctypes.util.find_library("c")
    try:
        fn = ctypes.CDLL(libc).mallinfo2 if libc and "libc.so" in libc else None
    except (OSError, AttributeError):  # not glibc, or glibc before 2.33
        return None
    if fn is not None:
        fn.restype = _MallInfo2
    return fn


def host_heap_in_use() -> int | None:
    """Bytes the C allocator has handed out and not taken back: glibc's ``mallinfo2()``
    ``uordblks`` (in use in its arenas) plus ``hblkhd`` (in use in chunks it mmapped). torch's
    CPU tensors come from it, so a leak shows here without the free memory the allocator keeps
    resident, which makes the resident set jump by whole blocks (8 MiB and up) as it is kept or
    handed back. None where there is no ``mallinfo2`` (not glibc, or glibc before 2.33)."""
    fn = _mallinfo2()
    if fn is None:
        return None
    info = fn()
    return int(info.uordblks + info.hblkhd)


def host_peak_rss() -> int | None:
    """The process's peak resident set size in bytes (VmHWM), or None off Linux."""
    return _read_status_kib("VmHWM")


def release_freed(device: str | torch.device = "cpu") -> None:
    """Give memory freed by a finished case back to the system, so the next case's resident set
    starts from the process's baseline rather than from what the last one left cached: Python's
    garbage, glibc's free lists (``malloc_trim``), the device allocator's cache."""
    import contextlib
    import gc

    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
    libc = ctypes.util.find_library("c")
    if libc and "libc.so" in libc:
        with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
            ctypes.CDLL(libc).malloc_trim(0)


class PeakMemory:
    """Context manager measuring peak memory over its body.

    >>> with PeakMemory("cpu") as peak:
    ...     work()
    >>> peak.result  # {'host_peak_rss_bytes': ..., 'host_peak_reset': True, ...}
    """

    def __init__(self, device: str | torch.device, since_rss: int | None = None):
        """``since_rss``: the resident set before the case was set up; the result then also
        holds ``host_peak_added_bytes``, the peak minus it: what the case itself added (model,
        engine, buffers), free of what the process held before (libraries, earlier cases)."""
        self.device = torch.device(device)
        self.since_rss = since_rss
        self.result: dict = {}

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        self._reset = reset_host_peak()
        self._rss_start = _read_status_kib("VmRSS")
        return self

    def __exit__(self, *exc) -> None:
        result: dict = {
            "host_peak_rss_bytes": host_peak_rss(),
            "host_rss_start_bytes": self._rss_start,
            "host_peak_reset": self._reset,
        }
        if self.since_rss is not None and result["host_peak_rss_bytes"] is not None:
            result["host_peak_added_bytes"] = result["host_peak_rss_bytes"] - self.since_rss
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            result["device_peak_allocated_bytes"] = torch.cuda.max_memory_allocated(self.device)
            result["device_peak_reserved_bytes"] = torch.cuda.max_memory_reserved(self.device)
        self.result = result


def max_over(results: list[dict]) -> dict:
    """Combine per-rank memory results: the largest peak of each kind (nested results, such
    as a row's ``fresh_process``, likewise)."""
    out: dict = {}
    for r in results:
        for k, v in r.items():
            if isinstance(v, bool):
                out[k] = out.get(k, True) and v
            elif isinstance(v, dict):
                out[k] = max_over([out.get(k) or {}, v])
            elif v is not None:
                out[k] = max(out.get(k) or 0, v)
            else:
                out.setdefault(k, None)
    return out
