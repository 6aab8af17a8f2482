"""Checking claims against what dsbench measured (result files) or modelled (profiles).

[Note: claims and verdicts]
A measured claim gets the verdict machinery of ``dsbench compare`` (:mod:`dsbench.stats`), with
the claim in place of the factor band:

- *Measured ratio and interval.* The claim's rows are paired as ``dsbench compare`` pairs them
  (a ``dsbench ab`` pair first, else :func:`dsbench.compare.pick_runs`) and
  :func:`dsbench.compare.compare_rows` gives each case its ratio and 99% interval from rounds
  (launches, or the alternating rounds of one run; the machine's noise figure when the sides
  are single launches on one machine). A claim about another metric of the same timing, or
  its % of peak, takes the primary metric's interval scaled to that field (inverted when its
  direction differs). Over n cases the claim is about their geometric mean: each case's
  interval is made at level 1 - 0.01/n (Bonferroni), and the interval of the geometric mean
  runs from the geometric mean of the lower ends to that of the upper ends. With probability
  at least 99% every case interval holds at once, and then so does this one, whatever the
  dependence between cases. A case without an interval (one round per side and no noise
  figure, one value per side, peak memory recorded once) leaves the claim without one.
- *What agrees with the claim* (:func:`accepted_range`): a printed ratio X within the same
  factor dsbench's verdicts use, [X/1.05, X·1.05] (printed figures are rounded, and 5% is the
  resolution of "unchanged"); a printed range as it stands; a bound ≥X from X/1.05 up (≤X: up to
  X·1.05).
- *Decision* (:func:`decide`): **consistent** when the whole interval lies within that range,
  **contradicted** when it lies wholly outside, **not decided** when it reaches across an edge
  or there is no interval. A modelled ratio never decides a claim.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from dsbench import compare
from dsbench.errors import UsageError
from dsbench.publish.data.claims.data import (
    CONSISTENT,
    CONTRADICTED,
    FACTOR,
    LEVEL,
    MEMORY_FIELD,
    NOT_MEASURABLE,
    UNDECIDED,
    Claim,
)
from dsbench.publish.data.claims.load import _all_param_keys, selector_problem
from dsbench.records import HIGHER, LOWER, ClaimCheck, MetricValue, Row, value_or
from dsbench.records.values import is_number
from dsbench.results import Run
from dsbench.stats import geomean

__all__ = [
    "AB_KEYS",
    "ab_side",
    "accepted_range",
    "check",
    "claimed_bound",
    "claimed_text",
    "commands",
    "decide",
]


def _fmt_ratio(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.3g}×"


def claimed_bound(claim: Claim) -> tuple[str, float] | None:
    """``(">=", x)`` or ``("<=", x)`` when the printed figures bound the ratio (contender >= x
    over baseline ~y: ratio >= x/y; a bound on the baseline flips it), else None."""
    b, c = claim.baseline, claim.contender
    if b.value and c.value is not None:
        lower = c.qualifier in (">", ">=") or b.qualifier in ("<", "<=")
        upper = c.qualifier in ("<", "<=") or b.qualifier in (">", ">=")
        if lower != upper:
            return (">=" if lower else "<="), c.value / b.value
    return None


def claimed_text(claim: Claim) -> str:
    """The claim in one phrase: ``claimed 1.08×``, ``claimed 0.98–1.02×``, ``claimed >8.28×``."""
    if claim.claimed_range is not None:
        lo, hi = claim.claimed_range
        return f"claimed {lo:g}–{hi:g}×"
    ratio = claim.claimed_ratio
    if ratio is not None:
        return f"claimed {_fmt_ratio(ratio)}"
    if (bound := claimed_bound(claim)) is not None:
        return f"claimed {'≥' if bound[0] == '>=' else '≤'}{_fmt_ratio(bound[1])}"
    b, c = claim.baseline, claim.contender
    return f"claimed {b.text or b.label} → {c.text or c.label}"


def accepted_range(claim: Claim, factor: float = FACTOR) -> tuple[float, float] | None:
    """The ratios that agree with the claim (see [Note: claims and verdicts]): the printed
    ratio ÷/× ``factor``, a printed range as it stands, a bound from bound ÷ ``factor`` on (or
    up to bound × ``factor``); None when the claim gives no ratio."""
    if claim.claimed_range is not None:
        return claim.claimed_range
    if (ratio := claim.claimed_ratio) is not None:
        return ratio / factor, ratio * factor
    if (bound := claimed_bound(claim)) is not None:
        kind, x = bound
        return (x / factor, math.inf) if kind == ">=" else (0.0, x * factor)
    return None


def _range_text(rng: tuple[float, float]) -> str:
    lo, hi = rng
    if math.isinf(hi):
        return f"≥{lo:.3g}×"
    if lo <= 0:
        return f"≤{hi:.3g}×"
    return f"{lo:.3g}–{hi:.3g}×"


def _row_field(row: Row, metric: str, fld: str) -> float | None:
    if not row.ok:
        return None
    if fld.startswith(MEMORY_FIELD):
        value = row.memory.get(fld.removeprefix(MEMORY_FIELD)) if row.memory else None
    else:
        entry = (row.metrics or {}).get(metric)
        if entry is None and row.metric == metric:
            entry = MetricValue(value=row.value, pct_of_peak=row.pct_of_peak)
        value = entry.get(fld) if entry is not None else None  # a field named by the claim
    return float(value) if is_number(value) else None


def _field_direction(claim: Claim) -> str:
    from dsbench.suites import BENCHMARKS

    m = claim.dsbench
    if m.field.startswith(MEMORY_FIELD):
        return LOWER
    if m.field == "pct_of_peak":
        return HIGHER
    bench = BENCHMARKS[m.benchmark]
    return next(x.direction for x in bench.metrics if x.name == m.metric)


def _params_match(params: dict, pattern: dict, skip: set[str]) -> bool:
    for key, wanted in pattern.items():
        if key in skip:
            continue
        values = wanted if isinstance(wanted, list) else [wanted]
        if str(params.get(key)) not in {str(v) for v in values}:
            return False
    return True


def _selected_keys(claim: Claim, keys: frozenset[str]) -> set[str]:
    from dsbench.compare import Selector

    m = claim.dsbench
    out = set()
    for text in (m.baseline, m.contender):
        sel = Selector.parse(text, keys)
        if sel.param and sel.key:
            out.add(sel.key)
    return out


def _metric_direction(row: Row, metric: str) -> str | None:
    entry = (row.metrics or {}).get(metric)
    if entry is not None and entry.direction:
        return entry.direction
    if row.metric == metric:
        return value_or(row.direction)
    from dsbench.suites import BENCHMARKS

    bench = BENCHMARKS.get(row.name)
    return next((m.direction for m in bench.metrics if m.name == metric), None) if bench else None


def _case_interval(
    claim: Claim, b_row: Row, c_row: Row, field_ratio: float, verdict: compare.ComparedRow
) -> tuple[float | None, float | None, str]:
    """The 99%/n interval of one case's ratio in the claim's field: compare's interval of the
    primary metric's ratio, carried over to the field (see [Note: claims and verdicts]); or
    (None, None, why not)."""
    m = claim.dsbench
    if m.field.startswith(MEMORY_FIELD):
        return None, None, "one value on a side (peak memory is recorded once per case)"
    if verdict.low is None or verdict.high is None or not verdict.ratio:
        return None, None, verdict.basis or verdict.change
    same = _metric_direction(b_row, m.metric) == value_or(b_row.direction)
    e = 1.0 if same else -1.0
    k = field_ratio / verdict.ratio**e  # the field's ratio / the primary's, e.g. another peak
    lo, hi = sorted((k * verdict.low**e, k * verdict.high**e))
    return lo, hi, verdict.basis


def _case_intervals(
    claim: Claim,
    pairs: list[dict],
    sides: tuple[compare.Side, compare.Side],
    rows: tuple[dict[str, Row], dict[str, Row]],
    runs: Sequence[Run],
    factor: float,
) -> tuple[float, dict[str, str]]:
    """Each case's interval at level 1 - 0.01/n (Bonferroni over the n cases), set in its pair
    as ``low``, ``high`` and ``basis``; returns that level and, for each case without an
    interval, why not (:func:`_no_interval`). ``rows``: each side's rows, typed."""
    base, cont = sides
    b_rows, c_rows = rows
    same_run = base.run is cont.run
    noise: dict = {}
    if not same_run and base.run.machine == cont.run.machine:
        others = [r for r in runs if r is not base.run and r is not cont.run]
        noise = compare.noise_figures(others, base.run.machine, base.run.hardware)[1]
    level = 1.0 - (1.0 - LEVEL) / len(pairs)
    ids = [p["id"] for p in pairs]
    verdicts = compare.compare_rows(
        {i: b_rows[i] for i in ids}, {i: c_rows[i] for i in ids}, factor, level=level,
        unit="round" if same_run else "launch", noise=noise,
    )  # fmt: skip
    by_id = {v.id: v for v in verdicts}  # compare adds a peak-memory row where it can
    whys = {}
    for p in pairs:
        v = by_id[p["id"]]
        p["low"], p["high"], p["basis"] = _case_interval(
            claim, b_rows[p["id"]], c_rows[p["id"]], p["ratio"], v
        )
        if p["low"] is None:
            whys[p["id"]] = _no_interval(claim, v)
    return level, whys


