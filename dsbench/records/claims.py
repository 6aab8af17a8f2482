"""A published claim beside what dsbench measured or modelled (:class:`ClaimCheck`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base import UNSET, Record, Unset
from .metrics import Direction


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class ClaimCheck(Record):
    """A published claim beside what dsbench measured or modelled: one entry of
    :func:`dsbench.publish.data.claims.check` (fields in the order it builds them)."""

    # - The claim as published
    claim: str
    """The claim's id."""
    title: str | Unset = UNSET
    """The claim's title as published."""
    title_en: str | Unset | None = UNSET
    """Its English translation, where the claim is in another language."""
    source: dict[str, Any] | Unset = UNSET
    """Where it was published (url, document, date)."""
    source_text: str | Unset = UNSET
    """``source`` in one line, for a page."""
    scenario: str | Unset | None = UNSET
    """What was run for the claim (model, hardware, settings), as published."""
    label: str | Unset = UNSET
    """What the number measures, as published."""
    label_en: str | Unset | None = UNSET
    """Its English translation."""
    form: str | Unset = UNSET
    """How the claim states its number (a ratio, a range, a change)."""
    metric: str | Unset = UNSET
    """The dsbench metric it is checked against, with its unit and direction."""
    unit: str | Unset = UNSET
    direction: Direction | Unset = UNSET
    claimed: dict[str, Any] | Unset = UNSET
    """The claim's own numbers: baseline, contender, ratio, range, change, text."""
    # - What dsbench found
    kind: str | Unset = UNSET
    """``measured``, ``modelled`` or ``none``."""
    dsbench_ratio: float | Unset | None = UNSET
    """Contender / baseline, oriented like the claim's metric."""
    interval: list[float] | Unset | None = UNSET
    """The ratio's 99% interval, oriented likewise (None: the data give none)."""
    accepted: list[float | None] | Unset | None = UNSET
    """The ratios that agree with the claim."""
    decision: str | Unset = UNSET
    """``consistent``, ``contradicted``, ``not decided`` or ``not measurable``."""
    measured: dict[str, Any] | Unset | None = UNSET
    """The measured ratio with its interval, cases, runs and confounders."""
    modelled: dict[str, Any] | Unset | None = UNSET
    """A modelled ratio (from profiles): shown, never deciding."""
    # - What to do about it
    commands: list[str] | Unset = UNSET
    """The commands that measure it."""
    problem: str | Unset | None = UNSET
    """A bad selector or an unmodellable case."""
    command: str | Unset = UNSET
    """``commands`` joined by newlines."""
    verdict: str | Unset = UNSET
    """One line."""
