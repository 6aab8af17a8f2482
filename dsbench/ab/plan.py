"""The plan of an A/B (``dsbench ab``): its two sides, the design of its rounds and when they stop.

[Note: the design of an A/B]
By default each case gets the design that decides it fastest, and the rounds go on until every
row is decided or the time limit (``--max-time``, 10 minutes) leaves no room for another round:

- a suite's cases run in block rounds ([Note: sides in turns]): both sides' workers resident,
  timing each case in turns, cases that spawn ranks in resident groups of ranks; a case whose
  peak memory is taken alone in fresh ranks (training steps) gets that fresh launch of ranks in
  every round as well, and its memory row is judged over those launches, a round each;
- a ``--soak`` runs launch rounds (a whole soak process is the unit), as do the cases of a
  ``commit=`` side from before the worker existed (said in one line);
- the stopping rule is [Note: looks over an open horizon]; ``--max-rounds N`` caps it.

The older designs stay as flags: ``--launches`` (a fresh ``dsbench run`` a side each round),
``--rounds N`` (a fixed count, no looks).

A plan cannot say what contradicts itself: the design is one of :data:`Design`'s types, each
with only its own fields (a soak has no filter and no block time), and the stopping rule one
of :data:`Stopping`'s. A value out of range is a one-line UsageError where the type is built.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from dsbench.ab.blocks import TURN_S
from dsbench.errors import UsageError
from dsbench.stats import sequential

DEFAULT_MAX_TIME = "10m"
"""The time limit of an A/B until decided: no round starts that would end past it."""


def seconds(text: str) -> float:
    """``90s``, ``20m``, ``1h`` or plain seconds (``--max-time``)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"--max-time '{text}': give a duration such as 90s, 20m or 1h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


@dataclass(frozen=True, kw_only=True)
class Suite:
    """The cases a round of a suite runs."""

    name: str
    """The suite (:data:`dsbench.suites.SUITES`)."""
    filter: str | None = None
    """Only cases whose id matches."""
    device: str = "auto"

    @property
    def verb(self) -> list[str]:
        """A launch round's ``dsbench run`` (``--out FILE`` follows)."""
        verb = ["run", "--suite", self.name, "--device", self.device, "--no-compare",
                "--no-progress"]  # fmt: skip
        return verb + (["--filter", self.filter] if self.filter else [])

    @property
    def worker_argv(self) -> list[str]:
        """The arguments of a block round's worker (:mod:`dsbench.ab.worker`)."""
        argv = ["--suite", self.name, "--device", self.device]
        return argv + (["--filter", self.filter] if self.filter else [])


@dataclass(frozen=True)
class Blocks:
    """Block rounds ([Note: sides in turns]): both sides resident, timing each case in turns."""

    suite: Suite
    block_time: float = TURN_S
    """Seconds of blocks a case gets in a round, both sides together (0: BLOCK_PAIRS pairs)."""
    required: bool = False
    """``--blocks`` given: a side that cannot take turns is an error, not launch rounds."""

    def __post_init__(self):
        if not 0 <= self.block_time <= 600:
            raise UsageError(f"--block-time {self.block_time:g}: give 0 to 600 seconds "
                             f"(default {TURN_S:g})")  # fmt: skip

    @property
    def verb(self) -> list[str]:
        """What lists its cases (``--list`` follows)."""
        return self.suite.verb


@dataclass(frozen=True)
class Launches:
    """Launch rounds of a suite: one fresh ``dsbench run`` a side each round, A B, B A, ..."""

    suite: Suite

    @property
    def verb(self) -> list[str]:
        return self.suite.verb


@dataclass(frozen=True)
class Soak:
    """Launch rounds of a soak: each round one ``dsbench soak ARGS`` a side."""

    args: tuple[str, ...]
    """soak's arguments, its config made absolute (rounds run in a folder of their own)."""

    @classmethod
    def parse(cls, text: str, filter: str | None = None) -> Soak:
        """``--soak``'s text; a ``--filter`` beside it, or an ``--out`` in it, is an error."""
        if filter:
            raise UsageError("--filter chooses cases of a suite; it does not apply to --soak")
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise UsageError(f"--soak '{text}': {exc}") from None
        args = []
        for i, word in enumerate(words):
            if word == "--out" or word.startswith("--out="):
                raise UsageError("--soak: leave out --out; dsbench ab writes the rounds' files")
            if word.startswith("--config="):
                word = "--config=" + str(Path(word.split("=", 1)[1]).resolve())
            elif i and words[i - 1] == "--config":
                word = str(Path(word).resolve())
            args.append(word)
        return cls(tuple(args))

    @property
    def verb(self) -> list[str]:
        return ["soak", *self.args]


Design = Blocks | Launches | Soak


@dataclass(frozen=True)
class FixedRounds:
    """A fixed number of rounds a side, no looks (``--rounds N``)."""

    n: int

    def __post_init__(self):
        if self.n < 2:
            raise UsageError(f"--rounds must be at least 2, got {self.n}")


@dataclass(frozen=True, kw_only=True)
class UntilDecided:
    """Rounds until every row is decided ([Note: looks over an open horizon]), or the time
    limit, or the round cap."""

    max_time: str = DEFAULT_MAX_TIME
    """No round that would end past this (``90s``, ``20m``, ``1h``)."""
    max_rounds: int | None = None
    """At most this many rounds a side, the horizon of the looks (None: as many as fit)."""
    spending: str = "pocock"
    """How the error rate is spent over the looks (:data:`sequential.SPENDING`)."""

    def __post_init__(self):
        seconds(self.max_time)
        if self.max_rounds is not None and self.max_rounds < sequential.FIRST_LOOK:
            raise UsageError(f"--max-rounds must be at least {sequential.FIRST_LOOK}, "
                             f"got {self.max_rounds}")  # fmt: skip

    @property
    def seconds(self) -> float:
        return seconds(self.max_time)


Stopping = FixedRounds | UntilDecided


def planned_rounds(stopping: Stopping) -> int | None:
    """The rounds a side planned: the fixed count, or the cap (None: until decided)."""
    return stopping.n if isinstance(stopping, FixedRounds) else stopping.max_rounds


@dataclass(frozen=True, kw_only=True)
class ABPlan:
    """What ``dsbench ab`` measures and how: run by :func:`dsbench.ab.pair.measure`."""

    baseline: str
    """The baseline side as given (``deepspeed=0.18.3``, :func:`dsbench.ab.parse_side`)."""
    contender: str
    design: Design
    stopping: Stopping
    out: Path
    """The results folder both sides' files are written to."""
    factor: float = 1.05
    """Better/worse only beyond this ratio (the looks judge with it)."""
    label: str | None = None
    """The written runs' label, before ``-baseline`` / ``-contender``."""
