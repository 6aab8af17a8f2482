"""``dsbench soak``: a long training run that records, per rank and every K steps, resident
memory (and device memory on GPUs), step time, loss and loss scale, and reports their drift,
loss anomalies and, with ``--faults``, how failures were detected and resumed::

    dsbench soak --config ds_config.json --model mlp --steps 5000
    dsbench soak --config ds_config.json --model mlp --steps 1000 --faults kill=20,hang=3,term=2

It writes a result file (benchmark kind ``soak``; ``compare`` and ``publish`` read it) and, as
it goes, a JSONL stream of every sample beside it. SIGINT or SIGTERM stops the ranks, writes the
result file with what finished (``"interrupted"``), removes the checkpoints and exits 130 or
143. The soak runs in :mod:`dsbench.soak.session`.
"""

from __future__ import annotations

import argparse

from dsbench.cli.train import add_job_arguments, job_options
from dsbench.soak import report
from dsbench.soak.session import (
    DEFAULT_HANG_TIMEOUT,
    DEFAULT_SAMPLE_EVERY,
    DEFAULT_STEPS,
    SAVES_WITH_FAULTS,
    SoakOptions,
    soak,
)


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


def run(args: argparse.Namespace) -> int:
    return soak(
        SoakOptions(
            job=job_options(args),
            steps=args.steps,
            duration=args.duration,
            faults=args.faults,
            fault_seed=args.fault_seed,
            checkpoint_every=args.checkpoint_every,
            sample_every=args.sample_every,
            warmup=args.warmup,
            hang_timeout_s=args.hang_timeout,
            out=args.out,
            list_faults=args.list,
            label=args.label,
        )
    )
