"""Functions run on spawned ranks by tests/test_shm.py (must be importable).

Expected values: the shared-memory collectives sum every element in rank order 0, 1, ..., n-1
(fp32 arithmetic, one rounding for fp16/bf16), so each result equals, bit for bit, that sum
replayed locally; results are compared across ranks byte for byte, against native gloo
(bitwise for fp32 with 2 ranks and for all-gather, else within 2(n-1)·2^-24·Σ|x_i|) and, for
fp16/bf16, against the fp64 sum within u·|sum| + n·2^-24·Σ|x_i|.
"""

from __future__ import annotations

import glob

import torch
import torch.distributed as dist

from dsbench.kernels import registry, shm
from dsbench.kernels.reference import allgather as native_allgather
from dsbench.kernels.reference import allreduce as native_allreduce
from dsbench.kernels.reference import reduce_scatter as native_reduce_scatter
from tests._ring_workers import (
    U32,
    UNIT_ROUNDOFF,
    check_bitwise,
    check_bound,
    check_edges,
    inputs,
    same_on_all_ranks,
)


def rank_order_sum(xs: list[torch.Tensor]) -> torch.Tensor:
    acc = xs[0].float()
    for x in xs[1:]:
        acc = acc + x.float()
    return acc.to(xs[0].dtype)


class Checker:
    def __init__(self, group, members: list[int]):
        self.group, self.members, self.n = group, members, len(members)
        self.rank = dist.get_rank(group)
        self.failures: list[str] = []
        self.checks = 0

    def record(self, *results: str | None) -> None:
        self.checks += len(results)
        self.failures += [f"[group {self.members} rank {self.rank}] {r}" for r in results if r]

    def allreduce(self, seed, numel, dtype, *, transposed=None):
        xs = inputs(seed, self.members, numel, dtype)
        name = f"allreduce {dtype} numel={numel}"
        x = xs[self.rank].clone()
        if transposed is not None:
            x = x.reshape(transposed[::-1]).t()
            xs = [v.reshape(transposed[::-1]).t().reshape(-1) for v in xs]
            name += f" non-contiguous {tuple(x.shape)}"
        got = shm.allreduce(x, group=self.group).reshape(-1)
        exact = torch.stack([v.double() for v in xs]).sum(0)
        mag = torch.stack([v.double().abs() for v in xs]).sum(0)
        bound = (
            (self.n - 1) * U32 * mag
            if dtype == torch.float32
            else UNIT_ROUNDOFF[dtype] * exact.abs() + self.n * U32 * mag
        )
        self.record(
            check_bitwise(name + " vs rank order", got, rank_order_sum(xs)),
            check_bound(name + " vs fp64", got, exact, bound),
            same_on_all_ranks(name, got, self.group),
        )
        if dtype == torch.float32:
            native = native_allreduce(xs[self.rank].clone(), group=self.group)
            both = 2 * (self.n - 1) * U32 * mag
            self.record(check_bound(name + " vs native", got, native.double(), both))

    def reduce_scatter(self, seed, per_rank, dtype):
        n, r = self.n, self.rank
        xs = inputs(seed, self.members, n * per_rank, dtype)
        name = f"reduce_scatter {dtype} {n}x{per_rank}"
        out = torch.full((per_rank,), float("nan"), dtype=dtype)  # poisoned
        src = xs[r].clone()
        shm.reduce_scatter(out, src, group=self.group)
        mine = slice(r * per_rank, (r + 1) * per_rank)
        self.record(
            check_bitwise(name + " vs rank order", out, rank_order_sum(xs)[mine]),
            check_bitwise(name + " input untouched", src, xs[r]),
        )
        if dtype == torch.float32:
            native = torch.empty_like(out)
            native_reduce_scatter(native, xs[r].clone(), group=self.group)
            mag = torch.stack([v[mine].double().abs() for v in xs]).sum(0)
            self.record(
                check_bound(name + " vs native", out, native.double(), 2 * (n - 1) * U32 * mag)
            )
        inplace = xs[r].clone()
        shm.reduce_scatter(inplace[mine], inplace, group=self.group)
        self.record(check_bitwise(name + " in place", inplace[mine], out))

    def allgather(self, seed, per_rank, dtype):
        n, r = self.n, self.rank
        g = torch.Generator().manual_seed(seed * 1009 + self.members[r])
        mine = torch.randint(-1000, 1000, (per_rank,), generator=g).to(dtype)
        name = f"allgather {dtype} {n}x{per_rank}"
        out = torch.full((n * per_rank,), 7, dtype=dtype)
        shm.allgather(out, mine, group=self.group)
        native = torch.empty_like(out)
        native_allgather(native, mine, group=self.group)
        inplace = torch.zeros(n * per_rank, dtype=dtype)
        inplace[r * per_rank : (r + 1) * per_rank].copy_(mine)
        shm.allgather(inplace, inplace[r * per_rank : (r + 1) * per_rank], group=self.group)
        self.record(
            check_bitwise(name + " vs native", out, native),
            check_bitwise(name + " in place", inplace, native),
        )


