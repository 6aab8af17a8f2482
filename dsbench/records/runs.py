"""A run (:class:`RunRecord`, one result file) and what its header holds: the launches, the
A/B block, a stop by signal; and the flat fields of a recorded environment that selectors and
confounder checks compare (:func:`summary_fields`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .base import UNSET, Record, RecordError, Unset
from .rows import NESTED, Row

SOURCES = ("dsbench", "asv")
"""Which tool measured a run (``source``, schema 2 on): ``dsbench run`` writes ``"dsbench"``;
:mod:`dsbench.results.asv` gives the runs it converts from asv's files ``"asv"``. Publish
groups, labels and links runs by it (an asv run's page points at asv's own)."""
REQUIRED_RUN_FIELDS = {"source": str, "run_id": str, "created": str, "machine": str,
                       "env": dict, "benchmarks": list}  # fmt: skip
OPTIONAL_RUN_FIELDS = {"label": str, "suite": str, "purpose": str, "profile": dict,
                       "launches": list}  # fmt: skip
"""Absent or null, or of this type: selectors, compare and publish read them."""


def dig(env: dict, *keys: str | int):
    """``env[k1][k2]...`` through dicts and lists; None where a key or index is missing."""
    value = env
    for key in keys:
        if isinstance(value, list):
            value = value[key] if isinstance(key, int) and len(value) > key else None
        elif isinstance(value, dict):
            value = value.get(key)
        else:
            return None
    return value


def summary_fields(env: dict) -> dict[str, str | None]:
    """Flat string fields for selectors (``python=3.11``) and confounder checks; missing -> None.

    Tolerates partial or older env dicts (migrated result files, asv runs).
    """
    fields = {
        "python": dig(env, "python", "version"),
        "torch": dig(env, "packages", "torch"),
        "triton": dig(env, "packages", "triton"),
        "numpy": dig(env, "packages", "numpy"),
        "deepspeed": dig(env, "packages", "deepspeed"),
        "dsbench": dig(env, "dsbench", "version"),
        "commit": dig(env, "dsbench", "commit"),
        "dirty": dig(env, "dsbench", "dirty"),
        "backend": env.get("backend"),
        "profile": dig(env, "profile", "name"),
        "device": dig(env, "devices", 0, "name"),
        "device_count": env.get("device_count"),
        "cpu": dig(env, "cpu", "model"),
        "threads": dig(env, "cpu", "torch_threads"),
        "cuda": dig(env, "runtime", "cuda"),
        "hip": dig(env, "runtime", "hip"),
        "nccl": dig(env, "runtime", "nccl"),
        "driver": env.get("driver"),
        "machine": dig(env, "platform", "hostname"),
        "os": dig(env, "platform", "os"),
    }
    out: dict[str, str | None] = {}
    for key, value in fields.items():
        if isinstance(value, bool):
            value = "yes" if value else "no"
        out[key] = None if value is None else str(value)
    return out


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class LaunchInfo(Record):
    """One launch of a run, a fresh process (``launches[i]``)."""

    started: str | Unset | None = UNSET
    """When it started, ISO 8601 (None: a migrated file that had no ``created``)."""
    pid: int | Unset = UNSET
    """``dsbench run``: its process id."""
    wall_s: float | Unset = UNSET
    """After ``dsbench ab``: its seconds, its place in the rounds, its run and command line."""
    order: int | Unset = UNSET
    run_id: str | Unset = UNSET
    argv: list[str] | Unset | None = UNSET


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Sequential(Record):
    """``dsbench ab --until-decided``: how the rounds were planned and why they stopped."""

    spending: str | Unset = UNSET
    """The alpha-spending function of the planned looks."""
    max_rounds: int | Unset = UNSET
    looks: int | Unset = UNSET
    """The rounds a side at the last look taken."""
    level: float | Unset = UNSET
    """That look's confidence level."""
    stopped: str | Unset = UNSET
    """``decided``, ``max-rounds`` or ``max-time``."""
    max_reps: str | Unset | None = UNSET
    """The ``--max-reps`` the later rounds ran with (None: their own)."""


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class ABBlock(Record):
    """After ``dsbench ab``: the pair a side belongs to (``ab``)."""

    id: str | Unset = UNSET
    """The pair's id, the same in both sides' files."""
    side: str | Unset = UNSET
    """``baseline`` or ``contender``."""
    spec: str | Unset = UNSET
    """The side as given (``deepspeed=0.18.4``)."""
    description: str | Unset = UNSET
    rounds: int | Unset = UNSET
    """Rounds (launches) a side."""
    order: str | Unset = UNSET
    """Which side ran each round: ``ABBAAB...``."""
    sequential: Sequential | Unset = UNSET
    other_run: str | Unset = UNSET
    """The other side's run id."""
    pairing: str | Unset = UNSET
    """``blocks``: both sides resident in each round, timing each case in alternating blocks
    judged as pairs (``dsbench ab --blocks``); unset: one launch a side per round."""
    block_pairs: int | Unset = UNSET
    """With ``pairing`` ``blocks``: the pairs of blocks of each case in a round (the fewest,
    where ``block_time_s`` is set)."""
    block_time_s: float | Unset = UNSET
    """With ``pairing`` ``blocks``: the seconds of blocks a case got in a round, as many pairs
    as fit (``dsbench ab --block-time``; unset before 12-06: ``block_pairs`` each)."""

    _NESTED: ClassVar[NESTED] = {"sequential": ("one", Sequential)}


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class SweepBlock(Record):
    """After ``dsbench sweep``: the series a side belongs to (``sweep``)."""

    id: str | Unset = UNSET
    """The sweep's id, the same in every side's file."""
    axis: str | Unset = UNSET
    """The axis as given (``deepspeed=0.17.2,0.18.3..0.18.9``)."""
    sides: list[str] | Unset = UNSET
    """Every side of the series, in the axis' order (``deepspeed=0.17.2``, ...)."""
    position: int | Unset = UNSET
    """This side's index in ``sides``."""
    spec: str | Unset = UNSET
    description: str | Unset = UNSET
    rounds: int | Unset = UNSET
    """Rounds the sweep ran (a side that failed has fewer launches)."""
    orders: list[list[int]] | Unset = UNSET
    """Each round's order of the sides (indices into ``sides``), drawn afresh every round."""
    failed: dict[str, str] | Unset = UNSET
    """Sides that could not run (by spec), and why."""


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Interrupted(Record):
    """A run stopped by a signal: which, and how many rows (a soak: steps) finished."""

    signal: str
    finished: int

    @classmethod
    def check(cls, data: dict) -> None:
        if not (isinstance(data.get("signal"), str) and isinstance(data.get("finished"), int)):
            raise RecordError("is not {signal, finished}")


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class RunRecord(Record):
    """A run: one result file (:mod:`dsbench.results`), its header and its rows, after
    migration to the current schema. Fields in the order ``dsbench run`` writes them, then
    what ``ab``, ``noise``, ``soak``, ``verify-gpu`` and the asv reader add."""

    schema: str | Unset = UNSET
    """``dsbench-result``."""
    schema_version: int | Unset = UNSET
    source: str
    """The tool that measured the run: one of :data:`SOURCES`."""
    run_id: str
    """``<UTC time>-<6 hex>`` (``asv-<commit>-<env>`` for asv's)."""
    created: str
    """When the run (its first launch) started, ISO 8601 with the offset."""
    finished: str | Unset = UNSET
    wall_s: float | Unset = UNSET
    """Seconds from start to finish (after ``dsbench ab``: the launches' sum)."""
    machine: str
    """The folder of the machine's runs: ``$DSBENCH_MACHINE`` or the host name."""
    label: str | Unset | None = UNSET
    suite: str | Unset | None = UNSET
    argv: list[str] | Unset | None = UNSET
    """The command line after ``dsbench``."""
    env: dict[str, Any]
    """The recorded environment (:func:`summary_fields` flattens it): open-ended, what
    ``dsbench.envinfo`` finds (packages, devices, runtime) and older versions found."""
    profile: dict[str, Any] | Unset | None = UNSET
    """The hardware profile the peaks came from (``dsbench.hardware.Profile.to_dict``)."""
    launches: list[LaunchInfo] | Unset | None = UNSET
    """Each launch, a fresh process, in the order of the rows' rounds."""
    benchmarks: tuple[Row, ...]
    """The rows, in order (also :attr:`rows`)."""
    purpose: str | Unset | None = UNSET
    """Why the run was made, where not a plain run: ``noise``, ``soak``."""
    ab: ABBlock | Unset = UNSET
    """After ``dsbench ab``: the pair's id, this side, its spec, rounds, order and other run."""
    sweep: SweepBlock | Unset = UNSET
    """After ``dsbench sweep``: the series, this side's place in it, the rounds' orders."""
    soak: dict[str, Any] | Unset = UNSET
    """A soak's faults, restarts, launches, status and problems (``dsbench.soak.report``)."""
    soak_rounds: list[Any] | Unset = UNSET
    """After ``dsbench ab --soak``: each launch's ``soak``."""
    interrupted: Interrupted | Unset | None = UNSET
    """A run stopped by a signal: ``{"signal": "SIGTERM", "finished": N}``."""
    build_seconds: dict[str, Any] | Unset = UNSET
    """``dsbench verify-gpu``: the kernels' build times, by kernel."""
    asv: dict[str, Any] | Unset = UNSET
    """Runs read from asv's files: the file, environment, commit and machine parameters."""

    _NESTED: ClassVar[NESTED] = {
        "benchmarks": ("tuple", Row),
        "launches": ("list", LaunchInfo),
        "ab": ("one", ABBlock),
        "sweep": ("one", SweepBlock),
        "interrupted": ("one", Interrupted),
    }

    @property
    def rows(self) -> tuple[Row, ...]:
        return self.benchmarks

    @classmethod
    def check(cls, data: dict) -> None:
        """What every reader relies on; the rows are checked after (``benchmarks[i] ...``)."""
        for key, typ in (REQUIRED_RUN_FIELDS | OPTIONAL_RUN_FIELDS).items():
            if key in OPTIONAL_RUN_FIELDS and data.get(key) is None:
                continue
            if key not in data:
                raise RecordError(f"missing field '{key}'")
            if not isinstance(data[key], typ):
                raise RecordError(
                    f"field '{key}' should be {typ.__name__}, got {type(data[key]).__name__}"
                )
        if data["source"] not in SOURCES:
            raise RecordError(f"source '{data['source']}' is not one of {', '.join(SOURCES)}")
        stopped = data.get("interrupted")
        if stopped is not None and not (
            isinstance(stopped, dict)
            and isinstance(stopped.get("signal"), str)
            and isinstance(stopped.get("finished"), int)
        ):
            raise RecordError("'interrupted' is not {signal, finished}")
