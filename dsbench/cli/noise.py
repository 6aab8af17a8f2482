"""``dsbench noise``: an A/A calibration of this machine. The current checkout runs a suite in
N rounds (each a fresh process); the result file records every launch's samples, and each
benchmark's run-to-run spread (the standard deviation of the log of the launches' medians) is
the *noise figure* ``dsbench compare`` uses for two runs of one launch each on this machine
(the newest calibration wins, named above compare's table)."""

from __future__ import annotations

import argparse
import sys

from tabulate import tabulate

from dsbench import ab, results
from dsbench.ab import noise
from dsbench.cli.rounds import add_round_arguments, check_round_arguments, suite_of

DEFAULT_ROUNDS = 8


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_round_arguments(p, DEFAULT_ROUNDS)


def run(args: argparse.Namespace) -> int:
    out = check_round_arguments(args, minimum=3)
    try:
        path = noise.calibrate(suite_of(args), args.rounds, out, args.label)
    except ab.LaunchFailed as exc:
        print(f"dsbench noise: {exc}; nothing written", file=sys.stderr)
        return 1
    run_ = results.read_run(path)
    table = noise.spread_table(run_)
    print(tabulate(table, headers=noise.HEADERS, disable_numparse=True))
    worst = noise.widest(table)
    print(
        f"\nwrote {path}: the noise figure for machine {run_.machine}"
        + (f" (widest: {worst[0]}, {worst[2]})" if worst else "")
    )
    return 0
