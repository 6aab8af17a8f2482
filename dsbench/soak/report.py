"""What a soak found, as result rows (benchmark kind ``soak``) and the run's ``soak`` section.

Drift (see [Note: drift over a long run] in :mod:`dsbench.stats`) is fitted per rank to the
reference run's samples after warm-up, in its longest launch (one process per rank throughout):

- ``soak.memory``: host resident memory, MiB per 1,000 steps, flat below
  :data:`MEMORY_THRESHOLD`; ``soak.heap`` the same for the C heap in use
  (:func:`dsbench.measure.memory.host_heap_in_use`: live allocations, without the free blocks the
  allocator keeps resident, which make the resident set jump by 8 MiB and more either way); on
  GPUs also ``soak.device_allocated`` and ``soak.device_reserved``;
- ``soak.step_time_drift``: step time, % of the mean step time per 1,000 steps, flat below
  :data:`STEP_TIME_THRESHOLD`; ``soak.step_time`` carries the step times themselves (ms).

Each drift row's value is the slope (lower is better) and its ``drift`` holds the interval, the
threshold and the verdict. ``soak.loss_anomalies`` counts non-finite losses, skipped steps (fp16
overflow) and stalls (:data:`STALL_STEPS` or more consecutive steps with exactly the same loss).
With faults: ``soak.resume_success`` (% of the restarts that continued bit for bit, higher is
better), ``soak.failures_named`` (% of the injected failures detected and named with the right
rank and cause), ``soak.detection_time`` (seconds from a fault acting to the launcher naming it)
and, when failures nobody injected occurred, ``soak.mtbf`` (hours of training per failure).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from dsbench.records import HIGHER, LOWER, Round, Row, Stats
from dsbench.soak.run import Launch, Soak, same_loss
from dsbench.stats import Summary, Trend, drift_verdict, summarize, trend
from dsbench.suites.base import case_id

MEMORY_THRESHOLD = 1.0
"""MiB per 1,000 steps: memory whose whole 99% interval lies below this is ``flat``."""
STEP_TIME_THRESHOLD = 1.0
"""% of the mean step time per 1,000 steps: likewise for step time."""
STALL_STEPS = 20
"""This many consecutive steps with exactly the same loss are a stall."""
MIB = 2**20


def _row(name: str, params: dict, metric: str, unit: str, direction: str, **fields) -> Row:
    """A result row of benchmark ``name`` (its status and what goes with it in ``fields``;
    the keys in this order, as soaks have always written them)."""
    return Row.ordered(
        id=case_id(name, params),
        name=name,
        params=params,
        metric=metric,
        unit=unit,
        direction=direction,
        **fields,
    )


def _slope_row(name: str, params: dict, metric: str, unit: str, fit: dict) -> Row:
    """A row whose value is a slope: its stats hold the interval (``ci_exact`` False and the
    interval collapsed to the slope where there is none)."""
    s, lo, hi = fit["slope"], fit["low"], fit["high"]
    stats = Summary(
        n=fit["points"],
        median=s,
        q1=s,
        q3=s,
        iqr=0.0,
        ci_low=s if lo is None else lo,
        ci_high=s if hi is None else hi,
        ci_level=fit["level"],
        ci_exact=lo is not None,
        mean=s,
        stdev=0.0,
        min=s,
        max=s,
    )
    return _row(
        name,
        params,
        metric,
        unit,
        LOWER,
        status="ok",
        value=s,
        samples=[s],
        rounds=[Round(launch=0, n=1)],
        stats=Stats.of(stats),
        drift=fit,
    )


def _value_row(
    name: str, params: dict, metric: str, unit: str, direction: str, samples: list[float], **extra
) -> Row:
    s = summarize(samples)
    return _row(
        name,
        params,
        metric,
        unit,
        direction,
        status="ok",
        value=s.median,
        samples=samples,
        rounds=[Round(launch=0, n=len(samples))],
        stats=Stats.of(s),
        **extra,
    )


def _missing_row(
    name: str, params: dict, metric: str, unit: str, direction: str, status: str, reason: str
) -> Row:
    key = "error" if status == "failed" else "reason"
    return _row(name, params, metric, unit, direction, status=status, **{key: reason})


def fit_drift(steps, values, *, threshold: float, relative: bool = False) -> dict:
    """The slope per 1,000 steps of ``values`` (in % of their mean with ``relative``), its 99%
    interval and the verdict against ``threshold``."""
    y = np.asarray(values, float)
    t = trend(np.asarray(steps, float) / 1000.0, y)
    if relative:
        k = 100.0 / float(y.mean())
        t = dataclasses.replace(
            t,
            slope=t.slope * k,
            low=None if t.low is None else t.low * k,
            high=None if t.high is None else t.high * k,
        )
    verdict, why = drift_verdict(t, threshold)
    out = {k: (float(v) if isinstance(v, np.floating) else v) for k, v in _fields(t).items()}
    out.update(
        threshold=threshold,
        verdict=verdict,
        why=why,
        mean=float(y.mean()),
        first_step=int(steps[0]),
        last_step=int(steps[-1]),
    )
    return out


def _fields(t: Trend) -> dict:
    return {f.name: getattr(t, f.name) for f in dataclasses.fields(t)}


def drift_launch(soak: Soak) -> Launch | None:
    """The reference run's launch with the most samples: one process per rank throughout."""
    launches = [launch for launch in soak.runs("reference") if launch.samples]
    return max(launches, key=lambda launch: len(launch.samples), default=None)


