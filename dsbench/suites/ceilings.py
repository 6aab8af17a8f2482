"""Ceilings measured side by side: the rows a suite run times, interleaved with its benchmarks,
that its % of peak divides by.

A ceiling measured once and cached is a ceiling of another hour: on a shared VM memory
bandwidth moves by 2x with the neighbours' load, and a benchmark then shows 150% "of peak". So a
run measures the ceilings its rows need as rows of its own (see [Note: ceilings in slices]):

* ``stream[kernel=...]``: STREAM's copy (c = a) and triad (a = b + s*c) over arrays four times
  the last-level cache (and at least 64 MiB; 1 GiB on GPUs), and in-place kernels, without the
  write-allocate traffic a CPU adds to every stored line that was not read first: an axpy, an
  addcmul and, on CPUs, ``update3``, AdamW's own seven streams in one C pass
  (:mod:`dsbench.kernels.cpu_stream`). The memory ceiling is the best of them (bytes read +
  written, as STREAM counts). ``link_bandwidth`` (gloo between local ranks moves data through
  host memory) is the bytes copy moves per second.
* ``matmul[dtype=...,size=...]``: a sweep of square ``a @ b`` over the gemm benchmark's sizes,
  random normal inputs rotated past the cache; the ceiling of a dtype is the best size.

A ceiling is the best row's 90th percentile rate (:data:`CEILING_QUANTILE`), with its 99%
interval; a share of peak carries the interval of the ratio (:func:`apply`). The memory ceiling
is DRAM's, so only a row whose working set is DRAM-sized gets a share of it (a cache-resident or
partly resident row is labelled instead, :mod:`dsbench.hardware.caches`). A share above 100%
whose interval reaches 100% is at the ceiling (``~100%``, :func:`at_note`); one wholly above it
is flagged with the explanations (:func:`over_note`), and the run goes on. A row fails only
where no healthy machine could produce it: its share's interval lies wholly above
:data:`FAIL_SHARE` of the best ceiling, which means its byte or FLOP count is wrong.

These are not in :data:`dsbench.suites.BENCHMARKS`: no suite selects them, the runner adds the
ones its rows need (:func:`needed`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from dsbench.suites.base import (
    Benchmark,
    Case,
    Context,
    Skip,
    Work,
    gbps,
    record_of,
    tflops,
    time_ms,
)

if TYPE_CHECKING:
    from dsbench.hardware import Profile
    from dsbench.records import Row

CEILING_MODES = ("run", "cached")
"""``run``: measure the ceilings the rows need as rows of the run (the default but for the smoke
suite); ``cached``: divide by the cached calibration (``dsbench profiles --calibrate``)."""

STREAM_KERNELS = ("copy", "triad", "axpy", "addcmul", "update3")
CPU_ONLY = ("update3",)
STREAMS = {"copy": 2, "triad": 3, "axpy": 3, "addcmul": 4, "update3": 7}
"""Arrays read + written per element, as STREAM counts (no write-allocate)."""
WHAT = {
    "copy": "c.copy_(a)",
    "triad": "torch.add(b, c, alpha=s, out=a)",
    "axpy": "a.add_(b, alpha=s) (in place: no write-allocate)",
    "addcmul": "a.addcmul_(b, c, value=s) (in place, three reads to a write)",
    "update3": "p, m, v += s*g in one C pass on torch's threads (AdamW's traffic: four reads, "
    "three written in place)",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class StreamParams:
    """A case of :data:`STREAM`."""

    kernel: str
    """One of :data:`STREAM_KERNELS`."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MatmulParams:
    """A case of :data:`MATMUL`: ``size`` x ``size`` by ``size`` x ``size``."""

    dtype: str
    """torch dtype name (the dtypes the run's rows take a share of peak in)."""
    size: int
    """M = N = K."""


