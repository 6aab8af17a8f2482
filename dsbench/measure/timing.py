"""The timing core: every benchmark (kernel, collective, training step) is timed here.

``measure(fn, device=...)`` returns raw per-repetition samples in seconds, their summary
(median, IQR, 99% CI of the median) and the peak memory of the timed region.

- GPU (CUDA or ROCm): a pair of device events around each call; the L2 cache is flushed before
  each repetition by zeroing a buffer of max(256 MiB, 2 x L2) outside the timed region (as
  ``triton.testing.do_bench`` does); warm-up is excluded from samples and from peak memory.
- CPU: ``time.perf_counter`` around each call, with the same warm-up and repetition logic. The
  caches are not flushed; instead inputs that would fit in the last-level cache rotate among
  several buffers (see :func:`rotation_count`) so each call starts cold.
- Repetitions: warm-up for ``warmup_s`` (at least ``min_warmup`` calls, and at least two) estimates
  the cost of a call from the calls after the first, since the first pays one-off costs (Triton
  autotuning and JIT compile, building or loading the CUDA extension); then at least
  ``min_reps`` repetitions, more until the 99% CI of the median is within ``target_rel_ci`` of
  it, the time ``budget_s`` is spent, or ``max_reps`` is reached.
- Several ranks (``distributed=True``): all ranks agree on the repetition count, a barrier
  precedes each repetition, and each sample is the slowest rank's (as nccl-tests reports).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from dsbench.hardware.caches import (
    CacheLevel,
    cpu_cache_levels,
    cpu_llc_bytes,
    gpu_cache_levels,
)
from dsbench.measure.memory import PeakMemory, max_over
from dsbench.stats import Summary, summarize

if TYPE_CHECKING:
    from dsbench.hardware import Profile

FLUSH_BYTES_MIN = 256 * 1024**2


@dataclass(frozen=True, kw_only=True)
class TimingConfig:
    warmup_s: float = 0.05
    """Warm-up time before sampling (at least ``min_warmup`` calls)."""
    min_warmup: int = 2
    """Fewest warm-up calls; two are made whatever this says, as the first is left out of the
    per-call estimate."""
    min_reps: int = 10
    """Fewest timed repetitions (8 is the least for an exact 99% CI of the median)."""
    max_reps: int = 1000
    budget_s: float = 1.0
    """Time budget for the timed repetitions of one benchmark case."""
    target_rel_ci: float = 0.01
    """Stop early once the CI half-width is below this fraction of the median (one process)."""
    flush_l2: bool = True
    """GPU only: flush L2 before each repetition."""
    level: float = 0.99
    rounds: int = 1
    """Multi-rank benchmarks with ``Benchmark.interleave``: rounds of alternating cases, each
    with ``budget_s / rounds`` and ``max_reps / rounds`` (see :func:`merge`)."""

    def per_round(self) -> TimingConfig:
        import dataclasses

        n = max(1, self.rounds)
        return dataclasses.replace(
            self,
            budget_s=self.budget_s / n,
            max_reps=max(1, math.ceil(self.max_reps / n)),
            min_reps=max(1, math.ceil(self.min_reps / n)),
            rounds=1,
        )


@dataclass(kw_only=True)
class Measurement:
    samples: list[float]
    """Seconds per repetition (the slowest rank's, for several ranks)."""
    summary: Summary
    memory: dict = field(default_factory=dict)
    warmup_reps: int = 0
    rotations: int = 1
    timer: str = "perf_counter"
    l2_flushed: bool = False
    ranks: int = 1
    rounds: int = 1
    round_sizes: list[int] = field(default_factory=list)
    """Samples per round, in order (one round: ``[len(samples)]``)."""

    def __post_init__(self) -> None:
        if not self.round_sizes:
            self.round_sizes = [len(self.samples)]

    def to_dict(self) -> dict:
        return {
            "samples": self.samples,
            "summary": self.summary.to_dict(),
            "memory": self.memory,
            "warmup_reps": self.warmup_reps,
            "rotations": self.rotations,
            "timer": self.timer,
            "l2_flushed": self.l2_flushed,
            "ranks": self.ranks,
            "rounds": self.rounds,
            "round_sizes": self.round_sizes,
        }


def merge(parts: list[Measurement], level: float = 0.99) -> Measurement:
    """One measurement from the rounds of one case (interleaved with other cases): samples
    pooled (each round warmed up on its own), peak memory the largest of the rounds', the memory
    the case added (``host_peak_added_bytes``) the smallest."""
    samples = [s for m in parts for s in m.samples]
    first = parts[0]
    memory = max_over([m.memory for m in parts])
    added = [m.memory.get("host_peak_added_bytes") for m in parts]
    if all(a is not None for a in added):
        # what the case adds is the same every round, except what happens once per process
        # (imports, first allocations): the smallest round's is the case's own
        memory["host_peak_added_bytes"] = min(added)
    return Measurement(
        samples=samples,
        summary=summarize(samples, level),
        memory=memory,
        warmup_reps=sum(m.warmup_reps for m in parts),
        rotations=first.rotations,
        timer=first.timer,
        l2_flushed=first.l2_flushed,
        ranks=first.ranks,
        rounds=sum(m.rounds for m in parts),
        round_sizes=[n for m in parts for n in m.round_sizes],
    )


def cpu_cache_bytes() -> int:
    """Largest CPU cache (the LLC) from sysfs; 32 MiB when unknown
    (:func:`dsbench.hardware.caches.cpu_llc_bytes`)."""
    return cpu_llc_bytes()


def cache_bytes(device: torch.device | str) -> int:
    device = torch.device(device)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return int(getattr(props, "L2_cache_size", 0) or 50 * 1024**2)
    return cpu_cache_bytes()


def device_cache_levels(
    gpu: bool, profile: Profile | None = None, l2_bytes: int | None = None
) -> list[CacheLevel]:
    """The caches of the device this process measures: the CPU's from sysfs, or the GPU's L2
    (``l2_bytes``, else the current device's ``L2_cache_size`` from torch's properties) with the
    profile's ``last_level_cache_mib`` above it where the profile states one (MI300X's Infinity
    Cache)."""
    if not gpu:
        return cpu_cache_levels()
    fig = getattr(profile, "last_level_cache_mib", None)
    listed = None
    if profile is not None and fig is not None and fig.value:
        name = "Infinity Cache" if profile.vendor == "amd" else "L2"
        listed = CacheLevel(name=name, bytes=int(fig.value * 1024**2), shared_by="device",
                            source=f"profile {profile.name}: {fig.source}")  # fmt: skip
    if l2_bytes is None:
        try:
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0)
        except (RuntimeError, AssertionError):  # no usable GPU here: the profile's, if any
            l2_bytes = 0
    return gpu_cache_levels(l2_bytes, listed)


