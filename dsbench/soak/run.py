"""Running a soak: launch the ranks as a user's launcher would, inject the scheduled faults, and
after each failure launch them again from the latest complete checkpoint.

Every launch is ``dsbench train``'s: :func:`dsbench.procs.distributed.spawn_ranks` runs
:func:`dsbench.engines.train_loop.train_loop` on each rank, with the job's checkpoint folder and
``resume`` when a checkpoint is there; a failure is the
:class:`~dsbench.procs.distributed.RankFailure`
``dsbench train`` prints, naming the rank and what happened to it. A fault goes to the ranks
through ``$DSBENCH_FAULT`` (one per launch, see :mod:`dsbench.soak.plan`); the ranks note in
``$DSBENCH_FAULT_LOG`` when it fires, which tells an injected failure from a real one and gives
the detection time (from the fault firing to the launcher knowing which rank failed and how).

A fault soak first trains the job once without faults: the *reference*, whose per-step losses
every launch of the faulted run must reproduce exactly at the same steps (float equality: a
resume that continues bit for bit gives the same losses). The reference is also the run whose
memory and step times the drift is fitted to, since it is one uninterrupted process per rank.

Everything is appended to the soak's JSONL stream as it happens (one line per launch start and
end, per-rank sample, and batch of losses), so a soak that is itself killed keeps its data.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dsbench.procs import faults as fault_points
from dsbench.soak.plan import Fault

MAX_FAILED_LAUNCHES = 3
"""Launches in a row that fail without an injected fault and without progress: then the run
stops (a checkpoint that cannot be resumed would otherwise fail forever)."""
LOSS_BATCH = 200
"""Losses per line of the stream."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """One soak, as the command line gave it (after validation)."""

    model: str
    config: dict
    """The effective ds_config (``DSConfig.to_deepspeed_dict()``), the same for every launch."""
    engine: str
    nproc: int
    device: str
    steps: int
    """The job's total steps (with ``duration_s``: an upper bound)."""
    duration_s: float | None
    sample_every: int
    checkpoint_every: int
    faults: tuple[Fault, ...]
    hang_timeout_s: float
    """The process group's timeout: a rank waiting this long on a silent peer gives up."""
    seed: int = 0
    kernels: dict = field(default_factory=dict)


@dataclass(kw_only=True)
class Launch:
    """One launch of the ranks and what came of it."""

    run: str
    """``reference`` (no faults) or ``faulted``."""
    index: int
    """Its place among the run's launches (0: the first)."""
    fault: Fault | None
    resume: bool
    """Whether it started from a checkpoint."""
    started: float
    first_step: int | None = None
    """The step it started from, once the ranks said so."""
    losses: dict[int, float] = field(default_factory=dict)
    samples: list[dict] = field(default_factory=list)
    ended: float | None = None
    failure: str | None = None
    """The launcher's message when a rank failed (None: the launch finished or was stopped)."""
    fired: list[dict] = field(default_factory=list)
    """``$DSBENCH_FAULT_LOG`` lines: the injected fault acted (one line per rank it hit)."""

    @property
    def last_step(self) -> int | None:
        return max(self.losses) if self.losses else None


