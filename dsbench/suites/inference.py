"""Inference benchmarks: greedy decoding of the GPT presets with a KV cache, at batch 1 and 8.

- ``prefill``: the prompt [B, T0] through the model into an empty cache (ms; tokens/s = B·T0/t).
- ``decode``: one new token per sequence given the cached context (ms/token = the step's time,
  since every sequence gets one token per step; tokens/s = B/t). The cache is rewound to the
  prompt after ``DECODE_WINDOW`` tokens so the context length, and the cost, stay stationary
  over thousands of repetitions.

FLOPs are 2·N per token (forward only; attention's T-dependent terms excluded), so
TFLOP/s is comparable with the profile's dense peak; decode at small batch is memory-bound and
reaches a small fraction of it by nature. Bytes are the weights, read once per forward pass
(N x element size): a lower bound on the traffic, since KV-cache and activation reads and
writes are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsbench.suites.base import Benchmark, Case, Context, Metric, Work, dtype_bits, tflops, time_ms

DECODE_WINDOW = 64

GPT_PARAMS = {
    "gpt-tiny": 1_350_400,
    "gpt-mini": 6_967_296,
    "gpt-small": 124_439_808,
    "gpt-medium": 354_823_168,
    "gpt-1b": 1_013_573_632,
}
"""``get_model(name).num_params()`` of the GPT presets (tests/test_modelled.py checks them), so
that counting a case's work (publish models cases from it) needs no torch."""


@dataclass(frozen=True, kw_only=True)
class InferenceParams:
    """A case of :data:`PREFILL` or :data:`DECODE`."""

    model: str
    """A GPT preset (:data:`GPT_PARAMS`)."""
    batch: int
    """Sequences decoded together, B."""
    prompt: int
    """Prompt tokens per sequence, T0."""
    dtype: str
    """torch dtype name of the weights and activations."""


def num_params(model: str) -> int:
    """The preset's exact parameter count: from :data:`GPT_PARAMS`, else built on the meta
    device (nothing is allocated)."""
    if model in GPT_PARAMS:
        return GPT_PARAMS[model]
    from dsbench.models import get_model

    return get_model(model).num_params()


def _grid(suite: str, ctx: Context) -> dict[str, list]:
    if ctx.gpu:
        return {"model": ["gpt-small", "gpt-1b"], "batch": [1, 8], "prompt": [512],
                "dtype": ["bfloat16"]}  # fmt: skip
    return {"model": ["gpt-tiny", "gpt-mini"], "batch": [1, 8], "prompt": [64],
            "dtype": ["float32"]}  # fmt: skip


def _work(params: InferenceParams, ctx: Context, *, decode: bool) -> Work:
    """One prefill of the prompt (B·T0 tokens) or one decode step (B tokens), counted from the
    preset's parameter count (:func:`num_params`: nothing is allocated)."""
    n = num_params(params.model)
    weight_bytes = n * dtype_bits(params.dtype) // 8
    tokens = params.batch * (1 if decode else params.prompt)
    return Work(tokens=tokens, items=1 if decode else 0, flops=2.0 * n * tokens,
                bytes=weight_bytes)  # fmt: skip


def _model_and_prompt(params: InferenceParams, ctx: Context):
    import torch

    from dsbench.models import get_model
    from dsbench.models.gpt import KVCache

    preset = get_model(params.model)
    model = preset.build(dtype=getattr(torch, params.dtype), device=ctx.device, seed=0).eval()
    g = torch.Generator().manual_seed(0)
    vocab = preset.config.vocab_size
    prompt = torch.randint(vocab, (params.batch, params.prompt), generator=g)
    cache = KVCache.allocate(model, params.batch, params.prompt + DECODE_WINDOW)
    return preset, model, prompt.to(ctx.device), cache


def _prefill_setup(params: InferenceParams, ctx: Context) -> Case:
    import torch

    from dsbench.models.gpt import prefill

    preset, model, prompt, cache = _model_and_prompt(params, ctx)

    @torch.inference_mode()
    def fn() -> None:
        cache.reset()
        prefill(model, prompt, cache)

    return Case(fn=fn, work=_work(params, ctx, decode=False),
                notes={"params": preset.num_params()})  # fmt: skip


def _decode_setup(params: InferenceParams, ctx: Context) -> Case:
    import torch

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

    return Case(
        fn=fn,
        work=_work(params, ctx, decode=True),
        notes={"params": preset.num_params(), "context": f"{start}..{cache.max_len}"},
    )


def _tflops() -> Metric:
    return tflops("tflops", description="2·N·tokens / t")


def _tokens_per_s() -> Metric:
    return Metric(name="tokens_per_s", value=lambda w, t: w.tokens / t)


DECODE = Benchmark(
    name="decode",
    description="greedy decoding with a KV cache: one token per sequence per step",
    grid=_grid,
    params=InferenceParams,
    setup=_decode_setup,
    work_of=lambda params, ctx: _work(params, ctx, decode=True),
    metrics=(
        Metric(
            name="ms_per_token",
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
    params=InferenceParams,
    setup=_prefill_setup,
    work_of=lambda params, ctx: _work(params, ctx, decode=False),
    metrics=(time_ms(), _tokens_per_s(), _tflops()),
    suites=("inference",),
)

BENCHMARKS = [PREFILL, DECODE]
