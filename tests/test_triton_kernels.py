"""Triton kernels (``adamw``, ``gemm``, ``reduce_add``) against the torch references.

Without a GPU the kernels run in Triton's interpreter, which must be on before ``triton`` is
first imported: ``@triton.jit`` picks interpreter or compiler when it decorates, and Triton's own
library (``tl.max``, ``tl.cdiv``) is ``@triton.jit`` code decorated at import. Other tests may
import Triton first, so the numerical checks are ``check_*`` functions, in
tests/test_triton_checks.py, which pytest does not collect by default:
``test_interpreter_suite`` runs them in a child pytest started with ``TRITON_INTERPRET=1`` and
``-o python_functions=check_*``. To run them directly::

    TRITON_INTERPRET=1 pytest tests/test_triton_checks.py -o python_functions=check_*

The ``test_*`` functions need Triton's compiler: an ahead-of-time compile of every kernel for
sm_80, sm_90 and gfx90a (no GPU needed) and, marked ``gpu``, the numerical checks on the device
with every autotune config benchmarked.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

triton = pytest.importorskip("triton")

from dsbench.kernels import reference, registry  # noqa: E402
from dsbench.kernels.triton._common import assert_close  # noqa: E402
from tests.test_triton_checks import (  # noqa: E402
    ADAM_TOLS,
    GEMM_TOLS,
    HYPER,
    INTERPRETER_SESSION,
    REDUCE_TOLS,
    _odd_shapes,
)

HAS_GPU = torch.cuda.is_available()
ROOT = Path(__file__).resolve().parents[1]
CHECKS = ROOT / "tests" / "test_triton_checks.py"
"""The numerical checks, run by ``test_interpreter_suite``."""


@pytest.mark.skipif(INTERPRETER_SESSION, reason="this is the interpreter session")
def test_interpreter_suite():
    """Run the ``check_*`` functions of tests/test_triton_checks.py in a child pytest with
    TRITON_INTERPRET=1. Every collected check must pass: pytest also exits 0 when everything
    skipped."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    t0 = time.perf_counter()
    child = [sys.executable, "-m", "pytest", str(CHECKS), "-v", "--durations=5",
             "-p", "no:cacheprovider", "-o", "python_functions=check_*"]  # fmt: skip
    proc = subprocess.run(child, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, (
        f"interpreter tests failed (exit {proc.returncode}):\n{out[-12000:]}"
    )
    # -v lists every collected check with its outcome
    checks = [line for line in proc.stdout.splitlines() if "::check_" in line and "%]" in line]
    summary = out.strip().splitlines()[-1]
    ran = re.fullmatch(r"=* ?(\d+) passed in .*", summary)
    assert checks and ran and int(ran[1]) == len(checks), (
        f"expected all {len(checks)} checks to run and pass, got: {summary}"
    )
    assert all(" PASSED " in line for line in checks), checks
    print(f"interpreter suite: {summary} ({time.perf_counter() - t0:.0f}s)")


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


def test_registry_availability(monkeypatch):
    impl = registry.get("adamw", "triton")
    assert impl.target == "dsbench.kernels.triton.adamw:adamw"
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    ok, why = impl.available("cpu")
    assert not ok and "TRITON_INTERPRET=1" in why
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert impl.available("cpu") == (
        True,
        "interpreter mode (TRITON_INTERPRET=1): correct but slow",
    )
    if not HAS_GPU:
        monkeypatch.delenv("TRITON_INTERPRET")
        assert registry.get("gemm", "triton").available("cuda")[0] is False


# --------------------------------------------------------------------------------------------
# Compiler checks (parent session: Triton imported without the interpreter)
# --------------------------------------------------------------------------------------------

compiler_only = pytest.mark.skipif(INTERPRETER_SESSION, reason="needs Triton's compiler")


def _compile(kernel, target, arg_types, constants, config=None):
    """Compile ``kernel`` ahead of time for ``target`` (no GPU needed)."""
    from triton.compiler import ASTSource

    fn = kernel if isinstance(kernel, triton.JITFunction) else kernel.fn
    meta = config.kwargs if config else {}
    constants = {**constants, **{k: v for k, v in meta.items() if k in fn.arg_names}}
    options = {k: v for k, v in meta.items() if k not in fn.arg_names}
    if config:
        options.update(num_warps=config.num_warps, num_stages=config.num_stages)
    signature = {a: "constexpr" if a in constants else arg_types[a] for a in fn.arg_names}
    constexprs = {(fn.arg_names.index(k),): v for k, v in constants.items()}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    return triton.compile(src, target=target, options=options)


def _compile_jobs(backend):
    """(name, kernel, argument types, constants, autotune config) for one vendor."""
    import triton.language as tl

    from dsbench.kernels.triton import adamw, gemm, reduce

    hyper = dict.fromkeys(
        ("lr", "beta1", "beta2", "one_minus_beta1", "one_minus_beta2", "log_beta1", "log_beta2",
         "eps", "weight_decay", "decay"),
        "fp32",
    )  # fmt: skip
    tabs = dict.fromkeys(("p_tab", "g_tab", "m_tab", "v_tab", "numel_tab", "chunk_tab"), "*i64")
    ptrs = dict.fromkeys(("step_ptr", "step_tab", "scale_ptr", "found_ptr", "p_ptr", "m_ptr",
                          "v_ptr"), "*fp32")  # fmt: skip
    ints = dict.fromkeys(("M", "N", "K", "stride_am", "stride_bk", "stride_cm"), "i32")
    unit = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1}  # specialized like contiguous inputs
    configs = (
        gemm.get_cuda_autotune_config() if backend == "cuda" else gemm.get_hip_autotune_config()
    )
    for dtype, precision, config in (
        ("fp16", "ieee", configs[0]),
        ("bf16", "ieee", configs[0]),
        ("fp32", "tf32" if backend == "cuda" else "ieee", configs[-1]),
    ):
        abc = dict.fromkeys(("a_ptr", "b_ptr", "c_ptr"), f"*{dtype}")
        flags = {"INPUT_PRECISION": precision, "BF16_INTERPRETED": False, "INDEX_64": False}
        yield f"gemm {dtype}", gemm._gemm_kernel, {**abc, **ints}, {**flags, **unit}, config
    yield (
        "adamw flat", adamw._adamw_flat_kernel, {**ptrs, **hyper, "g_ptr": "*bf16", "n": "i64"},
        {"ADAMW": True, "HAS_SCALE": True, "BLOCK": 2048}, None,
    )  # fmt: skip
    yield (
        "adamw list", adamw._adamw_multi_kernel, {**tabs, **ptrs, **hyper},
        {"G_DTYPE": tl.float16, "ADAMW": False, "HAS_SCALE": True, "CHUNK": 16384, "BLOCK": 1024},
        None,
    )  # fmt: skip
    yield (
        "inf check list", adamw._nonfinite_multi_kernel, {**tabs, **ptrs},
        {"G_DTYPE": tl.bfloat16, "CHUNK": 16384, "BLOCK": 1024}, None,
    )  # fmt: skip
    yield (
        "inf check flat", adamw._nonfinite_flat_kernel, {**ptrs, "g_ptr": "*fp16", "n": "i32"},
        {"BLOCK": 4096}, None,
    )  # fmt: skip
    yield (
        "reduce_add", reduce._reduce_add_kernel, {"acc_ptr": "*bf16", "x_ptr": "*fp32", "n": "i64"},
        {"SOFT_BF16": False, "BLOCK": 2048}, None,
    )  # fmt: skip