class Stream:
    """The soak's record: JSON lines appended and flushed as they come."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("a", buffering=1, encoding="utf-8")

    def write(self, kind: str, **fields) -> None:
        self._file.write(json.dumps({"kind": kind, **fields}) + "\n")

    def close(self) -> None:
        self._file.close()


@contextlib.contextmanager
def _environ(values: dict[str, str | None]) -> Iterator[None]:
    """Set (or, for None, remove) environment variables for the ranks spawned within."""

    def apply(pairs: dict[str, str | None]) -> None:
        for k, v in pairs.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    old = {k: os.environ.get(k) for k in values}
    try:
        apply(values)
        yield
    finally:
        apply(old)


def same_loss(a: float, b: float) -> bool:
    """Bit-for-bit equal losses (two NaNs count as equal)."""
    return a == b or (a != a and b != b)


class Soak:
    """A soak's state as it runs: read it after :meth:`run` returns or raises (SIGINT, SIGTERM)
    to report what finished."""

    def __init__(
        self, settings: Settings, stream: Stream, workdir: Path, say: Callable[[str], None] = print
    ) -> None:
        self.settings = settings
        self.stream = stream
        self.workdir = workdir
        self.say = say
        self.launches: list[Launch] = []
        self.deadline = None if settings.duration_s is None else time.time() + settings.duration_s
        self.stopped: str | None = None
        """Why a run stopped before the end of its job (too many failures), or None."""

    # ------------------------------------------------------------------ the two runs

    def run(self) -> None:
        """The reference run, then, with faults, the faulted run."""
        self._train("reference", ())
        if self.settings.faults and self.stopped is None:
            self._train("faulted", self.settings.faults)

    def runs(self, name: str) -> list[Launch]:
        return [launch for launch in self.launches if launch.run == name]

    def _train(self, run: str, faults: tuple[Fault, ...]) -> None:
        """Launch the ranks until the job is done, restarting after each failure."""
        s = self.settings
        checkpoints = self.workdir / run
        pending = list(faults)
        failed_in_a_row = 0
        while True:
            resume = (checkpoints / "latest").is_file()
            fault = pending[0] if pending else None
            launch = self._launch(run, checkpoints, resume, fault)
            if launch.fired and fault is not None:
                pending.pop(0)
            if launch.failure is None:
                if pending:  # the job ended before the fault's place: a scheduling bug
                    self.stopped = f"{len(pending)} fault(s) never fired: {pending[0].describe()}"
                return
            if s.duration_s is not None and time.time() >= self.deadline:
                return
            progressed = launch.last_step is not None
            failed_in_a_row = 0 if launch.fired or progressed else failed_in_a_row + 1
            if failed_in_a_row >= MAX_FAILED_LAUNCHES:
                self.stopped = (
                    f"the {run} run stopped: {failed_in_a_row} launches in a row failed without "
                    f"an injected fault or a step trained; the last: {launch.failure}"
                )
                self.say(f"dsbench soak: {self.stopped}")
                return

    def _launch(self, run: str, checkpoints: Path, resume: bool, fault: Fault | None) -> Launch:
        """One launch of the ranks, its stream lines, and what came of it."""
        from dsbench.procs.distributed import RankFailure, spawn_ranks

        s = self.settings
        launch = Launch(
            run=run, index=len(self.runs(run)), fault=fault, resume=resume, started=time.time()
        )
        self.launches.append(launch)
        log = self.workdir / "faults.log"
        log.unlink(missing_ok=True)
        job = self._job(checkpoints, resume)
        self.stream.write(
            "launch",
            run=run,
            launch=launch.index,
            resume=resume,
            fault=fault.to_dict() if fault else None,
            time=launch.started,
        )
        receiver = _Receiver(self, launch, checkpoints)
        env = {fault_points.ENV: fault.env() if fault else None, fault_points.LOG_ENV: str(log)}
        what = f"{run} launch {launch.index}" + (f", then {fault.describe()}" if fault else "")
        self.say(f"dsbench soak: {what}" + (" (resuming)" if resume else ""))
        try:
            with _environ(env):
                spawn_ranks(
                    "dsbench.engines.train_loop:train_loop",
                    s.nproc,
                    job,
                    device_type=s.device,
                    on_message=receiver,
                    timeout_s=10**7,
                    collective_timeout_s=s.hang_timeout_s,
                )
        except RankFailure as exc:
            launch.failure = str(exc)
        finally:
            self._end(launch, receiver, log)
        if launch.failure:
            kind = "injected" if launch.fired else "real"
            print(f"dsbench soak: {kind} failure: {launch.failure}", file=sys.stderr)
        return launch

    def _job(self, checkpoints: Path, resume: bool):
        """The :class:`~dsbench.engines.train_loop.TrainJob` every rank of a launch runs."""
        from dsbench.engines.train_loop import TrainJob

        s = self.settings
        return TrainJob(
            model=s.model,
            config=s.config,
            engine=s.engine,
            steps=s.steps,
            device=s.device,
            kernels=s.kernels,
            seed=s.seed,
            checkpoint_dir=str(checkpoints) if s.checkpoint_every else None,
            resume=resume,
            save_every=s.checkpoint_every,
            sample_every=s.sample_every,
            deadline=self.deadline,
        )

    def _end(self, launch: Launch, receiver: _Receiver, log: Path) -> None:
        """Close a launch: its last losses, the faults that fired, its ``end`` line."""
        launch.ended = time.time()
        receiver.flush()
        if log.is_file():
            launch.fired = [json.loads(line) for line in log.read_text().splitlines() if line]
        self.stream.write(
            "end",
            run=launch.run,
            launch=launch.index,
            time=launch.ended,
            first_step=launch.first_step,
            last_step=launch.last_step,
            failure=launch.failure,
            fired=launch.fired,
        )


class _Receiver:
    """The ranks' messages during one launch, into the :class:`Launch` and the stream (losses in
    lines of :data:`LOSS_BATCH`)."""

    def __init__(self, soak: Soak, launch: Launch, checkpoints: Path) -> None:
        self.soak, self.launch, self.checkpoints = soak, launch, checkpoints
        self.losses: list[tuple[int, float]] = []

    def flush(self) -> None:
        """Write the losses not yet in the stream."""
        if self.losses:
            self.soak.stream.write(
                "losses",
                run=self.launch.run,
                launch=self.launch.index,
                first=self.losses[0][0],
                losses=[v for _, v in self.losses],
            )
            self.losses.clear()

    def __call__(self, rank: int, msg) -> None:
        kind, body = msg
        launch = self.launch
        if kind == "start":
            launch.first_step = body["first_step"]
        elif kind == "step":
            launch.losses[body["step"]] = body["loss"]
            self.losses.append((body["step"], body["loss"]))
            if len(self.losses) >= LOSS_BATCH:
                self.flush()
        elif kind == "sample":
            launch.samples.append(body)
            self.soak.stream.write("sample", run=launch.run, launch=launch.index, **body)
            if rank == 0:
                prune(self.checkpoints)
        elif kind == "warning" and launch.index == 0 and launch.run == "reference":
            self.soak.say(f"dsbench: warning: {body}")


def prune(directory: Path) -> None:
    """Remove the checkpoints older than the one ``latest`` names (a soak of thousands of steps
    would otherwise keep hundreds); ``latest`` and anything newer (a save under way) stay."""
    try:
        latest = (directory / "latest").read_text().strip()
    except OSError:
        return
    if not latest.startswith("global_step") or not latest[11:].isdigit():
        return
    for path in directory.glob("global_step*"):
        tail = path.name[11:]
        if tail.isdigit() and int(tail) < int(latest[11:]):
            shutil.rmtree(path, ignore_errors=True)
