"""Reading a ds_config (:func:`load_config`) as DeepSpeed 0.18 reads it, for dsbench's engine.

:func:`load_config` turns a ds_config (file, JSON text or dict) into a :class:`DSConfig`
(:mod:`.top_level`) of kw-only dataclasses, one per section, each validated in
``__post_init__``, in named steps: read the source, fill "auto", read the sections, resolve the
batch sizes, report. It follows DeepSpeed (``deepspeed/runtime/config.py``, ``zero/config.py``,
``precision_config.py``, 0.18.4) where DeepSpeed is well defined, and is stricter where DeepSpeed
lets mistakes through:

* batch sizes: derived and checked as DeepSpeed's ``_set_batch_related_parameters`` does, but
  with exact divisions; the command line's override the config's (:mod:`.batch`), and a size
  that does not fit is an error naming the flag that would.
* fp16 and bf16 both enabled is an error (DeepSpeed only ``assert``-s it, gone under ``-O``).
* inside a section, an unknown key is an error with the closest valid name (DeepSpeed's pydantic
  models forbid extras too); unknown top-level keys get one warning (DeepSpeed ignores them).
* types: DeepSpeed's pydantic models coerce ``true`` to 1 and ``"2"`` to 2; we refuse both.
  Whole floats such as ``5e8`` are accepted where an integer is expected, as in DeepSpeed.
* settings dsbench's engine does not implement are fields too, marked ignored or refused
  ([Note: a field's DeepSpeed status] in :mod:`.fields`): ignored ones go to
  :attr:`DSConfig.ignored_keys` (one warning), refused ones to :attr:`DSConfig.unsupported`
  (an error, unless ``for_engine="deepspeed"``, which hands them to ``deepspeed.initialize``).
* ``"auto"`` (Hugging Face Trainer configs) is filled as the Trainer would from its defaults
  (:mod:`.hf_auto`), the command line first; one error lists those it has no default for.
* schedulers: DeepSpeed's five (:mod:`.schedulers`).

Every error is a :class:`ConfigError` (a :class:`~dsbench.errors.UsageError`): one line, naming
the field, so the CLI prints it and exits 2.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from dsbench.errors import one_line
from dsbench.records.values import closest, kind, show_json
from dsbench.zero.config import hf_auto, offload_config
from dsbench.zero.config.activation_config import read_activation_checkpointing
from dsbench.zero.config.batch import resolve as resolve_batch
from dsbench.zero.config.fields import (
    READ,
    ConfigError,
    aliases,
    implemented,
    never,
    not_implemented,
    statuses,
)
from dsbench.zero.config.keys import DS_OTHER_OPTIMIZERS, KeyReader, describe
from dsbench.zero.config.schedulers import (
    SCHEDULERS,
    WARMUP_TYPES,
    SchedulerConfig,
    WarmupDecayLRConfig,
    WarmupLRConfig,
)
from dsbench.zero.config.sections import (
    BatchConfig,
    BF16Config,
    FP16Config,
    OptimizerConfig,
    ZeroConfig,
)
from dsbench.zero.config.top_level import DSConfig

_BATCH_KEYS = hf_auto.BATCH_KEYS


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _read_source(source: str | Path | Mapping) -> dict:
    """A dict from a dict, a path to a JSON file, or JSON text (duplicate keys are errors, as
    in DeepSpeed's loader)."""
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source))
    text = str(source)
    if isinstance(source, Path) or not text.lstrip().startswith(("{", "[")):
        path = Path(text)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        where = f"{path}: "
    else:
        where = ""
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise ConfigError(f"{where}duplicate key '{exc.args[0]}'") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{where}not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except (ValueError, RecursionError) as exc:  # json's limits: 4300 digits, nesting depth
        what = "nested too deeply" if isinstance(exc, RecursionError) else "a number too long"
        raise ConfigError(f"{where}not valid JSON: {what}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}the top level must be an object {{...}}, got {kind(data)}")
    return data


