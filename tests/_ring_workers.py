"""Functions run on spawned ranks by tests/test_ring.py (must be importable).

:func:`check_ring` runs every ring case of one launch and sends back a list of failures (empty
when all pass), so that one spawn (~3 s) covers many checks.

Expected values, strongest first:

- *Ring order, bitwise.* Segment j's sum is accumulated in a known order: rank j+1's input is
  sent first, each rank on the way adds its own, and the owner j adds last. Replaying that order
  locally (fp32 accumulator, or the input dtype when partials are rounded per hop) gives the
  exact bits every rank must end with; that also makes the results bitwise identical across
  ranks, which is checked separately by gathering the result bytes.
- *Native.* fp32 all-reduce/reduce-scatter sum in another order: bitwise equal for 2 ranks
  (a + b is commutative), else within 2(n-1)·u32·Σ|x_i| of it (each is within (n-1)·u32·Σ|x_i| of
  the exact sum; u32 = 2^-24). All-gather copies bytes: bitwise equal.
- *fp64 reference*, fp16/bf16 inputs: with fp32 partials the result is the fp32 sum rounded once,
  so |ring - exact| <= u·|exact| + n·u32·Σ|x_i| (u = 2^-11 fp16, 2^-8 bf16); rounded per hop
  (``fp32_partials=False``) the bound is n·u·Σ|x_i|.
"""

from __future__ import annotations

import math
import os
from collections import Counter

import torch
import torch.distributed as dist

from dsbench.kernels import reference, registry, ring
from dsbench.kernels.reference import allgather as native_allgather
from dsbench.kernels.reference import allreduce as native_allreduce
from dsbench.kernels.reference import reduce_scatter as native_reduce_scatter

