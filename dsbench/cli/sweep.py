"""``dsbench sweep --axis deepspeed=0.17.2,0.18.3..0.19.8``: a series of sides measured in
interleaved rounds (each round every side once, in a new random order), one result file per
side, and the series' confirmed steps ([Note: steps found, then confirmed] in
:mod:`dsbench.stats.steps`).

Every side is set up once and cached as ``dsbench ab`` does (``.dsbench/envs``,
``.dsbench/worktrees``). A side that cannot be set up (a release pip cannot install, a commit
without dsbench) or whose launch writes no result file is left out of the rounds to come and
named with the reason; rows a release cannot run (an API it lacks, a config key it refuses)
are failed rows of its file, saying why.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from dsbench import ab, results
from dsbench.cli.ab import (
    _seconds,
    add_round_arguments,
    check_round_arguments,
    launch_folder,
    round_verb,
)
from dsbench.errors import UsageError
from dsbench.records import UNSET, SweepBlock

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


def plan_orders(n: int, rounds: int, seed: int) -> list[list[int]]:
    """Each round's order of the ``n`` sides, a fresh permutation every round."""
    rng = random.Random(seed)
    out = []
    for _ in range(rounds):
        order = list(range(n))
        rng.shuffle(order)
        out.append(order)
    return out


def run(args: argparse.Namespace) -> int:
    from dsbench.sweep import parse_axis, report

    out = check_round_arguments(args, minimum=2)  # steps are judged from rounds
    deadline = time.monotonic() + _seconds(args.max_time)
    specs = parse_axis(args.axis)
    sides, unusable = [], {}
    for spec in specs:
        try:
            sides.append(ab.parse_side(spec))
        except UsageError as exc:
            unusable[spec] = str(exc)
            print(f"dsbench sweep: {spec} left out: {exc}", file=sys.stderr)
    if len(sides) < 2:
        raise UsageError(f"--axis {args.axis}: fewer than two sides can run "
                         f"({'; '.join(unusable.values()) or 'none'})")  # fmt: skip
    sweep_id = results.new_run_id()
    seed = args.seed if args.seed is not None else int(sweep_id.split("-")[-1], 16)
    orders = plan_orders(len(sides), args.rounds, seed)
    print(f"dsbench sweep: {len(sides)} sides x {args.rounds} rounds (a new random order each "
          f"round, seed {seed}), suite {args.suite}, up to {args.max_time}",
          file=sys.stderr)  # fmt: skip
    failed: dict[int, str] = {}
    with launch_folder("sweep") as workdir:
        per_side = ab.run_rounds(
            sides,
            rounds=args.rounds,
            verb=round_verb(args),
            workdir=workdir,
            progress=lambda line: print(f"dsbench sweep: {line}", file=sys.stderr),
            plan=[s for order in orders for s in order],
            names=[f"side{i:02d}" for i in range(len(sides))],
            failed=failed,
            deadline=deadline,
        )
        paths = write_sides(per_side, sides, specs, unusable, failed, args, sweep_id, orders, out)
    runs = [results.read_run(p) for p in paths]
    print(report(runs, factor=args.factor))
    for p in paths:
        print(f"wrote {p}")
    return 0


def write_sides(per_side, sides, specs, unusable, failed, args, sweep_id, orders, out) -> list:
    """One merged file per side that ran at least one launch, each naming the series."""
    why = {**unusable, **{sides[i].spec: w for i, w in failed.items()}}
    done = max((len(x) for x in per_side), default=0)
    paths = []
    for side, launches in zip(sides, per_side, strict=True):
        if not launches:
            continue
        label = f"{args.label}-{side.spec}" if args.label else f"sweep-{sweep_id}-{side.spec}"
        block = SweepBlock(id=sweep_id, axis=args.axis, sides=specs,
                           position=specs.index(side.spec), spec=side.spec,
                           description=side.description, rounds=done,
                           orders=orders[:done], failed=why or UNSET)  # fmt: skip
        doc = ab.merge_launches(launches, label=label, sweep=block)
        paths.append(results.write_run(doc, root=out))
    return paths
