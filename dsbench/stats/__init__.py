"""Statistics for benchmark samples: median with a distribution-free 99% confidence interval,
IQR, and the run-level verdicts ``dsbench compare`` gives
(:func:`judge`: better / worse / unchanged / inconclusive, from rounds, see the note there).

The CI of the median uses order statistics: for sorted samples x_(1..n) it is
[x_(k), x_(n-k+1)] with the largest k such that P(B <= k-1) <= alpha/2, B ~ Binomial(n, 1/2)
(the same construction asv uses). Below 8 samples no such k exists at 99%, and the interval is
the full range, flagged with ``ci_exact = False``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from math import exp, lgamma

import numpy as np
from scipy import special as _sp  # docs/decisions.md, "scipy.special, not scipy.stats"

from dsbench.records import DIRECTIONS, HIGHER


@dataclass(frozen=True, kw_only=True)
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    iqr: float
    ci_low: float
    ci_high: float
    ci_level: float
    ci_exact: bool
    """False when there are too few samples for ``ci_level``: the interval is then min..max."""
    mean: float
    stdev: float
    min: float
    max: float

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Summary:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


def median_ci(samples: Sequence[float], level: float = 0.99) -> tuple[float, float, bool]:
    """Distribution-free confidence interval of the median: (low, high, exact)."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    if n == 0:
        raise ValueError("no samples")
    alpha = 1.0 - level
    # k = number of j in 0..n-1 with P(B <= j) <= alpha/2, i.e. the largest k with
    # P(B <= k-1) <= alpha/2 (the cdf is increasing)
    k = int(np.count_nonzero(_sp.bdtr(np.arange(n), n, 0.5) <= alpha / 2))
    if k < 1:
        return float(x[0]), float(x[-1]), False
    return float(x[k - 1]), float(x[n - k]), True


def quantile_ci(
    samples: Sequence[float], q: float, level: float = 0.99
) -> tuple[float, float, float, bool]:
    """The ``q`` quantile of ``samples`` (numpy's default interpolation) and its
    distribution-free confidence interval from order statistics, as :func:`median_ci` builds the
    median's (equal tails, B ~ Binomial(n, q)): (value, low, high, exact); the sample's range
    where a tail has too few samples (``exact`` False)."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    if n == 0:
        raise ValueError("no samples")
    alpha = 1.0 - level
    cdf = _sp.bdtr(np.arange(n + 1), n, q)  # P(B <= j), j = 0..n
    k = int(np.count_nonzero(cdf[:n] <= alpha / 2))  # low = x_(k): P(B <= k-1) <= alpha/2
    u = int(np.argmax(cdf >= 1 - alpha / 2))  # high = x_(u+1): P(B <= u) >= 1 - alpha/2
    exact = k >= 1 and u < n
    low = float(x[k - 1]) if k >= 1 else float(x[0])
    high = float(x[min(u, n - 1)])
    return float(np.quantile(x, q)), low, high, exact


def summarize(samples: Sequence[float], level: float = 0.99) -> Summary:
    x = np.asarray(samples, dtype=float)
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    lo, hi, exact = median_ci(x, level)
    return Summary(
        n=len(x),
        median=float(med),
        q1=float(q1),
        q3=float(q3),
        iqr=float(q3 - q1),
        ci_low=lo,
        ci_high=hi,
        ci_level=level,
        ci_exact=exact,
        mean=float(x.mean()),
        stdev=float(x.std(ddof=1)) if len(x) > 1 else 0.0,
        min=float(x.min()),
        max=float(x.max()),
    )


# ---------------------------------------------------------------------------- verdicts
#
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


def geometric_ci(values: Sequence[float], level: float = 0.99) -> tuple[float, float] | None:
    """The ``level`` t-interval of the geometric mean of positive ``values``, one per launch
    (the unit of independent evidence): ``exp(mean ± t · sd / sqrt(n))`` of their logs. None
    with fewer than two values (nothing to estimate the spread from)."""
    logs = np.log(np.asarray(values, dtype=float))
    n = len(logs)
    if n < 2:
        return None
    half = float(_sp.stdtrit(n - 1, 1 - (1 - level) / 2)) * float(np.std(logs, ddof=1)) / np.sqrt(n)
    mid = float(np.mean(logs))
    return exp(mid - half), exp(mid + half)


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
    """Verdict on contender vs baseline, each given as its rounds' samples (see the note above).

    better / worse: the whole interval lies beyond ``factor`` in the metric's direction;
    unchanged: it lies within [1/factor, factor]; inconclusive otherwise, or when the data
    cannot support a test (one value, fewer samples than the exact test needs at 1 - level,
    one round per side without a noise figure)."""
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
    return _verdict(ratio, float(np.exp(lo)), float(np.exp(hi)), factor, direction, method)


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


def _verdict(ratio, low, high, factor, direction, method) -> Verdict:
    """better / worse beyond ``factor``, unchanged within it, else inconclusive."""
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
    return _verdict(ratio, float(np.exp(lo)), float(np.exp(hi)), factor, direction,
                    f"{method} {shape}")  # fmt: skip


# ---------------------------------------------------------------------------- drift
#
# [Note: drift over a long run]
# A soak asks whether memory or step time creeps upward as a run goes on. The estimate is the
# slope of the series over steps by ordinary least squares; its interval must not pretend that
# consecutive samples are independent: resident memory moves in steps (an allocator arena grows
# once and stays) and step times come in bursts (another job on the machine), so neighbouring
# samples are alike and the plain OLS interval is far too narrow. Two standard remedies, both
# applied:
# - batch means (Law & Kelton, "Simulation Modeling and Analysis", ch. 9): the series, after
#   warm-up, is cut into at most DRIFT_BATCHES consecutive batches of equal length and the line
#   is fitted to the batch means at the batches' mean steps; a burst or a step change then moves
#   one or two points, not hundreds;
# - the lag-1 autocorrelation r of the fit's residuals shrinks the sample to
#   n_eff = n (1 - r) / (1 + r) (r < 0 counts as 0), the residual variance is divided by
#   n_eff - 2 and Student's t has n_eff - 2 degrees of freedom (Santer et al., "Statistical
#   significance of trends and trend differences in layer-average atmospheric temperature time
#   series", J. Geophys. Res. 105, 2000).
# With n_eff <= 3 there is no usable interval and the verdict is inconclusive. The verdict against
# a stated threshold T follows compare's rule: flat when the whole interval lies below T, growing
# when it lies wholly above T, inconclusive otherwise (a series that shrinks is flat).

DRIFT_BATCHES = 20
DRIFT_VERDICTS = ("flat", "growing", "inconclusive")


@dataclass(frozen=True, kw_only=True)
class Trend:
    """A least-squares line through a series and its slope's interval (see the note above)."""

    slope: float
    """Change of y per unit of x."""
    low: float | None
    """The slope's interval at ``level`` (None where n_eff leaves no degrees of freedom)."""
    high: float | None
    level: float
    intercept: float
    n: int
    """Points in the series."""
    points: int
    """Points the line was fitted to (batch means; ``n`` when the series is short)."""
    r1: float
    """Lag-1 autocorrelation of the fit's residuals."""
    n_eff: float
    """Effective number of points: ``points (1 - r1) / (1 + r1)``, r1 below 0 taken as 0."""

    def to_dict(self) -> dict:
        return asdict(self)


