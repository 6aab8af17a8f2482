"""``claims.html``: each claim file's table, what was claimed beside what dsbench measured or
modelled (said which), the verdict and the commands that would measure it; the stability claims
beside the soaks (:mod:`dsbench.publish.pages.stability_claims`). A claim is never treated as a
result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsbench import results
from dsbench.publish.data import claims
from dsbench.publish.data.facts import finite
from dsbench.publish.html import Html, details, el, join, render_value, table, warn_list
from dsbench.publish.pages import stability_claims
from dsbench.publish.pages.cells import cell
from dsbench.records import HIGHER, LOWER, ClaimCheck, value_or

if TYPE_CHECKING:
    from pathlib import Path

    from dsbench.publish.site import Site

CLAIM_CLASSES = {"consistent": "consistent", "contradicted": "contradicted"}


def claims_page(site: Site, checked: claims.CheckedClaims) -> None:
    """Each claim file's table: what was claimed, what dsbench measured or modelled (said
    which), the verdict and the commands that would measure it."""
    folder = checked.folder
    body: list[Any] = _intro(folder)
    if checked.problems:
        body.append(warn_list("Claim files skipped:", checked.problems))
    body += stability_claims.claims_table(site, checked.claims)
    rows = checked.checks
    if not rows:
        body.append(el("p", f"No claims to check: add claim files under {folder}.", cls="note"))
    body += _source_tables(rows)
    site.write("claims.html", "Claims", join(body))


def _intro(folder: Path) -> list[Any]:
    """What the page shows, and when a claim is consistent, contradicted or not decided."""
    return [
        el(
            "p",
            "Published numbers (claim files under ",
            el("code", str(folder)),
            ") beside what dsbench measured, or, where nothing is measured yet, modelled "
            "from hardware profiles; the dsbench column says which. A claim is never "
            "treated as a result.",
            cls="note",
        ),
        el(
            "p",
            "A measured claim is ",
            el("strong", "consistent"),
            " with the measurement when the whole 99% interval of dsbench's ratio "
            "(contender / baseline, over rounds) lies within the ratios that agree with "
            f"the claim (the printed ratio ÷/× {claims.FACTOR:g}, a printed range as it "
            f"stands, a bound from bound ÷ {claims.FACTOR:g} on), ",
            el("strong", "contradicted"),
            " when it lies wholly outside them, ",
            el("strong", "not decided"),
            " when it reaches across an edge or the data give no interval (one round per "
            "side without a noise figure, one value per side). Over several cases the "
            "interval is that of their geometric mean: each case's interval at 99%/n "
            "(Bonferroni), then the geometric means of the lower and of the upper ends. "
            "A modelled ratio decides nothing.",
            cls="note",
        ),
    ]


def _source_tables(rows: list[ClaimCheck]) -> list[Any]:
    """One heading, scenario and table per source (claim file section) of the checked rows."""
    by_source: dict[str, list[ClaimCheck]] = {}
    for r in rows:
        by_source.setdefault(str(r.source_text or r.title or "-"), []).append(r)
    body: list[Any] = []
    anchors: set[str] = set()
    for source, entries in by_source.items():
        first = entries[0]
        title = first.title or source
        if first.title_en:
            title = f"{title} ({first.title_en})"
        anchor = "claims-" + results.slug(first.claim.split("/", 1)[0])
        anchor = None if anchor in anchors else anchor  # a file's first section holds its id
        anchors.add(anchor or "")
        body += [el("h2", title, id=anchor), el("p", source, cls="note")]
        if first.scenario:
            body.append(details("scenario as the source states it", render_value(first.scenario)))
        body.append(table(
            ["claim", "metric", "claimed", "dsbench", "verdict", "to measure it"],
            [claim_row(r) for r in entries],
            row_classes=[claim_class(r) for r in entries],
        ))  # fmt: skip
    return body


def claim_class(r: ClaimCheck) -> str:
    """Row class: consistent / contradicted coloured, everything undecided grey."""
    if r.kind == "none":
        return "missing"
    return CLAIM_CLASSES.get(str(value_or(r.decision)), "undecided")


def claim_row(r: ClaimCheck) -> list[Any]:
    """One claim: its label, metric, the claimed numbers, dsbench's ratio labelled measured or
    modelled with its 99% interval, the decision and why, the commands."""
    label = r.label or r.claim
    if r.label_en:
        label = join([label, el("br"), el("span", r.label_en, cls="muted")])
    arrow = {HIGHER: " ↑", LOWER: " ↓"}.get(str(value_or(r.direction)), "")
    commands = r.commands or []
    return [
        label,
        f"{value_or(r.metric, '')} ({value_or(r.unit, '')}{arrow})",
        cell((r.claimed or {}).get("text")),
        _dsbench_cell(r),
        _verdict_cell(r, commands),
        join(el("div", el("code", c)) for c in commands),
    ]


def _dsbench_cell(r: ClaimCheck) -> Html:
    """dsbench's ratio, tagged measured / modelled / none, with its 99% interval and details."""
    kind = str(r.kind or "none")
    ratio = finite(r.dsbench_ratio)
    dsb = "-" if kind == "none" or ratio is None else f"{ratio:.3f}"
    parts: list[Any] = [dsb, " ", el("span", kind, cls="tag")]
    if interval := r.interval:
        parts += [el("br"), el("span", f"99%: {interval[0]:.3f}–{interval[1]:.3f}", cls="nowrap")]
    elif kind == "measured":
        parts += [el("br"), el("span", "no interval", cls="muted")]
    dsb_cell = el("span", *parts, cls=kind)
    more = [m for m in (r.measured, r.modelled) if m]
    if more:
        dsb_cell = join([dsb_cell, details("details", *(render_value(m) for m in more))])
    return dsb_cell


def _verdict_cell(r: ClaimCheck, commands: list[str]) -> Any:
    """The decision in bold and why; the commands stand in the next column, so the verdict
    says only that they are needed."""
    decision = str(r.decision or "")
    verdict = str(r.verdict or "")
    rest = verdict.removeprefix(f"{decision}: ") if decision else verdict
    rest = rest.split("; to decide it: ", 1)[0].split(": run ", 1)[0]
    if commands and rest != verdict:
        rest += " (the commands beside would measure it)"
    return join([el("strong", decision), el("br"), rest]) if decision else rest
