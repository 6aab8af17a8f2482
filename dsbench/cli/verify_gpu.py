"""``dsbench verify-gpu``: on a GPU machine, build every kernel, check it against its torch
reference, time them all side by side and write a result file (:mod:`dsbench.gpu.verify`)."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, help="results folder (default ./results)")
    p.add_argument("--quick", action="store_true", help="fewer sizes (about 3 minutes)")
    p.add_argument(
        "--device",
        default="cuda",
        choices=["cuda", "cpu"],
        help="cpu: dry-run the script with the CPU's implementations",
    )


def run(args: argparse.Namespace) -> int:
    from dsbench.gpu import verify

    return verify.run(out=args.out, quick=args.quick, device=args.device)
