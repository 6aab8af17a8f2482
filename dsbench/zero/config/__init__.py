"""DeepSpeed's ds_config JSON, read as DeepSpeed 0.18 reads it, for dsbench's ZeRO engine.

:func:`load_config` (:mod:`.load`) turns a ds_config (file, JSON text or dict) into a
:class:`DSConfig` (:mod:`.top_level`); every error is a :class:`ConfigError`. The modules:

=====================  ========================================================================
``load``               :func:`load_config`: read the source, fill "auto", read the sections,
                       resolve the batch sizes, report
``top_level``          :class:`DSConfig`, one field per top-level setting
``sections``           batch sizes, optimizer, fp16, bf16, ZeRO
``schedulers``         DeepSpeed's five learning-rate schedulers
``offload_config``     ``zero_optimization.offload_optimizer`` / ``offload_param``
``activation_config``  ``activation_checkpointing``
``fields``             :class:`ConfigError`, :class:`~.fields.Section` (the sections' base) and
                       each field's DeepSpeed status
``keys``               when a refused setting is on, and the reader that sorts a config's keys
``batch``              the three batch sizes from the config, "auto" and the command line
``hf_auto``            the values the Hugging Face Trainer writes over "auto"
``settings``           :class:`~.settings.ZeroSettings`, what the engine takes from a config
=====================  ========================================================================
"""

from dsbench.zero.config.fields import ConfigError
from dsbench.zero.config.load import load_config
from dsbench.zero.config.schedulers import WarmupLRConfig
from dsbench.zero.config.sections import (
    BatchConfig,
    BF16Config,
    FP16Config,
    OptimizerConfig,
    ZeroConfig,
)
from dsbench.zero.config.top_level import DSConfig

__all__ = [
    "BF16Config",
    "BatchConfig",
    "ConfigError",
    "DSConfig",
    "FP16Config",
    "OptimizerConfig",
    "WarmupLRConfig",
    "ZeroConfig",
    "load_config",
]
