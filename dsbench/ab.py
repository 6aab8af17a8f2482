"""Two setups measured in alternating rounds (``dsbench ab``), and a machine's run-to-run noise
(``dsbench noise``).

A *side* is what runs a round: an interpreter and a dsbench source tree, plus extra import
paths. Each round is one fresh ``dsbench run`` process of one side (same suite, filter, sizes
and seeds for both; or, with ``--soak``, one ``dsbench soak`` with the same arguments), in the
order A B B A A B ..., so that a drift in machine load falls on
both sides alike (asv's ``--interleave-rounds``, Google Benchmark's random interleaving). The
rounds of a side are merged into one result file whose rows keep each launch's samples apart
(schema 3 ``rounds``), and :mod:`dsbench.compare` judges the pair with launches as its unit of
evidence (see the note in :mod:`dsbench.stats`).

Sides (``KIND=VALUE``):

- ``commit=REF``: that commit of this checkout, from a git worktree kept under ``.dsbench/``,
  run by the current interpreter;
- ``python=PATH_OR_VERSION``: this checkout under another interpreter (``3.12``: the
  ``.venv312`` that ``make test`` builds, made on first use);
- ``deepspeed=VERSION``: this checkout and interpreter with that DeepSpeed release instead,
  installed once (``pip install --target``, no dependencies, ``DS_BUILD_OPS=0``) under
  ``.dsbench/envs/``;
- ``asv-env=NAME``: this checkout in one of asv's matrix environments (``.asv/env``);
- ``current``: this checkout as it is, with the current interpreter.

A tree is put first on the import path through a *shim*: a folder whose ``dsbench/`` links to
the tree's ``dsbench/*`` and maps ``dsbench.kernels`` and ``dsbench.hardware_profiles`` to the
tree's top-level ``kernels/`` and ``hardware_profiles/`` (as pyproject's ``package-dir`` does),
so an editable install of another checkout cannot shadow it, in the round's process and in the
ranks it spawns.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dsbench import results
from dsbench.errors import UsageError, choices_message
from dsbench.records import UNSET, MetricValue, Round, Row, RunRecord, value_or

KINDS = ("commit", "python", "deepspeed", "asv-env", "current")
AXES = {
    "commit": {"commit", "dsbench"},
    "python": {"python"},
    "deepspeed": {"deepspeed"},
    "asv-env": {"python", "deepspeed", "torch", "triton", "numpy"},
    "current": set(),
}
"""The run fields each kind of side is meant to vary (compare lists any other difference)."""
STATE_DIR = ".dsbench"
LAUNCH_TIMEOUT_S = 4 * 3600


@dataclass(frozen=True)
class SideEnv:
    """How to start a round of one side."""

    spec: str
    """As given: ``commit=HEAD~1``."""
    kind: str
    python: str
    """The interpreter."""
    tree: Path
    """The dsbench source tree it runs."""
    paths: tuple[str, ...] = ()
    """Extra import paths after the tree's shim (a DeepSpeed release installed apart)."""
    description: str = ""

    @property
    def axes(self) -> set[str]:
        return AXES[self.kind]


def checkout_root() -> Path:
    """The git checkout dsbench runs from (its worktrees, shims and side envs live there)."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "pyproject.toml").is_file() or not (root / "kernels").is_dir():
        raise UsageError(f"dsbench ab needs dsbench's source checkout; {root} is an installed copy")
    return root


def is_checkout(path: Path) -> bool:
    """Whether ``path`` is the top of a dsbench source checkout."""
    return (
        (path / "pyproject.toml").is_file()
        and (path / "kernels" / "registry.py").is_file()
        and (path / "dsbench" / "cli").is_dir()
    )


def commit_repo(cwd: Path | None = None) -> tuple[Path, str]:
    """The repository ``commit=`` refs resolve in: the dsbench checkout the current directory
    is in, else the one dsbench runs from, with a note saying so (a ref typed in a second clone
    must not silently name a commit of another). Checked by ``tests/test_ab.py``."""
    top = _git(cwd or Path.cwd(), "rev-parse", "--show-toplevel")
    if top and is_checkout(Path(top)):
        return Path(top), ""
    root = checkout_root()
    return root, (
        f"commit= refs resolve in {root}, the checkout dsbench runs from: the current "
        "directory is not in a dsbench checkout"
    )


def tree_text(tree: Path) -> str:
    """``<repository> at <full sha>`` (and whether it has uncommitted changes) of a side's tree."""
    sha = _git(tree, "rev-parse", "HEAD")
    if sha is None:
        return f"{tree} (not a git checkout)"
    dirty = _git(tree, "status", "--porcelain", "--untracked-files=no")
    return f"{tree} at {sha}" + (" with uncommitted changes" if dirty else "")


