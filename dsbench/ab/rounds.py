"""Rounds: fresh ``dsbench run`` (or ``soak``) processes of each side in alternating order
(A B, B A, ...), each checked to have run the code it started with."""

from __future__ import annotations

import hashlib
import itertools
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dsbench import results
from dsbench.ab.sides import SideEnv, last_line, make_shim, side_environ

LAUNCH_TIMEOUT_S = 4 * 3600


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
    return list(itertools.islice(endless_order(sides), rounds * sides))


def endless_order(sides: int = 2) -> Iterator[int]:
    """:func:`order` without an end (an A/B until decided)."""
    for r in itertools.count():
        yield from [0] * sides if sides == 1 else (0, 1) if r % 2 == 0 else (1, 0)


def of(rounds: int | None) -> str:
    """``/N`` after a round's number in the progress lines, where the rounds are planned."""
    return "" if rounds is None else f"/{rounds}"


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
    rounds: int | None,
    verb: list[str],
    workdir: Path,
    progress: Callable[[str], None],
    after_pair: Callable[[list[list[Launch]]], list[str] | None] | None = None,
    plan: list[int] | None = None,
    names: list[str] | None = None,
    failed: dict[int, str] | None = None,
    deadline: float | None = None,
) -> list[list[Launch]]:
    """Launch every round (fresh ``dsbench VERB ... --out FILE`` processes, alternating sides:
    ``dsbench run`` with the suite, or ``dsbench soak``); the launches per side, each with its
    loaded result file. ``after_pair``, called once every side has run as many rounds as the
    others: None to stop there, else arguments added to the verb of the rounds to come (an
    A/B until decided, :mod:`dsbench.stats.sequential`; ``rounds`` None: until it says stop).
    ``plan``: the side of each launch (else :func:`order`), ``names`` each side's (for files
    and progress). ``failed``: when given, a launch that writes no file, or a side's first
    launch that ran none of the cases, records why under its side, whose later launches are
    left out, instead of stopping every side (a sweep). ``deadline``: no launch starts past
    this ``time.monotonic()``."""
    shims = [make_shim(s.tree, workdir / f"shim-{i}") for i, s in enumerate(sides)]
    sources = {s.tree: tree_fingerprint(s.tree) for s in sides}
    per_side: list[list[Launch]] = [[] for _ in sides]
    if plan is None:
        plan = endless_order(len(sides)) if rounds is None else order(rounds, len(sides))
    names = names or (["baseline", "contender"] if len(sides) == 2 else ["launch"])
    extra: list[str] = []
    for pos, s in enumerate(plan):
        if failed is not None and s in failed:
            continue
        if deadline is not None and time.monotonic() > deadline:
            break
        launch = Launch(
            side=s, index=len(per_side[s]), order=pos, path=workdir / f"{pos:03d}-{names[s]}.json"
        )
        argv = [sides[s].python, "-m", "dsbench", *verb, *extra, "--out", str(launch.path)]
        launch.started = datetime.now(UTC).isoformat(timespec="seconds")
        t0 = time.perf_counter()
        proc = run_child(argv, cwd=workdir, env=side_environ(sides[s], shims[s]))
        launch.wall_s = time.perf_counter() - t0
        if not launch.path.exists():
            why = (
                f"round {pos // len(sides) + 1}, {names[s]} ({sides[s].spec}) exited "
                f"{proc.returncode} without a result file: {last_line(proc.stderr)}"
            )
            if failed is None:
                raise LaunchFailed(why)
            failed[s] = why
            progress(why)
            continue
        launch.run = results.read_run(launch.path)
        # an edit since the start (between rounds or during this one) is found here
        check_unchanged(sides[s].tree, sources[sides[s].tree])
        per_side[s].append(launch)
        ok = sum(r.ok for r in launch.run.rows.values())
        progress(
            f"round {pos // len(sides) + 1}{of(rounds)}: {names[s]} ({sides[s].spec}) "
            f"{launch.wall_s:.0f} s, {ok}/{len(launch.run.rows)} ok"
        )
        if failed is not None and launch.index == 0 and launch.run.rows and not ok:
            # a side whose first launch ran none of the cases (a release that lacks an API the
            # suite needs) would fail alike in every round: its rows say why once
            failed[s] = f"{names[s]} ({sides[s].spec}) ran none of the cases in its first round"
            progress(f"{failed[s]}: left out of the rounds to come (its rows say why)")
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
    is interrupted (SIGINT, or SIGTERM under :func:`dsbench.procs.interrupts.signals_raise`) the
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


@contextmanager
def launch_folder(verb: str):
    """A folder for the rounds' result files: removed once the merged files are written, kept
    (and named) when anything fails after the rounds ran, so no measurement is lost."""
    workdir = Path(tempfile.mkdtemp(prefix=f"dsbench-{verb}-"))
    try:
        yield workdir
    except BaseException:
        if any(workdir.glob("*.json")):
            print(f"dsbench {verb}: the rounds' result files are kept in {workdir}",
                  file=sys.stderr)  # fmt: skip
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    shutil.rmtree(workdir, ignore_errors=True)
