"""Benchmark definitions: what to run, over which parameters, the work it does, what it reports.

A :class:`Benchmark` is data plus a ``setup`` function. Its cases are dicts of the grid's
parameters (as rows and result files store them); its functions get a case as a frozen typed
record, its ``params`` class (:func:`record_of`). ``setup(params, ctx)`` allocates inputs and
returns a :class:`Case`: the callable to time, its argument sets (rotated by the timing
core), and the :class:`Work` one call performs (FLOPs, bytes moved, bytes on the wire). Metrics
are functions of that work and the measured seconds, so the same definition serves
``dsbench run`` and the asv modules in ``benchmarks/``; nothing is defined twice.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsbench.records import (
    METRIC_UNITS,
    Direction,
    case_id,  # noqa: F401  (re-exported: suites.case_id)
)

if TYPE_CHECKING:
    import torch


class Skip(Exception):
    """Raised by ``setup`` when a case cannot run here; the message is the reason."""


@dataclass(frozen=True, kw_only=True)
class Work:
    """What one call does, counted (not measured)."""

    flops: float = 0.0
    bytes: float = 0.0
    """Bytes moved to and from memory (reads + writes)."""
    wire_bytes: float = 0.0
    """Collectives: the data size S of nccl-tests' algbw = S / t."""
    items: float = 0.0
    """Problem-specific count (parameters for an optimizer step, samples for a training step)."""
    tokens: float = 0.0
    """Tokens processed (training and inference workloads)."""
    busbw_factor: float = 0.0
    """Collectives: busbw = algbw x factor (AllReduce 2(n-1)/n, ReduceScatter (n-1)/n)."""
    working_set: float = 0.0
    """Memory-bound cases: the distinct bytes one call touches (AdamW's p, g, m and v: 16
    B/param), which decide whether the case sits in a cache (:mod:`dsbench.hardware.caches`);
    0: not counted (no cache residency is judged)."""
    floor_s: float = 0.0
    """Training steps: seconds of the step's compute alone on this rank (forward, backward and
    the optimizer on its shard, no communication), measured in the same run; 0: not measured."""


@dataclass(frozen=True, kw_only=True)
class Metric:
    """A reported quantity derived from the work of one call and its time in seconds.

    ``value(work, seconds)`` must be monotonic in seconds, so samples and CI bounds convert.
    ``peak`` names the hardware-profile ceiling for % of peak (see ``Profile.peak``), or None.
    ``unit`` and ``direction`` come from the metrics table (:data:`dsbench.records.METRIC_UNITS`,
    which readers of result files use without torch) unless given.
    """

    name: str
    value: Callable[[Work, float], float]
    unit: str = ""
    direction: Direction | None = None  # which way is better
    peak: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.unit and self.direction is not None:
            return
        if self.name not in METRIC_UNITS:
            raise ValueError(f"metric '{self.name}' is not in dsbench.records.METRIC_UNITS: "
                             "add it there, or give its unit and direction")  # fmt: skip
        unit, direction = METRIC_UNITS[self.name]
        object.__setattr__(self, "unit", self.unit or unit)
        object.__setattr__(self, "direction", self.direction or direction)


def time_ms() -> Metric:
    return Metric(
        name="time",
        value=lambda w, t: t * 1e3,
        description="median time per call",
    )


def gbps(name: str = "bandwidth", peak: str | None = "mem_bandwidth") -> Metric:
    return Metric(
        name=name,
        value=lambda w, t: w.bytes / t / 1e9,
        peak=peak,
        description="bytes moved / time, 1 GB = 1e9 B",
    )


def tflops(name: str = "throughput", peak: str | None = "flops:{dtype}", description: str = "")\
        -> Metric:  # fmt: skip
    """TFLOP/s: the counted FLOPs per second, 1e12; ``peak`` its ceiling's kind."""
    return Metric(name=name, value=lambda w, t: w.flops / t / 1e12, peak=peak,
                  description=description or "FLOPs / time, 1 TFLOP = 1e12")  # fmt: skip


