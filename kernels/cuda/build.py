"""Build the CUDA/HIP extension at first use, cached, and say clearly when it cannot be built.

The sources in ``kernels/csrc`` (``bindings.cpp`` plus one ``.cu`` per kernel) are compiled by
``torch.utils.cpp_extension.load``: nvcc on CUDA builds of torch, hipcc after torch's hipify pass
on ROCm builds. They are first copied into the build folder, so hipify writes its ``.hip`` files
there and never into the installed package.

Build folder: ``<cache>/torch_extensions/torch-<version>-<cuda|rocm><version>/dsbench_cuda_<hash>``
where ``<cache>`` is ``$DSBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/dsbench``, else
``~/.cache/dsbench``, and ``<hash>`` covers the sources, the build flags, the compiler path and the
architecture list (``TORCH_CUDA_ARCH_LIST`` / ``PYTORCH_ROCM_ARCH``). A changed source builds a
new module; an unchanged one loads in a second.

Before the build, :func:`build_environment` fills in what torch would otherwise guess: on CUDA,
``CUDA_HOME`` is the toolkit root that holds ``include/cuda_runtime_api.h`` (torch takes the
folder above ``which nvcc``, wrong where ``nvcc`` is a wrapper script; :func:`cuda_home`); on
ROCm without ``PYTORCH_ROCM_ARCH``, the visible devices' gfx targets (:func:`rocm_arch`). Ranks
that build at once take turns on ``dsbench.lock`` in the build folder, held from writing the
sources until the module is loaded. tests/test_cuda_build.py checks all three on a CPU.

A failed build raises :class:`BuildError` with one line (the first compiler error and the path
of the full log) and leaves a marker in the build folder, so the implementation reports itself
unavailable in this and later processes until the sources change or ``DSBENCH_CUDA_REBUILD=1``.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

CSRC = Path(__file__).resolve().parent.parent / "csrc"
SOURCES = ("bindings.cpp", "adamw.cu", "gemm.cu", "reduce.cu")
HEADERS = ("dsbench_portability.h", "dsbench_kernels.h", "dsbench_cpu_emulation.h")
CFLAGS = ("-O3",)
CUDA_CFLAGS = ("-O3", "-lineinfo")
HIP_CFLAGS = ("-O3",)
FAILED_MARKER = "BUILD_FAILED.txt"
LOG_FILE = "build.log"
LOCK_FILE = "dsbench.lock"
"""Held by one building process at a time (torch's own ``lock`` is taken later, in ``load``)."""
CUDA_HEADER = Path("include") / "cuda_runtime_api.h"
CUDA_GLOBS = ("/usr/local/cuda", "/usr/local/cuda-*")
"""Where CUDA toolkits are installed when nothing else names one."""

NO_GPU = "no GPU (compile-checked only: `dsbench kernels --compile-check`)"


class BuildError(RuntimeError):
    """The extension could not be built or loaded; the message is one line."""


_module = None
_error: str | None = None


def _torch():
    import torch

    return torch


def is_rocm() -> bool:
    return bool(getattr(_torch().version, "hip", None))


def toolkit() -> str:
    """``cuda12.8``, ``rocm6.2.41133`` or ``cpu``: what this torch was built for."""
    v = _torch().version
    if getattr(v, "hip", None):
        return f"rocm{v.hip}"
    if getattr(v, "cuda", None):
        return f"cuda{v.cuda}"
    return "cpu"


def find_compiler() -> tuple[str | None, str]:
    """``(path, "")`` of the device compiler torch's extension build will use, or
    ``(None, why_not)``. Searched as torch searches: ``$CUDA_HOME``/``$CUDA_PATH``, ``nvcc`` on
    PATH, ``/usr/local/cuda`` (ROCm: ``$ROCM_HOME``/``$ROCM_PATH``, ``hipcc`` on PATH,
    ``/opt/rocm``)."""
    if is_rocm():
        name, homes, hint = "hipcc", ("ROCM_HOME", "ROCM_PATH"), "/opt/rocm"
    else:
        name, homes, hint = "nvcc", ("CUDA_HOME", "CUDA_PATH"), "/usr/local/cuda"
    for var in homes:
        home = os.environ.get(var)
        if home:
            path = Path(home) / "bin" / name
            if path.is_file() and os.access(path, os.X_OK):
                return str(path), ""
            return None, f"{name} not found in ${var}/bin ({home}/bin)"
    found = shutil.which(name)
    if found:
        return found, ""
    path = Path(hint) / "bin" / name
    if path.is_file() and os.access(path, os.X_OK):
        return str(path), ""
    return None, (
        f"{name} not found (put it on PATH or set {homes[0]}); this GPU build of torch needs it "
        "to build the kernels at first use"
    )


def _is_cuda_root(path: Path) -> bool:
    return (path / CUDA_HEADER).is_file() and (path / "bin" / "nvcc").is_file()


def _exec_targets(script: Path) -> list[Path]:
    """The absolute ``.../nvcc`` paths named in a wrapper shell script (``exec /x/bin/nvcc "$@"``);
    none if ``script`` does not start with ``#!``."""
    try:
        with script.open("rb") as f:
            head = f.read(65536)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    text = head.decode("utf-8", "replace")
    return [Path(p) for p in re.findall(r"""(/[^\s"';]*/nvcc)(?![\w.-])""", text)]


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.name))


