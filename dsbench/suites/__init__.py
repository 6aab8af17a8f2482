"""Benchmark definitions and the suites that group them.

Suites: ``smoke`` (tiny, for tests), ``quick`` (default; < 5 minutes on a 2-core CPU) and
``full`` (real hardware: larger sizes, more dtypes and ranks).
"""

from __future__ import annotations

from dsbench.errors import UsageError, choices_message
from dsbench.suites import comm, gemm, inference, optim, training
from dsbench.suites.base import (
    Benchmark,
    Case,
    Context,
    Metric,
    ParamsError,
    Skip,
    Work,
    case_id,
    record_of,
)

SUITES: dict[str, str] = {
    "smoke": "tiny sizes, for tests and a first look",
    "quick": "default: a few sizes per benchmark; under 5 minutes on a 2-core CPU",
    "full": "real hardware: large sizes, all dtypes and rank counts",
    "training": "ZeRO stages 1-3 training steps, dsbench's engine vs DeepSpeed (sized by device)",
    "inference": "GPT prefill and KV-cache greedy decoding, batch 1 and 8 (sized by device)",
}

BENCHMARKS: dict[str, Benchmark] = {
    b.name: b for module in (optim, gemm, comm, training, inference) for b in module.BENCHMARKS
}


def get_benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise UsageError(choices_message("benchmark", name, BENCHMARKS))
    return BENCHMARKS[name]


def check_suite(name: str) -> str:
    if name not in SUITES:
        raise UsageError(choices_message("suite", name, SUITES))
    return name


__all__ = [
    "BENCHMARKS",
    "SUITES",
    "Benchmark",
    "Case",
    "Context",
    "Metric",
    "ParamsError",
    "Skip",
    "Work",
    "case_id",
    "check_suite",
    "get_benchmark",
    "record_of",
]
