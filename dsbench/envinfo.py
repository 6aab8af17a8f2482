"""The environment a number was measured in: versions, devices, clocks, compilers, profile, kernels.

:func:`collect_env` goes into every result file; :func:`summary_fields` flattens it into the
string fields that ``compare`` selects on (``--baseline python=3.11``) and checks for
confounders; :func:`format_env` is the text ``dsbench env`` prints (the benchmark-minded cousin of
DeepSpeed's ``ds_report``).

Everything here is read-only and must never fail: a probe that cannot answer (tool missing,
timed out, old torch, no git) records ``None`` or a note saying why. GPU telemetry comes from
``nvidia-smi`` / ``rocm-smi`` queries that only read; no clock, power or mode is ever changed.
"""

from __future__ import annotations

import json
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

from dsbench.errors import UsageError, choices_message
from dsbench.records import dig, summary_fields  # noqa: F401  (summary_fields: re-exported)

TOOL_TIMEOUT_S = 5.0
"""Timeout for every external tool (git, nvidia-smi, rocm-smi, nvcc, hipcc)."""

NVIDIA_SMI_FIELDS = (
    "index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,"
    "power.limit,temperature.gpu"
)
NVIDIA_SMI_ARGS = (f"--query-gpu={NVIDIA_SMI_FIELDS}", "--format=csv,noheader,nounits")
ROCM_SMI_ARGS = (
    "--showproductname",
    "--showdriverversion",
    "--showclocks",
    "--showpower",
    "--showtemp",
    "--showmaxpower",
    "--json",
)

CPU_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "amx_bf16",
    "amx_fp16",
    "amx_tile",
    "asimd",
    "sve",
    "bf16",
)
"""The CPU features that decide which CPU kernels (oneDNN, AMX, SVE) torch can use."""

ENV_VAR_PREFIXES = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
    "OMP_NUM_THREADS",
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


