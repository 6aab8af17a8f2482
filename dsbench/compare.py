"""Compare two runs: selectors pick them, pairs are matched by benchmark id, and each pair gets
one of four verdicts from run-level statistics, in the metric's own direction.

- Verdicts (:func:`dsbench.stats.judge`): **better** / **worse** when the whole 99% interval of
  the contender/baseline ratio lies beyond ``--factor`` in the metric's direction, **unchanged**
  when it lies within [1/factor, factor], **inconclusive** otherwise, with the reason (one round
  per side, too few samples, spread too wide). The unit of evidence is the round: between two
  runs a launch (a fresh process); between two sides of one run (``engine=deepspeed`` vs
  ``engine=dsbench``) the alternating rounds both sides were timed in. Two runs of one launch
  each are decided only with a noise figure (an A/A calibration of the machine, ``dsbench
  noise``), the newest for that machine, named above the table.
- Direction: each row carries ``direction`` (higher is better for throughput, lower for time
  and memory); asv treats everything as lower-is-better, dsbench does not.
- Choosing runs: when a selector matches several runs, the pair of runs sharing benchmark cases
  and differing in the fewest fields besides the compared axis is used (newest first among
  equals), so ``--baseline 0.18.3 --contender 0.18.4`` over asv's matrix pairs the same Python.
  With no contender, the closest run that differs on the baseline selector's own axis is used.
- Environments: when a side comes from asv (one run per environment), every row carries the
  environment of each side (``python 3.11, deepspeed 0.18.3``).
- Confounders: environment fields that differ besides the compared axis are listed above the
  table, because such a comparison measures more than one thing.
"""

from __future__ import annotations

import dataclasses
import html
import io
import math
import re

from tabulate import tabulate

from dsbench.errors import UsageError, choices_message
from dsbench.results import Run, row_rounds
from dsbench.stats import VERDICTS, Noise, Verdict, centre, judge, round_spread

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
HEADERS = ["benchmark", "unit", "baseline", "contender", "ratio", "99% interval", "change", "basis"]
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
        cont, c_note = _closest_other(runs, base, b_sel)
        c_rows = cont.benchmarks
    strip = {sel.key for sel in (b_sel, c_sel) if sel is not None and sel.param}
    return (Side(base, _strip(b_sel.rows(base), strip)), Side(cont, _strip(c_rows, strip)),
            [b_note, c_note])  # fmt: skip


def shared_cases(a: Run, b: Run) -> int:
    """How many benchmark cases both runs measured (status ok)."""
    ok = lambda run: {k for k, r in run.benchmarks.items() if r["status"] == "ok"}  # noqa: E731
    return len(ok(a) & ok(b))


def selector_axis(sel: Selector, run: Run) -> str:
    """The run field a selector varies: its key, or for a bare value the field it matched
    (the DeepSpeed version, else the label)."""
    if sel.key is not None:
        return sel.key
    return "deepspeed" if run.fields.get("deepspeed") == sel.value else "label"


def ab_hint(axis: str, base: Run) -> str:
    """The `dsbench ab` command that measures both sides of ``axis`` in alternating rounds."""
    value = base.fields.get(axis)
    suite = base.doc.get("suite") or "quick"
    sides = {
        "deepspeed": (f"deepspeed={value}", "deepspeed=VERSION"),
        "python": (f"python={value}", "python=VERSION"),
        "commit": (f"commit={value}", "commit=REF"),
    }.get(axis, ("commit=REF", "commit=REF"))
    return f"dsbench ab --baseline {sides[0]} --contender {sides[1]} --suite {suite}"


def _closest_other(runs: list[Run], base: Run, sel: Selector) -> tuple[Run, str]:
    """With no contender: the run closest to ``base`` (sharing cases, fewest other
    differences, newest among equals) that differs on the selector's own axis."""
    axis = selector_axis(sel, base)
    candidates = [
        (r.doc.get("suite") != base.doc.get("suite"), len(confounders(base, r, {axis})), -i, r)
        for i, r in enumerate(runs)
        if r is not base
        and r.fields.get(axis) != base.fields.get(axis)
        and not sel.matches(r)
        and shared_cases(base, r)
    ]
    if not candidates:
        raise UsageError(
            f"no run differs from the baseline ({base.id}) in {axis} and shares a benchmark "
            f"case with it; measure both sides with: {ab_hint(axis, base)}"
        )
    *_, cont = min(candidates, key=lambda c: c[:3])
    note = (
        f"contender: {cont.describe()} — the closest run with another {axis} "
        f"({base.fields.get(axis)} vs {cont.fields.get(axis)})"
    )
    return cont, note


