"""The claims page's stability table: each claim whose mapping has a ``soak`` part
(:class:`dsbench.publish.data.claims.SoakSpec`) beside what every matching soak measured.

The table opens with a sentence saying what was run and what was claimed, and decides nothing: a
soak of minutes on a CPU is not a 72-hour run on GPUs, so no claim is called consistent or
contradicted by it. Where no soak matches a claim it says "not measured", and why, beside the
command that would measure it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dsbench.publish.data.soak_claims import not_measured_why, soak_lines, to_measure
from dsbench.publish.data.soaks import (
    SoakFile,
    duration,
    machine_text,
    short_text,
    soak_files,
)
from dsbench.publish.html import Html, el, join, link, table
from dsbench.publish.pages.cells import prose
from dsbench.publish.pages.stability import PAGE

if TYPE_CHECKING:
    from dsbench.publish.data.claims import Claim, SoakSpec
    from dsbench.publish.site import Site


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
    return el("div", el("strong", "not measured"), f": {not_measured_why(spec, soaks)}")


def claim_cells(claim: Claim, soaks: Sequence[SoakFile]) -> tuple[list[Any], bool]:
    """The claim's row, and whether any soak measured something for it."""
    spec = claim.dsbench.soak
    assert spec is not None
    lines = [
        el("div", link(f"{PAGE}#{x.soak.anchor}", short_text(x.soak)), x.side, ": ", x.text)
        for x in soak_lines(claim, soaks)
    ]
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
