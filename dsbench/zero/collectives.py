"""Collectives for the ZeRO engine: registry implementations, issued in one deterministic order.

Every collective the engine issues goes through one :class:`Comm` queue served by a single
worker thread. Two things follow:

- *Overlap* (``overlap_comm``): a gradient hook submits a bucket's reduction and returns at once;
  backward continues on the main thread while the worker runs the collective (gloo and NCCL
  release the GIL). Without overlap the caller waits for each result immediately.
- *Order*: ranks must issue collectives in the same order or they deadlock. Submissions happen in
  program order on the main thread, which is the same on every rank, and the single worker keeps
  that order; so synchronous and asynchronous collectives can be mixed safely.

The exception: shm collectives on a rank with one thread run on the calling thread instead
([Note: collectives on the calling thread]).

On GPUs the worker runs collectives on its own stream, after an event recorded on the
submitting stream, and the waiter's stream waits on the collective's completion event.

The implementations (``native`` torch.distributed, ``ring``, ...) come from the kernel registry;
the engine never knows which one it got. Over gloo, large native reduce-scatters and all-gathers
take torch.distributed's faster calls ([Note: gloo's large collectives]).
"""

from __future__ import annotations

import concurrent.futures
import enum
from collections.abc import Callable

import torch

from dsbench.kernels import registry

# [Note: gloo's large collectives]
# On CPUs, gloo's reduce_scatter and all_gather are slow for large tensors next to its own
# all_to_all, all_reduce and broadcast over the same bytes (the timings by size:
# docs/decisions.md, "Gloo's large collectives"); for small tensors the native calls are as
# fast or faster. So with the ``native`` implementations over gloo, the queue runs a
# reduce-scatter of a full tensor of at least ``GLOO_LARGE_BYTES`` as an all_to_all_single into a
# kept receive buffer (every rank's chunk r) and a sum of those chunks in rank order, and such an
# all-gather as one broadcast of each rank's chunk from its owner. All are torch.distributed's own
# collectives over the same group; the results are the same sums (for 2 ranks the same bits:
# a + b == b + a) and the same copies, identical on every rank. The receive buffer costs one full
# tensor per rank (16 MiB for the seed MLP), yet peak RSS per rank was lower than with gloo's
# reduce_scatter. NCCL, shm and ring are untouched.

GLOO_LARGE_BYTES = 8 << 20
"""Full tensors from this size on take the all_to_all / broadcast path (the Note above);
``DSBENCH_GLOO_LARGE_BYTES`` overrides it (0: always; a huge value: never)."""


def gloo_large_bytes() -> int:
    import os

    text = os.environ.get("DSBENCH_GLOO_LARGE_BYTES", "").strip()
    if not text:
        return GLOO_LARGE_BYTES
    if not text.isdigit():
        from dsbench.errors import UsageError

        raise UsageError(
            f"DSBENCH_GLOO_LARGE_BYTES={text!r}: expected a whole number of bytes (0 or more)"
        )
    return int(text)


class BufferKind(enum.StrEnum):
    """The buffers collectives can read in place (:meth:`Comm.shared_zeros`, ``kernels/shm.py``)."""

    REPLICATED = "replicated"  # one copy every rank maps: an all-gather into it moves nothing
    SYMMETRIC = "symmetric"  # one per rank, all mapped: a reduce-scatter from it copies nothing in


class Handle:
    """A submitted collective; :meth:`wait` blocks until it is done (and orders GPU streams)."""

    def __init__(self, future: concurrent.futures.Future | None, done_event=None):
        self._future = future
        self._event = done_event

    def wait(self) -> None:
        if self._future is not None:
            self._future.result()
            self._future = None
        if self._event is not None:
            torch.cuda.current_stream().wait_event(self._event)
            self._event = None


