"""How close a training step is to its floor (issue: "ZeRO step close to its floor").

- **Floor**: what one rank must compute in a step when communication is free or fully hidden:
  forward and backward of its ``grad_accum`` micro-batches on a plain copy of the model (no
  engine, no communication; gradients kept in place as dsbench's engine keeps them:
  ``_plain_model``), then one AdamW step over the fp32 shard it owns (all parameters at stage
  0, 1/world of them at stages 1-3), with the same AdamW implementation the case's engine runs;
  timed as one sequence per repetition, so each part meets the caches the other leaves, as in
  a step ([Note: the floor is a step]). Measured on the rank itself, so with the rank's thread
  count and beside the other ranks doing the same, after the timed steps (it does not touch
  their memory figures). Batches are drawn before the clock starts, so the floor is if anything
  low. ``step_efficiency = floor / step``.
- **Phases**: a few more steps of the case's own engine, started by every rank together (a
  barrier after the floor) after one unrecorded step, each split into forward, backward,
  exposed reduce-scatter (time blocked waiting for gradient reductions), optimizer, exposed
  all-gather (time blocked waiting for parameter gathers) and other (the rest of the step: the
  global gradient norm, clipping, copies). dsbench's engine reports its waits itself
  (``ZeroEngine.phase_seconds``); DeepSpeed's does not, so its reductions stay inside backward
  and its all-gather inside "other", and the row says so. Each phase is its median over the
  recorded steps ([Note: a typical step's phases]). On GPUs each phase is bracketed by device
  synchronisations, so device work is counted where it is waited for.

[Note: a typical step's phases]
------------------------------
The phases explain the timed step, so they should add up to it. The first step after the floor
meets caches the floor's plain model left behind, and one slow step of three moves a mean. So
one step runs unrecorded first, and each phase is the median over five recorded steps, as the
timed step is a median. Medians of parts need not add up to the median of the whole (what they
summed to: docs/decisions.md, "Step phases: one unrecorded step, then the median of five").
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable

import torch

PHASES = ("forward", "backward", "reduce_scatter", "optimizer", "allgather", "other")


def _timed_sequence(
    parts: list[Callable[[], object]], device: str, reps: int, warmup: int = 2
) -> tuple[float, list[float]]:
    """Median seconds of ``parts`` called in order, and the median of each part, over ``reps``
    sequences after ``warmup``."""
    gpu = device.startswith("cuda")
    totals, each = [], [[] for _ in parts]
    for i in range(warmup + reps):
        if gpu:
            torch.cuda.synchronize(device)
        marks = [time.perf_counter()]
        for fn in parts:
            fn()
            if gpu:
                torch.cuda.synchronize(device)
            marks.append(time.perf_counter())
        if i >= warmup:
            totals.append(marks[-1] - marks[0])
            for k in range(len(parts)):
                each[k].append(marks[k + 1] - marks[k])
    return statistics.median(totals), [statistics.median(t) for t in each]


# [Note: the floor is a step]
# The floor first timed its forward and backward, then AdamW over the shard, each repeated back
# to back. AdamW back to back finds its state in cache, as no step does: a step's forward and
# backward come between two of its AdamW steps, so back to back it ran much faster than inside
# a step. Timed as one sequence, each part meets the caches the other leaves, as in a step
# without communication; the back-to-back AdamW is kept in the notes as
# ``optimizer_back_to_back``. The sequence matched dsbench's engine with every collective made
# free (the step a free network would give), where the parts timed apart undershot it
# (docs/decisions.md, "The floor is timed as one sequence").


def measure_floor(
    preset,
    batches: list[tuple],
    *,
    dtype: torch.dtype,
    device: str,
    owned: int,
    adamw: Callable,
    fused: bool | None,
    reps: int = 15,
) -> dict:
    """This rank's compute-only floor in seconds: ``{"floor_s", "floor_ms": {...}}``, the
    median of the sequence and of its parts over ``reps`` repetitions ([Note: the floor is a
    step]; why 15: docs/decisions.md, "The floor's repetitions")."""
    p, g, m, v = (torch.zeros(owned, device=device) for _ in range(4))
    g.normal_(0, 1e-3)
    steps = [torch.zeros((), device=device)]

    def step() -> None:
        adamw([p], [g], [m], [v], steps, lr=1e-4, beta1=0.9, beta2=0.999, eps=1e-8,
              weight_decay=0.01, fused=fused)  # fmt: skip

    with _plain_model(preset, batches, dtype=dtype, device=device) as forward_backward:
        total, (fwd_bwd, opt) = _timed_sequence([forward_backward, step], device, reps)
    alone = _timed_sequence([step], device, reps)[0]  # AdamW back to back
    return {
        "floor_s": total,
        "floor_ms": {
            "forward_backward": fwd_bwd * 1e3,
            "optimizer": opt * 1e3,
            "optimizer_back_to_back": alone * 1e3,
        },
    }


@contextlib.contextmanager
def _plain_model(preset, batches, *, dtype, device: str):
    """The micro-batches' forward and backward on a plain copy of the model (a function to
    call), its gradients kept as dsbench's engine keeps them ([Note: gradients overwrite stale
    slots] in :mod:`dsbench.zero.engine`): one flat buffer allocated once, each parameter's
    slice a ``GradSlot`` that a step's first gradient overwrites and later ones add to,
    GEMM-backed layers writing their weight gradients there directly. So the floor allocates no
    gradient and zeroes nothing, and costs no more than the engine's own forward and backward
    (docs/decisions.md, "The floor's gradients in kept slots"). The hooks are removed on
    exit."""
    from dsbench.zero.buckets import Bucket, GradSlot

    model = preset.build(seed=0, device=device, dtype=dtype)  # freed on return
    run = Bucket([p for p in model.parameters() if p.requires_grad], 1, 0, sharded=False)
    run.bind(torch.zeros(run.numel, dtype=dtype, device=device), "grad")
    slots = [GradSlot(p, p.grad) for p in run.params]
    hooks = []
    for slot in slots:
        slot.clear()  # stale from the start: the first gradients overwrite the zeros
        hooks.append(slot.param.register_post_accumulate_grad_hook(lambda _, s=slot: s.landed()))

    def forward_backward() -> None:
        for batch in batches:
            (preset.loss(model, batch) / len(batches)).backward()
            for slot in slots:  # the next backward's first use writes again
                slot.written = False
        for slot in slots:  # stale: the next step's first gradients overwrite them
            slot.clear()

    try:
        yield forward_backward
    finally:
        for hook in hooks:
            hook.remove()


def owned_elements(num_params: int, stage: int, world: int) -> int:
    """The fp32 elements one rank's optimizer steps over (ZeRO shards them from stage 1)."""
    return num_params if stage == 0 else math.ceil(num_params / world)