def run_cases(c: Checker, seed: int, big: int = 1_000_003) -> None:
    """Odd sizes (the workspace grows: 1 MiB, then larger), every dtype, in place and not, and
    a run of back-to-back collectives of different kinds (the two workspace halves alternate)."""
    n = c.n
    f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
    for numel in (0, 1, n - 1, n + 1, 4 * n + 3):
        c.allreduce(seed + numel, numel, f32)
    c.allreduce(seed + 1, big, f32)  # grows the workspace
    c.allreduce(seed + 2, 6 * 35, f32, transposed=(6, 35))
    for dtype in (f16, bf16):
        c.allreduce(seed + 3, 100_003, dtype)
    for dtype in (f32, f16, bf16):
        c.reduce_scatter(seed + 4, 50_001, dtype)
    c.reduce_scatter(seed + 5, 1, f32)
    c.reduce_scatter(seed + 6, 0, f32)
    for dtype in (f32, bf16, torch.int64):
        c.allgather(seed + 7, 50_001, dtype)
    c.allgather(seed + 8, 0, f32)
    for i in range(12):  # back to back, no native collective in between
        kind = i % 3
        size = 1000 + 997 * i
        if kind == 0:
            c.reduce_scatter(seed + 20 + i, size, f32)
        elif kind == 1:
            c.allgather(seed + 20 + i, size, f32)
        else:
            c.allreduce(seed + 20 + i, size * n, bf16)
    c.allreduce(seed + 40, 3 * big, f32)  # grows again, between collectives


def check_shm(payload, *, device, send):
    world, rank = dist.get_world_size(), dist.get_rank()
    seed = payload["seed"]
    checkers = [Checker(None, list(range(world)))]
    run_cases(checkers[0], seed)
    failures = check_edges(world, rank, shm)
    if world == 4:
        pairs = [dist.new_group([0, 2]), dist.new_group([1, 3])]
        checkers.append(Checker(pairs[rank % 2], [0, 2] if rank % 2 == 0 else [1, 3]))
        run_cases(checkers[-1], seed + 100, big=100_003)
        trio = dist.new_group([1, 2, 3])
        x = torch.ones(10)
        shm.allreduce(x, group=trio)
        if not torch.equal(x, torch.full((10,), 1.0 if rank == 0 else 3.0)):
            failures.append(f"group {{1, 2, 3}}, global rank {rank}: got {x.tolist()}")
    dist.barrier()
    left = glob.glob("/dev/shm/dsbench-shm-*")  # unlinked once mapped: nothing stays behind
    if left:
        failures.append(f"workspace files left behind: {left}")
    failures += [f for c in checkers for f in c.failures]
    send({"rank": rank, "checks": sum(c.checks for c in checkers), "failures": failures})


def allgather_in_place(payload, *, device, send):
    """Every CPU all-gather of the registry, with its input a view of its own output (the rank's
    slice, as ZeroEngine.publish_params passes it): ``{impl: True if every rank got the whole
    gathered tensor, else what differed}``."""
    import torch.distributed as dist

    rank, world, out = dist.get_rank(), dist.get_world_size(), {}
    for name in registry.names("allgather"):
        impl = registry.get("allgather", name)
        if not impl.available("cpu")[0]:
            continue
        fn, wrong = impl.load(), []
        for n in (1, 1000, 1_000_003):
            full = torch.zeros(world * n)
            mine = full[rank * n : (rank + 1) * n]
            mine.copy_(torch.arange(n, dtype=torch.float32) + 1e6 * rank)
            fn(full, mine)
            expected = torch.cat(
                [torch.arange(n, dtype=torch.float32) + 1e6 * r for r in range(world)]
            )
            if not torch.equal(full, expected):
                wrong.append(n)
        out[name] = True if not wrong else f"sizes {wrong} differ"
    send(out)


def late_peer(payload, *, device, send):
    """Rank 0 all-gathers while rank 1 stays away: rank 0 sends the error its barrier raised."""
    import time

    rank = dist.get_rank()
    out = torch.empty(2 * 4)
    shm.allgather(out, torch.ones(4))  # maps the workspace (collective)
    if rank == 0:
        try:
            shm.allgather(out, torch.ones(4))
            send("no error")
        except RuntimeError as exc:
            send(str(exc))
    else:
        time.sleep(payload["away_s"])


