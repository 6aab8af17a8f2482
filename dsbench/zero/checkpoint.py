"""Checkpoints of the ZeRO engine: one shard file per rank plus metadata, and consolidation.

Layout (DeepSpeed-like)::

    DIR/latest                      the newest complete tag, e.g. "global_step20"
    DIR/global_step20/meta.json     world size, stage, steps, loss scaler, parameter layout,
                                    each shard's size and SHA-256
    DIR/global_step20/rank00001-of-00002.pt   that rank's fp32 master slice and Adam moments

Each rank saves only what it owns (its fp32 master weights and moments; with stage 0 that is
everything). Loading checks that the checkpoint was written with the same world size, stage and
parameter layout, and refuses otherwise with a message saying what it holds. Shard files hold
tensors and plain numbers only and are read with ``torch.load(..., weights_only=True)``: nothing
is unpickled. :func:`consolidate` rebuilds one fp32 ``state_dict`` from all shards without any
process group (like DeepSpeed's ``zero_to_fp32.py``).

A save survives being killed at any point (SIGKILL of any rank, power loss once the disk has
it): every rank writes its shard into ``DIR/.TAG.partial`` and fsyncs it; once all have,
rank 0 writes ``meta.json`` there (with each shard's size and digest), fsyncs it and the folder,
renames the folder to ``DIR/TAG``, fsyncs ``DIR``, and only then replaces ``latest`` (a
temporary file, fsync, rename). Until that last rename ``latest`` names the previous complete
checkpoint. Saving a tag that already exists moves the old copy to ``DIR/.TAG.old`` until the new
one is in place, and a ``latest`` whose folder is missing falls back to that copy. Loading checks
every shard's size and digest against ``meta.json``: a missing, truncated or corrupt file is a
one-line :class:`CheckpointError` naming it, never loaded. The folder must be one that all ranks
see (one host, or a shared file system), as for DeepSpeed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import torch
import torch.distributed as dist

from dsbench.errors import UsageError
from dsbench.procs import faults

FORMAT = "dsbench-zero-checkpoint"
VERSION = 2
"""1: the first; 2 adds ``shards`` (each shard file's ``bytes`` and ``sha256``) to meta.json."""


_META_FIELDS = {
    "world_size": int,
    "stage": int,
    "global_steps": int,
    "micro_steps": int,
    "skipped_steps": int,
    "client_state": dict,
    "layout": list,
}
"""What loading relies on in meta.json, with its type."""


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
        for b in engine.owned_buckets()
    ]


class _DigestWriter:
    """What ``torch.save`` writes, passed on to a file while counting and hashing it; the
    ``save.shard`` fault point fires once the file is partly written."""

    def __init__(self, file, step: int) -> None:
        self.file, self.step = file, step
        self.sha, self.size = hashlib.sha256(), 0

    def write(self, data) -> int:
        n = self.file.write(data)
        self.sha.update(data)
        self.size += len(data)
        if self.size == len(data):  # the first write: a partly written shard on disk
            self.file.flush()
            faults.point("save.shard", self.step)
        return n

    def flush(self) -> None:
        self.file.flush()


def _write_shard(shard: dict, path: Path, step: int) -> dict:
    with open(path, "wb") as f:
        out = _DigestWriter(f, step)
        torch.save(shard, out)
        f.flush()
        os.fsync(f.fileno())
    return {"bytes": out.size, "sha256": out.sha.hexdigest()}


