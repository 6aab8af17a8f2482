"""The GPU verification script, dry-run on the CPU: every check and timing path it takes on a GPU
runs here with the implementations a CPU has (the torch references), so the script cannot rot
between GPU sessions. (On a GPU: `dsbench verify-gpu`.)"""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_dry_run_checks_times_and_writes_a_result_file(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsbench",
            "verify-gpu",
            "--device",
            "cpu",
            "--quick",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "FAILED" not in proc.stdout
    (path,) = tmp_path.rglob("*.json")
    doc = json.loads(path.read_text())
    rows = {r["id"]: r for r in doc["benchmarks"]}
    checks = [r for r in rows.values() if r["name"].startswith("verify.")]
    assert {r["name"] for r in checks} == {"verify.adamw", "verify.gemm", "verify.reduce_add"}
    assert all(r["status"] == "ok" for r in checks)
    assert "verify.adamw[impl=torch,case=inf in scaled grads skips the step]" in rows
    assert rows["adamw[impl=torch,params=1000000]"]["status"] == "ok"
    assert doc["env"]["backend"] == "cpu"
