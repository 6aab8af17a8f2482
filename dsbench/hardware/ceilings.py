"""Measured ceilings for the generic profiles: calibration and its cache (see
:mod:`dsbench.hardware`)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dsbench.hardware.devices import (
    _cpu_name,
)
from dsbench.hardware.schema import (
    Figure,
    Profile,
)

# --------------------------------------------------------------------------------------------
# Calibration: measured ceilings for the generic profiles
# --------------------------------------------------------------------------------------------

CACHE_VERSION = 4
"""Bumped when the calibration's method changes, so that stale cached ceilings are measured again
(4: memory bandwidth is the best of a read-only sum, copy, scale and add over every core the
process may use; matmul is the best over the gemm benchmark's sizes)."""
CACHE_FILE = "calibration.json"


def resolve_cache_dir(explicit: Path | None = None) -> Path:
    """The calibration cache folder.

    ``explicit``, else ``$DSBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/dsbench``, else
    ``~/.cache/dsbench``.
    """
    if explicit is not None:
        return Path(explicit)
    if os.environ.get("DSBENCH_CACHE_DIR"):
        return Path(os.environ["DSBENCH_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "dsbench"
    return Path.home() / ".cache" / "dsbench"


def _device_name(device: str) -> str:
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return _cpu_name()
    return torch.cuda.get_device_name(dev.index if dev.index is not None else None)


def calibration_key(device: str) -> str:
    """Cache key: hostname, device name, torch version and torch thread count."""
    import torch

    return (
        f"{socket.gethostname()}|{_device_name(device)}|torch {torch.__version__}|"
        f"{torch.get_num_threads()} threads"
    )


def _best_time(
    fn: Callable[[], Any],
    sync: Callable[[], None],
    reps: int,
    inner: int,
    min_seconds: float = 0.0,
) -> float:
    """Best (minimum) seconds per call of ``fn`` over ``reps`` timed groups of ``inner`` calls,
    and more groups (up to 10 x ``reps``) until ``min_seconds`` have passed: on a machine that
    others load now and then, the best is then more likely to fall in a quiet moment."""
    best = math.inf
    began = time.perf_counter()
    done = 0
    while done < reps or (time.perf_counter() - began < min_seconds and done < 10 * reps):
        sync()
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / inner)
        done += 1
    return best


# [Note: a ceiling the benchmark cannot beat]
# A measured peak is only useful as the denominator of "% of peak" if no benchmark reaches past
# it. A single kernel is not enough: on CPUs a copy pays hidden write-allocate traffic, an
# in-place kernel does not, and read-heavy mixes (AdamW reads four streams and writes three)
# run faster than 1:1 read/write ones; a matmul's rate depends on its size. So each ceiling is
# the best over several methods and sizes, with every thread the process may use, and each
# method's rate is recorded in the figure's source. It is still a measurement on a machine that
# may be busy, so pages and tables flag a share above 100% (:func:`pct_text`) rather than show
# it as a plain number.

STREAM_KERNELS = ("sum", "copy", "scale", "add")
"""The memory-bandwidth methods: a read-only sum, a copy, an in-place scale and an in-place add."""
CPU_MATMUL_SIZES = (512, 1024, 2048, 4096)
"""n of the n x n x n CPU matmuls, those of the gemm benchmark's CPU suites (quick: 512-2048,
full: up to 4096); sizes above :data:`CPU_MATMUL_ALWAYS` that would take longer than the time
budget are left out."""
CPU_MATMUL_ALWAYS = 2048
"""Sizes up to this one (the quick suite's) are always measured, however slow the CPU."""
GPU_MATMUL_SIZES = (2048, 4096, 8192)
STREAM_SECONDS = 0.75
"""Each memory kernel is timed for at least this long (more reps than asked when they are quick)."""


def _stream_rates(
    dev: Any, nbytes: int, sync: Callable[[], None], reps: int, inner: int
) -> dict[str, float]:
    """GB/s (bytes read + written, 1e9) of four STREAM-like kernels on ``nbytes`` float32 tensors.

    ``sum`` (src.sum(): nbytes read, nothing written) shows the read bandwidth that read-heavy
    kernels approach; ``copy`` (dst.copy_(src): 2 x nbytes as counted) understates what an
    in-place kernel such as AdamW sees, because on CPUs each written line is also read first
    (write-allocate); the in-place ``scale`` (x.mul_(s): 2 x nbytes) and ``add`` (x.add_(y):
    3 x nbytes) have no such hidden traffic. The memory-bandwidth ceiling is the best of them.
    """
    import torch

    src = torch.empty(nbytes // 4, dtype=torch.float32, device=dev).fill_(1.0)
    dst = torch.empty_like(src).fill_(1.0)  # also faults in dst's pages
    kernels = {
        "sum": (lambda: src.sum(), 1),
        "copy": (lambda: dst.copy_(src), 2),
        "scale": (lambda: dst.mul_(1.0), 2),
        "add": (lambda: dst.add_(src), 3),
    }
    rates = {}
    for name in STREAM_KERNELS:
        fn, streams = kernels[name]
        fn()  # warm-up
        seconds = _best_time(fn, sync, reps, inner, min_seconds=STREAM_SECONDS)
        rates[name] = streams * nbytes / seconds / 1e9
    return rates


def _matmul_rates(
    dev: Any, dtype: Any, sizes: tuple[int, ...], sync: Callable[[], None], *, gpu: bool
) -> tuple[dict[int, float], int]:
    """TFLOP/s (2·n³ per call) of ``a @ b`` per size n, best of the reps; and the reps.

    Random normal inputs (never zeros, which run faster on some hardware). On a CPU a size above
    :data:`CPU_MATMUL_ALWAYS` whose probe predicts more than 0.5 s per call is left out, and a
    size gets fewer reps (at least 3) where ``reps`` would take over a second, so calibration
    stays within seconds."""
    import torch

    budget_s = 0.5
    generator = torch.Generator(device=dev).manual_seed(0)
    reps = 5 if gpu else 10
    probe = None
    if not gpu:
        a = torch.randn(256, 256, generator=generator, device=dev, dtype=dtype)
        probe = _best_time(lambda a=a: a @ a, sync, 5, 1, min_seconds=0.05)
    rates: dict[int, float] = {}
    for n in sizes:
        if n > CPU_MATMUL_ALWAYS and probe is not None and probe * (n / 256) ** 3 > budget_s:
            break
        a = torch.randn(n, n, generator=generator, device=dev, dtype=dtype)
        b = torch.randn(n, n, generator=generator, device=dev, dtype=dtype)
        warm_until = time.perf_counter() + 0.2  # let clocks and library caches settle
        while time.perf_counter() < warm_until:
            a @ b
            sync()
        # several calls per timed group when one is short, so the clock's resolution and the
        # call overhead do not count
        single = _best_time(lambda a=a, b=b: a @ b, sync, 1, 1)
        inner = 10 if gpu else max(1, min(20, int(0.02 / max(single, 1e-9))))
        n_reps = reps if gpu else max(3, min(reps, int(1.0 / (single * inner))))  # ~1 s a size
        seconds = _best_time(lambda a=a, b=b: a @ b, sync, n_reps, inner, min_seconds=0.5)
        rates[n] = 2 * n**3 / seconds / 1e12
        del a, b
    return rates, reps


def _cpu_threads() -> int:
    """Every CPU this process may run on (its affinity mask), at least torch's own count."""
    import torch

    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = os.cpu_count() or 1
    return max(torch.get_num_threads(), allowed)


def measure_ceilings(device: str = "cpu") -> dict[str, Any]:
    """Measure memory bandwidth and matmul rates on ``device``; a few seconds on a small CPU.

    See [Note: a ceiling the benchmark cannot beat]. On a CPU torch runs on every CPU the
    process may use during calibration (:func:`_cpu_threads`), then its thread count is restored.

    * memory: the best of :data:`STREAM_KERNELS` on float32 tensors (256 MiB on CPU, 1 GiB on
      GPU), bytes read + written, best of at least 20 reps and :data:`STREAM_SECONDS` (5 x 20
      calls on GPU) after a warm-up that also faults the pages in;
    * matmul: square ``a @ b`` on random normal data, FLOPs = 2·n³, the best over sizes
      (:data:`CPU_MATMUL_SIZES`: those the gemm benchmark runs; :data:`GPU_MATMUL_SIZES`) of
      up to 10 reps each (5 on GPU); fp32 and bf16 on CPU, fp16, bf16 and fp32 with TF32 off on
      GPU.

    Returns ``{"memory_bandwidth_gbps", "copy_bandwidth_gbps", "matmul_tflops": {dtype: rate},
    "methods": {figure: text}}``.
    """
    import torch

    dev = torch.device(device)
    gpu = dev.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(dev)) if gpu else (lambda: None)
    methods: dict[str, str] = {}
    old_threads = torch.get_num_threads()
    threads = old_threads if gpu else _cpu_threads()
    on = "" if gpu else f" with {threads} torch thread{'s' if threads > 1 else ''}"
    old_precision = torch.get_float32_matmul_precision()
    try:
        torch.set_num_threads(threads)
        torch.set_float32_matmul_precision("highest")  # fp32 means fp32, not TF32
        memory, copy_gbps = _memory_ceiling(dev, sync, on, methods)
        rates = _matmul_ceilings(dev, sync, on, methods)
    finally:
        torch.set_float32_matmul_precision(old_precision)
        torch.set_num_threads(old_threads)
    return {
        "memory_bandwidth_gbps": memory,
        "copy_bandwidth_gbps": copy_gbps,
        "matmul_tflops": rates,
        "methods": methods,
    }


def _memory_ceiling(dev, sync, on: str, methods: dict[str, str]) -> tuple[float, float]:
    """(memory bandwidth ceiling, bytes copied per second) in GB/s, each with its method in
    ``methods`` (see :func:`measure_ceilings`)."""
    gpu = dev.type == "cuda"
    nbytes = (1024 if gpu else 256) * 2**20
    reps = 5 if gpu else 20
    stream = _stream_rates(dev, nbytes, sync, reps, inner=20 if gpu else 1)
    best = max(stream, key=stream.__getitem__)
    copy_gbps = stream["copy"] / 2  # bytes copied per second
    methods["memory_bandwidth_gbps"] = (
        f"the best of four kernels on {nbytes // 2**20} MiB float32 tensors{on}, best of "
        f"at least {reps} reps and {STREAM_SECONDS:g} s each, counting bytes read + written: "
        "read-only Tensor.sum "
        f"{stream['sum']:.1f} GB/s, Tensor.copy_ {stream['copy']:.1f} GB/s, in-place "
        f"Tensor.mul_ {stream['scale']:.1f} GB/s, in-place Tensor.add_ {stream['add']:.1f} "
        f"GB/s; ceiling = {best} (in-place and read-only kernels avoid write-allocate "
        "traffic)"
    )
    methods["copy_bandwidth_gbps"] = (
        "gloo between local ranks moves data through host memory, so its ceiling is the "
        f"bytes copied per second by Tensor.copy_{on} (each byte read once and written "
        f"once): {copy_gbps:.1f} GB/s"
    )
    return stream[best], copy_gbps


def _matmul_ceilings(dev, sync, on: str, methods: dict[str, str]) -> dict[str, float]:
    """The best matmul rate per dtype in TFLOP/s, each with its method in ``methods`` (see
    :func:`measure_ceilings`)."""
    import torch

    gpu = dev.type == "cuda"
    dtypes = (
        [torch.float16, torch.bfloat16, torch.float32] if gpu else [torch.float32, torch.bfloat16]
    )
    sizes = GPU_MATMUL_SIZES if gpu else CPU_MATMUL_SIZES
    rates: dict[str, float] = {}
    for dtype in dtypes:
        by_size, mreps = _matmul_rates(dev, dtype, sizes, sync, gpu=gpu)
        dname = str(dtype).removeprefix("torch.")
        top = max(by_size, key=by_size.__getitem__)
        rates[dname] = by_size[top]
        each = ", ".join(f"{n}: {r:.3g}" for n, r in by_size.items())
        methods[f"matmul_{dname}"] = (
            f"the best over sizes n = {', '.join(map(str, by_size))} of up to {mreps} reps "
            "each (at least 3, about a second a size), "
            f"{dname} n x n x n torch.matmul on random normal data{on} (2*n^3 FLOPs"
            f"{', TF32 off' if dtype == torch.float32 and gpu else ''}; TFLOP/s by n: "
            f"{each}); ceiling at n = {top}"
        )
    return rates


def over_peak_note(measured: bool | None) -> str:
    """Why a share of peak can exceed 100%, for a value that does."""
    if measured:
        return (
            "above the measured ceiling: the calibration (the best this machine showed while it "
            "was measured, see the figure's source) understated it; measure it again with "
            "`dsbench profiles --calibrate`"
        )
    return (
        "above the profile's datasheet figure: boost clocks, or the benchmark counts less work "
        "than the hardware does"
    )


def pct_text(pct: float | None, measured: bool | None = None) -> str:
    """A share of peak for a plain-text table: ``97.2%``, ``n/a``; above 100% never bare:
    ``105.5% (above the measured peak)`` (:func:`over_peak_note` says why it can be)."""
    if pct is None or not math.isfinite(pct):
        return "n/a"
    if pct <= 100.0:
        return f"{pct:.1f}%"
    return f"{pct:.1f}% (above the {'measured' if measured else 'datasheet'} peak)"


def _read_cache(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"version": CACHE_VERSION, "entries": {}}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {"version": CACHE_VERSION, "entries": {}}
    data.setdefault("entries", {})
    return data


def _write_atomic(file: Path, data: dict[str, Any]) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def calibration(
    device: str = "cpu",
    *,
    cache_dir: Path | None = None,
    force: bool = False,
    measure: bool = True,
) -> dict[str, Any] | None:
    """Measured ceilings for ``device`` from the cache, measuring (and caching) when absent.

    ``force`` measures even when cached; ``measure=False`` only reads the cache (None if empty).
    """
    file = resolve_cache_dir(cache_dir) / CACHE_FILE
    key = calibration_key(device)
    data = _read_cache(file)
    entry = data["entries"].get(key)
    if not measure:
        return entry
    if entry is None or force:
        entry = measure_ceilings(device)
        entry["date"] = datetime.date.today().isoformat()
        entry["device"] = device
        data["entries"][key] = entry
        _write_atomic(file, data)
    return entry


#: Which measurement fills which measured figure.
_MEASURED_FROM: dict[str, tuple[str, str | None]] = {
    "memory_bandwidth_gbps": ("memory_bandwidth_gbps", None),
    "link_bandwidth_gbps": ("copy_bandwidth_gbps", None),  # CPU ranks only: see cpu.toml
    "peak_tflops.fp16_matrix": ("matmul_tflops", "float16"),
    "peak_tflops.bf16_matrix": ("matmul_tflops", "bfloat16"),
    "peak_tflops.fp32": ("matmul_tflops", "float32"),
}


def _measured_value(entry: Mapping[str, Any], figure: str, device: str) -> tuple[float | None, str]:
    spec = _MEASURED_FROM.get(figure)
    if spec is None:
        return None, "dsbench has no measurement for this figure"
    key, sub = spec
    if figure == "link_bandwidth_gbps" and not device.startswith("cpu"):
        return None, "the link between GPUs is not measured by calibration"
    value = entry.get(key)
    if sub is not None:
        value = (value or {}).get(sub)
    method_key = f"matmul_{sub}" if sub else key
    if value is None:
        return None, f"not measured on {device}"
    return float(value), entry.get("methods", {}).get(method_key, key)


def _age_text(date: str, today: datetime.date | None = None) -> str:
    """How old a calibration of ``date`` (ISO) is: ``today``, ``1 day old``, ``12 days old``."""
    try:
        days = ((today or datetime.date.today()) - datetime.date.fromisoformat(date)).days
    except (TypeError, ValueError):
        return "of unknown age"
    return "today" if days <= 0 else f"{days} day{'s' if days != 1 else ''} old"


def calibrate(
    profile: Profile,
    device: str = "cpu",
    *,
    cache_dir: Path | None = None,
    force: bool = False,
    measure: bool = True,
) -> Profile:
    """A copy of ``profile`` with its ``measured`` figures filled in from ``device``.

    Measurements are cached (see :func:`resolve_cache_dir`) under :func:`calibration_key` and
    reused unless ``force``; ``measure=False`` uses the cache only and returns ``profile``
    unchanged when nothing is cached. Profiles without measured figures are returned unchanged.
    """
    measured = [name for name, fig in profile.figures().items() if fig.measured]
    if not measured:
        return profile
    entry = calibration(device, cache_dir=cache_dir, force=force, measure=measure)
    if entry is None:
        return profile
    date = entry.get("date", "an unknown date")
    age = _age_text(date)
    top: dict[str, Figure] = {}
    peaks = dict(profile.peak_tflops)
    for name in measured:
        old = profile.figures()[name]
        value, method = _measured_value(entry, name, device)
        source = (
            f"measured on this machine on {date} by dsbench ({age}; a cached calibration, "
            f"a fallback where a run measures no ceilings of its own): {method}"
            if value is not None
            else f"not measured: {method}"
        )
        new = dataclasses.replace(old, value=value, source=source)
        if name.startswith("peak_tflops."):
            peaks[name.removeprefix("peak_tflops.")] = new
        else:
            top[name] = new
    return dataclasses.replace(profile, **top, peak_tflops=peaks)
