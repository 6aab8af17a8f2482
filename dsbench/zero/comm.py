"""Collectives for the ZeRO engine: registry implementations, issued in one deterministic order.

Every collective the engine issues goes through one :class:`Comm` queue served by a single
worker thread. Two things follow:

- *Overlap* (``overlap_comm``): a gradient hook submits a bucket's reduction and returns at once;
  backward continues on the main thread while the worker runs the collective (gloo and NCCL
  release the GIL). Without overlap the caller waits for each result immediately.
- *Order*: ranks must issue collectives in the same order or they deadlock. Submissions happen in
  program order on the main thread, which is the same on every rank, and the single worker keeps
  that order; so synchronous and asynchronous collectives can be mixed safely.

On GPUs the worker runs collectives on its own stream, after an event recorded on the
submitting stream, and the waiter's stream waits on the collective's completion event.

The implementations (``native`` torch.distributed, ``ring``, ...) come from the kernel registry;
the engine never knows which one it got.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

import torch

from dsbench.kernels import registry


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
            "replicated": registry.get("allgather", impls.get("allgather")).load_buffers(),
            "symmetric": registry.get("reduce_scatter", impls.get("reduce_scatter")).load_buffers(),
        }
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dsbench-comm")
        self._stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None

    def _submit(self, fn: Callable[[], object]) -> Handle:
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

    def reduce_scatter(self, output: torch.Tensor, input: torch.Tensor) -> Handle:
        return self._submit(lambda: self._reduce_scatter(output, input, group=self.group))

    def allgather(self, output: torch.Tensor, input: torch.Tensor) -> Handle:
        return self._submit(lambda: self._allgather(output, input, group=self.group))

    def shared_zeros(self, kind: str, numel: int, dtype: torch.dtype) -> torch.Tensor | None:
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
        return self._submit(lambda: self._buffers["replicated"].fence(self.group))

    def call(self, fn: Callable[[], object]) -> Handle:
        """Any other collective (e.g. a norm or overflow all-reduce), in the same order."""
        return self._submit(fn)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
