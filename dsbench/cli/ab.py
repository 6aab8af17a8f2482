"""``dsbench ab --baseline SIDE --contender SIDE``: the same cases on two sides in alternating
rounds, both sides' result files written with their rounds, and compare's table with rounds as
the unit of evidence. The flags become an :class:`dsbench.ab.plan.ABPlan` (:func:`plan_of`; its
designs and stopping rules: [Note: the design of an A/B]), which :mod:`dsbench.ab.pair` runs.

SIDE: ``commit=REF``, ``python=PATH_OR_VERSION``, ``deepspeed=VERSION``, ``asv-env=NAME`` or
``current`` (see :mod:`dsbench.ab`). The recommended answer to "is 0.18.4 faster than 0.18.3?":
``dsbench ab --baseline deepspeed=0.18.3 --contender deepspeed=0.18.4 --suite training``.
"""

from __future__ import annotations

import argparse
import sys

from dsbench import ab, compare, results
from dsbench.ab import pair, plan
from dsbench.cli.compare import print_report
from dsbench.cli.rounds import add_round_arguments, check_round_arguments, suite_of
from dsbench.compare import terminal
from dsbench.errors import UsageError
from dsbench.stats import sequential


def add_arguments(p: argparse.ArgumentParser) -> None:
    kinds = ", ".join(f"{k}=..." if k != "current" else k for k in ab.KINDS)
    p.add_argument("--baseline", required=True, metavar="SIDE", help=f"one of: {kinds}")
    p.add_argument("--contender", required=True, metavar="SIDE", help="as --baseline")
    add_round_arguments(p, None)
    p.add_argument("--format", default="terminal", choices=list(compare.FORMATS),
                   help="as compare's (default terminal)")  # fmt: skip
    p.add_argument("--factor", type=float, default=1.05,
                   help="better/worse only beyond this ratio (default 1.05)")  # fmt: skip
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when any row's verdict is worse")  # fmt: skip
    p.add_argument(
        "--until-decided", action="store_true",
        help="the default: add rounds until every case is decided (better, worse or "
        "unchanged), judging at looks with the error rate spent over them (group-sequential: "
        "A/A stays at or under 1%% better/worse), or until --max-time / --max-rounds",
    )  # fmt: skip
    p.add_argument("--max-time", default=None, metavar="DURATION",
                   help="until decided: no round that would end past this (e.g. 90s, 20m, 1h; "
                   f"default {plan.DEFAULT_MAX_TIME})")  # fmt: skip
    p.add_argument("--max-rounds", type=int, default=None, metavar="N",
                   help="until decided: at most N rounds a side, the horizon of the looks "
                   "(default: as many as fit in --max-time)")  # fmt: skip
    p.add_argument("--spending", default=None, choices=sequential.SPENDING,
                   help="until decided: how the error rate is spent over the looks (default "
                   "pocock: evenly, so a large change stops early; obrien-fleming: little early, "
                   "most at the end)")  # fmt: skip
    p.add_argument("--blocks", action="store_true",
                   help="the default for a suite: both sides resident in each round, taking "
                   "turns timing each case in blocks of ~50 ms, judged block pair by block pair: "
                   "load that moves within seconds falls on both sides alike (cases that spawn "
                   "ranks: each side's ranks resident, taking turns)")  # fmt: skip
    p.add_argument("--launches", action="store_true",
                   help="launch rounds instead: each round one fresh `dsbench run` a side, A B, "
                   "B A, ... (the design of a --soak)")  # fmt: skip
    p.add_argument("--block-time", type=float, default=None, metavar="SECONDS",
                   help="in block rounds: seconds of blocks a case gets in a round, both sides "
                   f"together; a case with short blocks gets more than {ab.BLOCK_PAIRS} pairs, "
                   f"up to 64 (default 0: {ab.BLOCK_PAIRS} pairs each; 3 cut the collectives' "
                   "round spread by about 30%%)")  # fmt: skip
    p.add_argument("--soak", metavar="'ARGS'",
                   help="each round is `dsbench soak ARGS` instead of a suite (write it with "
                   "'=': --soak='--config ds_config.json --model mlp --steps 300 --faults "
                   "kill=3')")  # fmt: skip


def plan_of(args: argparse.Namespace) -> plan.ABPlan:
    """The A/B the flags ask for; flags that contradict each other are one-line errors."""
    out = check_round_arguments(args, minimum=2)
    if args.blocks and args.launches:
        raise UsageError("--blocks and --launches are two designs: give one (default: blocks, "
                         "launch rounds for a --soak)")  # fmt: skip
    if args.blocks and args.soak:
        raise UsageError("--blocks times a suite's cases in turns; a --soak runs whole processes "
                         "(use one of them)")  # fmt: skip
    if args.block_time is not None and (args.launches or args.soak):
        raise UsageError("--block-time sets the blocks of a round in turns; it does not apply "
                         f"to {'--launches' if args.launches else '--soak'}")  # fmt: skip
    design = None  # the block time's range is checked before the stopping rule, as it was
    if not (args.launches or args.soak):
        turn_s = ab.TURN_S if args.block_time is None else args.block_time
        design = plan.Blocks(suite_of(args), block_time=turn_s, required=args.blocks)
    rule = stopping(args)
    if args.soak:
        design = plan.Soak.parse(args.soak, args.filter)
    elif args.launches:
        design = plan.Launches(suite_of(args))
    return plan.ABPlan(
        baseline=args.baseline,
        contender=args.contender,
        design=design,
        stopping=rule,
        out=out,
        factor=args.factor,
        label=args.label,
    )


def stopping(args: argparse.Namespace) -> plan.Stopping:
    """``--rounds N``, or until decided with its time limit, round cap and spending."""
    until = {"--max-time": args.max_time, "--max-rounds": args.max_rounds,
             "--spending": args.spending}  # fmt: skip
    if args.rounds is None:
        return plan.UntilDecided(max_time=args.max_time or plan.DEFAULT_MAX_TIME,
                                 max_rounds=args.max_rounds,
                                 spending=args.spending or "pocock")  # fmt: skip
    given = [flag for flag, value in until.items() if value is not None]
    if args.until_decided or given:
        flag = "--until-decided" if args.until_decided else given[0]
        raise UsageError(f"--rounds {args.rounds} runs a fixed number of rounds; {flag} belongs "
                         "to an A/B until decided (the default): give one of them")  # fmt: skip
    return plan.FixedRounds(args.rounds)


def run(args: argparse.Namespace) -> int:
    asked = plan_of(args)
    try:
        done = pair.measure(asked)
    except ab.LaunchFailed as exc:
        print(f"dsbench ab: {exc}; nothing written", file=sys.stderr)
        return 1
    sides, per_side = done.sides, done.per_side
    runs = [results.read_run(p) for p in done.paths]
    notes = [
        f"{role}: {side.spec} — {side.description}"
        + ("" if side.kind == "commit" else f"; {ab.tree_text(side.tree)}")
        + f"; {run.path}"
        for role, side, run in zip(("baseline", "contender"), sides, runs, strict=True)
    ]
    rep = compare.report(
        runs[0],
        runs[1],
        axes=sides[0].axes | sides[1].axes,
        factor=args.factor,
        notes=notes,
    )
    status = print_report(rep, args.format, args.fail_on_regression)
    lines = [f"dsbench ab: {line}" for line in pair.to_decide(rep.rows, per_side)]
    for line in terminal.wrap_all(lines, terminal.width()) if args.format == "terminal" else lines:
        print(line, file=sys.stderr)
    return status
