"""The comparison itself: rows paired by benchmark id, each judged by
:func:`dsbench.stats.judge` into one of four verdicts, and the report with its notes. See
:mod:`dsbench.compare`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from dsbench import records
from dsbench.compare.render import pct
from dsbench.compare.rows import UNLIKE, ComparedRow, MemoryOf, Report
from dsbench.compare.selection import Side, confounders, is_asv
from dsbench.errors import UsageError
from dsbench.records import fingerprint, value_or
from dsbench.results import Run
from dsbench.stats import (
    VERDICTS,
    Change,
    Noise,
    Reason,
    Verdict,
    centre,
    judge,
    judge_paired,
    paired_logs,
    round_spread,
)
from dsbench.stats.sequential import paired_rounds_to_decide, rounds_to_decide

ENV_LABEL_KEYS = ("python", "deepspeed")
"""Always in an environment label: the axes of asv's matrix."""
ENV_LABEL_IF_DIFFERENT = ("torch", "triton", "numpy", "backend", "device")


def _side(row: records.Row | None) -> str:
    if row is None:
        return "missing"
    return "" if row.ok else row.status


def typed(rows: Mapping[str, dict | records.Row]) -> dict[str, records.Row]:
    """Result rows by key as :class:`~dsbench.records.Row` (given as rows or their JSON)."""
    return {
        k: r if isinstance(r, records.Row) else records.Row.from_json(r) for k, r in rows.items()
    }


def compare_rows(
    base: Mapping[str, dict | records.Row],
    cont: Mapping[str, dict | records.Row],
    factor: float = 1.05,
    level: float = 0.99,
    envs: tuple[str, str] = ("", ""),
    unit: str = "launch",
    noise: dict[str, Noise] | None = None,
    paired: bool = False,
) -> list[ComparedRow]:
    """Pair benchmarks by id and judge each pair; rows present on one side only are listed.

    ``unit``: what a round is (``"launch"`` between runs, ``"round"`` between two sides of one
    run, see :func:`dsbench.results.row_rounds`). ``noise``: noise figures by benchmark id, used
    for pairs with a single launch on a side. ``envs``: the environment each side came from.
    ``paired``: the sides are the two of one ``dsbench ab --blocks``, judged block pair by block
    pair ([Note: paired blocks]).
    """
    if not 1.0 <= factor < math.inf:  # NaN too
        raise UsageError(f"--factor must be a finite number >= 1.0, got {factor}")
    noise = noise or {}
    base, cont = typed(base), typed(cont)
    out = []
    for bid in list(base) + [k for k in cont if k not in base]:
        b, c = base.get(bid), cont.get(bid)
        ref = b or c
        bs, cs = _side(b), _side(c)
        unit_name, direction = value_or(ref.unit, ""), value_or(ref.direction)
        bv = b.value if not bs else None
        cv = c.value if not cs else None
        if bs or cs:
            why = Change.unjudged(bs, cs)  # e.g. "skipped / failed"
            out.append(_unjudged(bid, unit_name, direction, bv, cv, why, envs, factor))
            continue
        if b.direction != c.direction or b.unit != c.unit:
            out.append(_unjudged(bid, unit_name, direction, bv, cv, Change.UNITS_DIFFER, envs,
                                 factor))  # fmt: skip
            continue
        b_rounds, c_rounds = b.round_samples(unit), c.round_samples(unit)
        if paired:
            b_blocks, c_blocks = b.launch_blocks(), c.launch_blocks()
            v = judge_paired(b_blocks, c_blocks, direction=direction, factor=factor, level=level)
        else:
            fig = noise.get(bid) if min(len(b_rounds), len(c_rounds)) == 1 else None
            v = judge(b_rounds, c_rounds, direction=direction, factor=factor, level=level,
                      noise=fig)  # fmt: skip
        row = _row(bid, unit_name, direction, b_rounds, c_rounds, v, envs, factor)
        if v.change is Change.INCONCLUSIVE and v.low is not None:
            if paired:
                logs = paired_logs(b_blocks, c_blocks)[0]
                k = paired_rounds_to_decide(logs, factor=factor, level=level)
            else:
                k = rounds_to_decide(b_rounds, c_rounds, factor=factor, level=level)
            if k:
                row = dataclasses.replace(row, to_decide=k)
        out.append(row)
        mem = memory_row(bid, b, c, factor=factor, level=level, envs=envs)
        if mem is not None:
            out.append(mem)
    return out


