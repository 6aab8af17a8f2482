"""``dsbench bisect --good SIDE --bad SIDE --case ID``: the first DeepSpeed release or commit
between two sides at which a case's number moved, by binary search with an A/B at each probe.

The sides between come from the axis (:mod:`dsbench.sweep.axis`: the releases pip lists, or the
first-parent commits). First ``good`` against ``bad`` must differ (better or worse: the
direction of the change sought); then each probe is ``dsbench ab --until-decided`` of ``good``
against the middle side: the same change as ``bad``'s puts the step at or before it, unchanged
after it; a verdict that cannot decide (inconclusive, or a change the other way) stops the
search and says so, since a guess would send it down the wrong half. It prints the first side
that differs, its verdict, and the ``dsbench ab`` command that reproduces it.
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

from dsbench.errors import UsageError
from dsbench.suites import SUITES, check_suite


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--good", required=True, metavar="SIDE", help="deepspeed=V or commit=REF")
    p.add_argument("--bad", required=True, metavar="SIDE", help="the same kind as --good")
    p.add_argument("--case", required=True, metavar="ID", help="a benchmark id of the suite")
    p.add_argument("--suite", default="quick", help=f"one of {', '.join(SUITES)} (default quick)")
    p.add_argument("--max-time", default="20m", metavar="DURATION",
                   help="each probe's --max-time (default 20m)")  # fmt: skip
    p.add_argument("--blocks", action="store_true", help="probes in block rounds (ab --blocks)")


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
    if end.change not in ("better", "worse"):
        return None, f"{sides[-1]} does not differ from {sides[0]} ({end.text}): nothing to bisect"
    lo, hi = 0, len(sides) - 1  # sides[lo] is like good, sides[hi] differs as bad does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        got = probe(sides[mid])
        log(f"{sides[mid]} against {sides[0]}: {got.text}")
        if got.change == end.change:
            hi = mid
        elif got.change == "unchanged":
            lo = mid
        else:
            return None, (f"cannot tell which half: {sides[mid]} against {sides[0]} is "
                          f"{got.text}; rerun with a longer --max-time or --blocks")  # fmt: skip
    return hi, f"first side that differs: {sides[hi]} (after {sides[lo]}, {end.change})"


def ab_probe(good: str, args: argparse.Namespace, case_re: str, workdir: str):
    def probe(side: str) -> Probe:
        argv = [sys.executable, "-m", "dsbench", "ab", "--baseline", good, "--contender", side,
                "--suite", args.suite, "--filter", case_re, "--until-decided", "--max-time",
                args.max_time, "--format", "csv", "--out", workdir,
                *(["--blocks"] if args.blocks else [])]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode not in (0, 1):
            why = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise UsageError(f"the probe of {side} failed: {why}")
        rows = [r for r in csv.DictReader(io.StringIO(proc.stdout)) if r.get("benchmark")]
        if len(rows) != 1:
            raise UsageError(f"the probe of {side} compared {len(rows)} rows, not one")
        r = rows[0]
        interval = next((v for k, v in r.items() if k.endswith("% interval")), "")
        ratio = float(r["ratio"] or "nan")
        return Probe(side=side, change=r["change"],
                     text=f"x{ratio:.3f} ({interval}) {r['change']}")  # fmt: skip

    return probe


def run(args: argparse.Namespace) -> int:
    check_suite(args.suite)
    sides = between(args.good, args.bad)
    case_re = "^" + re.escape(args.case) + "$"
    print(f"dsbench bisect: {len(sides) - 2} side(s) between {args.good} and {args.bad}; "
          f"at most {max(0, len(sides) - 2).bit_length()} probes after the first",
          file=sys.stderr)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="dsbench-bisect-") as tmp:
        probe = ab_probe(args.good, args, case_re, tmp)
        found, text = search(sides, probe, log=lambda x: print(f"dsbench bisect: {x}",
                                                                file=sys.stderr))  # fmt: skip
    print(text)
    if found is None:
        return 1
    blocks = " --blocks" if args.blocks else ""
    print(f"reproduce: dsbench ab --baseline {sides[found - 1]} --contender {sides[found]} "
          f"--suite {args.suite} --filter '{case_re}' --until-decided{blocks}")  # fmt: skip
    return 0
