"""The compute-only floor of dsbench.suites.step_floor: how its plain model keeps gradients, and
how it times its parts as one sequence."""

import pytest
import torch
from torch import nn

from dsbench.kernels import autograd
from dsbench.suites import step_floor


def _model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(autograd.Linear(8, 6), nn.GELU(), nn.Linear(6, 4))


class _Recording:
    """A preset stand-in whose loss records, per call, the parameters' gradients (or None) as
    the micro-batch's forward begins."""

    def __init__(self):
        self.seen: list[list[torch.Tensor | None]] = []
        self.model: nn.Module | None = None

    def build(self, seed: int, device: str, dtype: torch.dtype) -> nn.Module:
        self.model = _model(seed).to(device=device, dtype=dtype)
        return self.model

    def loss(self, model: nn.Module, batch: tuple) -> torch.Tensor:
        self.seen.append([None if p.grad is None else p.grad.clone() for p in model.parameters()])
        x, y = batch
        return nn.functional.mse_loss(model(x), y)


def test_floor_overwrites_each_steps_first_gradients_and_accumulates_the_rest():
    """Each repetition's first micro-batch finds no gradients (stale slots: overwritten, nothing
    zeroed), the later ones find the sum of the earlier ones' gradients, the same as autograd's
    (the GEMM-backed weight's written in place); afterwards the model carries no hooks."""
    preset = _Recording()
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(5, 8, generator=g), torch.randn(5, 4, generator=g)) for _ in range(3)]
    calls = 6
    with step_floor._plain_model(preset, batches, dtype=torch.float32, device="cpu") as run:
        for _ in range(calls):
            run()
    ref = _model(0)  # autograd's own accumulation of the same micro-batches
    expected = [None]
    for x, y in batches[:-1]:
        (nn.functional.mse_loss(ref(x), y) / len(batches)).backward()
        expected.append([p.grad.clone() for p in ref.parameters()])
    assert len(preset.seen) == len(batches) * calls
    for i, seen in enumerate(preset.seen):
        want = expected[i % len(batches)]
        if want is None:
            assert all(t is None for t in seen), i
        else:
            for got, w in zip(seen, want, strict=True):
                torch.testing.assert_close(got, w, rtol=1e-6, atol=1e-7)
    assert all(not p._post_accumulate_grad_hooks for p in preset.model.parameters())


def test_floor_is_the_sequence_of_its_parts(monkeypatch):
    """[Note: the floor is a step]: forward and backward then AdamW, timed as one sequence per
    repetition (the floor is the sequence's median, each part's median reported beside it); the
    back-to-back AdamW is reported too, and does not enter the floor."""
    clock = iter(range(10_000))
    monkeypatch.setattr(step_floor.time, "perf_counter", lambda: float(next(clock)))
    calls = []
    total, parts = step_floor._timed_sequence(
        [lambda: calls.append("fb"), lambda: calls.append("opt")], "cpu", reps=3
    )
    assert calls == ["fb", "opt"] * 5  # 2 warm-up sequences, then 3
    assert (total, parts) == (2.0, [1.0, 1.0])  # each part one tick, the sequence two
    monkeypatch.undo()
    preset = _Recording()
    batches = [(torch.randn(5, 8), torch.randn(5, 4)) for _ in range(2)]
    seen = []

    def adamw(params, grads, *rest, **kw):
        seen.append(params[0].numel())

    out = step_floor.measure_floor(
        preset, batches, dtype=torch.float32, device="cpu", owned=10, adamw=adamw, fused=None,
        reps=3,
    )  # fmt: skip
    ms = out["floor_ms"]
    assert set(ms) == {"forward_backward", "optimizer", "optimizer_back_to_back"}
    assert seen == [10] * 10  # 5 in the sequences, 5 back to back
    assert out["floor_s"] > 0 and all(v > 0 for v in ms.values())


class _FakeEngine:
    """An engine whose calls advance a fake clock: each forward ``forward_s`` (the next value
    of ``slow`` instead, where given), backward 2 s of which 0.5 s blocked on a reduction, step
    0.1 s of optimizer."""

    def __init__(self, now: list[float], slow: dict[int, float]):
        self.now, self.slow, self.forwards = now, slow, 0
        self.phase_seconds = None

    def loss(self, engine, batch):
        self.now[0] += self.slow.get(self.forwards, 1.0)
        self.forwards += 1
        return batch

    def backward(self, loss):
        self.now[0] += 2.0
        self.phase_seconds["reduce_wait"] = self.phase_seconds.get("reduce_wait", 0.0) + 0.5

    def step(self):
        self.now[0] += 0.1
        self.phase_seconds["optimizer"] = self.phase_seconds.get("optimizer", 0.0) + 0.1


def test_phases_are_medians_over_recorded_steps_after_an_unrecorded_one(monkeypatch):
    """[Note: a typical step's phases]: the first step (cold after the floor) is not recorded,
    and a slow recorded step does not move the phases; blocked time and the optimizer come out
    of the call that contains them."""
    now = [0.0]
    monkeypatch.setattr(step_floor.time, "perf_counter", lambda: now[0])
    # forwards 0-1: the unrecorded step's two micro-batches; 6: a recorded step's first one
    engine = _FakeEngine(now, slow={0: 40.0, 1: 40.0, 6: 30.0})
    drawn = []

    def micro_batches():
        drawn.append(len(drawn))
        return [("batch", 0), ("batch", 1)]

    out = step_floor.phase_breakdown(engine, micro_batches, engine.loss, device="cpu")
    assert len(drawn) == 6  # one unrecorded step, then five
    assert out == pytest.approx({
        "forward": 2000.0,  # two micro-batches of 1 s; the 40 s and 30 s ones are not typical
        "backward": 3000.0,  # 2 x (2 s less 0.5 s blocked)
        "reduce_scatter": 1000.0,
        "optimizer": 200.0,
        "allgather": 0.0,
        "other": 0.0,  # each step call is all optimizer
    }, abs=1e-6)  # fmt: skip
    assert engine.phase_seconds is None  # profiling switched off again
