"""Run on spawned ranks by tests/test_deepspeed_parity.py: the same model, data and ds_config
through dsbench's engine and through DeepSpeed; rank 0 sends both loss curves."""

import torch.distributed as dist

from dsbench.engines import build_engine
from dsbench.models import get_model
from dsbench.models.data import batch_index
from dsbench.zero.config import load_config


def losses(payload, *, device, send):
    """For each config in payload["configs"], rank 0 sends {"index", "dsbench", "deepspeed"}."""
    for index, config in enumerate(payload["configs"]):
        out = _losses(payload["model"], config, payload["steps"])
        if dist.get_rank() == 0:
            send({"index": index, **out})


def _losses(model: str, config: dict, steps: int) -> dict[str, list[float]]:
    world, rank = dist.get_world_size(), dist.get_rank()
    preset = get_model(model)
    out = {}
    for engine_name in ("dsbench", "deepspeed"):
        cfg = load_config(config, world_size=world, warn=lambda m: None, for_engine=engine_name)
        engine = build_engine(engine_name, preset.build(seed=0), cfg, device="cpu")
        gas, micro_bs = (
            cfg.batch.gradient_accumulation_steps,
            cfg.batch.train_micro_batch_size_per_gpu,
        )
        curve = []
        for step in range(steps):
            for micro in range(gas):
                index = batch_index(
                    step, rank=rank, world_size=world, micro_step=micro, grad_accum=gas
                )
                loss = preset.loss(engine, preset.batch(micro_bs, seed=0, step=index))
                engine.backward(loss)
                engine.step()
                mean = loss.detach().float().clone()
                dist.all_reduce(mean)
                curve.append(mean.item() / world)
        engine.destroy()
        out[engine_name] = curve
    return out
