"""The three batch sizes from a ds_config, its "auto" placeholders and the command line.

``train_batch_size = train_micro_batch_size_per_gpu × gradient_accumulation_steps × world size``.
Values come in three tiers, strongest first:

1. the command line (``--train-batch``, ``--micro-batch``, ``--grad-accum``): always kept;
2. numbers in the ds_config;
3. Hugging Face "auto": micro-batch 8, accumulation 1, ``train_batch_size`` derived (the Trainer's
   ``per_device_train_batch_size`` and ``gradient_accumulation_steps`` defaults).

Missing sizes are derived as DeepSpeed's ``_set_batch_related_parameters`` derives them (only
``train_batch_size`` or only the micro-batch: accumulation 1), with exact divisions. When the
values do not fit the world size, one value that did not come from the command line is derived
again from the other two instead, in this order: an "auto" one, then (only when the command line
gave a size) the config's ``train_batch_size``, ``gradient_accumulation_steps``,
``train_micro_batch_size_per_gpu``. So a config written for 8 GPUs runs on 2 with
``--train-batch`` (accumulation re-derived), and ``--micro-batch`` alone keeps the config's
accumulation and re-derives ``train_batch_size``, as the Trainer does. What the command line
changed is said in one line (:attr:`BatchSizes.note`). A config whose own sizes do not fit, with
nothing on the command line, is an error that names the flag and value that would fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from dsbench.zero.config.fields import ConfigError

TRAIN = "train_batch_size"
MICRO = "train_micro_batch_size_per_gpu"
ACCUM = "gradient_accumulation_steps"
KEYS = (TRAIN, MICRO, ACCUM)
FLAGS = {TRAIN: "--train-batch", MICRO: "--micro-batch", ACCUM: "--grad-accum"}
AUTO_DEFAULTS = {MICRO: 8, ACCUM: 1}
"""What the Hugging Face Trainer writes over "auto" (its per-device batch size and accumulation
defaults); an "auto" ``train_batch_size`` is derived."""
_REDERIVE = (TRAIN, ACCUM, MICRO)


class _Mismatch(Exception):
    """The sizes do not fit together; the message names the numbers."""


@dataclass(frozen=True, kw_only=True)
class BatchSizes:
    """Resolved sizes and what the command line and "auto" did to the config's."""

    train: int
    micro: int
    accum: int
    note: str | None = None
    """One line naming each config value the command line changed (None: nothing changed)."""
    filled: dict[str, str] = field(default_factory=dict)
    """"auto" key → its value as shown in the fill notice (with its source)."""


def derive(values: Mapping[str, int], world: int) -> tuple[int, int, int] | None:
    """(train, micro, accum) from the sizes given, as DeepSpeed derives them but with exact
    divisions; None when there is no batch size; :class:`_Mismatch` when they do not fit."""
    train, micro, accum = values.get(TRAIN), values.get(MICRO), values.get(ACCUM)

    def exact(total: int, parts: list[tuple[str, int]]) -> int:
        divisor = math.prod(n for _, n in parts)
        if total % divisor:
            names = " × ".join(f"{name} {n}" for name, n in parts)
            raise _Mismatch(f"{TRAIN} {total} is not divisible by {names} (= {divisor})")
        return total // divisor

    ranks = ("world size", world)
    if train is not None and micro is not None and accum is not None:
        if train != micro * accum * world:
            raise _Mismatch(
                f"{TRAIN} {train} != {MICRO} {micro} × {ACCUM} {accum} × world size {world} "
                f"(= {micro * accum * world})"
            )
    elif train is not None and micro is not None:
        accum = exact(train, [(MICRO, micro), ranks])
    elif train is not None and accum is not None:
        micro = exact(train, [(ACCUM, accum), ranks])
    elif micro is not None:
        accum = 1 if accum is None else accum
        train = micro * accum * world
    elif train is not None:
        accum, micro = 1, exact(train, [ranks])
    else:
        return None
    return train, micro, accum


