"""The local two-node Slurm cluster (tests/_slurm_cluster.py) behaves as the launcher for
``--launcher slurm`` will need: one task per node, a folder both nodes share, a batch job's
exit status, and a cancelled job's state. Against the real Slurm daemons, not a mock; without
root or Slurm these skip saying why (fail when $CI is set)."""

import os
import time

import pytest

from tests import _slurm_cluster as slurm_cluster

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
