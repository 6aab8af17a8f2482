"""Result files: one JSON document per run, versioned, written atomically, never overwritten.

Layout: ``<results>/<machine>/<run_id>[-<label>].json``. Each document carries ``schema`` (the
format's name) and ``schema_version``; :data:`MIGRATIONS` upgrades older versions on load, one
step at a time, so old files keep working. A file that is corrupt, foreign or from a newer
dsbench is reported in one line naming it and skipped; every other file still loads. Reading
never modifies anything. Migrations work on the raw JSON; then the document must make a
:class:`dsbench.records.RunRecord` and each row a :class:`dsbench.records.Row` (:attr:`Run.record`
gives the run typed, :attr:`Run.rows` its rows by id). Writers hand :func:`write_run` the run
typed; it becomes JSON only there.

Schema versions: 1, the first; 2 adds ``source``, the tool that measured the run (``dsbench`` or
``asv``, :data:`SOURCES`); 3 adds rounds: each ``ok`` row's ``rounds`` partitions its samples
into rounds, in order (``{"launch": i, "n": count}``: ``n`` samples from launch ``i``, a fresh
process; several entries of one launch are rounds inside it, each a fresh setup alternated with
the cases it is compared with), and the run's ``launches`` lists its launches. Runs of several
launches (``dsbench ab``, ``dsbench noise``) set ``value`` to the geometric mean of the launches'
medians, the centre compare judges (:func:`dsbench.stats.centre`). Files of versions 1 and 2
were one launch each.

A run stopped by SIGINT or SIGTERM (``dsbench run``) keeps the rows that finished; the rest have
``status: "interrupted"`` and the run ``"interrupted": {"signal": "SIGTERM", "finished": N}``.
This came later within schema 3 and needs no migration: files without it are runs that ended.

asv's own result files (``results/asv/``, ``machine.json``, ``benchmarks.json``) live under the
same root and are recognised and left to the asv reader (:mod:`dsbench.results.asv`), which
turns each asv result file into a :class:`Run` of the same shape;
:func:`dsbench.results.asv.load_all_runs` returns both kinds. Claim files (``results/claims/``,
published tables to check, not results) are left to :mod:`dsbench.publish.data.claims`.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from dsbench import records
from dsbench.procs import host
from dsbench.errors import UsageError
from dsbench.records import fingerprint

if TYPE_CHECKING:
    from dsbench.hardware import Profile

SCHEMA = "dsbench-result"
SCHEMA_VERSION = 3
STATUSES = records.STATUSES
DIRECTIONS = records.DIRECTIONS
SOURCES = records.SOURCES


def _v1_to_v2(doc: dict) -> dict:
    """Schema 2 records which tool measured the run. Every version-1 file was written by
    ``dsbench run`` (asv's results were never stored as dsbench files), so its source is dsbench.
    """
    doc.setdefault("source", "dsbench")
    return doc


def _v2_to_v3(doc: dict) -> dict:
    """Schema 3 records rounds. A version-2 file was one launch (``dsbench run``, or one asv
    environment); its in-process rounds were not recorded, so each row is one round."""
    doc.setdefault("launches", [{"started": doc.get("created")}])
    rows = doc.get("benchmarks")
    for row in rows if isinstance(rows, list) else []:  # validate() names what is wrong
        if isinstance(row, dict) and isinstance(row.get("samples"), list) and row["samples"]:
            row.setdefault("rounds", [{"launch": 0, "n": len(row["samples"])}])
    return doc


MIGRATIONS: dict[int, Callable[[dict], dict]] = {1: _v1_to_v2, 2: _v2_to_v3}
"""``MIGRATIONS[v](doc)`` turns a version-``v`` document into a version ``v + 1`` one."""

REQUIRED_RUN_FIELDS = records.REQUIRED_RUN_FIELDS
OPTIONAL_RUN_FIELDS = records.OPTIONAL_RUN_FIELDS
ASV_DIR = "asv"
ASV_HTML_DIR = "asv-html"
"""``asv publish`` writes its site here (``html_dir`` in asv.conf.json); its JSON is not ours."""
CLAIMS_DIR = "claims"


class ResultFileError(UsageError):
    """A result file that cannot be used; the message is one line naming the file. Loaders
    skip such a file with a warning; where one is not caught, the CLI exits 2 with it."""


def default_results_dir() -> Path:
    return Path(os.environ.get("DSBENCH_RESULTS") or "results")


def writable_results_dir(asked: str | os.PathLike | None) -> tuple[Path, str | None]:
    """Where a run writes: ``asked`` (``--out``), else ``$DSBENCH_RESULTS``, else ``./results``;
    and the line to print when ``./results`` cannot be written (a read-only checkout) and the
    user's state folder, or else a temporary one, is used instead (:mod:`dsbench.procs.host`). A
    folder the user named is kept: :func:`check_writable` then says why it cannot be used."""
    if asked or os.environ.get("DSBENCH_RESULTS"):
        return Path(asked or default_results_dir()), None
    default = default_results_dir()
    why = host.cannot_write(default / machine_name())
    if why is None:
        return default, None
    instead = host.first_writable(host.state_dir("results"), host.user_temp("results"))
    if instead is None:
        return default, None  # check_writable names the problem
    return instead, (
        f"cannot write result files in {default.resolve()} ({why}): writing them to {instead} "
        "instead; choose the folder with --out PATH or DSBENCH_RESULTS=PATH"
    )


def machine_name() -> str:
    """Folder name for this machine's runs: $DSBENCH_MACHINE or the host name, made path-safe."""
    name = os.environ.get("DSBENCH_MACHINE") or socket.gethostname() or "unknown"
    return slug(name)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:60] or "x"


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def write_run(
    run: records.RunRecord | dict, root: Path | str | None = None, path: Path | str | None = None
) -> Path:
    """Write ``run`` (a record, or its JSON) atomically (temporary file, fsync, link into place);
    never overwrite.

    ``path`` names the file exactly; otherwise ``<root>/<machine>/<run_id>[-label].json``.
    """
    doc = run.to_json() if isinstance(run, records.RunRecord) else run
    run = validate(doc, "<new run>")
    if path is None:
        root = Path(root) if root is not None else default_results_dir()
        name = run.run_id + (f"-{slug(run.label)}" if run.label else "") + ".json"
        path = root / run.machine / name
    path = Path(path)
    if path.exists():
        raise UsageError(f"{path} already exists; dsbench never overwrites a result file")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(run_text(doc))
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)  # fails if path appeared meanwhile: no overwrite, ever
    except FileExistsError:
        raise UsageError(f"{path} already exists; dsbench never overwrites a result file") from None
    finally:
        os.unlink(tmp)
    return path


