"""The profiles page's matrix as data: benchmark families (benchmark, metric, unit) × hardware
profiles over the cross-profile table (:func:`dsbench.publish.data.modelled.cross_profile_table`):
per cell the range of the modelled floors over the family's cases and what limits them, and
where measured, the measured values and their efficiency."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dsbench.publish.data.facts import finite, num


@dataclass(frozen=True)
class FamilyCell:
    """One family on one profile."""

    floors: str
    """The modelled floors' range over the family's cases (:func:`span`), ``-`` for none."""
    limits: str
    """What limits them, e.g. ``memory, fp16``."""
    measured: int
    """How many of the family's cases were measured on the profile."""
    measured_span: str
    """The measured values' range (``-`` for none)."""
    efficiency: str
    """The measured efficiencies' range, in % (``-`` for none)."""


@dataclass(frozen=True)
class Family:
    benchmark: Any
    metric: Any
    unit: Any
    cases: int
    cells: dict[str, FamilyCell]
    """By profile name, in the table's order."""


def profiles_of(df: pd.DataFrame) -> list[str]:
    """The table's profiles, in its column order."""
    return [p for p in dict.fromkeys(df.columns.get_level_values(0))
            if p not in ("case", "counted work")]  # fmt: skip


def measured_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The cases measured on at least one of the table's profiles."""
    cols = [(p, "measured value") for p in profiles_of(df)]
    return df[df[cols].notna().any(axis=1)] if cols else df.iloc[:0]


def span(values: Any) -> str:
    """``412`` or ``412 – 1555`` (the smallest and largest of the finite values)."""
    vals = [v for v in (finite(x) for x in values) if v is not None]
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return num(lo) if num(lo) == num(hi) else f"{num(lo)} – {num(hi)}"


def families(df: pd.DataFrame) -> tuple[list[Family], list[str]]:
    """The families something models or measures, and the names of those nothing does."""
    profiles = profiles_of(df)
    found, bare = [], []
    keys = [("case", "benchmark"), ("case", "metric"), ("case", "unit")]
    for (bench, metric, unit), g in df.groupby(keys, sort=False):
        floors = {p: g[(p, "modelled floor value")] for p in profiles}
        seen = {p: g[(p, "measured value")].dropna() for p in profiles}
        if all(span(f) == "-" for f in floors.values()) and not any(map(len, seen.values())):
            bare.append(str(bench))
            continue
        cells = {}
        for p in profiles:
            limits = ", ".join(sorted({re.sub(r"compute \((\w+)\)", r"\1", str(x))
                                       for x in g[(p, "modelled limit")].dropna()}))  # fmt: skip
            eff = g[(p, "measured efficiency")].dropna() * 100
            cells[p] = FamilyCell(span(floors[p]), limits, len(seen[p]), span(seen[p]), span(eff))
        found.append(Family(bench, metric, unit, len(g), cells))
    return found, bare
