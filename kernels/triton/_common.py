"""Helpers shared by the Triton kernels: interpreter detection, the active backend, input checks
with errors that name the kernel, and the comparison helper the tests (and any verification
script) use to report mismatches.

Importing this module imports neither Triton nor torch (the package ``__init__`` uses it).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_TRUE = ("1", "true", "on")  # what Triton's own getenv_bool accepts for TRITON_INTERPRET


def interpret_requested() -> bool:
    """Whether ``TRITON_INTERPRET`` asks for interpreter mode (read as Triton reads it)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in _TRUE


def interpreted(kernel) -> bool:
    """Whether ``kernel`` (a ``@triton.jit`` function, possibly wrapped by ``triton.autotune``)
    was built for the interpreter. Decided when the kernel was decorated, so this, not the
    current environment, says how it will run."""
    while hasattr(kernel, "fn") and type(kernel).__name__ != "InterpretedFunction":
        kernel = kernel.fn
    return type(kernel).__name__ == "InterpretedFunction"


def active_backend(kernel) -> str:
    """``"interpreter"``, ``"cuda"`` or ``"hip"``: from the active Triton target, never from a
    device-name string (Triton tutorial 03's ``is_cuda()``)."""
    if interpreted(kernel):
        return "interpreter"
    import triton

    return triton.runtime.driver.active.get_current_target().backend


def fail(kernel: str, constraint: str) -> None:
    """Raise the one error type every launcher uses for unsupported input."""
    raise ValueError(f"triton {kernel}: {constraint}")


def check_device(kernel_name: str, kernel, *tensors: torch.Tensor) -> torch.device:
    """All ``tensors`` on one device that ``kernel`` can address; returns that device."""
    device = tensors[0].device
    for t in tensors[1:]:
        if t.device != device:
            fail(kernel_name, f"all tensors must be on one device, got {device} and {t.device}")
    if device.type == "cpu" and not interpreted(kernel):
        fail(
            kernel_name,
            "tensors are on the CPU; Triton needs a GPU, or TRITON_INTERPRET=1 set before the "
            "kernels are imported",
        )
    return device


def check_dtype(kernel: str, what: str, t: torch.Tensor, allowed: tuple[torch.dtype, ...]) -> None:
    if t.dtype not in allowed:
        names = ", ".join(str(d).removeprefix("torch.") for d in allowed)
        fail(kernel, f"{what} must be {names}; got {str(t.dtype).removeprefix('torch.')}")


def mismatch_report(
    actual: torch.Tensor,
    expected: torch.Tensor,
    *,
    atol: float,
    rtol: float,
    name: str = "tensor",
    show: int = 5,
) -> str | None:
    """``None`` when ``|actual - expected| <= atol + rtol*|expected|`` everywhere (NaN matches
    NaN, inf matches the same inf); otherwise a report: mismatch count, NaN/inf mismatches and
    the ``show`` worst indices with both values (as ``torch.testing.assert_close`` reports)."""
    import torch

    if actual.shape != expected.shape:
        return f"{name}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    a = actual.detach().double().cpu()
    e = expected.detach().double().cpu()
    a_nan, e_nan = torch.isnan(a), torch.isnan(e)
    a_inf, e_inf = torch.isinf(a), torch.isinf(e)
    nonfinite_bad = (a_nan != e_nan) | (a_inf != e_inf) | (a_inf & e_inf & (a != e))
    finite = torch.isfinite(a) & torch.isfinite(e)
    err = torch.where(finite, (a - e).abs(), torch.zeros_like(a))
    tol = atol + rtol * e.abs()
    bad = nonfinite_bad | (finite & (err > tol))
    n_bad = int(bad.sum())
    if n_bad == 0:
        return None
    # rank by how far past the tolerance each element is; non-finite mismatches first
    excess = torch.where(finite, err / torch.where(tol > 0, tol, 1e-300), torch.zeros_like(a))
    excess = torch.where(nonfinite_bad, torch.full_like(a, float("inf")), excess)
    worst = torch.topk(excess.flatten(), min(show, n_bad)).indices
    lines = [
        f"{name}: {n_bad} of {a.numel()} elements differ beyond atol={atol:g}, rtol={rtol:g} "
        f"({int(nonfinite_bad.sum())} NaN/inf mismatches); max abs err on finite "
        f"elements {float(err.max()):.3g}; worst:"
    ]
    for flat in worst.tolist():
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape))
        lines.append(
            f"  {idx if a.dim() != 1 else idx[0]}: got {a.flatten()[flat].item():.8g}, "
            f"expected {e.flatten()[flat].item():.8g}"
        )
    return "\n".join(lines)


def assert_close(actual, expected, *, atol: float, rtol: float, name: str = "tensor") -> None:
    """``AssertionError`` carrying :func:`mismatch_report` when the tensors differ."""
    report = mismatch_report(actual, expected, atol=atol, rtol=rtol, name=name)
    if report:
        raise AssertionError(report)
