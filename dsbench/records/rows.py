"""A run's rows (:class:`Row`) and what they hold: metrics, peaks, rounds, summary statistics,
the counted work, peak memory, notes and the timing core's record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .base import UNSET, Record, RecordError, Unset, is_number
from .metrics import DIRECTIONS, Direction

STATUSES = ("ok", "failed", "skipped", "interrupted")
"""A row's ``status``: measured, failed (``error`` says why), skipped (``reason``), or not run
because the run was stopped."""
OK = "ok"
SUMMARY_FIELDS = ("n", "median", "q1", "q3", "iqr", "ci_low", "ci_high", "ci_level",
                  "ci_exact", "mean", "stdev", "min", "max")  # fmt: skip
"""The keys of an ok row's ``stats`` (:class:`dsbench.stats.Summary`; tests check they match)."""

NESTED = dict[str, tuple[str, type[Record]]]


def case_id(name: str, params: dict) -> str:
    """Stable identifier: ``name[k1=v1,k2=v2]`` with keys sorted."""
    if not params:
        return name
    return name + "[" + ",".join(f"{k}={params[k]}" for k in sorted(params)) + "]"


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Peak(Record):
    """The profile figure a value is a percentage of (``dsbench.hardware.Profile.peak``)."""

    kind: str | Unset = UNSET  # which peak, parameters filled in: bf16_tflops, hbm_gbps
    value: float | Unset | None = UNSET  # the figure; None where the profile has none
    unit: str | Unset = UNSET  # TFLOP/s, GB/s
    source: str | Unset | None = UNSET  # where the figure comes from: a datasheet, measured
    measured: bool | Unset = UNSET  # a ceiling measured on the machine, not a datasheet's
    profile: str | Unset = UNSET  # the hardware profile's name
    na: str | Unset = UNSET  # why there is no figure
    ci99: list[float] | Unset = UNSET  # a ceiling measured in the run: its 99% interval
    row: str | Unset = UNSET  # ... and the ceiling row it comes from (dsbench.suites.ceilings)


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class MetricValue(Record):
    """One metric of a row (``row.metrics[name]``): the median over the samples and its interval."""

    value: float | Unset = UNSET
    """The median (after ``dsbench ab``: the geometric mean of the launches' medians)."""
    unit: str | Unset = UNSET
    direction: Direction | Unset = UNSET
    ci99: list[float] | Unset = UNSET
    """[low, high]: the 99% interval of the median (after ``dsbench ab``: of the geometric mean,
    over the launches)."""
    pct_of_peak: float | Unset | None = UNSET
    """``100 * value / peak.value`` for metrics with a peak; None where the profile has none."""
    pct_ci99: list[float] | Unset = UNSET
    """[low, high] of ``pct_of_peak`` against a ceiling measured in the same run, from both
    medians' 99% intervals (absent for a datasheet's or a cached ceiling)."""
    peak: Peak | Unset | None = UNSET

    _NESTED: ClassVar[NESTED] = {"peak": ("one", Peak)}


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Round(Record):
    """``n`` consecutive samples of a row, from launch ``launch`` (schema 3, see results.py)."""

    launch: int
    n: int

    @classmethod
    def check(cls, data: dict) -> None:
        if not all(isinstance(data.get(k), int) for k in ("launch", "n")):
            raise RecordError("is not a {launch, n} count")


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Stats(Record):
    """Summary statistics of a row's samples (:class:`dsbench.stats.Summary`, its fields
    :data:`SUMMARY_FIELDS`): the median with its interval, the spread, the extremes."""

    n: int | Unset = UNSET
    median: float | Unset = UNSET
    q1: float | Unset = UNSET
    q3: float | Unset = UNSET
    iqr: float | Unset = UNSET
    ci_low: float | Unset = UNSET
    ci_high: float | Unset = UNSET
    ci_level: float | Unset = UNSET
    ci_exact: bool | Unset = UNSET
    """False when there are too few samples for ``ci_level``: the interval is then min..max."""
    mean: float | Unset = UNSET
    stdev: float | Unset = UNSET
    min: float | Unset = UNSET
    max: float | Unset = UNSET

    @classmethod
    def of(cls, summary) -> Stats:
        """From a :class:`dsbench.stats.Summary` (or anything with its fields)."""
        return cls(**{k: getattr(summary, k) for k in SUMMARY_FIELDS})


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class CountedWork(Record):
    """A row's ``work``: what one call does, counted (``dsbench.suites.Work``)."""

    flops: float | Unset = UNSET
    bytes: float | Unset = UNSET
    """Bytes moved to and from memory (reads + writes)."""
    wire_bytes: float | Unset = UNSET
    """Collectives: the data size S of nccl-tests' algbw = S / t."""
    items: float | Unset = UNSET
    tokens: float | Unset = UNSET
    busbw_factor: float | Unset = UNSET
    working_set: float | Unset = UNSET
    """Memory-bound cases: the distinct bytes one call touches (cache residency)."""
    floor_s: float | Unset = UNSET
    """Training steps: seconds of the step's compute alone on this rank; 0: not measured."""


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Memory(Record):
    """A row's ``memory``: peaks over the timed calls (``dsbench.measure.memory.PeakMemory``), the
    largest rank's; None or absent where nothing was measured."""

    host_peak_rss_bytes: int | Unset | None = UNSET
    host_rss_start_bytes: int | Unset | None = UNSET
    host_peak_reset: bool | Unset = UNSET
    """Whether the kernel's peak could be reset first (else the peak is the process's)."""
    host_peak_added_bytes: int | Unset | None = UNSET
    """The peak minus the resident set before the case was set up: what the case added."""
    device_peak_allocated_bytes: int | Unset | None = UNSET
    device_peak_reserved_bytes: int | Unset | None = UNSET
    fresh_process: Memory | Unset | None = UNSET
    """Interleaved cases: the same taken with the case alone in fresh processes."""

    _NESTED: ClassVar[NESTED] = {}  # fresh_process: set below (the class names itself)


