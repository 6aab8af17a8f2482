"""Hardware profiles' schema: a :class:`Figure` with its source, a :class:`Profile` of them,
the vendors, backends and peak keys (see :mod:`dsbench.hardware`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
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
#: Optional top-level figures and their units: present only where a datasheet states one.
OPTIONAL_FIGURES: dict[str, str] = {
    # the cache above L2 that torch's device properties do not report (MI300X's Infinity Cache),
    # or a GPU's L2 as the datasheet gives it (dsbench.hardware.caches)
    "last_level_cache_mib": "MiB",
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
    last_level_cache_mib: Figure | None = None
    """The device's last-level cache, MiB, where the datasheet gives it (an optional figure):
    MI300X's Infinity Cache, which torch does not report; None where the profile has none."""

    # -- lookups ------------------------------------------------------------------------------

    def figures(self) -> dict[str, Figure]:
        """All figures, top-level ones then ``peak_tflops.<key>``, in file order."""
        out = {key: getattr(self, key) for key in FIGURES}
        out.update({key: getattr(self, key) for key in OPTIONAL_FIGURES if getattr(self, key)})
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
            **{k: getattr(self, k).to_dict() for k in OPTIONAL_FIGURES if getattr(self, k)},
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
            **{k: fig(data[k]) for k in OPTIONAL_FIGURES if isinstance(data.get(k), Mapping)},
        )


class ProfileError(UsageError):
    """A profile file is malformed. The message is one line naming the file and the field."""
