"""ds_config loading: one test per rule of dsbench.zero.config, the seed configs, and configs
modelled on Hugging Face's and DeepSpeedExamples' (see tests/configs/README.md)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from dsbench.errors import UsageError
from dsbench.zero.config import (
    BatchConfig,
    ConfigError,
    DSConfig,
    OptimizerConfig,
    WarmupLRConfig,
    ZeroConfig,
    load_config,
)
from dsbench.zero.loss_scaler import DynamicLossScaler, StaticLossScaler

CONFIGS = Path(__file__).parent / "configs"
SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"

# Values a Hugging Face Trainer would write over the "auto" placeholders of hf_zero2_*.json.
HF_AUTO = {
    "fp16.enabled": False,
    "bf16.enabled": True,
    "optimizer.params.lr": 5e-5,
    "optimizer.params.betas": [0.9, 0.999],
    "optimizer.params.eps": 1e-8,
    "optimizer.params.weight_decay": 0.0,
    "scheduler.params.warmup_min_lr": 0,
    "scheduler.params.warmup_max_lr": 5e-5,
    "scheduler.params.warmup_num_steps": 10,
    "gradient_clipping": 1.0,
}


def load(source, world_size=1, **kwargs):
    """load_config, collecting warnings instead of printing them."""
    warnings = kwargs.pop("warnings", [])
    kwargs.setdefault("warn", warnings.append)
    return load_config(source, world_size=world_size, **kwargs)


def error_of(source, world_size=1, **kwargs) -> str:
    """The message of the ConfigError load_config raises; it must be one line."""
    with pytest.raises(ConfigError) as info:
        load(source, world_size, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("ds_config: ")
    assert isinstance(info.value, UsageError)  # the CLI turns it into exit status 2
    return message


def base(**extra) -> dict:
    """A minimal valid config, with ``extra`` top-level keys."""
    return {"train_batch_size": 8, **extra}


# --- the seed articles ----------------------------------------------------------------------


def test_seed_001_zero2_loads_unchanged():
    """Section 3.3's ds_config.json: ZeRO-2, fp16 dynamic scaling, AdamW, batch 16 = m × 2 × n."""
    cfg = load(CONFIGS / "seed_001_zero2_ds_config.json", world_size=2)
    assert (cfg.batch.train_batch_size, cfg.batch.train_micro_batch_size_per_gpu) == (16, 4)
    assert cfg.batch.gradient_accumulation_steps == 2
    assert cfg.zero_optimization.stage == 2
    assert cfg.zero_optimization.overlap_comm and cfg.zero_optimization.contiguous_gradients
    assert cfg.zero_optimization.reduce_scatter
    assert cfg.precision == "fp16" and cfg.fp16.dynamic
    opt = cfg.optimizer
    assert (opt.type, opt.lr, opt.weight_decay, opt.betas) == ("adamw", 1e-4, 0.01, (0.9, 0.999))
    assert opt.decoupled_weight_decay and not opt.torch_adam
    assert cfg.ignored_keys == cfg.unsupported == cfg.unknown_keys == ()
    for world, micro in ((1, 8), (4, 2), (8, 1)):
        assert (
            load(
                CONFIGS / "seed_001_zero2_ds_config.json", world
            ).batch.train_micro_batch_size_per_gpu
            == micro
        )


def test_seed_001_refused_where_the_batch_does_not_divide():
    message = error_of(CONFIGS / "seed_001_zero2_ds_config.json", world_size=3)
    assert message == (
        "ds_config: train_batch_size 16 is not divisible by gradient_accumulation_steps 2 × "
        "world size 3 (= 6); give --train-batch 18 to run on 3 ranks"
    )


def test_seed_000_fp16_adamw_block_loads_with_a_micro_batch_from_the_command_line():
    """Section 6.1's block has no batch size: the command line gives it, accumulation is 1."""
    path = CONFIGS / "seed_000_fp16_adamw.json"
    assert "no batch size" in error_of(path, world_size=2)
    cfg = load(path, world_size=2, micro_batch=16)
    assert (cfg.batch.train_batch_size, cfg.batch.gradient_accumulation_steps) == (32, 1)
    assert cfg.fp16.enabled and cfg.fp16.loss_scale == 0
    assert (cfg.fp16.loss_scale_window, cfg.fp16.hysteresis, cfg.fp16.min_loss_scale) == (
        1000,
        2,
        1,
    )
    assert cfg.fp16.initial_scale_power == 16
    assert cfg.optimizer.torch_adam and cfg.optimizer.decoupled_weight_decay
    assert (cfg.optimizer.lr, cfg.optimizer.weight_decay) == (6e-5, 0.01)
    scaler = cfg.fp16.loss_scaler()
    assert isinstance(scaler, DynamicLossScaler) and scaler.scale == 2.0**16
    assert (scaler.loss_scale_window, scaler.hysteresis) == (1000, 2)


