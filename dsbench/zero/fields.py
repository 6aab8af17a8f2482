"""What every section of a ds_config shares: the one-line :class:`ConfigError`, value checks
that name the field, and :class:`_Section`, the base of the section dataclasses (config.py, the
schedulers in schedulers.py), which checks each bool/int/float field in ``__post_init__``."""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import sys
from collections.abc import Mapping
from typing import Any, ClassVar

from dsbench.errors import UsageError


class ConfigError(UsageError):
    """A ds_config that cannot be used: one line, naming the field."""

    def __init__(self, message: str):
        super().__init__(f"ds_config: {message}")


# --------------------------------------------------------------------------------------------
# Value checks shared by every section
# --------------------------------------------------------------------------------------------


def _show(value: Any) -> str:
    """A value as the user wrote it in JSON, shortened."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if value is None:
        return "null"
    return "a number"


def _as_bool(path: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{path} must be true or false, got {_show(value)} ({_kind(value)})")
    return value


def _as_float(path: str, value: Any, minimum: float | None = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{path} must be a number, got {_show(value)} ({_kind(value)})")
    if isinstance(value, int) and abs(value) > sys.float_info.max:
        raise ConfigError(f"{path} is too large, got {_show(value)}")
    if not math.isfinite(value):
        raise ConfigError(f"{path} must be finite, got {value}")
    if minimum is not None and value < minimum:
        bound = "must not be negative" if minimum == 0 else f"must be ≥ {minimum:g}"
        raise ConfigError(f"{path} {bound}, got {value:g}")
    return float(value)


def _as_int(path: str, value: Any, minimum: int | None = 0) -> int:
    """An integer; whole floats such as 5e8 are accepted, as DeepSpeed's pydantic models do."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{path} must be an integer, got {_show(value)} ({_kind(value)})")
    if isinstance(value, float):
        if not value.is_integer():
            raise ConfigError(f"{path} must be a whole number, got {value:g}")
        value = int(value)
    if abs(value) >= 2**63:  # what torch and DeepSpeed's kernels take (int64)
        raise ConfigError(f"{path} must be below 2**63, got {_show(value)}")
    if minimum is not None and value < minimum:
        bound = "must not be negative" if minimum == 0 else f"must be ≥ {minimum}"
        raise ConfigError(f"{path} {bound}, got {value}")
    return value


class _Section:
    """Base of the section dataclasses: checks every bool/int/float field in ``__post_init__``.

    ``_PATH`` is the section's place in the ds_config (for messages); ``_MIN`` gives lower
    bounds per field (default 0: no ds_config number may be negative). Fields typed ``X | None``
    may be None.
    """

    __slots__ = ()
    _PATH: ClassVar[str] = ""
    _MIN: ClassVar[Mapping[str, float]] = {}

    def _path(self, name: str) -> str:
        return f"{self._PATH}.{name}" if self._PATH else name

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            kind = str(f.type)
            value = getattr(self, f.name)
            if kind.endswith(" | None"):
                if value is None:
                    continue
                kind = kind.removesuffix(" | None")
            minimum = self._MIN.get(f.name, 0)
            if kind == "bool":
                setattr(self, f.name, _as_bool(self._path(f.name), value))
            elif kind == "int":
                setattr(self, f.name, _as_int(self._path(f.name), value, int(minimum)))
            elif kind == "float":
                setattr(self, f.name, _as_float(self._path(f.name), value, minimum))


def _closest(name: str, valid: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
