"""Training-step benchmarks: dsbench's ZeRO engine and DeepSpeed's, on the same model, data and
ds_config (:func:`ds_config`), over N spawned ranks: ``train_step`` (:data:`TRAINING`) and, with
ZeRO-Offload, ``train_step_offload`` (:data:`TRAINING_OFFLOAD`).

One timed call is one optimizer step: ``gradient_accumulation_steps`` micro-batches of forward
(through the engine, as users call it), backward and the engine's gradient reduction, then the
step. Reported: samples/s = train_batch_size / t (the whole data-parallel group), tokens/s
likewise; TFLOP/s per rank = 6 · N · T · train_batch_size / t / world (N parameters, T tokens
per sample: the usual 6NT training-FLOPs convention, attention's T² terms excluded), whose % of
the profile's dense peak for the training dtype is the MFU; step time; and peak memory per rank
(the largest rank's: allocator peaks on GPUs, resident set on CPUs, where rows also carry
``host_peak_added_bytes`` and ``fresh_process``, the figures to compare engines by, as
:class:`dsbench.measure.memory.PeakMemory` and docs/commands.md's "Side by side" say;
docs/decisions.md, "Peak memory on CPUs: what the process holds anyway").

Rows, per model and stage, differ in ``engine``, ``comm`` and ``kernels``
([Note: the training rows]); ``train_step_offload`` adds ``offload`` ([Note: the offload rows]).
The rows of one (model, stage, kernels) are timed in alternating rounds inside one launch
(``interleave``: dsbench native, DeepSpeed native, dsbench shm, then the reverse, ...).

Invariants: both engines do the same work per step where they can, and what differs is on every
row ([Note: the same work per step]); each row's notes say what that engine really ran, never
the other engine's choices ([Note: a row's notes]). ``tests/test_training_suite.py`` checks both
(``test_dsbench_computes_the_global_norm_every_step_as_deepspeed_does``,
``test_one_group_on_two_cpu_ranks_names_what_each_engine_ran``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsbench.suites.base import Benchmark, Case, Context, Metric, Skip, Work, time_ms

STAGES = (1, 2, 3)
COLLECTIVES = ("allreduce", "reduce_scatter", "allgather")


@dataclass(frozen=True, kw_only=True)
class TrainingParams:
    """A case of :data:`TRAINING` or :data:`TRAINING_OFFLOAD` ([Note: the training rows])."""

    model: str
    """A model preset (:func:`dsbench.models.get_model`)."""
    comm: str
    """dsbench's collectives: the registry's ``native`` (torch.distributed) or ``shm``."""
    engine: str
    """``dsbench`` or ``deepspeed``."""
    stage: int
    """ZeRO stage, 1-3."""
    kernels: str
    """``torch`` (torch's AdamW, unfused) or ``best`` (each engine's fastest)."""
    ranks: int
    """Ranks spawned (the benchmark's ``ranks_param``)."""
    dtype: str
    """torch dtype name of the training precision."""
    micro_batch: int
    """``train_micro_batch_size_per_gpu``."""
    grad_accum: int
    """``gradient_accumulation_steps``."""
    offload: str = ""
    """``train_step_offload`` only ([Note: the offload rows]): ``optimizer`` or
    ``optimizer+param``; empty: no offload."""


# [Note: the training rows]
# ``comm=native``, both engines, is the like-for-like comparison: both run torch.distributed's own
# collectives (gloo on CPUs, NCCL/RCCL on GPUs). dsbench's engine is given the registry's
# ``native`` all-reduce, reduce-scatter and all-gather; DeepSpeed goes through deepspeed.comm,
# which calls the same torch.distributed functions (the shared-memory op DeepSpeed builds at
# start-up on CPUs serves only its inference all-reduce, not ZeRO training). Each engine picks
# which collectives it calls: on gloo, dsbench's runs a large reduce-scatter or all-gather as
# all_to_all or broadcasts (See [Note: gloo's large collectives]; the row's
# ``notes.large_collectives`` says so), and it sends nothing point-to-point.
# ``engine=dsbench, comm=shm`` (CPUs only) is dsbench's engine on dsbench's one-host
# shared-memory collectives (``kernels/shm.py``), its fastest on CPUs (docs/decisions.md,
# "Collectives on CPUs side by side"). Set beside the ``comm=native`` dsbench row, it shows what
# those collectives add; it is not an engine comparison, and DeepSpeed has no such rows. On GPUs
# NCCL/RCCL are dsbench's fastest collectives as well, so there are only ``comm=native`` rows.
# ``kernels=torch`` is torch's AdamW, unfused (torch's default code path: a per-tensor loop on
# CPUs, foreach on GPUs), in both engines: dsbench's through the registry's ``torch`` AdamW
# (torch.optim's functional adamw), DeepSpeed's as ``torch.optim.AdamW`` (``torch_adam``).
# ``kernels=best`` is each engine's fastest optimizer. On CPUs that is torch's fused AdamW in both
# (dsbench: registry ``torch`` with ``fused=True``; DeepSpeed: ``torch.optim.AdamW(fused=True)``,
# since its own CPU Adam would need a JIT build). On GPUs dsbench's is the registry's ``cuda`` or
# ``triton`` AdamW where one runs, while DeepSpeed's stays ``torch.optim.AdamW(fused=True)`` (the
# ds_config keeps ``torch_adam``, so DeepSpeed's FusedAdam, a JIT-built op, is not used): there
# the ``best`` rows compare different optimizer implementations.
def _grid(suite: str, ctx: Context) -> dict[str, list]:
    # ``comm`` comes before ``engine`` so that an interleaved group runs dsbench native, DeepSpeed
    # native, dsbench shm: the like-for-like pair side by side.
    if ctx.gpu:
        return {
            "model": ["gpt-small", "bert-large"],
            "comm": ["native"],
            "engine": ["dsbench", "deepspeed"],
            "stage": list(STAGES),
            "kernels": ["torch", "best"],
            "ranks": [ctx.ranks or max(ctx.device_count, 1)],
            "dtype": ["bfloat16"],
            "micro_batch": [8],
            "grad_accum": [2],
        }
    # shm is dsbench's own collectives' row on CPUs (See [Note: the training rows]).
    return {
        "model": ["mlp", "bert-tiny"],
        "comm": ["native", "shm"],
        "engine": ["dsbench", "deepspeed"],
        "stage": list(STAGES),
        "kernels": ["torch", "best"],
        "ranks": [ctx.ranks or 2],
        "dtype": ["float32"],
        "micro_batch": [16],
        "grad_accum": [2],
    }


# [Note: the offload rows]
# ``train_step_offload`` is the same setup as a second benchmark, so the ``train_step`` rows keep
# their ids: the first model at stages 2 and 3 with ZeRO-Offload, both engines, ``comm=native``,
# ``kernels=best``; ``offload=optimizer`` is ``offload_optimizer.device: "cpu"``,
# ``offload=optimizer+param`` adds ``offload_param`` (stage 3). dsbench's engine steps on the host
# with torch's fused AdamW (whatever ``kernels=best`` picks on the device), DeepSpeed with
# ``torch.optim.AdamW`` (fused). On CPUs host and device memory are one, so these rows measure
# the offload code paths' overhead; on GPUs they show the memory the device saves and what the
# copies cost.
def _offload_grid(suite: str, ctx: Context) -> dict[str, list]:
    grid = _grid(suite, ctx)
    return {
        **grid,
        "model": grid["model"][:1],
        "comm": ["native"],
        "stage": [2, 3],
        "kernels": ["best"],
        "offload": ["optimizer", "optimizer+param"],
    }


def _offload_keep(params: TrainingParams) -> bool:
    return params.offload == "optimizer" or params.stage == 3


def _keep(params: TrainingParams) -> bool:
    """DeepSpeed has its own comm layer over torch.distributed: only ``comm=native`` rows."""
    return params.engine == "dsbench" or params.comm == "native"


def ds_config(params: TrainingParams, world: int) -> dict:
    """The seed article's ZeRO config shape, for the case's stage, precision and batch (and
    offload, ``train_step_offload``)."""
    zero = {
        "stage": params.stage,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "reduce_scatter": True,
        "reduce_bucket_size": 50_000_000,
        "allgather_bucket_size": 50_000_000,
    }
    offload = params.offload
    if "optimizer" in offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if "param" in offload:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    return {
        "train_micro_batch_size_per_gpu": params.micro_batch,
        "gradient_accumulation_steps": params.grad_accum,
        "train_batch_size": params.micro_batch * params.grad_accum * world,
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": 1e-4, "weight_decay": 0.01, "torch_adam": True},
        },
        "fp16": {"enabled": params.dtype == "float16"},
        "bf16": {"enabled": params.dtype == "bfloat16"},
        "zero_optimization": zero,
    }


