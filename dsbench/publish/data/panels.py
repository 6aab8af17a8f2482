"""What each panel of the index says, as data: the published claims on an axis' topic, the
verdict counts over its pairings, the machines compared, and the decided cases its forest plot
shows (the panels: :mod:`dsbench.publish.pages.panels`)."""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

from dsbench import compare, hardware
from dsbench.publish.data.facts import finite
from dsbench.publish.data.pairings import AxisResult
from dsbench.records import ClaimCheck

if TYPE_CHECKING:
    from dsbench.publish.data.claims import Claim

VERDICTS = ("better", "worse", "unchanged", "inconclusive")
DECIDED = ("better", "worse", "unchanged")
MAX_CASES = 16
"""Rows of a panel's forest plot: the decided cases with the largest changes."""
TOPIC_WORDS = {
    "backend": ("CUDA", "ROCm", "NCCL", "RCCL"),
    "python": ("Python",),
    "deepspeed": ("DeepSpeed", "v0.18"),
}
"""Words in a claim's side labels that put it on a panel (the article's labels name what
changed even where its dsbench selectors compare one thing at a time)."""


def topic(selector: str) -> str:
    """The run field or parameter an axis selector varies (``python=3.11`` -> ``python``)."""
    return selector.partition("=")[0]


def claim_topics(claim: Claim) -> set[str]:
    """The axes' topics (:func:`topic`) a claim speaks to: the keys of its dsbench selectors
    (a bare version is DeepSpeed's; two profiles of different backends are CUDA vs ROCm), and
    the topics its side labels name."""
    m, found = claim.dsbench, set()
    sels = [s for s in (m.baseline, m.contender) if s]
    for sel in sels:
        key, sep, _ = sel.partition("=")
        found.add(key if sep else "deepspeed" if sel[:1].isdigit() else "label")
    if all(topic(s) == "profile" for s in sels) and len(sels) == 2:
        profiles = hardware.load_profiles()
        backends = {getattr(profiles.get(s.partition("=")[2]), "backend", None) for s in sels}
        if len(backends) == 2:
            found.add("backend")
    labels = f"{claim.baseline.label} {claim.contender.label}"
    found |= {t for t, words in TOPIC_WORDS.items() if any(w in labels for w in words)}
    return found


def claims_on(
    result: AxisResult, checked: list[tuple[Claim, ClaimCheck]]
) -> list[tuple[Claim, ClaimCheck]]:
    """The checked claims on the axis' topic (an A/B's own axis,
    :func:`dsbench.publish.data.axes.ab_axes`: only claims about these very two sides)."""
    a = result.axis
    if a.found:
        sides = {a.baseline, a.contender}
        return [(c, row) for c, row in checked
                if {c.dsbench.baseline, c.dsbench.contender} == sides]  # fmt: skip
    return [(c, row) for c, row in checked if topic(a.baseline) in claim_topics(c)]


def verdict_counts(result: AxisResult) -> Counter[str]:
    """The four verdicts, counted over the axis' pairings."""
    counts: Counter[str] = Counter()
    for p in result.pairings:
        counts.update({v: p.report.counts[v] for v in VERDICTS})
    return counts


def machines(result: AxisResult) -> str:
    """The machines of the compared runs, each with its device (or CPU)."""
    seen: dict[str, str] = {}
    for p in result.pairings:
        for run in (p.baseline.run, p.contender.run):
            f = run.fields
            seen.setdefault(run.machine, str(f.get("device") or f.get("cpu") or "-"))
    return "; ".join(f"{m} ({d})" for m, d in seen.items())


def decided_cases(result: AxisResult) -> tuple[list[tuple[str, compare.ComparedRow]], int]:
    """The decided cases (group, row) with a positive ratio that the forest plot shows, the
    largest changes first (at most :data:`MAX_CASES`), and how many are decided in all."""
    rows: list[tuple[str, compare.ComparedRow]] = [
        (p.group, r)
        for p in result.pairings
        for r in p.report.rows
        if r.change in DECIDED and finite(r.ratio) and r.ratio > 0
    ]
    rows.sort(key=lambda gr: -abs(math.log(gr[1].ratio)))
    return rows[:MAX_CASES], len(rows)
