"""`dsbench train` with configs as users have them: batch sizes from the command line override
the config's (one notice line), a config that does not fit the ranks names the flag that would,
Hugging Face "auto" filled from the Trainer's defaults, and both engines train the same
effective config (tests/test_zero_config.py and tests/test_schedulers.py test the rules)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsbench.engines.deepspeed import deepspeed_version

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
CONFIGS = Path(__file__).parent / "configs"
# Written for 8 ranks: 128 = micro-batch 4 × accumulation 4 × 8.
FOR_8 = {
    "train_batch_size": 128,
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 4,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
    "zero_optimization": {"stage": 2},
}
# Hugging Face style: "auto" everywhere the Trainer fills but the lr (so that the steps move the
# weights), WarmupDecayLR over the run's steps with the optimizer's lr as its peak.
HF_AUTO = {
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "bf16": {"enabled": "auto"},
    "optimizer": {
        "type": "AdamW",
        "params": {"lr": 1e-2, "betas": "auto", "eps": "auto", "weight_decay": "auto"},
    },
    "scheduler": {
        "type": "WarmupDecayLR",
        "params": {
            "warmup_min_lr": "auto",
            "warmup_max_lr": "auto",
            "warmup_num_steps": "auto",
            "total_num_steps": "auto",
        },
    },
    "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"},
}


def _dsbench(tmp_path, config: dict, *args):
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(config))
    cmd = [str(BIN / "dsbench"), "train", "--config", str(path), "--model", "mlp", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def _on_both_engines(tmp_path, config: dict, *args) -> dict[str, subprocess.CompletedProcess]:
    """``dsbench train`` with ``--engine dsbench`` and ``--engine deepspeed``, the two launches
    at once (independent jobs: each one's start-up, mostly imports, overlaps the other's)."""
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(config))
    cmd = [str(BIN / "dsbench"), "train", "--config", str(path), "--model", "mlp", *args]
    procs = {
        e: subprocess.Popen(
            [*cmd, "--engine", e], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for e in ("dsbench", "deepspeed")
    }
    done = {}
    try:
        for engine, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=600)
            done[engine] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    finally:
        for proc in procs.values():
            if proc.poll() is None:  # the other timed out: leave nothing running
                proc.kill()
                proc.communicate()
    return done


def _losses(stdout: str) -> dict[int, float]:
    return {int(m[1]): float(m[2]) for m in re.finditer(r"step\s+(\d+)\s+loss (\S+)", stdout)}


def test_config_for_8_ranks_runs_on_2_with_the_flag_its_error_names(tmp_path, capsys):
    from dsbench.cli import main

    # refused before any rank starts: in this process
    path = tmp_path / "for_8.json"
    path.write_text(json.dumps(FOR_8))
    argv = ["train", "--config", str(path), "--model", "mlp", "--nproc", "2", "--steps", "1"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "dsbench: error: ds_config: train_batch_size 128 != train_micro_batch_size_per_gpu 4 × "
        "gradient_accumulation_steps 4 × world size 2 (= 32); give --train-batch 32 (or "
        "--grad-accum 16, --micro-batch 16) to run on 2 ranks\n"
    )
    ran = _dsbench(tmp_path, FOR_8, "--nproc", "2", "--steps", "2", "--train-batch", "32")
    assert ran.returncode == 0, ran.stderr
    notes = [line for line in ran.stdout.splitlines() if line.startswith("dsbench: ")]
    assert notes == [
        "dsbench: the command line changes the ds_config's batch sizes: "
        "train_batch_size 128 → 32 (--train-batch)"
    ]
    assert (
        "(ZeRO stage 2, fp32, batch 32), micro-batch 4 × 4 accumulation steps per rank"
        in ran.stdout
    )
    assert sorted(_losses(ran.stdout)) == [0, 1]


def test_micro_batch_override_keeps_the_accumulation(tmp_path):
    ran = _dsbench(tmp_path, FOR_8, "--nproc", "2", "--steps", "1", "--micro-batch", "2")
    assert ran.returncode == 0, ran.stderr
    assert (
        "dsbench: the command line changes the ds_config's batch sizes: train_batch_size 128 → "
        "16, train_micro_batch_size_per_gpu 4 → 2 (--micro-batch)"
    ) in ran.stdout
    assert "batch 16), micro-batch 2 × 4 accumulation steps per rank" in ran.stdout


@pytest.mark.skipif(deepspeed_version() is None, reason="DeepSpeed not installed (make test)")
def test_hugging_face_auto_config_trains_the_same_on_both_engines(tmp_path):
    """The "auto"s are filled once, in the launcher, and both engines train that config: the
    same losses within the DeepSpeed parity tolerance (tests/test_deepspeed_parity.py)."""
    args = ("--nproc", "2", "--steps", "5", "--micro-batch", "4")
    ours, theirs = _on_both_engines(tmp_path, HF_AUTO, *args).values()
    assert ours.returncode == 0, ours.stderr
    assert theirs.returncode == 0, theirs.stderr
    note = (
        'dsbench: "auto" filled as the Hugging Face Trainer would (command line first): '
        "train_batch_size=8, train_micro_batch_size_per_gpu=4 (--micro-batch), "
        "gradient_accumulation_steps=1, gradient_clipping=1.0, bf16.enabled=false, "
        "optimizer.params.betas=[0.9, 0.999], "
        "optimizer.params.eps=1e-08, optimizer.params.weight_decay=0.0, "
        "scheduler.params.warmup_min_lr=0, scheduler.params.warmup_max_lr=0.01, "
        "scheduler.params.warmup_num_steps=0, scheduler.params.total_num_steps=5, "
        "zero_optimization.reduce_bucket_size=16777216"
    )
    assert note in ours.stdout.splitlines() and note in theirs.stdout.splitlines()
    a, b = _losses(ours.stdout), _losses(theirs.stdout)
    assert sorted(a) == sorted(b) == [0, 1, 2, 3, 4]
    assert [a[s] for s in a] == pytest.approx([b[s] for s in a], rel=1e-4, abs=1e-6)


ONE_CYCLE = {
    "train_micro_batch_size_per_gpu": 4,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
    "scheduler": {
        "type": "OneCycle",
        "params": {
            "cycle_min_lr": 1e-3,
            "cycle_max_lr": 2e-2,
            "cycle_first_step_size": 2,
            "cycle_second_step_size": 2,
            "decay_step_size": 1,
            "decay_lr_rate": 0.5,
            "decay_mom_rate": 0.01,
        },
    },
    "zero_optimization": {"stage": 2},
}


@pytest.mark.skipif(deepspeed_version() is None, reason="DeepSpeed not installed (make test)")
def test_onecycle_with_its_momentum_cycle_trains_the_same_on_both_engines(tmp_path):
    """OneCycle sets Adam's β1 (and β2 = 0.99) as well as the lr at every step; DeepSpeed's
    engine applies it to its optimizer, dsbench's through ZeroSettings.betas_at."""
    ours, theirs = _on_both_engines(tmp_path, ONE_CYCLE, "--nproc", "2", "--steps", "7").values()
    assert ours.returncode == 0 and theirs.returncode == 0, ours.stderr + theirs.stderr
    a, b = _losses(ours.stdout), _losses(theirs.stdout)
    assert sorted(a) == sorted(b) == list(range(7))
    assert [a[s] for s in a] == pytest.approx([b[s] for s in a], rel=1e-4, abs=1e-6)


