"""The drift of a long run (a soak): the least-squares slope of a series with an interval that
allows for neighbouring samples being alike, and its verdict against a threshold
([Note: drift over a long run])."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import special as _sp  # docs/decisions.md, "scipy.special, not scipy.stats"

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
# a stated threshold T: flat when the whole interval lies below T, growing when it lies wholly
# above T, inconclusive otherwise (a series that shrinks is flat).

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
