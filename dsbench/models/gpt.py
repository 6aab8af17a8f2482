"""A GPT-2-style decoder with a KV cache (Radford et al. 2019; shapes as Hugging Face ``GPT2``).

Layout: token [vocab, h] + learned position [max_positions, h] embeddings; ``layers`` pre-LN
blocks ``x = x + Wo·Attn(Wqkv·LN(x))``, ``x = x + W2·GELU(W1·LN(x))`` (GELU with the tanh
approximation GPT-2 uses, causal attention by ``F.scaled_dot_product_attention``); a final
LayerNorm; the LM head [h -> vocab], bias-free, whose weight is the token embedding (tied).
No dropout. Init as GPT-2: N(0, 0.02), with the two projections that write into the residual
stream (``attn.proj``, ``mlp.proj``) at 0.02/sqrt(2·layers).

Parameters: 12·h²·L + 13·h·L (blocks) + (vocab + max_positions)·h + 2·h (final LN):
``gpt-small`` 124,439,808 (GPT-2 small, as published), ``gpt-medium`` 354,823,168 (GPT-2
medium), ``gpt-1b`` 1,013,573,632 (18 x 2048, 16 heads, 2048 positions). 24 x 2048 would be
1.32B: depth is cut to 18 to land within 1.4% of 1B.

Training loss: next-token cross-entropy on uniform random tokens (``seq_len + 1`` tokens per
sample, inputs ``[:-1]``, targets ``[1:]``).

Inference: :class:`KVCache` preallocates K and V for every layer; :func:`prefill` runs the
prompt and fills the cache, :func:`decode_step` feeds one token per sequence, and
:func:`generate_greedy` strings them together, so a benchmark can time prefill apart from
per-token decode. :func:`generate_greedy_recompute` is the reference that re-runs the whole
sequence for every new token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from dsbench.errors import UsageError
from dsbench.kernels.autograd import Linear
from dsbench.models.data import embedding, generator, init_weights_


@dataclass(frozen=True, kw_only=True, slots=True)
class GPTConfig:
    """Shapes of a GPT-2-style decoder (defaults: GPT-2 small)."""

    layers: int = 12
    """Transformer blocks."""
    hidden: int = 768
    """Model width h (MLP width is 4h)."""
    heads: int = 12
    """Attention heads (h must divide evenly)."""
    vocab_size: int = 50257
    """GPT-2's BPE vocabulary."""
    max_positions: int = 1024
    """Rows of the position table: the longest prompt + generation."""
    seq_len: int = 1024
    """Sequence length of the synthetic training batches (tokens per sample)."""
    layer_norm_eps: float = 1e-5
    """LayerNorm epsilon, as in GPT-2."""

    def __post_init__(self):
        for name in ("layers", "hidden", "heads", "vocab_size", "max_positions", "seq_len"):
            if getattr(self, name) < 1:
                raise UsageError(f"gpt config: {name} must be >= 1, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise UsageError(
                f"gpt config: hidden ({self.hidden}) must be a multiple of heads ({self.heads})"
            )
        if self.seq_len > self.max_positions:
            raise UsageError(
                f"gpt config: seq_len ({self.seq_len}) exceeds max_positions ({self.max_positions})"
            )