Memory._NESTED = {"fresh_process": ("one", Memory)}

DEVICE_PEAK = "device peak allocated"
FRESH_RSS = "peak RSS, case alone in fresh ranks"


def case_peak(m: Memory | None) -> tuple[str, float] | None:
    """The peak memory of the case itself, and what it is: the device allocator's peak (reset
    before the case), taken from the case run alone in fresh ranks where the row has that
    (``fresh_process``), else the resident set's peak there; None where the row has neither
    (a resident set taken in a process that ran other cases first holds what they left)."""
    if not isinstance(m, Memory):
        return None
    alone = m.fresh_process if isinstance(m.fresh_process, Memory) else None
    for src in (alone, m):
        if src is not None and isinstance(src.device_peak_allocated_bytes, int):
            return DEVICE_PEAK, float(src.device_peak_allocated_bytes)
    if alone is not None and isinstance(alone.host_peak_rss_bytes, int):
        return FRESH_RSS, float(alone.host_peak_rss_bytes)
    return None


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Phases(Record):
    """A profiled training step's phases, ms each (``dsbench.suites.step_floor``)."""

    forward: float | Unset = UNSET
    backward: float | Unset = UNSET
    reduce_scatter: float | Unset = UNSET
    optimizer: float | Unset = UNSET
    allgather: float | Unset = UNSET
    other: float | Unset = UNSET
    note: str | Unset = UNSET
    """Why a phase is missing or approximate."""


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Notes(Record):
    """A row's ``notes``: what the case reports about itself. Each benchmark has its own keys
    (``extra``); declared are those code reads, a training step's."""

    phases_ms: Phases | Unset = UNSET
    """Training steps profiled after timing: where a step's time goes."""
    floor_ms: dict[str, float] | Unset = UNSET
    """Training steps: the compute-only floor's parts (forward_backward, optimizer, ...)."""
    residency: dict[str, Any] | Unset = UNSET
    """Memory-bound cases: where the working set lives against the last-level cache
    (``dsbench.hardware.caches.Residency.to_dict``: kind, working_set_bytes, text, cache)."""

    _NESTED: ClassVar[NESTED] = {"phases_ms": ("one", Phases)}


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Timing(Record):
    """A row's ``timing``: the timing core's record (``dsbench.measure.timing.Measurement``)."""

    samples: list[float] | Unset = UNSET
    """Seconds per repetition (the slowest rank's)."""
    summary: Stats | Unset = UNSET
    warmup_reps: int | Unset = UNSET
    rotations: int | Unset = UNSET
    timer: str | Unset = UNSET
    l2_flushed: bool | Unset = UNSET
    ranks: int | Unset = UNSET
    rounds: int | Unset = UNSET
    round_sizes: list[int] | Unset = UNSET

    _NESTED: ClassVar[NESTED] = {"summary": ("one", Stats)}


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Row(Record):
    """One benchmark case of a run (``benchmarks[i]`` of a result file), what ``dsbench run``,
    ``ab``, ``soak``, ``verify-gpu`` and the asv reader write and compare and publish read.
    Fields in the order ``dsbench run`` writes them."""

    # - Which case
    id: str
    """``name[k1=v1,...]`` (:func:`case_id`): what pairs rows across runs."""
    name: str
    """The benchmark (``adamw``, ``train_step``, ``soak.memory``)."""
    params: dict[str, Any]
    """The case's parameters, as the benchmark's grid names them (free-form per benchmark)."""
    status: str
    """One of :data:`STATUSES`."""
    error: str | Unset = UNSET
    """Why a ``failed`` row failed (one line)."""
    reason: str | Unset = UNSET
    """Why a ``skipped`` row was skipped."""
    # - The primary metric
    metric: str | Unset = UNSET
    unit: str | Unset = UNSET
    direction: Direction | Unset = UNSET
    value: float | Unset = UNSET
    """The primary metric's centre: the median, or over several launches the geometric mean of
    their medians (:func:`dsbench.stats.centre`)."""
    samples: list[float] | Unset = UNSET
    """The primary metric per timed repetition, in order (absent: asv kept none)."""
    rounds: list[Round] | Unset = UNSET
    """How ``samples`` split into rounds, in order (schema 3)."""
    stats: Stats | Unset = UNSET
    """:class:`dsbench.stats.Summary` of the samples, keys :data:`SUMMARY_FIELDS`."""
    pct_of_peak: float | Unset | None = UNSET
    """The primary metric as a percentage of the profile's peak (None: no peak figure)."""
    peak: Peak | Unset | None = UNSET
    # - Everything measured alongside
    metrics: dict[str, MetricValue] | Unset = UNSET
    """Every metric of the benchmark, the primary included, by name."""
    work: CountedWork | Unset = UNSET
    """The counted work (``dsbench.suites.Work``: flops, bytes, wire_bytes, items, ...)."""
    memory: Memory | Unset | None = UNSET
    """Peak memory (host RSS, device peaks; ``fresh_process`` for a case run alone)."""
    notes: Notes | Unset = UNSET
    """What the case reports about itself (engine settings, phases, work differences)."""
    timing: Timing | Unset = UNSET
    """The timing core's record (raw seconds, warm-up, timer, rounds)."""
    # - Written by other tools
    asv: dict[str, Any] | Unset = UNSET
    """Rows from asv's files: asv's benchmark name, version and own statistics (asv's keys)."""
    drift: dict[str, Any] | Unset | None = UNSET
    """A soak's slope fit (None once ``dsbench ab`` merged launches: see ``launch_drifts``)."""
    launch_values: list[float] | Unset = UNSET
    """After ``dsbench ab`` / ``noise``: each launch's value."""
    launch_drifts: list[Any] | Unset = UNSET
    """After ``dsbench ab --soak``: each launch's ``drift``."""
    launch_memory: list[Memory] | Unset = UNSET
    """After ``dsbench ab`` / ``sweep``: each launch's ``memory`` (``memory`` is their maximum),
    so a comparison can judge memory over the launches as it judges time (:meth:`peak_memory`)."""

    _NESTED: ClassVar[NESTED] = {
        "rounds": ("list", Round),
        "stats": ("one", Stats),
        "peak": ("one", Peak),
        "metrics": ("map", MetricValue),
        "work": ("one", CountedWork),
        "memory": ("one", Memory),
        "launch_memory": ("list", Memory),
        "notes": ("one", Notes),
        "timing": ("one", Timing),
    }

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def message(self) -> str:
        """Why a row is not ok: its error or reason ('' when it has neither)."""
        return self.error or self.reason or ""

    def round_samples(self, unit: str = "launch") -> list[list[float]]:
        """The samples split into rounds (:func:`split_rounds`)."""
        rounds = [(r.launch, r.n) for r in self.rounds] if self.rounds else None
        return split_rounds(self.value, self.samples or None, rounds, unit)

    def peak_memory(self) -> tuple[str, list[float]] | None:
        """The case's own peak memory per launch, in bytes, and what it is, from
        ``launch_memory`` (see :func:`case_peak`); None where a launch lacks it."""
        got = [case_peak(m) for m in self.launch_memory or []]
        if not got or any(g is None for g in got) or len({g[0] for g in got}) != 1:
            return None
        return got[0][0], [g[1] for g in got]

    def launch_blocks(self) -> list[list[list[float]]]:
        """The samples per launch, each launch's split into its recorded in-launch rounds (the
        blocks of ``dsbench ab --blocks``): ``[launch][block][sample]``."""
        if not self.samples:
            return [[[self.value]]]
        out: dict[int, list[list[float]]] = {}
        start = 0
        for launch, n in [(r.launch, r.n) for r in self.rounds] or [(0, len(self.samples))]:
            out.setdefault(launch, []).append(list(self.samples[start : start + n]))
            start += n
        return list(out.values())

    @classmethod
    def check(cls, data: dict) -> None:
        """What every reader relies on (the messages name the field; validate adds where)."""
        for key, typ in (("id", str), ("name", str), ("params", dict), ("status", str)):
            if not isinstance(data.get(key), typ):
                raise RecordError(f"field '{key}' missing or not {typ.__name__}")
        if data["status"] not in STATUSES:
            raise RecordError(f"status '{data['status']}' is not one of {', '.join(STATUSES)}")
        if not isinstance(data.get("unit", ""), str):
            raise RecordError("field 'unit' is not a string")
        if data["status"] == OK:
            _check_measurement(data)


