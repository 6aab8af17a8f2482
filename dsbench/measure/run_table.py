"""``dsbench run``'s table: a run's rows for a terminal, in its width, with the parameters every
case of a benchmark shares above, each metric's name below and long texts as numbered notes."""

from __future__ import annotations

import math

from dsbench import hardware
from dsbench.compare import terminal
from dsbench.records import Row, value_or


def _pct_cell(r: Row) -> str:
    """% of peak: ``62.1%``; against this run's ceiling with its interval, ``62.1% (58.0-66.3)``;
    for a ceiling row, the rate it stands for (its 90th percentile)."""
    from dsbench.stats import quantile_ci
    from dsbench.suites.ceilings import CEILING_QUANTILE, CEILINGS

    if r.name in CEILINGS:
        top = quantile_ci(r.samples, CEILING_QUANTILE)[0] if r.samples else math.nan
        return f"ceiling: p{CEILING_QUANTILE * 100:.0f} {top:.4g}"
    pct = value_or(r.pct_of_peak)
    text = hardware.pct_text(pct, value_or(r.peak.measured) if r.peak else None)
    entry = (r.metrics or {}).get(r.metric)
    ci = value_or(entry.pct_ci99) if entry else None
    return f"{text} ({ci[0]:.1f}-{ci[1]:.1f})" if ci and pct is not None else text


def summary_table(rows: list[Row], limit: int | None = None) -> str:
    """The run's rows for a terminal, in ``limit`` columns (default: the terminal's, at most
    100): the parameters every case of a benchmark shares above, each metric's name below, and
    long texts (a failure's message, why a share is above its peak) as numbered notes."""
    limit = limit or terminal.width()
    labels, caption = terminal.short_ids([r.id for r in rows])
    notes = terminal.Notes()
    table = []
    for r, label in zip(rows, labels, strict=True):
        if r.ok:
            s = r.stats
            half = (s.ci_high - s.ci_low) / 2
            table.append([label, f"{r.value:.4g} ± {half:.2g}", r.unit, _peak_cell(r, notes),
                          f"{r.timing.summary.median * 1e3:.4g}", str(s.n), "ok"])  # fmt: skip
        else:
            status = f"{r.status} {notes.ref(r.message)}".strip()
            table.append([label, "", r.unit, "", "", "", status])
    metrics: dict[str, list[str]] = {}
    for r in rows:
        names = metrics.setdefault(r.metric, [])
        names += [] if r.name in names else [r.name]
    body = terminal.table(
        ["benchmark", "median ± 99% CI", "unit", "% of peak", "time ms", "n", "status"],
        table, limit=limit, right=(1, 4, 5),
    )  # fmt: skip
    named = "; ".join(f"{m} ({', '.join(names)})" for m, names in metrics.items())
    below = terminal.wrap_all([f"metrics: {named}"], limit) + notes.lines(limit)
    return "\n".join([*terminal.wrap_all(caption, limit), body, "", *below])


def _peak_cell(r: Row, notes: terminal.Notes) -> str:
    """% of peak in a cell: a cache-resident row's ``in L3 [n]``, a share wholly above this run's
    ceiling (under the bound of a wrong count) ``106.8%* [n]`` and one whose interval reaches the
    ceiling ``~100% [n]``, each with its note; else
    :func:`_pct_cell`, shortened."""
    res = value_or(r.notes.residency) if r.notes else None
    if value_or(r.pct_of_peak) is None and isinstance(res, dict) and res.get("kind") != "dram":
        where = "in" if res["kind"] == "resident" else "partly in"
        cache = (res.get("cache") or {}).get("name", "cache")
        why = f"{res.get('text')}: no share of the DRAM ceiling"
        return f"{where} {cache} {notes.ref(why)}"
    extra = r.notes.extra if r.notes else {}
    if extra.get("over_ceiling"):
        return f"{value_or(r.pct_of_peak):.1f}%* {notes.ref(extra['over_ceiling'])}"
    if extra.get("at_ceiling"):
        return f"~100% {notes.ref(extra['at_ceiling'])}"
    return _short(_pct_cell(r), notes)


SHORT_CELL = 18
"""A table cell longer than this keeps its first words; its parenthesis becomes a note."""


def _short(text: str, notes: terminal.Notes) -> str:
    """``163.7% (above the measured peak)``: ``163.7% [1]``, the note 'above the measured
    peak'; a short cell (``62.1% (58.0-66.3)``) as it is."""
    head, sep, rest = text.partition(" (")
    if len(text) <= SHORT_CELL or not sep:
        return text
    return f"{head} {notes.ref(rest.removesuffix(')'))}"


def summary_line(rows: list[Row]) -> str:
    """``12 ok, 1 failed, 2 skipped``: the rows by status, in the order first seen."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in counts.items())
