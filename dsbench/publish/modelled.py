"""Modelled numbers: roofline floors and alpha-beta estimates per hardware profile.

Everything here is *modelled*: derived from a benchmark case's counted work (FLOPs, bytes, bytes
on the wire; :class:`dsbench.suites.Work`) and a profile's datasheet figures, never measured.
Measured numbers come only from result files and sit in columns named ``measured ...``; modelled
ones in columns named ``modelled ...``; the two never share a column.

Floors (a lower bound on the time of one call, so a measured time is never below it):

* kernels (GEMM, AdamW, copy, prefill, decode):
  ``t >= max(FLOPs / peak_flops(dtype), bytes / memory_bandwidth)`` (roofline). The FLOP ceiling
  is the one the benchmark's own % of peak uses (``Profile.peak("flops:<dtype>")``): fp16 and
  bf16 on the matrix units (``fp16_matrix`` / ``bf16_matrix``), float32 on the **vector** units
  (``fp32``), because torch runs fp32 matmuls in full fp32 unless
  ``torch.backends.cuda.matmul.allow_tf32`` / ``set_float32_matmul_precision`` say otherwise,
  and dsbench leaves that at torch's default ("highest").
* collectives over n ranks (ring, as nccl-tests' bus bandwidth assumes):
  ``t ~ steps * alpha + busbw_factor * S / link_bandwidth``, steps = 2(n-1) for all-reduce and
  n-1 for reduce-scatter and all-gather, busbw_factor * S the bytes each rank sends
  (all-reduce 2(n-1)/n * S, reduce-scatter / all-gather (n-1)/n * S). alpha is the smallest
  per-step latency the vendor's own tuning model assumes (:data:`ALPHA`) and the link bandwidth
  is the profile's per-direction figure (:func:`link_bandwidth` for the MI300X mesh and the
  MI250X note): an estimate that stays a floor, because no protocol has both the lowest latency
  and the full line rate.
* training steps are not modelled (:data:`NOT_MODELLED`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dsbench.hardware import DTYPE_PEAKS, PEAK_KEYS, Profile, get_profile
from dsbench.results import Run
from dsbench.suites import BENCHMARKS, Benchmark, Context, Work, case_id
from dsbench.suites.comm import RING_STEPS

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


@dataclass(frozen=True)
class Alpha:
    """Per-step latency of a ring collective, and where the number comes from."""

    seconds: float
    source: str


ALPHA: dict[str, Alpha] = {
    "nvidia": Alpha(
        0.47e-6,
        "NCCL's tuning model (NVIDIA/nccl src/graph/tuning.cc, hwLat[NVLINK][Ring][LL] = 0.47 us "
        "per ring step; the LL protocol has the lowest latency, its base/launch latency of "
        "3.6 us is left out)",
    ),
    "amd": Alpha(
        2.3e-6,
        "RCCL's tuning model (ROCm/rccl src/graph/tuning.cc, hwLat[NVLINK = xGMI][Ring][LL] = "
        "2.3 us per ring step; base/launch latency left out)",
    ),
    "generic": Alpha(0.0, "no per-step latency is assumed for generic devices (pure bandwidth)"),
}
"""alpha of the alpha-beta model per vendor: a module constant because hardware profiles do not
carry latencies (their schema rejects unknown fields)."""

PEER_LINK_GBPS: dict[str, tuple[float, str]] = {
    "mi300x": (
        64.0,
        "AMD CDNA 3 white paper: 8 MI300X fully connected, one Infinity Fabric link of 64 GB/s "
        "per direction to each peer, 7 links = 448 GB/s in all",
    ),
}
"""Full-mesh platforms: a rank reaches each peer over its own link, so n ranks use n-1 links."""

LINK_NOTES: dict[str, str] = {
    "mi250x-gcd": (
        "200 GB/s per direction is the link between the two GCDs of one MI250X package; a ring "
        "over more than 2 GCDs also crosses packages at 50-100 GB/s per direction (OLCF Frontier "
        "guide), so for n > 2 this floor is optimistic"
    ),
}

NOT_MODELLED: dict[str, str] = {
    "train_step": (
        "not modelled: a training step is forward, backward, ZeRO collectives and the optimizer "
        "overlapped in engine-specific ways, and dsbench counts only its 6·N·T model FLOPs; the "
        "only floor those give is the 100%-MFU time, which says nothing about memory or link "
        "limits (MFU is reported with the measured rows)"
    ),
}

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


# --------------------------------------------------------------------------------------------
# Floors
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Floor:
    """A modelled lower bound on one call's time on one profile."""

    seconds: float | None
    """None when the case is not modelled (``basis`` says why)."""
    value: float | None
    """The benchmark's primary metric at the floor time (GB/s, TFLOP/s, ms ...), or None."""
    limit: str
    """What bounds it: ``compute (<peak key>)``, ``memory``, ``link``, ``latency``; '' if not
    modelled."""
    basis: str
    """The formula with its inputs, or ``not modelled: why``."""

    @property
    def modelled(self) -> bool:
        return self.seconds is not None


