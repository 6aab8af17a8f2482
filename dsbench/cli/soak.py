"""``dsbench soak``: a long training run that records, per rank and every K steps, resident
memory (and device memory on GPUs), step time, loss and loss scale, and reports their drift,
loss anomalies and, with ``--faults``, how failures were detected and resumed::

    dsbench soak --config ds_config.json --model mlp --steps 5000
    dsbench soak --config ds_config.json --model mlp --steps 1000 --faults kill=20,hang=3,term=2

It writes a result file (benchmark kind ``soak``; ``compare`` and ``publish`` read it) and, as
it goes, a JSONL stream of every sample beside it. SIGINT or SIGTERM stops the ranks, writes the
result file with what finished (``"interrupted"``), removes the checkpoints and exits 130 or
143.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from tabulate import tabulate

from dsbench import records, results
from dsbench.cli.train import add_job_arguments, kernels_arg, resolve
from dsbench.errors import UsageError
from dsbench.procs.interrupts import Interrupted, as_interrupted, signals_ignored
from dsbench.records import RunRecord
from dsbench.soak import plan, report
from dsbench.soak.run import Settings, Soak, Stream

DEFAULT_STEPS = 1000
DEFAULT_SAMPLE_EVERY = 10
DEFAULT_HANG_TIMEOUT = 10.0
SAVES_WITH_FAULTS = 25
"""Without --checkpoint-every, a fault soak saves this many checkpoints over its job."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_job_arguments(p, nproc_help="local ranks to spawn (default 2)")
    length = p.add_mutually_exclusive_group()
    length.add_argument(
        "--steps", type=int, help=f"the job's total steps (default {DEFAULT_STEPS})"
    )
    length.add_argument(
        "--duration",
        metavar="TIME",
        help="train this long instead of a number of steps: 2h, 90m, 1h30m, 45s "
        "(not with --faults)",
    )
    p.add_argument(
        "--faults",
        metavar="SPEC",
        help="failures to inject at seeded random places, ACTION=COUNT,...: kill (one "
        "rank SIGKILLed; a third of them during checkpoint saves), hang (one rank "
        "stops responding), term (SIGTERM to every rank), e.g. "
        "kill=20,hang=3,term=2; the job is first trained once without faults as "
        "the reference every restart must match bit for bit",
    )
    p.add_argument("--fault-seed", type=int, default=0, help="seed of the fault schedule")
    p.add_argument(
        "--checkpoint-every",
        type=int,
        metavar="K",
        help="save a checkpoint every K steps (default: none, or with --faults "
        f"{SAVES_WITH_FAULTS} over the job); restarts resume from the latest",
    )
    p.add_argument(
        "--sample-every",
        type=int,
        default=DEFAULT_SAMPLE_EVERY,
        metavar="K",
        help="every rank records memory, step time (its mean over the K steps), loss "
        f"and loss scale every K steps (default {DEFAULT_SAMPLE_EVERY})",
    )
    p.add_argument(
        "--warmup",
        type=int,
        metavar="STEPS",
        help="steps left out of the drift fits (default: the first 10%%)",
    )
    p.add_argument(
        "--hang-timeout",
        type=float,
        default=DEFAULT_HANG_TIMEOUT,
        metavar="SECONDS",
        help="a rank waiting this long on a silent peer gives up and the peer is named "
        f"as hung (default {DEFAULT_HANG_TIMEOUT:g})",
    )
    p.add_argument(
        "--out",
        metavar="PATH",
        help="results folder, or a .json file path (default $DSBENCH_RESULTS or ./results, file "
        "under <machine>/); the JSONL stream goes beside the file",
    )
    p.add_argument("--list", action="store_true", help="print the fault schedule and exit")
    p.add_argument("--label", help="the run's label (default soak-ENGINE-zeroSTAGE)")
    p.epilog = (
        f"Verdicts: memory is flat when the whole 99% interval of its slope lies below "
        f"{report.MEMORY_THRESHOLD:g} MiB per 1,000 steps, growing when wholly above, else "
        f"inconclusive; step time likewise against {report.STEP_TIME_THRESHOLD:g}% of the mean "
        "step time per 1,000 steps. Slopes are fitted after warm-up by least squares on batch "
        "means, the interval widened for autocorrelation."
    )


