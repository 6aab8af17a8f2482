"""ZeRO-Offload (``offload_optimizer`` / ``offload_param`` with ``device: "cpu"``): the ds_config
sections as DeepSpeed reads them, and training with them on dsbench's engine next to the same
config without offload and next to DeepSpeed's offload, on 2 gloo ranks with the seed MLP.

On a CPU device host and device memory are one: the offloaded engine does exactly the same
arithmetic, so its losses must be bit-identical to the run without offload. DeepSpeed's offload
runs torch's AdamW on the same data and agrees within the parity tolerance of
tests/test_deepspeed_parity.py. Where the memory goes is checked on GPUs (``gpu`` tests).
"""

import copy

import pytest
import torch

from dsbench.engines import zero_settings
from dsbench.engines.deepspeed import deepspeed_version
from dsbench.procs.distributed import spawn_ranks
from dsbench.zero.config import ConfigError, load_config
from tests.test_deepspeed_parity import RTOL
from tests.test_deepspeed_parity import _config as parity_config

STEPS = 8


def _config(stage: int, *, optimizer=False, param=False, precision="fp32", pin=False) -> dict:
    """tests/test_deepspeed_parity.py's config, with offload sections."""
    config = parity_config(stage)
    zero = config["zero_optimization"]
    if optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": pin}
    if param:
        zero["offload_param"] = {"device": "cpu", "pin_memory": pin}
    if precision == "bf16":
        config["bf16"] = {"enabled": True}
    return config


def _load(config: dict, world: int = 2, engine: str = "dsbench"):
    warnings = []
    cfg = load_config(config, world_size=world, warn=warnings.append, for_engine=engine)
    return cfg, warnings


# ------------------------------------------------------------------------------------ config


def test_cpu_offload_sets_the_engine_settings():
    cfg, warnings = _load(_config(3, optimizer=True, param=True, pin=True))
    z = cfg.zero_optimization
    assert (z.offload_optimizer.device, z.offload_param.device) == ("cpu", "cpu")
    s = zero_settings(cfg)
    assert (s.offload_optimizer, s.offload_param, s.pin_memory) == (True, True, True)
    assert warnings == []
    plain = zero_settings(_load(_config(3))[0])
    assert (plain.offload_optimizer, plain.offload_param, plain.pin_memory) == (False,) * 3