@pytest.mark.skipif(deepspeed_version() is None, reason="DeepSpeed not installed (make test)")
def test_zero3_offload_and_checkpointing_config_trains_the_same_on_both_engines(tmp_path):
    """A NeoX/T5-style config (ZeRO-3, both CPU offloads, activation checkpointing, linear
    WarmupDecayLR, a batch for 8 GPUs) runs unchanged on 2 ranks with --train-batch."""
    config = json.loads((CONFIGS / "dse_zero3_offload_checkpointing.json").read_text())
    args = ("--nproc", "2", "--steps", "3", "--train-batch", "16")
    runs = _on_both_engines(tmp_path, config, *args)
    for engine, ran in runs.items():
        assert ran.returncode == 0, ran.stderr
        assert (
            f"with {engine} (ZeRO stage 3, CPU offload of the optimizer and parameters, "
            "activation checkpointing of 1 of 1 blocks, bf16, batch 16), micro-batch 1 × 8"
        ) in ran.stdout
    a, b = _losses(runs["dsbench"].stdout), _losses(runs["deepspeed"].stdout)
    assert sorted(a) == sorted(b) == [0, 1, 2]
    assert [a[s] for s in a] == pytest.approx([b[s] for s in a], rel=1e-4, abs=1e-6)


def test_steps_per_print_and_wall_clock_breakdown(tmp_path):
    """steps_per_print: a step line every N steps and at the last; wall_clock_breakdown: each
    printed step also gives its forward, backward and optimizer-step milliseconds."""
    config = {**FOR_8, "steps_per_print": 3, "wall_clock_breakdown": True}
    ran = _dsbench(tmp_path, config, "--nproc", "2", "--steps", "7", "--train-batch", "32")
    assert ran.returncode == 0, ran.stderr
    assert sorted(_losses(ran.stdout)) == [2, 5, 6]
    times = re.findall(
        r"time \(ms\) \| forward: (\S+) \| backward: (\S+) \| step: (\S+)", ran.stdout
    )
    assert len(times) == 3 and all(float(v) > 0 for row in times for v in row)
