"""``dsbench soak`` from typed options to a result file: every option checked before any rank
starts, the soak run (:mod:`dsbench.soak.run`), its drift, anomalies and fault outcomes
(:mod:`dsbench.soak.report`) written as a run, and the summary printed.

A runner-layer module inside ``soak/`` (it writes results and collects the environment); the
rest of the package is the workloads layer and imports neither.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tabulate import tabulate

from dsbench import records, results
from dsbench.errors import UsageError
from dsbench.procs.interrupts import Interrupted, as_interrupted, signals_ignored
from dsbench.records import RunRecord
from dsbench.soak import plan, report
from dsbench.soak.run import Settings, Soak, Stream

if TYPE_CHECKING:
    from dsbench.engines.training import JobOptions

DEFAULT_STEPS = 1000
DEFAULT_SAMPLE_EVERY = 10
DEFAULT_HANG_TIMEOUT = 10.0
SAVES_WITH_FAULTS = 25
"""Without --checkpoint-every, a fault soak saves this many checkpoints over its job."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SoakOptions:
    """A soak as the command line gives it, before it is checked."""

    job: JobOptions
    steps: int | None = None
    """The job's total steps (None: ``duration``'s, else :data:`DEFAULT_STEPS`)."""
    duration: str | None = None
    """Train this long instead (``2h``, ``90m``, ``1h30m``, ``45s``)."""
    faults: str | None = None
    """``ACTION=COUNT,...``: failures to inject (:func:`dsbench.soak.plan.parse_faults`)."""
    fault_seed: int = 0
    checkpoint_every: int | None = None
    """None: no checkpoints, or with faults :data:`SAVES_WITH_FAULTS` over the job."""
    sample_every: int = DEFAULT_SAMPLE_EVERY
    warmup: int | None = None
    """Steps left out of the drift fits (None: the first 10%)."""
    hang_timeout_s: float = DEFAULT_HANG_TIMEOUT
    out: str | None = None
    """Results folder or ``.json`` path (None: $DSBENCH_RESULTS or ./results)."""
    list_faults: bool = False
    """Print the fault schedule and stop."""
    label: str | None = None


