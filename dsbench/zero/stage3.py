"""ZeRO stage 3's partitioned parameters: each module with parameters is a unit whose full
weights exist only while it runs (gathered in a forward pre-hook, with the next units prefetched;
released after its forward; gathered again before its backward; released once its gradients
are reduced). :class:`Stage3` is the part of :class:`dsbench.zero.engine.ZeroEngine` that does
this; it holds the units' state (``units``, ``order``, ``recording``, the buffer pools) and takes
what it uses of the engine as :class:`EngineView` (its public settings) and :class:`EngineParts`
(its collaborators), so this module never imports the engine."""

from __future__ import annotations

import enum
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch
from torch import nn

from dsbench.zero.buckets import Bucket, GradSlot
from dsbench.zero.collectives import BufferKind, Comm, Handle

if TYPE_CHECKING:
    from dsbench.zero.config.settings import ZeroSettings
    from dsbench.zero.offload import HostCopies

# [Note: stage-3 reuse]
# Between its forward and its backward a stage-3 unit is normally released (its full weights
# freed) and gathered again when the gradient of its output arrives. DeepSpeed keeps it instead
# when that is cheap (``stage3_max_reuse_distance`` / ``stage3_max_live_parameters``), and dsbench
# follows the same rule in two places:
# - after its forward: keep the unit if the units gathered between its forward and its backward
#   (those after it in forward order) hold at most max_reuse_distance elements and the units kept
#   so far at most max_live_parameters (Stage3._keep_for_backward);
# - after its reduction, between the micro-steps of one accumulation: the weights do not change
#   until the optimizer step, so keep every unit for the next micro-step's forward when all of
#   them fit within both limits (Stage3.keep_until_step). The optimizer step releases them
#   (their contents are stale then).
# A forward run again inside backward (activation checkpointing) keeps its unit gathered for the
# backward that follows; its reduction releases it, by the second rule.


# [Note: stage-3 staged gradients]
# With resident units (below), a unit's gradients are written into a buffer that the
# reduce-scatter reads in place (shm's symmetric buffers): taken from a pool when the unit's
# backward starts (Stage3._stage_grads), its parameters' GradSlots pointed into it, and
# returned once the unit's reduction landed. So, as at stages 1-2 ([Note: gradients overwrite
# stale slots] in dsbench.zero.engine), a GEMM-backed weight's gradient is written there by
# its backward with nothing allocated, and the reduce-scatter copies nothing in. The pool holds
# as many buffers per size as were ever in flight at once (one per unit being reduced while
# the next one's backward runs), as DeepSpeed's stage 3 reduces through a bounded bucket: full
# gradients are never kept for every unit. Each rank takes and returns buffers in the same
# order (program order), so every rank passes the same buffer to each reduce-scatter.
# Measured: docs/decisions.md, "Stage 3: staged gradients".


# [Note: stage-3 resident]
# With collectives that can map one buffer into every rank of a host (shm, kernels/shm.py), the
# units' full weights are that buffer: one copy per host, which is what partitioning parameters
# achieves for the host's memory (n ranks, 1/n each), and each rank owns, steps and checkpoints
# its slice of every unit as before. Nothing is gathered or released: before the optimizer
# writes its slices a rank waits until every rank is done reading them (ZeroEngine.
# before_param_writes), and after writing until every rank has (ZeroEngine.publish_params).
# The price is the resident-set figure: shared pages count in every rank's, as the gather
# buffers a CPU run pools (_recycle) already did. Gradients are reduce-scattered per unit as
# before.


def _in_backward() -> bool:
    """True while autograd runs a backward pass (a checkpointed block's forward runs again)."""
    return torch._C._current_graph_task_id() != -1


@dataclass
class InFlight:
    """A stage-3 all-gather submitted but not yet waited for (a prefetch, or the current one)."""

    buffer: torch.Tensor  # receives the full padded run
    handle: Handle


class UnitState(enum.Enum):
    """Where a stage-3 unit's full weights are (FSDP's ``ShardedState``, with a gather in
    flight and the resident case apart)."""

    RELEASED = "released"  # only this rank's shard; the parameters' ``data`` empty
    IN_FLIGHT = "in flight"  # an all-gather submitted, not yet waited for (``in_flight``)
    GATHERED = "gathered"  # ``gathered`` holds the full run; the parameters point into it
    RESIDENT = "resident"  # one copy per host, always gathered ([Note: stage-3 resident])