@pytest.mark.parametrize(
    ("name", "article", "start", "end"),
    [
        ("seed_000_fp16_adamw.json", "000_*.txt", "json复制", "这个配置特别针对"),
        (
            "seed_001_zero2_ds_config.json",
            "001_*.txt",
            "先写配置ds_config.json：",
            "然后是训练脚本",
        ),
    ],
)
def test_seed_copies_are_verbatim(name, article, start, end):
    """tests/configs holds the seed blocks byte for byte (checked where ../shared exists)."""
    found = sorted(SEEDS.glob(article))
    if not found:
        pytest.skip(f"no seed article {SEEDS / article} here (CI has no ../shared)")
    text = found[0].read_text(encoding="utf-8")
    block = text[text.index(start) + len(start) : text.index(end)]
    block = block[block.index("{") :]
    assert (CONFIGS / name).read_text(encoding="utf-8").strip() == block.strip()


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


def _sizes(cfg: DSConfig) -> tuple[int, int, int]:
    b = cfg.batch
    return b.train_batch_size, b.train_micro_batch_size_per_gpu, b.gradient_accumulation_steps


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


# --- top-level keys: unknown, ignored, refused ----------------------------------------------


def test_unknown_top_level_keys_one_warning():
    """DeepSpeed accepts unknown top-level keys silently; we load and warn once, listing all."""
    warnings = []
    cfg = load(base(gradient_cliping=1.0, my_note="x"), warnings=warnings)
    assert cfg.unknown_keys == ("gradient_cliping", "my_note")
    assert warnings == [
        "ds_config: ignoring unknown top-level keys 'gradient_cliping' (did you mean "
        "'gradient_clipping'?), 'my_note' (DeepSpeed ignores them too)"
    ]


def test_keys_dsbench_ignores_one_warning_and_recorded():
    warnings = []
    cfg = load(
        base(
            zero_optimization={
                "stage": 3,
                "sub_group_size": 1e9,
                "stage3_max_live_parameters": 1e9,
                "stage3_max_reuse_distance": 1e9,
                "round_robin_gradients": True,
                "zero_hpz_partition_size": 1,
                "stage3_gather_16bit_weights_on_model_save": True,
                "offload_optimizer": {"device": "none"},
            },
            activation_checkpointing={"partition_activations": True},
            comms_logger={"enabled": True},
            flops_profiler={"enabled": True},
            tensorboard={"enabled": True},
            zero_allow_untested_optimizer=True,
            zero_force_ds_cpu_optimizer=False,
        ),
        warnings=warnings,
    )
    assert cfg.unsupported == ()
    assert set(cfg.ignored_keys) == {
        "activation_checkpointing.partition_activations",
        "comms_logger",
        "flops_profiler",
        "tensorboard",
        "zero_allow_untested_optimizer",
        "zero_force_ds_cpu_optimizer",
        "zero_optimization.sub_group_size",
        "zero_optimization.round_robin_gradients",
        "zero_optimization.zero_hpz_partition_size",
        "zero_optimization.stage3_gather_16bit_weights_on_model_save",
    }  # offload_optimizer with device "none" is read (offload off), not ignored
    # stage3_max_reuse_distance / max_live_parameters are implemented, hence read, not ignored
    assert cfg.zero_optimization.stage3_max_reuse_distance == 1_000_000_000
    assert len(warnings) == 1
    assert warnings[0].startswith("ds_config: dsbench's engine ignores these DeepSpeed settings: ")
    assert load(cfg.to_deepspeed_dict(), for_engine="deepspeed", warnings=(quiet := [])) == cfg
    assert quiet == []  # DeepSpeed uses them: nothing to say


def test_settings_dsbench_refuses_point_to_the_deepspeed_engine():
    cfg = base(
        zero_optimization={
            "stage": 3,
            "offload_optimizer": {"device": "cpu"},
            "offload_param": {"device": "nvme", "nvme_path": "/x"},
        },
        pipeline={"stages": 2},
        use_data_before_expert_parallelism=True,
    )
    assert error_of(cfg) == (
        "ds_config: dsbench's engine does not implement pipeline, "
        "use_data_before_expert_parallelism=true, "
        'zero_optimization.offload_param.device="nvme"; run this config with --engine deepspeed'
    )
    loaded = load(cfg, for_engine="deepspeed")
    assert loaded.unsupported == (
        "pipeline",
        "use_data_before_expert_parallelism=true",
        'zero_optimization.offload_param.device="nvme"',
    )
    assert loaded.to_deepspeed_dict()["zero_optimization"]["offload_param"]["device"] == "nvme"


def test_bad_offload_device():
    assert error_of(base(zero_optimization={"offload_param": {"device": "gpu"}})) == (
        "ds_config: zero_optimization.offload_param.device must be 'none', 'cpu' or 'nvme', "
        'got "gpu"'
    )