def run_text(run: records.RunRecord | dict) -> str:
    """A result file's text: the run's JSON as :func:`write_run` writes it."""
    doc = run.to_json() if isinstance(run, records.RunRecord) else run
    return json.dumps(doc, indent=1, allow_nan=False, default=_json_default) + "\n"


def check_writable(folder: Path | str) -> None:
    """Before a run: ``folder`` can be created and a file written, flushed and removed there
    (read-only, no permission, no space), else a one-line UsageError naming it."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(prefix=".tmp-", suffix=".json", dir=folder) as f:
            f.write(b" " * 65536)  # about what a result file takes
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise UsageError(f"cannot write result files in {folder}: {exc.strerror}") from None


def _json_default(obj):
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def validate(doc: dict, where: str) -> records.RunRecord:
    """Check the fields every reader relies on; raise ResultFileError naming the first problem.
    Returns the run, typed."""
    try:
        return records.RunRecord.from_json(doc)
    except records.RecordError as exc:
        raise ResultFileError(f"{where}: {exc}") from None


def checked(run: records.RunRecord, where: str) -> records.RunRecord:
    """``run``, built in code, after the checks :func:`validate` makes of a file's JSON."""
    validate(run.to_json(), where)
    return run


def row_rounds(row: records.Row | dict, unit: str = "launch") -> list[list[float]]:
    """The row's samples split into rounds (:func:`dsbench.records.split_rounds`); ``row`` a
    :class:`~dsbench.records.Row` or its JSON."""
    if isinstance(row, records.Row):
        return row.round_samples(unit)
    rounds = [(r["launch"], r["n"]) for r in row["rounds"]] if row.get("rounds") else None
    return records.split_rounds(row.get("value"), row.get("samples"), rounds, unit)


