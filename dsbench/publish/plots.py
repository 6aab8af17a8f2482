"""Charts for the published site: the sorted ratio chart that opens a comparison (each case's
ratio with its 99% interval, the ±factor band, the verdict's colour), grouped bars with 99% CI
error bars, % of peak, history across runs, the roofline, and a training step's phases against
its compute-only floor. PNG files written beside the
pages; nothing is fetched or embedded from elsewhere.

matplotlib is used without pyplot (a :class:`~matplotlib.figure.Figure` renders through Agg by
itself), so publishing never touches the global backend or leaks figures. Text taken from result
files goes through :func:`text`: ``$`` would start mathtext, so it is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy

COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
MAX_LINES = 10
"""History charts draw at most this many series; the caption says when more were left out."""


def text(value: object, limit: int = 70, *, middle: bool = False) -> str:
    """A string from a result file made safe for matplotlib: no mathtext, bounded length (cut
    at the end, or with ``middle`` in the middle, keeping the end that tells apart labels such
    as an A/B's ``...-baseline`` and ``...-contender``)."""
    s = str(value).replace("$", r"\$")  # outside mathtext a backslash is just a backslash
    s = " ".join(s.split())  # no newlines or tabs inside tick labels
    if len(s) <= limit:
        return s
    if middle:
        head = (limit - 1) // 2
        return s[:head] + "…" + s[len(s) - (limit - 1 - head) :]
    return s[: limit - 1] + "…"


def split_id(bid: str) -> tuple[str, list[str]]:
    """``name[k1=v1,k2=v2]`` -> ``("name", ["k1=v1", "k2=v2"])``."""
    name, sep, rest = bid.partition("[")
    if not sep or not rest.endswith("]"):
        return bid, []
    return name, [p for p in rest[:-1].split(",") if p]


def common_part(ids: Sequence[str]) -> str:
    """What :func:`short_labels` leaves out: ``gemm[dtype=bfloat16,impl=torch]``, or ''."""
    parts = [split_id(i) for i in ids]
    if not parts:
        return ""
    common = [p for p in parts[0][1] if all(p in q for _, q in parts[1:])]
    names = {n for n, _ in parts}
    name = names.pop() if len(names) == 1 else ""
    return name + (f"[{','.join(common)}]" if common else "")


def short_labels(ids: Sequence[str]) -> list[str]:
    """Benchmark ids without the parameters they all share (and without a shared name)."""
    parts = [split_id(i) for i in ids]
    common = set.intersection(*(set(p) for _, p in parts)) if parts else set()
    names = {n for n, _ in parts}
    out = []
    for name, params in parts:
        kept = ",".join(p for p in params if p not in common)
        if not kept:
            out.append(name)
        else:
            out.append(kept if len(names) == 1 else f"{name}[{kept}]")
    return out


def case_labels(ids: Sequence[str]) -> list[str]:
    """Like :func:`short_labels`, and where several benchmarks are mixed, each also without the
    parameters all cases of *its own* benchmark share: ``train_step[engine=dsbench,stage=1]``
    beside ``adamw[params=1000000]``. Labels stay unique: cases of one benchmark differ in
    the parameters that are kept."""
    plain = short_labels(ids)
    names = [split_id(i)[0] for i in ids]
    if len(set(names)) < 2:
        return plain
    out = []
    for i, (bid, name) in enumerate(zip(ids, names, strict=True)):
        group = [j for j, n in zip(ids, names, strict=True) if n == name]
        if len(group) < 2:
            out.append(plain[i])
            continue
        kept = short_labels(group)[group.index(bid)]
        out.append(f"{name}[{kept}]" if kept != name else name)
    return out


@dataclass(frozen=True)
class Series:
    """One set of bars (or one line): a name and a value per category; bounds for error bars."""

    name: str
    values: Sequence[float | None]
    low: Sequence[float | None] | None = None
    high: Sequence[float | None] | None = None


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100, bbox_inches="tight")
    return path


def _positive(values) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v) and v > 0]


