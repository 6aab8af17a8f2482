"""``releases.html``: each sweep (``dsbench sweep``) as a series per case: every side's ratio to
the first side with its 99% interval, the confirmed steps marked on the chart and listed
("0.18.4 -> 0.18.5: x0.910 [0.880, 0.940] worse"), and the candidates that did not hold named
as such ([Note: steps found, then confirmed] in :mod:`dsbench.stats.steps`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from dsbench.publish import plots
from dsbench.publish.data.series import sweeps
from dsbench.publish.html import el, join, link, table
from dsbench.stats import judge

if TYPE_CHECKING:
    from dsbench.publish.site import Site
    from dsbench.results import Run
    from dsbench.sweep import Series

PAGE = "releases.html"
MAX_CHARTS = 12
"""Charts a sweep draws at most (its table lists every case)."""
COMMAND = "dsbench sweep --axis deepspeed=0.17.2,0.18.3..0.18.9 --suite training"


def _value(spec: str) -> str:
    return spec.partition("=")[2] or spec


def sweep_section(site: Site, sweep_id: str, runs: list[Run]) -> list[Any]:
    from dsbench.sweep import series_of

    all_series = series_of(runs)
    first = runs[0].sweep
    body: list[Any] = [
        el("h2", f"{first.axis}", id=f"sweep-{sweep_id}"),
        el("p", f"{len(runs) - len(first.failed or {})} of {len(first.sides)} sides measured, "
           f"{first.rounds} rounds, each in "
           f"a new random order; machine {runs[0].machine}, suite {runs[0].suite}. Sides: ",
           join((link(site.run_href(r, 0), _value(r.sweep.spec)) for r in
                 sorted(runs, key=lambda r: r.sweep.position)), ", "), "."),
    ]  # fmt: skip
    for spec, why in (first.failed or {}).items():
        body.append(el("p", f"{spec} could not run: {why}", cls="warn"))
    rows, charts = series_parts(site, all_series)
    shared = plots.common_part([x.case for x in all_series])
    body.append(table(["case", *(_value(x) for x in first.sides)], rows,
                      caption="ratio of each side's centre to the first side's"
                      + _shared_text(shared)))  # fmt: skip
    body += steps_lists(all_series)
    if not all(s.detected for s in all_series):
        body.append(el("p", "ruptures was not installed where this page was built: no change "
                       "point was looked for.", cls="warn"))  # fmt: skip
    cannot: dict[tuple[str, str], int] = {}
    for s in all_series:
        for spec, why in zip(s.sides, s.why, strict=True):
            if why:
                cannot[spec, why] = cannot.get((spec, why), 0) + 1
    if cannot:
        body.append(el("h3", "Not measured"))
        body.append(el("ul", *(el("li", f"{_value(spec)}: {n} case(s): {why}")
                               for (spec, why), n in cannot.items())))  # fmt: skip
    body += charts
    if len(all_series) > MAX_CHARTS:
        body.append(el("p", f"Charts for the first {MAX_CHARTS} of {len(all_series)} cases; "
                       "the table has them all."))  # fmt: skip
    return body


def _shared_text(shared: str) -> str:
    """What every case of the table has in common, for its caption."""
    if not shared:
        return ""
    if shared.startswith("["):  # several benchmarks (a timing row and its memory row)
        return f"; every case has {shared[1:-1]}"
    return f"; every case is {shared}"


def series_parts(
    site: Site, all_series: list[Series], chart_if: Callable[[Series], bool] = lambda s: True
) -> tuple[list[list[str]], list[Any]]:
    """Per series its table row (the case, then each side's ratio to the first side that ran)
    and, for at most :data:`MAX_CHARTS` of those ``chart_if`` picks, its chart: the ratios with
    their 99% intervals, steps marked."""
    rows, charts = [], []
    titles = plots.case_labels([s.case for s in all_series])
    for s, title in zip(all_series, titles, strict=True):
        base = next((r for r in s.rounds if r), None)
        points = []
        for spec, r in zip(s.sides, s.rounds, strict=True):
            if not r or base is None:
                points.append(plots.SeriesPoint(label=_value(spec), ratio=None))
                continue
            if r is base:  # the reference itself: 1, no interval
                points.append(plots.SeriesPoint(label=_value(spec), ratio=1.0))
                continue
            v = judge(base, r, direction=s.direction or "higher")
            points.append(plots.SeriesPoint(label=_value(spec), ratio=v.ratio, low=v.low,
                                            high=v.high))  # fmt: skip
        rows.append([title, *(f"{p.ratio:.3f}" if p.ratio else "—" for p in points)])
        steps = [plots.SeriesStep(before=t.before, after=t.after, ratio=t.verdict.ratio,
                                  confirmed=t.confirmed, change=t.verdict.change)
                 for t in s.steps]  # fmt: skip
        if len(charts) < MAX_CHARTS and base is not None and chart_if(s):
            name = s.case.split("[")[0]
            label = title if title.startswith(name) else f"{name} {title}"
            draw = partial(plots.series_chart, points, steps, title=label)
            charts.append(site.figure(draw, depth=0, alt=f"series of {s.case}"))
    return rows, charts


def steps_lists(all_series: list[Series]) -> list[Any]:
    """The confirmed steps, then the candidates that did not hold (if any), each case named as
    the table names it (the parameters its cases do not share)."""
    from dsbench.sweep.series import step_text

    named = list(zip(all_series, plots.case_labels([s.case for s in all_series]), strict=True))
    confirmed = [step_text(s, t, label) for s, label in named for t in s.steps if t.confirmed]
    not_held = [step_text(s, t, label) for s, label in named for t in s.steps if not t.confirmed]
    body: list[Any] = [el("h3", f"Confirmed steps ({len(confirmed)})")]
    body.append(el("ul", *(el("li", x) for x in confirmed)) if confirmed else el("p", "None."))
    if not_held:
        body.append(el("h3", f"Candidates that did not hold ({len(not_held)})"))
        body.append(el("ul", *(el("li", x) for x in not_held)))
    return body


def releases_page(site: Site) -> None:
    found = sweeps(site.runs)
    body: list[Any] = [
        el("p", "A sweep measures a series of sides (DeepSpeed releases, commits, Pythons) in "
           "interleaved rounds, each round every side once in a new random order; change "
           "points over each case's series are candidates, and a step counts only when the "
           "A/B of its two neighbours' rounds confirms it (better or worse).")
    ]  # fmt: skip
    if not found:
        body.append(el("p", "No sweep results yet: ", el("code", COMMAND), " writes one.",
                       cls="warn"))  # fmt: skip
    for sweep_id, runs in found.items():
        body += sweep_section(site, sweep_id, runs)
    site.write(PAGE, "Across releases", join(body))