def _git(root: Path, *args: str) -> str | None:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def parse_side(text: str, root: Path | None = None) -> SideEnv:
    """A side from its ``KIND=VALUE`` text; every problem is a :class:`UsageError` and nothing
    is run or written before both sides are known to be good."""
    kind, sep, value = text.partition("=")
    kind, value = kind.strip(), value.strip()
    if kind not in KINDS:
        raise UsageError(choices_message("side kind", kind, KINDS) + " (e.g. commit=HEAD~1)")
    if kind != "current" and not (sep and value):
        raise UsageError(f"side '{text}' has no value after '='; e.g. {kind}=...")
    if kind == "commit":
        return _commit_side(text, value, root or commit_repo()[0])
    root = root or checkout_root()
    return {
        "python": _python_side,
        "deepspeed": _deepspeed_side,
        "asv-env": _asv_side,
        "current": lambda t, v, r: SideEnv(
            t, "current", sys.executable, r, description="this checkout"
        ),
    }[kind](text, value, root)


def _commit_side(text: str, ref: str, root: Path) -> SideEnv:
    if _git(root, "rev-parse", "--show-toplevel") is None:
        raise UsageError(f"side '{text}': {root} is not a git checkout")
    sha = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if not sha:
        raise UsageError(
            f"side '{text}': unknown commit '{ref}' in {root}; give a branch, tag or sha "
            f"(newest: {_git(root, 'log', '-3', '--format=%h', 'HEAD') or '?'})".replace("\n", ", ")
        )
    tree = root / STATE_DIR / "worktrees" / sha[:12]
    if not (tree / "dsbench").is_dir():
        shutil.rmtree(tree, ignore_errors=True)
        _git(root, "worktree", "prune")
        proc = subprocess.run(
            ["git", "worktree", "add", "--detach", "--force", str(tree), sha],
            cwd=root,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise UsageError(f"side '{text}': git worktree add failed: {_last(proc.stderr)}")
    if not (tree / "dsbench" / "cli").is_dir():
        raise UsageError(f"side '{text}': commit {sha[:12]} has no dsbench/cli (too old)")
    return SideEnv(
        text, "commit", sys.executable, tree, description=f"commit {sha} ({ref}) of {root}"
    )


def _python_side(text: str, value: str, root: Path) -> SideEnv:
    path = Path(value).expanduser()
    if os.sep in value or path.is_file():
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UsageError(f"side '{text}': {path} is not an executable interpreter")
        python = str(path)
    elif re.fullmatch(r"3\.\d+", value):
        python = _python_for(text, value, root)
    else:
        raise UsageError(
            f"side '{text}': give an interpreter path or a version such as 3.12, not '{value}'"
        )
    side = SideEnv(text, "python", python, root, description=f"{python}")
    version = _probe(side, "import sys, torch; print('%d.%d' % sys.version_info[:2])")
    return SideEnv(text, "python", python, root, description=f"Python {version} ({python})")


def _python_for(text: str, version: str, root: Path) -> str:
    """The interpreter of a Python version: this one, or the venv ``make`` builds for it."""
    if version == f"{sys.version_info[0]}.{sys.version_info[1]}":
        return sys.executable
    venv = root / f".venv{version.replace('.', '')}"
    if not (venv / "bin" / "python").exists() and version == "3.12":
        print(f"dsbench ab: making {venv.name} (torch from the registry)", file=sys.stderr)
        proc = subprocess.run(["make", "-C", str(root), f"{venv.name}/.dsbench-installed"])
        if proc.returncode != 0:
            raise UsageError(
                f"side '{text}': could not make {venv} (make exited {proc.returncode})"
            )
    if not (venv / "bin" / "python").exists():
        raise UsageError(
            f"side '{text}': no Python {version} environment ({venv} is missing); give an "
            "interpreter path instead, e.g. python=/usr/bin/python3.12"
        )
    return str(venv / "bin" / "python")


def _deepspeed_side(text: str, version: str, root: Path) -> SideEnv:
    if not re.fullmatch(r"\d+(\.\d+){1,3}", version):
        raise UsageError(f"side '{text}': '{version}' is not a DeepSpeed version (e.g. 0.18.3)")
    target = root / STATE_DIR / "envs" / f"deepspeed-{version}"
    done = target / ".dsbench-installed"
    if not done.exists():
        shutil.rmtree(target, ignore_errors=True)
        print(f"dsbench ab: installing deepspeed=={version} into {target}", file=sys.stderr)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(target),
                f"deepspeed=={version}",
            ],
            env=dict(os.environ, DS_BUILD_OPS="0"),
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            raise UsageError(
                f"side '{text}': pip cannot install deepspeed=={version}: {_last(proc.stderr)}"
            )
        done.touch()
    side = SideEnv(text, "deepspeed", sys.executable, root, (str(target),))
    got = _probe(side, "import importlib.metadata as m; print(m.version('deepspeed'))")
    if got != version:
        raise UsageError(f"side '{text}': the side imports DeepSpeed {got}, not {version}")
    return SideEnv(
        text,
        "deepspeed",
        sys.executable,
        root,
        (str(target),),
        description=f"DeepSpeed {version} ({target})",
    )


