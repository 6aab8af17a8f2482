"""The charts of a comparison page: the sorted ratios with their 99% intervals, each side's
values with their CIs, each side's % of peak, and the history over the group's runs."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from dsbench.publish import plots
from dsbench.publish.data.facts import ci, finite, short_run, side_row
from dsbench.publish.data.pairings import peak_shares, relative_values, run_ratios
from dsbench.publish.html import Html, el
from dsbench.records import HIGHER, LOWER

if TYPE_CHECKING:
    from dsbench.publish.data.pairings import AxisResult, Pairing
    from dsbench.publish.site import Site

MAX_BARS = 40
"""Bars per chart; a comparison with more rows draws the first ones and says so."""


def ratio_figure(site: Site, p: Pairing, depth: int) -> Html | None:
    """The sorted chart of ratios with their 99% intervals, coloured by verdict."""
    rows = [r for r in p.report.rows if r.comparable and finite(r.ratio) and r.ratio > 0]
    if not rows:
        return None
    labels = plots.case_labels([r.id for r in rows])
    arrow = {HIGHER: " ↑", LOWER: " ↓"}
    cases = [
        plots.RatioCase(f"{lab}{arrow.get(str(r.direction), '')}", r.ratio, r.low, r.high, r.change)
        for lab, r in zip(labels, rows, strict=True)
    ]
    left_out = len(p.report.rows) - len(rows)
    bare = sum(r.low is None for r in rows)
    common = plots.common_part([r.id for r in rows])
    caption = [
        f"Contender / baseline per case, sorted, with its 99% interval (whisker); the shaded "
        f"band is 1/{p.factor:g} to ×{p.factor:g}, where a change counts as none. Colour: "
        "green better, red worse, dark unchanged, grey inconclusive (↑ higher is better, ↓ "
        "lower is better, so a ratio above 1 is better for ↑ and worse for ↓)."
    ]
    if bare:
        caption.append(f" {bare} case(s) have no interval (hollow dot): see the basis column.")
    if len({plots.split_id(r.id)[0] for r in rows}) > 1:
        caption.append(
            " Labels leave out the parameters all cases of one benchmark share (the table's "
            "benchmark cells give each full id)."
        )
    elif common:
        caption.append(f" Every case is {common} with the parameters shown.")
    if left_out:
        caption.append(f" {left_out} row(s) not on both sides, failed or skipped are not drawn.")
    return site.figure(
        partial(
            plots.ratio_chart,
            cases,
            factor=p.factor,
            title=f"{p.group}: contender / baseline, 99% interval",
        ),
        depth=depth,
        alt=f"{p.group}: ratio of each case with its 99% interval, sorted",
        caption="".join(caption),
    )


def comparison_charts(site: Site, result: AxisResult, p: Pairing, depth: int) -> list[Html]:
    """Per unit, both sides' values with their 99% CIs; both sides' % of peak; the history."""
    b_name, c_name = (
        (result.axis.baseline, result.axis.contender)
        if result.param
        else (
            f"baseline ({short_run(p.baseline.run)})",
            f"contender ({short_run(p.contender.run)})",
        )
    )
    by_unit: dict[str, list] = {}
    for r in p.report.rows:
        if r.ratio is not None:
            by_unit.setdefault(r.unit, []).append(r)
    out = [_values_figure(site, p, unit, rows, (b_name, c_name), depth)
           for unit, rows in by_unit.items()]  # fmt: skip
    share = _peak_share_figure(site, p, (b_name, c_name), depth)
    if share is not None:
        out.append(share)
    hist = comparison_history(result, p)
    if hist is not None:
        out.append(site.figure(hist[0], depth=depth, alt="history across runs", caption=hist[1]))
    else:
        which = "holds both sides" if result.param else "matches either side"
        out.append(el("p", f"No history yet: only one run of this group {which}.", cls="note"))
    return out


def _values_figure(
    site: Site, p: Pairing, unit: str, rows: list, names: tuple[str, str], depth: int
) -> Html:
    """Grouped bars of the cases in ``unit``: each side's value with its 99% CI."""
    shown = rows[:MAX_BARS]
    labels = plots.short_labels([r.id for r in shown])
    series = []
    for name, side, attr in (
        (names[0], p.baseline, "baseline"),
        (names[1], p.contender, "contender"),
    ):
        bounds = [ci(side_row(side, r.id)) for r in shown]
        series.append(
            plots.Series(
                name,
                [getattr(r, attr) for r in shown],
                [b[0] for b in bounds],
                [b[1] for b in bounds],
            )
        )
    more = f" (first {MAX_BARS} of {len(rows)})" if len(rows) > MAX_BARS else ""
    return site.figure(
        partial(
            plots.grouped_bars,
            labels,
            series,
            xlabel=unit,
            title=f"{p.group}: each side's value, 99% CI of its samples",
        ),
        depth=depth,
        alt=f"{unit}: baseline and contender values with 99% CI",
        caption=f"{unit}: each side's value with the 99% confidence interval of its "
        f"samples' median{more}. Those intervals are within one run; the verdicts use "
        "the spread between rounds (the first chart).",
    )


