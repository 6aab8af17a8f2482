"""Detecting which profile the running device matches (see :mod:`dsbench.hardware`)."""

from __future__ import annotations

import dataclasses
import os
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsbench.errors import UsageError, choices_message
from dsbench.hardware.parse import (
    load_profiles,
)
from dsbench.hardware.schema import (
    Profile,
)

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
