"""``dsbench run``: run a suite on the detected device, write a result file, print the table and
the comparison with the newest earlier run of the same suite on this machine.

Stopped by SIGINT or SIGTERM part-way, it stops its ranks, writes the result file with the
benchmarks that finished (the others ``status: "interrupted"``, the run ``interrupted``) and
exits 130 or 143."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from datetime import UTC, datetime
from pathlib import Path

from dsbench import compare, hardware, results
from dsbench.cli.compare import terminal_text
from dsbench.compare import terminal
from dsbench.errors import UsageError
from dsbench.procs import host
from dsbench.procs.interrupts import as_interrupted, signals_ignored
from dsbench.records import Interrupted, Row, RunRecord, fingerprint, value_or
from dsbench.suites import SUITES, check_suite
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


def _pct_cell(r: Row) -> str:
    """% of peak: ``62.1%``; against this run's ceiling with its interval, ``62.1% (58.0-66.3)``;
    for a ceiling row, the rate it stands for (its 90th percentile)."""
    from dsbench.stats import quantile_ci
    from dsbench.suites.ceilings import CEILING_QUANTILE, CEILINGS

    if r.name in CEILINGS:
        top = quantile_ci(r.samples, CEILING_QUANTILE)[0] if r.samples else math.nan
        return f"ceiling: p{CEILING_QUANTILE * 100:.0f} {top:.4g}"
    pct = value_or(r.pct_of_peak)
    text = hardware.pct_text(pct, value_or(r.peak.measured) if r.peak else None)
    entry = (r.metrics or {}).get(r.metric)
    ci = value_or(entry.pct_ci99) if entry else None
    return f"{text} ({ci[0]:.1f}-{ci[1]:.1f})" if ci and pct is not None else text


def summary_table(rows: list[Row], limit: int | None = None) -> str:
    """The run's rows for a terminal, in ``limit`` columns (default: the terminal's, at most
    100): the parameters every case of a benchmark shares above, each metric's name below, and
    long texts (a failure's message, why a share is above its peak) as numbered notes."""
    limit = limit or terminal.width()
    labels, caption = terminal.short_ids([r.id for r in rows])
    notes = terminal.Notes()
    table = []
    for r, label in zip(rows, labels, strict=True):
        if r.ok:
            s = r.stats
            half = (s.ci_high - s.ci_low) / 2
            table.append([label, f"{r.value:.4g} ± {half:.2g}", r.unit, _peak_cell(r, notes),
                          f"{r.timing.summary.median * 1e3:.4g}", str(s.n), "ok"])  # fmt: skip
        else:
            status = f"{r.status} {notes.ref(r.message)}".strip()
            table.append([label, "", r.unit, "", "", "", status])
    metrics: dict[str, list[str]] = {}
    for r in rows:
        names = metrics.setdefault(r.metric, [])
        names += [] if r.name in names else [r.name]
    body = terminal.table(
        ["benchmark", "median ± 99% CI", "unit", "% of peak", "time ms", "n", "status"],
        table, limit=limit, right=(1, 4, 5),
    )  # fmt: skip
    named = "; ".join(f"{m} ({', '.join(names)})" for m, names in metrics.items())
    below = terminal.wrap_all([f"metrics: {named}"], limit) + notes.lines(limit)
    return "\n".join([*terminal.wrap_all(caption, limit), body, "", *below])


def _peak_cell(r: Row, notes: terminal.Notes) -> str:
    """% of peak in a cell: a cache-resident row's ``in L3 [n]``, a share wholly above this run's
    ceiling (under the bound of a wrong count) ``106.8%* [n]`` and one whose interval reaches the
    ceiling ``~100% [n]``, each with its note; else
    :func:`_pct_cell`, shortened."""
    res = value_or(r.notes.residency) if r.notes else None
    if value_or(r.pct_of_peak) is None and isinstance(res, dict) and res.get("kind") != "dram":
        where = "in" if res["kind"] == "resident" else "partly in"
        cache = (res.get("cache") or {}).get("name", "cache")
        why = f"{res.get('text')}: no share of the DRAM ceiling"
        return f"{where} {cache} {notes.ref(why)}"
    extra = r.notes.extra if r.notes else {}
    if extra.get("over_ceiling"):
        return f"{value_or(r.pct_of_peak):.1f}%* {notes.ref(extra['over_ceiling'])}"
    if extra.get("at_ceiling"):
        return f"~100% {notes.ref(extra['at_ceiling'])}"
    return _short(_pct_cell(r), notes)


SHORT_CELL = 18
"""A table cell longer than this keeps its first words; its parenthesis becomes a note."""


def _short(text: str, notes: terminal.Notes) -> str:
    """``163.7% (above the measured peak)``: ``163.7% [1]``, the note 'above the measured
    peak'; a short cell (``62.1% (58.0-66.3)``) as it is."""
    head, sep, rest = text.partition(" (")
    if len(text) <= SHORT_CELL or not sep:
        return text
    return f"{head} {notes.ref(rest.removesuffix(')'))}"


def summary_line(rows: list[Row]) -> str:
    """``12 ok, 1 failed, 2 skipped``: the rows by status, in the order first seen."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in counts.items())


def _progress(total: int, enabled: bool):
    """Progress on stderr: a rich bar on a terminal, a line per finished case otherwise (logs).

    Returns (callback, context manager)."""
    from contextlib import nullcontext

    if not enabled:
        return (lambda case_id, row: None), nullcontext()
    if not sys.stderr.isatty():
        done = 0

        def log(case_id: str, row: Row | None) -> None:
            nonlocal done
            if row is not None:
                done += 1
                value = f" {row.value:.4g} {row.unit}" if row.ok else ""
                print(f"[{done}/{total}] {case_id}: {row.status}{value}", file=sys.stderr)

        return log, nullcontext()
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("[bold]dsbench run"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=Console(stderr=True),
        transient=False,
    )
    task = bar.add_task("", total=total)

    def update(case_id: str, row: Row | None) -> None:
        if row is None:
            bar.update(task, description=case_id)
        else:
            bar.update(task, advance=1, description=f"{case_id}: {row.status}")

    return update, bar


def host_lines(planned: list, ctx) -> list[str]:
    """What this host changes in the run, a line each (:mod:`dsbench.procs.host`): a /dev/shm too
    small for some shm collectives, CPU ranks that share cores."""
    from dsbench.suites import comm

    collectives = {b.name for b in comm.BENCHMARKS}
    shm = comm.shm_line([(p.bench.name, p.params) for p in planned if p.bench.name in collectives])
    ranks = [p.params[p.bench.ranks_param] for p in planned if p.bench.ranks_param]
    shared = None if ctx.gpu or not ranks else host.shared_cores_line(max(ranks))
    return [line for line in (shm, shared) if line]


def _source_line(env: dict) -> list[str]:
    """One line when dsbench's source is no git checkout git will read (an unpacked tarball, no
    git, another user's clone): its runs carry the version alone."""
    from dsbench.envinfo.collect import SOURCE_ROOT

    info = env.get("dsbench") or {}
    if info.get("commit"):
        return []
    return [
        f"{SOURCE_ROOT} is not a git checkout that git reads here (an unpacked tarball, no git, "
        f"or a clone another user owns): result files record dsbench {info.get('version')} "
        "without a commit id"
    ]


def run(args: argparse.Namespace) -> int:
    from dsbench.envinfo import collect_env
    from dsbench.measure import runner

    suite = check_suite(args.suite)
    out, moved = results.writable_results_dir(args.out)
    if moved and not args.list:
        print(f"dsbench: {moved}", file=sys.stderr)
    if out.suffix == ".json" and out.exists():
        raise UsageError(f"--out {out} already exists; dsbench never overwrites a result file")
    if not args.list:  # known now rather than after the benchmarks ran
        folder = out.parent if out.suffix == ".json" else out / results.machine_name()
        results.check_writable(folder)
    if args.ranks is not None and args.ranks < 1:
        raise UsageError(f"--ranks {args.ranks}: give 1 or more ranks")
    if args.max_reps is not None and args.max_reps < 1:
        raise UsageError(f"--max-reps {args.max_reps}: give 1 or more repetitions")
    device = runner.resolve_device(args.device)
    env = collect_env(device)
    ctx = runner.context_for(env, suite, ranks=args.ranks)
    planned = runner.plan(suite, ctx, args.filter)
    if args.list:
        print("\n".join(p.id for p in planned))
        return 0
    if args.device == "auto" and device == "cpu":
        print("dsbench: no GPU visible to torch: running on the CPU", file=sys.stderr)
    for line in [*host_lines(planned, ctx), *_source_line(env)]:
        print(f"dsbench: {line}", file=sys.stderr)
    ceilings = runner.ceiling_mode(suite, args.ceilings)
    profile = runner.profile_for(env, ctx, warn=lambda m: print(f"dsbench: {m}", file=sys.stderr),
                                 measure=ceilings == "cached")  # fmt: skip
    started = datetime.now(UTC)
    update, bar = _progress(len(planned), not args.no_progress)
    finished: dict[str, Row] = {}

    def progress(case_id: str, row: Row | None) -> None:
        if row is not None:
            finished[row.id] = row
        update(case_id, row)

    stopped = None
    try:
        with bar:
            config = runner.TIMING["smoke" if args.quick else suite]
            if args.max_reps is not None:
                config = dataclasses.replace(config, max_reps=max(args.max_reps, config.min_reps))
            rows, profile = runner.run_suite(
                suite,
                ctx,
                profile,
                pattern=args.filter,
                config=config,
                progress=progress,
                ceilings=ceilings,
            )
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM from a scheduler: keep what finished
        stopped = as_interrupted(exc)
        why = f"not run: the run was stopped by {stopped.name}"
        rows = [
            finished.get(p.id) or runner.status_row(p.bench, p.params, "interrupted", why)
            for p in planned
        ]
    record = results.new_run_doc(
        suite=suite, label=args.label, env=env, profile=profile, rows=rows, started=started
    )
    if stopped is not None:
        stop = Interrupted(signal=stopped.name, finished=len(finished))
        record = dataclasses.replace(record, interrupted=stop)
    with signals_ignored():  # a second signal must not cost the file
        path = results.write_run(
            record,
            root=None if out.suffix == ".json" else out,
            path=out if out.suffix == ".json" else None,
        )
    failed = [r.id for r in rows if r.status == "failed"]
    print(summary_line(rows))
    if failed:  # first, before the table
        line = f"dsbench: {len(failed)} benchmark(s) failed: {', '.join(failed)}"
        print("\n".join(terminal.wrap_all([line], terminal.width())), file=sys.stderr)
    print(summary_table(rows))
    wrote = f"wrote {path} ({record.wall_s:.0f} s, suite {suite}, profile {profile.name})"
    print("\n" + "\n".join(terminal.wrap_all([wrote], terminal.width())))
    if stopped is not None:
        print(
            f"dsbench: interrupted by {stopped.name} after {len(finished)} of {len(planned)} "
            f"benchmark(s); {path} holds the finished ones",
            file=sys.stderr,
        )
        return stopped.exit_code
    if not args.no_compare and out.suffix != ".json":
        _compare_with_previous(out, record)
    return 1 if failed else 0


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
