"""One side of a block round (``dsbench ab --blocks``): a resident process that sets up the
cases of a suite and times them in blocks when the coordinator says, so that the two sides take
turns within seconds ([Note: sides in turns]).

Run as ``python -m dsbench.ab.worker --suite S [--filter RE] --device D --out FILE``
under the side's interpreter and import path. It reads one JSON command a line on stdin and
answers each with one JSON line on stdout (what the libraries print goes to stderr):

- at start, unasked: ``{"cases": [id, ...], "skipped": {id: why}}``, the cases it can time;
- ``{"op": "setup", "id": ID}``: set the case up and warm it up; ``{"per_call": seconds}``, or
  ``{"status": "skipped" | "failed", "why": ...}``;
- ``{"op": "block", "reps": N}``: N timed repetitions after two untimed ones (the timing core's
  own warm-up, so a block starts with the caches and threads its last block left to the other
  side); ``{"median": seconds}``;
- ``{"op": "done"}``: the case's row from its blocks (each block one in-launch round), torn down;
  ``{"op": "drop", "why": ...}``: torn down unmeasured (the other side could not set it up);
- ``{"op": "finish"}``: the run written to ``--out`` as ``dsbench run`` writes one; then exit.

A case that spawns ranks (training steps, collectives) is timed by a resident group of ranks
([Note: ranks in turns]); the rest in this process. A case whose peak memory ``dsbench run``
takes alone in fresh ranks (:func:`takes_fresh_memory`) gets that pass too, at its set-up, and
its row carries it as ``memory.fresh_process``: one launch of fresh ranks a round, over which
compare judges its memory row ([Note: the design of an A/B] in :mod:`dsbench.ab.plan`).
"""

from __future__ import annotations

import getopt
import itertools
import json
import os
import pickle
import queue
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

GROUP_LIFETIME_S = 12 * 3600.0
"""The longest a group of ranks lives (the worker's round ends it long before)."""
IDLE_S = 3600.0
"""How long a rank waits for its next command: the other side's turn, or its set-up of a case."""

# [Note: ranks in turns]
# A case that spawns ranks cannot be timed in the worker's own process, and spawning its ranks
# for every block would time start-ups. So the worker starts a group of ranks
# (:func:`dsbench.procs.distributed.spawn_ranks`, as ``dsbench run`` does) that stays resident while
# consecutive cases ask for the same number of ranks, and passes them each command through a
# ``TCPStore`` the worker holds (key ``cmd<i>``; a rank waits on the next key, idle, while the
# other side takes its turn). All ranks set up, warm up and time a block together (the timing
# core's distributed mode: barriers, the slowest rank's times); rank 0 answers. Both sides' ranks
# are resident at once and only one side's run at a time, so each side's ranks get the cores
# (or GPUs) they would get alone. A rank that dies ends the group; the next case starts a new one.


def takes_fresh_memory(bench) -> bool:
    """Whether a benchmark's peak memory is taken alone in fresh ranks (as ``dsbench run``'s
    interleaved multi-rank benchmarks: the training steps), not in the resident processes."""
    return bool(bench.ranks_param and bench.interleave)


@dataclass(frozen=True)
class WorkerOptions:
    """``--suite S [--filter RE] [--device D] --out FILE``."""

    suite: str
    out: str
    filter: str | None = None
    device: str = "cpu"

    @classmethod
    def parse(cls, argv: list[str]) -> WorkerOptions:
        try:
            opts, rest = getopt.getopt(argv, "", ["suite=", "filter=", "device=", "out="])
        except getopt.GetoptError as exc:
            raise ValueError(str(exc)) from None
        given = {k.removeprefix("--"): v for k, v in opts}
        missing = [f"--{k}" for k in ("suite", "out") if k not in given]
        if rest:
            raise ValueError(f"unrecognized arguments: {' '.join(rest)}")
        if missing:
            raise ValueError(f"the following arguments are required: {', '.join(missing)}")
        return cls(**given)


def fresh_memory_cases(ids: list[str]) -> int:
    """How many of the case ids are of benchmarks that :func:`takes_fresh_memory`."""
    from dsbench.suites import BENCHMARKS

    benches = [BENCHMARKS.get(i.partition("[")[0]) for i in ids]
    return sum(b is not None and takes_fresh_memory(b) for b in benches)


