"""Claims: published tables of numbers (blog posts, release notes) to check against dsbench.

A claim file is TOML in ``results/claims/`` — one published table (or list) per file. It is
never a result: the results loader skips the folder, and nothing here turns a claim into a
measurement. :func:`check` sets each claim beside what dsbench *measured* (result files, through
:mod:`dsbench.compare`'s selectors) or, failing that, *modelled* (:mod:`dsbench.publish.modelled`),
or says which command would measure it.

Format (``schema_version = 1``)::

    schema = "dsbench-claims"
    schema_version = 1
    title = "2.2 性能对比实测数据"            # as printed
    title_en = "2.2 Measured performance"    # optional translation
    language = "zh-CN: ..."                  # what is quoted and what is translated

    [source]                                 # file and section required; article, article_en,
    file = "000_....txt"                     # url, quote optional
    section = "2.2 ..."

    [scenario]                               # as the source states it: hardware, software,
    hardware = "4×NVIDIA A100 80GB"          # model, config, as_stated (any string fields)

    [[claims]]
    id = "bert-large-training"               # [a-z0-9-], unique in the file
    label = "BERT-large训练"                  # as printed; label_en optional
    form = "table"                           # table (default) | list | prose
    metric = "training throughput"
    unit = "samples/s"
    direction = "higher"                     # higher | lower is better
    baseline = { label = "...", text = "128 samples/sec", value = 128 }
    contender = { label = "...", text = "138 samples/sec", value = 138, qualifier = "~" }
    claimed_change = "+7.8%"                 # as printed (optional)
    claimed_ratio = 1.078                    # optional: contender / baseline where the source
    claimed_range = [0.98, 1.02]             #   gives no values ("about 15% slower"), or a
    ratio_basis = "how the ratio was read"   #   range ("within 2%"); say how it was read
    quote, note, scenario = { ... }          # optional; scenario fields override the file's

    [claims.dsbench]                         # how dsbench would measure it ...
    benchmark = "train_step"                 # a benchmark name
    params = { model = "bert-large" }        # parameter pattern: value or list of values
    metric = "samples_per_s"                 # default: the benchmark's primary metric
    field = "value"                          # value | pct_of_peak | memory.<key>
    baseline = "0.18.3"                      # dsbench compare selectors
    contender = "0.18.4"
    run = ["dsbench run ..."]                # commands that produce the two runs (optional)
    modelled = { params = {...}, baseline_profile = "...", contender_profile = "..." }
    note = "..."
    # ... or why it cannot:
    not_measurable = "dsbench does not run 72-hour jobs"

    [claims.dsbench.soak]                    # optional, with either: what dsbench soak shows
    show = "range"                           # value | range | verdict | steps | failures
    row = ["soak.device_reserved", "soak.memory"]  # the first of these rows a soak has
    params = { stage = 3 }                   # soak parameter pattern (optional)
    note = "..."

A ``soak`` mapping puts the claim in the stability table (:mod:`.stability_claims`)
beside what each matching soak measured: a row's value (``value``), the ± half-range of a memory
series after warm-up (``range``), the drift verdicts (``verdict``), the steps trained
(``steps``) or the failures nobody injected over the hours trained (``failures``). It decides
nothing: a soak of minutes is not the claim's run, and the table says what was run.

Values are numbers as printed; a ``qualifier`` (``~ > >= < <= ±``) keeps what the number alone
loses. ``claimed_ratio`` defaults to contender / baseline when both values are plain numbers.

[Note: claims and verdicts]
A measured claim gets the verdict machinery of ``dsbench compare`` (:mod:`dsbench.stats`), with
the claim in place of the factor band:

- *Measured ratio and interval.* The claim's rows are paired as ``dsbench compare`` pairs them
  (a ``dsbench ab`` pair first, else :func:`dsbench.compare.pick_runs`) and
  :func:`dsbench.compare.compare_rows` gives each case its ratio and 99% interval from rounds
  (launches, or the alternating rounds of one run; the machine's noise figure when the sides
  are single launches on one machine). A claim about another metric of the same timing, or
  its % of peak, takes the primary metric's interval scaled to that field (inverted when its
  direction differs). Over n cases the claim is about their geometric mean: each case's
  interval is made at level 1 - 0.01/n (Bonferroni), and the interval of the geometric mean
  runs from the geometric mean of the lower ends to that of the upper ends. With probability
  at least 99% every case interval holds at once, and then so does this one, whatever the
  dependence between cases. A case without an interval (one round per side and no noise
  figure, one value per side, peak memory recorded once) leaves the claim without one.
- *What agrees with the claim* (:func:`accepted_range`): a printed ratio X within the same
  factor dsbench's verdicts use, [X/1.05, X·1.05] (printed figures are rounded, and 5% is the
  resolution of "unchanged"); a printed range as it stands; a bound ≥X from X/1.05 up (≤X: up to
  X·1.05).
- *Decision* (:func:`decide`): **consistent** when the whole interval lies within that range,
  **contradicted** when it lies wholly outside, **not decided** when it reaches across an edge
  or there is no interval. A modelled ratio never decides a claim.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsbench import compare, records
from dsbench.errors import UsageError, choices_message
from dsbench.results import CLAIMS_DIR, Run, default_results_dir
from dsbench.values import Reader, is_number, show_toml

SCHEMA = "dsbench-claims"
SCHEMA_VERSION = 1
FORMS = ("table", "list", "prose")
DIRECTIONS = records.DIRECTIONS
QUALIFIERS = ("~", ">", ">=", "<", "<=", "±")
INEQUALITIES = (">", ">=", "<", "<=")
"""Qualifiers that make a printed figure a bound; ``~`` (about) and ``±`` (a half-width) do not."""
CONSISTENT, CONTRADICTED, UNDECIDED, NOT_MEASURABLE = (
    "consistent", "contradicted", "not decided", "not measurable"
)  # fmt: skip
DECISIONS = (CONSISTENT, CONTRADICTED, UNDECIDED, NOT_MEASURABLE)
"""What a claim is, beside the measurement (see [Note: claims and verdicts])."""
LEVEL = 0.99
"""Confidence of a measured claim's interval."""
FACTOR = 1.05
"""The tolerance around a printed ratio: the factor of ``dsbench compare``'s verdicts."""
FIELDS = ("value", "pct_of_peak")
MEMORY_FIELD = "memory."

