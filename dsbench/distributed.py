"""Spawn N local ranks and run a function on each, with a clear error when a rank dies or hangs.

Used by the collective benchmarks (and later by ``dsbench train``). Each rank joins a process
group over TCP on 127.0.0.1 (gloo on CPU, NCCL on CUDA, NCCL/RCCL on ROCm), pins its GPU
(``cuda:<rank>``) or its share of CPU threads, runs ``target(payload, send)``, and leaves the
group. ``send(msg)`` delivers a picklable message to the parent's ``on_message`` as it happens
(progress, results). A rank that raises, exits, or is still running at the deadline makes
:func:`spawn_ranks` stop every rank and raise :class:`RankFailure` naming it.
"""

from __future__ import annotations

import datetime
import importlib
import multiprocessing as mp
import os
import pickle
import queue
import socket
import time
import traceback
from collections.abc import Callable


class RankFailure(RuntimeError):
    """A spawned rank failed or hung; the message names the rank and what happened."""


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
) -> None:
    import torch
    import torch.distributed as dist

    def send(msg) -> None:
        # Pickled here, by value: torch would otherwise pass tensors as shared-memory handles
        # that die with this process before the parent reads them.
        messages.put(("msg", rank, pickle.dumps(msg)))

    try:
        if device_type == "cuda":
            torch.cuda.set_device(rank)
            device = f"cuda:{rank}"
        else:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
            device = "cpu"
        os.environ.update(
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(rank),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        dist.init_process_group(
            backend_for(device_type),
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        module, _, attr = target.partition(":")
        getattr(importlib.import_module(module), attr)(payload, device=device, send=send)
        dist.destroy_process_group()
        messages.put(("done", rank, None))
    except BaseException as exc:  # report, then exit non-zero
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        messages.put(("error", rank, last))
        raise SystemExit(1) from None


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
    after which a rank stuck in a collective (because a peer died) raises on its own.
    """
    ctx = mp.get_context("spawn")
    messages = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(
            target=_rank_main,
            daemon=True,
            args=(r, world, port, device_type, target, payload, messages, collective_timeout_s),
        )
        for r in range(world)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    done: set[int] = set()
    errors: dict[int, str] = {}
    try:
        while len(done) + len(errors) < world:
            try:
                kind, rank, body = messages.get(timeout=0.5)
            except queue.Empty:
                for r, p in enumerate(procs):
                    if not p.is_alive() and r not in done and r not in errors:
                        # died without reporting (killed, segfault, OOM): give the queue a moment
                        time.sleep(0.5)
                        if messages.empty():
                            errors[r] = f"exited with code {p.exitcode} without reporting"
                if errors or time.monotonic() > deadline:
                    break
                continue
            if kind == "msg" and on_message is not None:
                on_message(rank, pickle.loads(body))
            elif kind == "done":
                done.add(rank)
            elif kind == "error":
                errors[rank] = body
                break
    finally:
        if errors:  # give the other ranks a moment to report their own failure
            deadline_errors = time.monotonic() + 2.0
            while time.monotonic() < deadline_errors and any(p.is_alive() for p in procs):
                try:
                    kind, rank, body = messages.get(timeout=0.2)
                except queue.Empty:
                    continue
                if kind == "error":
                    errors.setdefault(rank, body)
        alive = [r for r, p in enumerate(procs) if p.is_alive() and r not in done]
        for p in procs:
            p.join(timeout=5 if not errors else 0.1)
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        messages.close()
    if errors:
        first = next(iter(errors))  # the first failure observed is the root cause
        hung = [r for r in alive if r not in errors]
        if hung and any(w in errors[first].lower() for w in ("timeout", "timed out")):
            raise RankFailure(
                f"rank(s) {', '.join(map(str, hung))} of {world} stopped "
                f"responding: rank {first} gave up waiting: {errors[first]}"
            )
        raise RankFailure(f"rank {first} of {world} failed: {errors[first]}")
    missing = sorted(set(range(world)) - done)
    if missing:
        raise RankFailure(
            f"rank(s) {', '.join(map(str, missing))} of {world} did not finish "
            f"within {timeout_s:.0f} s"
        )
