"""The verdicts ``dsbench compare`` gives: better / worse / unchanged / inconclusive of a
contender against a baseline, from their rounds (:func:`judge`, [Note: the unit of evidence]).
The rule that turns an interval into a verdict is written once, in :func:`decide`; what a row's
change can be (:class:`Change`) and why it is undecided (:class:`Reason`) are typed here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from math import exp, lgamma

import numpy as np
from scipy import special as _sp  # docs/decisions.md, "scipy.special, not scipy.stats"

from dsbench.records import DIRECTIONS, HIGHER

# [Note: the unit of evidence]
# On a shared machine two launches of the same code differ by 10-30% while repetitions inside
# one process differ by about 1%, so the samples of one launch are not independent evidence
# about another launch. A verdict's interval is therefore built from *rounds* (one fresh process
# or launch each; inside one launch, one fresh setup alternated with the compared case), each
# summarised by its median, as Kalibera & Jones recommend ("Rigorous benchmarking in reasonable
# time", ISMM 2013): the variance at the top level already contains the variance below it.
#
# The ratio's centre is exp(mean log r_C - mean log r_B), r the rounds' medians (the geometric
# mean of round medians; with one round per side, the ratio of the medians). Its 99% interval
# is the union of two:
# - Student's t on the log round medians with the pooled between-round variance, plus the
#   variance of a noise figure (an A/A calibration of this machine, `dsbench noise`) when there
#   is one: exact under normality, and the only usable interval with few rounds;
# - with at least BOOTSTRAP_MIN_ROUNDS rounds a side, the hierarchical bootstrap (resample
#   rounds, then samples within each resampled round), robust to skewed round medians.
# With 3 rounds a side the bootstrap alone would be far too narrow: its 99% interval is about
# the range of the round medians, and under A/A all three contender rounds fall beyond all
# three baseline rounds with probability 1/20. The union is never narrower than either.


class Change(StrEnum):
    """A compared row's change: one of the four verdicts :func:`judge` gives, or why the row has
    none (a side missing or not ok, by its status; units that differ; unlike hardware). Each
    formats as the text the tables show."""

    BETTER = "better"
    WORSE = "worse"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    ONLY_IN_BASELINE = "only in baseline"
    ONLY_IN_CONTENDER = "only in contender"
    UNITS_DIFFER = "units differ"
    UNLIKE_HARDWARE = "unlike hardware"
    BASELINE_FAILED = "baseline failed"
    BASELINE_SKIPPED = "baseline skipped"
    BASELINE_INTERRUPTED = "baseline interrupted"
    CONTENDER_FAILED = "contender failed"
    CONTENDER_SKIPPED = "contender skipped"
    CONTENDER_INTERRUPTED = "contender interrupted"
    FAILED_FAILED = "failed / failed"
    FAILED_SKIPPED = "failed / skipped"
    FAILED_INTERRUPTED = "failed / interrupted"
    SKIPPED_FAILED = "skipped / failed"
    SKIPPED_SKIPPED = "skipped / skipped"
    SKIPPED_INTERRUPTED = "skipped / interrupted"
    INTERRUPTED_FAILED = "interrupted / failed"
    INTERRUPTED_SKIPPED = "interrupted / skipped"
    INTERRUPTED_INTERRUPTED = "interrupted / interrupted"

    @classmethod
    def unjudged(cls, baseline: str, contender: str) -> Change:
        """Why a pair with a side not ok has no verdict, from each side's status ('' where it
        is ok, 'missing' where the side lacks the row)."""
        if "missing" in (baseline, contender):
            return cls.ONLY_IN_CONTENDER if baseline == "missing" else cls.ONLY_IN_BASELINE
        if baseline and contender:
            return cls(f"{baseline} / {contender}")
        return cls(f"baseline {baseline}" if baseline else f"contender {contender}")

    @property
    def is_verdict(self) -> bool:
        """One of the four verdicts (:data:`VERDICTS`), not a reason for having none."""
        return self in VERDICTS

    @property
    def one_side_only(self) -> bool:
        return self in (Change.ONLY_IN_BASELINE, Change.ONLY_IN_CONTENDER)


VERDICTS = (Change.BETTER, Change.WORSE, Change.UNCHANGED, Change.INCONCLUSIVE)
DECIDED = (Change.BETTER, Change.WORSE, Change.UNCHANGED)
"""The verdicts that decide a row."""


class Reason(StrEnum):
    """Why a verdict is inconclusive, or what else qualifies a row; the row's ``basis`` says it
    in full, with its particulars. Each formats as the reason's headline."""

    NO_VALUES = "no values to compare"
    ONE_VALUE = "one value on a side"
    TOO_FEW_SAMPLES = "too few samples"
    NO_NOISE_FIGURE = "one round per side and no noise figure for this machine and benchmark"
    NOT_POSITIVE = "values at or below zero"
    SPREAD_TOO_WIDE = "spread too wide"
    """The interval reaches across the factor (headline: :func:`reason_text`)."""
    EXCLUDES_ONE = "yet it excludes x1"
    """With :attr:`SPREAD_TOO_WIDE`: something changed, of a size not yet known."""
    NO_BLOCK_PAIRS = "no positive block pairs to compare"
    ONE_BLOCK_ROUND = "one round of paired blocks: no spread between rounds to test"
    UNLIKE_HARDWARE = "no verdict across hardware"


