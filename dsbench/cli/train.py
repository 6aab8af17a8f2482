"""``dsbench train``: train a model preset with a DeepSpeed-format ds_config, on dsbench's ZeRO
engine or DeepSpeed's, over local ranks it spawns (``--nproc N``) or ranks started by torchrun::

    dsbench train --nproc 2 --config ds_config.json --model mlp --steps 20
    torchrun --nnodes 2 --nproc-per-node 1 ... -m dsbench train --config ds_config.json --model mlp

The job runs in :mod:`dsbench.engines.training`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # dsbench.engines imports torch: loaded when the verb runs
    from dsbench.engines.training import JobOptions


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


def job_options(args: argparse.Namespace) -> JobOptions:
    """The job :func:`add_job_arguments` parsed."""
    from dsbench.engines.training import JobOptions

    return JobOptions(config=args.config, model=args.model, engine=args.engine,
                      nproc=args.nproc, micro_batch=args.micro_batch, grad_accum=args.grad_accum,
                      train_batch=args.train_batch, device=args.device, kernels=args.kernels,
                      seed=args.seed)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from dsbench.engines.training import TrainOptions, train

    return train(TrainOptions(job=job_options(args), steps=args.steps, checkpoint=args.checkpoint,
                              save_every=args.save_every, resume=args.resume,
                              timeout_s=args.timeout))  # fmt: skip
