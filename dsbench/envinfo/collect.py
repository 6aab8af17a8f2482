"""Collecting the environment: read-only probes (torch, /proc, /sys, git, nvidia-smi, rocm-smi,
compilers, hardware profile, kernel registry) and :func:`collect_env`, which assembles them.

Everything here is read-only and must never fail: a probe that cannot answer (tool missing,
timed out, old torch, no git) records ``None`` or a note saying why. GPU telemetry comes from
``nvidia-smi`` / ``rocm-smi`` queries that only read; no clock, power or mode is ever changed.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from dsbench.envinfo import parse
from dsbench.errors import UsageError, choices_message
from dsbench.records import fingerprint

TOOL_TIMEOUT_S = 5.0
"""Timeout for every external tool (git, nvidia-smi, rocm-smi, nvcc, hipcc)."""


ENV_VAR_PREFIXES = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "MKL_NUM_THREADS",
    "NCCL_",
    "RCCL_",
    "DSBENCH_",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_HIP_ALLOC_CONF",
    "CUBLAS_WORKSPACE_CONFIG",
    "TORCH_BLAS_PREFER_HIPBLASLT",
    "TRITON_",
    "HSA_",
    "NVIDIA_TF32_OVERRIDE",
)
"""Environment variables that change what a benchmark measures (device visibility, threads,
kernel overrides, collective tuning); recorded so a surprising number can be explained."""

_SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL")


# ---------------------------------------------------------------------------------------------
# small helpers


def _tool(name: str, *fallback_dirs: str | None) -> str | None:
    """Path of executable ``name`` on PATH or in one of ``fallback_dirs`` (e.g. /opt/rocm/bin)."""
    found = shutil.which(name)
    if found:
        return found
    for d in fallback_dirs:
        candidate = os.path.join(d, name) if d else ""
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _run(cmd: list[str], cwd: str | os.PathLike | None = None) -> tuple[str | None, str]:
    """Run ``cmd`` read-only with a short timeout: ``(stdout, "")`` or ``(None, why_not)``."""
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0", LC_ALL="C")  # git status takes no index lock
    try:
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        return None, f"{os.path.basename(cmd[0])} not found"
    except subprocess.TimeoutExpired:
        return None, f"{os.path.basename(cmd[0])} timed out after {TOOL_TIMEOUT_S:g} s"
    except OSError as exc:
        return None, f"{os.path.basename(cmd[0])} could not run: {exc}"
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).strip().splitlines()
        why = f": {first[0]}" if first else ""
        return None, f"{os.path.basename(cmd[0])} failed (exit {proc.returncode}){why}"
    return proc.stdout, ""


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def _dist_version(*names: str) -> str | None:
    """Installed version of the first distribution in ``names`` that is present."""
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


# ---------------------------------------------------------------------------------------------
# probes


SOURCE_ROOT = Path(__file__).resolve().parents[2]
"""The folder dsbench runs from (a checkout's top, or site-packages)."""


def git_commit(path: str | os.PathLike | None = None) -> tuple[str | None, bool | None]:
    """``(sha, dirty)`` of the git checkout that holds ``path`` (default: the dsbench package).

    ``(None, None)`` when git is missing, the path is not in a work tree, or the path is ignored
    by that work tree (a wheel installed into a venv that lives inside some other checkout).
    ``dirty`` counts changes to tracked files only: result files written into an untracked
    folder must not make the next run look like different code.
    """
    if path is None:
        path = SOURCE_ROOT / "dsbench"
    path = Path(path)
    if not path.is_dir():
        path = path.parent
    if not path.is_dir():
        return None, None
    top, _ = _run(["git", "rev-parse", "--show-toplevel"], cwd=path)
    if top is None:
        return None, None
    ignored, _ = _run(["git", "check-ignore", "-q", str(path.resolve())], cwd=path)
    if ignored is not None:  # exit 0: the path is ignored, so this is not its source checkout
        return None, None
    sha, _ = _run(["git", "rev-parse", "HEAD"], cwd=path)
    if not sha:
        return None, None
    status, _ = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=path)
    return sha.strip(), None if status is None else bool(status.strip())


def _resolve_device(device: str | None, torch) -> str:
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    kind = device.split(":", 1)[0].lower()
    if kind not in ("cpu", "cuda"):
        raise UsageError(choices_message("device", device, ("cpu", "cuda")))
    if kind == "cuda" and not torch.cuda.is_available():
        build = (
            f"ROCm {torch.version.hip}"
            if torch.version.hip
            else f"CUDA {torch.version.cuda}"
            if torch.version.cuda
            else "CPU only"
        )
        raise UsageError(
            f"device 'cuda' requested but no GPU is usable (torch {torch.__version__}, "
            f"{build}; check CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES and the driver)"
        )
    return kind


