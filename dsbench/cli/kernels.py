"""``dsbench kernels``: which kernel implementations can run here, or compile-check the CUDA/HIP
kernels for every target without a GPU (``--compile-check``).
"""

from __future__ import annotations

import argparse
import json

from dsbench.errors import UsageError, choices_message


def _target(value: str) -> str:
    from dsbench.kernels.cuda.compile_check import TARGETS

    if value not in TARGETS:
        raise argparse.ArgumentTypeError(choices_message("compile target", value, TARGETS))
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--compile-check",
        action="store_true",
        help="compile every kernels/csrc/*.cu with nvcc (sm_80, sm_90) and hipcc (gfx90a, also "
        "after torch's hipify) and print registers and spills per kernel; exit 1 if any fails",
    )
    parser.add_argument(
        "--target",
        action="append",
        type=_target,
        metavar="TARGET",
        help="with --compile-check: only this target (repeatable; sm_80, sm_90, gfx90a, "
        "gfx90a-hipify)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default=None,
        help="device the registry table is for (default: cuda if a GPU is usable, else cpu)",
    )


def run(args: argparse.Namespace) -> int:
    if args.target and not args.compile_check:
        raise UsageError("--target only applies to --compile-check")
    if args.compile_check:
        return _compile_check(args)
    return _registry_table(args)


def _compile_check(args: argparse.Namespace) -> int:
    from dsbench.kernels.cuda.compile_check import compile_check, format_table

    rows = compile_check(targets=args.target)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
    else:
        print(format_table(rows))
    return 0 if rows and all(r.ok for r in rows) else 1


def _registry_table(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from dsbench.kernels import registry

    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = registry.table(device)
    if args.json:
        print(json.dumps({"device": device, "kernels": rows}, indent=2))
        return 0
    chosen = {}
    for op in registry.OPS:
        try:
            chosen[op] = registry.get(op).name  # DSBENCH_<OP>_IMPL, else the default
        except UsageError:
            chosen[op] = registry.DEFAULTS.get(op)
    print(f"kernel implementations on device {device} (override per op: DSBENCH_<OP>_IMPL)")
    print(
        tabulate(
            [
                (
                    r["op"],
                    r["impl"] + (" *" if chosen.get(r["op"]) == r["impl"] else ""),
                    "yes" if r["available"] else "no",
                    r["reason"],
                )
                for r in rows
            ],
            headers=("op", "impl (* selected)", "can run", "reason"),
            tablefmt="simple",
        )
    )
    return 0