def reason_text(reason: Reason, factor: float) -> str:
    """A reason's headline, as the pages name it: ``spread too wide: the interval reaches across
    x1.05``; the reason itself for any other."""
    if reason is Reason.SPREAD_TOO_WIDE:
        return f"spread too wide: the interval reaches across x{factor:g}"
    return str(reason)


BOOTSTRAP_MIN_ROUNDS = 5
BOOTSTRAP_RESAMPLES = 1000


@dataclass(frozen=True, kw_only=True)
class Noise:
    """Run-to-run spread of one benchmark on one machine, from an A/A calibration."""

    sigma: float
    """Standard deviation of the log of a launch's median, between launches."""
    df: int
    """Degrees of freedom of ``sigma`` (launches - 1)."""
    source: str = ""
    """Where it came from (the calibration run's id)."""


@dataclass(frozen=True, kw_only=True)
class Verdict:
    change: Change
    """One of :data:`VERDICTS`."""
    ratio: float
    """Contender centre / baseline centre (centre: geometric mean of the round medians)."""
    low: float | None
    """The 99% interval of the ratio (None where none could be made)."""
    high: float | None
    method: str
    """How the interval was made, e.g. ``t(8)+bootstrap, 5+5 rounds``."""
    why: str = ""
    """For ``inconclusive``: why the data cannot decide."""
    reasons: tuple[Reason, ...] = ()
    """What ``why`` says, typed: the reason first, then what qualifies it."""


def round_medians(rounds: Sequence[Sequence[float]]) -> np.ndarray:
    return np.array([float(np.median(np.asarray(r, float))) for r in rounds if len(r)])


def centre(rounds: Sequence[Sequence[float]]) -> float:
    """The geometric mean of the rounds' medians (one round: its median). Where a median is not
    positive (a soak's slope, a count of zero) the geometric mean is undefined and this is their
    arithmetic mean; :func:`judge` calls such rows inconclusive."""
    med = round_medians(rounds)
    if (med <= 0).any():
        return float(med.mean())
    return float(np.exp(np.mean(np.log(med))))


def round_spread(rounds: Sequence[Sequence[float]]) -> tuple[float, int]:
    """(SD of the log round medians, degrees of freedom): the noise figure of an A/A run."""
    logs = np.log(round_medians(rounds))
    if len(logs) < 2:
        return 0.0, 0
    return float(np.std(logs, ddof=1)), len(logs) - 1


