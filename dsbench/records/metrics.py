"""The metrics table, torch-free: each metric's unit and direction (:data:`METRIC_UNITS`) and
each benchmark's metrics in order (:data:`METRICS`). The definitions in :mod:`dsbench.suites`
take their units and directions from here (``dsbench.suites.base.Metric``); readers of result
files (asv's included) use it without loading them (and torch)."""

from __future__ import annotations

from typing import Literal

Direction = Literal["higher", "lower"]
"""Which way a metric improves: throughput and bandwidth ``higher``, time and memory ``lower``."""
HIGHER: Direction = "higher"
LOWER: Direction = "lower"
DIRECTIONS: tuple[Direction, ...] = (HIGHER, LOWER)

METRIC_UNITS: dict[str, tuple[str, Direction]] = {
    "time": ("ms", LOWER),
    "bandwidth": ("GB/s", HIGHER),
    "params_per_s": ("Gparam/s", HIGHER),
    "throughput": ("TFLOP/s", HIGHER),
    "busbw": ("GB/s", HIGHER),
    "algbw": ("GB/s", HIGHER),
    "samples_per_s": ("samples/s", HIGHER),
    "tokens_per_s": ("tokens/s", HIGHER),
    "tflops_per_rank": ("TFLOP/s", HIGHER),
    "step_efficiency": ("fraction", HIGHER),
    "tflops": ("TFLOP/s", HIGHER),
    "ms_per_token": ("ms/token", LOWER),
}
"""Each metric's (unit, direction) by name: one meaning per name across the benchmarks."""

BENCHMARK_METRICS: dict[str, tuple[str, ...]] = {
    "adamw": ("bandwidth", "params_per_s", "time"),
    "copy": ("bandwidth", "time"),
    "gemm": ("throughput", "time"),
    **dict.fromkeys(("allreduce", "reduce_scatter", "allgather"), ("busbw", "algbw", "time")),
    **dict.fromkeys(("train_step", "train_step_offload"),
                    ("samples_per_s", "tokens_per_s", "tflops_per_rank", "time",
                     "step_efficiency")),
    "prefill": ("time", "tokens_per_s", "tflops"),
    "decode": ("ms_per_token", "tokens_per_s", "tflops"),
    # the ceilings a run measures beside its benchmarks (dsbench.suites.ceilings)
    "stream": ("bandwidth", "time"),
    "matmul": ("throughput", "time"),
}  # fmt: skip
"""Each benchmark's metrics by name, the primary first (tests/test_imports.py checks that the
definitions in :mod:`dsbench.suites` list the same)."""

METRICS: dict[str, tuple[tuple[str, str, Direction], ...]] = {
    bench: tuple((name, *METRIC_UNITS[name]) for name in names)
    for bench, names in BENCHMARK_METRICS.items()
}
"""Each benchmark's metrics as (name, unit, direction), the primary first."""