def load_config(
    source: str | Path | Mapping,
    *,
    world_size: int,
    micro_batch: int | None = None,
    grad_accum: int | None = None,
    train_batch: int | None = None,
    warn: Callable[[str], None] | None = None,
    for_engine: Literal["dsbench", "deepspeed"] = "dsbench",
    auto_values: Mapping[str, Any] | None = None,
    steps: int | None = None,
    hidden_size: int | None = None,
) -> DSConfig:
    """Read a ds_config (a dict, a JSON file path, or JSON text) as DeepSpeed does.

    ``world_size`` is the data-parallel size. ``micro_batch``, ``grad_accum`` and
    ``train_batch`` are the command line's batch sizes: they override the config's, which are
    re-derived around them (:mod:`.batch`). Every "auto" placeholder is filled:
    from ``auto_values`` (dotted path → value, e.g. ``"optimizer.params.lr"``) first, else as
    the Hugging Face Trainer fills it from its defaults (:mod:`.hf_auto`; ``steps``
    is the run's step count and ``hidden_size`` the model's, for the "auto"s that need them).
    What the command line changed and what "auto" became are one line each in
    :attr:`DSConfig.notes`. ``warn`` receives the one-line warnings: a warmup_type DeepSpeed
    replaces by 'log', unknown top-level keys, and settings dsbench's engine ignores.
    ``for_engine="dsbench"`` refuses settings dsbench's engine does not implement (pointing to
    ``--engine deepspeed``); ``"deepspeed"`` only records them.
    """
    warn = warn or _print_warning
    if for_engine not in ("dsbench", "deepspeed"):
        raise ValueError(f"for_engine must be 'dsbench' or 'deepspeed', got {for_engine!r}")
    world_size = READ.integer("world size", world_size, 1)
    args = _requested(train_batch=train_batch, micro=micro_batch, accum=grad_accum)
    raw = _read_source(source)
    autos = list(hf_auto.auto_paths(raw))
    filled = _fill_auto(raw, auto_values or {}, steps=steps, hidden_size=hidden_size)
    reader = KeyReader()
    sections = _read_sections(reader, raw)
    batch, batch_filled, batch_note = _batch_sizes(sections.pop("batch"), args, world_size)
    raw.update(
        train_batch_size=batch.train_batch_size,
        train_micro_batch_size_per_gpu=batch.train_micro_batch_size_per_gpu,
        gradient_accumulation_steps=batch.gradient_accumulation_steps,
    )
    shown = {path: show_json(value) for path, value in filled.items()} | batch_filled
    notes = [batch_note] if batch_note else []
    if shown:
        notes.append(
            '"auto" filled as the Hugging Face Trainer would (command line first): '
            + ", ".join(f"{path}={shown[path]}" for path in autos if path in shown)
        )
    config = DSConfig(
        batch=batch,
        ignored_keys=tuple(reader.ignored),
        unsupported=tuple(reader.unsupported),
        unknown_keys=tuple(sections.pop("unknown")),
        notes=tuple(notes),
        raw=raw,
        **sections,
    )
    _report(config, reader.warnings, warn, for_engine)
    return config


def _print_warning(msg: str) -> None:
    print(f"dsbench: warning: {msg}", file=sys.stderr)


def _requested(**sizes: int | None) -> dict[str, int | None]:
    """The command line's batch sizes (None: not given), by ds_config key, each checked."""
    names = {"train_batch": _BATCH_KEYS[0], "micro": _BATCH_KEYS[1], "accum": _BATCH_KEYS[2]}
    args: dict[str, int | None] = {}
    for short, key in names.items():
        value = sizes[short]
        args[key] = None if value is None else READ.integer(f"the requested {key}", value, 1)
    return args


def _fill_auto(raw: dict, given: Mapping[str, Any], *, steps, hidden_size) -> dict[str, Any]:
    """Step "auto": every placeholder but the batch sizes' filled in ``raw`` (in place), as the
    Hugging Face Trainer fills it (:mod:`.hf_auto`); the paths filled, with values.
    One error lists those nothing can fill."""
    filled, left = hf_auto.fill(raw, given=given, steps=steps, hidden_size=hidden_size)
    if left:
        raise ConfigError(
            '"auto" (a Hugging Face Trainer placeholder) has no value dsbench can fill for '
            + ", ".join(left)
            + "; write values into the config"
        )
    return filled