MEMORY_UNIT = "MiB"


MEMORY_ROW = ".peak_memory"
"""What a case's name gains in the id of its peak-memory row."""


def memory_id(bid: str) -> str:
    """The id of a case's peak-memory row (``train_step[...]``: ``train_step.peak_memory[...]``)."""
    name, sep, rest = bid.partition("[")
    return f"{name}{MEMORY_ROW}{sep}{rest}"


def memory_case(row_id: str) -> str | None:
    """The case whose peak-memory row ``row_id`` is (the inverse of :func:`memory_id`); None for
    any other row."""
    name, sep, rest = row_id.partition("[")
    if not name.endswith(MEMORY_ROW):
        return None
    return f"{name.removesuffix(MEMORY_ROW)}{sep}{rest}"


def memory_rounds(peaks: Sequence[float]) -> list[list[float]]:
    """A case's peak memory, one value a launch in bytes, as rounds of one value in MiB (the
    unit of its row, :data:`MEMORY_UNIT`)."""
    return [[x / 2**20] for x in peaks]


def memory_row(bid: str, b: records.Row, c: records.Row, *, factor: float, level: float,
               envs: tuple[str, str]) -> ComparedRow | None:  # fmt: skip
    """The case's own peak memory judged over the launches as time is (one value a launch,
    lower is better), where both sides have it from every launch and of the same kind
    (:func:`dsbench.records.case_peak`); None otherwise. Memory has no paired blocks: a
    ``--blocks`` row's resident set holds the cases before it and is not the case's."""
    bm, cm = b.peak_memory(), c.peak_memory()
    if bm is None or cm is None or bm[0] != cm[0] or min(len(bm[1]), len(cm[1])) < 2:
        return None
    b_rounds, c_rounds = (memory_rounds(m[1]) for m in (bm, cm))
    v = judge(b_rounds, c_rounds, direction="lower", factor=factor, level=level)
    row = _row(memory_id(bid), MEMORY_UNIT, "lower", b_rounds, c_rounds, v, envs, factor)
    return dataclasses.replace(row, detail=f"{bm[0]}; {row.detail}",
                               memory=MemoryOf(case=bid, kind=bm[0]))  # fmt: skip


def ab_level(base: Run, cont: Run) -> float:
    """The level the two sides of one ``dsbench ab --until-decided`` were decided at (its last
    look's, [Note: looking at the data as rounds come in]); 0.99 for any other pair."""
    a, b = base.ab, cont.ab
    if a is None or b is None or not a.id or a.id != b.id or not a.sequential:
        return 0.99
    level = value_or(a.sequential.level)
    return float(level) if level else 0.99


def ab_paired(base: Run, cont: Run) -> bool:
    """Whether the two runs are the sides of one ``dsbench ab --blocks`` (paired blocks)."""
    a, b = base.ab, cont.ab
    return (a is not None and b is not None and bool(a.id) and a.id == b.id
            and value_or(a.pairing) == "blocks" == value_or(b.pairing))  # fmt: skip


def _pairs_text(block) -> str:
    """``8 pairs``, or ``8 or more pairs (as many as fit in 3 s)`` with ``--block-time 3``."""
    least, seconds = value_or(block.block_pairs), value_or(block.block_time_s)
    if not seconds:
        return f"{least} pairs"
    return f"{least} or more pairs (as many as fit in {seconds:g} s)"


def _unjudged(bid, unit, direction, baseline, contender, why: Change, envs,
              factor: float) -> ComparedRow:  # fmt: skip
    return ComparedRow(id=bid, unit=unit, direction=direction, baseline=baseline,
                       contender=contender, ratio=None, change=why, baseline_env=envs[0],
                       contender_env=envs[1], factor=factor)  # fmt: skip


