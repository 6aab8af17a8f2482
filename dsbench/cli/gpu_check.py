"""``dsbench gpu-check``: on a GPU box, every GPU number in one offline command, in order and
under one time budget (:mod:`dsbench.gpu.check`); ``--device cpu`` rehearses it on a CPU."""

from __future__ import annotations

import argparse
from pathlib import Path

from dsbench.errors import UsageError

BUDGET_S = {"cuda": 470.0, "cpu": 280.0}
"""Under 8 minutes on one GPU (start-up and transfers of a 15-minute lease left over); under 5
on the CPU rehearsal."""


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


def _device(choice: str) -> str:
    if choice != "auto":
        return choice
    import subprocess
    import sys

    probe = "import torch; print(int(torch.cuda.is_available()))"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return "cuda" if found.stdout.strip() == "1" else "cpu"


def run(args: argparse.Namespace) -> int:
    from dsbench.gpu import check as gpucheck

    if args.budget is not None and args.budget <= 0:
        raise UsageError(f"--budget {args.budget:g}: give a positive number of seconds")
    out = Path(args.out) if args.out else gpucheck.default_out()
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"--out {out} is not empty; gpu-check writes into an empty folder")
    device = _device(args.device)
    return gpucheck.check(device, out, args.budget or BUDGET_S[device])
