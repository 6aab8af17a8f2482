"""Triton implementations of ``adamw``, ``gemm`` and ``reduce_add``, registered as ``triton``.

Importing this package registers them and nothing more: Triton itself is imported only by the
availability check and when a kernel module is first loaded through the registry. The kernels
run on a CUDA or ROCm GPU, or on the CPU under ``TRITON_INTERPRET=1`` (Triton's interpreter:
correct, slow, and it must be set before the kernel modules are imported, since ``@triton.jit``
decides at decoration time).
"""

from __future__ import annotations

from dsbench.kernels.registry import Impl, register
from dsbench.kernels.triton._common import interpret_requested

INTERPRETER_NOTE = "interpreter mode (TRITON_INTERPRET=1): correct but slow"


def available(device: str) -> tuple[bool, str]:
    """``(can_run, reason)`` for ``device`` ``cpu``/``cuda``; the reason may be set when it can
    run, to say it runs only in the interpreter."""
    import importlib.util

    # find_spec, not import: importing Triton costs resident memory in every rank, which a CPU
    # run that cannot use it should not pay (the kernel modules import it; docs/decisions.md,
    # "Triton looked up, not imported")
    if importlib.util.find_spec("triton") is None:
        return False, "triton is not installed"
    if device.startswith("cpu"):
        if interpret_requested():
            return True, INTERPRETER_NOTE
        return False, "no GPU; Triton runs on CPU only in interpreter mode (set TRITON_INTERPRET=1)"
    import torch

    if not torch.cuda.is_available():
        return False, "no CUDA/ROCm device visible to torch"
    if interpret_requested():
        return True, INTERPRETER_NOTE
    return True, ""


register(
    Impl(
        op="adamw",
        name="triton",
        target="dsbench.kernels.triton.adamw:adamw",
        description="Triton fused AdamW/Adam: flat buffer or chunk-table list, no host sync",
        check=available,
    )
)
register(
    Impl(
        op="gemm",
        name="triton",
        target="dsbench.kernels.triton.gemm:gemm",
        description="Triton tiled GEMM, grouped order, autotuned per vendor (fp32 accumulation)",
        check=available,
    )
)
register(
    Impl(
        op="reduce_add",
        name="triton",
        target="dsbench.kernels.triton.reduce:reduce_add",
        description="Triton acc += x in fp32, rounded once to acc's dtype",
        check=available,
    )
)
