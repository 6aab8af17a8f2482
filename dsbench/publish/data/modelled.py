"""Modelled numbers beside measured ones: the cross-profile table and the roofline plot data.

Everything modelled is derived from a benchmark case's counted work (FLOPs, bytes, bytes on the
wire; :class:`dsbench.suites.Work`) and a profile's datasheet figures, never measured
(:mod:`dsbench.publish.data.floors` says how). Measured numbers come only from result files and
sit in columns named ``measured ...``; modelled ones in columns named ``modelled ...``; the two
never share a column.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dsbench.hardware import DTYPE_PEAKS, PEAK_KEYS, Profile
from dsbench.publish.data.floors import (
    ALPHA,
    LINK_NOTES,
    NOT_MODELLED,
    PEER_LINK_GBPS,
    Floor,
    case_floor,
    flops_peak_kind,
    not_modelled,
    resolve_profile,
)
from dsbench.records import CountedWork, Row, value_or
from dsbench.results import Run
from dsbench.suites import BENCHMARKS, Benchmark, Context, Work, case_id

TABLE_PROFILES = (
    "a100-40gb-sxm",
    "a100-80gb-sxm",
    "mi250x-gcd",
    "h100-sxm",
    "h200-sxm",
    "mi300x",
)
"""The profiles of the cross-profile table, in column order."""

DEFINITION_DEVICES = 8
DEFINITION_CONTEXT = Context(
    device="cuda:0", backend="cuda", suite="full", device_count=DEFINITION_DEVICES
)
"""The context the benchmark definitions are sized for when no result exists yet: a GPU node with
8 devices (8 A100/H100/H200 on NVLink/NVSwitch, 8 MI300X on Infinity Fabric, 4 MI250X = 8
GCDs), so collectives run over 8 ranks. Nothing is allocated: only ``Benchmark.work_of`` runs."""

PURE_BANDWIDTH_INTENSITY = 0.01
"""FLOP/byte at which :func:`roofline_points` draws kernels that count no FLOPs (AdamW, copy):
left of every profile's ridge point, on the bandwidth slope. Their ``plot_flops_per_s`` is the
achieved bytes/s times this intensity, so the distance below the slanted roof is the fraction of
memory bandwidth reached."""

COLUMNS_PER_PROFILE = (
    "modelled floor ms",
    "modelled floor value",
    "modelled limit",
    "modelled basis",
    "measured ms",
    "measured value",
    "measured efficiency",
    "measured run",
)
"""Second-level column names under each profile in :func:`cross_profile_table`."""

CASE_COLUMNS = ("benchmark", "params", "metric", "unit", "direction", "origin")
WORK_COLUMNS = ("flops", "bytes", "wire_bytes", "busbw_factor", "ranks", "items", "tokens")
"""Second-level column names under ``case`` and ``counted work``."""


def model_case(name: str, params: dict, profile: str | Profile) -> Floor:
    """:func:`case_floor` with the work counted by the benchmark definition's ``work_of``."""
    bench = BENCHMARKS.get(name)
    if name in NOT_MODELLED:
        return not_modelled(NOT_MODELLED[name])
    if bench is None or bench.work_of is None:
        return not_modelled(f"benchmark '{name}' cannot count its work without being built")
    try:
        work = bench.work_of(params, DEFINITION_CONTEXT)
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        return not_modelled(f"cannot count the work of {case_id(name, params)}: {exc!r}")
    return case_floor(name, params, work, profile)


# --------------------------------------------------------------------------------------------
# Measured rows
# --------------------------------------------------------------------------------------------


def run_profile_name(run: Run) -> str | None:
    return (run.profile or {}).get("name")


def measured_seconds(row: Row) -> float | None:
    """Median seconds per call of an ok row (the timing core's summary), or None."""
    if not row.ok:
        return None
    summary = row.timing.summary if row.timing else None
    median = value_or(summary.median) if summary else None
    if isinstance(median, int | float) and median > 0:
        return float(median)
    time = (row.metrics or {}).get("time")
    if time and time.unit == "ms" and isinstance(time.value, int | float):
        return float(time.value) / 1e3
    return None


def row_work(row: Row) -> Work | None:
    counted = row.work
    if not isinstance(counted, CountedWork):
        return None
    return Work(**{f.name: float(v) for f in dataclasses.fields(Work)
                   if (v := counted.get(f.name)) is not None})  # fmt: skip


def _latest_rows(runs: Iterable[Run], profile_name: str) -> dict[str, tuple[Row, Run]]:
    """Case id -> (ok row, run) from the newest run on ``profile_name`` that has it."""
    out: dict[str, tuple[Row, Run]] = {}
    ordered = sorted(runs, key=lambda r: (r.created, r.id))
    for run in ordered:
        if run_profile_name(run) != profile_name:
            continue
        for row in run.rows.values():
            if row.ok and measured_seconds(row) is not None:
                out[row.id] = (row, run)
    return out


