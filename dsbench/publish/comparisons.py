"""The comparisons the site publishes, and which runs each one pairs.

Each :class:`Axis` is a pair of ``dsbench compare`` selectors. Runs are grouped by source and
suite (a quick-suite run is never paired with a training run); in each group that has both
sides, :func:`dsbench.compare.pick_runs` picks the newest run of each side and
:func:`dsbench.compare.report` does the pairing, significance and direction, exactly as
``dsbench compare`` would. A parameter axis (``engine=deepspeed`` vs ``engine=dsbench``) compares
two halves of one run: the newest run in the group that holds both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from dsbench import compare
from dsbench.publish import plots
from dsbench.publish.facts import ci, finite, peak_share, run_title, short_run
from dsbench.publish.html import Html, el, join, link, num, table
from dsbench.results import Run

if TYPE_CHECKING:
    from dsbench.publish.site import Site

MAX_BARS = 40
"""Bars per chart; a comparison with more rows draws the first ones and says so."""


@dataclass(frozen=True)
class Axis:
    slug: str
    """File name of the page (``compare/<slug>.html``)."""
    title: str
    baseline: str
    """``dsbench compare`` selector of the baseline side."""
    contender: str
    how: str
    """What to run to get results for both sides."""


AXES = (
    Axis(
        "cuda-vs-rocm",
        "CUDA vs ROCm",
        "backend=cuda",
        "backend=rocm",
        "run `dsbench run` (same --suite) on an NVIDIA GPU machine and on an AMD GPU machine, "
        "then copy both machines' folders into one results folder",
    ),
    Axis(
        "python-3.11-vs-3.12",
        "Python 3.11 vs 3.12",
        "python=3.11",
        "python=3.12",
        "run `make run PYTHON=python3.11 VENV=.venv-py311` and `make run PYTHON=python3.12 "
        "VENV=.venv-py312` (or asv over both Pythons: `asv run`)",
    ),
    Axis(
        "deepspeed-0.18.3-vs-0.18.4",
        "DeepSpeed 0.18.3 vs 0.18.4",
        "deepspeed=0.18.3",
        "deepspeed=0.18.4",
        "run `pip install deepspeed==0.18.3 && dsbench run --suite training --label ds0.18.3`, "
        "then the same with 0.18.4",
    ),
    Axis(
        "engine-dsbench-vs-deepspeed",
        "dsbench engine vs DeepSpeed",
        "engine=deepspeed",
        "engine=dsbench",
        "run `dsbench run --suite training` with DeepSpeed installed (it trains on both engines)",
    ),
)


@dataclass
class Pairing:
    """One comparison inside an axis: a group of runs (source, suite) and its report."""

    group: str
    baseline: compare.Side
    contender: compare.Side
    report: compare.Report
    runs: list[Run]
    """The group's runs that match either side, oldest first (for the history chart)."""


@dataclass
class AxisResult:
    axis: Axis
    pairings: list[Pairing] = field(default_factory=list)
    param: bool = False
    """True when the axis selects rows by a benchmark parameter (both sides in one run)."""

    @property
    def has_data(self) -> bool:
        return bool(self.pairings)


def group_key(run: Run) -> tuple[str, str]:
    return run.source, str(run.doc.get("suite") or "-")


def group_name(key: tuple[str, str]) -> str:
    source, suite = key
    return f"{suite} suite" + ("" if source == "dsbench" else f" ({source})")


def groups(runs: Iterable[Run]) -> dict[tuple[str, str], list[Run]]:
    out: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        out.setdefault(group_key(run), []).append(run)
    return dict(sorted(out.items()))


def pair(axis: Axis, runs: list[Run], factor: float = 1.05) -> AxisResult:
    """Every group of ``runs`` in which both sides of ``axis`` exist, compared."""
    keys = compare.param_keys(runs)
    result = AxisResult(axis)
    for sel_text in (axis.baseline, axis.contender):
        key = sel_text.partition("=")[0]
        if key not in compare.SELECTOR_KEYS and key not in keys:
            return result  # a parameter no run has: no data
    b_sel = compare.Selector.parse(axis.baseline, keys)
    c_sel = compare.Selector.parse(axis.contender, keys)
    result.param = b_sel.param or c_sel.param
    for key, members in groups(runs).items():
        if result.param:
            both = [r for r in members if b_sel.rows(r) and c_sel.rows(r)]
            if not both:
                continue
            chosen, history = [both[-1]], both
        else:
            base_runs = [r for r in members if b_sel.matches(r)]
            cont_runs = [r for r in members if c_sel.matches(r) and r not in base_runs]
            if not base_runs or not cont_runs:
                continue
            chosen = [r for r in members if r in base_runs or r in cont_runs]
            history = chosen
        base, cont, notes = compare.pick_runs(chosen, axis.baseline, axis.contender)
        rep = compare.report(
            base,
            cont,
            axes=compare.axes_of(b_sel, c_sel),
            factor=factor,
            fmt="plain",
            notes=notes,
        )
        result.pairings.append(Pairing(group_name(key), base, cont, rep, history))
    return result