def grouped_bars(
    categories: Sequence[str],
    series: Sequence[Series],
    path: Path,
    *,
    xlabel: str,
    title: str = "",
    reference: float | None = None,
) -> Path:
    """Horizontal grouped bars, one group per category, with asymmetric error bars from
    ``low``/``high``; a log axis when values span more than 50x; ``reference`` draws a line
    (100 % of peak) when the bars reach half of it."""
    n, k = len(categories), max(1, len(series))
    height = 0.8 / k
    fig = Figure(figsize=(9, max(2.2, 0.32 * n * k + 1.2)))
    ax = fig.add_subplot()
    for j, s in enumerate(series):
        ys = [i + (j - (k - 1) / 2) * height for i in range(n)]
        vals = [v if v is not None and math.isfinite(v) else 0.0 for v in s.values]
        err = None
        if s.low is not None and s.high is not None:
            err = [
                [
                    max(0.0, v - lo) if lo is not None else 0.0
                    for v, lo in zip(vals, s.low, strict=True)
                ],
                [
                    max(0.0, hi - v) if hi is not None else 0.0
                    for v, hi in zip(vals, s.high, strict=True)
                ],
            ]
        ax.barh(
            ys,
            vals,
            height=height * 0.95,
            xerr=err,
            capsize=2,
            label=text(s.name, 50),
            color=COLORS[j % len(COLORS)],
            error_kw={"elinewidth": 0.8},
        )
    ax.set_yticks(range(n), [text(c, 60) for c in categories], fontsize=8)
    ax.set_ylim(n - 0.5, -0.5)
    values = _positive(v for s in series for v in s.values)
    if values and max(values) / min(values) > 50:
        ax.set_xscale("log")
    if reference is not None and values and max(values) >= reference / 2:
        ax.axvline(reference, color="#444", linestyle="--", linewidth=0.8)
    ax.set_xlabel(text(xlabel))
    if title:
        ax.set_title(text(title, 100), fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=8, loc="best")
    return _save(fig, path)


VERDICT_COLORS = {
    "better": "#2e7d32",
    "worse": "#c62828",
    "unchanged": "#37474f",
    "inconclusive": "#9e9e9e",
}
"""Colours of the four verdicts (:data:`dsbench.stats.VERDICTS`): better green, worse red,
unchanged dark and neutral, inconclusive grey; the same as the comparison table's rows."""


@dataclass(frozen=True)
class RatioCase:
    """One line of the ratio chart: a case, its contender/baseline ratio and 99% interval."""

    label: str
    ratio: float
    low: float | None
    """The interval (None when the verdict had none: the dot is hollow, "no interval")."""
    high: float | None
    verdict: str


