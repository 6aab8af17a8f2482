"""ZeRO-Offload's copies between the device and host memory, for :class:`dsbench.zero.engine.
ZeroEngine` (Ren et al., "ZeRO-Offload: Democratizing Billion-Scale Model Training", USENIX ATC
2021; the settings are :mod:`dsbench.zero.config.offload_config`).

With ``offload_optimizer`` the fp32 master weights, the gradient shard and Adam's moments live in
host memory and the optimizer step runs there; each reduced gradient goes to the host as its
bucket's reduction finishes, and the updated weights go back after the step. With
``offload_param`` (stage 3) the parameter shards live in host memory too and are copied to the
device to be gathered.

On a GPU the gradient copies run on a side stream, into page-locked staging buffers when
``pin_memory`` is set, while backward goes on; the host adds them into the gradient shard when
the engine calls :meth:`HostCopies.flush` (end of backward). Weights go back with
``non_blocking`` copies on the compute stream, which the next forward and the gathers follow in
order; :meth:`HostCopies.before_host_writes` makes the next optimizer step wait for them before
it overwrites the host masters. On a CPU device everything is one memory: the copies are plain
in-place operations and the arithmetic is exactly that of the engine without offload.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from dsbench.errors import UsageError
from dsbench.kernels import registry

if TYPE_CHECKING:
    from dsbench.zero.config.settings import ZeroSettings

HOST = torch.device("cpu")


class HostCopies:
    """Gradients to the host, weights back to ``device``."""

    def __init__(self, device: torch.device, pin_memory: bool):
        self.device = device
        self.gpu = device.type == "cuda"
        self.pin = pin_memory and self.gpu  # page-locking needs a device to copy to
        self._stream = torch.cuda.Stream(device) if self.gpu else None
        self._staging: dict[int, torch.Tensor] = {}  # per bucket (key), reused every micro-step
        # (bucket key, copy-done event, the host add that lands it), in submission order
        self._pending: list[tuple[int, object, Callable[[], None]]] = []
        self._published = None  # event: the last weights sent to the device have left the host

    def empty(self, numel: int) -> torch.Tensor:
        """A zeroed fp32 host buffer (page-locked when ``pin_memory`` on a GPU)."""
        return torch.zeros(numel, dtype=torch.float32, pin_memory=self.pin)

    def host_copy(self, t: torch.Tensor) -> torch.Tensor:
        """A host copy of ``t`` (same dtype; page-locked when ``pin_memory`` on a GPU)."""
        out = torch.empty(t.shape, dtype=t.dtype, pin_memory=self.pin)
        return out.copy_(t)

    def grad_to_host(self, key: int, g: torch.Tensor, dst: torch.Tensor, accumulate: bool):
        """``dst += g`` (or ``dst = g``) for a device gradient ``g`` and host ``dst``; on a GPU
        asynchronously, landing at :meth:`flush`."""
        if not self.gpu:
            dst.add_(g) if accumulate else dst.copy_(g)
            return
        if any(k == key for k, _, _ in self._pending):
            self.flush()  # this bucket's staging buffer is still in flight
        buf = self._staging.get(key)
        if buf is None or buf.numel() != g.numel() or buf.dtype != g.dtype:
            buf = self._staging[key] = torch.empty(g.shape, dtype=g.dtype, pin_memory=self.pin)
        self._stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self._stream):
            buf.copy_(g, non_blocking=True)
            g.record_stream(self._stream)
            done = torch.cuda.Event()
            done.record(self._stream)

        def land(buf=buf, dst=dst):
            dst.add_(buf) if accumulate else dst.copy_(buf)

        self._pending.append((key, done, land))

    def flush(self) -> None:
        """Land every gradient copy in flight (host adds, in submission order)."""
        for _, done, land in self._pending:
            done.synchronize()
            land()
        self._pending.clear()

    def to_device(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        """``dst`` (device, compute dtype) = ``src`` (host fp32), asynchronously from pinned."""
        dst.copy_(src, non_blocking=self.pin)

    def published(self) -> None:
        """Call after a round of :meth:`to_device`: the next host write waits for them."""
        if self.gpu:
            self._published = torch.cuda.Event()
            self._published.record()

    def before_host_writes(self) -> None:
        """Block until the weights last sent to the device have been read from the host."""
        if self._published is not None:
            self._published.synchronize()
            self._published = None


def optimizer_kernel(s: ZeroSettings) -> Callable:
    """The AdamW implementation the settings choose; with ``offload_optimizer`` one that runs on
    the host (a one-line error naming those that do, otherwise)."""
    impl = registry.get("adamw", s.kernels.get("adamw"))
    if s.offload_optimizer:
        ok, why = impl.available("cpu")
        if not ok:  # the step runs on host tensors
            raise UsageError(
                f"adamw implementation '{impl.name}' cannot run the offloaded optimizer step "
                f"on the host ({why}); choose one of: "
                + ", ".join(
                    n
                    for n in registry.names("adamw")
                    if registry.get("adamw", n).available("cpu")[0]
                )
            )
    return impl.load()
