"""Compile every kernel source for every target without a GPU, and report registers and spills.

Targets: nvcc for sm_80 (A100) and sm_90 (H100/H200) with ``-Xptxas -v``; hipcc for gfx90a
(MI250X) with ``-Rpass-analysis=kernel-resource-usage`` and ``HIP_PLATFORM=amd`` (nvcc may be
installed too); and gfx90a again on the sources as torch's hipify rewrites them, which is what a
ROCm build of torch compiles. Each ``.cu`` in ``kernels/csrc`` is compiled on its own to an object
file (``-c``) in a temporary folder, with the half/bfloat16 macros torch's extension builds use,
so a source that leans on implicit conversions fails here as it would there.

Rows: one per (target, file, kernel) when a file compiles, one per (target, file) with ``ok``
False and the first compiler errors when it does not (or when the compiler is missing).
``registers``: ptxas "Used N registers" (NVIDIA) or arch VGPRs (AMD). ``spills``: bytes of spill
stores + loads (NVIDIA) or spilled VGPRs + SGPRs (AMD; SGPRs spill to VGPR lanes, VGPRs to
scratch memory, both in ``detail``).

``dsbench kernels --compile-check`` prints the table; the test suite runs the same check.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

CSRC = Path(__file__).resolve().parent.parent / "csrc"
INSTALL_HIP = "kernels/csrc/install_hip.sh"
COMPILE_TIMEOUT_S = 600

# What torch.utils.cpp_extension passes: no implicit half/bfloat16 conversions or operators.
NVCC_DEFINES = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
)
HIP_DEFINES = ("-D__HIP_NO_HALF_OPERATORS__=1", "-D__HIP_NO_HALF_CONVERSIONS__=1")
HIPIFIED_DEFINES = ("-D__HIP_PLATFORM_AMD__=1", "-DUSE_ROCM=1", "-fPIC")


@dataclass(frozen=True, kw_only=True)
class Target:
    """One compiler and GPU architecture to compile every kernel for."""

    name: str
    """Row label, e.g. ``sm_90``."""
    compiler: str
    """``nvcc`` or ``hipcc``."""
    arch: str
    """``sm_80``, ``sm_90``, ``gfx90a``."""
    gpus: str
    """The GPUs this target stands for."""
    hipify: bool = False
    """Run torch's hipify on the sources first, as ROCm builds of torch do."""


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(name="sm_80", compiler="nvcc", arch="sm_80", gpus="A100"),
        Target(name="sm_90", compiler="nvcc", arch="sm_90", gpus="H100/H200"),
        Target(name="gfx90a", compiler="hipcc", arch="gfx90a", gpus="MI250X"),
        Target(
            name="gfx90a-hipify",
            compiler="hipcc",
            arch="gfx90a",
            gpus="MI250X via torch's hipify",
            hipify=True,
        ),
    )
}


@dataclass(frozen=True, kw_only=True)
class Row:
    """One kernel on one target (or one failed compile)."""

    target: str
    file: str
    kernel: str
    """Demangled kernel name without its parameter list; ``-`` for a failed compile."""
    ok: bool
    registers: int | None = None
    spills: int | None = None
    shared_bytes: int | None = None
    error: str = ""
    detail: dict[str, int] = field(default_factory=dict)
    """Extra counters: nvcc ``stack_bytes``; hipcc ``sgprs``, ``agprs``, ``vgpr_spills``,
    ``sgpr_spills``, ``scratch_bytes``, ``occupancy``."""

    def to_dict(self) -> dict:
        return asdict(self)


def kernel_files(csrc: Path = CSRC) -> list[str]:
    return sorted(p.name for p in Path(csrc).glob("*.cu"))


# --------------------------------------------------------------------------------------------
# compilers


