"""A compared row: one benchmark id of two runs, its values, ratio and change, as
:mod:`dsbench.compare.comparison` makes it and :mod:`dsbench.compare.render` draws it."""

from __future__ import annotations

import dataclasses

from dsbench.records import Direction
from dsbench.stats import VERDICTS

UNLIKE = "unlike hardware"
"""The change of a row measured on two unlike machines
(:func:`dsbench.compare.comparison.unlike_hardware`): its ratio is shown as measured, and it has
no verdict."""


@dataclasses.dataclass(frozen=True)
class ComparedRow:
    id: str
    unit: str
    direction: Direction | None
    baseline: float | None
    """The baseline's centre: the geometric mean of its rounds' medians (one round: median)."""
    contender: float | None
    ratio: float | None
    change: str
    """A verdict (:data:`dsbench.stats.VERDICTS`), or why the row is not comparable: 'only in
    baseline', 'only in contender', 'baseline failed', 'skipped / failed', 'units differ',
    'unlike hardware' (:data:`UNLIKE`: the ratio and its interval shown, no verdict)."""
    low: float | None = None
    """The 99% interval of the ratio."""
    high: float | None = None
    basis: str = ""
    """How the verdict was reached (``t(10)+bootstrap, 6+6 rounds``), or for ``inconclusive``
    why the data cannot decide."""
    baseline_env: str = ""
    """The environment the baseline value came from (set when a side is an asv run)."""
    contender_env: str = ""
    to_decide: int | None = None
    """For an inconclusive row with a spread: the rounds a side that would most likely decide a
    change of the size seen (:func:`dsbench.stats.sequential.rounds_to_decide`)."""

    @property
    def comparable(self) -> bool:
        return self.change in VERDICTS
