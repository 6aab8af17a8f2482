"""Kernel registry: op -> implementations, each with an availability check.

Implementations are frozen dataclasses; the callable is imported lazily from ``target``
("module:attr") so that asking what exists never imports Triton or builds an extension.
``DSBENCH_<OP>_IMPL`` (e.g. ``DSBENCH_ADAMW_IMPL=torch``) overrides the default per op; an unknown
name is a one-line error listing the valid ones.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from dsbench.errors import UsageError, choices_message

OPS: dict[str, str] = {
    "adamw": "AdamW/Adam step on fp32 master params and moments",
    "gemm": "matrix multiply C = A @ B (fp32 accumulation)",
    "allreduce": "sum all-reduce over the process group",
    "reduce_scatter": "sum reduce-scatter over the process group",
}


def _always(device: str) -> tuple[bool, str]:
    return True, ""


def _distributed(device: str) -> tuple[bool, str]:
    import torch.distributed as dist

    if not dist.is_available():
        return False, "torch was built without torch.distributed"
    if device == "cpu" and not dist.is_gloo_available():
        return False, "gloo backend not built into torch"
    if device != "cpu" and not dist.is_nccl_available():
        return False, "NCCL/RCCL backend not built into torch"
    return True, ""


@dataclass(frozen=True, kw_only=True)
class Impl:
    """One implementation of one op."""

    op: str
    """Op name, a key of :data:`OPS`."""
    name: str
    """Implementation name: ``torch``, ``triton``, ``cuda``, ``native``, ``ring``."""
    target: str
    """``module:attr`` of the callable, imported on first use."""
    description: str
    check: Callable[[str], tuple[bool, str]] = field(default=_always, compare=False)
    """``check(device) -> (can_run, why_not)`` for device ``cpu``/``cuda``."""

    def available(self, device: str) -> tuple[bool, str]:
        try:
            return self.check(device)
        except Exception as exc:  # an availability probe must never crash a report
            return False, f"availability check failed: {exc}"

    def load(self) -> Callable:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)


_REGISTRY: dict[str, dict[str, Impl]] = {op: {} for op in OPS}
DEFAULTS: dict[str, str] = {
    "adamw": "torch",
    "gemm": "torch",
    "allreduce": "native",
    "reduce_scatter": "native",
}


def register(impl: Impl) -> Impl:
    if impl.op not in OPS:
        raise ValueError(choices_message("op", impl.op, OPS))
    _REGISTRY[impl.op][impl.name] = impl
    return impl


def names(op: str) -> list[str]:
    return sorted(_impls(op))


def _impls(op: str) -> dict[str, Impl]:
    if op not in _REGISTRY:
        raise UsageError(choices_message("kernel op", op, OPS))
    return _REGISTRY[op]


def get(op: str, name: str | None = None) -> Impl:
    """Implementation ``name`` of ``op``; default: ``DSBENCH_<OP>_IMPL``, else :data:`DEFAULTS`."""
    impls = _impls(op)
    env_var = f"DSBENCH_{op.upper()}_IMPL"
    chosen = name or os.environ.get(env_var) or DEFAULTS[op]
    if chosen not in impls:
        source = f" (from {env_var})" if not name and os.environ.get(env_var) else ""
        raise UsageError(choices_message(f"{op} implementation", chosen, impls) + source)
    return impls[chosen]


def table(device: str) -> list[dict]:
    """One row per (op, impl): whether it can run on ``device`` and, if not, why."""
    rows = []
    for op in OPS:
        for impl in _impls(op).values():
            ok, why = impl.available(device)
            rows.append(
                {
                    "op": op,
                    "impl": impl.name,
                    "available": ok,
                    "reason": why,
                    "description": impl.description,
                }
            )
    return rows


register(
    Impl(
        op="adamw",
        name="torch",
        target="dsbench.kernels.reference:adamw",
        description="torch.optim AdamW functional step (fused where available)",
    )
)
register(
    Impl(
        op="gemm",
        name="torch",
        target="dsbench.kernels.reference:gemm",
        description="torch.matmul (cuBLAS / hipBLASLt / oneDNN)",
    )
)
register(
    Impl(
        op="allreduce",
        name="native",
        target="dsbench.kernels.reference:allreduce",
        description="torch.distributed.all_reduce (NCCL / RCCL / gloo)",
        check=_distributed,
    )
)
register(
    Impl(
        op="reduce_scatter",
        name="native",
        target="dsbench.kernels.reference:reduce_scatter",
        description="torch.distributed.reduce_scatter_tensor (NCCL / RCCL / gloo)",
        check=_distributed,
    )
)