def settings(opts: SoakOptions) -> tuple[Settings, SoakCase]:
    """The soak's settings and its row parameters, everything checked before any rank starts
    (one-line errors)."""
    from dsbench.engines.training import kernels_arg, resolve

    counts = plan.parse_faults(opts.faults)
    duration = plan.parse_duration(opts.duration) if opts.duration is not None else None
    if counts and duration is not None:
        raise UsageError(
            "--faults needs --steps, not --duration: the reference run and the "
            "faulted run must train the same job"
        )
    checked = {"sample_every": opts.sample_every, "checkpoint_every": opts.checkpoint_every,
               "warmup": opts.warmup}  # fmt: skip
    for name, value in checked.items():
        if value is not None and value < (1 if name == "sample_every" else 0):
            raise UsageError(f"--{name.replace('_', '-')} must be positive, got {value}")
    if opts.hang_timeout_s <= 0:
        raise UsageError(f"--hang-timeout must be positive, got {opts.hang_timeout_s:g}")
    steps = opts.steps
    if steps is None and duration is None:
        steps = DEFAULT_STEPS
    spec = dataclasses.replace(opts.job, nproc=opts.job.nproc or 2)
    job = resolve(spec, steps=steps)
    steps = steps or 10**9
    every = opts.checkpoint_every
    if every is None:
        every = max(1, steps // SAVES_WITH_FAULTS) if counts else 0
    if counts and not every:
        raise UsageError("--faults needs checkpoints to resume from: --checkpoint-every 0")
    faults = plan.schedule(
        counts,
        steps=steps,
        world=job.world,
        engine=spec.engine,
        save_every=every,
        seed=opts.fault_seed,
    )
    found = Settings(
        model=spec.model,
        config=job.cfg.to_deepspeed_dict(),
        engine=spec.engine,
        nproc=job.world,
        device=job.device,
        steps=steps,
        duration_s=duration,
        sample_every=opts.sample_every,
        checkpoint_every=every,
        faults=tuple(faults),
        hang_timeout_s=opts.hang_timeout_s,
        seed=spec.seed,
        kernels=kernels_arg(spec.kernels),
    )
    case = SoakCase(engine=spec.engine, model=spec.model, nproc=job.world,
                    stage=job.cfg.zero_optimization.stage, precision=job.cfg.precision)  # fmt: skip
    return found, case


@dataclasses.dataclass(frozen=True, kw_only=True)
class SoakCase:
    """What a soak runs, as its result's row params record it (in this order)."""

    engine: str
    model: str
    nproc: int
    stage: int
    precision: str


def soak(opts: SoakOptions) -> int:
    """Run the soak ``opts`` describes; the exit status (1: a problem, 130/143: interrupted)."""
    from dsbench.envinfo import collect_env

    found, case = settings(opts)
    params = dataclasses.asdict(case)
    if opts.list_faults:
        for fault in found.faults:
            print(f"{fault.env():40s} {fault.describe()}")
        return 0
    out, moved = results.writable_results_dir(opts.out)
    if moved:
        print(f"dsbench: {moved}", file=sys.stderr)
    if out.suffix == ".json" and out.exists():
        raise UsageError(f"--out {out} already exists; dsbench never overwrites a result file")
    folder = out.parent if out.suffix == ".json" else out / results.machine_name()
    results.check_writable(folder)
    started = datetime.now(UTC)
    run_id = results.new_run_id(started)
    label = opts.label or f"soak-{case.engine}-zero{case.stage}"
    name = out.stem if out.suffix == ".json" else f"{run_id}-{results.slug(label)}"
    stream = Stream(folder / f"{name}.soak.jsonl")
    env = collect_env(found.device)
    workdir = Path(tempfile.mkdtemp(prefix="dsbench-soak-"))
    running = Soak(found, stream, workdir)
    stopped: Interrupted | None = None
    length = f"{found.duration_s:g} s" if found.duration_s else f"{found.steps} steps"
    print(
        f"dsbench soak: {case.engine} ZeRO-{case.stage} {case.precision}, "
        f"{found.nproc} ranks, {length}, {len(found.faults)} fault(s); samples go to "
        f"{stream.path}",
        flush=True,
    )
    try:
        stream.write("soak", run_id=run_id, params=params, settings=_describe(found))
        running.run()
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM from a scheduler: keep what finished
        stopped = as_interrupted(exc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    with signals_ignored():  # a second signal must not cost the file
        run = _Run(params=params, env=env, started=started, run_id=run_id, label=label)
        record = _document(running, run, opts.warmup, stopped)
        if out.suffix == ".json":
            path = results.write_run(record, path=out)
        else:
            path = results.write_run(record, root=out)
        stream.write("result", path=str(path), status=record.soak["status"])
        stream.close()
    _print_summary(record, path)
    if stopped is not None:
        print(
            f"dsbench soak: interrupted by {stopped.name}; {path} holds what finished",
            file=sys.stderr,
        )
        return stopped.exit_code
    return 1 if record.soak["problems"] else 0


def _describe(s: Settings) -> dict:
    return {
        "steps": s.steps if s.duration_s is None else None,
        "duration_s": s.duration_s,
        "sample_every": s.sample_every,
        "checkpoint_every": s.checkpoint_every,
        "hang_timeout_s": s.hang_timeout_s,
        "seed": s.seed,
        "kernels": s.kernels,
        "faults": [f.to_dict() for f in s.faults],
        "ds_config": s.config,
    }


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Run:
    """What the result file records of the run around the soak."""

    params: dict
    env: dict
    started: datetime
    run_id: str
    label: str


def _document(soak: Soak, run: _Run, warmup: int | None, stopped: Interrupted | None) -> RunRecord:
    from dsbench import hardware

    params = run.params
    warmup = warmup if warmup is not None else report.default_warmup(soak)
    rows = report.drift_rows(soak, params, warmup)
    anomalies = report.loss_anomalies(soak)
    rows.append(report.anomaly_row(anomalies, params))
    section = {
        "status": "interrupted" if stopped else "stopped" if soak.stopped else "complete",
        "stopped": soak.stopped,
        "warmup_steps": warmup,
        "stream": soak.stream.path.name,
        "thresholds": {
            "memory_mib_per_1k_steps": report.MEMORY_THRESHOLD,
            "step_time_pct_per_1k_steps": report.STEP_TIME_THRESHOLD,
        },
        "settings": _describe(soak.settings),
        "anomalies": anomalies,
        "launches": [_launch_summary(x) for x in soak.launches],
    }
    problems = [soak.stopped] if soak.stopped else []
    if soak.settings.faults:
        outcome = report.fault_outcomes(soak)
        section["faults"] = outcome
        rows += report.fault_rows(outcome, params)
        scheduled = len(soak.settings.faults)
        if stopped is None and len(outcome["faults"]) < scheduled:
            problems.append(
                f"{scheduled - len(outcome['faults'])} of {scheduled} faults never fired"
            )
        problems += [
            f"not named: {f['spec']}: {f['message']}" for f in outcome["faults"] if not f["named"]
        ]
        problems += [
            f"restart {r['launch']}: {r['why']}" for r in outcome["resumes"] if not r["ok"]
        ]
        step = outcome["deterministic"]["first_difference"]
        if step is not None:
            problems.insert(
                0,
                f"training is not deterministic: the faulted run's first launch, "
                f"from step 0 as the reference, differs from it at step {step}, so "
                "no restart can be judged bit for bit",
            )
    elif soak.runs("reference") and soak.runs("reference")[-1].failure:
        problems.append(f"failure: {soak.runs('reference')[-1].failure}")
    section["problems"] = problems
    profile = hardware.get_profile((run.env.get("profile") or {}).get("name") or "cpu")
    record = results.new_run_doc(
        suite="soak", label=run.label, env=run.env, profile=profile, rows=rows, started=run.started
    )
    record = dataclasses.replace(record, run_id=run.run_id, purpose="soak", soak=section)
    if stopped is not None:
        last = max((x.last_step for x in soak.launches if x.last_step is not None), default=-1)
        stop = records.Interrupted(signal=stopped.name, finished=last + 1)
        record = dataclasses.replace(record, interrupted=stop)
    return record


def _launch_summary(launch) -> dict:
    return {
        "run": launch.run,
        "launch": launch.index,
        "resume": launch.resume,
        "fault": launch.fault.env() if launch.fault else None,
        "first_step": launch.first_step,
        "last_step": launch.last_step,
        "seconds": round((launch.ended or launch.started) - launch.started, 3),
        "failure": launch.failure,
    }


def _print_summary(record: RunRecord, path: Path) -> None:
    table = []
    for row in record.rows:
        if not row.ok:
            table.append([row.id, "", "", f"{row.status}: {row.reason or row.error or None}"])
            continue
        drift = row.drift
        if drift:
            ci = (
                "no interval"
                if drift["low"] is None
                else f"[{drift['low']:.3g}, {drift['high']:.3g}]"
            )
            verdict = f"{drift['verdict']} (threshold {drift['threshold']:g})"
            table.append([row.id, f"{row.value:.3g} {row.unit}", ci, verdict])
        else:
            table.append([row.id, f"{row.value:.4g} {row.unit}", "", ""])
    print(
        tabulate(table, headers=["soak", "value", "99% interval", "verdict"], disable_numparse=True)
    )
    section = record.soak
    faults = section.get("faults")
    if faults:
        inj = ", ".join(f"{n} {a}" for a, n in faults["injected"].items())
        rate = faults["resume_success_rate"]
        print(
            f"\nfailures injected: {inj} ({faults['during_saves']} during saves); detected "
            f"{faults['detected']}, named {faults['named']}; resumes {faults['resumes_attempted']},"
            f" bit-identical {faults['resumes_identical']}"
            + (f" ({rate:.1f}%)" if rate is not None else "")
            + f"; failures not injected: {len(faults['real_failures'])}"
        )
    for problem in section["problems"]:
        print(f"dsbench soak: problem: {problem}", file=sys.stderr)
    print(f"\nwrote {path} ({section['status']}; samples in {section['stream']})")
