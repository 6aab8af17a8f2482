"""dsbench's ZeRO engine, stage by stage (Rajbhandari et al., "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models", SC 2020; layout in the style of PyTorch FSDP's flat buffers).

Parameters are laid out in *buckets*: runs of parameters flattened into one buffer, padded to a
multiple of the world size n, so that rank r *owns* the r-th 1/n of every bucket. Stage 0 holds
everything on every rank and all-reduces gradients bucket by bucket (``reduce_bucket_size``).
Stage 1 partitions the optimizer state: at the accumulation boundary each bucket's gradients are
reduce-scattered (or all-reduced, ``reduce_scatter: false``), a rank steps fp32 master weights
and Adam moments for its shard only, and the updated shards are all-gathered back. Stage 2
partitions gradients too: every micro-step's buckets are reduce-scattered at once into the rank's
fp32 gradient shard, and full gradients are freed once reduced. Stage 3 partitions parameters
too: each module with parameters is a unit whose full weights exist only while it runs
(:mod:`dsbench.zero.stage3`); parameters at or below ``stage3_param_persistence_threshold``
elements, or shared between modules, stay whole on every rank in stage-2 style buckets.
ZeRO-Offload (:mod:`dsbench.zero.offload`) keeps the optimizer's state (and the parameter shards)
in host memory and steps there; on a CPU device its arithmetic is that of the same stage.

Common to all stages: ``overlap_comm`` launches a bucket's collective from the gradient hook that
completes it; ``contiguous_gradients`` keeps gradients in one flat buffer; fp16 (dynamic loss
scaling) and bf16 train with fp32 master weights; clipping uses the global norm over all shards.
The optimizer step and the collectives come from the kernel registry; with the ``shm``
collectives (CPUs) buffers every rank maps replace copies ([Note: stage-3 resident]).
``tests/test_zero_engine.py`` checks every stage against single-process AdamW
(``test_fp32_matches_single_process_adamw``). The API mirrors DeepSpeed's engine::

    loss = loss_fn(engine.module, batch)   # or engine(batch)
    engine.backward(loss)
    engine.step()                          # steps only at the accumulation boundary
"""

from __future__ import annotations

import contextlib
import time

import torch
import torch.distributed as dist
from torch import nn

from dsbench.kernels import registry
from dsbench.kernels.autograd import set_grad_sink
from dsbench.zero.buckets import Bucket, GradSlot, Reduction, split_runs, sq_sum_fp64
from dsbench.zero.collectives import BufferKind, Comm, Handle
from dsbench.zero.config.settings import ZeroSettings
from dsbench.zero.offload import HOST, HostCopies, optimizer_kernel
from dsbench.zero.stage3 import EngineParts, Stage3, Unit

__all__ = ["ZeroEngine", "ZeroSettings"]


