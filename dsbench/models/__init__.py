"""Workloads: the seed's MLP, a BERT-style encoder and a GPT-style decoder, as named presets.

Defined here, nothing downloaded. Every Linear is ``dsbench.kernels.autograd.Linear`` with
:meth:`ModelPreset.build`'s ``gemm_impl``: a registry GEMM runs forward and both backward GEMMs::

    preset = get_model("bert-small")
    model = preset.build(gemm_impl=None, dtype=torch.bfloat16, device="cuda", seed=0)
    batch = preset.batch(16, seed=0, step=batch_index(step, rank=rank, world_size=world))
    preset.loss(model, batch).backward()

Presets and exact parameter counts (tied weights counted once; ``bert-*`` include the MLM head
and no pooler, see :mod:`dsbench.models.bert`; ``test_docstring_table_matches_counts`` checks):

==============  ==============  =========================================================
name            parameters      shapes
==============  ==============  =========================================================
mlp                  4,263,952  1024 -> 4096 -> 16, ReLU, loss = sum of outputs (the seed)
bert-tiny            4,416,698  2 x 128, 2 heads, seq 32
bert-small          11,201,594  4 x 256, 4 heads, seq 64
bert-base          109,514,298  12 x 768, 12 heads, seq 128
bert-large         335,174,458  24 x 1024, 16 heads, seq 128 (published: ~335M)
gpt-tiny             1,350,400  4 x 128, 4 heads, vocab 4096, seq 128
gpt-mini             6,967,296  6 x 256, 8 heads, vocab 8192, seq 256
gpt-small          124,439,808  GPT-2 small: 12 x 768, 12 heads, seq 1024
gpt-medium         354,823,168  GPT-2 medium: 24 x 1024, 16 heads, seq 1024
gpt-1b           1,013,573,632  18 x 2048, 16 heads, 2048 positions, seq 1024
==============  ==============  =========================================================

Determinism: batches from ``(seed, step)`` (:mod:`dsbench.models.data`), weights from the seed.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from types import ModuleType

import torch
from torch import nn

from dsbench.errors import UsageError, choices_message
from dsbench.kernels import registry
from dsbench.models import bert, gpt, mlp
from dsbench.models.bert import BertConfig
from dsbench.models.data import batch_index, mix_seed
from dsbench.models.gpt import GPTConfig, KVCache, decode_step, generate_greedy, prefill
from dsbench.models.mlp import MLPConfig

__all__ = [
    "MODELS",
    "BertConfig",
    "GPTConfig",
    "KVCache",
    "MLPConfig",
    "ModelPreset",
    "batch_index",
    "decode_step",
    "generate_greedy",
    "get_model",
    "mix_seed",
    "prefill",
]

_FAMILIES: dict[str, tuple[ModuleType, type, type]] = {
    "mlp": (mlp, mlp.MLP, MLPConfig),
    "bert": (bert, bert.Bert, BertConfig),
    "gpt": (gpt, gpt.GPT, GPTConfig),
}


@dataclass(frozen=True, kw_only=True)
class ModelPreset:
    """A named model configuration and how to build it, feed it and score it."""

    name: str
    """Preset name, the key in :data:`MODELS` (``--model NAME``)."""
    family: str
    """``mlp``, ``bert`` or ``gpt``."""
    config: MLPConfig | BertConfig | GPTConfig
    """The family's config; ``dataclasses.replace`` it (e.g. ``seq_len``) to resize a preset."""
    description: str
    """One line for listings."""

    def __post_init__(self):
        if self.family not in _FAMILIES:
            raise UsageError(choices_message("model family", self.family, _FAMILIES))
        if not isinstance(self.config, _FAMILIES[self.family][2]):
            raise UsageError(
                f"model {self.name}: family {self.family} needs a "
                f"{_FAMILIES[self.family][2].__name__}, got {type(self.config).__name__}"
            )

    @property
    def _module(self) -> ModuleType:
        return _FAMILIES[self.family][0]

    def build(
        self,
        gemm_impl: str | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
        *,
        seed: int = 0,
    ) -> nn.Module:
        """The model on ``device`` in ``dtype``, every Linear using the registry's ``gemm``
        implementation ``gemm_impl`` (None: ``DSBENCH_GEMM_IMPL`` or the registry default,
        resolved at each call). Built on the meta device, materialised on ``device``, then
        initialised in fp32 from a generator seeded with ``seed`` and cast to ``dtype``; on
        ``device="meta"`` nothing is allocated or initialised. An unknown ``gemm_impl`` is a
        UsageError listing the valid ones."""
        registry.get("gemm", gemm_impl)  # fail now, not at the first forward
        with torch.device("meta"):
            model = _FAMILIES[self.family][1](self.config, gemm_impl=gemm_impl)
        if torch.device(device).type != "meta":
            model = model.to_empty(device=device)
            _retie(model)
            model.init_weights(seed)
        model = model.to(dtype=dtype)
        _retie(model)
        return model

    def batch(
        self,
        micro_batch: int,
        *,
        seed: int,
        step: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype | None = None,
    ) -> tuple[torch.Tensor, ...]:
        """Synthetic micro-batch number ``step`` of stream ``seed``: the same on every rank,
        process and device for the same ``(seed, step)``; a new one for every step. For data
        parallelism pass ``step=batch_index(step, rank=r, world_size=W, micro_step=m,
        grad_accum=A)`` so ranks and accumulation steps draw distinct micro-batches (a
        single-process reference draws the same indices). ``dtype`` casts floating inputs (the
        MLP's); token ids stay int64. Drawn on the CPU, then moved to ``device``."""
        if micro_batch < 1:
            raise UsageError(f"micro batch must be >= 1, got {micro_batch}")
        return self._module.make_batch(
            self.config, micro_batch, seed=seed, step=step, device=device, dtype=dtype
        )

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Scalar training loss, in fp32: the seed's output sum (mlp), masked-LM cross-entropy
        (bert), next-token cross-entropy (gpt)."""
        return self._module.loss(model, batch)

    @property
    def tokens_per_sample(self) -> int:
        """1 for the MLP, ``seq_len`` for BERT and GPT."""
        return self.config.seq_len

    def num_params(self) -> int:
        """Exact parameter count, tied weights once (built on the meta device, no memory)."""
        return _num_params(self.family, self.config)

    def flops_per_sample(self, training: bool = True) -> int:
        """Model FLOPs for one sample: ``6·N·T`` for a training step (forward ``2·N·T``, backward
        ``4·N·T``), ``2·N·T`` for a forward pass, with N = :meth:`num_params` and T =
        :attr:`tokens_per_sample` (the Kaplan et al. 2020 / PaLM MFU convention). Attention's
        score and value products (:meth:`attention_flops_per_sample`) are *not* included, and
        N includes the position/type embedding tables, which do no FLOPs (a <0.5% overcount for
        bert-base and larger and for gpt-small and larger). The tied word embedding is counted
        once, for the LM/MLM head GEMM it feeds: GPT's runs on every position, BERT's training
        head on the masked positions only (see ``bert.training_flops_per_sample``; a BERT
        forward pass without labels is ``2·N·T``)."""
        if self.family == "bert" and training:
            from dsbench.models.bert import training_flops_per_sample

            return training_flops_per_sample(self.config, self.num_params())
        return (6 if training else 2) * self.num_params() * self.tokens_per_sample

    def attention_flops_per_sample(self, training: bool = True) -> int:
        """The attention FLOPs :meth:`flops_per_sample` leaves out: per layer QKᵀ and AV are
        ``2·T²·h`` each, so ``4·L·T²·h`` forward, ``12·L·T²·h`` for training (the full T x T
        square, also for causal attention; PaLM's ``6N + 12·L·h·T`` per token). 0 for the
        MLP."""
        if self.family == "mlp":
            return 0
        c = self.config
        return (12 if training else 4) * c.layers * c.seq_len**2 * c.hidden

    def info(self) -> dict:
        """Name, family, parameters, tokens per sample and config, for result rows."""
        return {
            "model": self.name,
            "family": self.family,
            "params": self.num_params(),
            "tokens_per_sample": self.tokens_per_sample,
            "config": asdict(self.config),
        }


def _retie(model: nn.Module) -> None:
    tie = getattr(model, "tie_weights", None)
    if tie is not None:
        tie()


@functools.cache
def _num_params(family: str, config) -> int:
    with torch.device("meta"):
        model = _FAMILIES[family][1](config)
    return sum(p.numel() for p in model.parameters())


def _presets(*presets: ModelPreset) -> dict[str, ModelPreset]:
    return {p.name: p for p in presets}


MODELS: dict[str, ModelPreset] = _presets(
    ModelPreset(
        name="mlp",
        family="mlp",
        config=MLPConfig(),
        description="the seed article's MLP: 1024 -> 4096 -> 16, ReLU, loss = sum of outputs",
    ),
    ModelPreset(
        name="bert-tiny",
        family="bert",
        config=BertConfig(layers=2, hidden=128, heads=2, intermediate=512, seq_len=32),
        description="BERT MLM, 2 layers x 128, seq 32 (CPU tests)",
    ),
    ModelPreset(
        name="bert-small",
        family="bert",
        config=BertConfig(layers=4, hidden=256, heads=4, intermediate=1024, seq_len=64),
        description="BERT MLM, 4 layers x 256, seq 64 (CPU benchmarks)",
    ),
    ModelPreset(
        name="bert-base",
        family="bert",
        config=BertConfig(layers=12, hidden=768, heads=12, intermediate=3072, seq_len=128),
        description="BERT-base MLM, 12 layers x 768, seq 128 (~110M)",
    ),
    ModelPreset(
        name="bert-large",
        family="bert",
        config=BertConfig(layers=24, hidden=1024, heads=16, intermediate=4096, seq_len=128),
        description="BERT-large MLM, 24 layers x 1024, seq 128 (~335M)",
    ),
    ModelPreset(
        name="gpt-tiny",
        family="gpt",
        config=GPTConfig(
            layers=4, hidden=128, heads=4, vocab_size=4096, max_positions=256, seq_len=128
        ),
        description="GPT decoder, 4 layers x 128, vocab 4096, seq 128 (~1.4M, CPU)",
    ),
    ModelPreset(
        name="gpt-mini",
        family="gpt",
        config=GPTConfig(
            layers=6, hidden=256, heads=8, vocab_size=8192, max_positions=512, seq_len=256
        ),
        description="GPT decoder, 6 layers x 256, vocab 8192, seq 256 (~7M, CPU)",
    ),
    ModelPreset(
        name="gpt-small",
        family="gpt",
        config=GPTConfig(layers=12, hidden=768, heads=12, max_positions=1024, seq_len=1024),
        description="GPT-2 small shapes, 12 layers x 768, seq 1024 (124M)",
    ),
    ModelPreset(
        name="gpt-medium",
        family="gpt",
        config=GPTConfig(layers=24, hidden=1024, heads=16, max_positions=1024, seq_len=1024),
        description="GPT-2 medium shapes, 24 layers x 1024, seq 1024 (355M)",
    ),
    ModelPreset(
        name="gpt-1b",
        family="gpt",
        config=GPTConfig(layers=18, hidden=2048, heads=16, max_positions=2048, seq_len=1024),
        description="GPT decoder, 18 layers x 2048, 16 heads, seq 1024 (1.01B)",
    ),
)
"""Every preset by name."""


def get_model(name: str) -> ModelPreset:
    """The preset ``name``; an unknown name is a UsageError listing the valid ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise UsageError(choices_message("model", name, MODELS)) from None
