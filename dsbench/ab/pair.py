"""An A/B measured from its plan (:class:`dsbench.ab.plan.ABPlan`): both sides set up and their
cases listed before any round, the rounds run as designed until the stopping rule says so, and
each side's rounds merged into one result file, the two files naming each other."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dsbench import results
from dsbench.ab.blocks import BLOCK_PAIRS, run_block_rounds
from dsbench.ab.looks import Rounds
from dsbench.ab.merge import merge_launches
from dsbench.ab.plan import (
    ABPlan,
    Blocks,
    Design,
    Launches,
    Soak,
    Stopping,
    UntilDecided,
    planned_rounds,
)
from dsbench.ab.rounds import Launch, launch_folder, order, run_rounds
from dsbench.ab.sides import SideEnv, commit_repo, last_line, make_shim, parse_side, side_environ
from dsbench.errors import UsageError
from dsbench.records import UNSET, ABBlock


@dataclass(frozen=True)
class Measured:
    """What an A/B ran and wrote."""

    sides: list[SideEnv]
    """Baseline, contender."""
    per_side: list[list[Launch]]
    """Each side's rounds."""
    paths: list[Path]
    """Each side's merged result file."""


def measure(plan: ABPlan) -> Measured:
    """Run the A/B ``plan`` says, saying on stderr what it runs; LaunchFailed when a round
    writes no result file (nothing is written then)."""
    sides = [parse_side(plan.baseline), parse_side(plan.contender)]
    if any(side.kind == "commit" for side in sides) and commit_repo()[1]:
        print(f"dsbench ab: {commit_repo()[1]}", file=sys.stderr)
    design, fallback = turns_or_launches(plan.design, sides)
    if fallback:
        print(f"dsbench ab: {fallback}", file=sys.stderr)
    rule = plan.stopping
    until = Rounds(rule, design, plan.factor) if isinstance(rule, UntilDecided) else None
    listed = list_cases(sides, design)
    print(f"dsbench ab: {design_text(design, rule, listed)}: {plan.baseline} vs "
          f"{plan.contender}", file=sys.stderr)  # fmt: skip
    with launch_folder("ab") as workdir:
        per_side = launch(sides, design, planned_rounds(rule), workdir, after_pair=until)
        sequential = until.block() if until else None
        paths = write_sides(per_side, sides, design, plan, sequential)
    return Measured(sides, per_side, paths)


def cannot_take_turns(side: SideEnv) -> str | None:
    """Why a side cannot run block rounds (a tree from before the worker), or None."""
    if not (side.tree / "dsbench" / "ab" / "worker.py").is_file():
        return (f"side '{side.spec}' has no dsbench/ab/worker.py (commits before December "
                "2026), so it cannot take turns")  # fmt: skip
    return None


def turns_or_launches(design: Design, sides: list[SideEnv]) -> tuple[Design, str]:
    """Block rounds only where both sides can take turns: else launch rounds of the suite and
    the line that says why, or, where ``--blocks`` was given (``required``), UsageError."""
    if not isinstance(design, Blocks):
        return design, ""
    why = next((w for w in map(cannot_take_turns, sides) if w), None)
    if why and design.required:
        raise UsageError(f"--blocks: {why}; leave out --blocks for launch rounds")
    if why:
        return Launches(design.suite), f"{why}: launch rounds"
    return design, ""


