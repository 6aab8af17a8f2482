"""Spawn N local ranks and run a function on each, with a clear error when a rank dies or hangs.

Used by the multi-rank benchmarks and by ``dsbench train --nproc N``. Each rank joins a process
group over TCP on 127.0.0.1 (gloo on CPU, NCCL on CUDA, NCCL/RCCL on ROCm;
[Note: joining apart from the collective timeout]), pins its GPU (``cuda:<rank>``) or its share
of CPU threads, runs ``target(payload, send)``, and leaves the group. ``send(msg)`` delivers a
picklable message to the parent's ``on_message`` as it happens (progress, results); :func:`mark`
records what a rank is doing. Ranks are forked from a server that imported torch once
([Note: ranks forked from a server]).

Entry point: :func:`spawn_ranks`. A rank that raises, dies, or is still running at the deadline
makes it stop every rank and raise :class:`RankFailure` naming the cause first
([Note: naming the cause]); ``tests/test_distributed.py`` checks each case
(``test_a_failing_rank_is_named``, ``test_a_hanging_rank_is_named``,
``test_a_rank_stuck_outside_collectives_is_named_when_peers_time_out``).
"""

from __future__ import annotations

import datetime
import importlib
import multiprocessing as mp
import os
import pickle
import queue
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable

from dsbench.procs import host


class RankFailure(RuntimeError):
    """A spawned rank failed or hung; the message names the rank and what happened."""


SETTLE_S = 3.0
"""After the first failure, how long the other ranks get to report theirs or die."""
JOIN_TIMEOUT_S = 120.0
"""How long a rank waits for its peers to join the process group, whatever the collective
timeout ([Note: joining apart from the collective timeout])."""
PRELOAD = ("torch", "torch.distributed")
"""What the forkserver imports once for all the ranks it forks ([Note: ranks forked from a
server])."""
_DOING_BYTES = 128
_SECONDARY = (
    "connection reset",
    "connection closed",
    "connection refused",
    "closed by peer",
    "broken pipe",
    "timed out",
    "timeout",
    "gloo",
    "nccl",
    "remote process",
)
"""Words of errors that are a consequence of a peer's failure (a collective that lost its peer)."""

_progress = None
"""On a spawned rank: (steps, doing, rank), the shared arrays :func:`mark` writes."""


def mark(step: int | None = None, doing: str | None = None) -> None:
    """Record what this rank is doing, for the launcher's message should it die or hang: the
    training step it is in and/or a few words ("saving a checkpoint"; "" clears them). ``None``
    leaves that part as it was. Two stores to shared memory; a no-op outside spawned ranks."""
    if _progress is None:
        return
    steps, words, rank = _progress
    if step is not None:
        steps[rank] = step
    if doing is not None:
        text = doing.encode()[: _DOING_BYTES - 1].ljust(_DOING_BYTES, b"\0")
        words[rank * _DOING_BYTES : (rank + 1) * _DOING_BYTES] = text


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend_for(device_type: str) -> str:
    """torch.distributed backend: NCCL for GPUs (RCCL answers to 'nccl' on ROCm), gloo on CPU."""
    return "nccl" if device_type == "cuda" else "gloo"


