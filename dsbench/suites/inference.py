"""Inference benchmarks: greedy decoding of the GPT presets with a KV cache, at batch 1 and 8.

- ``prefill``: the prompt [B, T0] through the model into an empty cache (ms; tokens/s = B·T0/t).
- ``decode``: one new token per sequence given the cached context (ms/token = the step's time,
  since every sequence gets one token per step; tokens/s = B/t). The cache is rewound to the
  prompt after ``DECODE_WINDOW`` tokens so the context length, and the cost, stay stationary
  over thousands of repetitions.

FLOPs are 2·N per token (forward only; attention's T-dependent terms excluded), so
TFLOP/s is comparable with the profile's dense peak; decode at small batch is memory-bound and
reaches a small fraction of it by nature.
"""

from __future__ import annotations

import torch

from dsbench.suites.base import Benchmark, Case, Context, Metric, Work, time_ms

DECODE_WINDOW = 64


def _grid(suite: str, ctx: Context) -> dict[str, list]:
    if ctx.gpu:
        return {"model": ["gpt-small", "gpt-1b"], "batch": [1, 8], "prompt": [512],
                "dtype": ["bfloat16"]}  # fmt: skip
    return {"model": ["gpt-tiny", "gpt-mini"], "batch": [1, 8], "prompt": [64],
            "dtype": ["float32"]}  # fmt: skip


def _model_and_prompt(params: dict, ctx: Context):
    from dsbench.models import get_model
    from dsbench.models.gpt import KVCache

    preset = get_model(params["model"])
    model = preset.build(dtype=getattr(torch, params["dtype"]), device=ctx.device, seed=0).eval()
    g = torch.Generator().manual_seed(0)
    vocab = preset.config.vocab_size
    prompt = torch.randint(vocab, (params["batch"], params["prompt"]), generator=g)
    cache = KVCache.allocate(model, params["batch"], params["prompt"] + DECODE_WINDOW)
    return preset, model, prompt.to(ctx.device), cache


def _prefill_setup(params: dict, ctx: Context) -> Case:
    from dsbench.models.gpt import prefill

    preset, model, prompt, cache = _model_and_prompt(params, ctx)

    @torch.inference_mode()
    def fn() -> None:
        cache.reset()
        prefill(model, prompt, cache)

    tokens = params["batch"] * params["prompt"]
    return Case(fn=fn, work=Work(tokens=tokens, flops=2.0 * preset.num_params() * tokens),
                notes={"params": preset.num_params()})  # fmt: skip


def _decode_setup(params: dict, ctx: Context) -> Case:
    from dsbench.models.gpt import decode_step, prefill

    preset, model, prompt, cache = _model_and_prompt(params, ctx)
    with torch.inference_mode():
        logits = prefill(model, prompt, cache)
    start = cache.length
    state = {"token": logits.argmax(-1)}

    @torch.inference_mode()
    def fn() -> None:
        if cache.length >= cache.max_len:
            cache.length = start  # rewind: the context length stays in [T0, T0 + window)
        state["token"] = decode_step(model, state["token"], cache).argmax(-1)

    b = params["batch"]
    return Case(
        fn=fn,
        work=Work(tokens=b, items=1, flops=2.0 * preset.num_params() * b),
        notes={"params": preset.num_params(), "context": f"{start}..{cache.max_len}"},
    )


def _tflops() -> Metric:
    return Metric(name="tflops", unit="TFLOP/s", direction="higher",
                  value=lambda w, t: w.flops / t / 1e12, peak="flops:{dtype}",
                  description="2·N·tokens / t")  # fmt: skip


def _tokens_per_s() -> Metric:
    return Metric(name="tokens_per_s", unit="tokens/s", direction="higher",
                  value=lambda w, t: w.tokens / t)  # fmt: skip


DECODE = Benchmark(
    name="decode",
    description="greedy decoding with a KV cache: one token per sequence per step",
    grid=_grid,
    setup=_decode_setup,
    metrics=(
        Metric(
            name="ms_per_token",
            unit="ms/token",
            direction="lower",
            value=lambda w, t: t * 1e3 / w.items,
            description="step time per new token",
        ),
        _tokens_per_s(),
        _tflops(),
    ),
    suites=("inference",),
)
PREFILL = Benchmark(
    name="prefill",
    description="prompt processing into an empty KV cache",
    grid=_grid,
    setup=_prefill_setup,
    metrics=(time_ms(), _tokens_per_s(), _tflops()),
    suites=("inference",),
)

BENCHMARKS = [PREFILL, DECODE]
