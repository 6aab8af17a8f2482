"""Run on spawned ranks by tests/test_zero_engine.py: train a small model with the ZeRO engine
and with a single-process reference, and send what the test compares."""

import contextlib
import os

import torch
import torch.distributed as dist
from torch import nn

from dsbench.kernels import autograd
from dsbench.zero.engine import ZeroEngine, ZeroSettings

IN, HID, OUT = 12, 37, 5  # odd sizes: buckets and shards do not divide evenly


def make_model(seed: int = 0, layers: str = "torch") -> nn.Module:
    """``layers``: "torch" (nn.Linear), "gemm" (kernels.autograd.Linear, whose weight gradients
    the engine writes in place: [Note: weight gradients in place]) or "gemm-shared" (those, and
    loss_fn uses both weights a second time)."""
    torch.manual_seed(seed)
    lin = nn.Linear if layers == "torch" else autograd.Linear
    model = nn.Sequential(lin(IN, HID), nn.GELU(), nn.LayerNorm(HID), lin(HID, OUT))
    model.shared = layers == "gemm-shared"
    return model


def batch(step: int, micro: int, rank: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + 10 * micro + rank)
    return torch.randn(n, IN, generator=g), torch.randn(n, OUT, generator=g)


def loss_fn(model, x, y, skip_norm: bool = False):
    """MSE of the model's output; ``skip_norm``: without the LayerNorm (its parameters get no
    gradient from this micro-step)."""
    if skip_norm:
        loss = nn.functional.mse_loss(model[3](model[1](model[0](x))), y)
    else:
        loss = nn.functional.mse_loss(model(x), y)
    if getattr(model, "shared", False):  # a second GEMM on the first weight, a plain op on the last
        w0, w3 = model[0].weight, model[3].weight
        loss = loss + 1e-2 * autograd.linear(x, w0).square().mean() + 1e-2 * w3.square().sum()
    return loss


def reference(
    settings: ZeroSettings,
    steps: int,
    world: int,
    micro_bs: int,
    scheduler: dict | None = None,
    skip: frozenset = frozenset(),
    layers: str = "torch",
) -> dict:
    """Single process, fp32, torch.optim.AdamW on the global batch; ``scheduler`` (a ds_config
    ``scheduler`` section): DeepSpeed's own scheduler class, stepped after each optimizer step;
    ``skip``: the (step, micro-step) pairs whose loss leaves out the LayerNorm (a parameter
    without a gradient for a whole step counts as a zero gradient, as in ZeRO engines)."""
    model = make_model(layers=layers)
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=settings.lr,
        betas=settings.betas,
        eps=settings.eps,
        weight_decay=settings.weight_decay,
        foreach=False,
    )
    if scheduler is not None:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        from deepspeed.runtime import lr_schedules

        scheduler = getattr(lr_schedules, scheduler["type"])(opt, **scheduler["params"])
    losses = []
    for step in range(steps):
        opt.zero_grad(set_to_none=False)
        for micro in range(settings.grad_accum):
            xs, ys = zip(*(batch(step, micro, r, micro_bs) for r in range(world)), strict=True)
            skip_norm = (step, micro) in skip
            loss = loss_fn(model, torch.cat(xs), torch.cat(ys), skip_norm) / settings.grad_accum
            loss.backward()
            losses.append(loss.item() * settings.grad_accum)
        if settings.gradient_clipping:
            nn.utils.clip_grad_norm_(model.parameters(), settings.gradient_clipping)
        opt.step()
        if scheduler is not None:
            scheduler.step()
    return {n: p.detach().clone() for n, p in model.named_parameters()}


@contextlib.contextmanager
def _environ(values: dict[str, str]):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def several(payload, *, device, send):
    """Several of this module's workers in one spawn of the ranks (starting them costs more
    than most workers' work): payload["jobs"] is [(worker name, its payload)], run in order;
    each message goes out as (worker name, message)."""
    for name, job in payload["jobs"]:
        globals()[name](job, device=device, send=lambda msg, name=name: send((name, msg)))