# --- optimizer ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("opt", "decoupled"),
    [
        ({"type": "AdamW"}, True),
        ({"type": "adamw"}, True),
        ({"type": "Adam"}, True),  # DeepSpeed: adam_w_mode defaults to True
        ({"type": "ADAM", "params": {"adam_w_mode": False}}, False),  # the only L2 case
        ({"type": "AdamW", "params": {"adam_w_mode": False}}, True),  # AdamW is always decoupled
        ({"type": "Adam", "params": {"adam_w_mode": False, "torch_adam": True}}, False),
    ],
)
def test_adam_and_adamw_weight_decay_mode(opt, decoupled):
    """engine._configure_basic_optimizer: effective_adam_w_mode = name == adamw or adam_w_mode."""
    cfg = load(base(optimizer=opt))
    assert cfg.optimizer.type == opt["type"].lower()
    assert cfg.optimizer.decoupled_weight_decay is decoupled


def test_weight_decay_default_is_the_built_optimizers():
    """torch.optim.AdamW defaults to 0.01, FusedAdam and torch.optim.Adam to 0."""

    def wd(params):
        return load(base(optimizer={"type": "AdamW", "params": params})).optimizer.weight_decay

    assert wd({"torch_adam": True}) == 0.01
    assert wd({}) == 0.0
    assert (
        load(
            base(optimizer={"type": "Adam", "params": {"torch_adam": True, "adam_w_mode": False}})
        ).optimizer.weight_decay
        == 0.0
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"lr": "1e-4"}, 'optimizer.params.lr must be a number, got "1e-4" (a string)'),
        ({"lr": -1e-4}, "optimizer.params.lr must not be negative, got -0.0001"),
        ({"betas": [0.9]}, "optimizer.params.betas must be two numbers, got [0.9]"),
        ({"betas": [0.9, 1.0]}, "optimizer.params.betas must each be in [0, 1), got [0.9, 1.0]"),
        (
            {"torch_adam": "true"},
            'optimizer.params.torch_adam must be true or false, got "true" (a string)',
        ),
        (
            {"max_grad_norm": 1.0},
            "optimizer.params.max_grad_norm is not supported (DeepSpeed refuses it too); "
            "use the top-level gradient_clipping instead",
        ),
        (
            {"torch_adam": True, "bias_correction": False},
            "optimizer.params.bias_correction is not an argument of torch.optim.Adam/AdamW",
        ),
        (
            {"foreach": True},
            "optimizer.params.foreach is not an argument of DeepSpeed's FusedAdam "
            "(torch_adam is false)",
        ),
    ],
)
def test_optimizer_bad_params(params, message):
    assert error_of(base(optimizer={"type": "AdamW", "params": params})) == f"ds_config: {message}"


def test_other_optimizers_are_deepspeed_engine_only():
    cfg = base(optimizer={"type": "Lamb", "params": {"lr": 1e-3, "max_coeff": 0.3}})
    assert 'optimizer.type="Lamb"; run this config with --engine deepspeed' in error_of(cfg)
    assert load(cfg, for_engine="deepspeed").optimizer is None
    assert load(base(optimizer={"type": "SGD"}), for_engine="deepspeed").unsupported == (
        'optimizer.type="SGD"',
    )
    assert error_of(base(optimizer={"type": "Adamm"})).startswith(
        "ds_config: unknown optimizer.type \"Adamm\" (did you mean 'Adam'?)"
    )


# --- scheduler ------------------------------------------------------------------------------


def test_warmup_lr_linear_values_hand_checked():
    """min 0.001, max 0.01, 4 steps, linear: 0.001 + 0.009·step/4.

    DeepSpeed 0.18.4 on CPU (deepspeed.initialize, ZeRO-1, torch AdamW) ran optimizer steps
    0..5 with lr 0.001, 0.001, 0.00325, 0.0055, 0.00775, 0.01: step t uses lr_at(t - 1).
    """
    s = WarmupLRConfig(
        warmup_min_lr=0.001, warmup_max_lr=0.01, warmup_num_steps=4, warmup_type="linear"
    )
    assert [s.lr_at(k) for k in (-1, 0, 1, 2, 3, 4, 100)] == pytest.approx(
        [0.001, 0.001, 0.00325, 0.0055, 0.00775, 0.01, 0.01], rel=1e-12
    )
    assert [s.lr_for_step(t) for t in range(6)] == pytest.approx(
        [0.001, 0.001, 0.00325, 0.0055, 0.00775, 0.01], rel=1e-12
    )


def test_warmup_lr_log_values_hand_checked():
    """log: gamma = ln(step + 1)/ln(4); ln 2/ln 4 = 0.5, ln 3/ln 4 = 0.79248125."""
    s = WarmupLRConfig(warmup_min_lr=0.001, warmup_max_lr=0.01, warmup_num_steps=4)
    assert s.warmup_type == "log"
    assert [s.lr_at(k) for k in (0, 1, 2, 3, 4)] == pytest.approx(
        [0.001, 0.0055, 0.001 + 0.009 * 0.7924812503605781, 0.01, 0.01], rel=1e-12
    )
    assert s.lr_at(2) == pytest.approx(0.00813233, rel=1e-6)  # DeepSpeed's value on CPU
    # fewer than two warm-up steps count as two (DeepSpeed: max(2, warmup_num_steps))
    one = WarmupLRConfig(
        warmup_min_lr=0.0, warmup_max_lr=1.0, warmup_num_steps=1, warmup_type="linear"
    )
    assert (one.lr_at(0), one.lr_at(1), one.lr_at(2)) == (0.0, 0.5, 1.0)
    assert math.isclose(
        WarmupLRConfig(warmup_max_lr=1.0, warmup_num_steps=1000).lr_at(99),
        math.log(100) / math.log(1000),
    )


