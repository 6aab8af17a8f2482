"""The pair ``dsbench compare --baseline 0.18.3`` uses when no contender is given: which
DeepSpeed version to compare against, and which two runs of the two versions.

- The contender's version: the installed DeepSpeed's (read from its package metadata, without
  importing it), as asv compares against HEAD, where runs of it share cases with the baseline;
  else the next newer release among the runs (ordered as versions, 0.18.10 after 0.18.9); else
  the closest older one.
- The two runs: a ``dsbench ab`` pair of the two versions (both sides measured together, in
  alternating rounds or blocks), else two sides of one ``dsbench sweep`` series, else two
  separately launched runs (the baseline's newest run, and the contender's run of the same
  suite differing in the fewest other fields, newest among equals). Among several pairs of one
  kind, the one with the most rounds a side, and among equals the newest: rounds are the unit
  of evidence, and a pair's rounds are known without judging its rows.
- The notes say why this pair, and which other pairs were there to pick with ``--contender``.

Any other selection (a contender given, a selector on another axis or on a benchmark
parameter) is :func:`dsbench.compare.selection.pick_runs`'.
"""

from __future__ import annotations

import importlib.metadata

from packaging.version import InvalidVersion, Version

from dsbench.compare import selection
from dsbench.compare.selection import Selector, Side, confounders, shared_cases
from dsbench.results import Run

AXIS = "deepspeed"
KINDS = ("ab", "series", "single")
"""Kinds of pair, preferred in this order."""


def installed_deepspeed() -> str | None:
    """The installed DeepSpeed's version, from its package metadata (no import), or None."""
    try:
        return importlib.metadata.version("deepspeed")
    except importlib.metadata.PackageNotFoundError:
        return None


def pick_runs(
    runs: list[Run], baseline: str, contender: str | None
) -> tuple[Side, Side, list[str]]:
    """The two sides the selectors name, and notes saying which runs and why: with only a
    baseline on the DeepSpeed axis, the pair of :func:`default_pair`; otherwise
    :func:`dsbench.compare.selection.pick_runs`."""
    if contender is None and runs:
        b_sel = Selector.parse(baseline, selection.param_keys(runs))
        b_runs = [r for r in runs if not b_sel.param and b_sel.matches(r)]
        if b_runs and selection.selector_axis(b_sel, b_runs[-1]) == AXIS:
            found = default_pair(runs, b_sel, b_runs)
            if found is not None:
                return found
    return selection.pick_runs(runs, baseline, contender)


def version_key(text: str | None) -> tuple:
    """Order versions as versions (0.18.10 after 0.18.9); text that is none last, by text."""
    try:
        return (0, Version(str(text)), "")
    except InvalidVersion:
        return (1, Version("0"), str(text))


def _newer(a: str, b: str) -> bool:
    """Whether version ``a`` is newer than ``b`` (False where either is no version)."""
    ka, kb = version_key(a), version_key(b)
    return ka[0] == kb[0] == 0 and ka[1] > kb[1]


def _is_installed(version: str, installed: str | None) -> bool:
    if installed is None:
        return False
    same = version_key(version)[0] == 0 and version_key(version) == version_key(installed)
    return same or selection.field_matches(AXIS, version, installed)


def kind(b: Run, c: Run) -> str:
    """``ab`` (the sides of one ``dsbench ab``), ``series`` (of one sweep) or ``single``."""
    if b.ab is not None and c.ab is not None and b.ab.id and b.ab.id == c.ab.id:
        return "ab"
    if b.sweep is not None and c.sweep is not None and b.sweep.id and b.sweep.id == c.sweep.id:
        return "series"
    return "single"


def rounds(b: Run, c: Run) -> int:
    """Rounds a side: the ``dsbench ab`` block's count, else the fewer launches of the two."""
    if kind(b, c) == "ab" and isinstance(b.ab.rounds, int):
        return b.ab.rounds
    return min(len(r.launches or ()) or 1 for r in (b, c))


def _design(b: Run, c: Run) -> str:
    if kind(b, c) != "ab":
        return "rounds"
    return "block rounds" if b.ab.pairing == "blocks" else "launch rounds"


def default_pair(
    runs: list[Run], b_sel: Selector, b_runs: list[Run]
) -> tuple[Side, Side, list[str]] | None:
    """The pair for a baseline selector on the DeepSpeed axis and no contender (module
    docstring), or None where no run of another version shares a case with a baseline run."""
    index = {id(r): i for i, r in enumerate(runs)}
    newest = b_runs[-1]
    pairs = [
        (b, c)
        for b in b_runs
        for c in runs
        if c.fields.get(AXIS) is not None
        and c.fields.get(AXIS) != b.fields.get(AXIS)
        and not b_sel.matches(c)
        and shared_cases(b, c)
    ]
    if not pairs:
        return None
    versions = {c.fields[AXIS] for _, c in pairs}
    b_ver = str(newest.fields.get(AXIS))
    installed = installed_deepspeed()
    at_installed = sorted((v for v in versions if _is_installed(v, installed)), key=version_key)
    newer = sorted((v for v in versions if _newer(v, b_ver)), key=version_key)
    if at_installed:
        c_ver, why = at_installed[-1], "the installed DeepSpeed"
    else:
        if installed is None:
            missing = "no DeepSpeed installed"
        elif _is_installed(b_ver, installed):
            missing = f"the installed {installed} is the baseline"
        else:
            missing = f"the installed {installed} has no runs"
        if newer:
            c_ver, why = newer[0], f"the next newer release with runs ({missing})"
        else:
            older = sorted(versions - {b_ver}, key=version_key)
            c_ver, why = older[-1], f"the closest older release with runs ({missing}, none newer)"

    def rank(pair: tuple[Run, Run]) -> tuple:
        b, c = pair
        k = kind(b, c)
        if k == "single":  # as selection's closest run: newest baseline, suite, differences
            closeness = (b is not newest, c.suite != b.suite, len(confounders(b, c, {AXIS})))
            return (KINDS.index(k), *closeness, -index[id(c)], -index[id(b)])
        return (KINDS.index(k), -rounds(b, c), -max(index[id(b)], index[id(c)]), 0, 0, 0)

    mine = sorted((p for p in pairs if p[1].fields[AXIS] == c_ver), key=rank)
    base, cont = mine[0]
    notes = [*_side_notes(base, cont, b_sel, b_runs), f"{b_ver} vs {c_ver}: {why}; "
             + _kind_why(base, cont, mine)]  # fmt: skip
    others = [p for p in pairs if p[0] is not base or p[1] is not cont]
    if others:
        notes.append(also_available(pairs, others, b_ver))
    return Side.whole(base), Side.whole(cont), notes


