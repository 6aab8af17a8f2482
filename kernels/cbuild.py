"""The host's C compiler, for the few CPU kernels torch has no one-pass form of (the shm
collectives' fused sum, :mod:`dsbench.kernels.shm_sum`; the memory ceiling with AdamW's access
pattern, :mod:`dsbench.kernels.cpu_stream`).

A :class:`CLibrary` is compiled at first use by ``$CC``, ``cc``, ``gcc`` or ``clang`` (in
seconds) into ``<cache>/cpu_kernels/`` (``<cache>`` as for the CUDA build: ``$DSBENCH_CACHE_DIR``,
else ``$XDG_CACHE_HOME/dsbench``, else ``~/.cache/dsbench``), named by a hash of the source, the
compiler, the flags and the CPU (``-march=native``: a build per kind of CPU, for a cache folder
that other hosts may share). Ranks building at once each write their own file and rename it into
place. Without a compiler, or when the build fails, :meth:`CLibrary.load` gives ``None`` and
:attr:`CLibrary.why_not` says why in one line; the caller falls back or skips.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

CSRC = Path(__file__).resolve().parent / "csrc"


def compiler() -> str | None:
    """The C compiler's path: ``$CC``, else ``cc``, ``gcc`` or ``clang`` on PATH."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def cpu_identity() -> str:
    """The machine and its CPU's model and feature flags (Linux)."""
    text = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("model name", "flags"))]
        text += "".join(sorted(set(lines)))
    except OSError:
        text += platform.processor()
    return text


class CLibrary:
    """One C file under ``kernels/csrc/``, built once per process on first :meth:`load`."""

    def __init__(self, source: str, flags: tuple[str, ...]):
        self.source = CSRC / source
        self.flags = (*flags, "-shared", "-fPIC")
        self.why_not: str | None = None
        self._lib: ctypes.CDLL | None = None
        self._functions: dict[str, object] = {}
        self._loaded = False
        self._lock = threading.Lock()

    def path(self, cc: str) -> Path:
        from dsbench.hardware import resolve_cache_dir

        h = hashlib.sha256(self.source.read_bytes())
        for part in (cc, *self.flags, cpu_identity()):
            h.update(part.encode())
        return resolve_cache_dir() / "cpu_kernels" / f"{self.source.stem}_{h.hexdigest()[:16]}.so"

    def _build(self) -> ctypes.CDLL | None:
        cc = compiler()
        if cc is None:
            self.why_not = "no C compiler (cc, gcc or clang) on PATH"
            return None
        lib = self.path(cc)
        if not lib.is_file():
            lib.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib.parent)
            os.close(fd)
            try:
                run = subprocess.run(
                    [cc, *self.flags, str(self.source), "-o", tmp], capture_output=True, text=True
                )
                if run.returncode != 0:
                    first = (run.stderr.strip().splitlines() or ["(no output)"])[0]
                    self.why_not = f"{Path(cc).name} failed on {self.source.name}: {first}"
                    return None
                os.replace(tmp, lib)  # atomic: a rank building at the same time replaces it alike
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        return ctypes.CDLL(str(lib))  # CDLL: its calls release the GIL

    def load(self) -> ctypes.CDLL | None:
        """The loaded library, or ``None`` (then :attr:`why_not` says why)."""
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    try:
                        self._lib = self._build()
                    except OSError as exc:
                        self._lib, self.why_not = None, f"building {self.source.name} failed: {exc}"
                    self._loaded = True
        return self._lib

    def function(self, name: str, argtypes: list, restype=None):
        """The library's function ``name`` with its C signature (set once, on the first call:
        callers look it up on every call of a hot path), or ``None`` without a build."""
        fn = self._functions.get(name)
        if fn is None:
            lib = self.load()
            if lib is None:
                return None
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, restype
            self._functions[name] = fn
        return fn