def ratio_chart(
    cases: Sequence[RatioCase],
    path: Path,
    *,
    factor: float,
    title: str = "",
    width: float = 9.0,
    legend: bool = True,
) -> Path:
    """A horizontal dot-and-whisker per case (a forest plot), sorted by ratio (largest on top),
    on a log axis: the ratio as a dot in its verdict's colour, the 99% interval as a whisker, a
    hollow dot labelled "no interval" where there is none; the band [1/factor, factor] shaded
    around 1. ``width`` inches wide (9 fits the page; an index panel's is smaller), 0.26 inch
    per case; ``legend=False`` leaves the colours to the caption."""
    shown = sorted(
        (c for c in cases if math.isfinite(c.ratio) and c.ratio > 0), key=lambda c: -c.ratio
    )
    n = len(shown)
    fig = Figure(figsize=(width, max(2.0, 0.26 * n + 1.3)))
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.axvspan(1 / factor, factor, color="#e8eaf0", zorder=0, label=f"within x{factor:g}")
    ax.axvline(1.0, color="#555", linewidth=0.8, zorder=1)
    bounds = [1 / factor, factor]
    for y, c in enumerate(shown):
        color = VERDICT_COLORS.get(c.verdict, VERDICT_COLORS["inconclusive"])
        if c.low is not None and c.high is not None and c.low > 0:
            ax.plot([c.low, c.high], [y, y], color=color, linewidth=1.6, zorder=2)
            ax.plot([c.low, c.high], [y, y], "|", color=color, markersize=6, zorder=2)
            ax.plot([c.ratio], [y], "o", color=color, markersize=5, zorder=3)
            bounds += [c.low, c.high]
        else:
            ax.plot([c.ratio], [y], "o", markerfacecolor="white", markeredgecolor=color,
                    markersize=5, zorder=3)  # fmt: skip
            ax.annotate("no interval", (c.ratio, y), xytext=(6, -3), textcoords="offset points",
                        fontsize=7, color="#666")  # fmt: skip
        bounds.append(c.ratio)
    lo, hi = min(bounds), max(bounds)
    span = (hi / lo) ** 0.08  # room for the "no interval" notes and the whisker caps
    ax.set_xlim(lo / span, hi * span * (1.6 if any(c.low is None for c in shown) else 1))
    ax.set_yticks(range(n), [text(c.label, int(8 * width)) for c in shown], fontsize=8)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlabel("contender / baseline (log scale)")
    ax.xaxis.set_major_formatter("{x:.3g}")
    ax.xaxis.set_minor_formatter("{x:.3g}")
    ax.tick_params(axis="x", which="minor", labelsize=7)
    if title:
        ax.set_title(text(title, 100), fontsize=10)
    ax.grid(axis="x", which="both", alpha=0.25)
    if not legend:
        return _save(fig, path)
    handles = [
        ax.plot([], [], "o", color=VERDICT_COLORS[v], label=v)[0]
        for v in VERDICT_COLORS
        if any(c.verdict == v for c in shown)
    ]
    if any(c.low is None for c in shown):
        handles.append(ax.plot([], [], "o", markerfacecolor="white", markeredgecolor="#666",
                               label="no interval")[0])  # fmt: skip
    band = ax.fill_between([], [], color="#e8eaf0", label=f"1/{factor:g} to x{factor:g}")
    ax.legend(handles=[*handles, band], fontsize=7, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # fmt: skip
    return _save(fig, path)


def history(
    x_labels: Sequence[str],
    series: Sequence[Series],
    path: Path,
    *,
    ylabel: str,
    title: str = "",
    log: bool | None = None,
) -> Path:
    """One line per series across runs (x: the runs, oldest first); gaps where a run lacks it."""
    fig = Figure(figsize=(max(6.0, 0.9 * len(x_labels) + 4), 4.2))
    ax = fig.add_subplot()
    xs = range(len(x_labels))
    for j, s in enumerate(series[:MAX_LINES]):
        pts = [
            (x, v) for x, v in zip(xs, s.values, strict=True) if v is not None and math.isfinite(v)
        ]
        if not pts:
            continue
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker="o",
            markersize=4,
            label=text(s.name, 50),
            color=COLORS[j % len(COLORS)],
            linestyle="-" if j < len(COLORS) else "--",
        )
    ticks = [text(x, 28, middle=True) for x in x_labels]
    ax.set_xticks(list(xs), ticks, rotation=30, ha="right", fontsize=8)
    values = _positive(v for s in series[:MAX_LINES] for v in s.values)
    if log or (log is None and values and max(values) / min(values) > 50):
        ax.set_yscale("log")
    ax.set_ylabel(text(ylabel))
    if title:
        ax.set_title(text(title, 100), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig, path)


@dataclass(frozen=True)
class RooflinePoint:
    label: str
    """Short (a number keyed to the table beside the chart): labels of nearby points overlap."""
    intensity: float
    """FLOP per byte moved."""
    flops: float
    """Achieved FLOP/s."""


