"""The comparisons the site publishes, which runs each one pairs, and what the verdicts say.

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
from typing import TYPE_CHECKING, Any

from dsbench import compare, results
from dsbench.compare import is_asv
from dsbench.errors import UsageError
from dsbench.kernels.registry import DEFAULTS as REFERENCE_IMPLS
from dsbench.publish import plots
from dsbench.publish.comparison_charts import comparison_charts, ratio_figure
from dsbench.publish.facts import by_hardware, finite, prose, run_title
from dsbench.publish.html import Html, breakable, el, join, link, table
from dsbench.records import HIGHER, fingerprint, value_or
from dsbench.results import Run

if TYPE_CHECKING:
    from dsbench.publish.site import Site

FACTOR = 1.05
"""The comparisons' ``--factor``: a change smaller than 5% either way is "unchanged"."""
DECIDE = "; what would decide it: "


@dataclass(frozen=True)
class Axis:
    slug: str
    """File name of the page (``compare/<slug>.html``)."""
    title: str
    baseline: str
    """``dsbench compare`` selector of the baseline side."""
    contender: str
    how: str
    """What to run to get results for both sides (text; `commands` in backticks)."""
    decide: str
    """What to run so that the verdicts can decide, when the data at hand cannot (text;
    ``{suite}`` stands for the group's suite)."""
    suite: str
    """The suite ``decide`` names when the group's own is not one of dsbench's (asv's)."""
    found: bool = False
    """An axis of a ``dsbench ab`` pair in the results that none of :data:`AXES` covers
    (:func:`ab_axes`), not one of the mission's questions."""


AXES = (
    Axis(
        "cuda-vs-rocm",
        "CUDA vs ROCm",
        "backend=cuda",
        "backend=rocm",
        "run `dsbench run` (same --suite) on an NVIDIA GPU machine and on an AMD GPU machine, "
        "then copy both machines' folders into one results folder",
        "the two backends run on different machines, so no `dsbench ab` can alternate them and "
        "no one machine's noise figure applies: each side needs several launches of its own, "
        "e.g. on each machine `dsbench ab --baseline commit=HEAD --contender commit=HEAD "
        "--suite {suite}` (each side's result file holds its launches)",
        "quick",
    ),
    Axis(
        "python-3.11-vs-3.12",
        "Python 3.11 vs 3.12",
        "python=3.11",
        "python=3.12",
        "run `dsbench ab --baseline python=3.11 --contender python=3.12 --suite quick` (both "
        "Pythons in alternating rounds; or asv over both Pythons with several rounds: see "
        "docs/development.md)",
        "`dsbench ab --baseline python=3.11 --contender python=3.12 --suite {suite}`",
        "quick",
    ),
    Axis(
        "deepspeed-0.18.3-vs-0.18.4",
        "DeepSpeed 0.18.3 vs 0.18.4",
        "deepspeed=0.18.3",
        "deepspeed=0.18.4",
        "run `dsbench ab --baseline deepspeed=0.18.3 --contender deepspeed=0.18.4 --suite "
        "training` (both versions in alternating rounds)",
        "`dsbench ab --baseline deepspeed=0.18.3 --contender deepspeed=0.18.4 --suite {suite}`",
        "training",
    ),
    Axis(
        "engine-dsbench-vs-deepspeed",
        "dsbench engine vs DeepSpeed",
        "engine=deepspeed",
        "engine=dsbench",
        "run `dsbench run --suite training` with DeepSpeed installed (it trains on both engines)",
        "`dsbench run --suite {suite}` with this dsbench: it times both engines in alternating "
        "rounds of one launch and records each round (result files before schema 3 record "
        "none)",
        "training",
    ),
)


KERNELS_SLUG = "kernels-vs-torch"
KERNELS_HOW = (
    "run `dsbench run --suite quick` (it times every kernel implementation that runs on the "
    "machine beside torch's own; `--suite full` adds the others as skipped rows saying why)"
)
KERNELS_DECIDE = (
    "`dsbench noise --suite {suite}` (it launches `dsbench run --suite {suite}` several times; "
    "each launch measures both implementations)"
)