def _runs_here(op: str, name: str, device: str) -> tuple[bool, str]:
    """Whether registry implementation ``name`` of ``op`` really runs here (not in an
    interpreter), and if not why."""
    from dsbench.kernels import registry

    if name not in registry.names(op):
        return False, f"no {op} implementation '{name}' is registered"
    ok, why = registry.get(op, name).available(device)
    if ok and why:  # a non-empty reason with ok means interpreter-only
        return False, why
    return ok, why


def case_kernels(params: TrainingParams, device: str) -> dict[str, str]:
    """The registry implementations dsbench's engine runs for a case: ``params.comm`` for the
    three collectives, and for ``adamw`` the fastest that really runs here (``kernels=best``:
    cuda, triton, then torch) or torch's (``kernels=torch``). Raises Skip when ``comm`` cannot run
    here."""
    preference = ["cuda", "triton", "torch"] if params.kernels == "best" else ["torch"]
    if params.offload:  # the step runs on host tensors
        preference = ["torch"]
    chosen = {"adamw": next(n for n in preference if _runs_here("adamw", n, device)[0])}
    for op in COLLECTIVES:
        ok, why = _runs_here(op, params.comm, device)
        if not ok:
            raise Skip(f"comm={params.comm}: {op} cannot run here: {why}")
        chosen[op] = params.comm
    return chosen


