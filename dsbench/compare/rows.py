"""A compared row (one benchmark id of two runs, its values, ratio and change) and the report
of them, as :mod:`dsbench.compare.comparison` makes them and :mod:`dsbench.compare.render`
draws them. What a row is (a verdict or why none, the reasons, whose peak memory it is) is
typed here, so that no reader parses its texts back."""

from __future__ import annotations

import dataclasses

from dsbench.records import Direction
from dsbench.stats import Change, Reason, reason_text

UNLIKE = Change.UNLIKE_HARDWARE
"""The change of a row measured on two unlike machines
(:func:`dsbench.compare.comparison.unlike_hardware`): its ratio is shown as measured, and it has
no verdict."""


@dataclasses.dataclass(frozen=True)
class MemoryOf:
    """What a peak-memory row measures: the case whose peak it is, and which peak
    (:func:`dsbench.records.case_peak`: the device allocator's, or the resident set's)."""

    case: str
    """The case's id (``train_step[...]``; the row's own is ``train_step.peak_memory[...]``)."""
    kind: str


def to_decide_text(rounds: int, ratio: float) -> str:
    """What a row's basis gains when more rounds would decide it."""
    return f"; about {rounds} rounds a side would decide x{ratio:.3f}"


@dataclasses.dataclass(frozen=True)
class ComparedRow:
    id: str
    unit: str
    direction: Direction | None
    baseline: float | None
    """The baseline's centre: the geometric mean of its rounds' medians (one round: median)."""
    contender: float | None
    ratio: float | None
    change: Change
    """A verdict (:data:`dsbench.stats.VERDICTS`), or why the row is not comparable: 'only in
    baseline', 'only in contender', 'baseline failed', 'skipped / failed', 'units differ',
    'unlike hardware' (:data:`UNLIKE`: the ratio and its interval shown, no verdict)."""
    low: float | None = None
    """The 99% interval of the ratio."""
    high: float | None = None
    detail: str = ""
    """How the verdict was reached (``t(10)+bootstrap, 6+6 rounds``), or for ``inconclusive``
    why the data cannot decide; a memory row's leads with its kind. :attr:`basis` adds the
    rounds that would decide it."""
    baseline_env: str = ""
    """The environment the baseline value came from (set when a side is an asv run)."""
    contender_env: str = ""
    to_decide: int | None = None
    """For an inconclusive row with a spread: the rounds a side that would most likely decide a
    change of the size seen (:func:`dsbench.stats.sequential.rounds_to_decide`)."""
    reasons: tuple[Reason, ...] = ()
    """Why an inconclusive row is, its main reason first (typed :attr:`detail`)."""
    factor: float | None = None
    """The factor the row was judged against (``--factor``)."""
    memory: MemoryOf | None = None
    """For a case's peak-memory row: whose and which peak; None for any other row."""

    @property
    def comparable(self) -> bool:
        return self.change.is_verdict

    @property
    def basis(self) -> str:
        """The row's basis as the tables print it: :attr:`detail`, and where more rounds would
        decide it, how many."""
        if self.to_decide and self.ratio is not None:
            return self.detail + to_decide_text(self.to_decide, self.ratio)
        return self.detail

    @property
    def reason(self) -> str:
        """Why the row is undecided, without its particulars (sample counts, suggestions): its
        main reason's headline (:func:`dsbench.stats.reason_text`), for a memory row its kind
        (the text its basis leads with), 'no interval' where it has none."""
        if self.memory is not None:
            return self.memory.kind
        if not self.reasons:
            return "no interval"
        return reason_text(self.reasons[0], self.factor or 1.05)


@dataclasses.dataclass
class Report:
    """A comparison as data: its rows, their counts, the summary line and the notes; drawn by
    :func:`dsbench.compare.render.render`; made by :func:`dsbench.compare.comparison.report`."""

    notes: list[str]
    """Which runs were used and what confounds them: print above the table."""
    verdict: str
    """The summary line: the rows per verdict, at what level, against what factor."""
    rows: list[ComparedRow]
    counts: dict[str, int]
    """Rows per change (:func:`dsbench.compare.comparison.tally`)."""
    level: float = 0.99
    """The level of the rows' intervals."""
