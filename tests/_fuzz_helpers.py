"""The fuzz tests' machinery (tests/test_fuzz.py): Hypothesis profiles, the tally of examples,
the one-line-error check around each call, and the strategies: mutations of real documents,
and garbage."""

from __future__ import annotations

import contextlib
import copy
import datetime
import io
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st

from dsbench.cli import main
from dsbench.errors import UsageError

# --------------------------------------------------------------------------------------------
# Profiles and the tally of examples
# --------------------------------------------------------------------------------------------

for _name, _examples in (("dsbench", 300), ("fuzz", 10_000)):
    settings.register_profile(
        _name,
        max_examples=_examples,
        deadline=None,
        derandomize=_name == "dsbench",
        database=None,  # nothing written into the checkout; a failure prints its blob
        print_blob=True,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,  # fixtures here are the same for every example
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )
PROFILE_NAME = os.environ.get("HYPOTHESIS_PROFILE", "dsbench")
PROFILE = settings.get_profile(PROFILE_NAME)
FUZZ = settings(PROFILE)
CLI_FUZZ = settings(PROFILE, max_examples=max(30, PROFILE.max_examples // 10))
"""The in-process CLI checks run a tenth as many (each one is a whole command)."""

TALLY: dict[str, Counter] = {}
"""Per target: examples accepted (a valid object) and refused (a one-line error)."""


def _stamp(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def _one_line(message: str) -> None:
    assert message.strip(), "an empty error message"
    assert len(message.splitlines()) == 1, f"not one line: {message!r}"


def outcome(target: str, call: Callable[[], Any], files: Sequence[Path] = ()):
    """``call()``'s result, or None when it raised a UsageError with a one-line message;
    anything else it raises fails the example. ``files`` must be left as they were."""
    before = [_stamp(f) for f in files]
    counts = TALLY.setdefault(target, Counter())
    try:
        result, kind = call(), "accepted"
    except UsageError as exc:
        _one_line(str(exc))
        result, kind = None, "refused"
    except Exception:
        counts["traceback"] += 1
        raise
    assert [_stamp(f) for f in files] == before, f"{target}: reading modified {files}"
    counts[kind] += 1
    event(kind)
    return result


def _cli(target: str, argv: list[str], files: Sequence[Path] = ()) -> None:
    """``dsbench ARGV`` in process: exit 0, or 2 with one line on stderr; ``files`` unchanged."""

    def call():
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's --help/--version
                code = exc.code
        if code == 2:  # checked here: a UsageError would escape line breaks into one line
            _one_line(err.getvalue().removesuffix("\n"))
            assert err.getvalue().startswith("dsbench: error: "), err.getvalue()
            raise UsageError(err.getvalue())
        assert code == 0, (code, err.getvalue())

    outcome(target, call, files)


# --------------------------------------------------------------------------------------------
# Strategies: mutations of real documents, and garbage
# --------------------------------------------------------------------------------------------

SPECIAL = [None, True, False, 0, -1, 1, 2, 0.5, -0.0, 5e-324, 1e308, 2**31, 2**63, 10**30, -10**30,
           10**400, math.nan, math.inf, -math.inf, "", " ", "auto", "Auto", "0", "2", "1e8", "true",
           "null", "none", "é", "\n", "\u2028", "🙂", "\x00", [], {}, [1, 2], [0.9, 0.999, 0.9],
           {"enabled": True}, {"auto": "auto"}]  # fmt: skip
"""Values that break readers: wrong types, non-finite and huge numbers, odd strings."""


def _toml_safe(value: Any) -> bool:
    """Whether TOML can hold ``value`` (it has no null)."""
    if isinstance(value, list):
        return all(_toml_safe(v) for v in value)
    if isinstance(value, dict):
        return all(_toml_safe(v) for v in value.values())
    return value is not None


@st.composite
def near(draw, words: Sequence[str]) -> str:
    """One of ``words`` with one character changed, added, dropped or upper-cased."""
    word = draw(st.sampled_from(words))
    i = draw(st.integers(0, len(word)))
    edit = draw(st.sampled_from(["", "_", "s", " ", "\n", "é", ".", word[i : i + 1].upper()]))
    return word[:i] + edit + word[i + 1 :]


def values(words: Sequence[str], toml: bool = False) -> st.SearchStrategy:
    """Replacement values: the special ones, any number or string, near-misses of ``words``;
    with ``toml``, TOML's dates instead of null."""
    special = [v for v in SPECIAL if _toml_safe(v)] if toml else SPECIAL
    extra = [st.dates(), st.datetimes()] if toml else []
    return st.one_of(
        st.sampled_from(special),
        st.integers(),
        st.floats(),
        st.text(max_size=12),
        st.sampled_from(words),
        near(words),
        *extra,
    )


def _slots(node: Any, found: list) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in ``node``, depth first."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, child in list(items):
        found.append((node, key))
        if isinstance(child, dict | list):
            _slots(child, found)
    return found


def _words(docs: Sequence[dict], *extra: str) -> list[str]:
    """Every key in ``docs``, and ``extra``: what misspelt keys and enum values are made of."""
    return sorted({k for d in docs for _, k in _slots(d, []) if isinstance(k, str)}) + list(extra)


@st.composite
def mutations(draw, originals: Sequence[dict], words: Sequence[str], toml: bool = False) -> dict:
    """A copy of one of ``originals`` with one to three edits: a key dropped, renamed or added, a
    value replaced, wrapped in a list or table, or replaced by another section of the file."""
    doc = copy.deepcopy(draw(st.sampled_from(originals)))
    keys = st.one_of(st.sampled_from(words), near(words), st.text(max_size=8))
    new = values(words, toml)
    pick = draw(st.randoms(use_true_random=False)).choice  # sampled_from favours the first
    for _ in range(draw(st.integers(1, 3))):
        slots = _slots(doc, [])
        if not slots:
            doc[draw(keys)] = draw(new)
            continue
        parent, key = pick(slots)
        edit = pick(["drop", "value", "like", "like", "wrap", "swap", "rename", "add"])
        if edit == "drop":
            del parent[key]
        elif edit == "value":
            parent[key] = draw(new)
        elif edit == "like":
            parent[key] = draw(_like(parent[key], new))
        elif edit == "wrap":
            parent[key] = [parent[key]] if draw(st.booleans()) else {str(key): parent[key]}
        elif edit == "swap":
            other, other_key = pick(slots)
            parent[key] = copy.deepcopy(other[other_key])
        elif isinstance(parent, dict) and edit == "rename":
            parent[draw(keys)] = parent.pop(key)
        elif isinstance(parent[key], dict):
            parent[key][draw(keys)] = draw(new)
    return doc


def _like(value: Any, other: st.SearchStrategy) -> st.SearchStrategy:
    """A value of the same type as ``value`` (an edge of its range, often), else ``other``."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**30]) | st.integers()
    if isinstance(value, float):
        return st.sampled_from([0.0, -0.0, -1.0, 1.0, 1e-320, 1e308]) | st.floats()
    if isinstance(value, str):
        return st.text(max_size=12) | st.sampled_from(["", "auto", value.upper(), value + " "])
    return other


def json_values(words: Sequence[str]) -> st.SearchStrategy:
    """Random JSON documents, keys and strings drawn partly from ``words``."""
    keys = st.one_of(st.sampled_from(words), st.text(max_size=8))
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
                       st.sampled_from(words))  # fmt: skip
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
        max_leaves=20,
    )


@st.composite
def spliced(draw, texts: Sequence[str]) -> bytes:
    """One of ``texts`` with a stretch cut out and junk put in its place (a mangled file)."""
    text = draw(st.sampled_from(texts))
    start = draw(st.integers(0, len(text)))
    end = draw(st.integers(start, min(len(text), start + 40)))
    junk = draw(st.text(alphabet="{}[]\",:=.#'\n -0123456789aefilnrstu\\\x00é", max_size=10))
    return (text[:start] + junk + text[end:]).encode("utf-8", "surrogatepass")


DEEP = b"[" * 100_000
"""Nesting deeper than the recursion limit."""
LONG_INT = b"1" * 5000
"""More digits than Python converts to an int (4300)."""
GARBAGE = st.one_of(st.binary(max_size=200), st.sampled_from([b"", b"\xff\xfe", DEEP, LONG_INT]))


def _toml(doc: dict) -> str:
    """``doc`` as a TOML document, every table inline (tomllib reads it back as ``doc``)."""
    return "".join(f"{_toml_value(str(k))} = {_toml_value(v)}\n" for k, v in doc.items())


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):  # JSON's escapes are TOML's; TOML also wants DEL escaped
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml_value, value)) + "]"
    pairs = (f"{_toml_value(str(k))} = {_toml_value(v)}" for k, v in value.items())
    return "{" + ", ".join(pairs) + "}"


def _write(path: Path, data: bytes | str) -> Path:
    """A fresh file (a new mtime) with ``data``."""
    path.unlink(missing_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return path
