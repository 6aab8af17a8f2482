"""Collective benchmarks over N local ranks, reported exactly as nccl-tests does.

algbw = S / t with S the data size in bytes and 1 GB = 1e9 B; for reduce-scatter S is the
input size (count x typesize x n). busbw = algbw x factor, the factor making the figure
comparable with the link's bandwidth: AllReduce 2(n-1)/n, ReduceScatter (n-1)/n
(nccl-tests doc/PERFORMANCE.md); all-gather (n-1)/n with S the output size. ``impl`` is the
registry's ``native`` (torch.distributed) or ``ring`` (dsbench's pipelined ring over p2p). Each
sample is the slowest rank's time. Metric names are the same on every vendor and backend (NCCL,
RCCL, gloo), so CUDA and ROCm runs compare directly.

The ranks are spawned by ``dsbench.procs.distributed``; ``ranks`` is the number spawned. Buffers
hold random values in [1, 2); repeated in-place sums eventually overflow to inf, which costs nothing
extra on CPUs or GPUs (only denormals are slow), so data stays representative.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

from dsbench.kernels import registry
from dsbench.procs import host
from dsbench.suites.base import Benchmark, Case, Context, Metric, Skip, Work, record_of, time_ms

MiB = 1024**2


@dataclass(frozen=True, kw_only=True)
class CollectiveParams:
    """A case of a collective (all-reduce, reduce-scatter, all-gather)."""

    impl: str
    """The registry's implementation: ``native``, ``ring`` or (CPUs) ``shm``."""
    ranks: int
    """Ranks spawned (the benchmark's ``ranks_param``)."""
    dtype: str
    """torch dtype name of the buffers."""
    size: int
    """S in bytes: the input of a reduce-scatter, the output of an all-gather."""


def allreduce_factor(n: int) -> float:
    return 2.0 * (n - 1) / n


def reduce_scatter_factor(n: int) -> float:
    return (n - 1) / n


def _ranks(suite: str, ctx: Context) -> list[int]:
    if ctx.ranks is not None:
        return [ctx.ranks]
    if ctx.gpu:
        # One rank per visible device; a single device gets a skip with its reason.
        return [max(ctx.device_count, 1)]
    return [2] if suite != "full" else [2, 4]


def _grid(suite: str, ctx: Context) -> dict[str, list]:
    sizes = {
        "smoke": [64 * 1024],
        "quick": [1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB],
        "full": [2**k for k in range(16, 31, 2)] if ctx.gpu else [2**k for k in range(16, 29, 2)],
    }[suite]
    return {
        # shm moves host memory between ranks of one host: a CPU implementation only.
        "impl": ["native", "ring"] + ([] if ctx.gpu else ["shm"]),
        "ranks": _ranks(suite, ctx),
        "dtype": ["float32"],
        "size": sizes,
    }


#: Ring steps (sends per rank) of each collective over n ranks (nccl-tests, NCCL's tuning model).
RING_STEPS = {
    "allreduce": lambda n: 2 * (n - 1),
    "reduce_scatter": lambda n: n - 1,
    "allgather": lambda n: n - 1,
}
FACTORS = {
    "allreduce": allreduce_factor,
    "reduce_scatter": reduce_scatter_factor,
    "allgather": reduce_scatter_factor,
}


def collective_work(op: str, size: int, n: int) -> Work:
    """S = ``size`` bytes (reduce-scatter: the input, all-gather: the output); bytes each rank
    sends = S x bus factor."""
    return Work(wire_bytes=size, busbw_factor=FACTORS[op](n))


def _make_work(op: str):
    def work_of(params: CollectiveParams, ctx: Context) -> Work:
        return collective_work(op, params.size, params.ranks)

    return work_of


def shm_placement(op: str, size: int, n: int) -> tuple[str | None, str]:
    """Where a ``shm`` case's workspace goes ([Note: the shm workspace] in kernels/shm.py) and
    what to say: ("/dev/shm", ""); the temp folder and why, when /dev/shm lacks room (a
    container's 64 MiB); None and the reason to skip, when the temp folder lacks it too."""
    from dsbench.kernels import shm

    need = shm.workspace_bytes(op, size, n)
    folder = shm.workspace_dir(need)
    if folder == host.SHM:
        return folder, ""
    free = host.free_bytes(host.SHM)
    room = f"has {host.mib(free)} free" if free is not None else "is missing"
    why = f"{host.SHM} {room}, the workspace needs {host.mib(2 * need)} (twice its size)"
    if folder is None:
        tmp = host.free_bytes(tempfile.gettempdir())
        return None, (
            f"shared memory too small: {why}, and {tempfile.gettempdir()} has "
            f"{host.mib(tmp or 0)} free; {host.MORE_SHM}"
        )
    return folder, f"workspace in {folder}: {why}"