_TOP = {"schema", "schema_version", "title", "title_en", "language", "source", "scenario",
        "note", "claims"}  # fmt: skip
_SOURCE = {"file", "section", "article", "article_en", "url", "quote"}
_CLAIM = {"id", "label", "label_en", "form", "metric", "unit", "direction", "baseline",
          "contender", "claimed_change", "claimed_ratio", "claimed_range", "ratio_basis",
          "quote", "note", "scenario", "dsbench"}  # fmt: skip
_SIDE = {"label", "text", "value", "qualifier"}
_MAPPING = {"benchmark", "params", "metric", "field", "baseline", "contender", "run",
            "modelled", "note", "not_measurable", "soak"}  # fmt: skip
_SOAK = {"show", "row", "params", "note"}
SOAK_SHOWS = ("value", "range", "verdict", "steps", "failures")
"""What a ``soak`` mapping shows of each matching soak (see the format above)."""
SOAK_ROWS = ("soak.memory", "soak.heap", "soak.device_allocated", "soak.device_reserved",
             "soak.step_time_drift", "soak.step_time", "soak.loss_anomalies",
             "soak.resume_success", "soak.failures_named", "soak.detection_time",
             "soak.mtbf")  # fmt: skip
"""The rows ``dsbench soak`` writes (:mod:`dsbench.soak.report`)."""
SOAK_PARAMS = frozenset(("engine", "model", "nproc", "stage", "precision", "rank"))
_SOAK_NEEDS_ROW = ("value", "range", "verdict")
_MODELLED = {"params", "baseline_profile", "contender_profile"}
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class ClaimError(UsageError):
    """A claim file that cannot be used. The message is one line: ``<file>: <where>: <what>``."""


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimSide:
    """One side of a claimed comparison, as the source prints it."""

    label: str
    text: str = ""
    """The printed figure, verbatim (``128 samples/sec``, ``>72h``)."""
    value: float | None = None
    qualifier: str = ""
    """``~ > >= < <= ±`` when the printed figure is not a plain number."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ModelledSpec:
    """A case to model on two profiles (for claims comparing hardware)."""

    params: dict
    baseline_profile: str
    contender_profile: str


@dataclass(frozen=True)
class SoakSpec:
    """Which soak rows the stability table sets beside a claim, and how."""

    show: str
    """One of :data:`SOAK_SHOWS`."""
    rows: tuple[str, ...] = ()
    """Soak row names, in order of preference: the first a soak has is shown."""
    params: dict = field(default_factory=dict)
    """A pattern over the soak's parameters: a value or a list of values per key."""
    note: str = ""


@dataclass(frozen=True)
class DsbenchMapping:
    """How dsbench measures a claim, or why it cannot."""

    benchmark: str | None = None
    params: dict = field(default_factory=dict)
    metric: str | None = None
    field: str = "value"
    baseline: str | None = None
    contender: str | None = None
    run: tuple[str, ...] = ()
    modelled: ModelledSpec | None = None
    note: str = ""
    not_measurable: str | None = None
    soak: SoakSpec | None = None
    """Soak rows to show beside the claim in the stability table (decides nothing)."""

    @property
    def measurable(self) -> bool:
        return self.not_measurable is None


@dataclass(frozen=True)
class Claim:
    """One claimed comparison from a published table. A claim, never a result."""

    id: str
    """``<file stem>/<claim id>``, unique across the claims folder."""
    file: str
    title: str
    title_en: str
    language: str
    source: dict
    scenario: dict
    """The file's scenario with the claim's own fields laid over it."""
    label: str
    label_en: str
    form: str
    metric: str
    unit: str
    direction: str
    baseline: ClaimSide
    contender: ClaimSide
    claimed_change: str
    claimed_ratio_given: float | None
    claimed_range: tuple[float, float] | None
    ratio_basis: str
    quote: str
    note: str
    dsbench: DsbenchMapping

    @property
    def claimed_ratio(self) -> float | None:
        """contender / baseline: as given, else from the two printed values when both are plain
        (or approximate) numbers; None when the source gives a range or a bound."""
        if self.claimed_ratio_given is not None:
            return self.claimed_ratio_given
        b, c = self.baseline, self.contender
        if b.value and c.value is not None and not {b.qualifier, c.qualifier} & set(INEQUALITIES):
            return c.value / b.value
        return None

    def source_text(self) -> str:
        return f"{self.source['file']}, section {self.source['section']}"


