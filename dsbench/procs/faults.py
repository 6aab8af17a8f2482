"""Fault injection at named points, for tests and soak runs: a rank kills itself or hangs.

``DSBENCH_FAULT`` holds one or more comma-separated faults, each ``ACTION@POINT`` with optional
``:rank=R`` and ``:step=S`` filters::

    DSBENCH_FAULT=kill@step:rank=1:step=3            rank 1 SIGKILLs itself as step 3 starts
    DSBENCH_FAULT=kill@save.shard:rank=0:step=4      rank 0 dies, its shard partly written
    DSBENCH_FAULT=hang@step:rank=1:step=2            rank 1 stops responding at step 2

Actions: ``kill`` (SIGKILL this process: no handler, no cleanup, as the OOM killer does),
``term`` (SIGTERM this process), ``hang`` (sleep forever, holding whatever it holds). Points are
where the code calls :func:`point`: ``step`` (a training step starts), and in
:func:`dsbench.zero.checkpoint.save_checkpoint` ``save.begin``, ``save.shard`` (this rank's
shard partly written), ``save.meta`` (rank 0: all shards and the metadata written, not yet
renamed into place), ``save.swap`` (rank 0, saving a tag that exists: the old copy moved aside,
the new one not yet in place), ``save.rename`` (rank 0: renamed into place, ``latest`` not yet
updated). The rank is ``$RANK`` (set by torchrun and by
:func:`dsbench.procs.distributed.spawn_ranks`). Unset, :func:`point` costs one dictionary lookup.
A fault without ``rank=`` acts on every rank that reaches the point (``term@step:step=9`` is a
scheduler's SIGTERM to the whole job at step 9).

With ``DSBENCH_FAULT_LOG`` set to a file, a rank appends one JSON line there just before it
acts (``{"action", "point", "rank", "step", "time"}``, ``time`` from ``time.time()``):
``dsbench soak`` learns from it that the fault fired and when, for the detection time.
"""

from __future__ import annotations

import json
import os
import signal
import time

from dsbench.errors import UsageError

ENV = "DSBENCH_FAULT"
LOG_ENV = "DSBENCH_FAULT_LOG"
ACTIONS = ("kill", "term", "hang")


def parse(text: str) -> list[dict]:
    """``"kill@step:rank=1:step=3"`` -> ``[{"action": "kill", "point": "step", "rank": 1,
    "step": 3}]``; a malformed fault is a one-line error."""
    faults = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        head, *filters = item.split(":")
        action, sep, where = head.partition("@")
        if action not in ACTIONS or not sep or not where:
            raise UsageError(
                f"{ENV} '{item}': expected ACTION@POINT[:rank=R][:step=S], ACTION one of "
                f"{', '.join(ACTIONS)}"
            )
        fault: dict = {"action": action, "point": where}
        for f in filters:
            key, _, value = f.partition("=")
            if key not in ("rank", "step") or not value.isdigit():
                raise UsageError(f"{ENV} '{item}': '{f}' is not rank=N or step=N")
            fault[key] = int(value)
        faults.append(fault)
    return faults


def point(name: str, step: int | None = None) -> None:
    """Act on any fault in ``$DSBENCH_FAULT`` that names this point (and this rank and step)."""
    text = os.environ.get(ENV)
    if not text:
        return
    rank = int(os.environ.get("RANK", "0"))
    for fault in parse(text):
        if fault["point"] != name or fault.get("rank", rank) != rank:
            continue
        if "step" in fault and fault["step"] != step:
            continue
        _log(fault["action"], name, rank, step)
        if fault["action"] == "hang":
            while True:
                time.sleep(3600)
        os.kill(os.getpid(), signal.SIGKILL if fault["action"] == "kill" else signal.SIGTERM)
        time.sleep(60)  # the signal is delivered before this returns


def _log(action: str, name: str, rank: int, step: int | None) -> None:
    """One line in ``$DSBENCH_FAULT_LOG``, written in one ``write`` (lines of ranks acting at
    once do not interleave) before the fault acts."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = json.dumps({"action": action, "point": name, "rank": rank, "step": step,
                       "time": time.time()}) + "\n"  # fmt: skip
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
