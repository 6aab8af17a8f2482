"""fp16 loss scaling with DeepSpeed's semantics (``deepspeed/runtime/fp16/loss_scaler.py``, 0.18.4).

fp16 gradients underflow; multiplying the loss by a scale ``S`` before backward and dividing the
gradients by ``S`` before the optimizer step keeps them representable. With dynamic scaling the
scale starts high, is halved when gradients overflow (inf/NaN) and the step is skipped, and is
doubled again after a run of clean steps.

DeepSpeed's exact rules (``DynamicLossScaler.update_scale``), which :class:`DynamicLossScaler`
reproduces step for step:

* on overflow: if ``hysteresis == 1`` or the remaining hysteresis budget is 1, the scale becomes
  ``max(scale / 2, min_loss_scale)`` (and if the scale is *already* at ``min_loss_scale``
  DeepSpeed raises instead of stepping); otherwise the budget drops by one and the scale stays.
  The budget is **not** refilled when the scale drops, so once it is spent every further
  overflow halves the scale until it is refilled.
* on a clean step: with ``consecutive_hysteresis`` the budget is refilled at once. The scale
  doubles when ``stable = iteration - last_overflow_iteration - 1`` is positive and a multiple
  of ``loss_scale_window``; without ``consecutive_hysteresis`` the budget is refilled only then.
  Counting from the start (``last_overflow_iteration = -1``) or from an overflow, the first
  doubling therefore comes on the ``(window + 1)``-th consecutive clean step, later ones every
  ``window`` clean steps. There is no upper bound.
* every call advances the iteration counter, overflow or not.

A step is skipped on overflow with a static scale too: DeepSpeed's ZeRO optimizer checks fp16
gradients for overflow whatever the scaler (``check_grad_overflow`` is on for fp16).

State is plain numbers (``state_dict``), so checkpoints load with ``torch.load(...,
weights_only=True)``; DeepSpeed itself pickles the scaler object.
"""

from __future__ import annotations

import math
from collections.abc import Mapping


class MinLossScaleError(RuntimeError):
    """The gradients overflowed with the loss scale already at ``min_loss_scale``.

    DeepSpeed stops the run here ("Current loss scale already at minimum - cannot decrease scale
    anymore. Exiting run.").
    """


def _number(state: Mapping, key: str, kind: type) -> float | int:
    if key not in state:
        raise ValueError(f"loss-scaler state has no '{key}' (keys: {', '.join(sorted(state))})")
    value = state[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"loss-scaler state '{key}' must be a number, got {value!r}")
    return kind(value)


class StaticLossScaler:
    """A fixed loss scale (``fp16.loss_scale > 0``; 1.0 for bf16/fp32, which need no scaling).

    The step is still skipped when gradients overflow, as in DeepSpeed's ZeRO optimizer.
    """

    dynamic = False

    def __init__(self, scale: float = 1.0):
        if not (isinstance(scale, int | float) and not isinstance(scale, bool)) or not (
            math.isfinite(scale) and scale > 0
        ):
            raise ValueError(f"loss scale must be a positive finite number, got {scale!r}")
        self.loss_scale = float(scale)

    @property
    def scale(self) -> float:
        """The current loss scale (same as ``loss_scale``; DeepSpeed's ``cur_scale``)."""
        return self.loss_scale

    def update(self, found_inf: bool) -> bool:
        """Record one optimizer step's overflow check; True when the step may be applied."""
        return not bool(found_inf)

    def state_dict(self) -> dict[str, float]:
        return {"loss_scale": self.loss_scale}

    def load_state_dict(self, state: Mapping) -> None:
        self.loss_scale = _number(state, "loss_scale", float)

    def __repr__(self) -> str:
        return f"StaticLossScaler(scale={self.loss_scale:g})"