def _read_sections(reader: KeyReader, raw: dict) -> dict[str, Any]:
    """Step "sections": each section of ``raw`` read into its dataclass, keys sorted into
    implemented, ignored and refused (in ``reader``). Returns DSConfig's keyword arguments, with
    ``unknown`` (top-level keys DeepSpeed does not know) and ``batch`` (the config's batch
    sizes and which of them are "auto") still to be resolved."""
    # Top level: implemented, known to DeepSpeed but not implemented here, or unknown.
    top_valid, top_not_implemented = _top_level_keys()
    unknown = [k for k in raw if k not in top_valid]
    out: dict[str, Any] = {"unknown": unknown}
    for key in raw:
        if key in top_not_implemented:
            if top_not_implemented[key](raw[key]):
                reader.unsupported.append(describe(key, raw[key]))
            else:
                reader.ignored.append(key)
            reader.take(raw, "", key, out)
    batch_in_config: dict[str, Any] = {}
    for key in _BATCH_KEYS:
        reader.take(raw, "", key, batch_in_config)
    out["batch"], reader.autos = (batch_in_config, reader.autos), []
    for key in ("gradient_clipping", "steps_per_print", "wall_clock_breakdown"):
        reader.take(raw, "", key, out)
    out["fp16"] = _read_precision(reader, raw, "fp16", FP16Config)
    if "bf16" in raw and "bfloat16" in raw:
        raise ConfigError("give bf16 or its old name bfloat16, not both")
    out["bf16"] = _read_precision(
        reader, raw, "bfloat16" if "bfloat16" in raw else "bf16", BF16Config
    )
    out["zero_optimization"] = _read_zero(reader, raw)
    checkpointing, ac_ignored, ac_warnings = read_activation_checkpointing(
        raw.get("activation_checkpointing")
    )
    reader.ignored += ac_ignored
    reader.warnings += ac_warnings
    out["activation_checkpointing"] = checkpointing
    out["optimizer"] = _read_optimizer(reader, raw)
    out["scheduler"] = _read_scheduler(reader, raw, out["optimizer"])
    return out


def _batch_sizes(
    in_config: tuple[dict[str, Any], list[str]], args: Mapping[str, int | None], world_size: int
) -> tuple[BatchConfig, dict[str, str], str | None]:
    """Step "batch arithmetic": the three sizes from the config's (``in_config``: values and
    "auto" keys) and the command line's (:mod:`.batch`), with the "auto" ones as
    shown in the fill notice and one line saying what the command line changed."""
    values, autos = in_config
    # checked for type here, so that "auto" and bad types are told apart
    values = {key: READ.integer(key, value, 1) for key, value in values.items()}
    sizes = resolve_batch(values, autos, args, world_size)
    if sizes is None:
        raise ConfigError(
            "no batch size: set train_batch_size or train_micro_batch_size_per_gpu, "
            "or give the micro-batch size on the command line"
        )
    batch = BatchConfig(
        train_batch_size=sizes.train,
        train_micro_batch_size_per_gpu=sizes.micro,
        gradient_accumulation_steps=sizes.accum,
        world_size=world_size,
    )
    return batch, sizes.filled, sizes.note


def _report(
    config: DSConfig, warnings: list[str], warn: Callable[[str], None], for_engine: str
) -> None:
    """Step "report": the reader's warnings, unknown top-level keys (a warning, with the
    closest name), and what dsbench's engine does not implement: refused (an error pointing to
    ``--engine deepspeed``) or ignored (one warning); ``for_engine="deepspeed"`` only warns."""
    for message in warnings:
        warn(message)
    if config.unknown_keys:
        valid = _top_level_keys()[0]
        listed = ", ".join(f"'{one_line(k)}'{closest(k, valid)}" for k in config.unknown_keys)
        warn(f"ds_config: ignoring unknown top-level keys {listed} (DeepSpeed ignores them too)")
    if for_engine != "dsbench":
        return
    if config.unsupported:
        raise ConfigError(
            "dsbench's engine does not implement "
            + ", ".join(config.unsupported)
            + "; run this config with --engine deepspeed"
        )
    if config.ignored_keys:
        warn(
            "ds_config: dsbench's engine ignores these DeepSpeed settings: "
            + ", ".join(config.ignored_keys)
        )


