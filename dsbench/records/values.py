"""Typed values read out of parsed JSON and TOML mappings, with one-line errors.

One reader serves the three kinds of file dsbench validates: ds_configs (JSON,
:mod:`dsbench.zero.config`), hardware profiles (TOML, :mod:`dsbench.hardware.parse`) and claim
files (TOML, :mod:`dsbench.publish.data.claims`). Each check takes the value's key path and the
value, returns the value in its Python type, or raises the caller's exception with one line that
names the path, the bad value and what was expected; an unknown key gets the closest valid name
(``difflib``). The two kinds of file word problems as their formats do:

* JSON (ds_config): ``fp16.enabled must be true or false, got 1 (a number)``: values shown as
  JSON, with their JSON kind;
* TOML (data files): ``expected true or false, got 'yes'``: values shown as TOML writes them
  (a table or a list by its kind).

Numbers follow both formats' parsers: booleans are never numbers, integers have no bound in
either format, so a number must fit a float (and, where an integer is expected, an int64), and
NaN is never a valid value.
"""

from __future__ import annotations

import difflib
import json
import math
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

# --------------------------------------------------------------------------------------------
# Values as the user wrote them
# --------------------------------------------------------------------------------------------


def show_json(value: Any) -> str:
    """A value as the user wrote it in JSON, shortened to 40 characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def show_toml(value: Any) -> str:
    """A value as it would appear in a TOML file; a table or a list by its kind."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return str(value)


def kind(value: Any) -> str:
    """A JSON value's kind: 'a boolean', 'a string', 'a list', 'an object', 'null', 'a number'."""
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


def is_number(value: Any) -> bool:
    """An int or float that a float holds (JSON's and TOML's integers have no bound); not NaN,
    not infinite, not a boolean."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and abs(value) <= sys.float_info.max
    )


def closest(name: str, valid: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the valid name closest to ``name``, or ''."""
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class _Readable(Protocol):
    def read_text(self, encoding: str) -> str: ...


def read_toml(file: _Readable, display: str, error: Callable[[str], Exception]) -> dict:
    """The TOML document in ``file`` (a path or a package resource); any problem reading or
    parsing it is ``error("<display>: <what>")``, in one line."""
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{display}: not valid TOML: {' '.join(str(exc).split())}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{display}: cannot read: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer of over 4300 digits, deep nesting
        too = "nested too deeply" if isinstance(exc, RecursionError) else "a number too long"
        raise error(f"{display}: not valid TOML: {too}") from None


# --------------------------------------------------------------------------------------------
# The reader
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reader:
    """Checks values from one kind of file; every problem becomes ``fail(path, problem)``.

    ``path`` is the value's place in the file as the caller names it (``fp16.enabled``,
    ``claims[0].unit``); ``problem`` the rest of the line. ``json`` selects ds_config wording
    (``must be X, got V (kind)``, values as JSON); otherwise TOML's (``expected X, got V``).
    """

    fail: Callable[[str, str], Exception]
    json: bool = False

    def show(self, value: Any) -> str:
        return show_json(value) if self.json else show_toml(value)

    def expected(self, path: str, what: str, value: Any) -> Exception:
        """The error for ``value`` at ``path`` where ``what`` (e.g. 'a number') was expected."""
        if self.json:
            return self.fail(path, f"must be {what}, got {show_json(value)} ({kind(value)})")
        return self.fail(path, f"expected {what}, got {show_toml(value)}")

    def unknown(self, path: str, key: str, valid: Iterable[str]) -> Exception:
        """The error for an unknown ``key`` at ``path``, with the closest of ``valid``."""
        valid = list(valid)
        if self.json:  # ds_config: "unknown key fp16.enable (did you mean 'enabled'?)"
            return self.fail("", f"unknown key {path}{closest(key, valid)}")
        return self.fail(path, f"unknown field{closest(key, valid)}; valid: {', '.join(valid)}")

    def known(self, data: Mapping, valid: Iterable[str], where: str = "") -> None:
        """Every key of ``data`` is in ``valid``; ``where`` prefixes the key in the path."""
        valid = list(valid)
        for key in data:
            if key not in valid:
                raise self.unknown(f"{where}{key}", key, valid)

    # ---- one value each -----------------------------------------------------------------

    def boolean(self, path: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self.expected(path, "true or false", value)
        return value

    def number(self, path: str, value: Any, minimum: float | None = None, what="a number"):
        """A finite number as a float, at least ``minimum`` (None: no bound)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.expected(path, what, value)
        if isinstance(value, int) and abs(value) > sys.float_info.max:
            raise self.fail(path, f"is too large, got {self.show(value)}")
        if not math.isfinite(value):
            raise self.fail(path, f"must be finite, got {value}")
        if minimum is not None and value < minimum:
            raise self.fail(path, f"{_bound(minimum, '{:g}')}, got {value:g}")
        return float(value)

    def integer(self, path: str, value: Any, minimum: int | None = 0) -> int:
        """An integer below 2**63 (what torch's kernels take), at least ``minimum``; whole
        floats such as 5e8 are accepted, as DeepSpeed's pydantic models accept them."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.expected(path, "an integer", value)
        if isinstance(value, float):
            if not value.is_integer():
                raise self.fail(path, f"must be a whole number, got {value:g}")
            value = int(value)
        if abs(value) >= 2**63:
            raise self.fail(path, f"must be below 2**63, got {self.show(value)}")
        if minimum is not None and value < minimum:
            raise self.fail(path, f"{_bound(minimum, '{}')}, got {value}")
        return value

    def positive(self, path: str, value: Any, what: str = "a positive number") -> float:
        """A finite number above 0, as a float."""
        if not is_number(value) or value <= 0:
            raise self.expected(path, what, value)
        return float(value)

    def string(self, path: str, value: Any, choices: Iterable[str] = ()) -> str:
        """A string that is not blank; one of ``choices`` when they are given."""
        if not isinstance(value, str) or not value.strip():
            raise self.expected(path, "a non-empty string", value)
        choices = tuple(choices)
        if choices and value not in choices:
            raise self.expected(path, f"one of {', '.join(choices)}", value)
        return value

    def table(self, path: str, value: Any, what: str = "a table") -> dict:
        if not isinstance(value, dict):
            raise self.expected(path, what, value)
        return value

    def strings(self, path: str, value: Any, what: str = "a list of strings") -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.expected(path, what, value)
        return value

    def pair(self, path: str, value: Any, what: str, *, strict: bool = False):
        """Two numbers ``[low, high]`` with ``0 <= low <= high`` (``low < high`` if ``strict``),
        as a tuple of floats."""
        ok = isinstance(value, list) and len(value) == 2 and all(is_number(x) for x in value)
        if not ok or value[0] < 0 or value[0] > value[1] or (strict and value[0] == value[1]):
            raise self.expected(path, what, value)
        return float(value[0]), float(value[1])


def _bound(minimum: float, fmt: str) -> str:
    return "must not be negative" if minimum == 0 else f"must be ≥ {fmt.format(minimum)}"
