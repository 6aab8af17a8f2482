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
        match=r"unknown gemm implementation 'cutlass'; valid: (\w+, )*torch(, \w+)* "
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


def test_registry_linear_matches_nn_linear_forward_and_grads():
    from dsbench.kernels.autograd import Linear

    torch.manual_seed(0)
    ref = torch.nn.Linear(33, 17)
    lin = Linear(33, 17, impl="torch")
    lin.load_state_dict(ref.state_dict())
    x = torch.randn(4, 5, 33, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    ref(x).square().sum().backward()
    lin(x2).square().sum().backward()
    torch.testing.assert_close(x2.grad, x.grad)
    torch.testing.assert_close(lin.weight.grad, ref.weight.grad)
    torch.testing.assert_close(lin.bias.grad, ref.bias.grad)


def test_reference_adamw_unscale_skip_and_l2_mode():
    p, g = torch.ones(8), torch.full((8,), 2.0)
    m, v, step, found = torch.zeros(8), torch.zeros(8), torch.zeros(()), torch.zeros(())
    kw = dict(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0)
    bad = g.clone()
    bad[3] = float("inf")
    reference.adamw(
        [p], [bad], [m], [v], [step], grad_scale=torch.tensor(4.0), found_inf=found, **kw
    )
    assert found.item() == 1 and step.item() == 0 and torch.equal(p, torch.ones(8))
    reference.adamw([p], [g], [m], [v], [step], grad_scale=torch.tensor(4.0), found_inf=found, **kw)
    assert found.item() == 0 and step.item() == 1
    torch.testing.assert_close(m, torch.full((8,), 0.05))  # (1 - 0.9) * 2 / 4
    # Adam (L2) adds wd * p to the gradient instead of decaying p directly. Adam's first step
    # is normalised (m / sqrt(v) = ±1 whatever the gradient), so an L2 path that ignored the
    # decay would pass a one-step check: compare two steps and the moments with torch's own.
    for mode, torch_cls in ((False, torch.optim.Adam), (True, torch.optim.AdamW)):
        p_, m_, v_, t_ = torch.ones(4), torch.zeros(4), torch.zeros(4), torch.zeros(())
        ref = torch.nn.Parameter(torch.ones(4))
        opt = torch_cls([ref], lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.5)
        for grad in (torch.ones(4), torch.full((4,), -0.5)):
            reference.adamw(
                [p_], [grad], [m_], [v_], [t_],
                lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.5, adamw_mode=mode,
            )  # fmt: skip
            ref.grad = grad.clone()
            opt.step()
        torch.testing.assert_close(p_, ref.detach(), atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(m_, opt.state[ref]["exp_avg"], atol=1e-7, rtol=1e-6)
        torch.testing.assert_close(v_, opt.state[ref]["exp_avg_sq"], atol=1e-7, rtol=1e-6)


def test_table_cache_builds_once_per_layout_and_keeps_the_newest():
    """The pointer/chunk table cache the Triton and CUDA AdamW share: one build per key, least
    recently used dropped beyond its size."""
    from dsbench.kernels.table_cache import TableCache

    cache, builds = TableCache(2), []

    def build(key):
        builds.append(key)
        return f"table {key}"

    assert cache.get("a", lambda: build("a")) == "table a"
    assert cache.get("a", lambda: build("a")) == "table a"
    cache.get("b", lambda: build("b"))
    cache.get("a", lambda: build("a"))  # a is now the most recently used
    cache.get("c", lambda: build("c"))  # drops b
    cache.get("b", lambda: build("b"))
    assert builds == ["a", "b", "c", "b"] and len(cache) == 2
    cache.clear()
    assert len(cache) == 0
