"""Shared-memory all-reduce, reduce-scatter and all-gather for ranks on one host (CPU).

Registers the ``shm`` implementation of ``allreduce``, ``reduce_scatter`` and ``allgather``
(same signatures as the references in ``kernels/reference.py``), and offers zero-copy buffers
that the collectives read where they are: :func:`symmetric_zeros`, :func:`replicated_zeros`,
:func:`fence` ([Note: zero-copy buffers]); :func:`release_workspaces` forgets them. On a CPU
node gloo moves every byte through loopback TCP, the kernel copying it into a socket buffer and
out again (docs/decisions.md, "Shared-memory collectives"). Ranks on one host can instead read
each other's data directly from memory they all map, which is what DeepSpeed's CPU accelerator
does for its inference all-reduce (``deepspeed/csrc/cpu/comm/shm.cpp``) and what NCCL's SHM
transport does between processes of one node.

How: one mapped workspace per process group ([Note: the shm workspace]); each collective copies
in, passes a barrier and sums or copies out ([Note: the shm algorithms]); the barrier lives in
the workspace ([Note: the shm barrier]). The sums are fp32 in one pass of ``shm_sum``, into which
a reduce-scatter's caller may fuse its landing ([Note: landing in the reduction]).

Invariants: every element is summed in rank order 0, 1, ..., n-1, on every host and for every n;
fp16/bf16 segments are summed in fp32 and rounded once (at most half an ulp of the result); every
rank gets the same bits, and the zero-copy path the copying path's bits
(``tests/test_shm.py::test_shm_matches_native_and_ranks_agree``,
``test_zero_copy_buffers_give_the_copying_paths_bits``). Collectives on one group must be issued
in the same order on every rank (as for any torch.distributed collective); the engine's comm
thread guarantees that.

Limits: all ranks of the group must be on one host (checked when the workspace is set up: a rank
that cannot open the file fails the collective on every rank with a message saying so); CPU
tensors only.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
import uuid
from typing import TYPE_CHECKING, ClassVar

from dsbench.kernels.collective_common import (
    check_pair,
    check_reducible,
    group_rank,
    no_grad,
    overlaps,
    split,
)
from dsbench.kernels.registry import Impl, register
from dsbench.procs import host

if TYPE_CHECKING:
    import torch

_ALIGN = 1 << 12
"""Segments start on page boundaries (and so on any vector width)."""
_MIN_BYTES = 1 << 20
_HEADER = _ALIGN
"""The workspace's first page: the barrier's counters, one 64-byte cache line per rank."""
_LINE = 64 // 8
"""int64 counters per cache line."""
_FLAG_BARRIER = platform.machine().lower() in ("x86_64", "amd64")
"""Counters in shared memory order correctly only where stores stay in program order (x86)."""
_SPIN = 20
"""Checks of the counters (2-3 microseconds each) before a waiting rank starts sleeping. More
checks make an isolated all-reduce faster but training steps no faster, so the cheaper wait
stays (docs/decisions.md, "Shared-memory collectives")."""
_NAP_S = 5e-5
"""How long a waiting rank sleeps between later checks: it gives the core to the rank it waits
for and the GIL to its own main thread (a thread that kept checking would take the GIL back at
once after each check, and the main thread could wait up to the 5 ms switch interval)."""


def _shm_check(device: str) -> tuple[bool, str]:
    import torch.distributed as dist

    if device != "cpu":
        return False, "shared-memory collectives move host memory; use native (NCCL/RCCL) on GPUs"
    if not dist.is_available() or not dist.is_gloo_available():
        return False, "needs torch.distributed with gloo (its barrier and setup)"
    return True, ""


def workspace_bytes(op: str, nbytes: int, n: int) -> int:
    """The workspace a copying ``op`` of S = ``nbytes`` (all-reduce, reduce-scatter: the input;
    all-gather: the output) over ``n`` ranks maps: n input slots and the result for all-reduce,
    n slots of (n-1)/n of the input for reduce-scatter, the output for all-gather."""
    if n < 2:
        return 0
    slot = -(-nbytes // _ALIGN) * _ALIGN
    per = {"allreduce": (n + 1) * slot, "reduce_scatter": (n - 1) * slot, "allgather": slot}
    return _HEADER + per[op]


def workspace_dir(nbytes: int) -> str | None:
    """Where a workspace of ``nbytes`` is mapped: ``/dev/shm`` when it has room for twice that
    (the old mapping stays alive while the new one is made; containers often mount only 64 MiB),
    else the temp folder (its page cache serves the mapping as well while memory lasts), else
    None: no room anywhere."""
    for folder in (host.SHM, tempfile.gettempdir()):
        free = host.free_bytes(folder)
        if free is not None and free > 2 * nbytes:
            return folder
    return None


def _shm_dir(nbytes: int) -> str:
    return workspace_dir(nbytes) or tempfile.gettempdir()  # the write then names the problem


# [Note: the shm workspace]
# One file in ``/dev/shm`` (or the temp folder when that is missing or too small) per process
# group, created by the group's first rank, mapped by every rank with
# ``torch.from_file(..., shared=True)`` and unlinked once all ranks have mapped it, so nothing is
# left behind even if a rank dies. It grows (a new file, same protocol) when a collective needs
# more; every rank computes the same size from the same arguments, so growing is collective too.
# Its size is what the largest collective so far needed: one region, reused by every call. Two
# alternating halves would need no barrier before the next collective
# (See [Note: the shm barrier]), but shared pages count in every rank's resident set, so one
# region keeps the resident memory at half; the price is one barrier per collective.


class _Workspace:
    """The mapped file of one process group ([Note: the shm workspace])."""

    _of: ClassVar[dict[int, _Workspace]] = {}

    def __init__(self, pg, rank: int, size: int) -> None:
        self.pg = pg
        self.rank = rank
        self.size = size
        self.nbytes = 0
        self.buffer: torch.Tensor | None = None
        self.in_use = False
        """A rank may still be reading what the last collective left ([Note: the shm barrier])."""
        self.counters: torch.Tensor | None = None
        """Every rank's barrier counter (int64, one cache line apart) in the header page; None:
        gloo's barrier."""
        self.epoch = 0
        """Barriers this rank has entered on the current mapping."""
        self.timeout_s = _group_timeout(pg)
        self.shared: list[_Shared] = []
        """Zero-copy buffers allocated on this group (``replicated_zeros``, ``symmetric_zeros``)."""

    def find(self, t: torch.Tensor, replicated: bool) -> list[torch.Tensor] | None:
        """``t``'s place in every rank's zero-copy buffer of the kind asked (see
        :meth:`_Shared.same_place`), or None when ``t`` lies in none."""
        for shared in self.shared:
            if shared.replicated == replicated:
                places = shared.same_place(t)
                if places is not None:
                    return places
        return None

    @classmethod
    def of(cls, group) -> _Workspace | None:
        """None when this process is not a member of ``group`` (the collective is a no-op)."""
        import torch.distributed as dist

        place = group_rank(group)
        if place is None:
            return None
        pg, rank = place
        ws = cls._of.get(id(pg))
        if ws is None or ws.pg is not pg:  # a new process group may reuse an old one's id
            ws = cls._of[id(pg)] = cls(pg, rank, dist.get_world_size(pg))
        return ws

    # [Note: the shm barrier]
    # A barrier separates writing and reading. On x86 hosts it lives in the workspace itself:
    # each rank writes a growing counter into its own cache line of a header page and waits until
    # every rank's counter has reached it (x86 keeps stores in order, so a peer that sees the
    # counter sees the data written before it). It costs a fraction of gloo's barrier, in time
    # and in CPU, and a collective has two; a peer that never arrives (dead or hung) ends it with
    # an error naming the ranks after the process group's timeout, as gloo's would. Elsewhere (or
    # with more than 64 ranks) it is ``torch.distributed.barrier`` on the group. Every collective
    # ends by reading the workspace, so the next one on the group starts with one more barrier
    # (``acquire``): nobody overwrites data a slower rank is still reading.
    def barrier(self) -> None:
        import torch.distributed as dist

        if self.counters is None:
            dist.barrier(group=self.pg)
            return
        self.epoch += 1
        self.counters[self.rank] = self.epoch
        deadline, checks = None, 0
        while not bool((self.counters >= self.epoch).all()):
            checks += 1
            if checks < _SPIN:
                continue
            time.sleep(_NAP_S)
            if deadline is None:
                deadline = time.monotonic() + self.timeout_s
            elif time.monotonic() > deadline:
                late = [j for j in range(self.size) if int(self.counters[j]) < self.epoch]
                raise RuntimeError(
                    f"shm collectives: rank(s) {late} of the group did not reach the barrier "
                    f"within {self.timeout_s:g} s (the process group's timeout): a peer died or "
                    "hangs"
                )

    def acquire(self, nbytes: int) -> torch.Tensor:
        """The workspace as bytes, at least ``nbytes`` long, free to write (collective)."""
        if nbytes > self.nbytes:
            self._grow(nbytes)  # starts with a barrier when the old one is in use
        elif self.in_use:
            self.barrier()
        self.in_use = True  # the caller reads it after its own barrier
        return self.buffer[_HEADER : _HEADER + self.nbytes]

    def _grow(self, nbytes: int) -> None:
        import torch

        size = max(_MIN_BYTES, 2 * self.nbytes, nbytes)
        size = -(-size // _ALIGN) * _ALIGN + _HEADER
        if self.in_use:  # everyone must be done with the old mapping before it is dropped
            self.barrier()
        buffer = _map_file(self.pg, self.rank, size)
        self.buffer, self.nbytes = buffer, size - _HEADER
        self.epoch = 0  # a new file: every rank's counter starts at zero
        if _FLAG_BARRIER and self.size * _LINE * 8 <= _HEADER:
            self.counters = buffer[:_HEADER].view(torch.int64)[::_LINE][: self.size]
        else:
            self.counters = None

    def map_header(self) -> None:
        """Map the workspace if no collective has yet (collective): its header holds the
        barrier's counters, which the zero-copy collectives use too."""
        if self.buffer is None:
            self._grow(0)


def _map_file(pg, rank: int, size: int) -> torch.Tensor:
    """A new zero-filled file of ``size`` bytes mapped by every rank of ``pg`` (collective): the
    group's first rank creates it, every rank maps it, then it is unlinked."""
    import torch
    import torch.distributed as dist

    names: list[str | None] = [None]
    if rank == 0:
        names[0] = os.path.join(_shm_dir(size), f"dsbench-shm-{uuid.uuid4().hex}")
        fd = os.open(names[0], os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
    dist.broadcast_object_list(names, src=dist.get_global_rank(pg, 0), group=pg)
    path = names[0]
    ok = torch.ones(1, dtype=torch.int64)
    buffer = None
    if os.path.exists(path):
        buffer = torch.from_file(path, shared=True, size=size, dtype=torch.uint8)
    else:
        ok.zero_()
    dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=pg)
    if rank == 0:
        os.unlink(path)  # every rank has it mapped (or failed); nothing is left behind
    if not ok.item():
        raise RuntimeError(
            f"shm collectives: a rank of the group could not open {path}: all ranks must run "
            "on one host (use the native or ring implementation across hosts)"
        )
    return buffer


def _group_timeout(pg) -> float:
    """The process group's collective timeout in seconds (what gloo's barrier would wait)."""
    import torch

    try:
        return pg._get_backend(torch.device("cpu")).options._timeout.total_seconds()
    except (AttributeError, RuntimeError):  # private API: torch's default then
        return 1800.0


def release_workspaces() -> None:
    """Forget every group's workspace and shared buffers (called through
    ``registry.release_workspaces``): each file is unmapped once nothing else references it."""
    _Workspace._of.clear()


# [Note: zero-copy buffers]
# The copies into and out of the workspace are most of a collective's cost on CPUs. A caller
# that knows its buffers in advance can allocate them in shared memory instead, and the
# collectives then read them where they are. ``symmetric_zeros``: one buffer per rank, all
# mapped by every rank; a reduce-scatter whose input lies in it waits until every rank's input is
# final, sums its segment straight from every rank's buffer (reads S, writes S/n, nothing copied
# in), and waits again, so the caller may write its input as soon as the call returns; the sum's
# order is the copying path's, so the bits are the same. ``replicated_zeros``: one buffer that
# every rank maps, a single copy per host; an all-gather whose output lies in it writes only the
# rank's own slice (nothing when the input is that slice already) and waits until every rank
# has: no bytes move. Whoever writes a slice must first make sure no rank still reads it
# (``fence``). Every rank must pass the same place in its buffer (as engines with one layout on
# every rank do); anything else takes the copying path. ``dsbench.zero`` puts the flat gradients
# and parameters of ZeRO stages 1-2, and stage 3's units, there when its collectives are
# ``shm``. After ``release_workspaces`` the buffers still work as plain memory: the collectives
# take the copying path for them.


class _Shared:
    """One file of zero-copy buffers ([Note: zero-copy buffers]): ``regions[j]`` is
    rank j's buffer (one region every rank shares when replicated), as bytes."""

    def __init__(self, regions: list[torch.Tensor], rank: int, replicated: bool) -> None:
        self.regions = regions
        self.mine = regions[0 if replicated else rank]
        self.replicated = replicated

    def same_place(self, t: torch.Tensor) -> list[torch.Tensor] | None:
        """Where the elements of the contiguous ``t`` (inside this rank's buffer) are in every
        rank's buffer, in rank order; None when ``t`` is not inside it."""
        start, nbytes = t.data_ptr() - self.mine.data_ptr(), t.numel() * t.element_size()
        if not t.is_contiguous() or start < 0 or start + nbytes > self.mine.numel():
            return None
        return [
            region[start : start + nbytes].view(t.dtype).view(t.shape) for region in self.regions
        ]


def _shared_zeros(numel: int, dtype, group, replicated: bool) -> torch.Tensor | None:
    import torch

    ws = _Workspace.of(group)
    if ws is None or ws.size == 1:
        return None
    ws.map_header()  # the zero-copy collectives' barriers use its counters
    itemsize = torch.empty((), dtype=dtype).element_size()
    region = max(_ALIGN, -(-numel * itemsize // _ALIGN) * _ALIGN)
    count = 1 if replicated else ws.size
    raw = _map_file(ws.pg, ws.rank, region * count)
    regions = [raw[j * region : (j + 1) * region] for j in range(count)]
    shared = _Shared(regions, ws.rank, replicated)
    ws.shared.append(shared)
    return shared.mine[: numel * itemsize].view(dtype)


def replicated_zeros(numel: int, dtype, group=None) -> torch.Tensor | None:
    """One zero-filled buffer of ``numel`` elements that every rank of ``group`` maps: a single
    copy per host, every rank reading and writing the same bytes (collective). An all-gather whose
    output lies in it, at the same place on every rank, only waits until every rank has written
    its slice. None when this process is not in the group or the group has one rank."""
    return _shared_zeros(numel, dtype, group, replicated=True)


def symmetric_zeros(numel: int, dtype, group=None) -> torch.Tensor | None:
    """This rank's zero-filled buffer of ``numel`` elements, one of a buffer per rank of
    ``group`` that every rank maps (collective). A reduce-scatter whose input lies in it, at the
    same place on every rank, reads the other ranks' inputs where they are instead of copying
    them into the workspace first. None when this process is not in the group or the group has
    one rank."""
    return _shared_zeros(numel, dtype, group, replicated=False)


def fence(group=None) -> None:
    """Wait until every rank of ``group`` is here (the shm barrier), e.g. before writing a slice
    of a replicated buffer that other ranks may still be reading. A collective: issue it in the
    same order as the others."""
    ws = _Workspace.of(group)
    if ws is not None and ws.size > 1:
        ws.barrier()


def _offsets(sizes: list[int], itemsize: int) -> list[int]:
    """Byte offsets of consecutive areas of ``sizes`` elements, each page-aligned."""
    out, at = [], 0
    for count in sizes:
        out.append(at)
        at += -(-count * itemsize // _ALIGN) * _ALIGN
    out.append(at)
    return out


def _view(raw, offset: int, count: int, dtype) -> torch.Tensor:
    import torch

    itemsize = torch.empty((), dtype=dtype).element_size()
    return raw[offset : offset + count * itemsize].view(dtype)


def _sum_segment(slots: list, out, landing: dict | None = None) -> None:
    """``out`` = slots[0] + slots[1] + ... in rank order, in fp32 for half precision; fp32 in
    one pass through ``shm_sum`` (C), with ``landing``'s keywords of
    :func:`~dsbench.kernels.shm_sum.sum_into` fused in (fp32 only, see ``reduce_scatter``)."""
    import torch

    from dsbench.kernels.shm_sum import sum_into

    if out.dtype == torch.float32:
        sum_into(out, slots, **(landing or {}))
        return
    acc = slots[0].float()
    for s in slots[1:]:
        acc.add_(s)
    out.copy_(acc)


# [Note: the shm algorithms]
# With n ranks and S the bytes of the full (gathered / unreduced) tensor. Reduce-scatter: rank r
# copies the n-1 segments of its input that other ranks own into slot r of the workspace
# ((n-1)/n·S bytes written); barrier; rank r sums segment r, its own input's and the n-1 others'
# from their slots, in rank order into its output (reads S, writes S/n); each segment is summed
# by its owner only. All-reduce: as reduce-scatter, but the owner writes its summed segment into
# a shared result area (S/n); barrier; every rank copies the whole result out (reads S); every
# rank copies the same bytes, so results are bitwise identical across ranks. All-gather: rank r
# copies its input into segment r of a shared area (S/n); barrier; every rank copies the whole
# area out (reads S).


@no_grad
def reduce_scatter(
    output: torch.Tensor,
    input: torch.Tensor,
    group=None,
    *,
    divide_by: int = 1,
    accumulate: bool = False,
    sq: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sum reduce-scatter through shared memory ([Note: the shm algorithms]). ``divide_by``,
    ``accumulate`` and ``sq`` fuse a landing into the sum (fp32, contiguous ``output``): the
    output becomes the sum divided by ``divide_by``, or that added to what ``output`` holds, and
    ``sq`` (fp64 scalar) the output's square-sum, in the same pass
    (:func:`~dsbench.kernels.shm_sum.sum_into`)."""
    import torch

    check_reducible("reduce_scatter", input, "shm")
    ws = _Workspace.of(group)
    if ws is None:
        return output
    check_pair("reduce_scatter", output, input, ws.size, "input", "output", "shm")
    landing = None
    if divide_by != 1 or accumulate or sq is not None:
        if not (input.dtype == output.dtype == torch.float32 and output.is_contiguous()):
            raise ValueError(
                "shm reduce_scatter: a fused landing (divide_by, accumulate, sq) needs fp32 "
                f"input and a contiguous fp32 output, got {input.dtype} -> {output.dtype}"
            )
        landing = {"divide_by": divide_by, "accumulate": accumulate, "sq": sq}
    if ws.size == 1:
        if landing is not None:
            _sum_segment([input.reshape(-1)], output.view(-1), landing)
        elif output.data_ptr() != input.data_ptr():
            output.copy_(input.reshape(output.shape))
        return output
    if output.numel() == 0:
        if sq is not None:
            sq.zero_()
        return output
    n, m, r, item = ws.size, output.numel(), ws.rank, input.element_size()
    inputs = ws.find(input, replicated=False)
    if inputs is not None:  # every rank's input in place: nothing to copy in
        _reduce_scatter_in_place(ws, output, inputs, m, landing)
        return output
    # Slot j holds rank j's n-1 chunks that other ranks sum (its own one stays local): chunk k
    # at position k, or k-1 past j.
    offs = _offsets([(n - 1) * m] * n, item)
    raw = ws.acquire(offs[-1])
    flat = input.reshape(-1)
    mine = _view(raw, offs[r], (n - 1) * m, input.dtype)
    mine[: r * m].copy_(flat[: r * m])
    mine[r * m :].copy_(flat[(r + 1) * m :])
    ws.barrier()
    local = flat[r * m : (r + 1) * m]
    dst = output.view(-1) if output.is_contiguous() else output.new_empty(m)
    if overlaps(dst, flat):  # in place: keep the local chunk before the sum overwrites it
        local = local.clone()
    at = r * m  # rank r's chunk in any other slot: position r of j's, less one past j
    slots = [
        local
        if j == r
        else _view(raw, offs[j], (n - 1) * m, input.dtype)[at - (m if r > j else 0) :][:m]
        for j in range(n)
    ]
    _sum_segment(slots, dst, landing)
    if dst.data_ptr() != output.data_ptr():
        output.copy_(dst.view(output.shape))
    return output


reduce_scatter.lands = True
"""It takes ``divide_by``, ``accumulate`` and ``sq`` (``dsbench.zero.collectives.Comm``)."""


def _reduce_scatter_in_place(
    ws: _Workspace, output, inputs: list, m: int, landing: dict | None = None
) -> None:
    """Reduce-scatter from every rank's symmetric buffer: wait until all inputs are final, sum
    this rank's segment of each in rank order (the copying path's order, so the same bits),
    and wait until every rank has read what it needs, so that the caller may write its input
    again as soon as this returns."""
    r = ws.rank
    ws.barrier()
    dst = output.view(-1) if output.is_contiguous() else output.new_empty(m)
    slots = [x.reshape(-1)[r * m : (r + 1) * m] for x in inputs]
    slots = [s.clone() if overlaps(dst, s) else s for s in slots]  # in place: keep them
    _sum_segment(slots, dst, landing)
    ws.barrier()
    if dst.data_ptr() != output.data_ptr():
        output.copy_(dst.view(output.shape))


@no_grad
def allreduce(tensor: torch.Tensor, group=None) -> torch.Tensor:
    """Sum all-reduce in place through shared memory ([Note: the shm algorithms])."""
    check_reducible("allreduce", tensor, "shm")
    ws = _Workspace.of(group)
    if ws is None or ws.size == 1 or tensor.numel() == 0:
        return tensor
    n, numel, item = ws.size, tensor.numel(), tensor.element_size()
    flat = tensor.view(-1) if tensor.is_contiguous() else tensor.contiguous().view(-1)
    offs = _offsets([numel] * (n + 1), item)  # n input slots, then the result
    raw = ws.acquire(offs[-1])
    _view(raw, offs[ws.rank], numel, flat.dtype).copy_(flat)
    ws.barrier()
    bounds = split(numel, n)
    seg = slice(bounds[ws.rank], bounds[ws.rank + 1])
    result = _view(raw, offs[n], numel, flat.dtype)
    if seg.stop > seg.start:
        slots = [_view(raw, offs[j], numel, flat.dtype)[seg] for j in range(n)]
        _sum_segment(slots, result[seg])
    ws.barrier()
    flat.copy_(result)
    if flat.data_ptr() != tensor.data_ptr():
        tensor.copy_(flat.view(tensor.shape))
    return tensor


@no_grad
def allgather(output: torch.Tensor, input: torch.Tensor, group=None) -> torch.Tensor:
    """All-gather through shared memory ([Note: the shm algorithms])."""
    ws = _Workspace.of(group)
    if ws is None:
        return output
    check_pair("allgather", input, output, ws.size, "output", "input", "shm")
    m = input.numel()
    if ws.size == 1 or m == 0:
        if ws.size == 1 and output.data_ptr() != input.data_ptr():
            output.copy_(input.reshape(output.shape))
        return output
    if ws.find(output, replicated=True) is not None:  # one copy: write the slice, then wait
        mine = output.view(-1)[ws.rank * m : (ws.rank + 1) * m]
        if mine.data_ptr() != input.data_ptr():
            mine.copy_(input.reshape(-1))
        ws.barrier()
        return output
    n, item = ws.size, input.element_size()
    offs = _offsets([n * m], item)
    raw = ws.acquire(offs[-1])
    area = _view(raw, 0, n * m, input.dtype)
    area[ws.rank * m : (ws.rank + 1) * m].copy_(input.reshape(-1))
    ws.barrier()
    if output.is_contiguous():
        output.view(-1).copy_(area)
    else:
        output.copy_(area.view(output.shape))
    return output


for _op, _what in (
    ("allreduce", "each rank sums its segment of everyone's copy, then all copy the result"),
    ("reduce_scatter", "each rank sums its segment of everyone's copy"),
    ("allgather", "each rank copies in its shard, then all copy the whole"),
):
    register(
        Impl(
            op=_op,
            name="shm",
            target=f"dsbench.kernels.shm:{_op}",
            description=f"one-host shared memory (CPU): {_what}",
            check=_shm_check,
            buffers=None if _op == "allreduce" else __name__,
        )
    )