def asv_envs(root: Path) -> dict[str, Path]:
    """asv's environments under ``.asv/env`` by name (``virtualenv-py3.11-deepspeed0.18.3-...``,
    asv's own naming), from the ``asv-env-info.json`` asv writes into each."""
    out = {}
    for info in sorted((root / ".asv" / "env").glob("*/asv-env-info.json")):
        try:
            data = json.loads(info.read_text())
            reqs = sorted((data.get("requirements") or {}).items())
            name = "-".join(
                [data["tool_name"], f"py{data['python']}", *(k + (v or "") for k, v in reqs)]
            )
        except (OSError, ValueError, KeyError):
            continue
        out[name] = info.parent
    return out


def _asv_side(text: str, name: str, root: Path) -> SideEnv:
    envs = asv_envs(root)
    if not envs:
        raise UsageError(
            f"side '{text}': no asv environments under {root / '.asv/env'}; "
            "build them with `make asv-full`"
        )
    matches = [n for n in envs if n == name] or [n for n in envs if name in n]
    if not matches:
        raise UsageError(choices_message("asv environment", name, envs))
    if len(matches) > 1:
        raise UsageError(
            f"side '{text}': '{name}' matches several asv environments "
            f"({', '.join(matches)}); give more of the name"
        )
    python = envs[matches[0]] / "bin" / "python"
    return SideEnv(text, "asv-env", str(python), root, description=f"asv {matches[0]}")


def _last(text: str) -> str:
    lines = [x.strip() for x in (text or "").strip().splitlines() if x.strip()]
    return lines[-1] if lines else "(no output)"


# ---------------------------------------------------------------------------- launching


def make_shim(tree: Path, where: Path) -> Path:
    """A folder to put first on the import path so that ``dsbench`` is ``tree``'s (see the
    module docstring); rebuilt each time, so modules added since are seen."""
    pkg = where / "dsbench"
    shutil.rmtree(where, ignore_errors=True)
    pkg.mkdir(parents=True)
    for entry in (tree / "dsbench").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name in ("kernels", "hardware_profiles"):
        (pkg / name).symlink_to(tree / name)
    return where