@dataclass(kw_only=True)
class KVCache:
    """Per-layer K and V, each [batch, heads, max_len, head_dim], filled up to ``length``."""

    k: list[torch.Tensor]
    v: list[torch.Tensor]
    length: int = 0
    """Positions already in the cache (the next token's position)."""

    @classmethod
    def allocate(
        cls, model: GPT, batch_size: int, max_len: int, *, device=None, dtype=None
    ) -> KVCache:
        """Empty cache for ``batch_size`` sequences of up to ``max_len`` tokens, on the model's
        device and in its dtype unless told otherwise."""
        c = model.config
        if max_len > c.max_positions:
            raise UsageError(
                f"KV cache of {max_len} positions exceeds the model's max_positions "
                f"({c.max_positions})"
            )
        w = model.wte.weight
        shape = (batch_size, c.heads, max_len, c.hidden // c.heads)
        kw = {"device": device or w.device, "dtype": dtype or w.dtype}
        return cls(
            k=[torch.empty(shape, **kw) for _ in range(c.layers)],
            v=[torch.empty(shape, **kw) for _ in range(c.layers)],
        )

    @property
    def max_len(self) -> int:
        return self.k[0].shape[2]

    def reset(self) -> None:
        """Forget the cached positions (the buffers are reused)."""
        self.length = 0


class CausalSelfAttention(nn.Module):
    def __init__(self, c: GPTConfig, gemm_impl: str | None):
        super().__init__()
        self.heads = c.heads
        self.qkv = Linear(c.hidden, 3 * c.hidden, impl=gemm_impl)
        self.proj = Linear(c.hidden, c.hidden, impl=gemm_impl)

    def forward(self, x: torch.Tensor, cache: KVCache | None, layer: int) -> torch.Tensor:
        b, t, h = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        past = 0
        if cache is not None:
            past = cache.length
            cache.k[layer][:, :, past : past + t] = k
            cache.v[layer][:, :, past : past + t] = v
            k = cache.k[layer][:, :, : past + t]
            v = cache.v[layer][:, :, : past + t]
        if past == 0:  # training, or prefill into an empty cache: square causal mask
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif t == 1:  # decode: the one new query sees every cached position
            y = F.scaled_dot_product_attention(q, k, v)
        else:  # a chunk after a cached prefix: query i sees positions <= past + i
            mask = torch.ones(t, past + t, dtype=torch.bool, device=x.device).tril(past)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(b, t, h))


class MLP(nn.Module):
    def __init__(self, c: GPTConfig, gemm_impl: str | None):
        super().__init__()
        self.fc = Linear(c.hidden, 4 * c.hidden, impl=gemm_impl)
        self.proj = Linear(4 * c.hidden, c.hidden, impl=gemm_impl)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    """Pre-LN block: x + attn(LN(x)), then x + mlp(LN(x))."""

    def __init__(self, c: GPTConfig, gemm_impl: str | None):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.attn = CausalSelfAttention(c, gemm_impl)
        self.ln_2 = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.mlp = MLP(c, gemm_impl)

    def forward(self, x: torch.Tensor, cache: KVCache | None, layer: int) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), cache, layer)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """``forward(input_ids, cache=None, last_only=False) -> logits`` [B, T, V] ([B, V] with
    ``last_only``). With a cache, the tokens take positions ``cache.length ...`` and are
    appended to it.

    Build it with :meth:`dsbench.models.ModelPreset.build`; constructed directly (e.g. under
    DeepSpeed's ``zero.Init``) the embeddings are uninitialised until :meth:`init_weights`."""

    def __init__(self, config: GPTConfig, *, gemm_impl: str | None = None):
        super().__init__()
        c = self.config = config
        self.wte = embedding(c.vocab_size, c.hidden)
        self.wpe = embedding(c.max_positions, c.hidden)
        self.blocks = nn.ModuleList(Block(c, gemm_impl) for _ in range(c.layers))
        self.ln_f = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.lm_head = Linear(c.hidden, c.vocab_size, bias=False, impl=gemm_impl)
        self.tie_weights()

    def tie_weights(self) -> None:
        """LM head weight = token embeddings (again after ``to_empty``, which unties)."""
        self.lm_head.weight = self.wte.weight

    def init_weights(self, seed: int) -> None:
        """GPT-2's init (see the module docstring)."""
        init_weights_(
            self,
            seed,
            std=0.02,
            residual_std=0.02 / math.sqrt(2 * self.config.layers),
            residual_suffixes=("attn.proj.weight", "mlp.proj.weight"),
        )

    def checkpoint_units(self) -> list[nn.Module]:
        """Blocks for activation checkpointing: the transformer blocks."""
        return list(self.blocks)

    def forward(
        self, input_ids: torch.Tensor, cache: KVCache | None = None, last_only: bool = False
    ) -> torch.Tensor:
        t = input_ids.shape[1]
        start = cache.length if cache is not None else 0
        if cache is not None and start + t > cache.max_len:
            raise UsageError(f"KV cache full: {start} + {t} tokens > {cache.max_len} positions")
        if start + t > self.config.max_positions:
            raise UsageError(
                f"sequence of {start + t} tokens exceeds max_positions "
                f"({self.config.max_positions})"
            )
        positions = torch.arange(start, start + t, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(positions)
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i)
        if cache is not None:
            cache.length += t
        if last_only:
            x = x[:, -1]
        return self.lm_head(self.ln_f(x))