def _closest_pair(runs: list[Run], b_sel: Selector, c_sel: Selector) -> tuple[Run, Run, str, str]:
    """Among the runs each selector matches, the pair sharing benchmark cases and differing in
    the fewest fields besides the compared axes; among equals the newest. Runs are in
    chronological order."""
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
        if b != c and shared_cases(runs[b], runs[c])
    ]
    if not pairs:
        axis = selector_axis(b_sel, runs[b_match[-1]])
        raise UsageError(
            f"no run matching '{b_sel.text}' shares a benchmark case with a run matching "
            f"'{c_sel.text}'; measure both sides with: {ab_hint(axis, runs[b_match[-1]])}"
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
    """The baseline's centre: the geometric mean of its rounds' medians (one round: median)."""
    contender: float | None
    ratio: float | None
    change: str
    """A verdict (:data:`dsbench.stats.VERDICTS`), or why the row is not comparable: 'only in
    baseline', 'only in contender', 'baseline failed', 'skipped / failed', 'units differ'."""
    low: float | None = None
    """The 99% interval of the ratio."""
    high: float | None = None
    basis: str = ""
    """How the verdict was reached (``t(10)+bootstrap, 6+6 rounds``), or for ``inconclusive``
    why the data cannot decide."""
    baseline_env: str = ""
    """The environment the baseline value came from (set when a side is an asv run)."""
    contender_env: str = ""

    @property
    def comparable(self) -> bool:
        return self.change in VERDICTS


def _side(row: dict | None) -> str:
    if row is None:
        return "missing"
    return "" if row["status"] == "ok" else row["status"]


def compare_rows(
    base: dict[str, dict],
    cont: dict[str, dict],
    factor: float = 1.05,
    level: float = 0.99,
    envs: tuple[str, str] = ("", ""),
    unit: str = "launch",
    noise: dict[str, Noise] | None = None,
) -> list[Row]:
    """Pair benchmarks by id and judge each pair; rows present on one side only are listed.

    ``unit``: what a round is (``"launch"`` between runs, ``"round"`` between two sides of one
    run, see :func:`dsbench.results.row_rounds`). ``noise``: noise figures by benchmark id, used
    for pairs with a single launch on a side. ``envs``: the environment each side came from.
    """
    if not 1.0 <= factor < math.inf:  # NaN too
        raise UsageError(f"--factor must be a finite number >= 1.0, got {factor}")
    noise = noise or {}
    out = []
    for bid in list(base) + [k for k in cont if k not in base]:
        b, c = base.get(bid), cont.get(bid)
        ref = b or c
        bs, cs = _side(b), _side(c)
        unit_name, direction = ref.get("unit", ""), ref.get("direction")
        bv = b["value"] if not bs else None
        cv = c["value"] if not cs else None
        if bs or cs:
            if "missing" in (bs, cs):
                why = "only in contender" if bs == "missing" else "only in baseline"
            elif bs and cs:
                why = f"{bs} / {cs}"  # e.g. "skipped / failed"
            else:
                why = f"baseline {bs}" if bs else f"contender {cs}"
            out.append(Row(bid, unit_name, direction, bv, cv, None, why, None, None, "", *envs))
            continue
        if b["direction"] != c["direction"] or b["unit"] != c["unit"]:
            out.append(Row(bid, unit_name, direction, bv, cv, None, "units differ",
                           None, None, "", *envs))  # fmt: skip
            continue
        b_rounds, c_rounds = row_rounds(b, unit), row_rounds(c, unit)
        fig = noise.get(bid) if min(len(b_rounds), len(c_rounds)) == 1 else None
        v = judge(b_rounds, c_rounds, direction=direction, factor=factor, level=level, noise=fig)
        out.append(_row(bid, unit_name, direction, b_rounds, c_rounds, v, envs))
    return out


def _row(bid, unit, direction, b_rounds, c_rounds, v: Verdict, envs) -> Row:
    return Row(
        bid,
        unit,
        direction,
        centre(b_rounds),
        centre(c_rounds),
        v.ratio,
        v.change,
        v.low,
        v.high,
        v.why or v.method,
        *envs,
    )


def noise_figures(runs: list[Run], machine: str) -> tuple[Run | None, dict[str, Noise]]:
    """The newest noise calibration of ``machine`` (a run ``dsbench noise`` wrote) and its
    figure per benchmark id: the spread of the log launch medians, with launches - 1 df."""
    calib = [r for r in runs if r.doc.get("purpose") == "noise" and r.machine == machine]
    if not calib:
        return None, {}
    run = calib[-1]
    figures = {}
    for bid, row in run.benchmarks.items():
        if row["status"] != "ok":
            continue
        sigma, df = round_spread(row_rounds(row, "launch"))
        if df:
            figures[bid] = Noise(sigma=sigma, df=df, source=run.id)
    return run, figures


def tally(rows: list[Row]) -> dict[str, int]:
    """Rows per verdict, plus those on one side only and those failed, skipped or unlike."""
    counts = {v: 0 for v in VERDICTS} | {"one side only": 0, "not comparable": 0}
    for r in rows:
        if r.comparable:
            counts[r.change] += 1
        elif r.change.startswith("only in"):
            counts["one side only"] += 1
        else:
            counts["not comparable"] += 1
    return counts


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def interval_text(r: Row) -> str:
    return "" if r.low is None else f"{r.low:.3f}-{r.high:.3f}"


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
            interval_text(r),
            r.change,
            r.basis,
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
    counts: dict[str, int]


def report(
    base: Side | Run,
    cont: Side | Run,
    *,
    axes: set[str],
    factor: float = 1.05,
    fmt: str = "github",
    notes: list[str] | None = None,
    runs: list[Run] | None = None,
) -> Report:
    """The comparison table with its notes and summary line. ``runs``: where to look for the
    machine's noise calibration (used for pairs with one launch on a side)."""
    base = base if isinstance(base, Side) else Side.whole(base)
    cont = cont if isinstance(cont, Side) else Side.whole(cont)
    notes = list(notes or [])
    envs = ("", "")
    if is_asv(base.run) or is_asv(cont.run):
        envs = (env_label(base.run, cont.run), env_label(cont.run, base.run))
    same_run = base.run is cont.run
    noise: dict[str, Noise] = {}
    if not same_run and runs and base.run.machine == cont.run.machine:
        calib, noise = noise_figures(
            [r for r in runs if r is not base.run and r is not cont.run], base.run.machine
        )
        if calib is not None:
            notes.append(
                f"noise figure: {calib.describe()}, the newest A/A calibration of "
                f"{calib.machine} ({len(calib.doc.get('launches') or [])} launches), for rows "
                "with one launch on a side"
            )
    unit = "round" if same_run else "launch"
    rows = compare_rows(base.rows, cont.rows, factor, envs=envs, unit=unit, noise=noise)
    single = sum(r.basis.startswith("one value") for r in rows)
    if single:
        notes.append(
            f"{single} row(s) have one value on a side (asv --quick, track_): inconclusive; "
            "asv keeps real samples with --record-samples and several rounds (see the README)"
        )
    diffs = confounders(base.run, cont.run, axes) if not same_run else []
    if diffs:
        axis = ", ".join(sorted(axes)) or "the runs chosen"
        notes.append(f"confounded: besides {axis}, the runs differ in: " + "; ".join(diffs))
    counts = tally(rows)
    verdict = (
        f"{counts['better']} better, {counts['worse']} worse, {counts['unchanged']} unchanged, "
        f"{counts['inconclusive']} inconclusive (99% interval of the ratio against x{factor:g}, "
        f"rounds = {'alternating rounds of one launch' if same_run else 'launches'}), "
        f"{counts['one side only']} on one side only"
        + (f", {counts['not comparable']} failed, skipped or unlike" if counts["not comparable"]
           else "")
    )  # fmt: skip
    return Report(notes=notes, table=render(rows, fmt), verdict=verdict, rows=rows, counts=counts)
