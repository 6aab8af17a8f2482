"""Ring all-reduce, reduce-scatter and all-gather over torch.distributed point-to-point.

Registers the ``ring`` implementation of ``allreduce``, ``reduce_scatter`` and ``allgather``
(same signatures as the references in ``kernels/reference.py``). Importing this module is cheap:
torch is imported inside the functions.

Algorithm (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
workstations", JPDC 69(2), 2009; Baidu's ring all-reduce, baidu-research/baidu-allreduce, 2017;
NCCL's ring, ``src/device/all_reduce.h``). The n ranks of the group form a ring, rank r sending
to r+1 and receiving from r-1 (group ranks, mod n). The flat tensor of N elements is cut into n
segments (sizes differ by at most one element, so any N works).

- Reduce-scatter, n-1 steps: at step t rank r sends segment r-t-1 (its own input at t = 0, the
  partial sum it finished at step t-1 afterwards) and receives segment r-t-2, adding its own
  input to it. After the last step rank r holds the complete sum of segment r.
- All-gather, n-1 steps: at step s rank r sends segment r-s (its finished one at s = 0, then the
  one it received at step s-1) and receives segment r-s-1, copying it into the output.
- All-reduce = reduce-scatter then all-gather, run as one pipeline of 2(n-1) steps
  ([Note: the ring's pipeline]), in a workspace of fixed size ([Note: the ring's workspace]).

Every rank sends and receives 2(n-1)/n of the tensor's bytes for all-reduce, (n-1)/n for
reduce-scatter and all-gather: the lower bound (Patarasuk & Yuan), and why nccl-tests' busbw
(``dsbench/suites/comm.py``) is comparable with the link bandwidth whatever n is. Half-precision
inputs are summed in fp32 and rounded once ([Note: the ring's fp32 partials]).

Invariant: bitwise-identical results on every rank (each segment's final value is computed once,
by its owner, and the all-gather phase copies the owner's bytes), equal to the native
collectives' within rounding; ``tests/test_ring.py::test_ring_matches_native_and_ranks_agree``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsbench.kernels.collective_common import (
    check_pair,
    check_reducible,
    group_rank,
    no_grad,
    split,
)
from dsbench.kernels.registry import Impl, needs_distributed, register

if TYPE_CHECKING:
    import torch

DEFAULT_CHUNK_BYTES = 2 << 20
"""Bytes of input per message (the pipeline's unit); fp32 partials make a message twice this."""
DEFAULT_DEPTH = 4
"""Chunks in flight per rank (each a send to the right and a receive from the left)."""


@no_grad
def allreduce(
    tensor: torch.Tensor,
    group=None,
    *,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    depth: int = DEFAULT_DEPTH,
    fp32_partials: bool = True,
) -> torch.Tensor:
    """Sum all-reduce in place over ``group`` by ring reduce-scatter + all-gather (see module)."""
    import torch

    check_reducible("allreduce", tensor, "ring")
    ring = _Ring.of(group)
    if ring is None or ring.size == 1 or tensor.numel() == 0:
        return tensor
    flat = tensor.view(-1) if tensor.is_contiguous() else tensor.contiguous().view(-1)
    numel = flat.numel()
    if numel < ring.size:  # pad so that no segment is empty (no zero-byte messages)
        work = torch.zeros(ring.size, dtype=flat.dtype, device=flat.device)
        work[:numel] = flat
    else:
        work = flat
    bounds = split(work.numel(), ring.size)
    segments = [work[bounds[j] : bounds[j + 1]] for j in range(ring.size)]
    _ring(
        ring,
        segments,
        segments,
        reduce=True,
        gather=True,
        chunk_bytes=chunk_bytes,
        depth=depth,
        fp32_partials=fp32_partials,
    )
    if work is not flat:
        flat.copy_(work[:numel])
    if not tensor.is_contiguous():
        tensor.copy_(flat.view(tensor.shape))
    return tensor


@no_grad
def reduce_scatter(
    output: torch.Tensor,
    input: torch.Tensor,
    group=None,
    *,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    depth: int = DEFAULT_DEPTH,
    fp32_partials: bool = True,
) -> torch.Tensor:
    """Sum reduce-scatter by ring: rank r's ``output`` gets the sum of every rank's input chunk r.

    ``input`` is ``world_size`` equal contiguous chunks of ``output.numel()`` elements; it is not
    modified (``output`` may alias input chunk r).
    """
    check_reducible("reduce_scatter", input, "ring")
    ring = _Ring.of(group)
    if ring is None:
        return output
    check_pair("reduce_scatter", output, input, ring.size, "input", "output", "ring")
    if ring.size == 1:
        if output.data_ptr() != input.data_ptr():
            output.copy_(input.reshape(output.shape))
        return output
    if output.numel() == 0:
        return output
    flat_in = input.contiguous().view(-1)
    dst = output.view(-1) if output.is_contiguous() else output.new_empty(output.numel())
    m = dst.numel()
    contrib = [flat_in[j * m : (j + 1) * m] for j in range(ring.size)]
    final = [dst if j == ring.rank else None for j in range(ring.size)]
    _ring(
        ring,
        contrib,
        final,
        reduce=True,
        gather=False,
        chunk_bytes=chunk_bytes,
        depth=depth,
        fp32_partials=fp32_partials,
    )
    if not output.is_contiguous():
        output.copy_(dst.view(output.shape))
    return output


@no_grad
def allgather(
    output: torch.Tensor,
    input: torch.Tensor,
    group=None,
    *,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    depth: int = DEFAULT_DEPTH,
) -> torch.Tensor:
    """All-gather by ring: ``output`` is ``world_size`` chunks, chunk r is rank r's ``input``.

    Any dtype (nothing is reduced); ``input`` may alias output chunk r.
    """
    ring = _Ring.of(group)
    if ring is None:
        return output
    check_pair("allgather", input, output, ring.size, "output", "input", "ring")
    contiguous = output.is_contiguous()
    flat_out = output.view(-1) if contiguous else output.new_empty(output.numel())
    m = input.numel()
    segments = [flat_out[j * m : (j + 1) * m] for j in range(ring.size)]
    own = segments[ring.rank]
    if m and (own.data_ptr() != input.data_ptr() or not input.is_contiguous()):
        own.copy_(input.reshape(-1))
    if ring.size > 1 and m:
        _ring(
            ring,
            segments,
            segments,
            reduce=False,
            gather=True,
            chunk_bytes=chunk_bytes,
            depth=depth,
            fp32_partials=False,
        )
    if not contiguous:
        output.copy_(flat_out.view(output.shape))
    return output


@dataclass(frozen=True)
class _Ring:
    """This rank's place in the ring over ``group``: group size and rank, global neighbours."""

    group: object
    size: int
    rank: int
    left: int
    right: int

    @classmethod
    def of(cls, group) -> _Ring | None:
        """None when this process is not a member of ``group`` (the collective is a no-op)."""
        import torch.distributed as dist

        place = group_rank(group)
        if place is None:
            return None
        pg, rank = place
        size = dist.get_world_size(pg)
        return cls(
            group=group,
            size=size,
            rank=rank,
            left=dist.get_global_rank(pg, (rank - 1) % size),
            right=dist.get_global_rank(pg, (rank + 1) % size),
        )

    def exchange(self, send: torch.Tensor, recv: torch.Tensor) -> list:
        """Post send-to-right and receive-from-left as one batch; returns the works to wait on."""
        import torch.distributed as dist

        return dist.batch_isend_irecv(
            [
                dist.P2POp(dist.isend, send, self.right, self.group),
                dist.P2POp(dist.irecv, recv, self.left, self.group),
            ]
        )


def _ring(
    ring: _Ring,
    contrib: list,
    final: list,
    *,
    reduce: bool,
    gather: bool,
    chunk_bytes: int,
    depth: int,
    fp32_partials: bool,
) -> None:
    """Run the ring pipeline ([Note: the ring's pipeline]) over per-segment views.

    ``contrib[j]``: this rank's input for segment j (read only, unless it is ``final[j]``);
    ``final[j]``: where segment j's result goes (only ``final[ring.rank]`` is needed without
    ``gather``). All segments are non-empty; they may differ in size by one element.
    """
    if chunk_bytes < 1 or depth < 1:
        raise ValueError(
            f"ring: chunk_bytes and depth must be positive, got {chunk_bytes}, {depth}"
        )
    pipeline = _Pipeline(ring, contrib, final, reduce=reduce, gather=gather, depth=depth)
    pipeline.chunk(chunk_bytes)
    if reduce:
        pipeline.reduce_buffers(fp32_partials)
    pipeline.run()


# [Note: the ring's pipeline]
# Every segment is cut into the same number K of chunks (about ``chunk_bytes`` each), and one
# unit of work is (chunk, step): send chunk k of the step's outgoing segment to the right
# neighbour and receive chunk k of the incoming one from the left, posted together as one
# ``batch_isend_irecv`` (one NCCL group, so a 2-rank ring, whose two directions share a stream,
# cannot deadlock; gloo does not coalesce and gets plain asynchronous isend/irecv). The chunks go
# through in windows of ``depth``, like NCCL's loop over slices: for each window, for each step,
# for each chunk of the window. Units are posted in that order, at most ``depth`` in flight, a
# unit only once the unit it forwards (same chunk, previous step) has been processed; they are
# processed in the same order: wait, then add the received chunk into the partial
# (reduce-scatter; the all-gather phase receives in place and has nothing to do). So while chunk
# k is being reduced, chunks k+1.. of this step and the next step of chunks ..k-1 are on the wire
# (gloo's transport thread, NCCL's stream); the partial just reduced is the next unit's send, and
# a chunk's all-gather starts as soon as its sum is final. Messages between two ranks match in
# posting order, which is the same on every rank.


class _Pipeline:
    """One ring collective: its chunks, its partial-sum slots and its schedule of units.

    A unit is (window, step, slot): chunk k = window * depth + slot goes one hop at ``step``.
    Steps ``0 .. rs_steps - 1`` reduce-scatter, the rest all-gather.
    """

    def __init__(self, ring: _Ring, contrib: list, final: list, *, reduce, gather, depth):
        self.ring, self.contrib, self.final, self.depth = ring, contrib, final, depth
        self.sizes = [t.numel() for t in contrib]
        self.rs_steps = ring.size - 1 if reduce else 0
        self.steps = self.rs_steps + (ring.size - 1 if gather else 0)

    def chunk(self, chunk_bytes: int) -> None:
        """Cut every segment into the same number of chunks and list the units in order."""
        sizes, depth = self.sizes, self.depth
        chunk_elems = max(1, chunk_bytes // self.contrib[0].element_size())
        # one chunk count for every segment, never more chunks than the smallest has elements
        chunks = self.chunks = max(1, min(-(-max(sizes) // chunk_elems), min(sizes)))
        self.cuts = {m: split(m, chunks) for m in set(sizes)}
        # units (window, step, slot) in this order; chunk k = window * depth + slot
        self.units = [
            (w, g, p)
            for w in range(-(-chunks // depth))
            for g in range(self.steps)
            for p in range(min(depth, chunks - w * depth))
        ]

    # [Note: the ring's fp32 partials]
    # Local reductions run on the registry's ``reduce_add`` (``DSBENCH_REDUCE_ADD_IMPL`` picks
    # torch, Triton or CUDA/HIP), which adds in fp32 and rounds once to the accumulator's dtype.
    # For fp16/bf16 inputs the partial sums stay fp32 (``fp32_partials=True``, the default): step
    # 0 sends the raw half-precision input (exact, so no wider bytes where they buy nothing; for
    # n = 2 it is the only reduce-scatter step), the receiver widens it into an fp32 accumulator
    # and adds its own, steps 1..n-2 send fp32 partials, and the owner rounds once, when it adds
    # the last partial to its own input. The result is the fp32 sum in ring order rounded once to
    # fp16/bf16 (error <= one half ulp plus (n-1) fp32 roundings). The price is wire bytes: those
    # n-2 steps carry twice the bytes, (3n-4)/n * S per rank instead of 2(n-1)/n * S (the same
    # for n = 2, +50% as n grows), and the all-gather phase carries the rounded input-dtype
    # result. ``fp32_partials=False`` does what NCCL does: partials travel in the input dtype and
    # are rounded at every hop (up to n-1 half-precision roundings; error grows with n). fp32
    # inputs are summed in fp32 either way; the ring's order differs from gloo's and NCCL's, so
    # results may differ from theirs in the last bits (never across ranks).
    #
    # [Note: the ring's workspace]
    # Whatever the tensor size, the ring receives into ``depth`` chunk-sized slots per step parity
    # (one parity for n = 2) in the accumulator dtype, plus ``depth`` in the input dtype for step
    # 0 when the two differ: depth * chunk_bytes for n = 2, 2 * depth * chunk_bytes for fp32 and
    # 5 * depth * chunk_bytes for fp16/bf16 with fp32 partials (defaults: 8, 16, 40 MiB). A fresh
    # segment-sized buffer per call costs page faults on CPUs (docs/decisions.md, "The ring's
    # fixed workspace").
    def reduce_buffers(self, fp32_partials: bool) -> None:
        """The partial-sum slots and the ``reduce_add`` implementation."""
        import torch

        from dsbench.kernels import registry

        n, x, chunks = self.ring.size, self.contrib[0], self.chunks
        longest = max(c[k + 1] - c[k] for c in self.cuts.values() for k in range(chunks))
        half = x.dtype in (torch.float16, torch.bfloat16)
        acc_dtype = torch.float32 if half and fp32_partials else x.dtype
        self.add = registry.get("reduce_add").load()
        # depth chunk-sized slots per step parity: slot p of parity t % 2 receives step t's chunk
        # and holds the partial until step t+1 has sent it; step 0 brings raw input (x.dtype)
        need_acc = n > 2 or acc_dtype == x.dtype
        slots = min(self.depth, chunks)
        self.acc = [
            torch.empty((slots, longest), dtype=acc_dtype, device=x.device)
            for _ in range((2 if n > 2 else 1) if need_acc else 0)
        ]
        self.raw = self.acc[0] if self.acc and acc_dtype == x.dtype else x.new_empty(slots, longest)

    # -- views of chunk k of segment j ----------------------------------------------------------

    def piece(self, t: torch.Tensor, j: int, k: int) -> torch.Tensor:
        c = self.cuts[self.sizes[j]]
        return t[c[k] : c[k + 1]]

    def slot(self, buf: torch.Tensor, p: int, j: int, k: int) -> torch.Tensor:
        c = self.cuts[self.sizes[j]]
        return buf[p, : c[k + 1] - c[k]]

    # -- reduce-scatter step t: send a partial, receive the next, add this rank's input ---------

    def rs_send(self, t: int, k: int, p: int) -> torch.Tensor:
        j = (self.ring.rank - t - 1) % self.ring.size
        return (
            self.piece(self.contrib[j], j, k)
            if t == 0
            else self.slot(self.acc[(t - 1) % 2], p, j, k)
        )

    def rs_recv(self, t: int, k: int, p: int) -> torch.Tensor:
        j = (self.ring.rank - t - 2) % self.ring.size
        return self.slot(self.raw if t == 0 else self.acc[t % 2], p, j, k)

    def rs_done(self, t: int, k: int, p: int) -> None:
        j = (self.ring.rank - t - 2) % self.ring.size
        got, mine = self.rs_recv(t, k, p), self.piece(self.contrib[j], j, k)
        if t == self.rs_steps - 1:  # j == r: the owner adds the last partial and rounds once
            out = self.piece(self.final[j], j, k)
            if out.data_ptr() != mine.data_ptr():
                out.copy_(mine)
            self.add(out, got)
            return
        partial = self.slot(self.acc[t % 2], p, j, k)
        if partial.data_ptr() != got.data_ptr():  # half input, step 0: widen to fp32 first
            partial.copy_(got)
        self.add(partial, mine)

    # -- all-gather step s: forward the finished chunk ------------------------------------------

    def ag(self, s: int, k: int, shift: int) -> torch.Tensor:
        j = (self.ring.rank - s - shift) % self.ring.size
        return self.piece(self.final[j], j, k)

    # -- schedule -------------------------------------------------------------------------------

    def post(self, i: int) -> tuple:
        w, g, p = self.units[i]
        k = w * self.depth + p
        if g < self.rs_steps:
            send, recv = self.rs_send(g, k, p), self.rs_recv(g, k, p)
        else:
            send, recv = self.ag(g - self.rs_steps, k, 0), self.ag(g - self.rs_steps, k, 1)
        return (w, g, p), self.ring.exchange(send, recv)

    def run(self) -> None:
        """Post in unit order, at most ``depth`` in flight, a unit only once the unit it
        forwards (same chunk, previous step) has been processed; process in the same order."""
        units, depth, chunks = self.units, self.depth, self.chunks
        inflight: deque = deque()
        nxt = processed = 0
        while processed < len(units):
            while nxt < len(units) and len(inflight) < depth:
                w, g, _ = units[nxt]
                width = min(depth, chunks - w * depth)
                if g > 0 and nxt - width >= processed:
                    break
                inflight.append(self.post(nxt))
                nxt += 1
            (w, g, p), works = inflight.popleft()
            for work in works:
                work.wait()
            if g < self.rs_steps:
                self.rs_done(g, w * depth + p, p)
            processed += 1


register(
    Impl(
        op="allreduce",
        name="ring",
        target="dsbench.kernels.ring:allreduce",
        description="ring reduce-scatter + all-gather over isend/irecv, chunked and pipelined",
        check=needs_distributed,
    )
)
register(
    Impl(
        op="reduce_scatter",
        name="ring",
        target="dsbench.kernels.ring:reduce_scatter",
        description="ring reduce-scatter over isend/irecv, chunked and pipelined",
        check=needs_distributed,
    )
)
register(
    Impl(
        op="allgather",
        name="ring",
        target="dsbench.kernels.ring:allgather",
        description="ring all-gather over isend/irecv, chunked and pipelined",
        check=needs_distributed,
    )
)
