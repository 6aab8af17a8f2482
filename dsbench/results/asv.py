"""asv's result files as dsbench runs: one :class:`~dsbench.results.Run` per asv result file
(one machine x commit x environment), shaped like dsbench's own result documents so that
``compare`` and ``publish`` read both alike.

Entry points: :func:`load_all_runs` (dsbench's runs and asv's under ``results/asv``),
:func:`load_asv_runs` (every asv result file under one asv ``results_dir``), :func:`read_asv_run`
(one file) and :func:`direction_of`. What asv writes: [Note: asv's result files].

What a run becomes:

- ``run_id`` ``asv-<commit8>-<env name>``, ``suite`` ``asv``, ``source`` ``asv``, and ``asv``
  (env name, result file, commit, requirements) so pages can link it; ``created`` is when its
  first benchmark started.
- ``env``: Python and package versions from asv's ``python`` and ``requirements`` (the versions
  the matrix asked for: asv does not record a build tag such as ``+cpu``), the commit, the
  machine's CPU and OS; none for an existing environment (``asv run --python=same``).
- Rows: named, with unit and direction, as [Note: asv rows as dsbench rows] says; statistics
  from the samples when asv kept them (``--record-samples``), else from the one value
  (``stats.n == 1``: quick mode, which ``compare`` calls inconclusive); the samples of ``track_``
  and ``peakmem_`` benchmarks are launches (:data:`ONE_VALUE_PER_ROUND`). asv's own 99% CI and
  quartiles, where recorded, stay in the row's ``asv`` entry.

Invariant: a dsbench definition's primary metric gets the id of the ``dsbench run`` row of the
same case, so asv's and dsbench's runs pair up in ``compare``
(``tests/test_asv_results.py::test_rows_take_ids_units_and_direction_from_the_definitions``).
A file that cannot be read as an asv result gets one warning naming it and is skipped.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from dsbench.records import HIGHER, LOWER, OK, Direction, Round, Row, RunRecord, Stats, case_id
from dsbench.results import SCHEMA, SCHEMA_VERSION, ResultFileError, Run, checked

# [Note: asv's result files]
# asv writes (format version 2, see asv's ``results.py``)::
#
#     <root>/benchmarks.json                      name -> param_names, unit, type, ...
#     <root>/<machine>/machine.json               arch, cpu, num_cpu, os, ram
#     <root>/<machine>/<commit8>-<env name>.json  commit_hash, env_name, python, requirements,
#                                                 params, result_columns, results
#
# and each entry of ``results`` is a row under ``result_columns``: ``result`` (one value per
# parameter combination, in ``itertools.product`` order; ``null`` = failed, ``NaN`` = skipped by
# ``NotImplementedError``), ``params`` (the values' reprs), ``started_at`` (ms since the epoch),
# ``stats_ci_99_a/b``, ``stats_q_25/75``, ``samples``.
ASV_API_VERSION = 2
SKIP_FILES = ("machine.json", "benchmarks.json")
HIGHER_UNITS_SUFFIX = "/s"
"""Throughput units (GB/s, TFLOP/s, samples/s, tokens/s): higher is better."""
ASV_UNITS = {"time": "seconds", "peakmem": "bytes", "mem": "bytes", "track": "unit"}
"""asv's default unit per benchmark type (its prefix)."""
PACKAGES = ("torch", "triton", "numpy", "deepspeed")
ONE_VALUE_PER_ROUND = ("track", "peakmem", "mem")
"""asv benchmark types that give one value per round (a fresh process each): where asv kept
their samples (``--record-samples``; dsbench's ``track_`` benchmarks return a one-sample timing
result so that it does, ``benchmarks/_adapter.py``'s ``one_sample``), each sample is one launch,
the unit compare judges by. A ``time_`` benchmark's samples from several rounds are stored without
their boundaries, so they count as one launch."""
ASV_STATS = ("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat")


class AsvFileError(Exception):
    """An asv file that cannot be used; the message names the file and the problem."""


def direction_of(unit: str) -> Direction:
    """Higher is better for throughput (``.../s``), lower for everything else (time, ms/token,
    bytes; also units asv leaves unnamed, which asv itself treats as lower-is-better)."""
    return HIGHER if unit.endswith(HIGHER_UNITS_SUFFIX) else LOWER


