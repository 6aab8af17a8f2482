"""Kernel registry: op -> implementations, each with an availability check.

Implementations are frozen dataclasses; the callable is imported lazily from ``target``
("module:attr") so that asking what exists never imports Triton or builds an extension.
``DSBENCH_<OP>_IMPL`` (e.g. ``DSBENCH_ADAMW_IMPL=torch``) overrides the default per op; an unknown
name is a one-line error listing the valid ones.

Every implementation of an op has the same signature, the one its torch reference in
``kernels/reference.py`` documents; callers (ZeRO engine, models, benchmarks) never know which one
they got. Implementation families register themselves from their own modules, listed in
:data:`PLUGINS` (imported on first use of the registry; a family whose module is absent is simply
not registered).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from dsbench.errors import UsageError, choices_message

OPS: dict[str, str] = {
    "adamw": "AdamW/Adam step on fp32 master params and moments",
    "gemm": "matrix multiply C = A @ B (fp32 accumulation)",
    "reduce_add": "local reduction acc += x, computed in fp32",
    "allreduce": "sum all-reduce over the process group",
    "reduce_scatter": "sum reduce-scatter over the process group",
    "allgather": "all-gather into one tensor over the process group",
}

PLUGINS = (
    "dsbench.kernels.triton",
    "dsbench.kernels.cuda",
    "dsbench.kernels.ring",
    "dsbench.kernels.shm",
)
"""Modules that register more implementations when imported (must import cheaply)."""


def _always(device: str) -> tuple[bool, str]:
    return True, ""


def needs_distributed(device: str) -> tuple[bool, str]:
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
    buffers: str | None = None
    """Collectives only: the module that allocates buffers they read in place, or None. It has
    ``replicated_zeros(numel, dtype, group)`` (all-gather output), ``symmetric_zeros(numel,
    dtype, group)`` (reduce-scatter input), each returning a tensor or None, and
    ``fence(group)``; see ``kernels/shm.py``."""

    def available(self, device: str) -> tuple[bool, str]:
        try:
            return self.check(device)
        except Exception as exc:  # an availability probe must never crash a report
            return False, f"availability check failed: {exc}"

    def load(self) -> Callable:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def load_buffers(self):
        """The module of :attr:`buffers`, or None."""
        return importlib.import_module(self.buffers) if self.buffers else None


_REGISTRY: dict[str, dict[str, Impl]] = {op: {} for op in OPS}
DEFAULTS: dict[str, str] = {
    "adamw": "torch",
    "gemm": "torch",
    "reduce_add": "torch",
    "allreduce": "native",
    "reduce_scatter": "native",
    "allgather": "native",
}
_plugins_loaded = False


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for module in PLUGINS:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # the family exists but is broken: say so loudly
                raise


def release_workspaces() -> None:
    """Drop what implementations keep between calls (the ``shm`` collectives' shared mapping):
    engines call this when they are destroyed, without knowing which implementations they used.
    The next call sets its workspace up again."""
    for module in PLUGINS:
        release = getattr(sys.modules.get(module), "release_workspaces", None)
        if release is not None:
            release()


def register(impl: Impl) -> Impl:
    if impl.op not in OPS:
        raise ValueError(choices_message("op", impl.op, OPS))
    _REGISTRY[impl.op][impl.name] = impl
    return impl


def names(op: str) -> list[str]:
    return sorted(_impls(op))


def _impls(op: str) -> dict[str, Impl]:
    _load_plugins()
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
        check=needs_distributed,
    )
)
register(
    Impl(
        op="reduce_scatter",
        name="native",
        target="dsbench.kernels.reference:reduce_scatter",
        description="torch.distributed.reduce_scatter_tensor (NCCL / RCCL / gloo)",
        check=needs_distributed,
    )
)
register(
    Impl(
        op="reduce_add",
        name="torch",
        target="dsbench.kernels.reference:reduce_add",
        description="acc += x with torch (fp32 arithmetic)",
    )
)
register(
    Impl(
        op="allgather",
        name="native",
        target="dsbench.kernels.reference:allgather",
        description="torch.distributed.all_gather_into_tensor (NCCL / RCCL / gloo)",
        check=needs_distributed,
    )
)
