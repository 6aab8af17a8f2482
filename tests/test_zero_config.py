"""ds_config loading: the seed configs, "auto" filled as the Hugging Face Trainer would, configs
modelled on Hugging Face's and DeepSpeedExamples' (see tests/configs/README.md), and the
sources and round trip. The rules section by section are in tests/test_zero_config_sections.py
and tests/test_zero_config_keys.py."""

import json
from pathlib import Path

import pytest

from dsbench.zero.config import BatchConfig, ConfigError, DSConfig, OptimizerConfig, ZeroConfig
from dsbench.zero.loss_scaler import DynamicLossScaler
from tests._zero_config_helpers import CONFIGS, _sizes, base, error_of, load

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
