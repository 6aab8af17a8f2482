"""The options ``ab``, ``noise`` and ``sweep`` share: what each round runs and how many rounds,
checked before any round."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from dsbench import results
from dsbench.ab.plan import Suite
from dsbench.errors import UsageError
from dsbench.suites import SUITES, check_suite


def add_round_arguments(p: argparse.ArgumentParser, rounds: int | None) -> None:
    """``--suite --filter --rounds --device --out --label`` (``rounds``: the default count)."""
    p.add_argument("--suite", default="quick", help=f"one of {', '.join(SUITES)} (default quick)")
    p.add_argument("--filter", metavar="REGEX", help="only cases whose id matches")
    p.add_argument(
        "--rounds",
        type=int,
        default=rounds,
        help=f"rounds (fresh processes) per side (default {rounds})"
        if rounds
        else "a fixed number of rounds a side, no looks (default: until decided)",
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="results folder (default: $DSBENCH_RESULTS or ./results)",
    )
    p.add_argument("--label", help="label of the written run(s)")


def check_round_arguments(args: argparse.Namespace, minimum: int) -> Path:
    """The suite, ``--rounds`` (at least ``minimum``), the filter and the results folder, each a
    one-line error; returns the folder."""
    check_suite(args.suite)
    if args.rounds is not None and args.rounds < minimum:
        raise UsageError(f"--rounds must be at least {minimum}, got {args.rounds}")
    if args.filter is not None:
        try:
            re.compile(args.filter)
        except re.error as exc:
            raise UsageError(
                f"--filter '{args.filter}' is not a valid regular expression: {exc}"
            ) from None
    out, moved = results.writable_results_dir(args.out)
    if out.suffix == ".json":
        raise UsageError(f"--out {out}: give a results folder (one file a side is written)")
    if moved:
        print(f"dsbench: {moved}", file=sys.stderr)
    return out


def suite_of(args: argparse.Namespace) -> Suite:
    """The cases a round runs, from ``--suite --filter --device``."""
    return Suite(name=args.suite, filter=args.filter, device=args.device)