def stream_kernels(ctx: Context) -> tuple[str, ...]:
    """The stream kernels a run on ``ctx``'s device measures: all on a CPU, all but
    :data:`CPU_ONLY` on a GPU."""
    return tuple(k for k in STREAM_KERNELS if not (ctx.gpu and k in CPU_ONLY))


def stream_bytes(ctx: Context) -> int:
    """Bytes of each array: four times the last-level cache, at least 64 MiB (1 GiB on GPUs),
    a whole number of float32 elements."""
    from dsbench.measure.timing import cache_bytes

    floor = 2**30 if ctx.gpu else 64 * 2**20
    return max(floor, 4 * (ctx.llc_bytes or cache_bytes(ctx.torch_device))) // 4 * 4


def _stream_grid(suite: str, ctx: Context) -> dict[str, list]:
    return {"kernel": list(stream_kernels(ctx))}


ARRAYS = {"copy": 2, "triad": 3, "axpy": 2, "addcmul": 3, "update3": 4}
"""Distinct arrays each kernel touches: its working set is this many arrays."""


def _stream_work(params: StreamParams, ctx: Context) -> Work:
    kernel, n = params.kernel, stream_bytes(ctx)
    return Work(bytes=float(STREAMS[kernel] * n), working_set=float(ARRAYS[kernel] * n))


def _stream_setup(params: StreamParams, ctx: Context) -> Case:
    import torch

    n = stream_bytes(ctx) // 4
    kernel = params.kernel
    if kernel == "update3":
        return _update3_setup(n, ctx)
    a = torch.ones(n, device=ctx.torch_device)  # written, so every page is faulted in now
    b = torch.ones(n, device=ctx.torch_device) if kernel != "copy" else None
    c = torch.ones(n, device=ctx.torch_device) if kernel != "axpy" else None
    fn = {
        "copy": lambda: c.copy_(a),
        "triad": lambda: torch.add(b, c, alpha=0.5, out=a),
        "axpy": lambda: a.add_(b, alpha=1e-9),
        "addcmul": lambda: a.addcmul_(b, c, value=1e-9),
    }[kernel]
    notes = {"what": WHAT[kernel], "array_bytes": n * 4}
    return Case(fn=fn, work=_stream_work(params, ctx), notes=notes)


def _update3_setup(n: int, ctx: Context) -> Case:
    import torch

    from dsbench.kernels import cpu_stream

    why = cpu_stream.why_not()  # a GPU run never asks for it (stream_kernels)
    if why is not None:
        raise Skip(f"update3 needs its C build: {why}")
    p, m, v, g = (torch.ones(n) for _ in range(4))  # written, so every page is faulted in now
    threads = torch.get_num_threads()
    notes = {"what": WHAT["update3"], "array_bytes": n * 4, "threads": threads}
    return Case(
        fn=lambda: cpu_stream.update3(p, m, v, g, 1e-9, threads),
        work=_stream_work(StreamParams(kernel="update3"), ctx),
        notes=notes,
    )


STREAM = Benchmark(
    name="stream",
    description="memory bandwidth ceiling: STREAM copy and triad, an in-place axpy and "
    "addcmul, and on CPUs AdamW's access pattern in C, over arrays four times the last-level "
    "cache",
    grid=_stream_grid,
    params=StreamParams,
    setup=_stream_setup,
    work_of=_stream_work,
    metrics=(gbps("bandwidth", peak=None), time_ms()),
    suites=(),
)


def matmul_sizes(suite: str, ctx: Context) -> list[int]:
    """The gemm benchmark's sizes in ``suite`` (those of quick for smoke, training and
    inference)."""
    from dsbench.suites.gemm import _grid

    return sorted(_grid(suite if suite == "full" else "quick", ctx)["size"])


def _matmul_work(params: MatmulParams, ctx: Context) -> Work:
    n = params.size
    return Work(flops=2.0 * n**3)