def _rank_main(
    rank: int,
    world: int,
    port: int,
    device_type: str,
    target: str,
    payload,
    messages,
    timeout_s: float,
    progress=None,
    launcher=None,
) -> None:
    if launcher is not None:  # the launcher's environment, directory and path, as spawned
        environ, cwd, path = launcher
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd)
        sys.path[:] = path
    import torch
    import torch.distributed as dist

    global _progress
    if progress is not None:
        _progress = (*progress, rank)

    def send(msg) -> None:
        # Pickled here, by value: torch would otherwise pass tensors as shared-memory handles
        # that die with this process before the parent reads them.
        messages.put(("msg", rank, pickle.dumps(msg)))

    try:
        if device_type == "cuda":
            torch.cuda.set_device(rank)
            device = f"cuda:{rank}"
        else:
            torch.set_num_threads(max(1, host.usable_cores() // world))  # its affinity's share
            device = "cpu"
        os.environ.update(
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(rank),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        module, _, attr = target.partition(":")
        run = getattr(importlib.import_module(module), attr)
        _join(backend_for(device_type), port, rank, world, timeout_s)
        run(payload, device=device, send=send)
        dist.destroy_process_group()
        messages.put(("done", rank, None))
    except BaseException as exc:  # report, then exit non-zero
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        messages.put(("error", rank, last))
        raise SystemExit(1) from None


# [Note: joining apart from the collective timeout]
# A short collective timeout names a hung peer quickly, but ranks start unevenly: importing torch
# and the target's module can take seconds longer on one rank of a loaded machine. So each rank
# imports the target's module first, joins the group with :data:`JOIN_TIMEOUT_S`, passes one
# barrier with it, and only then sets the group's timeout to the collective timeout
# (``_set_pg_timeout``; torch without it keeps one timeout for both). A peer that never starts is
# still named: the launcher's own deadline and the ranks' errors do not depend on the join.
# Checked by ``tests/test_distributed.py::test_a_slow_starting_rank_is_not_a_hung_one``.
def _join(backend: str, port: int, rank: int, world: int, timeout_s: float) -> None:
    """Join the process group with the collective timeout ``timeout_s`` ([Note: joining apart
    from the collective timeout])."""
    import torch.distributed as dist

    c10d = dist.distributed_c10d
    apart = timeout_s < JOIN_TIMEOUT_S and hasattr(c10d, "_set_pg_timeout")
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=JOIN_TIMEOUT_S if apart else timeout_s),
    )
    if apart:
        dist.barrier()
        c10d._set_pg_timeout(datetime.timedelta(seconds=timeout_s))


def spawn_ranks(
    target: str,
    world: int,
    payload,
    *,
    device_type: str = "cpu",
    on_message: Callable[[int, object], None] | None = None,
    timeout_s: float = 300.0,
    collective_timeout_s: float = 60.0,
) -> None:
    """Run ``target`` ("module:function") on ``world`` spawned ranks; raise RankFailure on trouble.

    ``timeout_s`` bounds the whole run; ``collective_timeout_s`` is the process group's timeout,
    after which a rank stuck in a collective (because a peer died or hangs) raises on its own.
    An exception in the launcher itself (KeyboardInterrupt, a SIGTERM turned into one) stops
    every rank at once and propagates.
    """
    ctx = _context()
    inbox = _Inbox(ctx.Queue(), on_message)
    steps = ctx.RawArray("q", [-1] * world)
    words = ctx.RawArray("c", world * _DOING_BYTES)
    port = free_port()
    procs = [
        ctx.Process(
            target=_rank_main,
            daemon=True,
            args=(
                r,
                world,
                port,
                device_type,
                target,
                payload,
                inbox.messages,
                collective_timeout_s,
                (steps, words),
                (dict(os.environ), os.getcwd(), list(sys.path)),
            ),
        )
        for r in range(world)
    ]
    try:
        for p in procs:
            p.start()
        _wait(procs, inbox, timeout_s)
        while inbox.receive(0.05):  # what the ranks said before they died
            pass
        dead, silent = _unaccounted(procs, inbox)
    finally:
        _stop(procs, inbox.messages)
    message = _failure_message(world, inbox.errors, dead, silent, _where(steps, words), timeout_s)
    if message:
        raise RankFailure(message)


# [Note: ranks forked from a server]
# Ranks start as multiprocessing's ``forkserver`` children: one server process per launcher
# imports torch once (:data:`PRELOAD`), and each rank is forked from it, so a launch does not pay
# torch's import on every rank (docs/decisions.md, "Ranks forked from a server"). The server
# imports nothing else and never touches a device, so CUDA/ROCm start fresh in each rank. A
# forked rank would see the server's environment, working directory and import path from when it
# started; each rank takes the launcher's as they are at the launch instead (``_rank_main``), as
# a spawned process would. Where ``forkserver`` is not available (or its socket's path would be
# too long), ranks are spawned.
def _context():
    """multiprocessing's ``forkserver`` context preloading :data:`PRELOAD`, else ``spawn``."""
    # the server listens on a socket under the temporary folder: a path past AF_UNIX's 107
    # bytes (a deep $TMPDIR) cannot be one
    socket_path = len(os.fsencode(tempfile.gettempdir())) + len("/pymp-xxxxxxxx/listener-xxxxxxxx")
    if "forkserver" not in mp.get_all_start_methods() or socket_path > 107:
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


class _Inbox:
    """What the ranks sent: finished ranks, errors (in the order they arrived), messages."""

    def __init__(self, messages, on_message: Callable[[int, object], None] | None):
        self.messages, self.on_message = messages, on_message
        self.done: set[int] = set()
        self.errors: dict[int, str] = {}

    def receive(self, timeout: float) -> bool:
        """Take one message off the queue (False: none came within ``timeout`` seconds)."""
        try:
            kind, rank, body = self.messages.get(timeout=timeout)
        except queue.Empty:
            return False
        if kind == "msg" and self.on_message is not None:
            self.on_message(rank, pickle.loads(body))
        elif kind == "done":
            self.done.add(rank)
        elif kind == "error":
            self.errors.setdefault(rank, body)
        return True

    def accounted(self, rank: int) -> bool:
        return rank in self.done or rank in self.errors


def _wait(procs: list, inbox: _Inbox, timeout_s: float) -> None:
    """Receive until every rank is done, or ``SETTLE_S`` after the first failure (an error or
    a rank that died) or sooner once every rank is accounted for, or at ``timeout_s``."""
    first_failure = None  # when the first failure was seen
    deadline = time.monotonic() + timeout_s
    while len(inbox.done) < len(procs):
        now = time.monotonic()
        unaccounted = [r for r in range(len(procs)) if not inbox.accounted(r)]
        if first_failure is not None and (
            now > first_failure + SETTLE_S or not any(procs[r].is_alive() for r in unaccounted)
        ):
            break
        if first_failure is None and now > deadline:
            break
        if inbox.receive(0.2):
            if inbox.errors and first_failure is None:
                first_failure = time.monotonic()
        elif first_failure is None and any(
            not procs[r].is_alive() and procs[r].exitcode != 0 for r in unaccounted
        ):
            first_failure = time.monotonic()


def _unaccounted(procs: list, inbox: _Inbox) -> tuple[dict[int, int], list[int]]:
    """Ranks that neither finished nor reported an error: (dead: exit codes, silent: alive)."""
    dead: dict[int, int] = {}
    silent: list[int] = []
    for r, p in enumerate(procs):
        if inbox.accounted(r):
            continue
        if p.is_alive():
            silent.append(r)
        elif p.exitcode != 0:
            dead[r] = p.exitcode
    return dead, silent


def _stop(procs: list, messages) -> None:
    """Terminate the ranks still running (kill those that ignore it) and close the queue."""
    for p in procs:
        if p.is_alive() and p.pid is not None:
            p.terminate()
    for p in procs:
        if p.pid is not None:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    messages.close()
    messages.join_thread()


def _where(steps, words) -> Callable[[int], str]:
    """' at step 24 (saving a checkpoint)': what rank r last said it was doing, via mark()."""

    def where(rank: int) -> str:
        step = steps[rank]
        doing = bytes(words[rank * _DOING_BYTES : (rank + 1) * _DOING_BYTES]).rstrip(b"\0")
        text = f" at step {step}" if step >= 0 else ""
        return text + (f" ({doing.decode(errors='replace')})" if doing else "")

    return where


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _how(exitcode: int) -> str:
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode} without reporting"


