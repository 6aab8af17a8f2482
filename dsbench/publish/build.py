"""``dsbench publish``: every result (dsbench's and asv's) as a static site that works offline.

Pages (all relative links; no CDN, no web fonts, no scripts; charts are PNG files in ``img/``)::

    index.html              a panel per comparison (verdict counts, the decided ratios, the
                            machine, the claims about it); runs by machine, profile, backend,
                            Python and DeepSpeed version, with headline numbers; asv's pages
    comparisons.html        which comparisons have data, and what to run for the others
    compare/<axis>.html     table (dsbench.compare), grouped bars with 99% CI, % of peak, history
    runs/<run>.html         one run: every row, the full environment, the hardware profile
    history.html            each benchmark across a machine's runs of a suite; steps over commits
    profiles.html           benchmark families x profiles: modelled floors beside measured
                            values (every case in cross-profile.csv)
    roofline/<profile>.html the profile's roofline with the measured kernels on it
    stability.html          each soak: memory and step time per rank, drift, faults, losses
    releases.html           each sweep: per case its series over the sides, confirmed steps
    claims.html             published claims beside what dsbench measured or modelled
    asv/                    ``asv publish`` output, copied when the results folder has it

Every table sits in a box that scrolls sideways (no page is wider than the window) with a CSV
of its cells beside the page (:mod:`dsbench.publish.tables`).

The site is built in a temporary folder next to ``--out`` and moved into place at the end, so a
failed build leaves the previous site as it was. ``--out`` must be new, empty, or a site made
here before (it holds :data:`MARKER`); anything else is refused.

Result files travel between machines and teams: every string taken from one is escaped where
it meets markup (:mod:`dsbench.publish.html`) and in chart text (:mod:`dsbench.publish.plots`),
and file names in the site are made here, never taken from a result file.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dsbench import results
from dsbench.errors import UsageError
from dsbench.publish.data import claims, pairings
from dsbench.publish.data.pairings import AxisResult
from dsbench.publish.pages import (
    claims_page,
    comparisons,
    index,
    profiles,
    series_page,
    stability,
)
from dsbench.publish.pages import runs as run_pages
from dsbench.publish.site import MARKER, Site
from dsbench.results import Run
from dsbench.results import asv as asv_results

# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def load_all(root: Path, warn: Callable[[str], None]) -> list[Run]:
    """dsbench's runs and asv's (``root/asv``)."""
    return asv_results.load_all_runs(root, warn)


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
    axes: list[AxisResult] = field(default_factory=list)


def build(site: Site) -> list[AxisResult]:
    """Every page of ``site``, the style sheet, asv's pages and the marker; the comparisons."""
    site.write_style()
    site.copy_asv()
    axes = pairings.pair_all(site.runs)
    for result in axes:
        if result.has_data:
            comparisons.comparison_page(site, result)
    for run in site.runs:
        run_pages.run_page(site, run)
    index.comparisons_page(site, axes)
    run_pages.history_page(site)
    profiles.profiles_page(site)
    stability.stability_page(site)
    series_page.releases_page(site)
    checked = claims.check_folder(site.results_root, site.runs, site.warn)
    claims_page.claims_page(site, checked)
    index.index_page(site, axes, checked.pairs)
    site.write_marker()
    return axes


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
        axes = build(site)
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
        axes=axes,
    )
