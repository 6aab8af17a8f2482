"""Kernel registry and torch references."""

import pytest
import torch

from dsbench.errors import UsageError
from dsbench.kernels import reference, registry


def test_defaults_and_env_override(monkeypatch):
    assert registry.get("adamw").name == "torch"
    assert registry.get("allreduce").name == "native"
    monkeypatch.setenv("DSBENCH_GEMM_IMPL", "cutlass")
    with pytest.raises(
        UsageError,
        match=r"unknown gemm implementation 'cutlass'; valid: torch "
        r"\(from DSBENCH_GEMM_IMPL\)",
    ):
        registry.get("gemm")
    with pytest.raises(UsageError, match="unknown kernel op 'gemv'"):
        registry.get("gemv")


def test_table_says_what_can_run():
    rows = registry.table("cpu")
    assert {(r["op"], r["impl"]) for r in rows} >= {
        ("adamw", "torch"),
        ("gemm", "torch"),
        ("allreduce", "native"),
        ("reduce_scatter", "native"),
    }
    assert all(r["available"] for r in rows if r["impl"] in ("torch", "native"))


@pytest.mark.parametrize("fused", [False, True])
def test_reference_adamw_matches_torch_optim(fused):
    if fused and not reference.fused_adamw_supported("cpu"):
        pytest.skip("fused AdamW not available on CPU in this torch")
    n, hp = 1001, dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
    p0, grads = torch.randn(n), [torch.randn(n) for _ in range(3)]
    ref = torch.nn.Parameter(p0.clone())
    opt = torch.optim.AdamW([ref], **hp, foreach=False)
    p, m, v, step = p0.clone(), torch.zeros(n), torch.zeros(n), torch.zeros(())
    for g in grads:
        ref.grad = g.clone()
        opt.step()
        reference.adamw(
            [p],
            [g.clone()],
            [m],
            [v],
            [step],
            lr=hp["lr"],
            beta1=0.9,
            beta2=0.99,
            eps=1e-8,
            weight_decay=0.1,
            fused=fused,
        )
    torch.testing.assert_close(p, ref.detach(), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(m, opt.state[ref]["exp_avg"], atol=1e-6, rtol=1e-5)
    assert step.item() == 3
