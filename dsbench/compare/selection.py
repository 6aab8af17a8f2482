"""Which runs a comparison uses: selectors (``0.18.3``, ``python=3.12``, ``engine=deepspeed``,
a label, a run id, a file), the closest pair of runs that share cases, and what else differs
between them (confounders). See :mod:`dsbench.compare`."""

from __future__ import annotations

import dataclasses
import re

from dsbench.errors import UsageError, choices_message
from dsbench.records import Row, case_id
from dsbench.results import Run

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

    def rows(self, run: Run) -> dict[str, Row]:
        """The run's rows this selector picks (all of them for a run-level selector), by id."""
        if not self.param:
            return run.rows
        return {k: r for k, r in run.rows.items() if str(r.params.get(self.key)) == self.value}


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
    """One side of a comparison: a run and the rows taken from it, by the key that pairs them."""

    run: Run
    rows: dict[str, Row]

    @classmethod
    def whole(cls, run: Run) -> Side:
        return cls(run, run.rows)


def param_keys(runs: list[Run]) -> frozenset[str]:
    return frozenset(k for r in runs for row in r.rows.values() for k in row.params)


def _strip(rows: dict[str, Row], keys: set[str]) -> dict[str, Row]:
    """Re-key rows by their id without the parameters being compared."""
    if not keys:
        return rows
    out = {}
    for row in rows.values():
        params = {k: v for k, v in row.params.items() if k not in keys}
        out[case_id(row.name, params)] = row
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
        others = {str(r.params[b_sel.key]) for r in base.rows.values()
                  if b_sel.key in r.params} - {b_sel.value}  # fmt: skip
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
        c_rows = cont.rows
    strip = {sel.key for sel in (b_sel, c_sel) if sel is not None and sel.param}
    return (Side(base, _strip(b_sel.rows(base), strip)), Side(cont, _strip(c_rows, strip)),
            [b_note, c_note])  # fmt: skip


def shared_cases(a: Run, b: Run) -> int:
    """How many benchmark cases both runs measured (status ok)."""
    ok = lambda run: {k for k, r in run.rows.items() if r.ok}  # noqa: E731
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
    suite = base.suite or "quick"
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
        (r.suite != base.suite, len(confounders(base, r, {axis})), -i, r)
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
    """Environment fields that differ besides the compared ``axes``. dsbench's version is not
    one where both runs name the same commit: the code is the same, and a version then differs
    only in how it was found (an interpreter without dsbench installed, before c44ea7e)."""
    diffs = []
    same_commit = bool(base.fields.get("commit")) and (
        base.fields.get("commit") == cont.fields.get("commit")
    )
    for key in CONFOUNDER_KEYS:
        if key in axes or (key == "dsbench" and same_commit):
            continue
        a, b = base.fields.get(key), cont.fields.get(key)
        if a != b:
            diffs.append(f"{key} ({a} vs {b})")
    return diffs


def is_asv(run: Run) -> bool:
    return run.source == "asv"


def axes_of(*selectors: Selector | None) -> set[str]:
    """The environment fields a comparison is meant to vary."""
    axes: set[str] = set()
    for sel in selectors:
        if sel is not None:
            axes |= {sel.key} if sel.key else {"label", "deepspeed"}
    return axes