def main(argv: list[str] | None = None) -> int:
    """The coordinator's command line, read with :mod:`getopt` into :class:`WorkerOptions`
    (command lines people type are parsed in :mod:`dsbench.cli` alone)."""
    try:
        args = WorkerOptions.parse(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"python -m dsbench.ab.worker: error: {exc}", file=sys.stderr)
        return 2
    # stdout carries the protocol alone: what anything else prints goes to stderr
    reply_to = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def reply(obj: dict) -> None:
        reply_to.write(json.dumps(obj) + "\n")
        reply_to.flush()

    from dsbench import results
    from dsbench.envinfo import collect_env
    from dsbench.measure import runner
    from dsbench.measure.memory import release_freed

    started = datetime.now(UTC)
    env = collect_env(runner.resolve_device(args.device))
    ctx = runner.context_for(env, args.suite)
    profile = runner.profile_for(env, ctx, measure=False)
    planned = {p.id: p for p in runner.plan(args.suite, ctx, args.filter)}
    rows = {}
    for pid, p in planned.items():
        if p.bench.ranks_param:
            why = runner.cannot_spawn(p.bench, p.params, ctx, p.params[p.bench.ranks_param])
            if why:
                rows[pid] = runner.status_row(p.bench, p.params, "skipped", why)
    reply({"cases": [pid for pid in planned if pid not in rows],
           "skipped": {pid: r.reason for pid, r in rows.items()}})  # fmt: skip
    here = Timed(ctx, profile)
    group: RankGroup | None = None
    timed = current = fresh = None
    try:
        for line in sys.stdin:
            cmd = json.loads(line)
            op = cmd["op"]
            if op == "setup":
                current = planned[cmd["id"]]
                timed, fresh = here, None
                if current.bench.ranks_param:
                    nranks = current.params[current.bench.ranks_param]
                    if takes_fresh_memory(current.bench):  # before the group holds the case
                        fresh = runner._fresh_memory(current.bench, current.params, ctx,
                                                     profile, nranks)  # fmt: skip
                    if group is None or group.nranks != nranks or not group.alive():
                        if group is not None:
                            group.close()
                        group = RankGroup(nranks, ctx, profile)
                    timed = group
                got = timed.setup(current.bench.name, current.params)
                if "per_call" not in got:
                    rows[current.id] = runner.status_row(current.bench, current.params,
                                                         got["status"], got["why"])  # fmt: skip
                reply(got)
            elif op == "block":
                reply(timed.block(int(cmd["reps"])))
            elif op == "done":
                rows[current.id] = with_fresh_memory(timed.done(), fresh)
                release_freed(ctx.device)
                reply({"ok": True})
            elif op == "drop":
                timed.drop()
                rows[current.id] = runner.status_row(current.bench, current.params, "skipped",
                                                     f"not timed: {cmd['why']}")  # fmt: skip
                reply({"ok": True})
            elif op == "finish":
                record = results.new_run_doc(
                    suite=args.suite, label=None, env=env, profile=profile,
                    rows=[rows[pid] for pid in planned if pid in rows], started=started,
                )  # fmt: skip
                results.write_run(record, path=args.out)
                reply({"ok": True})
                return 0
            else:
                raise ValueError(f"unknown command {op!r}")
    finally:
        if group is not None:
            group.close()
    return 1  # stdin closed before "finish": the coordinator stopped


def with_fresh_memory(row, fresh: dict | None):
    """The row with the case's memory alone in fresh ranks as ``memory.fresh_process``."""
    import dataclasses

    from dsbench.records import Memory

    if fresh is None or not isinstance(row.memory, Memory):
        return row
    memory = dataclasses.replace(row.memory, fresh_process=Memory.from_json(fresh))
    return dataclasses.replace(row, memory=memory)


class Timed:
    """One case at a time, set up, warmed up and timed in blocks: in this process, or on each
    rank of a group (``distributed``: set up everywhere, timed together)."""

    def __init__(self, ctx, profile, distributed: bool = False):
        self.ctx, self.profile, self.distributed = ctx, profile, distributed
        self.case = self.bench = self.params = None
        self.parts: list = []

    def setup(self, name: str, params: dict) -> dict:
        from dsbench.measure import runner
        from dsbench.suites import BENCHMARKS, Skip

        self.bench, self.params, self.parts = BENCHMARKS[name], params, []
        try:
            if self.distributed:
                self.case, row = runner.setup_everywhere(self.bench, params, self.ctx)
                if row is not None:
                    return {
                        "status": row.status,
                        "why": row.error if row.status == "failed" else row.reason,
                    }
            else:
                self.case = self.bench.setup(params, self.ctx)
            return {"per_call": self._measure(3).summary.median}
        except Exception as exc:
            self.drop()
            if isinstance(exc, Skip):
                return {"status": "skipped", "why": str(exc)}
            return {"status": "failed", "why": runner.error_text(exc)}

    def _measure(self, reps: int):
        from dsbench.measure.timing import measure

        return measure(self.case.fn, device=self.ctx.torch_device, args=self.case.args,
                       config=block_config(reps), distributed=self.distributed)  # fmt: skip

    def block(self, reps: int) -> dict:
        m = self._measure(reps)
        self.parts.append(m)
        return {"median": m.summary.median}

    def done(self):
        from dsbench.measure import runner
        from dsbench.measure.timing import merge

        row = runner.ok_row(self.bench, self.params, self.case, merge(self.parts), self.profile)
        self.drop()
        return row

    def drop(self) -> None:
        if self.case is not None and self.case.teardown is not None:
            self.case.teardown()
        self.case = None


