"""DeepSpeed's five learning-rate schedulers as ds_config sections, computed as DeepSpeed computes
them (``deepspeed/runtime/lr_schedules.py``, 0.18.4; ``tests/test_schedulers.py`` steps each next
to DeepSpeed's class).

Each class takes the ``scheduler.params`` of its ``scheduler.type``, with DeepSpeed's parameter
names and defaults (the class signatures', not ``add_tuning_arguments``'s), and computes
:meth:`~_Schedule.lr_at`, DeepSpeed's ``get_lr()`` with ``last_batch_iteration = iteration``.

When the schedule applies (DeepSpeed's engine): the constructor sets the optimizer's lr (and, for
OneCycle, its betas) when ``last_batch_iteration == -1``, and the engine calls ``step()`` after
every *applied* optimizer step (never after an fp16 overflow skip). So the t-th applied step
(t = 0, 1, ...) runs with what the constructor set for t = 0 and with ``lr_at(last_batch_iteration
+ t)`` after that: :meth:`~_Schedule.lr_for_step` and :meth:`~_Schedule.betas_for_step`.

    =============== ==========================================================================
    WarmupLR        min + (max − min)·γ(i) during warm-up, then max
    WarmupDecayLR   the same warm-up, then linearly down to min at total_num_steps
    WarmupCosineLR  lr·ratio: warm-up from warmup_min_ratio to 1, then cosine down to cos_min_ratio
    OneCycle        triangle min → max → min over one cycle, then optional 1/(1 + rate·k) decay;
                    momentum (Adam's β1) cycled the other way, β2 set to 0.99
    LRRangeTest     min·(1 + rate·(i + 1)/step_size), continuous or in stairs
    =============== ==========================================================================

γ(i) with n = max(2, warmup_num_steps): ``log``: ln(i + 1)/ln(n); ``linear``: i/n.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dsbench.records.values import show_json
from dsbench.zero.config.fields import ConfigError, Section

__all__ = [
    "SCHEDULERS",
    "LRRangeTestConfig",
    "OneCycleConfig",
    "WarmupCosineLRConfig",
    "WarmupDecayLRConfig",
    "WarmupLRConfig",
]

WARMUP_TYPES = ("log", "linear")


@dataclass(kw_only=True, slots=True)
class _Schedule(Section):
    """Base of the scheduler sections: when each value applies (see the module docstring)."""

    last_batch_iteration: int = -1
    """Scheduler step to start from: -1 = fresh; from a later one the constructor leaves the
    optimizer's lr (and betas) for the first step, as DeepSpeed's does."""

    _PATH: ClassVar[str] = "scheduler.params"
    _MIN: ClassVar[Mapping[str, float]] = {"last_batch_iteration": -1}
    _REQUIRED: ClassVar[tuple[str, ...]] = ()
    """Parameters DeepSpeed's class has no default for (a TypeError there)."""
    NAME: ClassVar[str] = ""
    """The ``scheduler.type`` this class implements."""
    changes_betas: ClassVar[bool] = False
    """Whether the schedule also sets Adam's betas (OneCycle's momentum cycle)."""

    def __post_init__(self) -> None:
        for name in self._REQUIRED:
            if getattr(self, name) is None:
                raise ConfigError(
                    f"{self.NAME} needs scheduler.params.{name} (DeepSpeed has no default for it)"
                )
        Section.__post_init__(self)

    def lr_at(self, iteration: int, base_lr: float | None = None) -> float:
        """DeepSpeed's ``get_lr()`` at ``last_batch_iteration = iteration``; ``base_lr`` is the
        optimizer's configured lr (used by WarmupLR without warmup_max_lr and WarmupCosineLR)."""
        raise NotImplementedError

    def initial_lr(self, base_lr: float | None = None) -> float:
        """What the constructor sets when ``last_batch_iteration == -1``."""
        return self.lr_at(-1, base_lr)

    def betas_at(self, iteration: int, base_betas: tuple[float, float]) -> tuple[float, float]:
        return base_betas

    def initial_betas(self, base_betas: tuple[float, float]) -> tuple[float, float]:
        return base_betas

    def lr_for_step(self, t: int, base_lr: float | None = None) -> float:
        """The learning rate of the t-th applied optimizer step (0-based). When the scheduler
        resumes (``last_batch_iteration`` ≥ 0) its constructor leaves the optimizer's lr alone."""
        if t == 0:
            if self.last_batch_iteration == -1:
                return self.initial_lr(base_lr)
            return _base(base_lr)
        return self.lr_at(self.last_batch_iteration + t, base_lr)

    def betas_for_step(self, t: int, base_betas: tuple[float, float]) -> tuple[float, float]:
        """Adam's (β1, β2) for the t-th applied optimizer step."""
        if t == 0:
            if self.last_batch_iteration == -1:
                return self.initial_betas(base_betas)
            return base_betas
        return self.betas_at(self.last_batch_iteration + t, base_betas)