_COMM_TEXT = {
    "native": "torch.distributed's own collectives over {backend} (registry native)",
    "shm": "dsbench's one-host shared-memory collectives in /dev/shm (registry shm), "
    "not torch.distributed",
}


def _torch_adamw_path(fused: bool | None, foreach: bool | None, tensors: list) -> str:
    """The torch AdamW code path these settings select for these tensors (torch's own default
    when both are None: foreach where supported, else a per-tensor loop; fused only if asked)."""
    if fused:
        return "fused"
    if foreach is None and fused is None:
        from torch.optim.optimizer import _default_to_fused_or_foreach

        _, foreach = _default_to_fused_or_foreach(tensors, False, use_fused=False)
    return "foreach (multi-tensor, unfused)" if foreach else "per-tensor loop (unfused)"


def _qualname(obj) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


# [Note: the same work per step]
# DeepSpeed's ZeRO optimizers compute the global gradient norm every step at stages 1, 2 and 3,
# with clipping off too (``DeepSpeedZeroOptimizer.step`` calls ``scaled_global_norm``,
# ``DeepSpeedZeroOptimizer_Stage3.step`` ``_get_norm_groups``: an fp64 pass over the rank's
# gradient partition and an all-reduce); dsbench's engine computes it only when clipping or fp16
# loss scaling needs it, so this suite turns on its ``grad_norm_every_step`` (``GRAD_NORM``).
# What remains is on every row (``WORK_DIFFERENCES``): DeepSpeed also multiplies the fp32
# gradient partition by 1 / loss scale at every step (``unscale_and_clip_grads``; 1.0 here),
# which dsbench's engine skips at scale 1.
WORK_DIFFERENCES = (
    "DeepSpeed's ZeRO optimizer multiplies the fp32 gradient partition by 1 / loss scale at every "
    "step (unscale_and_clip_grads; the scale is 1.0 without fp16 loss scaling); dsbench's engine "
    "skips that multiply at scale 1"
)
GRAD_NORM = (
    "global gradient norm computed every step with clipping off, in both engines (dsbench: "
    "grad_norm_every_step; DeepSpeed: its ZeRO optimizer always does), one scalar "
    "torch.distributed all-reduce each"
)


