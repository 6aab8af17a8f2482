"""Helpers shared by the ds_config tests (tests/test_zero_config*.py): load_config that
collects its warnings, the one-line error it raises, a minimal config."""

from pathlib import Path

import pytest

from dsbench.errors import UsageError
from dsbench.zero.config import ConfigError, DSConfig, load_config

CONFIGS = Path(__file__).parent / "configs"


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


def _sizes(cfg: DSConfig) -> tuple[int, int, int]:
    b = cfg.batch
    return b.train_batch_size, b.train_micro_batch_size_per_gpu, b.gradient_accumulation_steps
