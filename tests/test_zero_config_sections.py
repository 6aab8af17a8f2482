"""ds_config loading, one test per rule of dsbench.zero.config: batch sizes, precision (fp16,
bf16) and zero_optimization."""

import json
import subprocess
import sys

import pytest

from dsbench.zero.config import ConfigError
from dsbench.zero.loss_scaler import StaticLossScaler
from tests._zero_config_helpers import _sizes, base, error_of, load

# --- batch sizes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "world", "expected"),
    [
        ({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4}, 2, (32, 4, 4)),
        ({"train_batch_size": 32, "gradient_accumulation_steps": 4}, 2, (32, 4, 4)),
        ({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4}, 2, (32, 4, 4)),
        ({"train_batch_size": 32}, 4, (32, 8, 1)),
        ({"train_micro_batch_size_per_gpu": 4}, 4, (16, 4, 1)),
        (
            {
                "train_batch_size": 24,
                "train_micro_batch_size_per_gpu": 3,
                "gradient_accumulation_steps": 4,
            },
            2,
            (24, 3, 4),
        ),
    ],
)
def test_missing_batch_field_is_derived_like_deepspeed(given, world, expected):
    """DeepSpeed's _set_batch_related_parameters: one or two given, the rest derived."""
    b = load(given, world).batch
    assert (
        b.train_batch_size,
        b.train_micro_batch_size_per_gpu,
        b.gradient_accumulation_steps,
    ) == expected
    assert b.world_size == world


def test_batch_arithmetic_that_does_not_add_up_shows_the_numbers():
    cfg = {
        "train_batch_size": 16,
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 2,
    }
    assert error_of(cfg, world_size=1) == (
        "ds_config: train_batch_size 16 != train_micro_batch_size_per_gpu 4 × "
        "gradient_accumulation_steps 2 × world size 1 (= 8); give --train-batch 8 "
        "(or --grad-accum 4, --micro-batch 8) to run on 1 rank"
    )
    assert error_of({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 3}) == (
        "ds_config: train_batch_size 16 is not divisible by train_micro_batch_size_per_gpu 3 × "
        "world size 1 (= 3); give --train-batch 15 to run on 1 rank"
    )


@pytest.mark.parametrize("cfg", [{}, {"gradient_accumulation_steps": 4}, {"optimizer": None}])
def test_no_batch_size_is_an_error(cfg):
    assert error_of(cfg) == (
        "ds_config: no batch size: set train_batch_size or train_micro_batch_size_per_gpu, "
        "or give the micro-batch size on the command line"
    )


def test_batch_sizes_from_the_command_line_fill_in():
    assert load({"gradient_accumulation_steps": 2}, 2, micro_batch=4).batch.train_batch_size == 16
    assert load({}, 2, train_batch=16, grad_accum=2).batch.train_micro_batch_size_per_gpu == 4
    agreeing = load(base(), 1, train_batch=8)
    assert agreeing.batch.train_batch_size == 8 and agreeing.notes == ()  # nothing changed


# A config written for 8 ranks: 128 = micro-batch 4 × accumulation 4 × 8.
FOR_8 = {
    "train_batch_size": 128,
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 4,
}


@pytest.mark.parametrize(
    ("args", "sizes", "note"),
    [
        # --train-batch: accumulation re-derived (the micro-batch, sized for memory, is kept)
        ({"train_batch": 32}, (32, 4, 4), "train_batch_size 128 → 32 (--train-batch)"),
        (
            {"train_batch": 64},
            (64, 4, 8),
            "train_batch_size 128 → 64 (--train-batch), gradient_accumulation_steps 4 → 8",
        ),
        # --grad-accum: train_batch_size kept where it fits
        ({"grad_accum": 16}, (128, 4, 16), "gradient_accumulation_steps 4 → 16 (--grad-accum)"),
        # --micro-batch: the config's accumulation kept, train_batch_size re-derived
        (
            {"micro_batch": 2},
            (16, 2, 4),
            "train_batch_size 128 → 16, train_micro_batch_size_per_gpu 4 → 2 (--micro-batch)",
        ),
        # all three: taken as given
        (
            {"train_batch": 12, "micro_batch": 3, "grad_accum": 2},
            (12, 3, 2),
            "train_batch_size 128 → 12 (--train-batch), train_micro_batch_size_per_gpu 4 → 3 "
            "(--micro-batch), gradient_accumulation_steps 4 → 2 (--grad-accum)",
        ),
    ],
)
def test_command_line_batch_sizes_override_the_config_with_one_notice(args, sizes, note):
    cfg = load(FOR_8, 2, **args)
    assert _sizes(cfg) == sizes
    assert cfg.notes == ("the command line changes the ds_config's batch sizes: " + note,)
    ds = cfg.to_deepspeed_dict()  # DeepSpeed gets the effective sizes
    assert (
        ds["train_batch_size"],
        ds["train_micro_batch_size_per_gpu"],
        ds["gradient_accumulation_steps"],
    ) == sizes
    assert load(ds, 2) == cfg and load(ds, 2).notes == ()  # and loads them unchanged


