"""`dsbench train`: spawned ranks, resume from a checkpoint, two torchrun "nodes" on loopback,
and one-line errors for bad input."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsbench.distributed import free_port

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
CONFIG = {
    "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
    "zero_optimization": {"stage": 2, "overlap_comm": True},
}


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(CONFIG))
    return path


def _dsbench(*args, check=True, cwd=None):
    proc = subprocess.run(
        [str(BIN / "dsbench"), *args], capture_output=True, text=True, timeout=600, cwd=cwd
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _losses(stdout: str) -> dict[int, str]:
    return {int(m[1]): m[2] for m in re.finditer(r"step\s+(\d+)\s+loss (\S+)", stdout)}


def test_spawned_ranks_train_and_resume_identically(config, tmp_path):
    full = _losses(
        _dsbench(
            "train", "--nproc", "2", "--config", str(config), "--model", "mlp", "--steps", "4"
        ).stdout
    )
    assert sorted(full) == [0, 1, 2, 3]
    ck = tmp_path / "ck"
    first = _dsbench(
        "train",
        "--nproc",
        "2",
        "--config",
        str(config),
        "--model",
        "mlp",
        "--steps",
        "2",
        "--checkpoint",
        str(ck),
    )
    assert "on 2 rank(s) with dsbench (ZeRO stage 2, fp32, batch 32)" in first.stdout
    resumed = _dsbench(  # --steps is the job's total: steps 2 and 3 are left
        "train",
        "--nproc",
        "2",
        "--config",
        str(config),
        "--model",
        "mlp",
        "--steps",
        "4",
        "--checkpoint",
        str(ck),
        "--resume",
    )
    assert "from step 2" in resumed.stdout
    assert _losses(first.stdout) | _losses(resumed.stdout) == full


def test_two_torchrun_nodes_on_loopback_train_together(config, tmp_path):
    torchrun = shutil.which("torchrun", path=str(BIN))
    assert torchrun, "torchrun ships with torch"
    port = str(free_port())
    env = dict(os.environ, OMP_NUM_THREADS="1")
    nodes = [
        subprocess.Popen(
            [
                torchrun,
                "--nnodes",
                "2",
                "--nproc-per-node",
                "1",
                "--node-rank",
                str(rank),
                "--master-addr",
                "127.0.0.1",
                "--master-port",
                port,
                "-m",
                "dsbench",
                "train",
                "--config",
                str(config),
                "--model",
                "mlp",
                "--steps",
                "2",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for rank in (0, 1)
    ]
    outputs = [node.communicate(timeout=600) for node in nodes]
    for node, (_out, err) in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, err
    assert "on 2 rank(s)" in outputs[0][0]
    spawned = _losses(
        _dsbench(
            "train", "--nproc", "2", "--config", str(config), "--model", "mlp", "--steps", "2"
        ).stdout
    )
    assert _losses(outputs[0][0]) == spawned  # the same run, however the ranks were started


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--model", "mlpp"], "unknown model 'mlpp' (did you mean 'mlp'?)"),
        (
            ["--model", "mlp", "--nproc", "3", "--train-batch", "100"],
            "train_batch_size 100 != train_micro_batch_size_per_gpu 8",
        ),
        (["--model", "mlp", "--kernels", "adamw=fast"], "unknown adamw implementation 'fast'"),
        (["--model", "mlp", "--steps", "0"], "--steps must be positive"),
        (["--model", "mlp", "--engine", "megatron"], "invalid choice: 'megatron'"),
    ],
)
def test_bad_input_is_one_line_exit_2(config, extra, needle):
    proc = _dsbench("train", "--config", str(config), *extra, check=False)
    assert proc.returncode == 2 and needle in proc.stderr and proc.stderr.count("\n") == 1


def test_bad_config_is_named(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(CONFIG | {"zero_optimization": {"stage": 4}}))
    proc = _dsbench("train", "--config", str(bad), "--model", "mlp", check=False)
    assert proc.returncode == 2
    assert "zero_optimization.stage must be 0, 1, 2 or 3, got 4" in proc.stderr
