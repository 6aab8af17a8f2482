"""Torch reference implementations: the registry's defaults, the ground truth for tests, and the
contract every other implementation of the same op follows (same signature, same semantics).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def fused_adamw_supported(device: torch.device | str) -> bool:
    """Whether ``torch.optim.AdamW(fused=True)`` runs on ``device`` with this torch build."""
    p = torch.zeros(2, device=device, requires_grad=True)
    p.grad = torch.zeros_like(p)
    try:
        torch.optim.AdamW([p], fused=True).step()
    except (RuntimeError, TypeError, ValueError):
        return False
    return True


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
    """One Adam/AdamW step, in place on lists of tensors (a flat buffer is a list of one).

    Contract (every ``adamw`` implementation): ``params``, ``exp_avgs``, ``exp_avg_sqs`` fp32;
    ``grads`` fp32, fp16 or bf16, same shapes; ``steps`` float32 scalar tensors on the params'
    device, incremented when the step is applied.

    g' = g / grad_scale (when given). If any g' is inf/NaN: ``found_inf`` is set to 1 and nothing
    else changes (the fp16 loss scaler skips the step). Otherwise, with t the new step:
      AdamW (``adamw_mode``, Loshchilov & Hutter): p -= lr*wd*p;  Adam (L2): g' += wd*p;
      m = b1*m + (1-b1)*g';  v = b2*v + (1-b2)*g'^2;
      p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
    Memory traffic for fp32 p, g, m, v: reads 16 B, writes 12 B per parameter (28 B/param);
    unscaling with the gradient written back adds 4 B (32 B/param).
    ``fused`` picks torch's fused kernel where it exists (None: torch decides).
    """
    if grad_scale is not None:
        inv = (1.0 / grad_scale.float()).to(grads[0].device)
        unscaled = [g.float() * inv for g in grads]
        finite = torch.stack([torch.isfinite(g).all() for g in unscaled]).all()
        if found_inf is not None:
            found_inf.fill_(0.0 if bool(finite) else 1.0)
        if not bool(finite):
            return
        grads = unscaled
    elif grads and grads[0].dtype != torch.float32:
        grads = [g.float() for g in grads]
    if not adamw_mode and weight_decay:
        grads = [g.add(p, alpha=weight_decay) for g, p in zip(grads, params, strict=True)]
        weight_decay = 0.0
    from torch.optim.adamw import adamw as _adamw

    _adamw(
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
        [],
        steps,
        foreach=None,
        fused=fused,
        lr=lr,
        beta1=beta1,
        beta2=beta2,
        eps=eps,
        weight_decay=weight_decay,
        amsgrad=False,
        maximize=False,
        capturable=False,
        differentiable=False,
        grad_scale=None,
        found_inf=None,
    )


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B for 2-D ``a`` [M, K] and ``b`` [K, N] of one dtype (fp16, bf16 or fp32), fp32
    accumulation, result in the input dtype; 2*M*N*K FLOPs. Every ``gemm`` implementation accepts
    any strides (or makes its inputs contiguous) and rejects other ranks/dtypes with a clear
    error."""
    return torch.matmul(a, b)


def reduce_add(acc: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """acc += x, elementwise, in place; the sum is computed in fp32 and rounded once to acc's
    dtype. ``acc`` and ``x`` have the same number of elements; ``x`` may be fp32, fp16 or bf16.
    Used for the local reductions of the ring collectives."""
    if acc.dtype == torch.float32:
        acc.add_(x)  # x widens to fp32 exactly: one fp32 rounding, one pass over memory
    else:
        acc.copy_(acc.float() + x.float())
    return acc


def allreduce(tensor: torch.Tensor, group=None) -> torch.Tensor:
    """Sum all-reduce in place over ``group`` (every rank ends with the sum)."""
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return tensor


def reduce_scatter(output: torch.Tensor, input: torch.Tensor, group=None) -> torch.Tensor:
    """Sum reduce-scatter: rank r gets the sum over ranks of input chunk r (``input`` is
    ``world_size`` equal contiguous chunks; ``output`` holds one)."""
    _reduce_scatter(output, input, op=dist.ReduceOp.SUM, group=group)
    return output


def allgather(output: torch.Tensor, input: torch.Tensor, group=None) -> torch.Tensor:
    """All-gather: ``output`` is ``world_size`` chunks, chunk r is rank r's ``input``."""
    _all_gather(output, input, group=group)
    return output


# torch 2.13 renamed reduce_scatter_tensor / all_gather_into_tensor to *_single (the old names
# warn); torch 2.11, on the GPU machines, has only the old names.
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
