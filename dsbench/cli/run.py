"""``dsbench run``: run a suite on the detected device, write a result file, print the table and
the comparison with the newest earlier run of the same suite on this machine.

Stopped by SIGINT or SIGTERM part-way, it stops its ranks, writes the result file with the
benchmarks that finished (the others ``status: "interrupted"``, the run ``interrupted``) and
exits 130 or 143. The run is :func:`dsbench.measure.suite_run.run_suite`'s."""

from __future__ import annotations

import argparse
from pathlib import Path

from dsbench import compare, results
from dsbench.cli.compare import terminal_text
from dsbench.compare import terminal
from dsbench.records import RunRecord, fingerprint
from dsbench.suites import SUITES
from dsbench.suites.ceilings import CEILING_MODES


def add_device_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="auto: the GPU if there is one (CUDA or ROCm), else the CPU",
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", default="quick", help=f"one of {', '.join(SUITES)} (default quick)")
    p.add_argument(
        "--filter",
        metavar="REGEX",
        help="only cases whose id matches, e.g. 'adamw' or 'allreduce.*size=67108864'",
    )
    p.add_argument("--label", help="a label for this run (usable as a compare selector)")
    p.add_argument(
        "--out",
        metavar="PATH",
        help="results folder, or a .json file path (default: $DSBENCH_RESULTS or "
        "./results, file under <machine>/)",
    )
    add_device_argument(p)
    p.add_argument(
        "--ranks",
        type=int,
        metavar="N",
        help="ranks every multi-rank benchmark spawns (default: 2 on CPUs, one per visible GPU); "
        "training runs on 1, collectives need 2",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="the smoke suite's timing for any suite (a few repetitions, one round): checks "
        "that every case runs, as asv's --quick does; its figures are not for comparing",
    )
    p.add_argument(
        "--max-reps",
        type=int,
        metavar="N",
        help="at most N timed repetitions a case (at least the suite's minimum); `dsbench ab "
        "--until-decided` sets it where launches, not repetitions, carry the variance",
    )
    p.add_argument(
        "--ceilings",
        choices=CEILING_MODES,
        help="run: time the memory and matmul ceilings the rows need as rows of this run, "
        "interleaved with the benchmarks, and divide by them (default, but for the smoke suite); "
        "cached: divide by the cached calibration (dsbench profiles --calibrate); "
        "default from $DSBENCH_CEILINGS",
    )
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument(
        "--no-compare", action="store_true", help="do not compare with the newest earlier run"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from dsbench.measure.suite_run import RunOptions, run_suite

    done = run_suite(RunOptions(suite=args.suite, pattern=args.filter, label=args.label,
                                out=args.out, device=args.device, ranks=args.ranks,
                                quick=args.quick, max_reps=args.max_reps, ceilings=args.ceilings,
                                list_cases=args.list, progress=not args.no_progress))  # fmt: skip
    if done.folder is not None and not args.no_compare:
        _compare_with_previous(done.folder, done.record)
    return done.exit_code


def _compare_with_previous(root: Path, record: RunRecord) -> None:
    """Compare with the newest earlier run of the suite in this machine's folder that was
    measured on this hardware (:mod:`dsbench.records.fingerprint`: a folder is a host name, and
    two VMs called ``vm`` can be an AMD EPYC and an Intel Xeon); where there is none, one line
    says why."""
    runs = results.load_runs(root)
    this = next((r for r in runs if r.id == record.run_id), None)
    earlier = [
        r
        for r in runs
        if r is not this
        and r.machine == record.machine
        and r.suite == record.suite
        and r.created <= record.created
    ]
    if this is None or not earlier:
        print("(no earlier run of this suite on this machine to compare with)")
        return
    like = [r for r in earlier if fingerprint.like(r.hardware, this.hardware)]
    if not like:
        newest = earlier[-1]
        differ = fingerprint.what_differs(fingerprint.differences(newest.hardware, this.hardware))
        line = (
            f"(no earlier run on this hardware to compare with: the newest run of suite "
            f"{record.suite} in '{record.machine}' ({newest.id}) is on {newest.hardware.name}, "
            f"this is {this.hardware.name}; {differ} differ)"
        )
        print("\n".join(terminal.wrap_all([line], terminal.width())))
        return
    base = like[-1]
    passed = [r for r in earlier if r.created > base.created and r not in like]
    skipped = (
        f" (passing over {len(passed)} newer run(s) in '{record.machine}' on other hardware, "
        f"{passed[-1].hardware.name})"
        if passed
        else ""
    )
    rep = compare.report(
        base,
        this,
        axes={"commit", "dsbench"},
        notes=[
            f"\ncompared with the newest earlier run on this hardware: {base.describe()}" + skipped
        ],
        runs=runs,
    )
    print(terminal_text(rep))
