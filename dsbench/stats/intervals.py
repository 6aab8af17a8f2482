"""Summaries of one case's samples: the median with a distribution-free confidence interval,
IQR, mean and spread (:func:`summarize`); any quantile's interval (:func:`quantile_ci`); the
t-interval of a geometric mean over launches (:func:`geometric_ci`).

The CI of the median uses order statistics: for sorted samples x_(1..n) it is
[x_(k), x_(n-k+1)] with the largest k such that P(B <= k-1) <= alpha/2, B ~ Binomial(n, 1/2)
(the same construction asv uses). Below 8 samples no such k exists at 99%, and the interval is
the full range, flagged with ``ci_exact = False``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from math import exp, log

import numpy as np
from scipy import special as _sp  # docs/decisions.md, "scipy.special, not scipy.stats"


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


def geomean(values: Sequence[float]) -> float:
    """The geometric mean of positive ``values``."""
    return exp(sum(log(v) for v in values) / len(values))
