"""Comparison rows as a table: for a terminal (:mod:`dsbench.compare.terminal`: 100 columns at
most, the reasons as numbered notes), GitHub/plain/Markdown (tabulate), HTML (escaped) or CSV
(pandas), these with every text in full. See :mod:`dsbench.compare`."""

from __future__ import annotations

import html
import io

from tabulate import tabulate

from dsbench.compare import terminal
from dsbench.compare.rows import ComparedRow, Report
from dsbench.errors import UsageError, choices_message
from dsbench.records import HIGHER

FORMATS = {"terminal": None, "github": "github", "plain": "simple", "markdown": "pipe",
           "html": "html", "csv": None}  # fmt: skip
HEADERS = ["benchmark", "unit", "baseline", "contender", "ratio", "99% interval", "change", "basis"]
ENV_HEADERS = ["baseline env", "contender env"]


def pct(level: float) -> str:
    """A confidence level as people write it: 0.99 is ``99%``, 0.99875 ``99.88%``."""
    return f"{level * 100:.4g}%"


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def interval_text(r: ComparedRow) -> str:
    return "" if r.low is None else f"{r.low:.3f}-{r.high:.3f}"


def _unit(r: ComparedRow) -> str:
    return r.unit + (" ↑" if r.direction == HIGHER else " ↓" if r.direction else "")


def _cells(r: ComparedRow, label: str) -> list[str]:
    """A row's cells up to its reason, in every format: its label, unit, both sides' values, the
    ratio, its interval and the verdict."""
    ratio = "" if r.ratio is None else f"{r.ratio:.3f}"
    return [label, _unit(r), _fmt(r.baseline), _fmt(r.contender), ratio, interval_text(r),
            str(r.change)]  # fmt: skip


def render(report: Report, fmt: str = "github", limit: int | None = None) -> str:
    """A report's table in ``fmt``; ``limit``: the width a terminal table fits (default: the
    terminal's, at most 100 columns)."""
    return rows_table(report.rows, fmt, report.level, limit)


def rows_table(rows: list[ComparedRow], fmt: str = "github", level: float = 0.99,
               limit: int | None = None) -> str:  # fmt: skip
    """The rows in ``fmt``, their intervals at ``level``; ``limit`` as for :func:`render`."""
    if fmt not in FORMATS:
        raise UsageError(choices_message("format", fmt, FORMATS))
    if fmt == "terminal":
        return terminal_table(rows, level, limit or terminal.width())
    with_env = any(r.baseline_env or r.contender_env for r in rows)
    headers = [f"{pct(level)} interval" if h == "99% interval" else h for h in HEADERS]
    headers += ENV_HEADERS if with_env else []
    table = [
        [*_cells(r, r.id), r.basis, *([r.baseline_env, r.contender_env] if with_env else [])]
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


TO_DECIDE = "N beside a note's number: about N rounds a side would decide the row's ratio"


def terminal_table(rows: list[ComparedRow], level: float, limit: int) -> str:
    """The rows in ``limit`` columns: the parameters every case of a benchmark shares in a
    caption above, each row's basis as a numbered note below (``[1] 34``: note 1, and about 34
    rounds a side would decide the row: :attr:`~ComparedRow.detail` in the note, the rounds
    beside its number), the sides' environments (asv) above when all rows
    share them."""
    if not rows:
        return "(no rows)"
    labels, caption = terminal.short_ids(
        [r.id for r in rows], [r.memory.case if r.memory else r.id for r in rows]
    )
    notes = terminal.Notes()
    table = [
        [
            *_cells(r, label),
            (notes.ref(r.detail) + (f" {r.to_decide}" if r.to_decide else "")).strip(),
        ]
        for label, r in zip(labels, rows, strict=True)
    ]
    headers = ["benchmark", "unit", "baseline", "contender", "ratio", f"{pct(level)} interval",
               "change", "why"]  # fmt: skip
    above = terminal.wrap_all(caption, limit)
    for side in ("baseline", "contender"):
        envs = {getattr(r, f"{side}_env") for r in rows}
        if envs - {""}:
            above += terminal.wrap_all([f"{side} env: " + " | ".join(sorted(envs))], limit)
    body = terminal.table(headers, table, limit=limit, right=(2, 3, 4))
    below = notes.lines(limit)
    if any(r.to_decide for r in rows):
        below += terminal.wrap_all([TO_DECIDE], limit)
    return "\n".join([*above, body, *([""] if below else []), *below])
