"""Every table of a page downloadable and never wider than the page: :func:`finish` wraps each
top-level ``<table>`` of a page's body in a box that scrolls sideways (``div.scroll``), writes
its cells as text to a CSV file beside the page (pandas ``to_csv``; a nested table flattens into
its cell's text) and puts a "CSV" link under it. The markup is the site's own (built by
:mod:`dsbench.publish.html`), so a table starts with ``<table`` and ends with ``</table>``."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

from dsbench.publish.html import Html, el

TOKEN = re.compile(r"<table[\s>]|</table>")
FORMULA_START = ("=", "+", "@", "\t", "\r")
"""A cell starting with one of these is prefixed with ``'`` in a CSV file, so a spreadsheet
shows it as text instead of running it as a formula (strings come from result files)."""


def top_level(text: str) -> list[tuple[int, int]]:
    """(start, end) of each ``<table>`` of ``text`` not inside another."""
    spans, depth, start = [], 0, 0
    for m in TOKEN.finditer(text):
        if m.group().startswith("</"):
            depth -= 1
            if depth == 0:
                spans.append((start, m.end()))
        else:
            if depth == 0:
                start = m.start()
            depth += 1
    return spans


class _Cells(HTMLParser):
    """One table's rows as text cells: header rows (``thead``) and body rows apart; a
    ``colspan`` repeats its cell, a ``rowspan`` carries it into the rows below."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.head: list[list[str]] = []
        self.body: list[list[str]] = []
        self.in_head = False
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        self.span = (1, 1)
        self.carry: dict[int, tuple[int, str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.depth += 1
        elif tag == "br" and self.cell is not None:
            self.cell.append(" ")
        elif self.depth != 1:
            return
        elif tag in ("thead", "tbody"):
            self.in_head = tag == "thead"
        elif tag == "tr":
            self.row = []
            self._carried()
        elif tag in ("td", "th") and self.row is not None:
            a = dict(attrs)
            self.cell, self.span = [], (int(a.get("colspan") or 1), int(a.get("rowspan") or 1))

    def _carried(self) -> None:
        """Cells of rowspans from rows above that stand at the row's current column."""
        assert self.row is not None
        while (col := len(self.row)) in self.carry:
            left, text = self.carry.pop(col)
            self.row.append(text)
            if left > 1:
                self.carry[col] = (left - 1, text)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.depth -= 1
        elif self.depth != 1:
            return
        elif tag in ("td", "th") and self.cell is not None and self.row is not None:
            text = " ".join("".join(self.cell).split())
            cols, rows = self.span
            for _ in range(cols):
                if rows > 1:
                    self.carry[len(self.row)] = (rows - 1, text)
                self.row.append(text)
            self.cell = None
            self._carried()
        elif tag == "tr" and self.row is not None:
            (self.head if self.in_head else self.body).append(self.row)
            self.row = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def frame(markup: str) -> pd.DataFrame:
    """A table's cells as a DataFrame of strings; several header rows join into one name per
    column (``h200-sxm measured``)."""
    cells = _Cells()
    cells.feed(markup)
    cells.close()
    width = max((len(r) for r in cells.head + cells.body), default=0)
    pad = [r + [""] * (width - len(r)) for r in cells.body]
    names = []
    for i in range(width):
        parts = [r[i] for r in cells.head if i < len(r) and r[i]]
        names.append(" ".join(dict.fromkeys(parts)) or f"column {i + 1}")
    df = pd.DataFrame(pad, columns=names if cells.head else None)
    return df.map(lambda v: "'" + v if v.startswith(FORMULA_START) else v)


def finish(body: str, page: Path) -> tuple[Html, int]:
    """``body`` with each top-level table wrapped, written to ``<page stem>-table-<n>.csv``
    beside ``page`` and linked under it; and how many CSV files were written."""
    out, last, n = [], 0, 0
    for start, end in top_level(body):
        n += 1
        name = f"{page.stem}-table-{n}.csv"
        df = frame(body[start:end])
        df.to_csv(page.parent / name, index=False, header=not isinstance(df.columns, pd.RangeIndex))
        out += [body[last:start], '<div class="scroll">', body[start:end], "</div>"]
        out.append(el("p", el("a", "CSV", href=name, download=True), cls="csv"))
        last = end
    out.append(body[last:])
    return Html("".join(out)), n
