"""Statistics for benchmark samples: median with a distribution-free 99% confidence interval,
IQR, and the Mann–Whitney U test used by ``dsbench compare``.

The CI of the median uses order statistics: for sorted samples x_(1..n) it is
[x_(k), x_(n-k+1)] with the largest k such that P(B <= k-1) <= alpha/2, B ~ Binomial(n, 1/2)
(the same construction asv uses). Below 8 samples no such k exists at 99%, and the interval is
the full range, flagged with ``ci_exact = False``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats as _st


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
    k = int(np.count_nonzero(_st.binom.cdf(np.arange(n), n, 0.5) <= alpha / 2))
    if k < 1:
        return float(x[0]), float(x[-1]), False
    return float(x[k - 1]), float(x[n - k]), True


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


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann–Whitney U test: (U statistic of ``a``, p-value).

    U counts the pairs (a_i, b_j) with a_i > b_j (ties count 1/2). Exact p-values for small
    samples without ties, normal approximation with tie correction otherwise (scipy's 'auto').
    """
    res = _st.mannwhitneyu(
        np.asarray(a, float), np.asarray(b, float), alternative="two-sided", method="auto"
    )
    return float(res.statistic), float(res.pvalue)


MIN_SAMPLES_FOR_U = 5
"""With fewer samples per side, Mann–Whitney U cannot reach p < 0.01; fall back to the CIs."""


def significantly_different(
    a: Summary,
    b: Summary,
    a_samples: Sequence[float] | None = None,
    b_samples: Sequence[float] | None = None,
    alpha: float = 0.01,
) -> tuple[bool, str]:
    """Whether two measurements differ significantly, and by which test.

    Mann–Whitney U on the raw samples (p < alpha) when both sides have enough; otherwise the
    99% confidence intervals of the medians must not overlap (asv's rule).
    """
    if (
        a_samples is not None
        and b_samples is not None
        and min(len(a_samples), len(b_samples)) >= MIN_SAMPLES_FOR_U
    ):
        _, p = mann_whitney_u(a_samples, b_samples)
        return p < alpha, f"U p={p:.2g}"
    overlap = a.ci_low <= b.ci_high and b.ci_low <= a.ci_high
    return (not overlap), "CI overlap" if overlap else "CIs disjoint"
