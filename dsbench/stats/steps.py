"""Steps in a series of sides, found and confirmed.

[Note: steps found, then confirmed]
A sweep gives per case a series: for each side (a release, a commit) its rounds' medians. The
candidates come from change-point detection over the series of log round medians, side after
side, by PELT (Killick, Fearnhead & Eckley, "Optimal detection of changepoints with a linear
computational cost", JASA 107, 2012) from ``ruptures`` with the l2 cost: chosen over Apache
Otava's E-divisive (made for long histories of one value per commit, with its own service
config) and asv's step detection (asv is an optional tool here) because it takes the rounds of
each side as they are, and ``jump`` = ``min_size`` = rounds a side keeps every breakpoint on a
boundary between two sides. The penalty is BIC's, 2 s^2 ln n, s^2 the pooled variance of the
log round medians within sides: a break must explain more than the noise of the rounds.
Detection alone is a history's view (the PyTorch HUD, conbench): each candidate is then judged
as an A/B by the rounds of its two neighbours with compare's four verdicts
(:func:`dsbench.stats.judge`), at 99% split over the candidates of the case (Bonferroni); only
better or worse confirms it, and candidates that did not hold are named as such.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dsbench.stats.judge import Change, Verdict, judge, round_medians


@dataclass(frozen=True)
class Step:
    case: str
    before: int
    """Index of the series' side before the step."""
    after: int
    """Index of the side after it (``before + 1`` unless the sides between could not run)."""
    verdict: Verdict
    confirmed: bool


def candidates(series: list[list[list[float]]]) -> list[int] | None:
    """Indices ``i`` of sides after which the series steps (between side i and i + 1), from
    each side's rounds (their samples); None when ``ruptures`` is not installed."""
    try:
        import ruptures
    except ImportError:
        return None
    meds = [np.log(round_medians(side)) for side in series]
    k = min((len(m) for m in meds), default=0)
    if k < 2 or len(meds) < 2 or any((np.exp(m) <= 0).any() for m in meds):
        return []
    signal = np.concatenate([m[:k] for m in meds])
    within = float(np.mean([np.var(m[:k], ddof=1) for m in meds]))
    if within <= 0:
        within = float(np.var(signal)) * 1e-6 or 1e-12
    algo = ruptures.Pelt(model="l2", min_size=k, jump=k).fit(signal)
    breaks = algo.predict(pen=2 * within * np.log(len(signal)))
    return [b // k - 1 for b in breaks[:-1]]


def confirm(
    case: str, series: list[list[list[float]]], found: list[int], *, direction: str,
    factor: float = 1.05, level: float = 0.99, index: list[int] | None = None,
) -> list[Step]:  # fmt: skip
    """Each candidate judged by its two neighbours' rounds (see the note above). ``index``:
    each entry of ``series``' place among all the sides (where some could not run)."""
    index = index or list(range(len(series)))
    each = 1 - (1 - level) / max(len(found), 1)
    out = []
    for i in found:
        v = judge(series[i], series[i + 1], direction=direction, factor=factor, level=each)
        out.append(Step(case=case, before=index[i], after=index[i + 1], verdict=v,
                        confirmed=v.change in (Change.BETTER, Change.WORSE)))  # fmt: skip
    return out