def test_batch_resolution_rules_hold_for_random_configs_and_flags():
    """3000 random configs, command lines and world sizes: what loads keeps every command-line
    value and satisfies train = micro × accumulation × world; a config that loads alone is not
    changed when the flags agree with it; every refusal but "no batch size" names at least one
    flag, and each flag it names does make the config load."""
    import random
    import re

    rng = random.Random(0)
    flags = {
        "--train-batch": "train_batch",
        "--micro-batch": "micro_batch",
        "--grad-accum": "grad_accum",
    }
    keys = {"train_batch": 0, "micro_batch": 1, "grad_accum": 2}
    sizes = (1, 2, 3, 4, 6, 8, 16, 100, 128)
    for _ in range(3000):
        world = rng.choice((1, 2, 3, 4, 8))
        config = {k: rng.choice(sizes) for k in FOR_8 if rng.random() < 0.6}
        args = {k: rng.choice(sizes) for k in keys if rng.random() < 0.3}
        try:
            cfg = load(config, world, **args)
        except ConfigError as exc:
            message = str(exc)
            if "no batch size" in message:
                continue
            named = re.findall(r"(--[a-z-]+) (\d+)", message.partition("; give ")[2])
            assert named, message
            for flag, value in named:
                load(config, world, **{**args, flags[flag]: int(value)})
            continue
        train, micro, accum = _sizes(cfg)
        assert train == micro * accum * world
        for name, value in args.items():
            assert _sizes(cfg)[keys[name]] == value
        if not args:  # the config alone is taken as it is
            assert cfg.notes == ()
            assert all(
                config[k] == v for k, v in zip(FOR_8, _sizes(cfg), strict=True) if k in config
            )


def test_config_that_does_not_fit_the_world_size_names_the_flag_that_would():
    assert error_of(FOR_8, 2) == (
        "ds_config: train_batch_size 128 != train_micro_batch_size_per_gpu 4 × "
        "gradient_accumulation_steps 4 × world size 2 (= 32); give --train-batch 32 "
        "(or --grad-accum 16, --micro-batch 16) to run on 2 ranks"
    )
    for flag in ({"train_batch": 32}, {"grad_accum": 16}, {"micro_batch": 16}):
        load(FOR_8, 2, **flag)  # each named flag does fit
    # a command-line value that cannot fit either: the value that would replace it
    assert error_of(FOR_8, 3, train_batch=100) == (
        "ds_config: train_batch_size 100 != train_micro_batch_size_per_gpu 4 × "
        "gradient_accumulation_steps 4 × world size 3 (= 48); give --train-batch 48 "
        "to run on 3 ranks"
    )
    assert error_of({"train_batch_size": 100, "gradient_accumulation_steps": 3}, 2) == (
        "ds_config: train_batch_size 100 is not divisible by gradient_accumulation_steps 3 × "
        "world size 2 (= 6); give --train-batch 102 to run on 2 ranks"
    )
    load({"train_batch_size": 100, "gradient_accumulation_steps": 3}, 2, train_batch=102)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "train_batch_size must be ≥ 1, got 0"),
        (-8, "train_batch_size must be ≥ 1, got -8"),
        (True, "train_batch_size must be an integer, got true (a boolean)"),
        ("8", 'train_batch_size must be an integer, got "8" (a string)'),
        (8.5, "train_batch_size must be a whole number, got 8.5"),
    ],
)
def test_bad_batch_values(value, message):
    assert error_of({"train_batch_size": value}) == f"ds_config: {message}"