def _start_together() -> None:
    """Ranks finish the floor at different times; without a barrier, the first measured step's
    first collective would count the difference as exposed communication (docs/decisions.md,
    "A barrier before the first measured step")."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def phase_breakdown(
    engine,
    micro_batches: Callable[[], list[tuple]],
    loss_fn,
    *,
    device: str,
    steps: int = 5,
    warmup: int = 1,
) -> dict:
    """Milliseconds per phase of one step of ``engine``: each phase's median over ``steps``
    steps, after ``warmup`` unrecorded ones ([Note: a typical step's phases])."""
    gpu = device.startswith("cuda")
    waits = getattr(engine, "phase_seconds", "absent")
    own = waits != "absent"  # dsbench's engine reports its waits
    recorded: list[dict[str, float]] = []

    def clock() -> float:
        if gpu:
            torch.cuda.synchronize(device)
        return time.perf_counter()

    def counters() -> dict:
        return dict(engine.phase_seconds) if own else {}

    _start_together()
    if own:
        engine.phase_seconds = {}
    try:
        for n in range(warmup + steps):
            totals = dict.fromkeys(PHASES, 0.0)
            for batch in micro_batches():
                for phase in ("forward", "backward", "step"):
                    before, t0 = counters(), clock()
                    if phase == "forward":
                        loss = loss_fn(engine, batch)
                    elif phase == "backward":
                        engine.backward(loss)
                    else:
                        engine.step()
                    wall, after = clock() - t0, counters()
                    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
                    rs, ag, opt = (d.get(k, 0.0) for k in ("reduce_wait", "allgather_wait",
                                                            "optimizer"))  # fmt: skip
                    totals["reduce_scatter"] += rs
                    totals["allgather"] += ag
                    totals["optimizer"] += opt
                    rest = wall - rs - ag - opt
                    totals["other" if phase == "step" else phase] += rest
            if n >= warmup:
                recorded.append(totals)
    finally:
        if own:
            engine.phase_seconds = None
    out: dict = {k: statistics.median(t[k] for t in recorded) * 1e3 for k in PHASES}
    if not own:  # DeepSpeed: its optimizer runs inside engine.step, counted in "other"
        out["note"] = (
            "DeepSpeed does not report its waits: its gradient reductions are inside "
            "backward, its optimizer and all-gather inside other"
        )
    return out