def _no_interval(claim: Claim, verdict: compare.ComparedRow) -> str:
    """Why a case has no interval, without its particulars (as :func:`_case_interval` says it):
    its row's reason, or where it was not judged, its change."""
    if claim.dsbench.field.startswith(MEMORY_FIELD):
        return str(compare.Reason.ONE_VALUE)
    return verdict.reason if verdict.reasons else str(verdict.change)


def _measured(claim: Claim, runs: Sequence[Run], factor: float = FACTOR) -> dict | None:
    """Pairs of rows from the runs the claim's selectors pick (a ``dsbench ab`` pair first),
    each case's ratio with its interval, and their geometric mean with its interval (see
    [Note: claims and verdicts]); None when no run holds both sides."""
    from dsbench.publish.data import axes, pairings

    m = claim.dsbench
    keys = _all_param_keys() | compare.param_keys(list(runs))
    skip = _selected_keys(claim, keys)

    def wanted(row: Row) -> bool:
        return (row.name == m.benchmark and row.ok
                and _params_match(row.params or {}, m.params, skip))  # fmt: skip

    relevant = [r for r in runs if not pairings.is_noise(r)
                and any(wanted(row) for row in r.rows.values())]  # fmt: skip
    if not relevant:
        return None
    b_sel = compare.Selector.parse(m.baseline, keys)
    c_sel = compare.Selector.parse(m.contender, keys)
    ab = None if b_sel.param or c_sel.param else axes.ab_pair(relevant, b_sel, c_sel)
    if ab is not None:
        base, cont = compare.Side.whole(ab[0]), compare.Side.whole(ab[1])
        notes = [f"baseline: {ab[0].describe()}", f"contender: {ab[1].describe()}", ab[2]]
    else:
        try:
            base, cont, notes = compare.pick_runs(relevant, m.baseline, m.contender)
        except UsageError:
            return None
    b_rows, c_rows = base.rows, cont.rows
    pairs = []
    for key, b_row in b_rows.items():
        c_row = c_rows.get(key)
        if c_row is None or not wanted(b_row) or not wanted(c_row):
            continue
        bv, cv = _row_field(b_row, m.metric, m.field), _row_field(c_row, m.metric, m.field)
        if bv and cv is not None:
            pairs.append({"id": key, "baseline": bv, "contender": cv, "ratio": cv / bv})
    if not pairs:
        return None
    same_run = base.run is cont.run
    level, whys = _case_intervals(claim, pairs, (base, cont), (b_rows, c_rows), runs, factor)
    axes = compare.axes_of(b_sel, c_sel)
    confounded = compare.confounders(base.run, cont.run, axes) if not same_run else []
    ratios = [p["ratio"] for p in pairs]
    positive = all(r > 0 for r in ratios)
    bounded = positive and all(p["low"] is not None and p["low"] > 0 for p in pairs)
    why = pairings.most_common_reason(whys[p["id"]] for p in pairs if p["low"] is None)
    return {
        "ratio": geomean(ratios) if positive else sum(ratios) / len(ratios),
        "low": geomean([p["low"] for p in pairs]) if bounded else None,
        "high": geomean([p["high"] for p in pairs]) if bounded else None,
        "level": LEVEL,
        "case_level": level,
        "why_no_interval": None if bounded else (why[0] if why else "a ratio is not positive"),
        "n_cases": len(pairs),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "cases": pairs,
        "baseline_run": base.run.id,
        "contender_run": cont.run.id,
        "notes": notes,
        "confounders": confounded,
        "metric": m.metric,
        "field": m.field,
    }


