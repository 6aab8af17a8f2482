"""The :class:`Site` that every page writes through: the page shell around a body (with a CSV
of each table beside the page: :mod:`dsbench.publish.tables`), the charts in ``img/`` (named here,
never from a result file), asv's own pages and the :data:`MARKER` file. What goes on the site
and in what order: :mod:`dsbench.publish.build`.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from dsbench import results
from dsbench.publish import tables
from dsbench.publish.data import manifest
from dsbench.publish.html import CSS, Html, el, page, void
from dsbench.results import Run

MARKER = ".dsbench-site"
"""File at the root of every site ``dsbench publish`` writes; only such a folder is replaced."""


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


class Site:
    """One build: the runs, the folder being written, and what pages and charts went in it.
    The page modules (:mod:`dsbench.publish.pages`) write through :meth:`write` and
    :meth:`figure`."""

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
        """The run's purpose in the results folder's manifest
        (:mod:`dsbench.publish.data.manifest`)."""
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

    # -- the shell, the marker, asv's pages ------------------------------------------------------

    def write_style(self) -> None:
        """``style.css``, the one style sheet every page links."""
        (self.root / "style.css").write_text(CSS, encoding="utf-8")

    def write_marker(self) -> None:
        """The :data:`MARKER` file: this folder is a site ``dsbench publish`` wrote."""
        marker = {
            "generator": "dsbench publish",
            "created": self.generated,
            "results": str(self.results_root),
            "runs": len(self.runs),
        }
        (self.root / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")

    def copy_asv(self) -> None:
        """``asv publish`` output (results/asv-html) into ``asv/``; links are not followed."""
        src = self.results_root / results.ASV_HTML_DIR
        if not (src / "index.html").is_file():
            return

        def links(folder: str, names: list[str]) -> list[str]:
            return [n for n in names if os.path.islink(os.path.join(folder, n))]

        shutil.copytree(src, self.root / "asv", ignore=links)
        self.asv_copied = True
