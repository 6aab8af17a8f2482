"""Loading and validating profile TOML files (see :mod:`dsbench.hardware`)."""

from __future__ import annotations

import functools
import importlib.resources
import re
from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from dsbench.errors import UsageError, choices_message
from dsbench.hardware.schema import (
    _FIGURE_KEYS,
    _OPTIONAL,
    _REQUIRED,
    BACKENDS,
    FIGURES,
    OPTIONAL_FIGURES,
    PEAK_KEYS,
    PEAK_UNIT,
    VENDORS,
    Figure,
    Profile,
    ProfileError,
)
from dsbench.records.values import Reader, closest, is_number, read_toml, show_toml

# --------------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------------


class _Parser:
    """Turns one parsed TOML document into a :class:`Profile`, or raises :class:`ProfileError`."""

    def __init__(self, display: str, stem: str):
        self.display = display
        self.stem = stem
        self.read = Reader(self.fail)

    def fail(self, field: str, problem: str) -> ProfileError:
        return ProfileError(f"{self.display}: field '{field}': {problem}")

    def string(self, data: Mapping[str, Any], key: str, choices: tuple[str, ...] = ()) -> str:
        return self.read.string(key, data[key], choices)

    def figure(self, field: str, raw: Any, unit: str) -> Figure:
        raw = self.read.table(field, raw, "an inline table { value = ..., source = ... }")
        unknown = sorted(set(raw) - set(_FIGURE_KEYS))
        if unknown:
            raise self.fail(
                field,
                f"unknown key '{unknown[0]}'{closest(unknown[0], _FIGURE_KEYS)}; "
                f"valid keys: {', '.join(_FIGURE_KEYS)}",
            )
        source = raw.get("source")
        if not isinstance(source, str) or not source.strip():
            raise self.read.expected(field, "a non-empty string in 'source'", source)
        value, na, measured = raw.get("value"), raw.get("na"), raw.get("measured", False)
        if not isinstance(measured, bool):
            raise self.read.expected(field, "true or false in 'measured'", measured)
        if na is not None and (not isinstance(na, str) or not na.strip()):
            raise self.read.expected(field, "a reason string in 'na'", na)
        given = {"value": value is not None, "na": na is not None, "measured": measured}
        states = [state for state, present in given.items() if present]
        if not states:
            raise self.fail(field, "needs one of 'value', 'na' (a reason) or 'measured = true'")
        if len(states) > 1:
            raise self.fail(field, f"has both '{states[0]}' and '{states[1]}'; give only one")
        if value is not None:
            if not is_number(value):
                raise self.read.expected(field, "a number in 'value'", value)
            value = self.read.positive(field, value, "a positive number in 'value'")
        return Figure(value=value, source=source, na=na, measured=measured, unit=unit)

    def check_patterns(self, patterns: list[str], detect: bool) -> None:
        """``device_patterns``: regexes (case-insensitive); at least one when ``detect``."""
        if detect and not patterns:
            raise self.fail("device_patterns", "empty, but 'detect = true' needs a pattern")
        for pattern in patterns:
            try:
                re.compile(pattern, re.IGNORECASE)
            except re.error as exc:
                raise self.fail(
                    "device_patterns", f"bad regex {show_toml(pattern)}: {exc}"
                ) from None

    def parse(self, data: dict[str, Any], path: str) -> Profile:
        self.read.known(
            data, sorted({*_REQUIRED, *_OPTIONAL, *FIGURES, *OPTIONAL_FIGURES, "peak_tflops"})
        )
        for key in (*_REQUIRED, *FIGURES, "peak_tflops"):
            if key not in data:
                raise self.fail(key, "missing")
        name = self.string(data, "name")
        if name != self.stem:
            raise self.fail(
                "name", f"must equal the file name '{self.stem}', got {show_toml(name)}"
            )
        detect = self.read.boolean("detect", data["detect"])
        patterns = self.read.strings("device_patterns", data["device_patterns"])
        backend = self.string(data, "backend", BACKENDS)
        if backend == "any" and detect:
            raise self.fail("backend", "'any' is only for fallback profiles with 'detect = false'")
        self.check_patterns(patterns, detect)
        memory_range = data.get("memory_range_gib")
        if memory_range is not None:
            memory_range = self.read.pair(
                "memory_range_gib", memory_range, "[low, high] with 0 <= low < high", strict=True
            )
        notes = data.get("notes", "")
        if not isinstance(notes, str):
            raise self.read.expected("notes", "a string", notes)
        peaks_raw = self.read.table("peak_tflops", data["peak_tflops"])
        self.read.known(peaks_raw, PEAK_KEYS, "peak_tflops.")
        for key in PEAK_KEYS:
            if key not in peaks_raw:
                raise self.fail(f"peak_tflops.{key}", "missing")

        return Profile(
            name=name,
            title=self.string(data, "title"),
            vendor=self.string(data, "vendor", VENDORS),
            backend=backend,
            arch=self.string(data, "arch"),
            device_patterns=tuple(patterns),
            detect=detect,
            **{key: self.figure(key, data[key], unit) for key, unit in FIGURES.items()},
            peak_tflops={
                key: self.figure(f"peak_tflops.{key}", peaks_raw[key], PEAK_UNIT)
                for key in PEAK_KEYS
            },
            path=path,
            memory_range_gib=memory_range,
            notes=notes,
            **{
                key: self.figure(key, data[key], unit)
                for key, unit in OPTIONAL_FIGURES.items()
                if key in data
            },
        )


def _default_dir() -> Traversable:
    return importlib.resources.files("dsbench.hardware_profiles")


def load_profile_file(file: str | Path | Traversable, display: str | None = None) -> Profile:
    """Load and validate one profile file; errors name it as ``display`` (default
    ``<folder>/<file>``, e.g. ``hardware_profiles/h100-sxm.toml``)."""
    if isinstance(file, str):
        file = Path(file)
    if display is None:
        parent = getattr(file, "parent", None)
        display = f"{parent.name}/{file.name}" if parent is not None else file.name
    stem = file.name.removesuffix(".toml")
    data = read_toml(file, display, ProfileError)
    return _Parser(display, stem).parse(data, display)


def _load_dir(directory: Path | Traversable, display_dir: str | None = None) -> dict[str, Profile]:
    files = sorted(
        (f for f in directory.iterdir() if f.name.endswith(".toml") and f.is_file()),
        key=lambda f: f.name,
    )
    if not files:
        raise ProfileError(f"{directory}: no hardware profiles (*.toml) found")
    profiles = {}
    for f in files:
        display = f"{display_dir}/{f.name}" if display_dir else None
        profiles[f.name.removesuffix(".toml")] = load_profile_file(f, display)
    return profiles


@functools.cache
def _load_default() -> dict[str, Profile]:
    return _load_dir(_default_dir(), "hardware_profiles")


def load_profiles(directory: str | Path | None = None) -> dict[str, Profile]:
    """All profiles in ``directory`` (default: the shipped ``hardware_profiles/``), by name.

    Every file is validated; the first problem raises :class:`ProfileError`. The default
    directory is read once per process.
    """
    if directory is None:
        return dict(_load_default())
    directory = Path(directory)
    if not directory.is_dir():
        raise ProfileError(f"{directory}: not a folder of hardware profiles")
    return _load_dir(directory)


def get_profile(name: str) -> Profile:
    """The shipped profile called ``name``; an unknown name lists the valid ones."""
    profiles = load_profiles()
    if name not in profiles:
        raise UsageError(choices_message("profile", name, profiles))
    return profiles[name]