def decide(
    interval: tuple[float | None, float | None], accepted: tuple[float, float] | None
) -> tuple[str, str]:
    """(decision, how the interval lies): ``consistent`` when the whole interval lies within
    the accepted range, ``contradicted`` when it lies wholly outside, else ``not decided``."""
    lo, hi = interval
    if accepted is None:
        return UNDECIDED, "the claim gives no ratio to test"
    if lo is None or hi is None:
        return UNDECIDED, "no interval"
    a_lo, a_hi = accepted
    if a_lo <= lo and hi <= a_hi:
        return CONSISTENT, "the interval lies within the accepted range"
    if hi < a_lo or lo > a_hi:
        return CONTRADICTED, "the interval lies outside the accepted range"
    return UNDECIDED, "the interval reaches across an edge of the accepted range"


def _modelled(claim: Claim) -> dict | None:
    from dsbench.publish.data import modelled
    from dsbench.suites import BENCHMARKS, case_id

    m = claim.dsbench
    spec = m.modelled
    if spec is None:
        return None
    bench = BENCHMARKS[m.benchmark]
    metric = next(x for x in bench.metrics if x.name == m.metric)
    out: dict[str, Any] = {"case": case_id(m.benchmark, spec.params), "metric": m.metric,
                           "unit": metric.unit}  # fmt: skip
    values = {}
    for side, profile in (
        ("baseline", spec.baseline_profile),
        ("contender", spec.contender_profile),
    ):
        floor = modelled.model_case(m.benchmark, spec.params, profile)
        out[f"{side}_profile"] = profile
        out[f"{side}_basis"] = floor.basis
        if floor.seconds is None:
            return out | {"ratio": None, "problem": floor.basis}
        work = bench.work_of(spec.params, modelled.DEFINITION_CONTEXT)
        values[side] = metric.value(work, floor.seconds)
        out[f"{side}_value"] = values[side]
    out["ratio"] = values["contender"] / values["baseline"] if values["baseline"] else None
    return out


