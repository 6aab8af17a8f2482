"""The memory ceiling with AdamW's access pattern (kernels/cpu_stream.py, csrc/stream_update3.c):
one C pass gives the bits of torch's separate passes on any thread count, and the stream suite
measures it on CPUs only, skipping it with the reason where it cannot be built."""

import pytest
import torch

from dsbench.kernels import cpu_stream
from dsbench.kernels.cbuild import CLibrary
from dsbench.suites.base import Context, Skip
from dsbench.suites.ceilings import STREAM, STREAMS, needed, stream_kernels


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 4099])
def test_one_pass_gives_torchs_bits(n, threads):
    gen = torch.Generator().manual_seed(n * 31 + threads)
    p, m, v, g = (torch.randn(n, generator=gen) for _ in range(4))
    want = [t + 0.125 * g for t in (p, m, v)]  # s*g rounded, then added: one rounding each
    cpu_stream.update3(p, m, v, g, 0.125, threads)
    assert all(torch.equal(a, b) for a, b in zip((p, m, v), want, strict=True))


def test_bad_tensors_are_refused():
    a, b, c = torch.ones(8), torch.ones(8), torch.ones(8)
    with pytest.raises(ValueError, match="must not overlap"):
        cpu_stream.update3(a, b, c, a, 1.0, 1)
    with pytest.raises(ValueError, match="float32"):
        cpu_stream.update3(a, b, c, torch.ones(8, dtype=torch.float64), 1.0, 1)
    with pytest.raises(ValueError, match="one size"):
        cpu_stream.update3(a, b, c, torch.ones(9), 1.0, 1)


def test_cpu_only_and_counted_as_adamw_moves():
    cpu, gpu = Context(), Context(device="cuda:0", backend="cuda")
    assert "update3" in stream_kernels(cpu) and "update3" not in stream_kernels(gpu)
    assert STREAMS["update3"] == 7  # p, g, m, v read; p, m, v written
    from dsbench.hardware import get_profile

    profile = get_profile("cpu")
    kernels = [p["kernel"] for b, p in needed(["mem_bandwidth"], profile, "quick", cpu)]
    assert kernels == list(stream_kernels(cpu))


def test_without_a_compiler_the_row_skips_with_why(monkeypatch):
    broken = CLibrary("stream_update3.c", ())
    broken._loaded, broken.why_not = True, "no C compiler (cc, gcc or clang) on PATH"
    monkeypatch.setattr(cpu_stream, "_LIB", broken)
    with pytest.raises(Skip, match="update3 needs its C build: no C compiler"):
        STREAM.setup({"kernel": "update3"}, Context(llc_bytes=2**20))


def test_a_failed_build_says_the_compilers_first_line(monkeypatch, tmp_path):
    monkeypatch.setenv("DSBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "false")  # exits 1 with no output
    lib = CLibrary("stream_update3.c", ("-O3",))
    assert lib.load() is None
    assert lib.why_not == "false failed on stream_update3.c: (no output)"
    assert not list(tmp_path.rglob("*.so"))  # nothing half-built left behind
