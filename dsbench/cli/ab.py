"""``dsbench ab --baseline SIDE --contender SIDE``: the same cases on two sides in alternating
rounds, both sides' result files written with their rounds, and compare's table with rounds as
the unit of evidence.

[Note: the design of an A/B]
By default each case gets the design that decides it fastest, and the rounds go on until every
row is decided or the time limit (``--max-time``, 10 minutes) leaves no room for another round:

- a suite's cases run in block rounds ([Note: sides in turns]): both sides' workers resident,
  timing each case in turns, cases that spawn ranks in resident groups of ranks; a case whose
  peak memory is taken alone in fresh ranks (training steps) gets that fresh launch of ranks in
  every round as well, and its memory row is judged over those launches, a round each;
- a ``--soak`` runs launch rounds (a whole soak process is the unit), as do the cases of a
  ``commit=`` side from before the worker existed (said in one line);
- the stopping rule is [Note: looks over an open horizon]; ``--max-rounds N`` caps it.

The older designs stay as flags: ``--launches`` (a fresh ``dsbench run`` a side each round),
``--rounds N`` (a fixed count, no looks). Combinations that contradict each other are one-line
errors (:func:`check_design`).

SIDE: ``commit=REF``, ``python=PATH_OR_VERSION``, ``deepspeed=VERSION``, ``asv-env=NAME`` or
``current`` (see :mod:`dsbench.ab`). The recommended answer to "is 0.18.4 faster than 0.18.3?":
``dsbench ab --baseline deepspeed=0.18.3 --contender deepspeed=0.18.4 --suite training``.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from dsbench import ab, compare, results
from dsbench.cli.compare import print_report
from dsbench.compare import terminal
from dsbench.errors import UsageError
from dsbench.records import UNSET, ABBlock, Sequential, Timing, value_or
from dsbench.stats import sequential
from dsbench.suites import SUITES, check_suite

DEFAULT_MAX_TIME = "10m"
"""The time limit of an A/B until decided: no round starts that would end past it."""


def add_round_arguments(p: argparse.ArgumentParser, rounds: int) -> None:
    """Options ``ab`` and ``noise`` share: what each round runs and how many rounds."""
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


def add_arguments(p: argparse.ArgumentParser) -> None:
    kinds = ", ".join(f"{k}=..." if k != "current" else k for k in ab.KINDS)
    p.add_argument("--baseline", required=True, metavar="SIDE", help=f"one of: {kinds}")
    p.add_argument("--contender", required=True, metavar="SIDE", help="as --baseline")
    add_round_arguments(p, None)
    p.add_argument("--format", default="terminal", choices=list(compare.FORMATS),
                   help="as compare's (default terminal)")  # fmt: skip
    p.add_argument(
        "--factor",
        type=float,
        default=1.05,
        help="better/worse only beyond this ratio (default 1.05)",
    )
    p.add_argument(
        "--fail-on-regression", action="store_true", help="exit 1 when any row's verdict is worse"
    )
    p.add_argument(
        "--until-decided",
        action="store_true",
        help="the default: add rounds until every case is decided (better, worse or "
        "unchanged), judging at looks with the error rate spent over them (group-sequential: "
        "A/A stays at or under 1%% better/worse), or until --max-time / --max-rounds",
    )
    p.add_argument(
        "--max-time",
        default=None,
        metavar="DURATION",
        help="until decided: no round that would end past this (e.g. 90s, 20m, 1h; "
        f"default {DEFAULT_MAX_TIME})",
    )
    p.add_argument(
        "--max-rounds",
        type=int,
        default=None,
        metavar="N",
        help="until decided: at most N rounds a side, the horizon of the looks (default: as "
        "many as fit in --max-time)",
    )
    p.add_argument(
        "--spending",
        default=None,
        choices=sequential.SPENDING,
        help="until decided: how the error rate is spent over the looks (default pocock: "
        "evenly, so a large change stops early; obrien-fleming: little early, most at the end)",
    )
    p.add_argument(
        "--blocks",
        action="store_true",
        help="the default for a suite: both sides resident in each round, taking turns timing "
        "each case in blocks of ~50 ms, judged block pair by block pair: load that moves within "
        "seconds falls on both sides alike (cases that spawn ranks: each side's ranks "
        "resident, taking turns)",
    )
    p.add_argument(
        "--launches",
        action="store_true",
        help="launch rounds instead: each round one fresh `dsbench run` a side, A B, B A, ... "
        "(the design of a --soak)",
    )
    p.add_argument(
        "--block-time",
        type=float,
        default=None,
        metavar="SECONDS",
        help="in block rounds: seconds of blocks a case gets in a round, both sides together; a "
        f"case with short blocks gets more than {ab.BLOCK_PAIRS} pairs, up to 64 (default 0: "
        f"{ab.BLOCK_PAIRS} pairs each; 3 cut the collectives' round spread by about 30%%)",
    )
    p.add_argument(
        "--soak",
        metavar="'ARGS'",
        help="each round is `dsbench soak ARGS` instead of a suite (write it with '=': "
        "--soak='--config ds_config.json --model mlp --steps 300 --faults kill=3')",
    )


def check_round_arguments(args: argparse.Namespace, minimum: int) -> Path:
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


def round_verb(args: argparse.Namespace) -> list[str]:
    """What each round runs after ``python -m dsbench`` (``--out FILE`` follows): the suite's
    ``dsbench run``, or ``dsbench soak`` with ``--soak``'s arguments (its config made absolute:
    rounds run in a folder of their own)."""
    soak = getattr(args, "soak", None)
    if soak is None:
        verb = ["run", "--suite", args.suite, "--device", args.device, "--no-compare",
                "--no-progress"]  # fmt: skip
        return verb + (["--filter", args.filter] if args.filter else [])
    if args.filter:
        raise UsageError("--filter chooses cases of a suite; it does not apply to --soak")
    try:
        words = shlex.split(soak)
    except ValueError as exc:
        raise UsageError(f"--soak '{soak}': {exc}") from None
    verb = ["soak"]
    for i, word in enumerate(words):
        if word == "--out" or word.startswith("--out="):
            raise UsageError("--soak: leave out --out; dsbench ab writes the rounds' files")
        if word.startswith("--config="):
            word = "--config=" + str(Path(word.split("=", 1)[1]).resolve())
        elif i and words[i - 1] == "--config":
            word = str(Path(word).resolve())
        verb.append(word)
    return verb


def check_plan(sides: list[ab.SideEnv], args: argparse.Namespace) -> int:
    """Each side lists its cases (``dsbench run --list``, or ``dsbench soak --list``, which
    checks the soak's arguments and lists its faults) before any round: a filter that matches
    nothing, a bad soak argument or a side that cannot start is a one-line error with nothing
    written. Returns the most cases a side lists (faults, for a soak)."""
    return max(len(listed) for listed in list_cases(sides, args))


def list_cases(sides: list[ab.SideEnv], args: argparse.Namespace) -> list[list[str]]:
    """What each side lists (see :func:`check_plan`): its case ids, or a soak's faults."""
    verb = [w for w in round_verb(args) if w not in ("--no-compare", "--no-progress")]
    with tempfile.TemporaryDirectory(prefix="dsbench-ab-plan-") as tmp:
        children = []  # both sides list at once: two start-ups in the time of one
        for i, side in enumerate(sides):
            shim = ab.make_shim(side.tree, Path(tmp) / f"shim-{i}")
            argv = [side.python, "-m", "dsbench", *verb, "--list"]
            children.append(subprocess.Popen(argv, cwd=tmp, env=ab.side_environ(side, shim),
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             text=True))  # fmt: skip
        outputs = [child.communicate() for child in children]
    listed = []
    for side, child, (out, err) in zip(sides, children, outputs, strict=True):
        if child.returncode != 0:
            why = ab.last_line(err).removeprefix("dsbench: error: ")
            raise UsageError(f"side '{side.spec}': {why}")
        listed.append(out.splitlines())
    return listed


def launch_all(sides, args, workdir: Path, progress=None, after_pair=None) -> list[list[ab.Launch]]:
    progress = progress or (lambda line: print(f"dsbench: {line}", file=sys.stderr))
    if getattr(args, "blocks", False):
        argv = ["--suite", args.suite, "--device", args.device]
        return ab.run_block_rounds(
            sides,
            rounds=args.rounds,
            worker_argv=argv + (["--filter", args.filter] if args.filter else []),
            workdir=workdir,
            progress=progress,
            after_pair=after_pair,
            turn_s=block_time(args),
        )
    return ab.run_rounds(
        sides,
        rounds=args.rounds,
        verb=round_verb(args),
        workdir=workdir,
        progress=progress,
        after_pair=after_pair,
    )


def block_time(args: argparse.Namespace) -> float:
    """``--block-time``, or its default (callers without the option: bisect's probes)."""
    seconds = getattr(args, "block_time", None)
    return ab.TURN_S if seconds is None else seconds


@contextmanager
def launch_folder(verb: str):
    """A folder for the rounds' result files: removed once the merged files are written, kept
    (and named) when anything fails after the rounds ran, so no measurement is lost."""
    workdir = Path(tempfile.mkdtemp(prefix=f"dsbench-{verb}-"))
    try:
        yield workdir
    except BaseException:
        if any(workdir.glob("*.json")):
            print(f"dsbench {verb}: the rounds' result files are kept in {workdir}",
                  file=sys.stderr)  # fmt: skip
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    shutil.rmtree(workdir, ignore_errors=True)


def write_sides(per_side, sides, args, out: Path, sequential_block=None) -> list[Path]:
    """Each side's launches merged into one result file, the two files naming each other."""
    ab_id = results.new_run_id()
    rounds = len(per_side[0])
    docs = []
    for i, (role, side) in enumerate(zip(("baseline", "contender"), sides, strict=True)):
        docs.append(
            ab.merge_launches(
                per_side[i],
                label=f"{args.label}-{role}" if args.label else f"ab-{ab_id}-{role}",
                ab=ABBlock(
                    id=ab_id,
                    side=role,
                    spec=side.spec,
                    description=side.description,
                    rounds=rounds,
                    order="".join("AB"[s] for s in ab.order(rounds)),
                    sequential=sequential_block or UNSET,
                    pairing="blocks" if getattr(args, "blocks", False) else UNSET,
                    block_pairs=ab.BLOCK_PAIRS if getattr(args, "blocks", False) else UNSET,
                    block_time_s=block_time(args) if getattr(args, "blocks", False) else UNSET,
                ),
            )
        )
    paired = [
        dataclasses.replace(doc, ab=dataclasses.replace(doc.ab, other_run=other.run_id))
        for doc, other in zip(docs, docs[::-1], strict=True)
    ]
    return [results.write_run(doc, root=out) for doc in paired]


def _seconds(text: str) -> float:
    """``90s``, ``20m``, ``1h`` or plain seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"--max-time '{text}': give a duration such as 90s, 20m or 1h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


class UntilDecided:
    """``dsbench ab`` until decided (the default): after each round, the look due if any
    ([Note: looking at the data as rounds come in], [Note: looks over an open horizon]); stops
    when every case is decided, at ``--max-rounds``, or when the next round would end past
    ``--max-time``. The horizon of the looks is the rounds that fit in the time left at the
    rounds' pace so far. After the first pair of launch rounds, the rounds to come get Kalibera &
    Jones's repetitions ([Note: repetitions worth running])."""

    def __init__(self, args: argparse.Namespace, sides: list[ab.SideEnv]):
        self.args, self.sides = args, sides
        self.spender = sequential.Spender(0.01, args.spending)
        self.deadline = time.monotonic() + _seconds(args.max_time)
        self.level, self.look, self.stopped = 0.99, 0, "max-time"
        self.extra: list[str] = []

    def __call__(self, per_side: list[list[ab.Launch]]) -> list[str] | None:
        k = len(per_side[0])
        if k == 2 and not self.args.soak and not self.args.blocks:
            self.extra = self._repetitions(per_side)
        final, horizon = self.horizon(per_side)
        look = self.spender.look(k, horizon, final)
        if look is not None:
            self.level, self.look = look.level, k
            b, c = ({r.id: r for r in ab.merge_launches(la).rows} for la in per_side)
            rows = compare.compare_rows(b, c, self.args.factor, look.level,
                                        paired=self.args.blocks)  # fmt: skip
            judged = [r for r in rows if r.comparable]
            open_ = [r for r in judged if r.change is compare.Change.INCONCLUSIVE]
            print(f"dsbench ab: look {k} ({compare.pct(look.level)}, of ~{self.spender.horizon} "
                  f"rounds): {len(judged) - len(open_)}/{len(judged)} decided",
                  file=sys.stderr)  # fmt: skip
            if not open_:
                self.stopped = "decided"
                return None
        return None if final else self.extra

    def horizon(self, per_side: list[list[ab.Launch]]) -> tuple[bool, int]:
        """Whether this round is the last (``--max-rounds`` reached, or the next round, as long
        as the last one, would end past the time limit), and the rounds a side expected by the
        end: those run and those that fit in the time left at their mean pace."""
        k = len(per_side[0])
        now = time.monotonic()
        last_s = per_side[0][-1].wall_s + per_side[1][-1].wall_s
        pace = sum(la.wall_s for launches in per_side for la in launches) / k
        horizon = k + int(max(self.deadline - now, 0.0) // max(pace, 1e-3))
        cap = self.args.max_rounds
        if cap is not None and k >= cap:
            self.stopped = "max-rounds"
            return True, k
        if now + last_s > self.deadline:
            self.stopped = "max-time"
            return True, k
        return False, horizon if cap is None else min(horizon, cap)

    def _repetitions(self, per_side: list[list[ab.Launch]]) -> list[str]:
        """``--max-reps N`` for the rounds to come: the most any case is worth, from each
        side's two launches (none when a case's repetitions carry its variance)."""
        first = per_side[0][0].run.rows
        wanted = []
        for case in first:
            sides = [[_rep_seconds(la.run.rows.get(case)) for la in launches]
                     for launches in per_side]  # fmt: skip
            if any(not reps for side in sides for reps in side):
                return []
            launch_s = sum(la.wall_s for la in per_side[0]) / len(per_side[0]) / len(first)
            wanted.append(sequential.repetitions(sides, launch_s))
        return [] if not wanted or max(wanted) >= 1000 else ["--max-reps", str(max(wanted))]

    def block(self) -> Sequential:
        return Sequential(spending=self.args.spending, max_rounds=self.spender.horizon or UNSET,
                          looks=self.look, level=self.level, stopped=self.stopped,
                          max_reps=self.extra[1] if self.extra else None)  # fmt: skip


def _rep_seconds(row) -> list[float]:
    """A row's repetition times in seconds (the timing core's own samples), or none."""
    if row is None or not row.ok or not isinstance(row.timing, Timing):
        return []
    return list(value_or(row.timing.samples) or [])


def check_design(args: argparse.Namespace) -> None:
    """The design and the stopping rule from the flags ([Note: the design of an A/B]), set on
    ``args``: ``blocks`` (block rounds, else launch rounds), ``until_decided`` with its
    ``max_time`` and ``spending`` filled in. Flags that contradict each other: UsageError."""
    if args.blocks and args.launches:
        raise UsageError("--blocks and --launches are two designs: give one (default: blocks, "
                         "launch rounds for a --soak)")  # fmt: skip
    if args.blocks and args.soak:
        raise UsageError("--blocks times a suite's cases in turns; a --soak runs whole processes "
                         "(use one of them)")  # fmt: skip
    if args.block_time is not None and (args.launches or args.soak):
        raise UsageError("--block-time sets the blocks of a round in turns; it does not apply "
                         f"to {'--launches' if args.launches else '--soak'}")  # fmt: skip
    if args.block_time is not None and not 0 <= args.block_time <= 600:
        raise UsageError(f"--block-time {args.block_time:g}: give 0 to 600 seconds "
                         f"(default {ab.TURN_S:g})")  # fmt: skip
    args.blocks = not (args.launches or args.soak)
    until = {"--max-time": args.max_time, "--max-rounds": args.max_rounds,
             "--spending": args.spending}  # fmt: skip
    if args.rounds is not None:
        given = [flag for flag, value in until.items() if value is not None]
        if args.until_decided or given:
            flag = "--until-decided" if args.until_decided else given[0]
            raise UsageError(f"--rounds {args.rounds} runs a fixed number of rounds; {flag} "
                             "belongs to an A/B until decided (the default): give one of "
                             "them")  # fmt: skip
        args.until_decided = False
        return
    args.until_decided = True
    args.max_time = args.max_time or DEFAULT_MAX_TIME
    _seconds(args.max_time)
    args.spending = args.spending or "pocock"
    if args.max_rounds is not None and args.max_rounds < sequential.FIRST_LOOK:
        raise UsageError(f"--max-rounds must be at least {sequential.FIRST_LOOK}, "
                         f"got {args.max_rounds}")  # fmt: skip
    args.rounds = args.max_rounds  # None: until the time limit


def cannot_take_turns(side: ab.SideEnv) -> str | None:
    """Why a side cannot run block rounds (a tree from before the worker), or None."""
    if not (side.tree / "dsbench" / "ab" / "worker.py").is_file():
        return (f"side '{side.spec}' has no dsbench/ab/worker.py (commits before December "
                "2026), so it cannot take turns")  # fmt: skip
    return None


def turns_or_launches(args: argparse.Namespace, sides: list[ab.SideEnv], explicit: bool) -> str:
    """Block rounds only where both sides can take turns: else launch rounds (set on ``args``)
    and the line that says why, or, where ``--blocks`` was given (``explicit``), UsageError."""
    why = next((w for w in map(cannot_take_turns, sides) if w), None) if args.blocks else None
    if why and explicit:
        raise UsageError(f"--blocks: {why}; leave out --blocks for launch rounds")
    if why:
        args.blocks, args.launches = False, True
        return f"{why}: launch rounds"
    return ""


def design_text(args: argparse.Namespace, listed: list[list[str]]) -> str:
    """What the A/B will run, for its first line: the cases, their design, the stopping rule."""
    from dsbench.ab.worker import fresh_memory_cases

    n = max(len(x) for x in listed)
    what = f"a soak with {n} fault(s)" if args.soak else f"{n} case(s)"
    if args.until_decided:
        cap = f", at most {args.rounds} rounds a side" if args.rounds else ""
        how = f"until decided or {args.max_time}{cap} ({args.spending} spending over the looks)"
    else:
        how = f"{args.rounds} rounds a side"
    if not args.blocks:
        return f"{what}, {how}, in launch rounds (A B, B A, ...)"
    fresh = fresh_memory_cases(listed[0])
    memory = f"; the peak memory of {fresh} alone in fresh ranks each round" if fresh else ""
    return f"{what}, {how}, in block rounds (both sides resident, in turns{memory})"


def run(args: argparse.Namespace) -> int:
    out = check_round_arguments(args, minimum=2)
    explicit_blocks = args.blocks
    check_design(args)
    sides = [ab.parse_side(args.baseline), ab.parse_side(args.contender)]
    if any(side.kind == "commit" for side in sides) and ab.commit_repo()[1]:
        print(f"dsbench ab: {ab.commit_repo()[1]}", file=sys.stderr)
    fallback = turns_or_launches(args, sides, explicit_blocks)
    if fallback:
        print(f"dsbench ab: {fallback}", file=sys.stderr)
    until = UntilDecided(args, sides) if args.until_decided else None
    listed = list_cases(sides, args)
    print(f"dsbench ab: {design_text(args, listed)}: {args.baseline} vs {args.contender}",
          file=sys.stderr)  # fmt: skip
    try:
        with launch_folder("ab") as workdir:
            per_side = launch_all(sides, args, workdir, after_pair=until)
            paths = write_sides(per_side, sides, args, out, until.block() if until else None)
    except ab.LaunchFailed as exc:
        print(f"dsbench ab: {exc}; nothing written", file=sys.stderr)
        return 1
    runs = [results.read_run(p) for p in paths]
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
    lines = [f"dsbench ab: {line}" for line in to_decide(rep.rows, per_side)]
    for line in terminal.wrap_all(lines, terminal.width()) if args.format == "terminal" else lines:
        print(line, file=sys.stderr)
    return status


def to_decide(rows: list[compare.ComparedRow], per_side: list[list[ab.Launch]]) -> list[str]:
    """For every inconclusive row with a spread: the rounds a side, and the minutes at this
    A/B's pace, that would most likely decide a change of the size seen."""
    k = len(per_side[0])
    pair_s = sum(la.wall_s for launches in per_side for la in launches) / max(k, 1)
    out = []
    for r in rows:
        if r.to_decide and r.to_decide > k:
            more = r.to_decide - k
            out.append(
                f"{r.id}: inconclusive at x{r.ratio:.3f}; about {more} more rounds a side "
                f"({r.to_decide} in all, ~{more * pair_s / 60:.0f} min at this pace) would "
                "most likely decide a change of this size"
            )
    return out
