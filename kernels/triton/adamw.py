"""Fused Adam/AdamW step in Triton, on a flat buffer or on a list of tensors.

Entry point: :func:`adamw` (the registry's ``triton`` AdamW), with :class:`AdamHyper` for the
scalar hyper-parameters. Math (per element, fp32; the contract is
:func:`dsbench.kernels.reference.adamw`)::

    g  = g / grad_scale                      (when a scale is given)
    AdamW (decoupled, Loshchilov & Hutter):  p = p * (1 - lr*wd)
    Adam (L2):                               g = g + wd*p
    m  = b1*m + (1-b1)*g
    v  = b2*v + (1-b2)*g^2
    p  = p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)

Bytes per parameter with fp32 p, g, m, v: reads 16, writes 12 (28 B/param); an fp16/bf16
gradient reads 2 instead of 4. With a grad scaler a first pass reads the gradient once more to
find inf/NaN (+4 B/param for fp32 grads); the gradient is never written back. About 15 FLOPs per
parameter: memory-bound, so the figure of merit is GB/s against the device's copy bandwidth.

How it runs: a flat buffer (the ZeRO engine's partition) is one autotuned launch
([Note: autotuning an update in place]); a list of tensors is one launch per gradient dtype
([Note: one launch over a list of tensors]); nothing waits for the device
([Note: inf/NaN without a host sync]); bias corrections keep full fp32 accuracy
([Note: bias corrections near 1]). Square roots and divisions are IEEE-rounded (``sqrt_rn``,
``div_rn``), in the order torch evaluates them. ``tests/test_triton_kernels.py`` checks the
results against the reference under the interpreter (``test_interpreter_suite``) and on a GPU.

Sources: Triton tutorial 01 (vector add: masked blocks), tutorial 08 (grouped GEMM: int64
pointer tables), Liger-Kernel's layout (private ``@triton.jit`` kernels plus a launcher), and the
multi-tensor-apply chunking of NVIDIA Apex / DeepSpeed's fused Adam.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from dsbench.kernels.table_cache import TableCache
from dsbench.kernels.triton._common import (
    check_device,
    check_dtype,
    fail,
    interpret_requested,
    interpreted,
)

_GRAD_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_TL_DTYPE = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}

# Chunk table granularity (elements per program) for the list path, and its fixed block size.
# The interpreter runs a program in numpy, so fewer, larger programs are much faster there.
if interpret_requested():
    _CHUNK, _MULTI_BLOCK, _MULTI_WARPS = 65536, 16384, 4
else:
    _CHUNK, _MULTI_BLOCK, _MULTI_WARPS = 16384, 1024, 4
_CHECK_BLOCK = 65536 if interpret_requested() else 4096


def _flat_configs() -> list[triton.Config]:
    if interpret_requested():  # the interpreter cannot benchmark several configs
        return [triton.Config({"BLOCK": 65536}, num_warps=4)]
    return [
        triton.Config({"BLOCK": block}, num_warps=warps)
        for block in (1024, 2048, 4096)
        for warps in (4, 8)
    ]


# [Note: bias corrections near 1]
# Bias corrections ``1 - beta^t`` are computed per program as ``-expm1(t*ln(beta))``, with a
# Taylor series for small arguments, so they keep full fp32 accuracy when ``beta^t`` is close to
# 1 (``b2 = 0.999``, early steps), where ``1 - exp2(...)`` would lose three digits.
@triton.jit
def _one_minus_pow(log_beta, t):
    """1 - beta**t = -expm1(t * ln(beta)), accurate also when beta**t is close to 1."""
    x = t * log_beta
    # expm1(x) = x * (1 + x/2! + ... + x^7/8!), Horner form; relative error < 1e-8 for |x| < 0.5
    s = x * (1.0 / 40320) + 1.0 / 5040
    s = s * x + 1.0 / 720
    s = s * x + 1.0 / 120
    s = s * x + 1.0 / 24
    s = s * x + 1.0 / 6
    s = s * x + 0.5
    s = s * x + 1.0
    poly = s * x
    return tl.where(x > -0.5, -poly, 1.0 - tl.exp(x))


@triton.jit
def _adam_math(p, g, m, v, t, inv_scale, hyper, ADAMW: tl.constexpr, HAS_SCALE: tl.constexpr):
    """One Adam/AdamW update of loaded values; ``hyper`` is the tuple of
    :meth:`AdamHyper.kernel_args`' scalars, in that order."""
    lr, beta1, beta2, one_minus_beta1, one_minus_beta2, log_beta1, log_beta2, eps, wd, decay = hyper
    g = g.to(tl.float32)
    if HAS_SCALE:
        g = g * inv_scale
    if ADAMW:
        p = p * decay  # decay = 1 - lr*wd, computed on the host in double precision
    else:
        g = g + wd * p
    m = beta1 * m + one_minus_beta1 * g
    v = beta2 * v + one_minus_beta2 * g * g
    # IEEE sqrt and division (tl.sqrt and "/" lower to approximations on NVIDIA), in torch's
    # order: denom = sqrt(v) / sqrt(bc2) + eps;  p -= (lr / bc1) * (m / denom)
    step_size = tl.div_rn(lr, _one_minus_pow(log_beta1, t))
    bc2_sqrt = tl.sqrt_rn(_one_minus_pow(log_beta2, t))
    denom = tl.div_rn(tl.sqrt_rn(v), bc2_sqrt) + eps
    p = p - step_size * tl.div_rn(m, denom)
    return p, m, v


