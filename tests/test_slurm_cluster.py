"""The local two-node Slurm cluster (tests/_slurm_cluster.py) behaves as the launcher for
``--launcher slurm`` will need: one task per node, a folder both nodes share, a batch job's
exit status, and a cancelled job's state; and :mod:`dsbench.procs.slurm`'s batch script trains
on its two nodes as two spawned ranks do. Against the real Slurm daemons, not a mock; without
root or Slurm these skip saying why (fail when $CI is set)."""

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsbench.errors import UsageError
from dsbench.procs.slurm import SlurmJob, batch_script
from tests import _slurm_cluster as slurm_cluster

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = slurm_cluster.unavailable()
    if why:
        if os.environ.get("CI"):
            pytest.fail(why + " (required when CI is set)")
        pytest.skip(why)
    with slurm_cluster.LocalSlurm(tmp_path_factory.mktemp("slurm")) as c:
        yield c


def test_two_nodes_come_up_idle(cluster):
    assert cluster.idle_nodes() == set(slurm_cluster.NODES)


def test_srun_runs_one_task_on_each_node(cluster):
    task = "echo $SLURMD_NODENAME $SLURM_PROCID $SLURM_NNODES"
    out = cluster.run("srun", "-N", "2", "-n", "2", "--label", "bash", "-c", task).stdout
    tasks = sorted(line.split(": ", 1)[1] for line in out.splitlines())
    assert tasks == ["n1 0 2", "n2 1 2"], out


def test_a_batch_job_on_two_nodes_writes_into_one_shared_folder(cluster, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH -N 2\n#SBATCH -n 2\n"
                      f"srun bash -c 'hostname > {tmp_path}/rank-$SLURM_PROCID.txt'\n")  # fmt: skip
    job = cluster.run("sbatch", "--wait", "--parsable", str(script), cwd=tmp_path).stdout.strip()
    assert sorted(p.name for p in tmp_path.glob("rank-*.txt")) == ["rank-0.txt", "rank-1.txt"]
    fields = cluster.job(job)
    assert fields["JobState"] == "COMPLETED" and fields["NodeList"] == "n[1-2]", fields


def test_a_failing_job_reports_its_exit_code(cluster, tmp_path):
    got = cluster.run("sbatch", "--wait", "--parsable", "--wrap", "exit 3", check=False,
                      cwd=tmp_path)  # fmt: skip
    assert got.returncode == 3, got.stderr
    fields = cluster.job(got.stdout.strip())
    assert fields["JobState"] == "FAILED" and fields["ExitCode"] == "3:0", fields


def test_a_cancelled_job_is_told_apart(cluster, tmp_path):
    job = cluster.run("sbatch", "--parsable", "--wrap", "sleep 120", cwd=tmp_path).stdout.strip()
    deadline = time.monotonic() + 30
    while cluster.job(job)["JobState"] != "RUNNING":
        assert time.monotonic() < deadline, cluster.job(job)
        time.sleep(0.3)
    cluster.run("scancel", job)
    while cluster.job(job)["JobState"] != "CANCELLED":
        assert time.monotonic() < deadline, cluster.job(job)
        time.sleep(0.3)


def test_an_unknown_partition_is_refused_with_slurms_words(cluster, tmp_path):
    got = cluster.run("sbatch", "--partition", "nosuch", "--wrap", "true", check=False,
                      cwd=tmp_path)  # fmt: skip
    assert got.returncode != 0 and "invalid partition" in got.stderr.lower(), got.stderr


CPU_CONFIG = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
              "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2},
              "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}  # fmt: skip


def test_the_batch_script_asks_for_what_the_job_says():
    job = SlurmJob(nodes=4, gpus_per_node=8, partition="a100", time="1:00:00", account="ml",
                   extra=(("constraint", "mi250x"),))  # fmt: skip
    text = batch_script(job, "/opt/py/bin/python", ["run", "--suite", "quick"],
                        workdir="/shared/w", output="/shared/w/dsbench-%j.out")  # fmt: skip
    sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert sbatch == ["#SBATCH --job-name=dsbench", "#SBATCH --nodes=4",
                      "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
                      "#SBATCH --partition=a100", "#SBATCH --time=1:00:00", "#SBATCH --account=ml",
                      "#SBATCH --constraint=mi250x", "#SBATCH --output=/shared/w/dsbench-%j.out",
                      "#SBATCH --chdir=/shared/w"]  # fmt: skip
    assert "--nproc-per-node=8 --rdzv-backend=c10d" in text
    assert text.rstrip().endswith("-m dsbench run --suite quick")


@pytest.mark.parametrize(
    ("kw", "says"),
    [({"nodes": 0}, "--nodes must be at least 1, got 0"),
     ({"nodes": 2, "gpus_per_node": -1}, "--gpus-per-node must be 0"),
     ({"nodes": 2, "extra": (("nodes", "3"),)}, "--slurm-arg nodes: dsbench sets it; valid:"),
     ({"nodes": 2, "extra": (("Bad Key", "1"),)}, "give an sbatch option name")],
)  # fmt: skip
def test_a_bad_job_is_one_line(kw, says):
    with pytest.raises(UsageError) as got:
        SlurmJob(**kw)
    assert says in str(got.value) and "\n" not in str(got.value)


def _losses(text: str) -> list[str]:
    return re.findall(r"step\s+\d+\s+loss (\S+)", text)


def test_two_nodes_train_as_two_spawned_ranks_do(cluster, tmp_path):
    """``dsbench train`` through the batch script on n1 and n2 (one rank each, c10d at n1)
    prints the losses that ``--nproc 2`` on this machine prints."""
    config = tmp_path / "ds_config.json"
    config.write_text(json.dumps(CPU_CONFIG))
    argv = ["train", "--config", str(config), "--model", "mlp", "--steps", "3"]
    job = SlurmJob(nodes=2, port=_free_port())
    script = tmp_path / "job.sh"
    script.write_text(batch_script(job, sys.executable, argv, workdir=str(tmp_path),
                                   output=str(tmp_path / "job-%j.out")))  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    local = subprocess.run([sys.executable, "-m", "dsbench", *argv, "--nproc", "2"], env=env,
                           capture_output=True, text=True, timeout=240, cwd=tmp_path)  # fmt: skip
    assert local.returncode == 0, local.stderr[-2000:]
    got = cluster.run("sbatch", "--wait", "--parsable", str(script), check=False, timeout=240,
                      cwd=tmp_path, env={"PYTHONPATH": str(ROOT)})  # fmt: skip
    (out,) = tmp_path.glob("job-*.out")
    assert got.returncode == 0, out.read_text()[-3000:]
    text = out.read_text()
    assert "on 2 rank(s)" in text, text[-3000:]
    assert len(_losses(text)) == 3 and _losses(text) == _losses(local.stdout), text[-3000:]
