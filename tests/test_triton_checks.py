"""The numerical checks of the Triton kernels (``adamw``, ``gemm``, ``reduce_add``) against the
torch references, in Triton's interpreter. They are ``check_*`` functions, which pytest does
not collect by default: ``test_interpreter_suite`` in tests/test_triton_kernels.py (which says
why) runs them in a child pytest started with ``TRITON_INTERPRET=1``. To run them directly::

    TRITON_INTERPRET=1 pytest tests/test_triton_checks.py -o python_functions=check_*

Inputs are random and odd-sized; outputs are poisoned with NaN before each run: ``torch.empty``
returns NaN-filled tensors while a kernel runs, and in-place operands are carved out of
NaN-filled buffers whose gaps must still be NaN afterwards (a write past a tensor's end shows).
Tolerances are explicit ``(dtype, atol, rtol)`` parameters.
"""

from __future__ import annotations

import importlib
import math
import types

import pytest
import torch

triton = pytest.importorskip("triton")

from dsbench.kernels import reference, registry  # noqa: E402
from dsbench.kernels.triton._common import (  # noqa: E402
    assert_close,
    interpret_requested,
    interpreted,
)

NAN = float("nan")
INTERPRETER_SESSION = interpret_requested() and interpreted(triton.language.standard.max)
"""This process imported Triton with the interpreter on: the numerical tests run here."""
MODULES = ("reduce", "gemm", "adamw")  # reduce first: gemm imports its rounding helper


@pytest.fixture(scope="module")
def tk():
    """The kernel modules, built for the interpreter (only in an interpreter session)."""
    if not INTERPRETER_SESSION:
        pytest.skip("needs TRITON_INTERPRET=1 set before triton is imported")
    mods = {n: importlib.import_module(f"dsbench.kernels.triton.{n}") for n in MODULES}
    assert interpreted(mods["gemm"]._gemm_kernel), "kernels were not built for the interpreter"
    return types.SimpleNamespace(**mods)


@pytest.fixture
def poisoned_empty(monkeypatch):
    """``torch.empty`` returns NaN-filled floating-point tensors (outputs start poisoned)."""
    real_empty = torch.empty

    def empty(*args, **kwargs):
        t = real_empty(*args, **kwargs)
        return t.fill_(NAN) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", empty)


def _ids(value):
    """Test ids that name dtypes ("bfloat16", not "dtype2")."""
    return str(value).removeprefix("torch.") if isinstance(value, torch.dtype) else None


def carve(shapes, dtype, gap=3, fill=None):
    """Contiguous tensors of ``shapes`` carved out of one NaN-filled buffer, ``gap`` NaN elements
    before, between and after them; each filled with ``fill(shape)`` when given. Returns
    (buffer, tensors, guard mask)."""
    sizes = [math.prod(s) for s in shapes]
    buf = torch.full((sum(sizes) + gap * (len(sizes) + 1),), NAN, dtype=dtype)
    guard = torch.ones(buf.numel(), dtype=torch.bool)
    views, off = [], gap
    for shape, n in zip(shapes, sizes, strict=True):
        v = buf[off : off + n].view(shape)
        if fill is not None:
            v.copy_(fill(shape))
        views.append(v)
        guard[off : off + n] = False
        off += n + gap
    return buf, views, guard


def assert_guards_intact(buf, guard, name):
    written = int((~torch.isnan(buf[guard])).sum())
    assert written == 0, f"{name}: {written} elements written outside the tensors"


# --------------------------------------------------------------------------------------------
# AdamW
# --------------------------------------------------------------------------------------------

HYPER = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1)

# (grad dtype, atol, rtol) for p, m and v after several steps. 16-bit gradients widen exactly to
# fp32, so all three agree as tightly. atol = 1% of lr: Adam divides by sqrt(v) + eps, which is
# ill-conditioned where the gradient nearly cancels (g + wd*p in Adam mode), and there one fp32
# rounding, taken in a different order than torch's, moves p by up to ~1e-3 * lr.
ADAM_TOLS = [
    (torch.float32, 1e-5, 1e-5),
    (torch.float16, 1e-5, 1e-5),
    (torch.bfloat16, 1e-5, 1e-5),
]


