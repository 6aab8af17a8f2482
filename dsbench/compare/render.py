"""Comparison rows as a table: GitHub/plain/Markdown (tabulate), HTML (escaped) or CSV
(pandas). See :mod:`dsbench.compare`."""

from __future__ import annotations

import html
import io
from typing import TYPE_CHECKING

from tabulate import tabulate

from dsbench.errors import UsageError, choices_message
from dsbench.records import HIGHER

if TYPE_CHECKING:
    from dsbench.compare.comparison import ComparedRow

FORMATS = {"github": "github", "plain": "simple", "markdown": "pipe", "html": "html", "csv": None}
HEADERS = ["benchmark", "unit", "baseline", "contender", "ratio", "99% interval", "change", "basis"]
ENV_HEADERS = ["baseline env", "contender env"]


def pct(level: float) -> str:
    """A confidence level as people write it: 0.99 is ``99%``, 0.99875 ``99.88%``."""
    return f"{level * 100:.4g}%"


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def interval_text(r: ComparedRow) -> str:
    return "" if r.low is None else f"{r.low:.3f}-{r.high:.3f}"


def render(rows: list[ComparedRow], fmt: str = "github", level: float = 0.99) -> str:
    if fmt not in FORMATS:
        raise UsageError(choices_message("format", fmt, FORMATS))
    with_env = any(r.baseline_env or r.contender_env for r in rows)
    headers = [f"{pct(level)} interval" if h == "99% interval" else h for h in HEADERS]
    headers += ENV_HEADERS if with_env else []
    table = [
        [
            r.id,
            r.unit + (" ↑" if r.direction == HIGHER else " ↓" if r.direction else ""),
            _fmt(r.baseline),
            _fmt(r.contender),
            "" if r.ratio is None else f"{r.ratio:.3f}",
            interval_text(r),
            r.change,
            r.basis,
            *([r.baseline_env, r.contender_env] if with_env else []),
        ]
        for r in rows
    ]
    if fmt == "csv":
        import pandas as pd

        buf = io.StringIO()
        pd.DataFrame(table, columns=headers).to_csv(buf, index=False)
        return buf.getvalue().rstrip("\n")
    if fmt == "html":  # tabulate escapes nothing in cells: escape here
        table = [[html.escape(str(c)) for c in row] for row in table]
        return tabulate(table, headers=headers, tablefmt="unsafehtml")
    return tabulate(table, headers=headers, tablefmt=FORMATS[fmt], disable_numparse=True)