def train(payload, *, device, send):
    """For each ZeroSettings in payload["cases"]: train, then rank 0 sends the final fp32 state
    and the single-process reference's (with payload["schedulers"][index], when given, driving
    the reference's lr through DeepSpeed's scheduler class). ``steps``, ``skip``, ``layers``,
    ``landing``, ``comm_thread``, ``sinks`` and ``env`` (environment variables set while the
    engine is made) apply to every case, or per case from payload["per_case"][index] (a dict of
    some of them), so that one spawn of the ranks serves cases trained in several ways."""
    micro_bs = payload["micro_bs"]
    rank, world = dist.get_rank(), dist.get_world_size()
    schedulers = payload.get("schedulers") or [None] * len(payload["cases"])
    per_case = payload.get("per_case") or [{}] * len(payload["cases"])
    for index, settings in enumerate(payload["cases"]):
        options = {**payload, **per_case[index]}
        steps = options["steps"]
        skip = frozenset(options.get("skip", ()))
        layers = options.get("layers", "torch")
        # different init per rank: the engine broadcasts rank 0's
        model = make_model(seed=rank, layers=layers)
        with _environ(options.get("env", {})):
            engine = ZeroEngine(model, settings)
        if not options.get("landing", True):  # landed after the collective, in torch passes
            engine.comm.lands = False
        if options.get("comm_thread"):  # the worker thread even where shm would run inline
            engine.comm.inline = False
        sinks = sum(autograd.grad_sink(p) is not None for p in model.parameters())
        if not options.get("sinks", True):  # weight gradients through autograd's own add
            for p in model.parameters():
                autograd.set_grad_sink(p, None)
        for step in range(steps):
            for micro in range(settings.grad_accum):
                x, y = batch(step, micro, rank, micro_bs)
                x, y = x.to(settings.dtype), y.to(settings.dtype)
                loss = loss_fn(engine.module, x, y, (step, micro) in skip)
                engine.backward(loss)
                engine.step()
        state = engine.full_state_dict()
        counts = {
            "global_steps": engine.global_steps,
            "skipped_steps": engine.skipped_steps,
            "scale": settings.loss_scaler.scale if settings.loss_scaler is not None else None,
            "params_replicated": engine._params_replicated or engine.stage3.resident,
            "large_collectives": engine.comm.large_calls,
            "sinks": sinks,
            "staged": sum(len(pool) for pool in engine.stage3.grad_pool.values()),
            "lands": engine.comm.lands,
            "inline": engine.comm.inline,
            "threads": torch.get_num_threads(),
            "grad_norm": engine.get_global_grad_norm(),
        }
        engine.destroy()
        if rank == 0:
            ref = reference(settings, steps, world, micro_bs, schedulers[index], skip, layers)
            send({"index": index, "state": state, "reference": ref, **counts})


def _steps(engine, settings, first: int, count: int, micro_bs: int) -> list[float]:
    rank, losses = dist.get_rank(), []
    for step in range(first, first + count):
        for micro in range(settings.grad_accum):
            x, y = batch(step, micro, rank, micro_bs)
            loss = loss_fn(engine.module, x, y)
            engine.backward(loss)
            engine.step()
            losses.append(loss.item())
    return losses


def checkpoint_run(payload, *, device, send):
    """mode 'save': train `before` steps, save, train `after` more (the uninterrupted run);
    mode 'resume': load the checkpoint in fresh processes and train `after` steps."""
    settings, directory = payload["settings"], payload["dir"]
    engine = ZeroEngine(make_model(seed=dist.get_rank()), settings)
    if payload["mode"] == "save":
        _steps(engine, settings, 0, payload["before"], 4)
        engine.save_checkpoint(directory, client_state={"data_step": payload["before"]})
        losses = _steps(engine, settings, payload["before"], payload["after"], 4)
        state = engine.full_state_dict()
    else:
        client = engine.load_checkpoint(directory)
        losses = _steps(engine, settings, client["data_step"], payload["after"], 4)
        state = engine.full_state_dict()
    engine.destroy()
    if dist.get_rank() == 0:
        send({"losses": losses, "state": state})


