"""A target module whose import takes seconds longer on rank 1, as a loaded machine makes one
rank start late (tests/test_distributed.py imports it on spawned ranks)."""

import os
import time

import torch.distributed as dist

if os.environ.get("RANK") == "1":
    time.sleep(float(os.environ.get("DSBENCH_TEST_SLOW_START_S", "5")))


def barrier(payload, *, device, send):
    dist.barrier()
    send("passed the barrier")
