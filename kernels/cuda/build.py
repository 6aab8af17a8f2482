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

A failed build raises :class:`BuildError` with one line (the first compiler error and the path
of the full log) and leaves a marker in the build folder, so the implementation reports itself
unavailable in this and later processes until the sources change or ``DSBENCH_CUDA_REBUILD=1``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

CSRC = Path(__file__).resolve().parent.parent / "csrc"
SOURCES = ("bindings.cpp", "adamw.cu", "gemm.cu", "reduce.cu")
HEADERS = ("dsbench_portability.h", "dsbench_kernels.h", "dsbench_cpu_emulation.h")
CFLAGS = ("-O3",)
CUDA_CFLAGS = ("-O3", "-lineinfo")
HIP_CFLAGS = ("-O3",)
FAILED_MARKER = "BUILD_FAILED.txt"
LOG_FILE = "build.log"

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


def source_hash() -> str:
    h = hashlib.sha256()
    for name in (*SOURCES, *HEADERS):
        h.update(name.encode())
        h.update((CSRC / name).read_bytes())
    compiler, _ = find_compiler()
    arch = os.environ.get("PYTORCH_ROCM_ARCH" if is_rocm() else "TORCH_CUDA_ARCH_LIST", "")
    for part in (*CFLAGS, *CUDA_CFLAGS, *HIP_CFLAGS, str(compiler), arch):
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
    --compile-check``). A GPU but no nvcc/hipcc: unavailable, with the reason. A GPU and a
    compiler: available, unless a build with these sources already failed.
    """
    torch = _torch()
    if toolkit() == "cpu" or not torch.cuda.is_available():
        return False, NO_GPU
    if device == "cpu":
        return False, "runs on GPU tensors only (asked about device cpu)"
    compiler, why = find_compiler()
    if compiler is None:
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


def _build(*, verbose: bool = False):
    global _error
    from torch.utils import cpp_extension

    out = build_dir()
    src = out / "src"
    src.mkdir(parents=True, exist_ok=True)
    (out / FAILED_MARKER).unlink(missing_ok=True)
    for name in (*SOURCES, *HEADERS):
        target = src / name
        data = (CSRC / name).read_bytes()
        if not target.is_file() or target.read_bytes() != data:  # keep mtimes: no needless rebuild
            target.write_bytes(data)
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
        (out / LOG_FILE).write_text(log)
        _error = (
            f"building the dsbench cuda extension failed: {_first_error(log)} "
            f"(full log: {out / LOG_FILE}; retry with DSBENCH_CUDA_REBUILD=1)"
        )
        (out / FAILED_MARKER).write_text(_error + "\n")
        raise BuildError(_error) from None