class Unit(Bucket):
    """Stage 3: one module's partitioned parameters, whole only while in use (:attr:`state`)."""

    def __init__(self, module: nn.Module, params: list[nn.Parameter], world: int, rank: int):
        super().__init__(params, world, rank, sharded=True)
        self.module = module
        # this rank's slice in the compute dtype (host memory with offload_param); set by
        # Stage3.build
        self.shard: torch.Tensor | None = None
        self.gathered: torch.Tensor | None = None
        self.in_flight: InFlight | None = None
        # the one copy per host that every rank maps (shm collectives, [Note: stage-3 resident]):
        # always gathered, never released; ``shard`` is this rank's slice of it
        self.resident: torch.Tensor | None = None
        # its gradients' buffer from its backward to its reduction ([Note: stage-3 staged
        # gradients]); None: autograd's own tensors
        self.grad_buffer: torch.Tensor | None = None

    @property
    def state(self) -> UnitState:
        """The unit's :class:`UnitState`, from the buffers it holds."""
        if self.resident is not None:
            return UnitState.RESIDENT
        if self.in_flight is not None:
            return UnitState.IN_FLIGHT
        return UnitState.RELEASED if self.gathered is None else UnitState.GATHERED


class EngineView(Protocol):
    """What :class:`Stage3` reads of its engine (:class:`dsbench.zero.engine.ZeroEngine` is
    one): its public settings and collectives."""

    settings: ZeroSettings
    module: nn.Module
    rank: int
    world: int
    dtype: torch.dtype
    device: torch.device
    comm: Comm


@dataclass(frozen=True)
class EngineParts:
    """The engine's collaborators that :class:`Stage3` uses, handed to it rather than reached
    for: the step's phase timers, the flat-buffer allocator, the stage-2 bucket layout (for
    persistent parameters), the accumulation boundary, the hook list and the host copies."""

    phase: Callable[[str], AbstractContextManager]
    """A phase the step waits in (timed as that phase)."""
    running: Callable[[str], AbstractContextManager]
    """A phase that runs behind the step (its submission timed)."""
    flat: Callable[[BufferKind | None, int], tuple[torch.Tensor, bool]]
    """A flat buffer of the engine's dtype: ``(tensor, shared)``."""
    build_buckets: Callable[[list[nn.Parameter]], None]
    at_boundary: Callable[[], bool]
    """Whether this micro-step ends a gradient accumulation."""
    hooks: list
    """The engine's hook handles (removed by its ``destroy``); Stage3 appends its own."""
    host: HostCopies | None
    """Host copies of offloaded tensors (None without offload)."""