def default_warmup(soak: Soak) -> int:
    """The first 10% of the steps the reference trained (at least one sample interval)."""
    launch = drift_launch(soak)
    last = launch.last_step if launch is not None and launch.last_step is not None else 0
    return max(soak.settings.sample_every, (last + 1) // 10)


def drift_rows(soak: Soak, params: dict, warmup: int) -> list[Row]:
    """Per rank: memory and step-time slopes, and the step times, from the reference run."""
    launch = drift_launch(soak)
    rows: list[Row] = []
    ranks = range(soak.settings.nproc)
    if launch is None:
        return [
            _missing_row(
                "soak.memory",
                {**params, "rank": r},
                "host RSS slope",
                "MiB/1k steps",
                LOWER,
                "interrupted",
                "no samples: the soak stopped before the first",
            )
            for r in ranks
        ]
    memory = [("soak.memory", "host RSS slope", "rss")]
    if all(s.get("heap") is not None for s in launch.samples):
        memory.append(("soak.heap", "C heap in use slope", "heap"))
    if any("device_allocated" in s for s in launch.samples):
        memory += [
            ("soak.device_allocated", "device allocated slope", "device_allocated"),
            ("soak.device_reserved", "device reserved slope", "device_reserved"),
        ]
    for r in ranks:
        mine = sorted((s for s in launch.samples if s["rank"] == r), key=lambda s: s["step"])
        after = [s for s in mine if s["step"] >= warmup]
        p = {**params, "rank": r}
        if len(after) < 3:
            why = f"{len(after)} sample(s) after the warm-up of {warmup} steps: need 3"
            rows.append(
                _missing_row(
                    "soak.memory", p, "host RSS slope", "MiB/1k steps", LOWER, "skipped", why
                )
            )
            continue
        steps = [s["step"] for s in after]
        for name, metric, key in memory:
            fit = fit_drift(steps, [s[key] / MIB for s in after], threshold=MEMORY_THRESHOLD)
            fit["series"] = {
                "step": [s["step"] for s in mine],
                "mib": [round(s[key] / MIB, 3) for s in mine],
            }
            rows.append(_slope_row(name, p, metric, "MiB/1k steps", fit))
        ms = [s["step_s"] * 1e3 for s in after]
        fit = fit_drift(steps, ms, threshold=STEP_TIME_THRESHOLD, relative=True)
        rows.append(_slope_row("soak.step_time_drift", p, "step time slope", "%/1k steps", fit))
        rows.append(
            _value_row("soak.step_time", p, "step time", "ms", LOWER, ms, sample_steps=steps)
        )
    return rows


def loss_anomalies(soak: Soak) -> dict:
    """Non-finite losses, skipped steps, stalls and the loss scale's range, over every launch."""
    nonfinite, stalls, scales, skipped = [], [], [], 0
    for launch in soak.launches:
        steps = sorted(launch.losses)
        nonfinite += [s for s in steps if not math.isfinite(launch.losses[s])]
        start = 0
        for i in range(1, len(steps) + 1):
            # NaN != NaN: a run of non-finite losses is counted as such, not as a stall
            same = i < len(steps) and launch.losses[steps[i]] == launch.losses[steps[i - 1]]
            if not same:
                if i - start >= STALL_STEPS:
                    stalls.append({"run": launch.run, "from": steps[start], "to": steps[i - 1]})
                start = i
        scales += [s["loss_scale"] for s in launch.samples if s.get("loss_scale") is not None]
        skipped = max([skipped, *(s.get("skipped_steps", 0) for s in launch.samples)])
    return {
        "nonfinite_steps": sorted(set(nonfinite))[:100],
        "nonfinite": len(set(nonfinite)),
        "skipped_steps": skipped,
        "stalls": stalls,
        "loss_scale": {"min": min(scales), "max": max(scales), "last": scales[-1]}
        if scales
        else None,
        "count": len(set(nonfinite)) + skipped + len(stalls),
        "stall_steps": STALL_STEPS,
    }


def fault_outcomes(soak: Soak) -> dict:
    """Per injected fault: fired, detected, named, detection time; per restart: bit-identical
    or not; failures nobody injected; the resume success rate."""
    world = soak.settings.nproc
    reference: dict[int, float] = {}
    for launch in soak.runs("reference"):
        reference.update(launch.losses)
    faults, resumes, real = [], [], []
    launches = soak.runs("faulted")
    for i, launch in enumerate(launches):
        if launch.fault is not None and launch.fired:
            t0 = min(f["time"] for f in launch.fired)
            detected = launch.failure is not None
            faults.append(
                {
                    **launch.fault.to_dict(),
                    "launch": i,
                    "detected": detected,
                    "named": detected and launch.fault.named_by(launch.failure, world),
                    "detection_s": round(launch.ended - t0, 3) if detected else None,
                    "message": launch.failure,
                }
            )
        elif launch.failure is not None:
            real.append(
                {
                    "launch": i,
                    "time": launch.ended,
                    "last_step": launch.last_step,
                    "message": launch.failure,
                }
            )
        if i == 0:
            continue
        resumes.append(_resume(launch, reference))
    # [Note: an A/A check for free] The faulted run's first launch starts from step 0, as the
    # reference did, and trains up to the first fault: were training not deterministic, it would
    # already differ from the reference, and no restart could be judged bit for bit.
    first = _mismatch(launches[0], reference) if launches else None
    ok = sum(r["ok"] for r in resumes)
    hours = sum((launch.ended or launch.started) - launch.started for launch in soak.launches)
    return {
        "injected": {a: sum(f["action"] == a for f in faults) for a in ("kill", "hang", "term")},
        "during_saves": sum(f["point"] != "step" for f in faults),
        "detected": sum(f["detected"] for f in faults),
        "named": sum(f["named"] for f in faults),
        "faults": faults,
        "deterministic": {
            "checked_steps": len(launches[0].losses) if launches else 0,
            "first_difference": first,
        },
        "resumes_attempted": len(resumes),
        "resumes_identical": ok,
        "resume_success_rate": 100.0 * ok / len(resumes) if resumes else None,
        "resumes": resumes,
        "real_failures": real,
        "training_hours": hours / 3600,
        "mtbf_hours": hours / 3600 / len(real) if real else None,
    }


def _mismatch(launch: Launch, reference: dict[int, float]) -> int | None:
    """The first step whose loss differs from the reference's (or that it lacks), or None."""
    steps = sorted(launch.losses)
    return next(
        (s for s in steps if s not in reference or not same_loss(launch.losses[s], reference[s])),
        None,
    )


def _resume(launch: Launch, reference: dict[int, float]) -> dict:
    """Did this restart continue as the uninterrupted reference did, bit for bit?"""
    out = {
        "launch": launch.index,
        "from_step": launch.first_step,
        "checkpoint": launch.resume,
        "steps": len(launch.losses),
    }
    mismatch = _mismatch(launch, reference)
    if launch.first_step is None or not launch.losses:
        why = f"failed before its first step: {launch.failure or 'no step reported'}"
    elif mismatch is not None:
        got, want = launch.losses[mismatch], reference.get(mismatch)
        why = f"step {mismatch}: loss {got!r}, the reference {want!r}"
    elif launch.failure is not None and not launch.fired:
        why = f"failed with no fault injected: {launch.failure}"
    else:
        why = ""
    return {**out, "ok": not why, "why": why}


def fault_rows(outcome: dict, params: dict) -> list[Row]:
    rows = []
    rate = outcome["resume_success_rate"]
    if rate is None:
        rows.append(
            _missing_row(
                "soak.resume_success",
                params,
                "resume success",
                "%",
                HIGHER,
                "skipped",
                "no restarts happened",
            )
        )
    else:
        rows.append(
            _value_row(
                "soak.resume_success",
                params,
                "resume success",
                "%",
                HIGHER,
                [rate],
                attempted=outcome["resumes_attempted"],
                identical=outcome["resumes_identical"],
            )
        )
    faults = outcome["faults"]
    if faults:
        named = 100.0 * outcome["named"] / len(faults)
        rows.append(
            _value_row(
                "soak.failures_named",
                params,
                "failures detected and named",
                "%",
                HIGHER,
                [named],
                injected=len(faults),
            )
        )
    times = [f["detection_s"] for f in faults if f["detection_s"] is not None]
    if times:
        rows.append(_value_row("soak.detection_time", params, "detection time", "s", LOWER, times))
    if outcome["mtbf_hours"] is not None:
        rows.append(
            _value_row(
                "soak.mtbf",
                params,
                "mean time between failures",
                "h",
                HIGHER,
                [outcome["mtbf_hours"]],
                failures=len(outcome["real_failures"]),
            )
        )
    return rows


def anomaly_row(anomalies: dict, params: dict) -> Row:
    return _value_row(
        "soak.loss_anomalies",
        params,
        "loss anomalies",
        "count",
        LOWER,
        [float(anomalies["count"])],
        anomalies=anomalies,
    )