def pair_all(runs: list[Run], factor: float = 1.05) -> list[AxisResult]:
    return [pair(axis, runs, factor) for axis in AXES]


# --------------------------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------------------------


def comparison_page(site: Site, result: AxisResult) -> None:
    a = result.axis
    body = [
        el(
            "p",
            "Baseline ",
            el("code", a.baseline),
            ", contender ",
            el("code", a.contender),
            ". Ratio = contender / baseline; ↑ higher is better, ↓ lower is better.",
            cls="note",
        ),
    ]
    for p in result.pairings:
        body.append(pairing_section(site, result, p))
    site.write(f"compare/{a.slug}.html", a.title, join(body))


def pairing_section(site: Site, result: AxisResult, p: Pairing) -> Html:
    depth = 1
    base_run, cont_run = p.baseline.run, p.contender.run
    parts: list[Any] = [el("h2", p.group)]
    runs = [("baseline", base_run), ("contender", cont_run)]
    if base_run is cont_run:
        runs = [("both sides", base_run)]
    parts.append(
        el(
            "p",
            join(
                (
                    join([role, ": ", link(site.run_href(r, depth), run_title(r))])
                    for role, r in runs
                ),
                "; ",
            ),
        )
    )
    parts.append(el("ul", *(el("li", n) for n in p.report.notes), cls="plain note"))
    parts.append(el("p", el("strong", p.report.verdict)))
    parts.append(comparison_table(p))
    parts += comparison_charts(site, result, p, depth)
    return join(parts)


def comparison_table(p: Pairing) -> Html:
    rows, classes = [], []
    with_env = any(r.baseline_env or r.contender_env for r in p.report.rows)
    ids = [r.id for r in p.report.rows]
    labels = dict(zip(ids, plots.short_labels(ids), strict=True))
    common = plots.common_part(ids)
    for r in p.report.rows:
        b_lo, b_hi = ci(p.baseline.rows.get(r.id))
        c_lo, c_hi = ci(p.contender.rows.get(r.id))
        arrow = " ↑" if r.direction == "higher" else " ↓" if r.direction else ""
        row = [
            el("span", labels[r.id], title=r.id),
            f"{r.unit}{arrow}",
            finite(r.baseline),
            el("span", f"{num(b_lo)} – {num(b_hi)}", cls="nowrap") if b_lo is not None else "-",
            finite(r.contender),
            el("span", f"{num(c_lo)} – {num(c_hi)}", cls="nowrap") if c_lo is not None else "-",
            f"{r.ratio:.3f}" if finite(r.ratio) is not None else "-",
            r.change,
            r.basis,
        ]
        if with_env:
            row += [r.baseline_env, r.contender_env]
        rows.append(row)
        classes.append(
            r.change
            if r.change in ("better", "worse")
            else None
            if r.ratio is not None
            else "missing"
        )
    headers = [
        "benchmark",
        "unit",
        "baseline",
        "baseline 99% CI",
        "contender",
        "contender 99% CI",
        "ratio",
        "change",
        "test",
    ]
    if with_env:
        headers += ["baseline env", "contender env"]
    caption = join(["every row is ", el("code", common), " with:"]) if common else None
    return table(headers, rows, row_classes=classes, caption=caption)


