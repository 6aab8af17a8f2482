"""DeepSpeed's five LR schedulers (dsbench.zero.config.schedulers) stepped next to DeepSpeed's
own classes (``deepspeed.runtime.lr_schedules``), the way DeepSpeed's engine drives them: built
on the optimizer (which sets the first step's lr), then ``step()`` after every applied optimizer
step. For several parameter sets each (DeepSpeed's defaults among them) the learning rate, and
for OneCycle Adam's betas, of every one of 5000 steps agree within RTOL: the same formulas in the
same operation order, so in practice bit for bit; the tolerance only allows for a libm difference.
"""

import math
import os

import pytest
import torch

from dsbench.engines import zero_settings
from dsbench.engines.deepspeed import deepspeed_version
from dsbench.zero.config import ConfigError, load_config
from dsbench.zero.config.schedulers import SCHEDULERS, WarmupCosineLRConfig

needs_deepspeed = pytest.mark.skipif(
    deepspeed_version() is None,
    reason="DeepSpeed not installed (the test setup installs it: make test)",
)
RTOL = 1e-12
STEPS = 5000
BASE_LR = 3e-4
BASE_BETAS = (0.85, 0.98)

# (scheduler.type, scheduler.params): DeepSpeed's defaults (only what it requires), then others.
CASES = [
    ("WarmupLR", {}),
    ("WarmupLR", {"warmup_min_lr": 1e-5, "warmup_max_lr": 2e-3, "warmup_num_steps": 300}),
    ("WarmupLR", {"warmup_min_lr": 0, "warmup_num_steps": 777, "warmup_type": "linear"}),
    ("WarmupLR", {"warmup_max_lr": 1e-3, "warmup_num_steps": 0}),  # max(2, n)
    ("WarmupLR", {"warmup_num_steps": 500, "warmup_type": "cosine"}),  # DeepSpeed: 'log'
    ("WarmupDecayLR", {"total_num_steps": 4000}),
    (
        "WarmupDecayLR",
        {
            "total_num_steps": 3000,
            "warmup_min_lr": 1e-6,
            "warmup_max_lr": 5e-4,
            "warmup_num_steps": 250,
            "warmup_type": "linear",
        },
    ),
    ("WarmupDecayLR", {"total_num_steps": 100, "warmup_num_steps": 500}),  # total < warm-up
    ("WarmupCosineLR", {"total_num_steps": 5000}),
    (
        "WarmupCosineLR",
        {
            "total_num_steps": 3500,
            "warmup_min_ratio": 0.1,
            "warmup_num_steps": 200,
            "cos_min_ratio": 0.05,
            "warmup_type": "linear",
        },
    ),
    ("WarmupCosineLR", {"total_num_steps": 1000, "warmup_num_steps": 1500}),  # total < warm-up
    ("OneCycle", {"cycle_min_lr": 1e-5, "cycle_max_lr": 1e-3}),
    (
        "OneCycle",
        {
            "cycle_min_lr": 2e-5,
            "cycle_max_lr": 4e-4,
            "cycle_first_step_size": 700,
            "cycle_second_step_size": 1100,
            "decay_step_size": 50,
            "decay_lr_rate": 0.01,
            "decay_mom_rate": 0.001,
            "cycle_min_mom": 0.85,
            "cycle_max_mom": 0.95,
        },
    ),
    (
        "OneCycle",
        {
            "cycle_min_lr": 1e-4,
            "cycle_max_lr": 1e-3,
            "cycle_first_step_size": 333,
            "cycle_momentum": False,
            "decay_step_size": 100,
            "decay_lr_rate": 0.5,
            "cycle_first_stair_count": 4,
        },
    ),
    ("LRRangeTest", {}),
    (
        "LRRangeTest",
        {
            "lr_range_test_min_lr": 1e-5,
            "lr_range_test_step_size": 250,
            "lr_range_test_step_rate": 3.0,
            "lr_range_test_staircase": True,
        },
    ),
    (
        "LRRangeTest",
        {
            "lr_range_test_min_lr": 1e-4,
            "lr_range_test_step_size": 7,
            "lr_range_test_step_rate": 0.25,
        },
    ),
]


def _ids(cases) -> list[str]:
    """WarmupLR-0, WarmupLR-1, ...: case 0 of each type is DeepSpeed's defaults."""
    seen: dict[str, int] = {}
    out = []
    for name, _ in cases:
        seen[name] = seen.get(name, -1) + 1
        out.append(f"{name}-{'defaults' if seen[name] == 0 else seen[name]}")
    return out