def cuda_home() -> tuple[str | None, str]:
    """``(root, "")`` of the CUDA toolkit the build compiles against (the folder with
    ``bin/nvcc`` and ``include/cuda_runtime_api.h``), or ``(None, why_not)``.

    Tried in order, the first that holds both wins: ``$CUDA_HOME``/``$CUDA_PATH``; the folder
    above the ``bin/`` of :func:`find_compiler`'s ``nvcc``, as found and with symlinks followed;
    the ``nvcc`` a wrapper script execs; ``/usr/local/cuda``, then ``/usr/local/cuda-*``, newest
    version first.
    """
    tried: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            tried.append(Path(os.environ[var]))
    compiler, _ = find_compiler()
    if compiler:
        nvcc = Path(compiler)
        tried += [nvcc.parent.parent, nvcc.resolve().parent.parent]
        tried += [t.resolve().parent.parent for t in _exec_targets(nvcc.resolve())]
    for pattern in CUDA_GLOBS:
        tried += sorted(map(Path, glob.glob(pattern)), key=_version_key, reverse=True)
    for root in tried:
        if _is_cuda_root(root):
            return str(root), ""
    seen = ", ".join(dict.fromkeys(str(r) for r in tried)) or "none"
    return None, (
        f"no CUDA toolkit with {CUDA_HEADER} and bin/nvcc found (tried: {seen}); set CUDA_HOME "
        "to the toolkit root"
    )


def rocm_arch() -> str:
    """``$PYTORCH_ROCM_ARCH``, else the visible devices' gfx targets: each ``gcnArchName`` up to
    its first ``:`` (``gfx90a:sramecc+:xnack-`` is ``gfx90a``), once each in device order,
    joined with ``;``, as torch's ROCm build would pick them."""
    if os.environ.get("PYTORCH_ROCM_ARCH"):
        return os.environ["PYTORCH_ROCM_ARCH"]
    torch = _torch()
    archs: list[str] = []
    for index in range(torch.cuda.device_count()):
        name = getattr(torch.cuda.get_device_properties(index), "gcnArchName", "") or ""
        arch = name.split(":", 1)[0]
        if arch and arch not in archs:
            archs.append(arch)
    return ";".join(archs)


def build_environment() -> dict[str, str]:
    """The variables the build sets before torch reads them: ``CUDA_HOME`` (:func:`cuda_home`)
    on CUDA, ``PYTORCH_ROCM_ARCH`` (:func:`rocm_arch`) on ROCm where unset and a device
    reports its target."""
    if is_rocm():
        arch = rocm_arch()
        return {"PYTORCH_ROCM_ARCH": arch} if arch else {}
    home, _ = cuda_home()
    return {"CUDA_HOME": home} if home else {}


def _build_compiler() -> str | None:
    """The compiler the build runs: ``<cuda_home>/bin/nvcc`` on CUDA (what torch runs once
    ``CUDA_HOME`` is set), else :func:`find_compiler`'s; the same before and after
    :func:`build_environment` is applied, so the hash does not move."""
    if not is_rocm():
        home, _ = cuda_home()
        if home:
            return str(Path(home) / "bin" / "nvcc")
    return find_compiler()[0]


def source_hash() -> str:
    h = hashlib.sha256()
    for name in (*SOURCES, *HEADERS):
        h.update(name.encode())
        h.update((CSRC / name).read_bytes())
    arch = rocm_arch() if is_rocm() else os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    for part in (*CFLAGS, *CUDA_CFLAGS, *HIP_CFLAGS, str(_build_compiler()), arch):
        h.update(part.encode())
    return h.hexdigest()[:16]


