"""``dsbench sweep --axis deepspeed=0.17.2,0.18.3..0.19.8``: a series of sides measured in
interleaved rounds (each round every side once, in a new random order), one result file per
side (:mod:`dsbench.sweep.rounds`), and the series' confirmed steps ([Note: steps found, then
confirmed] in :mod:`dsbench.stats.steps`).
"""

from __future__ import annotations

import argparse

from dsbench import results
from dsbench.cli.rounds import add_round_arguments, check_round_arguments, suite_of

DEFAULT_ROUNDS = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--axis",
        required=True,
        metavar="KIND=LIST",
        help="the series: deepspeed=0.17.2,0.18.3..0.19.8 (X..Y: every release pip lists "
        "between), commit=A..B (first-parent commits, A included) or python=3.11,3.12",
    )
    add_round_arguments(p, DEFAULT_ROUNDS)  # --suite --filter --rounds --device --out --label
    p.add_argument("--max-time", default="8h", metavar="DURATION",
                   help="no launch starts past this (e.g. 90m, 8h; default 8h)")  # fmt: skip
    p.add_argument("--factor", type=float, default=1.05,
                   help="a step is confirmed only beyond this ratio (default 1.05)")  # fmt: skip
    p.add_argument("--seed", type=int, default=None, help="seed of the rounds' orders")


def run(args: argparse.Namespace) -> int:
    from dsbench.sweep import report
    from dsbench.sweep.rounds import SweepPlan, measure

    out = check_round_arguments(args, minimum=2)  # steps are judged from rounds
    paths = measure(SweepPlan(axis=args.axis, suite=suite_of(args), rounds=args.rounds,
                              max_time=args.max_time, out=out, seed=args.seed,
                              label=args.label))  # fmt: skip
    runs = [results.read_run(p) for p in paths]
    print(report(runs, factor=args.factor))
    for p in paths:
        print(f"wrote {p}")
    return 0