def make_batch(
    config: GPTConfig, micro_batch: int, *, seed: int, step: int, device, dtype=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, targets)``, each [micro_batch, seq_len] int64: a window of uniform random
    tokens and the same window shifted by one (``dtype`` does not apply)."""
    gen = generator(seed, step)
    tokens = torch.randint(0, config.vocab_size, (micro_batch, config.seq_len + 1), generator=gen)
    return tokens[:, :-1].contiguous().to(device), tokens[:, 1:].contiguous().to(device)


def loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Next-token cross-entropy (mean over all positions), logits upcast to fp32."""
    input_ids, targets = batch
    logits = model(input_ids)
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


# --- inference ----------------------------------------------------------------------------------


@torch.inference_mode()
def prefill(model: GPT, prompt_ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Run the prompt [B, T0] through the model, filling ``cache`` (which must be empty and
    allocated for batch B); returns the last position's logits [B, V] (the LM head runs on that
    position only)."""
    if cache.length:
        raise ValueError(f"prefill needs an empty cache, this one holds {cache.length} positions")
    if cache.k[0].shape[0] != prompt_ids.shape[0]:
        raise ValueError(
            f"cache allocated for batch {cache.k[0].shape[0]}, prompt has {prompt_ids.shape[0]}"
        )
    return model(prompt_ids, cache, last_only=True)


@torch.inference_mode()
def decode_step(model: GPT, token_ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Feed one token per sequence (``token_ids`` [B] or [B, 1]) after what ``cache`` holds;
    returns its logits [B, V] and appends its K and V to the cache."""
    return model(token_ids.reshape(-1, 1), cache, last_only=True)


@torch.inference_mode()
def generate_greedy(
    model: GPT, prompt_ids: torch.Tensor, new_tokens: int, *, cache: KVCache | None = None
) -> torch.Tensor:
    """Greedy decoding with the KV cache: one :func:`prefill`, then ``new_tokens - 1``
    :func:`decode_step` calls. Returns [B, T0 + new_tokens] (prompt, then the new tokens).
    ``cache`` (reset here) lets a benchmark reuse one allocation across repeats."""
    b, t0 = prompt_ids.shape
    if new_tokens < 1:
        raise UsageError(f"new_tokens must be >= 1, got {new_tokens}")
    if cache is None:
        cache = KVCache.allocate(model, b, t0 + new_tokens)
    cache.reset()
    out = [prompt_ids]
    token = prefill(model, prompt_ids, cache).argmax(dim=-1)
    out.append(token[:, None])
    for _ in range(new_tokens - 1):
        token = decode_step(model, token, cache).argmax(dim=-1)
        out.append(token[:, None])
    return torch.cat(out, dim=1)


@torch.inference_mode()
def generate_greedy_recompute(
    model: GPT, prompt_ids: torch.Tensor, new_tokens: int
) -> torch.Tensor:
    """Reference greedy decoding without a cache: the whole sequence is re-run for every new
    token. Same output contract as :func:`generate_greedy`."""
    ids = prompt_ids
    for _ in range(new_tokens):
        token = model(ids, last_only=True).argmax(dim=-1)
        ids = torch.cat([ids, token[:, None]], dim=1)
    return ids