def list_cases(sides: list[SideEnv], design: Design) -> list[list[str]]:
    """Each side lists its cases (``dsbench run --list``, or ``dsbench soak --list``, which
    checks the soak's arguments and lists its faults) before any round, both at once: a filter
    that matches nothing, a bad soak argument or a side that cannot start is a one-line error
    with nothing written. Returns what each side lists: its case ids, or a soak's faults."""
    verb = [w for w in design.verb if w not in ("--no-compare", "--no-progress")]
    with tempfile.TemporaryDirectory(prefix="dsbench-ab-plan-") as tmp:
        children = []  # both sides list at once: two start-ups in the time of one
        for i, side in enumerate(sides):
            shim = make_shim(side.tree, Path(tmp) / f"shim-{i}")
            argv = [side.python, "-m", "dsbench", *verb, "--list"]
            children.append(subprocess.Popen(argv, cwd=tmp, env=side_environ(side, shim),
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             text=True))  # fmt: skip
        outputs = [child.communicate() for child in children]
    listed = []
    for side, child, (out, err) in zip(sides, children, outputs, strict=True):
        if child.returncode != 0:
            why = last_line(err).removeprefix("dsbench: error: ")
            raise UsageError(f"side '{side.spec}': {why}")
        listed.append(out.splitlines())
    return listed


def launch(sides, design: Design, rounds: int | None, workdir: Path, progress=None,
           after_pair=None) -> list[list[Launch]]:  # fmt: skip
    """Every round of ``design`` (``rounds`` None: until ``after_pair`` says stop), each
    side's launches (:func:`dsbench.ab.run_rounds`, :func:`dsbench.ab.run_block_rounds`)."""
    progress = progress or (lambda line: print(f"dsbench: {line}", file=sys.stderr))
    if isinstance(design, Blocks):
        return run_block_rounds(sides, rounds=rounds, worker_argv=design.suite.worker_argv,
                                workdir=workdir, progress=progress, after_pair=after_pair,
                                turn_s=design.block_time)  # fmt: skip
    return run_rounds(sides, rounds=rounds, verb=design.verb, workdir=workdir,
                      progress=progress, after_pair=after_pair)  # fmt: skip


def design_text(design: Design, stopping: Stopping, listed: list[list[str]]) -> str:
    """What the A/B will run, for its first line: the cases, their design, the stopping rule."""
    from dsbench.ab.worker import fresh_memory_cases

    n = max(len(x) for x in listed)
    what = f"a soak with {n} fault(s)" if isinstance(design, Soak) else f"{n} case(s)"
    if isinstance(stopping, UntilDecided):
        cap = f", at most {stopping.max_rounds} rounds a side" if stopping.max_rounds else ""
        how = (f"until decided or {stopping.max_time}{cap} ({stopping.spending} spending over "
               "the looks)")  # fmt: skip
    else:
        how = f"{stopping.n} rounds a side"
    if not isinstance(design, Blocks):
        return f"{what}, {how}, in launch rounds (A B, B A, ...)"
    fresh = fresh_memory_cases(listed[0])
    memory = f"; the peak memory of {fresh} alone in fresh ranks each round" if fresh else ""
    return f"{what}, {how}, in block rounds (both sides resident, in turns{memory})"


def write_sides(per_side, sides, design: Design, plan: ABPlan, sequential=None) -> list[Path]:
    """Each side's launches merged into one result file, the two files naming each other."""
    ab_id = results.new_run_id()
    rounds = len(per_side[0])
    blocks = isinstance(design, Blocks)
    docs = []
    for i, (role, side) in enumerate(zip(("baseline", "contender"), sides, strict=True)):
        block = ABBlock(
            id=ab_id,
            side=role,
            spec=side.spec,
            description=side.description,
            rounds=rounds,
            order="".join("AB"[s] for s in order(rounds)),
            sequential=sequential or UNSET,
            pairing="blocks" if blocks else UNSET,
            block_pairs=BLOCK_PAIRS if blocks else UNSET,
            block_time_s=design.block_time if blocks else UNSET,
        )
        label = f"{plan.label}-{role}" if plan.label else f"ab-{ab_id}-{role}"
        docs.append(merge_launches(per_side[i], label=label, ab=block))
    paired = [
        dataclasses.replace(doc, ab=dataclasses.replace(doc.ab, other_run=other.run_id))
        for doc, other in zip(docs, docs[::-1], strict=True)
    ]
    return [results.write_run(doc, root=plan.out) for doc in paired]


def to_decide(rows, per_side: list[list[Launch]]) -> list[str]:
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