def _matmul_setup(params: MatmulParams, ctx: Context) -> Case:
    import torch

    from dsbench.measure.timing import rotation_count
    from dsbench.suites.base import dtype_bits

    n, device = params.size, ctx.torch_device
    dtype = getattr(torch, params.dtype)
    g = torch.Generator(device=device).manual_seed(0)
    sets = [
        tuple(torch.randn(n, n, device=device, generator=g).to(dtype) for _ in range(2))
        for _ in range(rotation_count(3 * n * n * dtype_bits(params.dtype) // 8, device))
    ]
    notes = {"what": f"torch.matmul, {n}x{n}x{n}, random normal inputs"}
    return Case(fn=torch.matmul, args=sets, work=_matmul_work(params, ctx), notes=notes)


def _matmul_grid(suite: str, ctx: Context) -> dict[str, list]:
    return {"dtype": [], "size": matmul_sizes(suite, ctx)}  # dtypes: those rows need


MATMUL = Benchmark(
    name="matmul",
    description="matmul ceiling: square torch.matmul over the gemm benchmark's sizes",
    grid=_matmul_grid,
    params=MatmulParams,
    setup=_matmul_setup,
    work_of=_matmul_work,
    metrics=(
        tflops(peak=None, description="2*n^3 / time"),
        time_ms(),
    ),
    suites=(),
)

CEILINGS = {b.name: b for b in (STREAM, MATMUL)}


# ---------------------------------------------------------------------------- which and where

FIGURE_OF = {"mem_bandwidth": "memory_bandwidth_gbps", "link_bandwidth": "link_bandwidth_gbps"}


def _dtype_of(kind: str) -> str | None:
    return kind.removeprefix("flops:") if kind.startswith("flops:") else None


def needed(kinds: Iterable[str], profile: Profile, suite: str, ctx: Context) -> list[tuple]:
    """``(benchmark, params)`` of the ceiling rows that the peak kinds ``kinds`` need: those whose
    profile figure is measured on the machine (a datasheet figure needs none)."""
    out: list[tuple] = []
    dtypes: list[str] = []
    stream = False
    for kind in dict.fromkeys(kinds):
        try:
            fig = profile.peak(kind)
        except ValueError:
            continue
        if not fig.measured:
            continue
        dtype = _dtype_of(kind)
        if dtype is None:
            stream = True
        elif dtype not in dtypes:
            dtypes.append(dtype)
    if stream:
        out += [(STREAM, {"kernel": k}) for k in stream_kernels(ctx)]
    for dtype in dtypes:
        out += [(MATMUL, {"dtype": dtype, "size": n}) for n in matmul_sizes(suite, ctx)]
    return out


@dataclasses.dataclass(frozen=True)
class Ceiling:
    """A ceiling this run measured: the best row's :data:`CEILING_QUANTILE` rate, its 99%
    interval, that row's id and the figure's source text."""

    value: float
    low: float
    high: float
    row: str
    source: str


CEILING_QUANTILE = 0.9
"""A ceiling is the rate its best row reaches in its best tenth of repetitions: the machine's
best is what a benchmark's median may come near, and the median of a short kernel timed in
slices can sit below a benchmark that reaches further (see [Note: a ceiling the benchmark cannot
beat] in dsbench.hardware.ceilings)."""


def ceilings_from(rows: Iterable[Row], slices: int) -> dict[str, Ceiling]:
    """Peak kind -> this run's ceiling, from its ceiling rows (``mem_bandwidth``,
    ``link_bandwidth``, ``flops:<dtype>``): the :data:`CEILING_QUANTILE` of the best row's rates,
    with its 99% interval (:func:`dsbench.stats.quantile_ci`)."""
    from dsbench.records import OK
    from dsbench.stats import quantile_ci

    top: dict[str, tuple[tuple, Row]] = {}
    each: dict[str, list[str]] = {}
    for row in rows:
        if row.status != OK or row.name not in CEILINGS or not row.samples:
            continue
        q = quantile_ci(row.samples, CEILING_QUANTILE)
        case = record_of(CEILINGS[row.name], row.params)
        kind = "mem_bandwidth" if isinstance(case, StreamParams) else f"flops:{case.dtype}"
        each.setdefault(kind, []).append(f"{row.id} {q[0]:.4g}")
        if kind not in top or q[0] > top[kind][0][0]:
            top[kind] = (q, row)
        if isinstance(case, StreamParams) and case.kernel == "copy":
            top["link_bandwidth"] = (q, row)
    pct = f"{CEILING_QUANTILE * 100:.0f}th percentile"
    out = {}
    for kind, ((value, low, high, _), row) in top.items():
        scale = 0.5 if kind == "link_bandwidth" else 1.0  # bytes copied, not read + written
        how = (
            "half the bytes STREAM copy reads and writes per second (gloo between local ranks "
            "moves data through host memory)"
            if kind == "link_bandwidth"
            else f"the best of the rows' {pct}s ({', '.join(each[kind])} {row.unit})"
        )
        source = (
            f"measured in this run, interleaved with its benchmarks in {slices} slices: {how}; "
            f"the {pct} of {len(row.samples)} repetitions of {row.id}, 99% interval "
            f"{low * scale:.4g}-{high * scale:.4g} {row.unit}"
        )
        out[kind] = Ceiling(value * scale, low * scale, high * scale, row.id, source)
    return out


def profile_with(profile: Profile, ceilings: dict[str, Ceiling]) -> Profile:
    """``profile`` with its measured figures replaced by this run's ceilings, where it has one."""
    from dsbench.hardware.schema import DTYPE_PEAKS

    top, peaks = {}, dict(profile.peak_tflops)
    for kind, c in ceilings.items():
        dtype = _dtype_of(kind)
        name = FIGURE_OF.get(kind) if dtype is None else DTYPE_PEAKS.get(dtype, dtype)
        old = getattr(profile, name) if dtype is None else peaks.get(name)
        if old is None or not old.measured:
            continue
        new = dataclasses.replace(old, value=c.value, source=c.source)
        if dtype is None:
            top[name] = new
        else:
            peaks[name] = new
    return dataclasses.replace(profile, **top, peak_tflops=peaks)


FAIL_SHARE = 150.0
"""A share of a ceiling measured in the run whose 99% interval lies wholly above this (%) fails
its row: no healthy machine moves 1.5x the bytes its best stream kernel does at the same working
set, or computes 1.5x its best matmul; the counted work is wrong."""


def above_message(row: Row, metric: str, pct_low: float, c: Ceiling, kind: str) -> str:
    """The failure of a row whose share of this run's ceiling lies wholly above
    :data:`FAIL_SHARE`."""
    m = row.metrics[metric]
    why = (
        "its byte count overstates the traffic"
        if _dtype_of(kind) is None
        else "its FLOP count overstates the work"
    )
    return (
        f"{m.value:.4g} {m.unit} is {FAIL_SHARE / 100:g}x above this run's {kind} ceiling "
        f"{c.value:.4g} {m.unit} ({c.row}; at least {pct_low:.1f}% of it at 99% confidence), "
        f"more than any healthy machine reaches: {why}"
    )


def at_note(pct: float, ci: list[float], c: Ceiling, kind: str) -> str:
    """A row whose share's point estimate passes 100% of this run's ceiling but whose 99%
    interval reaches down to 100%: the two measurements cannot tell it from the ceiling."""
    return (
        f"{pct:.1f}% of this run's {kind} ceiling ({c.row}), 99% interval {ci[0]:.1f}-"
        f"{ci[1]:.1f}%: at the ceiling, within the two measurements' spread"
    )


def over_note(pct: float, c: Ceiling, kind: str) -> str:
    """Why a row's share of this run's ceiling can lie wholly above 100% without a bug, for one
    that does (below :data:`FAIL_SHARE`)."""
    if _dtype_of(kind) is None:
        why = (
            "a shared machine's bandwidth moves between the ceiling's slices; where no "
            "ceiling kernel moves this case's mix of streams (AdamW's update3 runs on CPUs "
            "only), a memory system can serve that mix faster"
        )
    else:
        why = "the matmul ceiling's sizes differ from this case's; clocks moved between slices"
    return (
        f"{pct:.1f}% of this run's {kind} ceiling ({c.row}), under the {FAIL_SHARE:.0f}% that "
        f"would mean a wrong count: {why}"
    )


def _dram_share(row: Row) -> bool:
    """Whether a row's memory-bound metrics take a share of the DRAM ceiling: no for a row whose
    working set sits (partly) in a cache."""
    res = row.notes.residency if row.notes else None
    return not isinstance(res, dict) or res.get("kind") == "dram"


def apply(rows: list[Row], ceilings: dict[str, Ceiling], profile: Profile) -> list[Row]:
    """Rows with every share of a measured peak against this run's ceiling, with its interval
    (``pct_ci99``, from the row's and the ceiling's 99% intervals), but for a cache-resident
    row's memory share; a row above 100% whose interval reaches 100% is at the ceiling
    (``notes.at_ceiling``, :func:`at_note`), one wholly above it is flagged
    (``notes.over_ceiling``, :func:`over_note`);
    one whose share lies wholly above :data:`FAIL_SHARE` fails with both figures
    (:func:`above_message`)."""
    from dsbench.records import OK, UNSET, Notes, Peak

    out = []
    for row in rows:
        if row.status != OK or row.name in CEILINGS or not isinstance(row.metrics, dict):
            out.append(row)
            continue
        metrics, failure, over = dict(row.metrics), None, None
        for name, m in row.metrics.items():
            if not isinstance(m.peak, Peak) or m.peak.measured is not True or not m.value:
                continue
            peak, kind = m.peak, m.peak.kind
            c = ceilings.get(kind) if isinstance(kind, str) else None
            if c is None or (_dtype_of(kind) is None and not _dram_share(row)):
                continue
            lo, hi = (m.ci99 if isinstance(m.ci99, list) else [m.value, m.value])[:2]
            pct = 100.0 * m.value / c.value
            ci = [100.0 * min(lo, hi) / c.high, 100.0 * max(lo, hi) / c.low]
            new_peak = dataclasses.replace(peak, value=c.value, source=c.source, na=UNSET,
                                           ci99=[c.low, c.high], row=c.row)  # fmt: skip
            metrics[name] = dataclasses.replace(m, pct_of_peak=pct, pct_ci99=ci, peak=new_peak)
            if ci[0] > FAIL_SHARE and failure is None:
                failure = above_message(row, name, ci[0], c, kind)
            elif pct > 100.0 and name == row.metric:
                over = ("over_ceiling", over_note(pct, c, kind)) if ci[0] > 100.0 else (
                    "at_ceiling", at_note(pct, ci, c, kind))  # fmt: skip
        primary = metrics.get(row.metric) if isinstance(row.metric, str) else None
        new = dataclasses.replace(row, metrics=metrics)
        if over is not None:
            base = row.notes if isinstance(row.notes, Notes) else Notes()
            notes = dataclasses.replace(base, extra={**base.extra, over[0]: over[1]})
            new = dataclasses.replace(new, notes=notes)
        if primary is not None and isinstance(primary.peak, Peak):
            new = dataclasses.replace(new, pct_of_peak=primary.pct_of_peak, peak=primary.peak)
        if failure is not None:
            new = dataclasses.replace(new, status="failed", error=failure)
        out.append(new)
    return out


__all__ = [
    "CEILINGS",
    "MATMUL",
    "STREAM",
    "Ceiling",
    "apply",
    "ceilings_from",
    "needed",
    "profile_with",
]
