"""Deterministic randomness for the workloads: synthetic batches and seeded weight init.

Batches. Micro-batch ``step`` of stream ``seed`` is drawn from its own CPU generator seeded with
``mix_seed(seed, step)`` and then copied to the device, so the same ``(seed, step)`` gives the
same tensors on every rank, process, device type and run, and nothing depends on global RNG
state or on which batches were drawn before.

Data parallelism. Every rank uses the same ``seed`` and its own stream index, the global
micro-batch index of :func:`batch_index`::

    index = (step * grad_accum + micro_step) * world_size + rank

so rank r's micro-batch at accumulation step m of optimizer step s is ``batch(mb, seed=seed,
step=index)``. The ranks never share a micro-batch, and a single-process reference reproduces a
W-rank run's data exactly by drawing the same indices and concatenating them.

Init. Weights are initialised in fp32 on their final device from a ``torch.Generator`` seeded
with the build seed: the same seed gives the same weights on every rank of one device type (CPU
and CUDA generators produce different streams).
"""

from __future__ import annotations

import math

import torch
from torch import nn

_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def mix_seed(seed: int, step: int) -> int:
    """A 63-bit generator seed from ``(seed, step)`` (SplitMix64 twice: no collisions of the kind
    ``seed * K + step`` has, and neighbouring steps give unrelated streams)."""
    return _splitmix64(_splitmix64(seed & _MASK64) ^ (step & _MASK64)) >> 1


def generator(seed: int, step: int = 0) -> torch.Generator:
    """CPU generator for micro-batch ``step`` of stream ``seed``."""
    return torch.Generator(device="cpu").manual_seed(mix_seed(seed, step))


def batch_index(
    step: int, *, rank: int = 0, world_size: int = 1, micro_step: int = 0, grad_accum: int = 1
) -> int:
    """Stream index of rank ``rank``'s micro-batch ``micro_step`` (of ``grad_accum``) in optimizer
    step ``step``: ``(step * grad_accum + micro_step) * world_size + rank``."""
    if not (0 <= rank < world_size and 0 <= micro_step < grad_accum):
        raise ValueError(
            f"need 0 <= rank < world_size and 0 <= micro_step < grad_accum, got rank={rank}, "
            f"world_size={world_size}, micro_step={micro_step}, grad_accum={grad_accum}"
        )
    return (step * grad_accum + micro_step) * world_size + rank


def embedding(num: int, dim: int) -> nn.Embedding:
    """``nn.Embedding`` whose weight is left uninitialised (``init_weights_`` fills it): its own
    N(0, 1) init would be overwritten anyway, and on the meta device ``normal_`` imports
    torch._dynamo (docs/decisions.md, "Embeddings left uninitialised")."""
    return nn.Embedding(num, dim, _weight=torch.empty(num, dim))


def init_weights_(
    model: nn.Module,
    seed: int,
    *,
    std: float = 0.02,
    residual_std: float | None = None,
    residual_suffixes: tuple[str, ...] = (),
) -> None:
    """BERT/GPT-2 init, in place, from a generator on the parameters' device: biases 0, LayerNorm
    weights 1, every other weight (Linear, Embedding) N(0, std²); parameters whose name ends with
    one of ``residual_suffixes`` get N(0, residual_std²) (GPT-2's 1/sqrt(2·layers) scaling of
    the projections that write into the residual stream). A tied weight is initialised once,
    under its first name. Meta tensors are left alone."""
    params = dict(model.named_parameters())
    if not params or next(iter(params.values())).is_meta:
        return
    gen = torch.Generator(device=next(iter(params.values())).device).manual_seed(seed)
    norms = {
        f"{prefix}.{name}" if prefix else name
        for prefix, mod in model.named_modules()
        if isinstance(mod, nn.LayerNorm)
        for name, _ in mod.named_parameters(recurse=False)
    }
    with torch.no_grad():
        for name, p in params.items():
            if name in norms:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                p.zero_()
            elif residual_std is not None and name.endswith(residual_suffixes):
                p.normal_(0.0, residual_std, generator=gen)
            else:
                p.normal_(0.0, std, generator=gen)


def init_linear_default_(model: nn.Module, seed: int) -> None:
    """``nn.Linear``'s own default init (kaiming_uniform with a=√5, i.e. weight and bias
    U(-1/√fan_in, 1/√fan_in)), drawn from a seeded generator on the parameters' device."""
    for mod in model.modules():
        if not isinstance(mod, nn.Linear) or mod.weight.is_meta:
            continue
        gen = torch.Generator(device=mod.weight.device).manual_seed(seed)
        seed += 1
        bound = 1.0 / math.sqrt(mod.in_features)
        with torch.no_grad():
            mod.weight.uniform_(-bound, bound, generator=gen)
            if mod.bias is not None:
                mod.bias.uniform_(-bound, bound, generator=gen)
