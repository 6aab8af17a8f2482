"""``dsbench train``: train a model preset with a DeepSpeed-format ds_config, on dsbench's ZeRO
engine or DeepSpeed's, over local ranks it spawns (``--nproc N``) or ranks started by torchrun::

    dsbench train --nproc 2 --config ds_config.json --model mlp --steps 20
    torchrun --nnodes 2 --nproc-per-node 1 ... -m dsbench train --config ds_config.json --model mlp
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from dsbench.errors import UsageError
from dsbench.procs import faults


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_job_arguments(p, nproc_help="spawn this many local ranks (default: 1, or the ranks "
                                    "torchrun started)")  # fmt: skip
    p.add_argument("--steps", type=int, default=10,
                   help="the job's total optimizer steps; with --resume, training continues from "
                        "the checkpoint's step up to this one (default 10)")  # fmt: skip
    p.add_argument("--checkpoint", metavar="DIR", help="save a checkpoint here at the end")
    p.add_argument("--save-every", type=int, default=0, metavar="K", help="also save every K steps")
    p.add_argument("--resume", action="store_true", help="resume from the latest checkpoint")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                   help="a rank waiting this long on a dead or stuck peer stops with an error "
                        "naming it (default 300)")  # fmt: skip


def add_job_arguments(p: argparse.ArgumentParser, *, nproc_help: str) -> None:
    """What a training job is: config, model, engine, ranks, batch sizes, device, kernels, seed
    (``dsbench train`` and ``dsbench soak``)."""
    p.add_argument("--config", required=True, metavar="FILE", help="DeepSpeed ds_config JSON")
    p.add_argument("--model", required=True, help="model preset (see dsbench.models)")
    p.add_argument("--engine", default="dsbench", choices=["dsbench", "deepspeed"])
    p.add_argument("--nproc", type=int, default=None, help=nproc_help)
    p.add_argument(
        "--micro-batch",
        type=int,
        help="train_micro_batch_size_per_gpu (overrides the config's; the others are re-derived)",
    )
    p.add_argument("--grad-accum", type=int, help="gradient_accumulation_steps (overrides)")
    p.add_argument("--train-batch", type=int, help="train_batch_size (overrides)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument(
        "--kernels",
        default="",
        metavar="OP=IMPL,...",
        help="registry implementation per op, e.g. adamw=triton,allreduce=ring",
    )
    p.add_argument("--seed", type=int, default=0)


def kernels_arg(text: str) -> dict[str, str]:
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


def resolve(args: argparse.Namespace) -> Resolved:
    """Check the job's arguments and resolve its ds_config for its world size (one-line errors),
    printing the config's notices once."""
    import torch

    from dsbench.engines.train_loop import torchrun_env
    from dsbench.models import get_model
    from dsbench.zero.config import load_config

    path = Path(args.config)
    if not path.is_file():
        raise UsageError(f"--config {path}: no such file")
    preset = get_model(args.model)
    for name in ("steps", "nproc", "micro_batch", "grad_accum", "train_batch", "save_every"):
        value = getattr(args, name, None)
        if value is not None and value < (0 if name == "save_every" else 1):
            raise UsageError(f"--{name.replace('_', '-')} must be positive, got {value}")
    if args.engine == "deepspeed":
        from dsbench.engines.deepspeed import INSTALL_HINT, deepspeed_version

        if deepspeed_version() is None:
            raise UsageError(f"--engine deepspeed: DeepSpeed is not installed; {INSTALL_HINT}")
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA/ROCm device is visible to torch")
    env = torchrun_env()
    world = int(env["WORLD_SIZE"]) if env and args.nproc is None else (args.nproc or 1)
    if device == "cuda" and env is None and world > torch.cuda.device_count():
        raise UsageError(f"--nproc {world}: only {torch.cuda.device_count()} GPU(s) visible")
    # Resolve the config for this world size before starting any rank (one-line errors): the
    # command line's batch sizes override it, "auto" is filled as the Hugging Face Trainer
    # would. Every rank, on either engine, then reads this effective config.
    cfg = load_config(path, world_size=world, micro_batch=args.micro_batch,
                      grad_accum=args.grad_accum, train_batch=args.train_batch,
                      steps=args.steps, hidden_size=getattr(preset.config, "hidden", None),
                      warn=lambda m: None, for_engine=args.engine)  # fmt: skip
    if env is None or env.get("RANK") == "0":
        for note in cfg.notes:
            print(f"dsbench: {note}", flush=True)
    return Resolved(cfg=cfg, device=device, world=world, torchrun=env)


def run(args: argparse.Namespace) -> int:
    from dsbench.engines.train_loop import TrainJob, run_under_torchrun
    from dsbench.models import get_model
    from dsbench.models.checkpointing import summary as checkpointing_summary
    from dsbench.procs.distributed import RankFailure, spawn_ranks
    from dsbench.zero.config.offload_config import summary

    job_args = resolve(args)
    cfg, device, world, env = job_args.cfg, job_args.device, job_args.world, job_args.torchrun
    if args.resume:
        check_resumable(args.checkpoint, args.engine, world, cfg.zero_optimization.stage)
    faults.parse(os.environ.get(faults.ENV, ""))
    job = TrainJob(model=args.model, config=cfg.to_deepspeed_dict(), engine=args.engine,
                   steps=args.steps, device=device, kernels=kernels_arg(args.kernels),
                   seed=args.seed, checkpoint_dir=args.checkpoint, resume=args.resume,
                   save_every=args.save_every)  # fmt: skip
    z, ac = cfg.zero_optimization, cfg.activation_checkpointing
    extras = [summary(z.stage, z.offload_optimizer, z.offload_param)]
    if ac.enabled:
        extras.append(checkpointing_summary(get_model(args.model), ac.number_checkpoints))
    report = functools.partial(_report, batch=cfg.batch, extras=", ".join(filter(None, extras)),
                               every=cfg.steps_per_print, last=args.steps - 1)  # fmt: skip
    if env is not None and args.nproc is None:
        run_under_torchrun(job, timeout_s=args.timeout, report=report)
        return 0
    try:
        spawn_ranks("dsbench.engines.train_loop:train_loop", world, job, device_type=device,
                    on_message=lambda rank, msg: report(msg), timeout_s=10**7,
                    collective_timeout_s=args.timeout)  # fmt: skip
    except RankFailure as exc:
        print(f"dsbench: error: {exc}", file=sys.stderr)
        return 1
    return 0