# --------------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, display: str):
        self.display = display
        self.read = Reader(self.fail)

    def fail(self, where: str, problem: str) -> ClaimError:
        return ClaimError(f"{self.display}: {where}: {problem}")

    def keys(self, data: Mapping, valid: set[str], where: str) -> None:
        self.read.known(data, sorted(valid), where)

    def string(self, data: Mapping, key: str, where: str, required: bool = True) -> str:
        if key not in data:
            if required:
                raise self.fail(f"{where}{key}", "missing")
            return ""
        value = data[key]
        if not isinstance(value, str) or (required and not value.strip()):
            raise self.read.expected(f"{where}{key}", "a non-empty string", value)
        return value

    def table(self, data: Mapping, key: str, where: str, required: bool = True) -> dict:
        if key not in data:
            if required:
                raise self.fail(f"{where}{key}", "missing")
            return {}
        return self.read.table(f"{where}{key}", data[key])

    def scenario(self, raw: dict, where: str) -> dict:
        for key, value in raw.items():
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise self.read.expected(f"{where}{key}", "a string or number", value)
        return dict(raw)

    def pattern(self, raw: Mapping, where: str, known: Iterable[str], whose: str) -> dict:
        """``params``: each key one of ``known``, each value a value or a list of values."""
        params = self.table(raw, "params", where, required=False)
        for key, value in params.items():
            if key not in known:
                raise self.fail(
                    f"{where}params.{key}", f"not {whose}; valid: {', '.join(sorted(known))}"
                )
            values = value if isinstance(value, list) else [value]
            if not values or not all(isinstance(v, str | int | float) for v in values):
                raise self.read.expected(
                    f"{where}params.{key}", "a value or a list of values", value
                )
        return params

    def side(self, raw: Any, where: str) -> ClaimSide:
        self.read.table(where, raw, "an inline table { label = ... }")
        self.keys(raw, _SIDE, f"{where}.")
        label = self.string(raw, "label", f"{where}.")
        text = self.string(raw, "text", f"{where}.", required=False)
        value = raw.get("value")
        if value is not None and not is_number(value):
            raise self.read.expected(f"{where}.value", "a number", value)
        qualifier = self.string(raw, "qualifier", f"{where}.", required=False)
        if qualifier and qualifier not in QUALIFIERS:
            raise self.fail(
                f"{where}.qualifier", choices_message("qualifier", qualifier, QUALIFIERS)
            )
        if qualifier and value is None:
            raise self.fail(f"{where}.qualifier", "a qualifier needs a value")
        return ClaimSide(label, text, None if value is None else float(value), qualifier)

    def mapping(self, raw: dict, where: str) -> DsbenchMapping:
        from dsbench.suites import BENCHMARKS

        self.keys(raw, _MAPPING, where)
        soak = self.soak(self.table(raw, "soak", where), f"{where}soak.") if "soak" in raw else None
        if "not_measurable" in raw:
            why = self.string(raw, "not_measurable", where)
            others = sorted(set(raw) - {"not_measurable", "note", "soak"})
            if others:
                raise self.fail(f"{where}{others[0]}", "not allowed together with 'not_measurable'")
            return DsbenchMapping(
                not_measurable=why, note=self.string(raw, "note", where, False), soak=soak
            )
        name = self.string(raw, "benchmark", where)
        if name not in BENCHMARKS:
            raise self.fail(f"{where}benchmark", choices_message("benchmark", name, BENCHMARKS))
        bench = BENCHMARKS[name]
        known = benchmark_params(name)
        params = self.pattern(raw, where, known, f"a parameter of {name}")
        metrics = [m.name for m in bench.metrics]
        metric = self.string(raw, "metric", where, required=False) or bench.primary.name
        if metric not in metrics:
            raise self.fail(f"{where}metric", choices_message(f"metric of {name}", metric, metrics))
        fld = self.string(raw, "field", where, required=False) or "value"
        if fld not in FIELDS and not (
            fld.startswith(MEMORY_FIELD) and len(fld) > len(MEMORY_FIELD)
        ):
            raise self.read.expected(
                f"{where}field", f"one of {', '.join(FIELDS)} or memory.<key>", fld
            )
        selectors = {}
        for side in ("baseline", "contender"):
            text = self.string(raw, side, where)
            problem = selector_problem(text)
            if problem:
                raise self.fail(f"{where}{side}", problem)
            selectors[side] = text
        run = raw.get("run", [])
        if not isinstance(run, list) or not all(isinstance(r, str) and r.strip() for r in run):
            raise self.read.expected(f"{where}run", "a list of commands", run)
        modelled = None
        if "modelled" in raw:
            spec = self.table(raw, "modelled", where)
            self.keys(spec, _MODELLED, f"{where}modelled.")
            if fld != "value":
                raise self.fail(
                    f"{where}modelled", f"only field 'value' can be modelled, not {fld!r}"
                )
            m_params = self.table(spec, "params", f"{where}modelled.")
            types = benchmark_param_types(name)
            for key, value in m_params.items():
                if key not in known:
                    raise self.fail(f"{where}modelled.params.{key}", f"not a parameter of {name}")
                if type(value) not in types[key] or (
                    isinstance(value, int) and not 0 <= value < 2**63
                ):
                    kinds = " or ".join(sorted(t.__name__ for t in types[key]))
                    kinds = kinds.replace("int", "int in [0, 2**63)")
                    raise self.read.expected(f"{where}modelled.params.{key}", kinds, value)
            if bench.work_of is None:
                raise self.fail(f"{where}modelled", f"benchmark {name} cannot be modelled")
            profiles = {}
            for key in ("baseline_profile", "contender_profile"):
                profile = self.string(spec, key, f"{where}modelled.")
                try:
                    from dsbench.hardware import get_profile

                    get_profile(profile)
                except UsageError as exc:
                    raise self.fail(f"{where}modelled.{key}", str(exc)) from None
                profiles[key] = profile
            modelled = ModelledSpec(m_params, **profiles)
        return DsbenchMapping(
            benchmark=name,
            params=dict(params),
            metric=metric,
            field=fld,
            baseline=selectors["baseline"],
            contender=selectors["contender"],
            run=tuple(run),
            modelled=modelled,
            note=self.string(raw, "note", where, required=False),
            soak=soak,
        )

    def soak(self, raw: dict, where: str) -> SoakSpec:
        self.keys(raw, _SOAK, where)
        show = self.string(raw, "show", where)
        if show not in SOAK_SHOWS:
            raise self.fail(f"{where}show", choices_message("show", show, SOAK_SHOWS))
        rows = raw.get("row", [])
        rows = [rows] if isinstance(rows, str) else rows
        if not isinstance(rows, list) or not all(isinstance(r, str) for r in rows):
            raise self.read.expected(f"{where}row", "a row name or a list", rows)
        for name in rows:
            if name not in SOAK_ROWS:
                raise self.fail(f"{where}row", choices_message("soak row", name, SOAK_ROWS))
        if show in _SOAK_NEEDS_ROW and not rows:
            raise self.fail(f"{where}row", f"missing: show = {show!r} needs a soak row")
        params = self.pattern(raw, where, SOAK_PARAMS, "a soak parameter")
        return SoakSpec(show, tuple(rows), dict(params), self.string(raw, "note", where, False))

    def claim(self, raw: Any, index: int, file_fields: dict) -> Claim:
        self.read.table(f"claims[{index}]", raw)
        where = f"claims[{index}]."
        self.keys(raw, _CLAIM, where)
        cid = self.string(raw, "id", where)
        if not _ID.match(cid):
            raise self.fail(
                f"{where}id", f"expected lowercase letters, digits and '-', got {show_toml(cid)}"
            )
        where = f"claims[{index}] '{cid}': "
        form = self.string(raw, "form", where, required=False) or "table"
        if form not in FORMS:
            raise self.fail(f"{where}form", choices_message("form", form, FORMS))
        direction = self.string(raw, "direction", where)
        if direction not in DIRECTIONS:
            raise self.fail(
                f"{where}direction", choices_message("direction", direction, DIRECTIONS)
            )
        baseline = self.side(raw.get("baseline"), f"{where}baseline")
        contender = self.side(raw.get("contender"), f"{where}contender")
        ratio = raw.get("claimed_ratio")
        if ratio is not None:
            ratio = self.read.positive(f"{where}claimed_ratio", ratio)
        rng = raw.get("claimed_range")
        if rng is not None:
            rng = self.read.pair(f"{where}claimed_range", rng, "[low, high]")
        if ratio is not None and rng is not None:
            raise self.fail(
                f"{where}claimed_ratio", "give claimed_ratio or claimed_range, not both"
            )
        plain = baseline.value is not None and contender.value is not None
        if ratio is None and rng is None and not plain and not baseline.text + contender.text:
            raise self.fail(
                where.rstrip(": "),
                "no claimed numbers: give baseline/contender values, claimed_ratio or "
                "claimed_range",
            )
        if baseline.value == 0 and contender.value is not None and ratio is None:
            raise self.fail(
                f"{where}baseline.value", "0 makes the ratio undefined; give claimed_ratio"
            )
        scenario = dict(file_fields["scenario"])
        scenario.update(
            self.scenario(self.table(raw, "scenario", where, False), f"{where}scenario.")
        )
        return Claim(
            id=f"{file_fields['stem']}/{cid}",
            file=self.display,
            title=file_fields["title"],
            title_en=file_fields["title_en"],
            language=file_fields["language"],
            source=file_fields["source"],
            scenario=scenario,
            label=self.string(raw, "label", where),
            label_en=self.string(raw, "label_en", where, required=False),
            form=form,
            metric=self.string(raw, "metric", where),
            unit=self.string(raw, "unit", where),
            direction=direction,
            baseline=baseline,
            contender=contender,
            claimed_change=self.string(raw, "claimed_change", where, required=False),
            claimed_ratio_given=ratio,
            claimed_range=rng,
            ratio_basis=self.string(raw, "ratio_basis", where, required=False),
            quote=self.string(raw, "quote", where, required=False),
            note=self.string(raw, "note", where, required=False),
            dsbench=self.mapping(self.table(raw, "dsbench", where), f"{where}dsbench."),
        )

    def parse(self, data: dict, stem: str) -> list[Claim]:
        self.keys(data, _TOP, "")
        if data.get("schema") != SCHEMA:
            raise self.read.expected("schema", f'"{SCHEMA}"', data.get("schema"))
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise self.fail(
                "schema_version",
                f"this dsbench reads version {SCHEMA_VERSION}, got {show_toml(version)}",
            )
        source = self.table(data, "source", "")
        self.keys(source, _SOURCE, "source.")
        for key in _SOURCE:
            self.string(source, key, "source.", required=key in ("file", "section"))
        file_fields = {
            "stem": stem,
            "title": self.string(data, "title", ""),
            "title_en": self.string(data, "title_en", "", required=False),
            "language": self.string(data, "language", ""),
            "source": dict(source),
            "scenario": self.scenario(self.table(data, "scenario", ""), "scenario."),
        }
        raw_claims = data.get("claims")
        if not isinstance(raw_claims, list) or not raw_claims:
            raise self.fail("claims", "expected at least one [[claims]] table")
        claims = [self.claim(raw, i, file_fields) for i, raw in enumerate(raw_claims)]
        seen: set[str] = set()
        for i, claim in enumerate(claims):
            if claim.id in seen:
                raise self.fail(f"claims[{i}].id", f"duplicate id {claim.id.split('/', 1)[1]!r}")
            seen.add(claim.id)
        return claims