def migrate(doc: dict, where: str) -> dict:
    """Upgrade ``doc`` to :data:`SCHEMA_VERSION` through :data:`MIGRATIONS` (a new dict)."""
    version = doc.get("schema_version")
    if not isinstance(version, int):
        raise ResultFileError(f"{where}: 'schema_version' missing or not an integer")
    if version > SCHEMA_VERSION:
        raise ResultFileError(
            f"{where}: schema version {version} is newer than this dsbench "
            f"reads ({SCHEMA_VERSION}); upgrade dsbench"
        )
    while version < SCHEMA_VERSION:
        if version not in MIGRATIONS:
            raise ResultFileError(f"{where}: no migration from schema version {version}")
        doc = MIGRATIONS[version](json.loads(json.dumps(doc)))
        version += 1
        doc["schema_version"] = version
    return doc


@dataclass
class Run:
    """A loaded result file: the run typed (``record``, migrated), and where it came from."""

    path: Path
    record: records.RunRecord = field(repr=False)
    migrated_from: int | None = None
    _fields: dict | None = field(default=None, repr=False)
    _rows: dict[str, records.Row] | None = field(default=None, repr=False)
    _hardware: fingerprint.Fingerprint | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        return self.record.run_id

    @property
    def created(self) -> str:
        return self.record.created

    @property
    def label(self) -> str | None:
        return records.value_or(self.record.label)

    @property
    def machine(self) -> str:
        return self.record.machine

    @property
    def source(self) -> str:
        """The tool that measured the run: one of :data:`SOURCES`."""
        return self.record.source

    @property
    def suite(self) -> str | None:
        return records.value_or(self.record.suite)

    @property
    def purpose(self) -> str | None:
        """Why the run was made, where not a plain run: ``noise``, ``soak``."""
        return records.value_or(self.record.purpose)

    @property
    def ab(self) -> records.ABBlock | None:
        """After ``dsbench ab``: the pair's block (id, side, spec, rounds, order, other run)."""
        return records.value_or(self.record.ab)

    @property
    def sweep(self) -> records.SweepBlock | None:
        """After ``dsbench sweep``: the series' block (id, axis, sides, this side's position)."""
        return records.value_or(self.record.sweep)

    @property
    def soak(self) -> dict | None:
        return records.value_or(self.record.soak)

    @property
    def argv(self) -> list[str] | None:
        return records.value_or(self.record.argv)

    @property
    def wall_s(self) -> float | None:
        return records.value_or(self.record.wall_s)

    @property
    def profile(self) -> dict | None:
        """The hardware profile the run's shares of peak divide by, as stored."""
        return records.value_or(self.record.profile)

    @property
    def env(self) -> dict:
        return self.record.env

    @property
    def launches(self) -> list[records.LaunchInfo] | None:
        return records.value_or(self.record.launches)

    @property
    def rows(self) -> dict[str, records.Row]:
        """The rows by id."""
        if self._rows is None:
            self._rows = {r.id: r for r in self.record.rows}
        return self._rows

    @property
    def hardware(self) -> fingerprint.Fingerprint:
        """The hardware the run was measured on (:mod:`dsbench.records.fingerprint`): stored
        in its environment, or derived from an older file's environment."""
        if self._hardware is None:
            self._hardware = fingerprint.from_env(self.record.env)
        return self._hardware

    @property
    def fields(self) -> dict[str, str | None]:
        """Flat fields for selectors: the environment's summary plus run-level facts."""
        if self._fields is None:
            f = dict(records.summary_fields(self.record.env))
            suite = records.value_or(self.record.suite)
            f.update(label=self.label, suite=suite, run=self.id, machine=self.machine)
            if (records.value_or(self.record.profile) or {}).get("name"):
                f["profile"] = self.record.profile["name"]
            self._fields = f
        return self._fields

    def describe(self) -> str:
        label = f" label '{self.label}'" if self.label else ""
        return f"run {self.id}{label} ({self.created}, {self.path})"