def _definitions() -> dict[str, tuple[str, tuple[tuple[str, str, Direction], ...]]]:
    """dsbench's benchmarks by the asv class name the adapter gives them (``train_step`` ->
    ``TrainStep``: lower case, underscores dropped): (name, metrics, the primary first)."""
    from dsbench.records import METRICS

    return {name.replace("_", "").lower(): (name, metrics) for name, metrics in METRICS.items()}


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise AsvFileError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise AsvFileError(f"{path}: corrupt JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise AsvFileError(f"{path}: not an asv file (not a JSON object)")
    return data


def _benchmark_meta(root: Path, warn: Callable[[str], None]) -> dict[str, dict]:
    path = root / "benchmarks.json"
    if not path.is_file():
        warn(f"{path}: missing; asv parameters are named by position (param1, param2, ...)")
        return {}
    try:
        data = _read_json(path)
    except AsvFileError as exc:
        warn(f"{exc}; asv parameters are named by position")
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def _param_value(text):
    """asv stores parameter values as their reprs ("'torch'", "1048576", "True")."""
    if not isinstance(text, str):
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _iso(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def _version(value) -> str | None:
    """A requirement's version as asv's matrix gives it ('' = whatever pip chose: unknown)."""
    if not isinstance(value, str) or not value:
        return None
    return value.lstrip("=") or None


def _columns(data: dict, name: str, row: list) -> dict:
    cols = dict(zip(data["result_columns"], row, strict=False))
    if "result" not in cols:
        raise AsvFileError(f"benchmark '{name}' has no 'result' column")
    return cols


def _at(values, i):
    """Element ``i`` of a per-combination column, or None (column missing or short)."""
    if not isinstance(values, list) or i >= len(values):
        return None
    return values[i]


def _stats(value: float, cols: dict, i: int) -> tuple[Stats, list | None]:
    """(stats as dsbench writes them, raw samples or None) for combination ``i``: from the
    samples when asv kept them (``--record-samples``), else from the one value (n = 1)."""
    from dsbench.stats import summarize

    samples = _at(cols.get("samples"), i)
    if isinstance(samples, list) and samples and all(_finite(x) for x in samples):
        return Stats.of(summarize(samples)), samples
    return Stats.of(summarize([value])), None


def _finite(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


# [Note: asv rows as dsbench rows]
# A ``track_<metric>`` of a dsbench definition (see ``benchmarks/_adapter.py``) takes the
# definition's unit and direction, and for its primary metric the same id as a ``dsbench run``
# row (``adamw[impl=torch,params=1000000]``), so asv's and dsbench's own runs pair up in
# ``compare``; asv's other measurements get ``<name>.<method>`` (``adamw.time_call``). Anything
# else keeps asv's name, and its direction comes from the unit: throughput (``*/s``) higher is
# better; time, ``ms/token`` and bytes lower, as is anything unknown (asv's convention).
def _describe(name: str, meta: dict, defs: dict) -> dict:
    """How rows of asv benchmark ``name`` are named, and their unit and direction."""
    parts = name.split(".")
    method = parts[-1]
    kind = method.split("_", 1)[0]
    unit = meta.get("unit") or ASV_UNITS.get(kind, "unit")
    bench = defs.get(parts[-2].lower()) if len(parts) >= 3 else None
    if bench is not None:
        bench_name, metrics = bench
        metric = next((m for m in metrics if method == f"track_{m[0]}"), None)
        if metric is not None and metric == metrics[0]:  # the primary metric: the row's own id
            return {
                "name": bench_name,
                "metric": metric[0],
                "unit": metric[1],
                "direction": metric[2],
            }
        if metric is not None:
            unit = metric[1]
        return {
            "name": f"{bench_name}.{method}",
            "metric": method,
            "unit": unit,
            "direction": metric[2] if metric else direction_of(unit),
        }
    return {"name": name, "metric": method, "unit": unit, "direction": direction_of(unit)}


def _rows(data: dict, metas: dict[str, dict], defs: dict) -> tuple[list[Row], list[float]]:
    """dsbench rows for every benchmark in an asv result file, and the start times seen."""
    rows, started = [], []
    for name, row in sorted(data["results"].items()):
        if not isinstance(row, list):
            raise AsvFileError(f"benchmark '{name}': result row is not a list")
        cols = _columns(data, name, row)
        meta = metas.get(name, {})
        desc = _describe(name, meta, defs)
        if isinstance(cols.get("started_at"), int | float):
            started.append(cols["started_at"])
        param_values = cols.get("params") or []
        names = meta.get("param_names") or [f"param{k + 1}" for k in range(len(param_values))]
        if len(names) != len(param_values):
            raise AsvFileError(
                f"benchmark '{name}': {len(param_values)} parameter lists but benchmarks.json "
                f"names {len(names)}"
            )
        combos = list(itertools.product(*param_values))
        results = cols["result"]
        if not isinstance(results, list):  # the whole benchmark failed (or a single value)
            results = [results] * len(combos)
        if len(results) != len(combos):
            raise AsvFileError(
                f"benchmark '{name}': {len(results)} results for {len(combos)} parameter "
                "combinations"
            )
        kind = name.rsplit(".", 1)[-1].split("_", 1)[0]
        for i, (combo, value) in enumerate(zip(combos, results, strict=True)):
            params = {k: _param_value(v) for k, v in zip(names, combo, strict=True)}
            row = Row(
                id=case_id(desc["name"], params),
                name=desc["name"],
                params=params,
                metric=desc["metric"],
                unit=desc["unit"],
                direction=desc["direction"],
                key_order=ROW_ORDER,
                **_outcome(name, kind, value, cols, i),
            )
            rows.append(row)
    rows.sort(key=lambda r: r.name)  # stable: combinations stay in asv's order
    return rows, started


ROW_ORDER = ("id", "name", "params", "metric", "unit", "direction", "asv", "status", "value",
             "stats", "samples", "rounds")  # fmt: skip
"""The order of an asv row's keys (as they have always been)."""


def _outcome(name: str, kind: str, value, cols: dict, i: int) -> dict:
    """The status of combination ``i`` of asv benchmark ``name`` (of type ``kind``) and what
    goes with it: why it failed or was skipped, or its value, statistics and samples; and
    ``asv``, where asv's name, version and own statistics stay."""
    asv = {"benchmark": name, "version": cols.get("version")}
    if value is None:
        return {"asv": asv, "status": "failed", "error": "asv recorded no value: the benchmark "
                "failed (`asv run --show-stderr` shows why)"}  # fmt: skip
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise AsvFileError(f"benchmark '{name}': result {value!r} is not a number")
    if math.isnan(value):
        return {"asv": asv, "status": "skipped", "reason": "not available in this environment "
                "(NotImplementedError; asv records no reason)"}  # fmt: skip
    stats, samples = _stats(float(value), cols, i)
    asv_stats = {k: _at(cols.get(f"stats_{k}"), i) for k in ASV_STATS}
    out = {
        "status": OK,
        "value": float(value),
        "stats": stats,
        "asv": asv | {k: v for k, v in asv_stats.items() if v is not None},
    }
    if samples is not None:
        out["samples"] = samples
        if kind in ONE_VALUE_PER_ROUND:
            out["rounds"] = [Round(launch=k, n=1) for k in range(len(samples))]
    return out


def read_asv_run(
    path: Path, root: Path, metas: dict[str, dict], machines: dict[Path, dict], defs: dict
) -> Run:
    """One asv result file as a :class:`Run`; raises :class:`AsvFileError` naming the file."""
    data = _read_json(path)
    try:
        version = data.get("version")
        if version != ASV_API_VERSION:
            raise AsvFileError(
                f"asv result format version {version!r}, expected {ASV_API_VERSION} "
                "(`asv update` converts older files)"
            )
        for key, typ in (
            ("commit_hash", str),
            ("env_name", str),
            ("params", dict),
            ("result_columns", list),
            ("results", dict),
        ):
            if not isinstance(data.get(key), typ):
                raise AsvFileError(f"field '{key}' missing or not {typ.__name__}")
        rows, started = _rows(data, metas, defs)
    except AsvFileError as exc:
        raise AsvFileError(f"{path}: {exc}") from None
    params = data["params"]
    requirements = data.get("requirements") or {}
    commit, env_name = data["commit_hash"], data["env_name"]
    machine = params.get("machine") or path.parent.name
    info = machines.get(path.parent, {})
    # `asv run --python=same` measures an existing environment: asv then records the
    # interpreter's path as "python" and the matrix's requirements, which it did not install.
    existing = env_name.startswith("existing-")
    packages = {k: None for k in PACKAGES}
    if not existing:
        packages.update({k: _version(requirements.get(k, params.get(k))) for k in PACKAGES})
        packages.update({k: _version(v) for k, v in requirements.items() if k not in packages})
    python = str(data.get("python") or params.get("python") or "")
    when = min(started) if started else data.get("date")
    env = {
        "python": {"version": python if re.fullmatch(r"\d+(\.\d+)*", python) else None},
        "packages": packages,
        "dsbench": {"commit": commit},
        "backend": None,
        "platform": {"os": params.get("os") or info.get("os"), "machine": params.get("arch")},
        "cpu": {
            "model": params.get("cpu") or info.get("cpu"),
            "logical_cpus": params.get("num_cpu") or info.get("num_cpu"),
        },
        "asv_env": env_name,
        "env_vars": data.get("env_vars") or {},
    }
    built = RunRecord(
        schema=SCHEMA,
        schema_version=SCHEMA_VERSION,
        run_id=f"asv-{commit[:8]}-{env_name}",
        created=_iso(when) if isinstance(when, int | float) else "1970-01-01T00:00:00+00:00",
        machine=machine,
        label=None,
        suite="asv",
        source="asv",
        asv={
            "env_name": env_name,
            "file": str(path.relative_to(root)),
            "results_dir": str(root),
            "commit": commit,
            "python": data.get("python"),
            "requirements": requirements,
            "existing_env": existing,
            "machine_params": params,
        },
        env=env,
        benchmarks=tuple(rows),
        key_order=ASV_RUN_KEYS,
    )
    try:
        record = checked(built, str(path))
    except ResultFileError as exc:
        raise AsvFileError(str(exc)) from None
    return Run(path=path, record=record)


ASV_RUN_KEYS = ("schema", "schema_version", "run_id", "created", "machine", "label", "suite",
                "source", "asv", "env", "benchmarks")  # fmt: skip
"""The order of an asv run's keys (its JSON), as this reader has always given them."""


def load_asv_runs(root: Path | str, warn: Callable[[str], None]) -> list[Run]:
    """Every asv result file under ``root`` (asv's ``results_dir``) as a run, oldest first.

    A corrupt or foreign file: one warning naming it, then skipped; the others still load.
    """
    root = Path(root)
    files = [p for p in sorted(root.glob("*/*.json")) if p.name not in SKIP_FILES]
    if not files:
        return []
    metas = _benchmark_meta(root, warn)
    machines = {}
    for machine_json in root.glob("*/machine.json"):
        try:
            machines[machine_json.parent] = _read_json(machine_json)
        except AsvFileError as exc:
            warn(f"skipping {exc}")
    defs = _definitions()
    runs = []
    for path in files:
        try:
            runs.append(read_asv_run(path, root, metas, machines, defs))
        except AsvFileError as exc:
            warn(f"skipping {exc}")
    runs.sort(key=lambda r: (r.created, r.id))
    return runs


def load_all_runs(
    root: Path | str | None = None, warn: Callable[[str], None] | None = None
) -> list[Run]:
    """dsbench's runs under ``root`` and asv's under ``root/asv``, oldest first (bad files: one
    warning each, then skipped). A ``root`` that is itself asv's ``results_dir`` (it holds
    ``benchmarks.json``, as ``results/asv`` does) gives asv's runs alone."""
    import sys

    from dsbench.results import ASV_DIR, default_results_dir, load_runs

    root = Path(root) if root is not None else default_results_dir()
    warn = warn or (lambda msg: print(f"dsbench: warning: {msg}", file=sys.stderr))
    if (root / "benchmarks.json").is_file():
        return sorted(load_asv_runs(root, warn), key=lambda r: (r.created, r.id))
    runs = load_runs(root, warn)
    if (root / ASV_DIR).is_dir():
        runs.extend(load_asv_runs(root / ASV_DIR, warn))
        runs.sort(key=lambda r: (r.created, r.id))
    return runs
