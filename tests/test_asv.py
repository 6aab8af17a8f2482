"""asv discovers every benchmark, and a real `asv run --python=same --quick` records a value."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ASV = shutil.which("asv", path=str(Path(sys.executable).parent))


def _head() -> str | None:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


@pytest.fixture(scope="module")
def asv_setup(tmp_path_factory):
    if ASV is None:
        pytest.skip("asv is not installed in this environment")
    if _head() is None:
        pytest.skip("not a git checkout: asv needs a commit")
    tmp = tmp_path_factory.mktemp("asv")
    text = (ROOT / "asv.conf.json").read_text()
    conf = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))
    conf.update(
        repo=str(ROOT),
        benchmark_dir=str(ROOT / "benchmarks"),
        results_dir=str(tmp / "results"),
        html_dir=str(tmp / "html"),
        env_dir=str(tmp / "env"),
    )
    cfg = tmp / "asv.conf.json"
    cfg.write_text(json.dumps(conf))
    env = dict(os.environ, HOME=str(tmp), DSBENCH_ASV_SUITE="smoke")
    subprocess.run(
        [ASV, "machine", "--yes", "--machine", "testbox", "--config", str(cfg)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return cfg, env, tmp


def _asv(args, asv_setup):
    cfg, env, _ = asv_setup
    return subprocess.run(
        [ASV, *args, "--config", str(cfg)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_asv_check_discovers_every_benchmark(asv_setup):
    proc = _asv(["check", "--python=same"], asv_setup)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "Error" not in out


def test_asv_run_quick_records_a_measurement(asv_setup):
    proc = _asv(
        [
            "run",
            "--python=same",
            "--quick",
            "--set-commit-hash",
            _head(),
            "--machine",
            "testbox",
            "--show-stderr",
            "-b",
            r"Adamw\.track_bandwidth",
        ],
        asv_setup,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _, _, tmp = asv_setup
    files = [p for p in (tmp / "results" / "testbox").glob("*.json") if p.name != "machine.json"]
    assert len(files) == 1
    result = json.loads(files[0].read_text())["results"]["bench_kernels.Adamw.track_bandwidth"]
    (value,) = result[0]  # one parameter combination in the smoke suite
    assert value > 0  # GB/s, measured by dsbench's timing core
    benchmarks = json.loads((tmp / "results" / "benchmarks.json").read_text())
    assert benchmarks["bench_kernels.Adamw.track_bandwidth"]["unit"] == "GB/s"
    assert {
        "bench_comm.Allreduce.track_busbw",
        "bench_kernels.Gemm.track_throughput",
        "bench_kernels.Adamw.time_call",
    } <= set(benchmarks)
