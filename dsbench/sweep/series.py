"""The series of each case over a sweep's sides, its steps, and the report ``dsbench sweep``
prints: per case the ratio of every side to the first, then the confirmed steps and the
candidates that did not hold."""

from __future__ import annotations

from dataclasses import dataclass, field

from dsbench.compare import terminal
from dsbench.compare.comparison import MEMORY_UNIT, memory_id, memory_rounds
from dsbench.errors import UsageError
from dsbench.results import Run
from dsbench.stats import centre
from dsbench.stats.steps import Step, candidates, confirm


@dataclass
class Series:
    case: str
    unit: str
    direction: str
    sides: list[str]
    """Every side of the sweep, in the axis' order."""
    rounds: list[list[list[float]] | None]
    """Per side its rounds' samples; None where it has no ok row."""
    why: list[str]
    """Per side, why it has no ok row ('' where it has one)."""
    steps: list[Step] = field(default_factory=list)
    detected: bool = True
    """False when the change-point library is missing (no candidates were looked for)."""
    memory_of: str | None = None
    """For a case's peak-memory series: the case; None for any other."""

    def centres(self) -> list[float | None]:
        return [centre(r) if r else None for r in self.rounds]


def sweep_runs(runs: list[Run]) -> list[Run]:
    """The runs of one sweep, in the axis' order."""
    ids = {r.sweep.id for r in runs if r.sweep is not None}
    if len(ids) != 1 or any(r.sweep is None for r in runs):
        raise UsageError(f"the runs are not the sides of one sweep (sweeps: {sorted(ids)})")
    return sorted(runs, key=lambda r: r.sweep.position)


def series_of(runs: list[Run], *, factor: float = 1.05) -> list[Series]:
    """Per case, its series over the sweep's sides and the steps found in it."""
    runs = sweep_runs(runs)
    specs = list(runs[0].sweep.sides)
    by_spec = {r.sweep.spec: r for r in runs}
    return series_over(specs, [by_spec.get(s) for s in specs], runs[0].sweep.failed or {},
                       factor=factor)  # fmt: skip


def series_over(
    labels: list[str],
    runs: list[Run | None],
    failed: dict[str, str] | None = None,
    *,
    factor: float = 1.05,
) -> list[Series]:
    """Per case, its series over ``runs`` in the order given, with the steps found in it and
    confirmed: a sweep's sides, or one machine's runs of a suite over commits (the history
    page). None is a side that did not run (``failed[label]`` says why)."""
    failed = failed or {}
    cases = list(dict.fromkeys(bid for r in runs if r is not None for bid in r.rows))
    out = []
    for case in cases:
        rows = [r.rows.get(case) if r is not None else None for r in runs]
        ref = next((r for r in rows if r is not None and r.ok), None)
        rounds = [r.round_samples("launch") if r is not None and r.ok else None for r in rows]
        why = [
            "" if r is not None and r.ok
            else (r.message if r is not None else failed.get(s, "not run"))
            for s, r in zip(labels, rows, strict=True)
        ]  # fmt: skip
        out.append(_series(case, ref.unit if ref else "", ref.direction if ref else "", labels,
                           rounds, why, factor))  # fmt: skip
        memory = [r.peak_memory() if r is not None and r.ok else None for r in rows]
        kinds = {m[0] for m in memory if m is not None}
        if len(kinds) == 1 and sum(m is not None for m in memory) >= 2:
            m_rounds = [memory_rounds(m[1]) if m else None for m in memory]
            m_why = [w or ("" if m else "no peak memory of the case alone") for w, m in
                     zip(why, memory, strict=True)]  # fmt: skip
            out.append(_series(memory_id(case), MEMORY_UNIT, "lower", labels, m_rounds, m_why,
                               factor))  # fmt: skip
            out[-1].memory_of = case
    return out


def _series(case, unit, direction, labels, rounds, why, factor) -> Series:
    """One case's series with its steps found and confirmed (none with under two sides)."""
    s = Series(case=case, unit=unit, direction=direction, sides=labels, rounds=rounds, why=why)
    ok = [i for i, r in enumerate(rounds) if r]
    if len(ok) >= 2:
        found = candidates([rounds[i] for i in ok])
        s.detected = found is not None
        s.steps = confirm(case, [rounds[i] for i in ok], found or [], direction=direction,
                          factor=factor, index=ok)  # fmt: skip
    return s


def step_text(s: Series, step: Step, label: str | None = None) -> str:
    """One step of ``s``, named by ``label`` (default: the whole case id)."""
    v = step.verdict
    interval = f" [{v.low:.3f}, {v.high:.3f}]" if v.low is not None else ""
    what = v.change if step.confirmed else f"did not hold ({v.change})"
    return (f"{label or s.case}: {_value(s.sides[step.before])} -> {_value(s.sides[step.after])}: "
            f"x{v.ratio:.3f}{interval} {what}")  # fmt: skip


def _value(spec: str) -> str:
    return spec.partition("=")[2] or spec


def report(runs: list[Run], *, factor: float = 1.05, limit: int | None = None) -> str:
    """The series table (ratio of each side's centre to the first side's, per case) and the
    steps: confirmed ones, then candidates that did not hold; every line in ``limit`` columns
    (default: the terminal's, at most 100), the parameters every case of a benchmark shares
    above the table, and each case named as the table names it."""
    limit = limit or terminal.width()
    all_series = series_of(runs, factor=factor)
    if not all_series:
        return "no cases"
    specs = all_series[0].sides
    labels, caption = terminal.short_ids(
        [s.case for s in all_series], [s.memory_of or s.case for s in all_series]
    )
    table = []
    for s, label in zip(all_series, labels, strict=True):
        c = s.centres()
        first = next((x for x in c if x), None)
        cells = [f"{x / first:.3f}" if x and first else "—" for x in c]
        table.append([label, f"{first:.4g} {s.unit}" if first else "—", *cells])
    named = list(zip(all_series, labels, strict=True))
    confirmed = [step_text(s, t, label) for s, label in named for t in s.steps if t.confirmed]
    held_not = [step_text(s, t, label) for s, label in named for t in s.steps if not t.confirmed]
    lines = [f"confirmed steps ({len(confirmed)}):" if confirmed else "no confirmed step"]
    lines += [f"  {x}" for x in confirmed]
    if held_not:
        lines.append(f"candidates that did not hold ({len(held_not)}):")
        lines += [f"  {x}" for x in held_not]
    if not all(s.detected for s in all_series):
        lines.append("change points need ruptures (pip install ruptures): no candidate was "
                     "looked for")  # fmt: skip
    cannot: dict[tuple[str, str], int] = {}
    for s in all_series:
        for sp, w in zip(s.sides, s.why, strict=True):
            if w:
                cannot[sp, w] = cannot.get((sp, w), 0) + 1
    for (sp, w), n in cannot.items():
        lines.append(f"{sp}: {n} case(s) not measured: {w}")
    body = terminal.table(["case", "first side", *map(_value, specs)], table, limit=limit,
                          right=range(1, len(specs) + 2))  # fmt: skip
    head = "each side's ratio to the first side that ran, per case"
    # the steps (what was found) first, then the table they come from
    return "\n".join([*terminal.wrap_all([*lines, "", head, *caption], limit), body])