@pytest.mark.parametrize(
    "change, refused",
    [
        ({"offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}, 'device="nvme"'),
        ({"offload_param": {"device": "nvme"}}, 'offload_param.device="nvme"'),
        ({"offload_optimizer": {"device": "cpu", "ratio": 0.3}}, "ratio=0.3"),
        ({"offload_optimizer": {"device": "cpu", "super_offload": True}}, "super_offload=true"),
    ],
)
def test_what_dsbench_refuses_is_named_and_deepspeed_keeps_it(change, refused):
    config = _config(3)
    config["zero_optimization"].update(change)
    with pytest.raises(ConfigError) as exc:
        _load(config)
    message = str(exc.value)
    assert refused in message and "--engine deepspeed" in message and "\n" not in message
    cfg, _ = _load(config, engine="deepspeed")
    assert cfg.to_deepspeed_dict()["zero_optimization"] == config["zero_optimization"]


@pytest.mark.parametrize(
    "section, error",
    [
        ({"offload_optimizer": {"device": "gpu"}}, "must be 'none', 'cpu' or 'nvme'"),
        ({"offload_optimizer": {"device": "cpu", "pin_memroy": True}}, "did you mean 'pin_memory'"),
        ({"offload_param": "cpu"}, "offload_param must be an object"),
        ({"offload_optimizer": {"device": "cpu", "buffer_count": -1}}, "must not be negative"),
        ({"offload_optimizer": {"device": "cpu", "ratio": 2}}, "must be in [0, 1]"),
        ({"offload_param": {"device": "cpu", "pin_memory": "yes"}}, "must be true or false"),
        ({"cpu_offload": True, "offload_optimizer": {"device": "cpu"}}, "not both"),
        ({"cpu_offload": 1}, "cpu_offload must be true or false"),
    ],
)
def test_bad_offload_sections_are_one_line_errors(section, error):
    config = _config(2)
    config["zero_optimization"].update(section)
    for engine in ("dsbench", "deepspeed"):
        with pytest.raises(ConfigError) as exc:
            _load(config, engine=engine)
        assert error in str(exc.value) and "\n" not in str(exc.value)


def test_deprecated_spellings_map_as_in_deepspeed():
    config = _config(3)
    config["zero_optimization"].update(
        cpu_offload=True, cpu_offload_param=True, cpu_offload_use_pin_memory=True
    )
    cfg, warnings = _load(config)
    s = zero_settings(cfg)
    assert (s.offload_optimizer, s.offload_param) == (True, True)
    # DeepSpeed deprecates cpu_offload_use_pin_memory without mapping it to either section
    assert s.pin_memory is False
    assert len(warnings) == 1 and "cpu_offload_use_pin_memory" in warnings[0]


def test_offload_where_deepspeed_ignores_it_is_reported_once():
    config = _config(0, optimizer=True)
    config["zero_optimization"]["offload_param"] = {"device": "cpu"}
    cfg, warnings = _load(config)
    assert len(warnings) == 1
    assert (
        "offload_optimizer (stage 0" in warnings[0] and "offload_param (stage 3 only" in warnings[0]
    )
    s = zero_settings(cfg)
    assert (s.offload_optimizer, s.offload_param) == (False, False)


def test_tuning_fields_are_reported_as_ignored():
    config = _config(3)
    config["zero_optimization"]["offload_param"] = {
        "device": "cpu",
        "buffer_count": 4,
        "buffer_size": 1e8,
        "max_in_cpu": 1e9,
    }
    _, warnings = _load(config)
    assert len(warnings) == 1
    for key in ("buffer_count", "buffer_size", "max_in_cpu"):
        assert f"offload_param.{key}" in warnings[0]


# ------------------------------------------------------------------------------------ training


def _world(device_type: str) -> int:
    """2 ranks; on GPUs one per device (rank r runs on cuda:r), so as many as there are, up to 2."""
    return min(2, torch.cuda.device_count()) if device_type == "cuda" else 2


def _runs(
    runs: list[tuple[str, dict, bool | None]], steps: int = STEPS, device_type: str = "cpu"
) -> list:
    got = {}
    spawn_ranks(
        "tests._ds_config_workers:runs",
        _world(device_type),
        {"model": "mlp", "runs": runs, "steps": steps},
        device_type=device_type,
        on_message=lambda rank, msg: got.__setitem__(msg["index"], msg),
        timeout_s=900,
    )
    return [got[i] for i in range(len(runs))]


CASES = {  # name: (stage, offload_optimizer, offload_param, precision)
    "z1-opt": (1, True, False, "fp32"),
    "z2-opt": (2, True, False, "fp32"),
    "z3-opt": (3, True, False, "fp32"),
    "z3-opt-param": (3, True, True, "fp32"),
    "z3-param": (3, False, True, "fp32"),
    "z2-opt-bf16": (2, True, False, "bf16"),
    "z3-opt-param-bf16": (3, True, True, "bf16"),
}


DEEPSPEED_CASES = ("z2-opt", "z3-opt-param")
"""Run on DeepSpeed's offload too: its stage 1/2 optimizer (one code path for both stages) with
the optimizer offloaded, and stage 3 with optimizer and parameters offloaded (a DeepSpeed run
costs ten times a dsbench one here)."""


@pytest.fixture(scope="module")
def offload_runs():
    """Each case offloaded and not, on dsbench's engine; :data:`DEEPSPEED_CASES` on DeepSpeed's
    offload."""
    runs, index = [], {}
    for name, (stage, opt, param, precision) in CASES.items():
        on = _config(stage, optimizer=opt, param=param, precision=precision)
        off = _config(stage, precision=precision)
        index[name] = {"on": len(runs), "off": len(runs) + 1}
        # the offloaded step is torch's fused AdamW: the run without offload takes it too
        runs += [("dsbench", on, None), ("dsbench", off, True if opt else None)]
        if name in DEEPSPEED_CASES and deepspeed_version() is not None:
            index[name]["deepspeed"] = len(runs)
            runs.append(("deepspeed", copy.deepcopy(on), None))
    got = _runs(runs)
    return {name: {k: got[i] for k, i in where.items()} for name, where in index.items()}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_offloaded_training_is_bit_identical_to_no_offload(offload_runs, case):
    on, off = offload_runs[case]["on"], offload_runs[case]["off"]
    assert len(on["losses"]) == STEPS * 2  # STEPS optimizer steps of 2 micro-steps
    assert on["losses"] == off["losses"]
    assert on["losses"][-1] < on["losses"][0]  # it trains
    _, _, param, precision = CASES[case]
    # where the state lives: host memory (on a CPU device, the same memory as the parameters)
    assert on["where"]["optimizer"] == "cpu"
    if param:
        assert on["where"]["shards"] == ["cpu"]
    assert on["where"]["pinned"] is False  # pin_memory only applies with a GPU to copy to
    if precision == "bf16":
        assert not any(on["where"]["master_is_param"])  # fp32 masters apart from bf16 weights


@pytest.mark.slow
@pytest.mark.skipif(deepspeed_version() is None, reason="DeepSpeed not installed (make test)")
@pytest.mark.parametrize("case", DEEPSPEED_CASES)
def test_offloaded_training_matches_deepspeed_offload(offload_runs, case):
    ours, theirs = offload_runs[case]["on"]["losses"], offload_runs[case]["deepspeed"]["losses"]
    assert len(ours) == len(theirs) == STEPS * 2
    assert ours == pytest.approx(theirs, rel=RTOL)


def test_checkpoint_of_an_offloaded_run_resumes_identically(tmp_path):
    """Save after 3 steps, resume in fresh processes: the same losses as the uninterrupted run
    (the checkpoint code reads the host-side state like any other)."""
    from dsbench.zero.engine import ZeroSettings

    settings = ZeroSettings(
        stage=3,
        grad_accum=2,
        lr=1e-2,
        offload_optimizer=True,
        offload_param=True,
        param_persistence_threshold=10,
    )
    common = {"settings": settings, "dir": str(tmp_path), "before": 3, "after": 3}
    saved, resumed = {}, {}
    spawn_ranks(
        "tests._zero_workers:checkpoint_run",
        2,
        {**common, "mode": "save"},
        on_message=lambda r, m: saved.update(m),
    )
    spawn_ranks(
        "tests._zero_workers:checkpoint_run",
        2,
        {**common, "mode": "resume"},
        on_message=lambda r, m: resumed.update(m),
    )
    assert resumed["losses"] == saved["losses"]
    for name, tensor in saved["state"].items():
        assert torch.equal(resumed["state"][name], tensor), name


def test_gpu_runs_spawn_no_more_ranks_than_devices(monkeypatch):
    """One GPU: one rank (a second would ask for cuda:1, an invalid device ordinal)."""
    spawned = []

    def spawn(target, world, payload, *, device_type, on_message, timeout_s):
        spawned.append((world, device_type))
        for index in range(len(payload["runs"])):
            on_message(0, {"index": index})

    monkeypatch.setitem(globals(), "spawn_ranks", spawn)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    _runs([("dsbench", _config(2), True)], 1, "cuda")
    _runs([("dsbench", _config(2), True)], 1, "cpu")
    assert spawned == [(1, "cuda"), (2, "cpu")]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device")
@pytest.mark.parametrize("stage, param", [(2, False), (3, True)])
def test_offload_lowers_peak_device_memory(stage, param):
    """On a GPU the optimizer state (and with offload_param the shards) leave the device: peak
    device memory drops, and the losses stay within the parity tolerance (pinned copies). One
    rank per device, up to 2 (:func:`_world`)."""
    on = _config(stage, optimizer=True, param=param, pin=True)
    on_run, off_run = _runs([("dsbench", on, True), ("dsbench", _config(stage), True)], 5, "cuda")
    assert on_run["where"]["optimizer"] == "cpu" and on_run["where"]["pinned"] is True
    assert on_run["peak_device_bytes"] < off_run["peak_device_bytes"]
    assert on_run["losses"] == pytest.approx(off_run["losses"], rel=RTOL)