def test_warmup_max_lr_defaults_to_the_optimizers_lr():
    cfg = load(
        base(optimizer={"type": "AdamW", "params": {"lr": 3e-4}}, scheduler={"type": "WarmupLR"})
    )
    s = cfg.scheduler
    assert (s.warmup_min_lr, s.warmup_max_lr, s.warmup_num_steps, s.warmup_type) == (
        0.0,
        3e-4,
        1000,
        "log",
    )


@pytest.mark.parametrize(
    ("sched", "message"),
    [
        (
            {"type": "WarmupCosineLR", "params": {"total_num_steps": 9, "warmup_type": "cosine"}},
            "scheduler.params.warmup_type must be 'log' or 'linear', got \"cosine\"",
        ),
        (
            {"type": "WarmupLR", "params": {"warmup_num_steps": -5}},
            "scheduler.params.warmup_num_steps must not be negative, got -5",
        ),
        ({"type": "warmuplr"}, "unknown scheduler.type \"warmuplr\" (did you mean 'WarmupLR'?)"),
    ],
)
def test_scheduler_errors(sched, message):
    assert error_of(base(scheduler=sched)).startswith(f"ds_config: {message}")


def test_unknown_warmup_type_warms_up_with_log_as_deepspeed_does():
    """DeepSpeed's WarmupLR and WarmupDecayLR warn and use 'log' for any other warmup_type (public
    configs write "cosine"); so do we, with one warning. "auto" (which the Trainer leaves) too."""
    warnings = []
    sched = {"type": "WarmupDecayLR", "params": {"total_num_steps": 9, "warmup_type": "cosine"}}
    cfg = load(base(scheduler=sched), warnings=warnings)
    assert cfg.scheduler.warmup_type == "log"
    assert warnings == [
        "ds_config: scheduler.params.warmup_type \"cosine\" is not 'log' or 'linear'; warming "
        "up with 'log', as DeepSpeed does"
    ]
    assert cfg.to_deepspeed_dict()["scheduler"]["params"]["warmup_type"] == "cosine"
    auto = {"type": "WarmupLR", "params": {"warmup_type": "auto"}}
    cfg = load(base(scheduler=auto))
    assert (
        cfg.scheduler.warmup_type == "log"
        and 'scheduler.params.warmup_type="log"' in (cfg.notes[0])
    )


def test_torch_schedulers_are_deepspeed_engine_only():
    """DeepSpeed's five are dsbench's too (tests/test_schedulers.py); torch's are refused."""
    cfg = base(scheduler={"type": "StepLR", "params": {"step_size": 100}})
    assert 'scheduler.type="StepLR"' in error_of(cfg)
    assert load(cfg, for_engine="deepspeed").scheduler is None


def test_gradient_clipping_and_harmless_top_level_fields():
    cfg = load(base(gradient_clipping=1, steps_per_print=10, wall_clock_breakdown=True))
    assert (cfg.gradient_clipping, cfg.steps_per_print, cfg.wall_clock_breakdown) == (1.0, 10, True)
    assert (
        error_of(base(gradient_clipping=-1.0))
        == "ds_config: gradient_clipping must not be negative, got -1"
    )
    assert error_of(base(steps_per_print=0)) == "ds_config: steps_per_print must be ≥ 1, got 0"


# --- "auto" (Hugging Face Trainer) ----------------------------------------------------------


def test_auto_filled_as_the_hugging_face_trainer_would():
    """Every "auto" of the Trainer's ZeRO-2 test config, from the Trainer's defaults; the filled
    values are one line, and DeepSpeed gets the same values."""
    path = CONFIGS / "hf_zero2_auto_no_offload.json"
    cfg = load(path, 2)
    assert _sizes(cfg) == (16, 8, 1)  # micro-batch 8, accumulation 1, × 2 ranks
    opt, sched = cfg.optimizer, cfg.scheduler
    assert (opt.lr, opt.betas, opt.eps, opt.weight_decay) == (5e-5, (0.9, 0.999), 1e-8, 0.0)
    assert (sched.warmup_min_lr, sched.warmup_max_lr, sched.warmup_num_steps) == (0, 5e-5, 0)
    assert (cfg.gradient_clipping, cfg.precision) == (1.0, "fp32")
    assert cfg.notes == (
        '"auto" filled as the Hugging Face Trainer would (command line first): '
        "bf16.enabled=false, optimizer.params.lr=5e-05, optimizer.params.betas=[0.9, 0.999], "
        "optimizer.params.eps=1e-08, optimizer.params.weight_decay=0.0, "
        "scheduler.params.warmup_min_lr=0, scheduler.params.warmup_max_lr=5e-05, "
        "scheduler.params.warmup_num_steps=0, gradient_accumulation_steps=1, "
        "gradient_clipping=1.0, train_batch_size=16, train_micro_batch_size_per_gpu=8",
    )
    ds = cfg.to_deepspeed_dict()
    assert "auto" not in json.dumps(ds)
    assert load(ds, 2) == cfg


