"""Which runs each comparison (:mod:`dsbench.publish.data.axes`) pairs, and what the verdicts say.

Each :class:`Axis` is a pair of ``dsbench compare`` selectors. Runs are grouped by source and
suite (a quick-suite run is never paired with a training run); in each group that has both
sides, the newest pair that ``dsbench ab`` measured together in alternating rounds is used,
else :func:`dsbench.compare.pick_runs` picks the runs, and :func:`dsbench.compare.report` pairs
the rows and gives each its verdict by the rule of :func:`dsbench.stats.judge.decide`, exactly
as ``dsbench compare`` would, with the machine's noise figure when one exists. A parameter axis
(``engine=deepspeed`` vs ``engine=dsbench``, a kernel implementation vs torch's own:
:func:`kernel_axes`) compares two halves of one run: the run in the group that holds the most
cases on both sides (a whole suite rather than a ``--filter``'ed part), the newest among
equals. Noise calibrations (``dsbench noise``) are never a side of a
run-level axis, only lending their noise figure; for a parameter axis one is a run like any
other (both halves measured in the same launches).

A pairing whose rows are all inconclusive is not a finding: :func:`undecided` says so, with the
reason most rows share and the command that would decide it (:attr:`Axis.decide`).
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from dsbench import compare
from dsbench.compare import is_asv
from dsbench.errors import UsageError
from dsbench.publish.data.axes import AXES, FACTOR, Axis, ab_axes, ab_pairs, kernel_axes
from dsbench.publish.data.facts import by_hardware, finite, peak_share, side_row
from dsbench.records import fingerprint, value_or
from dsbench.results import Run


@dataclass
class Pairing:
    """One comparison inside an axis: a group of runs (source, suite) and its report."""

    group: str
    baseline: compare.Side
    contender: compare.Side
    report: compare.Report
    runs: list[Run]
    """The group's runs that match either side, oldest first (for the history chart)."""
    suite: str = ""
    """The group's suite (``asv`` for asv's runs)."""
    factor: float = FACTOR


@dataclass
class AxisResult:
    axis: Axis
    pairings: list[Pairing] = field(default_factory=list)
    param: bool = False
    """True when the axis selects rows by a benchmark parameter (both sides in one run)."""

    @property
    def has_data(self) -> bool:
        return bool(self.pairings)


def group_key(run: Run) -> tuple[str, str]:
    return run.source, str(run.suite or "-")


def group_name(key: tuple[str, str]) -> str:
    source, suite = key
    return f"{suite} suite" + ("" if source == "dsbench" else f" ({source})")


def groups(runs: Iterable[Run]) -> dict[tuple[str, str], list[Run]]:
    out: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        out.setdefault(group_key(run), []).append(run)
    return dict(sorted(out.items()))


def is_noise(run: Run) -> bool:
    """A noise calibration (``dsbench noise``): an A/A run, never a side of a comparison."""
    return run.purpose == "noise"


def pair(
    axis: Axis, runs: list[Run], factor: float = FACTOR, all_runs: list[Run] | None = None
) -> AxisResult:
    """Every group of ``runs`` in which both sides of ``axis`` exist, compared. ``all_runs``:
    where to look for noise calibrations (default ``runs``)."""
    keys = compare.param_keys(runs)
    result = AxisResult(axis)
    for sel_text in (axis.baseline, axis.contender):
        key = sel_text.partition("=")[0]
        if key not in compare.SELECTOR_KEYS and key not in keys:
            return result  # a parameter no run has: no data
    b_sel = compare.Selector.parse(axis.baseline, keys)
    c_sel = compare.Selector.parse(axis.contender, keys)
    result.param = b_sel.param or c_sel.param
    sides = runs if result.param else [r for r in runs if not is_noise(r)]
    # runs of two machines are never paired, unless the hardware is the axis (cuda vs rocm)
    split = not result.param and not compare.axes_of(b_sel, c_sel) & fingerprint.HARDWARE_AXES
    parts = [(key, *part) for key, members in groups(sides).items()
             for part in (by_hardware(members) if split else [("", members)])]  # fmt: skip
    for key, hw, members in parts:
        found = _pick(result.param, members, b_sel, c_sel, axis)
        hows = [x[4] for x in found]
        for i, (base, cont, notes, history, how) in enumerate(found):
            if hows.count(how) > 1:
                how = f"{how} {hows[: i + 1].count(how)}"
            rep = compare.report(
                base,
                cont,
                axes=compare.axes_of(b_sel, c_sel),
                factor=factor,
                notes=notes,
                runs=all_runs if all_runs is not None else runs,
            )
            name = group_name(key) + (f" · {hw}" if hw else "")
            name += f" ({how})" if len(found) > 1 else ""
            result.pairings.append(
                Pairing(name, base, cont, rep, history, suite=key[1], factor=factor)
            )
    return result


