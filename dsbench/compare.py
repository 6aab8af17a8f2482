"""Compare two runs: selectors pick them, pairs are matched by benchmark id, and a change counts
only when it is statistically significant AND beyond a factor, in the metric's own direction.

- Direction: each row carries ``direction`` (higher is better for throughput, lower for time
  and memory); asv treats everything as lower-is-better, dsbench does not.
- Significance: Mann–Whitney U on the raw samples (p < 0.01), or non-overlapping 99% CIs of
  the medians when samples are too few (see :mod:`dsbench.stats`). A row with one value and no
  spread (asv's quick mode and ``track_`` benchmarks) is judged by the factor alone, as
  ``asv compare`` does, and the notes say so.
- Choosing runs: when a selector matches several runs, the pair of runs that differs in the
  fewest fields besides the compared axis is used (newest first among equals), so
  ``--baseline 0.18.3 --contender 0.18.4`` over asv's matrix pairs the same Python.
- Environments: when a side comes from asv (one run per environment), every row carries the
  environment of each side (``python 3.11, deepspeed 0.18.3``).
- Confounders: environment fields that differ besides the compared axis are listed above the
  table, because such a comparison measures more than one thing.
"""

from __future__ import annotations

import dataclasses
import html
import io
import re

from tabulate import tabulate

from dsbench.errors import UsageError, choices_message
from dsbench.results import Run
from dsbench.stats import Summary, significantly_different

ENV_KEYS = (
    "python",
    "torch",
    "triton",
    "numpy",
    "deepspeed",
    "dsbench",
    "commit",
    "backend",
    "profile",
    "device",
    "device_count",
    "cpu",
    "threads",
    "cuda",
    "hip",
    "nccl",
    "driver",
    "os",
)
"""Fields of ``envinfo.summary_fields`` that selectors and the confounder check look at."""
SELECTOR_KEYS = ("label", "run", "suite", "machine", *ENV_KEYS)
VERSION_KEYS = {
    "python",
    "torch",
    "triton",
    "numpy",
    "deepspeed",
    "dsbench",
    "cuda",
    "hip",
    "nccl",
    "driver",
    "os",
}
SUBSTRING_KEYS = {"device", "cpu"}
PREFIX_KEYS = {"commit", "run"}
CONFOUNDER_KEYS = (*ENV_KEYS, "machine")
FORMATS = {"github": "github", "plain": "simple", "markdown": "pipe", "html": "html", "csv": None}
HEADERS = ["benchmark", "unit", "baseline", "contender", "ratio", "change"]
ENV_HEADERS = ["baseline env", "contender env"]
ENV_LABEL_KEYS = ("python", "deepspeed")
"""Always in an environment label: the axes of asv's matrix."""
ENV_LABEL_IF_DIFFERENT = ("torch", "triton", "numpy", "backend", "device")


@dataclasses.dataclass(frozen=True)
class Selector:
    """``key=value`` on a run field, or a bare value matching a label or a DeepSpeed version.

    ``key`` may also be a benchmark *parameter* (``engine=deepspeed``, ``kernels=best``): such a
    selector picks rows, not only runs, so two sides of one run can be compared; rows are then
    paired with that parameter left out of their ids.
    """

    text: str
    key: str | None
    value: str
    param: bool = False

    @classmethod
    def parse(cls, text: str, param_keys: frozenset[str] = frozenset()) -> Selector:
        if not text:
            raise UsageError("empty selector; use a label, a version (0.18.3) or key=value")
        key, sep, value = text.partition("=")
        if not sep:
            return cls(text, None, text)
        key = key.strip()
        if key not in SELECTOR_KEYS and key not in param_keys:
            raise UsageError(choices_message("selector key", key, [*SELECTOR_KEYS, *param_keys]))
        if not value:
            raise UsageError(f"selector '{text}' has no value after '='")
        return cls(text, key, value.strip(), param=key not in SELECTOR_KEYS)

    def matches(self, run: Run) -> bool:
        if self.param:
            return bool(self.rows(run))
        if self.key is None:
            return self.value in (run.label, run.fields.get("deepspeed"))
        return field_matches(self.key, run.fields.get(self.key), self.value)

    def rows(self, run: Run) -> dict[str, dict]:
        """The run's rows this selector picks (all of them for a run-level selector)."""
        if not self.param:
            return run.benchmarks
        return {k: r for k, r in run.benchmarks.items()
                if str(r.get("params", {}).get(self.key)) == self.value}  # fmt: skip


