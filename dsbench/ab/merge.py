"""Merging: the launches of one side into one result document whose rows keep each launch's
samples apart (schema 3 ``rounds``)."""

from __future__ import annotations

import dataclasses
import sys
from datetime import UTC, datetime

from dsbench import results
from dsbench.ab.rounds import Launch
from dsbench.records import (
    UNSET,
    LaunchInfo,
    Memory,
    MetricValue,
    Round,
    Row,
    RunRecord,
    Stats,
    value_or,
)


def merge_launches(launches: list[Launch], **extra) -> RunRecord:
    """One run from the launches of one side: per benchmark, the launches'
    samples in order, ``rounds`` saying which launch (and which in-launch round) each came
    from, and ``value`` the geometric mean of the launches' medians."""
    from dsbench.measure.memory import max_over
    from dsbench.stats import centre, summarize

    runs = [la.run for la in launches]
    first = runs[0].record
    ids = list(dict.fromkeys(bid for run in runs for bid in run.rows))
    rows = []
    for bid in ids:
        per = [(k, run.rows.get(bid)) for k, run in enumerate(runs)]
        rows.append(merge_row(per, centre, summarize, max_over))
    finished = datetime.now(UTC)
    known = RunRecord.json_fields()
    return RunRecord(
        **{key: getattr(first, key) for key in FIRST_LAUNCH_KEYS},  # UNSET: not in first
        schema_version=results.SCHEMA_VERSION,
        run_id=results.new_run_id(datetime.fromisoformat(launches[0].started)),
        created=launches[0].started,
        finished=finished.isoformat(timespec="seconds"),
        wall_s=round(sum(la.wall_s for la in launches), 3),
        argv=sys.argv[1:],
        launches=[
            LaunchInfo(
                started=la.started,
                wall_s=round(la.wall_s, 3),
                order=la.order,
                run_id=la.run.id,
                argv=value_or(la.run.record.argv),
            )
            for la in launches
        ],
        benchmarks=tuple(rows),
        **{k: v for k, v in extra.items() if k in known},
        # each round's soak: its faults, restarts and launches
        soak_rounds=[run.record.soak for run in runs] if first.soak is not UNSET else UNSET,
        extra={k: v for k, v in extra.items() if k not in known},
        key_order=(*MERGED_RUN_KEYS, *extra, "soak_rounds"),
    )


FIRST_LAUNCH_KEYS = ("schema", "source", "machine", "suite", "env", "profile")
"""What a merged run keeps of its first launch's header (those it has)."""
MERGED_RUN_KEYS = (*FIRST_LAUNCH_KEYS, "schema_version", "run_id", "created", "finished",
                   "wall_s", "argv", "launches", "benchmarks")  # fmt: skip
"""The order of a merged run's keys (then ``merge_launches``' keywords and ``soak_rounds``)."""


HEADER_KEYS = ("id", "name", "params", "metric", "unit", "direction")
"""What a merged row that failed keeps of the launches' rows, in this order (then ``status``
and ``error``)."""
MERGED_KEYS = ("value", "samples", "rounds", "stats", "launch_values", "memory", "launch_memory",
               "launch_drifts")  # fmt: skip
"""What merging sets, in the order it comes after the first launch's own keys."""


def merge_row(per: list[tuple[int, Row | None]], centre, summarize, max_over) -> Row:
    """One benchmark's rows from each launch (None where a launch has none) as one row."""
    rows = [r for _, r in per if r is not None]
    ok = [(k, r) for k, r in per if r is not None and r.ok]
    if len(ok) < len(per):
        failed = [(k, r) for k, r in per if r is not None and r.status == "failed"]
        if failed:
            why = "; ".join(f"launch {k}: {value_or(r.error, '')}" for k, r in failed)
        elif not ok and len(rows) == len(per):
            return rows[0]  # skipped in every launch: one reason says it
        else:
            why = f"ok in {len(ok)} of {len(per)} launches only"
        head = rows[0]
        return Row(id=head.id, name=head.name, params=head.params, metric=head.metric,
                   unit=head.unit, direction=head.direction, status="failed", error=why,
                   key_order=HEADER_KEYS)  # fmt: skip
    launch_samples = [r.samples for _, r in ok]
    value = centre(launch_samples)
    row = ok[0][1]
    merged = dataclasses.replace(
        row,
        value=value,
        samples=[x for s in launch_samples for x in s],
        rounds=[
            Round(launch=k, n=n)
            for k, r in ok
            for n in ([x.n for x in r.rounds] if r.rounds else [len(r.samples)])
        ],
        stats=Stats.of(summarize([x for s in launch_samples for x in s])),
        launch_values=[r.value for _, r in ok],
        memory=Memory.from_json(
            max_over([r.memory.to_json() if isinstance(r.memory, Memory) else {} for _, r in ok])
        ),
        launch_memory=(
            [r.memory if isinstance(r.memory, Memory) else Memory() for _, r in ok]
            if any(isinstance(r.memory, Memory) for _, r in ok)
            else UNSET
        ),
        key_order=tuple(row.to_json()) + MERGED_KEYS,
    )
    if row.drift is not UNSET:  # a soak's slope: each launch's fit and verdict
        merged = dataclasses.replace(
            merged, drift=None, launch_drifts=[value_or(r.drift) for _, r in ok]
        )
    if value_or(row.pct_of_peak) is not None and row.peak and row.peak.value:
        merged = dataclasses.replace(merged, pct_of_peak=100.0 * value / row.peak.value)
    if row.metrics:  # each metric: the geometric mean over launches
        merged = dataclasses.replace(merged, metrics={
            name: _merge_metric(name, entry, ok, centre) for name, entry in row.metrics.items()
        })  # fmt: skip
    return merged


def _merge_metric(name: str, entry: MetricValue, ok: list[tuple[int, Row]], centre) -> MetricValue:
    """Metric ``name`` over the launches: the geometric mean of its values where every launch
    has a positive one, with its 99% interval over the launches (``stats.geometric_ci``) and its
    % of peak; else the first launch's, whole. Every figure describes the same value: the first
    launch's interval beside the launches' mean had put values outside their own interval."""
    from dsbench.stats import geometric_ci

    values = []
    for _, r in ok:
        m = (r.metrics or {}).get(name)
        values.append(0 if m is None else value_or(m.value, 0))
    if not all(v > 0 for v in values):
        return entry
    value = centre([[v] for v in values])
    ci = geometric_ci(values)
    merged = dataclasses.replace(entry, value=value, ci99=list(ci) if ci else entry.ci99)
    peak = value_or(entry.peak)
    if value_or(entry.pct_of_peak) is not None and peak and value_or(peak.value):
        merged = dataclasses.replace(merged, pct_of_peak=100.0 * value / peak.value)
    return merged
