"""``dsbench bisect --good SIDE --bad SIDE --case ID``: the first DeepSpeed release or commit
between two sides at which a case's number moved, by binary search with an A/B at each probe
(:mod:`dsbench.sweep.bisect` holds the search, its probes and what it prints)."""

from __future__ import annotations

import argparse

from dsbench.suites import SUITES
from dsbench.sweep.bisect import BisectPlan, bisect


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--good", required=True, metavar="SIDE", help="deepspeed=V or commit=REF")
    p.add_argument("--bad", required=True, metavar="SIDE", help="the same kind as --good")
    p.add_argument("--case", required=True, metavar="ID", help="a benchmark id of the suite")
    p.add_argument("--suite", default="quick", help=f"one of {', '.join(SUITES)} (default quick)")
    p.add_argument("--max-time", default="20m", metavar="DURATION",
                   help="each probe's --max-time (default 20m)")  # fmt: skip
    p.add_argument("--blocks", action="store_true", help="probes in block rounds (ab --blocks)")
    p.add_argument("--rounds", type=int, default=None,
                   help="each probe a fixed number of rounds a side (ab --rounds N) instead of "
                   "--until-decided: narrower intervals for a known time")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    return bisect(
        BisectPlan(
            good=args.good,
            bad=args.bad,
            case=args.case,
            suite=args.suite,
            max_time=args.max_time,
            blocks=args.blocks,
            rounds=args.rounds,
        )
    )
