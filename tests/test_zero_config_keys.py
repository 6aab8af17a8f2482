"""ds_config loading, one test per rule of dsbench.zero.config: top-level keys (unknown,
ignored, refused), the optimizer and scheduler sections, and each field's DeepSpeed status
(dsbench.zero.config.fields)."""

import math

import pytest

from dsbench.zero.config import DSConfig, WarmupLRConfig, ZeroConfig
from tests._zero_config_helpers import base, error_of, load

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


# --------------------------------------------------------------------------------------------
# Each field's DeepSpeed status (dsbench.zero.config.fields): the one source of what is
# ignored/refused

_ON = (True, 2, {"enabled": True}, {"autotp_size": 2}, {"grad_accum_dtype": "fp32"},
       {"classes": ["MoE"]})  # fmt: skip
_OFF = (False, None, 1)


def _status_cases():
    from dsbench.zero.config.fields import not_implemented
    from dsbench.zero.config.sections import BF16Config, FP16Config

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
    from dsbench.zero.config.fields import aliases, status_table

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
    from dsbench.zero.config import offload_config

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

    from dsbench.zero.config.fields import statuses
    from dsbench.zero.config.offload_config import OffloadOptimizerConfig, OffloadParamConfig

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