def _first_fit(values: dict[str, int], droppable: list[str], world: int):
    """derive(values), or else derive without one of ``droppable`` (in order); raises the
    first mismatch when nothing fits."""
    try:
        return derive(values, world)
    except _Mismatch as first:
        for key in droppable:
            try:
                fit = derive({k: v for k, v in values.items() if k != key}, world)
            except _Mismatch:
                continue
            if fit is not None:
                return fit
        raise first from None


def _layers(config, autos, args):
    fixed = {k: v for k, v in args.items() if v is not None}
    soft = {k: AUTO_DEFAULTS[k] for k in autos if k in AUTO_DEFAULTS and k not in fixed}
    mine = {k: v for k, v in config.items() if k not in fixed}
    droppable = [k for k in _REDERIVE if k in autos and k not in fixed]
    if fixed:
        droppable += [k for k in _REDERIVE if k in mine]
    return fixed, {**soft, **mine, **fixed}, droppable


def resolve(
    config: Mapping[str, int],
    autos: list[str] | tuple[str, ...],
    args: Mapping[str, int | None],
    world: int,
) -> BatchSizes | None:
    """The batch sizes for ``world`` ranks from the config's numbers (``config``), its "auto"
    keys (``autos``) and the command line (``args``, None where not given); None when there is
    no batch size at all. A :class:`ConfigError` names the flag and value that would fit."""
    fixed, values, droppable = _layers(config, autos, args)
    try:
        fit = _first_fit(values, droppable, world)
    except _Mismatch as exc:
        fixes = _fixes(config, autos, args, values, world)
        hint = ""
        if fixes:
            more = f" (or {', '.join(fixes[1:])})" if len(fixes) > 1 else ""
            hint = f"; give {fixes[0]}{more} to run on {world} rank{'s' if world != 1 else ''}"
        raise ConfigError(f"{exc}{hint}") from None
    if fit is None:
        return None
    train, micro, accum = fit
    effective = {TRAIN: train, MICRO: micro, ACCUM: accum}
    changed = [
        f"{k} {config[k]} → {effective[k]}" + (f" ({FLAGS[k]})" if k in fixed else "")
        for k in KEYS
        if k in config and config[k] != effective[k]
    ]
    note = None
    if changed:
        note = "the command line changes the ds_config's batch sizes: " + ", ".join(changed)
    filled = {
        k: f"{effective[k]}" + (f" ({FLAGS[k]})" if k in fixed else "") for k in KEYS if k in autos
    }
    return BatchSizes(train=train, micro=micro, accum=accum, note=note, filled=filled)


def _fixes(config, autos, args, values: dict[str, int], world: int) -> list[str]:
    """``--flag value`` settings, each of which alone (with the command line's other sizes)
    makes the sizes fit: keep the per-rank work (``--train-batch``), or keep
    ``train_batch_size`` and change the accumulation or the micro-batch."""
    train, micro, accum = values[TRAIN], values.get(MICRO), values.get(ACCUM)  # a mismatch has
    # a train_batch_size; the sizes it leaves out are guessed nearest to it
    if micro is None:
        micro = max(1, round(train / ((accum or 1) * world)))
    if accum is None:
        accum = max(1, round(train / (micro * world)))
    candidates = [(TRAIN, micro * accum * world)]
    for key, other in ((ACCUM, micro), (MICRO, accum)):
        if train % (other * world) == 0:
            candidates.append((key, train // (other * world)))
    out = []
    for key, value in candidates:
        if args.get(key) == value:
            continue
        trial = {**args, key: value}
        _, trial_values, droppable = _layers(config, autos, trial)
        try:
            if _first_fit(trial_values, droppable, world) is not None:
                out.append(f"{FLAGS[key]} {value}")
        except _Mismatch:
            continue
    return list(dict.fromkeys(out))