def kernel_axes(runs: Iterable[Run]) -> tuple[Axis, ...]:
    """One parameter axis per kernel implementation the runs hold besides torch's own
    (``impl=torch`` for kernels, ``impl=native``, torch.distributed's, for collectives: the
    registry's reference of each op), e.g. ``impl=torch`` vs ``impl=triton``; one axis
    without data when the runs hold none."""
    found: dict[tuple[str, str], None] = {}
    for run in runs:
        for row in run.rows.values():
            impl, ref = row.params.get("impl"), REFERENCE_IMPLS.get(row.name)
            if impl is not None and ref is not None and str(impl) != ref:
                found[(ref, str(impl))] = None
    if not found:
        return (Axis(KERNELS_SLUG, "Kernel implementations vs torch", "impl=torch",
                     "impl=triton", KERNELS_HOW, KERNELS_DECIDE, "quick"),)  # fmt: skip
    return tuple(
        Axis(
            f"impl-{results.slug(impl)}-vs-{results.slug(ref)}",
            f"{impl} kernels vs torch" if ref == "torch" else f"{impl} vs torch.distributed",
            f"impl={ref}",
            f"impl={impl}",
            KERNELS_HOW,
            KERNELS_DECIDE,
            "quick",
        )
        for ref, impl in sorted(found)
    )


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


def ab_sides(runs: Iterable[Run]) -> dict[str, dict[str, Run]]:
    """Per ``dsbench ab`` id, the runs of its sides (``baseline``, ``contender``)."""
    sides: dict[str, dict[str, Run]] = {}
    for run in runs:
        ab = run.ab
        if ab is not None and ab.id and ab.side in ("baseline", "contender"):
            sides.setdefault(str(ab.id), {})[ab.side] = run
    return sides


def ab_pairs(
    runs: list[Run], b_sel: compare.Selector, c_sel: compare.Selector
) -> list[tuple[Run, Run, str]]:
    """Every two runs ``dsbench ab`` measured together (``Run.ab``: same id, one baseline and
    one contender side) that the two selectors tell apart, oriented as the axis, oldest first;
    each with the note that says so."""
    found = []
    for ab_id, pair_ in ab_sides(runs).items():
        b, c = pair_.get("baseline"), pair_.get("contender")
        if b is None or c is None:
            continue
        if not (b_sel.matches(b) and c_sel.matches(c)):
            b, c = c, b  # measured the other way round
        if b_sel.matches(b) and c_sel.matches(c) and not (b_sel.matches(c) or c_sel.matches(b)):
            specs = " vs ".join(str(r.ab.spec or "?") for r in (b, c))
            how = ("both sides resident, taking turns in blocks" if b.ab.pairing == "blocks"
                   else "in alternating rounds, each a fresh process")  # fmt: skip
            found.append((b, c, f"measured together by dsbench ab {ab_id} ({specs}) {how}"))
    return found


def ab_pair(
    runs: list[Run], b_sel: compare.Selector, c_sel: compare.Selector
) -> tuple[Run, Run, str] | None:
    """The newest of :func:`ab_pairs`, or None."""
    found = ab_pairs(runs, b_sel, c_sel)
    return found[-1] if found else None


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


AXIS_NAMES = {"deepspeed": "DeepSpeed", "python": "Python", "torch": "torch"}
"""How an A/B axis' title names its key (:func:`ab_axes`); other keys as they are."""


def ab_axes(runs: Iterable[Run], covered: Iterable[Axis] = AXES) -> tuple[Axis, ...]:
    """One axis per pair of sides that ``dsbench ab`` measured (``deepspeed=0.17.2`` vs
    ``deepspeed=0.19.8``) where no ``covered`` axis takes the pair and both sides are
    selectors that pick their own run (not an A/A: the two sides the same); in the order
    first measured."""
    runs = list(runs)
    keys = compare.param_keys(runs)
    taken = set()
    for axis in covered:
        try:
            b_sel = compare.Selector.parse(axis.baseline, keys)
            c_sel = compare.Selector.parse(axis.contender, keys)
        except UsageError:  # a parameter no run has
            continue
        taken |= {frozenset((b.id, c.id)) for b, c, _ in ab_pairs(runs, b_sel, c_sel)}
    found: dict[frozenset[str], Axis] = {}
    for pair_ in ab_sides(runs).values():
        b, c = pair_.get("baseline"), pair_.get("contender")
        if b is None or c is None or frozenset((b.id, c.id)) in taken:
            continue
        specs = [str(r.ab.spec or "") for r in (b, c)]
        if specs[0] == specs[1] or frozenset(specs) in found:
            continue
        try:
            sels = [compare.Selector.parse(x, keys) for x in specs]
        except UsageError:  # `current`, a path: not a selector
            continue
        if not (sels[0].matches(b) and sels[1].matches(c)) or sels[0].matches(c):
            continue
        (key, vb), (_, vc) = (x.partition("=")[::2] for x in specs)
        suite = str(b.suite or "quick")
        ab = f"dsbench ab --baseline {specs[0]} --contender {specs[1]}"
        found[frozenset(specs)] = Axis(
            f"{results.slug(key)}-{results.slug(vb)}-vs-{results.slug(vc)}",
            f"{AXIS_NAMES.get(key, key)} {vb} vs {vc}",
            specs[0],
            specs[1],
            f"run `{ab} --suite {suite}`",
            f"`{ab} --suite {{suite}}` with more rounds",
            suite,
            found=True,
        )
    return tuple(found.values())


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