def field_matches(key: str, actual: str | None, wanted: str) -> bool:
    if actual is None:
        return wanted.lower() in ("none", "null", "")
    actual, wanted_l = str(actual), wanted.lower()
    if actual.lower() == wanted_l:
        return True
    if key in VERSION_KEYS:  # "3.11" matches "3.11.7"; "2.13.0" matches "2.13.0+cpu"
        return re.match(re.escape(wanted) + r"([.+-]|$)", actual) is not None
    if key in PREFIX_KEYS:
        return len(wanted) >= 4 and actual.startswith(wanted)
    if key in SUBSTRING_KEYS:
        return wanted_l in actual.lower()
    return False


def describe_existing(runs: list[Run]) -> str:
    labels = sorted({r.label for r in runs if r.label})
    versions = sorted({r.fields.get("deepspeed") for r in runs if r.fields.get("deepspeed")})
    return (
        f"labels: {', '.join(labels) or '(none)'}; DeepSpeed versions: "
        f"{', '.join(versions) or '(none)'}; {len(runs)} run(s)"
    )


def select(
    runs: list[Run], selector: Selector, exclude: Run | None = None, role: str = "baseline"
) -> tuple[Run, str]:
    """The newest run matching ``selector`` (other than ``exclude``), and a note saying which."""
    matching = [r for r in runs if selector.matches(r) and r is not exclude]
    if not matching:
        raise UsageError(
            f"{role} selector '{selector.text}' matches no run; " + describe_existing(runs)
        )
    chosen = matching[-1]
    note = f"{role}: {chosen.describe()}"
    if len(matching) > 1:
        note += f" — newest of {len(matching)} runs matching '{selector.text}'"
    return chosen, note


@dataclasses.dataclass
class Side:
    """One side of a comparison: a run and the rows taken from it."""

    run: Run
    rows: dict[str, dict]

    @classmethod
    def whole(cls, run: Run) -> Side:
        return cls(run, run.benchmarks)


def param_keys(runs: list[Run]) -> frozenset[str]:
    return frozenset(k for r in runs for row in r.doc["benchmarks"] for k in row.get("params", {}))


def _strip(rows: dict[str, dict], keys: set[str]) -> dict[str, dict]:
    """Re-key rows by their id without the parameters being compared."""
    if not keys:
        return rows
    from dsbench.suites.base import case_id

    out = {}
    for row in rows.values():
        params = {k: v for k, v in row.get("params", {}).items() if k not in keys}
        out[case_id(row["name"], params)] = row
    return out


def pick_runs(
    runs: list[Run], baseline: str, contender: str | None
) -> tuple[Side, Side, list[str]]:
    """The two sides the selectors name; the notes say which runs were used."""
    if not runs:
        raise UsageError("no result files found; run `dsbench run` first")
    keys = param_keys(runs)
    b_sel = Selector.parse(baseline, keys)
    c_sel = Selector.parse(contender, keys) if contender is not None else None
    if c_sel is not None and not (b_sel.param or c_sel.param):
        base, cont, b_note, c_note = _closest_pair(runs, b_sel, c_sel)
        c_rows = c_sel.rows(cont)
        return Side(base, b_sel.rows(base)), Side(cont, c_rows), [b_note, c_note]
    base, b_note = select(runs, b_sel)
    if c_sel is not None:
        cont, c_note = select(runs, c_sel, role="contender")
        c_rows = c_sel.rows(cont)
    elif b_sel.param:  # the other values of that parameter, in the same run
        others = {str(r["params"][b_sel.key]) for r in base.benchmarks.values()
                  if b_sel.key in r.get("params", {})} - {b_sel.value}  # fmt: skip
        if len(others) != 1:
            raise UsageError(f"{b_sel.key} has values {', '.join(sorted(others)) or '(none)'} "
                             f"besides {b_sel.value}; choose one with --contender "
                             f"{b_sel.key}=VALUE")  # fmt: skip
        value = others.pop()
        c_sel = Selector(f"{b_sel.key}={value}", b_sel.key, value, param=True)
        cont, c_note = base, f"contender: rows with {c_sel.text} of the same run"
        c_rows = c_sel.rows(cont)
    else:
        others = [r for r in runs if r is not base and not b_sel.matches(r)]
        others = others or [r for r in runs if r is not base]
        if not others:
            raise UsageError(f"only one run exists ({base.describe()}); nothing to compare with")
        cont = others[-1]
        c_note = f"contender: {cont.describe()} — newest run that is not the baseline"
        c_rows = cont.benchmarks
    strip = {sel.key for sel in (b_sel, c_sel) if sel is not None and sel.param}
    return (Side(base, _strip(b_sel.rows(base), strip)), Side(cont, _strip(c_rows, strip)),
            [b_note, c_note])  # fmt: skip


