"""Make any registered ``gemm`` a drop-in for ``nn.Linear`` (forward and both backward GEMMs).

y = x W^T + b with x [..., K], W [N, K]:
  forward  Y  = X  · W^T   (M x N, M = prod of leading dims)
  backward dX = dY · W     (M x K)
           dW = dY^T · X   (N x K),  db = sum_rows(dY)
Each product goes through the registry's ``gemm``, so a Triton or CUDA GEMM serves training
without the model knowing which one it got.

[Note: weight gradients in place]
An engine that keeps every gradient in a buffer of its own (ZeRO's flat gradients,
``dsbench.zero``) may give a weight a grad sink (:func:`set_grad_sink`): a callable
``sink(a, b, gemm)`` that adds the
weight-gradient product ``a @ b`` into the weight's place in that buffer and returns what backward
hands autograd for the weight. Backward then calls it instead of computing ``dW`` into a new
tensor that autograd adds into ``weight.grad`` (Megatron-LM's gradient-accumulation fusion: the
GEMM writes where the gradient lives, with no temporary and no separate add, and no zeroing
before a fresh accumulation). The sink is read when the forward runs, so a backward finishes the
way its forward started. What the sink returns keeps autograd's bookkeeping whole: the weight's
gradient hooks still run once per backward, after every use of the weight
(``dsbench.zero.buckets.GradSlot`` says how).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.weak import WeakIdKeyDictionary

from dsbench.kernels import registry

_GRAD_SINKS = WeakIdKeyDictionary()
"""Each weight's grad sink, by identity (a parameter's ``==`` compares values), dropped with it."""


def set_grad_sink(weight: torch.Tensor, sink) -> None:
    """Give ``weight`` a grad sink ([Note: weight gradients in place]); None takes it away."""
    if sink is None:
        _GRAD_SINKS.pop(weight, None)
    else:
        _GRAD_SINKS[weight] = sink


def grad_sink(weight: torch.Tensor):
    """``weight``'s grad sink, or None."""
    return _GRAD_SINKS.get(weight)


class _GemmLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, gemm):
        x2 = x.reshape(-1, x.shape[-1])
        y = gemm(x2, weight.t())
        if bias is not None:
            y = y + bias
        ctx.save_for_backward(x2, weight)
        ctx.gemm, ctx.has_bias, ctx.x_shape = gemm, bias is not None, x.shape
        ctx.grad_sink = grad_sink(weight)  # [Note: weight gradients in place]
        return y.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad_y):
        x2, weight = ctx.saved_tensors
        gy = grad_y.reshape(-1, grad_y.shape[-1])
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = ctx.gemm(gy, weight).reshape(ctx.x_shape)
        if ctx.needs_input_grad[1]:
            sink = ctx.grad_sink
            grad_w = ctx.gemm(gy.t(), x2) if sink is None else sink(gy.t(), x2, ctx.gemm)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = gy.sum(0)
        return grad_x, grad_w, grad_b, None


def linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, impl: str | None = None
) -> torch.Tensor:
    """``F.linear`` through the registry's ``gemm`` (``impl`` or the configured default)."""
    gemm = registry.get("gemm", impl).load()
    return _GemmLinear.apply(x, weight, bias, gemm)


class Linear(nn.Linear):
    """``nn.Linear`` whose three GEMMs use the registry's ``gemm`` implementation ``impl``."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        impl: str | None = None,
        **kwargs,
    ):
        super().__init__(in_features, out_features, bias=bias, **kwargs)
        self.impl = impl

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.impl)