@compiler_only
def test_kernels_compile_for_sm80_sm90_gfx90a(monkeypatch, tmp_path):
    """Every kernel compiles ahead of time for A100, H100/H200 and MI250X without a GPU (GEMM with
    a config from its vendor's autotune list: HIP's carries waves_per_eu and
    matrix_instr_nonkdim); the GEMMs use the matrix units (mma / wgmma / mfma)."""
    import inspect

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if "constexprs" not in inspect.signature(ASTSource).parameters:
        pytest.skip(f"triton {triton.__version__}: ASTSource takes no constexprs")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    lines, failures = [], []
    for target in (GPUTarget("cuda", 80, 32), GPUTarget("cuda", 90, 32),
                   GPUTarget("hip", "gfx90a", 64)):  # fmt: skip
        for name, kernel, arg_types, constants, config in _compile_jobs(target.backend):
            where = f"{target.backend}:{target.arch} {name}"
            try:
                compiled = _compile(kernel, target, arg_types, constants, config)
            except Exception as exc:
                failures.append(f"{where}: {exc!r}"[:3000])
                continue
            asm = compiled.asm.get("ptx") or compiled.asm.get("amdgcn") or ""
            if name.startswith("gemm") and not any(i in asm for i in ("mma", "mfma")):
                failures.append(f"{where}: no matrix instructions in the assembly")
            lines.append(f"{where}: ok")
    print("\n".join(lines))
    assert not failures, "\n".join(failures)