def _closest_pair(runs: list[Run], b_sel: Selector, c_sel: Selector) -> tuple[Run, Run, str, str]:
    """Among the runs each selector matches, the pair differing in the fewest fields besides
    the compared axes; among equals the newest. Runs are in chronological order."""
    b_match = [i for i, r in enumerate(runs) if b_sel.matches(r)]
    c_match = [i for i, r in enumerate(runs) if c_sel.matches(r)]
    for role, sel, matching in (("baseline", b_sel, b_match), ("contender", c_sel, c_match)):
        if not matching:
            raise UsageError(
                f"{role} selector '{sel.text}' matches no run; " + describe_existing(runs)
            )
    axes = axes_of(b_sel, c_sel)
    pairs = [
        (len(confounders(runs[b], runs[c], axes)), -max(b, c), -min(b, c), b, c)
        for b in b_match
        for c in c_match
        if b != c
    ]
    if not pairs:
        raise UsageError(
            f"baseline and contender selectors match only one run "
            f"({runs[b_match[0]].describe()}); nothing to compare with"
        )
    *_, b, c = min(pairs)
    return (
        runs[b],
        runs[c],
        _pick_note("baseline", runs[b], b, b_match, b_sel),
        _pick_note("contender", runs[c], c, c_match, c_sel),
    )


def _pick_note(role: str, run: Run, index: int, matching: list[int], sel: Selector) -> str:
    note = f"{role}: {run.describe()}"
    if len(matching) > 1:
        if index == matching[-1]:
            note += f" — newest of {len(matching)} runs matching '{sel.text}'"
        else:
            note += (
                f" — of {len(matching)} runs matching '{sel.text}', the one differing "
                "least from the other side"
            )
    return note


def confounders(base: Run, cont: Run, axes: set[str]) -> list[str]:
    """Environment fields that differ besides the compared ``axes``."""
    diffs = []
    for key in CONFOUNDER_KEYS:
        if key in axes:
            continue
        a, b = base.fields.get(key), cont.fields.get(key)
        if a != b:
            diffs.append(f"{key} ({a} vs {b})")
    return diffs


@dataclasses.dataclass(frozen=True)
class Row:
    id: str
    unit: str
    direction: str | None
    baseline: float | None
    contender: float | None
    ratio: float | None
    change: str
    """'better', 'worse', '' (no significant change beyond the factor), or why not comparable."""
    test: str = ""
    baseline_env: str = ""
    """The environment the baseline value came from (set when a side is an asv run)."""
    contender_env: str = ""


def _side(row: dict | None) -> tuple[float | None, str]:
    if row is None:
        return None, "missing"
    if row["status"] != "ok":
        return None, row["status"]
    return row["value"], ""


FACTOR_ONLY = "one value: factor only"
"""The test column of a row with a single value on a side (asv quick mode, ``track_``)."""


def _significance(b: dict, c: dict, alpha: float) -> tuple[bool, str]:
    """Significance by :func:`dsbench.stats.significantly_different`; when a side has a single
    value (no spread to test), the factor alone decides, as in ``asv compare``."""
    if min(b["stats"]["n"], c["stats"]["n"]) < 2:
        return True, FACTOR_ONLY
    return significantly_different(
        Summary.from_dict(b["stats"]),
        Summary.from_dict(c["stats"]),
        b.get("samples"),
        c.get("samples"),
        alpha,
    )


