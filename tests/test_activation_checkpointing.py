"""``activation_checkpointing`` in a ds_config: dsbench's models checkpoint their blocks (on
either engine), recompute them in backward, keep fewer activations, and train bit-identically to
the same config without it (ZeRO stages 0–3 on dsbench's engine, stage 3 on DeepSpeed's)."""

import dataclasses

import pytest
import torch

from dsbench.engines.deepspeed import deepspeed_version
from dsbench.errors import UsageError
from dsbench.models import get_model
from dsbench.models.checkpointing import checkpoint_blocks
from dsbench.procs.distributed import spawn_ranks
from dsbench.zero.config import ConfigError, load_config
from tests.test_offload import _config


def _load(section, warnings=None):
    config = {"train_batch_size": 8, "activation_checkpointing": section}
    return load_config(config, world_size=2, warn=(warnings if warnings is not None else []).append)


def test_section_present_turns_it_on_and_deepspeed_switches_are_reported():
    assert not load_config({"train_batch_size": 8}, world_size=2).activation_checkpointing.enabled
    warnings = []
    ac = _load({"partition_activations": True, "number_checkpoints": 2, "profile": False}, warnings)
    assert (
        ac.activation_checkpointing.enabled,
        ac.activation_checkpointing.number_checkpoints,
    ) == (
        True,
        2,
    )
    assert warnings == [
        "ds_config: dsbench's engine ignores these DeepSpeed settings: "
        "activation_checkpointing.partition_activations"
    ]
    warnings = []
    _load({"number_checkpoint": 2}, warnings)  # DeepSpeed does not check the keys: a warning
    assert warnings == [
        "ds_config: ignoring unknown keys in activation_checkpointing: 'number_checkpoint' "
        "(did you mean 'number_checkpoints'?) (DeepSpeed does not check them)"
    ]


@pytest.mark.parametrize(
    "section, error",
    [
        ({"number_checkpoints": 0}, "activation_checkpointing.number_checkpoints must be ≥ 1"),
        ({"cpu_checkpointing": "yes"}, "cpu_checkpointing must be true or false"),
        ([1], "activation_checkpointing must be an object"),
    ],
)
def test_bad_values_are_one_line_errors(section, error):
    with pytest.raises(ConfigError) as exc:
        _load(section)
    assert error in str(exc.value) and "\n" not in str(exc.value)


def _forward_calls(model, batch_of, blocks):
    """Calls of each block's first submodule in one forward + backward."""
    calls = [0] * len(blocks)
    for i, block in enumerate(blocks):
        first = next(iter(block.children()))
        first.register_forward_hook(lambda *a, i=i: calls.__setitem__(i, calls[i] + 1))
    preset = batch_of
    preset.loss(model, preset.batch(2, seed=0, step=0)).backward()
    return calls


@pytest.mark.parametrize("name, number", [("gpt-tiny", None), ("gpt-tiny", 1), ("bert-tiny", 1)])
def test_checkpointed_blocks_run_again_in_backward_and_save_less(name, number):
    preset = get_model(name)
    plain, checkpointed = preset.build(seed=0), preset.build(seed=0)
    n = checkpoint_blocks(checkpointed, number)
    blocks = checkpointed.checkpoint_units()
    assert n == (len(blocks) if number is None else number)
    calls = _forward_calls(checkpointed, preset, blocks)
    assert calls == [2] * n + [1] * (len(blocks) - n)  # recomputed in backward: once more

    def saved_bytes(model):
        total = 0

        def pack(t):
            nonlocal total
            total += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = preset.loss(model, preset.batch(2, seed=0, step=0))
        loss.backward()
        return total

    checkpointed.zero_grad(set_to_none=True)
    assert saved_bytes(checkpointed) < saved_bytes(plain)
    for a, b in zip(plain.parameters(), checkpointed.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad)  # the same gradients


def test_a_model_without_blocks_is_a_one_line_error():
    with pytest.raises(UsageError, match="Linear names no blocks to checkpoint"):
        checkpoint_blocks(torch.nn.Linear(2, 2))


# gpt-tiny cut down (2 blocks of 32, seq 32, vocab 256): the same layers and checkpointed
# blocks, a fraction of the arithmetic, so that nine trainings fit in one short spawn
_GPT_SMALLER = dataclasses.replace(
    get_model("gpt-tiny"),
    config=dataclasses.replace(
        get_model("gpt-tiny").config,
        layers=2, hidden=32, heads=2, vocab_size=256, max_positions=32, seq_len=32,
    ),
)  # fmt: skip


@pytest.mark.slow
def test_training_with_checkpointing_is_bit_identical_both_engines():
    runs = []
    for stage in (0, 1, 2, 3):
        on = _config(stage)
        on["activation_checkpointing"] = {"partition_activations": False}
        runs += [("dsbench", on, None), ("dsbench", _config(stage), None)]
    if deepspeed_version() is not None:
        on = _config(3)
        on["activation_checkpointing"] = {}
        runs += [("deepspeed", on, None), ("deepspeed", _config(3), None)]
    got = {}
    spawn_ranks(
        "tests._ds_config_workers:runs",
        2,
        {"model": _GPT_SMALLER, "runs": runs, "steps": 3},
        on_message=lambda rank, msg: got.__setitem__(msg["index"], msg),
        timeout_s=900,
    )
    for i in range(0, len(runs), 2):
        assert len(got[i]["losses"]) == 6
        assert got[i]["losses"] == got[i + 1]["losses"], runs[i]