def read_run(path: Path | str) -> Run:
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultFileError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ResultFileError(f"{path}: corrupt JSON ({exc.msg} at line {exc.lineno})") from None
    except ValueError:  # json's limit of 4300 digits
        raise ResultFileError(f"{path}: corrupt JSON (a number too long)") from None
    except RecursionError:
        raise ResultFileError(f"{path}: corrupt JSON (nested too deeply)") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ResultFileError(f'{path}: not a dsbench result file (no "schema": "{SCHEMA}")')
    original = doc.get("schema_version")
    doc = migrate(doc, str(path))
    record = validate(doc, str(path))
    migrated_from = original if original != SCHEMA_VERSION else None
    return Run(path=path, record=record, migrated_from=migrated_from)


def is_asv_file(path: Path, root: Path) -> bool:
    """asv's results (handled by the asv reader, not here) and the site ``asv publish`` made."""
    rel = path.relative_to(root).parts
    return rel[0] in (ASV_DIR, ASV_HTML_DIR) or path.name in ("machine.json", "benchmarks.json")


def is_foreign_file(path: Path, root: Path) -> bool:
    """Files under the results root that are not dsbench result files: asv's, and claims."""
    return is_asv_file(path, root) or path.relative_to(root).parts[0] == CLAIMS_DIR


def load_runs(
    root: Path | str | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[Run]:
    """All dsbench runs under ``root``, oldest first. Bad files: one warning each, then skipped.
    asv's result files under ``root/asv`` are read by :func:`dsbench.results.asv.load_all_runs`.
    """
    import sys

    root = Path(root) if root is not None else default_results_dir()
    warn = warn or (lambda msg: print(f"dsbench: warning: {msg}", file=sys.stderr))
    runs = []
    if not root.is_dir():
        return runs
    for path in sorted(root.rglob("*.json")):
        if path.name.startswith(".tmp-") or is_foreign_file(path, root):
            continue
        try:
            runs.append(read_run(path))
        except ResultFileError as exc:
            warn(f"skipping {exc}")
    runs.sort(key=lambda r: (r.created, r.id))
    return runs


def new_run_doc(
    *,
    suite: str,
    label: str | None,
    env: dict,
    profile: Profile,
    rows: list[Row],
    started: datetime,
    argv: list[str] | None = None,
) -> records.RunRecord:
    """A run's document: its rows, environment and profile, started at ``started`` and finished
    now, on this machine, with this process as its one launch."""
    finished = datetime.now(UTC)
    return records.RunRecord(
        schema=SCHEMA,
        schema_version=SCHEMA_VERSION,
        source="dsbench",
        run_id=new_run_id(started),
        created=started.isoformat(timespec="seconds"),
        finished=finished.isoformat(timespec="seconds"),
        wall_s=round((finished - started).total_seconds(), 3),
        machine=machine_name(),
        label=label,
        suite=suite,
        argv=argv if argv is not None else sys.argv[1:],
        env=env,
        profile=profile.to_dict(),
        launches=[records.LaunchInfo(started=started.isoformat(timespec="seconds"), pid=os.getpid())],
        benchmarks=tuple(rows),
    )