def _settings(args: argparse.Namespace) -> tuple[Settings, dict]:
    """Check everything before any rank starts (one-line errors)."""
    counts = plan.parse_faults(args.faults)
    duration = plan.parse_duration(args.duration) if args.duration is not None else None
    if counts and duration is not None:
        raise UsageError(
            "--faults needs --steps, not --duration: the reference run and the "
            "faulted run must train the same job"
        )
    for name in ("sample_every", "checkpoint_every", "warmup"):
        value = getattr(args, name)
        if value is not None and value < (1 if name == "sample_every" else 0):
            raise UsageError(f"--{name.replace('_', '-')} must be positive, got {value}")
    if args.hang_timeout <= 0:
        raise UsageError(f"--hang-timeout must be positive, got {args.hang_timeout:g}")
    if args.steps is None and duration is None:
        args.steps = DEFAULT_STEPS
    args.nproc = args.nproc or 2
    job = resolve(args)
    steps = args.steps or 10**9
    every = args.checkpoint_every
    if every is None:
        every = max(1, steps // SAVES_WITH_FAULTS) if counts else 0
    if counts and not every:
        raise UsageError("--faults needs checkpoints to resume from: --checkpoint-every 0")
    faults = plan.schedule(
        counts,
        steps=steps,
        world=job.world,
        engine=args.engine,
        save_every=every,
        seed=args.fault_seed,
    )
    settings = Settings(
        model=args.model,
        config=job.cfg.to_deepspeed_dict(),
        engine=args.engine,
        nproc=job.world,
        device=job.device,
        steps=steps,
        duration_s=duration,
        sample_every=args.sample_every,
        checkpoint_every=every,
        faults=tuple(faults),
        hang_timeout_s=args.hang_timeout,
        seed=args.seed,
        kernels=kernels_arg(args.kernels),
    )
    params = {
        "engine": args.engine,
        "model": args.model,
        "nproc": job.world,
        "stage": job.cfg.zero_optimization.stage,
        "precision": job.cfg.precision,
    }
    return settings, params


def run(args: argparse.Namespace) -> int:
    from dsbench.envinfo import collect_env

    settings, params = _settings(args)
    if args.list:
        for fault in settings.faults:
            print(f"{fault.env():40s} {fault.describe()}")
        return 0
    out, moved = results.writable_results_dir(args.out)
    if moved:
        print(f"dsbench: {moved}", file=sys.stderr)
    if out.suffix == ".json" and out.exists():
        raise UsageError(f"--out {out} already exists; dsbench never overwrites a result file")
    folder = out.parent if out.suffix == ".json" else out / results.machine_name()
    results.check_writable(folder)
    started = datetime.now(UTC)
    run_id = results.new_run_id(started)
    label = args.label or f"soak-{params['engine']}-zero{params['stage']}"
    name = out.stem if out.suffix == ".json" else f"{run_id}-{results.slug(label)}"
    stream = Stream(folder / f"{name}.soak.jsonl")
    env = collect_env(settings.device)
    workdir = Path(tempfile.mkdtemp(prefix="dsbench-soak-"))
    soak = Soak(settings, stream, workdir)
    stopped: Interrupted | None = None
    length = f"{settings.duration_s:g} s" if settings.duration_s else f"{settings.steps} steps"
    print(
        f"dsbench soak: {params['engine']} ZeRO-{params['stage']} {params['precision']}, "
        f"{settings.nproc} ranks, {length}, {len(settings.faults)} fault(s); samples go to "
        f"{stream.path}",
        flush=True,
    )
    try:
        stream.write("soak", run_id=run_id, params=params, settings=_describe(settings))
        soak.run()
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM from a scheduler: keep what finished
        stopped = as_interrupted(exc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    with signals_ignored():  # a second signal must not cost the file
        record = _document(soak, params, env, started, run_id, label, args, stopped)
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


def _document(
    soak: Soak,
    params: dict,
    env: dict,
    started: datetime,
    run_id: str,
    label: str,
    args: argparse.Namespace,
    stopped: Interrupted | None,
) -> RunRecord:
    from dsbench import hardware

    warmup = args.warmup if args.warmup is not None else report.default_warmup(soak)
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
    profile = hardware.get_profile((env.get("profile") or {}).get("name") or "cpu")
    record = results.new_run_doc(
        suite="soak", label=label, env=env, profile=profile, rows=rows, started=started
    )
    record = dataclasses.replace(record, run_id=run_id, purpose="soak", soak=section)
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
