"""A BERT-style encoder trained with a masked-LM loss (Devlin et al. 2018, arXiv:1810.04805).

Entry points: :class:`BertConfig`, :class:`Bert`, :func:`make_batch`, :func:`loss` and
:func:`training_flops_per_sample` (presets in :mod:`dsbench.models`). Layout (the Hugging Face
``BertForMaskedLM`` shapes, so parameter counts compare directly):

* embeddings: word [vocab, h] + position [max_positions, h] + token type [type_vocab, h], summed,
  then LayerNorm;
* ``layers`` post-LN blocks: ``x = LN(x + Wo·Attn(Wqkv·x))``, ``x = LN(x + W2·GELU(W1·x))``,
  with Q, K and V fused into one [h -> 3h] Linear (same parameters as three [h -> h]), exact
  (erf) GELU, attention by ``F.scaled_dot_product_attention`` over the whole sequence (no
  padding, so no mask);
* MLM head: Linear [h -> h] + GELU + LayerNorm, then the decoder [h -> vocab] whose weight is
  the word-embedding matrix (tied) and whose bias is its own; it runs on the masked positions
  only ([Note: the MLM head on the masked positions]).

There is no pooler and no next-sentence head: the MLM loss never uses them, and parameters that
never receive a gradient would only get in the way of ZeRO's gradient bookkeeping. Dropout is
left out (it is 0 at inference and only noise for a throughput benchmark), which keeps runs
bit-reproducible. Batches are synthetic ([Note: BERT's synthetic batches]).

Parameter counts: ``bert-large`` 335,174,458 and ``bert-base`` 109,514,298, the Hugging Face
``BertModel`` counts (335,141,888, the published "335M"; 109,482,240) less the pooler plus the
MLM head; ``tests/test_models.py::test_bert_large_parameter_count`` checks the sum term by term.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from dsbench.errors import UsageError
from dsbench.kernels.autograd import Linear
from dsbench.models.data import embedding, generator, init_weights_

IGNORE_INDEX = -100


@dataclass(frozen=True, kw_only=True, slots=True)
class BertConfig:
    """Shapes of a BERT encoder with an MLM head (defaults: BERT-large)."""

    layers: int = 24
    """Transformer blocks."""
    hidden: int = 1024
    """Model width h."""
    heads: int = 16
    """Attention heads (h must divide evenly)."""
    intermediate: int = 4096
    """Feed-forward width."""
    vocab_size: int = 30522
    """WordPiece vocabulary of the original uncased BERT."""
    max_positions: int = 512
    """Rows of the position-embedding table."""
    type_vocab_size: int = 2
    """Token types (segments A and B)."""
    seq_len: int = 128
    """Sequence length of the synthetic training batches (tokens per sample)."""
    layer_norm_eps: float = 1e-12
    """LayerNorm epsilon, as in BERT."""
    mask_prob: float = 0.15
    """Fraction of each sequence that is masked and scored."""
    mask_token_id: int = 103
    """[MASK] in the uncased BERT vocabulary."""

    def __post_init__(self):
        for name in ("layers", "hidden", "heads", "intermediate", "vocab_size", "seq_len"):
            if getattr(self, name) < 1:
                raise UsageError(f"bert config: {name} must be >= 1, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise UsageError(
                f"bert config: hidden ({self.hidden}) must be a multiple of heads ({self.heads})"
            )
        if self.seq_len > self.max_positions:
            raise UsageError(
                f"bert config: seq_len ({self.seq_len}) exceeds max_positions "
                f"({self.max_positions})"
            )
        if not 0.0 < self.mask_prob <= 1.0:
            raise UsageError(f"bert config: mask_prob must be in (0, 1], got {self.mask_prob}")
        if not 0 <= self.mask_token_id < self.vocab_size:
            raise UsageError(f"bert config: mask_token_id must be in [0, {self.vocab_size})")


class BertSelfAttention(nn.Module):
    def __init__(self, c: BertConfig, gemm_impl: str | None):
        super().__init__()
        self.heads = c.heads
        self.qkv = Linear(c.hidden, 3 * c.hidden, impl=gemm_impl)
        self.out = Linear(c.hidden, c.hidden, impl=gemm_impl)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, t, h))


class BertLayer(nn.Module):
    """Post-LN block: LN(x + attn(x)), then LN(x + W2·GELU(W1·x))."""

    def __init__(self, c: BertConfig, gemm_impl: str | None):
        super().__init__()
        self.attention = BertSelfAttention(c, gemm_impl)
        self.attention_norm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.intermediate = Linear(c.hidden, c.intermediate, impl=gemm_impl)
        self.output = Linear(c.intermediate, c.hidden, impl=gemm_impl)
        self.output_norm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.attention(x))
        return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))


# [Note: the MLM head on the masked positions]
# The loss is masked-LM cross-entropy over the full vocabulary at the masked positions only: the
# MLM head (transform and decoder) runs on those rows alone, as in BERT's own pretraining code
# (Google's ``run_pretraining.py`` gathers ``masked_lm_positions`` before the output layer;
# NVIDIA's and DeepSpeed's BERT pretraining do the same), not on every position as Hugging
# Face's ``BertForMaskedLM`` does. With vocab 30522 the difference dominates small models
# (docs/decisions.md, "BERT's MLM head on the masked positions"). Called without labels
# (inference) the model returns logits for every position. :func:`training_flops_per_sample`
# counts the head on the masked positions only. The loss is the same as over full logits
# (``tests/test_models.py::test_bert_head_on_masked_positions_equals_full_logits_loss``).


class Bert(nn.Module):
    """BERT encoder + tied MLM head: ``forward(input_ids, token_type_ids) -> logits [B, T, V]``.

    Build it with :meth:`dsbench.models.ModelPreset.build`; constructed directly (e.g. under
    DeepSpeed's ``zero.Init``) the embeddings are uninitialised until :meth:`init_weights`."""

    def __init__(self, config: BertConfig, *, gemm_impl: str | None = None):
        super().__init__()
        c = self.config = config
        self.word_embeddings = embedding(c.vocab_size, c.hidden)
        self.position_embeddings = embedding(c.max_positions, c.hidden)
        self.token_type_embeddings = embedding(c.type_vocab_size, c.hidden)
        self.embedding_norm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.layers = nn.ModuleList(BertLayer(c, gemm_impl) for _ in range(c.layers))
        self.head_transform = Linear(c.hidden, c.hidden, impl=gemm_impl)
        self.head_norm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.decoder = Linear(c.hidden, c.vocab_size, impl=gemm_impl)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Decoder weight = word embeddings (again after ``to_empty``, which unties)."""
        self.decoder.weight = self.word_embeddings.weight

    def init_weights(self, seed: int) -> None:
        """BERT's init: N(0, 0.02) weights and embeddings, zero biases, unit LayerNorms."""
        init_weights_(self, seed, std=0.02)

    def checkpoint_units(self) -> list[nn.Module]:
        """Blocks for activation checkpointing: the encoder layers."""
        return list(self.layers)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits [B, T, V] for every position; with ``labels`` ([B, T], -100 where not
        scored) the masked-LM loss instead: fp32 cross-entropy, mean over the scored positions,
        with the MLM head run on those positions only."""
        t = input_ids.shape[1]
        positions = torch.arange(t, device=input_ids.device)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(token_type_ids)
        )
        x = self.embedding_norm(x)
        for layer in self.layers:
            x = layer(x)
        if labels is None:
            return self.decoder(self.head_norm(F.gelu(self.head_transform(x))))
        scored = labels != IGNORE_INDEX
        x = x[scored]  # [M, h]: the masked positions, row-major (as labels[scored])
        logits = self.decoder(self.head_norm(F.gelu(self.head_transform(x))))
        return F.cross_entropy(logits.float(), labels[scored])


# [Note: BERT's synthetic batches]
# Tokens are uniform in [0, vocab); in each sequence exactly ``round(mask_prob · seq_len)``
# positions (at least one), chosen at random, are replaced by ``mask_token_id`` and are the only
# positions scored (labels -100 elsewhere). Always replacing with [MASK] (no 80/10/10 split) is a
# simplification that costs nothing in FLOPs. Token types: 0 for the first half of the sequence,
# 1 for the second (a sentence pair).
def make_batch(
    config: BertConfig, micro_batch: int, *, seed: int, step: int, device, dtype=None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(input_ids, token_type_ids, labels)``, each [micro_batch, seq_len] int64 (``dtype``
    does not apply: there is no floating input)."""
    c = config
    gen = generator(seed, step)
    tokens = torch.randint(0, c.vocab_size, (micro_batch, c.seq_len), generator=gen)
    n_masked = max(1, round(c.mask_prob * c.seq_len))
    order = torch.rand(micro_batch, c.seq_len, generator=gen).argsort(dim=1)
    masked = torch.zeros(micro_batch, c.seq_len, dtype=torch.bool)
    masked.scatter_(1, order[:, :n_masked], True)
    labels = torch.where(masked, tokens, IGNORE_INDEX)
    input_ids = torch.where(masked, c.mask_token_id, tokens)
    token_types = (torch.arange(c.seq_len) >= c.seq_len // 2).long().expand(micro_batch, -1)
    return tuple(t.contiguous().to(device) for t in (input_ids, token_types, labels))


def loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Masked-LM cross-entropy (mean over masked positions), logits upcast to fp32; computed
    by the model's forward, so that the MLM head sees the masked positions only."""
    input_ids, token_type_ids, labels = batch
    return model(input_ids, token_type_ids, labels=labels)


def masked_per_sample(c: BertConfig) -> int:
    """Positions scored per sequence (what :func:`make_batch` masks)."""
    return max(1, round(c.mask_prob * c.seq_len))


def head_params(c: BertConfig) -> int:
    """Parameters of the MLM head: transform (h·h + h), its LayerNorm (2h), the tied decoder
    weight (V·h, counted here rather than with the embeddings) and the decoder bias (V)."""
    h, v = c.hidden, c.vocab_size
    return h * h + h + 2 * h + v * h + v


def training_flops_per_sample(c: BertConfig, num_params: int, training: bool = True) -> int:
    """``6·(N − N_head)·T + 6·N_head·M`` (``2·`` forward only): the 6NT convention, with the
    MLM head applied to the M masked positions only (:func:`head_params`)."""
    k = 6 if training else 2
    n_head = head_params(c)
    return k * ((num_params - n_head) * c.seq_len + n_head * masked_per_sample(c))