def _pick(param: bool, members: list[Run], b_sel, c_sel, axis: Axis) -> list[tuple]:
    """The comparisons of one group: (baseline side, contender side, notes, history runs, how
    they were measured); one per ``dsbench ab`` of the axis in the group (launch rounds and
    block rounds may both be there, each deciding other rows), else at most one."""
    if param:
        both = [r for r in members if b_sel.rows(r) and c_sel.rows(r)]
        if not both:
            return []
        # the run covering the most cases on both sides (a whole suite, not a --filter'ed
        # part of it), the newest among equals
        widest = max(range(len(both)), key=lambda i: (min(len(b_sel.rows(both[i])),
                                                        len(c_sel.rows(both[i]))), i))  # fmt: skip
        base, cont, notes = compare.pick_runs([both[widest]], axis.baseline, axis.contender)
        return [(base, cont, notes, both, "")]
    base_runs = [r for r in members if b_sel.matches(r)]
    cont_runs = [r for r in members if c_sel.matches(r) and r not in base_runs]
    if not base_runs or not cont_runs:
        return []
    chosen = [r for r in members if r in base_runs or r in cont_runs]
    found = ab_pairs(chosen, b_sel, c_sel)
    if found:
        return [
            (compare.Side.whole(b), compare.Side.whole(c),
             [f"baseline: {b.describe()}", f"contender: {c.describe()}", note], chosen,
             "block rounds" if b.ab.pairing == "blocks" else "launch rounds")
            for b, c, note in found
        ]  # fmt: skip
    try:
        base, cont, notes = compare.pick_runs(chosen, axis.baseline, axis.contender)
    except UsageError:  # no pair of runs shares a benchmark case
        return []
    return [(base, cont, notes, chosen, "")]


def pair_all(runs: list[Run], factor: float = FACTOR) -> list[AxisResult]:
    """:data:`AXES`, the :func:`kernel_axes` of ``runs`` and their other :func:`ab_axes`, each
    paired."""
    axes = (*AXES, *kernel_axes(runs))
    return [pair(axis, runs, factor) for axis in (*axes, *ab_axes(runs, axes))]


# --------------------------------------------------------------------------------------------
# What the verdicts say
# --------------------------------------------------------------------------------------------


def counts_text(counts: dict[str, int]) -> str:
    """``2 better, 0 worse, 5 unchanged, 12 inconclusive, 3 on one side only``."""
    text = (
        f"{counts['better']} better, {counts['worse']} worse, {counts['unchanged']} unchanged, "
        f"{counts['inconclusive']} inconclusive, {counts['one side only']} on one side only"
    )
    if counts.get("not comparable"):
        text += f", {counts['not comparable']} failed, skipped or unlike"
    return text


def dominant_reason(rows: Iterable[compare.ComparedRow]) -> tuple[str, int, int] | None:
    """(the reason most inconclusive rows share, how many share it, how many are inconclusive):
    each row's :attr:`~dsbench.compare.ComparedRow.reason`."""
    return most_common_reason(r.reason for r in rows if r.change is compare.Change.INCONCLUSIVE)


def most_common_reason(texts: Iterable[str]) -> tuple[str, int, int] | None:
    """(the reason most of ``texts`` give, how many give it, how many there are)."""
    reasons = Counter(texts)
    if not reasons:
        return None
    reason, n = reasons.most_common(1)[0]
    return reason, n, sum(reasons.values())


def decide_text(axis: Axis, p: Pairing) -> str:
    """What would decide this pairing (text with `commands`)."""
    from dsbench.suites import SUITES

    if p.suite == "soak":
        return soak_decide_text(p)
    text = axis.decide.format(suite=p.suite if p.suite in SUITES else axis.suite)
    asv_sides = [side.run for side in (p.baseline, p.contender) if is_asv(side.run)]
    if any(row.ok and row.stats.n == 1 for run in asv_sides for row in run.rows.values()):
        text += (
            "; for asv's own runs: several rounds with `--record-samples` (asv --quick keeps "
            "one value per case; see docs/development.md)"
        )
    elif asv_sides:
        text += (
            "; for asv's own runs: more rounds (`asv run -a rounds=N --record-samples "
            "--interleave-rounds`; each round is one launch)"
        )
    return text


