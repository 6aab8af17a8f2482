"""Block rounds (``dsbench ab --blocks``): both sides resident at once, taking turns.

[Note: sides in turns]
On a shared machine the load moves within seconds, so two launches of one side tens of seconds
apart differ by 10-20% (AdamW on the 2-core development VM) and launches of the two sides no
less: no order of whole launches puts both sides under the same load. In a block round a fresh
worker process of each side (:mod:`dsbench.ab.worker`, the side's own tree and interpreter)
sets up the same case, and the two take turns timing it in blocks of about BLOCK_S of
repetitions, A B B A ..., each block after two untimed calls (a block starts with the caches
and threads the other side left; without them the first repetitions of a block ran up to 20%
slow). A block of each side is then within a second of one of the other's, under the same load,
and compare judges the rounds' block pairs ([Note: paired blocks] in :mod:`dsbench.stats`).
Each round starts both workers afresh, the other side first every other round, so a
placement or start-up effect of one process falls in the spread of the rounds, not in the
ratio. A case that spawns ranks is timed by a group of each side's ranks, resident for the
round and taking turns the same way ([Note: ranks in turns] in :mod:`dsbench.ab.worker`).
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from dsbench import results
from dsbench.ab.rounds import Launch, LaunchFailed, check_unchanged, of, tree_fingerprint
from dsbench.ab.sides import SideEnv, last_line, make_shim, side_environ
from dsbench.errors import UsageError

BLOCK_S = 0.05
"""Seconds of timed repetitions a block aims at: short enough that both blocks of a pair see
the same load, long enough that the two untimed calls before it cost little."""
BLOCK_PAIRS = 8
"""Pairs of blocks each case gets in a round, at least."""
TURN_S = 0.0
"""Seconds of blocks (both sides' together) a case gets in a round by default: 0, so each case
gets :data:`BLOCK_PAIRS` pairs; with ``dsbench ab --block-time S`` a case whose blocks are short
gets as many pairs as fit in S, up to :data:`MAX_PAIRS` ([Note: pairs by time])."""
MAX_PAIRS = 64
MIN_BLOCK_REPS, MAX_BLOCK_REPS = 3, 200

# [Note: pairs by time]
# A round's evidence is the median of its block pairs' log ratios, and for the quick suite's
# collectives that median is all the rounds' spread (a round's pairs scatter widely: gloo's calls
# are bimodal on 2 cores), so more pairs narrow it where blocks are short. ``--block-time S``
# gives such a case as many pairs as fit in S. With S = 3 in a Python 3.11 vs 3.12 quick A/B the
# collectives' round spread fell by about 30% but AdamW's and GEMM's rose, 13 of 42 rows decided
# either way in 1.6 times the time (docs/decisions.md, "Pairs by time"): the default stays
# 8 pairs a case; the option suits an A/B of collectives alone.


# [Note: idle workers wait passively]
# Both sides' workers stay resident and take turns, so while one side times a block the other
# side's process sits idle. torch's CPU kernels run on libgomp's pool, whose threads spin for a
# while after each parallel region (OMP_WAIT_POLICY's default): on a 2-core VM the idle side's
# spinning threads took the cores from the side being timed, by amounts that changed from round
# to round. A 10% AdamW slowdown on the 2-vCPU EPYC VM (make bench-power, 12-07): with spinning,
# 1 of 3 rows worse after 65 rounds in the 10-minute limit, the rounds' log ratios spreading
# 0.25 for AdamW 1M where its block pairs spread 0.08; with OMP_WAIT_POLICY=PASSIVE, 3 of 3
# worse after 41 rounds in 6.0 min, x0.910-0.915 (docs/decisions.md, "Idle A/B workers wait
# passively"). So each worker gets OMP_WAIT_POLICY=PASSIVE unless the caller set one; the
# sides' environment in the result records it.

WAIT_POLICY = "PASSIVE"


class Worker:
    """One side's worker process and its line protocol."""

    def __init__(self, side: SideEnv, shim: Path, argv: list[str], log: Path):
        self.side, self.log = side, log
        env = side_environ(side, shim)
        env.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)  # [Note: idle workers wait passively]
        with log.open("w") as err:
            self.proc = subprocess.Popen(
                [side.python, "-m", "dsbench.ab.worker", *argv], cwd=log.parent,
                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
            )  # fmt: skip

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            why = last_line(self.log.read_text(errors="replace"))
            raise LaunchFailed(f"{self.side.spec}'s worker exited {self.proc.returncode}: {why}")
        return json.loads(line)

    def ask(self, **cmd) -> dict:
        try:
            self.proc.stdin.write(json.dumps(cmd) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # read() says why it stopped
        return self.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def block_reps(per_call: float) -> int:
    """Repetitions of a block: about :data:`BLOCK_S` of them."""
    return int(min(max(round(BLOCK_S / max(per_call, 1e-9)), MIN_BLOCK_REPS), MAX_BLOCK_REPS))


def case_pairs(block_s: float, least: int = BLOCK_PAIRS, turn_s: float = TURN_S) -> int:
    """Pairs of blocks a case gets in a round whose blocks take ``block_s`` each: as many as
    fit in ``turn_s``, at least ``least``, at most :data:`MAX_PAIRS` ([Note: pairs by time])."""
    fit = math.floor(turn_s / max(2 * block_s, 1e-9) + 1e-9)
    return max(least, min(fit, MAX_PAIRS))


def run_block_rounds(
    sides: list[SideEnv],
    *,
    rounds: int | None,
    worker_argv: list[str],
    workdir: Path,
    progress: Callable[[str], None],
    after_pair: Callable[[list[list[Launch]]], list[str] | None] | None = None,
    pairs: int = BLOCK_PAIRS,
    turn_s: float = TURN_S,
) -> list[list[Launch]]:
    """Run block rounds (see the note above); the launches per side, one a round, each with
    its loaded result file, as :func:`dsbench.ab.run_rounds` returns them. ``after_pair``
    (called after every round): None to stop there; ``rounds`` None: rounds until it says so.
    Each case gets :func:`case_pairs` pairs of
    blocks a round (``pairs`` at least, as many as fit in ``turn_s``)."""
    shims = [make_shim(s.tree, workdir / f"shim-{i}") for i, s in enumerate(sides)]
    sources = {s.tree: tree_fingerprint(s.tree) for s in sides}
    per_side: list[list[Launch]] = [[], []]
    for r in itertools.count() if rounds is None else range(rounds):
        first = r % 2  # which side starts the round (and its first pair of blocks)
        started = datetime.now(UTC).isoformat(timespec="seconds")
        t0 = time.perf_counter()
        paths = [workdir / f"{2 * r + (s != first):03d}-{('baseline', 'contender')[s]}.json"
                 for s in (0, 1)]  # fmt: skip
        workers: list[Worker | None] = [None, None]
        try:
            for s in (first, 1 - first):
                log = workdir / f"{r:03d}-{s}.log"
                workers[s] = Worker(sides[s], shims[s], [*worker_argv, "--out", str(paths[s])],
                                    log)  # fmt: skip
            _one_round(workers, first, pairs, r == 0, turn_s)
        finally:
            for w in workers:
                if w is not None:
                    w.stop()
        wall = time.perf_counter() - t0
        for s in (0, 1):
            launch = Launch(side=s, index=r, order=2 * r + (s != first), path=paths[s],
                            started=started, wall_s=wall / 2)  # fmt: skip
            launch.run = results.read_run(paths[s])
            check_unchanged(sides[s].tree, sources[sides[s].tree])
            per_side[s].append(launch)
        ok = sum(row.ok for row in per_side[0][-1].run.rows.values())
        progress(f"round {r + 1}{of(rounds)}: both sides in turns, {wall:.0f} s, "
                 f"{ok}/{len(per_side[0][-1].run.rows)} ok")  # fmt: skip
        if after_pair is not None and after_pair(per_side) is None:
            break
    return per_side


def _one_round(
    workers: list[Worker], first: int, pairs: int, check: bool, turn_s: float = TURN_S
) -> None:
    """Every case both sides can time, in turns; then both write their files."""
    hello = [w.read() for w in workers]
    cases = [c for c in hello[0]["cases"] if c in set(hello[1]["cases"])]
    if check and not cases:
        skipped = {**hello[0]["skipped"], **hello[1]["skipped"]}
        why = next(iter(skipped.values()), "the sides share no case")
        raise UsageError(f"--blocks: no case to time in turns ({why})")
    order = (first, 1 - first)
    for case in cases:
        got = [workers[s].ask(op="setup", id=case) for s in order]
        if any("per_call" not in g for g in got):
            for s, g in zip(order, got, strict=True):
                if "per_call" in g:  # the other side could not: no blocks, a row saying why
                    other = next(x for x in got if "per_call" not in x)
                    workers[s].ask(op="drop", why=f"the other side's setup: {other['why']}")
            continue
        per_call = max(g["per_call"] for g in got)
        reps = block_reps(per_call)
        for j in range(case_pairs((reps + 2) * per_call, pairs, turn_s)):  # 2 untimed calls
            for s in order if j % 2 == 0 else order[::-1]:
                workers[s].ask(op="block", reps=reps)
        for s in order:
            workers[s].ask(op="done")
    for s in order:
        workers[s].ask(op="finish")
