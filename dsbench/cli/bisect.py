"""``dsbench bisect --good SIDE --bad SIDE --case ID``: the first DeepSpeed release or commit
between two sides at which a case's number moved, by binary search with an A/B at each probe.

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

import argparse
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
from dsbench.suites import SUITES, check_suite


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--good", required=True, metavar="SIDE", help="deepspeed=V or commit=REF")
    p.add_argument("--bad", required=True, metavar="SIDE", help="the same kind as --good")
    p.add_argument("--case", required=True, metavar="ID", help="a benchmark id of the suite")
    p.add_argument("--suite", default="quick", help=f"one of {', '.join(SUITES)} (default quick)")
    p.add_argument("--max-time", default="20m", metavar="DURATION",
                   help="each probe's --max-time (default 20m)")  # fmt: skip
    p.add_argument("--blocks", action="store_true", help="probes in block rounds (ab --blocks)")
    p.add_argument("--rounds", type=int, default=None,
                   help="each probe a fixed number of rounds a side (ab --rounds N) instead of "
                   "--until-decided: narrower intervals for a known time")  # fmt: skip


@dataclass(frozen=True)
class Probe:
    side: str
    change: str
    """compare's verdict of this side against ``good``."""
    text: str
    """The probe's row as printed: ``x0.91 (0.88-0.94) worse``."""


def between(good: str, bad: str) -> list[str]:
    """``good``, every side between, and ``bad`` (``KIND=VALUE`` texts), oldest first."""
    from dsbench.sweep import parse_axis

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


def probe_args(args: argparse.Namespace) -> list[str]:
    """How each probe's A/B runs: fixed rounds or until decided, in blocks or launches."""
    rounds = (["--rounds", str(args.rounds)] if args.rounds
              else ["--until-decided", "--max-time", args.max_time])  # fmt: skip
    return [*rounds, "--blocks" if args.blocks else "--launches"]


def ab_probe(good: str, args: argparse.Namespace, case: str, workdir: str):
    def probe(side: str) -> Probe:
        argv = [sys.executable, "-m", "dsbench", "ab", "--baseline", good, "--contender", side,
                "--suite", args.suite, "--filter", case_filter(case), "--format", "csv",
                "--out", workdir, *probe_args(args)]  # fmt: skip
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
        return Probe(side=side, change=r["change"],
                     text=f"x{ratio:.3f} ({interval}) {r['change']}")  # fmt: skip

    return probe


def run(args: argparse.Namespace) -> int:
    check_suite(args.suite)
    if args.rounds is not None and args.rounds < 2:
        raise UsageError(f"--rounds must be at least 2, got {args.rounds}")
    if args.blocks and memory_case(args.case) is not None:
        raise UsageError(f"--case {args.case}: peak memory is judged over launch rounds (a "
                         "block round's workers hold what earlier cases left); leave out "
                         "--blocks")  # fmt: skip
    sides = between(args.good, args.bad)
    print(f"dsbench bisect: {len(sides) - 2} side(s) between {args.good} and {args.bad}; "
          f"at most {max(0, len(sides) - 2).bit_length()} probes after the first",
          file=sys.stderr)  # fmt: skip
    probes: list[Probe] = []

    def probed(side: str) -> Probe:
        probes.append(probe(side))
        return probes[-1]

    with tempfile.TemporaryDirectory(prefix="dsbench-bisect-") as tmp:
        probe = ab_probe(args.good, args, args.case, tmp)
        found, text = search(sides, probed, log=lambda x: print(f"dsbench bisect: {x}",
                                                                 file=sys.stderr))  # fmt: skip
    print(result_text(text, probes, args, sides, found))
    return 1 if found is None else 0


def result_text(text: str, probes: list[Probe], args: argparse.Namespace, sides: list[str],
                found: int | None, limit: int | None = None) -> str:  # fmt: skip
    """What the search found (first), its probes as a table, and the ``dsbench ab`` command that
    reproduces the step, every line in ``limit`` columns (default: the terminal's) but a
    ``--filter`` regex longer than a line."""
    limit = limit or terminal.width()
    lines = terminal.wrap_all([text, f"probes against {args.good}, the case:"], limit)
    lines += [f"  {line}" for line in terminal.wrap_id(args.case, limit - 2).split("\n")]
    lines.append(terminal.table(["side", "ratio (99% interval) verdict"],
                                [[p.side, p.text] for p in probes], limit=limit))  # fmt: skip
    if found is not None:
        lines.append("reproduce:")
        lines += terminal.command_lines(
            ["dsbench", "ab", "--baseline", sides[found - 1], "--contender", sides[found],
             "--suite", args.suite, "--filter", f"'{case_filter(args.case)}'",
             *probe_args(args)], limit)  # fmt: skip
    return "\n".join(lines)