DIFFERS = (compare.Change.BETTER, compare.Change.WORSE)


def undecided_all(p: Pairing) -> bool:
    c = p.report.counts
    return not (c["better"] or c["worse"] or c["unchanged"])


def finding(axis: Axis, p: Pairing) -> Html:
    """The pairing's summary for lists and the page: the counts, and when nothing is decided
    the plain statement that the data cannot decide (when some rows are not, why not)."""
    counts = counts_text(p.report.counts)
    why = undecided(axis, p)
    if why is None:
        partly = partly_undecided(p)
        return el("span", counts, *([" — ", partly] if partly else []))
    said, sep, command = why.partition(DECIDE)
    return join([el("span", counts, cls="muted"), " — ", el("strong", said), sep, prose(command)])


# --------------------------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------------------------


def comparison_page(site: Site, result: AxisResult) -> None:
    a = result.axis
    body = [
        el(
            "p",
            "Baseline ",
            el("code", a.baseline),
            ", contender ",
            el("code", a.contender),
            # the page says the rule of dsbench.stats.judge.decide for its readers
            ". Ratio = contender / baseline; ↑ higher is better, ↓ lower is better. Each row's "
            "verdict comes from the 99% interval of its ratio over rounds (fresh processes): "
            "better or worse only when the whole interval lies beyond the factor in the metric's "
            "direction, unchanged when it lies within it, inconclusive otherwise, with the "
            "reason.",
            cls="note",
        ),
    ]
    for p in result.pairings:
        body.append(pairing_section(site, result, p))
    site.write(f"compare/{a.slug}.html", a.title, join(body))


def pairing_section(site: Site, result: AxisResult, p: Pairing) -> Html:
    depth = 1
    base_run, cont_run = p.baseline.run, p.contender.run
    parts: list[Any] = [el("h2", p.group)]
    runs = [("baseline", base_run), ("contender", cont_run)]
    if base_run is cont_run:
        runs = [("both sides", base_run)]
    parts.append(
        el(
            "p",
            join(
                (
                    join([role, ": ", link(site.run_href(r, depth), run_title(r))])
                    for role, r in runs
                ),
                "; ",
            ),
        )
    )
    parts.append(el("ul", *(el("li", n) for n in p.report.notes), cls="plain note"))
    why = undecided(result.axis, p)
    if why is not None:
        said, sep, command = why.partition(DECIDE)
        parts.append(el("p", el("strong", said[0].upper() + said[1:]), sep, prose(command), ".",
                        cls="undecided"))  # fmt: skip
    parts.append(el("p", p.report.verdict, cls="verdict"))
    if (chart := ratio_figure(site, p, depth)) is not None:
        parts.append(chart)
    parts.append(comparison_table(p))
    parts += comparison_charts(site, result, p, depth)
    return join(parts)


def comparison_table(p: Pairing) -> Html:
    rows, classes = [], []
    with_env = any(r.baseline_env or r.contender_env for r in p.report.rows)
    ids = [r.id for r in p.report.rows]
    labels = dict(zip(ids, plots.short_labels(ids), strict=True))
    common = plots.common_part(ids)
    for r in p.report.rows:
        arrow = " ↑" if r.direction == HIGHER else " ↓" if r.direction else ""
        row = [
            el("span", breakable(labels[r.id]), title=r.id),
            f"{r.unit}{arrow}",
            finite(r.baseline),
            finite(r.contender),
            f"{r.ratio:.3f}" if finite(r.ratio) is not None else "-",
            el("span", compare.interval_text(r) or "-", cls="nowrap"),
            el("strong", str(r.change)) if r.change in DIFFERS else str(r.change),
            r.basis,
        ]
        if with_env:
            row += [r.baseline_env, r.contender_env]
        rows.append(row)
        classes.append(str(r.change) if r.comparable else "missing")
    headers = [
        "benchmark",
        "unit",
        "baseline",
        "contender",
        "ratio",
        "99% interval",
        "verdict",
        "basis",
    ]
    if with_env:
        headers += ["baseline env", "contender env"]
    caption = join(["every row is ", el("code", common), " with:"]) if common else None
    return table(headers, rows, row_classes=classes, caption=caption, cls="verdicts")
