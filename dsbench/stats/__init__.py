"""Statistics for benchmark samples, one module each:

- :mod:`~dsbench.stats.intervals`: a case's summary, the median's and any quantile's
  distribution-free interval, the geometric mean's t-interval;
- :mod:`~dsbench.stats.judge`: the verdicts ``dsbench compare`` gives and the rule, written
  once (:func:`~dsbench.stats.judge.decide`); :class:`Change` and :class:`Reason`;
- :mod:`~dsbench.stats.paired`: the verdict of paired block rounds (``dsbench ab --blocks``);
- :mod:`~dsbench.stats.sequential`: looking at the data as rounds come in;
- :mod:`~dsbench.stats.drift`: a soak's drift, its slope and verdict;
- :mod:`~dsbench.stats.steps`: steps in a series of sides, found and confirmed.

The public names are re-exported here, so ``from dsbench.stats import judge`` is the function
(the module is ``dsbench.stats.judge`` in ``sys.modules``).
"""

from dsbench.stats.drift import DRIFT_BATCHES, DRIFT_VERDICTS, Trend, drift_verdict, trend
from dsbench.stats.intervals import (
    Summary,
    geomean,
    geometric_ci,
    median_ci,
    quantile_ci,
    summarize,
)
from dsbench.stats.judge import (
    BOOTSTRAP_MIN_ROUNDS,
    BOOTSTRAP_RESAMPLES,
    DECIDED,
    VERDICTS,
    Change,
    Noise,
    Reason,
    Verdict,
    centre,
    decide,
    judge,
    min_exact_p,
    reason_text,
    round_medians,
    round_spread,
)
from dsbench.stats.paired import judge_paired, paired_logs

__all__ = [
    "BOOTSTRAP_MIN_ROUNDS",
    "BOOTSTRAP_RESAMPLES",
    "DECIDED",
    "DRIFT_BATCHES",
    "DRIFT_VERDICTS",
    "VERDICTS",
    "Change",
    "Noise",
    "Reason",
    "Summary",
    "Trend",
    "Verdict",
    "centre",
    "decide",
    "drift_verdict",
    "geomean",
    "geometric_ci",
    "judge",
    "judge_paired",
    "median_ci",
    "min_exact_p",
    "paired_logs",
    "quantile_ci",
    "reason_text",
    "round_medians",
    "round_spread",
    "summarize",
    "trend",
]
