"""The rounds of an A/B until decided: after each round, the look due if any, its rows judged
(:mod:`dsbench.stats.stopping` says when, :func:`dsbench.compare.compare_rows` what); after the
first pair of launch rounds of a suite, the rounds to come get Kalibera & Jones's repetitions
([Note: repetitions worth running])."""

from __future__ import annotations

import sys
import time

from dsbench import compare
from dsbench.ab.merge import merge_launches
from dsbench.ab.plan import Blocks, Launches, UntilDecided
from dsbench.ab.rounds import Launch
from dsbench.records import UNSET, Sequential, Timing, value_or
from dsbench.stats.stopping import Looks, max_reps


class Rounds:
    """The ``after_pair`` of an A/B until decided (:func:`dsbench.ab.run_rounds`): None to
    stop, else the arguments the rounds to come add."""

    def __init__(self, rule: UntilDecided, design, factor: float):
        self.rule, self.design, self.factor = rule, design, factor
        self.looks = Looks(rule.spending, time.monotonic() + rule.seconds, rule.max_rounds)
        self.extra: list[str] = []

    def __call__(self, per_side: list[list[Launch]]) -> list[str] | None:
        k = len(per_side[0])
        if k == 2 and isinstance(self.design, Launches):
            self.extra = repetitions(per_side)
        walls = [[la.wall_s for la in launches] for launches in per_side]
        look, final = self.looks.due(walls, time.monotonic())
        if look is not None:
            b, c = ({r.id: r for r in merge_launches(la).rows} for la in per_side)
            rows = compare.compare_rows(b, c, self.factor, look.level,
                                        paired=isinstance(self.design, Blocks))  # fmt: skip
            judged = [r for r in rows if r.comparable]
            open_ = [r for r in judged if r.change is compare.Change.INCONCLUSIVE]
            horizon = self.looks.spender.horizon
            print(f"dsbench ab: look {k} ({compare.pct(look.level)}, of ~{horizon} "
                  f"rounds): {len(judged) - len(open_)}/{len(judged)} decided",
                  file=sys.stderr)  # fmt: skip
            if not open_:
                self.looks.stopped = "decided"
                return None
        return None if final else self.extra

    def block(self) -> Sequential:
        """The result files' ``sequential``: how the rounds were planned and why they stopped."""
        looks = self.looks
        return Sequential(spending=self.rule.spending, max_rounds=looks.spender.horizon or UNSET,
                          looks=looks.look, level=looks.level, stopped=looks.stopped,
                          max_reps=self.extra[1] if self.extra else None)  # fmt: skip


def repetitions(per_side: list[list[Launch]]) -> list[str]:
    """``--max-reps N`` for the rounds to come, from each side's launches (none when a case's
    repetitions carry its variance)."""
    first = per_side[0][0].run.rows
    cases = [[[_rep_seconds(la.run.rows.get(case)) for la in launches] for launches in per_side]
             for case in first]  # fmt: skip
    launch_s = sum(la.wall_s for la in per_side[0]) / len(per_side[0]) / max(len(first), 1)
    n = max_reps(cases, launch_s)
    return [] if n is None else ["--max-reps", str(n)]


def _rep_seconds(row) -> list[float]:
    """A row's repetition times in seconds (the timing core's own samples), or none."""
    if row is None or not row.ok or not isinstance(row.timing, Timing):
        return []
    return list(value_or(row.timing.samples) or [])
