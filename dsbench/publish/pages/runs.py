"""A page per run (every row, the full environment, the hardware profile) and the history page
(each benchmark across the runs of one machine and suite)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from dsbench import hardware
from dsbench.publish import plots
from dsbench.publish.data.facts import (
    at_ceiling,
    ci,
    finite,
    headlines,
    metric,
    num,
    peak_measured,
    peak_share,
    run_title,
    short_run,
)
from dsbench.publish.data.history import cases_by_name, history_groups, medians, settings
from dsbench.publish.data.pairings import group_name
from dsbench.publish.html import (
    Html,
    breakable,
    details,
    el,
    join,
    kv_table,
    link,
    render_value,
    table,
)
from dsbench.publish.pages.cells import prose, share_html
from dsbench.records import UNSET, Peak, Phases, Row, value_or
from dsbench.results import Run

if TYPE_CHECKING:
    from dsbench.publish.site import Site

SHOWN_FIELDS = frozenset(
    ("schema", "schema_version", "source", "run_id", "created", "finished", "wall_s", "machine",
     "label", "suite", "argv", "env", "profile", "benchmarks")
)  # fmt: skip
"""Run fields the run page shows in its own sections; any others are listed under "Other"."""


def run_page(site: Site, run: Run) -> None:
    record = run.record
    try:
        shown_path = run.path.relative_to(site.results_root)
    except ValueError:
        shown_path = run.path
    migrated = (
        f" (migrated from schema {run.migrated_from} on load; the file is unchanged)"
        if run.migrated_from
        else ""
    )
    facts = [
        ("run", run.id),
        ("label", run.label or "-"),
        ("purpose (manifest)", site.purpose(run) or "-"),
        ("machine", run.machine),
        ("suite", run.suite or "-"),
        ("source", run.source),
        ("created", run.created),
        ("finished", value_or(record.finished) or "-"),
        ("wall time", f"{num(w)} s" if (w := finite(run.wall_s)) is not None else "-"),
        ("result file", f"{shown_path}"),
        ("schema", f"{record.schema_version}{migrated}"),
        ("command", " ".join(map(str, run.argv or [])) or "-"),
    ]
    if run.source == "asv":
        target = (
            link("../asv/index.html", "asv's pages")
            if site.asv_copied
            else "asv's pages (run `asv publish`, then publish again)"
        )
        facts.append(
            (
                "asv",
                join(["environment ", value_or(record.asv, {}).get("env_name"), "; see ", target]),
            )
        )
    body = [kv_table(facts)]
    if heads := headlines(run):
        body += [
            el("h2", "Headline numbers"),
            el("p", join((el("span", h, cls="tag") for h in heads), " ")),
        ]
    body += [el("h2", "Benchmarks"), *peak_notes(run), rows_table(run), *phase_section(site, run)]
    body += [el("h2", "Environment"), render_value(run.env or {})]
    if run.profile:
        body += [
            el("h2", "Hardware profile"),
            details(
                f"profile {run.profile.get('name')}: every figure with its source",
                render_value(run.profile),
            ),
        ]
    extra = {k: v for k, v in record.to_json().items() if k not in SHOWN_FIELDS}  # as written
    if extra:
        body += [el("h2", "Other fields"), render_value(extra)]
    site.write(site.run_pages[id(run)], f"Run {run_title(run)}", join(body))


def phase_section(site: Site, run: Run) -> list[Html]:
    """Training rows that profiled their step: a stacked bar of its phases per case and engine,
    against the compute-only floor (dsbench.suites.step_floor)."""
    rows = [
        r for r in run.rows.values() if r.ok and r.notes and isinstance(r.notes.phases_ms, Phases)
    ]
    if not rows:
        return []
    labels = plots.case_labels([r.id for r in rows])
    cases = []
    for label, r in zip(labels, rows, strict=True):
        phases, time = r.notes.phases_ms, metric(r, "time")
        floor = value_or(r.work.floor_s) if r.work else None
        cases.append(
            plots.PhaseCase(
                label=label,
                phases={
                    k: finite(v) or 0.0
                    for k in plots.PHASE_ORDER
                    if (v := getattr(phases, k)) is not UNSET
                },
                floor_ms=finite(floor) * 1e3 if finite(floor) else None,
                step_ms=finite(time.value if time else None),
            )
        )
    notes = sorted({value_or(r.notes.phases_ms.note) for r in rows} - {None})
    caption = join([
        "Where each step's time goes, from extra steps profiled after timing (each phase's "
        "median over five steps, after one unrecorded step: forward, backward, time blocked "
        "on gradient reductions and parameter gathers, the optimizer, the rest); the black "
        "marker is the rank's compute-only floor, the white one the timed "
        "step's median. step_efficiency = floor / step. ",
        *(f"{n}. " for n in notes),
    ])  # fmt: skip
    return [
        el("h2", "Where the step's time goes"),
        site.figure(partial(plots.phase_bars, cases, title=f"{run_title(run)}: step phases"),
                    depth=1, alt="stacked bars of each training step's phases", caption=caption),
    ]  # fmt: skip


def peak_notes(run: Run) -> list[Html]:
    """What the % of peak column is measured against, and a warning naming any share above
    100% (the shares themselves are flagged in the table)."""
    rows = [r for r in run.rows.values() if peak_share(r)]
    out: list[Html] = []
    if any(isinstance(r.peak, Peak) and value_or(r.peak.row) for r in rows):
        out.append(
            el(
                "p",
                "% of peak is against ceilings measured in this run, interleaved with its "
                "benchmarks (the stream and matmul rows: the best row's 90th percentile rate), "
                "not a datasheet; the range after a share is its 99% interval, from both "
                "intervals; each share's tooltip names its ceiling.",
                cls="note",
            )
        )
    elif any(peak_measured(r) for r in rows):
        out.append(
            el(
                "p",
                "% of peak on this machine is against ceilings dsbench measured here (its cached "
                "calibration, dated in each share's tooltip: the best of several kernels and "
                "sizes), not a datasheet and not this run's.",
                cls="note",
            )
        )
    over = [
        r for r in rows
        if peak_share(r)[0] > 100
        and not at_ceiling(peak_share(r)[0], share_interval(r, peak_share(r)[1]))
    ]  # fmt: skip
    if over:
        ids = ", ".join(f"{r.id} ({peak_share(r)[0]:.1f}% ⚠)" for r in over)
        out.append(
            el(
                "p",
                el("strong", f"{len(over)} share(s) above 100%: "),
                ids,
                " — ",
                prose(hardware.over_peak_note(peak_measured(over[0]))),
                ".",
                cls="warn",
            )
        )
    return out


def share_interval(row: Row, metric: str) -> list[float] | None:
    """The 99% interval of a share of a ceiling measured in the same run, if it has one."""
    m = (row.metrics or {}).get(metric) if isinstance(row.metrics, dict) else None
    ci = value_or(m.pct_ci99) if m is not None else None
    return ci if isinstance(ci, list) and len(ci) == 2 else None


def rows_table(run: Run) -> Html:
    rows, classes = [], []
    for row in run.rows.values():
        share = peak_share(row)
        source = value_or(row.peak.source, "") if isinstance(row.peak, Peak) else ""
        interval = share_interval(row, share[1]) if share else None
        share_cell: Any = (
            share_html(share[0], peak_measured(row), f"{share[1]}: {source}", interval)
            if share
            else "-"
        )
        if interval:
            span = el("span", f" ({interval[0]:.1f}-{interval[1]:.1f})", cls="muted")
            share_cell = join([share_cell, span])
        lo, hi = ci(row)
        if row.ok:
            notes = row.notes.to_json() if row.notes else {}  # as written
            detail: Any = render_value(notes) if notes else ""
        else:
            why = row.message
            detail = (
                details(str(why).splitlines()[0][:120] if why else row.status, el("pre", why))
                if why
                else ""
            )
        rows.append(
            [
                breakable(row.id),
                row.status,
                row.metric or "-",
                finite(row.value),
                row.unit or "",
                f"{num(lo)} – {num(hi)}" if lo is not None else "-",
                share_cell,
                value_or(row.stats.n, "-") if row.stats else "-",
                detail,
            ]
        )
        classes.append(None if row.ok else "failed")
    return table(
        [
            "benchmark",
            "status",
            "metric",
            "median",
            "unit",
            "99% CI",
            "% of peak",
            "n",
            "notes / why",
        ],
        rows,
        row_classes=classes,
    )


def history_page(site: Site) -> None:
    body: list[Any] = [
        el(
            "p",
            "Each benchmark's median across the runs of one machine (one hardware "
            "fingerprint: a folder holding two machines' runs is two histories) and "
            "suite, oldest first (x: label, else commit and date); then, over the runs of "
            "several launches each, every case's steps: change points found in its series and "
            "confirmed by the A/B of the two runs beside each (as on the releases page). A "
            "sweep's sides are on the releases page.",
            cls="note",
        )
    ]
    drawn = 0
    for (source, machine, suite), members in history_groups(site.runs):
        body.append(el("h2", f"{machine} · {group_name((source, suite))}"))
        x = [short_run(r) for r in members]
        for name, ids in cases_by_name(members).items():
            if not ids:
                continue
            shown = ids[: plots.MAX_LINES]
            labels = plots.short_labels(shown)
            series = [
                plots.Series(lab, medians(members, i)) for lab, i in zip(labels, shown, strict=True)
            ]
            units = sorted(
                {str(value_or(r.rows[i].unit, "")) for r in members for i in shown if i in r.rows}
            )
            more = f"; {len(shown)} of {len(ids)} cases shown" if len(ids) > len(shown) else ""
            body.append(
                site.figure(
                    partial(plots.history, x, series, ylabel=", ".join(units), title=name),
                    depth=0,
                    alt=f"history of {name}",
                    caption=f"{name}: median per run ({', '.join(units)}){more}.",
                )
            )
            drawn += 1
        body += history_steps(site, members)
    if not drawn:
        body.append(
            el(
                "p",
                "No machine has two runs of the same suite yet: run the same "
                "suite again (e.g. after a change) to see a history.",
                cls="note",
            )
        )
    site.write("history.html", "History", join(body))


def history_steps(site: Site, members: list[Run]) -> list[Any]:
    """Per setting (:func:`dsbench.publish.data.history.settings`), the steps over its runs of
    several launches (the unit of evidence), oldest first: found, then confirmed or not held,
    with a chart per case that has a candidate."""
    from dsbench.publish.pages.series_page import series_parts, steps_lists
    from dsbench.sweep import series_over

    body: list[Any] = []
    for runs in settings(members):
        all_series = series_over([short_run(r) for r in runs], runs)
        _, charts = series_parts(site, all_series, chart_if=lambda s: bool(s.steps))
        names = ", ".join(short_run(r) for r in runs)
        body.append(el("p", f"Steps over {len(runs)} runs of several launches in one setting, "
                       f"oldest first (ratio to the first, 99% intervals): {names}.",
                       cls="note"))  # fmt: skip
        body += [*steps_lists(all_series), *charts]
    if not body:
        body.append(el("p", "Steps over runs are looked for between runs of several launches "
                       "each (dsbench ab's sides, dsbench noise) in one setting; this group has "
                       "no two such runs.", cls="note"))  # fmt: skip
    return body