def comparison_charts(site: Site, result: AxisResult, p: Pairing, depth: int) -> list[Html]:
    out: list[Html] = []
    b_name, c_name = (
        (result.axis.baseline, result.axis.contender)
        if result.param
        else (
            f"baseline ({short_run(p.baseline.run)})",
            f"contender ({short_run(p.contender.run)})",
        )
    )
    both = [r for r in p.report.rows if r.ratio is not None]
    by_unit: dict[str, list] = {}
    for r in both:
        by_unit.setdefault(r.unit, []).append(r)
    for unit, rows in by_unit.items():
        shown = rows[:MAX_BARS]
        labels = plots.short_labels([r.id for r in shown])
        series = []
        for name, side, attr in (
            (b_name, p.baseline, "baseline"),
            (c_name, p.contender, "contender"),
        ):
            bounds = [ci(side.rows.get(r.id)) for r in shown]
            series.append(
                plots.Series(
                    name,
                    [getattr(r, attr) for r in shown],
                    [b[0] for b in bounds],
                    [b[1] for b in bounds],
                )
            )
        more = f" (first {MAX_BARS} of {len(rows)})" if len(rows) > MAX_BARS else ""
        out.append(
            site.figure(
                partial(
                    plots.grouped_bars,
                    labels,
                    series,
                    xlabel=unit,
                    title=f"{p.group}: median, 99% CI",
                ),
                depth=depth,
                alt=f"{unit}: baseline and contender medians with 99% CI",
                caption=f"{unit}: median of each side with its 99% confidence interval{more}.",
            )
        )
    share_rows = []
    for r in p.report.rows:
        b, c = peak_share(p.baseline.rows.get(r.id)), peak_share(p.contender.rows.get(r.id))
        if b or c:
            share_rows.append((r.id, b, c))
    if share_rows:
        shown = share_rows[:MAX_BARS]
        metrics = sorted({s[1] for _, b, c in shown for s in (b, c) if s})
        labels = plots.short_labels([i for i, _, _ in shown])
        series = [
            plots.Series(b_name, [b[0] if b else None for _, b, _ in shown]),
            plots.Series(c_name, [c[0] if c else None for _, _, c in shown]),
        ]
        out.append(
            site.figure(
                partial(
                    plots.grouped_bars,
                    labels,
                    series,
                    xlabel="% of peak",
                    title=f"{p.group}: % of the profile's peak",
                    reference=100.0,
                ),
                depth=depth,
                alt="percent of peak, baseline and contender",
                caption=f"% of the hardware profile's peak, metric {', '.join(metrics)} "
                "(the peak each run's profile gives; MFU for training steps).",
            )
        )
    hist = comparison_history(result, p)
    if hist is not None:
        out.append(site.figure(hist[0], depth=depth, alt="history across runs", caption=hist[1]))
    else:
        which = "holds both sides" if result.param else "matches either side"
        out.append(el("p", f"No history yet: only one run of this group {which}.", cls="note"))
    return out


def comparison_history(result: AxisResult, p: Pairing):
    """Across the group's runs (oldest first): the value relative to the first run that has
    it, or for a parameter axis the contender/baseline ratio in each run."""
    paired = [r.id for r in p.report.rows if r.ratio is not None]
    ids = paired[: plots.MAX_LINES]
    if len(p.runs) < 2 or not ids:
        return None
    labels = plots.short_labels(ids)
    x = [short_run(r) for r in p.runs]
    if result.param:
        ratios: dict[str, list[float | None]] = {i: [] for i in ids}
        for run in p.runs:
            base, cont, _ = compare.pick_runs([run], result.axis.baseline, result.axis.contender)
            rows = {r.id: r for r in compare.compare_rows(base.rows, cont.rows)}
            for i in ids:
                ratios[i].append(finite(rows[i].ratio) if i in rows else None)
        series = [plots.Series(lab, ratios[i]) for lab, i in zip(labels, ids, strict=True)]
        ylabel, what = "contender / baseline", "the contender/baseline ratio in each run"
    else:
        series = []
        for lab, i in zip(labels, ids, strict=True):
            vals = [
                finite((r.benchmarks.get(i) or {}).get("value"))
                if (r.benchmarks.get(i) or {}).get("status") == "ok"
                else None
                for r in p.runs
            ]
            first = next((v for v in vals if v), None)
            series.append(plots.Series(lab, [v / first if v and first else None for v in vals]))
        ylabel, what = "relative to the first run", "each value relative to the first run"
    which = "hold both sides" if result.param else "match either side"
    more = f" The first {len(ids)} of {len(paired)} benchmarks." if len(paired) > len(ids) else ""
    caption = (
        f"History over the {len(p.runs)} runs of this group that {which}, oldest first: "
        f"{what}.{more}"
    )

    draw = partial(plots.history, x, series, ylabel=ylabel, log=False, title=f"{p.group}: history")
    return draw, caption
