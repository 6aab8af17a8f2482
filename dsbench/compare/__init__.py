"""Compare two runs: selectors pick them, pairs are matched by benchmark id, and each pair gets
one of four verdicts from run-level statistics, in the metric's own direction.

- Verdicts: the rule is written once, in :mod:`dsbench.stats.judge`. The unit of evidence is
  the round: between two runs a launch (a fresh process); between two sides of one run
  (``engine=deepspeed`` vs ``engine=dsbench``) the alternating rounds both sides were timed in.
  Two runs of one launch each are decided only with a noise figure (an A/A calibration of the
  machine, ``dsbench noise``), the newest for that machine, named above the table.
- Choosing runs: when a selector matches several runs, the pair of runs sharing benchmark cases
  and differing in the fewest fields besides the compared axis is used (newest first among
  equals), so ``--baseline 0.18.3 --contender 0.18.4`` over asv's matrix pairs the same Python.
  With no contender, the closest run that differs on the baseline selector's own axis is used;
  for a DeepSpeed version, the installed DeepSpeed's runs (else the next newer release's), a
  ``dsbench ab`` pair first (:mod:`~dsbench.compare.pairing`).
- Confounders: environment fields that differ besides the compared axis are listed above the
  table, because such a comparison measures more than one thing.
- Hardware: runs on unlike hardware (:mod:`dsbench.records.fingerprint`: another CPU model,
  cache, ISA, memory size or GPUs, whatever the host name) get no verdict: their rows say
  ``unlike hardware`` with the ratio as measured, unless the hardware is the compared axis
  (``backend=cuda`` vs ``backend=rocm``, ``cpu=xeon`` vs ``cpu=epyc``). A driver alone is a
  confounder, still judged.

The work is in five modules: :mod:`~dsbench.compare.selection` (which runs),
:mod:`~dsbench.compare.pairing` (which pair, given only a DeepSpeed version),
:mod:`~dsbench.compare.rows` (the row and report types), :mod:`~dsbench.compare.comparison`
(rows, verdicts, the report as data) and :mod:`~dsbench.compare.render` (the table, in each
format, over the report).
"""

from dsbench.compare.comparison import (
    compare_rows,
    env_label,
    noise_figures,
    regressions,
    report,
    tally,
    unlike_hardware,
)
from dsbench.compare.pairing import pick_runs
from dsbench.compare.render import FORMATS, interval_text, pct, render, rows_table
from dsbench.compare.rows import UNLIKE, ComparedRow, MemoryOf, Report
from dsbench.compare.selection import (
    SELECTOR_KEYS,
    Selector,
    Side,
    axes_of,
    confounders,
    field_matches,
    is_asv,
    param_keys,
)
from dsbench.stats import Change, Reason

__all__ = [
    "FORMATS",
    "SELECTOR_KEYS",
    "UNLIKE",
    "Change",
    "ComparedRow",
    "MemoryOf",
    "Reason",
    "Report",
    "Selector",
    "Side",
    "axes_of",
    "compare_rows",
    "confounders",
    "env_label",
    "field_matches",
    "interval_text",
    "is_asv",
    "noise_figures",
    "param_keys",
    "pct",
    "pick_runs",
    "regressions",
    "render",
    "report",
    "rows_table",
    "tally",
    "unlike_hardware",
]