def write_durably(path: Path, data: bytes) -> None:
    """``path`` replaced by ``data`` all at once: a temporary file, fsync, rename, fsync the
    folder. A reader sees the old content or the new, never a part."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(
    engine, directory: str | Path, tag: str | None = None, client_state: dict | None = None
) -> Path:
    """Collective: every rank writes its shard; rank 0 writes meta.json, renames the folder into
    place and updates ``latest`` last (see the module docstring)."""
    directory = Path(directory)
    tag = tag or f"global_step{engine.global_steps}"
    final, partial, old = directory / tag, directory / f".{tag}.partial", directory / f".{tag}.old"
    step = engine.global_steps

    def barrier() -> None:
        engine.comm.call(lambda: dist.barrier(group=engine.group)).wait()

    faults.point("save.begin", step)
    if engine.rank == 0:
        directory.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(partial, ignore_errors=True)  # what a save that was killed left
        partial.mkdir()
    barrier()
    owned = engine.owned_buckets()
    shard = {
        "master": torch.cat([b.master.detach().reshape(-1) for b in owned]).cpu(),
        "exp_avg": torch.cat([b.exp_avg.reshape(-1) for b in owned]).cpu(),
        "exp_avg_sq": torch.cat([b.exp_avg_sq.reshape(-1) for b in owned]).cpu(),
        "adam_steps": torch.stack([s.detach().cpu() for s in engine.adam_steps]),
    }
    name = _shard_name(engine.rank, engine.world)
    digest = _write_shard(shard, partial / name, step)
    digests: list = [None] * engine.world
    engine.comm.call(
        lambda: dist.all_gather_object(digests, (name, digest), group=engine.group)
    ).wait()
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
            "shards": dict(digests),
        }
        write_durably(partial / "meta.json", json.dumps(meta, indent=1).encode())
        faults.point("save.meta", step)
        if final.exists():  # this tag saved again: the old copy stays until the new is in place
            shutil.rmtree(old, ignore_errors=True)
            os.rename(final, old)
            faults.point("save.swap", step)
        os.rename(partial, final)
        _fsync_dir(directory)
        faults.point("save.rename", step)
        write_durably(directory / "latest", tag.encode())
        shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def read_meta(directory: str | Path, tag: str | None = None) -> tuple[Path, dict]:
    """The checkpoint folder (of ``tag``, default the one ``latest`` names) and its metadata."""
    directory = Path(directory)
    if tag is None:
        latest = directory / "latest"
        if not latest.is_file():
            raise CheckpointError(f"{directory}: no checkpoint ('latest' file missing)")
        tag = latest.read_text().strip()
    path = directory / tag
    if not path.is_dir() and (directory / f".{tag}.old").is_dir():
        path = directory / f".{tag}.old"  # a save of the same tag was killed mid-swap
    if not path.is_dir():
        raise CheckpointError(f"{path}: checkpoint folder missing")
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path / 'meta.json'}: unreadable checkpoint metadata ({exc})"
                              ) from None  # fmt: skip
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a dsbench ZeRO checkpoint")
    if not isinstance(meta.get("version"), int) or meta["version"] > VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {meta.get('version')!r} is not one this "
            f"dsbench reads (1 to {VERSION})"
        )
    for key, kind in _META_FIELDS.items():
        if not isinstance(meta.get(key), kind) or isinstance(meta.get(key), bool):
            raise CheckpointError(f"{path / 'meta.json'}: '{key}' missing or not {kind.__name__}")
    shards = meta.get("shards", {})
    if not isinstance(shards, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("bytes"), int) and isinstance(v.get("sha256"), str)
        for v in shards.values()
    ):
        raise CheckpointError(f"{path / 'meta.json'}: 'shards' is not {{bytes, sha256}} per file")
    return path, meta


def _shard_file(path: Path, meta: dict, rank: int) -> Path:
    """The shard file of ``rank``, checked against meta.json: present, complete, and the bytes
    that were written (SHA-256)."""
    world = meta["world_size"]
    file = path / _shard_name(rank, world)
    if not file.is_file():
        raise CheckpointError(f"{file}: missing (the shard of rank {rank} of {world})")
    expected = (meta.get("shards") or {}).get(file.name)
    if expected is None:  # version 1 recorded no sizes or digests
        return file
    size = file.stat().st_size
    if size != expected["bytes"]:
        raise CheckpointError(
            f"{file}: incomplete or altered ({size} bytes, meta.json says {expected['bytes']})"
        )
    sha = hashlib.sha256()
    with open(file, "rb") as f:
        while chunk := f.read(1 << 24):
            sha.update(chunk)
    if sha.hexdigest() != expected["sha256"]:
        raise CheckpointError(f"{file}: corrupt (its SHA-256 differs from meta.json's)")
    return file


def _load_shard(path: Path, meta: dict, rank: int) -> dict:
    file = _shard_file(path, meta, rank)
    try:
        shard = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise CheckpointError(f"{file}: unreadable shard ({why})") from None
    if not isinstance(shard, dict) or not {"master", "exp_avg", "exp_avg_sq"} <= shard.keys():
        raise CheckpointError(f"{file}: not a dsbench ZeRO shard")
    return shard


def verify(
    directory: str | Path, *, world: int | None = None, stage: int | None = None
) -> tuple[Path, dict]:
    """Before any rank starts: the latest checkpoint exists, was written with this world size
    and stage, and every shard file is there with the size and digest meta.json records (the
    ranks check their own shard again as they load it). One-line errors."""
    path, meta = read_meta(directory)
    if (world, stage) != (None, None) and (meta["world_size"], meta["stage"]) != (world, stage):
        raise CheckpointError(
            f"{_held(path, meta)}; this run has world size {world}, stage {stage}: resume with "
            "the same world size and stage, or consolidate it (dsbench zero-to-fp32) and start "
            "from the weights"
        )
    for r in range(meta["world_size"]):
        _shard_file(path, meta, r)
    return path, meta


def _held(path: Path, meta: dict) -> str:
    return (
        f"{path} holds a stage {meta['stage']} checkpoint of world size "
        f"{meta['world_size']} at step {meta['global_steps']}"
    )


def load_checkpoint(engine, directory: str | Path, tag: str | None = None) -> dict:
    """Collective: restore the engine's shard, steps and loss scaler; returns the client state."""
    path, meta = read_meta(directory, tag)
    here = f"this run has world size {engine.world}, stage {engine.settings.stage}"
    held = _held(path, meta)
    if meta["world_size"] != engine.world or meta["stage"] != engine.settings.stage:
        raise CheckpointError(
            f"{held}; {here}: resume with the same world size and stage, or "
            "consolidate it (dsbench zero-to-fp32) and start from the weights"
        )
    if meta["layout"] != _layout(engine):
        raise CheckpointError(f"{held} for a different model (parameter layout differs)")
    shard = _load_shard(path, meta, engine.rank)
    if shard["master"].numel() != sum(b.owned for b in engine.owned_buckets()):
        raise CheckpointError(f"{held}: rank {engine.rank}'s shard has the wrong size")
    start = 0
    engine.before_param_writes()  # a master may be a slice of parameters other ranks read
    for b in engine.owned_buckets():
        sl = slice(start, start + b.owned)
        with torch.no_grad():
            b.master.copy_(shard["master"][sl])
            b.exp_avg.copy_(shard["exp_avg"][sl])
            b.exp_avg_sq.copy_(shard["exp_avg_sq"][sl])
        start += b.owned
    for mine, saved in zip(engine.adam_steps, shard["adam_steps"], strict=True):
        mine.copy_(saved)
    engine.global_steps, engine.micro_steps = meta["global_steps"], meta["micro_steps"]
    engine.skipped_steps = meta["skipped_steps"]
    if meta["loss_scaler"] is not None and engine.settings.loss_scaler is not None:
        engine.settings.loss_scaler.load_state_dict(meta["loss_scaler"])
    with torch.no_grad():
        engine.publish_params()
    return meta["client_state"]


def consolidate(directory: str | Path, tag: str | None = None) -> dict[str, torch.Tensor]:
    """One fp32 state_dict from every rank's shard, without a process group."""
    path, meta = read_meta(directory, tag)
    shards = [_load_shard(path, meta, r)["master"] for r in range(meta["world_size"])]
    try:
        return _unflatten(shards, meta["layout"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        why = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise CheckpointError(f"{path / 'meta.json'}: its layout does not fit the shards ({why})"
                              ) from None  # fmt: skip


def _unflatten(shards: list[torch.Tensor], layout: list[dict]) -> dict[str, torch.Tensor]:
    state, start = {}, 0
    for b in layout:
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
