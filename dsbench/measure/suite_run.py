"""``dsbench run`` from typed options to a result file: the suite planned on the detected
device, its cases run with a progress bar, the rows written as a run and printed as a table.

Stopped by SIGINT or SIGTERM part-way, it stops its ranks, writes the result file with the
benchmarks that finished (the others ``status: "interrupted"``, the run ``interrupted``) and
returns 130 or 143. The comparison with an earlier run is the verb's (:mod:`dsbench.cli.run`):
:class:`RunDone` says where to look for one.
"""

from __future__ import annotations

import dataclasses
import sys
from datetime import UTC, datetime
from pathlib import Path

from dsbench import results
from dsbench.compare import terminal
from dsbench.errors import UsageError
from dsbench.measure.run_table import summary_line, summary_table
from dsbench.procs import host
from dsbench.procs.interrupts import as_interrupted, signals_ignored
from dsbench.records import Interrupted, Row, RunRecord
from dsbench.suites import check_suite


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
    """A run as the command line gives it, before it is checked."""

    suite: str = "quick"
    pattern: str | None = None
    """Only cases whose id matches this regex (``--filter``)."""
    label: str | None = None
    out: str | None = None
    """Results folder or ``.json`` path (None: $DSBENCH_RESULTS or ./results)."""
    device: str = "auto"
    ranks: int | None = None
    """Ranks every multi-rank benchmark spawns (None: 2 on CPUs, one per visible GPU)."""
    quick: bool = False
    """The smoke suite's timing for any suite."""
    max_reps: int | None = None
    ceilings: str | None = None
    """``run`` or ``cached`` (None: $DSBENCH_CEILINGS, else the suite's default)."""
    list_cases: bool = False
    """Print the cases' ids and stop."""
    progress: bool = True


@dataclasses.dataclass(frozen=True)
class RunDone:
    """How a run ended: its exit status and the run to compare with an earlier one."""

    exit_code: int
    record: RunRecord | None = None
    folder: Path | None = None
    """The results folder to look for an earlier run in; None after ``list_cases``, a run
    stopped by a signal, or a ``.json`` path."""


def run_suite(opts: RunOptions) -> RunDone:
    """Run ``opts``' suite: every option checked before the first case (one-line errors)."""
    from dsbench.envinfo import collect_env
    from dsbench.measure import runner

    suite = check_suite(opts.suite)
    out = _checked_out(opts)
    device = runner.resolve_device(opts.device)
    env = collect_env(device)
    ctx = runner.context_for(env, suite, ranks=opts.ranks)
    planned = runner.plan(suite, ctx, opts.pattern)
    if opts.list_cases:
        print("\n".join(p.id for p in planned))
        return RunDone(0)
    if opts.device == "auto" and device == "cpu":
        print("dsbench: no GPU visible to torch: running on the CPU", file=sys.stderr)
    for line in [*host_lines(planned, ctx), *_source_line(env)]:
        print(f"dsbench: {line}", file=sys.stderr)
    ceilings = runner.ceiling_mode(suite, opts.ceilings)
    profile = runner.profile_for(env, ctx, warn=lambda m: print(f"dsbench: {m}", file=sys.stderr),
                                 measure=ceilings == "cached")  # fmt: skip
    started = datetime.now(UTC)
    update, bar = _progress(len(planned), opts.progress)
    finished: dict[str, Row] = {}

    def progress(case_id: str, row: Row | None) -> None:
        if row is not None:
            finished[row.id] = row
        update(case_id, row)

    stopped = None
    try:
        with bar:
            config = runner.TIMING["smoke" if opts.quick else suite]
            if opts.max_reps is not None:
                config = dataclasses.replace(config, max_reps=max(opts.max_reps, config.min_reps))
            rows, profile = runner.run_suite(
                suite,
                ctx,
                profile,
                pattern=opts.pattern,
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
        suite=suite, label=opts.label, env=env, profile=profile, rows=rows, started=started
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
    wrote = f"wrote {path} ({record.wall_s:.0f} s, suite {suite}, profile {profile.name})"
    failed = _print_run(rows, wrote)
    if stopped is not None:
        print(
            f"dsbench: interrupted by {stopped.name} after {len(finished)} of {len(planned)} "
            f"benchmark(s); {path} holds the finished ones",
            file=sys.stderr,
        )
        return RunDone(stopped.exit_code, record)
    return RunDone(1 if failed else 0, record, None if out.suffix == ".json" else out)


def _checked_out(opts: RunOptions) -> Path:
    """Where the result file goes, checked with the other options before anything runs."""
    out, moved = results.writable_results_dir(opts.out)
    if moved and not opts.list_cases:
        print(f"dsbench: {moved}", file=sys.stderr)
    if out.suffix == ".json" and out.exists():
        raise UsageError(f"--out {out} already exists; dsbench never overwrites a result file")
    if not opts.list_cases:  # known now rather than after the benchmarks ran
        folder = out.parent if out.suffix == ".json" else out / results.machine_name()
        results.check_writable(folder)
    if opts.ranks is not None and opts.ranks < 1:
        raise UsageError(f"--ranks {opts.ranks}: give 1 or more ranks")
    if opts.max_reps is not None and opts.max_reps < 1:
        raise UsageError(f"--max-reps {opts.max_reps}: give 1 or more repetitions")
    return out


def _print_run(rows: list[Row], wrote: str) -> list[str]:
    """The counts, the failures (on stderr, before the table), the table and the ``wrote``
    line; returns the failed rows' ids."""
    failed = [r.id for r in rows if r.status == "failed"]
    print(summary_line(rows))
    if failed:  # first, before the table
        line = f"dsbench: {len(failed)} benchmark(s) failed: {', '.join(failed)}"
        print("\n".join(terminal.wrap_all([line], terminal.width())), file=sys.stderr)
    print(summary_table(rows))
    print("\n" + "\n".join(terminal.wrap_all([wrote], terminal.width())))
    return failed


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