@triton.jit
def _nonfinite(g, inv_scale, mask):
    """1 if any unscaled gradient under ``mask`` is inf or NaN, else 0."""
    g = g.to(tl.float32) * inv_scale
    bad = (tl.abs(g) < float("inf")) == 0  # false for NaN and for +-inf
    return tl.max((bad & mask).to(tl.int32), axis=0)


@triton.jit
def _nonfinite_flat_kernel(g_ptr, scale_ptr, found_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0)
    inv_scale = tl.div_rn(1.0, tl.load(scale_ptr))
    if _nonfinite(g, inv_scale, mask) != 0:
        tl.store(found_ptr, 1.0)


@triton.jit
def _nonfinite_multi_kernel(
    g_tab,
    numel_tab,
    chunk_tab,
    scale_ptr,
    found_ptr,
    G_DTYPE: tl.constexpr,
    CHUNK: tl.constexpr,
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    idx = tl.load(chunk_tab + 2 * pid)
    start = tl.load(chunk_tab + 2 * pid + 1)
    end = tl.minimum(start + CHUNK, tl.load(numel_tab + idx))
    g_ptr = tl.load(g_tab + idx).to(tl.pointer_type(G_DTYPE))
    inv_scale = tl.div_rn(1.0, tl.load(scale_ptr))
    n_bad = 0
    for lo in range(start, end, BLOCK):
        offs = lo + tl.arange(0, BLOCK)
        mask = offs < end
        g = tl.load(g_ptr + offs, mask=mask, other=0.0)
        n_bad += _nonfinite(g, inv_scale, mask)
    if n_bad != 0:
        tl.store(found_ptr, 1.0)


@triton.jit
def _adam_block(
    p_ptr, g_ptr, m_ptr, v_ptr, offs, mask, t, inv_scale, hyper,
    ADAMW: tl.constexpr, HAS_SCALE: tl.constexpr,
):  # fmt: skip
    """Load one block of p, g, m, v, apply :func:`_adam_math`, store p, m, v (28 B/param)."""
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    p, m, v = _adam_math(p, g, m, v, t, inv_scale, hyper, ADAMW, HAS_SCALE)
    tl.store(p_ptr + offs, p, mask=mask)
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)