def _config(name: str, params: dict) -> dict:
    return {
        "train_batch_size": 2,
        "optimizer": {"type": "AdamW", "params": {"lr": BASE_LR, "betas": list(BASE_BETAS)}},
        "scheduler": {"type": name, "params": params},
    }


def _deepspeed_trace(name: str, params: dict, steps: int) -> tuple[list[float], list[tuple]]:
    """lr and betas of each applied step under DeepSpeed's class, as its engine drives it."""
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from deepspeed.runtime import lr_schedules

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([param], lr=BASE_LR, betas=BASE_BETAS)
    scheduler = getattr(lr_schedules, name)(optimizer, **params)
    group = optimizer.param_groups[0]
    lrs, betas = [], []
    for _ in range(steps):
        lrs.append(float(group["lr"]))  # what this optimizer step uses
        betas.append(tuple(group["betas"]))
        scheduler.step()  # DeepSpeed's engine: after each applied step
    return lrs, betas


@needs_deepspeed
@pytest.mark.parametrize(("name", "params"), CASES, ids=_ids(CASES))
def test_same_learning_rates_as_deepspeeds_class(name, params):
    want_lrs, want_betas = _deepspeed_trace(name, params, STEPS)
    cfg = load_config(_config(name, params), world_size=1)
    assert type(cfg.scheduler) is SCHEDULERS[name]
    settings = zero_settings(cfg)  # the engine's view: what ZeroEngine.step() applies
    got_lrs = [settings.lr_at(t) for t in range(STEPS)]
    got_betas = [
        settings.betas_at(t) if settings.betas_at else settings.betas for t in range(STEPS)
    ]
    bad = [t for t in range(STEPS) if not math.isclose(got_lrs[t], want_lrs[t], rel_tol=RTOL)]
    assert not bad, (
        f"{len(bad)} of {STEPS} steps differ; first at step {bad[0]}: "
        f"dsbench {got_lrs[bad[0]]!r}, DeepSpeed {want_lrs[bad[0]]!r}"
    )
    bad = [
        t
        for t in range(STEPS)
        if not all(
            math.isclose(a, b, rel_tol=RTOL)
            for a, b in zip(got_betas[t], want_betas[t], strict=True)
        )
    ]
    assert not bad, f"betas differ from step {bad[0]}: {got_betas[bad[0]]} vs {want_betas[bad[0]]}"
    assert len(set(want_lrs)) >= 2  # the schedule really moves over these steps


@needs_deepspeed
@pytest.mark.parametrize("name", ["WarmupLR", "OneCycle", "WarmupCosineLR", "LRRangeTest"])
def test_resuming_scheduler_matches_deepspeed(name):
    """``last_batch_iteration`` given: the constructor leaves the optimizer's lr and betas, and
    steps continue from that iteration."""
    params = dict(next(p for n, p in CASES[1:] if n == name and p), last_batch_iteration=150)
    want_lrs, want_betas = _deepspeed_trace(name, params, 400)
    settings = zero_settings(load_config(_config(name, params), world_size=1))
    assert [settings.lr_at(t) for t in range(400)] == pytest.approx(want_lrs, rel=RTOL, abs=0)
    if settings.betas_at:
        assert [settings.betas_at(t) for t in range(400)] == want_betas


def test_onecycle_momentum_cycle_hand_checked():
    """Cycle of 4 + 4 steps from 0.1 to 1.0: the lr climbs 0.1 → 1.0 over steps 1..4 and comes
    back; β1 runs 0.9 → 0.8 → 0.9 the other way; the constructor sets (cycle_min_mom, 0.99)."""
    cfg = load_config(
        _config(
            "OneCycle",
            {"cycle_min_lr": 0.1, "cycle_max_lr": 1.0, "cycle_first_step_size": 4},
        ),
        world_size=1,
    )
    s = cfg.scheduler
    lrs = [s.lr_for_step(t, BASE_LR) for t in range(10)]
    assert lrs == pytest.approx([0.1, 0.325, 0.55, 0.775, 1.0, 0.775, 0.55, 0.325, 0.1, 0.1])
    betas = [s.betas_for_step(t, BASE_BETAS) for t in range(6)]
    assert betas[0] == (0.8, 0.99)  # the constructor's, not get_mom() at -1
    assert [b[0] for b in betas[1:]] == pytest.approx([0.875, 0.85, 0.825, 0.8, 0.825])
    assert {b[1] for b in betas} == {0.99}


