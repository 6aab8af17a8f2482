"""Run on spawned ranks by tests/test_runner.py: the runner's rank worker on a toy two-sided
benchmark whose cases are interleaved, recording the order in which cases are set up."""

from __future__ import annotations

import torch
import torch.distributed as dist

from dsbench.measure import runner
from dsbench.suites.base import Benchmark, Case, Metric, Work

SETUPS: list[str] = []


def _setup(params, ctx):
    SETUPS.append(f"{params['side']}{params['size']}")

    def fn():
        dist.all_reduce(torch.ones(params["size"]))

    return Case(fn=fn, work=Work(items=1), notes={"side": params["side"]})


TWO_SIDED = Benchmark(
    name="two_sided",
    description="toy: two sides timed in alternating rounds",
    grid=lambda suite, ctx: {"side": ["a", "b"], "size": [8, 16], "ranks": [2]},
    setup=_setup,
    metrics=(
        Metric(name="rate", unit="calls/s", direction="higher", value=lambda w, t: w.items / t),
    ),
    ranks_param="ranks",
    interleave=("side",),
)


def run(payload, *, device, send):
    runner.BENCHMARKS = {"two_sided": TWO_SIDED}
    rows = []
    runner.rank_worker(payload, device=device, send=lambda msg: rows.append(msg))
    send({"rank": dist.get_rank(), "setups": list(SETUPS), "rows": rows})


def memory(payload, *, device, send):
    runner.BENCHMARKS = {"two_sided": TWO_SIDED}
    runner.memory_worker(payload, device=device, send=send)
