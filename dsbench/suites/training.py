"""Training-step benchmarks: dsbench's ZeRO engine and DeepSpeed's, on the same model, data and
ds_config, over N spawned ranks.

One timed call is one optimizer step: ``gradient_accumulation_steps`` micro-batches of forward,
backward and the engine's gradient reduction, then the step. Reported:

- samples/s = train_batch_size / t (the whole data-parallel group), tokens/s likewise;
- TFLOP/s per rank = 6 · N · T · train_batch_size / t / world (N parameters, T tokens per sample:
  the usual 6NT training-FLOPs convention, attention's T² terms excluded), whose % of the
  profile's dense peak for the training dtype is the MFU;
- step time, and peak memory per rank (the largest rank's: allocator peaks on GPUs, resident set
  on CPUs). On CPUs the resident set includes ~1 GB the process holds anyway (torch, DeepSpeed's
  modules once imported) that varies by tens of MB with what ran before, so rows also carry
  ``host_peak_added_bytes``: the peak minus the resident set just before the case was set up
  (model, engine, optimizer state, communication buffers), the smallest over the rounds, and
  ``fresh_process``: the same case measured alone in freshly spawned ranks (2 warm-up steps, 3
  measured), where nothing that ran before is resident; that is the number to compare engines
  by.

``kernels=torch`` runs torch's AdamW (unfused, torch's default) in both engines: dsbench's engine
calls the registry's torch reference, DeepSpeed ``torch_adam``; each engine keeps its own
collectives (dsbench: the fastest registry collectives here, DeepSpeed: its comm layer).
``kernels=best`` runs each engine's fastest optimizer too (dsbench: the registry's best AdamW,
torch's fused kernel on CPUs; DeepSpeed: its fused Adam on GPUs, torch's fused AdamW on CPUs,
where DeepSpeed's own CPU Adam would need a JIT build).
"""

from __future__ import annotations

import torch

from dsbench.suites.base import Benchmark, Case, Context, Metric, Skip, Work, time_ms

STAGES = (1, 2, 3)


def _grid(suite: str, ctx: Context) -> dict[str, list]:
    if ctx.gpu:
        return {
            "model": ["gpt-small", "bert-large"],
            "engine": ["dsbench", "deepspeed"],
            "stage": list(STAGES),
            "kernels": ["torch", "best"],
            "ranks": [max(ctx.device_count, 1)],
            "dtype": ["bfloat16"],
            "micro_batch": [8],
            "grad_accum": [2],
        }
    return {
        "model": ["mlp", "bert-tiny"],
        "engine": ["dsbench", "deepspeed"],
        "stage": list(STAGES),
        "kernels": ["torch", "best"],
        "ranks": [2],
        "dtype": ["float32"],
        "micro_batch": [16],
        "grad_accum": [2],
    }


def ds_config(params: dict, world: int) -> dict:
    """The seed article's ZeRO config shape, for the case's stage, precision and batch."""
    return {
        "train_micro_batch_size_per_gpu": params["micro_batch"],
        "gradient_accumulation_steps": params["grad_accum"],
        "train_batch_size": params["micro_batch"] * params["grad_accum"] * world,
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": 1e-4, "weight_decay": 0.01, "torch_adam": True},
        },
        "fp16": {"enabled": params["dtype"] == "float16"},
        "bf16": {"enabled": params["dtype"] == "bfloat16"},
        "zero_optimization": {
            "stage": params["stage"],
            "overlap_comm": True,
            "contiguous_gradients": True,
            "reduce_scatter": True,
            "reduce_bucket_size": 50_000_000,
            "allgather_bucket_size": 50_000_000,
        },
    }


