"""The shm collectives' fused sum (kernels/shm_sum.py): one C pass gives the bits of torch's
separate passes (rank-order sum, division, add), its fp64 square-sum agrees with torch's, and
the torch fallback (no compiler, or overlapping buffers) gives the same bits."""

import shutil

import pytest
import torch

from dsbench.kernels import shm_sum
from dsbench.kernels.cbuild import CLibrary


def _data(n: int, m: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(m, generator=g) * 10.0 ** torch.randint(-40, 30, (m,), generator=g)
          for _ in range(n)]  # fmt: skip
    xs[0][:3] = torch.tensor([1e-45, -3e38, 0.0])[:m]  # a subnormal, near-overflow, a zero
    return xs


def _separate_passes(out, slots, divide_by, accumulate):
    total = slots[0].clone()
    for s in slots[1:]:
        total = total + s
    if divide_by != 1:
        total.div_(divide_by)
    return out + total if accumulate else total


def test_the_c_build_is_used_where_a_compiler_is():
    if not any(shutil.which(c) for c in ("cc", "gcc", "clang")):
        pytest.skip("no C compiler on this machine")
    assert shm_sum.backend() == "c"


@pytest.mark.parametrize("m", [1, 15, 1023, 1025, 5000])
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_fused_sum_has_the_bits_of_separate_passes(n, m):
    slots = _data(n, m, seed=n * 7919 + m)
    before = torch.randn(m)
    for divide_by in (1, 2, 3):
        for accumulate in (False, True):
            out = before.clone()
            sq = torch.zeros((), dtype=torch.float64)
            shm_sum.sum_into(out, slots, divide_by=divide_by, accumulate=accumulate, sq=sq)
            want = _separate_passes(before, slots, divide_by, accumulate)
            assert torch.equal(out, want), (n, m, divide_by, accumulate)
            norm = torch.linalg.vector_norm(want, dtype=torch.float64).square()
            assert torch.isclose(sq, norm, rtol=1e-12, atol=0), (float(sq), float(norm))


def test_torch_fallback_gives_the_same_bits(monkeypatch):
    slots = _data(3, 4099, seed=3)
    before = torch.randn(4099)
    fused = before.clone()
    shm_sum.sum_into(fused, slots, divide_by=3, accumulate=True)
    broken = CLibrary("shm_sum.c", ())
    broken._loaded, broken.why_not = True, "test"  # as a failed build leaves it
    monkeypatch.setattr(shm_sum, "_LIB", broken)
    assert shm_sum.backend() == "torch: test"
    fallback = before.clone()
    sq = torch.zeros((), dtype=torch.float64)
    shm_sum.sum_into(fallback, slots, divide_by=3, accumulate=True, sq=sq)
    assert torch.equal(fused, fallback)
    assert float(sq) == float(torch.linalg.vector_norm(fallback, dtype=torch.float64) ** 2)


def test_an_output_overlapping_a_slot_takes_torch_passes():
    a, b = torch.randn(1000), torch.randn(1000)
    want = (a + b) / 2
    shm_sum.sum_into(a, [a, b], divide_by=2)  # out is slot 0 itself
    assert torch.equal(a, want)


def test_a_landing_needs_fp32_and_an_implementation_that_takes_it():
    from dsbench.kernels import shm
    from dsbench.zero.collectives import Comm

    with pytest.raises(ValueError, match="no fused landing"):
        Comm(None, {}, torch.device("cpu")).reduce_scatter(
            torch.zeros(2), torch.zeros(4), divide_by=2
        )
    assert Comm(None, {"reduce_scatter": "shm"}, torch.device("cpu")).lands
    assert not Comm(None, {}, torch.device("cpu")).lands
    assert getattr(shm.reduce_scatter, "lands", False)
