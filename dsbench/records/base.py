"""The record base: :class:`Record`, lossless from and to a JSON object (see [Note: lossless
records]), with :data:`UNSET` for the fields an object does not have."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self

# [Note: lossless records]
# Result files are read by several dsbench versions and written by several tools (dsbench run,
# ab, soak, asv's converter), so a record keeps what it does not know: ``extra`` holds the JSON
# object's unknown keys, ``key_order`` the order its keys came in, and a field the object does
# not have is :data:`UNSET` (not None: ``"pct_of_peak": null`` and no ``pct_of_peak`` are both
# written, and stay apart). ``X.from_json(d).to_json() == d`` for every object a reader accepts,
# key order included. Built with keywords, a record's JSON has its fields in declaration order
# (the order ``dsbench run`` has always written), then ``extra``; built with
# :meth:`Record.ordered`, in the order of the keywords.


class Unset:
    """The value of a record field its JSON object does not have; falsy, one instance."""

    __slots__ = ()
    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:  # unpickles (rank -> parent) as the one instance
        return "UNSET"


UNSET = Unset()


def value_or(value, default=None):
    """``value``, or ``default`` where it is :data:`UNSET`."""
    return default if value is UNSET else value


class RecordError(ValueError):
    """A JSON object that does not make a record; the message names the field, and the caller
    says where the object came from."""


def is_number(x) -> bool:
    """A finite int or float (JSON's integers can be too large for a float)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and abs(x) <= sys.float_info.max


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Record:
    """Shared by every record: lossless :meth:`from_json` / :meth:`to_json` (see [Note: lossless
    records]). Subclasses name nested records in ``_NESTED``: field -> (shape, record class),
    shape ``"one"`` (an object or null), ``"map"`` (an object of objects), ``"list"`` or
    ``"tuple"`` (a list, read as a tuple; an entry's error names its index)."""

    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    """The JSON object's keys this record does not declare, with their values as read."""
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """The order of the JSON object's keys, as read (empty when built in code)."""

    _NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {}
    _META: ClassVar[frozenset[str]] = frozenset({"extra", "key_order"})

    def __repr__(self) -> str:  # the fields the JSON object has
        shown = (f"{n}={getattr(self, n)!r}" for n in self.json_fields()
                 if getattr(self, n) is not UNSET)  # fmt: skip
        extra = f", extra={self.extra!r}" if self.extra else ""
        return f"{type(self).__name__}({', '.join(shown)}{extra})"

    @classmethod
    def json_fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name not in cls._META)

    def get(self, name: str, default=None):
        """A field or extra key by its JSON name, ``default`` when the object does not have it."""
        value = getattr(self, name, UNSET) if name in self.json_fields() else UNSET
        if value is UNSET:
            return self.extra.get(name, default)
        return value

    @classmethod
    def check(cls, data: dict) -> None:
        """Raise :class:`RecordError` when ``data`` cannot make this record (none by default)."""

    @classmethod
    def ordered(cls, **values) -> Self:
        """A record whose JSON has the keys in the order given: declared fields as given
        (nested records built already), the others into ``extra``."""
        known = cls.json_fields()
        return cls(**{k: v for k, v in values.items() if k in known},
                   extra={k: v for k, v in values.items() if k not in known},
                   key_order=tuple(values))  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> Self:
        if not isinstance(data, dict):
            raise RecordError("is not an object")
        cls.check(data)
        known = cls.json_fields()
        kwargs = {name: _load(cls, name, data[name]) for name in known if name in data}
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**kwargs, extra=extra, key_order=tuple(data))

    def to_json(self) -> dict[str, Any]:
        out = {}
        for name in self.json_fields():
            value = getattr(self, name)
            if value is not UNSET:
                out[name] = _dump(self._NESTED.get(name), value)
        out.update(self.extra)
        if not self.key_order:
            return out
        first = {k: out[k] for k in self.key_order if k in out}
        return first | {k: v for k, v in out.items() if k not in first}


def _load(cls: type[Record], name: str, value):
    """Field ``name`` of ``cls`` from its JSON: nested records typed, anything else as is."""
    shape, record = cls._NESTED.get(name, (None, None))
    if shape is None or value is None:
        return value
    if shape == "tuple" and isinstance(value, list):  # an entry's error names its index
        entries = []
        for i, entry in enumerate(value):
            try:
                entries.append(record.from_json(entry))
            except RecordError as exc:
                raise RecordError(f"{name}[{i}] {exc}") from None
        return tuple(entries)
    try:
        if shape == "one" and isinstance(value, dict):
            return record.from_json(value)
        if shape == "map" and isinstance(value, dict):
            return {k: record.from_json(v) for k, v in value.items()}
        if shape == "list" and isinstance(value, list):
            return [record.from_json(v) for v in value]
    except RecordError as exc:
        raise RecordError(f"field '{name}' has an entry that {exc}") from None
    raise RecordError(f"field '{name}' is not {_SHAPES[shape]}")


_SHAPES = {"one": "an object", "map": "an object", "list": "a list", "tuple": "a list"}


def _dump(nested: tuple[str, type[Record]] | None, value):
    if nested is None or value is None:
        return value
    if nested[0] == "one":
        return value.to_json()
    if nested[0] == "map":
        return {k: v.to_json() for k, v in value.items()}
    return [v.to_json() for v in value]