def _base(base_lr: float | None) -> float:
    if base_lr is None:
        raise ValueError("this schedule needs the optimizer's lr (base_lr)")
    return base_lr


def _warmup_gamma(iteration: int, n: int, warmup_type: str) -> float:
    """DeepSpeed's warm-up fraction (n already max(2, warmup_num_steps)), in its operation order
    (``1.0 / log(n)`` first) so that the values come out bit for bit."""
    if warmup_type == "log":
        return (1.0 / math.log(n)) * math.log(iteration + 1)
    return iteration / n


@dataclass(kw_only=True, slots=True)
class _Warmup(_Schedule):
    """What the three warm-up schedules share."""

    warmup_num_steps: int = 1000
    """Warm-up length in scheduler steps; DeepSpeed uses n = max(2, warmup_num_steps)."""
    warmup_type: str = "log"
    """'log' (default): γ = ln(i + 1)/ln(n); 'linear': γ = i/n."""

    def __post_init__(self) -> None:
        _Schedule.__post_init__(self)
        if self.warmup_type not in WARMUP_TYPES:
            # DeepSpeed's WarmupCosineLR fails at its first step (load_config reads WarmupLR's and
            # WarmupDecayLR's as DeepSpeed does: 'log', with a warning).
            raise ConfigError(
                "scheduler.params.warmup_type must be 'log' or 'linear', "
                f"got {show_json(self.warmup_type)}"
            )


@dataclass(kw_only=True, slots=True)
class WarmupLRConfig(_Warmup):
    """``WarmupLR``: from ``warmup_min_lr`` to ``warmup_max_lr`` over ``warmup_num_steps``, then
    constant."""

    warmup_min_lr: float = 0.0
    """Learning rate at the start of warm-up."""
    warmup_max_lr: float | None = None
    """Learning rate after warm-up; None: the optimizer's lr (DeepSpeed's default; load_config
    fills it in from ``optimizer.params.lr``)."""

    NAME: ClassVar[str] = "WarmupLR"

    def lr_at(self, iteration: int, base_lr: float | None = None) -> float:
        """i < 0 → min; i < n → min + (max − min)·γ(i); else max."""
        high = self.warmup_max_lr if self.warmup_max_lr is not None else _base(base_lr)
        low, n = self.warmup_min_lr, self.warmup_num_steps
        return _warmup_lr(iteration, low, high, n, self.warmup_type, None)


@dataclass(kw_only=True, slots=True)
class WarmupDecayLRConfig(_Warmup):
    """``WarmupDecayLR``: WarmupLR's warm-up, then linear decay to ``warmup_min_lr`` at
    ``total_num_steps``: γ = max(0, (total − i)/max(1, total − n))."""

    total_num_steps: int | None = None
    """Scheduler steps of the whole run (required, as in DeepSpeed)."""
    warmup_min_lr: float = 0.0
    """Learning rate at the start of warm-up and at the end of the decay."""
    warmup_max_lr: float = 0.001
    """Peak learning rate. Unlike WarmupLR, DeepSpeed's default is 0.001, not the optimizer's."""

    NAME: ClassVar[str] = "WarmupDecayLR"
    _REQUIRED: ClassVar[tuple[str, ...]] = ("total_num_steps",)

    def lr_at(self, iteration: int, base_lr: float | None = None) -> float:
        low, high, n = self.warmup_min_lr, self.warmup_max_lr, self.warmup_num_steps
        return _warmup_lr(iteration, low, high, n, self.warmup_type, self.total_num_steps)