@functools.cache
def benchmark_params(name: str) -> frozenset[str]:
    """Parameter names of a benchmark, from its grids on a GPU and on a CPU context."""
    return frozenset(benchmark_param_types(name))


@functools.cache
def benchmark_param_types(name: str) -> dict[str, frozenset[type]]:
    """The types each parameter of a benchmark takes in its grids (GPU and CPU contexts)."""
    from dsbench.suites import BENCHMARKS, Context

    bench = BENCHMARKS[name]
    types: dict[str, set[type]] = {}
    for ctx in (Context(device="cuda:0", backend="cuda", suite="full", device_count=8), Context()):
        for suite in bench.suites:
            for key, values in bench.grid(suite, ctx).items():
                types.setdefault(key, set()).update(type(v) for v in values)
    return {key: frozenset(kinds) for key, kinds in types.items()}


@functools.cache
def _all_param_keys() -> frozenset[str]:
    from dsbench.suites import BENCHMARKS

    return frozenset(k for name in BENCHMARKS for k in benchmark_params(name))


def selector_problem(text: str, extra_keys: Iterable[str] = ()) -> str | None:
    """Why ``text`` is not a valid ``dsbench compare`` selector, or None."""
    from dsbench.compare import Selector

    try:
        Selector.parse(text, _all_param_keys() | frozenset(extra_keys))
    except UsageError as exc:
        return f"bad selector: {exc}"
    return None