def _top_level_keys() -> tuple[list[str], dict[str, Any]]:
    """Every top-level key DeepSpeed reads, and those dsbench's engine does not implement (with
    whether a value is refused), from :class:`DSConfig`'s fields."""
    not_done = not_implemented(DSConfig)
    valid = [*_BATCH_KEYS, *implemented(DSConfig), *aliases(DSConfig), *not_done]
    return valid, not_done


def _read_precision(reader: KeyReader, raw: dict, key: str, cls: type) -> Any:
    section = reader.section(raw, key)
    names, not_done = implemented(cls), not_implemented(cls)
    kwargs: dict[str, Any] = {}
    for name in (*names, *not_done):
        reader.take(section, key, name, kwargs)
    enabled = kwargs.get("enabled", False) is True
    reader.keys(section, key, names, not_done, active=enabled)
    return cls(**kwargs)


def _read_zero(reader: KeyReader, raw: dict) -> ZeroConfig:
    value = raw.get("zero_optimization", {})
    if isinstance(value, bool):  # DeepSpeed's deprecated format: true = stage 1
        return ZeroConfig(stage=int(value), allgather_bucket_size=raw.get("allgather_size", 5e8))
    section = reader.section(raw, "zero_optimization")
    names, other_names = implemented(ZeroConfig), aliases(ZeroConfig)
    not_done = not_implemented(ZeroConfig)
    for alias, name in other_names.items():
        if alias in section and name in section:
            raise ConfigError(f"give zero_optimization.{name} or its alias {alias}, not both")
    reader.keys(
        section, "zero_optimization", (*names, *other_names, *offload_config.DEPRECATED), not_done
    )
    kwargs: dict[str, Any] = {}
    for name in (f.name for f in dataclasses.fields(ZeroConfig)):
        if name not in ("offload_optimizer", "offload_param"):
            reader.take(section, "zero_optimization", name, kwargs)
    for alias, name in (other_names | aliases(ZeroConfig, implemented=False)).items():
        reader.take(section, "zero_optimization", alias, kwargs, name)
    zero = ZeroConfig(**kwargs)
    offload = offload_config.read_offload(section, zero.stage)
    reader.unsupported += offload.unsupported
    reader.ignored += offload.ignored
    zero.offload_optimizer, zero.offload_param = offload.optimizer, offload.param
    return zero