def split_rounds(
    value: float, samples: list[float] | None, rounds: list[tuple[int, int]] | None, unit: str
) -> list[list[float]]:
    """A row's samples split into rounds: per launch (``unit="launch"``, the unit of evidence
    between runs) or per recorded round (``"round"``, between cases timed in alternating
    rounds of one launch). ``rounds``: (launch, n) in order, None for one launch. A row
    without samples is one round of one value."""
    if not samples:
        return [[value]]
    out: dict[tuple, list[float]] = {}
    start = 0
    for i, (launch, n) in enumerate(rounds or [(0, len(samples))]):
        key = (launch,) if unit == "launch" else (launch, i)
        out.setdefault(key, []).extend(samples[start : start + n])
        start += n
    return list(out.values())


def _check_measurement(row: dict) -> None:
    """An ``ok`` row carries what compare and publish compute with: a finite value, a
    direction, the summary statistics and (if kept) numeric samples in {launch, n} rounds."""
    if not is_number(row.get("value")):
        raise RecordError("is ok but 'value' is missing or not a finite number")
    if "unit" not in row:
        raise RecordError("is ok but has no 'unit'")
    if row.get("direction") not in DIRECTIONS:
        raise RecordError(
            f"direction '{row.get('direction')}' is not one of {', '.join(DIRECTIONS)}"
        )
    stats = row.get("stats")
    if not isinstance(stats, dict):
        raise RecordError("is ok but 'stats' is missing or not an object")
    for key in SUMMARY_FIELDS:
        if not (is_number(stats.get(key)) or isinstance(stats.get(key), bool)):
            raise RecordError(f"stats '{key}' missing or not a finite number")
    samples = row.get("samples")
    if samples is not None and not (isinstance(samples, list) and all(map(is_number, samples))):
        raise RecordError("'samples' is not a list of finite numbers")
    rounds = row.get("rounds")
    if rounds is None:
        return
    ok = isinstance(rounds, list) and all(
        isinstance(r, dict)
        and isinstance(r.get("launch"), int)
        and isinstance(r.get("n"), int)
        and r["launch"] >= 0
        and r["n"] >= 1
        for r in rounds
    )
    if not ok:
        raise RecordError("'rounds' is not a list of {launch, n} counts")
    if sum(r["n"] for r in rounds) != len(samples or []):
        raise RecordError(
            f"'rounds' counts {sum(r['n'] for r in rounds)} samples but "
            f"'samples' has {len(samples or [])}"
        )
