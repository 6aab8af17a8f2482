"""``dsbench train`` from typed options: the job checked and its ds_config resolved before any
rank starts (one-line errors), then its ranks spawned here (``--nproc N``) or this process run as
one of torchrun's ranks, and rank 0's messages printed as they come.

:class:`JobOptions` is what a training job is (``dsbench train`` and ``dsbench soak`` share it);
:class:`TrainOptions` adds what ``dsbench train`` does with it.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from dsbench.errors import UsageError
from dsbench.procs import faults


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    """A training job as the command line gives it, before it is checked."""

    config: str
    """The DeepSpeed ds_config JSON file."""
    model: str
    """A model preset (:mod:`dsbench.models`)."""
    engine: str = "dsbench"
    nproc: int | None = None
    """Local ranks to spawn (None: 1, or the ranks torchrun started)."""
    micro_batch: int | None = None
    grad_accum: int | None = None
    train_batch: int | None = None
    device: str = "auto"
    kernels: str = ""
    """Registry implementation per op, ``OP=IMPL,...``."""
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class TrainOptions:
    """``dsbench train``'s job and what it does with it."""

    job: JobOptions
    steps: int = 10
    """The job's total optimizer steps (a resumed run continues up to this step)."""
    checkpoint: str | None = None
    """Save a checkpoint in this folder at the end (and resume from it)."""
    save_every: int = 0
    resume: bool = False
    timeout_s: float = 300.0
    """A rank waiting this long on a dead or stuck peer stops with an error naming it."""


def kernels_arg(text: str) -> dict[str, str]:
    """``adamw=triton,allreduce=ring`` as {op: implementation}, each checked in the registry."""
    from dsbench.kernels import registry

    out = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        op, sep, impl = item.partition("=")
        if not sep:
            raise UsageError(f"--kernels '{item}': expected OP=IMPL, e.g. adamw=triton")
        registry.get(op, impl)  # unknown op or implementation: one line listing the valid ones
        out[op] = impl
    return out


def _report(
    msg, *, batch=None, extras: str = "", every: int | None = None, last: int | None = None
) -> None:
    """Print a rank's message; ``batch`` (the effective BatchConfig) and ``extras`` (offload,
    activation checkpointing) complete the start line. ``every`` (the config's
    ``steps_per_print``): print the step line of every N-th step and of the ``last`` one only
    (None: every step)."""
    kind, body = msg
    if kind == "warning":
        print(f"dsbench: warning: {body}", file=sys.stderr)
    elif kind == "start" and body["first_step"] >= body["steps"]:
        print(f"the checkpoint is at step {body['first_step']} and --steps is {body['steps']}: "
              "nothing left to train", flush=True)  # fmt: skip
    elif kind == "start":
        per_rank = ""
        if batch is not None:
            per_rank = (
                f", micro-batch {batch.train_micro_batch_size_per_gpu} × "
                f"{batch.gradient_accumulation_steps} accumulation steps per rank"
            )
        print(
            f"training {body['params']:,} parameters on {body['world_size']} rank(s) with "
            f"{body['engine']} (ZeRO stage {body['stage']}{', ' + extras if extras else ''}, "
            f"{body['precision']}, batch "
            f"{body['train_batch_size']}){per_rank}, from step {body['first_step']}",
            flush=True,
        )
    elif kind == "step":
        if every and (body["step"] + 1) % every and body["step"] != last:
            return
        print(
            f"step {body['step']:>5}  loss {body['loss']:.6g}  {body['seconds'] * 1e3:8.1f} ms"
            f"  {body['samples_per_s']:9.1f} samples/s",
            flush=True,
        )
        if "breakdown_ms" in body:  # wall_clock_breakdown, as DeepSpeed's timers print it
            print("           time (ms) | " + " | ".join(
                f"{k}: {v:.2f}" for k, v in body["breakdown_ms"].items()), flush=True)  # fmt: skip


def check_resumable(directory: str | None, engine: str, world: int, stage: int) -> None:
    """--resume: a complete checkpoint of this world size and stage is there (one-line errors)."""
    from dsbench.zero import checkpoint

    if directory is None:
        raise UsageError("--resume needs --checkpoint DIR (the folder to resume from)")
    if engine == "dsbench":
        checkpoint.verify(directory, world=world, stage=stage)
    elif not (Path(directory) / "latest").is_file():
        raise UsageError(f"--checkpoint {directory}: no checkpoint ('latest' file missing)")