def _adam_state(shapes, steps_at=0.0):
    """Kernel state carved from poisoned buffers, and an independent copy for the reference."""
    p_buf, p, p_guard = carve(shapes, torch.float32, fill=torch.randn)
    m_buf, m, m_guard = carve(shapes, torch.float32, fill=lambda s: 0.1 * torch.randn(s))
    v_buf, v, v_guard = carve(shapes, torch.float32, fill=lambda s: 1e-3 * torch.rand(s))
    steps = [torch.full((), steps_at) for _ in shapes]
    ref = [[t.clone() for t in ts] for ts in (p, m, v, steps)]
    bufs = [
        (p_buf, p_guard, "params"),
        (m_buf, m_guard, "exp_avgs"),
        (v_buf, v_guard, "exp_avg_sqs"),
    ]
    return (p, m, v, steps), ref, bufs


def _grads(shapes, grad_dtypes, scale=1.0):
    return [(scale * torch.randn(s)).to(dt) for s, dt in zip(shapes, grad_dtypes, strict=True)]


def _run_adam(tk, shapes, grad_dtypes, *, adamw_mode, grad_scale, n_steps, atol, rtol):
    (p, m, v, steps), (rp, rm, rv, rsteps), bufs = _adam_state(shapes)
    scale = None if grad_scale is None else torch.tensor(grad_scale)
    for _ in range(n_steps):
        grads = _grads(shapes, grad_dtypes, scale=grad_scale or 1.0)
        found = torch.full((1,), NAN)  # poisoned: the kernel must write it
        tk.adamw.adamw(
            p,
            [g.clone() for g in grads],
            m,
            v,
            steps,
            adamw_mode=adamw_mode,
            grad_scale=scale,
            found_inf=found,
            **HYPER,
        )
        reference.adamw(rp, grads, rm, rv, rsteps, adamw_mode=adamw_mode, grad_scale=scale, **HYPER)
        if scale is not None:
            assert found.item() == 0.0
        else:
            assert torch.isnan(found).all(), "found_inf is only touched when grad_scale is given"
    for name, got, want in (("params", p, rp), ("exp_avgs", m, rm), ("exp_avg_sqs", v, rv)):
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_close(a, b, atol=atol, rtol=rtol, name=f"{name}[{i}] {tuple(a.shape)}")
    assert [s.item() for s in steps] == [float(n_steps)] * len(shapes)
    for buf, guard, name in bufs:
        assert_guards_intact(buf, guard, name)


@pytest.mark.parametrize(
    "grad_dtype, atol, rtol, adamw_mode, grad_scale",
    [(*ADAM_TOLS[0], True, None), (*ADAM_TOLS[1], False, 1024.0), (*ADAM_TOLS[2], True, 1024.0)],
    ids=_ids,
)
def check_adamw_flat_buffer_1000003(tk, grad_dtype, atol, rtol, adamw_mode, grad_scale):
    """The ZeRO partition case: one flat buffer of 1,000,003 elements, two steps."""
    _run_adam(
        tk,
        [(1_000_003,)],
        [grad_dtype],
        adamw_mode=adamw_mode,
        grad_scale=grad_scale,
        n_steps=2,
        atol=atol,
        rtol=rtol,
    )


def _odd_shapes(n=50):
    """~50 odd sizes (1 element to more than two interpreter chunks), some of them 2-D."""
    g = torch.Generator().manual_seed(1)
    sizes = torch.randint(1, 3000, (n - 4,), generator=g).tolist()
    shapes = [(s | 1,) for s in sizes] + [(1,), (33, 17), (7, 3, 5), (2 * 65536 + 3,)]
    return shapes


@pytest.mark.parametrize(
    "grad_dtype, atol, rtol, adamw_mode, grad_scale",
    [(*ADAM_TOLS[0], False, 1024.0), (*ADAM_TOLS[1], True, None), (*ADAM_TOLS[2], False, None)],
    ids=_ids,
)
def check_adamw_list_of_tensors(tk, grad_dtype, atol, rtol, adamw_mode, grad_scale):
    """50 odd-sized tensors in one launch (chunk table), three steps. With the flat-buffer
    cases, every gradient dtype runs in both modes, with and without the scaler."""
    shapes = _odd_shapes()
    _run_adam(
        tk,
        shapes,
        [grad_dtype] * len(shapes),
        adamw_mode=adamw_mode,
        grad_scale=grad_scale,
        n_steps=3,
        atol=atol,
        rtol=rtol,
    )