# [Note: a row's notes]
# Each row's notes say what that engine really ran, never the other engine's choices. dsbench
# rows: ``kernels`` (the registry implementation per op: adamw, allreduce, reduce_scatter,
# allgather), ``collectives`` and ``optimizer`` (the registry AdamW and the torch code path it
# takes). DeepSpeed rows: ``collectives`` (deepspeed.comm over torch.distributed and its
# backend), ``optimizer`` (the torch optimizer DeepSpeed instantiated, its fused/foreach
# settings, the code path they select, and the ZeRO wrapper around it) and ``deepspeed`` (its
# version). Both: ``grad_norm`` and ``work_differences`` (See [Note: the same work per step]).
def dsbench_notes(engine) -> dict:
    """What dsbench's engine really runs: the registry implementation per op, the collectives
    and the optimizer."""
    import torch
    import torch.distributed as dist

    from dsbench.kernels import registry

    s = engine.settings
    used = {op: registry.get(op, s.kernels.get(op)).name for op in ("adamw", *COLLECTIVES)}
    comm = {used[op] for op in COLLECTIVES}
    text = " / ".join(
        _COMM_TEXT.get(c, f"registry {c}").format(backend=dist.get_backend(engine.group))
        for c in sorted(comm)
    )
    adamw = registry.get("adamw", used["adamw"])
    optimizer = {"registry": f"adamw={adamw.name} ({adamw.target})"}
    if adamw.name == "torch":
        like_masters = [torch.empty(0, device=engine.opt_device)]  # fp32, where the step runs
        optimizer.update(
            runs="torch.optim's functional adamw, "
            + _torch_adamw_path(engine.fused, None, like_masters)
            + (" on the host (offload_optimizer)" if s.offload_optimizer else ""),
            fused=engine.fused,
            foreach=None,
        )
    else:
        optimizer["runs"] = adamw.description
    notes = {"kernels": used, "collectives": text, "optimizer": optimizer}
    if algorithms := engine.comm.algorithms():  # [Note: gloo's large collectives]
        notes["large_collectives"] = algorithms
    return notes


def deepspeed_notes(engine) -> dict:
    """What DeepSpeed really runs: its comm layer and backend, the torch optimizer it
    instantiated (inside its ZeRO wrapper), and its version."""
    import torch.distributed as dist

    from dsbench.engines.deepspeed import deepspeed_version

    try:
        from deepspeed.comm import comm as ds_comm

        layer = f"deepspeed.comm ({type(ds_comm.cdb).__name__})"
    except (ImportError, AttributeError):
        layer = "deepspeed.comm"
    inner = getattr(engine, "basic_optimizer", None)  # the torch optimizer DeepSpeed built
    if inner is None:
        inner = engine.optimizer.optimizer
    defaults = getattr(inner, "defaults", {})
    fused, foreach = defaults.get("fused"), defaults.get("foreach")
    optimizer = {"class": _qualname(inner), "fused": fused, "foreach": foreach}
    if type(inner).__module__.startswith("torch.optim"):
        tensors = [p for g in inner.param_groups for p in g["params"]]
        optimizer["runs"] = _torch_adamw_path(fused, foreach, tensors)
    optimizer["zero_wrapper"] = _qualname(engine.optimizer)
    return {
        "collectives": f"{layer} over torch.distributed {dist.get_backend()}",
        "optimizer": optimizer,
        "deepspeed": deepspeed_version(),
    }


