"""A sweep's rounds (``dsbench sweep``): every side of the series set up, measured in
interleaved rounds (each round every side once, in a new random order), and one merged result
file per side that ran, each naming the series.

Every side is set up once and cached as ``dsbench ab`` does (``.dsbench/envs``,
``.dsbench/worktrees``). A side that cannot be set up (a release pip cannot install, a commit
without dsbench) or whose launch writes no result file is left out of the rounds to come and
named with the reason; rows a release cannot run (an API it lacks, a config key it refuses)
are failed rows of its file, saying why.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from dsbench import ab, results
from dsbench.ab.plan import Suite, seconds
from dsbench.errors import UsageError
from dsbench.records import UNSET, SweepBlock
from dsbench.sweep.axis import parse_axis


@dataclass(frozen=True, kw_only=True)
class SweepPlan:
    """What a sweep measures and how long it may take."""

    axis: str
    """The series as given (``deepspeed=0.17.2,0.18.3..0.19.8``, :func:`parse_axis`)."""
    suite: Suite
    rounds: int
    """Rounds: each one launch of every side."""
    max_time: str
    """No launch starts past this (``90m``, ``8h``)."""
    out: Path
    """The results folder each side's file is written to."""
    seed: int | None = None
    """The seed of the rounds' orders (None: from the sweep's id)."""
    label: str | None = None
    """The written runs' label, before ``-SIDE``."""


def plan_orders(n: int, rounds: int, seed: int) -> list[list[int]]:
    """Each round's order of the ``n`` sides, a fresh permutation every round."""
    rng = random.Random(seed)
    out = []
    for _ in range(rounds):
        order = list(range(n))
        rng.shuffle(order)
        out.append(order)
    return out


def measure(plan: SweepPlan) -> list[Path]:
    """Run the sweep, saying on stderr what runs and which sides are left out; the written
    files, one per side that ran a launch."""
    deadline = time.monotonic() + seconds(plan.max_time)
    specs = parse_axis(plan.axis)
    sides, unusable = [], {}
    for spec in specs:
        try:
            sides.append(ab.parse_side(spec))
        except UsageError as exc:
            unusable[spec] = str(exc)
            print(f"dsbench sweep: {spec} left out: {exc}", file=sys.stderr)
    if len(sides) < 2:
        raise UsageError(f"--axis {plan.axis}: fewer than two sides can run "
                         f"({'; '.join(unusable.values()) or 'none'})")  # fmt: skip
    sweep_id = results.new_run_id()
    seed = plan.seed if plan.seed is not None else int(sweep_id.split("-")[-1], 16)
    orders = plan_orders(len(sides), plan.rounds, seed)
    print(f"dsbench sweep: {len(sides)} sides x {plan.rounds} rounds (a new random order each "
          f"round, seed {seed}), suite {plan.suite.name}, up to {plan.max_time}",
          file=sys.stderr)  # fmt: skip
    failed: dict[int, str] = {}
    with ab.launch_folder("sweep") as workdir:
        per_side = ab.run_rounds(
            sides,
            rounds=plan.rounds,
            verb=plan.suite.verb,
            workdir=workdir,
            progress=lambda line: print(f"dsbench sweep: {line}", file=sys.stderr),
            plan=[s for order in orders for s in order],
            names=[f"side{i:02d}" for i in range(len(sides))],
            failed=failed,
            deadline=deadline,
        )
        why = {**unusable, **{sides[i].spec: w for i, w in failed.items()}}
        return write_sides(per_side, sides, specs, why, plan, sweep_id, orders)


def write_sides(per_side, sides, specs, why, plan: SweepPlan, sweep_id, orders) -> list[Path]:
    """One merged file per side that ran at least one launch, each naming the series and the
    sides left out (``why``: spec -> the reason)."""
    done = max((len(x) for x in per_side), default=0)
    paths = []
    for side, launches in zip(sides, per_side, strict=True):
        if not launches:
            continue
        label = f"{plan.label}-{side.spec}" if plan.label else f"sweep-{sweep_id}-{side.spec}"
        block = SweepBlock(id=sweep_id, axis=plan.axis, sides=specs,
                           position=specs.index(side.spec), spec=side.spec,
                           description=side.description, rounds=done,
                           orders=orders[:done], failed=why or UNSET)  # fmt: skip
        doc = ab.merge_launches(launches, label=label, sweep=block)
        paths.append(results.write_run(doc, root=plan.out))
    return paths
