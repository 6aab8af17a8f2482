"""The training loop of ``dsbench train``: one rank's part, whoever started the rank.

Ranks come from ``torchrun`` (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; single or
multi-node) or from ``dsbench train --nproc N``, which spawns local ranks itself
(:func:`dsbench.procs.distributed.spawn_ranks`). Either way every rank runs :func:`train_loop`:
build
the model preset, read the ds_config, build the engine (dsbench's or DeepSpeed's), then run the
steps on deterministic synthetic data (rank r of W reads micro-batch ``(step*A + m)*W + r``),
optionally resuming from and saving checkpoints. Rank 0 reports losses and throughput.

``steps`` is the job's total, as DeepSpeed's and Hugging Face's max steps are: a run resumed
from the checkpoint of step 20 with ``steps=60`` trains steps 20..59 and saves at 60, so a
scheduler that re-runs the same command after a failure finishes the same job. Each rank marks
the step it is in (:func:`dsbench.procs.distributed.mark`), so a rank that dies is named with it.

For ``dsbench soak`` a job may also ask every rank to report a sample every ``sample_every``
steps (its resident memory, device memory, its own mean step time since the last sample, the
loss, the loss scale and the skipped steps), and may end at a wall-clock ``deadline`` rather
than at ``steps``: the ranks agree on it through the all-reduce that already finds the slowest
rank's step time, so they stop after the same step and save there.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True, kw_only=True)
class TrainJob:
    model: str
    config: dict
    """The ds_config as read from the file (resolved again on each rank for its world size)."""
    engine: str = "dsbench"
    steps: int = 10
    """The job's total optimizer steps (a resumed run continues up to this step)."""
    micro_batch: int | None = None
    grad_accum: int | None = None
    train_batch: int | None = None
    device: str = "cpu"
    kernels: dict | None = None
    seed: int = 0
    checkpoint_dir: str | None = None
    resume: bool = False
    save_every: int = 0
    sample_every: int = 0
    """Every rank sends a ``("sample", {...})`` message every this many steps (0: none)."""
    deadline: float | None = None
    """Wall-clock time (``time.time()``) after which the ranks stop together at the end of a
    step and save there (None: train up to ``steps``)."""


def train_loop(job: TrainJob, *, device: str, send) -> None:
    """Run ``job`` on this rank (the process group is up); ``send`` reports to the launcher."""
    from dsbench.procs import faults
    from dsbench.procs.distributed import mark

    world, rank = dist.get_world_size(), dist.get_rank()
    preset, cfg, engine = _build(job, device, send, world=world, rank=rank)
    first = _resume(engine, job)
    if rank == 0:
        send(
            (
                "start",
                {
                    "world_size": world,
                    "params": preset.num_params(),
                    "first_step": first,
                    "steps": job.steps,
                    "train_batch_size": cfg.batch.train_batch_size,
                    "engine": job.engine,
                    "stage": cfg.zero_optimization.stage,
                    "precision": cfg.precision,
                },
            )
        )
    saved = done = first
    own_seconds = 0.0  # this rank's step times since its last sample
    for step in range(first, job.steps):
        mark(step=step, doing="")
        faults.point("step", step)
        t0 = time.perf_counter()
        phases = _Phases(device) if cfg.wall_clock_breakdown else None
        total = _train_step(job, preset, cfg, engine, step, phases, device, rank, world)
        mine = time.perf_counter() - t0
        seconds, stop = _agree(mine, job.deadline, device)
        loss = total.item() / (world * cfg.batch.gradient_accumulation_steps)
        if rank == 0:
            send(
                (
                    "step",
                    {
                        "step": step,
                        "loss": loss,
                        "seconds": seconds,
                        "samples_per_s": cfg.batch.train_batch_size / seconds,
                        **({"breakdown_ms": phases.ms} if phases is not None else {}),
                    },
                )
            )
        done = step + 1
        own_seconds += mine
        if job.sample_every and done % job.sample_every == 0:
            send(("sample", _sample(engine, device, rank=rank, step=step, loss=loss,
                                    step_s=own_seconds / job.sample_every)))  # fmt: skip
            own_seconds = 0.0
        if job.checkpoint_dir and job.save_every and done % job.save_every == 0:
            saved = _save(engine, job, done)
        if stop:
            break
    if job.checkpoint_dir and saved < done:
        _save(engine, job, done)
    engine.destroy()


def _build(job: TrainJob, device: str, send, *, world: int, rank: int) -> tuple:
    """The model preset, the resolved ds_config and the engine (rank 0 sends config warnings)."""
    from dsbench.engines import build_engine
    from dsbench.models import get_model
    from dsbench.zero.config import load_config

    preset = get_model(job.model)
    cfg = load_config(job.config, world_size=world, micro_batch=job.micro_batch,
                      grad_accum=job.grad_accum, train_batch=job.train_batch,
                      warn=(lambda m: send(("warning", m))) if rank == 0 else (lambda m: None),
                      for_engine=job.engine)  # fmt: skip
    model = preset.build(gemm_impl=(job.kernels or {}).get("gemm"), seed=job.seed, device=device)
    engine = build_engine(job.engine, model, cfg, device=device, kernels=job.kernels)
    return preset, cfg, engine


