"""The seed article's MLP (``../shared/seeds/001_*.txt``, section "a very small MLP training
script"), with its data and loss, written so its Linear layers use the kernel registry::

    self.net = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 16))
    data = torch.randn(16, 1024)
    loss = model_engine(data).sum()

The module tree (``net.0``, ``net.1``, ``net.2``) and so the state_dict keys are the seed's. The
loss is the seed's plain sum of the outputs: it has no target and is unbounded below, which is
fine for throughput and engine-parity runs (every step still moves the weights) but means the
loss value says nothing about convergence. The seed reuses one ``randn`` batch for all steps;
here each micro-batch index draws its own (see :mod:`dsbench.models.data`).

Parameters: 1024·4096 + 4096 + 4096·16 + 16 = 4,263,952.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from dsbench.errors import UsageError
from dsbench.kernels.autograd import Linear
from dsbench.models.data import generator, init_linear_default_


@dataclass(frozen=True, kw_only=True, slots=True)
class MLPConfig:
    """in_features -> hidden -> out_features, ReLU between (the seed: 1024 -> 4096 -> 16)."""

    in_features: int = 1024
    """Input width (the seed's ``randn(16, 1024)``)."""
    hidden: int = 4096
    """Hidden width."""
    out_features: int = 16
    """Output width."""
    bias: bool = True
    """Biases on both Linear layers (``nn.Linear``'s default, as in the seed)."""

    def __post_init__(self):
        for name in ("in_features", "hidden", "out_features"):
            if getattr(self, name) < 1:
                raise UsageError(f"mlp config: {name} must be >= 1, got {getattr(self, name)}")

    @property
    def seq_len(self) -> int:
        """One sample is one token for FLOPs accounting."""
        return 1


class MLP(nn.Module):
    """The seed's ``MLP``: ``Linear(in, hidden) -> ReLU -> Linear(hidden, out)``."""

    def __init__(self, config: MLPConfig = MLPConfig(), *, gemm_impl: str | None = None):
        super().__init__()
        c = config
        self.config = config
        self.net = nn.Sequential(
            Linear(c.in_features, c.hidden, bias=c.bias, impl=gemm_impl),
            nn.ReLU(),
            Linear(c.hidden, c.out_features, bias=c.bias, impl=gemm_impl),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # fp32 data into a bf16/fp16 model (as the seed feeds DeepSpeed): compute in the weights'
        # dtype, as torch.autocast would.
        return self.net(x.to(self.net[0].weight.dtype))

    def checkpoint_units(self) -> list[nn.Module]:
        """Blocks for activation checkpointing: the whole network (two layers)."""
        return [self.net]

    def init_weights(self, seed: int) -> None:
        """``nn.Linear``'s default init, drawn from ``seed``."""
        init_linear_default_(self, seed)


def make_batch(
    config: MLPConfig, micro_batch: int, *, seed: int, step: int, device, dtype=None
) -> tuple[torch.Tensor]:
    """``(x,)`` with x ~ N(0, 1) of shape [micro_batch, in_features], as the seed's data (drawn
    in fp32 on the CPU, then moved; ``dtype`` casts it)."""
    x = torch.randn(micro_batch, config.in_features, generator=generator(seed, step))
    return (x.to(device=device, dtype=dtype),)


def loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The seed's loss: the sum of all outputs (computed in fp32)."""
    (x,) = batch
    return model(x).float().sum()