def _packages(torch) -> dict[str, str | None]:
    triton = _dist_version("triton", "pytorch-triton-rocm", "pytorch-triton")
    if triton is None:  # ROCm/nightly wheels use other names; ask the module itself
        try:
            import triton as _triton

            triton = getattr(_triton, "__version__", None)
        except Exception:
            triton = None
    return {
        "torch": torch.__version__,  # the torch actually imported, not whatever metadata says
        "triton": triton,
        "numpy": _dist_version("numpy"),
        "deepspeed": _dist_version("deepspeed"),  # never imported: it is slow and optional
        "pandas": _dist_version("pandas"),
        "scipy": _dist_version("scipy"),
    }


def _runtime(torch, gpu: bool) -> dict:
    nccl = None
    try:
        import torch.distributed as dist

        if gpu or dist.is_nccl_available():
            nccl = parse.parse_nccl_version(torch.cuda.nccl.version())
    except Exception:
        nccl = None
    try:
        cudnn = torch.backends.cudnn.version()  # MIOpen's version on ROCm
    except Exception:
        cudnn = None
    return {
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "nccl": nccl,
        "cudnn": cudnn,
        "torch_git": getattr(torch.version, "git_version", None),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def _gpu_devices(torch) -> list[dict]:
    devices = []
    for i in range(torch.cuda.device_count()):
        try:
            p = torch.cuda.get_device_properties(i)
        except Exception as exc:
            devices.append({"index": i, "name": None, "error": str(exc)})
            continue
        if torch.version.hip:  # "gfx90a:sramecc+:xnack-" -> "gfx90a"
            arch = (getattr(p, "gcnArchName", "") or "").split(":")[0] or None
        else:
            arch = f"sm_{p.major}{p.minor}"
        devices.append(
            {
                "index": i,
                "name": p.name or arch,
                "total_memory_bytes": int(p.total_memory),
                "arch": arch,
                "multi_processor_count": getattr(p, "multi_processor_count", None),
                "l2_cache_bytes": getattr(p, "L2_cache_size", None),
            }
        )
    return devices


def _l2_bytes() -> int | None:
    """cpu0's level-2 data or unified cache (sysfs), None where not reported."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        level, kind = (_read(str(index / name)) or "" for name in ("level", "type"))
        if level.strip() == "2" and kind.strip() != "Instruction":
            return parse._size_bytes(_read(str(index / "size")) or "")
    return None


def _cpu(torch) -> dict:
    model, flags = parse.parse_cpuinfo(_read("/proc/cpuinfo") or "")
    caches = [
        parse._size_bytes(_read(str(p)) or "")
        for p in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size")
    ]
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    quota = None  # cgroup v2 CPU limit of a container, e.g. "400000 100000" -> 4.0
    cpu_max = (_read("/sys/fs/cgroup/cpu.max") or "").split()
    if len(cpu_max) == 2 and cpu_max[0] != "max":
        quota = int(cpu_max[0]) / int(cpu_max[1])
    return {
        "model": model or platform.processor() or platform.machine() or None,
        "logical_cpus": os.cpu_count(),
        "affinity_cpus": affinity,
        "cgroup_cpu_quota": quota,
        "torch_threads": torch.get_num_threads(),
        "l2_bytes": _l2_bytes(),
        "llc_bytes": max((c for c in caches if c), default=None),
        "flags": flags,
    }


def _memory_bytes() -> int | None:
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", _read("/proc/meminfo") or "", re.MULTILINE)
    if m:
        return int(m.group(1)) * 1024
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _telemetry(backend: str) -> tuple[list[dict], str | None]:
    """Per-GPU clocks, power limit, temperature and driver; read-only queries only."""
    if backend == "cpu":
        return [], "no GPU in use (backend cpu)"
    if backend == "rocm":
        rocm = os.environ.get("ROCM_PATH", "/opt/rocm")
        name, tool = "rocm-smi", _tool("rocm-smi", f"{rocm}/bin")
        args, parse_rows = parse.ROCM_SMI_ARGS, parse.parse_rocm_smi
    else:
        name, tool = "nvidia-smi", _tool("nvidia-smi")
        args, parse_rows = parse.NVIDIA_SMI_ARGS, parse.parse_nvidia_smi
    if tool is None:
        return [], f"{name} not found"
    out, why = _run([tool, *args])
    if out is None:
        return [], why
    rows = parse_rows(out)
    return rows, None if rows else f"{name} output not understood"


def _compiler(name: str, parse_version, *dirs: str | None) -> dict | None:
    path = _tool(name, *dirs)
    if path is None:
        return None
    out, why = _run([path, "--version"])
    return {
        "path": path,
        "version": parse_version(out) if out else None,
        **({"note": why} if why else {}),
    }


def _driver_fallback(backend: str) -> str | None:
    if backend == "cuda":
        return parse.parse_driver_file(_read("/proc/driver/nvidia/version") or "")
    if backend == "rocm":
        return parse.parse_driver_file(_read("/sys/module/amdgpu/version") or "")
    return None


def _profile(backend: str, device: dict) -> dict:
    """Match the first device against the hardware profiles; ``$DSBENCH_PROFILE`` overrides."""
    try:
        from dsbench.hardware import detect

        d = detect(
            {
                "backend": backend,
                "name": device.get("name"),
                "total_memory_bytes": device.get("total_memory_bytes"),
                "arch": device.get("arch"),
                "compute_units": device.get("multi_processor_count"),
            },
            override=os.environ.get("DSBENCH_PROFILE") or None,
        )
        return {
            "name": d.profile.name,
            "title": d.profile.title,
            "matched_by": d.matched_by,
            "message": d.message,
        }
    except Exception as exc:  # the report must work while profiles are missing or broken
        return {
            "name": None,
            "title": None,
            "matched_by": None,
            "message": f"hardware profiles unavailable: {exc}",
        }


def _caches(backend: str, profile_name: str | None, device: dict) -> dict:
    """The device's caches (``dsbench.measure.timing.device_cache_levels``): each level, and the
    last level the suites size their memory-bound cases by (``dsbench.hardware.caches``)."""
    from dsbench.hardware import get_profile
    from dsbench.hardware.caches import last_level
    from dsbench.measure.timing import device_cache_levels

    try:
        profile = get_profile(profile_name) if profile_name else None
    except Exception:  # the report must work while profiles are missing or broken
        profile = None
    levels = device_cache_levels(backend != "cpu", profile, device.get("l2_cache_bytes"))
    llc = last_level(levels)
    return {
        "levels": [c.to_dict() for c in levels],
        "last_level": llc.name if llc else None,
        "last_level_bytes": llc.bytes if llc else None,
    }


def _kernels(backend: str) -> list[dict]:
    try:
        from dsbench.kernels import registry

        return registry.table("cpu" if backend == "cpu" else "cuda")
    except Exception as exc:
        return [
            {
                "op": "?",
                "impl": "?",
                "available": False,
                "reason": f"registry failed: {exc}",
                "description": "",
            }
        ]


def _env_vars() -> dict[str, str]:
    return {
        k: v
        for k, v in sorted(os.environ.items())
        if k.startswith(ENV_VAR_PREFIXES) and not any(w in k.upper() for w in _SECRET_WORDS)
    }


def _os_name() -> str:
    try:
        release = platform.freedesktop_os_release()
        return release.get("PRETTY_NAME") or release.get("NAME") or platform.platform()
    except OSError:
        return platform.platform()


# ---------------------------------------------------------------------------------------------
# public API


def collect_env(device: str | None = None, *, telemetry: bool = True) -> dict:
    """Everything needed to explain a number, as a JSON-serialisable dict.

    ``device``: ``"cpu"`` or ``"cuda"`` (``"cuda"`` also means ROCm builds); ``None`` picks cuda
    when a GPU is usable. ``telemetry=False`` skips the nvidia-smi/rocm-smi query.
    Raises :class:`UsageError` for an unknown device or a GPU that is not there.
    """
    import torch

    kind = _resolve_device(device, torch)
    backend = "cpu" if kind == "cpu" else ("rocm" if torch.version.hip else "cuda")
    rocm = os.environ.get("ROCM_PATH", "/opt/rocm")
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"

    with ThreadPoolExecutor(max_workers=3) as pool:  # the slow external tools, side by side
        tele_f = pool.submit(_telemetry, backend) if telemetry else None
        nvcc_f = pool.submit(_compiler, "nvcc", parse.parse_nvcc_version, f"{cuda_home}/bin")
        hipcc_f = pool.submit(_compiler, "hipcc", parse.parse_hipcc_version, f"{rocm}/bin")
        sha, dirty = git_commit()
        cpu = _cpu(torch)
        memory = _memory_bytes()
        if backend == "cpu":
            devices = [
                {
                    "index": 0,
                    "name": cpu["model"],
                    "total_memory_bytes": memory,
                    "arch": platform.machine(),
                    "multi_processor_count": None,
                    "l2_cache_bytes": None,
                }
            ]
        else:
            devices = _gpu_devices(torch)
        gpu_telemetry, note = tele_f.result() if tele_f else ([], "telemetry disabled")
        compilers = {"nvcc": nvcc_f.result(), "hipcc": hipcc_f.result()}

    from dsbench import __version__

    driver = None
    if backend != "cpu":
        driver = next(
            (g["driver_version"] for g in gpu_telemetry if g.get("driver_version")), None
        ) or _driver_fallback(backend)
    env = {
        "dsbench": {"version": __version__, "commit": sha, "dirty": dirty},
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "platform": {
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "hostname": socket.gethostname(),
            "os": _os_name(),
        },
        "packages": _packages(torch),
        "backend": backend,
        "runtime": _runtime(torch, backend != "cpu"),
        "devices": devices,
        "device_count": len(devices),
        "gpu_telemetry": gpu_telemetry,
        "driver": driver,
        "cpu": cpu,
        "memory": {"total_bytes": memory},
        "hardware": None,  # filled in below, from the fields above
        "compilers": compilers,
        "profile": _profile(backend, devices[0] if devices else {}),
        "kernels": _kernels(backend),
        "env_vars": _env_vars(),
        "collected_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    env["caches"] = _caches(backend, env["profile"].get("name"), devices[0] if devices else {})
    env["hardware"] = fingerprint.from_env(env).to_json()
    if note:
        env["telemetry_note"] = note
    return env
