"""Reading and validating claim files: one-line :class:`~.data.ClaimError` naming the file, the
place and the problem (the format: [Note: the claim file format])."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from dsbench.errors import UsageError, choices_message
from dsbench.publish.data.claims.data import (
    DIRECTIONS,
    FIELDS,
    FORMS,
    MEMORY_FIELD,
    QUALIFIERS,
    SCHEMA,
    SCHEMA_VERSION,
    SOAK_PARAMS,
    SOAK_ROWS,
    SOAK_SHOWS,
    Claim,
    ClaimError,
    ClaimSide,
    DsbenchMapping,
    ModelledSpec,
    SoakSpec,
)
from dsbench.records.values import Reader, is_number, read_toml, show_toml
from dsbench.results import CLAIMS_DIR, default_results_dir

__all__ = [
    "benchmark_param_types",
    "benchmark_params",
    "default_claims_dir",
    "load_claim_file",
    "load_claims",
    "selector_problem",
]

# [Note: the claim file format]
# A claim file (``schema_version = 1``), with what each key means; ``_Parser`` reads it::
#
#     schema = "dsbench-claims"
#     schema_version = 1
#     title = "2.2 性能对比实测数据"            # as printed
#     title_en = "2.2 Measured performance"    # optional translation
#     language = "zh-CN: ..."                  # what is quoted and what is translated
#
#     [source]                                 # file and section required; article, article_en,
#     file = "000_....txt"                     # url, quote optional
#     section = "2.2 ..."
#
#     [scenario]                               # as the source states it: hardware, software,
#     hardware = "4×NVIDIA A100 80GB"          # model, config, as_stated (any string fields)
#
#     [[claims]]
#     id = "bert-large-training"               # [a-z0-9-], unique in the file
#     label = "BERT-large训练"                  # as printed; label_en optional
#     form = "table"                           # table (default) | list | prose
#     metric = "training throughput"
#     unit = "samples/s"
#     direction = "higher"                     # higher | lower is better
#     baseline = { label = "...", text = "128 samples/sec", value = 128 }
#     contender = { label = "...", text = "138 samples/sec", value = 138, qualifier = "~" }
#     claimed_change = "+7.8%"                 # as printed (optional)
#     claimed_ratio = 1.078                    # optional: contender / baseline where the source
#     claimed_range = [0.98, 1.02]             #   gives no values ("about 15% slower"), or a
#     ratio_basis = "how the ratio was read"   #   range ("within 2%"); say how it was read
#     quote, note, scenario = { ... }          # optional; scenario fields override the file's
#
#     [claims.dsbench]                         # how dsbench would measure it ...
#     benchmark = "train_step"                 # a benchmark name
#     params = { model = "bert-large" }        # parameter pattern: value or list of values
#     metric = "samples_per_s"                 # default: the benchmark's primary metric
#     field = "value"                          # value | pct_of_peak | memory.<key>
#     baseline = "0.18.3"                      # dsbench compare selectors
#     contender = "0.18.4"
#     run = ["dsbench run ..."]                # commands that produce the two runs (optional)
#     modelled = { params = {...}, baseline_profile = "...", contender_profile = "..." }
#     note = "..."
#     # ... or why it cannot:
#     not_measurable = "dsbench does not run 72-hour jobs"
#
#     [claims.dsbench.soak]                    # optional, with either: what dsbench soak shows
#     show = "range"                           # value | range | verdict | steps | failures
#     row = ["soak.device_reserved", "soak.memory"]  # the first of these rows a soak has
#     params = { stage = 3 }                   # soak parameter pattern (optional)
#     note = "..."
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
_SOAK_NEEDS_ROW = ("value", "range", "verdict")
_MODELLED = {"params", "baseline_profile", "contender_profile"}
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


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
            modelled = self.modelled(spec, f"{where}modelled.", name, fld)
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

    def modelled(self, spec: dict, where: str, name: str, fld: str) -> ModelledSpec:
        """``modelled``: a case of benchmark ``name`` (each parameter one value of a type its
        grids take) and two shipped hardware profiles; only field 'value' can be modelled."""
        from dsbench.hardware import get_profile
        from dsbench.suites import BENCHMARKS

        self.keys(spec, _MODELLED, where)
        if fld != "value":
            raise self.fail(where.rstrip("."), f"only field 'value' can be modelled, not {fld!r}")
        m_params = self.table(spec, "params", where)
        types = benchmark_param_types(name)
        for key, value in m_params.items():
            if key not in types:
                raise self.fail(f"{where}params.{key}", f"not a parameter of {name}")
            if type(value) not in types[key] or (isinstance(value, int) and not 0 <= value < 2**63):
                kinds = " or ".join(sorted(t.__name__ for t in types[key]))
                kinds = kinds.replace("int", "int in [0, 2**63)")
                raise self.read.expected(f"{where}params.{key}", kinds, value)
        if BENCHMARKS[name].work_of is None:
            raise self.fail(where.rstrip("."), f"benchmark {name} cannot be modelled")
        profiles = {}
        for key in ("baseline_profile", "contender_profile"):
            profile = self.string(spec, key, where)
            try:
                get_profile(profile)
            except UsageError as exc:
                raise self.fail(f"{where}{key}", str(exc)) from None
            profiles[key] = profile
        return ModelledSpec(m_params, **profiles)

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
    """The types each parameter of a benchmark takes in its grids (GPU and CPU contexts). The
    ``full`` grid where the benchmark has one: it lists every implementation without asking
    whether it runs here (which would import torch)."""
    from dsbench.suites import BENCHMARKS, Context

    bench = BENCHMARKS[name]
    types: dict[str, set[type]] = {}
    for ctx in (Context(device="cuda:0", backend="cuda", suite="full", device_count=8), Context()):
        for suite in ("full",) if "full" in bench.suites else bench.suites:
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
    data = read_toml(path, str(path), ClaimError)
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
