"""When an A/B until decided stops: the horizon of its looks from the time left and the rounds'
pace, the look due after each round, and the repetitions the rounds to come are worth.

Pure statistics over numbers (the rounds' wall times, the repetitions' seconds, the clock as
given): :mod:`dsbench.ab.looks` feeds it the rounds and judges the rows at each look. See
[Note: looking at the data as rounds come in], [Note: looks over an open horizon] and
[Note: repetitions worth running], in :mod:`dsbench.stats.sequential`.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsbench.stats.sequential import Look, Spender, repetitions

ALPHA = 0.01
"""The better/worse verdicts an A/A pair may get, over all looks."""


class Looks:
    """The looks of one A/B until decided: stops when every case is decided, at
    ``max_rounds``, or when the next round would end past ``deadline`` (a ``time.monotonic()``).
    The horizon of the looks is the rounds that fit in the time left at the rounds' pace so
    far. ``level`` and ``look``: the last look's level and rounds a side; ``stopped``: why the
    rounds stopped (``decided``, ``max-rounds`` or ``max-time``)."""

    def __init__(self, spending: str, deadline: float, max_rounds: int | None = None):
        self.spender = Spender(ALPHA, spending)
        self.deadline, self.max_rounds = deadline, max_rounds
        self.level, self.look, self.stopped = 0.99, 0, "max-time"

    def horizon(self, walls: Sequence[Sequence[float]], now: float) -> tuple[bool, int]:
        """Whether the round just run is the last (``max_rounds`` reached, or the next round,
        as long as the last one, would end past the deadline), and the rounds a side expected
        by the end: those run and those that fit in the time left at their mean pace.
        ``walls``: each side's rounds' wall seconds."""
        k = len(walls[0])
        last_s = walls[0][-1] + walls[1][-1]
        pace = sum(w for side in walls for w in side) / k
        horizon = k + int(max(self.deadline - now, 0.0) // max(pace, 1e-3))
        cap = self.max_rounds
        if cap is not None and k >= cap:
            self.stopped = "max-rounds"
            return True, k
        if now + last_s > self.deadline:
            self.stopped = "max-time"
            return True, k
        return False, horizon if cap is None else min(horizon, cap)

    def due(self, walls: Sequence[Sequence[float]], now: float) -> tuple[Look | None, bool]:
        """The look due after the round just run (None: none) and whether that round is the
        last (:meth:`horizon`)."""
        final, horizon = self.horizon(walls, now)
        look = self.spender.look(len(walls[0]), horizon, final)
        if look is not None:
            self.level, self.look = look.level, len(walls[0])
        return look, final


def max_reps(cases: Sequence[Sequence[Sequence[Sequence[float]]]], launch_s: float) -> int | None:
    """``--max-reps`` for the rounds to come: the most any case is worth, from each case's
    sides' launches' repetition seconds (:func:`repetitions`); None where a launch has none,
    or where a case's repetitions carry its variance."""
    if any(not reps for sides in cases for side in sides for reps in side):
        return None
    wanted = [repetitions(sides, launch_s) for sides in cases]
    return None if not wanted or max(wanted) >= 1000 else max(wanted)
