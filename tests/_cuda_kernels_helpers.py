"""Shared by the kernels/csrc tests (tests/test_cuda_kernels*.py): skip, or fail when $CI is
set, without a compiler."""

from __future__ import annotations

import os

import pytest

from dsbench.kernels.cuda import compile_check


def need(*compilers: str) -> None:
    """Skip (fail when $CI is set) unless every compiler is installed."""
    missing = [c for c in compilers if compile_check.find_compiler(c) is None]
    if not missing:
        return
    why = (
        f"{' and '.join(missing)} not installed (make test runs kernels/csrc/install_hip.sh, "
        "which needs root for hipcc; nvcc comes with the CUDA toolkit); required when CI is set"
    )
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)
