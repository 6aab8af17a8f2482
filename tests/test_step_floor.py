"""The compute-only floor of dsbench.suites.step_floor: what its plain model does between steps."""

import torch
from torch import nn

from dsbench.suites import step_floor


class _Recording:
    """A preset stand-in: a linear model whose loss records, per call, whether the model's
    parameters held gradients when the micro-batch's forward began."""

    def __init__(self):
        self.had_grads: list[bool] = []
        self.model: nn.Module | None = None

    def build(self, seed: int, device: str, dtype: torch.dtype) -> nn.Module:
        torch.manual_seed(seed)
        self.model = nn.Linear(8, 4).to(device=device, dtype=dtype)
        return self.model

    def loss(self, model: nn.Module, batch: tuple) -> torch.Tensor:
        self.had_grads.append(all(p.grad is not None for p in model.parameters()))
        x, y = batch
        return nn.functional.mse_loss(model(x), y)


def test_floor_sets_gradients_to_none_between_steps_and_accumulates_within_one():
    """Each repetition's first micro-batch finds no gradients (handed over, not added to zeros:
    the floor must not do work the engines skip), the later ones find the earlier ones' (the
    backward accumulates)."""
    preset = _Recording()
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(5, 8, generator=g), torch.randn(5, 4, generator=g)) for _ in range(3)]
    reps, warmup = 4, 2  # step_floor._timed's warmup
    seconds = step_floor._forward_backward_seconds(
        preset, batches, dtype=torch.float32, device="cpu", reps=reps
    )
    assert seconds > 0
    assert preset.had_grads == [False, True, True] * (reps + warmup)
    # and after the last repetition: the floor leaves no gradients behind
    assert all(p.grad is None for p in preset.model.parameters())
