"""``dsbench publish``: every result (dsbench's and asv's) as a static site that works offline.

Pages (all relative links; no CDN, no web fonts, no scripts; charts are PNG files in ``img/``)::

    index.html              runs by machine, profile, backend, Python and DeepSpeed version,
                            with headline numbers; the comparisons; asv's own pages
    comparisons.html        which comparisons have data, and what to run for the others
    compare/<axis>.html     table (dsbench.compare), grouped bars with 99% CI, % of peak, history
    runs/<run>.html         one run: every row, the full environment, the hardware profile
    history.html            each benchmark across the runs of a machine and suite
    profiles.html           cross-profile table: modelled floors beside measured values
    roofline/<profile>.html the profile's roofline with the measured kernels on it
    stability.html          each soak: memory and step time per rank, drift, faults, losses
    claims.html             published claims beside what dsbench measured or modelled; the
                            stability claims beside the soaks
    asv/                    ``asv publish`` output, copied when the results folder has it

The site is built in a temporary folder next to ``--out`` and moved into place at the end, so a
failed build leaves the previous site as it was. ``--out`` must be new, empty, or a site made
here before (it holds :data:`MARKER`); anything else is refused.

Result files travel between machines and teams: every string taken from one is escaped where
it meets markup (:mod:`dsbench.publish.html`) and in chart text (:mod:`dsbench.publish.plots`),
and file names in the site are made here, never taken from a result file.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dsbench import asv_results, results
from dsbench.errors import UsageError
from dsbench.publish import comparisons, profiles, stability, stability_claims
from dsbench.publish import runs as run_pages
from dsbench.publish.comparisons import AxisResult
from dsbench.publish.facts import (
    backend_name,
    cell,
    finite,
    headlines,
    optional,
    prose,
    status_counts,
    when,
)
from dsbench.publish.html import (
    CSS,
    Html,
    details,
    el,
    join,
    link,
    page,
    render_value,
    table,
    void,
    warn_list,
)
from dsbench.results import Run

MARKER = ".dsbench-site"
"""File at the root of every site ``dsbench publish`` writes; only such a folder is replaced."""


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def load_all(root: Path, warn: Callable[[str], None]) -> list[Run]:
    """dsbench's runs and, when the asv reader is installed, asv's (``root/asv``)."""
    try:
        importlib.import_module("dsbench.asv_results")
        with_asv = True
    except ModuleNotFoundError as exc:
        if exc.name != "dsbench.asv_results":
            raise
        with_asv = False
        if (root / results.ASV_DIR).is_dir():
            warn(
                f"asv results in {root / results.ASV_DIR} left out: dsbench.asv_results is "
                "not installed"
            )
    if with_asv:
        return asv_results.load_all_runs(root, warn)
    return results.load_runs(root, warn)


def check_out(out: Path, results_root: Path) -> None:
    """Refuse an ``--out`` that publishing would damage (one line, exit 2)."""
    o, r = out.resolve(), results_root.resolve()
    if o == r or o in r.parents or r in o.parents:
        raise UsageError(
            f"--out {out} and the results folder {results_root} overlap; choose a folder "
            "outside the results"
        )
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise UsageError(f"--out {out} exists and is not a folder; choose a new folder")
    if out.is_dir() and not (out / MARKER).is_file() and any(out.iterdir()):
        raise UsageError(
            f"--out {out} exists and is not a dsbench site (no {MARKER} file); choose a new or "
            "empty folder, or remove it"
        )


# --------------------------------------------------------------------------------------------
# The builder
# --------------------------------------------------------------------------------------------


@dataclass
class Published:
    """What a publish wrote, for the command's summary."""

    out: Path
    runs: int
    pages: int
    images: int
    without_data: list[str] = field(default_factory=list)
    """Comparison titles that had no data."""
    unavailable: list[str] = field(default_factory=list)
    """Functions of other publish modules that were missing (the pages say so too)."""
    axes: list[AxisResult] = field(default_factory=list)