def _unavailable(params: TrainingParams) -> str | None:
    """A DeepSpeed row where DeepSpeed is not installed: skipped before any rank is spawned."""
    from dsbench.engines.deepspeed import INSTALL_HINT, deepspeed_version

    if params.engine == "deepspeed" and deepspeed_version() is None:
        return f"DeepSpeed is not installed; {INSTALL_HINT}"
    return None


def _check_deepspeed(params: TrainingParams) -> None:
    """Skip a DeepSpeed case where DeepSpeed is missing or the case is not one it runs."""
    from dsbench.engines.deepspeed import INSTALL_HINT, deepspeed_version

    if deepspeed_version() is None:
        raise Skip(f"DeepSpeed is not installed; {INSTALL_HINT}")
    if not _keep(params):
        raise Skip("DeepSpeed uses its own comm layer over torch.distributed: comm=native only")


@dataclass(frozen=True)
class _Built:
    """A case's engine and what it was built from."""

    preset: Any  # dsbench.models.ModelPreset
    cfg: Any  # dsbench.zero.config.DSConfig
    kernels: dict[str, str] | None  # dsbench's registry implementations; None for DeepSpeed
    fused: bool | None  # fused AdamW asked for (kernels=best), else torch's default
    engine: Any


def _build(params: TrainingParams, ctx: Context, world: int) -> _Built:
    """The case's model, ZeRO config and engine."""
    from dsbench.engines import build_engine
    from dsbench.models import get_model
    from dsbench.zero.config import load_config

    preset = get_model(params.model)
    cfg = load_config(
        ds_config(params, world), world_size=world, warn=lambda m: None, for_engine=params.engine
    )
    deepspeed = params.engine == "deepspeed"
    kernels = None if deepspeed else case_kernels(params, "cuda" if ctx.gpu else "cpu")
    fused = True if params.kernels == "best" else None
    model = preset.build(seed=0, device=ctx.device)
    engine = build_engine(
        params.engine,
        model,
        cfg,
        device=ctx.device,
        kernels=kernels,
        fused_optimizer=fused,
        grad_norm_every_step=True,  # See [Note: the same work per step]
    )
    return _Built(preset=preset, cfg=cfg, kernels=kernels, fused=fused, engine=engine)


def _step_functions(built: _Built, params: TrainingParams, ctx: Context, world: int):
    """``train_step()`` (one timed optimizer step) and ``micro_batches()`` (the next step's
    micro-batches, for the floor and the phases), both advancing the same step counter."""
    import torch
    import torch.distributed as dist

    from dsbench.models.data import batch_index

    preset, engine = built.preset, built.engine
    mb, gas, rank = params.micro_batch, params.grad_accum, dist.get_rank()
    dtype = getattr(torch, params.dtype)
    state = {"step": 0}

    def batch(step: int, micro: int) -> tuple:
        index = batch_index(step, rank=rank, world_size=world, micro_step=micro, grad_accum=gas)
        return preset.batch(mb, seed=0, step=index, device=ctx.device, dtype=dtype)

    def train_step() -> None:
        for micro in range(gas):
            # Through the engine's forward, as users call it: DeepSpeed's registers the backward
            # hook that divides gradients by gradient_accumulation_steps (engine.module would
            # skip it, leaving DeepSpeed's gradients and norm gas times too large).
            loss = preset.loss(engine, batch(state["step"], micro))
            engine.backward(loss)
            engine.step()
        state["step"] += 1

    def micro_batches() -> list[tuple]:
        step = state["step"]
        out = [batch(step, micro) for micro in range(gas)]
        state["step"] += 1
        return out

    return train_step, micro_batches