class Stage3:
    """Stage 3's units: gathering, releasing, prefetching and staging their gradients, for one
    :class:`~dsbench.zero.engine.ZeroEngine` (its ``stage3``). The engine calls :meth:`build`,
    :meth:`release` and :meth:`unstage_grads`, and reads :attr:`units` and :attr:`resident`; the
    units' module hooks call the rest. What it uses of the engine: its public settings, module,
    rank and world, dtype and device and collectives (:class:`EngineView`), and ``parts``
    (:class:`EngineParts`)."""

    def __init__(self, engine: EngineView, parts: EngineParts):
        self.engine = engine
        self.parts = parts
        # partitioned modules, and the unit of each module
        self.units: list[Unit] = []
        self.unit_of_module: dict[nn.Module, Unit] = {}
        # the units in their first forward's order (for prefetching), and whether that order is
        # still being recorded (the first forward)
        self.order: list[Unit] = []
        self.recording = True
        # the units' full weights are one copy every rank maps ([Note: stage-3 resident])
        self.resident = False
        # released units' gather buffers by size, for the next gathers (CPUs; :meth:`_recycle`)
        self.gather_pool: dict[int, list[torch.Tensor]] = {}
        # landed units' gradient buffers by unit size ([Note: stage-3 staged gradients])
        self.grad_pool: dict[int, list[torch.Tensor]] = {}

    def build(self, params: list[nn.Parameter]) -> None:
        """Stage 3: a unit per module holding partitioned parameters; small or shared parameters
        persist whole in stage-2 style buckets."""
        s = self.engine.settings
        owners: dict[int, list[nn.Module]] = {}
        for module in self.engine.module.modules():
            for p in module.parameters(recurse=False):
                owners.setdefault(id(p), []).append(module)
        persistent = [
            p
            for p in params
            if p.numel() <= s.param_persistence_threshold or len(owners[id(p)]) > 1
        ]
        keep = {id(p) for p in persistent}
        for module in self.engine.module.modules():
            own = [
                p for p in module.parameters(recurse=False) if p.requires_grad and id(p) not in keep
            ]
            if own:
                unit = Unit(module, own, self.engine.world, self.engine.rank)
                self.units.append(unit)
                self.unit_of_module[module] = unit
        resident, start = self._resident_units(), 0
        for unit in self.units:
            if resident is not None:
                self._make_resident(unit, resident[start : start + unit.padded])
                start += unit.padded
                continue
            full = unit.flatten(
                [p.data for p in unit.params], self.engine.dtype, self.engine.device
            )
            mine = full[unit.lo : unit.lo + unit.owned]
            host = self.parts.host
            unit.shard = host.host_copy(mine) if s.offload_param else mine.clone()
            self.release(unit)
        if resident is not None:  # every rank wrote the same weights; nobody reads early
            self.engine.comm.fence().wait()
            for unit in self.units:  # [Note: stage-3 staged gradients]
                unit.slots = [GradSlot(p, None) for p in unit.params]
        if persistent:
            self.parts.build_buckets(persistent)
        for unit in self.units:
            m = unit.module
            self.parts.hooks.extend(
                [
                    m.register_forward_pre_hook(lambda mod, args, u=unit: self._pre_forward(u)),
                    m.register_forward_hook(
                        lambda mod, args, out, u=unit: self._post_forward(u, out)
                    ),
                ]
            )

    def _resident_units(self) -> torch.Tensor | None:
        """One buffer for every unit's full weights that every rank maps, where the collectives
        offer one (shm on CPUs) and nothing is offloaded; else None ([Note: stage-3 resident])."""
        s = self.engine.settings
        if not self.units or s.offload_param or s.offload_optimizer:
            return None
        total = sum(u.padded for u in self.units)
        resident = self.engine.comm.shared_zeros(BufferKind.REPLICATED, total, self.engine.dtype)
        self.resident = resident is not None
        return resident

    def _make_resident(self, unit: Unit, full: torch.Tensor) -> None:
        """``unit``'s weights into ``full``, its place in the resident buffer, for good."""
        unit.resident = full
        unit.fill(full, [p.data for p in unit.params])
        unit.shard = full[unit.lo : unit.lo + unit.owned]
        unit.gathered = full
        unit.bind(full)

    def _start_gather(self, unit: Unit) -> None:
        if unit.state is not UnitState.RELEASED:
            return
        pooled = self.gather_pool.get(unit.padded)
        if pooled:
            full = pooled.pop()
        else:
            full = torch.empty(unit.padded, dtype=self.engine.dtype, device=self.engine.device)
        shard = unit.shard
        if shard.device != self.engine.device:  # offload_param: the shard comes from host memory
            shard = shard.to(self.engine.device, non_blocking=self.parts.host.pin)
        with self.parts.running("allgather_wait"):
            unit.in_flight = InFlight(full, self.engine.comm.allgather(full, shard))

    def _gather(self, unit: Unit) -> None:
        self._start_gather(unit)
        if unit.state is UnitState.IN_FLIGHT:
            with self.parts.phase("allgather_wait"):
                unit.in_flight.handle.wait()
            unit.gathered, unit.in_flight = unit.in_flight.buffer, None
            unit.bind(unit.gathered)

    def release(self, unit: Unit) -> None:
        if unit.state is UnitState.RESIDENT:  # always whole ([Note: stage-3 resident])
            return
        buffer = unit.gathered
        if unit.state is UnitState.IN_FLIGHT:  # a prefetch that was not used: finish it first
            unit.in_flight.handle.wait()
            buffer, unit.in_flight = unit.in_flight.buffer, None
        unit.gathered = None
        empty = torch.empty(0, dtype=self.engine.dtype, device=self.engine.device)
        for p in unit.params:
            p.data = empty
        if buffer is not None:
            self._recycle(buffer)

    def _recycle(self, buffer: torch.Tensor) -> None:
        """Keep a released unit's buffer for the next gather of that size (CPUs only).

        On GPUs torch's caching allocator hands the freed block to the next gather. On CPUs the
        C library returns a freed buffer this large to the kernel, so every gather wrote into
        fresh pages, one page fault per 4 KiB (about half a gather's time: docs/decisions.md,
        "Stage 3: a pool of gather buffers on CPUs"). The pool plays the caching allocator's
        part: the memory stays with the process, as the peak held it anyway. A buffer that
        anything else still references (a view autograd saved) is left to be freed instead."""
        use_count = getattr(torch._C, "_storage_Use_Count", None)  # private: may go away
        if self.engine.device.type != "cpu" or use_count is None:
            return
        # the references: ``buffer`` and the storage object asked for its count
        if use_count(buffer.untyped_storage()._cdata) > 2:
            return
        self.gather_pool.setdefault(buffer.numel(), []).append(buffer)

    def _prefetch(self, unit: Unit, order: list[Unit]) -> None:
        if self.recording or unit not in order:
            return
        budget = self.engine.settings.prefetch_bucket_size
        for nxt in order[order.index(unit) + 1 :]:
            if budget <= 0:
                break
            self._start_gather(nxt)
            budget -= nxt.numel

    def _pre_forward(self, unit: Unit) -> None:
        if _in_backward():  # activation checkpointing recomputes the unit for its backward
            self._gather(unit)
            return
        if self.recording and unit not in self.order:
            self.order.append(unit)
        self._gather(unit)
        self._prefetch(unit, self.order)

    def _keep_for_backward(self, unit: Unit) -> bool:
        """Keep ``unit`` gathered from its forward to its backward? ([Note: stage-3 reuse])"""
        if self.recording or unit not in self.order:
            return False
        s = self.engine.settings
        later = self.order[self.order.index(unit) + 1 :]
        live = sum(u.numel for u in self.units if u.gathered is not None)
        return sum(u.numel for u in later) <= s.max_reuse_distance and (
            live <= s.max_live_parameters
        )

    def keep_until_step(self) -> bool:
        """Keep reduced units gathered for the next micro-step? ([Note: stage-3 reuse])"""
        s = self.engine.settings
        total = sum(u.numel for u in self.units)
        return (
            not self.recording
            and not self.parts.at_boundary()
            and total <= min(s.max_reuse_distance, s.max_live_parameters)
        )

    def _post_forward(self, unit: Unit, output) -> None:
        """Release the unit unless it is kept ([Note: stage-3 reuse]); it is gathered again when
        the gradient of its output arrives, just before its backward."""
        if _in_backward():
            return
        if not (torch.is_grad_enabled() and self._keep_for_backward(unit)):
            self.release(unit)
        if torch.is_grad_enabled():
            for t in torch.utils._pytree.tree_leaves(output):
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    t.register_hook(lambda grad, u=unit: self._pre_backward(u))

    def _stage_grads(self, unit: Unit) -> None:
        """Point ``unit``'s gradient slots into a pooled buffer the reduce-scatter reads in
        place ([Note: stage-3 staged gradients]); nothing without slots, or once staged."""
        if not unit.slots or unit.grad_buffer is not None:
            return
        pooled = self.grad_pool.get(unit.numel)  # by size: the padding is never written
        buffer = pooled.pop() if pooled else self.parts.flat(BufferKind.SYMMETRIC, unit.padded)[0]
        unit.grad_buffer = buffer
        for slot, off, n, shape in zip(
            unit.slots, unit.offsets, unit.numels, unit.shapes, strict=True
        ):
            slot.view = buffer[off : off + n].view(shape)
            slot.clear()

    def unstage_grads(self, unit: Unit) -> None:
        """``unit``'s reduction landed: its buffer back to the pool, its slots placeless."""
        for slot in unit.slots:
            slot.clear()
            slot.view = None
        self.grad_pool.setdefault(unit.numel, []).append(unit.grad_buffer)
        unit.grad_buffer = None

    def _pre_backward(self, unit: Unit) -> None:
        self._stage_grads(unit)
        self._gather(unit)
        self._prefetch(unit, self.order[::-1])
