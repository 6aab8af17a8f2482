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
from dsbench.ab import pair
from dsbench.ab.plan import Launches
from dsbench.cli.rounds import add_round_arguments, check_round_arguments, suite_of
from dsbench.stats import round_spread

DEFAULT_ROUNDS = 8


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_round_arguments(p, DEFAULT_ROUNDS)


def run(args: argparse.Namespace) -> int:
    out = check_round_arguments(args, minimum=3)
    side = ab.parse_side("current")
    design = Launches(suite_of(args))
    n_cases = max(len(listed) for listed in pair.list_cases([side], design))
    print(
        f"dsbench noise: {n_cases} case(s), {args.rounds} launches of this checkout",
        file=sys.stderr,
    )
    try:
        with ab.launch_folder("noise") as workdir:
            (launches,) = pair.launch([side], design, args.rounds, workdir)
            merged = ab.merge_launches(launches, label=args.label or "noise", purpose="noise")
            path = results.write_run(merged, root=out)
    except ab.LaunchFailed as exc:
        print(f"dsbench noise: {exc}; nothing written", file=sys.stderr)
        return 1
    run_ = results.read_run(path)
    table = []
    for row in run_.record.rows:
        if not row.ok:
            table.append([row.id, "", "", "", row.status])
            continue
        sigma, df = round_spread(row.round_samples())
        vals = row.launch_values
        table.append(
            [
                row.id,
                f"{row.value:.4g} {row.unit}",
                f"{100 * sigma:.2f}%",
                f"{max(vals) / min(vals):.3f}",
                f"{df + 1} launches",
            ]
        )
    print(
        tabulate(
            table,
            headers=["benchmark", "centre", "spread (sd of log)", "max/min launch", "n"],
            disable_numparse=True,
        )
    )
    worst = max((r for r in table if r[2]), key=lambda r: float(r[2][:-1]), default=None)
    print(
        f"\nwrote {path}: the noise figure for machine {run_.machine}"
        + (f" (widest: {worst[0]}, {worst[2]})" if worst else "")
    )
    return 0
