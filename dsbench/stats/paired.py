"""The paired verdict of block rounds (``dsbench ab --blocks``): each round's evidence is the
median log ratio of its block pairs, judged by the rule of :func:`dsbench.stats.judge.decide`
([Note: paired blocks])."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import special as _sp  # docs/decisions.md, "scipy.special, not scipy.stats"

from dsbench.records import DIRECTIONS
from dsbench.stats.judge import (
    BOOTSTRAP_MIN_ROUNDS,
    BOOTSTRAP_RESAMPLES,
    Change,
    Reason,
    Verdict,
    decide,
)

# [Note: paired blocks]
# In block rounds (`dsbench ab --blocks`, [Note: sides in turns]) both sides are resident in
# one round and time a case in alternating blocks a few tens of milliseconds long, so each
# block of the contender has a baseline block beside it, run within a second under the same
# load. A round's evidence is then the median over its block pairs of log(contender block
# median / baseline block median): the load the two blocks of a pair shared cancels, which the
# launches of separate rounds, tens of seconds apart, cannot do. The unit of evidence stays the
# round (a fresh pair of processes, so placement and start-up effects are in its spread): the
# ratio is exp(mean of the rounds' log ratios) and its interval Student's t on them with
# rounds - 1 degrees of freedom, joined (as in judge) with the bootstrap over rounds from
# BOOTSTRAP_MIN_ROUNDS rounds on.


def paired_logs(
    base: Sequence[Sequence[Sequence[float]]], cont: Sequence[Sequence[Sequence[float]]]
) -> tuple[np.ndarray, int]:
    """Per round, the median over its block pairs of the log ratio of the blocks' medians
    (see the note above), from each side's rounds given as their blocks' samples; and the
    fewest block pairs a round had. Rounds or blocks one side lacks are left out."""
    logs, pairs = [], []
    for b_blocks, c_blocks in zip(base, cont, strict=False):
        d = [
            float(np.log(np.median(c)) - np.log(np.median(b)))
            for b, c in zip(b_blocks, c_blocks, strict=False)
            if len(b) and len(c) and min(np.min(b), np.min(c)) > 0
        ]
        if d:
            logs.append(float(np.median(d)))
            pairs.append(len(d))
    return np.asarray(logs), min(pairs, default=0)


def judge_paired(
    base: Sequence[Sequence[Sequence[float]]],
    cont: Sequence[Sequence[Sequence[float]]],
    *,
    direction: str,
    factor: float = 1.05,
    level: float = 0.99,
    seed: int = 0,
) -> Verdict:
    """Verdict from block rounds: each side's rounds given as lists of its blocks' samples,
    block j of a round paired with block j of the other side's same round (see the note
    above)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'higher' or 'lower', got {direction!r}")
    d, pairs = paired_logs(base, cont)
    if not len(d):
        return Verdict(change=Change.INCONCLUSIVE, ratio=float("nan"), low=None, high=None,
                       method="", why="no positive block pairs to compare",
                       reasons=(Reason.NO_BLOCK_PAIRS,))  # fmt: skip
    k = len(d)
    ratio = float(np.exp(d.mean()))
    shape = f"{k} rounds of {pairs}+ block pairs"
    if k < 2:
        return Verdict(change=Change.INCONCLUSIVE, ratio=ratio, low=None, high=None,
                       method=shape, why=str(Reason.ONE_BLOCK_ROUND),
                       reasons=(Reason.ONE_BLOCK_ROUND,))  # fmt: skip
    alpha = 1.0 - level
    half = float(_sp.stdtrit(k - 1, 1 - alpha / 2)) * float(np.std(d, ddof=1)) / np.sqrt(k)
    lo, hi = d.mean() - half, d.mean() + half
    method = f"paired t({k - 1})"
    if k >= BOOTSTRAP_MIN_ROUNDS:
        rng = np.random.default_rng(seed)
        boot = d[rng.integers(0, k, size=(BOOTSTRAP_RESAMPLES, k))].mean(axis=1)
        q_lo, q_hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
        lo, hi = min(lo, float(q_lo)), max(hi, float(q_hi))
        method += "+bootstrap"
    return decide(ratio, float(np.exp(lo)), float(np.exp(hi)), factor, direction,
                  f"{method} {shape}")  # fmt: skip