def roofline(
    peaks: dict[str, float],
    bandwidth: float | None,
    points: Sequence[RooflinePoint],
    path: Path,
    *,
    title: str,
) -> Path:
    """The roofline of one profile: attainable FLOP/s = min(peak, intensity x bandwidth) for each
    peak (FLOP/s) and the memory bandwidth (B/s), log-log, with the measured kernels on it."""
    pts = [p for p in points if p.intensity > 0 and p.flops > 0]
    finite_peaks = {k: v for k, v in peaks.items() if v and math.isfinite(v) and v > 0}
    lo_i, hi_i = 1e-2, 1e4
    if pts:
        lo_i = min(lo_i, min(p.intensity for p in pts) / 3)
        hi_i = max(hi_i, max(p.intensity for p in pts) * 3)
    fig = Figure(figsize=(8, 5.2))
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [lo_i * (hi_i / lo_i) ** (i / 200) for i in range(201)]
    for j, (name, peak) in enumerate(sorted(finite_peaks.items(), key=lambda kv: -kv[1])):
        ys = [min(peak, x * bandwidth) if bandwidth else peak for x in xs]
        ax.plot(
            xs,
            ys,
            color=COLORS[j % len(COLORS)],
            linewidth=1.4,
            label=f"{text(name, 30)}: {peak / 1e12:.4g} TFLOP/s",
        )
    if bandwidth:
        ax.plot([], [], " ", label=f"memory: {bandwidth / 1e9:.4g} GB/s")
    for j, p in enumerate(pts):
        ax.plot(
            [p.intensity], [p.flops], marker="o", markersize=5, linestyle="", color="#222", zorder=5
        )
        ax.annotate(
            text(p.label, 12),
            (p.intensity, p.flops),
            fontsize=7,
            xytext=(3, 3 + 7 * (j % 3)),
            textcoords="offset points",
        )
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(text(title, 100), fontsize=10)
    ax.grid(which="both", alpha=0.25)
    if finite_peaks or bandwidth:
        ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


@dataclass(frozen=True)
class Curve:
    """One rank's series over steps in a soak, and the line fitted to it after warm-up."""

    label: str
    steps: Sequence[float]
    values: Sequence[float]
    fit: tuple[float, float, float, float] | None = None
    """``(first step, last step, value at first, value at last)`` of the fitted line, or None."""
    fit_label: str = ""


def drift_curves(
    curves: Sequence[Curve], path: Path, *, ylabel: str, warmup: float | None, title: str = ""
) -> Path:
    """A soak's series over steps, one line per rank, each with its fitted line dashed over the
    steps it was fitted to; the warm-up (left out of the fits) shaded. 9 inches wide."""
    fig = Figure(figsize=(9, 3.4))
    ax = fig.add_subplot()
    if warmup:
        ax.axvspan(0, warmup, color="#e8eaf0", zorder=0, label="warm-up (not fitted)")
    for j, c in enumerate(curves):
        color = COLORS[j % len(COLORS)]
        ax.plot(c.steps, c.values, color=color, linewidth=1.0, label=text(c.label, 40))
        if c.fit is not None:
            x0, x1, y0, y1 = c.fit
            ax.plot([x0, x1], [y0, y1], color=color, linewidth=1.8, linestyle="--",
                    label=text(c.fit_label or f"{c.label} fit", 60))  # fmt: skip
    ax.set_xlabel("step")
    ax.set_ylabel(text(ylabel))
    ax.set_xlim(left=0)
    if title:
        ax.set_title(text(title, 100), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return _save(fig, path)


@dataclass(frozen=True)
class PhaseCase:
    """One training row: milliseconds per phase of its step, its floor and its timed step."""

    label: str
    phases: dict[str, float]
    floor_ms: float | None
    step_ms: float | None


PHASE_ORDER = ("forward", "backward", "reduce_scatter", "optimizer", "allgather", "other")
PHASE_NAMES = {
    "forward": "forward",
    "backward": "backward",
    "reduce_scatter": "exposed reduce-scatter",
    "optimizer": "optimizer",
    "allgather": "exposed all-gather",
    "other": "other",
}


def phase_bars(cases: Sequence[PhaseCase], path: Path, *, title: str = "") -> Path:
    """A horizontal stacked bar per case: its step's phases in ms (medians over profiled steps),
    with the compute-only floor (black) and the timed step's median (white) marked above it."""
    n = len(cases)
    fig = Figure(figsize=(9, max(2.2, 0.32 * n + 1.5)))
    ax = fig.add_subplot()
    for y, c in enumerate(cases):
        left = 0.0
        for k, phase in enumerate(PHASE_ORDER):
            width = max(0.0, float(c.phases.get(phase) or 0.0))
            ax.barh(y, width, left=left, height=0.6, color=COLORS[k % len(COLORS)],
                    label=PHASE_NAMES[phase] if y == 0 else None)  # fmt: skip
            left += width
        # markers just above the bar, so no segment's colour hides them
        if c.floor_ms:
            ax.plot([c.floor_ms], [y - 0.42], "v", color="black", markersize=7,
                    label="compute-only floor" if y == 0 else None)  # fmt: skip
        if c.step_ms:
            ax.plot([c.step_ms], [y - 0.42], "v", markerfacecolor="white", markeredgecolor="black",
                    markersize=7, label="timed step (median)" if y == 0 else None)  # fmt: skip
    ax.set_yticks(range(n), [text(c.label, 72) for c in cases], fontsize=8)
    ax.set_ylim(n - 0.5, -0.75)
    ax.set_xlabel("ms per step")
    if title:
        ax.set_title(text(title, 100), fontsize=10)
    ax.grid(axis="x", alpha=0.25)
    # a fixed distance below the axis label, whatever the figure's height (a fraction of the
    # axes would leave a gap that grows with the number of cases)
    below = offset_copy(ax.transAxes, fig=fig, y=-30, units="points")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below,
              ncol=4, frameon=False)  # fmt: skip
    return _save(fig, path)


