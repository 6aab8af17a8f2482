"""Optimizer step benchmarks.

AdamW on fp32 parameters, gradients and moments moves 28 bytes per parameter per step
(reads p, g, m, v = 16 B; writes p, m, v = 12 B), so it is memory-bound: the figure of merit is
GB/s against the device's memory bandwidth (the bytes counted above: each tensor read or
written once, the least any implementation moves). With the fp16 loss
scaler's unscaling (``scaler=True``) the convention is 32 B/param (the unscaled gradient written
back), whether or not an implementation actually writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsbench.kernels import registry
from dsbench.suites.base import (
    Benchmark,
    Case,
    Context,
    Metric,
    Skip,
    Work,
    gbps,
    impl_choices,
    time_ms,
)

ADAMW_BYTES_PER_PARAM = 28
ADAMW_STATE_BYTES_PER_PARAM = 16
"""The working set: p, g, m and v, fp32 (what a cache holds between calls)."""

M = 1_000_000


@dataclass(frozen=True, kw_only=True)
class AdamWParams:
    """A case of :data:`ADAMW`."""

    impl: str
    """The registry's AdamW implementation."""
    params: int
    """Parameters updated per step (fp32 p, g, m and v each this many elements)."""
    scaler: bool = False
    """With the fp16 loss scaler's unscaling (the ``full`` suite's grid only)."""


def _grid(suite: str, ctx: Context) -> dict[str, list]:
    """quick and full follow the cache (:func:`dsbench.hardware.caches.ladder_sizes`): at least
    one size fits the device's last-level cache and one is at least 4x it, so on every machine
    (an L3 of 2 MiB or 768 MiB, an H100's 50 MiB L2, MI300X's 256 MiB Infinity Cache) the rows
    show both regimes."""
    from dsbench.hardware.caches import ladder_sizes

    sizes = {
        "smoke": [100_000],
        "quick": [1 * M, 4 * M, 16 * M] if not ctx.gpu else [4 * M, 16 * M, 64 * M],
        "full": [1 * M, 4 * M, 16 * M, 64 * M]
        if not ctx.gpu
        else [16 * M, 64 * M, 256 * M, 1024 * M],
    }[suite]
    if suite != "smoke" and ctx.llc_bytes:
        sizes = ladder_sizes(sizes, ADAMW_STATE_BYTES_PER_PARAM, ctx.llc_bytes)
    grid = {"impl": impl_choices("adamw", suite, ctx), "params": sizes}
    if suite == "full":  # also with the fp16 loss scaler's unscaling (32 B/param)
        grid["scaler"] = [False, True]
    return grid


def bytes_per_param(case: AdamWParams) -> int:
    """28 B/param; 32 with the loss scaler's unscaling (the unscaled gradient written back)."""
    return ADAMW_BYTES_PER_PARAM + (4 if case.scaler else 0)


def _work(case: AdamWParams, ctx: Context) -> Work:
    n = case.params
    return Work(
        bytes=bytes_per_param(case) * n, items=n, working_set=ADAMW_STATE_BYTES_PER_PARAM * n
    )


def _setup(case: AdamWParams, ctx: Context) -> Case:
    import torch

    from dsbench.kernels.reference import fused_adamw_supported
    from dsbench.measure.timing import rotation_count

    impl = registry.get("adamw", case.impl)
    ok, why = impl.available("cuda" if ctx.gpu else "cpu")
    if not ok:
        raise Skip(why)
    step = impl.load()
    n, device = case.params, ctx.torch_device
    fused = fused_adamw_supported(device)
    g = torch.Generator(device=device).manual_seed(0)
    sets = []
    for _ in range(rotation_count(16 * n, device)):
        p, grad = (torch.randn(n, device=device, generator=g) for _ in range(2))
        m, v = torch.zeros(n, device=device), torch.zeros(n, device=device)
        sets.append(([p], [grad], [m], [v], [torch.zeros((), dtype=torch.float32, device=device)]))

    scale = torch.tensor(1024.0, device=device) if case.scaler else None
    found_inf = torch.zeros((), device=device) if scale is not None else None
    if scale is not None:
        for s in sets:
            s[1][0].mul_(1024.0)  # gradients as the fp16 loss scaler leaves them

    def fn(p, grad, m, v, steps):
        step(
            p,
            grad,
            m,
            v,
            steps,
            lr=1e-3,
            beta1=0.9,
            beta2=0.999,
            eps=1e-8,
            weight_decay=0.01,
            grad_scale=scale,
            found_inf=found_inf,
            fused=fused,
        )

    return Case(
        fn=fn,
        args=sets,
        work=_work(case, ctx),
        notes={
            "variant": "fused" if fused else "foreach",
            "bytes_per_param": bytes_per_param(case),
        },
    )


ADAMW = Benchmark(
    name="adamw",
    description="AdamW step on fp32 params/grads/moments (torch reference, fused where "
    "available); GB/s at 28 B/param",
    grid=_grid,
    params=AdamWParams,
    setup=_setup,
    work_of=_work,
    metrics=(
        gbps("bandwidth", peak="mem_bandwidth"),
        Metric(
            name="params_per_s",
            value=lambda w, t: w.items / t / 1e9,
            description="parameters updated per second",
        ),
        time_ms(),
    ),
)

BENCHMARKS = [ADAMW]


@dataclass(frozen=True, kw_only=True)
class CopyParams:
    """A case of :data:`COPY`."""

    size: int
    """Bytes copied (float32 elements x 4)."""


def _copy_grid(suite: str, ctx: Context) -> dict[str, list]:
    return {"size": [2**30] if ctx.gpu else [2**28]}


def _copy_work(case: CopyParams, ctx: Context) -> Work:
    size = case.size
    return Work(bytes=2.0 * size, working_set=2.0 * size)  # each byte read once, written once


def _copy_setup(case: CopyParams, ctx: Context) -> Case:
    import torch

    n = case.size // 4
    src = torch.rand(n, device=ctx.torch_device)
    dst = torch.empty_like(src)
    return Case(
        fn=lambda: dst.copy_(src),
        work=_copy_work(case, ctx),
        notes={"what": "dst.copy_(src), bytes read + written"},
    )


COPY = Benchmark(
    name="copy",
    description="device memory copy (the measured bandwidth ceiling for memory-bound kernels)",
    grid=_copy_grid,
    params=CopyParams,
    setup=_copy_setup,
    work_of=_copy_work,
    metrics=(gbps("bandwidth", peak="mem_bandwidth"), time_ms()),
    suites=("full",),
)

BENCHMARKS.append(COPY)