def min_exact_p(n: int, m: int) -> float:
    """The smallest two-sided p-value the exact Mann–Whitney test can give with n and m samples:
    complete separation, 2 / C(n+m, n)."""
    log_comb = lgamma(n + m + 1) - lgamma(n + 1) - lgamma(m + 1)
    return min(1.0, 2.0 * exp(-log_comb))


def _bootstrap_logs(rounds: list[np.ndarray], rng: np.random.Generator, b: int) -> np.ndarray:
    """``b`` hierarchical-bootstrap replicates of the mean log round median: rounds resampled
    with replacement, then each chosen round's samples resampled with replacement."""
    k = len(rounds)
    # per round: b bootstrap medians of its own samples
    meds = np.empty((k, b))
    for i, x in enumerate(rounds):
        idx = rng.integers(0, len(x), size=(b, len(x)))
        meds[i] = np.median(x[idx], axis=1)
    pick = rng.integers(0, k, size=(b, k))
    return np.log(meds[pick, np.arange(b)[:, None]]).mean(axis=1)


def judge(
    base: Sequence[Sequence[float]],
    cont: Sequence[Sequence[float]],
    *,
    direction: str,
    factor: float = 1.05,
    level: float = 0.99,
    noise: Noise | None = None,
    seed: int = 0,
) -> Verdict:
    """Verdict on contender vs baseline, each given as its rounds' samples (see the note above),
    by the rule of :func:`decide`; inconclusive when the data cannot support a test (one value,
    fewer samples than the exact test needs at 1 - level, one round per side without a noise
    figure)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'higher' or 'lower', got {direction!r}")
    b_rounds = [np.asarray(r, float) for r in base if len(r)]
    c_rounds = [np.asarray(r, float) for r in cont if len(r)]
    nb, nc = sum(map(len, b_rounds)), sum(map(len, c_rounds))
    if not (b_rounds and c_rounds):
        return Verdict(change=Change.INCONCLUSIVE, ratio=float("nan"), low=None, high=None,
                       method="", why="no values to compare",
                       reasons=(Reason.NO_VALUES,))  # fmt: skip
    if min(x.min() for x in (*b_rounds, *c_rounds)) <= 0:
        return _judge_not_positive(b_rounds, c_rounds, level)
    ratio = centre(c_rounds) / centre(b_rounds)
    kb, kc = len(b_rounds), len(c_rounds)
    shape = f"{kb}+{kc} rounds"

    def undecided(reason: Reason, why: str) -> Verdict:
        return Verdict(change=Change.INCONCLUSIVE, ratio=ratio, low=None, high=None,
                       method=shape, why=why, reasons=(reason,))  # fmt: skip

    if min(nb, nc) < 2:
        return undecided(
            Reason.ONE_VALUE, "one value on a side (no spread to test: asv --quick, track_)"
        )
    alpha = 1.0 - level
    if min_exact_p(nb, nc) >= alpha:
        return undecided(
            Reason.TOO_FEW_SAMPLES,
            f"too few samples ({nb}+{nc}): the exact test cannot reach p<{alpha:g}",
        )
    lb, lc = np.log(round_medians(b_rounds)), np.log(round_medians(c_rounds))
    ss = float(((lb - lb.mean()) ** 2).sum() + ((lc - lc.mean()) ** 2).sum())
    df = (kb - 1) + (kc - 1)
    parts = []
    if noise is not None and noise.df > 0:
        ss += noise.df * noise.sigma**2
        df += noise.df
        parts.append(f"noise figure{f' {noise.source}' if noise.source else ''}")
    if df == 0:
        return undecided(
            Reason.NO_NOISE_FIGURE,
            "one round per side and no noise figure for this machine and benchmark "
            "(measure one with `dsbench noise`, or compare in rounds with `dsbench ab`)",
        )
    d = float(np.log(ratio))
    half = float(_sp.stdtrit(df, 1 - alpha / 2)) * np.sqrt(ss / df) * np.sqrt(1 / kb + 1 / kc)
    lo, hi = d - half, d + half
    method = f"t({df})"
    if min(kb, kc) >= BOOTSTRAP_MIN_ROUNDS:
        rng = np.random.default_rng(seed)
        boot = _bootstrap_logs(c_rounds, rng, BOOTSTRAP_RESAMPLES) - _bootstrap_logs(
            b_rounds, rng, BOOTSTRAP_RESAMPLES
        )
        q_lo, q_hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
        lo, hi = min(lo, float(q_lo)), max(hi, float(q_hi))
        method += "+bootstrap"
    method = ", ".join([f"{method} {shape}", *parts])
    return decide(ratio, float(np.exp(lo)), float(np.exp(hi)), factor, direction, method)


def _judge_not_positive(b_rounds, c_rounds, level) -> Verdict:
    """A row with a value at or below zero (a count of none, a slope, a drift) has no ratio.
    It is ``unchanged`` only where every value on both sides is the same (no loss anomaly in any
    soak on either side) and there are enough of them for the exact test to reach 1 - level;
    otherwise inconclusive."""
    values = np.concatenate([*b_rounds, *c_rounds])
    nb, nc = sum(map(len, b_rounds)), sum(map(len, c_rounds))
    shape = f"{len(b_rounds)}+{len(c_rounds)} rounds"
    if (values == values[0]).all() and min_exact_p(nb, nc) < 1.0 - level:
        return Verdict(change=Change.UNCHANGED, ratio=1.0, low=1.0, high=1.0,
                       method=f"every value {values[0]:g} on both sides, {shape}")  # fmt: skip
    why = "values at or below zero (a slope, a drift, a count): no ratio to judge"
    return Verdict(change=Change.INCONCLUSIVE, ratio=float("nan"), low=None, high=None,
                   method="", why=why, reasons=(Reason.NOT_POSITIVE,))  # fmt: skip


def decide(ratio: float, low: float, high: float, factor: float, direction: str,
           method: str) -> Verdict:  # fmt: skip
    """The verdict rule, the one place it is written. With [low, high] the interval of the
    contender/baseline ratio (at the level asked for, 99% by default) and ``factor`` the least
    change that counts (``--factor``, 1.05 by default):

    - **better** / **worse**: the whole interval lies beyond ``factor`` (low > factor, or
      high < 1/factor); better where that is the metric's direction (``higher``: up);
    - **unchanged**: it lies within [1/factor, factor];
    - **inconclusive** otherwise: the spread is too wide (:attr:`Reason.SPREAD_TOO_WIDE`), and
      where the interval still excludes x1, something changed of a size not yet known
      (:attr:`Reason.EXCLUDES_ONE`).

    :func:`judge` and :func:`dsbench.stats.paired.judge_paired` call it once they have an
    interval; before that, data that cannot support a test are inconclusive with the reason."""
    if low > factor or high < 1 / factor:
        up = low > factor
        change = Change.BETTER if up == (direction == HIGHER) else Change.WORSE
        return Verdict(change=change, ratio=ratio, low=low, high=high, method=method)
    if low >= 1 / factor and high <= factor:
        return Verdict(change=Change.UNCHANGED, ratio=ratio, low=low, high=high, method=method)
    why = reason_text(Reason.SPREAD_TOO_WIDE, factor)
    reasons = (Reason.SPREAD_TOO_WIDE,)
    if low > 1 or high < 1:  # yet something changed
        why += f"; yet it excludes x1: a change whose size against x{factor:g} is not yet known"
        reasons += (Reason.EXCLUDES_ONE,)
    return Verdict(change=Change.INCONCLUSIVE, ratio=ratio, low=low, high=high, method=method,
                   why=why, reasons=reasons)  # fmt: skip
