"""Rounds until the data decide: the looks of ``dsbench ab --until-decided``, the rounds an
inconclusive row would need, and how many repetitions a round's cases are worth.

[Note: looking at the data as rounds come in]
Judging after every pair of rounds and stopping at the first decided look would inflate false
verdicts: every look is one more chance for an A/A pair to cross x1.05. A group-sequential
design spends the error rate alpha over the planned looks instead (Lan & DeMets, "Discrete
sequential boundaries for clinical trials", Biometrika 70, 1983): by look k, at information
fraction t_k = rounds a side / the most rounds a side, at most alpha(t_k) may have been spent.
Pocock's spending alpha * ln(1 + (e - 1) t) spends about evenly, so a large change can stop
early (the default); O'Brien & Fleming's 2 - 2 Phi(z_{1-alpha/2} / sqrt t) spends almost nothing
early and keeps the last looks near the fixed design. Look k judges at the level
1 - (alpha(t_k) - alpha(t_{k-1})): by the union bound the false verdicts over all looks stay at
or under alpha whatever the looks' correlation (the exact Lan-DeMets boundaries assume normal
independent increments, which t-intervals on a few heavy-tailed round medians do not have).
The looks are after every pair of rounds up to :data:`MAX_LOOKS` of them, else that many spread
over the rounds: the union bound charges every look in full.
``tests/test_sequential.py`` simulates A/A pairs over every look at this machine's spreads,
with heavy-tailed launches, and counts the better/worse verdicts.

[Note: repetitions worth running]
A round's variance is the launches' variance plus the repetitions' divided by their number n.
Kalibera & Jones ("Rigorous benchmarking in reasonable time", ISMM 2013, section 4) give the n
that buys the narrowest interval for the time: n = sqrt(c_launch * S_within^2 /
(c_rep * T_between^2)), c the cost of a launch and of a repetition, T^2 = S_between^2 -
S_within^2 / n the launches' own variance. Where launches dominate, n is small and a round costs
its start-up and a few repetitions, not the time budget of every case.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special as _sp

from dsbench.stats.judge import round_medians

SPENDING = ("pocock", "obrien-fleming")
FIRST_LOOK = 3
"""Rounds a side at the first look: the fewest whose pooled t-interval has 4 degrees of freedom."""


def spent(t: float, alpha: float, kind: str = "pocock") -> float:
    """alpha(t): the error rate spent by information fraction ``t`` (see the note above)."""
    t = min(max(t, 0.0), 1.0)
    if kind == "pocock":
        return alpha * math.log1p((math.e - 1) * t)
    if kind == "obrien-fleming":
        if t == 0:
            return 0.0
        z = _sp.ndtri(1 - alpha / 2)
        return float(2 - 2 * _sp.ndtr(z / math.sqrt(t)))
    raise ValueError(f"spending must be one of {', '.join(SPENDING)}, got {kind!r}")


@dataclass(frozen=True)
class Look:
    rounds: int
    """Rounds a side at this look."""
    level: float
    """The confidence level the verdicts of this look are judged at."""


MAX_LOOKS = 8
"""The most planned looks. Each look gets its own share of alpha and the union bound ignores how
alike the looks are, so a look after every pair of 40 rounds judges each at ~99.97%; eight
looks spread from the first to the last round judge each at ~99.87% and stop at most a few
rounds after the data would have decided (as group-sequential trials plan 2-10 looks)."""


def look_rounds(max_rounds: int) -> list[int]:
    """Rounds a side at each planned look: every round from :data:`FIRST_LOOK` to
    ``max_rounds``, or :data:`MAX_LOOKS` of them spread evenly (the first and the last kept)."""
    every = list(range(FIRST_LOOK, max_rounds + 1))
    if len(every) <= MAX_LOOKS:
        return every
    step = (max_rounds - FIRST_LOOK) / (MAX_LOOKS - 1)
    return sorted({round(FIRST_LOOK + i * step) for i in range(MAX_LOOKS)})


def looks(max_rounds: int, alpha: float = 0.01, kind: str = "pocock") -> list[Look]:
    """The planned looks (:func:`look_rounds`), each with its share of ``alpha``: those of a
    :class:`Spender` whose horizon stays ``max_rounds``."""
    spender = Spender(alpha, kind)
    got = (spender.look(k, max_rounds, final=k == max_rounds) for k in range(1, max_rounds + 1))
    return [x for x in got if x is not None]


# [Note: looks over an open horizon]
# ``dsbench ab`` stops by default at a time limit, not at a planned number of rounds, so the most
# rounds a side (the horizon the fraction t_k = k / N needs) is not known in advance. It is
# estimated at every look from the time left and the rounds' pace: N_k = k + the rounds that fit
# in the time left (at most ``--max-rounds`` where given), and look k spends alpha(k / N_k) minus
# what the earlier looks spent, or no look where that is negative (the horizon grew); the look after
# which no round fits in the time left (or at ``--max-rounds``) spends all that is left, t = 1.
# The spent total only grows and never passes alpha(1) = alpha, so by the union bound the false
# verdicts over every look stay at or under alpha however the horizon moves; the horizon depends
# on the rounds' wall time, not on the ratio judged. With a fixed horizon (``--max-rounds`` that
# ends before the time does) the looks and their levels are those of :func:`looks`.


class Spender:
    """The looks of one A/B until decided, its horizon estimated as it goes ([Note: looks over
    an open horizon]): after each round, :meth:`look` says whether a look is due and at what
    level. ``spent``: the error rate the looks so far spent; ``horizon``: the rounds a side
    the last look planned for."""

    def __init__(self, alpha: float = 0.01, kind: str = "pocock"):
        spent(0.0, alpha, kind)  # a bad kind fails here
        self.alpha, self.kind = alpha, kind
        self.spent, self.last, self.horizon = 0.0, 0, 0

    def look(self, k: int, horizon: int, final: bool = False) -> Look | None:
        """The look after ``k`` rounds a side, or None where none is due: ``horizon`` is the
        rounds a side expected by the end (from the time left and the pace, never from the
        data judged), ``final`` that no round follows this one (all that is left is spent)."""
        if k < FIRST_LOOK:
            return None
        if not final:
            horizon = max(horizon, k + 1)
            due = next(r for r in look_rounds(horizon) if r > self.last)
            if k < due:
                return None
        t = 1.0 if final else k / horizon
        share = spent(t, self.alpha, self.kind) - self.spent
        if share < 0:  # the horizon grew: this look would spend what earlier ones did
            return None
        self.spent += share
        self.last, self.horizon = k, k if final else horizon
        return Look(rounds=k, level=1 - share)


def rounds_to_decide(
    base: Sequence[Sequence[float]],
    cont: Sequence[Sequence[float]],
    *,
    factor: float = 1.05,
    level: float = 0.99,
    limit: int = 200,
) -> int | None:
    """Rounds a side that would most likely decide a row if its ratio and round-to-round
    spread stay as observed: the fewest k whose t-interval (the pooled spread s of the log
    round medians, 2k - 2 degrees of freedom, half-width t * s * sqrt(2 / k)) fits beyond
    ``factor`` (or within it, for a ratio inside it). None: the ratio sits on the boundary, no
    spread was measured, or it would take more than ``limit``."""
    lb, lc = np.log(round_medians(base)), np.log(round_medians(cont))
    if len(lb) < 2 or len(lc) < 2:
        return None
    ss = float(((lb - lb.mean()) ** 2).sum() + ((lc - lc.mean()) ** 2).sum())
    s = math.sqrt(ss / (len(lb) + len(lc) - 2))
    margin = abs(abs(float(lc.mean() - lb.mean())) - math.log(factor))
    if s == 0 or margin < 1e-3:
        return None
    for k in range(2, limit + 1):
        if _sp.stdtrit(2 * k - 2, 1 - (1 - level) / 2) * s * math.sqrt(2 / k) < margin:
            return k
    return None


def paired_rounds_to_decide(
    logs: Sequence[float], *, factor: float = 1.05, level: float = 0.99, limit: int = 200
) -> int | None:
    """As :func:`rounds_to_decide`, for block rounds: the fewest rounds whose paired
    t-interval (the spread s of the rounds' log ratios, k - 1 degrees of freedom, half-width
    t * s / sqrt(k)) fits beyond ``factor`` or within it ([Note: paired blocks])."""
    d = np.asarray(logs, float)
    if len(d) < 2:
        return None
    s = float(np.std(d, ddof=1))
    margin = abs(abs(float(d.mean())) - math.log(factor))
    if s == 0 or margin < 1e-3:
        return None
    for k in range(2, limit + 1):
        if _sp.stdtrit(k - 1, 1 - (1 - level) / 2) * s / math.sqrt(k) < margin:
            return k
    return None


def repetitions(
    sides: Sequence[Sequence[Sequence[float]]],
    launch_s: float,
    floor: int = 8,
    ceiling: int = 1000,
) -> int:
    """Kalibera & Jones's repetitions per launch for one case (see the note above), from each
    side's launches' repetition times (seconds; two launches or more a side) and what a launch
    costs besides them (``launch_s``); at least ``floor`` (an exact 99% interval of the median
    needs 8), ``ceiling`` where the repetitions carry the variance."""
    logs = [[np.log(np.asarray(r, float)) for r in side if len(r) >= 2] for side in sides]
    logs = [side for side in logs if len(side) >= 2]
    if not logs:
        return ceiling
    launches = [r for side in logs for r in side]
    n = float(np.mean([len(r) for r in launches]))
    within = float(np.mean([r.var(ddof=1) for r in launches]))
    means = float(np.mean([np.var([r.mean() for r in side], ddof=1) for side in logs]))
    between = means - within / n
    rep_s = float(np.median(np.exp(np.concatenate(launches))))
    if between <= 0 or rep_s <= 0:
        return ceiling
    best = math.sqrt(launch_s * within / (rep_s * between))
    return int(min(max(math.ceil(best), floor), ceiling))