def load_claim_file(path: str | Path) -> list[Claim]:
    """Load and validate one claim file; raise :class:`ClaimError` (one line) on any problem."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ClaimError(f"{path}: not valid TOML: {' '.join(str(exc).split())}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClaimError(f"{path}: cannot read: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer of over 4300 digits, deep nesting
        too = "nested too deeply" if isinstance(exc, RecursionError) else "a number too long"
        raise ClaimError(f"{path}: not valid TOML: {too}") from None
    return _Parser(str(path)).parse(data, path.stem)


def default_claims_dir() -> Path:
    return default_results_dir() / CLAIMS_DIR


def load_claims(
    directory: str | Path | None = None, warn: Callable[[str], None] | None = None
) -> list[Claim]:
    """Every claim in ``directory`` (default ``results/claims``), file by file in name order.

    A bad file gives one warning naming it and the problem, and is skipped; the rest load.
    """
    directory = Path(directory) if directory is not None else default_claims_dir()
    warn = warn or (lambda msg: print(f"dsbench: warning: {msg}", file=sys.stderr))
    claims: list[Claim] = []
    if not directory.is_dir():
        return claims
    for path in sorted(directory.glob("*.toml")):
        try:
            claims.extend(load_claim_file(path))
        except ClaimError as exc:
            warn(f"skipping {exc}")
    return claims


# --------------------------------------------------------------------------------------------
# Checking claims against measured and modelled numbers
# --------------------------------------------------------------------------------------------


def _fmt_ratio(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.3g}×"


def claimed_bound(claim: Claim) -> tuple[str, float] | None:
    """``(">=", x)`` or ``("<=", x)`` when the printed figures bound the ratio (contender >= x
    over baseline ~y: ratio >= x/y; a bound on the baseline flips it), else None."""
    b, c = claim.baseline, claim.contender
    if b.value and c.value is not None:
        lower = c.qualifier in (">", ">=") or b.qualifier in ("<", "<=")
        upper = c.qualifier in ("<", "<=") or b.qualifier in (">", ">=")
        if lower != upper:
            return (">=" if lower else "<="), c.value / b.value
    return None


def claimed_text(claim: Claim) -> str:
    """The claim in one phrase: ``claimed 1.08×``, ``claimed 0.98–1.02×``, ``claimed >8.28×``."""
    if claim.claimed_range is not None:
        lo, hi = claim.claimed_range
        return f"claimed {lo:g}–{hi:g}×"
    ratio = claim.claimed_ratio
    if ratio is not None:
        return f"claimed {_fmt_ratio(ratio)}"
    if (bound := claimed_bound(claim)) is not None:
        return f"claimed {'≥' if bound[0] == '>=' else '≤'}{_fmt_ratio(bound[1])}"
    b, c = claim.baseline, claim.contender
    return f"claimed {b.text or b.label} → {c.text or c.label}"


def accepted_range(claim: Claim, factor: float = FACTOR) -> tuple[float, float] | None:
    """The ratios that agree with the claim (see [Note: claims and verdicts]): the printed
    ratio ÷/× ``factor``, a printed range as it stands, a bound from bound ÷ ``factor`` on (or
    up to bound × ``factor``); None when the claim gives no ratio."""
    if claim.claimed_range is not None:
        return claim.claimed_range
    if (ratio := claim.claimed_ratio) is not None:
        return ratio / factor, ratio * factor
    if (bound := claimed_bound(claim)) is not None:
        kind, x = bound
        return (x / factor, math.inf) if kind == ">=" else (0.0, x * factor)
    return None


def _range_text(rng: tuple[float, float]) -> str:
    lo, hi = rng
    if math.isinf(hi):
        return f"≥{lo:.3g}×"
    if lo <= 0:
        return f"≤{hi:.3g}×"
    return f"{lo:.3g}–{hi:.3g}×"


def _row_field(row: dict, metric: str, fld: str) -> float | None:
    if row.get("status") != "ok":
        return None
    if fld.startswith(MEMORY_FIELD):
        value = (row.get("memory") or {}).get(fld.removeprefix(MEMORY_FIELD))
    else:
        entry = (row.get("metrics") or {}).get(metric)
        if entry is None and row.get("metric") == metric:
            entry = {"value": row.get("value"), "pct_of_peak": row.get("pct_of_peak")}
        value = (entry or {}).get(fld)
    return float(value) if is_number(value) else None


def _field_direction(claim: Claim) -> str:
    from dsbench.suites import BENCHMARKS

    m = claim.dsbench
    if m.field.startswith(MEMORY_FIELD):
        return "lower"
    if m.field == "pct_of_peak":
        return "higher"
    bench = BENCHMARKS[m.benchmark]
    return next(x.direction for x in bench.metrics if x.name == m.metric)


def _params_match(params: dict, pattern: dict, skip: set[str]) -> bool:
    for key, wanted in pattern.items():
        if key in skip:
            continue
        values = wanted if isinstance(wanted, list) else [wanted]
        if str(params.get(key)) not in {str(v) for v in values}:
            return False
    return True


def _selected_keys(claim: Claim, keys: frozenset[str]) -> set[str]:
    from dsbench.compare import Selector

    m = claim.dsbench
    out = set()
    for text in (m.baseline, m.contender):
        sel = Selector.parse(text, keys)
        if sel.param and sel.key:
            out.add(sel.key)
    return out


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _metric_direction(row: dict, metric: str) -> str | None:
    entry = (row.get("metrics") or {}).get(metric) or {}
    if entry.get("direction"):
        return entry["direction"]
    if row.get("metric") == metric:
        return row.get("direction")
    from dsbench.suites import BENCHMARKS

    bench = BENCHMARKS.get(row.get("name", ""))
    return next((m.direction for m in bench.metrics if m.name == metric), None) if bench else None


def _case_interval(
    claim: Claim, b_row: dict, c_row: dict, field_ratio: float, verdict: compare.Row
) -> tuple[float | None, float | None, str]:
    """The 99%/n interval of one case's ratio in the claim's field: compare's interval of the
    primary metric's ratio, carried over to the field (see [Note: claims and verdicts]); or
    (None, None, why not)."""
    m = claim.dsbench
    if m.field.startswith(MEMORY_FIELD):
        return None, None, "one value on a side (peak memory is recorded once per case)"
    if verdict.low is None or verdict.high is None or not verdict.ratio:
        return None, None, verdict.basis or verdict.change
    same = _metric_direction(b_row, m.metric) == b_row.get("direction")
    e = 1.0 if same else -1.0
    k = field_ratio / verdict.ratio**e  # the field's ratio / the primary's, e.g. another peak
    lo, hi = sorted((k * verdict.low**e, k * verdict.high**e))
    return lo, hi, verdict.basis


def _measured(claim: Claim, runs: Sequence[Run], factor: float = FACTOR) -> dict | None:
    """Pairs of rows from the runs the claim's selectors pick (a ``dsbench ab`` pair first),
    each case's ratio with its interval, and their geometric mean with its interval (see
    [Note: claims and verdicts]); None when no run holds both sides."""
    from dsbench.publish import comparisons

    m = claim.dsbench
    keys = _all_param_keys() | compare.param_keys(list(runs))
    skip = _selected_keys(claim, keys)

    def wanted(row: dict) -> bool:
        return (row.get("name") == m.benchmark and row.get("status") == "ok"
                and _params_match(row.get("params") or {}, m.params, skip))  # fmt: skip

    relevant = [r for r in runs if not comparisons.is_noise(r)
                and any(wanted(row) for row in r.doc.get("benchmarks", []))]  # fmt: skip
    if not relevant:
        return None
    b_sel = compare.Selector.parse(m.baseline, keys)
    c_sel = compare.Selector.parse(m.contender, keys)
    ab = None if b_sel.param or c_sel.param else comparisons.ab_pair(relevant, b_sel, c_sel)
    if ab is not None:
        base, cont = compare.Side.whole(ab[0]), compare.Side.whole(ab[1])
        notes = [f"baseline: {ab[0].describe()}", f"contender: {ab[1].describe()}", ab[2]]
    else:
        try:
            base, cont, notes = compare.pick_runs(relevant, m.baseline, m.contender)
        except UsageError:
            return None
    pairs = []
    for key, b_row in base.rows.items():
        c_row = cont.rows.get(key)
        if c_row is None or not wanted(b_row) or not wanted(c_row):
            continue
        bv, cv = _row_field(b_row, m.metric, m.field), _row_field(c_row, m.metric, m.field)
        if bv and cv is not None:
            pairs.append({"id": key, "baseline": bv, "contender": cv, "ratio": cv / bv})
    if not pairs:
        return None
    same_run = base.run is cont.run
    noise: dict = {}
    if not same_run and base.run.machine == cont.run.machine:
        others = [r for r in runs if r is not base.run and r is not cont.run]
        noise = compare.noise_figures(others, base.run.machine)[1]
    level = 1.0 - (1.0 - LEVEL) / len(pairs)  # Bonferroni over the cases
    ids = [p["id"] for p in pairs]
    verdicts = compare.compare_rows(
        {i: base.rows[i] for i in ids}, {i: cont.rows[i] for i in ids}, factor, level=level,
        unit="round" if same_run else "launch", noise=noise,
    )  # fmt: skip
    for p, v in zip(pairs, verdicts, strict=True):
        p["low"], p["high"], p["basis"] = _case_interval(
            claim, base.rows[p["id"]], cont.rows[p["id"]], p["ratio"], v
        )
    axes = compare.axes_of(b_sel, c_sel)
    confounded = compare.confounders(base.run, cont.run, axes) if not same_run else []
    ratios = [p["ratio"] for p in pairs]
    positive = all(r > 0 for r in ratios)
    bounded = positive and all(p["low"] is not None and p["low"] > 0 for p in pairs)
    why = comparisons.dominant_reason(
        compare.Row(p["id"], "", None, None, None, None, "inconclusive", basis=p["basis"])
        for p in pairs
        if p["low"] is None
    )
    return {
        "ratio": _geomean(ratios) if positive else sum(ratios) / len(ratios),
        "low": _geomean([p["low"] for p in pairs]) if bounded else None,
        "high": _geomean([p["high"] for p in pairs]) if bounded else None,
        "level": LEVEL,
        "case_level": level,
        "why_no_interval": None if bounded else (why[0] if why else "a ratio is not positive"),
        "n_cases": len(pairs),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "cases": pairs,
        "baseline_run": base.run.id,
        "contender_run": cont.run.id,
        "notes": notes,
        "confounders": confounded,
        "metric": m.metric,
        "field": m.field,
    }


def decide(
    interval: tuple[float | None, float | None], accepted: tuple[float, float] | None
) -> tuple[str, str]:
    """(decision, how the interval lies): ``consistent`` when the whole interval lies within
    the accepted range, ``contradicted`` when it lies wholly outside, else ``not decided``."""
    lo, hi = interval
    if accepted is None:
        return UNDECIDED, "the claim gives no ratio to test"
    if lo is None or hi is None:
        return UNDECIDED, "no interval"
    a_lo, a_hi = accepted
    if a_lo <= lo and hi <= a_hi:
        return CONSISTENT, "the interval lies within the accepted range"
    if hi < a_lo or lo > a_hi:
        return CONTRADICTED, "the interval lies outside the accepted range"
    return UNDECIDED, "the interval reaches across an edge of the accepted range"


def _modelled(claim: Claim) -> dict | None:
    from dsbench.publish import modelled
    from dsbench.suites import BENCHMARKS, case_id

    m = claim.dsbench
    spec = m.modelled
    if spec is None:
        return None
    bench = BENCHMARKS[m.benchmark]
    metric = next(x for x in bench.metrics if x.name == m.metric)
    out: dict[str, Any] = {"case": case_id(m.benchmark, spec.params), "metric": m.metric,
                           "unit": metric.unit}  # fmt: skip
    values = {}
    for side, profile in (
        ("baseline", spec.baseline_profile),
        ("contender", spec.contender_profile),
    ):
        floor = modelled.model_case(m.benchmark, spec.params, profile)
        out[f"{side}_profile"] = profile
        out[f"{side}_basis"] = floor.basis
        if floor.seconds is None:
            return out | {"ratio": None, "problem": floor.basis}
        work = bench.work_of(spec.params, modelled.DEFINITION_CONTEXT)
        values[side] = metric.value(work, floor.seconds)
        out[f"{side}_value"] = values[side]
    out["ratio"] = values["contender"] / values["baseline"] if values["baseline"] else None
    return out


AB_KEYS = ("deepspeed", "python", "commit")
"""Selector keys that name a side ``dsbench ab`` can run (``deepspeed=VERSION``,
``python=VERSION``, ``commit=REF``); a bare version stands for ``deepspeed=VERSION``."""
_VERSION = re.compile(r"^\d+(\.\d+)+$")


def ab_side(selector: str) -> str | None:
    """The ``dsbench ab`` side a compare selector names, or None (a label, a profile...)."""
    key, sep, value = selector.partition("=")
    if not sep:
        return f"deepspeed={selector}" if _VERSION.match(selector) else None
    return f"{key.strip()}={value.strip()}" if key.strip() in AB_KEYS and value.strip() else None


def _option(commands: Sequence[str], name: str) -> str | None:
    """The value of ``--name`` in the first command that has it (quotes kept)."""
    for cmd in commands:
        found = re.search(rf"--{name}[ =]('[^']*'|\"[^\"]*\"|\S+)", cmd)
        if found:
            return found.group(1)
    return None


def commands(claim: Claim) -> list[str]:
    """Commands that would measure the claim so that the verdict can decide it:
    ``dsbench ab`` (both sides in alternating rounds) where both selectors name a side it can
    run; for a benchmark parameter, one ``dsbench run`` (it times both sides in alternating
    rounds) and the comparison; otherwise the mapping's ``run`` commands (other hardware,
    other system settings) and the comparison, after a noise calibration of the machine when
    both sides run on one machine (labels)."""
    from dsbench.suites import BENCHMARKS

    m = claim.dsbench
    if not m.measurable:
        return []
    if selector_problem(m.baseline or "") or selector_problem(m.contender or ""):
        return list(m.run)  # check() names the bad selector
    bench = BENCHMARKS[m.benchmark]
    suite = _option(m.run, "suite") or ("quick" if "quick" in bench.suites else bench.suites[0])
    filt = _option(m.run, "filter") or f"'^{m.benchmark}\\['"
    compare_cmd = f"dsbench compare --baseline {m.baseline} --contender {m.contender}"
    b_side, c_side = ab_side(m.baseline or ""), ab_side(m.contender or "")
    if b_side and c_side:
        return [f"dsbench ab --baseline {b_side} --contender {c_side} --suite {suite} "
                f"--filter {filt}"]  # fmt: skip
    sels = [compare.Selector.parse(s or "", _all_param_keys()) for s in (m.baseline, m.contender)]
    if any(sel.param for sel in sels):
        return [f"dsbench run --suite {suite} --filter {filt}", compare_cmd]
    run = list(m.run) or [f"dsbench run --suite {suite} --filter {filt}"]
    if any(sel.key in (None, "label") for sel in sels):  # both sides on this machine
        run = [f"dsbench noise --suite {suite}", *run]
    return [*run, compare_cmd]


def _oriented(ratio: float | None, flip: bool) -> float | None:
    if ratio is None or not flip:
        return ratio
    return 1.0 / ratio if ratio else None


def _measured_verdict(claim: Claim, measured: dict, flip_note: str, entry: dict) -> None:
    """Fill ``entry``'s decision, interval and verdict line from a measurement."""
    accepted = accepted_range(claim)
    lo, hi = measured["low"], measured["high"]
    decision, how = decide((lo, hi), accepted)
    entry["decision"] = decision
    entry["interval"] = None if lo is None else (lo, hi)
    entry["accepted"] = accepted
    n = measured["n_cases"]
    cases = f"geometric mean of {n} cases" if n > 1 else "1 case"
    if lo is not None:
        spread = f"99% interval {_fmt_ratio(lo)}–{_fmt_ratio(hi)}, {cases}"
    else:
        spread = f"{cases}; no interval: {measured['why_no_interval']}"
    claimed = claimed_text(claim)
    if accepted is not None:
        claimed += f" (accepted {_range_text(accepted)})"
    verdict = f"{decision}: measured {_fmt_ratio(measured['ratio'])} ({spread}) vs {claimed}"
    verdict += flip_note + (f": {how}" if lo is not None or accepted is None else "")
    if measured["confounders"]:
        verdict += "; confounded: " + "; ".join(measured["confounders"])
    if decision == UNDECIDED and entry["commands"]:
        verdict += "; to decide it: " + " ; ".join(entry["commands"])
    entry["verdict"] = verdict