def _warmup_lr(
    iteration: int, low: float, high: float, warmup: int, warmup_type: str, total: int | None
) -> float:
    """WarmupLR (``total`` None) and WarmupDecayLR, as DeepSpeed: ``min + delta·γ``."""
    if iteration < 0:
        return low
    n = max(2, warmup)
    if iteration < n:
        gamma = _warmup_gamma(iteration, n, warmup_type)
    elif total is None:
        gamma = 1.0
    else:
        gamma = max(0.0, float(total - iteration) / float(max(1.0, total - n)))
    return low + (high - low) * gamma


@dataclass(kw_only=True, slots=True)
class WarmupCosineLRConfig(_Warmup):
    """``WarmupCosineLR``: the optimizer's lr times a ratio that warms up from
    ``warmup_min_ratio`` to 1 over n = max(2, warmup_num_steps) steps, then follows
    ``cos_min_ratio + (1 − cos_min_ratio)·(1 + cos(π·(i − n + 1)/(total − n)))/2`` (at least 0).
    Before the first step (i < 0) the lr is 0."""

    total_num_steps: int | None = None
    """Scheduler steps of the whole run (required, as in DeepSpeed)."""
    warmup_min_ratio: float = 0.0
    """Ratio at the start of warm-up."""
    cos_min_ratio: float = 0.0001
    """Ratio at the end of the cosine."""

    NAME: ClassVar[str] = "WarmupCosineLR"
    _REQUIRED: ClassVar[tuple[str, ...]] = ("total_num_steps",)

    def ratio_at(self, iteration: int) -> float:
        """DeepSpeed's ``get_lr_ratio()``."""
        if iteration < 0:
            return 0.0
        n = max(2, self.warmup_num_steps)
        if iteration < n:
            ratio = _warmup_gamma(iteration, n, self.warmup_type)
            return self.warmup_min_ratio + ratio * (1.0 - self.warmup_min_ratio)
        real_total = self.total_num_steps - n
        if real_total == 0:
            # DeepSpeed raises ZeroDivisionError here; say why instead.
            raise ConfigError(
                f"WarmupCosineLR reached step {iteration + 1} with total_num_steps "
                f"{self.total_num_steps} = warmup steps max(2, {self.warmup_num_steps}): the "
                "cosine has no length (DeepSpeed divides by zero); raise total_num_steps"
            )
        cosine = (1 + math.cos(math.pi * (iteration - n + 1) / real_total)) / 2
        return max(0.0, self.cos_min_ratio + (1.0 - self.cos_min_ratio) * cosine)

    def lr_at(self, iteration: int, base_lr: float | None = None) -> float:
        if iteration < 0:
            return 0.0
        return _base(base_lr) * self.ratio_at(iteration)


