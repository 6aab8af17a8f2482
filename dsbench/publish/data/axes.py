"""The comparisons the site publishes: each :class:`Axis` is a pair of ``dsbench compare``
selectors, with what to run to get data for both sides and what would decide them. The fixed
questions (:data:`AXES`), one axis per kernel implementation the runs hold besides torch's own
(:func:`kernel_axes`), and one per other pair of sides ``dsbench ab`` measured
(:func:`ab_axes`); the runs each axis pairs: :mod:`dsbench.publish.data.pairings`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dsbench import compare, results
from dsbench.errors import UsageError
from dsbench.kernels.registry import DEFAULTS as REFERENCE_IMPLS
from dsbench.results import Run

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
