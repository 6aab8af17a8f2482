"""The claims page's stability table: each claim whose mapping has a ``soak`` part
(:class:`dsbench.publish.claims.SoakSpec`) beside what every matching soak measured.

The table opens with a sentence saying what was run and what was claimed, and decides nothing: a
soak of minutes on a CPU is not a 72-hour run on GPUs, so no claim is called consistent or
contradicted by it. Where no soak matches a claim it says "not measured", and why, beside the
command that would measure it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dsbench.publish.facts import finite, prose
from dsbench.publish.html import Html, el, join, link, num, table
from dsbench.publish.soaks import (
    NAMES,
    STEP_ROW,
    SoakFile,
    as_dict,
    as_int,
    as_list,
    duration,
    fits,
    machine_text,
    rank_of,
    short_text,
    soak_files,
)
from dsbench.publish.stability import FAULT_COMMAND, PAGE, SOAK_COMMAND, interval_text
from dsbench.records import Row, value_or

if TYPE_CHECKING:
    from dsbench.publish.claims import Claim, SoakSpec
    from dsbench.publish.site import Site


def matches(soak: SoakFile, spec: SoakSpec) -> bool:
    """Whether the soak's parameters fit the spec's pattern (a value or a list per key)."""
    for key, wanted in spec.params.items():
        values = wanted if isinstance(wanted, list) else [wanted]
        if str(soak.params.get(key)) not in {str(v) for v in values}:
            return False
    return True


def failures_text(soak: SoakFile) -> str | None:
    """Failures nobody injected (a failed launch of the reference run, or a failure in the
    faulted run that no fault caused), over the time the ranks trained."""
    if not soak.launches:
        return None
    reference = [x for x in soak.launches if x.get("run") == "reference"]
    n = sum(bool(x.get("failure")) for x in reference)
    n += len(as_list(soak.faults.get("real_failures")))
    secs = soak.training_seconds()
    if n == 0:
        return f"no failure nobody injected in {duration(secs)} of training"
    per = f": one per {duration(secs / n)}" if secs is not None else ""
    return f"{n} failure(s) nobody injected in {duration(secs)} of training{per}"


def value_text(row: Row) -> str:
    """A soak row's value in words."""
    v = finite(row.value)
    name, extra = row.name, row.extra
    if v is None:
        return "no value"
    if name == "soak.resume_success":
        return (
            f"{v:.1f}% of restarts continued bit for bit ({extra.get('identical', '?')} of "
            f"{extra.get('attempted', '?')})"
        )
    if name == "soak.loss_anomalies":
        a = as_dict(extra.get("anomalies"))
        return (
            f"{v:.0f} loss anomalies (non-finite losses {a.get('nonfinite', '?')}, skipped "
            f"steps {a.get('skipped_steps', '?')}, stalls {len(as_list(a.get('stalls')))})"
        )
    if name == "soak.failures_named":
        return f"{v:.0f}% of {extra.get('injected', '?')} injected failures detected and named"
    return f"{num(v)} {value_or(row.unit, '')}"


def range_text(rows: list[Row]) -> str | None:
    """± half the range of the memory series after warm-up, the widest rank's."""
    best = None
    for row in rows:
        for _, fit in fits(row):
            series = as_dict(fit.get("series"))
            first = finite(fit.get("first_step")) or 0.0
            pairs = zip(as_list(series.get("step")), as_list(series.get("mib")), strict=False)
            after = [finite(m) for s, m in pairs if (finite(s) or 0.0) >= first]
            vals = [v for v in after if v is not None]
            if vals and (best is None or max(vals) - min(vals) > best[0]):
                best = (max(vals) - min(vals), sum(vals) / len(vals), rank_of(row))
    if best is None:
        return None
    return f"±{best[0] / 2:.3g} MiB around {best[1]:.4g} MiB (rank {best[2]}, the widest)"


def verdict_text(rows: list[Row]) -> str | None:
    """Each rank's verdict with its slope and interval."""
    parts = []
    for row in rows:
        for launch, fit in fits(row):
            who = f"rank {rank_of(row)}" + (f" {launch}" if launch else "")
            parts.append(
                f"{who}: {fit.get('verdict', '?')}, {num(finite(fit.get('slope')))} "
                f"({interval_text(fit)}) {value_or(row.unit, '')}"
            )
    return "; ".join(parts) or None


def measured_text(soak: SoakFile, spec: SoakSpec) -> str | None:
    """What ``soak`` shows for a claim, or None when it has nothing for it."""
    if spec.show == "failures":
        return failures_text(soak)
    if spec.show == "steps":
        steps, job = soak.steps_trained(), as_int(soak.settings.get("steps"))
        if steps is None:
            return None
        ref = [x for x in soak.launches if x.get("run") == "reference"]
        failed = [x for x in ref if x.get("failure")]
        status = soak.section.get("status") or "?"
        tail = f"; {len(failed)} launch(es) failed" if failed else ", no failure"
        return f"trained {steps:,}" + (f" of {job:,}" if job else "") + f" steps ({status}){tail}"
    name = next((n for n in spec.rows if any(r.ok for r in soak.row(n))), None)
    if name is None:
        return None
    rows = [r for r in soak.row(name) if r.ok]
    what = f"{NAMES[name]}: " if name in NAMES and name != STEP_ROW else ""
    if spec.show == "value":
        return value_text(rows[0])
    text = range_text(rows) if spec.show == "range" else verdict_text(rows)
    return None if text is None else what + text


_VERSION = re.compile(r"\d+\.\d+\.\d+")


