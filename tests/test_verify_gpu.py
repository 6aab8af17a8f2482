"""The GPU verification script, dry-run on the CPU: every check and timing path it takes on a GPU
runs here with the implementations a CPU has (the torch references), so the script cannot rot
between GPU sessions. (On a GPU: `dsbench verify-gpu`.) Faults are faked: a synchronize that
raises, a timing step that raises; the result file must still be written."""

import json
import subprocess
import sys

import pytest
import torch


@pytest.mark.slow
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


# ------------------------------------------------------------------------------ faults


def _one_check(monkeypatch):
    """verify-gpu with one fast check (adamw, torch) and one other implementation."""
    from types import SimpleNamespace

    from dsbench.gpu import verify as verify_gpu

    impl = SimpleNamespace(available=lambda device: (True, ""), load=lambda: None)
    monkeypatch.setattr(verify_gpu.registry, "names", lambda op: ["torch", "triton"])
    monkeypatch.setattr(verify_gpu.registry, "get", lambda op, name: impl)
    monkeypatch.setattr(
        verify_gpu,
        "CHECKS",
        {"adamw": lambda name, fn: [verify_gpu.Check("adamw", name, "fake", True)]},
    )
    return verify_gpu


def test_a_fault_at_the_synchronize_is_a_failed_check(monkeypatch):
    """A sticky asynchronous CUDA fault reported by the synchronize after an implementation's
    checks: a failed check for it, and the next implementation is still checked."""
    verify_gpu = _one_check(monkeypatch)

    def synchronize(device=None):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(verify_gpu, "DEVICE", "cuda")
    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    progress = verify_gpu.Progress()
    verify_gpu.verify(progress)
    got = [(c.impl, c.case, c.ok) for c in progress.checks]
    assert got == [
        ("torch", "fake", True),
        ("torch", "build/run", False),
        ("triton", "fake", True),
        ("triton", "build/run", False),
    ]
    assert "illegal memory access" in progress.checks[1].detail


@pytest.mark.parametrize("where", ["profile", "second timing"])
def test_a_fault_after_the_checks_still_writes_the_result_file(monkeypatch, tmp_path, where):
    """An exception escaping the timing step (no matched profile; a fault in the second timing):
    the result file holds what completed and a failed row naming the fault; exit status 1."""
    from dsbench.errors import UsageError
    from dsbench.hardware import get_profile
    from dsbench.measure import runner

    verify_gpu = _one_check(monkeypatch)
    run_case, cases = runner.run_case, []

    def profile_for(env, ctx, warn=None):
        if where == "profile":
            raise UsageError("no hardware profile matched this device")
        return get_profile("cpu")

    def faulty_run_case(*args):
        cases.append(args[1])
        if len(cases) == 2:
            raise RuntimeError("CUDA error: unspecified launch failure")
        return run_case(*args)

    monkeypatch.setattr(runner, "profile_for", profile_for)
    monkeypatch.setattr(runner, "run_case", faulty_run_case)
    monkeypatch.setattr(verify_gpu, "timed_cases", lambda quick: [("copy", {"size": 2**12})] * 3)
    assert verify_gpu.run(out=str(tmp_path), quick=True, device="cpu") == 1
    (path,) = tmp_path.rglob("*.json")
    doc = json.loads(path.read_text())
    rows = {r["id"]: r for r in doc["benchmarks"]}
    assert rows["verify.adamw[impl=torch,case=fake]"]["status"] == "ok"
    fault = rows["verify.run[impl=verify-gpu,case=timing step]"]
    assert fault["status"] == "failed" and list(rows)[-1] == fault["id"]
    if where == "profile":
        assert (
            fault["error"] == "dsbench.errors.UsageError: no hardware profile matched this device"
        )
        assert doc["profile"]["name"] == "cpu" and cases == []
    else:
        assert fault["error"] == "RuntimeError: CUDA error: unspecified launch failure"
        assert rows["copy[size=4096]"]["status"] == "ok" and len(cases) == 2
    assert doc["env"]["backend"] == "cpu"


def test_the_goals_are_ratios_of_this_runs_rows():
    """``targets`` reads each timing row's case through :class:`Timed`: the first ok row of a
    case counts (the scaler variant of Triton AdamW is not its plain row), a failed row none."""
    from dsbench.gpu.verify import targets
    from dsbench.records import Row, case_id

    def row(name, value, **params):
        ok = value is not None
        return Row(id=case_id(name, params), name=name, params=params,
                   status="ok" if ok else "failed", metric="m", unit="GB/s",
                   direction="higher", value=value if ok else 0.0)  # fmt: skip

    rows = [
        row("copy", 100.0, size=2**30),
        row("adamw", 90.0, impl="triton", params=64_000_000),
        row("adamw", 60.0, impl="torch", params=64_000_000),
        row("adamw", 10.0, impl="triton", params=64_000_000, scaler=True),
        row("adamw", None, impl="triton", params=256_000_000),
        row("gemm", 100.0, impl="torch", dtype="float16", size=4096),
        row("gemm", 95.0, impl="triton", dtype="float16", size=4096),
        row("gemm", None, impl="cuda", dtype="float16", size=4096),
    ]
    assert targets(rows) == [
        ("Triton Adam 64M vs copy bandwidth", "90.0%", ">= 85%"),
        ("Triton Adam 64M vs torch fused AdamW", "1.50x", "> 1"),
        ("triton GEMM float16 4096^3 vs torch.matmul", "95.0%", ">= 90%"),
    ]
