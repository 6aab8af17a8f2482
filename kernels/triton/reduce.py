"""Local reduction ``acc += x`` in Triton, for the ring collectives' reduce steps.

Math: acc[i] = round_to(acc.dtype, float32(acc[i]) + float32(x[i])): the sum is computed in fp32
and rounded once (round-to-nearest-even, as torch's ``copy_``), so fp16/bf16 buffers accumulate
without an intermediate 16-bit rounding of x. The contract is
:func:`dsbench.kernels.reference.reduce_add`.

Bytes: reads acc and x, writes acc: (2 * acc.itemsize + x.itemsize) per element; 1 FLOP per
element, so memory-bound (report GB/s).

Elements are matched in flattened (row-major) order; ``acc`` and ``x`` need the same number of
elements, not the same shape. A non-contiguous ``x`` is copied to a contiguous one first; a
non-contiguous ``acc`` is reduced in a contiguous copy that is then copied back into it; an
``x`` that is a shifted view of ``acc``'s storage is cloned first.

Source: Triton tutorial 01 (vector add) with 64-bit offsets; autotuned over block size and warps
with ``restore_value`` on ``acc`` so that benchmarking configs never add x twice;
Liger-Kernel's layout (private ``@triton.jit`` kernel plus a launcher).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from dsbench.kernels.triton._common import (
    check_device,
    check_dtype,
    fail,
    interpret_requested,
    interpreted,
)

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _configs() -> list[triton.Config]:
    if interpret_requested():  # the interpreter cannot benchmark several configs
        return [triton.Config({"BLOCK": 65536}, num_warps=4)]
    return [
        triton.Config({"BLOCK": block}, num_warps=warps)
        for block in (1024, 2048, 4096)
        for warps in (4, 8)
    ]


@triton.jit
def round_fp32_to(x, dtype: tl.constexpr, SOFT_BF16: tl.constexpr):
    """fp32 ``x`` rounded to nearest-even ``dtype``. ``SOFT_BF16`` rounds to bf16 on the bits
    (with NaN kept a NaN), as torch does: Triton's interpreter truncates fp32 -> bf16 casts
    (3.8's ``cast_impl`` passes no rounding mode), while GPUs round to nearest even. The
    launchers set it under the interpreter only; shared with ``gemm``."""
    if SOFT_BF16 and dtype == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        bits = tl.where(x != x, 0x7FC0, bits)
        return bits.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(dtype)


@triton.autotune(configs=_configs(), key=["n"], restore_value=["acc_ptr"])
@triton.jit
def _reduce_add_kernel(acc_ptr, x_ptr, n, SOFT_BF16: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.load(acc_ptr + offs, mask=mask).to(tl.float32)
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    out = round_fp32_to(acc + x, acc_ptr.dtype.element_ty, SOFT_BF16)
    tl.store(acc_ptr + offs, out, mask=mask)


def reduce_add(acc: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """acc += x in place, computed in fp32; returns ``acc``."""
    check_dtype("reduce_add", "acc", acc, _DTYPES)
    check_dtype("reduce_add", "x", x, _DTYPES)
    if acc.numel() != x.numel():
        fail(
            "reduce_add",
            f"acc and x must have the same number of elements; got {acc.numel()} "
            f"{tuple(acc.shape)} and {x.numel()} {tuple(x.shape)}",
        )
    check_device("reduce_add", _reduce_add_kernel, acc, x)
    n = acc.numel()
    if n == 0:
        return acc
    work = acc if acc.is_contiguous() else acc.contiguous()
    if _overlaps(work, x) and not (x.data_ptr() == work.data_ptr() and x.is_contiguous()):
        x = x.clone()  # a shifted view of acc would be read after parts of it were written
    x = x.contiguous()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    _reduce_add_kernel[grid](work, x, n, SOFT_BF16=interpreted(_reduce_add_kernel))
    if work is not acc:
        acc.copy_(work)
    return acc


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
