"""``dsbench env``: versions, devices, clocks, compilers, hardware profile and kernel availability.

The text report is for people (``ds_report``-style); ``--json`` prints exactly the ``env`` block
that every result file carries.
"""

from __future__ import annotations

import argparse
import json

from dsbench.envinfo import collect_env, format_env


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the environment as JSON")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default=None,
        help="device to report on (default: cuda if a GPU is usable, else cpu; "
        "cuda also covers ROCm builds of torch)",
    )
    parser.add_argument(
        "--no-telemetry",
        dest="telemetry",
        action="store_false",
        help="skip the read-only nvidia-smi/rocm-smi query (clocks, power limit, temperature)",
    )


def run(args: argparse.Namespace) -> int:
    env = collect_env(args.device, telemetry=args.telemetry)
    if args.json:
        print(json.dumps(env, indent=2))
    else:
        print(format_env(env), end="")
    return 0
