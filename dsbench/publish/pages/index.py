"""The front pages: ``index.html`` (a panel per comparison, :mod:`dsbench.publish.pages.panels`; the
runs grouped by machine, profile, backend, Python and DeepSpeed version, with headline numbers;
links to the other pages and asv's)
and ``comparisons.html`` (which comparisons have data, and what to run for the others)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsbench import results
from dsbench.publish.data.axes import FACTOR
from dsbench.publish.data.facts import (
    headlines,
    run_groups,
    status_counts,
    when,
)
from dsbench.publish.data.pairings import AxisResult
from dsbench.publish.html import Html, el, join, link, table, warn_list
from dsbench.publish.pages import panels
from dsbench.publish.pages.cells import prose
from dsbench.publish.pages.comparisons import finding
from dsbench.results import Run

if TYPE_CHECKING:
    from dsbench.publish.data.claims import Claim
    from dsbench.publish.site import Site
    from dsbench.records import ClaimCheck

RUN_COLUMNS = [
    "created",
    "run",
    "label",
    "suite",
    "source",
    "device",
    "commit",
    "benchmarks",
    "headline numbers",
]


def index_page(site: Site, axes: list[AxisResult], checked: list[tuple[Claim, ClaimCheck]]) -> None:
    """The front page: a panel per comparison (with the claims on its topic: ``checked``), the
    runs grouped by machine and versions, and the other pages."""
    machines = sorted({r.machine for r in site.runs})
    sources = sorted({r.source for r in site.runs})
    body = [
        el(
            "p",
            f"{len(site.runs)} run(s) from {len(machines)} machine(s) "
            f"({', '.join(machines)}); sources: {', '.join(sources)}.",
        ),
    ]
    if site.skipped:
        body.append(warn_list(f"{len(site.skipped)} file(s) skipped:", site.skipped))
    body += [
        el("h2", "Comparisons"),
        el(
            "p",
            "Each panel answers one question: the verdicts of its cases (from the 99% interval "
            "of each contender/baseline ratio; ",
            link("comparisons.html", "how"),
            "), the decided ratios, the machine, and what published claims say.",
            cls="note",
        ),
        panels.panels(site, axes, checked),
    ]
    body += [
        el("h2", "Runs"),
        el(
            "p",
            "Grouped by machine, hardware profile, backend, Python and DeepSpeed version; "
            "newest first. Headline numbers: each benchmark's best case.",
            cls="note",
        ),
    ]
    body += run_tables(site)
    body += [el("h2", "More"), _more_list()]
    body += [el("h2", "asv"), asv_note(site, 0)]
    site.write("index.html", "dsbench results", join(body))


def run_tables(site: Site) -> list[Html]:
    """Per group of runs (machine, profile, backend, Python, DeepSpeed) a heading and a table of
    its runs, newest first."""
    body = []
    for (machine, profile, backend, python, ds), members in run_groups(site.runs):
        body.append(
            el(
                "h3",
                f"{machine} · profile {profile} · {backend} · Python {python} · DeepSpeed {ds}",
            )
        )
        body.append(table(RUN_COLUMNS, [_run_row(site, run) for run in reversed(members)]))
    return body


def _run_row(site: Site, run: Run) -> list[Any]:
    f = run.fields
    return [
        el("span", when(run.created), title=run.created, cls="nowrap"),
        link(site.run_href(run, 0), run.id),
        join([run.label or "", *run_role(run), *_purpose(site, run)], " "),
        run.suite or "",
        run.source,
        f.get("device") or f.get("cpu") or "-",
        (f.get("commit") or "-")[:12],
        status_counts(run),
        join((el("span", h, cls="tag") for h in headlines(run)), " "),
    ]


def _purpose(site: Site, run: Run) -> list[Html]:
    """The run's purpose from the results folder's manifest, on a line of its own, if listed."""
    purpose = site.purpose(run)
    return [el("br"), el("span", purpose, cls="muted")] if purpose else []


def _more_list() -> Html:
    return el(
        "ul",
        el("li", link("history.html", "History"), ": every benchmark across runs"),
        el(
            "li",
            link("profiles.html", "Hardware profiles"),
            ": modelled floors on A100, H100, H200, MI250X, MI300X beside measured values; "
            "rooflines",
        ),
        el(
            "li",
            link("stability.html", "Stability"),
            ": soaks: memory and step time per rank, drift verdicts, faults and resumes",
        ),
        el(
            "li",
            link("releases.html", "Across releases"),
            ": sweeps over DeepSpeed releases or commits, their confirmed steps",
        ),
        el("li", link("claims.html", "Claims"), ": published numbers beside dsbench's"),
        cls="plain",
    )


def run_role(run: Run) -> list[Html]:
    """Tags for runs made for comparing: a side of a ``dsbench ab`` pair, a noise calibration."""
    ab = run.ab
    tags = []
    if ab is not None and ab.side:
        tags.append(el("span", f"ab {ab.side}: {ab.spec or '?'}", cls="tag"))
    if run.purpose == "noise":
        tags.append(el("span", "noise calibration", cls="tag"))
    return tags


def comparison_list(axes: list[AxisResult], depth: int) -> Html:
    """Each comparison with, per group, its verdict counts; a group where nothing is decided
    says so plainly, with the reason and what would decide it. Noise is never a finding."""
    items = []
    for r in axes:
        a = r.axis
        if r.has_data:
            groups = el(
                "ul",
                *(el("li", p.group, ": ", finding(a, p)) for p in r.pairings),
                cls="plain",
            )
            items.append(el("li", link("../" * depth + f"compare/{a.slug}.html", a.title), groups))
        else:
            items.append(
                el(
                    "li",
                    el("strong", a.title),
                    " — no data: needs runs matching ",
                    el("code", a.baseline),
                    " and ",
                    el("code", a.contender),
                    "; to get them, ",
                    prose(a.how),
                    ".",
                )
            )
    return el("ul", *items, cls="plain")


def asv_note(site: Site, depth: int) -> Html:
    if site.asv_copied:
        return el(
            "p",
            "asv's own pages (its graphs per commit and environment): ",
            link("../" * depth + "asv/index.html", "asv/index.html"),
        )
    return el(
        "p",
        "asv's own pages are not here: run ",
        el("code", "asv publish"),
        f" (it writes {site.results_root / results.ASV_HTML_DIR}), then ",
        el("code", "dsbench publish"),
        " again.",
        cls="note",
    )


def comparisons_page(site: Site, axes: list[AxisResult]) -> None:
    f = FACTOR
    body = [
        el(
            "p",
            "Each comparison pairs runs as ",
            el("code", "dsbench compare"),
            f" does and gives each case one of four verdicts from the 99% interval of the "
            f"contender/baseline ratio, in the metric's own direction: better or worse when "
            f"the whole interval lies beyond ×{f:g}, unchanged when it lies within 1/{f:g} "
            f"to ×{f:g}, inconclusive otherwise. The interval comes from rounds (fresh "
            "processes: "
            "launches, or the alternating rounds of one launch), not from the repetitions "
            "inside one process, so two single-launch runs are inconclusive unless a noise "
            "calibration of the machine (",
            el("code", "dsbench noise"),
            ") exists; ",
            el("code", "dsbench ab"),
            " measures two sides in alternating rounds.",
            cls="note",
        ),
        comparison_list(axes, 0),
    ]
    site.write("comparisons.html", "Comparisons", join(body))