def side_environ(side: SideEnv, shim: Path) -> dict[str, str]:
    paths = [str(shim), *side.paths]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    # an A/B judges each side against the other, not against a ceiling: its launches divide by
    # the cached calibration rather than time ceiling rows (unless the caller says otherwise)
    ceilings = os.environ.get("DSBENCH_CEILINGS", "cached")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths), PYTHONNOUSERSITE="1",
                DSBENCH_CEILINGS=ceilings)  # fmt: skip


def _probe(side: SideEnv, code: str) -> str:
    """Run ``code`` in the side's interpreter with its import paths; its stdout, or a
    UsageError naming the side."""
    with tempfile.TemporaryDirectory(prefix="dsbench-probe-") as tmp:
        shim = make_shim(side.tree, Path(tmp) / "shim")
        try:
            proc = subprocess.run(
                [side.python, "-c", code],
                cwd=tmp,
                env=side_environ(side, shim),
                capture_output=True,
                text=True,
                timeout=300,
            )
        except OSError as exc:
            raise UsageError(f"side '{side.spec}': cannot start {side.python}: {exc}") from None
    if proc.returncode != 0:
        raise UsageError(f"side '{side.spec}': {side.python} fails: {_last(proc.stderr)}")
    return proc.stdout.strip()


@dataclass
class Launch:
    side: int
    """0 baseline, 1 contender."""
    index: int
    """The side's launch number, from 0."""
    order: int
    """Position among all launches of the invocation, from 0."""
    path: Path
    started: str = ""
    wall_s: float = 0.0
    run: results.Run | None = None


def order(rounds: int, sides: int = 2) -> list[int]:
    """The side of each launch: A B, B A, A B ... (two sides), or one side repeated."""
    if sides == 1:
        return [0] * rounds
    return [s for r in range(rounds) for s in ((0, 1) if r % 2 == 0 else (1, 0))]


SOURCE_DIRS = ("dsbench", "kernels", "hardware_profiles")
"""What a round imports from a side's tree (see :func:`make_shim`)."""