def compare_rows(
    base: dict[str, dict],
    cont: dict[str, dict],
    factor: float = 1.05,
    alpha: float = 0.01,
    envs: tuple[str, str] = ("", ""),
) -> list[Row]:
    """Pair benchmarks by id; rows present on one side only are listed, not dropped.

    ``envs``: the environment each side came from, carried by every row (shown as columns).
    """
    if factor < 1.0:
        raise UsageError(f"--factor must be >= 1.0, got {factor}")
    out = []
    for bid in list(base) + [k for k in cont if k not in base]:
        b, c = base.get(bid), cont.get(bid)
        ref = b or c
        (bv, bs), (cv, cs) = _side(b), _side(c)
        unit, direction = ref.get("unit", ""), ref.get("direction")
        if bs or cs:
            if "missing" in (bs, cs):
                why = "only in contender" if bs == "missing" else "only in baseline"
            elif bs and cs:
                why = f"{bs} / {cs}"  # e.g. "skipped / failed"
            else:
                why = f"baseline {bs}" if bs else f"contender {cs}"
            out.append(Row(bid, unit, direction, bv, cv, None, why, "", *envs))
            continue
        if b["direction"] != c["direction"] or b["unit"] != c["unit"]:
            out.append(Row(bid, unit, direction, bv, cv, None, "units differ", "", *envs))
            continue
        ratio = cv / bv if bv else float("inf")
        significant, test = _significance(b, c, alpha)
        better = ratio > 1 if direction == "higher" else ratio < 1
        beyond = ratio >= factor or ratio <= 1 / factor
        change = ("better" if better else "worse") if significant and beyond else ""
        out.append(Row(bid, unit, direction, bv, cv, ratio, change, test, *envs))
    return out


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def render(rows: list[Row], fmt: str = "github") -> str:
    if fmt not in FORMATS:
        raise UsageError(choices_message("format", fmt, FORMATS))
    with_env = any(r.baseline_env or r.contender_env for r in rows)
    headers = HEADERS + ENV_HEADERS if with_env else HEADERS
    table = [
        [
            r.id,
            r.unit + (" ↑" if r.direction == "higher" else " ↓" if r.direction else ""),
            _fmt(r.baseline),
            _fmt(r.contender),
            "" if r.ratio is None else f"{r.ratio:.3f}",
            r.change,
            *([r.baseline_env, r.contender_env] if with_env else []),
        ]
        for r in rows
    ]
    if fmt == "csv":
        import pandas as pd

        buf = io.StringIO()
        pd.DataFrame(table, columns=headers).to_csv(buf, index=False)
        return buf.getvalue().rstrip("\n")
    if fmt == "html":  # tabulate escapes nothing in cells: escape here
        table = [[html.escape(str(c)) for c in row] for row in table]
        return tabulate(table, headers=headers, tablefmt="unsafehtml")
    return tabulate(table, headers=headers, tablefmt=FORMATS[fmt], disable_numparse=True)


def is_asv(run: Run) -> bool:
    return run.doc.get("source") == "asv"


def env_label(run: Run, other: Run) -> str:
    """``python 3.11, deepspeed 0.18.3``, plus the fields in which ``other`` differs."""
    keys = [
        *ENV_LABEL_KEYS,
        *(k for k in ENV_LABEL_IF_DIFFERENT if run.fields.get(k) != other.fields.get(k)),
    ]
    label = ", ".join(f"{k} {run.fields[k]}" for k in keys if run.fields.get(k) is not None)
    return ("asv: " if is_asv(run) else "") + (label or "(versions not recorded)")


def regressions(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.change == "worse"]


def axes_of(*selectors: Selector | None) -> set[str]:
    """The environment fields a comparison is meant to vary."""
    axes: set[str] = set()
    for sel in selectors:
        if sel is not None:
            axes |= {sel.key} if sel.key else {"label", "deepspeed"}
    return axes


@dataclasses.dataclass
class Report:
    notes: list[str]
    """Which runs were used and what confounds them: print above the table."""
    table: str
    verdict: str
    rows: list[Row]


def report(
    base: Side | Run,
    cont: Side | Run,
    *,
    axes: set[str],
    factor: float = 1.05,
    fmt: str = "github",
    notes: list[str] | None = None,
) -> Report:
    base = base if isinstance(base, Side) else Side.whole(base)
    cont = cont if isinstance(cont, Side) else Side.whole(cont)
    envs = ("", "")
    if is_asv(base.run) or is_asv(cont.run):
        envs = (env_label(base.run, cont.run), env_label(cont.run, base.run))
    rows = compare_rows(base.rows, cont.rows, factor, envs=envs)
    notes = list(notes or [])
    single = sum(r.test == FACTOR_ONLY for r in rows)
    if single:
        notes.append(
            f"{single} row(s) have one value and no spread (asv --quick, track_): "
            f"the factor x{factor:g} alone decides them, as in asv compare"
        )
    diffs = confounders(base.run, cont.run, axes) if base.run is not cont.run else []
    if diffs:
        axis = ", ".join(sorted(axes)) or "the runs chosen"
        notes.append(f"confounded: besides {axis}, the runs differ in: " + "; ".join(diffs))
    worse, better = regressions(rows), [r for r in rows if r.change == "better"]
    verdict = (
        f"{len(better)} better, {len(worse)} worse (significant at p<0.01 and beyond "
        f"x{factor:g}), {len(rows) - len(better) - len(worse)} unchanged or not comparable"
    )
    return Report(notes=notes, table=render(rows, fmt), verdict=verdict, rows=rows)
