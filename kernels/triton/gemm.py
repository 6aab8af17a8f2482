"""Matrix multiply C = A @ B in Triton: fp16 and bf16 (fp32 accumulation), and fp32.

Math: C[m, n] = sum_k A[m, k] * B[k, n] for A [M, K], B [K, N]; every product accumulates in an
fp32 tile and C is rounded once to the input dtype. Work: 2*M*N*K FLOPs; at least
(M*K + K*N + M*N) * itemsize bytes, so large squares are compute-bound (FLOPs / peak).

Followed: Triton tutorial 03 (matrix multiplication): a 1-D grid over C tiles in *grouped*
order (``GROUP_SIZE_M`` rows of tiles share B's columns while they are hot in L2), a K loop of
``tl.dot`` into an fp32 accumulator, and separate autotune lists for CUDA and HIP (HIP wants
``waves_per_eu`` and ``matrix_instr_nonkdim``), picked by the active Triton target, not by a
device-name string. Unlike the tutorial, loads are masked along K so any K works, and every
stride is a kernel argument, so transposed or sliced operands need no copy. Row/column indices
are wrapped (``% M``, ``% N``) instead of masked on load, as in the tutorial; the store is
masked. Offsets switch to int64 when an operand spans more than 2^31 elements.

fp32 inputs use ``input_precision="tf32"`` only on CUDA and only when
``torch.backends.cuda.matmul.allow_tf32`` is True, otherwise ``"ieee"`` (exact fp32 products,
as the interpreter tests need). On HIP fp32 is always ``"ieee"`` (XF32 exists only on some CDNA3
parts and Triton versions).

Under ``TRITON_INTERPRET=1`` there is one config (the interpreter cannot benchmark), bf16
tiles are widened to fp32 before ``tl.dot`` (numpy has no bf16 matmul; a bf16 x bf16 product is
exact in fp32, so the result matches a bf16 MMA with fp32 accumulation up to summation order)
and the bf16 result is rounded to nearest even on the bits (the interpreter's cast truncates).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from dsbench.kernels.triton._common import active_backend, check_device, fail
from dsbench.kernels.triton.reduce import round_fp32_to

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def get_cuda_autotune_config() -> list[triton.Config]:
    """NVIDIA (sm_80 / sm_90): tutorial 03's list plus two Hopper-friendly 128x128x64 tiles."""

    def cfg(m, n, k, stages, warps, group=8):
        return triton.Config(
            {"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": group},
            num_stages=stages,
            num_warps=warps,
        )

    return [
        cfg(128, 256, 64, 3, 8),
        cfg(256, 128, 64, 3, 8),
        cfg(128, 128, 64, 4, 8),
        cfg(128, 128, 64, 4, 4),
        cfg(64, 256, 32, 4, 4),
        cfg(128, 128, 32, 4, 4),
        cfg(128, 64, 32, 4, 4),
        cfg(64, 128, 32, 4, 4),
        cfg(128, 32, 32, 4, 4),
        cfg(64, 32, 32, 5, 2),
    ]


def get_hip_autotune_config() -> list[triton.Config]:
    """AMD CDNA (gfx90a / gfx942): tutorial 03's HIP list; ``waves_per_eu`` bounds register use
    for occupancy, ``matrix_instr_nonkdim=16`` picks the 16x16 MFMA instructions."""

    def cfg(m, n, k, group, waves, warps):
        return triton.Config(
            {
                "BLOCK_SIZE_M": m,
                "BLOCK_SIZE_N": n,
                "BLOCK_SIZE_K": k,
                "GROUP_SIZE_M": group,
                "waves_per_eu": waves,
                "matrix_instr_nonkdim": 16,
            },
            num_warps=warps,
            num_stages=2,
        )

    return [
        cfg(128, 256, 16, 1, 2, 4),
        cfg(256, 256, 16, 4, 2, 8),
        cfg(128, 128, 32, 1, 2, 8),
        cfg(64, 128, 32, 8, 3, 4),
        cfg(64, 64, 32, 1, 8, 4),
    ]


def get_interpreter_config() -> list[triton.Config]:
    """One config: the interpreter cannot benchmark several."""
    return [
        triton.Config(
            {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4},
            num_warps=4,
        )
    ]


@triton.jit
def _gemm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    INPUT_PRECISION: tl.constexpr,
    BF16_INTERPRETED: tl.constexpr,
    INDEX_64: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # Grouped tile order (tutorial 03): consecutive programs walk GROUP_SIZE_M tile rows
    # column by column, so the B tiles they share stay in L2.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Rows/columns past M/N wrap around (their results are never stored), so loads need a
    # mask only along K.
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    if INDEX_64:  # every offset and pointer increment below becomes 64-bit
        stride_am = tl.cast(stride_am, tl.int64)
        stride_ak = tl.cast(stride_ak, tl.int64)
        stride_bk = tl.cast(stride_bk, tl.int64)
        stride_bn = tl.cast(stride_bn, tl.int64)
        stride_cm = tl.cast(stride_cm, tl.int64)
        stride_cn = tl.cast(stride_cn, tl.int64)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if BF16_INTERPRETED:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = round_fp32_to(acc, c_ptr.dtype.element_ty, BF16_INTERPRETED)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@functools.cache
def _tuned_kernel(backend: str):
    """The autotuned kernel for ``backend``; built on first use, because choosing the config
    list needs the active target, which exists only once a GPU driver (or the interpreter) is
    up."""
    configs = {
        "cuda": get_cuda_autotune_config,
        "hip": get_hip_autotune_config,
        "interpreter": get_interpreter_config,
    }[backend]()
    return triton.autotune(configs=configs, key=["M", "N", "K", "INPUT_PRECISION"])(_gemm_kernel)


def _span(t: torch.Tensor, block: int = 256) -> int:
    """Largest element offset the kernel may form for ``t``: wrapped rows/columns stay in range,
    masked K offsets run up to one block past the end."""
    strides = [abs(s) for s in t.stride()]
    last = sum((size - 1) * s for size, s in zip(t.shape, strides, strict=True))
    return last + block * max(strides)


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B; the contract of :func:`dsbench.kernels.reference.gemm`."""
    if a.dim() != 2 or b.dim() != 2:
        fail("gemm", f"needs 2-D A [M, K] and B [K, N]; got {a.dim()}-D and {b.dim()}-D")
    if a.shape[1] != b.shape[0]:
        fail(
            "gemm",
            f"inner dimensions differ: A is {tuple(a.shape)}, B is {tuple(b.shape)} "
            "(A's columns must equal B's rows)",
        )
    if a.dtype != b.dtype:
        fail("gemm", f"A and B must have one dtype; got {a.dtype} and {b.dtype}")
    if a.dtype not in _DTYPES:
        fail("gemm", f"supports float16, bfloat16 and float32; got {a.dtype}")
    check_device("gemm", _gemm_kernel, a, b)
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()

    backend = active_backend(_gemm_kernel)
    tf32 = backend == "cuda" and a.dtype == torch.float32
    tf32 = tf32 and torch.backends.cuda.matmul.allow_tf32
    index_64 = max(_span(a), _span(b), _span(c)) >= 2**31
    grid = lambda meta: (  # noqa: E731
        triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),
    )
    _tuned_kernel(backend)[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        INPUT_PRECISION="tf32" if tf32 else "ieee",
        BF16_INTERPRETED=backend == "interpreter" and a.dtype == torch.bfloat16,
        INDEX_64=index_64,
    )
    return c
