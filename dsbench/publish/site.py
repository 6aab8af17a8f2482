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

import json
import os
import pickle
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsbench import results
from dsbench.errors import UsageError
from dsbench.publish import (
    claims_page,
    comparisons,
    index,
    manifest,
    profiles,
    series_page,
    stability,
    tables,
)
from dsbench.publish import runs as run_pages
from dsbench.publish.comparisons import AxisResult
from dsbench.publish.html import CSS, Html, el, page, void
from dsbench.results import Run
from dsbench.results import asv as asv_results

if TYPE_CHECKING:
    from dsbench.publish.claims import Claim
    from dsbench.records import ClaimCheck

MARKER = ".dsbench-site"
"""File at the root of every site ``dsbench publish`` writes; only such a folder is replaced."""


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


_DRAWN: dict[bytes, bytes] = {}
"""The PNG of each chart drawn in this process, by what was drawn (:func:`_chart_key`): a chart
drawn again from the same function and data (a hardware profile's roofline, in every publish of
a process that publishes several sites) is copied, not drawn again."""
_DRAWN_MAX = 64


def _chart_key(draw: Callable[[Path], Path]) -> bytes | None:
    """What a ``partial`` of a plotting function draws, as bytes (None: not known, draw it)."""
    if not isinstance(draw, partial):
        return None
    func = draw.func
    try:
        return pickle.dumps((func.__module__, func.__qualname__, draw.args, draw.keywords))
    except Exception:  # an argument that does not pickle: draw it each time
        return None


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


class Site:
    """One build: the runs, the folder being written, and what pages and charts went in it.
    Page modules (:mod:`~dsbench.publish.index`, :mod:`~dsbench.publish.comparisons`,
    :mod:`~dsbench.publish.runs`, :mod:`~dsbench.publish.profiles`,
    :mod:`~dsbench.publish.stability`, :mod:`~dsbench.publish.claims_page`) write through
    :meth:`write` and :meth:`figure`."""

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
        self.csvs = 0
        self.run_pages = self._name_run_pages(runs)
        self.asv_copied = False
        self.claim_checks: list[tuple[Claim, ClaimCheck]] = []
        """Each claim beside its check (:func:`dsbench.publish.claims.check`), once the claims
        page is written: the index's panels show them."""
        self.purposes = manifest.load(results_root, warn)
        """Each reference run's purpose from the results folder's manifest, by file."""
        listed = set(self.purposes) - {manifest.key(r.path, results_root) for r in runs}
        for file in sorted(listed):
            warn(f"{results_root / manifest.FILE} lists {file}, which is not a run read there")

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

    def purpose(self, run: Run) -> str | None:
        """The run's purpose in the results folder's manifest (:mod:`dsbench.publish.manifest`)."""
        rel = manifest.key(run.path, self.results_root)
        return self.purposes.get(rel) if rel is not None else None

    def run_href(self, run: Run, depth: int) -> str:
        return "../" * depth + self.run_pages[id(run)]

    def write(self, rel: str, title: Any, body: Any) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        body, csvs = tables.finish(body, path)
        self.csvs += csvs
        text = page(title, body, depth=rel.count("/"), generated=self.generated)
        path.write_text(text, encoding="utf-8")
        self.pages += 1

    def figure(
        self, draw: Callable[[Path], Path], *, depth: int, alt: str, caption: Any = None
    ) -> Html:
        """Draw a chart into ``img/`` (named here) and return the markup showing it."""
        self.images += 1
        name = f"img/chart-{self.images:04d}.png"
        path, key = self.root / name, _chart_key(draw)
        if key in _DRAWN:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_DRAWN[key])
        else:
            draw(path)
            if key is not None:
                _DRAWN[key] = path.read_bytes()
                while len(_DRAWN) > _DRAWN_MAX:
                    del _DRAWN[next(iter(_DRAWN))]
        cap = el("figcaption", caption) if caption is not None else ""
        return el("figure", void("img", src="../" * depth + name, alt=alt), cap)

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
        index.comparisons_page(self, axes)
        run_pages.history_page(self)
        profiles.profiles_page(self)
        stability.stability_page(self)
        series_page.releases_page(self)
        claims_page.claims_page(self)
        index.index_page(self, axes)
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
        axes=axes,
    )