SOAK_ROUNDS = 6
"""Rounds a side the decide text of a soak A/B asks for: 6+6 soaks can pass the exact test's
p < 0.01 on a row with one value a soak (2 / C(12, 6) = 0.002), 3+3 cannot (0.1)."""


def soak_decide_text(p: Pairing) -> str:
    """A soak A/B decides with more soaks a side, not a suite: its own command with
    :data:`SOAK_ROUNDS` rounds; its slope rows are read from their drift verdicts."""
    argv = list(value_or(p.baseline.run.record.argv, []) or [])
    if argv[:1] == ["ab"] and any(a.startswith("--soak") for a in argv):
        if "--rounds" in argv and argv.index("--rounds") + 1 < len(argv):
            argv[argv.index("--rounds") + 1] = str(SOAK_ROUNDS)
        else:
            argv += ["--rounds", str(SOAK_ROUNDS)]
        cmd = shlex.join(["dsbench", *argv])
    else:
        cmd = f"dsbench ab --rounds {SOAK_ROUNDS} --soak='ARGS' (the same soak on both sides)"
    return (
        f"more soaks a side, `{cmd}`; a slope (memory, heap, step-time drift) has no "
        "meaningful ratio and is read from its drift verdict on the soaks page"
    )


def undecided(axis: Axis, p: Pairing) -> str | None:
    """ "the data cannot decide: ..." when no row is better, worse or unchanged (text with
    `commands`), else None."""
    if not undecided_all(p):
        return None
    found = dominant_reason(p.report.rows)
    if found is None:
        return "the data cannot decide: no case was measured on both sides"
    reason, n, total = found
    share = "every row" if n == total else f"{n} of {total} inconclusive rows"
    return (
        f"the data cannot decide: {reason} ({share}); what would decide it: {decide_text(axis, p)}"
    )


def partly_undecided(p: Pairing) -> str | None:
    """For a pairing that decided some rows but not all: how many are not decided and why (the
    reason most share), else None."""
    found = dominant_reason(p.report.rows)
    if found is None or undecided_all(p):
        return None
    reason, n, total = found
    share = "all of them" if n == total else f"{n} of them"
    more = any(r.to_decide for r in p.report.rows if r.change is compare.Change.INCONCLUSIVE)
    return f"{total} not decided: {reason} ({share})" + (
        "; more rounds would decide them, each row says how many" if more else ""
    )


def undecided_all(p: Pairing) -> bool:
    c = p.report.counts
    return not (c["better"] or c["worse"] or c["unchanged"])


# --------------------------------------------------------------------------------------------
# What the charts draw
# --------------------------------------------------------------------------------------------


def peak_shares(p: Pairing) -> list[tuple[str, tuple[float, str] | None, tuple[float, str] | None]]:
    """(case id, the baseline's % of peak, the contender's) for each case where a side has one
    (:func:`dsbench.publish.data.facts.peak_share`: the share and its metric)."""
    out = []
    for r in p.report.rows:
        b, c = peak_share(side_row(p.baseline, r.id)), peak_share(side_row(p.contender, r.id))
        if b or c:
            out.append((r.id, b, c))
    return out


def run_ratios(result: AxisResult, p: Pairing, ids: list[str]) -> dict[str, list[float | None]]:
    """For a parameter axis: each case's contender / baseline ratio in each of the group's runs,
    oldest first (None where a run lacks it)."""
    ratios: dict[str, list[float | None]] = {i: [] for i in ids}
    for run in p.runs:
        base, cont, _ = compare.pick_runs([run], result.axis.baseline, result.axis.contender)
        rows = {r.id: r for r in compare.compare_rows(base.rows, cont.rows, unit="round")}
        for i in ids:
            ratios[i].append(finite(rows[i].ratio) if i in rows else None)
    return ratios


def relative_values(p: Pairing, ids: list[str]) -> dict[str, list[float | None]]:
    """Each case's value in each of the group's runs, oldest first, relative to the first run
    that has it (None where a run lacks it)."""
    out = {}
    for i in ids:
        vals = [finite(r.rows[i].value) if i in r.rows and r.rows[i].ok else None for r in p.runs]
        first = next((v for v in vals if v), None)
        out[i] = [v / first if v and first else None for v in vals]
    return out