def _fmt_time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.4g} ms"
    return f"{seconds * 1e6:.4g} us"


def _not_modelled(why: str) -> Floor:
    return Floor(None, None, "", why if why.startswith("not modelled") else f"not modelled: {why}")


def _resolve(profile: str | Profile) -> Profile:
    return profile if isinstance(profile, Profile) else get_profile(profile)


def flops_peak_kind(name: str, params: dict, row: dict | None = None) -> str | None:
    """The ``Profile.peak`` kind for a case's FLOPs: the one its own % of peak uses."""
    bench = BENCHMARKS.get(name)
    if bench is not None:
        for metric in bench.metrics:
            if metric.peak and metric.peak.startswith("flops:"):
                try:
                    return metric.peak.format(**params)
                except (KeyError, IndexError):
                    break
    for entry in ((row or {}).get("metrics") or {}).values():
        kind = ((entry or {}).get("peak") or {}).get("kind") or ""
        if kind.startswith("flops:"):
            return kind
    if "dtype" in params:
        return f"flops:{params['dtype']}"
    return None


def link_bandwidth(profile: Profile, ranks: int) -> tuple[float | None, str]:
    """Per-direction link bandwidth (GB/s) one rank of ``ranks`` can send at, and why."""
    fig = profile.link_bandwidth_gbps
    if fig.value is None:
        return None, f"{profile.name} has no link bandwidth ({fig.na or 'not measured'})"
    if profile.name in PEER_LINK_GBPS:
        per_peer, source = PEER_LINK_GBPS[profile.name]
        bw = min(fig.value, (ranks - 1) * per_peer)
        return bw, f"min({fig.value:g}, (n-1) x {per_peer:g}) GB/s ({source})"
    note = f"; {LINK_NOTES[profile.name]}" if profile.name in LINK_NOTES else ""
    return fig.value, f"{fig.value:g} GB/s per direction{note}"


def _primary_value(name: str, work: Work, seconds: float) -> float | None:
    bench = BENCHMARKS.get(name)
    if bench is None or seconds <= 0:
        return None
    try:
        return bench.primary.value(work, seconds)
    except (ZeroDivisionError, ValueError):
        return None


def _collective_floor(name: str, params: dict, work: Work, profile: Profile) -> Floor:
    if name not in RING_STEPS:
        return _not_modelled(f"collective '{name}' has no ring model")
    n = params.get("ranks")
    if not isinstance(n, int) or n < 2:
        return _not_modelled(f"needs at least 2 ranks, the case has {n}")
    bw, link_why = link_bandwidth(profile, n)
    if bw is None:
        return _not_modelled(link_why)
    alpha = ALPHA.get(profile.vendor, ALPHA["generic"])
    steps = RING_STEPS[name](n)
    per_rank = work.busbw_factor * work.wire_bytes
    t_alpha, t_beta = steps * alpha.seconds, per_rank / (bw * 1e9)
    seconds = t_alpha + t_beta
    basis = (
        f"alpha-beta, ring over n={n}: {steps} steps x {alpha.seconds * 1e6:g} us "
        f"+ {work.busbw_factor:.4g} x {work.wire_bytes:.4g} B / {bw:g} GB/s = "
        f"{_fmt_time(t_alpha)} + {_fmt_time(t_beta)} = {_fmt_time(seconds)}; "
        f"alpha: {alpha.source}; link: {link_why}"
    )
    limit = "latency" if t_alpha > t_beta else "link"
    return Floor(seconds, _primary_value(name, work, seconds), limit, basis)


