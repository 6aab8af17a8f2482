"""``compare/<axis>.html``: a page per comparison with data: each pairing's runs, notes, the
statement when the data cannot decide, the verdict table and the charts (what is paired and what
the verdicts say: :mod:`dsbench.publish.data.pairings`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsbench import compare
from dsbench.publish import plots
from dsbench.publish.data.axes import DECIDE, Axis
from dsbench.publish.data.facts import finite, run_title
from dsbench.publish.data.pairings import (
    AxisResult,
    Pairing,
    counts_text,
    partly_undecided,
    undecided,
)
from dsbench.publish.html import Html, breakable, el, join, link, table
from dsbench.publish.pages.cells import prose
from dsbench.publish.pages.comparison_charts import comparison_charts, ratio_figure
from dsbench.records import HIGHER

if TYPE_CHECKING:
    from dsbench.publish.site import Site


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


DIFFERS = (compare.Change.BETTER, compare.Change.WORSE)


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
