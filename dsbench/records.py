"""What results are made of, shared by everything that writes or reads them, importing nothing
else from dsbench (and not torch): a metric's direction and a benchmark case's id."""

from __future__ import annotations

from typing import Literal

Direction = Literal["higher", "lower"]
"""Which way a metric improves: throughput and bandwidth ``higher``, time and memory ``lower``."""
HIGHER: Direction = "higher"
LOWER: Direction = "lower"
DIRECTIONS: tuple[Direction, ...] = (HIGHER, LOWER)


def case_id(name: str, params: dict) -> str:
    """Stable identifier: ``name[k1=v1,k2=v2]`` with keys sorted."""
    if not params:
        return name
    return name + "[" + ",".join(f"{k}={params[k]}" for k in sorted(params)) + "]"