def test_auto_command_line_values_win():
    path = CONFIGS / "hf_zero2_auto_no_offload.json"
    cfg = load(path, 2, micro_batch=4, grad_accum=3)
    assert _sizes(cfg) == (24, 4, 3)
    assert (
        "gradient_accumulation_steps=3 (--grad-accum), gradient_clipping=1.0, "
        "train_batch_size=24, train_micro_batch_size_per_gpu=4 (--micro-batch)"
    ) in cfg.notes[0]
    # --train-batch with "auto" sizes: the micro-batch stays the Trainer's 8, accumulation fits
    assert _sizes(load(path, 2, train_batch=64)) == (64, 8, 4)
    # a number in the config outranks "auto": the "auto" accumulation is derived around it
    assert _sizes(load({"train_batch_size": 64, "gradient_accumulation_steps": "auto"}, 2)) == (
        64,
        32,
        1,
    )
    micro_auto = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": "auto"}
    assert _sizes(load(micro_auto, 2)) == (64, 8, 4)
    # explicit auto_values come before the Trainer's defaults
    cfg = load(path, 2, auto_values={"optimizer.params.lr": 1e-4})
    assert cfg.optimizer.lr == cfg.scheduler.warmup_max_lr == 1e-4
    assert _sizes(load(path, 2, auto_values={"train_micro_batch_size_per_gpu": 2})) == (4, 2, 1)


def test_auto_that_needs_the_run_or_the_model():
    """total_num_steps is the run's steps; ZeRO bucket sizes follow the model's hidden size
    (the Trainer's hidden², 0.9·hidden², 10·hidden); the optimizer's lr feeds warmup_max_lr."""
    config = {
        "train_micro_batch_size_per_gpu": 2,
        "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
        "scheduler": {
            "type": "WarmupDecayLR",
            "params": {"total_num_steps": "auto", "warmup_max_lr": "auto"},
        },
        "zero_optimization": {
            "stage": 3,
            "reduce_bucket_size": "auto",
            "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto",
        },
    }
    assert error_of(config, 2) == (
        'ds_config: "auto" (a Hugging Face Trainer placeholder) has no value dsbench can fill '
        "for scheduler.params.total_num_steps (the run's steps), "
        "zero_optimization.reduce_bucket_size (the model's hidden size), "
        "zero_optimization.stage3_prefetch_bucket_size (the model's hidden size), "
        "zero_optimization.stage3_param_persistence_threshold (the model's hidden size); "
        "write values into the config"
    )
    cfg = load(config, 2, steps=60, hidden_size=128)
    assert (cfg.scheduler.total_num_steps, cfg.scheduler.warmup_max_lr) == (60, 3e-4)
    z = cfg.zero_optimization
    assert (
        z.reduce_bucket_size,
        z.stage3_prefetch_bucket_size,
        z.stage3_param_persistence_threshold,
    ) == (16384, 14745, 1280)
    assert error_of({"train_batch_size": 2, "zero_optimization": {"stage": "auto"}}) == (
        'ds_config: "auto" (a Hugging Face Trainer placeholder) has no value dsbench can fill '
        "for zero_optimization.stage; write values into the config"
    )


def test_auto_batch_sizes_and_the_command_line():
    cfg = load(CONFIGS / "dse_autotuning_z2.json", world_size=2, micro_batch=8)
    assert _sizes(cfg) == (16, 8, 1)
    assert load(CONFIGS / "dse_autotuning_z2.json", world_size=2).batch.train_batch_size == 16


def test_auto_values_filled_hf_zero2_loads():
    cfg = load(
        CONFIGS / "hf_zero2_auto_no_offload.json",
        2,
        micro_batch=4,
        grad_accum=2,
        auto_values=HF_AUTO,
    )
    assert cfg.batch.train_batch_size == 16 and cfg.precision == "bf16"
    assert (cfg.optimizer.lr, cfg.scheduler.warmup_max_lr, cfg.gradient_clipping) == (
        5e-5,
        5e-5,
        1.0,
    )
    assert cfg.zero_optimization.reduce_bucket_size == 200_000_000
    ds = cfg.to_deepspeed_dict()
    assert "auto" not in json.dumps(ds)
    assert ds["optimizer"]["params"]["lr"] == 5e-5 and ds["train_micro_batch_size_per_gpu"] == 4


# --- configs modelled on real ones (tests/configs/README.md) --------------------------------