def stored_profile(runs: Iterable[Run], name: str) -> Profile | None:
    """The profile as the newest run on ``name`` stored it with its measured figures filled in
    (e.g. the CPU's calibrated bandwidth), or None. A run that did not calibrate (``dsbench
    soak`` stores the profile uncalibrated) is passed over."""
    for run in sorted(runs, key=lambda r: (r.created, r.id), reverse=True):
        stored = run.profile or {}
        if stored.get("name") == name and "peak_tflops" in stored:
            try:
                profile = Profile.from_dict(stored)
            except (KeyError, TypeError, ValueError):
                continue
            if not any(f.measured and f.value is None for f in profile.figures().values()):
                return profile
    return None


# --------------------------------------------------------------------------------------------
# The cross-profile table
# --------------------------------------------------------------------------------------------


def _definition_suite(bench: Benchmark) -> str:
    if "full" in bench.suites:
        return "full"
    return next((s for s in bench.suites if s != "smoke"), bench.suites[0])


@dataclass
class _Case:
    id: str
    name: str
    params: dict
    work: Work | None
    origin: set[str]
    row: Row | None = None


def _cases(runs: Sequence[Run]) -> list[_Case]:
    cases: dict[str, _Case] = {}
    for bench in BENCHMARKS.values():
        if bench.work_of is None:
            continue
        for params in bench.cases(_definition_suite(bench), DEFINITION_CONTEXT):
            cid = case_id(bench.name, params)
            work = bench.work_of(params, DEFINITION_CONTEXT)
            cases[cid] = _Case(cid, bench.name, params, work, {"definition"})
    for run in runs:
        for row in run.rows.values():
            cid = row.id
            if cid in cases:
                cases[cid].origin.add("results")
                continue
            bench = BENCHMARKS.get(row.name)
            work = None
            if bench is not None and bench.work_of is not None:
                try:
                    work = bench.work_of(row.params, DEFINITION_CONTEXT)
                except (KeyError, TypeError, ValueError, AttributeError):
                    work = None
            work = work or row_work(row)
            cases[cid] = _Case(cid, row.name, dict(row.params), work, {"results"}, row)
    order = {name: i for i, name in enumerate(BENCHMARKS)}
    ranked = sorted(enumerate(cases.values()), key=lambda ic: (order.get(ic[1].name, 99), ic[0]))
    return [case for _, case in ranked]


def _unit_and_metric(case: _Case) -> tuple[str, str, str]:
    bench = BENCHMARKS.get(case.name)
    if bench is not None:
        return bench.primary.name, bench.primary.unit, bench.primary.direction
    row = case.row
    if row is None:
        return "", "", ""
    return value_or(row.metric, ""), value_or(row.unit, ""), value_or(row.direction, "")


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def assumptions() -> list[str]:
    """The modelling choices, one sentence each, for the page."""
    alphas = "; ".join(
        f"{vendor}: {a.seconds * 1e6:g} us ({a.source})" for vendor, a in ALPHA.items()
    )
    return [
        "Modelled floors are lower bounds from counted work and datasheet peaks, never "
        "measurements; measured values come only from result files of a run on that profile.",
        "Roofline: t >= max(FLOPs / peak, bytes / memory bandwidth). float16/bfloat16 use the "
        "matrix peaks, float32 the vector fp32 peak (torch's default fp32 matmul precision "
        "'highest' does not use TF32).",
        "Collectives: t ~ steps x alpha + bytes sent per rank / per-direction link bandwidth, "
        "ring steps 2(n-1) (all-reduce) or n-1 (reduce-scatter, all-gather). alpha per vendor: "
        + alphas
        + ".",
        *(f"{name}: {note}." for name, note in LINK_NOTES.items()),
        *(
            f"{name}: link = min(profile figure, (n-1) x {bw:g} GB/s): {src}."
            for name, (bw, src) in PEER_LINK_GBPS.items()
        ),
        f"Cases without results are the definitions' GPU-sized cases (suite 'full', or the "
        f"benchmark's own suite), collectives over {DEFINITION_DEVICES} ranks.",
        "Measured efficiency = modelled floor time / measured median time "
        "(= measured throughput / modelled throughput).",
        "Inference bytes count the weights once per forward pass (KV cache and activations "
        "not counted), so the decode floor is a loose lower bound.",
    ]