def side_of(claim: Claim, soak: SoakFile) -> str:
    """`` (the claim's v0.18.4 side)`` when a DeepSpeed soak ran the version a side names."""
    found = _VERSION.search(soak.run.fields.get("deepspeed") or "")
    if soak.params.get("engine") != "deepspeed" or found is None:
        return ""
    for side in (claim.baseline, claim.contender):
        if found.group() in _VERSION.findall(side.label):
            return f" (the claim's {side.label} side)"
    return ""


def to_measure(claim: Claim) -> str:
    """The command that would give the claim a soak row: ``dsbench ab --soak`` when both sides
    name a DeepSpeed version, else one ``dsbench soak`` (with faults where the row needs them)."""
    spec = claim.dsbench.soak
    assert spec is not None
    faults = spec.show == "failures" or "soak.resume_success" in spec.rows
    soak = FAULT_COMMAND if faults else SOAK_COMMAND
    if str(spec.params.get("stage")) == "3":
        soak = soak.replace("soak_zero2", "soak_zero3")
    versions = [_VERSION.findall(s.label) for s in (claim.baseline, claim.contender)]
    if all(versions):
        args = soak.removeprefix("dsbench soak ") + " --engine deepspeed"
        return (
            f"dsbench ab --baseline deepspeed={versions[0][0]} --contender "
            f"deepspeed={versions[1][0]} --rounds 2 --soak='{args}'"
        )
    return soak


def scale_sentence(soaks: Sequence[SoakFile], claims: Sequence[Claim]) -> Html:
    """What was run beside what was claimed, plainly."""
    claimed: list[str] = []
    for c in claims:
        sc = c.scenario
        text = f"{sc.get('config', 'length not stated')} (hardware: {sc.get('hardware', '?')})"
        claimed += [text] if text not in claimed else []
    measured = "nothing: no soak result"
    if soaks:
        steps = sorted({s for x in soaks if (s := x.steps_trained()) is not None})
        span = f"{steps[0]:,}" if steps else "?"
        span += f" to {steps[-1]:,}" if len(steps) > 1 else ""
        secs = sum(x.training_seconds() or 0.0 for x in soaks)
        machines = "; ".join(sorted({machine_text(x.run) for x in soaks}))
        measured = f"{len(soaks)} soak(s) of {span} steps, {duration(secs)} of training in all, "
        measured += f"on {machines}"
    return el(
        "p", el("strong", "Measured: "), measured, ". ", el("strong", "Claimed: "),
        "; ".join(claimed), ". These are not the same runs: each soak line says what dsbench "
        "saw in the run it names, at that scale. A soak of minutes cannot give a failure rate "
        "over 72 hours and a CPU has no device memory, so nothing here calls a claim "
        "consistent or contradicted.",
    )  # fmt: skip


def not_measured(spec: SoakSpec, soaks: Sequence[SoakFile]) -> Html:
    """Why no soak has anything for the claim."""
    pattern = ", ".join(f"{k}={v}" for k, v in spec.params.items())
    matching = [s for s in soaks if matches(s, spec)]
    if not soaks:
        why = "no soak result"
    elif not matching:
        why = f"no soak result with {pattern}"
    elif spec.rows:
        why = f"the soak(s){f' with {pattern}' if pattern else ''} have no {' or '.join(spec.rows)}"
    else:
        why = "the soak(s) recorded no launches"
    return el("div", el("strong", "not measured"), f": {why}")


def claim_cells(claim: Claim, soaks: Sequence[SoakFile]) -> tuple[list[Any], bool]:
    """The claim's row, and whether any soak measured something for it."""
    spec = claim.dsbench.soak
    assert spec is not None
    lines = []
    for soak in (s for s in soaks if matches(s, spec)):
        if (text := measured_text(soak, spec)) is not None:
            name = link(f"{PAGE}#{soak.anchor}", short_text(soak))
            lines.append(el("div", name, side_of(claim, soak), ": ", text))
    measured = bool(lines)
    lines = lines or [not_measured(spec, soaks)]
    if spec.note:
        lines.append(el("div", spec.note, cls="muted"))
    label: Any = claim.label
    if claim.label_en:
        label = join([label, el("br"), el("span", claim.label_en, cls="muted")])
    section = claim.scenario.get("section") or claim.source["section"]
    claimed = f"claimed: {claim.scenario.get('config', '-')}; {claim.source['file']}, {section}"
    cells = [
        join([label, el("div", claimed, cls="muted")]),
        f"{claim.metric} ({claim.unit})",
        join([claim.baseline.label, ": ", claim.baseline.text or "-"]),
        join([claim.contender.label, ": ", claim.contender.text or "-"]),
        join(lines),
        el("code", to_measure(claim)),
    ]
    return cells, measured


HEAD = ["claim", "metric", "claimed (baseline)", "claimed (contender)",
        "measured by dsbench soak", "to measure it"]  # fmt: skip


def claims_table(site: Site, claims: Sequence[Claim]) -> list[Html]:
    """The stability claims beside the soaks (nothing when no claim maps to a soak)."""
    chosen = [c for c in claims if c.dsbench.soak is not None]
    if not chosen:
        return []
    soaks = soak_files(site.runs)
    rows, classes = [], []
    for claim in chosen:
        cells, measured = claim_cells(claim, soaks)
        rows.append(cells)
        classes.append(None if measured else "missing")
    return [
        el("h2", "Stability: the claims beside dsbench soak", id="stability"),
        scale_sentence(soaks, chosen),
        el("p", "Each soak is described on the ", link(PAGE, "stability page"), " (curves, "
           "drift, faults). ", prose("`dsbench soak` and `dsbench ab --soak` make more."),
           cls="note"),
        table(HEAD, rows, row_classes=classes, cls="verdicts"),
    ]  # fmt: skip
