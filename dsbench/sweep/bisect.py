"""``dsbench bisect`` from a typed plan: the first DeepSpeed release or commit between two sides
at which a case's number moved, by binary search with an A/B at each probe.

The sides between come from the axis (:mod:`dsbench.sweep.axis`: the releases pip lists, or the
first-parent commits). First ``good`` against ``bad`` must differ (better or worse: the
direction of the change sought); then each probe is ``dsbench ab --until-decided`` (or
``--rounds N``) of ``good`` against the middle side: the same change as ``bad``'s puts the step
at or before it, unchanged after it; a verdict that cannot decide (inconclusive, or a change the
other way) stops the search and says so, since a guess would send it down the wrong half. It
prints the first side that differs, its verdict, and the ``dsbench ab`` command that reproduces
it. A case may be a peak-memory row (``train_step.peak_memory[...]``, ``memory_row`` in
:mod:`dsbench.compare.comparison`): the probes run its benchmark case and judge that row.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from dsbench.compare import terminal
from dsbench.compare.comparison import memory_case
from dsbench.errors import UsageError
from dsbench.stats import Change
from dsbench.suites import check_suite
from dsbench.sweep.axis import parse_axis


@dataclass(frozen=True, kw_only=True)
class BisectPlan:
    """A bisection as the command line gives it, before it is checked."""

    good: str
    """The side like the start, ``deepspeed=V`` or ``commit=REF``."""
    bad: str
    """The side that differs, of the same kind as ``good``."""
    case: str
    """The benchmark id (or peak-memory row) whose number moved."""
    suite: str = "quick"
    max_time: str = "20m"
    """Each probe's ``--max-time`` (``--until-decided``)."""
    blocks: bool = False
    """Probes in block rounds (``ab --blocks``) rather than launches."""
    rounds: int | None = None
    """Each probe a fixed number of rounds a side instead of ``--until-decided``."""


@dataclass(frozen=True)
class Probe:
    side: str
    change: Change
    """compare's verdict of this side against ``good``."""
    text: str
    """The probe's row as printed: ``x0.91 (0.88-0.94) worse``."""


def between(good: str, bad: str) -> list[str]:
    """``good``, every side between, and ``bad`` (``KIND=VALUE`` texts), oldest first."""
    kinds = {good.partition("=")[0], bad.partition("=")[0]}
    if len(kinds) != 1 or kinds - {"deepspeed", "commit"}:
        raise UsageError(f"--good {good} --bad {bad}: give two deepspeed= or two commit= sides")
    kind = kinds.pop()
    return parse_axis(f"{kind}={good.partition('=')[2]}..{bad.partition('=')[2]}")


def search(sides: list[str], probe: Callable[[str], Probe], log=print) -> tuple[int | None, str]:
    """Binary search for the first side differing from ``sides[0]`` as ``sides[-1]`` does:
    (its index, what was found), or (None, why the search stopped)."""
    end = probe(sides[-1])
    log(f"{sides[-1]} against {sides[0]}: {end.text}")
    if end.change not in (Change.BETTER, Change.WORSE):
        return None, f"{sides[-1]} does not differ from {sides[0]} ({end.text}): nothing to bisect"
    lo, hi = 0, len(sides) - 1  # sides[lo] is like good, sides[hi] differs as bad does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        got = probe(sides[mid])
        log(f"{sides[mid]} against {sides[0]}: {got.text}")
        if got.change == end.change:
            hi = mid
        elif got.change == Change.UNCHANGED:
            lo = mid
        else:
            return None, (f"cannot tell which half: {sides[mid]} against {sides[0]} is "
                          f"{got.text}; rerun with a longer --max-time or --blocks")  # fmt: skip
    return hi, f"first side that differs: {sides[hi]} (after {sides[lo]}, {end.change})"


def case_filter(case: str) -> str:
    """The ``--filter`` that runs ``case``: a peak-memory row's own benchmark case."""
    return "^" + re.escape(memory_case(case) or case) + "$"