def cross_profile_table(
    runs: Sequence[Run], profiles: Sequence[str | Profile] = TABLE_PROFILES
) -> pd.DataFrame:
    """Every benchmark case (the definitions' GPU-sized ones and every case in ``runs``) against
    every profile: modelled floor, and measured values where a run on that profile has the case.

    Index: case id. Columns (two levels):

    * ``("case", "benchmark" | "params" | "metric" | "unit" | "direction" | "origin")`` — the
      primary metric's name, unit and direction; origin ``definition``, ``results`` or
      ``definition+results``;
    * ``("counted work", "flops" | "bytes" | "wire_bytes" | "busbw_factor" | "ranks" | "items" |
      "tokens")``: from the definition's ``work_of`` where the benchmark has one (the counting
      the current code does), else as the result row stored it;
    * per profile ``(name, c)`` for ``c`` in :data:`COLUMNS_PER_PROFILE`: ``modelled floor ms``,
      ``modelled floor value`` (primary metric at the floor, in the case's unit),
      ``modelled limit``, ``modelled basis`` (formula and inputs, or ``not modelled: why``),
      ``measured ms`` (median), ``measured value`` (primary metric median), ``measured
      efficiency`` (floor time / measured time), ``measured run`` (run id).

    ``df.attrs``: ``assumptions`` (list of str), ``not_modelled`` ({benchmark: why}), ``alpha``
    ({vendor: {seconds, source}}), ``profiles`` ({name: :func:`roofline_ceilings`}).
    """
    resolved = [resolve_profile(p) for p in profiles]
    cases = _cases(runs)
    measured = {p.name: _latest_rows(runs, p.name) for p in resolved}
    records = [
        _case_columns(case)
        | {k: v for p in resolved for k, v in _profile_columns(case, p, measured[p.name]).items()}
        for case in cases
    ]
    columns = pd.MultiIndex.from_tuples(
        [
            *(("case", c) for c in CASE_COLUMNS),
            *(("counted work", c) for c in WORK_COLUMNS),
            *((p.name, c) for p in resolved for c in COLUMNS_PER_PROFILE),
        ],
        names=["group", "field"],
    )
    df = pd.DataFrame.from_records(records, columns=columns)
    df.index = pd.Index([c.id for c in cases], name="case")
    df.attrs["assumptions"] = assumptions()
    df.attrs["not_modelled"] = dict(NOT_MODELLED)
    df.attrs["alpha"] = {v: {"seconds": a.seconds, "source": a.source} for v, a in ALPHA.items()}
    df.attrs["profiles"] = {p.name: roofline_ceilings(p) for p in resolved}
    return df


def _case_columns(case: _Case) -> dict[tuple[str, str], Any]:
    """The ``case`` and ``counted work`` columns of one case's row."""
    metric, unit, direction = _unit_and_metric(case)
    work = case.work or Work()
    return {
        ("case", "benchmark"): case.name,
        ("case", "params"): case.params,
        ("case", "metric"): metric,
        ("case", "unit"): unit,
        ("case", "direction"): direction,
        ("case", "origin"): "+".join(o for o in ("definition", "results") if o in case.origin),
        ("counted work", "flops"): work.flops,
        ("counted work", "bytes"): work.bytes,
        ("counted work", "wire_bytes"): work.wire_bytes,
        ("counted work", "busbw_factor"): work.busbw_factor,
        ("counted work", "ranks"): case.params.get("ranks", 1),
        ("counted work", "items"): work.items,
        ("counted work", "tokens"): work.tokens,
    }


def _profile_columns(
    case: _Case, profile: Profile, measured: dict[str, tuple[Row, Run]]
) -> dict[tuple[str, str], Any]:
    """One profile's :data:`COLUMNS_PER_PROFILE` of one case's row: the modelled floor, and the
    measured values where ``measured`` (the profile's newest rows) has the case."""
    floor = case_floor(case.name, case.params, case.work, profile, case.row)
    hit = measured.get(case.id)
    m_seconds = measured_seconds(hit[0]) if hit else None
    efficiency = (
        floor.seconds / m_seconds if floor.seconds is not None and m_seconds is not None else None
    )
    p = profile.name
    return {
        (p, "modelled floor ms"): _nan(floor.seconds and floor.seconds * 1e3),
        (p, "modelled floor value"): _nan(floor.value),
        (p, "modelled limit"): floor.limit,
        (p, "modelled basis"): floor.basis,
        (p, "measured ms"): _nan(m_seconds and m_seconds * 1e3),
        (p, "measured value"): _nan(value_or(hit[0].value) if hit else None),
        (p, "measured efficiency"): _nan(efficiency),
        (p, "measured run"): hit[1].id if hit else "",
    }


# --------------------------------------------------------------------------------------------
# Roofline plot data
# --------------------------------------------------------------------------------------------