# [Note: naming the cause]
# When one rank dies (SIGKILL, a segfault, the OOM killer), its peers fail a moment later in
# their next collective ("Connection reset by peer"), and those errors often reach the launcher
# first. So after the first failure the launcher waits a few seconds (:data:`SETTLE_S`) for every
# rank to report or die, and then blames, in this order: a rank that died without reporting (its
# signal or exit code); a rank that is still alive and silent while its peers gave up waiting on
# it (it hangs); a rank whose error is not a communication failure; the first error seen. The
# others' errors follow as consequences. Each rank records what it is doing in shared memory
# (:func:`mark`: the training step, a few words such as "saving a checkpoint"), so a rank that
# dies without a word is still named with its step.
def _failure_message(
    world: int,
    errors: dict[int, str],
    dead: dict[int, int],
    silent: list[int],
    where: Callable[[int], str],
    timeout_s: float,
) -> str | None:
    """The cause first (see [Note: naming the cause]), then what the other ranks said."""
    if not errors and not dead:
        if not silent:
            return None
        late = "".join(f"; rank {r} was{where(r)}" for r in silent if where(r))
        return f"{_ranks(silent)} of {world} did not finish within {timeout_s:.0f} s{late}"
    causes = [f"rank {r} of {world} {_how(code)}{where(r)}" for r, code in dead.items()]
    secondary = {r: e for r, e in errors.items() if any(w in e.lower() for w in _SECONDARY)}
    primary = {r: e for r, e in errors.items() if r not in secondary}
    same = None  # the first rank's error: a rank that raised the same says so in few words
    if not causes and silent and not primary:
        gave_up = next(iter(secondary))
        causes.append(
            f"{_ranks(silent)} of {world} stopped responding"
            + "".join(where(r) for r in silent[:1])
            + f": rank {gave_up} gave up waiting: {secondary.pop(gave_up)}"
        )
    elif not causes:
        first = next(iter(primary or secondary))
        same = errors[first]
        causes.append(f"rank {first} of {world} failed{where(first)}: {same}")
        primary.pop(first, None)
        secondary.pop(first, None)
    after = [f"rank {r} failed the same way" if e == same else f"rank {r} failed: {e}"
             for r, e in (primary | secondary).items()]  # fmt: skip
    return "; ".join(causes) + ("; after that, " + "; ".join(after) if after else "")