def case_floor(
    name: str, params: dict, work: Work | None, profile: str | Profile, row: dict | None = None
) -> Floor:
    """The modelled floor of one case (benchmark ``name`` with ``params`` doing ``work``)."""
    profile = _resolve(profile)
    if name in NOT_MODELLED:
        return _not_modelled(NOT_MODELLED[name])
    if work is None:
        return _not_modelled("no counted work for this case")
    if work.wire_bytes > 0:
        return _collective_floor(name, params, work, profile)
    if work.flops <= 0 and work.bytes <= 0:
        return _not_modelled("the case counts neither FLOPs nor bytes")
    terms: list[tuple[float, str, str]] = []  # (seconds, limit, text)
    if work.flops > 0:
        kind = flops_peak_kind(name, params, row)
        if kind is None:
            return _not_modelled("FLOPs are counted but no dtype says which peak applies")
        try:
            fig = profile.peak(kind)
        except ValueError as exc:
            return _not_modelled(str(exc))
        key = next((k for k, f in profile.peak_tflops.items() if f is fig), kind)
        if fig.value is None:
            return _not_modelled(f"{profile.name} has no {key} peak ({fig.na or 'not measured'})")
        t = work.flops / (fig.value * 1e12)
        text = f"{work.flops:.4g} FLOP / {fig.value:g} TFLOP/s [{key}] = {_fmt_time(t)}"
        terms.append((t, f"compute ({key})", text))
    if work.bytes > 0:
        fig = profile.memory_bandwidth_gbps
        if fig.value is None:
            return _not_modelled(
                f"{profile.name} has no memory bandwidth ({fig.na or 'not measured'})"
            )
        t = work.bytes / (fig.value * 1e9)
        terms.append((t, "memory", f"{work.bytes:.4g} B / {fig.value:g} GB/s = {_fmt_time(t)}"))
    seconds, limit, _ = max(terms)
    texts = [text for _, _, text in terms]
    basis = "roofline: " + (texts[0] if len(texts) == 1 else "max(" + ", ".join(texts) + ")")
    return Floor(seconds, _primary_value(name, work, seconds), limit, basis)


def model_case(name: str, params: dict, profile: str | Profile) -> Floor:
    """:func:`case_floor` with the work counted by the benchmark definition's ``work_of``."""
    bench = BENCHMARKS.get(name)
    if name in NOT_MODELLED:
        return _not_modelled(NOT_MODELLED[name])
    if bench is None or bench.work_of is None:
        return _not_modelled(f"benchmark '{name}' cannot count its work without being built")
    try:
        work = bench.work_of(params, DEFINITION_CONTEXT)
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        return _not_modelled(f"cannot count the work of {case_id(name, params)}: {exc!r}")
    return case_floor(name, params, work, profile)


# --------------------------------------------------------------------------------------------
# Measured rows
# --------------------------------------------------------------------------------------------


def run_profile_name(run: Run) -> str | None:
    return (run.doc.get("profile") or {}).get("name")


def measured_seconds(row: dict) -> float | None:
    """Median seconds per call of an ok row (the timing core's summary), or None."""
    if row.get("status") != "ok":
        return None
    median = (((row.get("timing") or {}).get("summary")) or {}).get("median")
    if isinstance(median, int | float) and median > 0:
        return float(median)
    time = (row.get("metrics") or {}).get("time") or {}
    if time.get("unit") == "ms" and isinstance(time.get("value"), int | float):
        return float(time["value"]) / 1e3
    return None


def row_work(row: dict) -> Work | None:
    raw = row.get("work")
    if not isinstance(raw, dict):
        return None
    names = {f.name for f in dataclasses.fields(Work)}
    return Work(**{k: float(v) for k, v in raw.items() if k in names and v is not None})


def _latest_rows(runs: Iterable[Run], profile_name: str) -> dict[str, tuple[dict, Run]]:
    """Case id -> (ok row, run) from the newest run on ``profile_name`` that has it."""
    out: dict[str, tuple[dict, Run]] = {}
    ordered = sorted(runs, key=lambda r: (r.created, r.id))
    for run in ordered:
        if run_profile_name(run) != profile_name:
            continue
        for row in run.doc.get("benchmarks", []):
            if row.get("status") == "ok" and measured_seconds(row) is not None:
                out[row["id"]] = (row, run)
    return out