DS_ENGINE = "run this config with --engine deepspeed"
REAL_WORLD = [
    # file, world size, load_config keywords, the end of dsbench's engine's error (None: it
    # loads), whether it loads for the DeepSpeed engine
    (
        "hf_zero3_offload.json",
        2,
        {"micro_batch": 2},
        None,
        True,
    ),
    ("hf_zero2_auto.json", 2, {"micro_batch": 2, "auto_values": HF_AUTO}, None, True),
    (
        "dse_cifar.json",
        2,
        {},
        "fp16.fp16_master_weights_and_grads=true; " + DS_ENGINE,
        True,
    ),
    (
        "dse_bing_bert_adam.json",
        1,
        {},
        "optimizer.params.max_grad_norm is not supported (DeepSpeed refuses it too); "
        "use the top-level gradient_clipping instead",
        False,
    ),
    (
        "dse_bing_bert_lamb.json",
        8,
        {},
        'sparse_attention, optimizer.type="Lamb"; run this config with --engine deepspeed',
        True,
    ),
    ("dse_hello_deepspeed.json", 2, {}, None, True),
    ("dse_megatron_zero2.json", 2, {}, None, True),
    (
        "dse_megatron_zero3_typo.json",
        2,
        {},
        "unknown key zero_optimization.stage3_param_persitence_threshold "
        "(did you mean 'stage3_param_persistence_threshold'?)",
        False,
    ),
    (
        "dse_imagenet_fp16_z1.json",
        2,
        {},
        "fp16.auto_cast=true; run this config with --engine deepspeed",
        True,
    ),
    ("dse_autotuning_z2.json", 2, {"micro_batch": 4}, None, True),
    (
        "dse_zero2_bf16_warmupdecay_8gpu.json",
        2,
        {},
        "(= 64); give --train-batch 64 (or --grad-accum 16, --micro-batch 32) to run on 2 ranks",
        False,
    ),
    ("dse_zero2_bf16_warmupdecay_8gpu.json", 2, {"train_batch": 64}, None, True),
    ("dse_zero3_offload_checkpointing.json", 2, {"train_batch": 16}, None, True),
    (
        "dse_zero3_moe_leaf_cosine.json",
        2,
        {},
        "zero_optimization.leaf_module; run this config with --engine deepspeed",
        True,
    ),
    (
        "dse_autotp_zero1_auto.json",
        2,
        {"micro_batch": 2},
        "tensor_parallel.autotp_size=2; run this config with --engine deepspeed",
        True,
    ),
    (
        "dse_onebitlamb_fp16.json",
        2,
        {},
        'optimizer.type="OneBitLamb"; run this config with --engine deepspeed',
        True,
    ),
    ("dsbench_zero3_all_keys.json", 2, {}, None, True),
    ("seed_001_zero2_ds_config.json", 2, {}, None, True),
    ("seed_000_fp16_adamw.json", 2, {"micro_batch": 16}, None, True),
]


@pytest.mark.parametrize(
    ("name", "world", "kwargs", "error", "deepspeed_ok"), REAL_WORLD, ids=[r[0] for r in REAL_WORLD]
)
def test_real_world_configs_load_or_are_refused_with_the_right_message(
    name, world, kwargs, error, deepspeed_ok
):
    path = CONFIGS / name
    if error is None:
        load(path, world, **kwargs)
    else:
        assert error_of(path, world, **kwargs).endswith(error)
    if deepspeed_ok:
        cfg = load(path, world, for_engine="deepspeed", **kwargs)
        assert load(cfg.to_deepspeed_dict(), world, for_engine="deepspeed") == cfg
    else:
        error_of(path, world, for_engine="deepspeed", **kwargs)


def test_real_world_details():
    """A few values that show the configs are read as DeepSpeed reads them."""
    warnings = []
    mega = load(CONFIGS / "dse_megatron_zero2.json", 2, warnings=warnings)
    assert warnings == [
        "ds_config: dsbench's engine ignores these DeepSpeed settings: "
        "activation_checkpointing.partition_activations"
    ]
    assert mega.activation_checkpointing.enabled  # the model's blocks are checkpointed
    assert (
        mega.batch.train_micro_batch_size_per_gpu,
        mega.gradient_clipping,
        mega.steps_per_print,
    ) == (8, 1.0, 1)
    assert mega.optimizer.type == "adam" and mega.optimizer.decoupled_weight_decay

    warnings = []
    imagenet = load(
        CONFIGS / "dse_imagenet_fp16_z1.json", 2, for_engine="deepspeed", warnings=warnings
    )
    assert imagenet.unknown_keys == ("cuda_visible_devices",) and len(warnings) == 1

    z3 = load(
        CONFIGS / "hf_zero3_offload.json", 2, micro_batch=2, for_engine="deepspeed"
    ).zero_optimization
    assert (
        z3.stage,
        z3.reduce_bucket_size,
        z3.stage3_prefetch_bucket_size,
        z3.stage3_param_persistence_threshold,
    ) == (3, 0, 0, 0)

    full = load(CONFIGS / "dsbench_zero3_all_keys.json", 2)
    assert full.scheduler.warmup_max_lr == 2e-4 and full.scheduler.warmup_type == "linear"
    assert full.optimizer.betas == (0.9, 0.95) and full.precision == "bf16"
    assert full.zero_optimization.stage3_param_persistence_threshold == 10_000