def _peak_share_figure(site: Site, p: Pairing, names: tuple[str, str], depth: int) -> Html | None:
    """Grouped bars of each side's % of peak, or None when no case has one."""
    share_rows = peak_shares(p)
    if not share_rows:
        return None
    shown = share_rows[:MAX_BARS]
    metrics = sorted({s[1] for _, b, c in shown for s in (b, c) if s})
    labels = plots.short_labels([i for i, _, _ in shown])
    series = [
        plots.Series(names[0], [b[0] if b else None for _, b, _ in shown]),
        plots.Series(names[1], [c[0] if c else None for _, _, c in shown]),
    ]
    over = sum(s[0] > 100 for _, b, c in shown for s in (b, c) if s)
    flag = (
        f" {over} value(s) lie above 100% (right of the dashed line): the peak they are "
        "measured against is below what the benchmark reached (a measured ceiling that "
        "understated the machine, or a datasheet figure below boost clocks); the run pages "
        "name each peak's source."
        if over
        else ""
    )
    return site.figure(
        partial(
            plots.grouped_bars,
            labels,
            series,
            xlabel="% of peak",
            title=f"{p.group}: % of the profile's peak",
            reference=100.0,
        ),
        depth=depth,
        alt="percent of peak, baseline and contender",
        caption=f"% of the hardware profile's peak, metric {', '.join(metrics)} "
        f"(the peak each run's profile gives, measured on CPUs; MFU for training "
        f"steps).{flag}",
    )


def comparison_history(result: AxisResult, p: Pairing):
    """Across the group's runs (oldest first): the value relative to the first run that has
    it, or for a parameter axis the contender/baseline ratio in each run."""
    paired = [r.id for r in p.report.rows if r.ratio is not None]
    ids = paired[: plots.MAX_LINES]
    if len(p.runs) < 2 or not ids:
        return None
    labels = plots.short_labels(ids)
    x = [short_run(r) for r in p.runs]
    if result.param:
        ratios = run_ratios(result, p, ids)
        series = [plots.Series(lab, ratios[i]) for lab, i in zip(labels, ids, strict=True)]
        ylabel, what = "contender / baseline", "the contender/baseline ratio in each run"
    else:
        relative = relative_values(p, ids)
        series = [plots.Series(lab, relative[i]) for lab, i in zip(labels, ids, strict=True)]
        ylabel, what = "relative to the first run", "each value relative to the first run"
    which = "hold both sides" if result.param else "match either side"
    more = f" The first {len(ids)} of {len(paired)} benchmarks." if len(paired) > len(ids) else ""
    caption = (
        f"History over the {len(p.runs)} runs of this group that {which}, oldest first: "
        f"{what}.{more} Single values per run, without intervals: a trend, not a verdict."
    )

    draw = partial(plots.history, x, series, ylabel=ylabel, log=False, title=f"{p.group}: history")
    return draw, caption