def rotation_count(bytes_per_set: int, device: torch.device | str, max_sets: int = 64) -> int:
    """How many copies of the inputs to rotate through so that each call misses the cache.

    On a GPU the L2 flush already evicts everything, so one set suffices. On a CPU, enough sets to
    cover four times the last-level cache of one core (a VM's two cores may sit on two L3s).
    """
    if torch.device(device).type == "cuda" or bytes_per_set <= 0:
        return 1
    return max(1, min(max_sets, math.ceil(4 * cpu_cache_bytes() / bytes_per_set)))


@functools.cache
def _flush_buffer(device: torch.device) -> torch.Tensor:
    size = max(FLUSH_BYTES_MIN, 2 * cache_bytes(device))
    return torch.empty(size, dtype=torch.int8, device=device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _allreduce_max(values: list[float], device: torch.device) -> list[float]:
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def _barrier(device: torch.device) -> None:
    import torch.distributed as dist

    _sync(device)
    dist.barrier()


def measure(
    fn: Callable,
    *,
    device: torch.device | str = "cpu",
    args: Sequence[tuple] = ((),),
    config: TimingConfig | None = None,
    distributed: bool = False,
    since_rss: int | None = None,
) -> Measurement:
    """Time ``fn(*args[i % len(args)])`` per repetition; see the module docstring."""
    cfg = config or TimingConfig()
    device = torch.device(device)
    args = list(args) or [()]
    gpu = device.type == "cuda"
    calls = 0

    def call() -> None:
        nonlocal calls
        fn(*args[calls % len(args)])
        calls += 1

    # Warm-up: also estimates the cost of one call (synchronized, so GPU work is included) from
    # the calls after the first, whose one-off costs (autotuning, JIT compile, an extension's
    # build or load) would otherwise shrink the planned repetitions to the minimum; so at least
    # one call follows the first even when the first used up warmup_s
    # (tests/test_timing.py::test_first_call_is_left_out_of_the_estimate).
    # Several ranks must make the same number of calls (each is a collective), so they warm up
    # with max(min_warmup, 2) calls, agree on the slowest rank's cost, then all make the same
    # extra calls.
    if distributed:
        _barrier(device)
    _sync(device)
    start = time.perf_counter()
    call()
    _sync(device)
    warm = 1
    t1 = time.perf_counter()  # the estimate starts after the first call
    while warm < max(cfg.min_warmup, 2) or (
        not distributed and time.perf_counter() - start < cfg.warmup_s
    ):
        call()
        _sync(device)
        warm += 1
    per_call = (time.perf_counter() - t1) / (warm - 1)
    if distributed:
        per_call = _allreduce_max([per_call], device)[0]
        extra = min(int(cfg.warmup_s / max(per_call, 1e-9)) - warm, cfg.max_reps)
        for _ in range(max(0, extra)):
            call()
        warm += max(0, extra)
        _sync(device)

    flush = _flush_buffer(device) if gpu and cfg.flush_l2 else None
    planned = max(cfg.min_reps, min(cfg.max_reps, int(cfg.budget_s / max(per_call, 1e-9))))
    samples: list[float] = []
    with PeakMemory(device, since_rss=since_rss) as peak:
        if distributed:
            samples = _timed_batch(call, device, flush, planned, barrier=True)
            samples = _allreduce_max(samples, device)
        else:
            # Sample in batches until the median is pinned down or the budget is spent.
            start = time.perf_counter()
            batch = cfg.min_reps if not gpu else planned
            while len(samples) < cfg.max_reps:
                samples += _timed_batch(
                    call, device, flush, min(batch, cfg.max_reps - len(samples))
                )
                s = summarize(samples, cfg.level)
                if time.perf_counter() - start >= cfg.budget_s or (
                    s.ci_exact and (s.ci_high - s.ci_low) / 2 <= cfg.target_rel_ci * s.median
                ):
                    break
                batch = max(5, len(samples) // 2) if not gpu else batch
    memory = peak.result
    if flush is not None:
        memory["flush_buffer_bytes"] = flush.numel()
        for key in ("device_peak_allocated_bytes", "device_peak_reserved_bytes"):
            memory[key] = max(0, memory[key] - flush.numel())
    if distributed:
        memory = _gather_memory(memory, device)
    return Measurement(
        samples=samples,
        summary=summarize(samples, cfg.level),
        memory=memory,
        warmup_reps=warm,
        rotations=len(args),
        timer="device events" if gpu else "perf_counter",
        l2_flushed=flush is not None,
        ranks=_world_size() if distributed else 1,
    )


def _timed_batch(
    call: Callable[[], None],
    device: torch.device,
    flush: torch.Tensor | None,
    reps: int,
    barrier: bool = False,
) -> list[float]:
    if device.type == "cuda":
        pairs = []
        for _ in range(reps):
            if barrier:
                _barrier(device)
            if flush is not None:
                flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize(device)
        return [s.elapsed_time(e) / 1e3 for s, e in pairs]
    out = []
    for _ in range(reps):
        if barrier:
            _barrier(device)
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


def _world_size() -> int:
    import torch.distributed as dist

    return dist.get_world_size()


def _gather_memory(memory: dict, device: torch.device) -> dict:
    import torch.distributed as dist

    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, memory)
    return max_over(gathered)