# --- sources and the round trip -------------------------------------------------------------


def test_sources_path_text_and_dict(tmp_path):
    text = (CONFIGS / "seed_001_zero2_ds_config.json").read_text()
    from_path = load(str(CONFIGS / "seed_001_zero2_ds_config.json"), 2)
    assert load(text, 2) == from_path == load(json.loads(text), 2)
    assert error_of(tmp_path / "missing.json").startswith(
        f"ds_config: cannot read {tmp_path / 'missing.json'}"
    )
    bad = tmp_path / "bad.json"
    bad.write_text('{"train_batch_size": 8,}')
    assert error_of(bad).startswith(f"ds_config: {bad}: not valid JSON")
    bad.write_text('{"fp16": {}, "fp16": {}}')
    assert error_of(bad) == f"ds_config: {bad}: duplicate key 'fp16'"
    assert error_of("[1, 2]") == "ds_config: the top level must be an object {...}, got a list"
    assert error_of(base(fp16=True)) == "ds_config: fp16 must be an object {...}, got true"


def test_to_deepspeed_dict_round_trip():
    """The dict keeps every key (DeepSpeed-only ones too), gains resolved batch sizes, and
    loads back into an equal DSConfig; the caller's dict is not modified."""
    source = base(
        gradient_accumulation_steps=2,
        optimizer={"type": "Adam", "params": {"lr": 1e-3}},
        scheduler={"type": "WarmupLR", "params": {"warmup_num_steps": 10}},
        zero_optimization={"stage": 2, "reduce_bucket_size": 5e7, "round_robin_gradients": True},
        fp16={"enabled": True, "initial_scale_power": 12},
        flops_profiler={"enabled": False},
        something_else=[1, 2],
    )
    before = json.dumps(source)
    cfg = load(source, 2)
    ds = cfg.to_deepspeed_dict()
    assert json.dumps(source) == before
    assert (
        ds["train_batch_size"],
        ds["train_micro_batch_size_per_gpu"],
        ds["gradient_accumulation_steps"],
    ) == (8, 2, 2)
    assert ds["zero_optimization"]["round_robin_gradients"] is True and ds["something_else"] == [
        1,
        2,
    ]
    again = load(ds, 2)
    assert again == cfg and again.to_deepspeed_dict() == ds
    ds["fp16"]["enabled"] = False  # a copy: the config is unchanged
    assert cfg.to_deepspeed_dict()["fp16"]["enabled"] is True


def test_dataclasses_validate_when_built_directly():
    """__post_init__ validates: the same errors without load_config."""
    with pytest.raises(ConfigError, match=r"zero_optimization\.stage must be 0, 1, 2 or 3, got 5"):
        ZeroConfig(stage=5)
    with pytest.raises(ConfigError, match="!= train_micro_batch_size_per_gpu 2"):
        BatchConfig(
            train_batch_size=8,
            train_micro_batch_size_per_gpu=2,
            gradient_accumulation_steps=1,
            world_size=2,
        )
    with pytest.raises(ConfigError, match="must be Adam or AdamW"):
        OptimizerConfig(type="sgd")
    batch = BatchConfig(
        train_batch_size=4,
        train_micro_batch_size_per_gpu=2,
        gradient_accumulation_steps=1,
        world_size=2,
    )
    assert DSConfig(batch=batch).precision == "fp32"


@pytest.mark.slow  # importing DeepSpeed takes seconds
def test_deepspeed_reads_the_same_batch_and_zero_settings(monkeypatch):
    """With DeepSpeed installed (CI's parity job), its own parser agrees with ours."""
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    ds_config = pytest.importorskip("deepspeed.runtime.config")
    # DeepSpeedConfig without a process group assumes world size 1.
    for name, kwargs in [
        ("seed_001_zero2_ds_config.json", {}),
        ("hf_zero3_offload.json", {"micro_batch": 2}),
        ("dse_megatron_zero2.json", {}),
    ]:
        cfg = load(CONFIGS / name, 1, for_engine="deepspeed", **kwargs)
        theirs = ds_config.DeepSpeedConfig(cfg.to_deepspeed_dict())
        b, z, ours = theirs, theirs.zero_config, cfg.zero_optimization
        assert (
            b.train_batch_size,
            b.train_micro_batch_size_per_gpu,
            b.gradient_accumulation_steps,
        ) == (
            cfg.batch.train_batch_size,
            cfg.batch.train_micro_batch_size_per_gpu,
            cfg.batch.gradient_accumulation_steps,
        )
        assert (z.stage, z.overlap_comm, z.reduce_bucket_size, z.prefetch_bucket_size) == (
            ours.stage,
            ours.overlap_comm,
            ours.reduce_bucket_size,
            ours.stage3_prefetch_bucket_size,
        )
        assert (theirs.float16_config.enabled, theirs.gradient_clipping) == (
            cfg.fp16.enabled,
            cfg.gradient_clipping,
        )


