"""What results are made of, shared by everything that writes or reads them, importing nothing
else from dsbench (and not torch): a metric's direction, a benchmark case's id, and the flat
fields of a recorded environment that selectors and confounder checks compare."""

from __future__ import annotations

from typing import Literal

Direction = Literal["higher", "lower"]
"""Which way a metric improves: throughput and bandwidth ``higher``, time and memory ``lower``."""
HIGHER: Direction = "higher"
LOWER: Direction = "lower"
DIRECTIONS: tuple[Direction, ...] = (HIGHER, LOWER)


def case_id(name: str, params: dict) -> str:
    """Stable identifier: ``name[k1=v1,k2=v2]`` with keys sorted."""
    if not params:
        return name
    return name + "[" + ",".join(f"{k}={params[k]}" for k in sorted(params)) + "]"


def dig(env: dict, *keys: str | int):
    """``env[k1][k2]...`` through dicts and lists; None where a key or index is missing."""
    value = env
    for key in keys:
        if isinstance(value, list):
            value = value[key] if isinstance(key, int) and len(value) > key else None
        elif isinstance(value, dict):
            value = value.get(key)
        else:
            return None
    return value


def summary_fields(env: dict) -> dict[str, str | None]:
    """Flat string fields for selectors (``python=3.11``) and confounder checks; missing -> None.

    Tolerates partial or older env dicts (migrated result files, asv runs).
    """
    fields = {
        "python": dig(env, "python", "version"),
        "torch": dig(env, "packages", "torch"),
        "triton": dig(env, "packages", "triton"),
        "numpy": dig(env, "packages", "numpy"),
        "deepspeed": dig(env, "packages", "deepspeed"),
        "dsbench": dig(env, "dsbench", "version"),
        "commit": dig(env, "dsbench", "commit"),
        "dirty": dig(env, "dsbench", "dirty"),
        "backend": env.get("backend"),
        "profile": dig(env, "profile", "name"),
        "device": dig(env, "devices", 0, "name"),
        "device_count": env.get("device_count"),
        "cpu": dig(env, "cpu", "model"),
        "threads": dig(env, "cpu", "torch_threads"),
        "cuda": dig(env, "runtime", "cuda"),
        "hip": dig(env, "runtime", "hip"),
        "nccl": dig(env, "runtime", "nccl"),
        "driver": env.get("driver"),
        "machine": dig(env, "platform", "hostname"),
        "os": dig(env, "platform", "os"),
    }
    out: dict[str, str | None] = {}
    for key, value in fields.items():
        if isinstance(value, bool):
            value = "yes" if value else "no"
        out[key] = None if value is None else str(value)
    return out


METRICS: dict[str, tuple[tuple[str, str, Direction], ...]] = {
    "adamw": (("bandwidth", "GB/s", HIGHER), ("params_per_s", "Gparam/s", HIGHER),
              ("time", "ms", LOWER)),
    "copy": (("bandwidth", "GB/s", HIGHER), ("time", "ms", LOWER)),
    "gemm": (("throughput", "TFLOP/s", HIGHER), ("time", "ms", LOWER)),
    **{op: (("busbw", "GB/s", HIGHER), ("algbw", "GB/s", HIGHER), ("time", "ms", LOWER))
       for op in ("allreduce", "reduce_scatter", "allgather")},
    **{name: (("samples_per_s", "samples/s", HIGHER), ("tokens_per_s", "tokens/s", HIGHER),
              ("tflops_per_rank", "TFLOP/s", HIGHER), ("time", "ms", LOWER),
              ("step_efficiency", "fraction", HIGHER))
       for name in ("train_step", "train_step_offload")},
    "prefill": (("time", "ms", LOWER), ("tokens_per_s", "tokens/s", HIGHER),
                ("tflops", "TFLOP/s", HIGHER)),
    "decode": (("ms_per_token", "ms/token", LOWER), ("tokens_per_s", "tokens/s", HIGHER),
               ("tflops", "TFLOP/s", HIGHER)),
}  # fmt: skip
"""Each benchmark's metrics as (name, unit, direction), the primary first: what a reader of
result files (asv's included) needs without loading the definitions in :mod:`dsbench.suites`
(and torch). tests/test_imports.py checks that it matches them."""