def best_kernels(device: str, optimizer: bool = True) -> dict[str, str]:
    """The fastest registry implementation per op that really runs here (no interpreter);
    ``optimizer=False`` leaves AdamW at the torch reference."""
    from dsbench.kernels import registry

    # Measured side by side with `dsbench run --filter 'allreduce|reduce_scatter|allgather'` on
    # the 2-core VM, 2 gloo ranks, 16 MiB: shared memory (shm) 2.2 / 1.8 / 1.8 GB/s busbw for
    # all-reduce / reduce-scatter / all-gather, dsbench's ring over gloo 0.9 / 0.65 / 0.78, gloo's
    # own 1.0 / 0.32 / 0.54. On NCCL/RCCL the native ones come first.
    gpu = device != "cpu"
    collectives = ["native", "ring"] if gpu else ["shm", "ring", "native"]
    preference = {
        "adamw": ["cuda", "triton", "torch"] if optimizer else ["torch"],
        "allreduce": collectives,
        "reduce_scatter": collectives,
        "allgather": collectives,
    }
    chosen = {}
    for op, names in preference.items():
        for name in names:
            if name not in registry.names(op):
                continue
            ok, why = registry.get(op, name).available(device)
            if ok and not why:  # a non-empty reason with ok means interpreter-only
                chosen[op] = name
                break
    return chosen


def _setup(params: dict, ctx: Context) -> Case:
    import torch.distributed as dist

    from dsbench.engines import build_engine
    from dsbench.models import get_model
    from dsbench.models.data import batch_index
    from dsbench.zero.config import load_config

    world = dist.get_world_size()
    if params["engine"] == "deepspeed":
        from dsbench.engines.deepspeed import INSTALL_HINT, deepspeed_version

        if deepspeed_version() is None:
            raise Skip(f"DeepSpeed is not installed; {INSTALL_HINT}")
    preset = get_model(params["model"])
    cfg = load_config(
        ds_config(params, world), world_size=world, warn=lambda m: None, for_engine=params["engine"]
    )
    best = params["kernels"] == "best"
    kernels = best_kernels("cuda" if ctx.gpu else "cpu", optimizer=best)
    fused = True if best else None
    model = preset.build(gemm_impl=kernels.get("gemm"), seed=0, device=ctx.device)
    engine = build_engine(
        params["engine"], model, cfg, device=ctx.device, kernels=kernels, fused_optimizer=fused
    )
    mb, gas, rank = params["micro_batch"], params["grad_accum"], dist.get_rank()
    dtype = getattr(torch, params["dtype"])
    state = {"step": 0}

    def train_step() -> None:
        for micro in range(gas):
            index = batch_index(
                state["step"], rank=rank, world_size=world, micro_step=micro, grad_accum=gas
            )
            batch = preset.batch(mb, seed=0, step=index, device=ctx.device, dtype=dtype)
            loss = preset.loss(engine.module, batch)
            engine.backward(loss)
            engine.step()
        state["step"] += 1

    samples = cfg.batch.train_batch_size
    work = Work(
        items=samples,
        tokens=samples * preset.tokens_per_sample,
        flops=preset.flops_per_sample(training=True) * samples / world,
    )
    notes = {
        "params": preset.num_params(),
        "world_size": world,
        "kernels": kernels or "default",
        "train_batch_size": samples,
    }
    if params["engine"] == "deepspeed":
        from dsbench.engines.deepspeed import deepspeed_version

        notes["deepspeed"] = deepspeed_version()
    return Case(fn=train_step, work=work, notes=notes, teardown=engine.destroy)


TRAINING = Benchmark(
    name="train_step",
    description="one optimizer step of ZeRO training (dsbench engine or DeepSpeed) over N ranks",
    grid=_grid,
    setup=_setup,
    metrics=(
        Metric(
            name="samples_per_s",
            unit="samples/s",
            direction="higher",
            value=lambda w, t: w.items / t,
            description="train_batch_size / step time",
        ),
        Metric(
            name="tokens_per_s",
            unit="tokens/s",
            direction="higher",
            value=lambda w, t: w.tokens / t,
        ),
        Metric(
            name="tflops_per_rank",
            unit="TFLOP/s",
            direction="higher",
            value=lambda w, t: w.flops / t / 1e12,
            peak="flops:{dtype}",
            description="6·N·T·batch / t / world; % of peak = MFU",
        ),
        time_ms(),
    ),
    ranks_param="ranks",
    interleave=("engine",),
    suites=("training",),
)

BENCHMARKS = [TRAINING]