U32 = 2.0**-24
UNIT_ROUNDOFF = {torch.float32: U32, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def inputs(seed: int, members: list[int], numel: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """Every member's input (so each rank can build references without communicating): normal
    values scaled by 2^-4..2^4, so sums cancel and exponents vary."""
    out = []
    for global_rank in members:
        g = torch.Generator().manual_seed(seed * 1009 + global_rank)
        x = torch.randn(numel, generator=g, dtype=torch.float64)
        x *= torch.exp2(torch.randint(-4, 5, (numel,), generator=g).double())
        out.append(x.to(dtype))
    return out


def ring_order_sum(xs: list[torch.Tensor], acc_dtype: torch.dtype) -> torch.Tensor:
    """What the ring computes for all-reduce of flat ``xs`` (group-rank order): segment j starts
    with member j+1's input, members j+2.. add theirs (fp32 arithmetic, rounded to ``acc_dtype``)
    and member j adds last, rounding once to the input dtype."""
    n, numel, dtype = len(xs), xs[0].numel(), xs[0].dtype
    padded = max(numel, n)
    xs = [torch.cat([x, x.new_zeros(padded - numel)]) for x in xs]
    bounds = [i * padded // n for i in range(n + 1)]
    out = torch.empty(padded, dtype=dtype)
    for j in range(n):
        seg = [x[bounds[j] : bounds[j + 1]] for x in xs]
        order = [(j + i) % n for i in range(1, n + 1)]  # j+1, j+2, ..., j
        acc = seg[order[0]].to(acc_dtype)
        for q in order[1:-1]:
            acc = (acc.float() + seg[q].float()).to(acc_dtype)
        out[bounds[j] : bounds[j + 1]] = (acc.float() + seg[order[-1]].float()).to(dtype)
    return out[:numel]


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def check_bitwise(name: str, got: torch.Tensor, want: torch.Tensor) -> str | None:
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{name}: {got.dtype}{tuple(got.shape)} != expected {want.dtype}{tuple(want.shape)}"
    if torch.equal(bits(got), bits(want)):
        return None
    bad = (got.reshape(-1).double() != want.reshape(-1).double()).nonzero().flatten()
    first = int(bad[0]) if bad.numel() else 0
    return (
        f"{name}: {bad.numel()} of {got.numel()} elements differ bitwise; first at {first}: "
        f"got {got.reshape(-1)[first].item():.9g}, expected {want.reshape(-1)[first].item():.9g}"
    )


def check_bound(
    name: str, got: torch.Tensor, exact: torch.Tensor, bound: torch.Tensor
) -> str | None:
    """Elementwise |got - exact| <= bound; otherwise mismatch count and the worst element."""
    err = (got.double().reshape(-1) - exact.reshape(-1)).abs()
    excess = err - bound.reshape(-1)
    if not bool((excess > 0).any()) and bool(torch.isfinite(err).all()):
        return None
    worst = int(torch.nan_to_num(excess, nan=float("inf")).argmax())
    return (
        f"{name}: {int((~(excess <= 0)).sum())} of {err.numel()} elements outside the bound; "
        f"worst at {worst}: got {got.reshape(-1)[worst].item():.9g}, exact "
        f"{exact.reshape(-1)[worst].item():.9g}, bound {bound.reshape(-1)[worst].item():.3g}"
    )


def same_on_all_ranks(name: str, t: torch.Tensor, group) -> str | None:
    """Gather every member's result bytes (native all-gather) and compare them."""
    b = bits(t)
    got = [torch.empty_like(b) for _ in range(dist.get_world_size(group))]
    dist.all_gather(got, b, group=group)
    differ = [i for i, g in enumerate(got) if not torch.equal(g, got[0])]
    return f"{name}: result bytes differ between group ranks 0 and {differ}" if differ else None


class Checker:
    """Runs ring cases on one group and collects failures; ``opts`` go to the ring function."""

    def __init__(self, group, members: list[int]):
        self.group, self.members = group, members
        self.n = len(members)
        self.rank = dist.get_rank(group)
        self.failures: list[str] = []
        self.checks = 0

    def record(self, *results: str | None) -> None:
        self.checks += len(results)
        self.failures += [f"[group {self.members} rank {self.rank}] {r}" for r in results if r]

    def allreduce(self, seed, numel, dtype, *, shape=None, **opts):
        xs = inputs(seed, self.members, numel, dtype)
        name = f"allreduce {dtype} numel={numel} {opts}"
        x = xs[self.rank].clone()
        if shape is not None:  # a transposed (non-contiguous) view; expectations in its order
            x = x.reshape(shape[::-1]).t()
            xs = [v.reshape(shape[::-1]).t().reshape(-1) for v in xs]
            name += f" non-contiguous {tuple(x.shape)}"
        got = ring.allreduce(x, group=self.group, **opts).reshape(-1)
        fp32_partials = opts.get("fp32_partials", True)
        exact = torch.stack([v.double() for v in xs]).sum(0)
        mag = torch.stack([v.double().abs() for v in xs]).sum(0)
        u = UNIT_ROUNDOFF[dtype]
        if dtype == torch.float32:
            bound = (self.n - 1) * U32 * mag
        elif fp32_partials:
            bound = u * exact.abs() + self.n * U32 * mag
        else:
            bound = self.n * u * mag
        acc = torch.float32 if fp32_partials else dtype
        self.record(
            check_bitwise(name + " vs ring order", got, ring_order_sum(xs, acc)),
            check_bound(name + " vs fp64", got, exact, bound),
            same_on_all_ranks(name, got, self.group),
        )
        if dtype == torch.float32:
            native = native_allreduce(xs[self.rank].clone(), group=self.group)
            if self.n == 2:
                self.record(check_bitwise(name + " vs native", got, native))
            else:
                both = 2 * (self.n - 1) * U32 * mag
                self.record(check_bound(name + " vs native", got, native.double(), both))

    def reduce_scatter(self, seed, per_rank, dtype, **opts):
        n, r = self.n, self.rank
        xs = inputs(seed, self.members, n * per_rank, dtype)
        name = f"reduce_scatter {dtype} {n}x{per_rank} {opts}"
        out = torch.full((per_rank,), float("nan"), dtype=dtype)  # poisoned
        src = xs[r].clone()
        ring.reduce_scatter(out, src, group=self.group, **opts)
        acc = torch.float32 if opts.get("fp32_partials", True) else dtype
        mine = slice(r * per_rank, (r + 1) * per_rank)
        self.record(
            check_bitwise(name + " vs ring order", out, ring_order_sum(xs, acc)[mine]),
            check_bitwise(name + " input untouched", src, xs[r]),
        )
        if dtype == torch.float32:
            native = torch.empty_like(out)
            native_reduce_scatter(native, xs[r].clone(), group=self.group)
            mag = torch.stack([v[mine].double().abs() for v in xs]).sum(0)
            both = 2 * (n - 1) * U32 * mag
            self.record(check_bound(name + " vs native", out, native.double(), both))
        inplace = xs[r].clone()  # output is the rank's own chunk of the input
        ring.reduce_scatter(inplace[mine], inplace, group=self.group, **opts)
        self.record(check_bitwise(name + " in place", inplace[mine], out))

    def allgather(self, seed, per_rank, dtype, **opts):
        n, r = self.n, self.rank
        g = torch.Generator().manual_seed(seed * 1009 + self.members[r])
        mine = torch.randint(-1000, 1000, (per_rank,), generator=g).to(dtype)
        name = f"allgather {dtype} {n}x{per_rank} {opts}"
        out = torch.full((n * per_rank,), 7, dtype=dtype)  # poisoned
        ring.allgather(out, mine, group=self.group, **opts)
        native = torch.empty_like(out)
        native_allgather(native, mine, group=self.group)
        inplace = torch.zeros(n * per_rank, dtype=dtype)
        own = inplace[r * per_rank : (r + 1) * per_rank]
        own.copy_(mine)
        ring.allgather(inplace, own, group=self.group, **opts)
        self.record(
            check_bitwise(name + " vs native", out, native),
            check_bitwise(name + " in place", inplace, native),
        )


def run_cases(c: Checker, seed: int, big: int = 1_000_003) -> None:
    """Odd sizes, several chunk sizes and depths (so the pipeline has many chunks and windows,
    including a last window narrower than ``depth``), every dtype, in place and not."""
    n, kib = c.n, 1 << 10
    f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
    c.allreduce(seed, big, f32, chunk_bytes=64 * kib, depth=3)  # ~61/n chunks per segment
    c.allreduce(seed + 1, big, f32)  # defaults: 2 MiB chunks, depth 4
    c.allreduce(seed + 2, big, f32, chunk_bytes=256 * kib, depth=1)  # no overlap
    for numel in (0, 1, n - 1, n + 1, 4 * n + 3):  # empty, fewer elements than ranks, odd
        c.allreduce(seed + 3 + numel, numel, f32, chunk_bytes=4 * kib)
    c.allreduce(seed + 4, 37 * n + 1, f32, chunk_bytes=4, depth=2)  # one element per chunk
    c.allreduce(seed + 5, 6 * 35, f32, chunk_bytes=16, shape=(6, 35))
    for dtype in (f16, bf16):
        for fp32_partials in (True, False):
            c.allreduce(seed + 6, 100_003, dtype, chunk_bytes=16 * kib, fp32_partials=fp32_partials)
    for dtype in (f32, f16, bf16):
        c.reduce_scatter(seed + 7, 50_001, dtype, chunk_bytes=16 * kib, depth=2)
    c.reduce_scatter(seed + 8, 50_001, bf16, chunk_bytes=16 * kib, fp32_partials=False)
    c.reduce_scatter(seed + 9, 1, f32, chunk_bytes=kib)
    c.reduce_scatter(seed + 10, 0, f32, chunk_bytes=kib)
    for dtype in (f32, bf16, torch.int64):
        c.allgather(seed + 11, 50_001, dtype, chunk_bytes=16 * kib, depth=3)
    c.allgather(seed + 12, 1, f32, chunk_bytes=kib)
    c.allgather(seed + 13, 0, f32, chunk_bytes=kib)


REDUCE_CALLS = []


def spy_reduce_add(acc, x):
    """A ``reduce_add`` implementation that records its calls (registered by :func:`check_ring`)."""
    REDUCE_CALLS.append((acc.dtype, x.dtype, acc.numel()))
    return reference.reduce_add(acc, x)


def check_registry_reduce_add(c: Checker, seed: int) -> None:
    """The local reductions go through the registry's ``reduce_add``: a spy registered as
    ``DSBENCH_REDUCE_ADD_IMPL=spy`` sees every one (n-1 per chunk per rank), and the Triton
    kernel in interpreter mode gives the same bits as the torch one."""
    registry.register(
        registry.Impl(
            op="reduce_add",
            name="spy",
            target="tests._ring_workers:spy_reduce_add",
            description="test spy",
        )
    )
    os.environ["DSBENCH_REDUCE_ADD_IMPL"] = "spy"
    REDUCE_CALLS.clear()
    c.allreduce(seed, 10_007, torch.bfloat16, chunk_bytes=4096, depth=2)  # 2048 elements/chunk
    chunks = math.ceil(math.ceil(10_007 / c.n) / 2048)  # of the longest segment
    f32, bf16 = torch.float32, torch.bfloat16
    # per chunk: n-2 adds into fp32 partials, then the owner's into its bf16 output
    want = Counter({(f32, bf16): (c.n - 2) * chunks, (bf16, f32 if c.n > 2 else bf16): chunks})
    seen = Counter((a, x) for a, x, _ in REDUCE_CALLS)
    if seen != want:
        c.failures.append(f"reduce_add spy saw (acc, x) dtypes {dict(seen)}, want {dict(want)}")
    os.environ.pop("DSBENCH_REDUCE_ADD_IMPL")
    os.environ["TRITON_INTERPRET"] = "1"  # read when the Triton kernels are first imported
    ok, _ = registry.get("reduce_add", "triton").available("cpu")
    if ok:
        os.environ["DSBENCH_REDUCE_ADD_IMPL"] = "triton"
        c.allreduce(seed + 1, 20_011, torch.float16, chunk_bytes=8192)
        c.reduce_scatter(seed + 2, 5003, torch.float32)
        os.environ.pop("DSBENCH_REDUCE_ADD_IMPL")
    c.checks += 1


def expect_errors(bad: list) -> list[str]:
    """Each ``(call, error, message)``: the call raises ``error`` saying ``message``."""
    failures = []
    for call, error, message in bad:
        try:
            call()
            failures.append(f"no {error.__name__} for {message!r}")
        except error as exc:
            if message not in str(exc):
                failures.append(f"{error.__name__} {exc!s} does not say {message!r}")
    return failures


def check_edges(world: int, rank: int, impl=ring) -> list[str]:
    """World size 1 (singleton groups: copies), and bad input rejected before any message, for
    the ring (default) or another implementation module with the same functions."""
    name = impl.__name__.rsplit(".", 1)[-1]
    failures = []
    singles = [dist.new_group([i]) for i in range(world)]  # every rank creates every group
    one = singles[rank]
    x = torch.randn(11)
    if not torch.equal(impl.allreduce(x.clone(), group=one), x):
        failures.append("world size 1: allreduce changed the tensor")
    out = torch.empty(11)
    if not torch.equal(impl.reduce_scatter(out, x, group=one), x):
        failures.append("world size 1: reduce_scatter is not a copy")
    out = torch.empty(11)
    if not torch.equal(impl.allgather(out, x, group=one), x):
        failures.append("world size 1: allgather is not a copy")
    leaf = torch.ones(5, requires_grad=True)  # autograd does not record collectives
    if not torch.equal(impl.allreduce(leaf).detach(), torch.full((5,), float(world))):
        failures.append("allreduce of a tensor that requires grad")
    bad = [
        (lambda: impl.allreduce(torch.ones(4, dtype=torch.float64)), TypeError,
         f"{name} allreduce: dtype float64 is not supported"),
        (lambda: impl.allreduce(torch.ones(4, dtype=torch.int32)), TypeError,
         f"{name} allreduce: dtype int32"),
        (lambda: impl.reduce_scatter(torch.empty(3), torch.empty(3 * world + 1)), ValueError,
         f"{name} reduce_scatter: input must have world_size ({world}) x output.numel()"),
        (lambda: impl.allgather(torch.empty(2 * world), torch.empty(2, dtype=torch.float16)),
         ValueError, f"{name} allgather: output and input must share dtype"),
    ]  # fmt: skip
    if impl is ring:
        bad.append((lambda: ring.allreduce(torch.ones(8), chunk_bytes=0), ValueError,
                    "ring: chunk_bytes and depth must be positive"))  # fmt: skip
    return failures + expect_errors(bad)


def check_ring(payload, *, device, send):
    """Every case on the world group; with 4 ranks, again on subgroups {0, 2} and {1, 3} (group
    ranks differ from global ranks) and on a group {1, 2, 3} that rank 0 is not part of."""
    world, rank = dist.get_world_size(), dist.get_rank()
    seed = payload["seed"]
    checkers = [Checker(None, list(range(world)))]
    run_cases(checkers[0], seed)
    if payload.get("registry"):
        check_registry_reduce_add(checkers[0], seed + 50)
    failures = check_edges(world, rank)
    if world == 4:
        pairs = [dist.new_group([0, 2]), dist.new_group([1, 3])]
        checkers.append(Checker(pairs[rank % 2], [0, 2] if rank % 2 == 0 else [1, 3]))
        run_cases(checkers[-1], seed + 100, big=100_003)
        trio = dist.new_group([1, 2, 3])
        x = torch.ones(10)
        ring.allreduce(x, group=trio)
        if not torch.equal(x, torch.full((10,), 1.0 if rank == 0 else 3.0)):
            failures.append(f"group {{1, 2, 3}}, global rank {rank}: got {x.tolist()}")
        dist.barrier()  # rank 0 returned at once: let no rank leave while others still talk
    failures += [f for c in checkers for f in c.failures]
    checks = sum(c.checks for c in checkers)
    send({"rank": rank, "checks": checks, "failures": failures})