def test_whole_float_batch_is_an_integer():
    assert load({"train_batch_size": 16.0}, 2).batch.train_micro_batch_size_per_gpu == 8


# --- precision ------------------------------------------------------------------------------


def test_fp16_and_bf16_both_enabled_is_an_error():
    cfg = base(fp16={"enabled": True}, bf16={"enabled": True})
    assert error_of(cfg) == (
        "ds_config: fp16.enabled and bf16.enabled are both true; enable at most one precision"
    )


def test_fp16_and_bf16_error_survives_python_dash_O():
    """DeepSpeed only asserts this, so `python -O` lets it through; ours is a real error."""
    code = (
        "from dsbench.zero.config import load_config, ConfigError\n"
        "try:\n"
        "    load_config({'train_batch_size': 2, 'fp16': {'enabled': True},"
        " 'bf16': {'enabled': True}}, world_size=1)\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True
    )
    assert "both true" in out.stdout


def test_bf16_and_its_old_name_bfloat16():
    assert load(base(bfloat16={"enabled": True})).precision == "bf16"
    assert error_of(base(bf16={"enabled": True}, bfloat16={"enabled": True})) == (
        "ds_config: give bf16 or its old name bfloat16, not both"
    )
    old = load(base(bfloat16={"enabled": "auto"}), auto_values={"bfloat16.enabled": True})
    assert old.precision == "bf16" and old.to_deepspeed_dict()["bfloat16"] == {"enabled": True}


def test_static_loss_scale():
    cfg = load(base(fp16={"enabled": True, "loss_scale": 128}))
    scaler = cfg.fp16.loss_scaler()
    assert not cfg.fp16.dynamic and isinstance(scaler, StaticLossScaler) and scaler.scale == 128


def test_fp16_keys_deepspeed_accepts_and_dsbench_does_not_implement():
    """auto_cast and fp16_master_weights_and_grads are refused only when fp16 is on."""
    assert error_of(base(fp16={"enabled": True, "auto_cast": True})) == (
        "ds_config: dsbench's engine does not implement fp16.auto_cast=true; "
        "run this config with --engine deepspeed"
    )
    warnings = []
    cfg = load(base(fp16={"enabled": False, "auto_cast": True}), warnings=warnings)
    assert cfg.ignored_keys == ("fp16.auto_cast",) and cfg.unsupported == ()
    assert warnings == [
        "ds_config: dsbench's engine ignores these DeepSpeed settings: fp16.auto_cast"
    ]


@pytest.mark.parametrize(
    ("fp16", "message"),
    [
        ({"hysteresis": 0}, "fp16.hysteresis must be ≥ 1, got 0"),
        ({"loss_scale_window": 0}, "fp16.loss_scale_window must be ≥ 1, got 0"),
        ({"loss_scale": -1}, "fp16.loss_scale must not be negative, got -1"),
        ({"min_loss_scale": 0.5}, "fp16.min_loss_scale must be a whole number, got 0.5"),
        ({"hysteresis": True}, "fp16.hysteresis must be an integer, got true (a boolean)"),
        ({"enabled": 1}, "fp16.enabled must be true or false, got 1 (a number)"),
    ],
)
def test_fp16_bad_values(fp16, message):
    assert error_of(base(fp16=fp16)) == f"ds_config: {message}"


# --- zero_optimization ----------------------------------------------------------------------


@pytest.mark.parametrize("stage", [4, -1, "2", True, 1.5])
def test_stage_outside_0_to_3(stage):
    message = error_of(base(zero_optimization={"stage": stage}))
    assert (
        message
        == f"ds_config: zero_optimization.stage must be 0, 1, 2 or 3, got {json.dumps(stage)}"
    )


def test_zero_defaults_follow_deepspeed():
    """overlap_comm defaults to True only for stage 3; sizes 5e8/5e8/5e7/1e5."""
    z = load(base()).zero_optimization
    assert (z.stage, z.overlap_comm, z.contiguous_gradients, z.reduce_scatter) == (
        0,
        False,
        True,
        True,
    )
    assert (z.reduce_bucket_size, z.allgather_bucket_size) == (500_000_000, 500_000_000)
    assert (z.stage3_prefetch_bucket_size, z.stage3_param_persistence_threshold) == (
        50_000_000,
        100_000,
    )
    assert load(base(zero_optimization={"stage": 3})).zero_optimization.overlap_comm is True
    assert load(base(zero_optimization={"stage": 2})).zero_optimization.overlap_comm is False
    assert load(base(zero_optimization=True)).zero_optimization.stage == 1  # old boolean form


