"""Hand-written CUDA/HIP kernels (kernels/csrc), numerically; the compile checks, registry,
build and CLI are in tests/test_cuda_kernels.py.

With a GPU (``-m gpu``): the extension is built and each kernel is compared with the torch
reference on odd sizes (1,000,003 elements, 127x65x33 GEMMs, unaligned views), with explicit
(dtype, atol, rtol) tolerances. Without one, the same kernel sources run in a CPU emulation
(std::threads), built as CUDA and as HIP.
"""

from __future__ import annotations

import pytest
import torch

from dsbench.kernels import reference
from dsbench.kernels.cuda import build
from tests._cuda_kernels_helpers import need

# ---------------------------------------------------------------------------------------------
# GPU: correctness against the torch reference (skipped without a GPU; run with -m gpu)

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU")


@pytest.fixture(scope="module")
def ops():
    """The extension's Python API, built once (cached under the dsbench cache folder)."""
    try:
        build.load()
    except build.BuildError as exc:
        pytest.fail(str(exc), pytrace=False)
    from dsbench.kernels.cuda import ops

    return ops


def _poison(shape, dtype) -> None:
    """Fill a block of the caching allocator's size for ``shape``/``dtype`` with NaN and free it,
    so the output allocated next (same size) starts as garbage, not zeros."""
    torch.full(shape, float("nan"), device="cuda", dtype=dtype)


def _at_offset(t: torch.Tensor, offset: int) -> torch.Tensor:
    """A copy of 1-D ``t`` placed ``offset`` elements into a fresh buffer (1: not 16-byte
    aligned)."""
    buf = torch.empty(t.numel() + offset + 8, device=t.device, dtype=t.dtype)
    view = buf[offset : offset + t.numel()]
    view.copy_(t)
    return view


def _free_gib() -> float:
    return torch.cuda.mem_get_info()[0] / 2**30


# reduce_add ----------------------------------------------------------------------------------

REDUCE_CASES = [  # (acc dtype, x dtype, atol, rtol): both round the same fp32 sum once: exact
    (torch.float32, torch.float32, 0.0, 0.0),
    (torch.float32, torch.float16, 0.0, 0.0),
    (torch.float32, torch.bfloat16, 0.0, 0.0),
    (torch.float16, torch.float16, 0.0, 0.0),
    (torch.bfloat16, torch.bfloat16, 0.0, 0.0),
    (torch.bfloat16, torch.float32, 0.0, 0.0),
    (torch.float16, torch.bfloat16, 0.0, 0.0),
]


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("n", [1_000_003, 1, 7, 4099])
@pytest.mark.parametrize("offsets", [(0, 0), (1, 1), (1, 0), (3, 5)])
@pytest.mark.parametrize(("acc_dtype", "x_dtype", "atol", "rtol"), REDUCE_CASES)
def test_reduce_add_matches_reference(ops, n, offsets, acc_dtype, x_dtype, atol, rtol):
    """Aligned, commonly unaligned (vector path after a scalar head) and differently unaligned
    (scalar path) views; odd sizes leave a scalar tail."""
    acc = _at_offset(torch.randn(n, device="cuda").to(acc_dtype), offsets[0])
    x = _at_offset(torch.randn(n, device="cuda").to(x_dtype), offsets[1])
    expected = reference.reduce_add(acc.clone(), x)
    assert ops.reduce_add(acc, x) is not None
    torch.testing.assert_close(acc, expected, atol=atol, rtol=rtol)


@pytest.mark.gpu
@needs_gpu
def test_reduce_add_non_contiguous_x_and_bad_input(ops):
    acc = torch.randn(1001, device="cuda")
    x = torch.randn(2002, device="cuda")[::2]
    expected = reference.reduce_add(acc.clone(), x)
    ops.reduce_add(acc, x)
    torch.testing.assert_close(acc, expected, atol=0.0, rtol=0.0)
    with pytest.raises(RuntimeError, match="reduce_add: acc has 1001 elements and x has 1000"):
        ops.reduce_add(acc, x[:1000])
    with pytest.raises(RuntimeError, match="reduce_add: acc must be contiguous"):
        ops.reduce_add(torch.randn(2002, device="cuda")[::2], torch.randn(1001, device="cuda"))
    with pytest.raises(RuntimeError, match="reduce_add: acc and x must be float32, float16"):
        ops.reduce_add(acc, x.to(torch.float64))
    with pytest.raises(RuntimeError, match="must be a CUDA/ROCm tensor"):
        ops.reduce_add(acc, x.cpu())