AB_KEYS = ("deepspeed", "python", "commit")
"""Selector keys that name a side ``dsbench ab`` can run (``deepspeed=VERSION``,
``python=VERSION``, ``commit=REF``); a bare version stands for ``deepspeed=VERSION``."""
_VERSION = re.compile(r"^\d+(\.\d+)+$")


def ab_side(selector: str) -> str | None:
    """The ``dsbench ab`` side a compare selector names, or None (a label, a profile...)."""
    key, sep, value = selector.partition("=")
    if not sep:
        return f"deepspeed={selector}" if _VERSION.match(selector) else None
    return f"{key.strip()}={value.strip()}" if key.strip() in AB_KEYS and value.strip() else None


def _option(commands: Sequence[str], name: str) -> str | None:
    """The value of ``--name`` in the first command that has it (quotes kept)."""
    for cmd in commands:
        found = re.search(rf"--{name}[ =]('[^']*'|\"[^\"]*\"|\S+)", cmd)
        if found:
            return found.group(1)
    return None


def commands(claim: Claim) -> list[str]:
    """Commands that would measure the claim so that the verdict can decide it:
    ``dsbench ab`` (both sides in alternating rounds) where both selectors name a side it can
    run; for a benchmark parameter, one ``dsbench run`` (it times both sides in alternating
    rounds) and the comparison; otherwise the mapping's ``run`` commands (other hardware,
    other system settings) and the comparison, after a noise calibration of the machine when
    both sides run on one machine (labels)."""
    from dsbench.suites import BENCHMARKS

    m = claim.dsbench
    if not m.measurable:
        return []
    if selector_problem(m.baseline or "") or selector_problem(m.contender or ""):
        return list(m.run)  # check() names the bad selector
    bench = BENCHMARKS[m.benchmark]
    suite = _option(m.run, "suite") or ("quick" if "quick" in bench.suites else bench.suites[0])
    filt = _option(m.run, "filter") or f"'^{m.benchmark}\\['"
    compare_cmd = f"dsbench compare --baseline {m.baseline} --contender {m.contender}"
    b_side, c_side = ab_side(m.baseline or ""), ab_side(m.contender or "")
    if b_side and c_side:
        return [f"dsbench ab --baseline {b_side} --contender {c_side} --suite {suite} "
                f"--filter {filt}"]  # fmt: skip
    sels = [compare.Selector.parse(s or "", _all_param_keys()) for s in (m.baseline, m.contender)]
    if any(sel.param for sel in sels):
        return [f"dsbench run --suite {suite} --filter {filt}", compare_cmd]
    run = list(m.run) or [f"dsbench run --suite {suite} --filter {filt}"]
    if any(sel.key in (None, "label") for sel in sels):  # both sides on this machine
        run = [f"dsbench noise --suite {suite}", *run]
    return [*run, compare_cmd]


