"""``dsbench ab --baseline SIDE --contender SIDE``: the same cases on two sides in alternating
rounds (A B B A ..., each round a fresh process), both sides' result files written with their
rounds, and compare's table with launches as the unit of evidence.

SIDE: ``commit=REF``, ``python=PATH_OR_VERSION``, ``deepspeed=VERSION``, ``asv-env=NAME`` or
``current`` (see :mod:`dsbench.ab`). The recommended answer to "is 0.18.4 faster than 0.18.3?":
``dsbench ab --baseline deepspeed=0.18.3 --contender deepspeed=0.18.4 --suite training``.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from dsbench import ab, compare, results
from dsbench.cli.compare import print_report
from dsbench.errors import UsageError
from dsbench.suites import SUITES, check_suite

DEFAULT_ROUNDS = 6
"""Per side. Twelve launches of `--filter adamw` take about 3 minutes on a 2-core CPU; with a
launch-to-launch spread of 1.5% six rounds a side call a 10% change worse (dsbench.stats)."""


def add_round_arguments(p: argparse.ArgumentParser, rounds: int) -> None:
    """Options ``ab`` and ``noise`` share: what each round runs and how many rounds."""
    p.add_argument("--suite", default="quick", help=f"one of {', '.join(SUITES)} (default quick)")
    p.add_argument("--filter", metavar="REGEX", help="only cases whose id matches")
    p.add_argument(
        "--rounds",
        type=int,
        default=rounds,
        help=f"rounds (fresh processes) per side (default {rounds})",
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
    add_round_arguments(p, DEFAULT_ROUNDS)
    p.add_argument("--format", default="github", choices=list(compare.FORMATS))
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
        "--soak",
        metavar="'ARGS'",
        help="each round is `dsbench soak ARGS` instead of a suite (write it with '=': "
        "--soak='--config ds_config.json --model mlp --steps 300 --faults kill=3')",
    )


def check_round_arguments(args: argparse.Namespace, minimum: int) -> Path:
    check_suite(args.suite)
    if args.rounds < minimum:
        raise UsageError(f"--rounds must be at least {minimum}, got {args.rounds}")
    if args.filter is not None:
        try:
            re.compile(args.filter)
        except re.error as exc:
            raise UsageError(
                f"--filter '{args.filter}' is not a valid regular expression: {exc}"
            ) from None
    out = Path(args.out) if args.out else results.default_results_dir()
    if out.suffix == ".json":
        raise UsageError(f"--out {out}: give a results folder (two files are written)")
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
    counts = []
    for side in sides:
        with tempfile.TemporaryDirectory(prefix="dsbench-ab-plan-") as tmp:
            shim = ab.make_shim(side.tree, Path(tmp) / "shim")
            verb = [w for w in round_verb(args) if w not in ("--no-compare", "--no-progress")]
            argv = [side.python, "-m", "dsbench", *verb, "--list"]
            proc = subprocess.run(
                argv, cwd=tmp, env=ab.side_environ(side, shim), capture_output=True, text=True
            )
        if proc.returncode != 0:
            why = ab._last(proc.stderr).removeprefix("dsbench: error: ")
            raise UsageError(f"side '{side.spec}': {why}")
        counts.append(len(proc.stdout.splitlines()))
    return max(counts)


def launch_all(sides, args, workdir: Path, progress=None) -> list[list[ab.Launch]]:
    return ab.run_rounds(
        sides,
        rounds=args.rounds,
        verb=round_verb(args),
        workdir=workdir,
        progress=progress or (lambda line: print(f"dsbench: {line}", file=sys.stderr)),
    )


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


def write_sides(per_side, sides, args, out: Path) -> list[Path]:
    """Each side's launches merged into one result file, the two files naming each other."""
    ab_id = results.new_run_id()
    docs = []
    for i, (role, side) in enumerate(zip(("baseline", "contender"), sides, strict=True)):
        docs.append(
            ab.merge_launches(
                per_side[i],
                label=f"{args.label}-{role}" if args.label else f"ab-{ab_id}-{role}",
                ab={
                    "id": ab_id,
                    "side": role,
                    "spec": side.spec,
                    "description": side.description,
                    "rounds": args.rounds,
                    "order": "".join("AB"[s] for s in ab.order(args.rounds)),
                },
            )
        )
    docs[0]["ab"]["other_run"], docs[1]["ab"]["other_run"] = docs[1]["run_id"], docs[0]["run_id"]
    return [results.write_run(doc, root=out) for doc in docs]


def run(args: argparse.Namespace) -> int:
    out = check_round_arguments(args, minimum=2)
    sides = [ab.parse_side(args.baseline), ab.parse_side(args.contender)]
    if any(side.kind == "commit" for side in sides) and ab.commit_repo()[1]:
        print(f"dsbench ab: {ab.commit_repo()[1]}", file=sys.stderr)
    n_cases = check_plan(sides, args)
    what = f"a soak with {n_cases} fault(s)" if args.soak else f"{n_cases} case(s)"
    print(
        f"dsbench ab: {what}, {args.rounds} rounds a side, alternating "
        f"(A B, B A, ...): {args.baseline} vs {args.contender}",
        file=sys.stderr,
    )
    try:
        with launch_folder("ab") as workdir:
            per_side = launch_all(sides, args, workdir)
            paths = write_sides(per_side, sides, args, out)
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
        fmt=args.format,
        notes=notes,
    )
    return print_report(rep, args.format, args.fail_on_regression)
