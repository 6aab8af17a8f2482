"""What results are made of, shared by everything that writes or reads them, importing nothing
else from dsbench (and not torch): the metrics table (:mod:`.metrics`: each metric's unit and
direction, each benchmark's metrics), a benchmark case's id, the flat fields of a recorded
environment that selectors and confounder checks compare, and the typed records of a run
(:class:`RunRecord`, :mod:`.runs`), its rows (:class:`Row`, :mod:`.rows`) and a claim check
(:mod:`.claims`), all on :class:`Record` (:mod:`.base`)."""

from .base import UNSET, Record, RecordError, Unset, is_number, value_or
from .claims import ClaimCheck
from .metrics import (
    BENCHMARK_METRICS,
    DIRECTIONS,
    HIGHER,
    LOWER,
    METRIC_UNITS,
    METRICS,
    Direction,
)
from .rows import (
    OK,
    STATUSES,
    SUMMARY_FIELDS,
    CountedWork,
    Memory,
    MetricValue,
    Notes,
    Peak,
    Phases,
    Round,
    Row,
    Stats,
    Timing,
    case_id,
    case_peak,
    split_rounds,
)
from .runs import (
    OPTIONAL_RUN_FIELDS,
    REQUIRED_RUN_FIELDS,
    SOURCES,
    ABBlock,
    Interrupted,
    LaunchInfo,
    RunRecord,
    Sequential,
    SweepBlock,
    dig,
    summary_fields,
)

__all__ = [
    "BENCHMARK_METRICS",
    "DIRECTIONS",
    "HIGHER",
    "LOWER",
    "METRICS",
    "METRIC_UNITS",
    "OK",
    "OPTIONAL_RUN_FIELDS",
    "REQUIRED_RUN_FIELDS",
    "SOURCES",
    "STATUSES",
    "SUMMARY_FIELDS",
    "UNSET",
    "ABBlock",
    "ClaimCheck",
    "CountedWork",
    "Direction",
    "Interrupted",
    "LaunchInfo",
    "Memory",
    "MetricValue",
    "Notes",
    "Peak",
    "Phases",
    "Record",
    "RecordError",
    "Round",
    "Row",
    "RunRecord",
    "Sequential",
    "Stats",
    "SweepBlock",
    "Timing",
    "Unset",
    "case_id",
    "case_peak",
    "dig",
    "is_number",
    "split_rounds",
    "summary_fields",
    "value_or",
]
