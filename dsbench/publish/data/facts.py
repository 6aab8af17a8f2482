"""Small facts about runs and rows that several pages show (names, dates, confidence intervals,
% of peak, headline numbers, numbers as a table prints them); text only, no markup."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from dsbench.records import HIGHER, MetricValue, Peak, Row, fingerprint, value_or
from dsbench.results import Run

if TYPE_CHECKING:
    from dsbench.compare import Side

BACKEND_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "cpu": "CPU"}


def finite(x: Any) -> float | None:
    if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x):
        return float(x)
    return None


def backend_name(run: Run) -> str:
    b = run.fields.get("backend")
    return BACKEND_NAMES.get(str(b).lower(), str(b)) if b else "-"


def run_title(run: Run) -> str:
    return f"{run.id}" + (f" ({run.label})" if run.label else "")


def short_run(run: Run) -> str:
    """An x-axis label: the label, else the commit and when the run started."""
    commit = run.fields.get("commit")
    if run.label:
        return run.label
    return f"{commit[:8]} {when(run.created)}" if commit else when(run.created)


def by_hardware(runs: list[Run]) -> list[tuple[str, list[Run]]]:
    """``runs`` split by the hardware they were measured on (:func:`fingerprint.classes`), in
    order, each part with its hardware's name (its newest run's); one part named ``""`` where
    all are like hardware. Two machines under one folder name never share a chart or a pair."""
    parts: dict[int, list[Run]] = {}
    for i, run in zip(fingerprint.classes([r.hardware for r in runs]), runs, strict=True):
        parts.setdefault(i, []).append(run)
    if len(parts) <= 1:
        return [("", list(runs))]
    return [(members[-1].hardware.name, members) for members in parts.values()]


def machine_labels(runs: list[Run]) -> dict[int, str]:
    """By ``id(run)``: the run's machine folder, and where that folder holds runs of more than
    one hardware, the hardware's name after it (``vm · AMD EPYC (2 CPUs, ...)``)."""
    folders: dict[str, list[Run]] = {}
    for run in runs:
        folders.setdefault(run.machine, []).append(run)
    labels = {}
    for machine, members in folders.items():
        for name, part in by_hardware(members):
            for run in part:
                labels[id(run)] = f"{machine} · {name}" if name else machine
    return labels


def run_groups(runs: list[Run]) -> list[tuple[tuple[str, str, str, str, str], list[Run]]]:
    """The runs grouped by (machine, profile, backend, Python, DeepSpeed), sorted, each group's
    runs in their order; a folder of two machines' runs is two groups (:func:`machine_labels`)."""
    grouped: dict[tuple[str, str, str, str, str], list[Run]] = {}
    machines = machine_labels(runs)
    for run in runs:
        f = run.fields
        key = (
            machines[id(run)],
            f.get("profile") or "-",
            backend_name(run),
            f.get("python") or "-",
            f.get("deepspeed") or "not installed",
        )
        grouped.setdefault(key, []).append(run)
    return sorted(grouped.items())


def side_row(side: Side, key: str) -> Row | None:
    """Row ``key`` of a comparison side; None if absent."""
    return side.rows.get(key)


def metric(row: Row | None, name: str) -> MetricValue | None:
    """The row's entry for metric ``name``, None where it has none."""
    return (row.metrics or {}).get(name) if row else None


def ci(row: Row | None) -> tuple[float | None, float | None]:
    if not row or not row.stats:
        return None, None
    return finite(row.stats.ci_low), finite(row.stats.ci_high)


def peak_share(row: Row | None) -> tuple[float, str] | None:
    """(% of peak, metric name): the primary metric's, else the first metric that has one
    (a training step's TFLOP/s per rank, whose % of peak is the MFU)."""
    if not row or not row.ok:
        return None
    if (v := finite(row.pct_of_peak)) is not None:
        return v, str(row.metric or "primary")
    for name, m in (row.metrics or {}).items():
        if (v := finite(m.pct_of_peak)) is not None:
            return v, str(name)
    return None


def peak_measured(row: Row | None) -> bool | None:
    """Whether the row's peak was measured on the machine (a CPU's calibration), if known."""
    peak = row.peak if row else None
    return value_or(peak.measured) if isinstance(peak, Peak) else None


def at_ceiling(value: float | None, interval: list[float] | None) -> bool:
    """Whether a share above 100% has a 99% interval reaching down to 100%: it cannot be told
    from the ceiling it was measured against (see :func:`dsbench.suites.ceilings.at_note`)."""
    return value is not None and value > 100.0 and bool(interval) and interval[0] <= 100.0


def headlines(run: Run) -> list[str]:
    """Per benchmark name, its best ok row: ``gemm 0.395 TFLOP/s (95.1% of peak)``; a share
    above 100% says so: ``(105.5% of the measured peak: above it)``."""
    best: dict[str, Row] = {}
    for row in run.rows.values():
        if not row.ok:
            continue
        cur = best.get(row.name)
        higher = row.direction == HIGHER
        if cur is None or (row.value > cur.value if higher else row.value < cur.value):
            best[row.name] = row
    out = []
    for name, row in best.items():
        share = peak_share(row)
        tail = ""
        if share:
            measured = peak_measured(row)
            of = "the measured peak" if measured else "peak"
            over = f" ⚠ above {'it' if measured else 'the datasheet figure'}"
            m = (row.metrics or {}).get(share[1]) if isinstance(row.metrics, dict) else None
            if at_ceiling(share[0], value_or(m.pct_ci99) if m is not None else None):
                over = ": at it, within the 99% interval"
            tail = f" ({share[0]:.1f}% of {of}{over if share[0] > 100 else ''})"
        out.append(f"{name} {num(row.value)} {value_or(row.unit, '')}{tail}")
    return out


def status_counts(run: Run) -> str:
    counts: dict[str, int] = {}
    for row in run.rows.values():
        counts[row.status] = counts.get(row.status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def when(iso: str) -> str:
    """``2026-11-30T20:55:18+00:00`` -> ``2026-11-30 20:55``: the table's date column."""
    return iso[:16].replace("T", " ") if len(iso) >= 16 and iso[10:11] == "T" else iso


def num(value: float | int | None, digits: int = 4) -> str:
    """A number for a table: 4 significant digits, ``-`` for missing or non-finite."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "-"
    return f"{value:.{digits}g}"


def pct(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.1f}%"