class Comm:
    """Registry collectives over ``group``, served in submission order by one worker thread."""

    def __init__(
        self, group=None, impls: dict[str, str] | None = None, device: torch.device | None = None
    ):
        impls = impls or {}
        self.group = group
        self.device = device or torch.device("cpu")
        self._allreduce = registry.get("allreduce", impls.get("allreduce")).load()
        self._reduce_scatter = registry.get("reduce_scatter", impls.get("reduce_scatter")).load()
        self._allgather = registry.get("allgather", impls.get("allgather")).load()
        # what allocates buffers the collectives read in place (shm), per kind; None: nothing
        self._buffers = {
            BufferKind.REPLICATED: registry.get("allgather", impls.get("allgather")).load_buffers(),
            BufferKind.SYMMETRIC: registry.get("reduce_scatter",
                                               impls.get("reduce_scatter")).load_buffers(),
        }  # fmt: skip
        # See [Note: gloo's large collectives]: native collectives over gloo, host tensors
        self._gloo = self.device.type == "cpu" and _is_gloo(group)
        self._large_bytes = gloo_large_bytes()
        self._recv: dict[torch.dtype, torch.Tensor] = {}
        self.large_calls = 0
        """How many collectives took [Note: gloo's large collectives]'s path."""
        self._native = {
            op: registry.get(op, impls.get(op)).name == "native"
            for op in ("reduce_scatter", "allgather")
        }
        # See [Note: landing in the reduction]: the reduce-scatter takes divide_by/accumulate/sq
        self.lands = self.device.type == "cpu" and getattr(self._reduce_scatter, "lands", False)
        # See [Note: the norm's all-reduce]: small sums through shm where the all-reduce is shm's
        self._shm_small = registry.get("allreduce", impls.get("allreduce")).name == "shm"
        # See [Note: collectives on the calling thread]
        names = {registry.get(op, impls.get(op)).name for op in ("allreduce", "reduce_scatter",
                                                                 "allgather")}  # fmt: skip
        self.inline = (
            self.device.type == "cpu" and names == {"shm"} and (torch.get_num_threads() == 1)
        )
        """Run every collective on the calling thread, at submission (the Note below)."""
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dsbench-comm")
        self._stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None

    # [Note: collectives on the calling thread]
    # The worker thread lets backward go on while a collective runs, which hides the collective
    # where the rank has cores to spare or the collective mostly waits (gloo's sockets, NCCL).
    # The shm collectives are CPU work (sums and copies) and short waits on a barrier, and a rank
    # that computes with one thread (as many ranks as cores: dsbench's launcher gives each rank
    # cores // ranks threads) has no core to spare: the worker then only competes with compute,
    # and ranks preempted mid-sum keep each other waiting at the next barrier. So with shm
    # collectives and one thread, each collective runs where it is submitted, in the same
    # program order, and its handle is done at once (docs/decisions.md, "Collectives on the
    # calling thread").

    def _submit(self, fn: Callable[[], object]) -> Handle:
        if self.inline:
            fn()
            return Handle(None)
        if self._stream is None:
            return Handle(self._pool.submit(fn))
        ready = torch.cuda.Event()
        ready.record()
        done = torch.cuda.Event()

        def on_stream():
            with torch.cuda.stream(self._stream):
                self._stream.wait_event(ready)
                fn()
                done.record(self._stream)

        return Handle(self._pool.submit(on_stream), done)

    def allreduce(self, tensor: torch.Tensor) -> Handle:
        return self._submit(lambda: self._allreduce(tensor, group=self.group))

    def reduce_scatter(self, output: torch.Tensor, input: torch.Tensor, **landing) -> Handle:
        """Sum reduce-scatter of ``input`` into ``output`` ([Note: gloo's large collectives]).
        ``landing`` (``divide_by``, ``accumulate``, ``sq``): fused into the sum where
        :attr:`lands` ([Note: landing in the reduction] in :mod:`dsbench.zero.engine`)."""
        if landing:
            if not self.lands:
                raise ValueError("this reduce_scatter implementation takes no fused landing")
            return self._submit(
                lambda: self._reduce_scatter(output, input, group=self.group, **landing)
            )
        if self._large("reduce_scatter", input):
            recv = self._recv_buffer(input)
            return self._submit(lambda: reduce_scatter_by_alltoall(output, input, self.group, recv))
        return self._submit(lambda: self._reduce_scatter(output, input, group=self.group))

    def allgather(self, output: torch.Tensor, input: torch.Tensor) -> Handle:
        if self._large("allgather", output):
            return self._submit(lambda: allgather_by_broadcast(output, input, self.group))
        return self._submit(lambda: self._allgather(output, input, group=self.group))

    def _recv_buffer(self, like: torch.Tensor) -> torch.Tensor:
        """A flat buffer of at least ``like``'s size and dtype, kept for the next call (a fresh
        one per call would fault its pages in again every time)."""
        have = self._recv.get(like.dtype)
        if have is None or have.numel() < like.numel():
            have = self._recv[like.dtype] = torch.empty(like.numel(), dtype=like.dtype)
        return have

    def _large(self, op: str, full: torch.Tensor) -> bool:
        large = (
            self._gloo
            and self._native[op]
            and full.numel() * full.element_size() >= self._large_bytes
        )
        self.large_calls += large
        return large

    def algorithms(self) -> dict[str, str]:
        """What a large collective runs here (for a result row's notes); empty when each op is
        its registry implementation's own call at every size."""
        if not self._gloo:
            return {}
        runs = {
            "reduce_scatter": "all_to_all_single + a sum in rank order",
            "allgather": "one broadcast per rank's chunk",
        }
        mib = f"{self._large_bytes / 2**20:g}"
        return {
            op: f"from {mib} MiB: {text} (gloo's own {op} is slower there)"
            for op, text in runs.items()
            if self._native[op]
        }

    def shared_zeros(self, kind: BufferKind, numel: int, dtype: torch.dtype) -> torch.Tensor | None:
        """A zero-filled buffer that the collectives read in place (collective, waited for):
        ``replicated`` (one copy every rank maps; an all-gather into it moves nothing) or
        ``symmetric`` (this rank's of one per rank; a reduce-scatter from it copies nothing in),
        see ``kernels/shm.py``. None where the implementation has none (native, ring, GPUs)."""
        buffers = self._buffers[kind]
        if buffers is None or self.device.type != "cpu":
            return None
        made = []
        alloc = getattr(buffers, f"{kind}_zeros")
        self._submit(lambda: made.append(alloc(numel, dtype, self.group))).wait()
        return made[0]

    def fence(self) -> Handle:
        """Every rank reaches this point (ordered with the collectives): before writing a
        replicated buffer (:meth:`shared_zeros`) that other ranks may still read."""
        return self._submit(lambda: self._buffers[BufferKind.REPLICATED].fence(self.group))

    # [Note: the norm's all-reduce]
    # The step's gradient norm is one fp32 sum over ranks, after every rank's backward. Over
    # gloo a rank waits for it on sockets, several times longer than the same all-reduce takes
    # in isolation; shm's all-reduce (barriers on shared memory) waits less (docs/decisions.md,
    # "The norm's all-reduce through shm"). A sum of two ranks is the same bits either way;
    # with more ranks shm's order (rank order, on one rank, copied to all) may differ from
    # gloo's by an ulp, and is the same on every rank.

    def small_allreduce(self, tensor: torch.Tensor) -> Handle:
        """Sum all-reduce of a few host or device elements (the step's gradient norm): through
        the all-reduce implementation when it is shm ([Note: the norm's all-reduce]), else
        torch.distributed's over the group."""
        if self._shm_small and tensor.device.type == "cpu":
            return self.allreduce(tensor)
        import torch.distributed as dist

        return self.call(lambda: dist.all_reduce(tensor, group=self.group))

    def call(self, fn: Callable[[], object]) -> Handle:
        """Any other collective (e.g. a norm or overflow all-reduce), in the same order."""
        return self._submit(fn)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _is_gloo(group) -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_backend(group) == "gloo"


def reduce_scatter_by_alltoall(
    output: torch.Tensor, input: torch.Tensor, group, recv: torch.Tensor
) -> None:
    """[Note: gloo's large collectives]: every rank's chunk r into ``recv``, summed in rank
    order into ``output``."""
    import torch.distributed as dist

    n = output.numel()
    world = dist.get_world_size(group)
    got = recv[: world * n]
    dist.all_to_all_single(got, input.view(-1), group=group)
    torch.sum(got.view(world, n), 0, out=output.view(-1))


def allgather_by_broadcast(output: torch.Tensor, input: torch.Tensor, group) -> None:
    """[Note: gloo's large collectives]: chunk r of ``output`` broadcast from group rank r."""
    import torch.distributed as dist

    n = input.numel()
    flat = output.view(-1)
    r = dist.get_rank(group)
    mine = flat[r * n : (r + 1) * n]
    if mine.data_ptr() != input.data_ptr():
        mine.copy_(input.view(-1))
    world = group is None or group is dist.group.WORLD
    for k in range(dist.get_world_size(group)):
        src = k if world else dist.get_global_rank(group, k)
        dist.broadcast(flat[k * n : (k + 1) * n], src=src, group=group)
