"""Run on spawned ranks by tests/test_offload.py and tests/test_activation_checkpointing.py: a
model trained from ds_configs (with and without ZeRO-Offload, activation checkpointing...) on
dsbench's engine or DeepSpeed's; rank 0 sends each run's losses (mean over ranks), where the
optimizer state lives, and the device's peak memory on GPUs."""

import torch
import torch.distributed as dist

from dsbench.engines import DTYPES, build_engine
from dsbench.models import ModelPreset, get_model
from dsbench.models.data import batch_index
from dsbench.zero.config import load_config


def runs(payload, *, device, send):
    """payload["runs"]: [(engine, ds_config, fused_optimizer)]; payload["steps"]: optimizer
    steps each; payload["model"]: a preset's name, or a :class:`ModelPreset` (a preset resized
    with ``dataclasses.replace``)."""
    for index, (engine_name, config, fused) in enumerate(payload["runs"]):
        out = _run(payload["model"], engine_name, config, payload["steps"], device, fused)
        if dist.get_rank() == 0:
            send({"index": index, **out})


def _run(
    model: str | ModelPreset,
    engine_name: str,
    config: dict,
    steps: int,
    device: str,
    fused: bool | None,
) -> dict:
    world, rank = dist.get_world_size(), dist.get_rank()
    preset = model if isinstance(model, ModelPreset) else get_model(model)
    cfg = load_config(config, world_size=world, warn=lambda m: None, for_engine=engine_name)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    engine = build_engine(
        engine_name, preset.build(seed=0), cfg, device=device, fused_optimizer=fused
    )
    dtype = DTYPES[cfg.precision]
    gas, micro_bs = cfg.batch.gradient_accumulation_steps, cfg.batch.train_micro_batch_size_per_gpu
    curve = []
    for step in range(steps):
        for micro in range(gas):
            index = batch_index(step, rank=rank, world_size=world, micro_step=micro, grad_accum=gas)
            batch = preset.batch(micro_bs, seed=0, step=index, device=device, dtype=dtype)
            loss = preset.loss(engine, batch)
            engine.backward(loss)
            engine.step()
            mean = loss.detach().float().clone()
            dist.all_reduce(mean)
            curve.append(mean.item() / world)
    where = {}
    if engine_name == "dsbench":
        owned = engine.owned_buckets()
        where = {
            "optimizer": str(owned[0].exp_avg.device),
            "master_is_param": [b.master_is_param for b in owned],
            "pinned": bool(owned[0].exp_avg.is_pinned()),
            "shards": sorted({str(u.shard.device) for u in engine.units}),
        }
    peak = torch.cuda.max_memory_allocated() if device.startswith("cuda") else None
    engine.destroy()
    return {"losses": curve, "where": where, "peak_device_bytes": peak}