class _CountLaunches:
    """Stands in for a kernel and counts its launches."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid):
        self.launches += 1
        return self.kernel[grid]


def check_adamw_list_with_mixed_grad_dtypes(tk, monkeypatch):
    """fp32, fp16 and bf16 gradients in one list of 20 tensors: per step, one inf/NaN-check
    launch and one update launch per dtype group, never one per tensor."""
    counters = {}
    for name in ("_adamw_multi_kernel", "_nonfinite_multi_kernel"):
        counters[name] = _CountLaunches(getattr(tk.adamw, name))
        monkeypatch.setattr(tk.adamw, name, counters[name])
    monkeypatch.setattr(tk.adamw, "_launch_flat", None)  # the per-tensor path must not run
    shapes = _odd_shapes(20)
    dtypes = [(torch.float32, torch.float16, torch.bfloat16)[i % 3] for i in range(len(shapes))]
    _run_adam(tk, shapes, dtypes, adamw_mode=True, grad_scale=8.0, n_steps=2, atol=1e-5, rtol=1e-5)
    assert [c.launches for c in counters.values()] == [2 * 3, 2 * 3]


@pytest.mark.parametrize("shapes", [[(1_000_003,)], _odd_shapes(12)], ids=["flat", "list"])
@pytest.mark.parametrize("bad", [float("inf"), NAN], ids=["inf", "nan"])
def check_adamw_skips_step_on_nonfinite_grad(tk, shapes, bad):
    """An inf/NaN unscaled gradient anywhere: found_inf = 1 and nothing else changes; the next
    finite step is applied and counted."""
    dtypes = [torch.float16] * len(shapes)
    (p, m, v, steps), _, bufs = _adam_state(shapes, steps_at=4.0)
    before = [[t.clone() for t in ts] for ts in (p, m, v, steps)]
    grads = _grads(shapes, dtypes)
    grads[-1].view(-1)[-1] = bad  # last element of the last tensor: the end of the last chunk
    found = torch.full((1,), NAN)
    tk.adamw.adamw(p, grads, m, v, steps, grad_scale=torch.tensor(2.0), found_inf=found, **HYPER)
    assert found.item() == 1.0
    for got, want in zip((p, m, v, steps), before, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True)), (
            "a skipped step changed state"
        )
    # without found_inf the step is still skipped
    tk.adamw.adamw(p, grads, m, v, steps, grad_scale=torch.tensor(2.0), **HYPER)
    assert all(torch.equal(a, b) for a, b in zip(p, before[0], strict=True))
    grads[-1].view(-1)[-1] = 1.0
    found_0d = torch.full((), NAN)
    tk.adamw.adamw(p, grads, m, v, steps, grad_scale=torch.tensor(2.0), found_inf=found_0d, **HYPER)
    assert found_0d.item() == 0.0 and all(s.item() == 5.0 for s in steps)
    assert not torch.equal(p[0], before[0][0])
    for buf, guard, name in bufs:
        assert_guards_intact(buf, guard, name)


def check_adamw_rejects_bad_input(tk):
    p, g, m, v, s = torch.zeros(5), torch.zeros(5), torch.zeros(5), torch.zeros(5), torch.zeros(())
    run = tk.adamw.adamw
    with pytest.raises(ValueError, match=r"triton adamw: params\[0\] must be float32; got float16"):
        run([p.half()], [g], [m], [v], [s], **HYPER)
    with pytest.raises(ValueError, match=r"triton adamw: grads\[0\] must be float32, float16"):
        run([p], [g.double()], [m], [v], [s], **HYPER)
    with pytest.raises(ValueError, match=r"exp_avgs\[0\] must be contiguous"):
        run([p], [g], [torch.zeros(10)[::2]], [v], [s], **HYPER)
    with pytest.raises(ValueError, match=r"must have one shape; got \(5,\), \(4,\)"):
        run([p], [torch.zeros(4)], [m], [v], [s], **HYPER)
    with pytest.raises(ValueError, match="one entry per tensor; got 2, 1"):
        run([p, p], [g], [m], [v], [s], **HYPER)
    with pytest.raises(ValueError, match=r"steps\[0\] must be a one-element float32 tensor"):
        run([p], [g], [m], [v], [torch.zeros(2)], **HYPER)
    run([], [], [], [], [], **HYPER)  # nothing to do


def check_adamw_strided_grad_is_read_through_a_copy(tk):
    p = torch.randn(9)
    rp = p.clone()
    g = torch.randn(9, 2)[:, 0]  # non-contiguous, read-only
    m, v, s = torch.zeros(9), torch.zeros(9), torch.zeros(())
    rm, rv, rs = m.clone(), v.clone(), s.clone()
    tk.adamw.adamw([p], [g], [m], [v], [s], **HYPER)
    reference.adamw([rp], [g.contiguous()], [rm], [rv], [rs], **HYPER)
    assert_close(p, rp, atol=1e-6, rtol=1e-6, name="params")


# --------------------------------------------------------------------------------------------
# GEMM
# --------------------------------------------------------------------------------------------

# (dtype, atol, rtol) against the fp32 product rounded once to the dtype: a 16-bit result may
# differ by one unit in the last place (fp16 2^-10, bf16 2^-7 relative) when the fp32 sums,
# taken in another order, straddle a rounding boundary. fp32 runs with input_precision="ieee".
GEMM_TOLS = [
    (torch.float32, 1e-4, 1e-5),
    (torch.float16, 1e-3, 2e-3),
    (torch.bfloat16, 1e-2, 1.6e-2),
]
GEMM_SHAPES = [(127, 65, 33), (1, 1, 1), (64, 64, 64), (200, 3, 130), (5, 300, 17), (65, 97, 257)]


def _operand(rows, cols, dtype, layout):
    """A [rows, cols] operand: contiguous ("n"), transposed ("t") or a strided slice ("s")."""
    if layout == "t":
        return torch.randn(cols, rows).to(dtype).t()
    if layout == "s":
        return torch.randn(rows + 3, 2 * cols + 1).to(dtype)[1 : rows + 1, 1::2]
    return torch.randn(rows, cols).to(dtype)


def _gemm_expected(a, b):
    return reference.gemm(a.float(), b.float()).to(a.dtype)


@pytest.mark.parametrize("dtype, atol, rtol", GEMM_TOLS, ids=_ids)
@pytest.mark.parametrize("M, N, K", GEMM_SHAPES)
def check_gemm_odd_shapes(tk, poisoned_empty, dtype, atol, rtol, M, N, K):
    a, b = _operand(M, K, dtype, "n"), _operand(K, N, dtype, "n")
    c = tk.gemm.gemm(a, b)
    assert c.dtype == dtype and c.shape == (M, N)
    assert_close(c, _gemm_expected(a, b), atol=atol, rtol=rtol, name=f"C {M}x{N}x{K} {dtype}")


@pytest.mark.parametrize("dtype, atol, rtol", GEMM_TOLS, ids=_ids)
@pytest.mark.parametrize("layout", ["nt", "tn", "tt", "sn", "ns"])
def check_gemm_any_strides(tk, poisoned_empty, dtype, atol, rtol, layout):
    """Transposed and sliced operands (B = W^T as nn.Linear passes it), no copies needed."""
    a = _operand(127, 33, dtype, layout[0])
    b = _operand(33, 65, dtype, layout[1])
    assert not (a.is_contiguous() and b.is_contiguous())
    assert_close(tk.gemm.gemm(a, b), _gemm_expected(a, b), atol=atol, rtol=rtol, name=layout)


def check_gemm_empty_dimensions(tk, poisoned_empty):
    assert tk.gemm.gemm(torch.randn(0, 4), torch.randn(4, 3)).shape == (0, 3)
    assert torch.equal(tk.gemm.gemm(torch.randn(2, 0), torch.randn(0, 3)), torch.zeros(2, 3))


def check_gemm_rejects_bad_input(tk):
    gemm = tk.gemm.gemm
    with pytest.raises(ValueError, match=r"triton gemm: needs 2-D A \[M, K\] and B \[K, N\]"):
        gemm(torch.randn(2, 3, 4), torch.randn(4, 5))
    with pytest.raises(ValueError, match=r"triton gemm: inner dimensions differ: A is \(2, 3\)"):
        gemm(torch.randn(2, 3), torch.randn(4, 5))
    with pytest.raises(ValueError, match="triton gemm: A and B must have one dtype"):
        gemm(torch.randn(2, 3).half(), torch.randn(3, 5))
    with pytest.raises(ValueError, match="triton gemm: supports float16, bfloat16 and float32"):
        gemm(torch.randn(2, 3).double(), torch.randn(3, 5).double())


def check_registry_linear_runs_on_triton_gemm(tk):
    """autograd.Linear with impl="triton": forward and both backward GEMMs match nn.Linear."""
    from dsbench.kernels.autograd import Linear

    ref = torch.nn.Linear(33, 17)
    lin = Linear(33, 17, impl="triton")
    lin.load_state_dict(ref.state_dict())
    x = torch.randn(3, 5, 33, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    ref(x).square().sum().backward()
    lin(x2).square().sum().backward()
    assert_close(x2.grad, x.grad, atol=1e-4, rtol=1e-5, name="dX")
    assert_close(lin.weight.grad, ref.weight.grad, atol=1e-4, rtol=1e-5, name="dW")


# --------------------------------------------------------------------------------------------
# reduce_add
# --------------------------------------------------------------------------------------------

# (acc dtype, x dtype, atol, rtol): one fp32 sum rounded once to nearest even, as the reference
# does, so the results are bit-identical.
REDUCE_TOLS = [
    (torch.float32, torch.float32, 0.0, 0.0),
    (torch.float32, torch.bfloat16, 0.0, 0.0),
    (torch.float16, torch.float32, 0.0, 0.0),
    (torch.float16, torch.float16, 0.0, 0.0),
    (torch.bfloat16, torch.float32, 0.0, 0.0),
    (torch.bfloat16, torch.bfloat16, 0.0, 0.0),
]


@pytest.mark.parametrize("acc_dtype, x_dtype, atol, rtol", REDUCE_TOLS, ids=_ids)
def check_reduce_add_1000003(tk, acc_dtype, x_dtype, atol, rtol):
    buf, (acc,), guard = carve([(1_000_003,)], acc_dtype, fill=lambda s: 100 * torch.randn(s))
    x = (3 * torch.randn(1_000_003)).to(x_dtype)
    x[:3] = torch.tensor([float("inf"), NAN, -float("inf")])  # propagate like torch
    expected = reference.reduce_add(acc.clone(), x)
    assert tk.reduce.reduce_add(acc, x) is acc
    assert_close(acc, expected, atol=atol, rtol=rtol, name=f"acc {acc_dtype} += {x_dtype}")
    assert_guards_intact(buf, guard, "acc")


def check_reduce_add_non_contiguous_and_reshaped(tk):
    acc = torch.randn(40, 9)[:, 1:8]  # non-contiguous, reduced through a copy
    x = torch.randn(7, 80)[:, ::2].t()  # [40, 7], non-contiguous
    expected = reference.reduce_add(acc.clone(), x)
    tk.reduce.reduce_add(acc, x)
    assert_close(acc, expected, atol=0.0, rtol=0.0, name="strided acc")
    flat, shaped = torch.randn(42), torch.randn(6, 7)  # same numel, other shape
    expected = flat + shaped.reshape(-1)
    tk.reduce.reduce_add(flat, shaped)
    assert_close(flat, expected, atol=0.0, rtol=0.0, name="reshaped")
    buf = torch.randn(21)  # x a shifted view of acc: read before it is overwritten
    acc, x = buf[:20], buf[1:]
    expected = acc + x
    tk.reduce.reduce_add(acc, x)
    assert_close(acc, expected, atol=0.0, rtol=0.0, name="overlapping")


def check_reduce_add_rejects_bad_input(tk):
    with pytest.raises(ValueError, match=r"triton reduce_add: acc and x must have the same number"):
        tk.reduce.reduce_add(torch.zeros(5), torch.zeros(6))
    with pytest.raises(ValueError, match="triton reduce_add: x must be float32, float16, bfloat16"):
        tk.reduce.reduce_add(torch.zeros(5), torch.zeros(5, dtype=torch.int32))


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


def check_registry_loads_the_interpreted_kernels(tk):
    for op, mod in (("adamw", tk.adamw), ("gemm", tk.gemm), ("reduce_add", tk.reduce)):
        fn = registry.get(op, "triton").load()
        assert fn is getattr(mod, op)