class ZeroEngine:
    """Train ``model`` with ZeRO stage ``settings.stage`` over the process group ``group``."""

    def __init__(
        self,
        model: nn.Module,
        settings: ZeroSettings,
        *,
        group=None,
        device: torch.device | str | None = None,
    ):
        self.module = model
        self.settings = s = settings
        self.group = group
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.device = (
            torch.device(device) if device is not None else next(model.parameters()).device
        )
        self.dtype = s.dtype
        self.comm = Comm(group, s.kernels, self.device)
        offload = s.offload_optimizer or s.offload_param
        self._host = HostCopies(self.device, s.pin_memory) if offload else None
        self.opt_device = HOST if s.offload_optimizer else self.device  # where the step runs
        self._adamw = optimizer_kernel(s)
        # The host step of an offloaded optimizer is torch's fused AdamW unless told otherwise:
        # on CPUs it is several times faster than the default (as DeepSpeed's CPU Adam is fused)
        self.fused = s.fused_optimizer
        if self.fused is None and s.offload_optimizer:
            self.fused = True
        # progress
        self.micro_steps = 0
        self.global_steps = 0  # optimizer steps applied
        self.skipped_steps = 0
        self._grad_sq_norm: torch.Tensor | None = None  # the last step's, when computed
        # backward: reductions submitted and not yet landed; hooks to remove on destroy
        self._pending: list[tuple[Handle, Reduction]] = []
        self._hooks: list = []
        # layout (stages 0-2, and stage 3's persistent parameters): buckets over one flat
        # parameter buffer and, with contiguous_gradients below stage 3, one flat gradient buffer
        self.buckets: list[Bucket] = []
        self.flat_params: torch.Tensor | None = None
        self.flat_grads: torch.Tensor | None = None
        self._params_replicated = False  # flat_params is one copy every rank maps (shm)
        # stage 3's units and their gathering (none below stage 3)
        self.stage3 = Stage3(self, EngineParts(
            phase=self._phase, running=self._running, flat=self._flat,
            build_buckets=self._build_buckets, at_boundary=self._boundary, hooks=self._hooks,
            host=self._host,
        ))  # fmt: skip
        # optimizer state: flat fp32 runs over every owned slice, and Adam's step per bucket
        self._master_flat: torch.Tensor | None = None  # None: every master is the parameter
        self._grad_flat: torch.Tensor | None = None
        self._m_flat: torch.Tensor | None = None
        self._v_flat: torch.Tensor | None = None
        self.adam_steps: list[torch.Tensor] = []
        # profiling: while a dict, the seconds spent waiting for gradient reductions
        # ("reduce_wait"), for parameter all-gathers ("allgather_wait") and in the optimizer
        # kernel ("optimizer") add up in it (the training suite's phase breakdown); None: off
        self.phase_seconds: dict[str, float] | None = None
        self._sync_params_from_rank0()
        model.to(dtype=s.dtype)
        params = [p for p in model.parameters() if p.requires_grad]
        if s.stage == 3:
            self.stage3.build(params)
        else:
            self._build_buckets(params)
        self._build_optimizer_state()
        self._register_grad_hooks()

    @contextlib.contextmanager
    def _phase(self, name: str):
        """Add the time of the body to ``phase_seconds[name]`` when profiling (a GPU is
        synchronised around it, so device work is counted where it is waited for)."""
        if self.phase_seconds is None:
            yield
            return
        gpu = self.device.type == "cuda"
        if gpu:
            torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if gpu:
                torch.cuda.synchronize(self.device)
            self.phase_seconds[name] = self.phase_seconds.get(name, 0.0) + (
                time.perf_counter() - t0
            )

    def _running(self, name: str):
        """Around submitting a collective: where it runs at submission ([Note: collectives on
        the calling thread] in :mod:`dsbench.zero.collectives`) its whole time is blocked time,
        counted in phase ``name`` as its wait would be; else nothing (the wait is timed)."""
        return self._phase(name) if self.comm.inline else contextlib.nullcontext()

    # ------------------------------------------------------------------ layout

    def _sync_params_from_rank0(self) -> None:
        """Every rank starts from rank 0's initial weights (as DeepSpeed broadcasts them)."""
        for p in self.module.parameters():
            src = dist.get_global_rank(self.group, 0) if self.group is not None else 0
            self.comm.call(
                lambda p=p, src=src: dist.broadcast(p.data, src, group=self.group)
            ).wait()

    def _build_buckets(self, params: list[nn.Parameter]) -> None:
        """Stages 0–2: full parameters live in one flat buffer, bucket by bucket."""
        s, sharded = self.settings, self.settings.stage >= 1
        self.buckets = [
            Bucket(g, self.world, self.rank, sharded)
            for g in split_runs(params, max(1, s.reduce_bucket_size))
        ]
        total = sum(b.padded for b in self.buckets)
        # Stages 1-2 on collectives that read buffers in place (shm on CPUs): the parameters are
        # one copy every rank maps, so the all-gather after the step moves nothing, and the flat
        # gradients sit where the reduce-scatter reads them without copying them in first
        zero_copy = s.stage in (1, 2) and not (s.offload_optimizer or s.offload_param)
        self.flat_params, self._params_replicated = self._flat(
            BufferKind.REPLICATED if zero_copy else None, total
        )
        self.flat_grads = None
        if s.stage <= 2 and s.contiguous_gradients:
            # Gradients accumulate in place into one flat buffer (each parameter's .grad is a
            # view). Stage 2 reduces it every micro-step and zeroes each bucket once reduced.
            kind = BufferKind.SYMMETRIC if zero_copy and s.reduce_scatter else None
            self.flat_grads, _ = self._flat(kind, total)
        start = 0
        for b in self.buckets:
            b.start = start
            view = self.flat_params[start : start + b.padded]
            b.fill(view, [p.data for p in b.params])
            b.bind(view)
            if self.flat_grads is not None:
                b.bind(self.flat_grads[start : start + b.padded], "grad")
                b.slots = [GradSlot(p, p.grad) for p in b.params]
            start += b.padded
        if self._params_replicated:  # every rank wrote the same weights; nobody reads early
            self.comm.fence().wait()

    def _flat(self, shared: BufferKind | None, numel: int) -> tuple[torch.Tensor, bool]:
        """A zero-filled flat buffer in the compute dtype: the collectives' ``shared`` kind
        (``Comm.shared_zeros``) where they offer it, else private memory; and whether shared."""
        buf = self.comm.shared_zeros(shared, numel, self.dtype) if shared else None
        if buf is not None:
            return buf, True
        return torch.zeros(numel, dtype=self.dtype, device=self.device), False

    def before_param_writes(self, met: bool = False) -> None:
        """Replicated parameters (one copy per host): wait until no rank still reads them (its
        forward and backward are done) before any rank writes its updated slice. ``met``: every
        rank has just been through a collective it issued after its backward (the step's norm
        all-reduce), so none still reads them and no further wait is needed."""
        if (self._params_replicated or self.stage3.resident) and not met:
            self.comm.fence().wait()

    # ------------------------------------------------------------------ optimizer state

    def _zeros(self, numel: int) -> torch.Tensor:
        """fp32 optimizer-side storage: on the device, or host memory when offloaded."""
        if self.settings.offload_optimizer:
            return self._host.empty(numel)
        return torch.zeros(numel, device=self.opt_device)

    def _build_optimizer_state(self) -> None:
        """fp32 master weights, gradients and Adam moments for the owned slices only (on the
        device, or in host memory with offload_optimizer)."""
        everything = self.owned_buckets()
        owned = sum(b.owned for b in everything)
        current = [
            b.shard
            if isinstance(b, Unit)
            else self.flat_params[b.start + b.lo : b.start + b.lo + b.owned]
            for b in everything
        ]
        # fp32 compute with the parameters where the step runs: the owned parameters are the
        # master copy; otherwise a separate fp32 master
        aliased = [self.dtype == torch.float32 and c.device == self.opt_device for c in current]
        self._master_flat = None if all(aliased) else self._zeros(owned)
        self._grad_flat = self._zeros(owned) if self.settings.contiguous_gradients else None
        self._m_flat = self._zeros(owned)
        self._v_flat = self._zeros(owned)
        start = 0
        for b, cur, alias in zip(everything, current, aliased, strict=True):
            sl = slice(start, start + b.owned)
            b.master_is_param = alias
            if alias:
                b.master = cur
            else:
                b.master = self._master_flat[sl]
                b.master.copy_(cur.float())
            b.grad = self._grad_flat[sl] if self._grad_flat is not None else self._zeros(b.owned)
            b.exp_avg, b.exp_avg_sq = self._m_flat[sl], self._v_flat[sl]
            start += b.owned
        self.adam_steps = [
            torch.zeros((), dtype=torch.float32, device=self.opt_device) for _ in everything
        ]

    # ------------------------------------------------------------------ backward

    # [Note: gradients overwrite stale slots]
    # With a flat gradient buffer (stages 0-2, contiguous_gradients) each parameter's slice is a
    # GradSlot (dsbench.zero.buckets). Once a slot's gradient is reduced (stage 2, every
    # micro-step) or stepped (stages 0-1), the slot is stale and its parameter's grad None, and
    # the next gradient is written over it rather than added to zeros: autograd hands a stale
    # parameter its gradient without adding it anywhere and the slot copies it in, and a
    # GEMM-backed linear layer writes its weight gradient there directly ([Note: weight
    # gradients in place], kernels/autograd.py), added in place once the slot accumulates. So
    # the buffer is never zeroed, no weight-gradient product is allocated, and autograd adds
    # nothing; a slot no gradient reached before its reduction is zeroed then. The bits are
    # those of zeroing and adding (tests/test_zero_engine.py). Measured: docs/decisions.md,
    # "Gradients overwrite stale slots".

    def _register_grad_hooks(self) -> None:
        for b in self.owned_buckets():
            slots = b.slots or [None] * len(b.params)
            for p, slot in zip(b.params, slots, strict=True):
                self._hooks.append(
                    p.register_post_accumulate_grad_hook(
                        lambda p, b=b, slot=slot: self._grad_ready(b, slot)
                    )
                )

    def _boundary(self) -> bool:
        return (self.micro_steps + 1) % self.settings.grad_accum == 0

    def _reduces_now(self, b: Bucket) -> bool:
        """Stage 0/1 reduce at the accumulation boundary; stage 2/3 every micro-step."""
        return self.settings.stage >= 2 or self._boundary()

    def _grad_ready(self, b: Bucket, slot: GradSlot | None = None) -> None:
        if slot is not None:  # into the flat buffer ([Note: gradients overwrite stale slots])
            slot.landed()
        if b.reduced:  # a late hook in this backward (a parameter used twice)
            return
        b.arrived += 1
        if b.arrived == len(b.params) and self._reduces_now(b):
            self._reduce(b)

    def _reduce(self, b: Bucket) -> None:
        """Submit the reduction of bucket ``b``'s gradients across ranks into its fp32 owned
        gradient; :meth:`_land` finishes it (at once, or after backward with overlap_comm)."""
        b.reduced = True
        s, unit = self.settings, isinstance(b, Unit)
        contiguous = self.flat_grads is not None and not unit
        if contiguous:  # the gradients are this view of the flat buffer
            full = self.flat_grads[b.start : b.start + b.padded]
        elif unit and b.grad_buffer is not None:  # [Note: stage-3 staged gradients]
            full = b.grad_buffer
        else:
            full = b.flat_grads(self.dtype, self.device)
            for p in b.params:
                p.grad = None  # the gradients now live in the bucket (accumulation restarts)
        if self.dtype == torch.float16:
            full.div_(self.world)  # fp16: pre-divide so the sum cannot overflow
        # add into the owned gradient what an earlier micro-step of this accumulation left there
        # (stage >= 2); the first reduction after a step writes it instead, so nothing zeroes it
        add = s.stage >= 2 and not b.grad_empty
        b.grad_empty = False
        landed = False  # See [Note: landing in the reduction]: the collective divides and adds
        with self._running("reduce_wait"):
            if b.owned != b.padded and s.reduce_scatter:
                straight = b.grad.dtype == self.dtype and b.grad.device == self.device
                if straight and self.dtype == torch.float32 and self.comm.lands:
                    out, fresh, landed = b.grad, False, True
                    handle = self.comm.reduce_scatter(
                        out, full, divide_by=self.world, accumulate=add, sq=self._fused_sq(b)
                    )
                else:  # straight into the owned gradient when it is written, else a buffer
                    own = not add and straight
                    out = b.grad if own else torch.empty_like(full[: b.owned])
                    handle = self.comm.reduce_scatter(out, full)
                    fresh = True
            else:
                out = full[b.lo : b.lo + b.owned]
                handle = self.comm.allreduce(full)
                fresh = False
        # reduced every micro-step (stage >= 2): the next micro-step's gradients overwrite it
        clear_slots = s.stage >= 2 and contiguous
        reduction = Reduction(bucket=b, out=out, full=full, add=add, fresh=fresh,
                              clear_slots=clear_slots, landed=landed)  # fmt: skip
        self._pending.append((handle, reduction))
        if not s.overlap_comm:
            self._drain()

    # [Note: landing in the reduction]
    # Landing a reduced gradient is the mean over ranks written into, or (a later micro-step at
    # stage >= 2) added to, the rank's fp32 gradient shard; at the accumulation boundary the
    # step then reads the shard once more for the gradient norm. Where the reduce-scatter can
    # do that in its own pass (shm on CPUs, fp32: kernels/shm_sum.py), it gets the shard as its
    # output with divide_by=world and accumulate, and at the boundary (when the step takes the
    # norm without a loss scale) an fp64 scalar for the shard's square-sum. Each fp32 operation
    # is the one the separate passes apply, in their order, so the gradients and weights are the
    # same bits (tests/test_zero_engine.py); the norm's fp64 square-sum is accumulated in
    # another order than torch.dot's (see kernels/shm_sum.py).

    def _fused_sq(self, b: Bucket) -> torch.Tensor | None:
        """Bucket ``b``'s fp64 square-sum scalar for a reduction that fuses it: its last one
        before a step that takes the norm of the gradients as they land; else None."""
        s = self.settings
        wanted = s.gradient_clipping or s.grad_norm_every_step
        if not (wanted and s.loss_scaler is None and self._boundary()):
            return None
        b.sq = torch.zeros((), dtype=torch.float64)
        return b.sq

    def _land(self, r: Reduction) -> None:
        """The reduced gradient into the bucket's fp32 owned gradient (host memory with
        offload_optimizer); a fused landing is there already."""
        b, out = r.bucket, r.out
        if not r.landed:
            g = out.float() if out.dtype != torch.float32 else out
            if self.dtype != torch.float16:
                # a fresh reduce-scatter output (or fp32 copy) is divided in place
                g = g.div_(self.world) if r.fresh or g is not out else g / self.world
            if b.grad.device != g.device:  # offload_optimizer: the shard is in host memory
                self._host.grad_to_host(id(b), g, b.grad, r.add)
            elif r.add:
                b.grad.add_(g)
            elif g is not b.grad:
                b.grad.copy_(g)
        if r.clear_slots:
            for slot in b.slots:
                slot.clear()
        if isinstance(b, Unit):
            if b.grad_buffer is not None:
                self.stage3.unstage_grads(b)
            if not self.stage3.keep_until_step():  # [Note: stage-3 reuse]
                self.stage3.release(b)

    def _drain(self) -> None:
        for handle, reduction in self._pending:
            with self._phase("reduce_wait"):
                handle.wait()
            self._land(reduction)
        self._pending.clear()

    def backward(self, loss: torch.Tensor) -> None:
        """Backpropagate ``loss / grad_accum`` (times the fp16 loss scale) and reduce gradients."""
        scale = 1.0 / self.settings.grad_accum
        if self.settings.loss_scaler is not None:
            scale *= self.settings.loss_scaler.scale
        (loss * scale).backward()
        for b in self.owned_buckets():  # buckets whose hooks did not all fire (unused params)
            if not b.reduced and self._reduces_now(b):
                for slot in b.slots:  # stale: no gradient arrived
                    slot.zero()
                self._reduce(b)
            b.arrived, b.reduced = 0, False
            for slot in b.slots:
                slot.written = False
        self._drain()
        if self._host is not None:
            self._host.flush()
        if self.units:
            self.stage3.recording = False
            if not self.stage3.keep_until_step():
                for unit in self.units:
                    self.stage3.release(unit)

    # ------------------------------------------------------------------ step

    def is_gradient_accumulation_boundary(self) -> bool:
        return self._boundary()

    def get_lr(self) -> float:
        s = self.settings
        return s.lr_at(self.global_steps) if s.lr_at is not None else s.lr

    @property
    def units(self) -> list[Unit]:
        """Stage 3's units (none below stage 3)."""
        return self.stage3.units

    def owned_buckets(self) -> list[Bucket]:
        """Every run of parameters a rank owns a slice of: the stage-0-2 style buckets (at stage
        3 the persistent parameters'), then the stage-3 units."""
        return self.buckets + self.units

    def _global_sq_norm(self) -> torch.Tensor:
        """Sum of squared gradients over all owned slices, summed over ranks (stage >= 1)."""
        local = torch.zeros((), device=self.opt_device)
        for b in self.owned_buckets():
            # the square-sum its reduction fused ([Note: landing in the reduction]), else now
            local += (b.sq if b.sq is not None else sq_sum_fp64(b.grad)).float()
            b.sq = None
        local = local.to(self.device)  # offload: the collective runs on the device
        if self.settings.stage >= 1:
            self.comm.small_allreduce(local).wait()
        return local

    def get_global_grad_norm(self) -> float | None:
        """The global L2 norm of the last optimizer step's (unscaled) gradients, where that step
        computed it (clipping, fp16 loss scaling or ``grad_norm_every_step``), else None."""
        return None if self._grad_sq_norm is None else float(self._grad_sq_norm.sqrt())

    def step(self) -> bool:
        """At an accumulation boundary, apply one optimizer step; True if it was applied."""
        boundary = self._boundary()
        self.micro_steps += 1
        if not boundary:
            return False
        s = self.settings
        owned = self.owned_buckets()
        if self._host is not None:
            self._host.before_host_writes()
        inv_scale = 1.0 / s.loss_scaler.scale if s.loss_scaler is not None else 1.0
        if inv_scale != 1.0:
            for b in owned:
                b.grad.mul_(inv_scale)
        needs_norm = bool(s.gradient_clipping or s.loss_scaler)
        sq = self._global_sq_norm() if needs_norm or s.grad_norm_every_step else None
        self._grad_sq_norm = sq
        overflow = needs_norm and not bool(torch.isfinite(sq))
        applied = True
        if s.loss_scaler is not None:
            applied = s.loss_scaler.update(overflow)
        if applied and not overflow:
            # the norm's all-reduce (stage >= 1) met every rank after its backward
            self.before_param_writes(met=sq is not None and s.stage >= 1)
            if s.gradient_clipping:
                norm = float(sq.sqrt())
                coef = s.gradient_clipping / (norm + 1e-6)
                if coef < 1.0:
                    for b in owned:
                        b.grad.mul_(coef)
            beta1, beta2 = s.betas_at(self.global_steps) if s.betas_at else s.betas
            with self._phase("optimizer"):
                self._adamw(
                    [b.master for b in owned],
                    [b.grad for b in owned],
                    [b.exp_avg for b in owned],
                    [b.exp_avg_sq for b in owned],
                    self.adam_steps,
                    lr=self.get_lr(),
                    beta1=beta1,
                    beta2=beta2,
                    eps=s.eps,
                    weight_decay=s.weight_decay,
                    adamw_mode=s.adamw_mode,
                    fused=self.fused,
                )
            self.global_steps += 1
            self.publish_params()
        else:
            self.skipped_steps += 1
        for b in owned:  # the next accumulation's first reduction overwrites the gradient
            b.grad_empty = True
            if self.settings.stage <= 1:  # and its first gradients the flat buffer (stage 2:
                for slot in b.slots:  # per micro-step, in _land)
                    slot.clear()
        return applied and not overflow

    def publish_params(self) -> None:
        """Copy the stepped fp32 masters into the compute-dtype parameters, gathering shards."""
        for u in self.units:
            self.stage3.release(u)  # a gathered copy is stale now
            if not u.master_is_param:
                self._copy_weights(u.shard, u.master)
        handles = []
        for b in self.buckets:
            full = self.flat_params[b.start : b.start + b.padded]
            mine = full[b.lo : b.lo + b.owned]
            if not b.master_is_param:
                self._copy_weights(mine, b.master)
            if b.owned != b.padded:  # sharded: every rank gathers the others' updated slices
                # in place: the input is this rank's slice of the output, as NCCL allows, and
                # every CPU implementation too (tests/test_shm.py): no copy of the shard first
                with self._running("allgather_wait"):
                    handles.append(self.comm.allgather(full, mine))
        if self._host is not None:
            self._host.published()
        if self.stage3.resident:  # nothing to gather: wait until every rank wrote its slices
            with self._running("allgather_wait"):
                handles.append(self.comm.fence())
        with self._phase("allgather_wait"):
            for h in handles:
                h.wait()

    def _copy_weights(self, dst: torch.Tensor, master: torch.Tensor) -> None:
        if dst.device != master.device:  # offload: host master -> device parameters
            self._host.to_device(dst, master)
        else:
            dst.copy_(master)

    # ------------------------------------------------------------------ misc

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """The whole model in fp32, gathered from the owned slices (collective: all ranks call)."""
        out = {}
        names = {id(p): n for n, p in self.module.named_parameters()}
        for b in self.owned_buckets():
            full = torch.empty(b.padded, device=self.device)
            if b.owned != b.padded:
                self.comm.allgather(full, b.master.to(self.device, copy=True)).wait()
            else:
                full.copy_(b.master)
            for p, off, n, shape in zip(b.params, b.offsets, b.numels, b.shapes, strict=True):
                out[names[id(p)]] = full[off : off + n].view(shape).clone().cpu()
        return out

    def save_checkpoint(self, directory, tag: str | None = None, client_state=None):
        """Collective; see :mod:`dsbench.zero.checkpoint`."""
        from dsbench.zero.checkpoint import save_checkpoint

        return save_checkpoint(self, directory, tag, client_state)

    def load_checkpoint(self, directory, tag: str | None = None) -> dict:
        """Collective; returns the client state saved with the checkpoint."""
        from dsbench.zero.checkpoint import load_checkpoint

        return load_checkpoint(self, directory, tag)

    def destroy(self) -> None:

        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        for b in self.owned_buckets():
            for slot in b.slots:
                set_grad_sink(slot.param, None)
        self.comm.close()
        registry.release_workspaces()
