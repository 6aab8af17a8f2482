"""dsbench gpu-check's logic on fakes: steps in order under one budget, a failure logged and
passed over, a step that does not apply said so, the headline's ratios from the run's own rows,
impossible values flagged, and the output's file limits. (The whole check runs for real on the
CPU as `make gpu-check-rehearsal`, which `make test` runs.)"""

import json
import sys

import pytest

from dsbench.cli import main
from dsbench.gpu import check as gpucheck


def _plan(tmp_path, device="cpu"):
    return gpucheck.Plan(device=device, out=tmp_path, python=sys.executable, env={})


def _step(name, code, timeout=30):
    return gpucheck.Step(name, name, (timeout, timeout), lambda p: [p.python, "-c", code])


def test_a_failed_step_is_logged_and_the_next_still_runs(tmp_path, monkeypatch):
    steps = (
        _step("boom", "import sys; print('partial'); sys.exit('device fault: sticky')"),
        _step("ok", "print('fine')"),
        gpucheck.Step("gpu-only", "gpu-only", (30, 0), lambda p: "no GPU: not here"),
        _step("slow", "import time; time.sleep(30)", timeout=1),
    )
    monkeypatch.setattr(gpucheck, "STEPS", steps)
    monkeypatch.setattr(gpucheck, "bring_deepspeed", lambda env, py, log: "DeepSpeed: fake")
    assert gpucheck.check("cpu", tmp_path, budget_s=60) == 1
    doc = json.loads((tmp_path / "gpu-check.json").read_text())
    got = {s["name"]: (s["status"], s["why"]) for s in doc["steps"]}
    assert got == {
        "boom": ("failed", "exit 1: device fault: sticky"),
        "ok": ("passed", ""),
        "gpu-only": ("not reached", "no GPU: not here"),
        "slow": ("not reached", "the time budget was spent"),
    }
    log = (tmp_path / "gpu-check.log").read_text()
    assert "partial" in log and "device fault: sticky" in log and "fine" in log


def test_a_step_is_cut_to_what_is_left_of_the_budget(tmp_path):
    step = _step("sleepy", "import time; time.sleep(60)", timeout=600)
    with (tmp_path / "log").open("w") as log:
        out = gpucheck.run_step(step, _plan(tmp_path), gpucheck.time.monotonic() + 6, log)
    assert out.status == "failed" and out.why.startswith("timed out after ")
    assert out.seconds < 30


def _row(name, value, unit="GB/s", **params):
    return {"id": name, "name": name, "status": "ok", "value": value, "unit": unit,
            "params": params}  # fmt: skip


def _result(tmp_path, name, rows):
    path = tmp_path / "m" / f"{name}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"benchmarks": rows}))
    return f"m/{name}.json"


def test_headline_ratios_come_from_this_runs_rows_and_impossible_values_are_flagged(tmp_path):
    verify = _result(tmp_path, "verify", [
        _row("adamw", 4000.0, impl="triton", params=64_000_000),
        _row("adamw", 3200.0, impl="torch", params=64_000_000),
        _row("gemm", 700.0, "TFLOP/s", impl="triton", dtype="float16", size=4096),
        _row("gemm", 760.0, "TFLOP/s", impl="torch", dtype="float16", size=4096),
    ])  # fmt: skip
    over = _row("gemm", 1200.0, "TFLOP/s", impl="torch", dtype="float16", size=8192)
    over.update(pct_of_peak=121.3, peak={"measured": False})
    quick = _result(tmp_path, "quick", [over])
    outcomes = [
        gpucheck.Outcome("verify", "", "passed", files=[verify]),
        gpucheck.Outcome("quick", "", "passed", files=[quick]),
    ]
    sweep = {"float16": {"tflops": 800.0, "shape": "8192x8192x8192"}}
    ceilings = {"copy_bandwidth_gbps": 3800.0, "shape_sweep": sweep}
    lines = {(h.what, h.against): h for h in gpucheck.headline(outcomes, ceilings, tmp_path)}
    copy = lines[("triton AdamW 64,000,000 params", "copy bandwidth")]
    assert copy.ratio == pytest.approx(4000 / 3800) and copy.flag.startswith("above the measured")
    assert "not a bug" in copy.flag  # AdamW's streams against copy's: only 1.5x cannot be true
    wrong = gpucheck.Headline("AdamW", 6000.0, "GB/s", "copy bandwidth", 6000 / 3800)
    assert (
        gpucheck._impossible(wrong, {})
        == "over 1.5x the measured copy bandwidth: a wrong byte count"
    )
    fused = lines[("triton AdamW 64,000,000 params", "torch fused AdamW")]
    assert fused.ratio == pytest.approx(1.25) and not fused.flag
    assert lines[("triton fp16 GEMM 4096", "torch.matmul")].ratio == pytest.approx(700 / 760)
    sweep = lines[("torch float16 GEMM 8192", "best of the shape sweep (8192x8192x8192)")]
    assert sweep.ratio == pytest.approx(1.5) and "understated" in sweep.flag
    peak = lines[("gemm", "% of datasheet peak")]
    assert peak.ratio == 121.3 and peak.flag == "above datasheet peak: cannot be true"


def test_noise_is_the_pooled_launch_spread_of_the_aa_pair(tmp_path):
    import math

    base = _result(tmp_path, "base", [dict(_row("adamw", 10.0), launch_values=[10.0, 11.0])])
    cont = _result(tmp_path, "cont", [dict(_row("adamw", 10.5), launch_values=[10.0, 11.5])])
    aa = gpucheck.Outcome("aa", "", "passed", files=[base, cont])
    (line,) = gpucheck._noise(aa, tmp_path)
    logs = [[math.log(10), math.log(11)], [math.log(10), math.log(11.5)]]
    ss = sum((x - sum(s) / 2) ** 2 for s in logs for x in s)
    assert line.ratio == pytest.approx(math.expm1(math.sqrt(ss / 2)) * 100)
    assert line.value == pytest.approx(1.05)


def test_output_over_its_limits_is_named(tmp_path):
    for i in range(9):
        (tmp_path / f"f{i}.json").write_text("{}")
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c" / "deep.json").write_text("{}")
    problems = gpucheck.file_problems(tmp_path)
    assert problems == ["10 files (at most 8)", "a/b/c/deep.json is more than two folders deep"]


def test_gpu_marked_test_files_are_found_on_the_source():
    files = gpucheck.gpu_test_files()
    assert "tests/test_cuda_kernels_numerics.py" in files
    assert "tests/test_gpucheck.py" not in files


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "x").write_text("")
    assert main(["gpu-check", "--out", str(tmp_path)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert main(["gpu-check", "--budget", "-1"]) == 2
    assert "--budget -1: give a positive number of seconds" in capsys.readouterr().err
