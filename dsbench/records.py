"""What results are made of, shared by everything that writes or reads them, importing nothing
else from dsbench (and not torch): a metric's direction, a benchmark case's id, the flat
fields of a recorded environment that selectors and confounder checks compare, and the typed
records of a run (:class:`RunRecord`), its rows (:class:`Row`) and a claim check."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, Self

Direction = Literal["higher", "lower"]
"""Which way a metric improves: throughput and bandwidth ``higher``, time and memory ``lower``."""
HIGHER: Direction = "higher"
LOWER: Direction = "lower"
DIRECTIONS: tuple[Direction, ...] = (HIGHER, LOWER)


def case_id(name: str, params: dict) -> str:
    """Stable identifier: ``name[k1=v1,k2=v2]`` with keys sorted."""
    if not params:
        return name
    return name + "[" + ",".join(f"{k}={params[k]}" for k in sorted(params)) + "]"


def dig(env: dict, *keys: str | int):
    """``env[k1][k2]...`` through dicts and lists; None where a key or index is missing."""
    value = env
    for key in keys:
        if isinstance(value, list):
            value = value[key] if isinstance(key, int) and len(value) > key else None
        elif isinstance(value, dict):
            value = value.get(key)
        else:
            return None
    return value


def summary_fields(env: dict) -> dict[str, str | None]:
    """Flat string fields for selectors (``python=3.11``) and confounder checks; missing -> None.

    Tolerates partial or older env dicts (migrated result files, asv runs).
    """
    fields = {
        "python": dig(env, "python", "version"),
        "torch": dig(env, "packages", "torch"),
        "triton": dig(env, "packages", "triton"),
        "numpy": dig(env, "packages", "numpy"),
        "deepspeed": dig(env, "packages", "deepspeed"),
        "dsbench": dig(env, "dsbench", "version"),
        "commit": dig(env, "dsbench", "commit"),
        "dirty": dig(env, "dsbench", "dirty"),
        "backend": env.get("backend"),
        "profile": dig(env, "profile", "name"),
        "device": dig(env, "devices", 0, "name"),
        "device_count": env.get("device_count"),
        "cpu": dig(env, "cpu", "model"),
        "threads": dig(env, "cpu", "torch_threads"),
        "cuda": dig(env, "runtime", "cuda"),
        "hip": dig(env, "runtime", "hip"),
        "nccl": dig(env, "runtime", "nccl"),
        "driver": env.get("driver"),
        "machine": dig(env, "platform", "hostname"),
        "os": dig(env, "platform", "os"),
    }
    out: dict[str, str | None] = {}
    for key, value in fields.items():
        if isinstance(value, bool):
            value = "yes" if value else "no"
        out[key] = None if value is None else str(value)
    return out


METRICS: dict[str, tuple[tuple[str, str, Direction], ...]] = {
    "adamw": (("bandwidth", "GB/s", HIGHER), ("params_per_s", "Gparam/s", HIGHER),
              ("time", "ms", LOWER)),
    "copy": (("bandwidth", "GB/s", HIGHER), ("time", "ms", LOWER)),
    "gemm": (("throughput", "TFLOP/s", HIGHER), ("time", "ms", LOWER)),
    **{op: (("busbw", "GB/s", HIGHER), ("algbw", "GB/s", HIGHER), ("time", "ms", LOWER))
       for op in ("allreduce", "reduce_scatter", "allgather")},
    **{name: (("samples_per_s", "samples/s", HIGHER), ("tokens_per_s", "tokens/s", HIGHER),
              ("tflops_per_rank", "TFLOP/s", HIGHER), ("time", "ms", LOWER),
              ("step_efficiency", "fraction", HIGHER))
       for name in ("train_step", "train_step_offload")},
    "prefill": (("time", "ms", LOWER), ("tokens_per_s", "tokens/s", HIGHER),
                ("tflops", "TFLOP/s", HIGHER)),
    "decode": (("ms_per_token", "ms/token", LOWER), ("tokens_per_s", "tokens/s", HIGHER),
               ("tflops", "TFLOP/s", HIGHER)),
    # the ceilings a run measures beside its benchmarks (dsbench.suites.ceilings)
    "stream": (("bandwidth", "GB/s", HIGHER), ("time", "ms", LOWER)),
    "matmul": (("throughput", "TFLOP/s", HIGHER), ("time", "ms", LOWER)),
}  # fmt: skip
"""Each benchmark's metrics as (name, unit, direction), the primary first: what a reader of
result files (asv's included) needs without loading the definitions in :mod:`dsbench.suites`
(and torch). tests/test_imports.py checks that it matches them."""


# ---------------------------------------------------------------------------- typed records
# [Note: lossless records]
# Result files are read by several dsbench versions and written by several tools (dsbench run,
# ab, soak, asv's converter), so a record keeps what it does not know: ``extra`` holds the JSON
# object's unknown keys, ``key_order`` the order its keys came in, and a field the object does
# not have is :data:`UNSET` (not None: ``"pct_of_peak": null`` and no ``pct_of_peak`` are both
# written, and stay apart). ``X.from_json(d).to_json() == d`` for every object a reader accepts,
# key order included. Built with keywords, a record's JSON has its fields in declaration order
# (the order ``dsbench run`` has always written), then ``extra``.


class Unset:
    """The value of a record field its JSON object does not have; falsy, one instance."""

    __slots__ = ()
    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:  # unpickles (rank -> parent) as the one instance
        return "UNSET"


UNSET = Unset()


def value_or(value, default=None):
    """``value``, or ``default`` where it is :data:`UNSET`."""
    return default if value is UNSET else value


STATUSES = ("ok", "failed", "skipped", "interrupted")
"""A row's ``status``: measured, failed (``error`` says why), skipped (``reason``), or not run
because the run was stopped."""
OK = "ok"
SUMMARY_FIELDS = ("n", "median", "q1", "q3", "iqr", "ci_low", "ci_high", "ci_level",
                  "ci_exact", "mean", "stdev", "min", "max")  # fmt: skip
"""The keys of an ok row's ``stats`` (:class:`dsbench.stats.Summary`; tests check they match)."""


class RecordError(ValueError):
    """A JSON object that does not make a record; the message names the field, and the caller
    says where the object came from."""


def is_number(x) -> bool:
    """A finite int or float (JSON's integers can be too large for a float)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and abs(x) <= sys.float_info.max


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Record:
    """Shared by every record: lossless :meth:`from_json` / :meth:`to_json` (see [Note: lossless
    records]). Subclasses name nested records in ``_NESTED``: field -> (shape, record class),
    shape ``"one"`` (an object or null), ``"map"`` (an object of objects), ``"list"`` or
    ``"tuple"`` (a list, read as a tuple; an entry's error names its index)."""

    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    """The JSON object's keys this record does not declare, with their values as read."""
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """The order of the JSON object's keys, as read (empty when built in code)."""

    _NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {}
    _META: ClassVar[frozenset[str]] = frozenset({"extra", "key_order"})

    def __repr__(self) -> str:  # the fields the JSON object has
        shown = (f"{n}={getattr(self, n)!r}" for n in self.json_fields()
                 if getattr(self, n) is not UNSET)  # fmt: skip
        extra = f", extra={self.extra!r}" if self.extra else ""
        return f"{type(self).__name__}({', '.join(shown)}{extra})"

    @classmethod
    def json_fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name not in cls._META)

    def get(self, name: str, default=None):
        """A field or extra key by its JSON name, ``default`` when the object does not have it."""
        value = getattr(self, name, UNSET) if name in self.json_fields() else UNSET
        if value is UNSET:
            return self.extra.get(name, default)
        return value

    @classmethod
    def check(cls, data: dict) -> None:
        """Raise :class:`RecordError` when ``data`` cannot make this record (none by default)."""

    @classmethod
    def from_json(cls, data: dict) -> Self:
        if not isinstance(data, dict):
            raise RecordError("is not an object")
        cls.check(data)
        known = cls.json_fields()
        kwargs = {name: _load(cls, name, data[name]) for name in known if name in data}
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**kwargs, extra=extra, key_order=tuple(data))

    def to_json(self) -> dict[str, Any]:
        out = {}
        for name in self.json_fields():
            value = getattr(self, name)
            if value is not UNSET:
                out[name] = _dump(self._NESTED.get(name), value)
        out.update(self.extra)
        if not self.key_order:
            return out
        first = {k: out[k] for k in self.key_order if k in out}
        return first | {k: v for k, v in out.items() if k not in first}


