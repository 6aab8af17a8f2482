"""The predicates that say when a DeepSpeed setting dsbench's engine does not implement is on
(so refused; see [Note: a field's DeepSpeed status] in :mod:`.fields`), the
optimizer's parameter lists, and the one-pass reader that sorts a config's keys into
implemented, ignored and refused."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dsbench.records.values import show_json
from dsbench.zero.config import hf_auto
from dsbench.zero.config.fields import READ, ConfigError

AUTO = hf_auto.AUTO

# --------------------------------------------------------------------------------------------
# When a setting dsbench's engine does not implement is on (``refused_if`` of the fields)
# --------------------------------------------------------------------------------------------


def is_set(value: Any) -> bool:
    return value is not None and value != {} and value is not False


def is_enabled(value: Any) -> bool:
    if isinstance(value, dict):
        return bool(value.get("enabled", False))
    return is_set(value)


def sets_grad_accum_dtype(value: Any) -> bool:
    return isinstance(value, dict) and value.get("grad_accum_dtype") is not None


def autotp_on(value: Any) -> bool:
    return isinstance(value, dict) and value.get("autotp_size") not in (None, 0, 1)


def not_in(*off: Any) -> Callable[[Any], bool]:
    """On unless the value is one of ``off`` (the setting's values that leave it off)."""
    return lambda value: value not in off


def names_a_module(value: Any) -> bool:
    return isinstance(value, dict) and any(value.get(k) for k in value)


# DeepSpeed's own optimizers (config.DEEPSPEED_OPTIMIZERS) besides adam/adamw; any other name
# is looked up in torch.optim.
DS_OTHER_OPTIMIZERS = (
    "adagrad",
    "lamb",
    "onebitadam",
    "onebitlamb",
    "zerooneadam",
    "muadam",
    "muadamw",
    "musgd",
    "lion",
    "muon",
)


def describe(path: str, value: Any) -> str:
    """``path=value`` for a refused setting; for a section, the switch that turned it on."""
    if isinstance(value, dict):
        for switch in ("device", "enabled", "autotp_size"):
            if switch in value:
                return f"{path}.{switch}={show_json(value[switch])}"
        return path
    return f"{path}={show_json(value)}"


class KeyReader:
    """One pass over the raw dict: unknown keys, "auto" placeholders, keys dsbench ignores."""

    def __init__(self):
        self.autos: list[str] = []  # "auto" left for the batch resolution (batch sizes only)
        self.ignored: list[str] = []
        self.warnings: list[str] = []  # one line each, passed to warn()
        self.unsupported: list[str] = []

    def section(self, raw: Mapping, key: str) -> dict:
        value = raw.get(key, {})
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be an object {{...}}, got {show_json(value)}")
        return value

    def keys(
        self,
        section: Mapping,
        path: str,
        implemented: tuple[str, ...],
        not_implemented: Mapping[str, Callable[[Any], bool]],
        *,
        active: bool = True,
    ) -> None:
        """Unknown keys are errors; keys dsbench does not implement are sorted into
        ``ignored`` and ``unsupported`` (only when the section is ``active``, e.g. fp16 on)."""
        valid = [*implemented, *not_implemented]
        for key, value in section.items():
            if key in implemented:
                continue
            if key not in not_implemented:
                raise READ.unknown(f"{path}.{key}", key, valid)
            if not_implemented[key](value) and active:
                self.unsupported.append(describe(f"{path}.{key}", value))
            else:
                self.ignored.append(f"{path}.{key}")

    def take(self, section: Mapping, path: str, key: str, out: dict, name: str | None = None):
        """Copy ``section[key]`` into ``out[name]``; absent keys and "auto" stay absent ("auto"
        is noted in ``autos``: only the batch sizes' are still there, see load_config)."""
        if key not in section:
            return
        value = section[key]
        if isinstance(value, str) and value == AUTO:
            self.autos.append(f"{path}.{key}" if path else key)
            return
        out[name or key] = value