# [Note: autotuning an update in place]
# A flat buffer (a list of one tensor) is one launch of ``_adamw_flat_kernel``, autotuned over
# block size and warps with ``restore_value`` on p, m and v, so the benchmarking runs of
# autotuning never leave the update applied more than once.
@triton.autotune(configs=_flat_configs(), key=["n"], restore_value=["p_ptr", "m_ptr", "v_ptr"])
@triton.jit
def _adamw_flat_kernel(
    # Pointers: the flat buffers, the step, the grad scale and the inf/NaN flag
    p_ptr, g_ptr, m_ptr, v_ptr, step_ptr, scale_ptr, found_ptr,
    # Size
    n,
    # Hyper-parameters: AdamHyper.kernel_args(), in its order
    lr, beta1, beta2, one_minus_beta1, one_minus_beta2, log_beta1, log_beta2,
    eps, weight_decay, decay, ADAMW: tl.constexpr,
    # Meta-parameters
    HAS_SCALE: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    inv_scale = 1.0
    if HAS_SCALE:
        if tl.load(found_ptr) != 0:
            return
        inv_scale = tl.div_rn(1.0, tl.load(scale_ptr))
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    t = tl.load(step_ptr)
    hyper = (lr, beta1, beta2, one_minus_beta1, one_minus_beta2, log_beta1, log_beta2, eps,
             weight_decay, decay)  # fmt: skip
    _adam_block(p_ptr, g_ptr, m_ptr, v_ptr, offs, mask, t, inv_scale, hyper, ADAMW, HAS_SCALE)


# [Note: one launch over a list of tensors]
# No launch per tensor: the host builds, once per list layout, a chunk table (program -> tensor
# index, first element) and an int64 table of each tensor's base address (Triton tutorial 08's
# grouped GEMM uses the same int64 -> pointer cast); both are copied to the device through
# pinned memory without blocking, and cached, keyed by the tensors' addresses and sizes (a new
# layout costs one table build, never a device wait). Programs loop over their chunk in blocks;
# offsets are int64. ``_adamw_multi_kernel`` launches once per gradient dtype (at most three
# launches) over all chunks. It is not autotuned: ``restore_value`` can only snapshot kernel
# arguments, not tensors reached through a pointer table, so a fixed config keeps the in-place
# update from being applied twice. The pointer cast works under ``TRITON_INTERPRET=1`` for CPU
# tensors (the interpreter dereferences host addresses); CUDA tensors under the interpreter
# fall back to one flat launch per tensor.
@triton.jit
def _adamw_multi_kernel(
    # Pointers: the tables (program -> tensor, tensor -> address), the grad scale and the flag
    p_tab, g_tab, m_tab, v_tab, numel_tab, chunk_tab, step_tab, scale_ptr, found_ptr,
    # Hyper-parameters: AdamHyper.kernel_args(), in its order
    lr, beta1, beta2, one_minus_beta1, one_minus_beta2, log_beta1, log_beta2,
    eps, weight_decay, decay, ADAMW: tl.constexpr,
    # Meta-parameters
    G_DTYPE: tl.constexpr, HAS_SCALE: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    inv_scale = 1.0
    if HAS_SCALE:
        if tl.load(found_ptr) != 0:
            return
        inv_scale = tl.div_rn(1.0, tl.load(scale_ptr))
    pid = tl.program_id(0)
    idx = tl.load(chunk_tab + 2 * pid)  # which tensor this program works on
    start = tl.load(chunk_tab + 2 * pid + 1)  # its first element (int64)
    end = tl.minimum(start + CHUNK, tl.load(numel_tab + idx))
    p_ptr = tl.load(p_tab + idx).to(tl.pointer_type(tl.float32))
    g_ptr = tl.load(g_tab + idx).to(tl.pointer_type(G_DTYPE))
    m_ptr = tl.load(m_tab + idx).to(tl.pointer_type(tl.float32))
    v_ptr = tl.load(v_tab + idx).to(tl.pointer_type(tl.float32))
    t = tl.load(step_tab + idx)
    hyper = (lr, beta1, beta2, one_minus_beta1, one_minus_beta2, log_beta1, log_beta2, eps,
             weight_decay, decay)  # fmt: skip
    for lo in range(start, end, BLOCK):
        offs = lo + tl.arange(0, BLOCK)
        mask = offs < end
        _adam_block(p_ptr, g_ptr, m_ptr, v_ptr, offs, mask, t, inv_scale, hyper, ADAMW, HAS_SCALE)


# --------------------------------------------------------------------------------------------
# Host side: tables, cached per list layout (dsbench.kernels.table_cache)
# --------------------------------------------------------------------------------------------

_chunk_cache: TableCache[torch.Tensor] = TableCache(16)
_ptr_cache: TableCache[torch.Tensor] = TableCache(16)


def _to_device(table: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Copy a host table to ``device`` without waiting for the device (pinned, non-blocking)."""
    if device.type == "cuda":
        return table.pin_memory().to(device, non_blocking=True)
    return table.to(device)


def _chunk_table(numels: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """int64 [n_chunks, 2] on ``device``: (tensor index, first element) per program."""

    def build():
        rows = [(i, start) for i, n in enumerate(numels) for start in range(0, n, _CHUNK)]
        return _to_device(torch.tensor(rows, dtype=torch.int64).reshape(-1, 2), device)

    return _chunk_cache.get((device, _CHUNK, numels), build)


def _pointer_table(groups: tuple[list[torch.Tensor], ...], device: torch.device) -> torch.Tensor:
    """int64 [len(groups) + 1, n]: base addresses of each group's tensors, then their numels."""
    addrs = tuple(tuple(t.data_ptr() for t in g) for g in groups)
    numels = tuple(t.numel() for t in groups[0])

    def build():
        return _to_device(torch.tensor([*addrs, numels], dtype=torch.int64), device)

    return _ptr_cache.get((device, addrs, numels), build)


# --------------------------------------------------------------------------------------------
# Launcher
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdamHyper:
    """Adam/AdamW's scalar hyper-parameters: one argument through the host code, unpacked into
    the kernels' scalar arguments at the launch by :meth:`kernel_args`."""

    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    adamw_mode: bool = True
    """Decoupled weight decay (AdamW); ``False``: L2, ``wd * p`` added to the gradient (Adam)."""

    def kernel_args(self) -> dict[str, float | bool]:
        """The kernels' hyper-parameter arguments, in their order; the derived ones (``1 - beta``,
        ``ln(beta)``, ``1 - lr*wd``) computed here in double precision."""
        lr, beta1, beta2, wd = self.lr, self.beta1, self.beta2, self.weight_decay
        return dict(
            lr=float(lr),
            beta1=float(beta1),
            beta2=float(beta2),
            one_minus_beta1=1.0 - beta1,
            one_minus_beta2=1.0 - beta2,
            log_beta1=math.log(beta1) if beta1 > 0 else -math.inf,
            log_beta2=math.log(beta2) if beta2 > 0 else -math.inf,
            eps=float(self.eps),
            weight_decay=float(wd),
            decay=1.0 - lr * wd,
            ADAMW=bool(self.adamw_mode),
        )


def adamw(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    exp_avgs: list[torch.Tensor],
    exp_avg_sqs: list[torch.Tensor],
    steps: list[torch.Tensor],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    adamw_mode: bool = True,
    grad_scale: torch.Tensor | None = None,
    found_inf: torch.Tensor | None = None,
    fused: bool | None = None,
) -> None:
    """One Adam/AdamW step in place; the contract of :func:`dsbench.kernels.reference.adamw`
    (``fused`` is accepted and ignored: this implementation is always fused)."""
    hyper = AdamHyper(lr, beta1, beta2, eps, weight_decay, adamw_mode)
    device, grads = _check_inputs(params, grads, exp_avgs, exp_avg_sqs, steps)
    if device is None:
        return
    scale, found = _advance_steps(grads, steps, grad_scale, found_inf, device)
    # Unused pointer arguments still need a tensor: pass the step (never dereferenced).
    scale_args = (scale, found) if scale is not None else (steps[0], steps[0])
    if len(params) == 1 or (interpreted(_adamw_flat_kernel) and device.type != "cpu"):
        for p, g, m, v, s in zip(params, grads, exp_avgs, exp_avg_sqs, steps, strict=True):
            _launch_flat(p, g, m, v, s, scale_args, hyper, has_scale=scale is not None)
        return
    for dtype, idx in _group_by_dtype(grads).items():
        groups = tuple([ts[i] for i in idx] for ts in (params, grads, exp_avgs, exp_avg_sqs))
        step_group = [steps[i] for i in idx]
        _launch_multi(dtype, groups, step_group, scale_args, hyper, has_scale=scale is not None)


def _check_inputs(
    params, grads, exp_avgs, exp_avg_sqs, steps
) -> tuple[torch.device | None, list[torch.Tensor]]:
    """The params' device (``None`` for empty lists) and the gradients, contiguous; a
    ``ValueError`` for lists of different lengths or a tensor of the wrong kind."""
    n = len(params)
    if not (len(grads) == len(exp_avgs) == len(exp_avg_sqs) == len(steps) == n):
        fail(
            "adamw",
            "params, grads, exp_avgs, exp_avg_sqs and steps must have one entry per tensor; "
            f"got {n}, {len(grads)}, {len(exp_avgs)}, {len(exp_avg_sqs)}, {len(steps)}",
        )
    if n == 0:
        return None, grads
    device = check_device("adamw", _adamw_flat_kernel, *params, *grads, *exp_avgs, *exp_avg_sqs)
    grads = list(grads)
    for i, (p, g, m, v, s) in enumerate(
        zip(params, grads, exp_avgs, exp_avg_sqs, steps, strict=True)
    ):
        for what, t in (("params", p), ("exp_avgs", m), ("exp_avg_sqs", v)):
            check_dtype("adamw", f"{what}[{i}]", t, (torch.float32,))
            if not t.is_contiguous():
                fail("adamw", f"{what}[{i}] must be contiguous (it is updated in place)")
        check_dtype("adamw", f"grads[{i}]", g, _GRAD_DTYPES)
        if not (g.shape == m.shape == v.shape == p.shape):
            fail(
                "adamw",
                f"params[{i}], grads[{i}], exp_avgs[{i}], exp_avg_sqs[{i}] must have one shape; "
                f"got {tuple(p.shape)}, {tuple(g.shape)}, {tuple(m.shape)}, {tuple(v.shape)}",
            )
        if s.numel() != 1 or s.dtype != torch.float32 or s.device != device:
            fail("adamw", f"steps[{i}] must be a one-element float32 tensor on {device}")
        if not g.is_contiguous():
            grads[i] = g.contiguous()  # read-only operand: a copy is enough
    return device, grads


# [Note: inf/NaN without a host sync]
# With ``grad_scale``, ``found_inf`` is zeroed and a first pass (``_nonfinite_*_kernel``) stores
# 1 into it from every program that sees a non-finite unscaled gradient (a benign race: every
# writer writes 1; no atomics, which the interpreter lacks for some dtypes). The update kernel
# reads the flag and returns early when it is set. Steps are advanced on the device by
# ``1 - found_inf`` (torch's fused AdamW does the same), and the update kernel reads each
# tensor's new step from device memory and computes the bias corrections itself. Nothing in a
# call waits for the device (a ``grad_scale`` on another device than the params is the
# exception: it is copied over).
def _advance_steps(grads, steps, grad_scale, found_inf, device) -> tuple:
    """Advance every step on the device, by ``1 - found_inf`` with a grad scale (skipped steps
    stay where they were); ``(scale, found)`` as the kernels read them, or ``(None, None)``."""
    if grad_scale is None:
        torch._foreach_add_(steps, 1.0)
        return None, None
    scale = grad_scale.detach().reshape(()).to(device=device, dtype=torch.float32)
    usable = found_inf is not None and found_inf.dtype == torch.float32
    usable = usable and found_inf.numel() == 1 and found_inf.device == device
    found = found_inf.view(()) if usable else torch.empty((), device=device)
    found.zero_()
    _check_nonfinite(grads, scale, found)
    torch._foreach_add_(steps, [1.0 - found] * len(steps))
    if found_inf is not None and not usable:
        found_inf.copy_(found.reshape(found_inf.shape))
    return scale, found


def _launch_flat(p, g, m, v, step, scale_args: tuple, hyper: AdamHyper, *, has_scale: bool) -> None:
    """One launch of the flat kernel over one tensor; ``scale_args``: (grad scale, found_inf)."""
    n = p.numel()
    if n == 0:
        return
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    _adamw_flat_kernel[grid](
        p, g, m, v, step, *scale_args, n, **hyper.kernel_args(), HAS_SCALE=has_scale
    )


def _launch_multi(dtype, groups, steps, scale_args: tuple, hyper: AdamHyper, *, has_scale) -> None:
    """One launch of the list kernel over ``groups`` (params, grads, exp_avgs, exp_avg_sqs, all
    with gradients of ``dtype``) and their ``steps``; ``scale_args``: (grad scale, found_inf)."""
    device = steps[0].device
    tab = _pointer_table(groups, device)
    chunks = _chunk_table(tuple(p.numel() for p in groups[0]), device)
    step_tab = torch.stack([s.reshape(()) for s in steps])  # one launch, on the device
    _adamw_multi_kernel[(chunks.shape[0],)](
        *tab.unbind(),  # p, g, m, v addresses, numels
        chunks,
        step_tab,
        *scale_args,
        **hyper.kernel_args(),
        G_DTYPE=_TL_DTYPE[dtype],
        HAS_SCALE=has_scale,
        CHUNK=_CHUNK,
        BLOCK=_MULTI_BLOCK,
        num_warps=_MULTI_WARPS,
    )


def _group_by_dtype(grads: list[torch.Tensor]) -> dict[torch.dtype, list[int]]:
    """Indices of non-empty tensors, grouped by gradient dtype (one launch per group)."""
    groups: dict[torch.dtype, list[int]] = {}
    for i, g in enumerate(grads):
        if g.numel():
            groups.setdefault(g.dtype, []).append(i)
    return groups


def _check_nonfinite(grads: list[torch.Tensor], scale: torch.Tensor, found: torch.Tensor) -> None:
    """Store 1 into ``found`` if any ``g / scale`` is inf/NaN (``found`` already zeroed)."""
    device = found.device
    if len(grads) == 1 or (interpreted(_nonfinite_flat_kernel) and device.type != "cpu"):
        for g in grads:
            if g.numel():
                grid = (triton.cdiv(g.numel(), _CHECK_BLOCK),)
                _nonfinite_flat_kernel[grid](g, scale, found, g.numel(), BLOCK=_CHECK_BLOCK)
        return
    for dtype, idx in _group_by_dtype(grads).items():
        group = [grads[i] for i in idx]
        tab = _pointer_table((group,), device)
        chunks = _chunk_table(tuple(g.numel() for g in group), device)
        _nonfinite_multi_kernel[(chunks.shape[0],)](
            tab[0],
            tab[1],
            chunks,
            scale,
            found,
            G_DTYPE=_TL_DTYPE[dtype],
            CHUNK=_CHUNK,
            BLOCK=_MULTI_BLOCK,
            num_warps=_MULTI_WARPS,
        )
