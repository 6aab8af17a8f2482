"""Run on spawned ranks by tests/test_training_suite.py: the global gradient norm of dsbench's
engine (``grad_norm_every_step``, clipping off) next to DeepSpeed's, one step per ZeRO stage."""

from __future__ import annotations

import torch.distributed as dist

from dsbench.engines import build_engine
from dsbench.models import get_model
from dsbench.models.data import batch_index
from dsbench.suites.training import TrainingParams, ds_config
from dsbench.zero.config import load_config


def grad_norms(payload, *, device, send):
    """For each stage in payload["stages"], rank 0 sends {"stage", "dsbench", "dsbench_off",
    "deepspeed"}: each engine's ``get_global_grad_norm()`` after one optimizer step."""
    world, rank = dist.get_world_size(), dist.get_rank()
    preset = get_model("mlp")
    for stage in payload["stages"]:
        params = TrainingParams(model="mlp", comm="native", engine="dsbench", stage=stage,
                                kernels="torch", ranks=world, dtype="float32", micro_batch=4,
                                grad_accum=2)  # fmt: skip
        out = {"stage": stage}
        for name, engine_name, every_step in (
            ("dsbench", "dsbench", True),
            ("dsbench_off", "dsbench", False),
            ("deepspeed", "deepspeed", True),
        ):
            cfg = load_config(
                ds_config(params, world), world_size=world, warn=lambda m: None,
                for_engine=engine_name,
            )  # fmt: skip
            engine = build_engine(
                engine_name, preset.build(seed=0), cfg, device="cpu",
                grad_norm_every_step=every_step,
            )  # fmt: skip
            for micro in range(params.grad_accum):
                index = batch_index(0, rank=rank, world_size=world, micro_step=micro, grad_accum=2)
                engine.backward(preset.loss(engine, preset.batch(4, seed=0, step=index)))
                engine.step()
            norm = engine.get_global_grad_norm()
            out[name] = None if norm is None else float(norm)
            engine.destroy()
        if rank == 0:
            send(out)
