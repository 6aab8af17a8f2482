"""What a soak will do, decided before any rank starts: the ``--faults`` and ``--duration``
specs (one-line errors) and the seeded fault schedule.

``--faults kill=20,hang=3,term=2`` asks for that many failures of each kind, placed at seeded
random points of the job (``--fault-seed``):

- ``kill``: one rank SIGKILLs itself (no handler, no cleanup: what ``kill -9`` or the OOM killer
  does). When the soak saves checkpoints, a third of the kills (rounded up) fall during a save,
  at one of the engine's save points (:data:`SAVE_POINTS`), the others as a training step starts;
- ``hang``: one rank stops responding as a step starts (it sleeps, holding its sockets); its
  peers give up after the hang timeout and the launcher names it;
- ``term``: every rank gets SIGTERM as a step starts, as a batch scheduler stops a job.

Each fault gets its own place: a step fault at step s happens at progress s, a fault during the
save of the checkpoint of step c at progress c - 1/2 (after step c - 1). Places are distinct and
the faults are injected in order of progress, one per launch of the ranks. Every fault then
lands in a launch that trains at least one step: the launch after a fault at progress p resumes
from a checkpoint at most p, and the next fault lies beyond p.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from dsbench.errors import UsageError

ACTIONS = ("kill", "hang", "term")
SAVE_POINTS = {
    "dsbench": ("save.begin", "save.shard", "save.meta", "save.rename"),
    "deepspeed": ("save.begin", "save.shard", "save.rename"),
}
"""The points of a checkpoint save each engine's save passes through (:mod:`dsbench.procs.faults`):
``save.swap`` is left out because it is reached only when a tag is saved a second time."""
RANK0_POINTS = ("save.meta", "save.rename")
"""Save points only rank 0 reaches."""
SAVE_KILL_SHARE = 1 / 3
"""The share of the kills placed during checkpoint saves (rounded up) when the soak saves."""


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One failure to inject."""

    action: str
    """``kill``, ``hang`` or ``term`` (:data:`ACTIONS`)."""
    point: str
    """``step``, or a save point (:data:`SAVE_POINTS`)."""
    step: int
    """The training step (``point == "step"``) or the step of the checkpoint being saved."""
    rank: int | None
    """The rank that fails; None: every rank (``term``)."""

    @property
    def progress(self) -> float:
        """Where in the job it happens: a save of step c comes after step c - 1."""
        return self.step if self.point == "step" else self.step - 0.5

    def env(self) -> str:
        """The fault as ``$DSBENCH_FAULT`` spells it."""
        rank = "" if self.rank is None else f":rank={self.rank}"
        return f"{self.action}@{self.point}{rank}:step={self.step}"

    def describe(self) -> str:
        """'kill rank 1 during the save of step 40', 'term all ranks at step 12'."""
        who = "all ranks" if self.rank is None else f"rank {self.rank}"
        where = f"at step {self.step}"
        if self.point != "step":
            where = f"during the save of step {self.step} ({self.point})"
        return f"{self.action} {who} {where}"

    def named_by(self, message: str, world: int) -> bool:
        """Whether the launcher's failure message names this fault as the cause: it opens with
        the failed rank and what happened to it (every rank, for a SIGTERM to all)."""
        if self.action == "hang":
            return message.startswith(f"rank {self.rank} of {world} stopped responding")
        signal = "SIGKILL" if self.action == "kill" else "SIGTERM"
        ranks = range(world) if self.rank is None else [self.rank]
        named = [f"rank {r} of {world} killed by {signal}" for r in ranks]
        return message.startswith(named[0]) and all(n in message for n in named)

    def to_dict(self) -> dict:
        return {
            "action": self.action,
            "point": self.point,
            "step": self.step,
            "rank": self.rank,
            "spec": self.env(),
        }


def parse_faults(text: str | None) -> dict[str, int]:
    """``"kill=20,hang=3,term=2"`` -> ``{"kill": 20, "hang": 3, "term": 2}``; one-line errors."""
    counts: dict[str, int] = {}
    for item in filter(None, (t.strip() for t in (text or "").split(","))):
        action, sep, count = item.partition("=")
        action = action.strip()
        if action not in ACTIONS or not sep or not count.strip().isdigit():
            raise UsageError(
                f"--faults '{item}': expected ACTION=COUNT[,ACTION=COUNT...], ACTION one of "
                f"{', '.join(ACTIONS)}, e.g. kill=20,hang=3,term=2"
            )
        if action in counts:
            raise UsageError(f"--faults: '{action}' is given twice")
        counts[action] = int(count)
    return {a: n for a, n in counts.items() if n}


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


def parse_duration(text: str) -> float:
    """``"2h"``, ``"90m"``, ``"1h30m"``, ``"45s"`` or plain seconds -> seconds; one-line errors."""
    t = text.strip().lower()
    try:
        seconds = float(t)
    except ValueError:
        m = _DURATION.fullmatch(t)
        if not t or m is None or not any(m.groups()):
            raise UsageError(
                f"--duration '{text}': expected a time such as 2h, 90m, 1h30m, 45s or seconds"
            ) from None
        h, mi, s = (float(g or 0) for g in m.groups())
        seconds = 3600 * h + 60 * mi + s
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"--duration '{text}': must be a positive time")
    return seconds


def schedule(
    counts: dict[str, int],
    *,
    steps: int,
    world: int,
    engine: str,
    save_every: int,
    seed: int,
) -> list[Fault]:
    """The faults ``counts`` asks for, at seeded random places of a ``steps``-step job, in order
    of progress (see the module's docstring). One-line error when the job has too few places."""
    if not counts:
        return []
    rng = np.random.default_rng(seed)
    kills = counts.get("kill", 0)
    # the checkpoints saved: every save_every steps, and at the end
    saves = -(-steps // save_every) if save_every else 0
    in_saves = min(math.ceil(kills * SAVE_KILL_SHARE), saves)
    at_steps = sum(counts.values()) - in_saves
    if at_steps > steps - 1:
        raise UsageError(
            f"--faults asks for {sum(counts.values())} failures but a job of {steps} steps has "
            f"room for {steps - 1 + saves} ({steps - 1} steps and {saves} saves); "
            "give more --steps"
        )
    faults: list[Fault] = []
    for i in rng.choice(saves, size=in_saves, replace=False) if in_saves else []:
        c = min((int(i) + 1) * save_every, steps)
        point = str(rng.choice(SAVE_POINTS[engine]))
        rank = 0 if point in RANK0_POINTS else int(rng.integers(world))
        faults.append(Fault(action="kill", point=point, step=int(c), rank=rank))
    actions = [
        a for a in ACTIONS for _ in range(counts.get(a, 0) - (in_saves if a == "kill" else 0))
    ]
    places = rng.choice(steps - 1, size=len(actions), replace=False) + 1  # steps 1..steps-1
    for action, s in zip(rng.permutation(actions), places, strict=True):
        rank = None if action == "term" else int(rng.integers(world))
        faults.append(Fault(action=str(action), point="step", step=int(s), rank=rank))
    return sorted(faults, key=lambda f: f.progress)