def _row(bid, unit, direction, b_rounds, c_rounds, v: Verdict, envs, factor) -> ComparedRow:
    return ComparedRow(
        id=bid,
        unit=unit,
        direction=direction,
        baseline=centre(b_rounds),
        contender=centre(c_rounds),
        ratio=v.ratio,
        change=v.change,
        low=v.low,
        high=v.high,
        detail=v.why or v.method,
        baseline_env=envs[0],
        contender_env=envs[1],
        reasons=v.reasons,
        factor=factor,
    )


def noise_figures(
    runs: list[Run], machine: str, hardware: fingerprint.Fingerprint | None = None
) -> tuple[Run | None, dict[str, Noise]]:
    """The newest noise calibration of ``machine`` (a run ``dsbench noise`` wrote; with
    ``hardware``, one measured on like hardware) and its figure per benchmark id: the spread of
    the log launch medians, with launches - 1 df."""
    calib = [r for r in runs if r.purpose == "noise" and r.machine == machine
             and (hardware is None or fingerprint.like(r.hardware, hardware))]  # fmt: skip
    if not calib:
        return None, {}
    run = calib[-1]
    figures = {}
    for bid, row in run.rows.items():
        if not row.ok:
            continue
        sigma, df = round_spread(row.round_samples("launch"))
        if df:
            figures[bid] = Noise(sigma=sigma, df=df, source=run.id)
    return run, figures


def tally(rows: list[ComparedRow]) -> dict[str, int]:
    """Rows per verdict, plus those on one side only and those failed, skipped or unlike; and
    where there are any, those on unlike hardware (:data:`UNLIKE`)."""
    counts = {str(v): 0 for v in VERDICTS} | {"one side only": 0, "not comparable": 0}
    for r in rows:
        if r.comparable:
            counts[str(r.change)] += 1
        elif r.change is UNLIKE:
            counts[str(UNLIKE)] = counts.get(UNLIKE, 0) + 1
        elif r.change.one_side_only:
            counts["one side only"] += 1
        else:
            counts["not comparable"] += 1
    return counts


def env_label(run: Run, other: Run) -> str:
    """``python 3.11, deepspeed 0.18.3``, plus the fields in which ``other`` differs."""
    keys = [
        *ENV_LABEL_KEYS,
        *(k for k in ENV_LABEL_IF_DIFFERENT if run.fields.get(k) != other.fields.get(k)),
    ]
    label = ", ".join(f"{k} {run.fields[k]}" for k in keys if run.fields.get(k) is not None)
    return ("asv: " if is_asv(run) else "") + (label or "(versions not recorded)")


def unlike_hardware(base: Run, cont: Run, axes: set[str]) -> list[str]:
    """What makes the two runs' hardware different (``CPU (Intel Xeon vs AMD EPYC)``,
    :func:`dsbench.records.fingerprint.differences`), unless hardware is what is compared (an
    axis in :data:`~dsbench.records.fingerprint.HARDWARE_AXES`: ``backend=cuda`` vs
    ``backend=rocm``) or the sides are one run's; empty when the hardware is alike."""
    if base is cont or axes & fingerprint.HARDWARE_AXES:
        return []
    return fingerprint.differences(base.hardware, cont.hardware)


def _unjudge(row: ComparedRow, differ: list[str]) -> ComparedRow:
    """A judged row of two unlike machines: the ratio kept, the verdict taken away."""
    if not row.comparable:
        return row
    what = fingerprint.what_differs(differ)
    return dataclasses.replace(row, change=UNLIKE, to_decide=None,
                               detail=f"{Reason.UNLIKE_HARDWARE} ({what} differ)",
                               reasons=(Reason.UNLIKE_HARDWARE,))  # fmt: skip


def _unlike_verdict(counts: dict[str, int], unlike: list[str]) -> str:
    what = fingerprint.what_differs(unlike)
    return (
        f"no verdict: the runs are on unlike hardware ({what} differ); {counts.get(UNLIKE, 0)} "
        f"row(s) with their ratios as measured, {counts['one side only']} on one side only"
        + (f", {counts['not comparable']} failed or skipped" if counts["not comparable"] else "")
    )


