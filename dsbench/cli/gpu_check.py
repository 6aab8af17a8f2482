"""``dsbench gpu-check``: on a GPU box, every GPU number in one offline command, in order and
under one time budget (:mod:`dsbench.gpu.check`); ``--device cpu`` rehearses it on a CPU."""

from __future__ import annotations

import argparse

from dsbench.gpu.check import BUDGET_S, gpu_check


def add_arguments(p: argparse.ArgumentParser) -> None:
    from dsbench.cli.run import add_device_argument

    add_device_argument(p)
    p.add_argument(
        "--out",
        metavar="DIR",
        help="the folder for its (at most 8) files (default .dsbench/gpu-check/<time>/)",
    )
    p.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help=f"time for every step together (default {BUDGET_S['cuda']:.0f} on a GPU, "
        f"{BUDGET_S['cpu']:.0f} on the CPU)",
    )


def run(args: argparse.Namespace) -> int:
    return gpu_check(args.device, args.out, args.budget)