class DynamicLossScaler:
    """DeepSpeed's dynamic loss scaler (``fp16.loss_scale == 0``); see the module docstring.

    Arguments mirror the ``fp16`` section: the scale starts at ``2**initial_scale_power``
    (DeepSpeed's ``initial_dynamic_scale``), ``loss_scale_window`` is DeepSpeed's
    ``scale_window``, ``hysteresis`` its ``delayed_shift``, ``min_loss_scale`` its ``min_scale``.
    ``raise_at_min_scale`` (DeepSpeed: ``raise_error_at_min_scale``, on by default) raises
    :class:`MinLossScaleError` for an overflow that would cut the scale when it already sits at
    ``min_loss_scale``.
    """

    dynamic = True
    scale_factor = 2.0

    def __init__(
        self,
        *,
        initial_scale_power: int = 16,
        loss_scale_window: int = 1000,
        hysteresis: int = 2,
        consecutive_hysteresis: bool = False,
        min_loss_scale: float = 1.0,
        raise_at_min_scale: bool = True,
    ):
        if loss_scale_window < 1:
            raise ValueError(f"loss_scale_window must be ≥ 1, got {loss_scale_window}")
        if hysteresis < 1:
            raise ValueError(f"hysteresis must be ≥ 1, got {hysteresis}")
        if min_loss_scale < 0:
            raise ValueError(f"min_loss_scale must not be negative, got {min_loss_scale}")
        self.loss_scale_window = int(loss_scale_window)
        self.hysteresis = int(hysteresis)
        self.consecutive_hysteresis = bool(consecutive_hysteresis)
        self.min_loss_scale = float(min_loss_scale)
        self.raise_at_min_scale = bool(raise_at_min_scale)
        self.loss_scale = float(2**initial_scale_power)
        self.cur_iter = 0
        self.last_overflow_iter = -1
        self.cur_hysteresis = self.hysteresis

    @property
    def scale(self) -> float:
        """The current loss scale (same as ``loss_scale``; DeepSpeed's ``cur_scale``)."""
        return self.loss_scale

    def update(self, found_inf: bool) -> bool:
        """Record one optimizer step's overflow check; True when the step may be applied.

        Follows ``DynamicLossScaler.update_scale`` in DeepSpeed 0.18.4 line for line.
        """
        overflow = bool(found_inf)
        if overflow:
            if self.hysteresis == 1 or self.cur_hysteresis == 1:
                if self.loss_scale == self.min_loss_scale and self.raise_at_min_scale:
                    raise MinLossScaleError(
                        f"fp16 gradients overflowed with the loss scale already at its minimum "
                        f"({self.min_loss_scale:g}, fp16.min_loss_scale); training diverged"
                    )
                self.loss_scale = max(self.loss_scale / self.scale_factor, self.min_loss_scale)
            else:
                self.cur_hysteresis -= 1
            self.last_overflow_iter = self.cur_iter
        else:
            if self.consecutive_hysteresis:
                self.cur_hysteresis = self.hysteresis
            stable = self.cur_iter - self.last_overflow_iter - 1
            if stable > 0 and stable % self.loss_scale_window == 0:
                if not self.consecutive_hysteresis:
                    self.cur_hysteresis = self.hysteresis
                self.loss_scale *= self.scale_factor
        self.cur_iter += 1
        return not overflow

    def state_dict(self) -> dict[str, float | int]:
        """The changing state, as plain numbers (settings come from the ds_config)."""
        return {
            "loss_scale": self.loss_scale,
            "cur_iter": self.cur_iter,
            "last_overflow_iter": self.last_overflow_iter,
            "cur_hysteresis": self.cur_hysteresis,
        }

    def load_state_dict(self, state: Mapping) -> None:
        self.loss_scale = _number(state, "loss_scale", float)
        self.cur_iter = _number(state, "cur_iter", int)
        self.last_overflow_iter = _number(state, "last_overflow_iter", int)
        self.cur_hysteresis = _number(state, "cur_hysteresis", int)

    def __repr__(self) -> str:
        return (
            f"DynamicLossScaler(scale={self.loss_scale:g}, window={self.loss_scale_window}, "
            f"hysteresis={self.cur_hysteresis}/{self.hysteresis}, min={self.min_loss_scale:g})"
        )


LossScaler = StaticLossScaler | DynamicLossScaler
