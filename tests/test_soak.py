"""``dsbench soak``: the drift fit on synthetic series (flat, growing, noisy, and the interval's
coverage under autocorrelated noise), the fault specs and schedule, a short fault soak in which
a kill at a step, a kill during a save, a hang and a SIGTERM are each detected, named and
resumed bit for bit, its result file loaded and compared, a soak stopped by SIGTERM, and one
that ends at its --duration."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dsbench import results
from dsbench.cli import main
from dsbench.errors import UsageError
from dsbench.soak import plan
from dsbench.stats import drift_verdict, trend
from tests.test_reliability import _alive, _children, _orphan_semaphores

BIN = Path(sys.executable).parent
CONFIG = {
    "train_batch_size": 16,
    "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
    "zero_optimization": {"stage": 2},
    "bf16": {"enabled": True},
}


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(CONFIG))
    return path


# ---------------------------------------------------------------------------- the drift fit


def _ar1(rng, n: int, phi: float, sd: float) -> np.ndarray:
    e, z = np.zeros(n), rng.normal(0, sd, n)
    for i in range(n):
        e[i] = (phi * e[i - 1] if i else 0.0) + z[i]
    return e


def test_a_flat_series_is_flat_a_growing_one_growing_and_a_noisy_one_inconclusive():
    rng = np.random.default_rng(0)
    steps = np.arange(100, 5000, 10)
    x = steps / 1000
    flat = 900 + rng.normal(0, 0.05, len(x))  # MiB, no trend
    t = trend(x, flat)
    assert drift_verdict(t, 1.0) == ("flat", "") and t.low < 0 < t.high
    growing = 900 + 3.0 * x + rng.normal(0, 0.05, len(x))  # 3 MiB per 1,000 steps
    t = trend(x, growing)
    assert drift_verdict(t, 1.0) == ("growing", "") and t.low < 3.0 < t.high
    noisy = 900 + 1.0 * x + rng.normal(0, 5.0, len(x))  # on the threshold, in wide noise
    verdict, why = drift_verdict(trend(x, noisy), 1.0)
    assert verdict == "inconclusive" and "reaches across the threshold 1" in why
    # a one-off step of 4 KiB in resident memory is no leak
    step = 900 + np.where(x > 2.5, 4 / 1024, 0.0)
    assert drift_verdict(trend(x, step), 1.0)[0] == "flat"
    # constant memory: zero slope, zero-width interval
    t = trend(x, np.full(len(x), 900.0))
    assert (t.slope, t.low, t.high) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(("phi", "most_misses"), [(0.0, 0.025), (0.5, 0.025), (0.9, 0.05)])
def test_the_slope_interval_covers_the_true_slope_under_autocorrelated_noise(phi, most_misses):
    """A 99% interval that ignored the correlation between neighbouring samples would miss the
    true slope in most series here; batch means and the lag-1 correction keep it near 1%."""
    rng = np.random.default_rng(1)
    x = np.arange(500) / 100
    misses = 0
    for _ in range(400):
        t = trend(x, 3 + 0.2 * x + _ar1(rng, len(x), phi, 1.0))
        misses += t.low is None or not (t.low <= 0.2 <= t.high)
    assert misses / 400 <= most_misses


def test_too_few_independent_points_give_no_interval():
    t = trend([0, 1, 2], [0.0, 1.0, 0.5])
    assert t.points == 3 and t.low is None
    x = np.arange(12)
    t = trend(x, np.sin(x / 11 * np.pi))  # one hump: neighbouring residuals alike
    assert t.r1 > 0.5 and t.n_eff < 3 and t.low is None
    assert drift_verdict(t, 1.0)[0] == "inconclusive"
    with pytest.raises(ValueError, match="at least 3 points"):
        trend([1, 2], [1, 2])


# ---------------------------------------------------------------------------- specs, schedule


def test_fault_and_duration_specs():
    assert plan.parse_faults("kill=20, hang=3,term=2") == {"kill": 20, "hang": 3, "term": 2}
    assert plan.parse_faults("kill=0") == {}
    for bad in ("kil=2", "kill", "kill=x", "kill=-1"):
        with pytest.raises(UsageError, match=r"expected ACTION=COUNT\[,ACTION=COUNT\.\.\.\]"):
            plan.parse_faults(bad)
    with pytest.raises(UsageError, match="'kill' is given twice"):
        plan.parse_faults("kill=1,kill=2")
    assert plan.parse_duration("2h") == 7200 and plan.parse_duration("1h30m") == 5400
    assert plan.parse_duration("45s") == 45 and plan.parse_duration("90") == 90
    for bad in ("2x", "", "h", "-5", "0m"):
        with pytest.raises(UsageError, match="--duration"):
            plan.parse_duration(bad)


def test_the_schedule_is_seeded_in_order_and_puts_a_third_of_the_kills_in_saves():
    counts = {"kill": 20, "hang": 3, "term": 2}
    faults = plan.schedule(counts, steps=1000, world=2, engine="deepspeed", save_every=40, seed=7)
    again = plan.schedule(counts, steps=1000, world=2, engine="deepspeed", save_every=40, seed=7)
    assert faults == again
    assert [f.progress for f in faults] == sorted({f.progress for f in faults})  # distinct
    kinds = [(f.action, f.point == "step") for f in faults]
    assert kinds.count(("kill", False)) == 7 and kinds.count(("kill", True)) == 13
    assert kinds.count(("hang", True)) == 3 and kinds.count(("term", True)) == 2
    for f in faults:
        if f.point != "step":
            assert f.step % 40 == 0 and f.point in plan.SAVE_POINTS["deepspeed"]
            assert f.rank == 0 or f.point not in plan.RANK0_POINTS
        assert (f.rank is None) == (f.action == "term") and 1 <= f.step <= 1000
    with pytest.raises(UsageError, match=r"room for 12 \(9 steps and 3 saves\); give more --steps"):
        plan.schedule({"hang": 12}, steps=10, world=2, engine="dsbench", save_every=4, seed=0)


def test_bad_specs_are_one_line_exit_2(config, capsys):
    base = ["soak", "--config", str(config), "--model", "mlp"]
    cases = [
        (["--faults", "kill=2,explode=1"], "--faults 'explode=1': expected ACTION=COUNT"),
        (["--duration", "2 hours"], "--duration '2 hours': expected a time such as 2h"),
        (["--duration", "1h", "--faults", "kill=1"], "--faults needs --steps, not --duration"),
        (["--duration", "1h", "--steps", "5"], "not allowed with argument"),
        (["--steps", "50", "--faults", "kill=1", "--checkpoint-every", "0"],
         "--faults needs checkpoints"),
    ]  # fmt: skip
    for extra, needle in cases:
        assert main(base + extra) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err


def test_restarts_are_judged_bit_for_bit_and_a_nondeterministic_run_is_named(tmp_path):
    """From launches as a soak records them: a restart that continues with the reference's
    losses is a success, one that differs in a single bit is not, and a first launch that
    already differs (from step 0, like the reference) says training is not deterministic."""
    from dsbench.soak.report import fault_outcomes
    from dsbench.soak.run import Launch, Settings, Soak, Stream

    kill = plan.Fault(action="kill", point="step", step=3, rank=1)
    settings = Settings(model="mlp", config={}, engine="dsbench", nproc=2, device="cpu", steps=6,
                        duration_s=None, sample_every=1, checkpoint_every=2, faults=(kill,),
                        hang_timeout_s=5)  # fmt: skip
    soak = Soak(settings, Stream(tmp_path / "s.jsonl"), tmp_path, say=lambda m: None)
    reference = {s: -1.5 * s for s in range(6)}
    fired = [{"action": "kill", "point": "step", "rank": 1, "step": 3, "time": 10.0}]
    soak.launches = [
        Launch(run="reference", index=0, fault=None, resume=False, started=0.0, first_step=0,
               losses=dict(reference), ended=1.0),
        Launch(run="faulted", index=0, fault=kill, resume=False, started=9.0, first_step=0,
               losses={s: reference[s] for s in range(3)}, ended=10.25, fired=fired,
               failure="rank 1 of 2 killed by SIGKILL at step 3; after that, rank 0 failed: x"),
        Launch(run="faulted", index=1, fault=None, resume=True, started=11.0, first_step=2,
               losses={s: reference[s] for s in range(2, 6)}, ended=12.0),
    ]  # fmt: skip
    out = fault_outcomes(soak)
    assert out["deterministic"] == {"checked_steps": 3, "first_difference": None}
    assert (out["named"], out["faults"][0]["detection_s"]) == (1, 0.25)
    assert [r["ok"] for r in out["resumes"]] == [True] and out["resume_success_rate"] == 100.0
    soak.launches[2].losses[4] = float(np.nextafter(reference[4], 0.0))  # one bit off
    (resume,) = fault_outcomes(soak)["resumes"]
    assert not resume["ok"] and resume["why"].startswith("step 4: loss -5.99999")
    soak.launches[1].losses[1] = -1.25
    assert fault_outcomes(soak)["deterministic"]["first_difference"] == 1


# ---------------------------------------------------------------------------- soaks


def _soak(config, out, *args, **popen):
    cmd = [str(BIN / "dsbench"), "soak", "--nproc", "2", "--config", str(config), "--model",
           "mlp", "--out", str(out), *args]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


@pytest.mark.slow
def test_a_fault_soak_detects_names_and_resumes_every_failure_bit_for_bit(config, tmp_path):
    out = tmp_path / "results"
    # 20 steps hold the four faults (the launches, not the steps, take the time)
    proc = _soak(config, out, "--steps", "20", "--checkpoint-every", "5", "--faults",
                 "kill=2,hang=1,term=1", "--fault-seed", "8", "--hang-timeout", "3",
                 "--sample-every", "5")  # fmt: skip
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    (path,) = out.glob("testbox/*.json")
    run = results.read_run(path)  # a valid result file
    section = run.record.to_json()["soak"]
    assert section["status"] == "complete" and not section["problems"]
    faults = section["faults"]
    assert [f["spec"] for f in faults["faults"]] == [
        "hang@step:rank=0:step=4",
        "kill@step:rank=0:step=7",
        "kill@save.shard:rank=0:step=15",
        "term@step:step=17",
    ]
    assert all(f["detected"] and f["named"] for f in faults["faults"])
    messages = [f["message"] for f in faults["faults"]]
    assert messages[0].startswith("rank 0 of 2 stopped responding at step 4")
    assert messages[2].startswith(
        "rank 0 of 2 killed by SIGKILL at step 14 (saving the checkpoint of step 15)"
    )
    assert messages[3].startswith("rank 0 of 2 killed by SIGTERM at step 17; rank 1 of 2")
    assert faults["injected"] == {"kill": 2, "hang": 1, "term": 1}
    assert faults["during_saves"] == 1 and faults["real_failures"] == []
    hang = faults["faults"][0]["detection_s"]
    assert 3 <= hang < 30 and all(f["detection_s"] < 30 for f in faults["faults"])
    assert faults["resumes_attempted"] == 4 and faults["resumes_identical"] == 4
    assert [r["from_step"] for r in faults["resumes"]] == [0, 5, 10, 15]
    assert faults["deterministic"] == {"checked_steps": 4, "first_difference": None}
    assert "bit-identical 4 (100.0%)" in stdout
    rows = {k: r.to_json() for k, r in run.rows.items()}
    assert (
        rows["soak.resume_success[engine=dsbench,model=mlp,nproc=2,precision=bf16,stage=2]"][
            "value"
        ]
        == 100.0
    )
    for rank in (0, 1):
        memory = rows[f"soak.memory[engine=dsbench,model=mlp,nproc=2,precision=bf16,rank={rank},"
                      "stage=2]"]  # fmt: skip
        assert memory["direction"] == "lower" and memory["unit"] == "MiB/1k steps"
        assert memory["drift"]["verdict"] in ("flat", "growing", "inconclusive")
        assert memory["drift"]["threshold"] == 1.0 and memory["drift"]["first_step"] >= 5
    # the stream holds every sample and loss as it came
    lines = [json.loads(x) for x in (out / "testbox" / section["stream"]).read_text().splitlines()]
    assert sum(x["kind"] == "sample" and x["run"] == "reference" for x in lines) == 8
    assert lines[-1] == {"kind": "result", "path": str(path), "status": "complete"}
    # compare reads two soak files (the second a copy, as a rerun would write)
    doc = json.loads(path.read_text()) | {"run_id": "20991231T000000Z-bbbbbb", "label": "again"}
    results.write_run(doc, root=out)
    cmp = subprocess.run([str(BIN / "dsbench"), "compare", "--baseline", "label=" + run.label,
                          "--contender", "label=again", "--format", "plain"],
                         capture_output=True, text=True, env=os.environ | {
                             "DSBENCH_RESULTS": str(out)})  # fmt: skip
    assert cmp.returncode == 0, cmp.stderr
    assert "soak.resume_success[" in cmp.stdout and "%" in cmp.stdout
    assert "RuntimeWarning" not in cmp.stderr


@pytest.mark.slow
def test_sigterm_of_a_soak_keeps_what_finished_and_leaves_nothing_behind(config, tmp_path):
    out, tmp = tmp_path / "results", tmp_path / "tmp"
    tmp.mkdir()
    before = _orphan_semaphores()
    proc = _soak(config, out, "--duration", "10m", "--checkpoint-every", "5", "--sample-every",
                 "5", env=os.environ | {"TMPDIR": str(tmp)})  # fmt: skip
    deadline = time.monotonic() + 120
    while not any('"kind": "sample"' in p.read_text() for p in out.glob("testbox/*.jsonl")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    children = list(_children(proc.pid))
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "interrupted by SIGTERM" in stderr
    (path,) = out.glob("testbox/*.json")
    run = results.read_run(path)
    assert run.soak["status"] == "interrupted"
    stop = run.record.interrupted
    assert stop.signal == "SIGTERM" and stop.finished > 0
    assert list(tmp.iterdir()) == []  # checkpoints removed
    end = time.monotonic() + 10
    while any(_alive(pid) for pid in children):
        assert time.monotonic() < end, "ranks left running"
        time.sleep(0.2)
    assert not (_orphan_semaphores() - before)


@pytest.mark.slow
def test_a_soak_ends_at_its_duration_with_the_ranks_agreeing_on_the_last_step(config, tmp_path):
    out = tmp_path / "results"
    proc = _soak(config, out, "--duration", "6s", "--sample-every", "1")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    (path,) = out.glob("testbox/*.json")
    doc = json.loads(path.read_text())
    (launch,) = doc["soak"]["launches"]
    # the deadline counts from the soak's start (spawning and imports included): on a loaded
    # machine the ranks may get to train only one step before it, never a step apart
    assert launch["failure"] is None and launch["first_step"] == 0 and launch["last_step"] >= 0
    assert doc["soak"]["settings"]["duration_s"] == 6.0 and doc["soak"]["status"] == "complete"
    assert "soak.memory[" in stdout


# ---------------------------------------------------------------------------- dsbench ab --soak


def test_ab_rounds_of_a_soak_take_its_arguments_with_the_config_made_absolute(config, monkeypatch):
    from dsbench.ab.plan import Soak

    monkeypatch.chdir(config.parent)
    soak = Soak.parse("--config ds_config.json --model mlp --steps 20")
    assert soak.verb == ["soak", "--config", str(config), "--model", "mlp", "--steps", "20"]
    assert Soak.parse("--config=ds_config.json").verb == ["soak", f"--config={config}"]
    with pytest.raises(UsageError, match="leave out --out"):
        Soak.parse("--config=ds_config.json --out x")
    with pytest.raises(UsageError, match="does not apply to --soak"):
        Soak.parse("--config x.json", filter="adamw")


@pytest.mark.slow
def test_ab_runs_a_short_soak_on_both_sides_and_compares_them(config, tmp_path):
    out = tmp_path / "results"
    soak = f"--config {config} --model mlp --steps 12 --sample-every 2"
    proc = subprocess.run(
        [str(BIN / "dsbench"), "ab", "--baseline", "current", "--contender", "current",
         "--rounds", "2", f"--soak={soak}", "--out", str(out), "--format", "plain"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "a soak with 0 fault(s), 2 rounds a side" in proc.stderr
    assert "soak.memory[" in proc.stdout and "soak.step_time[" in proc.stdout
    paths = sorted(out.glob("testbox/*.json"))
    assert len(paths) == 2
    for path in paths:
        run = results.read_run(path)
        assert run.suite == "soak" and len(run.launches) == 2
        memory = next(r for r in run.record.rows if r.name == "soak.memory")
        assert memory.drift is None and len(memory.launch_drifts) == 2
        assert [r["status"] for r in run.record.soak_rounds] == ["complete", "complete"]
