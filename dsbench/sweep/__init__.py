"""A series of sides (``dsbench sweep``): DeepSpeed releases, commits or Pythons measured in
interleaved rounds, and the steps of each case's series found and confirmed
(:mod:`dsbench.stats.steps`); the sides of an axis come from :mod:`dsbench.sweep.axis`."""

from __future__ import annotations

from dsbench.stats.steps import Step, candidates, confirm
from dsbench.sweep.axis import SWEEP_KINDS, parse_axis
from dsbench.sweep.series import Series, report, series_of, series_over

__all__ = [
    "SWEEP_KINDS",
    "Series",
    "Step",
    "candidates",
    "confirm",
    "parse_axis",
    "report",
    "series_of",
    "series_over",
]
