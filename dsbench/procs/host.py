"""What this host allows a run: room in /dev/shm, the cores this process may use, the folders it
can write, what its terminal can print.

Common machines are hostile in small ways: a container's 64 MiB /dev/shm (Docker's default),
``taskset -c 0``, a read-only checkout, a HOME that cannot be written, a terminal that is not
UTF-8. Each fact is read by one function here (:func:`free_bytes`, :func:`usable_cores`,
:func:`cannot_write`), which the tests monkeypatch to simulate such a machine; callers turn what
it says into one line and carry on (``tests/test_host.py``).

Fallback folders: results a run cannot write where asked by default go to the user's state
folder (``$XDG_STATE_HOME/dsbench/results``, else ``~/.local/state/dsbench/results``), else to
``<temp>/dsbench-<uid>/results``; caches whose default folder cannot be written go to
``<temp>/dsbench-<uid>/cache`` (:func:`redirect_caches`).
"""

from __future__ import annotations

import codecs
import os
import shutil
import sys
import tempfile
from pathlib import Path

MiB = 1024**2
SHM = "/dev/shm"
MORE_SHM = "`docker run --shm-size=1g` (or --ipc=host) gives a container more"


def mib(nbytes: float) -> str:
    """'64 MiB', '1.5 MiB'."""
    return f"{nbytes / MiB:.3g} MiB"


def free_bytes(folder: str | os.PathLike) -> int | None:
    """Free bytes in ``folder``'s file system; None when it is missing or cannot be read."""
    try:
        return shutil.disk_usage(folder).free if os.path.isdir(folder) else None
    except OSError:
        return None


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity: ``taskset``, a cgroup's cpuset), not the
    machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity API (macOS)
        return max(1, os.cpu_count() or 1)


def shared_cores(nranks: int) -> str | None:
    """'2 ranks share 1 core': when ``nranks`` CPU ranks have fewer cores than ranks, else None."""
    cores = usable_cores()
    if nranks <= cores:
        return None
    return f"{nranks} ranks share {cores} core{'s' if cores > 1 else ''}"


def shared_cores_line(nranks: int) -> str | None:
    """The one line ``dsbench run`` prints when its multi-rank rows have fewer cores than ranks."""
    shared = shared_cores(nranks)
    if shared is None:
        return None
    return (
        f"{shared} (CPU affinity: {usable_cores()} usable of {os.cpu_count()}): the multi-rank "
        "rows time ranks taking turns on a core, and say so in their notes; give the process "
        "more cores (taskset, docker --cpus) for figures comparable with other machines"
    )


def cannot_write(folder: str | os.PathLike, create: bool = True) -> str | None:
    """Why files cannot be written in ``folder``, or None when they can: a real write, since
    root passes ``os.access`` on a read-only mount. ``create``: make ``folder`` if missing;
    otherwise its nearest existing parent is tried, and nothing is left behind."""
    folder = Path(folder)
    try:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        else:
            while not folder.exists() and folder.parent != folder:
                folder = folder.parent
            if not folder.is_dir():
                return "Not a directory"
        with tempfile.NamedTemporaryFile(prefix=".tmp-", dir=folder):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def _home() -> Path:
    return Path(os.environ.get("HOME") or os.path.expanduser("~"))


def user_temp(kind: str) -> Path:
    """``<temp>/dsbench-<uid>/<kind>``: this user's own folder under the temporary one."""
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"dsbench-{uid}" / kind


def state_dir(kind: str) -> Path:
    """``$XDG_STATE_HOME/dsbench/<kind>``, else ``~/.local/state/dsbench/<kind>``."""
    base = os.environ.get("XDG_STATE_HOME") or str(_home() / ".local" / "state")
    return Path(base) / "dsbench" / kind


def first_writable(*folders: Path) -> Path | None:
    return next((f for f in folders if cannot_write(f) is None), None)


# (variable, the folder the tool uses when it is unset, the tool); read when called, so a test
# or a user's environment decides
def _cache_defaults() -> list[tuple[str, Path, str]]:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or _home() / ".cache")
    config = Path(os.environ.get("XDG_CONFIG_HOME") or _home() / ".config")
    return [
        ("DSBENCH_CACHE_DIR", cache / "dsbench", "dsbench's calibration and kernels"),
        ("MPLCONFIGDIR", config / "matplotlib", "matplotlib"),
        ("TRITON_CACHE_DIR", _home() / ".triton" / "cache", "triton"),
    ]


def redirect_caches(environ: dict | None = None) -> str | None:
    """Point each cache whose default folder cannot be written (a read-only or missing HOME) at
    ``<temp>/dsbench-<uid>/cache/<tool>``, in ``environ`` (default ``os.environ``, which spawned
    ranks inherit); a variable already set is the user's choice and kept. Returns the one line
    saying so, or None when every cache could stay."""
    environ = os.environ if environ is None else environ
    moved, why = [], ""
    for var, default, tool in _cache_defaults():
        if environ.get(var):
            continue
        reason = cannot_write(default, create=False)
        if reason is None:
            continue
        environ[var] = str(user_temp("cache") / var.lower())
        moved.append(tool)
        why = why or f"{default} ({reason})"
    if not moved:
        return None
    return (
        f"HOME's caches cannot be written ({why}): {', '.join(moved)} cache in "
        f"{user_temp('cache')} instead, kept until the temporary folder is cleared; set "
        "DSBENCH_CACHE_DIR (or XDG_CACHE_HOME), MPLCONFIGDIR and TRITON_CACHE_DIR to keep them"
    )


ASCII = {"±": "+-", "×": "x", "≥": ">=", "≤": "<=", "…": "...", "—": "-", "–": "-", "≈": "~",
         "↑": "^", "↓": "v", "→": "->", "µ": "u", "█": "#", "━": "-", "•": "*"}  # fmt: skip
"""What a character the terminal cannot show prints as (a C or Latin-1 terminal, ``|ascii``)."""


def _ascii_fallback(err: UnicodeError):
    if not isinstance(err, UnicodeEncodeError):
        raise err
    text = err.object[err.start : err.end]
    return "".join(ASCII.get(c, "?") for c in text), err.end


codecs.register_error("dsbench-ascii", _ascii_fallback)


def printable_streams(*streams) -> None:
    """Let stdout and stderr print any text: on an encoding that lacks a character (``LANG=C``
    without Python's UTF-8 mode, ``PYTHONIOENCODING=ascii``, Latin-1) it prints as its ASCII
    stand-in (:data:`ASCII`) rather than raising UnicodeEncodeError. Files are written with
    ``encoding="utf-8"``, whatever the locale."""
    for stream in streams or (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        if encoding in ("utf-8", "utf8") or not hasattr(stream, "reconfigure"):
            continue
        try:
            stream.reconfigure(errors="dsbench-ascii")
        except (ValueError, OSError):  # a closed or detached stream
            continue