def overflow(payload, *, device, send):
    settings = payload["settings"]
    engine = ZeroEngine(make_model(seed=0), settings)
    before = engine.full_state_dict()
    scales, unchanged = [], None
    for step in range(payload["steps"]):
        x, y = batch(step, 0, dist.get_rank(), 4)
        engine.backward(loss_fn(engine.module, x.half(), y.half()))
        engine.step()
        scales.append(settings.loss_scaler.scale)
        if step == 0:
            after = engine.full_state_dict()
            unchanged = all(after[k].equal(before[k]) for k in before)
    engine.destroy()
    if dist.get_rank() == 0:
        send(
            {
                "skipped": engine.skipped_steps,
                "applied": engine.global_steps,
                "scales": scales,
                "unchanged_after_first_skip": unchanged,
            }
        )


def large_collectives_bits(payload, *, device, send):
    """[Note: gloo's large collectives]'s reduce-scatter and all-gather against gloo's own, on
    the same inputs (every dtype the engine reduces in); rank 0 sends, per dtype, whether each
    gave the same bits."""
    from dsbench.zero.collectives import allgather_by_broadcast, reduce_scatter_by_alltoall

    rank, world = dist.get_rank(), dist.get_world_size()
    out = {}
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        g = torch.randn(world * 4099, generator=torch.Generator().manual_seed(rank)).to(dtype)
        ours, gloos = (torch.empty(4099, dtype=dtype) for _ in range(2))
        dist.reduce_scatter_tensor(gloos, g.clone())
        reduce_scatter_by_alltoall(ours, g, None, torch.empty_like(g))
        full_ours, full_gloos = torch.empty_like(g), torch.empty_like(g)
        dist.all_gather_into_tensor(full_gloos, gloos)
        allgather_by_broadcast(full_ours, gloos, None)
        close = torch.allclose(ours.float(), gloos.float(), rtol=1e-2, atol=1e-2)
        out[str(dtype)] = (torch.equal(ours, gloos), close, torch.equal(full_ours, full_gloos))
    if rank == 0:
        send(out)


def inline_phases(payload, *, device, send):
    """[Note: collectives on the calling thread]: with shm collectives on one-thread ranks each
    reduce-scatter runs at submission, and its whole time must count as blocked time
    ("reduce_wait") in the engine's phases. Every reduce-scatter is slowed by ``delay_s`` here;
    sends ``{"inline", "reduce_wait", "reductions"}`` from one step of stage 2 (2 micro-steps)."""
    import time

    shm = dict.fromkeys(("allreduce", "reduce_scatter", "allgather"), "shm")
    settings = ZeroSettings(stage=2, grad_accum=2, overlap_comm=True, kernels=shm)
    engine = ZeroEngine(make_model(seed=dist.get_rank()), settings)
    run, calls = engine.comm._reduce_scatter, []

    def slowed(*args, **kwargs):
        calls.append(1)
        time.sleep(payload["delay_s"])
        return run(*args, **kwargs)

    engine.comm._reduce_scatter = slowed
    engine.phase_seconds = {}
    for micro in range(2):
        x, y = batch(0, micro, dist.get_rank(), 4)
        engine.backward(loss_fn(engine.module, x, y, False))
        engine.step()
    waited = engine.phase_seconds.get("reduce_wait", 0.0)
    threads = torch.get_num_threads()
    send({"inline": engine.comm.inline, "threads": threads, "reduce_wait": waited,
          "reductions": len(calls)})  # fmt: skip
    engine.destroy()