@dataclass(frozen=True)
class SeriesPoint:
    """One side of a sweep's series: its ratio to the first side with the 99% interval."""

    label: str
    ratio: float | None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class SeriesStep:
    """A step between two sides (their indices): confirmed, or a candidate that did not hold."""

    before: int
    after: int
    ratio: float
    confirmed: bool
    change: str


def series_chart(
    points: Sequence[SeriesPoint], steps: Sequence[SeriesStep], path: Path, *, title: str = ""
) -> Path:
    """A series over a sweep's sides (x: the sides in the axis' order): each side's ratio to
    the first on a log axis with its 99% interval, confirmed steps as a line between the two
    sides in the step's verdict colour with its ratio, candidates that did not hold dotted."""
    fig = Figure(figsize=(max(6.0, 0.6 * len(points) + 3), 3.6))
    ax = fig.add_subplot()
    ax.set_yscale("log")
    ax.axhline(1.0, color="#555", linewidth=0.8)
    for x, p in enumerate(points):
        if p.ratio is None or not (p.ratio > 0):
            continue
        if p.low is not None and p.high is not None and p.low > 0:
            ax.plot([x, x], [p.low, p.high], color=COLORS[0], linewidth=1.4)
        ax.plot([x], [p.ratio], "o", color=COLORS[0], markersize=5)
    for s in steps:
        color = VERDICT_COLORS.get(s.change, "#999") if s.confirmed else "#999"
        ax.axvline((s.before + s.after) / 2, color=color, linestyle="--" if s.confirmed else ":",
                   linewidth=1.2)  # fmt: skip
        if s.confirmed:
            ax.annotate(f"x{s.ratio:.3f}", ((s.before + s.after) / 2, 1.0), xytext=(3, 6),
                        textcoords="offset points", fontsize=8, color=color)  # fmt: skip
    ax.set_xticks(range(len(points)), [text(p.label, 16) for p in points], rotation=30,
                  ha="right", fontsize=8)  # fmt: skip
    ax.yaxis.set_major_formatter("{x:.3g}")
    ax.yaxis.set_minor_formatter("{x:.3g}")
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_ylabel("ratio to the first side (log)")
    if title:
        ax.set_title(text(title, 100), fontsize=10)
    ax.grid(alpha=0.3)
    return _save(fig, path)