class Site:
    """One build: the runs, the folder being written, and what pages and charts went in it.
    Page modules (:mod:`~dsbench.publish.comparisons`, :mod:`~dsbench.publish.runs`,
    :mod:`~dsbench.publish.profiles`) write through :meth:`write` and :meth:`figure`."""

    def __init__(
        self,
        root: Path,
        results_root: Path,
        runs: list[Run],
        skipped: list[str],
        warn: Callable[[str], None],
    ):
        self.root = root
        self.results_root = results_root
        self.runs = runs
        self.skipped = skipped
        self.warn = warn
        self.generated = datetime.now(UTC).isoformat(timespec="seconds")
        self.pages = 0
        self.images = 0
        self.unavailable: list[str] = []
        self.run_pages = self._name_run_pages(runs)
        self.asv_copied = False

    # -- files --------------------------------------------------------------------------------

    @staticmethod
    def _name_run_pages(runs: list[Run]) -> dict[int, str]:
        """``id(run)`` -> ``runs/<name>.html``; names are slugs, unique even ignoring case."""
        used: set[str] = set()
        out = {}
        for run in runs:
            base = results.slug(run.id)
            name, i = base, 2
            while name.lower() in used:
                name, i = f"{base}-{i}", i + 1
            used.add(name.lower())
            out[id(run)] = f"runs/{name}.html"
        return out

    def run_href(self, run: Run, depth: int) -> str:
        return "../" * depth + self.run_pages[id(run)]

    def write(self, rel: str, title: Any, body: Any) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = page(title, body, depth=rel.count("/"), generated=self.generated)
        path.write_text(text, encoding="utf-8")
        self.pages += 1

    def figure(
        self, draw: Callable[[Path], Path], *, depth: int, alt: str, caption: Any = None
    ) -> Html:
        """Draw a chart into ``img/`` (named here) and return the markup showing it."""
        self.images += 1
        name = f"img/chart-{self.images:04d}.png"
        draw(self.root / name)
        cap = el("figcaption", caption) if caption is not None else ""
        return el("figure", void("img", src="../" * depth + name, alt=alt), cap)

    def unavailable_note(self, call: str) -> Html:
        if call not in self.unavailable:
            self.unavailable.append(call)
        return el("p", f"Not available yet: {call} is missing from this dsbench.", cls="warn")

    # -- build --------------------------------------------------------------------------------

    def build(self) -> list[AxisResult]:
        (self.root / "style.css").write_text(CSS, encoding="utf-8")
        self.copy_asv()
        axes = comparisons.pair_all(self.runs)
        for result in axes:
            if result.has_data:
                comparisons.comparison_page(self, result)
        for run in self.runs:
            run_pages.run_page(self, run)
        self.comparisons_page(axes)
        run_pages.history_page(self)
        profiles.profiles_page(self)
        stability.stability_page(self)
        self.claims_page()
        self.index_page(axes)
        marker = {
            "generator": "dsbench publish",
            "created": self.generated,
            "results": str(self.results_root),
            "runs": len(self.runs),
        }
        (self.root / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
        return axes

    def copy_asv(self) -> None:
        """``asv publish`` output (results/asv-html) into ``asv/``; links are not followed."""
        src = self.results_root / results.ASV_HTML_DIR
        if not (src / "index.html").is_file():
            return

        def links(folder: str, names: list[str]) -> list[str]:
            return [n for n in names if os.path.islink(os.path.join(folder, n))]

        shutil.copytree(src, self.root / "asv", ignore=links)
        self.asv_copied = True

    # -- index --------------------------------------------------------------------------------

    def comparison_list(self, axes: list[AxisResult], depth: int) -> Html:
        """Each comparison with, per group, its verdict counts; a group where nothing is decided
        says so plainly, with the reason and what would decide it. Noise is never a finding."""
        items = []
        for r in axes:
            a = r.axis
            if r.has_data:
                groups = el(
                    "ul",
                    *(
                        el("li", p.group, ": ", comparisons.finding(a, p))
                        for p in r.pairings
                    ),
                    cls="plain",
                )  # fmt: skip
                items.append(
                    el("li", link("../" * depth + f"compare/{a.slug}.html", a.title), groups)
                )
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

    def asv_note(self, depth: int) -> Html:
        if self.asv_copied:
            return el(
                "p",
                "asv's own pages (its graphs per commit and environment): ",
                link("../" * depth + "asv/index.html", "asv/index.html"),
            )
        return el(
            "p",
            "asv's own pages are not here: run ",
            el("code", "asv publish"),
            f" (it writes {self.results_root / results.ASV_HTML_DIR}), then ",
            el("code", "dsbench publish"),
            " again.",
            cls="note",
        )

    def index_page(self, axes: list[AxisResult]) -> None:
        machines = sorted({r.machine for r in self.runs})
        sources = sorted({r.source for r in self.runs})
        body = [
            el(
                "p",
                f"{len(self.runs)} run(s) from {len(machines)} machine(s) "
                f"({', '.join(machines)}); sources: {', '.join(sources)}.",
            ),
        ]
        if self.skipped:
            body.append(warn_list(f"{len(self.skipped)} file(s) skipped:", self.skipped))
        body += [el("h2", "Comparisons"), self.comparison_list(axes, 0)]
        body += [
            el("h2", "Runs"),
            el(
                "p",
                "Grouped by machine, hardware profile, backend, Python and DeepSpeed version; "
                "newest first. Headline numbers: each benchmark's best case.",
                cls="note",
            ),
        ]

        def key(run: Run) -> tuple[str, ...]:
            f = run.fields
            return (
                run.machine,
                f.get("profile") or "-",
                backend_name(run),
                f.get("python") or "-",
                f.get("deepspeed") or "not installed",
            )

        grouped: dict[tuple[str, ...], list[Run]] = {}
        for run in self.runs:
            grouped.setdefault(key(run), []).append(run)
        for (machine, profile, backend, python, ds), members in sorted(grouped.items()):
            body.append(
                el(
                    "h3",
                    f"{machine} · profile {profile} · {backend} · Python {python} · DeepSpeed {ds}",
                )
            )
            rows = []
            for run in reversed(members):
                f = run.fields
                rows.append(
                    [
                        el("span", when(run.created), title=run.created, cls="nowrap"),
                        link(self.run_href(run, 0), run.id),
                        join([run.label or "", *run_role(run)], " "),
                        run.doc.get("suite") or "",
                        run.source,
                        f.get("device") or f.get("cpu") or "-",
                        (f.get("commit") or "-")[:12],
                        status_counts(run),
                        join((el("span", h, cls="tag") for h in headlines(run)), " "),
                    ]
                )
            body.append(
                table(
                    [
                        "created",
                        "run",
                        "label",
                        "suite",
                        "source",
                        "device",
                        "commit",
                        "benchmarks",
                        "headline numbers",
                    ],
                    rows,
                )
            )
        body += [
            el("h2", "More"),
            el(
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
                el("li", link("claims.html", "Claims"), ": published numbers beside dsbench's"),
                cls="plain",
            ),
        ]
        body += [el("h2", "asv"), self.asv_note(0)]
        self.write("index.html", "dsbench results", join(body))

    def comparisons_page(self, axes: list[AxisResult]) -> None:
        f = comparisons.FACTOR
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
            self.comparison_list(axes, 0),
        ]
        self.write("comparisons.html", "Comparisons", join(body))

    # -- claims -------------------------------------------------------------------------------

    def claims_page(self) -> None:
        """Each claim file's table: what was claimed, what dsbench measured or modelled (said
        which), the verdict and the commands that would measure it."""
        from dsbench.publish import claims

        load = optional("claims", "load_claims")
        check = optional("claims", "check")
        folder = self.results_root / results.CLAIMS_DIR
        body: list[Any] = [
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
        if load is None or check is None:
            missing = "load_claims" if load is None else "check"
            body.append(self.unavailable_note(f"dsbench.publish.claims.{missing}"))
            self.write("claims.html", "Claims", join(body))
            return
        problems: list[str] = []

        def note(msg: str) -> None:
            problems.append(msg)
            self.warn(msg)

        claims = load(folder, warn=note) if folder.is_dir() else []
        if problems:
            body.append(warn_list("Claim files skipped:", problems))
        body += stability_claims.claims_table(self, claims)
        rows = check(claims, self.runs) if claims else []
        if not rows:
            body.append(el("p", f"No claims to check: add claim files under {folder}.", cls="note"))
        by_source: dict[str, list[dict]] = {}
        for r in rows:
            by_source.setdefault(str(r.get("source_text") or r.get("title") or "-"), []).append(r)
        for source, entries in by_source.items():
            first = entries[0]
            title = first.get("title") or source
            if first.get("title_en"):
                title = f"{title} ({first['title_en']})"
            body += [el("h2", title), el("p", source, cls="note")]
            if first.get("scenario"):
                body.append(
                    details("scenario as the source states it", render_value(first["scenario"]))
                )
            body.append(table(
                ["claim", "metric", "claimed", "dsbench", "verdict", "to measure it"],
                [claim_row(r) for r in entries],
                row_classes=[claim_class(r) for r in entries],
            ))  # fmt: skip
        self.write("claims.html", "Claims", join(body))


def run_role(run: Run) -> list[Html]:
    """Tags for runs made for comparing: a side of a ``dsbench ab`` pair, a noise calibration."""
    ab = run.doc.get("ab")
    tags = []
    if isinstance(ab, dict) and ab.get("side"):
        tags.append(el("span", f"ab {ab['side']}: {ab.get('spec') or '?'}", cls="tag"))
    if run.doc.get("purpose") == "noise":
        tags.append(el("span", "noise calibration", cls="tag"))
    return tags


CLAIM_CLASSES = {"consistent": "consistent", "contradicted": "contradicted"}


def claim_class(r: dict) -> str:
    """Row class: consistent / contradicted coloured, everything undecided grey."""
    if r.get("kind") == "none":
        return "missing"
    return CLAIM_CLASSES.get(str(r.get("decision")), "undecided")


def claim_row(r: dict) -> list[Any]:
    """One claim: its label, metric, the claimed numbers, dsbench's ratio labelled measured or
    modelled with its 99% interval, the decision and why, the commands."""
    label = r.get("label") or r.get("claim")
    if r.get("label_en"):
        label = join([label, el("br"), el("span", r["label_en"], cls="muted")])
    arrow = {"higher": " ↑", "lower": " ↓"}.get(str(r.get("direction")), "")
    kind = str(r.get("kind") or "none")
    ratio = finite(r.get("dsbench_ratio"))
    dsb = "-" if kind == "none" or ratio is None else f"{ratio:.3f}"
    parts: list[Any] = [dsb, " ", el("span", kind, cls="tag")]
    if interval := r.get("interval"):
        parts += [el("br"), el("span", f"99%: {interval[0]:.3f}–{interval[1]:.3f}", cls="nowrap")]
    elif kind == "measured":
        parts += [el("br"), el("span", "no interval", cls="muted")]
    dsb_cell = el("span", *parts, cls=kind)
    more = [r[k] for k in ("measured", "modelled") if r.get(k)]
    if more:
        dsb_cell = join([dsb_cell, details("details", *(render_value(m) for m in more))])
    commands = r.get("commands") or []
    decision = str(r.get("decision") or "")
    verdict = str(r.get("verdict") or "")
    rest = verdict.removeprefix(f"{decision}: ") if decision else verdict
    # the commands stand in the next column: the verdict says only that they are needed
    rest = rest.split("; to decide it: ", 1)[0].split(": run ", 1)[0]
    if commands and rest != verdict:
        rest += " (the commands beside would measure it)"
    verdict_cell = join([el("strong", decision), el("br"), rest]) if decision else rest
    return [
        label,
        f"{r.get('metric', '')} ({r.get('unit', '')}{arrow})",
        cell((r.get("claimed") or {}).get("text")),
        dsb_cell,
        verdict_cell,
        join(el("div", el("code", c)) for c in commands),
    ]


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def publish(
    results_dir: Path | str | None, out: Path | str, warn: Callable[[str], None] | None = None
) -> Published:
    """Build the site from ``results_dir`` into ``out`` (replacing a previous site there)."""
    root = Path(results_dir) if results_dir is not None else results.default_results_dir()
    out = Path(out)
    check_out(out, root)
    skipped: list[str] = []
    warn = warn or (lambda m: print(f"dsbench: warning: {m}", file=sys.stderr))

    def note(msg: str) -> None:
        skipped.append(msg)
        warn(msg)

    runs = load_all(root, note) if root.is_dir() else []
    if not runs:
        where = f"no usable result files in {root}" if root.is_dir() else f"{root} does not exist"
        raise UsageError(
            f"nothing to publish: {where}; make results with `dsbench run` (or "
            "`make run`), or point --results at a results folder"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".dsbench-site-new-", dir=out.parent))
    try:
        site = Site(tmp, root, runs, skipped, warn)
        axes = site.build()
        os.chmod(tmp, 0o755)
        old = None
        if out.exists():
            old = out.parent / f".dsbench-site-old-{uuid.uuid4().hex[:8]}"
            os.rename(out, old)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return Published(
        out=out,
        runs=len(runs),
        pages=site.pages,
        images=site.images,
        without_data=[r.axis.title for r in axes if not r.has_data],
        unavailable=site.unavailable,
        axes=axes,
    )