class RankGroup:
    """A resident group of ``nranks`` ranks timing cases as this worker's commands say
    ([Note: ranks in turns]); the same calls as :class:`Timed`, answered by rank 0."""

    def __init__(self, nranks: int, ctx, profile):
        from torch.distributed import TCPStore

        self.nranks, self.sent, self.failure = nranks, 0, None
        self.store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                              timeout=timedelta(seconds=IDLE_S))  # fmt: skip
        self.replies: queue.Queue = queue.Queue()
        payload = {"port": self.store.port, "ctx": ctx, "profile": profile}
        self.thread = threading.Thread(
            target=self._run, args=(payload, "cuda" if ctx.gpu else "cpu"), daemon=True
        )
        self.thread.start()

    def _run(self, payload: dict, device_type: str) -> None:
        from dsbench.procs.distributed import spawn_ranks

        try:
            spawn_ranks("dsbench.ab.worker:rank_loop", self.nranks, payload,
                        device_type=device_type, on_message=lambda rank, msg: self.replies.put(msg),
                        timeout_s=GROUP_LIFETIME_S)  # fmt: skip
        except BaseException as exc:  # RankFailure names the rank and the cause
            self.failure = str(exc)
        self.replies.put(None)

    def alive(self) -> bool:
        return self.thread.is_alive()

    def _ask(self, op: str, **cmd):
        from dsbench.procs.distributed import RankFailure

        self.store.set(f"cmd{self.sent}", pickle.dumps({"op": op, **cmd}))
        self.sent += 1
        got = self.replies.get()
        if got is None:
            self.replies.put(None)  # and so for every later question
            raise RankFailure(self.failure or "the ranks exited")
        return got

    def setup(self, name: str, params: dict) -> dict:
        try:
            return self._ask("setup", name=name, params=params)
        except RuntimeError as exc:
            return {"status": "failed", "why": str(exc)}

    def block(self, reps: int) -> dict:
        return self._ask("block", reps=reps)

    def done(self):
        return self._ask("done")

    def drop(self) -> None:
        self._ask("drop")

    def close(self) -> None:
        if self.alive():
            self.store.set(f"cmd{self.sent}", pickle.dumps({"op": "quit"}))
            self.thread.join(60)


def rank_loop(payload: dict, *, device: str, send) -> None:
    """On each rank of a :class:`RankGroup`: the worker's commands, in order, until ``quit``."""
    import dataclasses

    import torch.distributed as dist
    from torch.distributed import TCPStore

    from dsbench.measure.runner import quiet_renamed_collectives

    quiet_renamed_collectives()
    ctx = dataclasses.replace(
        payload["ctx"], device=device, rank=dist.get_rank(), world_size=dist.get_world_size()
    )
    store = TCPStore("127.0.0.1", payload["port"], is_master=False,
                     timeout=timedelta(seconds=IDLE_S))  # fmt: skip
    timed = Timed(ctx, payload["profile"], distributed=True)
    for i in itertools.count():
        cmd = pickle.loads(store.get(f"cmd{i}"))
        op = cmd["op"]
        if op == "quit":
            return
        if op == "setup":
            got = timed.setup(cmd["name"], cmd["params"])
        elif op == "block":
            got = timed.block(cmd["reps"])
        elif op == "done":
            got = timed.done()
        else:  # drop
            timed.drop()
            got = {"ok": True}
        if ctx.rank == 0:
            send(got)


def block_config(reps: int):
    """Exactly ``reps`` timed repetitions after the two untimed calls every measurement makes."""
    from dsbench.measure.timing import TimingConfig

    return TimingConfig(warmup_s=0.0, min_warmup=2, min_reps=reps, max_reps=reps, budget_s=0.0,
                        target_rel_ci=0.0)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