def shm_line(cases: list[tuple[str, dict | CollectiveParams]]) -> str | None:
    """One line for ``dsbench run`` when /dev/shm cannot hold some of the ``shm`` collectives
    planned (``(benchmark, params)``): which sizes map their workspace in the temp folder and
    which are skipped, and how to get more. None when all fit."""
    moved, skipped = set(), set()
    for op, case in cases:
        params = record_of(CollectiveParams, case)
        if params.impl != "shm":
            continue
        folder, _ = shm_placement(op, params.size, params.ranks)
        if folder is None:
            skipped.add(params.size)
        elif folder != host.SHM:
            moved.add(params.size)
    if not moved and not skipped:
        return None
    free = host.free_bytes(host.SHM)
    parts = [f"{host.SHM} has {host.mib(free) if free is not None else 'no space'} free"]
    if moved:
        parts.append(
            f"the shm collectives at {_sizes(moved)} map their workspace in "
            f"{tempfile.gettempdir()} instead (page cache; their rows say so)"
        )
    if skipped:
        parts.append(
            f"{'those' if moved else 'the shm collectives'} at {_sizes(skipped)} are skipped "
            f"(no room in {tempfile.gettempdir()} either)"
        )
    return "; ".join(parts) + f"; {host.MORE_SHM}"


def _sizes(sizes: set[int]) -> str:
    return ", ".join(host.mib(s) for s in sorted(sizes))


def _make_setup(op: str):
    def setup(params: CollectiveParams, ctx: Context) -> Case:
        import torch

        n = ctx.world_size
        if n < 2:
            raise Skip(f"{op} needs at least 2 ranks; {n} device visible")
        impl = registry.get(op, params.impl)
        ok, why = impl.available("cuda" if ctx.gpu else "cpu")
        if not ok:
            raise Skip(why)
        fn = impl.load()
        dtype = getattr(torch, params.dtype)
        elt = torch.finfo(dtype).bits // 8
        size = params.size
        if size % (elt * n):
            raise Skip(f"size {size} B is not a multiple of {n} ranks x {elt} B")
        device = ctx.torch_device
        g = torch.Generator(device=device).manual_seed(1 + ctx.rank)
        data = (1 + torch.rand(size // elt, device=device, generator=g)).to(dtype)
        if op == "allreduce":
            args = [(data,)]
        elif op == "reduce_scatter":
            out = torch.empty(size // elt // n, device=device, dtype=dtype)
            args = [(out, data)]
        else:  # allgather: S is the gathered (output) size
            args = [(data, data[: size // elt // n].clone())]
        work = collective_work(op, size, n)
        notes = {"count": size // elt, "busbw_factor": work.busbw_factor}
        if params.impl == "shm":
            folder, why = shm_placement(op, size, n)
            if folder is None:
                raise Skip(why)
            if why:
                notes["shm_workspace"] = why
        return Case(fn=fn, args=args, work=work, notes=notes)

    return setup


def _metrics() -> tuple[Metric, ...]:
    return (
        Metric(
            name="busbw",
            value=lambda w, t: w.wire_bytes / t / 1e9 * w.busbw_factor,
            peak="link_bandwidth",
            description="algbw x bus factor (nccl-tests)",
        ),
        Metric(
            name="algbw",
            value=lambda w, t: w.wire_bytes / t / 1e9,
            description="S / t (nccl-tests)",
        ),
        time_ms(),
    )


def _collective(name: str, description: str) -> Benchmark:
    return Benchmark(
        name=name,
        description=description,
        grid=_grid,
        params=CollectiveParams,
        setup=_make_setup(name),
        work_of=_make_work(name),
        metrics=_metrics(),
        ranks_param="ranks",
    )


BENCHMARKS = [
    _collective("allreduce", "sum all-reduce over N local ranks; busbw = algbw x 2(n-1)/n"),
    _collective(
        "reduce_scatter",
        "sum reduce-scatter over N local ranks; S = input size; busbw = algbw x (n-1)/n",
    ),
    _collective(
        "allgather", "all-gather over N local ranks; S = output size; busbw = algbw x (n-1)/n"
    ),
]