def check(claims: Sequence[Claim], runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Each claim beside what dsbench measured (result files) or modelled (profiles).

    One dict per claim: ``claim`` (id), ``title``, ``title_en``, ``source`` (dict),
    ``source_text``, ``scenario``, ``label``, ``label_en``, ``form``, ``metric``, ``unit``,
    ``direction``, ``claimed`` ({baseline, contender: side dicts, ratio, range, change, text}),
    ``kind`` (``measured``, ``modelled`` or ``none``), ``dsbench_ratio`` (contender / baseline,
    oriented like the claim's metric; None for kind ``none``), ``interval`` (its 99% interval,
    oriented likewise; None when the data give none), ``accepted`` (the ratios that agree with
    the claim, or None), ``decision`` (:data:`DECISIONS`: ``consistent``, ``contradicted`` or
    ``not decided`` for a measurable claim, see [Note: claims and verdicts]; ``not
    measurable``), ``measured`` (dict or None: ratio, low, high, level, case_level,
    why_no_interval, n_cases, min_ratio, max_ratio, cases (each with its interval),
    baseline_run, contender_run, notes, confounders), ``modelled`` (dict or None: ratio, case,
    profiles, values, basis), ``verdict`` (one line), ``command`` / ``commands`` (what measures
    it), ``problem`` (a bad selector or an unmodellable case, else None). Measured and
    modelled numbers are kept in separate fields and the claim's own numbers only under
    ``claimed``: a claim is never treated as a result, and a modelled ratio never decides one.
    """
    out = []
    for claim in claims:
        m = claim.dsbench
        entry: dict[str, Any] = {
            "claim": claim.id,
            "title": claim.title,
            "title_en": claim.title_en,
            "source": claim.source,
            "source_text": claim.source_text(),
            "scenario": claim.scenario,
            "label": claim.label,
            "label_en": claim.label_en,
            "form": claim.form,
            "metric": claim.metric,
            "unit": claim.unit,
            "direction": claim.direction,
            "claimed": {
                "baseline": claim.baseline.to_dict(),
                "contender": claim.contender.to_dict(),
                "ratio": claim.claimed_ratio,
                "range": claim.claimed_range,
                "change": claim.claimed_change,
                "text": claimed_text(claim),
            },
            "kind": "none",
            "dsbench_ratio": None,
            "interval": None,
            "accepted": accepted_range(claim),
            "decision": UNDECIDED,
            "measured": None,
            "modelled": None,
            "commands": commands(claim),
            "problem": None,
        }
        entry["command"] = "\n".join(entry["commands"])
        out.append(entry)
        claimed = claimed_text(claim)
        to_run = " ; ".join(entry["commands"])
        if not m.measurable:
            entry["decision"] = NOT_MEASURABLE
            entry["verdict"] = f"not measurable by dsbench: {m.not_measurable}"
            continue
        problem = selector_problem(m.baseline or "") or selector_problem(m.contender or "")
        if problem:
            entry["problem"] = problem
            entry["verdict"] = f"cannot check: {problem}"
            continue
        flip = _field_direction(claim) != claim.direction
        flip_note = (
            f" (dsbench's {m.metric} is {_field_direction(claim)}-is-better: ratio inverted)"
            if flip
            else ""
        )
        measured = _measured(claim, runs)
        modelled = _modelled(claim)
        if measured is not None:
            measured["ratio"] = _oriented(measured["ratio"], flip)
            if measured["low"] is not None:
                low, high = _oriented(measured["low"], flip), _oriented(measured["high"], flip)
                measured["low"], measured["high"] = min(low, high), max(low, high)
            entry["measured"] = measured
            entry["kind"] = "measured"
            entry["dsbench_ratio"] = measured["ratio"]
            _measured_verdict(claim, measured, flip_note, entry)
        if modelled is not None:
            modelled["ratio"] = _oriented(modelled.get("ratio"), flip)
            entry["modelled"] = modelled
            if modelled.get("problem"):
                entry["problem"] = entry["problem"] or modelled["problem"]
            if entry["kind"] == "none" and modelled["ratio"] is not None:
                entry["kind"] = "modelled"
                entry["dsbench_ratio"] = modelled["ratio"]
                entry["verdict"] = (
                    f"not decided: modelled {_fmt_ratio(modelled['ratio'])} (roofline floors of "
                    f"{modelled['case']} on {modelled['baseline_profile']} vs "
                    f"{modelled['contender_profile']}) vs {claimed}{flip_note}; a model does "
                    f"not decide a claim; no measured data yet: run {to_run}"
                )
        if entry["kind"] == "none":
            entry["verdict"] = f"not decided: no data yet: run {to_run}"
    return out