@pytest.mark.gpu
@needs_gpu
def test_reduce_add_indexes_past_2_31_elements(ops):
    n = 2**31 + 1001
    if _free_gib() < 12:
        pytest.skip("needs 12 GiB of free GPU memory")
    acc = torch.ones(n, device="cuda", dtype=torch.bfloat16)
    x = torch.full((n,), 2.0, device="cuda", dtype=torch.bfloat16)
    ops.reduce_add(acc, x)
    assert bool((acc == 3.0).all())


# adamw -------------------------------------------------------------------------------------

ADAMW_SIZES = [1_000_003, 1, 3, 4096, 4097, 65_537]
ADAMW_CASES = [  # (grad dtype, atol, rtol) on fp32 params/moments; grads upcast exactly
    (torch.float32, 1e-6, 1e-5),
    (torch.float16, 1e-6, 1e-5),
    (torch.bfloat16, 1e-6, 1e-5),
]
LAYOUTS = {  # element offsets of (param, grad, exp_avg, exp_avg_sq)
    "aligned": (0, 0, 0, 0),
    "common-offset": (1, 1, 1, 1),  # one scalar head, then 16-byte vectors
    "mixed-offsets": (1, 0, 2, 0),  # no common alignment: element by element
}
HP = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1)


def _adam_state(sizes, grad_dtype, layout, device="cuda"):
    op, og, om, ov = LAYOUTS[layout]
    params = [_at_offset(torch.randn(n, device=device), op) for n in sizes]
    grads = [_at_offset(torch.randn(n, device=device).to(grad_dtype), og) for n in sizes]
    m = [_at_offset(torch.randn(n, device=device).abs() * 0.1, om) for n in sizes]
    v = [_at_offset(torch.rand(n, device=device) * 0.01, ov) for n in sizes]
    steps = [torch.full((), float(i % 3), device=device) for i in range(len(sizes))]
    return params, grads, m, v, steps