def _read_optimizer(reader: KeyReader, raw: dict) -> OptimizerConfig | None:
    if raw.get("optimizer") is None:
        return None
    section = reader.section(raw, "optimizer")
    reader.keys(section, "optimizer", ("type", "params"), {"legacy_fusion": never})
    name = section.get("type")
    if not isinstance(name, str):
        raise ConfigError(f"optimizer.type must be a name such as AdamW, got {show_json(name)}")
    params = section.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"optimizer.params must be an object {{...}}, got {show_json(params)}")
    if name.lower() not in ("adam", "adamw"):
        import torch.optim

        if name.lower() in DS_OTHER_OPTIMIZERS or hasattr(torch.optim, name):
            reader.unsupported.append(f"optimizer.type={show_json(name)}")
            return None
        valid = ["Adam", "AdamW", *DS_OTHER_OPTIMIZERS]
        raise ConfigError(
            f"unknown optimizer.type {show_json(name)}{closest(name, valid)}; DeepSpeed knows "
            "Adam, AdamW, " + ", ".join(DS_OTHER_OPTIMIZERS) + " and torch.optim classes"
        )
    if "max_grad_norm" in params:  # DeepSpeed raises ValueError for it as well
        raise ConfigError(
            "optimizer.params.max_grad_norm is not supported (DeepSpeed refuses it too); "
            "use the top-level gradient_clipping instead"
        )
    torch_adam = params.get("torch_adam", False) is True
    both, fused_only, torch_only = _adam_params()
    # FusedAdam and torch.optim.Adam(W) take different keyword arguments; DeepSpeed passes the
    # params straight to whichever it builds, so a key the other one has is a TypeError there.
    wrong, right = (
        (fused_only, "torch.optim.Adam/AdamW")
        if torch_adam
        else (torch_only, "DeepSpeed's FusedAdam (torch_adam is false)")
    )
    for key in params:
        if key in wrong:
            raise ConfigError(f"optimizer.params.{key} is not an argument of {right}")
    reader.keys(params, "optimizer.params", both, torch_only if torch_adam else fused_only)
    kwargs: dict[str, Any] = {"type": name}
    for key in (*both, *fused_only, *torch_only):
        reader.take(params, "optimizer.params", key, kwargs)
    config = OptimizerConfig(**kwargs)
    if not config.bias_correction:
        reader.unsupported.append("optimizer.params.bias_correction=false")
    if config.amsgrad:
        reader.unsupported.append("optimizer.params.amsgrad=true")
    if "bias_correction" in kwargs:  # implemented (True) or refused above: not "ignored"
        reader.ignored = [k for k in reader.ignored if k != "optimizer.params.bias_correction"]
    return config


def _adam_params() -> tuple[tuple[str, ...], dict[str, Any], dict[str, Any]]:
    """:class:`OptimizerConfig`'s params from its fields: those both of DeepSpeed's Adams take,
    and (each with whether a value is refused) those only FusedAdam or only torch's take."""
    fields = statuses(OptimizerConfig)
    both = tuple(n for n, ds in fields.items() if ds.only is None)
    fused_only, torch_only = (
        {n: ds.refused_if for n, ds in fields.items() if ds.only == which}
        for which in ("fused", "torch")
    )
    return both, fused_only, torch_only


def _read_scheduler(
    reader: KeyReader, raw: dict, optimizer: OptimizerConfig | None
) -> SchedulerConfig | None:
    if raw.get("scheduler") is None:
        return None
    section = reader.section(raw, "scheduler")
    reader.keys(section, "scheduler", ("type", "params"), {})
    name = section.get("type")
    if not isinstance(name, str):
        raise ConfigError(f"scheduler.type must be a name such as WarmupLR, got {show_json(name)}")
    params = section.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"scheduler.params must be an object {{...}}, got {show_json(params)}")
    cls = SCHEDULERS.get(name)
    if cls is None:
        import torch.optim.lr_scheduler

        if hasattr(torch.optim.lr_scheduler, name):
            reader.unsupported.append(f"scheduler.type={show_json(name)}")
            return None
        raise ConfigError(
            f"unknown scheduler.type {show_json(name)}{closest(name, list(SCHEDULERS))}; "
            "DeepSpeed knows " + ", ".join(SCHEDULERS) + " and torch.optim.lr_scheduler "
            "classes (names are case-sensitive)"
        )
    names = tuple(f.name for f in dataclasses.fields(cls))
    reader.keys(params, "scheduler.params", names, {})
    kwargs: dict[str, Any] = {}
    for key in names:
        reader.take(params, "scheduler.params", key, kwargs)
    if cls is WarmupLRConfig and kwargs.get("warmup_max_lr") is None and optimizer is not None:
        kwargs["warmup_max_lr"] = optimizer.lr  # DeepSpeed: the optimizer's param-group lr
    warmup_type = kwargs.get("warmup_type", "log")
    if cls in (WarmupLRConfig, WarmupDecayLRConfig) and warmup_type not in WARMUP_TYPES:
        # DeepSpeed's WarmupLR warns and warms up logarithmically (its WarmupCosineLR fails).
        reader.warnings.append(
            f"ds_config: scheduler.params.warmup_type {show_json(warmup_type)} is not 'log' or "
            "'linear'; warming up with 'log', as DeepSpeed does"
        )
        kwargs["warmup_type"] = "log"
    return cls(**kwargs)
