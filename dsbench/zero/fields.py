"""What every section of a ds_config shares: the one-line :class:`ConfigError`, the reader of
its values (:data:`READ`, :mod:`dsbench.values` worded for JSON), and :class:`_Section`, the
base of the section dataclasses (config.py, the schedulers in schedulers.py), which checks each
bool/int/float field in ``__post_init__``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar

from dsbench.errors import UsageError
from dsbench.values import Reader, show_json


class ConfigError(UsageError):
    """A ds_config that cannot be used: one line, naming the field."""

    def __init__(self, message: str):
        super().__init__(f"ds_config: {message}")


def _fail(path: str, problem: str) -> ConfigError:
    return ConfigError(f"{path} {problem}" if path else problem)


READ = Reader(_fail, json=True)
"""Reads a ds_config's values (:mod:`dsbench.values`): ``fp16.enabled must be true or false, got
1 (a number)``."""

_show = show_json  # a value as the user wrote it (the schedulers' messages use it too)


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
                setattr(self, f.name, READ.boolean(self._path(f.name), value))
            elif kind == "int":
                setattr(self, f.name, READ.integer(self._path(f.name), value, int(minimum)))
            elif kind == "float":
                setattr(self, f.name, READ.number(self._path(f.name), value, minimum))
