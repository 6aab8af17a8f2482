"""Markup for facts that several pages show: a % of peak with its warnings, prose with
`commands`, a table cell for any value (the facts themselves: :mod:`dsbench.publish.data.facts`)."""

from __future__ import annotations

import math
from typing import Any

from dsbench import hardware
from dsbench.publish.data.facts import at_ceiling, pct
from dsbench.publish.html import Html, el, join, render_value


def share_html(value: float | None, measured: bool | None, title: str = "",
               interval: list[float] | None = None) -> Html:  # fmt: skip
    """A % of peak for a page: ``97.2%``; one above 100% whose ``interval`` reaches 100%
    ``~100%`` (the point estimate in its tooltip); otherwise above 100% never bare: flagged
    (``over`` class) with a mark and, in the tooltip and the text, why a share can exceed the
    peak."""
    if value is None:
        return Html("-")
    if value <= 100.0:
        return el("span", pct(value), title=title or None)
    if at_ceiling(value, interval):
        why = f"{pct(value)}, 99% interval reaching 100%: at the ceiling. {title}".strip()
        return el("span", "~100%", el("span", " at the ceiling", cls="muted"), title=why)
    note = hardware.over_peak_note(measured)
    return el(
        "span",
        f"{pct(value)} ⚠",
        el("span", f" above the {'measured' if measured else 'datasheet'} peak", cls="muted"),
        cls="over",
        title=f"{note}. {title}".strip(),
    )


def prose(text: str) -> Html:
    """Text written here with `commands` in backticks: the commands as ``<code>``."""
    parts = text.split("`")
    return join(el("code", p) if i % 2 else p for i, p in enumerate(parts))


def cell(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else "-"
    if isinstance(value, dict | list):
        return render_value(value)
    return value
