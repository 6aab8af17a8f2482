"""The ``cuda`` implementations: the reference signatures of :mod:`dsbench.kernels.reference`,
running the hand-written CUDA/HIP kernels of ``kernels/csrc`` (built at first call).

Tensor checks (device, dtype, contiguity, shapes) happen in ``bindings.cpp`` and raise
``RuntimeError("dsbench cuda <kernel>: <constraint>")``; a missing GPU, compiler or a failed build
raises :class:`dsbench.kernels.cuda.build.BuildError`.
"""

from __future__ import annotations

import torch

from dsbench.kernels.cuda import build
from dsbench.kernels.table_cache import TableCache

_tables: TableCache[tuple[torch.Tensor, int, int]] = TableCache(16)


def _signature(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), t.numel(), t.dtype, t.device, t.is_contiguous())


def _table(ext, params, grads, exp_avgs, exp_avg_sqs, steps) -> tuple[torch.Tensor, int, int]:
    """The device pointer table for these lists, built once and cached.

    The key is every tensor's (pointer, size, dtype, device, contiguity): the same list on the
    next step, or new tensors at the same addresses, reuse the table; any change (a regrown
    buffer, a new grad allocation) builds and validates a new one.
    """
    groups = (params, grads, exp_avgs, exp_avg_sqs, steps)
    key = (len(params), *(_signature(t) for group in groups for t in group))
    return _tables.get(
        key,
        lambda: ext.adamw_table(
            list(params), list(grads), list(exp_avgs), list(exp_avg_sqs), list(steps)
        ),
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
    """One Adam/AdamW step in place, as :func:`dsbench.kernels.reference.adamw` (see there for
    the math). The whole list is one update launch (plus one inf/NaN check launch with
    ``grad_scale``, and one that increments ``steps``); nothing is synchronised with the host.
    ``fused`` is accepted for signature compatibility (this kernel is always fused)."""
    del fused
    if not params:
        return
    ext = build.load()
    table, total_chunks, grad_dtype = _table(ext, params, grads, exp_avgs, exp_avg_sqs, steps)
    device = params[0].device
    scale = flag = None
    if grad_scale is not None:
        scale = grad_scale.to(device=device, dtype=torch.float32).reshape(1)
        flag = found_inf
        if found_inf is not None and (
            found_inf.dtype != torch.float32 or found_inf.device != device or found_inf.numel() != 1
        ):
            flag = torch.empty(1, device=device, dtype=torch.float32)
    ext.adamw_step(
        table,
        len(params),
        total_chunks,
        grad_dtype,
        float(lr),
        float(beta1),
        float(beta2),
        float(eps),
        float(weight_decay),
        bool(adamw_mode),
        scale,
        flag,
    )
    if flag is not None and flag is not found_inf:
        found_inf.copy_(flag.reshape(found_inf.shape))


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B as :func:`dsbench.kernels.reference.gemm`: 2-D fp16/bf16/fp32 operands of one
    dtype, any strides (row- or column-major used in place, others copied), fp32 accumulation,
    result in the input dtype. Tensor cores (sm_80+) or MFMA (CDNA) for fp16/bf16, else the
    portable tiled kernel."""
    return build.load().gemm(a, b, False)


def gemm_tiled(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """:func:`gemm` forced onto the portable tiled kernel (for tests and comparisons)."""
    return build.load().gemm(a, b, True)


def gemm_path(a: torch.Tensor) -> str:
    """Which kernel :func:`gemm` runs for ``a``'s dtype on ``a``'s device: ``wmma``, ``mfma`` or
    ``tiled``."""
    return build.load().gemm_path(a, False)


def reduce_add(acc: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """acc += x in place, summed in fp32 and rounded once to acc's dtype, as
    :func:`dsbench.kernels.reference.reduce_add`. ``acc`` must be contiguous; ``x`` may be any
    layout (copied if not contiguous); fp32/fp16/bf16 in any combination."""
    return build.load().reduce_add(acc, x)