def roofline_ceilings(profile: str | Profile) -> dict[str, Any]:
    """A profile's roofs in base units, for the plot.

    ``{"profile", "title", "bandwidth_Bps" (memory, bytes/s; None if the profile has none),
    "link_Bps", "peaks": {peak key: FLOP/s} (keys of ``PEAK_KEYS`` with a value; the others are
    left out and listed in "not_available"), "ridge_points": {peak key: FLOP/byte},
    "sources": {"bandwidth_Bps" | "link_Bps" | peak key: source text}, "not_available":
    {figure: reason}, "measured": [figures measured on a machine rather than read off a
    datasheet]}``. These are datasheet (or calibrated) figures, not modelled numbers.
    """
    profile = resolve_profile(profile)
    mem, link = profile.memory_bandwidth_gbps, profile.link_bandwidth_gbps
    out: dict[str, Any] = {
        "profile": profile.name,
        "title": profile.title,
        "bandwidth_Bps": mem.value * 1e9 if mem.value is not None else None,
        "link_Bps": link.value * 1e9 if link.value is not None else None,
        "peaks": {},
        "ridge_points": {},
        "sources": {"bandwidth_Bps": mem.source, "link_Bps": link.source},
        "not_available": {},
        "measured": [],
    }
    for name, fig in (("bandwidth_Bps", mem), ("link_Bps", link)):
        if fig.value is None:
            out["not_available"][name] = fig.na or "measured on the machine; no value yet"
        if fig.measured:
            out["measured"].append(name)
    for key in PEAK_KEYS:
        fig = profile.peak_tflops.get(key)
        if fig is None:
            continue
        if fig.value is None:
            out["not_available"][key] = fig.na or "measured on the machine; no value yet"
            continue
        out["peaks"][key] = fig.value * 1e12
        out["sources"][key] = fig.source
        if fig.measured:
            out["measured"].append(key)
        if out["bandwidth_Bps"]:
            out["ridge_points"][key] = out["peaks"][key] / out["bandwidth_Bps"]
    return out


def roofline_points(
    runs: Iterable[Run], profile_name: str, *, latest_only: bool = True
) -> list[dict[str, Any]]:
    """Measured kernels from runs on ``profile_name``, as points for its roofline plot.

    Kernels are ok rows that move counted bytes to and from memory and no bytes on a wire
    (GEMM, AdamW, copy, prefill, decode); collectives and training steps are left out. Each
    point: ``id``, ``name``, ``label``, ``params``, ``flops``, ``bytes``, ``seconds`` (median),
    ``intensity`` (FLOP/byte, 0 for kernels counting no FLOPs), ``bandwidth_only`` (True when
    FLOPs are 0), ``plot_intensity`` (``intensity``, or :data:`PURE_BANDWIDTH_INTENSITY` when
    bandwidth-only), ``achieved_flops_per_s``, ``achieved_bytes_per_s``, ``plot_flops_per_s``
    (achieved FLOP/s, or achieved bytes/s x plot_intensity when bandwidth-only), ``peak_key``
    (the FLOP roof that applies, None when bandwidth-only), ``run_id``, ``run_label``,
    ``created``, ``measured`` (always True). ``latest_only``: one point per case, from the
    newest run that has it.
    """
    runs = sorted(runs, key=lambda r: (r.created, r.id))
    picked: list[tuple[Row, Run]] = []
    if latest_only:
        picked = list(_latest_rows(runs, profile_name).values())
    else:
        for run in runs:
            if run_profile_name(run) == profile_name:
                picked.extend((row, run) for row in run.rows.values())
    points = []
    for row, run in picked:
        seconds, work = measured_seconds(row), row_work(row)
        if seconds is None or work is None or row.name in NOT_MODELLED:
            continue
        if work.bytes <= 0 or work.wire_bytes > 0:
            continue
        params = row.params or {}
        bandwidth_only = work.flops <= 0
        intensity = work.flops / work.bytes
        plot_intensity = PURE_BANDWIDTH_INTENSITY if bandwidth_only else intensity
        achieved_bps = work.bytes / seconds
        achieved_fps = work.flops / seconds
        kind = None if bandwidth_only else flops_peak_kind(row.name, params, row)
        peak_key = None
        if kind is not None:
            dtype = kind.removeprefix("flops:")
            peak_key = DTYPE_PEAKS.get(dtype, dtype)
        points.append(
            {
                "id": row.id,
                "name": row.name,
                "label": row.id,
                "params": params,
                "flops": work.flops,
                "bytes": work.bytes,
                "seconds": seconds,
                "intensity": intensity,
                "bandwidth_only": bandwidth_only,
                "plot_intensity": plot_intensity,
                "achieved_flops_per_s": achieved_fps,
                "achieved_bytes_per_s": achieved_bps,
                "plot_flops_per_s": achieved_bps * plot_intensity
                if bandwidth_only
                else achieved_fps,
                "peak_key": peak_key,
                "run_id": run.id,
                "run_label": run.label,
                "created": run.created,
                "measured": True,
            }
        )
    return points