def _resume(engine, job: TrainJob) -> int:
    """The step to start from: the checkpoint's data step when resuming, else 0."""
    from dsbench.procs.distributed import mark

    if not (job.resume and job.checkpoint_dir):
        return 0
    mark(doing="loading the checkpoint")
    client = engine.load_checkpoint(job.checkpoint_dir)
    if job.engine == "deepspeed":  # DeepSpeed returns (path, client_state)
        client = client[1] or {}
    return client.get("data_step", 0)


def _train_step(job: TrainJob, preset, cfg, engine, step: int, phases, device, rank, world):
    """One optimizer step over the micro-batches; the loss summed over them and all ranks (a
    float64 tensor)."""
    from dsbench.models.data import batch_index

    gas, mb = cfg.batch.gradient_accumulation_steps, cfg.batch.train_micro_batch_size_per_gpu
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[cfg.precision]
    total = torch.zeros((), dtype=torch.float64, device=device)
    for micro in range(gas):
        index = batch_index(step, rank=rank, world_size=world, micro_step=micro,
                            grad_accum=gas)  # fmt: skip
        batch = preset.batch(mb, seed=job.seed, step=index, device=device, dtype=dtype)
        # the engine's forward: DeepSpeed scales for GAS there
        with _phase(phases, "forward"):
            loss = preset.loss(engine, batch)
        with _phase(phases, "backward"):
            engine.backward(loss)
        with _phase(phases, "step"):
            engine.step()
        total += loss.detach().double()
    dist.all_reduce(total)
    return total


def _agree(mine: float, deadline: float | None, device: str) -> tuple[float, float]:
    """The slowest rank's step time, and whether any rank is past the deadline (nonzero)."""
    over = deadline is not None and time.time() >= deadline
    agreed = torch.tensor([mine, float(over)], dtype=torch.float64, device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    seconds, stop = agreed.tolist()
    return seconds, stop


class _Phases:
    """wall_clock_breakdown: rank 0's forward, backward and step time over a step's micro-steps
    (synchronising a GPU around each, as DeepSpeed's timers do when it is on)."""

    def __init__(self, device: str):
        self.gpu = device.startswith("cuda")
        self.ms = {"forward": 0.0, "backward": 0.0, "step": 0.0}


@contextlib.contextmanager
def _phase(phases: _Phases | None, name: str):
    if phases is None:
        yield
        return
    if phases.gpu:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    yield
    if phases.gpu:
        torch.cuda.synchronize()
    phases.ms[name] += (time.perf_counter() - t0) * 1e3


def _sample(engine, device: str, *, rank: int, step: int, loss: float, step_s: float) -> dict:
    """What a rank reports every ``sample_every`` steps (memory in bytes, time in seconds):
    resident memory now and its peak since the last sample (the kernel's high-water mark, reset
    here where it may be), the C heap in use (:func:`dsbench.measure.memory.host_heap_in_use`), on
    GPUs the allocator's bytes now and their peak likewise."""
    from dsbench.engines import loss_scale
    from dsbench.measure.memory import host_heap_in_use, host_peak_rss, host_rss, reset_host_peak

    sample = {"rank": rank, "step": step, "time": time.time(), "rss": host_rss(),
              "peak_rss": host_peak_rss(), "heap": host_heap_in_use(), "step_s": step_s,
              "loss": loss,
              "loss_scale": loss_scale(engine),
              "skipped_steps": int(getattr(engine, "skipped_steps", 0) or 0)}  # fmt: skip
    sample["peak_reset"] = reset_host_peak()
    if device.startswith("cuda"):
        sample["device_allocated"] = torch.cuda.memory_allocated(device)
        sample["device_reserved"] = torch.cuda.memory_reserved(device)
        sample["device_peak_allocated"] = torch.cuda.max_memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    return sample


def _save(engine, job: TrainJob, data_step: int) -> int:
    from dsbench.procs.distributed import mark

    mark(doing=f"saving the checkpoint of step {data_step}")
    engine.save_checkpoint(job.checkpoint_dir, client_state={"data_step": data_step})
    mark(doing="")
    return data_step


def torchrun_env() -> dict | None:
    """The torchrun / torch.distributed launch variables, or None when not launched so."""
    keys = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    if not all(k in os.environ for k in keys):
        return None
    return {k: os.environ[k] for k in (*keys, "LOCAL_RANK") if k in os.environ}


def run_under_torchrun(job: TrainJob, *, timeout_s: float, report) -> None:
    """This process is one rank started by torchrun: join the group, train, leave."""
    env = torchrun_env()
    local = int(env.get("LOCAL_RANK", "0"))
    if job.device == "cuda":
        torch.cuda.set_device(local)
        device, backend = f"cuda:{local}", "nccl"
    else:
        device, backend = "cpu", "gloo"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    try:
        train_loop(job, device=device, send=report)
    finally:
        dist.destroy_process_group()
