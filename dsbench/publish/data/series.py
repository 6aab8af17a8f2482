"""The sweeps (``dsbench sweep``) among the runs, each as its runs; a sweep's series per case
and its confirmed steps come from :mod:`dsbench.sweep` (the page:
:mod:`dsbench.publish.pages.series_page`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsbench.results import Run


def sweeps(runs: list[Run]) -> dict[str, list[Run]]:
    """The runs of each sweep, by sweep id, newest sweep first."""
    out: dict[str, list[Run]] = {}
    for run in runs:
        if run.sweep is not None and run.sweep.id:
            out.setdefault(run.sweep.id, []).append(run)
    return dict(sorted(out.items(), reverse=True))
