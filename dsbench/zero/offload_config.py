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
buffer counts and sizes, ``max_in_cpu``,   ignored, reported once: they size DeepSpeed's NVMe
``pipeline_*``, ``fast_init``,             swap buffers and tiles, or tune its CPU Adam
``cpuadam_cores_perc``, ``nvme_path``
=========================================  ==================================================

As in DeepSpeed, ``offload_optimizer`` does nothing at stage 0 (no ZeRO optimizer) and
``offload_param`` nothing below stage 3; both are then reported as ignored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dsbench.values import show_json
from dsbench.zero.fields import READ, ConfigError, _Section

DEVICES = ("none", "cpu", "nvme")


@dataclass(kw_only=True, slots=True)
class _Offload(_Section):
    device: str = "none"
    """'none', 'cpu' (implemented) or 'nvme' (refused)."""
    pin_memory: bool = False
    """Page-locked host memory, so copies to and from a GPU run asynchronously."""
    nvme_path: str | None = None
    """NVMe offload only."""

    _TUNING: ClassVar[tuple[str, ...]] = ()  # fields that only size or tune DeepSpeed's swapping

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError(
                f"{self._PATH}.device must be 'none', 'cpu' or 'nvme', got {show_json(self.device)}"
            )
        if self.nvme_path is not None and not isinstance(self.nvme_path, str):
            raise ConfigError(
                f"{self._PATH}.nvme_path must be a path, got {show_json(self.nvme_path)}"
            )
        _Section.__post_init__(self)

    @property
    def enabled(self) -> bool:
        return self.device != "none"


@dataclass(kw_only=True, slots=True)
class OffloadOptimizerConfig(_Offload):
    """``offload_optimizer``: optimizer state and step in host memory (stages 1–3)."""

    buffer_count: int = 4
    pipeline_read: bool = False
    pipeline_write: bool = False
    fast_init: bool = False
    ratio: float = 1.0
    """Fraction of the optimizer state offloaded (DeepSpeed: < 1 at stage 3 only)."""
    super_offload: bool = False
    cpuadam_cores_perc: float = 0.8

    _PATH: ClassVar[str] = "zero_optimization.offload_optimizer"
    _TUNING: ClassVar[tuple[str, ...]] = (
        "buffer_count",
        "pipeline_read",
        "pipeline_write",
        "fast_init",
        "cpuadam_cores_perc",
        "nvme_path",
    )

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

    buffer_count: int = 5
    buffer_size: int = 100_000_000
    max_in_cpu: int = 1_000_000_000

    _PATH: ClassVar[str] = "zero_optimization.offload_param"
    _TUNING: ClassVar[tuple[str, ...]] = ("buffer_count", "buffer_size", "max_in_cpu", "nvme_path")


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
    unsupported, ignored = [], []
    if "cpu_offload_use_pin_memory" in zero:  # DeepSpeed deprecates it without mapping it
        ignored.append("zero_optimization.cpu_offload_use_pin_memory")
    for section, given in (
        (opt, zero.get("offload_optimizer")),
        (param, zero.get("offload_param")),
    ):
        if section.device == "nvme":
            unsupported.append(f'{section._PATH}.device="nvme"')
        if isinstance(given, dict):
            ignored += [f"{section._PATH}.{k}" for k in section._TUNING if k in given]
    if opt.ratio < 1.0:
        unsupported.append(f"{opt._PATH}.ratio={opt.ratio:g}")
    if opt.super_offload:
        unsupported.append(f"{opt._PATH}.super_offload=true")
    if opt.enabled and stage == 0:
        ignored.append(f"{opt._PATH} (stage 0 has no ZeRO optimizer; DeepSpeed ignores it too)")
    if param.enabled and stage in (0, 1, 2):
        ignored.append(f"{param._PATH} (stage 3 only; DeepSpeed ignores it below)")
    return Offload(opt, param, tuple(unsupported), tuple(ignored))


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
