"""``zero_optimization.offload_optimizer`` and ``offload_param`` (ZeRO-Offload), read as
DeepSpeed 0.18 reads them (``deepspeed/runtime/zero/offload_config.py`` and the deprecated
``cpu_offload*`` fields of ``zero/config.py``).

What dsbench's engine does with each field (the engine side is :mod:`dsbench.zero.offload`):

=========================================  ==================================================
``offload_optimizer.device: "cpu"``        stages 1–3: fp32 master weights, gradients and Adam
                                           moments live in host memory, the step runs there
``offload_optimizer.pin_memory``           page-locked host buffers (GPU devices)
``offload_param.device: "cpu"``            stage 3: parameter shards live in host memory and
                                           are gathered to the device on use
``offload_param.pin_memory``               page-locked host shards (GPU devices)
``device: "nvme"``                         refused (ZeRO-Infinity's NVMe swapping)
``offload_optimizer.ratio`` < 1            refused (partial offload, DeepSpeed stage 3 only)
``offload_optimizer.super_offload``        refused (DeepSpeed's Grace-Hopper path)
``buffer_count``, ``buffer_size``,         ignored, reported once: they size DeepSpeed's NVMe
``max_in_cpu``, ``pipeline_*``,            swap buffers and tiles, or tune its CPU Adam
``fast_init``, ``cpuadam_cores_perc``,
``nvme_path``
=========================================  ==================================================

Each field's status is in its metadata (:mod:`.fields`); a test checks this table
against it. As in DeepSpeed, ``offload_optimizer`` does nothing at stage 0 (no ZeRO optimizer)
and ``offload_param`` nothing below stage 3; both are then reported as ignored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dsbench.records.values import show_json
from dsbench.zero.config.fields import (
    READ,
    ConfigError,
    Section,
    ignored,
    never,
    not_implemented,
    refused,
)

DEVICES = ("none", "cpu", "nvme")


def _partial(ratio: float) -> bool:
    return ratio < 1.0


@dataclass(kw_only=True, slots=True)
class _Offload(Section):
    device: str = "none"
    """'none', 'cpu' (implemented) or 'nvme' (refused)."""
    pin_memory: bool = False
    """Page-locked host memory, so copies to and from a GPU run asynchronously."""
    nvme_path: str | None = ignored(None)
    """NVMe offload only."""

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError(
                f"{self._PATH}.device must be 'none', 'cpu' or 'nvme', got {show_json(self.device)}"
            )
        if self.nvme_path is not None and not isinstance(self.nvme_path, str):
            raise ConfigError(
                f"{self._PATH}.nvme_path must be a path, got {show_json(self.nvme_path)}"
            )
        Section.__post_init__(self)

    @property
    def enabled(self) -> bool:
        return self.device != "none"


@dataclass(kw_only=True, slots=True)
class OffloadOptimizerConfig(_Offload):
    """``offload_optimizer``: optimizer state and step in host memory (stages 1–3)."""

    buffer_count: int = ignored(4)
    pipeline_read: bool = ignored(False)
    pipeline_write: bool = ignored(False)
    fast_init: bool = ignored(False)
    ratio: float = refused(_partial, 1.0)
    """Fraction of the optimizer state offloaded (DeepSpeed: < 1 at stage 3 only)."""
    super_offload: bool = refused(default=False)
    """DeepSpeed's Grace-Hopper path."""
    cpuadam_cores_perc: float = ignored(0.8)

    _PATH: ClassVar[str] = "zero_optimization.offload_optimizer"

    def __post_init__(self) -> None:
        _Offload.__post_init__(self)
        for name in ("ratio", "cpuadam_cores_perc"):
            if getattr(self, name) > 1.0:
                raise ConfigError(
                    f"{self._PATH}.{name} must be in [0, 1], got {getattr(self, name)}"
                )


@dataclass(kw_only=True, slots=True)
class OffloadParamConfig(_Offload):
    """``offload_param``: stage 3's parameter shards in host memory."""

    buffer_count: int = ignored(5)
    buffer_size: int = ignored(100_000_000)
    max_in_cpu: int = ignored(1_000_000_000)

    _PATH: ClassVar[str] = "zero_optimization.offload_param"