def _load(cls: type[Record], name: str, value):
    """Field ``name`` of ``cls`` from its JSON: nested records typed, anything else as is."""
    shape, record = cls._NESTED.get(name, (None, None))
    if shape is None or value is None:
        return value
    if shape == "tuple" and isinstance(value, list):  # an entry's error names its index
        entries = []
        for i, entry in enumerate(value):
            try:
                entries.append(record.from_json(entry))
            except RecordError as exc:
                raise RecordError(f"{name}[{i}] {exc}") from None
        return tuple(entries)
    try:
        if shape == "one" and isinstance(value, dict):
            return record.from_json(value)
        if shape == "map" and isinstance(value, dict):
            return {k: record.from_json(v) for k, v in value.items()}
        if shape == "list" and isinstance(value, list):
            return [record.from_json(v) for v in value]
    except RecordError as exc:
        raise RecordError(f"field '{name}' has an entry that {exc}") from None
    raise RecordError(f"field '{name}' is not {_SHAPES[shape]}")


_SHAPES = {"one": "an object", "map": "an object", "list": "a list", "tuple": "a list"}


def _dump(nested: tuple[str, type[Record]] | None, value):
    if nested is None or value is None:
        return value
    if nested[0] == "one":
        return value.to_json()
    if nested[0] == "map":
        return {k: v.to_json() for k, v in value.items()}
    return [v.to_json() for v in value]


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

    _NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"peak": ("one", Peak)}


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
class Row(Record):
    """One benchmark case of a run (``doc["benchmarks"][i]``), what ``dsbench run``, ``ab``,
    ``soak``, ``verify-gpu`` and the asv reader write and compare and publish read. Fields in
    the order ``dsbench run`` writes them."""

    # - Which case
    id: str
    """``name[k1=v1,...]`` (:func:`case_id`): what pairs rows across runs."""
    name: str
    """The benchmark (``adamw``, ``train_step``, ``soak.memory``)."""
    params: dict[str, Any]
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
    stats: dict[str, Any] | Unset = UNSET
    """:class:`dsbench.stats.Summary` of the samples, keys :data:`SUMMARY_FIELDS`."""
    pct_of_peak: float | Unset | None = UNSET
    """The primary metric as a percentage of the profile's peak (None: no peak figure)."""
    peak: Peak | Unset | None = UNSET
    # - Everything measured alongside
    metrics: dict[str, MetricValue] | Unset = UNSET
    """Every metric of the benchmark, the primary included, by name."""
    work: dict[str, Any] | Unset = UNSET
    """The counted work (``dsbench.suites.Work``: flops, bytes, wire_bytes, items, ...)."""
    memory: dict[str, Any] | Unset | None = UNSET
    """Peak memory (host RSS, device peaks; ``fresh_process`` for a case run alone)."""
    notes: dict[str, Any] | Unset = UNSET
    """What the case reports about itself (engine settings, phases, work differences)."""
    timing: dict[str, Any] | Unset = UNSET
    """The timing core's record (raw seconds, warm-up, timer, rounds)."""
    # - Written by other tools
    asv: dict[str, Any] | Unset = UNSET
    """Rows from asv's files: asv's benchmark name, version and own statistics."""
    drift: dict[str, Any] | Unset | None = UNSET
    """A soak's slope fit (None once ``dsbench ab`` merged launches: see ``launch_drifts``)."""
    launch_values: list[float] | Unset = UNSET
    """After ``dsbench ab`` / ``noise``: each launch's value."""
    launch_drifts: list[Any] | Unset = UNSET
    """After ``dsbench ab --soak``: each launch's ``drift``."""

    _NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {
        "rounds": ("list", Round),
        "peak": ("one", Peak),
        "metrics": ("map", MetricValue),
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


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class ClaimCheck(Record):
    """A published claim beside what dsbench measured or modelled: one entry of
    :func:`dsbench.publish.claims.check` (fields in the order it builds them)."""

    # - The claim as published
    claim: str
    """The claim's id."""
    title: str | Unset = UNSET
    """The claim's title as published."""
    title_en: str | Unset | None = UNSET
    """Its English translation, where the claim is in another language."""
    source: dict[str, Any] | Unset = UNSET
    """Where it was published (url, document, date)."""
    source_text: str | Unset = UNSET
    """``source`` in one line, for a page."""
    scenario: str | Unset | None = UNSET
    """What was run for the claim (model, hardware, settings), as published."""
    label: str | Unset = UNSET
    """What the number measures, as published."""
    label_en: str | Unset | None = UNSET
    """Its English translation."""
    form: str | Unset = UNSET
    """How the claim states its number (a ratio, a range, a change)."""
    metric: str | Unset = UNSET
    """The dsbench metric it is checked against, with its unit and direction."""
    unit: str | Unset = UNSET
    direction: Direction | Unset = UNSET
    claimed: dict[str, Any] | Unset = UNSET
    """The claim's own numbers: baseline, contender, ratio, range, change, text."""
    # - What dsbench found
    kind: str | Unset = UNSET
    """``measured``, ``modelled`` or ``none``."""
    dsbench_ratio: float | Unset | None = UNSET
    """Contender / baseline, oriented like the claim's metric."""
    interval: list[float] | Unset | None = UNSET
    """The ratio's 99% interval, oriented likewise (None: the data give none)."""
    accepted: list[float | None] | Unset | None = UNSET
    """The ratios that agree with the claim."""
    decision: str | Unset = UNSET
    """``consistent``, ``contradicted``, ``not decided`` or ``not measurable``."""
    measured: dict[str, Any] | Unset | None = UNSET
    """The measured ratio with its interval, cases, runs and confounders."""
    modelled: dict[str, Any] | Unset | None = UNSET
    """A modelled ratio (from profiles): shown, never deciding."""
    # - What to do about it
    commands: list[str] | Unset = UNSET
    """The commands that measure it."""
    problem: str | Unset | None = UNSET
    """A bad selector or an unmodellable case."""
    command: str | Unset = UNSET
    """``commands`` joined by newlines."""
    verdict: str | Unset = UNSET
    """One line."""


SOURCES = ("dsbench", "asv")
"""Which tool measured a run (``source``, schema 2 on): ``dsbench run`` writes ``"dsbench"``;
:mod:`dsbench.asv_results` gives the runs it converts from asv's files ``"asv"``. Publish
groups, labels and links runs by it (an asv run's page points at asv's own)."""
REQUIRED_RUN_FIELDS = {"source": str, "run_id": str, "created": str, "machine": str,
                       "env": dict, "benchmarks": list}  # fmt: skip
OPTIONAL_RUN_FIELDS = {"label": str, "suite": str, "purpose": str, "profile": dict,
                       "launches": list}  # fmt: skip
"""Absent or null, or of this type: selectors, compare and publish read them."""


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class RunRecord(Record):
    """A run: one result file (:mod:`dsbench.results`), its header and its rows, after
    migration to the current schema. Fields in the order ``dsbench run`` writes them, then
    what ``ab``, ``noise``, ``soak``, ``verify-gpu`` and the asv reader add."""

    schema: str | Unset = UNSET
    """``dsbench-result``."""
    schema_version: int | Unset = UNSET
    source: str
    """The tool that measured the run: one of :data:`SOURCES`."""
    run_id: str
    """``<UTC time>-<6 hex>`` (``asv-<commit>-<env>`` for asv's)."""
    created: str
    """When the run (its first launch) started, ISO 8601 with the offset."""
    finished: str | Unset = UNSET
    wall_s: float | Unset = UNSET
    """Seconds from start to finish (after ``dsbench ab``: the launches' sum)."""
    machine: str
    """The folder of the machine's runs: ``$DSBENCH_MACHINE`` or the host name."""
    label: str | Unset | None = UNSET
    suite: str | Unset | None = UNSET
    argv: list[str] | Unset | None = UNSET
    """The command line after ``dsbench``."""
    env: dict[str, Any]
    """The recorded environment (:func:`summary_fields` flattens it)."""
    profile: dict[str, Any] | Unset | None = UNSET
    """The hardware profile the peaks came from (``dsbench.hardware.Profile.to_dict``)."""
    launches: list[dict[str, Any]] | Unset | None = UNSET
    """Each launch, a fresh process: ``started`` (and ``pid``, or after ``dsbench ab`` its
    ``wall_s``, ``order``, ``run_id`` and ``argv``), in the order of the rows' rounds."""
    benchmarks: tuple[Row, ...]
    """The rows, in order (also :attr:`rows`)."""
    purpose: str | Unset | None = UNSET
    """Why the run was made, where not a plain run: ``noise``, ``soak``."""
    ab: dict[str, Any] | Unset = UNSET
    """After ``dsbench ab``: the pair's id, this side, its spec, rounds, order and other run."""
    soak: dict[str, Any] | Unset = UNSET
    """A soak's faults, restarts, launches, status and problems."""
    soak_rounds: list[Any] | Unset = UNSET
    """After ``dsbench ab --soak``: each launch's ``soak``."""
    interrupted: dict[str, Any] | Unset | None = UNSET
    """A run stopped by a signal: ``{"signal": "SIGTERM", "finished": N}``."""
    build_seconds: dict[str, Any] | Unset = UNSET
    """``dsbench verify-gpu``: the kernels' build times."""
    asv: dict[str, Any] | Unset = UNSET
    """Runs read from asv's files: the file, environment, commit and machine parameters."""

    _NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"benchmarks": ("tuple", Row)}

    @property
    def rows(self) -> tuple[Row, ...]:
        return self.benchmarks

    @classmethod
    def check(cls, data: dict) -> None:
        """What every reader relies on; the rows are checked after (``benchmarks[i] ...``)."""
        for key, typ in (REQUIRED_RUN_FIELDS | OPTIONAL_RUN_FIELDS).items():
            if key in OPTIONAL_RUN_FIELDS and data.get(key) is None:
                continue
            if key not in data:
                raise RecordError(f"missing field '{key}'")
            if not isinstance(data[key], typ):
                raise RecordError(
                    f"field '{key}' should be {typ.__name__}, got {type(data[key]).__name__}"
                )
        if data["source"] not in SOURCES:
            raise RecordError(f"source '{data['source']}' is not one of {', '.join(SOURCES)}")
        stopped = data.get("interrupted")
        if stopped is not None and not (
            isinstance(stopped, dict)
            and isinstance(stopped.get("signal"), str)
            and isinstance(stopped.get("finished"), int)
        ):
            raise RecordError("'interrupted' is not {signal, finished}")
