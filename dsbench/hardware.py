"""Hardware profiles: one TOML file per device in ``hardware_profiles/``, validated here.

A profile holds a device's datasheet figures, each with the source it came from, so that a
benchmark can turn counted work (FLOPs, bytes) into a % of peak and publish can draw roofline
floors. Conventions, the same in every file:

* every figure is **per device as torch sees it** (one MI250X GCD, not the package);
* FLOP rates are **dense** (sparse 2:4 figures are 2x and never used), in TFLOP/s = 1e12 FLOP/s;
* bandwidths are in GB/s = 1e9 B/s; memory bandwidth counts bytes read + written;
* ``link_bandwidth_gbps`` is the intra-node interconnect **per direction** per device, because
  nccl-tests/rccl-tests bus bandwidth is compared with one direction's line rate;
* a figure that does not exist (no TF32 on CDNA2, TDP given per package) carries ``na`` with the
  reason; a figure that only the running machine can tell (generic CPU and GPU) carries
  ``measured = true`` and is filled in by :func:`calibrate`.

Detection (:func:`detect`) matches torch's device name against each profile's regexes, checked
against memory size, arch and compute-unit count when those are known; an unknown GPU gets the
``generic-gpu`` profile and a message saying so.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib.resources
import json
import math
import os
import platform
import re
import socket
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from dsbench.errors import UsageError, choices_message

# --------------------------------------------------------------------------------------------
# Schema
# --------------------------------------------------------------------------------------------

VENDORS = ("nvidia", "amd", "generic")
BACKENDS = ("cuda", "rocm", "cpu", "any")  # "any": the generic-gpu fallback (CUDA or ROCm)

#: Top-level figures and their units.
FIGURES: dict[str, str] = {
    "memory_capacity_gb": "GB",
    "memory_bandwidth_gbps": "GB/s",
    "link_bandwidth_gbps": "GB/s",
    "compute_units": "SMs/CUs",
    "warp_size": "threads",
    "tdp_w": "W",
}
#: Keys of ``[peak_tflops]``: dense peak rates in TFLOP/s.
PEAK_KEYS = ("fp16_matrix", "bf16_matrix", "tf32_matrix", "fp32", "fp64", "fp64_matrix")
PEAK_UNIT = "TFLOP/s"

#: torch dtype name (as in ``str(torch.float16)`` without ``torch.``) -> ``peak_tflops`` key.
DTYPE_PEAKS: dict[str, str] = {
    "float16": "fp16_matrix",
    "bfloat16": "bf16_matrix",
    "tf32": "tf32_matrix",
    "float32": "fp32",
    "float64": "fp64",
}

_REQUIRED = ("name", "title", "vendor", "backend", "arch", "device_patterns", "detect")
_OPTIONAL = ("memory_range_gib", "notes")
_FIGURE_KEYS = ("value", "source", "na", "measured")


@dataclass(frozen=True, kw_only=True, slots=True)
class Figure:
    """One datasheet (or measured) figure and where it comes from.

    Exactly one of three states: a ``value``; ``na`` (the figure does not exist for this device,
    with the reason); or ``measured`` (filled in by :func:`calibrate` on the running machine,
    ``value`` stays None until then).
    """

    value: float | None
    """The figure in ``unit``; None when ``na``, or measured but not calibrated yet."""
    source: str
    """Datasheet, document or method the value comes from."""
    na: str | None = None
    """Why the figure does not exist for this device (None when it does)."""
    measured: bool = False
    """True when the value is measured on the running machine rather than read off a datasheet."""
    unit: str = ""

    def __post_init__(self) -> None:
        if self.value is None and self.na is None and not self.measured:
            raise ValueError("a figure needs a value, an 'na' reason or measured=True")
        if self.value is not None and not (math.isfinite(self.value) and self.value > 0):
            raise ValueError(f"a figure's value must be a positive number, got {self.value}")

    @property
    def available(self) -> bool:
        """True when there is a number to divide by."""
        return self.value is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "unit": self.unit,
            "source": self.source,
            "na": self.na,
            "measured": self.measured,
        }


@dataclass(frozen=True, kw_only=True)
class Profile:
    """A device's peaks, as read from ``hardware_profiles/<name>.toml``."""

    name: str
    """Short id, equal to the file stem (``h100-sxm``)."""
    title: str
    """Human-readable device name."""
    vendor: str
    """``nvidia``, ``amd`` or ``generic``."""
    backend: str
    """``cuda``, ``rocm``, ``cpu`` (or ``any`` for the generic-gpu fallback file)."""
    arch: str
    """Compiler target: ``sm_80``, ``sm_90``, ``gfx90a``, ``gfx942`` or ``any``."""
    device_patterns: tuple[str, ...]
    """Case-insensitive regexes searched in torch's device name."""
    detect: bool
    """Whether :func:`detect` may pick this profile."""
    memory_capacity_gb: Figure
    """Device memory as on the datasheet, in GB."""
    memory_bandwidth_gbps: Figure
    """Peak device-memory bandwidth, GB/s (1e9 B/s), bytes read + written."""
    link_bandwidth_gbps: Figure
    """Intra-node interconnect bandwidth per direction per device, GB/s (NVLink, Infinity
    Fabric; host memory for CPU ranks)."""
    compute_units: Figure
    """Streaming multiprocessors (NVIDIA) or compute units (AMD)."""
    warp_size: Figure
    """Threads per warp (32) or wavefront (64)."""
    tdp_w: Figure
    """Thermal design / board power, W."""
    peak_tflops: dict[str, Figure]
    """Dense peak TFLOP/s keyed by ``PEAK_KEYS``: ``*_matrix`` on tensor/matrix cores, the rest
    on vector units."""
    path: str
    """The file the profile came from."""
    memory_range_gib: tuple[float, float] | None = None
    """Detection only: the device's memory (GiB, as torch reports it) must lie in this range."""
    notes: str = ""
    """Free text shown by ``dsbench profiles NAME``."""

    # -- lookups ------------------------------------------------------------------------------

    def figures(self) -> dict[str, Figure]:
        """All figures, top-level ones then ``peak_tflops.<key>``, in file order."""
        out = {key: getattr(self, key) for key in FIGURES}
        out.update({f"peak_tflops.{key}": fig for key, fig in self.peak_tflops.items()})
        return out

    def peak(self, kind: str) -> Figure:
        """The ceiling for a kind of work.

        ``"mem_bandwidth"`` (GB/s), ``"link_bandwidth"`` (GB/s per direction) or
        ``"flops:<dtype>"`` (TFLOP/s) where dtype is a torch dtype name: ``float16`` ->
        fp16_matrix, ``bfloat16`` -> bf16_matrix, ``tf32`` -> tf32_matrix, ``float32`` -> fp32
        (vector: torch's default fp32 matmul does not use TF32), ``float64`` -> fp64. A
        ``peak_tflops`` key is accepted as well (``flops:fp64_matrix``).
        """
        if kind == "mem_bandwidth":
            return self.memory_bandwidth_gbps
        if kind == "link_bandwidth":
            return self.link_bandwidth_gbps
        if kind.startswith("flops:"):
            dtype = kind.removeprefix("flops:").removeprefix("torch.")
            key = DTYPE_PEAKS.get(dtype, dtype)
            if key in self.peak_tflops:
                return self.peak_tflops[key]
        valid = ["mem_bandwidth", "link_bandwidth", *(f"flops:{d}" for d in DTYPE_PEAKS)]
        raise ValueError(choices_message("peak kind", kind, valid))

    # -- serialisation ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form, stored in result files: every figure with its source."""
        return {
            "name": self.name,
            "title": self.title,
            "vendor": self.vendor,
            "backend": self.backend,
            "arch": self.arch,
            "device_patterns": list(self.device_patterns),
            "detect": self.detect,
            "memory_range_gib": list(self.memory_range_gib) if self.memory_range_gib else None,
            "notes": self.notes,
            "path": self.path,
            **{key: getattr(self, key).to_dict() for key in FIGURES},
            "peak_tflops": {key: fig.to_dict() for key, fig in self.peak_tflops.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Profile:
        """Rebuild a profile from :meth:`to_dict` output (e.g. read back from a result file)."""

        def fig(d: Mapping[str, Any]) -> Figure:
            return Figure(
                value=d.get("value"),
                source=d.get("source", ""),
                na=d.get("na"),
                measured=bool(d.get("measured", False)),
                unit=d.get("unit", ""),
            )

        rng = data.get("memory_range_gib")
        return cls(
            name=data["name"],
            title=data["title"],
            vendor=data["vendor"],
            backend=data["backend"],
            arch=data["arch"],
            device_patterns=tuple(data.get("device_patterns", ())),
            detect=bool(data.get("detect", False)),
            **{key: fig(data[key]) for key in FIGURES},
            peak_tflops={key: fig(d) for key, d in data["peak_tflops"].items()},
            path=data.get("path", ""),
            memory_range_gib=(float(rng[0]), float(rng[1])) if rng else None,
            notes=data.get("notes", ""),
        )


class ProfileError(UsageError):
    """A profile file is malformed. The message is one line naming the file and the field."""


# --------------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------------


def _show(value: Any) -> str:
    """A value as it would appear in the TOML file, for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return str(value)


def _is_number(value: Any) -> bool:
    """An int or float that a float holds (TOML's integers have no bound); not NaN."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and abs(value) <= sys.float_info.max
    )


class _Parser:
    """Turns one parsed TOML document into a :class:`Profile`, or raises :class:`ProfileError`."""

    def __init__(self, display: str, stem: str):
        self.display = display
        self.stem = stem

    def fail(self, field: str, problem: str) -> ProfileError:
        return ProfileError(f"{self.display}: field '{field}': {problem}")

    def string(self, data: Mapping[str, Any], key: str, choices: tuple[str, ...] = ()) -> str:
        value = data[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string, got {_show(value)}")
        if choices and value not in choices:
            raise self.fail(key, f"expected one of {', '.join(choices)}, got {_show(value)}")
        return value

    def figure(self, field: str, raw: Any, unit: str) -> Figure:
        if not isinstance(raw, dict):
            raise self.fail(
                field, f"expected an inline table {{ value = ..., source = ... }}, got {_show(raw)}"
            )
        unknown = sorted(set(raw) - set(_FIGURE_KEYS))
        if unknown:
            raise self.fail(
                field, f"unknown key '{unknown[0]}'; valid keys: {', '.join(_FIGURE_KEYS)}"
            )
        source = raw.get("source")
        if not isinstance(source, str) or not source.strip():
            raise self.fail(field, f"expected a non-empty string in 'source', got {_show(source)}")
        value, na, measured = raw.get("value"), raw.get("na"), raw.get("measured", False)
        if not isinstance(measured, bool):
            raise self.fail(field, f"expected true or false in 'measured', got {_show(measured)}")
        if na is not None and (not isinstance(na, str) or not na.strip()):
            raise self.fail(field, f"expected a reason string in 'na', got {_show(na)}")
        given = {"value": value is not None, "na": na is not None, "measured": measured}
        states = [state for state, present in given.items() if present]
        if not states:
            raise self.fail(field, "needs one of 'value', 'na' (a reason) or 'measured = true'")
        if len(states) > 1:
            raise self.fail(field, f"has both '{states[0]}' and '{states[1]}'; give only one")
        if value is not None:
            if not _is_number(value):
                raise self.fail(field, f"expected a number in 'value', got {_show(value)}")
            if value <= 0:
                raise self.fail(field, f"expected a positive number in 'value', got {_show(value)}")
            value = float(value)
        return Figure(value=value, source=source, na=na, measured=measured, unit=unit)

    def parse(self, data: dict[str, Any], path: str) -> Profile:
        valid = {*_REQUIRED, *_OPTIONAL, *FIGURES, "peak_tflops"}
        for key in data:
            if key not in valid:
                raise self.fail(key, f"unknown field; valid: {', '.join(sorted(valid))}")
        for key in (*_REQUIRED, *FIGURES, "peak_tflops"):
            if key not in data:
                raise self.fail(key, "missing")

        name = self.string(data, "name")
        if name != self.stem:
            raise self.fail("name", f"must equal the file name '{self.stem}', got {_show(name)}")
        detect = data["detect"]
        if not isinstance(detect, bool):
            raise self.fail("detect", f"expected true or false, got {_show(detect)}")
        patterns = data["device_patterns"]
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise self.fail("device_patterns", f"expected a list of strings, got {_show(patterns)}")
        backend = self.string(data, "backend", BACKENDS)
        if backend == "any" and detect:
            raise self.fail("backend", "'any' is only for fallback profiles with 'detect = false'")
        if detect and not patterns:
            raise self.fail("device_patterns", "empty, but 'detect = true' needs a pattern")
        for pattern in patterns:
            try:
                re.compile(pattern, re.IGNORECASE)
            except re.error as exc:
                raise self.fail("device_patterns", f"bad regex {_show(pattern)}: {exc}") from None

        memory_range = data.get("memory_range_gib")
        if memory_range is not None:
            if not (
                isinstance(memory_range, list)
                and len(memory_range) == 2
                and all(_is_number(x) and x >= 0 for x in memory_range)
                and memory_range[0] < memory_range[1]
            ):
                raise self.fail(
                    "memory_range_gib",
                    f"expected [low, high] with 0 <= low < high, got {_show(memory_range)}",
                )
            memory_range = (float(memory_range[0]), float(memory_range[1]))
        notes = data.get("notes", "")
        if not isinstance(notes, str):
            raise self.fail("notes", f"expected a string, got {_show(notes)}")

        peaks_raw = data["peak_tflops"]
        if not isinstance(peaks_raw, dict):
            raise self.fail("peak_tflops", f"expected a table, got {_show(peaks_raw)}")
        for key in peaks_raw:
            if key not in PEAK_KEYS:
                raise self.fail(
                    f"peak_tflops.{key}", f"unknown field; valid: {', '.join(PEAK_KEYS)}"
                )
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
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        message = " ".join(str(exc).split())
        raise ProfileError(f"{display}: not valid TOML: {message}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{display}: cannot read: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer of over 4300 digits, deep nesting
        too = "nested too deeply" if isinstance(exc, RecursionError) else "a number too long"
        raise ProfileError(f"{display}: not valid TOML: {too}") from None
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


# --------------------------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------------------------

GENERIC_GPU = "generic-gpu"


@dataclass(frozen=True)
class Detection:
    """Which profile describes a device, and why."""

    profile: Profile
    matched_by: str
    """How it was chosen: the pattern and checks that matched, 'fallback' or 'override'."""
    message: str | None = None
    """A warning for the user (unknown device, ambiguous match), or None."""


def _norm_arch(arch: str | None) -> str | None:
    """``gfx90a:sramecc+:xnack-`` -> ``gfx90a``."""
    return arch.split(":")[0].strip().lower() if arch else None


def _check(profile: Profile, info: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(how it matched, None) or (None, why not) for one detectable profile and a device."""
    name = info.get("name") or ""
    pattern = next((p for p in profile.device_patterns if re.search(p, name, re.IGNORECASE)), None)
    if pattern is None:
        return None, None  # not even a name match: nothing worth reporting
    how = [f"name matches {pattern!r}"]
    arch = _norm_arch(info.get("arch"))
    if arch and profile.arch != "any":
        if arch != profile.arch.lower():
            return None, f"arch {arch} is not {profile.arch}"
        how.append(f"arch {arch}")
    memory = info.get("total_memory_bytes")
    if memory is not None and profile.memory_range_gib is not None:
        gib, (low, high) = memory / 2**30, profile.memory_range_gib
        if not low <= gib <= high:
            return None, f"memory {gib:.1f} GiB is outside [{low:g}, {high:g}] GiB"
        how.append(f"memory {gib:.1f} GiB in [{low:g}, {high:g}]")
    units = info.get("compute_units")
    expected = profile.compute_units.value
    if units is not None and expected is not None:
        if int(units) != int(expected):
            return None, f"{units} compute units, not {expected:g}"
        how.append(f"{units} compute units")
    return ", ".join(how), None


def detect(
    device_info: Mapping[str, Any],
    *,
    profiles: Mapping[str, Profile] | None = None,
    override: str | None = None,
) -> Detection:
    """Pick the profile for a device.

    ``device_info`` has ``backend`` (``cpu``/``cuda``/``rocm``), ``name`` (torch's device name),
    ``total_memory_bytes`` and ``arch`` (``sm_90``, ``gfx90a``; may be None), and optionally
    ``compute_units`` (torch's ``multi_processor_count``). The first profile (by name) with
    ``detect = true``, the same backend, a matching name pattern and fitting memory / arch /
    compute units wins. An unknown GPU gets ``generic-gpu`` with a message. ``override`` (e.g.
    from ``$DSBENCH_PROFILE``) names the profile to use regardless.
    """
    profiles = load_profiles() if profiles is None else profiles
    backend = device_info.get("backend")
    name = device_info.get("name") or "?"
    if override:
        if override not in profiles:
            raise UsageError(choices_message("profile", override, profiles))
        return Detection(profiles[override], "override")
    if backend not in ("cpu", "cuda", "rocm"):
        raise UsageError(f"unknown backend {backend!r} in device info; valid: cpu, cuda, rocm")

    matches: list[tuple[Profile, str]] = []
    near: list[str] = []
    for profile in sorted(profiles.values(), key=lambda p: p.name):
        if not profile.detect or profile.backend != backend:
            continue
        how, why_not = _check(profile, device_info)
        if how is not None:
            matches.append((profile, f"backend {backend}, {how}"))
        elif why_not is not None:
            near.append(f"{profile.name} matches by name but {why_not}")

    if matches:
        profile, how = matches[0]
        message = None
        if len(matches) > 1:
            others = ", ".join(p.name for p, _ in matches[1:])
            message = (
                f"device '{name}' matches several profiles ({profile.name}, {others}); "
                f"using {profile.name}"
            )
        return Detection(profile, how, message)

    if backend == "cpu":  # only if someone removed the cpu profile's catch-all pattern
        raise UsageError(f"no hardware profile matches CPU '{name}'")
    if GENERIC_GPU not in profiles:
        raise UsageError(f"no hardware profile matches '{name}' and there is no {GENERIC_GPU}")
    generic = profiles[GENERIC_GPU]
    generic = dataclasses.replace(
        generic,
        backend=backend,
        vendor={"cuda": "nvidia", "rocm": "amd"}[backend],
        arch=_norm_arch(device_info.get("arch")) or generic.arch,
    )
    why = f" ({'; '.join(near)})" if near else ""
    message = (
        f"unknown device '{name}' (backend {backend}): no hardware profile matches{why}; "
        f"using {GENERIC_GPU}, % of peak uses measured ceilings; add a file to hardware_profiles/"
    )
    return Detection(generic, "fallback", message)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def local_device_info(device: str = "cpu") -> dict[str, Any]:
    """``device_info`` for :func:`detect`, read from torch for ``cpu`` or ``cuda[:i]``."""
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        try:
            memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            memory = None
        return {
            "backend": "cpu",
            "name": _cpu_name(),
            "total_memory_bytes": memory,
            "arch": platform.machine() or None,
            "compute_units": None,
        }
    if dev.type != "cuda":
        raise UsageError(f"unsupported device '{device}'; valid: cpu, cuda[:N]")
    if not torch.cuda.is_available():
        raise UsageError(f"device '{device}' requested but torch sees no CUDA/ROCm device")
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    rocm = getattr(torch.version, "hip", None) is not None
    arch = getattr(props, "gcnArchName", None) if rocm else f"sm_{props.major}{props.minor}"
    return {
        "backend": "rocm" if rocm else "cuda",
        "name": props.name,
        "total_memory_bytes": int(props.total_memory),
        "arch": _norm_arch(arch),
        "compute_units": int(props.multi_processor_count),
    }


def detect_local(device: str = "cpu") -> Detection:
    """:func:`detect` for a local torch device; ``$DSBENCH_PROFILE`` overrides the choice."""
    return detect(local_device_info(device), override=os.environ.get("DSBENCH_PROFILE") or None)


# --------------------------------------------------------------------------------------------
# Calibration: measured ceilings for the generic profiles
# --------------------------------------------------------------------------------------------

CACHE_VERSION = 4
"""Bumped when the calibration's method changes, so that stale cached ceilings are measured again
(4: memory bandwidth is the best of a read-only sum, copy, scale and add over every core the
process may use; matmul is the best over the gemm benchmark's sizes)."""
CACHE_FILE = "calibration.json"


def resolve_cache_dir(explicit: Path | None = None) -> Path:
    """The calibration cache folder.

    ``explicit``, else ``$DSBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/dsbench``, else
    ``~/.cache/dsbench``.
    """
    if explicit is not None:
        return Path(explicit)
    if os.environ.get("DSBENCH_CACHE_DIR"):
        return Path(os.environ["DSBENCH_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "dsbench"
    return Path.home() / ".cache" / "dsbench"


def _device_name(device: str) -> str:
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return _cpu_name()
    return torch.cuda.get_device_name(dev.index if dev.index is not None else None)


def calibration_key(device: str) -> str:
    """Cache key: hostname, device name, torch version and torch thread count."""
    import torch

    return (
        f"{socket.gethostname()}|{_device_name(device)}|torch {torch.__version__}|"
        f"{torch.get_num_threads()} threads"
    )


def _best_time(
    fn: Callable[[], Any],
    sync: Callable[[], None],
    reps: int,
    inner: int,
    min_seconds: float = 0.0,
) -> float:
    """Best (minimum) seconds per call of ``fn`` over ``reps`` timed groups of ``inner`` calls,
    and more groups (up to 10 x ``reps``) until ``min_seconds`` have passed: on a machine that
    others load now and then, the best is then more likely to fall in a quiet moment."""
    best = math.inf
    began = time.perf_counter()
    done = 0
    while done < reps or (time.perf_counter() - began < min_seconds and done < 10 * reps):
        sync()
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / inner)
        done += 1
    return best


# [Note: a ceiling the benchmark cannot beat]
# A measured peak is only useful as the denominator of "% of peak" if no benchmark reaches past
# it. A single kernel is not enough: on CPUs a copy pays hidden write-allocate traffic, an
# in-place kernel does not, and read-heavy mixes (AdamW reads four streams and writes three)
# run faster than 1:1 read/write ones; a matmul's rate depends on its size. So each ceiling is
# the best over several methods and sizes, with every thread the process may use, and each
# method's rate is recorded in the figure's source. It is still a measurement on a machine that
# may be busy, so pages and tables flag a share above 100% (:func:`pct_text`) rather than show
# it as a plain number.

STREAM_KERNELS = ("sum", "copy", "scale", "add")
"""The memory-bandwidth methods: a read-only sum, a copy, an in-place scale and an in-place add."""
CPU_MATMUL_SIZES = (512, 1024, 2048, 4096)
"""n of the n x n x n CPU matmuls, those of the gemm benchmark's CPU suites (quick: 512-2048,
full: up to 4096); sizes above :data:`CPU_MATMUL_ALWAYS` that would take longer than the time
budget are left out."""
CPU_MATMUL_ALWAYS = 2048
"""Sizes up to this one (the quick suite's) are always measured, however slow the CPU."""
GPU_MATMUL_SIZES = (2048, 4096, 8192)
STREAM_SECONDS = 0.75
"""Each memory kernel is timed for at least this long (more reps than asked when they are quick)."""


def _stream_rates(
    dev: Any, nbytes: int, sync: Callable[[], None], reps: int, inner: int
) -> dict[str, float]:
    """GB/s (bytes read + written, 1e9) of four STREAM-like kernels on ``nbytes`` float32 tensors.

    ``sum`` (src.sum(): nbytes read, nothing written) shows the read bandwidth that read-heavy
    kernels approach; ``copy`` (dst.copy_(src): 2 x nbytes as counted) understates what an
    in-place kernel such as AdamW sees, because on CPUs each written line is also read first
    (write-allocate); the in-place ``scale`` (x.mul_(s): 2 x nbytes) and ``add`` (x.add_(y):
    3 x nbytes) have no such hidden traffic. The memory-bandwidth ceiling is the best of them.
    """
    import torch

    src = torch.empty(nbytes // 4, dtype=torch.float32, device=dev).fill_(1.0)
    dst = torch.empty_like(src).fill_(1.0)  # also faults in dst's pages
    kernels = {
        "sum": (lambda: src.sum(), 1),
        "copy": (lambda: dst.copy_(src), 2),
        "scale": (lambda: dst.mul_(1.0), 2),
        "add": (lambda: dst.add_(src), 3),
    }
    rates = {}
    for name in STREAM_KERNELS:
        fn, streams = kernels[name]
        fn()  # warm-up
        seconds = _best_time(fn, sync, reps, inner, min_seconds=STREAM_SECONDS)
        rates[name] = streams * nbytes / seconds / 1e9
    return rates


def _matmul_rates(
    dev: Any, dtype: Any, sizes: tuple[int, ...], sync: Callable[[], None], *, gpu: bool
) -> tuple[dict[int, float], int]:
    """TFLOP/s (2·n³ per call) of ``a @ b`` per size n, best of the reps; and the reps.

    Random normal inputs (never zeros, which run faster on some hardware). On a CPU a size above
    :data:`CPU_MATMUL_ALWAYS` whose probe predicts more than 0.5 s per call is left out, and a
    size gets fewer reps (at least 3) where ``reps`` would take over a second, so calibration
    stays within seconds."""
    import torch

    budget_s = 0.5
    generator = torch.Generator(device=dev).manual_seed(0)
    reps = 5 if gpu else 10
    probe = None
    if not gpu:
        a = torch.randn(256, 256, generator=generator, device=dev, dtype=dtype)
        probe = _best_time(lambda a=a: a @ a, sync, 5, 1, min_seconds=0.05)
    rates: dict[int, float] = {}
    for n in sizes:
        if n > CPU_MATMUL_ALWAYS and probe is not None and probe * (n / 256) ** 3 > budget_s:
            break
        a = torch.randn(n, n, generator=generator, device=dev, dtype=dtype)
        b = torch.randn(n, n, generator=generator, device=dev, dtype=dtype)
        warm_until = time.perf_counter() + 0.2  # let clocks and library caches settle
        while time.perf_counter() < warm_until:
            a @ b
            sync()
        # several calls per timed group when one is short, so the clock's resolution and the
        # call overhead do not count
        single = _best_time(lambda a=a, b=b: a @ b, sync, 1, 1)
        inner = 10 if gpu else max(1, min(20, int(0.02 / max(single, 1e-9))))
        n_reps = reps if gpu else max(3, min(reps, int(1.0 / (single * inner))))  # ~1 s a size
        seconds = _best_time(lambda a=a, b=b: a @ b, sync, n_reps, inner, min_seconds=0.5)
        rates[n] = 2 * n**3 / seconds / 1e12
        del a, b
    return rates, reps


def _cpu_threads() -> int:
    """Every CPU this process may run on (its affinity mask), at least torch's own count."""
    import torch

    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = os.cpu_count() or 1
    return max(torch.get_num_threads(), allowed)


def measure_ceilings(device: str = "cpu") -> dict[str, Any]:
    """Measure memory bandwidth and matmul rates on ``device``; a few seconds on a small CPU.

    See [Note: a ceiling the benchmark cannot beat]. On a CPU torch runs on every CPU the
    process may use during calibration (:func:`_cpu_threads`), then its thread count is restored.

    * memory: the best of :data:`STREAM_KERNELS` on float32 tensors (256 MiB on CPU, 1 GiB on
      GPU), bytes read + written, best of at least 20 reps and :data:`STREAM_SECONDS` (5 x 20
      calls on GPU) after a warm-up that also faults the pages in;
    * matmul: square ``a @ b`` on random normal data, FLOPs = 2·n³, the best over sizes
      (:data:`CPU_MATMUL_SIZES`: those the gemm benchmark runs; :data:`GPU_MATMUL_SIZES`) of
      up to 10 reps each (5 on GPU); fp32 and bf16 on CPU, fp16, bf16 and fp32 with TF32 off on
      GPU.

    Returns ``{"memory_bandwidth_gbps", "copy_bandwidth_gbps", "matmul_tflops": {dtype: rate},
    "methods": {figure: text}}``.
    """
    import torch

    dev = torch.device(device)
    gpu = dev.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(dev)) if gpu else (lambda: None)
    methods: dict[str, str] = {}
    old_threads = torch.get_num_threads()
    threads = old_threads if gpu else _cpu_threads()
    on = "" if gpu else f" with {threads} torch thread{'s' if threads > 1 else ''}"
    old_precision = torch.get_float32_matmul_precision()
    try:
        torch.set_num_threads(threads)
        torch.set_float32_matmul_precision("highest")  # fp32 means fp32, not TF32

        # -- memory ---------------------------------------------------------------------------
        nbytes = (1024 if gpu else 256) * 2**20
        reps = 5 if gpu else 20
        stream = _stream_rates(dev, nbytes, sync, reps, inner=20 if gpu else 1)
        best = max(stream, key=stream.__getitem__)
        copy_gbps = stream["copy"] / 2  # bytes copied per second
        methods["memory_bandwidth_gbps"] = (
            f"the best of four kernels on {nbytes // 2**20} MiB float32 tensors{on}, best of "
            f"at least {reps} reps and {STREAM_SECONDS:g} s each, counting bytes read + written: "
            "read-only Tensor.sum "
            f"{stream['sum']:.1f} GB/s, Tensor.copy_ {stream['copy']:.1f} GB/s, in-place "
            f"Tensor.mul_ {stream['scale']:.1f} GB/s, in-place Tensor.add_ {stream['add']:.1f} "
            f"GB/s; ceiling = {best} (in-place and read-only kernels avoid write-allocate "
            "traffic)"
        )
        methods["copy_bandwidth_gbps"] = (
            "gloo between local ranks moves data through host memory, so its ceiling is the "
            f"bytes copied per second by Tensor.copy_{on} (each byte read once and written "
            f"once): {copy_gbps:.1f} GB/s"
        )

        # -- matmul ---------------------------------------------------------------------------
        dtypes = (
            [torch.float16, torch.bfloat16, torch.float32]
            if gpu
            else [torch.float32, torch.bfloat16]
        )
        sizes = GPU_MATMUL_SIZES if gpu else CPU_MATMUL_SIZES
        rates: dict[str, float] = {}
        for dtype in dtypes:
            by_size, mreps = _matmul_rates(dev, dtype, sizes, sync, gpu=gpu)
            dname = str(dtype).removeprefix("torch.")
            top = max(by_size, key=by_size.__getitem__)
            rates[dname] = by_size[top]
            each = ", ".join(f"{n}: {r:.3g}" for n, r in by_size.items())
            methods[f"matmul_{dname}"] = (
                f"the best over sizes n = {', '.join(map(str, by_size))} of up to {mreps} reps "
                "each (at least 3, about a second a size), "
                f"{dname} n x n x n torch.matmul on random normal data{on} (2*n^3 FLOPs"
                f"{', TF32 off' if dtype == torch.float32 and gpu else ''}; TFLOP/s by n: "
                f"{each}); ceiling at n = {top}"
            )
    finally:
        torch.set_float32_matmul_precision(old_precision)
        torch.set_num_threads(old_threads)
    return {
        "memory_bandwidth_gbps": stream[best],
        "copy_bandwidth_gbps": copy_gbps,
        "matmul_tflops": rates,
        "methods": methods,
    }


def over_peak_note(measured: bool | None) -> str:
    """Why a share of peak can exceed 100%, for a value that does."""
    if measured:
        return (
            "above the measured ceiling: the calibration (the best this machine showed while it "
            "was measured, see the figure's source) understated it; measure it again with "
            "`dsbench profiles --calibrate`"
        )
    return (
        "above the profile's datasheet figure: boost clocks, or the benchmark counts less work "
        "than the hardware does"
    )


def pct_text(pct: float | None, measured: bool | None = None) -> str:
    """A share of peak for a plain-text table: ``97.2%``, ``n/a``; above 100% never bare:
    ``105.5% (above the measured peak)`` (:func:`over_peak_note` says why it can be)."""
    if pct is None or not math.isfinite(pct):
        return "n/a"
    if pct <= 100.0:
        return f"{pct:.1f}%"
    return f"{pct:.1f}% (above the {'measured' if measured else 'datasheet'} peak)"


def _read_cache(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"version": CACHE_VERSION, "entries": {}}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {"version": CACHE_VERSION, "entries": {}}
    data.setdefault("entries", {})
    return data


def _write_atomic(file: Path, data: dict[str, Any]) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def calibration(
    device: str = "cpu",
    *,
    cache_dir: Path | None = None,
    force: bool = False,
    measure: bool = True,
) -> dict[str, Any] | None:
    """Measured ceilings for ``device`` from the cache, measuring (and caching) when absent.

    ``force`` measures even when cached; ``measure=False`` only reads the cache (None if empty).
    """
    file = resolve_cache_dir(cache_dir) / CACHE_FILE
    key = calibration_key(device)
    data = _read_cache(file)
    entry = data["entries"].get(key)
    if not measure:
        return entry
    if entry is None or force:
        entry = measure_ceilings(device)
        entry["date"] = datetime.date.today().isoformat()
        entry["device"] = device
        data["entries"][key] = entry
        _write_atomic(file, data)
    return entry


#: Which measurement fills which measured figure.
_MEASURED_FROM: dict[str, tuple[str, str | None]] = {
    "memory_bandwidth_gbps": ("memory_bandwidth_gbps", None),
    "link_bandwidth_gbps": ("copy_bandwidth_gbps", None),  # CPU ranks only: see cpu.toml
    "peak_tflops.fp16_matrix": ("matmul_tflops", "float16"),
    "peak_tflops.bf16_matrix": ("matmul_tflops", "bfloat16"),
    "peak_tflops.fp32": ("matmul_tflops", "float32"),
}


def _measured_value(entry: Mapping[str, Any], figure: str, device: str) -> tuple[float | None, str]:
    spec = _MEASURED_FROM.get(figure)
    if spec is None:
        return None, "dsbench has no measurement for this figure"
    key, sub = spec
    if figure == "link_bandwidth_gbps" and not device.startswith("cpu"):
        return None, "the link between GPUs is not measured by calibration"
    value = entry.get(key)
    if sub is not None:
        value = (value or {}).get(sub)
    method_key = f"matmul_{sub}" if sub else key
    if value is None:
        return None, f"not measured on {device}"
    return float(value), entry.get("methods", {}).get(method_key, key)


def calibrate(
    profile: Profile,
    device: str = "cpu",
    *,
    cache_dir: Path | None = None,
    force: bool = False,
    measure: bool = True,
) -> Profile:
    """A copy of ``profile`` with its ``measured`` figures filled in from ``device``.

    Measurements are cached (see :func:`resolve_cache_dir`) under :func:`calibration_key` and
    reused unless ``force``; ``measure=False`` uses the cache only and returns ``profile``
    unchanged when nothing is cached. Profiles without measured figures are returned unchanged.
    """
    measured = [name for name, fig in profile.figures().items() if fig.measured]
    if not measured:
        return profile
    entry = calibration(device, cache_dir=cache_dir, force=force, measure=measure)
    if entry is None:
        return profile
    date = entry.get("date", "an unknown date")
    top: dict[str, Figure] = {}
    peaks = dict(profile.peak_tflops)
    for name in measured:
        old = profile.figures()[name]
        value, method = _measured_value(entry, name, device)
        source = (
            f"measured on this machine on {date} by dsbench: {method}"
            if value is not None
            else f"not measured: {method}"
        )
        new = dataclasses.replace(old, value=value, source=source)
        if name.startswith("peak_tflops."):
            peaks[name.removeprefix("peak_tflops.")] = new
        else:
            top[name] = new
    return dataclasses.replace(profile, **top, peak_tflops=peaks)