def zero_copy(payload, *, device, send):
    """The zero-copy buffers (``symmetric_zeros``, ``replicated_zeros``): a reduce-scatter from
    a symmetric buffer equals the copying path's bit for bit (rank-order sums, fp32, bf16, a
    slice at an offset, uneven sizes), an all-gather into a replicated buffer gives every rank
    the whole tensor, and the input may be overwritten as soon as the reduce-scatter returns.
    Sends ``{"failures": [...], "checks": N}``."""
    rank, world = dist.get_rank(), dist.get_world_size()
    failures, checks = [], 0
    for dtype, per_rank, offset in ((torch.float32, 1000, 0), (torch.bfloat16, 777, 5),
                                    (torch.float32, 100_003, 3)):  # fmt: skip
        n = world * per_rank
        xs = inputs(7 + per_rank, list(range(world)), n, dtype)
        sym = shm.symmetric_zeros(offset + n + 11, dtype)
        place = sym[offset : offset + n]
        place.copy_(xs[rank])
        got = torch.full((per_rank,), float("nan"), dtype=dtype)
        shm.reduce_scatter(got, place)
        place.fill_(float("nan"))  # the peers have read it: the call waited for them
        copied = torch.empty(per_rank, dtype=dtype)
        shm.reduce_scatter(copied, xs[rank].clone())  # the copying path (plain memory)
        mine = rank_order_sum(xs)[rank * per_rank : (rank + 1) * per_rank]
        name = f"zero-copy reduce_scatter {dtype} {world}x{per_rank} at +{offset}"
        failures += [
            f for f in (check_bitwise(name + " vs rank order", got, mine),
                        check_bitwise(name + " vs copying path", got, copied)) if f
        ]  # fmt: skip
        checks += 2
        rep = shm.replicated_zeros(offset + n, dtype)
        full = rep[offset : offset + n]
        shm.fence()  # nobody reads it while the slices are written
        full[rank * per_rank : (rank + 1) * per_rank].copy_(xs[rank][:per_rank])
        shm.allgather(full, full[rank * per_rank : (rank + 1) * per_rank])
        expected = torch.cat([x[:per_rank] for x in xs])
        f = check_bitwise(f"replicated allgather {dtype} {world}x{per_rank}", full, expected)
        failures += [f] if f else []
        checks += 1
    send({"rank": rank, "failures": failures, "checks": checks})


def landing(payload, *, device, send):
    """A reduce-scatter with the engine's landing fused in (``divide_by``, ``accumulate``,
    ``sq``): from a symmetric buffer and from plain memory, written and added, equal bit for bit
    to the rank-order sum divided and added in separate passes; the square-sum close to torch's.
    Sends ``{"failures": [...], "checks": N}``."""
    rank, world = dist.get_rank(), dist.get_world_size()
    failures, checks = [], 0
    for per_rank in (1000, 100_003):
        n = world * per_rank
        xs = inputs(11 + per_rank, list(range(world)), n, torch.float32)
        mine = rank_order_sum(xs)[rank * per_rank : (rank + 1) * per_rank] / world
        sym = shm.symmetric_zeros(n, torch.float32)
        before = torch.randn(per_rank, generator=torch.Generator().manual_seed(rank))
        for where in ("symmetric", "plain"):
            for accumulate in (False, True):
                src = sym if where == "symmetric" else xs[rank].clone()
                src.copy_(xs[rank])
                got, sq = before.clone(), torch.zeros((), dtype=torch.float64)
                shm.reduce_scatter(got, src, divide_by=world, accumulate=accumulate, sq=sq)
                want = before + mine if accumulate else mine
                name = f"landing {where} accumulate={accumulate} {world}x{per_rank}"
                f = check_bitwise(name, got, want)
                norm = torch.linalg.vector_norm(want, dtype=torch.float64).square()
                if not torch.isclose(sq, norm, rtol=1e-12, atol=0):
                    f = (f or "") + f" {name}: square-sum {float(sq)} vs {float(norm)}"
                failures += [f] if f else []
                checks += 1
    try:
        half = torch.zeros(2 * world, dtype=torch.bfloat16)
        shm.reduce_scatter(half[:2].clone(), half, divide_by=world)
        failures.append("a bf16 landing was not refused")
    except ValueError as exc:
        checks += "fp32" in str(exc)
    send({"rank": rank, "failures": failures, "checks": checks})