def _side_notes(base: Run, cont: Run, b_sel: Selector, b_runs: list[Run]) -> list[str]:
    k = kind(base, cont)
    if k == "ab":
        return [
            f"{role}: {run.describe()} — the {run.ab.side} side of dsbench ab {run.ab.id}"
            for role, run in (("baseline", base), ("contender", cont))
        ]
    if k == "series":
        how = f"two sides of the series {base.sweep.id}"
        return [f"baseline: {base.describe()} — {how}", f"contender: {cont.describe()} — {how}"]
    b_note = f"baseline: {base.describe()}"
    if len(b_runs) > 1:
        which = "newest of" if base is b_runs[-1] else "the one that pairs best, of"
        b_note += f" — {which} {len(b_runs)} runs matching '{b_sel.text}'"
    c_note = (
        f"contender: {cont.describe()} — the closest run with another {AXIS} "
        f"({base.fields.get(AXIS)} vs {cont.fields.get(AXIS)})"
    )
    return [b_note, c_note]


def _kind_why(base: Run, cont: Run, mine: list[tuple[Run, Run]]) -> str:
    """Why this pair of runs of the two versions: its kind, and what it was preferred over."""
    k = kind(base, cont)
    of_kind = [p for p in mine if kind(*p) == k]
    n = rounds(base, cont)
    if k == "ab":
        text = f"a dsbench ab pair ({n} {_design(base, cont)}"
    elif k == "series":
        text = f"two sides of a release series ({n} rounds"
    else:
        text = "separately launched runs (no dsbench ab pair or series of the two"
    if len(of_kind) > 1 and k != "single":
        most = sum(rounds(*p) == n for p in of_kind) == 1
        text += f", the {'most rounds' if most else 'newest with the most rounds'} of "
        text += f"{len(of_kind)} such pairs"
    text += ")"
    lesser = []
    if k == "ab" and any(kind(*p) == "series" for p in mine):
        lesser.append("the release series' sides")
    singles = single_runs(mine, mine)
    if k != "single" and singles:
        lesser.append(_n_runs(len(singles)))
    if lesser:
        text += " preferred over " + " and ".join(lesser)
    return text


def single_runs(pairs: list[tuple[Run, Run]], among: list[tuple[Run, Run]]) -> list[Run]:
    """The contender runs of ``among`` that are no side of a ``dsbench ab`` pair or series in
    ``pairs`` (a series' side paired with a run outside it is that series' side, not a single
    run)."""
    sided = {id(c) for b, c in pairs if kind(b, c) != "single"}
    found = {id(c): c for b, c in among if kind(b, c) == "single" and id(c) not in sided}
    return list(found.values())


def _n_runs(n: int) -> str:
    return f"{n} single run{'s' if n > 1 else ''}"


def _versions_text(versions: set[str]) -> str:
    ordered = sorted(versions, key=version_key)
    if len(ordered) > 4:
        ordered = [*ordered[:2], "...", ordered[-1]]
    return ", ".join(ordered)


def also_available(pairs: list[tuple[Run, Run]], others: list[tuple[Run, Run]], b_ver: str) -> str:
    """One line naming the pairs not chosen: each ``dsbench ab`` pair, each series' versions,
    and the versions of single runs."""
    abs_: dict[str, tuple[Run, Run]] = {}
    series: dict[str, list[tuple[Run, Run]]] = {}
    for b, c in others:
        k = kind(b, c)
        if k == "ab":
            abs_.setdefault(str(b.ab.id), (b, c))
        elif k == "series":
            series.setdefault(str(b.sweep.id), []).append((b, c))
    parts = []
    for b, c in sorted(abs_.values(), key=lambda p: version_key(p[1].fields[AXIS])):
        parts.append(
            f"{b.fields[AXIS]} vs {c.fields[AXIS]} (ab pair, {c.suite or '?'} suite, "
            f"{rounds(b, c)} {_design(b, c)})"
        )
    for members in series.values():
        counts = sorted({rounds(b, c) for b, c in members})
        n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        vs = {str(c.fields[AXIS]) for _, c in members}
        releases = f"{len(vs)} releases, " if len(vs) > 1 else ""
        parts.append(f"{b_ver} vs {_versions_text(vs)} (series, {releases}{n} rounds)")
    singles = single_runs(pairs, others)
    if singles:
        vs = {str(c.fields[AXIS]) for c in singles}
        parts.append(f"{b_ver} vs {_versions_text(vs)} ({_n_runs(len(singles))})")
    return "also available: " + "; ".join(parts) + " — pick with --contender"
