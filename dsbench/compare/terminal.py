"""Tables that fit a terminal: at most :data:`MAX_WIDTH` columns, or the terminal's width when
it is narrower (``COLUMNS``, else the terminal's size; output to a pipe or a file gets 100).

Long texts leave the table: a reason becomes a numbered note under it (:class:`Notes`, one note
for every row with the same reason), and the parameters that every case of a benchmark shares
become a caption above it (:func:`short_ids`). A case id wraps after its commas when its column
is narrow; where even that leaves it too little room, each case stands on its own line above
its row's values; and where the values alone are wider than the terminal, they are shown in
blocks of columns, each repeating the case (as pandas prints a wide frame). The full texts stay
in the machine-readable formats (``--format csv|markdown|github|html``).
"""

from __future__ import annotations

import io
import shutil
import textwrap
from collections.abc import Sequence

MAX_WIDTH = 100
"""The widest a table is drawn, whatever the terminal."""
MIN_WIDTH = 40
MIN_KEY = 30
"""The least room a case id gets beside the values before it moves onto its own line."""
GAP = 2
"""Spaces between two columns."""


def width() -> int:
    """The width to fit: the terminal's (``COLUMNS`` first), at most :data:`MAX_WIDTH`; 100
    when the output is not a terminal."""
    columns = shutil.get_terminal_size((MAX_WIDTH, 24)).columns
    return max(MIN_WIDTH, min(columns, MAX_WIDTH))


def cells(text: str) -> int:
    """The columns ``text`` takes on a terminal (its widest line)."""
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.split("\n")), default=0)


def wrap(text: str, limit: int, indent: str = "  ") -> list[str]:
    """``text`` as lines of at most ``limit`` columns, broken at spaces; lines after the first
    indented by ``indent``."""
    lines = textwrap.wrap(
        text, limit, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False
    )  # a path stays whole where it fits a line
    out = []
    for line in lines:
        while cells(line) > limit:
            out.append(line[:limit])
            line = indent + line[limit:]
        out.append(line)
    return out or [""]


def wrap_all(lines: Sequence[str], limit: int) -> list[str]:
    """Every line of ``lines`` (each may hold newlines) wrapped to ``limit``, blank lines kept."""
    out = []
    for text in lines:
        for line in text.split("\n"):
            lead = line[: len(line) - len(line.lstrip())]
            out += wrap(line, limit, lead + "  ") if line.strip() else [line]
    return out


class Notes:
    """Numbered notes under a table: ``[1]`` in a row, ``[1] spread too wide: ...`` below it.
    Rows with the same text share one note."""

    def __init__(self) -> None:
        self.texts: dict[str, int] = {}

    def ref(self, text: str) -> str:
        """``[n]`` for ``text`` (a new number for a text not seen yet); '' for no text."""
        if not text:
            return ""
        return f"[{self.texts.setdefault(text, len(self.texts) + 1)}]"

    def lines(self, limit: int) -> list[str]:
        out = []
        for text, n in self.texts.items():
            mark = f"[{n}] "
            out += wrap(mark + text, limit, indent=" " * len(mark))
        return out


def _split(bid: str) -> tuple[str, list[str]]:
    name, sep, rest = bid.partition("[")
    if not sep or not rest.endswith("]"):
        return bid, []
    return name, [p for p in rest[:-1].split(",") if p]


def short_ids(
    ids: Sequence[str], cases: Sequence[str] | None = None
) -> tuple[list[str], list[str]]:
    """The ids without the parameters every case of their benchmark shares (a benchmark with
    two or more cases), and one caption line per benchmark naming them: ``every train_step case
    has comm=native, dtype=float32``. ``cases``: the case each id's row is of, whose benchmark
    it counts as (a peak-memory row's is its case); default the ids themselves."""
    parts = [_split(i) for i in ids]
    benchmarks = [_split(c)[0] for c in cases] if cases is not None else [n for n, _ in parts]
    groups: dict[str, list[list[str]]] = {}
    for bench, (_, params) in zip(benchmarks, parts, strict=True):
        groups.setdefault(bench, []).append(params)
    shared = {
        name: [p for p in ps[0] if all(p in q for q in ps[1:])]
        for name, ps in groups.items()
        if len(ps) > 1
    }
    out = []
    for bid, bench, (name, params) in zip(ids, benchmarks, parts, strict=True):
        common = shared.get(bench)
        if not common:
            out.append(bid)
            continue
        kept = [p for p in params if p not in common]
        out.append(f"{name}[{','.join(kept)}]" if kept else name)
    caption = [f"every {name} case has {', '.join(ps)}" for name, ps in shared.items() if ps]
    return out, caption


