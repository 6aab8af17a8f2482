"""Run the CUDA/HIP kernel sources on the CPU, to test their logic on a machine without a GPU.

The unmodified ``kernels/csrc/*.cu`` files are compiled as C++20 with ``DSB_CPU_EMULATION``
(see ``dsbench_cpu_emulation.h``: each GPU thread is a ``std::thread``, blocks run one after
another, WMMA and MFMA are emulated) into a shared library, once as CUDA (sm_80: the WMMA path)
and once as HIP (gfx90a, wave64: the MFMA path and HIP 5.2's bfloat16 class). The only source
change is mechanical: each one-line ``kernel<<<grid, block, smem, stream>>>(args);`` becomes a
call to ``dsb_emu::launch``. The launchers of ``dsbench_kernels.h`` are then called through
ctypes on CPU tensors, with the same checks and tables as ``bindings.cpp``.

This tests indexing, tiling, bounds, alignment paths and arithmetic against the torch reference;
it says nothing about speed, and the MFMA lane layout is emulated from AMD's documentation.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

CSRC = Path(__file__).resolve().parent.parent / "csrc"
_LAUNCH = re.compile(r"^(\s*)(.+?)<<<(.+?)>>>\((.*)\);\s*$")
_DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}


class EmulationError(RuntimeError):
    """The emulated build or a launcher failed."""


def find_cxx() -> str | None:
    """A host compiler for the emulation: clang++ (Debian's hipcc brings clang++-15), else g++
    (CUDA mode only: HIP mode needs clang's ext_vector_type)."""
    found = shutil.which("clang++")
    if found:
        return found
    versioned = sorted(
        (
            p
            for d in os.environ.get("PATH", "").split(os.pathsep)
            for p in Path(d).glob("clang++-[0-9]*")
        ),
        key=lambda p: int(re.sub(r"\D", "", p.name.split("-")[-1]) or 0),
    )
    if versioned:
        return str(versioned[-1])
    return shutil.which("g++")


def rewrite_launches(source: str) -> str:
    """``k<T><<<g, b, s, st>>>(a, b);`` -> ``dsb_emu::launch(g, b, s, st, [&] { k<T>(a, b); });``"""
    out = []
    for line in source.splitlines():
        m = _LAUNCH.match(line)
        if m:
            indent, kernel, config, args = m.groups()
            line = f"{indent}dsb_emu::launch({config}, [&] {{ {kernel}({args}); }});"
        elif "<<<" in line:
            raise EmulationError(f"a kernel launch must fit on one line: {line.strip()}")
        out.append(line)
    return "\n".join(out) + "\n"


_EXTRA = """\
#include "dsbench_kernels.h"
extern "C" int32_t dsb_emu_adamw_head(const void* p, const void* g, const void* m, const void* v,
                                      size_t grad_size, int64_t n) {
    return dsb_adamw_head(p, g, m, v, grad_size, n);
}
extern "C" int64_t dsb_emu_adamw_chunks(int64_t n, int32_t head) {
    return dsb_adamw_chunks(n, head);
}
"""


def build_library(
    out_dir: Path, *, hip: bool = False, csrc: Path = CSRC, cxx: str | None = None
) -> Path:
    """Compile every ``.cu`` in ``csrc`` for the CPU emulation into ``out_dir``; the library."""
    cxx = cxx or find_cxx()
    if cxx is None:
        raise EmulationError("no C++ compiler for the CPU emulation (install clang++ or g++)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for header in Path(csrc).glob("*.h"):
        shutil.copy2(header, out / header.name)
    sources = []
    for cu in sorted(Path(csrc).glob("*.cu")):
        dst = out / f"{cu.stem}.cpp"
        dst.write_text(rewrite_launches(cu.read_text(encoding="utf-8")), encoding="utf-8")
        sources.append(dst)
    (out / "emulation_extra.cpp").write_text(_EXTRA)
    sources.append(out / "emulation_extra.cpp")
    flags = ["-std=c++20", "-O1", "-fPIC", "-pthread", "-fno-strict-aliasing", "-w"]
    flags += ["-DDSB_CPU_EMULATION", *(["-DDSB_EMULATE_HIP"] if hip else []), "-I", str(out)]

    def compile_one(src: Path) -> Path:
        obj = src.with_suffix(".o")
        proc = subprocess.run(
            [cxx, *flags, "-c", str(src), "-o", str(obj)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr)
            raise EmulationError(f"emulated build of {src.name} failed: {first.strip()}")
        return obj

    with ThreadPoolExecutor(max_workers=len(sources)) as pool:
        objects = list(pool.map(compile_one, sources))
    lib = out / ("libdsbench_emu_hip.so" if hip else "libdsbench_emu_cuda.so")
    proc = subprocess.run(
        [cxx, "-shared", "-pthread", *map(str, objects), "-o", str(lib)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise EmulationError(f"emulated link failed: {proc.stderr.strip()[:500]}")
    return lib


class _Entry(ctypes.Structure):  # DsbAdamwEntry
    _fields_ = [
        ("param", ctypes.c_void_p),
        ("grad", ctypes.c_void_p),
        ("exp_avg", ctypes.c_void_p),
        ("exp_avg_sq", ctypes.c_void_p),
        ("step", ctypes.c_void_p),
        ("numel", ctypes.c_int64),
        ("chunk_begin", ctypes.c_int64),
        ("head", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
    ]


class EmulatedKernels:
    """The launchers of one emulated library, with the reference signatures, on CPU tensors."""

    def __init__(self, path: Path):
        c = ctypes
        lib = c.CDLL(str(path))
        lib.dsb_adamw_launch.restype = c.c_char_p
        lib.dsb_adamw_launch.argtypes = [c.c_void_p, c.c_int64, c.c_int64, c.c_int]
        lib.dsb_adamw_launch.argtypes += [c.c_double] * 5 + [c.c_int] + [c.c_void_p] * 3
        lib.dsb_gemm_launch.restype = c.c_char_p
        lib.dsb_gemm_launch.argtypes = [c.c_void_p] * 3 + [c.c_int64] * 4 + [c.c_int, c.c_int64]
        lib.dsb_gemm_launch.argtypes += [c.c_int, c.c_int64, c.c_int, c.c_int, c.c_void_p]
        lib.dsb_gemm_path_name.restype = c.c_char_p
        lib.dsb_gemm_path_name.argtypes = [c.c_int, c.c_int]
        lib.dsb_reduce_add_launch.restype = c.c_char_p
        lib.dsb_reduce_add_launch.argtypes = [c.c_void_p, c.c_int, c.c_void_p, c.c_int]
        lib.dsb_reduce_add_launch.argtypes += [c.c_int64, c.c_void_p]
        lib.dsb_emu_adamw_head.restype = c.c_int32
        lib.dsb_emu_adamw_head.argtypes = [c.c_void_p] * 4 + [c.c_size_t, c.c_int64]
        lib.dsb_emu_adamw_chunks.restype = c.c_int64
        lib.dsb_emu_adamw_chunks.argtypes = [c.c_int64, c.c_int32]
        assert ctypes.sizeof(_Entry) == 64
        self.lib = lib
        self.last_heads: list[int] = []

    @staticmethod
    def _check(kernel: str, err: bytes | None) -> None:
        if err is not None:
            raise EmulationError(f"{kernel}: {err.decode()}")

    def reduce_add(self, acc: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        assert acc.is_contiguous() and x.is_contiguous() and acc.numel() == x.numel()
        err = self.lib.dsb_reduce_add_launch(
            acc.data_ptr(), _DTYPES[acc.dtype], x.data_ptr(), _DTYPES[x.dtype], acc.numel(), None
        )
        self._check("reduce_add", err)
        return acc

    def adamw(
        self,
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
        steps,
        *,
        lr,
        beta1,
        beta2,
        eps,
        weight_decay,
        adamw_mode=True,
        grad_scale=None,
        found_inf=None,
        fused=None,
    ) -> None:
        n = len(params)
        table = (_Entry * n)()
        chunks = 0
        self.last_heads = []
        lists = zip(params, grads, exp_avgs, exp_avg_sqs, steps, strict=True)
        for i, (p, g, m, v, s) in enumerate(lists):
            head = self.lib.dsb_emu_adamw_head(
                p.data_ptr(), g.data_ptr(), m.data_ptr(), v.data_ptr(), g.element_size(), p.numel()
            )
            table[i] = _Entry(p.data_ptr(), g.data_ptr(), m.data_ptr(), v.data_ptr(),
                              s.data_ptr(), p.numel(), chunks, head, 0)  # fmt: skip
            chunks += self.lib.dsb_emu_adamw_chunks(p.numel(), head)
            self.last_heads.append(head)
        scale = flag = None
        if grad_scale is not None:
            scale = grad_scale.float().reshape(1)
            flag = found_inf if found_inf is not None else torch.zeros(1)
        err = self.lib.dsb_adamw_launch(
            ctypes.addressof(table), n, chunks, _DTYPES[grads[0].dtype], lr, beta1, beta2, eps,
            weight_decay, int(adamw_mode), None if scale is None else scale.data_ptr(),
            None if flag is None else flag.data_ptr(), None,
        )  # fmt: skip
        self._check("adamw", err)

    def gemm(self, a: torch.Tensor, b: torch.Tensor, *, tiled: bool = False) -> torch.Tensor:
        def layout(t):
            if t.stride(1) == 1:
                return True, t.stride(0), t
            if t.stride(0) == 1:
                return False, t.stride(1), t
            t = t.contiguous()
            return True, t.stride(0), t

        a_row, lda, a = layout(a)
        b_row, ldb, b = layout(b)
        m, k = a.shape
        n = b.shape[1]
        c = torch.full((m, n), float("nan"), dtype=a.dtype)  # poisoned output
        err = self.lib.dsb_gemm_launch(
            a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, lda, int(a_row), ldb, int(b_row),
            n, _DTYPES[a.dtype], 1 if tiled else 0, None,
        )  # fmt: skip
        self._check("gemm", err)
        return c

    def gemm_path(self, dtype: torch.dtype, *, tiled: bool = False) -> str:
        return self.lib.dsb_gemm_path_name(_DTYPES[dtype], 1 if tiled else 0).decode()