def test_sizes_written_as_json_floats_are_integers():
    z = load(
        base(
            zero_optimization={
                "reduce_bucket_size": 5e8,
                "stage3_prefetch_bucket_size": 6.039798e07,
            }
        )
    ).zero_optimization
    assert z.reduce_bucket_size == 500_000_000 and isinstance(z.reduce_bucket_size, int)
    assert z.stage3_prefetch_bucket_size == 60_397_980
    assert error_of(base(zero_optimization={"allgather_bucket_size": 2.5})) == (
        "ds_config: zero_optimization.allgather_bucket_size must be a whole number, got 2.5"
    )


@pytest.mark.parametrize(
    "key",
    [
        "reduce_bucket_size",
        "allgather_bucket_size",
        "stage3_prefetch_bucket_size",
        "stage3_param_persistence_threshold",
    ],
)
def test_negative_sizes(key):
    assert error_of(base(zero_optimization={key: -1})) == (
        f"ds_config: zero_optimization.{key} must not be negative, got -1"
    )


@pytest.mark.parametrize(
    ("zero", "message"),
    [
        (
            {"overlap_comm": 1},
            "zero_optimization.overlap_comm must be true or false, got 1 (a number)",
        ),
        (
            {"overlap_comm": "yes"},
            'zero_optimization.overlap_comm must be true or false, got "yes" (a string)',
        ),
        (
            {"reduce_bucket_size": True},
            "zero_optimization.reduce_bucket_size must be an integer, got true (a boolean)",
        ),
        (
            {"reduce_bucket_size": "5e8"},
            'zero_optimization.reduce_bucket_size must be an integer, got "5e8" (a string)',
        ),
    ],
)
def test_wrong_types_deepspeed_would_coerce(zero, message):
    """DeepSpeed's pydantic models turn 1 and "yes" into True and true into 1; we refuse."""
    assert error_of(base(zero_optimization=zero)) == f"ds_config: {message}"


def test_stage3_aliases():
    z = load(
        base(zero_optimization={"prefetch_bucket_size": 10, "param_persistence_threshold": 5})
    ).zero_optimization
    assert (z.stage3_prefetch_bucket_size, z.stage3_param_persistence_threshold) == (10, 5)
    assert error_of(
        base(zero_optimization={"prefetch_bucket_size": 1, "stage3_prefetch_bucket_size": 1})
    ) == (
        "ds_config: give zero_optimization.stage3_prefetch_bucket_size or its alias "
        "prefetch_bucket_size, not both"
    )


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (
            base(zero_optimization={"reduce_bucket_sise": 1}),
            "unknown key zero_optimization.reduce_bucket_sise (did you mean 'reduce_bucket_size'?)",
        ),
        (
            base(fp16={"enabled": True, "loss_scale_windows": 100}),
            "unknown key fp16.loss_scale_windows (did you mean 'loss_scale_window'?)",
        ),
        (base(bf16={"enable": True}), "unknown key bf16.enable (did you mean 'enabled'?)"),
        (
            base(optimizer={"type": "AdamW", "params": {"weight_decy": 0.1}}),
            "unknown key optimizer.params.weight_decy (did you mean 'weight_decay'?)",
        ),
        (
            base(scheduler={"type": "WarmupLR", "params": {"warmup_num_step": 5}}),
            "unknown key scheduler.params.warmup_num_step (did you mean 'warmup_num_steps'?)",
        ),
        (
            base(zero_optimization={"offload_optimizer": {"device": "cpu", "pin_memmory": True}}),
            "unknown key zero_optimization.offload_optimizer.pin_memmory "
            "(did you mean 'pin_memory'?)",
        ),
    ],
)
def test_unknown_key_inside_a_section_suggests_the_closest(cfg, message):
    assert error_of(cfg) == f"ds_config: {message}"