def _profile_function(
    built: _Built, micro_batches, params: TrainingParams, ctx: Context, world: int
):
    """``profile()``, called after timing: this rank's compute-only floor, and the phases of a
    few more steps."""
    preset, engine = built.preset, built.engine

    def profile() -> dict:
        import torch

        from dsbench.kernels import registry
        from dsbench.measure.memory import release_freed
        from dsbench.suites.step_floor import measure_floor, owned_elements, phase_breakdown

        adamw = registry.get("adamw", (built.kernels or {}).get("adamw", "torch"))
        floor = measure_floor(
            preset, micro_batches(), dtype=getattr(torch, params.dtype), device=ctx.device,
            owned=owned_elements(preset.num_params(), params.stage, world),
            adamw=adamw.load(), fused=getattr(engine, "fused", built.fused),
        )  # fmt: skip
        release_freed(ctx.device)
        phases = phase_breakdown(engine, micro_batches, preset.loss, device=ctx.device)
        return {**floor, "phases_ms": phases}

    return profile


def _setup(params: TrainingParams, ctx: Context) -> Case:
    import torch.distributed as dist

    world = dist.get_world_size()
    deepspeed = params.engine == "deepspeed"
    if deepspeed:
        _check_deepspeed(params)
    built = _build(params, ctx, world)
    preset, cfg, engine = built.preset, built.cfg, built.engine
    train_step, micro_batches = _step_functions(built, params, ctx, world)
    profile = _profile_function(built, micro_batches, params, ctx, world)
    samples = cfg.batch.train_batch_size
    work = Work(
        items=samples,
        tokens=samples * preset.tokens_per_sample,
        flops=preset.flops_per_sample(training=True) * samples / world,
    )
    notes = {
        "params": preset.num_params(),
        "world_size": world,
        "train_batch_size": samples,
        **(deepspeed_notes(engine) if deepspeed else dsbench_notes(engine)),
        **({"offload": _offload_note(cfg, ctx.gpu)} if params.offload else {}),
        "grad_norm": GRAD_NORM,
        "work_differences": WORK_DIFFERENCES,
    }
    return Case(fn=train_step, work=work, notes=notes, teardown=engine.destroy, profile=profile)


def _offload_note(cfg, gpu: bool) -> str:
    from dsbench.zero.config.offload_config import summary

    z = cfg.zero_optimization
    pinned = "page-locked host buffers" if gpu else "pin_memory has no effect without a GPU"
    return f"{summary(z.stage, z.offload_optimizer, z.offload_param)} ({pinned})"


STEP_EFFICIENCY = Metric(
    name="step_efficiency",
    value=lambda w, t: w.floor_s / t,
    description="the rank's compute-only floor / step time (dsbench.suites.step_floor); "
    "0 where the floor was not measured",
)


TRAINING = Benchmark(
    name="train_step",
    description="one optimizer step of ZeRO training (dsbench engine or DeepSpeed) over N ranks, "
    "on torch.distributed's collectives (comm=native) or dsbench's (comm=shm, dsbench only)",
    grid=_grid,
    params=TrainingParams,
    setup=_setup,
    metrics=(
        Metric(
            name="samples_per_s",
            value=lambda w, t: w.items / t,
            description="train_batch_size / step time",
        ),
        Metric(
            name="tokens_per_s",
            value=lambda w, t: w.tokens / t,
        ),
        Metric(
            name="tflops_per_rank",
            value=lambda w, t: w.flops / t / 1e12,
            peak="flops:{dtype}",
            description="6·N·T·batch / t / world; % of peak = MFU",
        ),
        time_ms(),
        STEP_EFFICIENCY,
    ),
    ranks_param="ranks",
    min_ranks=1,
    unavailable=_unavailable,
    interleave=("engine", "comm"),
    keep=_keep,
    suites=("training",),
)

TRAINING_OFFLOAD = Benchmark(
    name="train_step_offload",
    description="one optimizer step of ZeRO training with CPU offload of the optimizer (and at "
    "stage 3 the parameters), dsbench engine and DeepSpeed, over N ranks",
    grid=_offload_grid,
    params=TrainingParams,
    setup=_setup,
    metrics=TRAINING.metrics,
    ranks_param="ranks",
    min_ranks=1,
    unavailable=_unavailable,
    interleave=("engine",),
    keep=_offload_keep,
    suites=("training",),
)

BENCHMARKS = [TRAINING, TRAINING_OFFLOAD]
