"""End to end through the installed console script: run a tiny suite twice, then compare."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DSBENCH = shutil.which("dsbench", path=str(Path(sys.executable).parent)) or "dsbench"


def dsbench(*args, cwd, check=True):
    env = dict(os.environ, DSBENCH_RESULTS=str(cwd / "results"), DSBENCH_MACHINE="testbox")
    try:  # a smoke run takes ~25 s on a 2-core box: past 300 s, show where it was
        proc = subprocess.run(
            [DSBENCH, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-3000:]
        raise AssertionError(f"dsbench {' '.join(args)} still running after 300 s:\n{tail}") from e
    if check and proc.returncode != 0:
        raise AssertionError(f"dsbench {' '.join(args)} -> {proc.returncode}\n{proc.stderr}")
    return proc


SECOND = "^(adamw|gemm)"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("e2e")
    first = dsbench("run", "--suite", "smoke", "--label", "first", cwd=cwd)
    # the second run only needs cases of the first to compare with: the kernels (no ranks)
    second = dsbench("run", "--suite", "smoke", "--filter", SECOND, "--label", "second", cwd=cwd)
    return cwd, first, second


def test_run_writes_a_complete_result_file(two_runs):
    cwd, first, _ = two_runs
    files = sorted((cwd / "results" / "testbox").glob("*.json"))
    assert len(files) == 2
    doc = json.loads(files[0].read_text())
    assert doc["schema"] == "dsbench-result" and doc["label"] == "first"
    assert doc["env"]["backend"] == "cpu" and doc["profile"]["name"] == "cpu"
    names = {row["name"] for row in doc["benchmarks"]}
    assert names == {"adamw", "gemm", "allreduce", "reduce_scatter", "allgather"}
    impls = {row["params"]["impl"] for row in doc["benchmarks"] if row["name"] == "allgather"}
    assert impls == {"native", "ring", "shm"}  # shm: ranks of one host, CPU only
    for row in doc["benchmarks"]:
        assert row["status"] == "ok", row
        assert row["direction"] == "higher" and row["value"] > 0
        assert len(row["samples"]) == row["stats"]["n"] >= 8
        assert row["memory"]["host_peak_rss_bytes"] > 0
        assert row["peak"]["measured"] is True
        in_cache = (row["notes"].get("residency") or {}).get("kind") in ("resident", "partly")
        assert (row["pct_of_peak"] is None) == in_cache  # a cache-resident row has no DRAM share
    coll = next(r for r in doc["benchmarks"] if r["name"] == "allreduce")
    assert coll["metrics"]["algbw"]["value"] == pytest.approx(coll["value"])  # 2 ranks: factor 1
    assert "no GPU visible to torch: running on the CPU" in first.stderr
    assert "median ± 99% CI" in first.stdout
    assert "no earlier run of this suite" in first.stdout


def test_second_run_prints_comparison_with_the_first(two_runs):
    _, _, second = two_runs
    flat = " ".join(second.stdout.split())  # the terminal format wraps its notes
    assert "compared with the newest earlier run on this hardware: run" in flat
    assert "label 'first'" in flat
    compared = second.stdout.split("compared with the newest earlier run")[1]
    assert "adamw[" in compared and "inconclusive" in compared  # the terminal table
    assert max(len(line) for line in second.stdout.splitlines()) <= 100


def test_compare_two_runs(two_runs):
    cwd, _, _ = two_runs
    proc = dsbench(
        "compare",
        "--baseline",
        "first",
        "--contender",
        "label=second",
        "--format",
        "markdown",
        cwd=cwd,
    )
    assert "| benchmark" in proc.stdout and "gemm[" in proc.stdout
    # one launch a side and no noise figure for this machine: nothing can be decided
    (first_file,) = [p for p in (cwd / "results" / "testbox").glob("*-first.json")]
    ids = [row["id"] for row in json.loads(first_file.read_text())["benchmarks"]]
    both = [i for i in ids if re.match(SECOND, i)]
    assert 0 < len(both) < len(ids)
    summary = proc.stdout.splitlines()[-1]
    assert summary == (
        f"0 better, 0 worse, 0 unchanged, {len(both)} inconclusive (99% interval of the ratio "
        f"against x1.05, rounds = launches), {len(ids) - len(both)} on one side only"
    ), summary
    csv = dsbench("compare", "--baseline", "first", "--format", "csv", cwd=cwd)
    assert csv.stdout.splitlines()[0] == (
        "benchmark,unit,baseline,contender,ratio,99% interval,change,basis"
    )
    assert len(csv.stdout.splitlines()) == 1 + len(ids)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--suite", "qiuck"], "unknown suite 'qiuck' (did you mean 'quick'?)"),
        (["run", "--filter", "nothing-matches"], "matches no benchmark in suite 'quick'"),
        (["run", "--device", "tpu"], "invalid choice: 'tpu'"),
        (["compare", "--baseline", "nope"], "matches no run"),
        (["profiles", "a100"], "unknown profile 'a100'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_input_one_line_exit_2(two_runs, args, needle):
    cwd, _, _ = two_runs
    before = sorted((cwd / "results").rglob("*"))
    proc = dsbench(*args, cwd=cwd, check=False)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert sorted((cwd / "results").rglob("*")) == before