def _clone(lists):
    return [[t.clone() for t in group] for group in lists]


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize(("grad_dtype", "atol", "rtol"), ADAMW_CASES)
@pytest.mark.parametrize("adamw_mode", [True, False], ids=["adamw", "adam-l2"])
@pytest.mark.parametrize("scaled", [False, True], ids=["unscaled", "grad-scale"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_adamw_matches_reference(ops, grad_dtype, atol, rtol, adamw_mode, scaled, layout):
    """Three steps on a list of odd-sized tensors (one launch), per-tensor step counts, with and
    without the loss-scale unscaling, AdamW and L2 mode, aligned and unaligned views."""
    mine = _adam_state(ADAMW_SIZES, grad_dtype, layout)
    ref = _clone(mine)
    scale = torch.tensor(1024.0, device="cuda") if scaled else None
    found_mine = torch.full((), 7.0, device="cuda")
    found_ref = torch.full((), 7.0, device="cuda")
    for _ in range(3):
        fresh = [torch.randn(g.numel(), device="cuda").to(grad_dtype) for g in mine[1]]
        if scaled:
            fresh = [(g.float() * 1024.0).to(grad_dtype) for g in fresh]
        for group in (mine[1], ref[1]):
            for g, new in zip(group, fresh, strict=True):
                g.copy_(new)
        kw = dict(HP, adamw_mode=adamw_mode, grad_scale=scale)
        ops.adamw(*mine, **kw, found_inf=found_mine)
        reference.adamw(*ref, **kw, found_inf=found_ref)
    names = ("params", "grads", "exp_avgs", "exp_avg_sqs", "steps")
    for name, got, want in zip(names, mine, ref, strict=True):
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            torch.testing.assert_close(
                a, b, atol=atol, rtol=rtol, msg=lambda m, i=i, n=name: f"{n}[{i}]: {m}"
            )
    assert found_mine.item() == found_ref.item() == (0.0 if scaled else 7.0)


@pytest.mark.gpu
@needs_gpu
def test_adamw_many_small_tensors_in_one_list(ops):
    gen = torch.Generator().manual_seed(1)
    sizes = [*torch.randint(1, 5000, (300,), generator=gen).tolist(), 0, 1_000_003]
    mine = _adam_state(sizes, torch.bfloat16, "aligned")
    ref = _clone(mine)
    ops.adamw(*mine, **HP)
    reference.adamw(*ref, **HP)
    for got, want in zip(mine, ref, strict=True):
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_adamw_skips_the_step_on_inf_or_nan(ops, bad):
    mine = _adam_state([1_000_003, 17], torch.float16, "aligned")
    before = _clone(mine)
    mine[1][0][500_001] = bad
    found = torch.zeros((), device="cuda")
    ops.adamw(*mine, **HP, grad_scale=torch.tensor(65536.0, device="cuda"), found_inf=found)
    assert found.item() == 1.0
    for got, want in zip(mine, before, strict=True):
        for a, b in zip(got, want, strict=True):
            if a.data_ptr() != mine[1][0].data_ptr():
                assert torch.equal(a, b)  # params, moments and steps untouched


@pytest.mark.gpu
@needs_gpu
def test_adamw_pointer_table_is_built_once_per_list(ops):
    ops._tables.clear()
    state = _adam_state([1000, 33], torch.float32, "aligned")
    ops.adamw(*state, **HP)
    ops.adamw(*state, **HP)
    assert len(ops._tables) == 1
    state[1][0] = torch.randn(1000, device="cuda")  # a new grad allocation: a new table
    ops.adamw(*state, **HP)
    assert len(ops._tables) == 2


@pytest.mark.gpu
@needs_gpu
def test_adamw_rejects_bad_input_clearly(ops):
    p, g, m, v, s = _adam_state([10, 20], torch.float32, "aligned")
    with pytest.raises(RuntimeError, match="adamw: params, grads, exp_avgs, exp_avg_sqs and steps"):
        ops.adamw(p, g[:1], m, v, s, **HP)
    with pytest.raises(
        RuntimeError, match="adamw: params, exp_avgs and exp_avg_sqs must be float32"
    ):
        ops.adamw([p[0].half(), p[1]], g, m, v, s, **HP)
    with pytest.raises(RuntimeError, match=r"adamw: all grads must have one dtype \(grads\[1\]"):
        ops.adamw(p, [g[0], g[1].half()], m, v, s, **HP)
    with pytest.raises(
        RuntimeError, match="adamw: entry 1: param, grad, exp_avg and exp_avg_sq must be contiguous"
    ):
        ops.adamw(p, [g[0], torch.randn(40, device="cuda")[::2]], m, v, s, **HP)
    with pytest.raises(RuntimeError, match="same number of elements"):
        ops.adamw(p, [g[0], g[1][:19]], m, v, s, **HP)
    with pytest.raises(RuntimeError, match=r"steps\[0\] must be a float32 tensor with one element"):
        ops.adamw(p, g, m, v, [torch.zeros(2, device="cuda"), s[1]], **HP)
    with pytest.raises(RuntimeError, match="must be a CUDA/ROCm tensor"):
        ops.adamw([p[0].cpu(), p[1]], g, m, v, s, **HP)
    with pytest.raises(RuntimeError, match=r"beta1 and beta2 must be in \[0, 1\)"):
        ops.adamw(p, g, m, v, s, **dict(HP, beta2=1.0))


@pytest.mark.gpu
@needs_gpu
def test_adamw_indexes_past_2_31_elements(ops):
    n = 2**31 + 1001
    if _free_gib() < 40:
        pytest.skip("needs 40 GiB of free GPU memory")
    p = torch.ones(n, device="cuda")
    g = torch.full((n,), 0.5, device="cuda", dtype=torch.bfloat16)
    m, v = torch.zeros(n, device="cuda"), torch.zeros(n, device="cuda")
    step = torch.zeros((), device="cuda")
    ops.adamw([p], [g], [m], [v], [step], **HP)
    small = [torch.ones(16, device="cuda")], [torch.full((16,), 0.5, device="cuda")]
    sm, sv, ss = (
        [torch.zeros(16, device="cuda")],
        [torch.zeros(16, device="cuda")],
        [torch.zeros((), device="cuda")],
    )
    reference.adamw(small[0], small[1], sm, sv, ss, **HP)
    want = small[0][0][0].item()
    for part in (p[:16], p[2**31 - 8 : 2**31 + 8], p[-16:]):
        torch.testing.assert_close(part, torch.full_like(part, want), atol=1e-6, rtol=1e-5)
    assert p.min().item() == p.max().item() and step.item() == 1.0


# gemm --------------------------------------------------------------------------------------

GEMM_CASES = [  # (dtype, atol, rtol) against the fp32 product rounded once to dtype
    (torch.float16, 1e-2, 1e-2),  # 1 fp16 ulp at |c| ~ 16-32 is 0.016
    (torch.bfloat16, 2e-2, 1.6e-2),  # 1 bf16 ulp is 2^-7 relative
    (torch.float32, 2e-4, 1e-4),  # summation order only (no TF32 on either side)
]
GEMM_SHAPES = [  # (M, N, K)
    (127, 65, 33),
    (127, 33, 65),
    (1, 1, 1),
    (64, 64, 64),
    (129, 257, 100),
    (300, 200, 515),
    (1024, 512, 256),
]


def _operand(rows: int, cols: int, dtype, layout: str, device="cuda") -> torch.Tensor:
    """A rows x cols matrix: "row" (contiguous), "col" (a transposed view), "padded" (row-major
    with leading dimension cols + 3, starting one element into its buffer: unaligned)."""
    if layout == "row":
        return torch.randn(rows, cols, device=device).to(dtype)
    if layout == "col":
        return torch.randn(cols, rows, device=device).to(dtype).t()
    buf = torch.randn(rows * (cols + 3) + 1, device=device).to(dtype)
    return buf[1:].view(rows, cols + 3)[:, :cols]


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize(("dtype", "atol", "rtol"), GEMM_CASES)
@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layouts", ["row-row", "col-row", "row-col", "col-col", "padded-padded"])
@pytest.mark.parametrize("path", ["auto", "tiled"])
def test_gemm_matches_reference(ops, dtype, atol, rtol, shape, layouts, path):
    m, n, k = shape
    la, lb = layouts.split("-")
    a, b = _operand(m, k, dtype, la), _operand(k, n, dtype, lb)
    torch.backends.cuda.matmul.allow_tf32 = False
    want = reference.gemm(a.float(), b.float()).to(dtype)
    _poison((m, n), dtype)
    got = ops.gemm(a, b) if path == "auto" else ops.gemm_tiled(a, b)
    assert got.shape == (m, n) and got.dtype == dtype and got.is_contiguous()
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol)


@pytest.mark.gpu
@needs_gpu
def test_gemm_other_strides_and_empty(ops):
    a = torch.randn(65, 2 * 33, device="cuda").half()[:, ::2]  # neither row- nor column-major
    b = torch.randn(1, 40, device="cuda").half().expand(33, 40)  # stride 0 rows
    torch.testing.assert_close(
        ops.gemm(a, b), reference.gemm(a.float(), b.float()).half(), atol=1e-2, rtol=1e-2
    )
    z = ops.gemm(torch.randn(5, 0, device="cuda").half(), torch.randn(0, 7, device="cuda").half())
    assert z.shape == (5, 7) and not z.any()
    assert ops.gemm(torch.randn(0, 3, device="cuda"), torch.randn(3, 4, device="cuda")).shape == (
        0,
        4,
    )


@pytest.mark.gpu
@needs_gpu
def test_gemm_path_follows_the_device(ops):
    h = torch.zeros(1, device="cuda", dtype=torch.float16)
    props = torch.cuda.get_device_properties(0)
    if torch.version.hip:
        arch = props.gcnArchName.split(":")[0]
        expected = (
            "mfma"
            if arch in ("gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950")
            else "tiled"
        )
    else:
        expected = "wmma" if props.major >= 8 else "tiled"
    assert ops.gemm_path(h) == expected
    assert ops.gemm_path(h.float()) == "tiled"


@pytest.mark.gpu
@needs_gpu
def test_gemm_rejects_bad_input_clearly(ops):
    a = torch.randn(4, 5, device="cuda").half()
    with pytest.raises(RuntimeError, match="gemm: a and b must be 2-D"):
        ops.gemm(a, torch.randn(5, device="cuda").half())
    with pytest.raises(RuntimeError, match="gemm: a and b must have one dtype"):
        ops.gemm(a, torch.randn(5, 3, device="cuda"))
    with pytest.raises(RuntimeError, match="gemm: dtype must be float16, bfloat16 or float32"):
        ops.gemm(a.double(), torch.randn(5, 3, device="cuda").double())
    with pytest.raises(
        RuntimeError, match="gemm: a is 4x5 and b is 6x3: a's columns must equal b's rows"
    ):
        ops.gemm(a, torch.randn(6, 3, device="cuda").half())
    with pytest.raises(RuntimeError, match="gemm: b must be a CUDA/ROCm tensor"):
        ops.gemm(a, torch.randn(5, 3).half())


# grad_w sums 508 products whose grad_y factor carries one rounding (2^-11 fp16, 2^-9 bf16):
# about sqrt(508) * 2^-9 * |term| ~ 0.05 absolute in bf16 on entries near zero.
LINEAR_CASES = [(torch.float16, 5e-2, 1e-2), (torch.bfloat16, 2.5e-1, 3e-2)]


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize(("dtype", "atol", "rtol"), LINEAR_CASES)
def test_registry_linear_on_the_cuda_gemm(ops, dtype, atol, rtol):
    """Forward and both backward GEMMs (transposed operands) through the registry, against an
    fp32 nn.Linear on the same values (the low-precision side rounds y and the grads once more:
    a few ulp)."""
    from dsbench.kernels.autograd import Linear

    lin = Linear(65, 33, impl="cuda", device="cuda", dtype=dtype)
    ref = torch.nn.Linear(65, 33, device="cuda", dtype=torch.float32)
    ref.load_state_dict({k: v.float() for k, v in lin.state_dict().items()})
    x = torch.randn(4, 127, 65, device="cuda", dtype=dtype, requires_grad=True)
    x32 = x.detach().float().requires_grad_(True)
    y = lin(x)
    y.float().square().sum().backward()
    ref(x32).square().sum().backward()
    torch.testing.assert_close(y.detach(), ref(x32).detach().to(dtype), atol=atol, rtol=rtol)
    torch.testing.assert_close(x.grad, x32.grad.to(dtype), atol=atol, rtol=rtol)
    torch.testing.assert_close(lin.weight.grad, ref.weight.grad.to(dtype), atol=atol, rtol=rtol)


# ---------------------------------------------------------------------------------------------
# CPU emulation: the same kernel sources run on std::threads (no GPU needed)


@pytest.fixture(scope="module", params=["cuda", "hip"])
def emulated(request, tmp_path_factory):
    """The kernels built for the CPU emulation as CUDA (sm_80: WMMA path) or as HIP (gfx90a,
    wave64: MFMA path, HIP 5.2's bfloat16)."""
    from dsbench.kernels.cuda import emulate

    if request.param == "hip":
        need("hipcc")  # HIP 5.2's headers (bfloat16) come with it
    if emulate.find_cxx() is None:
        pytest.fail(
            "no clang++/g++ for the CPU emulation (kernels/csrc/install_hip.sh brings clang)"
        )
    out = tmp_path_factory.mktemp(f"emulated-{request.param}")
    return emulate.EmulatedKernels(emulate.build_library(out, hip=request.param == "hip"))


@pytest.mark.parametrize("n", [7, 4099, 20_011])
@pytest.mark.parametrize("offsets", [(0, 0), (1, 1), (1, 0), (3, 5)])
@pytest.mark.parametrize(("acc_dtype", "x_dtype", "atol", "rtol"), REDUCE_CASES[1:5])
def test_emulated_reduce_add(emulated, n, offsets, acc_dtype, x_dtype, atol, rtol):
    acc = _at_offset(torch.randn(n).to(acc_dtype), offsets[0])
    x = _at_offset(torch.randn(n).to(x_dtype), offsets[1])
    expected = reference.reduce_add(acc.clone(), x)
    emulated.reduce_add(acc, x)
    torch.testing.assert_close(acc, expected, atol=atol, rtol=rtol)


EMULATED_ADAMW = [  # (grad dtype, atol, rtol, adamw_mode, grad scale, layout)
    (torch.float32, 1e-6, 1e-5, True, None, "aligned"),
    (torch.float16, 1e-6, 1e-5, False, 1024.0, "common-offset"),
    (torch.bfloat16, 1e-6, 1e-5, True, 1024.0, "mixed-offsets"),
    (torch.bfloat16, 1e-6, 1e-5, False, None, "common-offset"),
    (torch.float16, 1e-6, 1e-5, True, None, "mixed-offsets"),
    (torch.float32, 1e-6, 1e-5, False, 4.0, "aligned"),
]


@pytest.mark.parametrize(
    ("grad_dtype", "atol", "rtol", "adamw_mode", "scale", "layout"), EMULATED_ADAMW
)
def test_emulated_adamw(emulated, grad_dtype, atol, rtol, adamw_mode, scale, layout):
    """Two steps over a list with a scalar-only tensor, partial chunks and an empty tensor."""
    sizes = [1, 3, 4096, 4097, 9000, 0]
    mine = _adam_state(sizes, grad_dtype, layout, device="cpu")
    ref = _clone(mine)
    grad_scale = None if scale is None else torch.tensor(scale)
    found_mine, found_ref = torch.full((), 7.0), torch.full((), 7.0)
    for _ in range(2):
        fresh = [(torch.randn(n) * (scale or 1.0)).to(grad_dtype) for n in sizes]
        for group in (mine[1], ref[1]):
            for g, new in zip(group, fresh, strict=True):
                g.copy_(new)
        kw = dict(HP, adamw_mode=adamw_mode, grad_scale=grad_scale)
        emulated.adamw(*mine, **kw, found_inf=found_mine)
        reference.adamw(*ref, **kw, found_inf=found_ref, fused=False)
    expected_heads = {"aligned": 0, "common-offset": 3, "mixed-offsets": -1}[layout]
    assert emulated.last_heads[2:5] == [expected_heads] * 3  # the vector path is (not) taken
    for got, want in zip(mine, ref, strict=True):
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, atol=atol, rtol=rtol)
    assert found_mine.item() == found_ref.item() == (7.0 if scale is None else 0.0)


