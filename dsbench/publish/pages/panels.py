"""The index's panels: one card per comparison (:mod:`dsbench.publish.pages.comparisons`) that
answers its question at a glance: the verdict counts, a small forest plot of the decided ratios
with their 99% intervals, the machine, the published claims about the same question with their
verdicts, and a link to the detail page; for a comparison without data, what to run, once."""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import TYPE_CHECKING, Any

from dsbench import results
from dsbench.publish import plots
from dsbench.publish.data.axes import FACTOR
from dsbench.publish.data.pairings import AxisResult
from dsbench.publish.data.panels import (
    VERDICTS,
    claims_on,
    decided_cases,
    machines,
    verdict_counts,
)
from dsbench.publish.html import Html, el, join, link
from dsbench.publish.pages.cells import prose
from dsbench.publish.pages.comparisons import finding
from dsbench.records import HIGHER, LOWER, ClaimCheck

if TYPE_CHECKING:
    from dsbench.publish.data.claims import Claim
    from dsbench.publish.site import Site

MAX_CLAIMS = 4
"""Claims listed on a panel; the claims page has them all."""


def panels(site: Site, axes: list[AxisResult], checked: list[tuple[Claim, ClaimCheck]]) -> Html:
    """The grid of panels, one per axis; each with the published claims on its topic (an A/B's
    own axis, :func:`dsbench.publish.data.axes.ab_axes`: on its two sides)."""
    cards = [panel(site, r, claims_on(r, checked)) for r in axes]
    return el("div", *cards, cls="panels")


def panel(site: Site, result: AxisResult, claims: list[tuple[Claim, ClaimCheck]]) -> Html:
    a = result.axis
    href = f"compare/{a.slug}.html"
    head = link(href, a.title) if result.has_data else a.title
    parts: list[Any] = [el("h3", head)]
    if not result.has_data:
        parts += [
            el("p", el("strong", "No data yet."), " To get it, ", prose(a.how), ".", cls="note"),
        ]
    else:
        parts.append(counts_badges(verdict_counts(result)))
        parts.append(el("p", "Machine: ", machines(result), cls="note"))
        if (chart := headline_figure(site, result)) is not None:
            parts.append(chart)
        parts.append(el("ul", *(el("li", el("strong", p.group), ": ",
                                       finding(a, p)) for p in result.pairings),
                        cls="plain"))  # fmt: skip
        parts.append(el("p", link(href, "Every case, the charts and the runs →")))
    parts.append(claims_block(claims))
    return el("section", *parts, cls="panel", id=f"panel-{a.slug}")


def counts_badges(counts: Counter[str]) -> Html:
    """``3 better · 0 worse · 5 unchanged · 12 inconclusive`` as coloured badges."""
    return el("p", *(el("span", el("b", str(counts[v])), f" {v}", cls=f"count {v}")
                     for v in VERDICTS), cls="counts")  # fmt: skip


def headline_figure(site: Site, result: AxisResult) -> Html | None:
    """A forest plot of the decided cases' ratios with their 99% intervals (the largest
    changes when there are many), or None when nothing is decided."""
    shown, total = decided_cases(result)
    if not shown:
        return None
    labels = plots.case_labels([r.id for _, r in shown])
    several = len({g for g, _ in shown}) > 1
    arrow = {HIGHER: " ↑", LOWER: " ↓"}
    cases = [
        plots.RatioCase(
            f"{g.split(' ', 1)[0]}: {lab}" if several else lab + arrow.get(str(r.direction), ""),
            r.ratio,
            r.low,
            r.high,
            r.change,
        )
        for lab, (g, r) in zip(labels, shown, strict=True)
    ]
    more = f" The {len(shown)} largest changes of {total}." if total > len(shown) else ""
    return site.figure(
        partial(plots.ratio_chart, cases, factor=FACTOR, width=5.5, legend=False),
        depth=0,
        alt=f"{result.axis.title}: decided ratios with their 99% intervals",
        caption=f"Decided cases: contender / baseline with its 99% interval; shaded: within "
        f"×{FACTOR:g} (unchanged). Green better, red worse, dark unchanged.{more}",
    )


def claims_block(claims: list[tuple[Claim, ClaimCheck]]) -> Html:
    """The published claims about this question with their verdicts, a few listed, and a link
    to their section of the claims page."""
    if not claims:
        return el("p", "No published claim about this comparison.", cls="note")
    decisions = Counter(str(row.decision or "-") for _, row in claims)
    said = ", ".join(f"{n} {d}" for d, n in decisions.most_common())
    items = []
    for claim, row in claims[:MAX_CLAIMS]:
        claimed = (row.claimed or {}).get("text") or claim.claimed_change
        items.append(el("li", claim.label_en or claim.label, ": ", claimed, " — ",
                        el("span", str(row.decision or "-"), cls="tag")))  # fmt: skip
    anchor = claims_anchor(claims[0][0])
    more = f" (and {len(claims) - MAX_CLAIMS} more)" if len(claims) > MAX_CLAIMS else ""
    return join([
        el("p", el("strong", f"Published claims ({len(claims)}): "), said, cls="claims"),
        el("ul", *items, cls="plain claims"),
        el("p", link(f"claims.html#{anchor}", f"The claims beside the measurements{more} →")),
    ])  # fmt: skip


def claims_anchor(claim: Claim) -> str:
    """The id of a claim file's section on the claims page."""
    return "claims-" + results.slug(claim.id.split("/", 1)[0])
