"""The caches a memory-bound case can sit in, and whether it does.

A STREAM-style ceiling streams arrays four times the last-level cache, so it measures DRAM. A
benchmark whose working set (the distinct bytes one call touches, :attr:`Work.working_set`) fits
the last-level cache is measuring the cache, not DRAM: a 1M-parameter AdamW keeps p, g, m and v
in 16 MB, inside a 32 MiB L3, and an H100's 50 MiB L2 absorbs the writes of a small case before
they reach HBM. Such a share of a DRAM ceiling is not a share of anything. So a memory-bound row
knows its residency (:func:`residency`):

* ``resident``: the working set fits the last-level cache;
* ``partly``: under :data:`DRAM_FACTOR` x the cache: part of it stays resident between calls;
* ``dram``: at least :data:`DRAM_FACTOR` x the cache, the regime the ceiling measures.

Only a ``dram`` row gets a share of the DRAM ceiling. Where the caches come from:

* CPU: sysfs ``/sys/devices/system/cpu/cpu0/cache/index*`` (level, type, size, which CPUs
  share it); the last level is the largest unified one.
* GPU: ``L2_cache_size`` of torch's device properties; a profile's ``last_level_cache_mib``
  (MI300X's 256 MiB Infinity Cache, which torch does not report) above it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

MiB = 1024**2
DRAM_FACTOR = 4
"""A working set at least this many times the last-level cache is measured in DRAM (the stream
ceilings' arrays are this large for the same reason)."""
SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
FALLBACK_CPU_LLC = 32 * MiB
"""The last-level cache assumed where sysfs says nothing (not Linux, a container hiding it)."""


@dataclass(frozen=True, kw_only=True)
class CacheLevel:
    """One cache: ``L2``, ``L3``, ``Infinity Cache``; its bytes, who shares it, the source."""

    name: str
    bytes: int
    shared_by: str = ""
    """``per core``, ``shared by CPUs 0-1``, ``device``."""
    source: str = ""

    @property
    def mib(self) -> float:
        return self.bytes / MiB

    def text(self) -> str:
        """``32 MiB L3`` (``512 KiB L2``)."""
        return f"{size_text(self.bytes)} {self.name}"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "bytes": self.bytes,
            "shared_by": self.shared_by,
            "source": self.source,
        }