def find_compiler(name: str) -> str | None:
    """``nvcc`` from $CUDA_HOME/$CUDA_PATH, PATH or /usr/local/cuda; ``hipcc`` from
    $ROCM_PATH/$ROCM_HOME, PATH or /opt/rocm."""
    homes = ("CUDA_HOME", "CUDA_PATH") if name == "nvcc" else ("ROCM_PATH", "ROCM_HOME")
    fallback = "/usr/local/cuda" if name == "nvcc" else "/opt/rocm"
    for home in (*(os.environ.get(v) for v in homes), fallback):
        if home:
            path = Path(home) / "bin" / name
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    return shutil.which(name)


def missing_compiler_message(target: Target) -> str:
    if target.compiler == "hipcc":
        return (
            f"hipcc not found: run {INSTALL_HIP} (installs Debian's hipcc, libamdhip64-dev and "
            "rocm-device-libs; HIP_PLATFORM=amd hipcc compiles for gfx90a)"
        )
    return (
        "nvcc not found: install the CUDA toolkit (or set CUDA_HOME) to compile-check sm_80/sm_90"
    )


def compile_command(
    target: Target, compiler: str, src: Path, obj: Path, include: Path
) -> list[str]:
    if target.compiler == "nvcc":
        return [
            compiler,
            "-std=c++17",
            "-O3",
            f"-arch={target.arch}",
            "-Xptxas",
            "-v",
            *NVCC_DEFINES,
            "-I",
            str(include),
            "-c",
            str(src),
            "-o",
            str(obj),
        ]
    return [
        compiler,
        "-x",
        "hip",
        f"--offload-arch={target.arch}",
        "-std=c++17",
        "-O3",
        "-Rpass-analysis=kernel-resource-usage",
        *HIP_DEFINES,
        *(HIPIFIED_DEFINES if target.hipify else ()),
        "-I",
        str(include),
        "-c",
        str(src),
        "-o",
        str(obj),
    ]


# --------------------------------------------------------------------------------------------
# parsing


@dataclass
class _Usage:
    registers: int | None = None
    spills: int = 0
    shared_bytes: int | None = None
    detail: dict[str, int] = field(default_factory=dict)


_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_PROPS = re.compile(r"Function properties for (\S+)")
_PTXAS_SPILL = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(text: str) -> dict[str, _Usage]:
    """Per-kernel (mangled name) usage from ``nvcc -Xptxas -v`` output."""
    kernels: dict[str, _Usage] = {}
    current = props_for = None
    for line in text.splitlines():
        if m := _PTXAS_ENTRY.search(line):
            current = m.group(1)
            kernels.setdefault(current, _Usage())
        elif m := _PTXAS_PROPS.search(line):
            props_for = m.group(1)
        elif (m := _PTXAS_SPILL.search(line)) and props_for is not None:
            if props_for == current:
                usage = kernels[current]
                usage.spills = int(m.group(2)) + int(m.group(3))
                usage.detail["stack_bytes"] = int(m.group(1))
            props_for = None
        elif (m := _PTXAS_USED.search(line)) and current is not None:
            usage = kernels[current]
            usage.registers = int(m.group(1))
            smem = _PTXAS_SMEM.search(line)
            usage.shared_bytes = int(smem.group(1)) if smem else 0
    return kernels


_AMD_REMARK = re.compile(r"remark:\s+(.*?)\s*\[-Rpass-analysis=kernel-resource-usage\]")
_AMD_FIELDS = {
    "SGPRs": "sgprs",
    "VGPRs": "vgprs",
    "AGPRs": "agprs",
    "ScratchSize [bytes/lane]": "scratch_bytes",
    "Occupancy [waves/SIMD]": "occupancy",
    "SGPRs Spill": "sgpr_spills",
    "VGPRs Spill": "vgpr_spills",
    "LDS Size [bytes/block]": "lds_bytes",
}


