"""HTML for the published site: escaping, a few element builders, the page frame and its CSS.

Every string that comes from a result file (labels, device names, benchmark names, errors,
environment values) is text, and text is escaped where it meets markup: :func:`esc` turns
anything into :class:`Html`, escaping it unless it already is markup built here. Builders take
children and attribute values through :func:`esc`, so a page cannot hold an unescaped string
unless code wraps it in :class:`Html` on purpose. Nothing here loads from the network: no CDN,
no web fonts, no scripts.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dsbench.publish.data.facts import num


class Html(str):
    """Markup made by this module (trusted); any other ``str`` is text and gets escaped."""

    __slots__ = ()


def esc(value: Any) -> Html:
    """``value`` as markup: :class:`Html` as is, None as nothing, everything else escaped text."""
    if isinstance(value, Html):
        return value
    if value is None:
        return Html("")
    if isinstance(value, float):
        return Html(html.escape(num(value)))
    return Html(html.escape(str(value), quote=True))


def join(parts: Iterable[Any], sep: str = "") -> Html:
    return Html(esc(sep).join(esc(p) for p in parts))


VOID = frozenset({"br", "wbr", "hr", "img", "meta", "link", "input"})
"""Elements without an end tag (a browser reads ``</br>`` as a second ``<br>``)."""


def el(name: str, /, *children: Any, **attrs: Any) -> Html:
    """``<name attrs>children</name>``; ``cls`` stands for ``class``; False/None attrs dropped;
    an element of :data:`VOID` without children has no end tag."""
    parts = [name]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        key = "class" if key == "cls" else key.replace("_", "-")
        parts.append(key if value is True else f'{key}="{esc(value)}"')
    if name in VOID and not children:
        return Html(f"<{' '.join(parts)}>")
    return Html(f"<{' '.join(parts)}>{join(children)}</{name}>")


def void(name: str, /, **attrs: Any) -> Html:
    """An element without content (``img``, ``meta``, ``link``)."""
    inner = el(name, "", **attrs)
    return Html(inner[: -len(f"</{name}>")])


def breakable(text: Any) -> Html:
    """Escaped text (a benchmark id) with a line-break opportunity after each ``[`` and ``,``:
    a narrow column wraps a long id there instead of widening its table past the page."""
    return Html(re.sub(r"([\[,])", r"\1<wbr>", esc(text)))


def link(href: str, *children: Any) -> Html:
    return el("a", *children, href=href)


def table(
    headers: Sequence[Any],
    rows: Iterable[Sequence[Any]],
    *,
    cls: str | None = None,
    row_classes: Sequence[str | None] | None = None,
    caption: Any = None,
) -> Html:
    """A table; cells that are numbers get the ``num`` class (right-aligned)."""
    head = el("thead", el("tr", *(el("th", h, scope="col") for h in headers)))
    body = []
    for i, row in enumerate(rows):
        cells = [
            el("td", num(c) if isinstance(c, float) else c, cls="num")
            if isinstance(c, int | float) and not isinstance(c, bool)
            else el("td", c)
            for c in row
        ]
        rcls = row_classes[i] if row_classes is not None and i < len(row_classes) else None
        body.append(el("tr", *cells, cls=rcls))
    cap = el("caption", caption) if caption is not None else ""
    return el("table", cap, head, el("tbody", *body), cls=cls)


def kv_table(pairs: Iterable[tuple[Any, Any]], cls: str = "kv") -> Html:
    return el(
        "table",
        el("tbody", *(el("tr", el("th", k, scope="row"), el("td", v)) for k, v in pairs)),
        cls=cls,
    )


MAX_DEPTH = 12
"""Nesting shown as tables; deeper values are shown as JSON text."""


def render_value(value: Any, depth: int = 0) -> Html:
    """Any JSON value as nested tables: an object as key/value rows, a list of objects as a
    table with a column per key, a list of scalars joined by commas; JSON text below
    :data:`MAX_DEPTH` levels (a file can nest deeper than a page can)."""
    if depth >= MAX_DEPTH and isinstance(value, Mapping | list | tuple):
        return el("pre", json.dumps(value, default=str)[:2000])
    if isinstance(value, Mapping):
        if not value:
            return el("span", "(empty)", cls="muted")
        return kv_table((k, render_value(v, depth + 1)) for k, v in value.items())
    if isinstance(value, list | tuple):
        if not value:
            return el("span", "(none)", cls="muted")
        if all(isinstance(v, Mapping) for v in value):
            keys: list[str] = []
            for v in value:
                keys += [k for k in v if k not in keys]
            rows = [[render_value(v.get(k), depth + 1) for k in keys] for v in value]
            return table(keys, rows, cls="inner")
        if all(not isinstance(v, Mapping | list | tuple) for v in value):
            return esc(", ".join("-" if v is None else str(v) for v in value))
        return join(el("div", render_value(v, depth + 1)) for v in value)
    if value is None:
        return el("span", "-", cls="muted")
    if isinstance(value, str) and ("\n" in value or len(value) > 160):
        return el("pre", value)
    return esc(value)


def warn_list(heading: Any, items: Iterable[Any]) -> Html:
    """A warning box: a bold heading over a list (files skipped, problems reported)."""
    return el("div", el("strong", heading), el("ul", *(el("li", i) for i in items)), cls="warn")


def details(summary: Any, *body: Any) -> Html:
    return el("details", el("summary", summary), *body)


CSS = """\
:root { --fg: #1d2430; --muted: #5b6472; --line: #d6dae1; --bg: #ffffff; --head: #f2f4f7;
        --better: #e3f4e6; --worse: #fbe4e1; --undecided: #f1f1f1; --accent: #1f5fa8; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
header { background: #16324f; color: #fff; padding: 10px 24px; }
header a { color: #fff; margin-right: 18px; text-decoration: none; font-weight: 600; }
header a:hover { text-decoration: underline; }
main { padding: 8px 24px 40px; max-width: 1500px; }
h1 { font-size: 22px; margin: 16px 0 8px; }
h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 20px 0 6px; }
a { color: var(--accent); }
table { border-collapse: collapse; margin: 6px 0 14px; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
thead th { background: var(--head); position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.kv th { background: var(--head); font-weight: 600; white-space: nowrap; }
table.inner { margin: 0; font-size: 12px; }
table.verdicts td:first-child { overflow-wrap: anywhere; min-width: 12em; }
table.verdicts td { overflow-wrap: break-word; }
tr.better td { background: var(--better); }
tr.worse td { background: var(--worse); }
tr.inconclusive td { background: var(--undecided); color: var(--muted); }
tr.failed td, tr.missing td { color: var(--muted); }
tr.consistent td { background: var(--better); }
tr.contradicted td { background: var(--worse); }
tr.undecided td { color: var(--muted); }
tr.flat td { background: var(--better); }
tr.growing td { background: var(--worse); }
.over { color: #8a4b00; font-weight: 600; }
p.undecided { background: var(--undecided); border: 1px solid var(--line); padding: 6px 10px; }
p.verdict { font-weight: 600; }
caption { caption-side: top; text-align: left; color: var(--muted); padding: 2px 0; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
pre { white-space: pre-wrap; max-width: 900px; margin: 0; }
.muted { color: var(--muted); }
.nowrap { white-space: nowrap; }
.note { color: var(--muted); margin: 2px 0; }
.warn { background: #fff6dc; border: 1px solid #ecd48a; padding: 6px 10px; margin: 8px 0; }
.modelled { font-style: italic; }
.tag { display: inline-block; border: 1px solid var(--line); border-radius: 3px;
       padding: 0 5px; margin: 0 3px 2px 0; font-size: 12px; background: var(--head); }
figure { margin: 10px 0 18px; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 12px; }
ul.plain { padding-left: 18px; }
main { overflow-wrap: break-word; }
.scroll { overflow-x: auto; max-width: 100%; }
.scroll > table { margin-bottom: 2px; }
p.csv { margin: 0 0 14px; font-size: 12px; }
.panels { display: grid; grid-template-columns: repeat(auto-fill, minmax(420px, 1fr));
          align-items: start; gap: 16px; margin: 10px 0 20px; }
.panel { border: 1px solid var(--line); border-radius: 6px; padding: 2px 14px 8px;
         background: #fbfcfd; min-width: 0; }
.panel h3 { font-size: 16px; margin: 10px 0 6px; }
.panel figure { margin: 6px 0 8px; }
.panel ul.plain { margin: 4px 0; }
p.counts { margin: 4px 0 6px; }
.count { display: inline-block; border: 1px solid var(--line); border-radius: 4px;
         padding: 1px 8px; margin: 0 4px 2px 0; background: var(--bg); }
.count.better { background: var(--better); }
.count.worse { background: var(--worse); }
.count.inconclusive { background: var(--undecided); color: var(--muted); }
.count b { font-size: 16px; }
footer { color: var(--muted); font-size: 12px; padding: 0 24px 24px; }
"""

NAV = (
    ("index.html", "Runs"),
    ("comparisons.html", "Comparisons"),
    ("history.html", "History"),
    ("profiles.html", "Profiles"),
    ("stability.html", "Stability"),
    ("releases.html", "Releases"),
    ("claims.html", "Claims"),
)


def page(title: Any, body: Any, *, depth: int = 0, generated: str = "") -> str:
    """A whole HTML document; ``depth`` is how many folders below the site root it lives."""
    up = "../" * depth
    nav = el("header", el("nav", *(link(up + href, text) for href, text in NAV)))
    foot = el("footer", f"dsbench publish · {generated}" if generated else "dsbench publish")
    return (
        "<!DOCTYPE html>\n"
        + el(
            "html",
            el(
                "head",
                void("meta", charset="utf-8"),
                void("meta", name="viewport", content="width=device-width, initial-scale=1"),
                el("title", title, " · dsbench"),
                void("link", rel="stylesheet", href=up + "style.css"),
            ),
            el("body", nav, el("main", el("h1", title), body), foot),
            lang="en",
        )
        + "\n"
    )