def probe_args(plan: BisectPlan) -> list[str]:
    """How each probe's A/B runs: fixed rounds or until decided, in blocks or launches."""
    rounds = (["--rounds", str(plan.rounds)] if plan.rounds
              else ["--until-decided", "--max-time", plan.max_time])  # fmt: skip
    return [*rounds, "--blocks" if plan.blocks else "--launches"]


def ab_probe(plan: BisectPlan, workdir: str) -> Callable[[str], Probe]:
    """A probe of a side: ``dsbench ab`` of ``plan.good`` against it, judged on ``plan.case``."""
    good, case = plan.good, plan.case

    def probe(side: str) -> Probe:
        argv = [sys.executable, "-m", "dsbench", "ab", "--baseline", good, "--contender", side,
                "--suite", plan.suite, "--filter", case_filter(case), "--format", "csv",
                "--out", workdir, *probe_args(plan)]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode not in (0, 1):
            why = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise UsageError(f"the probe of {side} failed: {why}")
        rows = [r for r in csv.DictReader(io.StringIO(proc.stdout)) if r.get("benchmark") == case]
        if len(rows) != 1:
            raise UsageError(f"the probe of {side} compared no row {case}")
        r = rows[0]
        interval = next((v for k, v in r.items() if k.endswith("% interval")), "")
        ratio = float(r["ratio"] or "nan")
        return Probe(side=side, change=Change(r["change"]),
                     text=f"x{ratio:.3f} ({interval}) {r['change']}")  # fmt: skip

    return probe


def bisect(plan: BisectPlan) -> int:
    """Search ``plan``'s sides and print what was found; the exit status (1: nothing found)."""
    check_suite(plan.suite)
    if plan.rounds is not None and plan.rounds < 2:
        raise UsageError(f"--rounds must be at least 2, got {plan.rounds}")
    if plan.blocks and memory_case(plan.case) is not None:
        raise UsageError(f"--case {plan.case}: peak memory is judged over launch rounds (a "
                         "block round's workers hold what earlier cases left); leave out "
                         "--blocks")  # fmt: skip
    sides = between(plan.good, plan.bad)
    print(f"dsbench bisect: {len(sides) - 2} side(s) between {plan.good} and {plan.bad}; "
          f"at most {max(0, len(sides) - 2).bit_length()} probes after the first",
          file=sys.stderr)  # fmt: skip
    probes: list[Probe] = []

    def probed(side: str) -> Probe:
        probes.append(probe(side))
        return probes[-1]

    with tempfile.TemporaryDirectory(prefix="dsbench-bisect-") as tmp:
        probe = ab_probe(plan, tmp)
        found, text = search(sides, probed, log=lambda x: print(f"dsbench bisect: {x}",
                                                                 file=sys.stderr))  # fmt: skip
    print(result_text(text, probes, plan, sides, found))
    return 1 if found is None else 0


def result_text(text: str, probes: list[Probe], plan: BisectPlan, sides: list[str],
                found: int | None, limit: int | None = None) -> str:  # fmt: skip
    """What the search found (first), its probes as a table, and the ``dsbench ab`` command that
    reproduces the step, every line in ``limit`` columns (default: the terminal's) but a
    ``--filter`` regex longer than a line."""
    limit = limit or terminal.width()
    lines = terminal.wrap_all([text, f"probes against {plan.good}, the case:"], limit)
    lines += [f"  {line}" for line in terminal.wrap_id(plan.case, limit - 2).split("\n")]
    lines.append(terminal.table(["side", "ratio (99% interval) verdict"],
                                [[p.side, p.text] for p in probes], limit=limit))  # fmt: skip
    if found is not None:
        lines.append("reproduce:")
        lines += terminal.command_lines(
            ["dsbench", "ab", "--baseline", sides[found - 1], "--contender", sides[found],
             "--suite", plan.suite, "--filter", f"'{case_filter(plan.case)}'",
             *probe_args(plan)], limit)  # fmt: skip
    return "\n".join(lines)