def _oriented(ratio: float | None, flip: bool) -> float | None:
    if ratio is None or not flip:
        return ratio
    return 1.0 / ratio if ratio else None


def _measured_verdict(
    claim: Claim, measured: dict, flip_note: str, entry: ClaimCheck
) -> ClaimCheck:
    """``entry`` with the measurement, its decision, interval and verdict line."""
    accepted = accepted_range(claim)
    lo, hi = measured["low"], measured["high"]
    decision, how = decide((lo, hi), accepted)
    n = measured["n_cases"]
    cases = f"geometric mean of {n} cases" if n > 1 else "1 case"
    if lo is not None:
        spread = f"99% interval {_fmt_ratio(lo)}–{_fmt_ratio(hi)}, {cases}"
    else:
        spread = f"{cases}; no interval: {measured['why_no_interval']}"
    claimed = claimed_text(claim)
    if accepted is not None:
        claimed += f" (accepted {_range_text(accepted)})"
    verdict = f"{decision}: measured {_fmt_ratio(measured['ratio'])} ({spread}) vs {claimed}"
    verdict += flip_note + (f": {how}" if lo is not None or accepted is None else "")
    if measured["confounders"]:
        verdict += "; confounded: " + "; ".join(measured["confounders"])
    if decision == UNDECIDED and entry.commands:
        verdict += "; to decide it: " + " ; ".join(entry.commands)
    return replace(
        entry, measured=measured, kind="measured", dsbench_ratio=measured["ratio"],
        decision=decision, interval=None if lo is None else (lo, hi), accepted=accepted,
        verdict=verdict,
    )  # fmt: skip


def check(claims: Sequence[Claim], runs: Sequence[Run]) -> list[ClaimCheck]:
    """Each claim beside what dsbench measured (result files) or modelled (profiles).

    One :class:`~dsbench.records.ClaimCheck` per claim (``.to_json()``: its JSON): ``claim``
    (id), ``title``, ``title_en``, ``source`` (dict), ``source_text``, ``scenario``, ``label``,
    ``label_en``, ``form``, ``metric``, ``unit``, ``direction``, ``claimed`` ({baseline,
    contender: side dicts, ratio, range, change, text}), ``kind`` (``measured``, ``modelled``
    or ``none``), ``dsbench_ratio`` (contender / baseline,
    oriented like the claim's metric; None for kind ``none``), ``interval`` (its 99% interval,
    oriented likewise; None when the data give none), ``accepted`` (the ratios that agree with
    the claim, or None), ``decision`` (:data:`DECISIONS`: ``consistent``, ``contradicted`` or
    ``not decided`` for a measurable claim, see [Note: claims and verdicts]; ``not
    measurable``), ``measured`` (dict or None: ratio, low, high, level, case_level,
    why_no_interval, n_cases, min_ratio, max_ratio, cases (each with its interval),
    baseline_run, contender_run, notes, confounders), ``modelled`` (dict or None: ratio, case,
    profiles, values, basis), ``verdict`` (one line), ``command`` / ``commands`` (what measures
    it), ``problem`` (a bad selector or an unmodellable case, else None). Measured and
    modelled numbers are kept in separate fields and the claim's own numbers only under
    ``claimed``: a claim is never treated as a result, and a modelled ratio never decides one.
    """
    return [_check_one(claim, runs) for claim in claims]


