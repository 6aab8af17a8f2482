"""What every section of a ds_config shares: the one-line :class:`ConfigError`, the reader of
its values (:data:`READ`, :mod:`dsbench.records.values` worded for JSON), :class:`Section`, the base
of the section dataclasses (sections.py, top_level.py, schedulers.py, ...), which checks each
bool/int/float field in ``__post_init__``, and each field's DeepSpeed status.

[Note: a field's DeepSpeed status]
Every key DeepSpeed reads in a section is a field of that section's dataclass, and the field
says in its metadata (:func:`setting`, :func:`ignored`, :func:`refused`) what dsbench's engine
does with it: **implemented** (the default); **ignored** (accepted, reported once in a warning:
logging, checkpoint I/O, tuning that leaves the numbers alone); or **refused** when its value
turns it on (``refused_if``: it changes what is computed or where it lives, so dsbench's engine
stops and points to ``--engine deepspeed``; off, it is ignored). ``alias`` is DeepSpeed's other
name for the key. The reader's sorting of keys (:func:`implemented`, :func:`not_implemented`,
:func:`aliases`) and the status tables (:func:`status_table`) are read from these fields, so
they cannot disagree. Like DeepSpeed's pydantic ``Field(alias=...)`` and its deprecation
metadata (``deepspeed/runtime/zero/config.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from dsbench.errors import UsageError
from dsbench.records.values import Reader


class ConfigError(UsageError):
    """A ds_config that cannot be used: one line, naming the field."""

    def __init__(self, message: str):
        super().__init__(f"ds_config: {message}")


def _fail(path: str, problem: str) -> ConfigError:
    return ConfigError(f"{path} {problem}" if path else problem)


READ = Reader(_fail, json=True)
"""Reads a ds_config's values (:mod:`dsbench.records.values`): ``fp16.enabled must be true or
false, got 1 (a number)``."""

# --------------------------------------------------------------------------------------------
# DeepSpeed status of each field (see [Note: a field's DeepSpeed status])
# --------------------------------------------------------------------------------------------

Status = Literal["implemented", "ignored", "refused"]


def never(value: Any) -> bool:
    return False


def _truthy(value: Any) -> bool:
    return bool(value)


@dataclass(frozen=True)
class DeepSpeed:
    """What dsbench's engine does with one of DeepSpeed's settings."""

    status: Status = "implemented"
    refused_if: Callable[[Any], bool] = never
    """For ``refused``: whether a value turns the setting on (else it is ignored)."""
    alias: str | None = None
    """DeepSpeed's other name for the key."""
    only: str | None = None
    """The one implementation that takes the key (``fused`` or ``torch`` for Adam's params)."""


_IMPLEMENTED = DeepSpeed()


def setting(
    default: Any = dataclasses.MISSING,
    *,
    status: Status = "implemented",
    refused_if: Callable[[Any], bool] | None = None,
    alias: str | None = None,
    only: str | None = None,
    **kwargs: Any,
) -> Any:
    """A dataclass field carrying its DeepSpeed status (a refused setting with no
    ``refused_if`` is refused when truthy)."""
    if status == "refused" and refused_if is None:
        refused_if = _truthy
    meta = {"deepspeed": DeepSpeed(status, refused_if or never, alias, only)}
    return dataclasses.field(default=default, metadata=meta, **kwargs)


def _as_given(default: Any) -> dict[str, Any]:
    # A setting dsbench models only to sort it (default None) holds the value as given, outside
    # equality and repr.
    return {"compare": False, "repr": False} if default is None else {}


NOT_A_KEY: Mapping[str, Any] = {"deepspeed": None}
"""Metadata of a dataclass field that is dsbench's own, not a key of the ds_config."""


def ignored(default: Any = None, **kwargs: Any) -> Any:
    """A field for a DeepSpeed setting dsbench's engine ignores (reported in a warning)."""
    return setting(default, status="ignored", **_as_given(default), **kwargs)


def refused(refused_if: Callable[[Any], bool] = _truthy, default: Any = None, **kwargs) -> Any:
    """A field for a DeepSpeed setting dsbench's engine refuses when ``refused_if(value)``
    (default: a truthy value), and ignores otherwise."""
    return setting(default, status="refused", refused_if=refused_if, **_as_given(default), **kwargs)


def deepspeed(f: dataclasses.Field) -> DeepSpeed | None:
    """A field's DeepSpeed status (a field without one is implemented); None for fields that
    are not ds_config keys (:data:`NOT_A_KEY`)."""
    return f.metadata.get("deepspeed", _IMPLEMENTED)


def statuses(cls: type) -> dict[str, DeepSpeed]:
    """Field name → DeepSpeed status, for the fields of ``cls`` that are ds_config keys."""
    return {f.name: ds for f in dataclasses.fields(cls) if (ds := deepspeed(f)) is not None}


def implemented(cls: type) -> tuple[str, ...]:
    """The keys of ``cls`` dsbench's engine implements, in field order."""
    return tuple(n for n, ds in statuses(cls).items() if ds.status == "implemented")


def not_implemented(cls: type) -> dict[str, Callable[[Any], bool]]:
    """Key → whether a value is refused (False: ignored), for the keys of ``cls`` dsbench's
    engine does not implement, under both their names."""
    out = {}
    for name, ds in statuses(cls).items():
        if ds.status != "implemented":
            out.update({key: ds.refused_if for key in (name, ds.alias) if key})
    return out


def aliases(cls: type, implemented: bool = True) -> dict[str, str]:
    """DeepSpeed's other names for the keys of ``cls`` dsbench's engine implements (or, with
    ``implemented=False``, those it does not): alias → field name."""
    return {
        ds.alias: name
        for name, ds in statuses(cls).items()
        if ds.alias and (ds.status == "implemented") == implemented
    }


def status_table(cls: type, path: str = "") -> list[tuple[str, str]]:
    """(dotted key, status) for every DeepSpeed key of ``cls``, for docs: ``implemented``,
    ``ignored``, ``refused when on``; an alias is named after its key."""
    rows = []
    for name, ds in statuses(cls).items():
        key = f"{path}.{name}" if path else name
        if ds.alias:
            key += f" (alias {ds.alias})"
        text = "refused when on" if ds.status == "refused" else ds.status
        rows.append((key, text))
    return rows


class Section:
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