@dataclass(frozen=True)
class Offload:
    """What :func:`read_offload` found: the two sections and what dsbench's engine makes of
    them (``unsupported``: refused ``path=value``; ``ignored``: dotted paths)."""

    optimizer: OffloadOptimizerConfig = field(default_factory=OffloadOptimizerConfig)
    param: OffloadParamConfig = field(default_factory=OffloadParamConfig)
    unsupported: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()


DEPRECATED = ("cpu_offload", "cpu_offload_param", "cpu_offload_use_pin_memory")


def read_offload(zero: dict[str, Any], stage: Any) -> Offload:
    """The offload sections of a ``zero_optimization`` dict (with DeepSpeed's deprecated
    ``cpu_offload`` / ``cpu_offload_param`` spellings), checked field by field."""
    sections: dict[str, Any] = {}
    for cls, name, old in (
        (OffloadOptimizerConfig, "offload_optimizer", "cpu_offload"),
        (OffloadParamConfig, "offload_param", "cpu_offload_param"),
    ):
        path = cls._PATH
        raw = zero.get(name)
        if old in zero:
            if not isinstance(zero[old], bool):
                raise ConfigError(
                    f"zero_optimization.{old} must be true or false, got {show_json(zero[old])}"
                )
            if raw is not None:  # DeepSpeed's deprecated-field check refuses both as well
                raise ConfigError(
                    f"give {path} or its deprecated form zero_optimization.{old}, not both"
                )
            raw = {"device": "cpu"} if zero[old] else None
        if raw is None:
            sections[name] = cls()
            continue
        if not isinstance(raw, dict):
            raise ConfigError(f"{path} must be an object {{...}}, got {show_json(raw)}")
        valid = [f.name for f in dataclasses.fields(cls)]
        READ.known(raw, valid, f"{path}.")
        sections[name] = cls(**raw)
    opt, param = sections["offload_optimizer"], sections["offload_param"]
    unsupported: list[str] = []
    ignored_keys: list[str] = []
    if "cpu_offload_use_pin_memory" in zero:  # DeepSpeed deprecates it without mapping it
        ignored_keys.append("zero_optimization.cpu_offload_use_pin_memory")
    for section, given in (
        (opt, zero.get("offload_optimizer")),
        (param, zero.get("offload_param")),
    ):
        if section.device == "nvme":
            unsupported.append(f'{section._PATH}.device="nvme"')
        if isinstance(given, dict):  # the tuning fields given (the shared nvme_path last)
            tuning = [k for k, on in not_implemented(type(section)).items() if on is never]
            tuning.sort(key=lambda k: k == "nvme_path")
            ignored_keys += [f"{section._PATH}.{k}" for k in tuning if k in given]
    for name, on in not_implemented(OffloadOptimizerConfig).items():
        value = getattr(opt, name)
        if on(value):  # ratio < 1, super_offload
            shown = f"{value:g}" if isinstance(value, float) else show_json(value)
            unsupported.append(f"{opt._PATH}.{name}={shown}")
    if opt.enabled and stage == 0:
        ignored_keys.append(
            f"{opt._PATH} (stage 0 has no ZeRO optimizer; DeepSpeed ignores it too)"
        )
    if param.enabled and stage in (0, 1, 2):
        ignored_keys.append(f"{param._PATH} (stage 3 only; DeepSpeed ignores it below)")
    return Offload(opt, param, tuple(unsupported), tuple(ignored_keys))


def summary(stage: int, optimizer: OffloadOptimizerConfig, param: OffloadParamConfig) -> str:
    """'CPU offload of the optimizer and parameters' (what takes effect at ``stage``), or ''."""
    parts = [
        name
        for name, on in (
            ("the optimizer", optimizer.device == "cpu" and stage >= 1),
            ("parameters", param.device == "cpu" and stage == 3),
        )
        if on
    ]
    return f"CPU offload of {' and '.join(parts)}" if parts else ""