def module_name() -> str:
    return f"dsbench_cuda_{source_hash()}"


def build_dir() -> Path:
    from dsbench.hardware import resolve_cache_dir

    torch_tag = re.sub(r"[^A-Za-z0-9.]+", "_", f"torch-{_torch().__version__}-{toolkit()}")
    return resolve_cache_dir() / "torch_extensions" / torch_tag / module_name()


def previous_failure() -> str | None:
    """This process's build error, or the marker an earlier failed build left (same sources)."""
    if _error:
        return _error
    if os.environ.get("DSBENCH_CUDA_REBUILD") == "1":
        return None
    try:
        marker = build_dir() / FAILED_MARKER
        return marker.read_text().strip() if marker.is_file() else None
    except OSError:
        return None


def toolchain_status(device: str = "cuda") -> tuple[bool, str]:
    """Whether the extension can be built and run for ``device`` (``cpu``/``cuda``) here.

    No GPU: unavailable (the kernels are still compile-checked by ``dsbench kernels
    --compile-check``). A GPU but no nvcc/hipcc, or on CUDA no toolkit root with the runtime
    headers (:func:`cuda_home`): unavailable, with the reason. A GPU and a compiler: available,
    unless a build with these sources already failed.
    """
    torch = _torch()
    if toolkit() == "cpu" or not torch.cuda.is_available():
        return False, NO_GPU
    if device == "cpu":
        return False, "runs on GPU tensors only (asked about device cpu)"
    compiler, why = find_compiler()
    if compiler is None:
        return False, why
    if not is_rocm():
        home, why = cuda_home()
        if home is None:
            return False, why
    failed = previous_failure()
    if failed:
        return False, failed
    return True, ""


def load(*, verbose: bool = False):
    """The built extension module (built on first call, then cached in memory and on disk).

    Raises :class:`BuildError` (one line) when there is no GPU, no compiler, or the build fails.
    """
    global _module
    if _module is not None:
        return _module
    ok, why = toolchain_status("cuda")
    if not ok:
        raise BuildError(f"dsbench cuda kernels unavailable: {why}")
    _module = _build(verbose=verbose)
    return _module


def _first_error(log: str) -> str:
    """The first line of a compiler log that names an error, trimmed to one line."""
    for line in log.splitlines():
        if re.search(r"\berror\b", line, re.IGNORECASE) and "Error building extension" not in line:
            return line.strip()[:300]
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return (lines[0] if lines else "unknown error")[:300]


@contextlib.contextmanager
def _build_lock(out: Path) -> Iterator[None]:
    """Exclusive ``flock`` on ``out/dsbench.lock`` (released when the process dies)."""
    with (out / LOCK_FILE).open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_sources(src: Path) -> None:
    """Copy the sources into ``src``, rewriting only files that differ (kept mtimes: ninja
    rebuilds nothing needlessly)."""
    src.mkdir(parents=True, exist_ok=True)
    for name in (*SOURCES, *HEADERS):
        target = src / name
        data = (CSRC / name).read_bytes()
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)


def _build(*, verbose: bool = False):
    global _error
    from torch.utils import cpp_extension

    env = build_environment()
    os.environ.update(env)
    if "CUDA_HOME" in env:  # torch read it once, at import
        cpp_extension.CUDA_HOME = env["CUDA_HOME"]
    out = build_dir()
    src = out / "src"
    out.mkdir(parents=True, exist_ok=True)
    with _build_lock(out):
        (out / FAILED_MARKER).unlink(missing_ok=True)
        _write_sources(src)
        try:
            return cpp_extension.load(
                name=module_name(),
                sources=[str(src / name) for name in SOURCES],
                extra_include_paths=[str(src)],
                extra_cflags=list(CFLAGS),
                extra_cuda_cflags=list(HIP_CFLAGS if is_rocm() else CUDA_CFLAGS),
                build_directory=str(out),
                verbose=verbose,
            )
        except Exception as exc:  # compiler, linker or import failure: one line, full log on disk
            log = str(exc)
            (out / LOG_FILE).write_text(log, encoding="utf-8")
            _error = (
                f"building the dsbench cuda extension failed: {_first_error(log)} "
                f"(full log: {out / LOG_FILE}; retry with DSBENCH_CUDA_REBUILD=1)"
            )
            (out / FAILED_MARKER).write_text(_error + "\n", encoding="utf-8")
            raise BuildError(_error) from None