_AS_CLAIMED = ("title", "title_en", "source", "scenario", "label", "label_en", "form", "metric",
               "unit", "direction")  # fmt: skip
"""The claim's fields a :class:`~dsbench.records.ClaimCheck` holds as they are."""


def _entry(claim: Claim) -> ClaimCheck:
    """The claim's own fields in :func:`check`'s record, with nothing measured or modelled yet
    (and no verdict)."""
    cmds = commands(claim)
    return ClaimCheck(  # its JSON has the fields in ClaimCheck's order, whatever the order here
        claim=claim.id,
        **{name: getattr(claim, name) for name in _AS_CLAIMED},
        source_text=claim.source_text(),
        claimed={
            "baseline": claim.baseline.to_dict(),
            "contender": claim.contender.to_dict(),
            "ratio": claim.claimed_ratio,
            "range": claim.claimed_range,
            "change": claim.claimed_change,
            "text": claimed_text(claim),
        },
        kind="none",
        dsbench_ratio=None,
        interval=None,
        accepted=accepted_range(claim),
        decision=UNDECIDED,
        measured=None,
        modelled=None,
        commands=cmds,
        problem=None,
        command="\n".join(cmds),
    )


def _check_one(claim: Claim, runs: Sequence[Run]) -> ClaimCheck:
    m = claim.dsbench
    entry = _entry(claim)
    if not m.measurable:
        verdict = f"not measurable by dsbench: {m.not_measurable}"
        return replace(entry, decision=NOT_MEASURABLE, verdict=verdict)
    problem = selector_problem(m.baseline or "") or selector_problem(m.contender or "")
    if problem:
        return replace(entry, problem=problem, verdict=f"cannot check: {problem}")
    flip = _field_direction(claim) != claim.direction
    flip_note = (
        f" (dsbench's {m.metric} is {_field_direction(claim)}-is-better: ratio inverted)"
        if flip
        else ""
    )
    measured = _measured(claim, runs)
    modelled = _modelled(claim)
    if measured is not None:
        measured["ratio"] = _oriented(measured["ratio"], flip)
        if measured["low"] is not None:
            low, high = _oriented(measured["low"], flip), _oriented(measured["high"], flip)
            measured["low"], measured["high"] = min(low, high), max(low, high)
        entry = _measured_verdict(claim, measured, flip_note, entry)
    if modelled is not None:
        modelled["ratio"] = _oriented(modelled.get("ratio"), flip)
        entry = _modelled_verdict(claim, modelled, flip_note, entry)
    if entry.kind == "none":
        entry = replace(
            entry, verdict=f"not decided: no data yet: run {' ; '.join(entry.commands)}"
        )
    return entry


def _modelled_verdict(
    claim: Claim, modelled: dict, flip_note: str, entry: ClaimCheck
) -> ClaimCheck:
    """``entry`` with the modelled ratio; with nothing measured, its verdict line (a model
    never decides a claim)."""
    entry = replace(entry, modelled=modelled)
    if modelled.get("problem"):
        entry = replace(entry, problem=entry.problem or modelled["problem"])
    if entry.kind == "none" and modelled["ratio"] is not None:
        entry = replace(entry, kind="modelled", dsbench_ratio=modelled["ratio"], verdict=(
            f"not decided: modelled {_fmt_ratio(modelled['ratio'])} (roofline floors of "
            f"{modelled['case']} on {modelled['baseline_profile']} vs "
            f"{modelled['contender_profile']}) vs {claimed_text(claim)}{flip_note}; a model does "
            f"not decide a claim; no measured data yet: run {' ; '.join(entry.commands)}"
        ))  # fmt: skip
    return entry