def _size_bytes(text: str) -> int | None:
    """``"32768K"`` -> 33554432; ``"2M"``, ``"1024"`` (bytes) also accepted."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        return None
    return int(m.group(1)) * 1024 ** " KMG".index(m.group(2).upper() or " ")


def _missing(value: str | None) -> bool:
    """nvidia-smi/rocm-smi spell 'no value' as ``[N/A]``, ``N/A``, ``[Not Supported]``, ..."""
    v = (value or "").strip()
    return not v or v.upper() in ("N/A", "NA", "NONE") or (v.startswith("[") and v.endswith("]"))


def _number(value: str | None, kind: type = float) -> int | float | None:
    if _missing(value):
        return None
    m = re.search(r"-?\d+(?:\.\d+)?", value)
    if not m:
        return None
    return kind(float(m.group()))


# ---------------------------------------------------------------------------------------------
# pure parsers (unit-tested on captured tool output)


def parse_nvidia_smi(text: str) -> list[dict]:
    """Rows of ``nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits``.

    Values such as ``[N/A]`` or ``[Not Supported]`` become ``None``. A GPU name holding a comma
    (none known, but the format allows it) is re-joined.
    """
    n_fields = NVIDIA_SMI_FIELDS.count(",") + 1
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < n_fields:
            continue
        extra = len(parts) - n_fields
        name = ", ".join(parts[1 : 2 + extra])
        idx, driver, sm, mem, max_sm, max_mem, power, temp = [parts[0], *parts[2 + extra :]]
        if _number(idx, int) is None:
            continue
        rows.append(
            {
                "index": _number(idx, int),
                "name": None if _missing(name) else name,
                "driver_version": None if _missing(driver) else driver,
                "clocks_sm_mhz": _number(sm, int),
                "clocks_mem_mhz": _number(mem, int),
                "clocks_max_sm_mhz": _number(max_sm, int),
                "clocks_max_mem_mhz": _number(max_mem, int),
                "power_limit_w": _number(power, float),
                "temperature_c": _number(temp, int),
                "source": "nvidia-smi",
            }
        )
    return rows


def _mhz(card: dict[str, str], clock: str) -> int | None:
    """``"sclk clock speed:": "(1700Mhz)"`` or ``"sclk clock level:": "1 (1700Mhz)"`` -> 1700."""
    for key, value in card.items():
        if key.startswith(clock) and (m := re.search(r"(\d+(?:\.\d+)?)\s*mhz", value, re.I)):
            return int(float(m.group(1)))
    return None


def parse_rocm_smi(text: str) -> list[dict]:
    """Cards from ``rocm-smi <ROCM_SMI_ARGS>`` JSON (key spellings vary across ROCm releases).

    rocm-smi may print warnings before the JSON; they are skipped. It reports no maximum clocks
    with these flags, so ``clocks_max_*`` stay ``None``.
    """
    start = text.find("{")
    if start < 0:
        return []
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return []
    system = {k.strip().rstrip(":").lower(): str(v) for k, v in data.get("system", {}).items()}
    rows = []
    for card_key, raw in data.items():
        m = re.fullmatch(r"card(\d+)", card_key)
        if not m or not isinstance(raw, dict):
            continue
        card = {k.strip().rstrip(":").strip().lower(): str(v) for k, v in raw.items()}

        def first(*keys: str, card=card) -> str | None:
            for key in keys:
                if not _missing(card.get(key)):
                    return card[key].strip()
            return None

        temps = [
            card.get(k)
            for k in ("temperature (sensor edge) (c)", "temperature (sensor junction) (c)")
        ]
        temps += [v for k, v in card.items() if k.startswith("temperature")]
        temperature = next((t for t in map(_number, temps) if t is not None), None)
        driver = first("driver version") or system.get("driver version")
        rows.append(
            {
                "index": int(m.group(1)),
                "name": first("card series", "card model", "card sku", "device name"),
                "driver_version": None if _missing(driver) else driver,
                "clocks_sm_mhz": _mhz(card, "sclk"),
                "clocks_mem_mhz": _mhz(card, "mclk"),
                "clocks_max_sm_mhz": None,
                "clocks_max_mem_mhz": None,
                "power_limit_w": _number(first("max graphics package power (w)")),
                "temperature_c": None if temperature is None else int(temperature),
                "source": "rocm-smi",
            }
        )
    return sorted(rows, key=lambda r: r["index"])


def parse_nvcc_version(text: str) -> str | None:
    """``"Cuda compilation tools, release 13.0, V13.0.88"`` -> ``"13.0"``."""
    m = re.search(r"release\s+(\d+(?:\.\d+)*)", text)
    return m.group(1) if m else None


def parse_hipcc_version(text: str) -> str | None:
    """``"HIP version: 6.2.41133-dd7f95766"`` -> ``"6.2.41133-dd7f95766"``."""
    m = re.search(r"HIP version:\s*(\S+)", text)
    return m.group(1) if m else None


def parse_nccl_version(version: tuple | list | int | None) -> str | None:
    """torch.cuda.nccl.version(): a tuple ``(2, 21, 5)`` in recent torch, an int before.

    The int is ``major*10000 + minor*100 + patch`` from NCCL 2.9 on, ``major*1000 + minor*100 +
    patch`` before (NCCL's own ``NCCL_VERSION_CODE``).
    """
    if version is None:
        return None
    if isinstance(version, tuple | list):
        return ".".join(str(int(v)) for v in version)
    code = int(version)
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


ARM_CPU_PARTS = {
    "0xd0c": "Neoverse-N1",
    "0xd40": "Neoverse-V1",
    "0xd49": "Neoverse-N2",
    "0xd4f": "Neoverse-V2",
    "0xd84": "Neoverse-V3",
    "0xd8e": "Neoverse-N3",
}
"""Arm Ltd. (implementer 0x41) server cores: Arm /proc/cpuinfo has no model name, only a part
number (as in util-linux ``lscpu``). Grace is Neoverse-V2."""


def parse_cpuinfo(text: str) -> tuple[str | None, list[str]]:
    """(model, relevant flags) from /proc/cpuinfo (x86 ``flags`` or Arm ``Features``)."""
    model, flags, implementer, part = None, set(), None, None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if not sep or not value:
            continue
        if key in ("model name", "cpu model", "model", "hardware") and not model:
            if key != "model" or not value.isdigit():  # x86 'model' is a number
                model = value
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
        elif key == "cpu implementer":
            implementer = implementer or value.lower()
        elif key == "cpu part":
            part = part or value.lower()
    if model is None and implementer == "0x41" and part in ARM_CPU_PARTS:
        model = f"ARM {ARM_CPU_PARTS[part]}"
    return model, [f for f in CPU_FLAGS if f in flags]


def parse_driver_file(text: str) -> str | None:
    """``/proc/driver/nvidia/version`` ('... Kernel Module  550.54.15 ...') or amdgpu's version."""
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    if m:
        return m.group(1)
    text = text.strip()
    return text if re.fullmatch(r"\d+(?:\.\d+)+\S*", text) else None


# ---------------------------------------------------------------------------------------------
# probes


def git_commit(path: str | os.PathLike | None = None) -> tuple[str | None, bool | None]:
    """``(sha, dirty)`` of the git checkout that holds ``path`` (default: the dsbench package).

    ``(None, None)`` when git is missing, the path is not in a work tree, or the path is ignored
    by that work tree (a wheel installed into a venv that lives inside some other checkout).
    ``dirty`` counts changes to tracked files only: result files written into an untracked
    folder must not make the next run look like different code.
    """
    if path is None:
        path = Path(__file__).resolve().parent
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
            nccl = parse_nccl_version(torch.cuda.nccl.version())
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


def _cpu(torch) -> dict:
    model, flags = parse_cpuinfo(_read("/proc/cpuinfo") or "")
    caches = [
        _size_bytes(_read(str(p)) or "")
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
        tool, args, parse = _tool("rocm-smi", f"{rocm}/bin"), ROCM_SMI_ARGS, parse_rocm_smi
        name = "rocm-smi"
    else:
        tool, args, parse, name = (
            _tool("nvidia-smi"),
            NVIDIA_SMI_ARGS,
            parse_nvidia_smi,
            "nvidia-smi",
        )
    if tool is None:
        return [], f"{name} not found"
    out, why = _run([tool, *args])
    if out is None:
        return [], why
    rows = parse(out)
    return rows, None if rows else f"{name} output not understood"


def _compiler(name: str, parse, *dirs: str | None) -> dict | None:
    path = _tool(name, *dirs)
    if path is None:
        return None
    out, why = _run([path, "--version"])
    return {"path": path, "version": parse(out) if out else None, **({"note": why} if why else {})}


def _driver_fallback(backend: str) -> str | None:
    if backend == "cuda":
        return parse_driver_file(_read("/proc/driver/nvidia/version") or "")
    if backend == "rocm":
        return parse_driver_file(_read("/sys/module/amdgpu/version") or "")
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
        nvcc_f = pool.submit(_compiler, "nvcc", parse_nvcc_version, f"{cuda_home}/bin")
        hipcc_f = pool.submit(_compiler, "hipcc", parse_hipcc_version, f"{rocm}/bin")
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
        "compilers": compilers,
        "profile": _profile(backend, devices[0] if devices else {}),
        "kernels": _kernels(backend),
        "env_vars": _env_vars(),
        "collected_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if note:
        env["telemetry_note"] = note
    return env


# ---------------------------------------------------------------------------------------------
# text report


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


def _line(key: str, value, width: int = 24) -> str:
    return f"  {key} {'.' * max(2, width - len(key))} {'-' if value in (None, '') else value}"


def _section(title: str) -> list[str]:
    return ["", title, "-" * len(title)]


def format_env(env: dict) -> str:
    """The ``dsbench env`` report: ds_report-style sections, tables for telemetry and kernels."""
    from tabulate import tabulate

    pkgs, rt, cpu = env.get("packages", {}), env.get("runtime", {}), env.get("cpu", {})
    ds, py = env.get("dsbench", {}), env.get("python", {})
    commit = ds.get("commit")
    rev = f" (git {commit[:12]}{', dirty' if ds.get('dirty') else ''})" if commit else ""
    lines = ["dsbench environment report", "=" * 26, f"collected {env.get('collected_at')}"]

    lines += _section("Versions")
    lines.append(_line("dsbench", f"{ds.get('version')}{rev}"))
    lines.append(
        _line("python", f"{py.get('version')} ({py.get('implementation')}) {py.get('executable')}")
    )
    for name in ("torch", "triton", "numpy", "deepspeed", "pandas", "scipy"):
        lines.append(_line(name, pkgs.get(name) or "not installed"))
    plat = env.get("platform", {})
    lines.append(
        _line("os", f"{plat.get('os')} (kernel {plat.get('release')}, {plat.get('machine')})")
    )
    lines.append(_line("host", plat.get("hostname")))

    lines += _section("Backend & devices")
    lines.append(_line("backend", env.get("backend")))
    labels = {
        "nccl": "nccl/rccl",
        "cudnn": "cudnn/miopen",
        "torch_git": "torch git",
        "float32_matmul_precision": "fp32 matmul precision",
    }
    for key in ("cuda", "hip", "nccl", "cudnn", "torch_git", "float32_matmul_precision"):
        label = labels.get(key, key)
        lines.append(_line(label, rt.get(key)))
    lines.append(_line("driver", env.get("driver")))
    lines.append(_line("devices", env.get("device_count")))
    for d in env.get("devices", []):
        extra = [f"{d['multi_processor_count']} SMs/CUs"] if d.get("multi_processor_count") else []
        if d.get("l2_cache_bytes"):
            extra.append(f"L2 {d['l2_cache_bytes'] / 2**20:.0f} MiB")
        details = ", ".join([_gib(d.get("total_memory_bytes")), str(d.get("arch")), *extra])
        lines.append(f"  [{d.get('index')}] {d.get('name')} ({details})")

    lines += _section("GPU telemetry")
    telemetry = env.get("gpu_telemetry") or []
    if telemetry:
        lines.append(f"  source: {telemetry[0].get('source')} (read-only query)")
        rows = [
            [
                t.get("index"),
                t.get("name"),
                t.get("clocks_sm_mhz"),
                t.get("clocks_max_sm_mhz"),
                t.get("clocks_mem_mhz"),
                t.get("clocks_max_mem_mhz"),
                t.get("power_limit_w"),
                t.get("temperature_c"),
            ]
            for t in telemetry
        ]
        headers = [
            "gpu",
            "name",
            "sm MHz",
            "max sm",
            "mem MHz",
            "max mem",
            "power limit W",
            "temp C",
        ]
        table = tabulate(rows, headers=headers, missingval="-", tablefmt="simple")
        lines += ["  " + row for row in table.splitlines()]
    else:
        lines.append(f"  none: {env.get('telemetry_note', 'not collected')}")

    lines += _section("CPU")
    lines.append(_line("model", cpu.get("model")))
    lines.append(_line("logical cpus", cpu.get("logical_cpus")))
    lines.append(_line("affinity cpus", cpu.get("affinity_cpus")))
    if cpu.get("cgroup_cpu_quota") is not None:
        lines.append(_line("cgroup cpu quota", cpu.get("cgroup_cpu_quota")))
    lines.append(_line("torch threads", cpu.get("torch_threads")))
    llc = cpu.get("llc_bytes")
    lines.append(_line("largest cache", None if llc is None else f"{llc / 2**20:g} MiB"))
    lines.append(_line("memory", _gib(env.get("memory", {}).get("total_bytes"))))
    lines.append(_line("flags", " ".join(cpu.get("flags") or []) or "(none of interest)"))

    lines += _section("Compilers")
    for name, info in (env.get("compilers") or {}).items():
        if not info:
            lines.append(_line(name, "not found"))
        else:
            note = f" [{info['note']}]" if info.get("note") else ""
            lines.append(_line(name, f"{info.get('version') or '?'} ({info.get('path')}){note}"))

    lines += _section("Hardware profile")
    prof = env.get("profile") or {}
    if prof.get("name"):
        title = f" - {prof['title']}" if prof.get("title") else ""
        lines.append(_line("profile", f"{prof['name']}{title}"))
        lines.append(_line("matched by", prof.get("matched_by")))
        if prof.get("message"):
            lines.append(f"  {prof['message']}")
    else:
        lines.append(_line("profile", "none"))
        lines.append(f"  {prof.get('message') or 'no profile matches this device'}")

    vars_ = env.get("env_vars") or {}
    if vars_:
        lines += _section("Environment variables")
        lines += [f"  {k}={v}" for k, v in vars_.items()]

    device = "cpu" if env.get("backend") == "cpu" else "cuda"
    lines += _section(f"Kernel implementations (device {device})")
    rows = [
        [k.get("op"), k.get("impl"), "yes" if k.get("available") else "no", k.get("reason") or ""]
        for k in env.get("kernels") or []
    ]
    table = tabulate(rows, headers=["op", "impl", "can run", "reason"], tablefmt="simple")
    lines += ["  " + row for row in table.splitlines()]
    return "\n".join(lines) + "\n"
