"""SIGINT and SIGTERM as exceptions, so that an interrupted command keeps what it finished.

Python turns SIGINT into ``KeyboardInterrupt``, but SIGTERM (what a batch scheduler sends at its
time limit, and ``kill``'s default) ends the process on the spot: no ``finally``, no result
file, spawned ranks left to die on their own and ``multiprocessing``'s semaphores left in
``/dev/shm``. Under :func:`signals_raise` both raise :class:`Interrupted` (a
``KeyboardInterrupt``), so cleanup runs as the exception unwinds; a command that catches it
writes what it finished and exits with :attr:`Interrupted.exit_code` (128 + the signal: 130
for SIGINT, 143 for SIGTERM, the shell's convention).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The process got SIGINT or SIGTERM."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def as_interrupted(exc: KeyboardInterrupt) -> Interrupted:
    """A plain KeyboardInterrupt (SIGINT caught before any handler was installed) as one."""
    return exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)


def _raise(signum, frame) -> None:
    raise Interrupted(signum)


@contextmanager
def signals_raise() -> Iterator[None]:
    """Within: SIGINT and SIGTERM raise :class:`Interrupted`; on leaving, the old handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers can only be set from the main thread
        return
    old = {s: signal.signal(s, _raise) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextmanager
def signals_ignored() -> Iterator[None]:
    """Within: SIGINT and SIGTERM are ignored (an interrupted run writing what it finished)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