def parse_amdgpu_remarks(text: str) -> dict[str, _Usage]:
    """Per-kernel (mangled name) usage from clang's ``-Rpass-analysis=kernel-resource-usage``."""
    raw: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        m = _AMD_REMARK.search(line)
        if not m:
            continue
        key, _, value = m.group(1).partition(":")
        key, value = key.strip(), value.strip()
        if key == "Function Name":
            current = value
            raw.setdefault(current, {})
        elif current is not None and key in _AMD_FIELDS and value.lstrip("-").isdigit():
            raw[current][_AMD_FIELDS[key]] = int(value)
    kernels = {}
    for name, f in raw.items():
        spills = f.get("vgpr_spills", 0) + f.get("sgpr_spills", 0)
        detail = {k: v for k, v in f.items() if k not in ("vgprs", "lds_bytes")}
        kernels[name] = _Usage(
            registers=f.get("vgprs"), spills=spills, shared_bytes=f.get("lds_bytes"), detail=detail
        )
    return kernels


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled -> readable, via c++filt (or cu++filt); names stay mangled if neither exists."""
    names = list(dict.fromkeys(names))
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if not names or tool is None:
        return {n: n for n in names}
    try:
        out = subprocess.run(
            [tool], input="\n".join(names), capture_output=True, text=True, timeout=30, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {n: n for n in names}
    if len(out) != len(names):
        return {n: n for n in names}
    return dict(zip(names, out, strict=True))


def short_kernel_name(demangled: str) -> str:
    """``void (anonymous namespace)::k<float, true>(Args)`` -> ``k<float, true>``."""
    name = demangled.replace("(anonymous namespace)::", "")
    name = re.sub(r"^void ", "", name)
    depth = 0
    for i, ch in enumerate(name):  # cut the parameter list: the first '(' outside <...>
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return name[:i]
    return name


def first_errors(log: str, limit: int = 3) -> str:
    """The first ``limit`` compiler error lines, joined: what the row shows for a failure."""
    lines = [ln.strip() for ln in log.splitlines()]
    errors = [ln for ln in lines if re.search(r"\berror\b", ln, re.IGNORECASE)]
    chosen = errors[:limit] or [ln for ln in lines if ln][-limit:] or ["compiler failed"]
    return " | ".join(chosen)


# --------------------------------------------------------------------------------------------
# running


def _hipify(src_dir: Path, out_dir: Path) -> dict[str, Path]:
    """Copy the sources to ``out_dir`` and run torch's hipify on them, as ROCm builds of torch
    do: ``{"adamw.cu": out_dir/"adamw.hip", ...}``."""
    from torch.utils.hipify import hipify_python

    for p in src_dir.iterdir():
        if p.suffix in (".cu", ".cuh", ".h", ".cpp"):
            shutil.copy2(p, out_dir / p.name)
    sources = [str((out_dir / name).resolve()) for name in kernel_files(out_dir)]
    sink = io.StringIO()  # hipify reports progress on stdout and stderr
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        result = hipify_python.hipify(
            project_directory=str(out_dir),
            output_directory=str(out_dir),
            header_include_dirs=[str(out_dir)],
            includes=[str(out_dir / "*")],
            extra_files=sources,
            show_detailed=False,
            show_progress=False,
            is_pytorch_extension=True,
            hipify_extra_files_only=True,
        )
    mapping = {}
    for s in sources:
        res = result.get(s)
        hipified = getattr(res, "hipified_path", None) if res is not None else None
        mapping[Path(s).name] = Path(hipified) if hipified else Path(s)
    return mapping


def _compile_one(target: Target, compiler: str, src: Path, include: Path, workdir: Path):
    obj = workdir / f"{target.name}-{src.stem}.o"
    env = dict(os.environ, LC_ALL="C")
    if target.compiler == "hipcc":
        env["HIP_PLATFORM"] = "amd"
    cmd = compile_command(target, compiler, src, obj, include)
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            env=env,
            timeout=COMPILE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False, f"{target.compiler} timed out after {COMPILE_TIMEOUT_S} s"
    except OSError as exc:
        return False, f"{target.compiler} could not run: {exc}"
    log = proc.stdout + proc.stderr
    if proc.returncode != 0 or not obj.is_file():
        return False, log
    return True, log


def _rows_for(target: Target, file: str, ok: bool, log: str) -> list[Row]:
    if not ok:
        return [Row(target=target.name, file=file, kernel="-", ok=False, error=first_errors(log))]
    usage = parse_ptxas(log) if target.compiler == "nvcc" else parse_amdgpu_remarks(log)
    if not usage:
        return [
            Row(target=target.name, file=file, kernel="-", ok=False, error="no kernels compiled")
        ]
    names = demangle(usage)
    return [
        Row(
            target=target.name,
            file=file,
            kernel=short_kernel_name(names[mangled]),
            ok=True,
            registers=u.registers,
            spills=u.spills,
            shared_bytes=u.shared_bytes,
            detail=dict(u.detail),
        )
        for mangled, u in sorted(usage.items(), key=lambda kv: names[kv[0]])
    ]


def compile_check(
    targets: Sequence[str] | None = None,
    files: Sequence[str] | None = None,
    *,
    csrc: Path = CSRC,
    jobs: int | None = None,
) -> list[Row]:
    """Compile ``files`` (default: every ``.cu`` in ``csrc``) for ``targets`` (default: all of
    :data:`TARGETS`), in parallel, and return the rows sorted by target, file, kernel."""
    csrc = Path(csrc)
    chosen = [TARGETS[t] for t in (targets or TARGETS)]
    files = list(files or kernel_files(csrc))
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="dsbench-compile-check-") as tmp:
        work = Path(tmp)
        jobs_list = []
        hipified: dict[str, Path] | None = None
        hipify_error = "torch hipify produced no sources"
        for target in chosen:
            compiler = find_compiler(target.compiler)
            if compiler is None:
                msg = missing_compiler_message(target)
                rows += [
                    Row(target=target.name, file=f, kernel="-", ok=False, error=msg) for f in files
                ]
                continue
            sources = {f: csrc / f for f in files}
            include = csrc
            if target.hipify:
                if hipified is None:
                    hip_dir = work / "hipified"
                    hip_dir.mkdir()
                    try:
                        hipified = _hipify(csrc, hip_dir)
                    except Exception as exc:  # hipify missing or broken: a row, not a crash
                        hipified = {}
                        hipify_error = f"torch hipify failed: {exc}"
                if not hipified:
                    rows += [
                        Row(target=target.name, file=f, kernel="-", ok=False, error=hipify_error)
                        for f in files
                    ]
                    continue
                sources = {f: hipified.get(f, csrc / f) for f in files}
                include = work / "hipified"
            for f in files:
                jobs_list.append((target, compiler, f, sources[f], include))
        jobs_list.sort(key=lambda job: -job[3].stat().st_size)  # biggest sources first
        with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
            futures = [
                (t, f, pool.submit(_compile_one, t, c, src, inc, work))
                for t, c, f, src, inc in jobs_list
            ]
            for target, f, fut in futures:
                ok, log = fut.result()
                rows += _rows_for(target, f, ok, log)
    order = {name: i for i, name in enumerate(TARGETS)}
    return sorted(rows, key=lambda r: (order.get(r.target, 99), r.file, r.kernel))


def format_table(rows: Sequence[Row]) -> str:
    from tabulate import tabulate

    table = [
        (
            r.target,
            r.file,
            r.kernel,
            "ok" if r.ok else "FAILED",
            r.registers,
            r.spills,
            r.shared_bytes,
            _note(r),
        )
        for r in rows
    ]
    headers = ("target", "file", "kernel", "ok", "regs", "spills", "smem B", "note")
    return tabulate(table, headers=headers, tablefmt="simple", missingval="-")


def _note(r: Row) -> str:
    if not r.ok:
        return r.error
    d = r.detail
    if "sgprs" in d:
        parts = [f"SGPRs {d['sgprs']}", f"AGPRs {d.get('agprs', 0)}"]
        if d.get("sgpr_spills") or d.get("vgpr_spills"):
            parts.append(f"spilled SGPRs {d.get('sgpr_spills', 0)} VGPRs {d.get('vgpr_spills', 0)}")
        if "occupancy" in d:
            parts.append(f"occupancy {d['occupancy']} waves/SIMD")
        return ", ".join(parts)
    return f"stack {d['stack_bytes']} B" if d.get("stack_bytes") else ""
