"""Slurm: the batch script that runs one dsbench command on N nodes.

As torchtitan's and MLPerf's launchers do it: ``sbatch`` allocates the nodes, ``srun`` starts
one torchrun agent on each, and the agents rendezvous through torch's c10d at the first node of
the allocation (``scontrol show hostnames``), one rank per GPU, or ``tasks_per_node`` ranks on a
CPU node. The first node is reached at the address Slurm reaches it at (its ``NodeAddr``, which
is its name unless slurm.conf says otherwise). ``tests/test_slurm_cluster.py`` runs the script
on a real two-node Slurm.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from dsbench.errors import UsageError

OWN_OPTIONS = ("job-name", "nodes", "ntasks-per-node", "gpus-per-node", "partition", "time",
               "account", "output", "chdir")  # fmt: skip
"""The ``#SBATCH`` options the script sets itself; ``extra`` may not repeat them."""


@dataclass(frozen=True, kw_only=True)
class SlurmJob:
    """What the job asks Slurm for."""

    nodes: int
    gpus_per_node: int = 0
    """0: CPU nodes, ``tasks_per_node`` ranks on each."""
    tasks_per_node: int = 1
    partition: str | None = None
    time: str | None = None
    """Slurm's time limit (``30``, ``1:00:00``, ``1-0``)."""
    account: str | None = None
    extra: tuple[tuple[str, str], ...] = ()
    """More ``#SBATCH --KEY=VALUE`` lines, in order."""
    job_name: str = "dsbench"
    port: int = 29500
    """The c10d rendezvous port on the first node."""

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise UsageError(f"--nodes must be at least 1, got {self.nodes}")
        if self.gpus_per_node < 0:
            raise UsageError(f"--gpus-per-node must be 0 (CPU nodes) or more, got "
                             f"{self.gpus_per_node}")  # fmt: skip
        if self.tasks_per_node < 1:
            raise UsageError(f"ranks per node must be at least 1, got {self.tasks_per_node}")
        for key, _ in self.extra:
            if not re.fullmatch(r"[a-z][a-z0-9-]*", key):
                raise UsageError(f"--slurm-arg {key}: give an sbatch option name, e.g. "
                                 "--slurm-arg constraint=a100")  # fmt: skip
            if key in OWN_OPTIONS:
                raise UsageError(f"--slurm-arg {key}: dsbench sets it; valid: any sbatch option "
                                 f"but {', '.join(OWN_OPTIONS)}")  # fmt: skip

    @property
    def ranks_per_node(self) -> int:
        return self.gpus_per_node or self.tasks_per_node


def batch_script(job: SlurmJob, python: str, argv: Sequence[str], *, workdir: str,
                 output: str) -> str:  # fmt: skip
    """The sbatch script that runs ``python -m dsbench ARGV`` on every rank of ``job``, in
    ``workdir``, Slurm's output (``%j``: the job id) to ``output``."""
    lines = ["#!/bin/bash", f"#SBATCH --job-name={job.job_name}", f"#SBATCH --nodes={job.nodes}",
             "#SBATCH --ntasks-per-node=1"]  # fmt: skip
    if job.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={job.gpus_per_node}")
    for key, value in (("partition", job.partition), ("time", job.time),
                       ("account", job.account), *job.extra):  # fmt: skip
        if value is not None:
            lines.append(f"#SBATCH --{key}={value}")
    lines += [
        f"#SBATCH --output={output}",
        f"#SBATCH --chdir={workdir}",
        "set -euo pipefail",
        "# the rendezvous host: the allocation's first node, at the address Slurm reaches it at",
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "head_addr=$(scontrol show node \"$head\" | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p')",
        f"srun --kill-on-bad-exit=1 {shlex.quote(python)} -m torch.distributed.run "
        f'--nnodes="$SLURM_NNODES" --nproc-per-node={job.ranks_per_node} --rdzv-backend=c10d '
        f'--rdzv-endpoint="${{head_addr:-$head}}:{job.port}" --rdzv-id="$SLURM_JOB_ID" '
        f"-m dsbench {shlex.join(argv)}",
    ]
    return "\n".join(lines) + "\n"