def wrap_id(text: str, limit: int) -> str:
    """A case id broken after its commas (and within a part longer than ``limit``)."""
    if cells(text) <= limit:
        return text
    lines, line = [], ""
    for part in text.replace(",", ",\0").split("\0"):
        while cells(part) > limit:  # a part too long on its own: cut it
            if line:
                lines.append(line)
                line = ""
            lines.append(part[:limit])
            part = part[limit:]
        if line and cells(line + part) > limit:
            lines.append(line)
            line = ""
        line += part
    return "\n".join([*lines, line] if line else lines)


def _render(headers, rows, right, limit: int, key_width: int | None, key: bool = True,
            fold: bool = False) -> list:  # fmt: skip
    """One rich table as lines, trailing spaces cut; the first column (the case) wrapped to
    ``key_width``, the others not wrapped unless ``fold``."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=io.StringIO(), width=limit, color_system=None, highlight=False,
                      emoji=False, markup=False, force_terminal=False, legacy_windows=False,
                      soft_wrap=False)  # fmt: skip
    table = Table(box=box.SIMPLE_HEAD, padding=(0, GAP - 1, 0, 0), pad_edge=False,
                  show_edge=False)  # fmt: skip
    for j, h in enumerate(headers):
        wrapped = key and j == 0
        table.add_column(h, justify="right" if j in right else "left",
                         no_wrap=not (wrapped or fold), overflow="fold",
                         max_width=key_width if wrapped else None)  # fmt: skip
    for row in rows:
        cells_ = [wrap_id(row[0], key_width) if key and key_width else row[0], *row[1:]]
        table.add_row(*(Text(c) for c in cells_))
    console.print(table)
    return [line.rstrip() for line in console.file.getvalue().split("\n")[:-1]]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, limit: int | None = None,
          right: Sequence[int] = ()) -> str:  # fmt: skip
    """``rows`` under ``headers`` in at most ``limit`` columns (default :func:`width`). The first
    column is the case: it wraps, or stands on its own line above the row's values, and where
    the values alone are too wide they are split into blocks of columns, each with the case."""
    limit = limit or width()
    headers = list(headers)
    widths = [max([cells(h), *(cells(r[j]) for r in rows)]) for j, h in enumerate(headers)]
    rest = sum(widths[1:]) + GAP * (len(widths) - 1)
    if widths[0] + rest <= limit:
        return "\n".join(_render(headers, rows, set(right), limit, None))
    if limit - rest >= MIN_KEY:
        return "\n".join(_render(headers, rows, set(right), limit, limit - rest))
    if rest <= limit:
        return "\n".join(_stacked(headers, rows, right, limit))
    blocks = _blocks(widths[1:], limit - min(widths[0], MIN_KEY) - GAP)
    if len(blocks) == 1:  # one column wider than the terminal: let it fold
        return "\n".join(_render(headers, rows, set(right), limit, MIN_KEY, fold=True))
    parts = []
    for b in blocks:
        cols = [0, *(j + 1 for j in b)]
        shown = [cols.index(j) for j in right if j in cols]
        parts.append(table([headers[j] for j in cols], [[r[j] for j in cols] for r in rows],
                           limit=limit, right=shown))  # fmt: skip
    return "\n\n".join(parts)


def _stacked(headers, rows, right, limit: int) -> list[str]:
    """Each case on its own line(s), its values on the line below, indented."""
    indent = [""] * len(rows)
    body = _render(["", *headers[1:]], [[i, *r[1:]] for i, r in zip(indent, rows, strict=True)],
                   {j for j in right if j}, limit, None, key=False)  # fmt: skip
    head, values = body[:2], body[2:]
    out = [headers[0], *head]
    for r, line in zip(rows, values, strict=True):
        out += wrap_id(r[0], limit).split("\n")
        out.append(line)
    return out


def _blocks(widths: Sequence[int], room: int) -> list[list[int]]:
    """Column indices in consecutive blocks, each at most ``room`` wide with its gaps."""
    blocks: list[list[int]] = [[]]
    used = 0
    for j, w in enumerate(widths):
        if blocks[-1] and used + GAP + w > room:
            blocks.append([])
            used = 0
        blocks[-1].append(j)
        used += w + GAP
    return blocks


def command_lines(words: Sequence[str], limit: int) -> list[str]:
    """A shell command as lines of at most ``limit`` columns, continued with `` \\`` (it pastes
    as one command); a single word longer than a line (a quoted regex) stays whole."""
    lines = [""]
    for word in words:
        if lines[-1].strip() and cells(lines[-1] + " " + word + " \\") > limit:
            lines[-1] += " \\"
            lines.append("    ")
        lines[-1] += (" " if lines[-1].strip() else "") + word
    return lines