def stored_profile(runs: Iterable[Run], name: str) -> Profile | None:
    """The profile as the newest run on ``name`` stored it with its measured figures filled in
    (e.g. the CPU's calibrated bandwidth), or None. A run that did not calibrate (``dsbench
    soak`` stores the profile uncalibrated) is passed over."""
    for run in sorted(runs, key=lambda r: (r.created, r.id), reverse=True):
        stored = run.doc.get("profile") or {}
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
    row: dict | None = None


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
        for row in run.doc.get("benchmarks", []):
            cid = row["id"]
            if cid in cases:
                cases[cid].origin.add("results")
                continue
            bench = BENCHMARKS.get(row["name"])
            work = None
            if bench is not None and bench.work_of is not None:
                try:
                    work = bench.work_of(row["params"], DEFINITION_CONTEXT)
                except (KeyError, TypeError, ValueError, AttributeError):
                    work = None
            work = work or row_work(row)
            cases[cid] = _Case(cid, row["name"], dict(row["params"]), work, {"results"}, row)
    order = {name: i for i, name in enumerate(BENCHMARKS)}
    ranked = sorted(enumerate(cases.values()), key=lambda ic: (order.get(ic[1].name, 99), ic[0]))
    return [case for _, case in ranked]


def _unit_and_metric(case: _Case) -> tuple[str, str, str]:
    bench = BENCHMARKS.get(case.name)
    if bench is not None:
        return bench.primary.name, bench.primary.unit, bench.primary.direction
    row = case.row or {}
    return row.get("metric", ""), row.get("unit", ""), row.get("direction", "")


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
    resolved = [_resolve(p) for p in profiles]
    cases = _cases(runs)
    measured = {p.name: _latest_rows(runs, p.name) for p in resolved}
    records: list[dict[tuple[str, str], Any]] = []
    for case in cases:
        metric, unit, direction = _unit_and_metric(case)
        work = case.work or Work()
        rec: dict[tuple[str, str], Any] = {
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
        for profile in resolved:
            floor = case_floor(case.name, case.params, case.work, profile, case.row)
            hit = measured[profile.name].get(case.id)
            m_seconds = measured_seconds(hit[0]) if hit else None
            efficiency = (
                floor.seconds / m_seconds
                if floor.seconds is not None and m_seconds is not None
                else None
            )
            p = profile.name
            rec[(p, "modelled floor ms")] = _nan(floor.seconds and floor.seconds * 1e3)
            rec[(p, "modelled floor value")] = _nan(floor.value)
            rec[(p, "modelled limit")] = floor.limit
            rec[(p, "modelled basis")] = floor.basis
            rec[(p, "measured ms")] = _nan(m_seconds and m_seconds * 1e3)
            rec[(p, "measured value")] = _nan(hit[0].get("value") if hit else None)
            rec[(p, "measured efficiency")] = _nan(efficiency)
            rec[(p, "measured run")] = hit[1].id if hit else ""
        records.append(rec)
    columns = pd.MultiIndex.from_tuples(
        [
            *(
                ("case", c)
                for c in ("benchmark", "params", "metric", "unit", "direction", "origin")
            ),
            *(
                ("counted work", c)
                for c in (
                    "flops",
                    "bytes",
                    "wire_bytes",
                    "busbw_factor",
                    "ranks",
                    "items",
                    "tokens",
                )
            ),
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
    profile = _resolve(profile)
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
    picked: list[tuple[dict, Run]] = []
    if latest_only:
        picked = list(_latest_rows(runs, profile_name).values())
    else:
        for run in runs:
            if run_profile_name(run) == profile_name:
                picked.extend((row, run) for row in run.doc.get("benchmarks", []))
    points = []
    for row, run in picked:
        seconds, work = measured_seconds(row), row_work(row)
        if seconds is None or work is None or row.get("name") in NOT_MODELLED:
            continue
        if work.bytes <= 0 or work.wire_bytes > 0:
            continue
        params = row.get("params") or {}
        bandwidth_only = work.flops <= 0
        intensity = work.flops / work.bytes
        plot_intensity = PURE_BANDWIDTH_INTENSITY if bandwidth_only else intensity
        achieved_bps = work.bytes / seconds
        achieved_fps = work.flops / seconds
        kind = None if bandwidth_only else flops_peak_kind(row["name"], params, row)
        peak_key = None
        if kind is not None:
            dtype = kind.removeprefix("flops:")
            peak_key = DTYPE_PEAKS.get(dtype, dtype)
        points.append(
            {
                "id": row["id"],
                "name": row["name"],
                "label": row["id"],
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