# --------------------------------------------------------------------------------------------
# Each field's DeepSpeed status (dsbench.zero.fields): the one source of what is ignored/refused

_ON = (True, 2, {"enabled": True}, {"autotp_size": 2}, {"grad_accum_dtype": "fp32"},
       {"classes": ["MoE"]})  # fmt: skip
_OFF = (False, None, 1)


def _status_cases():
    from dsbench.zero.fields import not_implemented
    from dsbench.zero.sections import BF16Config, FP16Config

    for path, cls in (("", DSConfig), ("zero_optimization", ZeroConfig), ("fp16", FP16Config),
                      ("bf16", BF16Config)):  # fmt: skip
        for key, on in not_implemented(cls).items():
            yield pytest.param(path, key, on, id=f"{path or 'top'}.{key}")


@pytest.mark.parametrize(("path", "key", "refused_if"), list(_status_cases()))
def test_each_field_status_decides_ignored_or_refused(path, key, refused_if):
    """A key a field marks ignored is reported in ignored_keys whatever its value; one it marks
    refused is in unsupported when a value turns it on, else ignored."""

    def loaded(value):
        section = {key: value, "enabled": True} if path in ("fp16", "bf16") else {key: value}
        raw = {"train_batch_size": 2, **({path: section} if path else section)}
        return load(raw, for_engine="deepspeed")

    dotted = f"{path}.{key}" if path else key
    off = next(v for v in _OFF if not refused_if(v))
    assert dotted in loaded(off).ignored_keys
    on = next((v for v in _ON if refused_if(v)), None)
    if on is not None:
        config = loaded(on)
        assert dotted not in config.ignored_keys
        assert any(u.startswith(dotted) for u in config.unsupported), config.unsupported


def test_status_table_reads_the_fields():
    from dsbench.zero.fields import aliases, status_table

    rows = dict(status_table(ZeroConfig, "zero_optimization"))
    assert rows["zero_optimization.stage"] == "implemented"
    assert rows["zero_optimization.stage3_prefetch_bucket_size (alias prefetch_bucket_size)"] == (
        "implemented"
    )
    assert rows["zero_optimization.sub_group_size"] == "ignored"
    assert rows["zero_optimization.zero_quantized_weights"] == "refused when on"
    assert aliases(DSConfig) == {"bfloat16": "bf16"}
    assert "batch" not in dict(status_table(DSConfig))  # dsbench's own fields are not keys


@pytest.mark.parametrize("torch_adam", [False, True])
def test_adam_params_of_one_optimizer_follow_their_fields(torch_adam):
    """FusedAdam-only and torch-only params are OptimizerConfig fields marked ignored or
    refused: set_grad_none (FusedAdam) and foreach (torch) are ignored, maximize refused."""
    key = "foreach" if torch_adam else "set_grad_none"
    params = {"torch_adam": torch_adam, key: True}
    config = load(base(optimizer={"type": "AdamW", "params": params}), for_engine="deepspeed")
    assert f"optimizer.params.{key}" in config.ignored_keys and not config.unsupported
    if torch_adam:
        params = {"torch_adam": True, "maximize": True}
        config = load(base(optimizer={"type": "AdamW", "params": params}), for_engine="deepspeed")
        assert config.unsupported == ("optimizer.params.maximize=true",)


def _offload_table() -> dict[str, str]:
    """Key (as ``offload_config``'s docstring table names it) → the status its row gives."""
    from dsbench.zero import offload_config

    lines = offload_config.__doc__.split("=" * 41)[2].strip("= \n").splitlines()
    rows, status, continued = {}, "implemented", False
    for line in lines:
        first, rest = line[:43].strip(), line[43:].strip()
        if first and not continued:
            status = (
                rest.split()[0].rstrip(",")
                if rest.startswith(("ignored", "refused"))
                else ("implemented")
            )
        for key in first.split("``")[1::2]:
            rows[key] = status
        continued = first.endswith(",")
    return rows


def test_offload_docstring_table_agrees_with_the_fields():
    """Every offload field dsbench's engine does not implement is in the module's table, and
    every key the table names has the status its field's metadata gives."""
    import fnmatch

    from dsbench.zero.fields import statuses
    from dsbench.zero.offload_config import OffloadOptimizerConfig, OffloadParamConfig

    table = _offload_table()
    for cls, section in ((OffloadOptimizerConfig, "offload_optimizer"),
                         (OffloadParamConfig, "offload_param")):  # fmt: skip
        for name, ds in statuses(cls).items():
            keys = [k for k in table if ": " not in k
                    and fnmatch.fnmatch(name, k.removeprefix(f"{section}."))]  # fmt: skip
            if ds.status != "implemented":
                assert keys, f"{section}.{name} ({ds.status}) is missing from the table"
            for key in keys:
                assert table[key] == ds.status, (section, name, key, table[key])