@pytest.mark.parametrize(
    ("sched", "message"),
    [
        (
            {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10}},
            "WarmupDecayLR needs scheduler.params.total_num_steps (DeepSpeed has no default for "
            "it)",
        ),
        (
            {"type": "OneCycle", "params": {"cycle_min_lr": 0.1}},
            "OneCycle needs scheduler.params.cycle_max_lr (DeepSpeed has no default for it)",
        ),
        (
            {"type": "WarmupCosineLR", "params": {"total_num_steps": 10, "warmup_type": "cos"}},
            "scheduler.params.warmup_type must be 'log' or 'linear', got \"cos\"",
        ),
        (
            {"type": "OneCycle", "params": {"cycle_min_lr": 0.1, "cycle_max_lr": 1, "x": 1}},
            "unknown key scheduler.params.x",
        ),
        (
            {"type": "LRRangeTest", "params": {"lr_range_test_step_size": 0}},
            "scheduler.params.lr_range_test_step_size must be ≥ 1, got 0",
        ),
        (
            {"type": "WarmupCosineLR", "params": {"total_num_steps": 10, "warmup_min_lr": 0}},
            "unknown key scheduler.params.warmup_min_lr (did you mean 'warmup_min_ratio'?)",
        ),
        (
            {"type": "WarmupCosine"},
            "unknown scheduler.type \"WarmupCosine\" (did you mean 'WarmupCosineLR'?); "
            "DeepSpeed knows WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest and "
            "torch.optim.lr_scheduler classes",
        ),
    ],
)
def test_bad_scheduler_params_are_one_line_errors(sched, message):
    with pytest.raises(ConfigError) as info:
        load_config({"train_batch_size": 2, "scheduler": sched}, world_size=1)
    assert str(info.value).startswith(f"ds_config: {message}")
    assert "\n" not in str(info.value)


def test_cosine_with_no_length_says_why_instead_of_dividing_by_zero():
    s = WarmupCosineLRConfig(total_num_steps=2, warmup_num_steps=0)
    assert s.lr_for_step(2, 1.0) == pytest.approx(1.0)  # still warming up: no division yet
    with pytest.raises(ConfigError, match="the cosine has no length"):
        s.lr_for_step(3, 1.0)


ENGINE_CASES = [
    (
        "OneCycle",
        {"cycle_min_lr": 1e-3, "cycle_max_lr": 2e-2, "cycle_first_step_size": 2,
         "cycle_second_step_size": 3, "decay_step_size": 1, "decay_lr_rate": 0.5,
         "decay_mom_rate": 0.01},
    ),
    ("WarmupCosineLR", {"total_num_steps": 6, "warmup_num_steps": 2, "warmup_type": "linear"}),
    ("WarmupDecayLR", {"total_num_steps": 5, "warmup_max_lr": 2e-2, "warmup_num_steps": 3}),
    ("LRRangeTest", {"lr_range_test_min_lr": 1e-3, "lr_range_test_step_size": 2,
                     "lr_range_test_staircase": True}),
]  # fmt: skip


@pytest.mark.slow
@needs_deepspeed
def test_engine_trains_with_deepspeeds_schedules():
    """dsbench's engine (ZeRO-1 and ZeRO-3, 2 gloo ranks) with each schedule ends where a
    single-process torch AdamW driven by DeepSpeed's scheduler class ends (OneCycle: also its
    β1 cycle and β2 = 0.99), within the engine tests' fp32 tolerance."""
    from dsbench.procs.distributed import spawn_ranks

    cases, schedulers = [], []
    for name, params in ENGINE_CASES:
        config = _config(name, params)
        config["optimizer"]["params"]["weight_decay"] = 0.01
        for stage in (1, 3):
            config["zero_optimization"] = {"stage": stage}
            cases.append(zero_settings(load_config(config, world_size=2, warn=lambda m: None)))
            schedulers.append(config["scheduler"])
    got = {}
    spawn_ranks(
        "tests._zero_workers:train",
        2,
        {"cases": cases, "schedulers": schedulers, "steps": 6, "micro_bs": 3},
        on_message=lambda rank, msg: got.__setitem__(msg["index"], msg),
    )
    assert sorted(got) == list(range(len(cases)))
    for index, settings in enumerate(cases):
        ours, ref = got[index]["state"], got[index]["reference"]
        for name, want in ref.items():
            torch.testing.assert_close(
                ours[name], want, atol=1e-5, rtol=1e-5,
                msg=lambda m, i=index, s=settings, n=name: f"{schedulers[i]['type']} stage "
                f"{s.stage} {n}: {m}",
            )  # fmt: skip