def tree_fingerprint(tree: Path) -> dict[str, str]:
    """The content hash of each source file a round of ``tree`` imports, by relative path."""
    out = {}
    for top in SOURCE_DIRS:
        for path in sorted((tree / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                out[str(path.relative_to(tree))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def check_unchanged(tree: Path, before: dict[str, str]) -> None:
    """LaunchFailed when ``tree``'s sources differ from ``before``: the rounds already run and
    those still to come would measure different code (an edit in the checkout while an A/B
    of ``deepspeed=``, ``python=`` or ``current`` sides runs from it)."""
    now = tree_fingerprint(tree)
    changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        raise LaunchFailed(
            f"the source tree {tree} changed during the rounds ({', '.join(changed[:3])}{more}), "
            "so its rounds would not measure the same code; leave the checkout alone while "
            "`dsbench ab` runs, or compare commits (commit=REF sides run from worktrees)"
        )


def run_rounds(
    sides: list[SideEnv],
    *,
    rounds: int,
    verb: list[str],
    workdir: Path,
    progress: Callable[[str], None],
    after_pair: Callable[[list[list[Launch]]], list[str] | None] | None = None,
) -> list[list[Launch]]:
    """Launch every round (fresh ``dsbench VERB ... --out FILE`` processes, alternating sides:
    ``dsbench run`` with the suite, or ``dsbench soak``); the launches per side, each with its
    loaded result file. ``after_pair``, called once every side has run as many rounds as the
    others: None to stop there, else arguments added to the verb of the rounds to come (an
    A/B until decided, :mod:`dsbench.sequential`)."""
    shims = [make_shim(s.tree, workdir / f"shim-{i}") for i, s in enumerate(sides)]
    sources = {s.tree: tree_fingerprint(s.tree) for s in sides}
    per_side: list[list[Launch]] = [[] for _ in sides]
    plan = order(rounds, len(sides))
    names = ("baseline", "contender") if len(sides) == 2 else ("launch",)
    extra: list[str] = []
    for pos, s in enumerate(plan):
        launch = Launch(
            side=s, index=len(per_side[s]), order=pos, path=workdir / f"{pos:03d}-{names[s]}.json"
        )
        argv = [sides[s].python, "-m", "dsbench", *verb, *extra, "--out", str(launch.path)]
        launch.started = datetime.now(UTC).isoformat(timespec="seconds")
        t0 = time.perf_counter()
        proc = run_child(argv, cwd=workdir, env=side_environ(sides[s], shims[s]))
        launch.wall_s = time.perf_counter() - t0
        if not launch.path.exists():
            raise LaunchFailed(
                f"round {pos // len(sides) + 1}, {names[s]} ({sides[s].spec}) exited "
                f"{proc.returncode} without a result file: {_last(proc.stderr)}"
            )
        launch.run = results.read_run(launch.path)
        # an edit since the start (between rounds or during this one) is found here
        check_unchanged(sides[s].tree, sources[sides[s].tree])
        per_side[s].append(launch)
        ok = sum(r.ok for r in launch.run.rows.values())
        progress(
            f"round {pos // len(sides) + 1}/{rounds}: {names[s]} ({sides[s].spec}) "
            f"{launch.wall_s:.0f} s, {ok}/{len(launch.run.rows)} ok"
        )
        if after_pair is not None and len({len(x) for x in per_side}) == 1:
            more = after_pair(per_side)
            if more is None:
                break
            extra = more
    return per_side


STOP_GRACE_S = 60.0
"""How long an interrupted round's ``dsbench run`` gets to write what it finished."""


def run_child(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, text=True)``, except that when this process
    is interrupted (SIGINT, or SIGTERM under :func:`dsbench.interrupts.signals_raise`) the
    child gets SIGTERM and up to :data:`STOP_GRACE_S` to write its partial result file and stop
    its ranks (``subprocess.run`` would SIGKILL it), before the interrupt goes on."""
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs
    ) as child:
        try:
            out, err = child.communicate(timeout=LAUNCH_TIMEOUT_S)
        except BaseException:
            if child.poll() is None:
                child.terminate()
                try:
                    child.communicate(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.communicate()
            raise
    return subprocess.CompletedProcess(argv, child.returncode, out, err)


class LaunchFailed(RuntimeError):
    """A round's process ended without a result file."""


# ---------------------------------------------------------------------------- merging


def merge_launches(launches: list[Launch], **extra) -> dict:
    """One result document from the launches of one side: per benchmark, the launches'
    samples in order, ``rounds`` saying which launch (and which in-launch round) each came
    from, and ``value`` the geometric mean of the launches' medians."""
    from dsbench.memory import max_over
    from dsbench.stats import centre, summarize

    runs = [la.run for la in launches]
    first = runs[0].record
    ids = list(dict.fromkeys(bid for run in runs for bid in run.rows))
    rows = []
    for bid in ids:
        per = [(k, run.rows.get(bid)) for k, run in enumerate(runs)]
        rows.append(_merge_row(per, centre, summarize, max_over))
    finished = datetime.now(UTC)
    known = RunRecord.json_fields()
    return RunRecord(
        **{key: getattr(first, key) for key in FIRST_LAUNCH_KEYS},  # UNSET: not in first
        schema_version=results.SCHEMA_VERSION,
        run_id=results.new_run_id(datetime.fromisoformat(launches[0].started)),
        created=launches[0].started,
        finished=finished.isoformat(timespec="seconds"),
        wall_s=round(sum(la.wall_s for la in launches), 3),
        argv=sys.argv[1:],
        launches=[
            {
                "started": la.started,
                "wall_s": round(la.wall_s, 3),
                "order": la.order,
                "run_id": la.run.id,
                "argv": value_or(la.run.record.argv),
            }
            for la in launches
        ],
        benchmarks=tuple(rows),
        **{k: v for k, v in extra.items() if k in known},
        # each round's soak: its faults, restarts and launches
        soak_rounds=[run.record.soak for run in runs] if first.soak is not UNSET else UNSET,
        extra={k: v for k, v in extra.items() if k not in known},
        key_order=(*MERGED_RUN_KEYS, *extra, "soak_rounds"),
    ).to_json()


FIRST_LAUNCH_KEYS = ("schema", "source", "machine", "suite", "env", "profile")
"""What a merged run keeps of its first launch's header (those it has)."""
MERGED_RUN_KEYS = (*FIRST_LAUNCH_KEYS, "schema_version", "run_id", "created", "finished",
                   "wall_s", "argv", "launches", "benchmarks")  # fmt: skip
"""The order of a merged run's keys (then ``merge_launches``' keywords and ``soak_rounds``)."""


HEADER_KEYS = ("id", "name", "params", "metric", "unit", "direction")
"""What a merged row that failed keeps of the launches' rows, in this order (then ``status``
and ``error``)."""
MERGED_KEYS = ("value", "samples", "rounds", "stats", "launch_values", "memory", "launch_drifts")
"""What merging sets, in the order it comes after the first launch's own keys."""


def _merge_row(per: list[tuple[int, Row | None]], centre, summarize, max_over) -> Row:
    """One benchmark's rows from each launch (None where a launch has none) as one row."""
    rows = [r for _, r in per if r is not None]
    ok = [(k, r) for k, r in per if r is not None and r.ok]
    if len(ok) < len(per):
        failed = [(k, r) for k, r in per if r is not None and r.status == "failed"]
        if failed:
            why = "; ".join(f"launch {k}: {value_or(r.error, '')}" for k, r in failed)
        elif not ok and len(rows) == len(per):
            return rows[0]  # skipped in every launch: one reason says it
        else:
            why = f"ok in {len(ok)} of {len(per)} launches only"
        head = rows[0]
        return Row(id=head.id, name=head.name, params=head.params, metric=head.metric,
                   unit=head.unit, direction=head.direction, status="failed", error=why,
                   key_order=HEADER_KEYS)  # fmt: skip
    launch_samples = [r.samples for _, r in ok]
    value = centre(launch_samples)
    row = ok[0][1]
    merged = dataclasses.replace(
        row,
        value=value,
        samples=[x for s in launch_samples for x in s],
        rounds=[
            Round(launch=k, n=n)
            for k, r in ok
            for n in ([x.n for x in r.rounds] if r.rounds else [len(r.samples)])
        ],
        stats=summarize([x for s in launch_samples for x in s]).to_dict(),
        launch_values=[r.value for _, r in ok],
        memory=max_over([value_or(r.memory) or {} for _, r in ok]),
        key_order=tuple(row.to_json()) + MERGED_KEYS,
    )
    if row.drift is not UNSET:  # a soak's slope: each launch's fit and verdict
        merged = dataclasses.replace(
            merged, drift=None, launch_drifts=[value_or(r.drift) for _, r in ok]
        )
    if value_or(row.pct_of_peak) is not None and row.peak and row.peak.value:
        merged = dataclasses.replace(merged, pct_of_peak=100.0 * value / row.peak.value)
    if row.metrics:  # each metric: the geometric mean over launches
        merged = dataclasses.replace(merged, metrics={
            name: _merge_metric(name, entry, ok, centre) for name, entry in row.metrics.items()
        })  # fmt: skip
    return merged


def _merge_metric(name: str, entry: MetricValue, ok: list[tuple[int, Row]], centre) -> MetricValue:
    """Metric ``name`` over the launches: the geometric mean of its values where every launch
    has a positive one, with its 99% interval over the launches (``stats.geometric_ci``) and its
    % of peak; else the first launch's, whole. Every figure describes the same value: the first
    launch's interval beside the launches' mean had put values outside their own interval."""
    from dsbench.stats import geometric_ci

    values = []
    for _, r in ok:
        m = (r.metrics or {}).get(name)
        values.append(0 if m is None else value_or(m.value, 0))
    if not all(v > 0 for v in values):
        return entry
    value = centre([[v] for v in values])
    ci = geometric_ci(values)
    merged = dataclasses.replace(entry, value=value, ci99=list(ci) if ci else entry.ci99)
    peak = value_or(entry.peak)
    if value_or(entry.pct_of_peak) is not None and peak and value_or(peak.value):
        merged = dataclasses.replace(merged, pct_of_peak=100.0 * value / peak.value)
    return merged