def test_emulated_adamw_skips_the_step_on_nan(emulated):
    mine = _adam_state([9000, 5], torch.float16, "aligned", device="cpu")
    mine[1][0][7777] = float("nan")
    before = _clone(mine)
    found = torch.zeros(())
    emulated.adamw(*mine, **HP, grad_scale=torch.tensor(4.0), found_inf=found)
    assert found.item() == 1.0
    for got, want in zip(mine, before, strict=True):
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a.nan_to_num(), b.nan_to_num())


@pytest.mark.parametrize(("dtype", "atol", "rtol"), GEMM_CASES)
@pytest.mark.parametrize("shape", [(127, 65, 33), (1, 1, 1), (129, 130, 40)], ids=str)
@pytest.mark.parametrize("layouts", ["row-row", "col-row", "row-col", "col-col", "padded-padded"])
@pytest.mark.parametrize("path", ["auto", "tiled"])
def test_emulated_gemm(emulated, dtype, atol, rtol, shape, layouts, path):
    m, n, k = shape
    la, lb = layouts.split("-")
    a, b = _operand(m, k, dtype, la, device="cpu"), _operand(k, n, dtype, lb, device="cpu")
    want = reference.gemm(a.float(), b.float()).to(dtype)
    got = emulated.gemm(a, b, tiled=path == "tiled")
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol)


def test_emulated_gemm_paths(emulated, request):
    matrix = "mfma" if "hip" in request.node.callspec.id else "wmma"
    assert emulated.gemm_path(torch.float16) == matrix
    assert emulated.gemm_path(torch.bfloat16) == matrix
    assert emulated.gemm_path(torch.float32) == "tiled"
    assert emulated.gemm_path(torch.float16, tiled=True) == "tiled"