@dataclass(frozen=True)
class Resolved:
    """A training job's command line, checked and resolved before any rank starts."""

    cfg: object
    """The effective ds_config (:class:`dsbench.zero.config.DSConfig`)."""
    device: str
    world: int
    torchrun: dict | None
    """torchrun's launch variables when this process is one of its ranks."""


def resolve(job: JobOptions, *, steps: int | None, save_every: int | None = None) -> Resolved:
    """Check the job (and its ``steps``, ``save_every``) and resolve its ds_config for its world
    size (one-line errors), printing the config's notices once."""
    import torch

    from dsbench.engines.train_loop import torchrun_env
    from dsbench.models import get_model
    from dsbench.zero.config import load_config

    path = Path(job.config)
    if not path.is_file():
        raise UsageError(f"--config {path}: no such file")
    preset = get_model(job.model)
    counts = {"steps": steps, "nproc": job.nproc, "micro_batch": job.micro_batch,
              "grad_accum": job.grad_accum, "train_batch": job.train_batch,
              "save_every": save_every}  # fmt: skip
    for name, value in counts.items():
        if value is not None and value < (0 if name == "save_every" else 1):
            raise UsageError(f"--{name.replace('_', '-')} must be positive, got {value}")
    if job.engine == "deepspeed":
        from dsbench.engines.deepspeed import INSTALL_HINT, deepspeed_version

        if deepspeed_version() is None:
            raise UsageError(f"--engine deepspeed: DeepSpeed is not installed; {INSTALL_HINT}")
    device = job.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA/ROCm device is visible to torch")
    env = torchrun_env()
    world = int(env["WORLD_SIZE"]) if env and job.nproc is None else (job.nproc or 1)
    if device == "cuda" and env is None and world > torch.cuda.device_count():
        raise UsageError(f"--nproc {world}: only {torch.cuda.device_count()} GPU(s) visible")
    # Resolve the config for this world size before starting any rank (one-line errors): the
    # command line's batch sizes override it, "auto" is filled as the Hugging Face Trainer
    # would. Every rank, on either engine, then reads this effective config.
    cfg = load_config(path, world_size=world, micro_batch=job.micro_batch,
                      grad_accum=job.grad_accum, train_batch=job.train_batch,
                      steps=steps, hidden_size=getattr(preset.config, "hidden", None),
                      warn=lambda m: None, for_engine=job.engine)  # fmt: skip
    if env is None or env.get("RANK") == "0":
        for note in cfg.notes:
            print(f"dsbench: {note}", flush=True)
    return Resolved(cfg=cfg, device=device, world=world, torchrun=env)


def train(opts: TrainOptions) -> int:
    """Train ``opts``' job; the exit status (1: a rank failed)."""
    from dsbench.engines.train_loop import TrainJob, run_under_torchrun
    from dsbench.models import get_model
    from dsbench.models.checkpointing import summary as checkpointing_summary
    from dsbench.procs.distributed import RankFailure, spawn_ranks
    from dsbench.zero.config.offload_config import summary

    spec = opts.job
    job_args = resolve(spec, steps=opts.steps, save_every=opts.save_every)
    cfg, device, world, env = job_args.cfg, job_args.device, job_args.world, job_args.torchrun
    if opts.resume:
        check_resumable(opts.checkpoint, spec.engine, world, cfg.zero_optimization.stage)
    faults.parse(os.environ.get(faults.ENV, ""))
    job = TrainJob(model=spec.model, config=cfg.to_deepspeed_dict(), engine=spec.engine,
                   steps=opts.steps, device=device, kernels=kernels_arg(spec.kernels),
                   seed=spec.seed, checkpoint_dir=opts.checkpoint, resume=opts.resume,
                   save_every=opts.save_every)  # fmt: skip
    z, ac = cfg.zero_optimization, cfg.activation_checkpointing
    extras = [summary(z.stage, z.offload_optimizer, z.offload_param)]
    if ac.enabled:
        extras.append(checkpointing_summary(get_model(spec.model), ac.number_checkpoints))
    report = functools.partial(_report, batch=cfg.batch, extras=", ".join(filter(None, extras)),
                               every=cfg.steps_per_print, last=opts.steps - 1)  # fmt: skip
    if env is not None and spec.nproc is None:
        run_under_torchrun(job, timeout_s=opts.timeout_s, report=report)
        return 0
    try:
        spawn_ranks("dsbench.engines.train_loop:train_loop", world, job, device_type=device,
                    on_message=lambda rank, msg: report(msg), timeout_s=10**7,
                    collective_timeout_s=opts.timeout_s)  # fmt: skip
    except RankFailure as exc:
        print(f"dsbench: error: {exc}", file=sys.stderr)
        return 1
    return 0
