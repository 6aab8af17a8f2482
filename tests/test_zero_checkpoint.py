"""Checkpoints: save, resume in new processes with identical losses, refuse mismatches,
consolidate into one fp32 state_dict."""

import dataclasses

import pytest
import torch

from dsbench.cli import main
from dsbench.procs.distributed import RankFailure, spawn_ranks
from dsbench.zero.checkpoint import consolidate, read_meta
from dsbench.zero.engine import ZeroSettings

pytestmark = pytest.mark.slow

SETTINGS = ZeroSettings(
    lr=1e-2,
    weight_decay=0.01,
    reduce_bucket_size=200,
    param_persistence_threshold=40,
    grad_accum=2,
    gradient_clipping=0.5,
)


def _launch(world, payload):
    got = {}
    spawn_ranks(
        "tests._zero_workers:checkpoint_run",
        world,
        payload,
        on_message=lambda rank, msg: got.update(msg),
        timeout_s=300,
    )
    return got


@pytest.mark.parametrize("stage", [1, 3])
def test_resume_gives_identical_losses(tmp_path, stage):
    settings = dataclasses.replace(SETTINGS, stage=stage)
    common = {"settings": settings, "dir": str(tmp_path), "before": 2, "after": 2}
    uninterrupted = _launch(2, {**common, "mode": "save"})
    resumed = _launch(2, {**common, "mode": "resume"})
    assert resumed["losses"] == uninterrupted["losses"]  # bitwise: same data, same state
    for name, tensor in uninterrupted["state"].items():
        assert resumed["state"][name].equal(tensor), name
    # consolidation (no process group) rebuilds the saved weights from both shards
    _, meta = read_meta(tmp_path)
    assert (meta["world_size"], meta["stage"], meta["global_steps"]) == (2, stage, 2)
    merged = consolidate(tmp_path)
    assert merged.keys() == uninterrupted["state"].keys()
    assert all(t.dtype == torch.float32 for t in merged.values())
    # the command writes the same state_dict, loadable without unpickling objects
    out = tmp_path / "model_fp32.pt"
    assert main(["zero-to-fp32", str(tmp_path), str(out)]) == 0
    written = torch.load(out, weights_only=True)
    assert all(written[k].equal(v) for k, v in merged.items())
    assert main(["zero-to-fp32", str(tmp_path), str(out)]) == 2  # never overwrites


def test_other_world_size_or_stage_is_refused(tmp_path):
    settings = dataclasses.replace(SETTINGS, stage=2)
    _launch(
        2, {"settings": settings, "dir": str(tmp_path), "before": 1, "after": 0, "mode": "save"}
    )
    with pytest.raises(
        RankFailure,
        match=r"holds a stage 2 checkpoint of world size 2 at step 1; "
        r"this run has world size 3, stage 2",
    ):
        _launch(3, {"settings": settings, "dir": str(tmp_path), "after": 1, "mode": "resume"})
    with pytest.raises(RankFailure, match=r"this run has world size 2, stage 3"):
        _launch(
            2,
            {
                "settings": dataclasses.replace(settings, stage=3),
                "dir": str(tmp_path),
                "after": 1,
                "mode": "resume",
            },
        )
