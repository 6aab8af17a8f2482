"""Checkpoints of the ZeRO engine: one shard file per rank plus metadata, and consolidation.

Layout (DeepSpeed-like)::

    DIR/latest                      the newest tag, e.g. "global_step20"
    DIR/global_step20/meta.json     world size, stage, steps, loss scaler, parameter layout
    DIR/global_step20/rank00001-of-00002.pt   that rank's fp32 master slice and Adam moments

Each rank saves only what it owns (its fp32 master weights and moments; with stage 0 that is
everything). Loading checks that the checkpoint was written with the same world size, stage and
parameter layout, and refuses otherwise with a message saying what it holds. Shard files hold
tensors and plain numbers only and are read with ``torch.load(..., weights_only=True)``: nothing
is unpickled. :func:`consolidate` rebuilds one fp32 ``state_dict`` from all shards without any
process group (like DeepSpeed's ``zero_to_fp32.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

from dsbench.errors import UsageError

FORMAT = "dsbench-zero-checkpoint"
VERSION = 1


class CheckpointError(UsageError):
    """A checkpoint that cannot be used here; one line saying what it holds."""


def _shard_name(rank: int, world: int) -> str:
    return f"rank{rank:05d}-of-{world:05d}.pt"


def _layout(engine) -> list[dict]:
    names = {id(p): n for n, p in engine.module.named_parameters()}
    return [
        {
            "kind": "unit" if b in engine.units else "bucket",
            "names": [names[id(p)] for p in b.params],
            "shapes": [list(s) for s in b.shapes],
            "numel": b.numel,
            "padded": b.padded,
            "owned": b.owned,
            "sharded": b.owned != b.padded,
        }
        for b in engine._all_owned()
    ]


def save_checkpoint(
    engine, directory: str | Path, tag: str | None = None, client_state: dict | None = None
) -> Path:
    """Collective: every rank writes its shard; rank 0 writes meta.json and ``latest`` last."""
    tag = tag or f"global_step{engine.global_steps}"
    path = Path(directory) / tag
    path.mkdir(parents=True, exist_ok=True)
    owned = engine._all_owned()
    shard = {
        "master": torch.cat([b.master.detach().reshape(-1) for b in owned]).cpu(),
        "exp_avg": torch.cat([b.exp_avg.reshape(-1) for b in owned]).cpu(),
        "exp_avg_sq": torch.cat([b.exp_avg_sq.reshape(-1) for b in owned]).cpu(),
        "adam_steps": torch.stack([s.detach().cpu() for s in engine._steps]),
    }
    tmp = path / (_shard_name(engine.rank, engine.world) + ".tmp")
    torch.save(shard, tmp)
    os.replace(tmp, path / _shard_name(engine.rank, engine.world))
    engine.comm.call(lambda: dist.barrier(group=engine.group)).wait()
    if engine.rank == 0:
        scaler = engine.settings.loss_scaler
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "world_size": engine.world,
            "stage": engine.settings.stage,
            "dtype": str(engine.dtype).removeprefix("torch."),
            "global_steps": engine.global_steps,
            "micro_steps": engine.micro_steps,
            "skipped_steps": engine.skipped_steps,
            "loss_scaler": scaler.state_dict() if scaler is not None else None,
            "client_state": client_state or {},
            "layout": _layout(engine),
        }
        (path / "meta.json").write_text(json.dumps(meta, indent=1))
        (Path(directory) / "latest").write_text(tag)
    engine.comm.call(lambda: dist.barrier(group=engine.group)).wait()
    return path


def read_meta(directory: str | Path, tag: str | None = None) -> tuple[Path, dict]:
    directory = Path(directory)
    if tag is None:
        latest = directory / "latest"
        if not latest.is_file():
            raise CheckpointError(f"{directory}: no checkpoint ('latest' file missing)")
        tag = latest.read_text().strip()
    path = directory / tag
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable checkpoint metadata ({exc})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a dsbench ZeRO checkpoint")
    return path, meta


def load_checkpoint(engine, directory: str | Path, tag: str | None = None) -> dict:
    """Collective: restore the engine's shard, steps and loss scaler; returns the client state."""
    path, meta = read_meta(directory, tag)
    here = f"this run has world size {engine.world}, stage {engine.settings.stage}"
    held = (
        f"{path} holds a stage {meta['stage']} checkpoint of world size "
        f"{meta['world_size']} at step {meta['global_steps']}"
    )
    if meta["world_size"] != engine.world or meta["stage"] != engine.settings.stage:
        raise CheckpointError(
            f"{held}; {here}: resume with the same world size and stage, or "
            "consolidate it (dsbench zero-to-fp32) and start from the weights"
        )
    if meta["layout"] != _layout(engine):
        raise CheckpointError(f"{held} for a different model (parameter layout differs)")
    shard = torch.load(
        path / _shard_name(engine.rank, engine.world), map_location="cpu", weights_only=True
    )
    start = 0
    for b in engine._all_owned():
        sl = slice(start, start + b.owned)
        with torch.no_grad():
            b.master.copy_(shard["master"][sl])
            b.exp_avg.copy_(shard["exp_avg"][sl])
            b.exp_avg_sq.copy_(shard["exp_avg_sq"][sl])
        start += b.owned
    for mine, saved in zip(engine._steps, shard["adam_steps"], strict=True):
        mine.copy_(saved)
    engine.global_steps, engine.micro_steps = meta["global_steps"], meta["micro_steps"]
    engine.skipped_steps = meta["skipped_steps"]
    if meta["loss_scaler"] is not None and engine.settings.loss_scaler is not None:
        engine.settings.loss_scaler.load_state_dict(meta["loss_scaler"])
    with torch.no_grad():
        engine._publish_params()
    return meta["client_state"]


def consolidate(directory: str | Path, tag: str | None = None) -> dict[str, torch.Tensor]:
    """One fp32 state_dict from every rank's shard, without a process group."""
    path, meta = read_meta(directory, tag)
    world = meta["world_size"]
    shards = []
    for r in range(world):
        file = path / _shard_name(r, world)
        if not file.is_file():
            raise CheckpointError(f"{path}: shard of rank {r} of {world} is missing ({file.name})")
        shards.append(torch.load(file, map_location="cpu", weights_only=True)["master"])
    state, start = {}, 0
    for b in meta["layout"]:
        if b["sharded"]:  # rank r holds elements [r*owned, (r+1)*owned) of the bucket
            full = torch.cat([s[start : start + b["owned"]] for s in shards])
        else:
            full = shards[0][start : start + b["owned"]]
        offset = 0
        for name, shape in zip(b["names"], b["shapes"], strict=True):
            n = int(torch.Size(shape).numel())
            state[name] = full[offset : offset + n].view(shape).clone()
            offset += n
        start += b["owned"]
    return state
