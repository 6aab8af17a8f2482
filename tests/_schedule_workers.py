"""Run on spawned ranks by tests/test_schedulers.py: dsbench's ZeRO engine with a ds_config's
scheduler against a single-process torch AdamW driven by DeepSpeed's own scheduler class."""

import os

import torch
import torch.distributed as dist

from dsbench.engines import zero_settings
from dsbench.zero.config import load_config
from dsbench.zero.engine import ZeroEngine
from tests._zero_workers import batch, loss_fn, make_model


def _reference(config: dict, steps: int, world: int, micro_bs: int) -> dict:
    """torch.optim.AdamW on the global batch, DeepSpeed's scheduler stepped after each step."""
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from deepspeed.runtime import lr_schedules

    params = config["optimizer"]["params"]
    model = make_model()
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=params["lr"],
        betas=tuple(params["betas"]),
        weight_decay=params["weight_decay"],
        foreach=False,
    )
    sched = config["scheduler"]
    scheduler = getattr(lr_schedules, sched["type"])(opt, **sched["params"])
    for step in range(steps):
        opt.zero_grad()
        xs, ys = zip(*(batch(step, 0, r, micro_bs) for r in range(world)), strict=True)
        loss_fn(model, torch.cat(xs), torch.cat(ys)).backward()
        opt.step()
        scheduler.step()
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def train(payload, *, device, send):
    steps, micro_bs = payload["steps"], payload["micro_bs"]
    rank, world = dist.get_rank(), dist.get_world_size()
    for index, (stage, config) in enumerate(payload["cases"]):
        config = {**config, "zero_optimization": {"stage": stage}}
        cfg = load_config(config, world_size=world, micro_batch=micro_bs, warn=lambda m: None)
        engine = ZeroEngine(make_model(seed=rank), zero_settings(cfg))
        for step in range(steps):
            x, y = batch(step, 0, rank, micro_bs)
            engine.backward(loss_fn(engine.module, x, y))
            engine.step()
        state = engine.full_state_dict()
        engine.destroy()
        if rank == 0:
            ref = _reference(config, steps, world, micro_bs)
            send({"index": index, "state": state, "reference": ref})
