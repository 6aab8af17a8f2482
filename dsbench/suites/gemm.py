"""Dense GEMM benchmarks: C = A @ B, 2*M*N*K FLOPs, TFLOP/s against the profile's dense peak.

On GPUs FP16 (and BF16 in the full suite) with fp32 accumulation. On CPUs FP16 GEMM is often
emulated and very slow, so the CPU runs the dtype it does well: bf16 where the CPU has native
bf16 dot products (AVX512-BF16 / AMX-BF16), fp32 otherwise; the case notes say which and why.
Inputs are random (never zeros: GPUs draw less power and clock higher on zeros).
"""

from __future__ import annotations

from dataclasses import dataclass

from dsbench.kernels import registry
from dsbench.suites.base import (
    Benchmark,
    Case,
    Context,
    Skip,
    Work,
    dtype_bits,
    impl_choices,
    tflops,
    time_ms,
)

BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")  # x86 AMX / AVX512-BF16, Arm BF16


@dataclass(frozen=True, kw_only=True)
class GemmParams:
    """A case of :data:`GEMM`: ``size`` x ``size`` by ``size`` x ``size``."""

    impl: str
    """The registry's GEMM implementation."""
    dtype: str
    """torch dtype name of A, B and C."""
    size: int
    """M = N = K."""


def cpu_gemm_dtype(flags: tuple[str, ...]) -> tuple[str, str]:
    """The dtype this CPU does well, and why."""
    have = [f for f in BF16_CPU_FLAGS if f in flags]
    if have:
        return "bfloat16", f"CPU has {have[0]}: bf16 GEMM runs natively (fp16 would be emulated)"
    return "float32", "CPU has no native bf16/fp16 dot products: fp32 GEMM"


def _grid(suite: str, ctx: Context) -> dict[str, list]:
    if ctx.gpu:
        dtypes = ["float16"] if suite != "full" else ["float16", "bfloat16"]
        sizes = {
            "smoke": [256],
            "quick": [1024, 4096, 8192],
            "full": [1024, 2048, 4096, 8192, 16384],
        }[suite]
    else:
        dtypes = [cpu_gemm_dtype(ctx.cpu_flags)[0]]
        if suite == "full" and "float32" not in dtypes:
            dtypes.append("float32")
        sizes = {"smoke": [128], "quick": [512, 1024, 2048], "full": [512, 1024, 2048, 4096]}[suite]
    return {"impl": impl_choices("gemm", suite, ctx), "dtype": dtypes, "size": sizes}


def _work(params: GemmParams, ctx: Context) -> Work:
    """2·n³ FLOPs; bytes: A and B read once, C written once (3·n²·element size), the least
    traffic a square GEMM can move."""
    n, elt = params.size, dtype_bits(params.dtype) // 8
    return Work(flops=2.0 * n * n * n, bytes=3.0 * n * n * elt)


def _setup(params: GemmParams, ctx: Context) -> Case:
    import torch

    from dsbench.measure.timing import rotation_count

    impl = registry.get("gemm", params.impl)
    ok, why = impl.available("cuda" if ctx.gpu else "cpu")
    if not ok:
        raise Skip(why)
    gemm = impl.load()
    dtype = getattr(torch, params.dtype)
    n, device = params.size, ctx.torch_device
    elt = torch.finfo(dtype).bits // 8
    g = torch.Generator(device=device).manual_seed(0)
    sets = [
        tuple(torch.randn(n, n, device=device, generator=g).to(dtype) for _ in range(2))
        for _ in range(rotation_count(3 * n * n * elt, device))
    ]
    notes = {"shape": f"{n}x{n}x{n}", "accumulate": "fp32"}
    if not ctx.gpu:
        best, why = cpu_gemm_dtype(ctx.cpu_flags)
        notes["dtype_reason"] = why if params.dtype == best else "fp32 for reference"
    return Case(fn=gemm, args=sets, work=_work(params, ctx), notes=notes)


GEMM = Benchmark(
    name="gemm",
    description="dense square GEMM C = A @ B with the vendor library; TFLOP/s = 2MNK / t",
    grid=_grid,
    params=GemmParams,
    setup=_setup,
    work_of=_work,
    metrics=(
        tflops(description="2*M*N*K / time"),
        time_ms(),
    ),
)

BENCHMARKS = [GEMM]