DTYPE_BITS = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16}
"""Bits per element of the dtypes the definitions use, so counting work needs no torch."""


def dtype_bits(name: str) -> int:
    """Bits per element of torch dtype ``name`` (``torch.finfo(dtype).bits``); torch is imported
    only for a dtype outside :data:`DTYPE_BITS`."""
    if name in DTYPE_BITS:
        return DTYPE_BITS[name]
    import torch

    return torch.finfo(getattr(torch, name)).bits


@dataclass(kw_only=True)
class Context:
    """Where a case runs. Picklable, so spawned ranks can rebuild their cases."""

    device: str = "cpu"
    """torch device string for this process, e.g. 'cpu' or 'cuda:1'."""
    backend: str = "cpu"
    """'cpu', 'cuda' or 'rocm'."""
    suite: str = "quick"
    rank: int = 0
    world_size: int = 1
    cpu_flags: tuple[str, ...] = ()
    device_count: int = 0
    llc_bytes: int = 0
    """The device's last-level cache (``dsbench env``'s ``caches``), which memory-bound suites
    size their cases by (one fits it, one is 4x it: :func:`dsbench.hardware.caches.ladder_sizes`);
    0: unknown, the suites' own sizes only (publish's modelled tables, which allocate nothing)."""
    ranks: int | None = None
    """The ranks every multi-rank benchmark spawns (``dsbench run --ranks N``); None: each
    benchmark's own (2 on CPUs, one per visible GPU)."""

    @property
    def torch_device(self) -> torch.device:
        import torch

        return torch.device(self.device)

    @property
    def gpu(self) -> bool:
        return self.backend in ("cuda", "rocm")


@dataclass(kw_only=True)
class Case:
    fn: Callable
    work: Work
    args: list[tuple] = field(default_factory=lambda: [()])
    """Argument sets rotated between repetitions (see ``timing.rotation_count``)."""
    notes: dict = field(default_factory=dict)
    """Facts about how the case ran (e.g. which torch variant), stored in the result file."""
    teardown: Callable[[], None] | None = None
    """Called after timing (e.g. an engine's destroy(), before the process group goes)."""
    profile: Callable[[], dict] | None = None
    """Called after timing, before ``teardown``, on every rank: a few instrumented calls whose
    findings (rank 0's) join the row's notes, e.g. a training step's phase breakdown."""


RECORD_FUNCTIONS = ("setup", "work_of", "keep", "unavailable")
"""The :class:`Benchmark` functions that take a case's parameters, as its ``params`` record."""


