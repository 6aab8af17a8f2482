"""The GPU timing path of :func:`dsbench.measure.timing.measure`, run on a CPU with a recording
fake of
torch.cuda's event, synchronisation and memory API (the real path runs in the ``gpu`` tests).

What must hold, per repetition: the L2 flush comes before the start event, the start event
before the call, the end event after it; elapsed times are read only after a device-wide
synchronisation; the peak-memory window opens after a synchronisation and the flush buffer is
left out of the reported device peaks."""

import pytest
import torch

import dsbench.measure.timing as timing
from dsbench.measure.timing import TimingConfig, measure

FLUSH_BYTES = 1 << 20
CALL_MS = 2.5


class Recorder:
    def __init__(self):
        self.log: list[str] = []
        self.synced = False  # a synchronize() since the last record()

    def add(self, what: str) -> None:
        self.log.append(what)


@pytest.fixture
def fake_cuda(monkeypatch):
    rec = Recorder()

    class Event:
        count = 0

        def __init__(self, enable_timing=False):
            assert enable_timing, "timing events must enable timing"
            Event.count += 1
            self.n = Event.count
            self.recorded = False

        def record(self, stream=None):
            rec.add(f"record {'start' if self.n % 2 else 'end'}")
            rec.synced = False
            self.recorded = True

        def elapsed_time(self, end):
            assert self.recorded and end.recorded, "elapsed_time of an event never recorded"
            assert rec.synced, "elapsed_time read before the device was synchronised"
            rec.add("read")
            return CALL_MS

    class Flush:
        def zero_(self):
            rec.add("flush")

        def numel(self):
            return FLUSH_BYTES

    def synchronize(device=None):
        rec.add("sync")
        rec.synced = True

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda d=None: rec.add("reset"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d=None: 5_000 + FLUSH_BYTES)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda d=None: 9_000 + FLUSH_BYTES)
    monkeypatch.setattr(timing, "_flush_buffer", lambda device: Flush())
    return rec


def test_events_flush_and_sync_in_order(fake_cuda):
    rec = fake_cuda
    cfg = TimingConfig(min_warmup=2, warmup_s=0.0, min_reps=5, max_reps=5, budget_s=0.0)
    m = measure(lambda: rec.add("call"), device="cuda", config=cfg)

    assert m.samples == [CALL_MS / 1e3] * 5 and m.timer == "device events" and m.l2_flushed
    log = rec.log
    # warm-up: each call synchronised, so the estimate includes the device's work
    assert log[:4] == ["sync", "call", "sync", "call"] and log[4] == "sync"
    # the memory window opens after a synchronisation
    timed = log[log.index("reset") - 1 :]
    assert timed[:2] == ["sync", "reset"]
    reps = timed[2 : 2 + 5 * 4]
    assert reps == ["flush", "record start", "call", "record end"] * 5
    # one synchronisation, then the five reads; the memory window closes after a sync
    assert timed[2 + 5 * 4 :] == ["sync"] + ["read"] * 5 + ["sync"]
    # the flush buffer is not the benchmark's memory
    assert m.memory["device_peak_allocated_bytes"] == 5_000
    assert m.memory["device_peak_reserved_bytes"] == 9_000
    assert m.memory["flush_buffer_bytes"] == FLUSH_BYTES


def test_without_flush_no_flush_and_no_subtraction(fake_cuda):
    rec = fake_cuda
    cfg = TimingConfig(
        min_warmup=1, warmup_s=0.0, min_reps=3, max_reps=3, budget_s=0.0, flush_l2=False
    )
    m = measure(lambda: rec.add("call"), device="cuda", config=cfg)
    assert "flush" not in rec.log and not m.l2_flushed
    assert m.memory["device_peak_allocated_bytes"] == 5_000 + FLUSH_BYTES
    assert "flush_buffer_bytes" not in m.memory
