"""Timing core and benchmark definitions (correctness of what is counted, not speed)."""

import pytest
import torch

import dsbench.measure.timing as timing
from dsbench.measure.memory import PeakMemory
from dsbench.measure.timing import TimingConfig, measure, rotation_count
from dsbench.suites import BENCHMARKS, Context, case_id
from dsbench.suites.comm import allreduce_factor, reduce_scatter_factor
from dsbench.suites.gemm import cpu_gemm_dtype

FAST = TimingConfig(warmup_s=0.0, min_warmup=1, min_reps=8, max_reps=30, budget_s=0.05)


def test_measure_returns_samples_and_summary():
    calls = []
    m = measure(lambda i: calls.append(i), args=[(0,), (1,), (2,)], config=FAST)
    assert FAST.min_reps <= len(m.samples) <= FAST.max_reps
    assert all(s >= 0 for s in m.samples)
    assert m.summary.n == len(m.samples)
    assert m.summary.ci_low <= m.summary.median <= m.summary.ci_high
    # two warm-up calls, though min_warmup is 1: the estimate needs one after the first
    assert m.warmup_reps == 2 and m.rotations == 3 and m.timer == "perf_counter"
    # warm-up + timed calls, cycling through the argument sets in order
    assert calls[:7] == [0, 1, 2, 0, 1, 2, 0]
    assert len(calls) == m.warmup_reps + len(m.samples)


def test_measure_stops_at_max_reps():
    m = measure(
        lambda: None,
        config=TimingConfig(
            min_warmup=1, warmup_s=0, min_reps=8, max_reps=8, budget_s=10, target_rel_ci=0
        ),
    )
    assert len(m.samples) == 8


class _Clock:
    """A fake ``time.perf_counter``: time moves only when a fake call says so."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def fake_gpu_clock(monkeypatch):
    """The GPU path of ``measure`` on a CPU: events that report 1 ms, no-op synchronisation and
    memory statistics, no flush buffer; and a fake clock for the warm-up estimate."""

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self, stream=None):
            pass

        def elapsed_time(self, end):
            return 1.0

    class Flush:
        def zero_(self):
            pass

        def numel(self):
            return 0

    clock = _Clock()
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device=None: 0)
    monkeypatch.setattr(timing, "_flush_buffer", lambda device: Flush())
    return clock


def test_first_call_is_left_out_of_the_estimate(fake_gpu_clock):
    """A first call that pays a one-off cost (autotuning, JIT compile, an extension build) far
    over the warm-up time: one more call is made, and the repetitions are planned from it
    (budget / per-call cost), not from the first call (which would give min_reps)."""
    clock, costs = fake_gpu_clock, []

    def fn():
        cost = 8.0 if not costs else 2.0**-10  # exact in binary: no rounding in the count
        costs.append(cost)
        clock.now += cost

    cfg = TimingConfig(
        warmup_s=0.05, min_warmup=1, min_reps=10, max_reps=1000, budget_s=0.5, target_rel_ci=0.01
    )
    m = measure(fn, device="cuda", config=cfg)
    assert m.warmup_reps == 2  # the slow first call, then one for the estimate
    assert len(m.samples) == int(cfg.budget_s / 2.0**-10) == 512
    assert len(costs) == m.warmup_reps + len(m.samples)


def test_peak_host_memory_covers_an_allocation():
    with PeakMemory("cpu") as peak:
        x = torch.ones(64 * 1024**2 // 4)  # 64 MiB, touched
        del x
    assert peak.result["host_peak_rss_bytes"] >= 64 * 1024**2


def test_rotation_covers_four_times_the_cache():
    from dsbench.measure.timing import cpu_cache_bytes

    small = 1024**2
    n = rotation_count(small, "cpu")
    assert n == min(64, -(-4 * cpu_cache_bytes() // small))
    assert rotation_count(4 * cpu_cache_bytes(), "cpu") == 1
    assert rotation_count(2 * cpu_cache_bytes(), "cpu") == 2


def test_bus_factors_are_nccl_tests():
    assert [allreduce_factor(n) for n in (2, 4, 8)] == [1.0, 1.5, 1.75]
    assert [reduce_scatter_factor(n) for n in (2, 4, 8)] == [0.5, 0.75, 0.875]


@pytest.mark.parametrize(
    ("flags", "dtype"),
    [(("avx2", "avx512_bf16"), "bfloat16"), (("amx_bf16",), "bfloat16"), (("avx2",), "float32")],
)
def test_cpu_gemm_dtype(flags, dtype):
    assert cpu_gemm_dtype(flags)[0] == dtype


def test_work_counted_per_benchmark():
    ctx = Context(device="cpu", backend="cpu", suite="smoke", cpu_flags=("avx2",))
    adamw = BENCHMARKS["adamw"].setup({"impl": "torch", "params": 1000}, ctx)
    assert adamw.work.bytes == 28 * 1000 and adamw.work.items == 1000
    gemm = BENCHMARKS["gemm"].setup({"impl": "torch", "dtype": "float32", "size": 64}, ctx)
    assert gemm.work.flops == 2 * 64**3
    a, b = gemm.args[0]
    torch.testing.assert_close(gemm.fn(a, b), a @ b)


def test_metrics_from_work():
    from dsbench.suites.base import Work

    ar = BENCHMARKS["allreduce"]
    w = Work(wire_bytes=64e6, busbw_factor=allreduce_factor(4))
    values = {m.name: m.value(w, 0.01) for m in ar.metrics}
    assert values == pytest.approx({"busbw": 9.6, "algbw": 6.4, "time": 10.0})
    assert [m.direction for m in ar.metrics] == ["higher", "higher", "lower"]


def test_case_ids_are_stable():
    assert case_id("gemm", {"size": 2, "dtype": "float16"}) == "gemm[dtype=float16,size=2]"
    assert case_id("x", {}) == "x"