@dataclass(frozen=True, kw_only=True)
class Benchmark:
    name: str
    description: str
    grid: Callable[[str, Context], dict[str, list]]
    """``grid(suite, ctx)`` -> parameter name -> values; cases are the cartesian product."""
    setup: Callable[[Any, Context], Case]
    """``setup(params, ctx)`` -> the :class:`Case`, its inputs allocated on ``ctx``'s device;
    raises :class:`Skip` where the case cannot run here."""
    metrics: tuple[Metric, ...]
    """The first is the primary metric (the one compare ranks changes by)."""
    params: type | None = None
    """The frozen dataclass of a case's parameters (its fields the grid's keys), which
    :data:`RECORD_FUNCTIONS` take: each is called with a case's dict (or record) and gets the
    record (:func:`record_of`). None: they get the dict as it is (tests' toy benchmarks)."""
    ranks_param: str | None = None
    """For multi-rank benchmarks, the parameter holding the number of ranks to spawn."""
    min_ranks: int = 2
    """Multi-rank benchmarks: the fewest ranks a case can run on (a collective needs 2; a
    training step runs on 1). Fewer make skipped rows that say so, and nothing is spawned."""
    unavailable: Callable[[Any], str | None] | None = None
    """``unavailable(params)`` -> why a multi-rank case cannot run in this environment (e.g.
    DeepSpeed not installed), checked before any rank is spawned; None: it can."""
    interleave: tuple[str, ...] = ()
    """Multi-rank benchmarks: cases that differ only in these parameters (e.g. ``engine``) are
    timed in alternating rounds (A B, B A, ...; ``TimingConfig.rounds``) inside one launch, so
    that a drift in machine load falls on both sides of their ratio alike."""
    keep: Callable[[Any], bool] | None = None
    """``keep(params)`` -> whether a combination of the grid is a case at all (e.g. DeepSpeed
    only with torch.distributed's collectives); None: every combination is."""
    suites: tuple[str, ...] = ("smoke", "quick", "full")
    work_of: Callable[[Any, Context], Work] | None = None
    """``work_of(params, ctx)`` -> the :class:`Work` one call of the case does, counted without
    allocating anything (``setup`` returns the same, from the same function). Publish uses it
    to model cases no result file holds yet; None where the count needs the case built."""

    def __post_init__(self) -> None:
        if self.params is None:
            return
        for name in RECORD_FUNCTIONS:
            fn = getattr(self, name)
            if fn is not None:
                object.__setattr__(self, name, _taking_record(self, fn))

    @property
    def primary(self) -> Metric:
        return self.metrics[0]

    def cases(self, suite: str, ctx: Context) -> list[dict]:
        grid = self.grid(suite, ctx)
        keys = list(grid)
        cases = (
            dict(zip(keys, values, strict=True))
            for values in itertools.product(*(grid[k] for k in keys))
        )
        return [c for c in cases if self.keep is None or self.keep(c)]


class ParamsError(ValueError):
    """A case's parameters that its benchmark's record does not take: an unknown key, or a
    missing one without a default."""


def record_of(kind: Benchmark | type, params: Mapping[str, Any] | Any) -> Any:
    """The typed record of a case's parameters: ``kind`` is a :class:`Benchmark` (its
    ``params`` record class) or a record class; ``params`` a dict of its fields (a grid's case,
    a row's ``params``), or a record of that class, returned as it is. Raises
    :class:`ParamsError` naming the benchmark's parameters on an unknown or a missing key."""
    cls = kind.params if isinstance(kind, Benchmark) else kind
    if cls is None or isinstance(params, cls):
        return params
    fields = {f.name: f for f in dataclasses.fields(cls)}
    whose = kind.name if isinstance(kind, Benchmark) else cls.__name__
    valid = ", ".join(fields)
    unknown = [k for k in params if k not in fields]
    if unknown:
        raise ParamsError(f"{whose} has no parameter {unknown[0]!r}; its parameters: {valid}")
    missing = [
        name
        for name, f in fields.items()
        if name not in params
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ParamsError(f"{whose} needs parameter {missing[0]!r}; its parameters: {valid}")
    return cls(**params)


def _taking_record(bench: Benchmark, fn: Callable) -> Callable:
    """``fn(params, *rest)`` called with a case's dict or record: it gets ``bench``'s record."""

    @functools.wraps(fn)
    def call(params, *rest):
        return fn(record_of(bench, params), *rest)

    return call


def impl_choices(op: str, suite: str, ctx: Context) -> list[str]:
    """Registry implementations of ``op`` a suite measures: in ``full`` every registered one
    (those that cannot run here become skipped rows saying why); otherwise those that really run
    here (not in Triton's interpreter), reference first."""
    from dsbench.kernels import registry

    names = registry.names(op)
    reference = registry.DEFAULTS[op]
    ordered = [reference] + [n for n in names if n != reference]
    if suite == "full":
        return ordered
    device = "cuda" if ctx.gpu else "cpu"
    return [
        n
        for n in ordered
        if (lambda ok, why: ok and not why)(*registry.get(op, n).available(device))
    ]
