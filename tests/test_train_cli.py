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

from dsbench.procs.distributed import free_port

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


@pytest.fixture(scope="module")
def spawned(tmp_path_factory):
    """``dsbench train`` on 2 spawned ranks, run once for the tests below: the job of 4 steps
    ("full"), and its first 2 steps saving a checkpoint ("first", in "ck"), launched together
    (independent jobs: each one's start-up, mostly imports, overlaps the other's)."""
    root = tmp_path_factory.mktemp("spawned")
    config = root / "ds_config.json"
    config.write_text(json.dumps(CONFIG))
    train = [str(BIN / "dsbench"), "train", "--nproc", "2", "--config", str(config), "--model",
             "mlp"]  # fmt: skip
    jobs = {"full": ["--steps", "4"], "first": ["--steps", "2", "--checkpoint", str(root / "ck")]}
    procs = {
        name: subprocess.Popen(
            train + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for name, args in jobs.items()
    }
    out = {"config": config, "ck": root / "ck"}
    try:
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=600)
            assert proc.returncode == 0, stderr
            out[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    finally:
        for proc in procs.values():
            if proc.poll() is None:  # the other failed: leave nothing running
                proc.kill()
                proc.communicate()
    return out


def test_spawned_ranks_train_and_resume_identically(spawned, tmp_path):
    full = _losses(spawned["full"].stdout)
    assert sorted(full) == [0, 1, 2, 3]
    first = spawned["first"]
    assert "on 2 rank(s) with dsbench (ZeRO stage 2, fp32, batch 32)" in first.stdout
    ck = tmp_path / "ck"
    shutil.copytree(spawned["ck"], ck)
    resumed = _dsbench(  # --steps is the job's total: steps 2 and 3 are left
        "train", "--nproc", "2", "--config", str(spawned["config"]), "--model", "mlp",
        "--steps", "4", "--checkpoint", str(ck), "--resume",
    )  # fmt: skip
    assert "from step 2" in resumed.stdout
    assert _losses(first.stdout) | _losses(resumed.stdout) == full


def test_two_torchrun_nodes_on_loopback_train_together(spawned):
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
                str(spawned["config"]),
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
    # the same run, however the ranks were started: the spawned job of 2 steps (its
    # checkpoint, saved after the last step, changes no loss)
    spawned_losses = _losses(spawned["first"].stdout)
    assert sorted(spawned_losses) == [0, 1]
    assert _losses(outputs[0][0]) == spawned_losses


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
def test_bad_input_is_one_line_exit_2(config, extra, needle, capsys):
    code = _main(["train", "--config", str(config), *extra])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1, err


def test_bad_config_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(CONFIG | {"zero_optimization": {"stage": 4}}))
    assert _main(["train", "--config", str(bad), "--model", "mlp"]) == 2
    assert "zero_optimization.stage must be 0, 1, 2 or 3, got 4" in capsys.readouterr().err


def _main(argv: list[str]) -> int:
    """``dsbench`` in this process (these errors come before any rank starts): its exit code,
    argparse's included."""
    from dsbench.cli import main

    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code
