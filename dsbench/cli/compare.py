"""``dsbench compare --baseline SEL [--contender SEL]``: a direction-aware, significance-aware
table of two runs. SEL is a label, a version (matches a label or the DeepSpeed version), or
``key=value`` on a run field (python=3.11, backend=rocm, profile=mi250x-gcd, commit=abc1234...).
Runs are dsbench's result files and asv's (``<results>/asv``, one run per asv environment).
"""

from __future__ import annotations

import argparse
import sys

from dsbench import compare, results
from dsbench.compare import terminal
from dsbench.results import asv as asv_results


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--baseline",
        required=True,
        metavar="SEL",
        help="label, version, or key=value (keys: " + ", ".join(compare.SELECTOR_KEYS) + ")",
    )
    p.add_argument(
        "--contender",
        metavar="SEL",
        help="as --baseline; default: the closest run (sharing cases, fewest other differences) "
        "that differs on the baseline selector's axis; for a DeepSpeed version, the installed "
        "DeepSpeed's (else the next newer release's), a dsbench ab pair first",
    )
    p.add_argument(
        "--results",
        metavar="DIR",
        default=None,
        help="results folder, asv's results under its asv/ included; or asv's own results "
        "folder alone, e.g. results/asv (default: $DSBENCH_RESULTS or ./results)",
    )
    p.add_argument(
        "--format",
        default="terminal",
        choices=list(compare.FORMATS),
        help="table format (default terminal: fits the terminal, 100 columns at most, the "
        "reasons as numbered notes; the others keep every text in full)",
    )
    p.add_argument(
        "--factor",
        type=float,
        default=1.05,
        help="better/worse only when the whole 99%% interval of the ratio lies beyond this "
        "factor, unchanged when it lies within it (default 1.05)",
    )
    p.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when any row's verdict is worse (never on inconclusive)",
    )


def run(args: argparse.Namespace) -> int:
    runs = asv_results.load_all_runs(args.results)
    rep = build_report(runs, args.baseline, args.contender, factor=args.factor)
    return print_report(rep, args.format, args.fail_on_regression)


def build_report(
    runs: list[results.Run], baseline: str, contender: str | None, *, factor: float
) -> compare.Report:
    """The comparison the selectors name among ``runs``; a one-line UsageError otherwise."""
    base, cont, notes = compare.pick_runs(runs, baseline, contender)
    keys = compare.param_keys(runs)
    axes = compare.axes_of(
        compare.Selector.parse(baseline, keys),
        compare.Selector.parse(contender, keys) if contender else None,
    )
    return compare.report(base, cont, axes=axes, factor=factor, notes=notes, runs=runs)


def print_report(rep: compare.Report, fmt: str, fail_on_regression: bool) -> int:
    """Notes, table and summary line; exit status 1 when asked to fail on a ``worse`` row. On a
    terminal the summary line and the regressions come first, before the table, and every
    line fits the terminal."""
    worse = compare.regressions(rep.rows)
    failing = fail_on_regression and worse
    regressed = f"dsbench: {len(worse)} regression(s): " + ", ".join(r.id for r in worse)
    if fmt == "terminal":
        print(terminal_text(rep, regressed if failing else ""))
        return 1 if failing else 0
    # Machine-readable formats keep stdout clean; the notes go to stderr.
    note_stream = sys.stderr if fmt in ("csv", "html") else sys.stdout
    for line in rep.notes:
        print(line, file=note_stream)
    print(compare.render(rep, fmt))
    print(rep.verdict, file=note_stream)
    if failing:
        print(regressed, file=sys.stderr)
        return 1
    return 0


def terminal_text(rep: compare.Report, regressed: str = "", limit: int | None = None) -> str:
    """A terminal report (``fmt="terminal"``): which runs, the summary line and the regressions,
    then the table and its notes, each line in ``limit`` columns (default: the terminal's)."""
    limit = limit or terminal.width()
    head = terminal.wrap_all([*rep.notes, rep.verdict, *([regressed] if regressed else [])],
                             limit)  # fmt: skip
    return "\n".join([*head, "", compare.render(rep, "terminal")])
