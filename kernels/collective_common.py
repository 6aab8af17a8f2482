"""What the collective implementations over a process group share (``ring.py``, ``shm.py`` and
``shm_sum.py``): this rank's place in the group, the checks of their arguments, the cut of a
tensor into per-rank segments, running outside autograd, and whether two tensors overlap.
Importing it is cheap: torch is imported inside the functions."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

REDUCE_DTYPES = ("float32", "float16", "bfloat16")
"""What the reducing collectives sum (in fp32, through ``reduce_add`` or ``shm_sum``)."""


def no_grad(fn):
    """Run ``fn`` under ``torch.no_grad()`` (imported at call time), as collectives are not
    recorded by autograd: in-place work on a leaf that requires grad must not raise."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import torch

        with torch.no_grad():
            return fn(*args, **kwargs)

    return wrapper


def group_rank(group) -> tuple[object, int] | None:
    """(the process group, this process's rank in it) for ``group`` (None: the world group);
    None when this process is not a member of it (the collective is then a no-op)."""
    import torch.distributed as dist

    pg = group if group is not None else dist.group.WORLD
    rank = dist.get_rank(pg)
    return None if rank < 0 else (pg, rank)


def split(total: int, parts: int) -> list[int]:
    """Boundaries of ``parts`` contiguous pieces of ``total`` whose sizes differ by at most one."""
    return [i * total // parts for i in range(parts + 1)]


def check_reducible(op: str, tensor: torch.Tensor, impl: str) -> None:
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in REDUCE_DTYPES:
        raise TypeError(
            f"{impl} {op}: dtype {name} is not supported (reductions run in fp32 via reduce_add); "
            f"use one of {', '.join(REDUCE_DTYPES)} or the native implementation"
        )


def check_pair(op: str, part, whole, n: int, whole_name: str, part_name: str, impl: str) -> None:
    """``whole`` is ``n`` chunks the size of ``part``, of the same dtype and device."""
    if part.dtype != whole.dtype or part.device != whole.device:
        raise ValueError(
            f"{impl} {op}: {whole_name} and {part_name} must share dtype and device, got "
            f"{whole.dtype} on {whole.device} and {part.dtype} on {part.device}"
        )
    if whole.numel() != n * part.numel():
        raise ValueError(
            f"{impl} {op}: {whole_name} must have world_size ({n}) x {part_name}.numel() elements, "
            f"got {whole.numel()} and {part.numel()}"
        )


def overlaps(a, b) -> bool:
    """Whether two tensors share any bytes of storage."""
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()
