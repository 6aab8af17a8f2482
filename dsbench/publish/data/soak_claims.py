"""What a soak shows for a claim whose mapping has a ``soak`` part
(:class:`dsbench.publish.data.claims.SoakSpec`): which soaks match it, what each measured in
words (a value, the range of a memory series, the drift verdicts, the steps trained, the
failures nobody injected), which side of the claim a soak ran, and the command that would
measure it. It decides nothing (the table: :mod:`dsbench.publish.pages.stability_claims`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsbench.publish.data.facts import finite, num
from dsbench.publish.data.soaks import (
    FAULT_COMMAND,
    NAMES,
    SOAK_COMMAND,
    STEP_ROW,
    SoakFile,
    as_dict,
    as_int,
    as_list,
    duration,
    fits,
    interval_text,
    rank_of,
    short_text,
)
from dsbench.records import Row, value_or

if TYPE_CHECKING:
    from dsbench.publish.data.claims import Claim, SoakSpec


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


@dataclass(frozen=True)
class SoakLine:
    """What one soak shows for a claim: ``DeepSpeed 0.18.4 · ZeRO-3 ... (the claim's v0.18.4
    side): 100.0% of restarts continued bit for bit (2 of 2)``."""

    soak: SoakFile
    side: str
    """:func:`side_of`: the claim's side the soak ran, or ``""``."""
    text: str
    """:func:`measured_text`."""

    def __str__(self) -> str:
        return f"{short_text(self.soak)}{self.side}: {self.text}"


def soak_lines(claim: Claim, soaks: Sequence[SoakFile]) -> list[SoakLine]:
    """What each soak that fits the claim's ``soak`` mapping shows for it (none: not measured,
    :func:`not_measured_why`)."""
    spec = claim.dsbench.soak
    assert spec is not None
    return [
        SoakLine(soak, side_of(claim, soak), text)
        for soak in soaks
        if matches(soak, spec) and (text := measured_text(soak, spec)) is not None
    ]


def not_measured_why(spec: SoakSpec, soaks: Sequence[SoakFile]) -> str:
    """Why no soak has anything for the claim."""
    pattern = ", ".join(f"{k}={v}" for k, v in spec.params.items())
    matching = [s for s in soaks if matches(s, spec)]
    if not soaks:
        return "no soak result"
    if not matching:
        return f"no soak result with {pattern}"
    if spec.rows:
        which = f" with {pattern}" if pattern else ""
        return f"the soak(s){which} have no {' or '.join(spec.rows)}"
    return "the soak(s) recorded no launches"