def size_text(n: float) -> str:
    """``16 MiB``, ``512 KiB``, ``1.5 GiB``: binary units, at most three significant figures."""
    for unit, scale in (("GiB", 1024**3), ("MiB", MiB), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("B")
    mult = {"K": 1024, "M": MiB, "G": 1024**3}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG") or 0) * mult)


def cpu_cache_levels(root: Path = SYSFS_CACHE) -> list[CacheLevel]:
    """The data and unified caches of level 2 and above of CPU 0, smallest first, from sysfs
    (empty where it has none)."""
    levels = []
    for d in sorted(root.glob("index*")):
        try:
            level = int((d / "level").read_text())
            kind = (d / "type").read_text().strip()
            size = _parse_size((d / "size").read_text())
        except (OSError, ValueError):
            continue
        if level < 2 or kind not in ("Unified", "Data") or size <= 0:
            continue
        try:
            cpus = (d / "shared_cpu_list").read_text().strip()
        except OSError:
            cpus = ""
        shared = "per core" if cpus in ("", "0") else f"shared by CPUs {cpus}"
        levels.append(
            CacheLevel(name=f"L{level}", bytes=size, shared_by=shared, source=f"sysfs {d}")
        )
    return sorted(levels, key=lambda c: c.bytes)


def gpu_cache_levels(l2_bytes: int, profile_llc: CacheLevel | None = None) -> list[CacheLevel]:
    """A GPU's L2 (from torch's device properties) and, above it, a profile's last-level cache
    that torch does not report (MI300X's Infinity Cache)."""
    levels = []
    if l2_bytes > 0:
        levels.append(
            CacheLevel(
                name="L2",
                bytes=int(l2_bytes),
                shared_by="device",
                source="torch.cuda.get_device_properties().L2_cache_size",
            )
        )
    if profile_llc is not None and profile_llc.bytes > max(l2_bytes, 0):
        levels.append(profile_llc)
    return levels


def last_level(levels: list[CacheLevel]) -> CacheLevel | None:
    return max(levels, key=lambda c: c.bytes, default=None)


@functools.cache
def cpu_llc_bytes() -> int:
    """This CPU's last-level cache, bytes (:data:`FALLBACK_CPU_LLC` where sysfs says nothing)."""
    llc = last_level(cpu_cache_levels())
    return llc.bytes if llc is not None else FALLBACK_CPU_LLC


RESIDENT, PARTLY, DRAM = "resident", "partly", "dram"


@dataclass(frozen=True, kw_only=True)
class Residency:
    """Where a case's working set lives between calls, against the last-level cache."""

    kind: str
    """:data:`RESIDENT`, :data:`PARTLY` or :data:`DRAM`."""
    working_set: int
    cache: CacheLevel | None

    @property
    def dram(self) -> bool:
        return self.kind == DRAM

    def text(self) -> str:
        """``cache-resident: 16 MiB of state in a 32 MiB L3``; ``DRAM: 256 MiB of state, 8x the
        32 MiB L3``."""
        ws = size_text(self.working_set)
        if self.cache is None:
            return f"{ws} of state; no cache size known: taken as DRAM"
        c = self.cache.text()
        times = self.working_set / self.cache.bytes
        if self.kind == RESIDENT:
            return f"cache-resident: {ws} of state in a {c}"
        if self.kind == PARTLY:
            return (
                f"partly cache-resident: {ws} of state, {times:.2g}x the {c} (under {DRAM_FACTOR}x)"
            )
        return f"DRAM: {ws} of state, {times:.2g}x the {c}"

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "working_set_bytes": self.working_set,
            "text": self.text(),
            "cache": self.cache.to_dict() if self.cache else None,
        }


def residency(working_set: float, cache: CacheLevel | None) -> Residency:
    """Where ``working_set`` bytes live against the last-level ``cache`` (None: unknown, DRAM)."""
    ws = int(working_set)
    if cache is None or ws >= DRAM_FACTOR * cache.bytes:
        kind = DRAM
    elif ws <= cache.bytes:
        kind = RESIDENT
    else:
        kind = PARTLY
    return Residency(kind=kind, working_set=ws, cache=cache)


def ladder_sizes(
    base: list[int],
    bytes_per_item: int,
    llc_bytes: int,
    *,
    rung: int = 4,
    smallest: int = 15_625,
    largest: int = 1024 * 1_000_000,
) -> list[int]:
    """``base`` sizes (items), plus what it takes for at least one to fit ``llc_bytes`` and one
    to be at least :data:`DRAM_FACTOR` x it: sizes from the ladder ``base[0] * rung**k``
    (``smallest`` to ``largest``), so every machine's ids stay on one grid (1M, 4M, 16M, 64M,
    ... and 250k, 62.5k below), sorted."""
    sizes = sorted(set(base))
    if not sizes:
        return sizes
    ladder = [sizes[0]]
    while ladder[0] // rung >= smallest:
        ladder.insert(0, ladder[0] // rung)
    while ladder[-1] * rung <= largest:
        ladder.append(ladder[-1] * rung)
    if not any(n * bytes_per_item <= llc_bytes for n in sizes):
        fits = [n for n in ladder if n * bytes_per_item <= llc_bytes]
        if fits:
            sizes.append(fits[-1])
    if not any(n * bytes_per_item >= DRAM_FACTOR * llc_bytes for n in sizes):
        big = [n for n in ladder if n * bytes_per_item >= DRAM_FACTOR * llc_bytes]
        if big:
            sizes.append(big[0])
    return sorted(set(sizes))
