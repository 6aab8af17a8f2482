"""Hand-written CUDA/HIP kernels (one source for both; ROCm builds of torch hipify it).

Registers the ``cuda`` implementation of ``adamw``, ``gemm`` and ``reduce_add``. Importing this
module is cheap: nothing is built until an implementation is first called
(:mod:`dsbench.kernels.cuda.build`); :mod:`dsbench.kernels.cuda.compile_check` compiles every
kernel for A100, H100/H200 and MI250X on a machine without a GPU.
"""

from __future__ import annotations

from dsbench.kernels.registry import Impl, register


def available(device: str) -> tuple[bool, str]:
    """``(can_run, why_not)`` for the registry: no GPU, no nvcc/hipcc, or an earlier failed build
    make it unavailable."""
    from dsbench.kernels.cuda import build

    return build.toolchain_status(device)


_IMPLS = (
    (
        "adamw",
        "fused multi-tensor Adam/AdamW, hand-written CUDA/HIP (one launch per list)",
    ),
    (
        "gemm",
        "tiled GEMM, hand-written CUDA/HIP: WMMA tensor cores (sm_80+), MFMA (CDNA), portable",
    ),
    ("reduce_add", "vectorized acc += x in fp32, hand-written CUDA/HIP"),
)

for _op, _description in _IMPLS:
    register(
        Impl(
            op=_op,
            name="cuda",
            target=f"dsbench.kernels.cuda.ops:{_op}",
            description=_description,
            check=available,
        )
    )
