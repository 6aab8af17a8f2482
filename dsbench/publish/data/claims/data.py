"""The claim dataclasses (one claim, its two sides, how dsbench measures it) and the constants
of the claim file format (see :mod:`dsbench.publish.data.claims`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from dsbench import records
from dsbench.errors import UsageError

__all__ = [
    "CONSISTENT",
    "CONTRADICTED",
    "DECISIONS",
    "DIRECTIONS",
    "FACTOR",
    "FIELDS",
    "FORMS",
    "INEQUALITIES",
    "LEVEL",
    "MEMORY_FIELD",
    "NOT_MEASURABLE",
    "QUALIFIERS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SOAK_PARAMS",
    "SOAK_ROWS",
    "SOAK_SHOWS",
    "UNDECIDED",
    "Claim",
    "ClaimError",
    "ClaimSide",
    "DsbenchMapping",
    "ModelledSpec",
    "SoakSpec",
]

SCHEMA = "dsbench-claims"
SCHEMA_VERSION = 1
FORMS = ("table", "list", "prose")
DIRECTIONS = records.DIRECTIONS
QUALIFIERS = ("~", ">", ">=", "<", "<=", "±")
INEQUALITIES = (">", ">=", "<", "<=")
"""Qualifiers that make a printed figure a bound; ``~`` (about) and ``±`` (a half-width) do not."""
CONSISTENT, CONTRADICTED, UNDECIDED, NOT_MEASURABLE = (
    "consistent", "contradicted", "not decided", "not measurable"
)  # fmt: skip
DECISIONS = (CONSISTENT, CONTRADICTED, UNDECIDED, NOT_MEASURABLE)
"""What a claim is, beside the measurement (see [Note: claims and verdicts])."""
LEVEL = 0.99
"""Confidence of a measured claim's interval."""
FACTOR = 1.05
"""The tolerance around a printed ratio: the factor of ``dsbench compare``'s verdicts."""
FIELDS = ("value", "pct_of_peak")
MEMORY_FIELD = "memory."

SOAK_SHOWS = ("value", "range", "verdict", "steps", "failures")
"""What a ``soak`` mapping shows of each matching soak (see the format above)."""
SOAK_ROWS = ("soak.memory", "soak.heap", "soak.device_allocated", "soak.device_reserved",
             "soak.step_time_drift", "soak.step_time", "soak.loss_anomalies",
             "soak.resume_success", "soak.failures_named", "soak.detection_time",
             "soak.mtbf")  # fmt: skip
"""The rows ``dsbench soak`` writes (:mod:`dsbench.soak.report`)."""
SOAK_PARAMS = frozenset(("engine", "model", "nproc", "stage", "precision", "rank"))


class ClaimError(UsageError):
    """A claim file that cannot be used. The message is one line: ``<file>: <where>: <what>``."""


@dataclass(frozen=True)
class ClaimSide:
    """One side of a claimed comparison, as the source prints it."""

    label: str
    text: str = ""
    """The printed figure, verbatim (``128 samples/sec``, ``>72h``)."""
    value: float | None = None
    qualifier: str = ""
    """``~ > >= < <= ±`` when the printed figure is not a plain number."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ModelledSpec:
    """A case to model on two profiles (for claims comparing hardware)."""

    params: dict
    baseline_profile: str
    contender_profile: str


@dataclass(frozen=True)
class SoakSpec:
    """Which soak rows the stability table sets beside a claim, and how."""

    show: str
    """One of :data:`SOAK_SHOWS`."""
    rows: tuple[str, ...] = ()
    """Soak row names, in order of preference: the first a soak has is shown."""
    params: dict = field(default_factory=dict)
    """A pattern over the soak's parameters: a value or a list of values per key."""
    note: str = ""


@dataclass(frozen=True)
class DsbenchMapping:
    """How dsbench measures a claim, or why it cannot."""

    benchmark: str | None = None
    params: dict = field(default_factory=dict)
    metric: str | None = None
    field: str = "value"
    baseline: str | None = None
    contender: str | None = None
    run: tuple[str, ...] = ()
    modelled: ModelledSpec | None = None
    note: str = ""
    not_measurable: str | None = None
    soak: SoakSpec | None = None
    """Soak rows to show beside the claim in the stability table (decides nothing)."""

    @property
    def measurable(self) -> bool:
        return self.not_measurable is None


@dataclass(frozen=True)
class Claim:
    """One claimed comparison from a published table. A claim, never a result."""

    id: str
    """``<file stem>/<claim id>``, unique across the claims folder."""
    file: str
    title: str
    title_en: str
    language: str
    source: dict
    scenario: dict
    """The file's scenario with the claim's own fields laid over it."""
    label: str
    label_en: str
    form: str
    metric: str
    unit: str
    direction: str
    baseline: ClaimSide
    contender: ClaimSide
    claimed_change: str
    claimed_ratio_given: float | None
    claimed_range: tuple[float, float] | None
    ratio_basis: str
    quote: str
    note: str
    dsbench: DsbenchMapping

    @property
    def claimed_ratio(self) -> float | None:
        """contender / baseline: as given, else from the two printed values when both are plain
        (or approximate) numbers; None when the source gives a range or a bound."""
        if self.claimed_ratio_given is not None:
            return self.claimed_ratio_given
        b, c = self.baseline, self.contender
        if b.value and c.value is not None and not {b.qualifier, c.qualifier} & set(INEQUALITIES):
            return c.value / b.value
        return None

    def source_text(self) -> str:
        return f"{self.source['file']}, section {self.source['section']}"