def regressions(rows: list[ComparedRow]) -> list[ComparedRow]:
    return [r for r in rows if r.change == Change.WORSE]


def report(
    base: Side | Run,
    cont: Side | Run,
    *,
    axes: set[str],
    factor: float = 1.05,
    notes: list[str] | None = None,
    runs: list[Run] | None = None,
) -> Report:
    """The comparison's rows with its notes and summary line (data only: :func:`render` draws
    it). ``runs``: where to look for the machine's noise calibration (used for pairs with one
    launch on a side)."""
    base = base if isinstance(base, Side) else Side.whole(base)
    cont = cont if isinstance(cont, Side) else Side.whole(cont)
    notes = list(notes or [])
    envs = ("", "")
    if is_asv(base.run) or is_asv(cont.run):
        envs = (env_label(base.run, cont.run), env_label(cont.run, base.run))
    same_run = base.run is cont.run
    noise: dict[str, Noise] = {}
    if not same_run and runs and base.run.machine == cont.run.machine:
        calib, noise = noise_figures(
            [r for r in runs if r is not base.run and r is not cont.run],
            base.run.machine,
            base.run.hardware,
        )
        if calib is not None:
            notes.append(
                f"noise figure: {calib.describe()}, the newest A/A calibration of "
                f"{calib.machine} ({len(calib.launches or [])} launches), for rows "
                "with one launch on a side"
            )
    unit = "round" if same_run else "launch"
    level = ab_level(base.run, cont.run)
    if level != 0.99:
        notes.append(
            f"judged at the {level:.4%} level of the A/B's last look "
            f"(after {value_or(base.run.ab.sequential.looks)} rounds a side, "
            "dsbench ab --until-decided): the error rate is spent over its planned looks"
        )
    paired = not same_run and ab_paired(base.run, cont.run)
    if paired:
        notes.append(
            "paired blocks (dsbench ab --blocks): both sides resident in each round, taking "
            f"turns in blocks ({_pairs_text(base.run.ab)} a case a round); a "
            "round's ratio is the median of its block pairs' ratios, rounds the unit of evidence"
        )
    rows = compare_rows(base.rows, cont.rows, factor, level, envs=envs, unit=unit, noise=noise,
                        paired=paired)  # fmt: skip
    single = sum(Reason.ONE_VALUE in r.reasons for r in rows)
    if single:
        notes.append(
            f"{single} row(s) have one value on a side (asv --quick, track_): inconclusive; "
            "asv keeps real samples with --record-samples and several rounds (docs/development.md)"
        )
    diffs = confounders(base.run, cont.run, axes) if not same_run else []
    if diffs:
        axis = ", ".join(sorted(axes)) or "the runs chosen"
        notes.append(f"confounded: besides {axis}, the runs differ in: " + "; ".join(diffs))
    unlike = unlike_hardware(base.run, cont.run, axes)
    if unlike:
        rows = [_unjudge(r, unlike) for r in rows]
        notes.append(
            f"unlike hardware: the baseline ran on {base.run.hardware.name}, the contender on "
            f"{cont.run.hardware.name} ({'; '.join(unlike)}): no row is judged better, worse or "
            "unchanged, the ratios are as measured; to compare the hardware itself, make it "
            "the axis (--baseline cpu=... --contender cpu=..., or device=, backend=, profile=)"
        )
    counts = tally(rows)
    verdict = (
        f"{counts['better']} better, {counts['worse']} worse, {counts['unchanged']} unchanged, "
        f"{counts['inconclusive']} inconclusive ({pct(level)} interval of the ratio against "
        f"x{factor:g}, "
        f"rounds = {'alternating rounds of one launch' if same_run else 'launches'}), "
        f"{counts['one side only']} on one side only"
        + (f", {counts['not comparable']} failed, skipped or unlike" if counts["not comparable"]
           else "")
    )  # fmt: skip
    if unlike:
        verdict = _unlike_verdict(counts, unlike)
    return Report(notes=notes, verdict=verdict, rows=rows, counts=counts, level=level)