@dataclass(kw_only=True, slots=True)
class OneCycleConfig(_Schedule):
    """``OneCycle`` (Smith, "A disciplined approach to neural network hyper-parameters", 2018):
    the lr rises from ``cycle_min_lr`` to ``cycle_max_lr`` over ``cycle_first_step_size`` steps
    and falls back over ``cycle_second_step_size``; after the cycle it stays at the minimum or
    decays as min/(1 + decay_lr_rate·k/decay_step_size). With ``cycle_momentum`` Adam's β1 runs
    the other way between ``cycle_max_mom`` and ``cycle_min_mom`` and β2 is set to 0.99, as
    DeepSpeed does. DeepSpeed accepts the stair counts but does not use them; neither do we."""

    cycle_min_lr: float | None = None
    """Lower lr bound (required)."""
    cycle_max_lr: float | None = None
    """Upper lr bound (required)."""
    decay_lr_rate: float = 0.0
    """Post-cycle lr decay rate (0: no decay)."""
    cycle_first_step_size: int = 2000
    """Steps of the rising half."""
    cycle_second_step_size: int | None = None
    """Steps of the falling half (None: the first's)."""
    cycle_first_stair_count: int = 0
    """Accepted, unused (as in DeepSpeed)."""
    cycle_second_stair_count: int | None = None
    """Accepted, unused (as in DeepSpeed)."""
    decay_step_size: int = 0
    """Steps per decay interval after the cycle (0: no decay of lr or momentum)."""
    cycle_momentum: bool = True
    """Cycle β1 inversely to the lr (and set β2 to 0.99)."""
    cycle_min_mom: float = 0.8
    """Lower β1 bound."""
    cycle_max_mom: float = 0.9
    """Upper β1 bound."""
    decay_mom_rate: float = 0.0
    """Post-cycle β1 growth rate: max_mom·(1 + rate·k/decay_step_size)."""

    NAME: ClassVar[str] = "OneCycle"
    _REQUIRED: ClassVar[tuple[str, ...]] = ("cycle_min_lr", "cycle_max_lr")
    _MIN: ClassVar[Mapping[str, float]] = {
        "last_batch_iteration": -1,
        "cycle_first_step_size": 1,
        "cycle_first_stair_count": -1,  # unused; DeepSpeed's argparse defaults write -1
        "cycle_second_stair_count": -1,
    }
    _BETA2: ClassVar[float] = 0.99

    @property
    def changes_betas(self) -> bool:  # type: ignore[override]
        return self.cycle_momentum

    @property
    def _total_size(self) -> float:
        first = float(self.cycle_first_step_size)
        second = self.cycle_second_step_size
        return first + (first if second is None else float(second))

    def _scale(self, iteration: int) -> float:
        total = self._total_size
        step_ratio = float(self.cycle_first_step_size) / total
        batch_iteration = iteration + 1
        cycle = math.floor(1 + batch_iteration / total)
        x = 1.0 + batch_iteration / total - cycle
        return x / step_ratio if x <= step_ratio else (x - 1) / (step_ratio - 1)

    def lr_at(self, iteration: int, base_lr: float | None = None) -> float:
        low, high = self.cycle_min_lr, self.cycle_max_lr
        if iteration < self._total_size:
            return low + (high - low) * self._scale(iteration)
        if math.isclose(self.decay_step_size, 0) or math.isclose(self.decay_lr_rate, 0):
            return low
        interval = (iteration - self._total_size + 1) / self.decay_step_size
        return low / (1 + self.decay_lr_rate * interval)

    def initial_lr(self, base_lr: float | None = None) -> float:
        return self.cycle_min_lr

    def betas_at(self, iteration: int, base_betas: tuple[float, float]) -> tuple[float, float]:
        if not self.cycle_momentum:
            return base_betas
        low, high = self.cycle_min_mom, self.cycle_max_mom
        if iteration < self._total_size:
            return (high - (high - low) * self._scale(iteration), self._BETA2)
        if math.isclose(self.decay_step_size, 0) or math.isclose(self.decay_mom_rate, 0):
            return (high, self._BETA2)
        interval = (iteration - self._total_size + 1) / self.decay_step_size
        return (high * (1 + self.decay_mom_rate * interval), self._BETA2)

    def initial_betas(self, base_betas: tuple[float, float]) -> tuple[float, float]:
        # DeepSpeed's constructor sets (cycle_min_mom, 0.99), not get_mom() at -1 (max_mom).
        return (self.cycle_min_mom, self._BETA2) if self.cycle_momentum else base_betas


@dataclass(kw_only=True, slots=True)
class LRRangeTestConfig(_Schedule):
    """``LRRangeTest``: lr = min·(1 + rate·interval), interval = (i + 1)/step_size, or its floor
    with ``lr_range_test_staircase``."""

    lr_range_test_min_lr: float = 1e-3
    """Starting lr."""
    lr_range_test_step_size: int = 2000
    """Steps per unit of interval."""
    lr_range_test_step_rate: float = 1.0
    """Growth per interval."""
    lr_range_test_staircase: bool = False
    """Grow in stairs (floor of the interval) rather than continuously."""

    NAME: ClassVar[str] = "LRRangeTest"
    _MIN: ClassVar[Mapping[str, float]] = {
        "last_batch_iteration": -1,
        "lr_range_test_step_size": 1,
    }

    def lr_at(self, iteration: int, base_lr: float | None = None) -> float:
        interval = float(iteration + 1) / self.lr_range_test_step_size
        if self.lr_range_test_staircase:
            interval = math.floor(interval)
        return self.lr_range_test_min_lr * (1 + self.lr_range_test_step_rate * interval)


SCHEDULERS: dict[str, type[_Schedule]] = {
    cls.NAME: cls
    for cls in (
        WarmupLRConfig,
        WarmupDecayLRConfig,
        WarmupCosineLRConfig,
        OneCycleConfig,
        LRRangeTestConfig,
    )
}
"""``scheduler.type`` → its section class (names are case-sensitive, as in DeepSpeed)."""

SchedulerConfig = (
    WarmupLRConfig | WarmupDecayLRConfig | WarmupCosineLRConfig | OneCycleConfig | LRRangeTestConfig
)