@compiler_only
@pytest.mark.skipif(HAS_GPU, reason="checks the error for CPU tensors without the interpreter")
def test_cpu_tensors_without_interpreter_get_a_clear_error():
    from dsbench.kernels.triton import gemm, reduce

    with pytest.raises(ValueError, match="triton gemm: tensors are on the CPU; Triton needs a GPU"):
        gemm.gemm(torch.randn(2, 2), torch.randn(2, 2))
    with pytest.raises(ValueError, match="triton reduce_add: tensors are on the CPU"):
        reduce.reduce_add(torch.zeros(3), torch.ones(3))


@compiler_only
@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA or ROCm device")
def test_kernels_on_gpu_with_autotuning():
    """The numerical checks compiled on the device, every autotune config benchmarked: the
    in-place kernels (AdamW flat, reduce_add) must still apply their update exactly once."""
    from dsbench.kernels.triton import adamw, gemm, reduce

    dev = torch.device("cuda")
    for dtype, atol, rtol in GEMM_TOLS:
        for M, N, K in [(127, 65, 33), (1000, 1000, 999), (512, 384, 4096)]:
            a = torch.randn(M, K, device=dev).to(dtype)
            b = torch.randn(N, K, device=dev).to(dtype).t()  # transposed B, as nn.Linear passes
            expected = (a.double() @ b.double()).to(dtype)
            # fp32 sums in another order: the absolute error grows like sqrt(K)
            k_atol = atol * math.sqrt(K / 33)
            name = f"gemm {M}x{N}x{K} {dtype}"
            assert_close(gemm.gemm(a, b), expected, atol=k_atol, rtol=rtol, name=name)
    if gemm.active_backend(gemm._gemm_kernel) == "cuda":
        a, b = torch.randn(256, 256, device=dev), torch.randn(256, 256, device=dev)
        saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:  # tf32 keeps 10 mantissa bits of each input
            assert_close(gemm.gemm(a, b), a.double() @ b.double(), atol=5e-2, rtol=1e-2,
                         name="gemm fp32 as tf32")  # fmt: skip
        finally:
            torch.backends.cuda.matmul.allow_tf32 = saved

    for grad_dtype, atol, rtol in ADAM_TOLS:
        for shapes in ([(1_000_003,)], _odd_shapes()):
            p = [torch.randn(s, device=dev) for s in shapes]
            m = [0.1 * torch.randn(s, device=dev) for s in shapes]
            v = [1e-3 * torch.rand(s, device=dev) for s in shapes]
            steps = [torch.zeros((), device=dev) for _ in shapes]
            g = [torch.randn(s, device=dev).to(grad_dtype) for s in shapes]
            ref = [[t.clone() for t in ts] for ts in (p, m, v, steps)]
            scale = torch.tensor(2.0, device=dev)
            adamw.adamw(p, g, m, v, steps, grad_scale=scale, **HYPER)  # first call autotunes
            reference.adamw(ref[0], g, ref[1], ref[2], ref[3], grad_scale=scale, **HYPER)
            for name, got, want in zip(("params", "exp_avgs", "exp_avg_sqs", "steps"),
                                       (p, m, v, steps), ref, strict=True):  # fmt: skip
                for i, (x, y) in enumerate(zip(got, want, strict=True)):
                    assert_close(x, y, atol=atol, rtol=rtol, name=f"{name}[{i}] {grad_dtype}")

    for acc_dtype, x_dtype, atol, rtol in REDUCE_TOLS:
        acc = torch.randn(1_000_003, device=dev).to(acc_dtype)
        x = torch.randn(1_000_003, device=dev).to(x_dtype)
        expected = reference.reduce_add(acc.clone(), x)
        reduce.reduce_add(acc, x)  # autotunes on first call
        assert_close(acc, expected, atol=atol, rtol=rtol, name=f"acc {acc_dtype} += {x_dtype}")