def trend(
    x: Sequence[float], y: Sequence[float], level: float = 0.99, batches: int = DRIFT_BATCHES
) -> Trend:
    """The OLS slope of ``y`` over ``x`` with its interval from batch means and the lag-1
    residual correction (see [Note: drift over a long run])."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    if n != len(y) or n < 3:
        raise ValueError(f"a trend needs at least 3 points of x and y, got {n} and {len(y)}")
    if n > batches:
        edges = np.linspace(0, n, batches + 1).round().astype(int)
        x = np.array([x[a:b].mean() for a, b in itertools.pairwise(edges)])
        y = np.array([y[a:b].mean() for a, b in itertools.pairwise(edges)])
    k = len(x)
    dx = x - x.mean()
    sxx = float((dx**2).sum())
    if sxx == 0:
        raise ValueError("a trend needs at least two distinct x values")
    slope = float((dx * (y - y.mean())).sum() / sxx)
    intercept = float(y.mean() - slope * x.mean())
    resid = y - intercept - slope * x
    ss = float((resid**2).sum())
    r1 = float((resid[1:] * resid[:-1]).sum() / ss) if ss > 0 else 0.0
    n_eff = k * (1 - max(r1, 0.0)) / (1 + max(r1, 0.0))
    low = high = None
    if n_eff > 3:
        half = float(_sp.stdtrit(n_eff - 2, 1 - (1 - level) / 2) * np.sqrt(ss / (n_eff - 2) / sxx))
        low, high = slope - half, slope + half
    return Trend(
        slope=slope,
        low=low,
        high=high,
        level=level,
        intercept=intercept,
        n=n,
        points=k,
        r1=r1,
        n_eff=n_eff,
    )


def drift_verdict(t: Trend, threshold: float) -> tuple[str, str]:
    """(verdict, why) of a slope against ``threshold``: ``flat`` when the whole interval lies
    below it, ``growing`` when wholly above, else ``inconclusive`` with the reason."""
    if t.low is None or t.high is None:
        return "inconclusive", (
            f"too few independent points (n_eff {t.n_eff:.1f} of {t.points}): no interval"
        )
    if t.high < threshold:
        return "flat", ""
    if t.low > threshold:
        return "growing", ""
    return "inconclusive", f"the interval reaches across the threshold {threshold:g}"
