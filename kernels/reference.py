"""Torch reference implementations: the defaults in the registry and the ground truth for tests.

Each function states the math it computes; the optimized kernels must match these.
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
    fused: bool | None = None,
) -> None:
    """One AdamW step, in place (Loshchilov & Hutter, decoupled weight decay).

    p -= lr*wd*p;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
    p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
    Memory traffic for fp32 p, g, m, v: reads 16 B, writes 12 B per parameter (28 B/param).
    ``steps`` are float32 scalar tensors on the params' device (as fused torch.optim keeps them),
    incremented here.
    """
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
    """C = A @ B with the vendor library; 2*M*N*K FLOPs."""
    return torch.matmul(a, b)


def allreduce(tensor: torch.Tensor, group=None) -> torch.Tensor:
    """Sum all-reduce in place over ``group`` (every rank ends with the sum)."""
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return tensor


def reduce_scatter(output: torch.Tensor, input: torch.Tensor, group=None) -> torch.Tensor:
    """Sum reduce-scatter: rank r gets the sum over ranks of input chunk r (chunks along dim 0)."""
    _reduce_scatter(output, input, op=dist.ReduceOp.SUM, group=group)
    return output


# torch 2.13 renamed reduce_scatter_tensor to reduce_scatter_single (the old name warns);
# torch 2.11, on the GPU machines, has only the old name.
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
