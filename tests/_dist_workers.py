"""Functions run on spawned ranks by tests/test_distributed.py (must be importable)."""

import time

import torch
import torch.distributed as dist

from dsbench.measure.timing import TimingConfig, measure


def time_allreduce(payload, *, device, send):
    # warmup_s > 0: ranks must still make identical numbers of collective calls
    cfg = TimingConfig(warmup_s=0.05, min_warmup=2, min_reps=8, max_reps=40, budget_s=0.2)
    x = torch.ones(payload["count"])
    m = measure(lambda: dist.all_reduce(x), device=device, config=cfg, distributed=True)
    send({"rank": dist.get_rank(), "n": len(m.samples), "samples": m.samples, "ranks": m.ranks})


def fail_on_rank_one(payload, *, device, send):
    if dist.get_rank() == 1:
        raise ValueError("rank one is broken")
    dist.barrier()


def hang_on_rank_one(payload, *, device, send):
    if dist.get_rank() == 1:
        time.sleep(60)
    send("rank 0 done")


def barrier_while_rank_one_sleeps(payload, *, device, send):
    if dist.get_rank() == 1:
        time.sleep(60)
    dist.barrier()
