"""The history page as data: the runs of each machine and suite (a sweep's sides are a series of
their own, on the releases page), each benchmark's cases over them, and per setting (the same
environment, :data:`ENVIRONMENT`) the runs of several launches whose steps are looked for
(the page: :func:`dsbench.publish.pages.runs.history_page`)."""

from __future__ import annotations

from dsbench.publish.data.facts import finite, machine_labels
from dsbench.results import Run

ENVIRONMENT = ("python", "torch", "triton", "numpy", "deepspeed", "backend", "device", "cpu")
"""What a run's setting is, apart from the dsbench commit: runs over commits are compared within
one setting (an A/B's two sides are two settings, not a history)."""


def history_groups(runs: list[Run]) -> list[tuple[tuple[str, str, str], list[Run]]]:
    """(source, machine, suite) and its runs, for each group of two runs or more, sorted; a
    folder of two machines' runs is two histories."""
    groups: dict[tuple[str, str, str], list[Run]] = {}
    machines = machine_labels(runs)
    for run in runs:
        if run.sweep is not None:
            continue  # a sweep's sides are a series of their own (releases.html)
        key = (run.source, machines[id(run)], str(run.suite or "-"))
        groups.setdefault(key, []).append(run)
    return [(key, members) for key, members in sorted(groups.items()) if len(members) >= 2]


def cases_by_name(members: list[Run]) -> dict[str, list[str]]:
    """Per benchmark name, the ids of its cases that some run measured (ok), in first-seen
    order; a name with none maps to ``[]``."""
    names: dict[str, list[str]] = {}
    for run in members:
        for row in run.rows.values():
            ids = names.setdefault(row.name, [])
            if row.id not in ids and row.ok:
                ids.append(row.id)
    return names


def medians(members: list[Run], case: str) -> list[float | None]:
    """The case's value in each run (None where a run has no ok row of it)."""
    return [finite(r.rows[case].value) if case in r.rows and r.rows[case].ok else None
            for r in members]  # fmt: skip


def settings(members: list[Run]) -> list[list[Run]]:
    """The runs of several launches (the unit of evidence) of each setting
    (:data:`ENVIRONMENT`) that has two or more, oldest first."""
    found: dict[tuple, list[Run]] = {}
    for run in members:
        if len(run.launches or ()) >= 2:
            found.setdefault(tuple(run.fields.get(k) for k in ENVIRONMENT), []).append(run)
    return [runs for runs in found.values() if len(runs) >= 2]
