"""Model presets: registry, parameter counts, training smoke, deterministic data, KV-cache decoding.

CPU tests use the small presets with sequences cut to at most 32 tokens (``_small``) so the file
stays fast; the ``gpu`` tests repeat the essentials on CUDA/ROCm in fp32, bf16 and fp16.
"""

import dataclasses

import pytest
import torch
from torch import nn

from dsbench.errors import UsageError
from dsbench.kernels.autograd import Linear
from dsbench.models import MODELS, BertConfig, GPTConfig, batch_index, get_model
from dsbench.models.gpt import (
    KVCache,
    decode_step,
    generate_greedy,
    generate_greedy_recompute,
    prefill,
)

SMALL = ["mlp", "bert-tiny", "bert-small", "gpt-tiny", "gpt-mini"]
LR = {"mlp": 1e-3, "bert": 0.1, "gpt": 0.1}
"""SGD learning rates for the loss-decreases check (the MLP's sum loss has a large gradient)."""


@pytest.fixture(autouse=True, scope="module")
def _one_cpu_thread():
    """The CPU models here are tiny: one intra-op thread is as fast, and it keeps the file fast
    (~6 s instead of 20+ s) when other processes load the cores and OpenMP threads would wait
    on each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm device")


def _small(name: str, seq_len: int = 32):
    """The preset with its training sequence cut to ``seq_len`` (the MLP has no sequence)."""
    preset = get_model(name)
    if preset.family == "mlp" or preset.config.seq_len <= seq_len:
        return preset
    return dataclasses.replace(preset, config=dataclasses.replace(preset.config, seq_len=seq_len))


def _same_params(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


# --- registry -------------------------------------------------------------------------------------


def test_unknown_model_lists_valid_names():
    """An unknown name is a UsageError with a suggestion and every valid name."""
    with pytest.raises(UsageError) as exc:
        get_model("bert-larg")
    msg = str(exc.value)
    assert "unknown model 'bert-larg'" in msg and "did you mean 'bert-large'" in msg
    for name in MODELS:
        assert name in msg


def test_every_preset_is_consistent():
    """Names match keys; families and configs agree; presets are frozen."""
    for name, preset in MODELS.items():
        assert preset.name == name and preset.description
        assert preset.family == name.split("-")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        MODELS["mlp"].name = "x"


@pytest.mark.parametrize(
    "bad",
    [
        lambda: BertConfig(hidden=100, heads=3),
        lambda: GPTConfig(seq_len=2048, max_positions=1024),
        lambda: GPTConfig(layers=0),
    ],
)
def test_bad_config_is_usage_error(bad):
    """Config shapes that cannot work fail at construction with a one-line UsageError."""
    with pytest.raises(UsageError, match="config"):
        bad()


def test_unknown_gemm_impl_fails_at_build():
    with pytest.raises(UsageError, match="gemm implementation"):
        get_model("gpt-tiny").build(gemm_impl="nope")


# --- parameter counts (meta device) ---------------------------------------------------------------


def test_bert_large_parameter_count():
    """Ours: 335,174,458 = HF BertModel's 335,141,888 (the published ~335M, which includes the
    pooler) - pooler 1,049,600 + MLM transform 1,051,648 + decoder bias 30,522. Within 0.1% of
    335M."""
    n = get_model("bert-large").num_params()
    assert n == 335_174_458
    assert n - 335_141_888 == -1_049_600 + 1_049_600 + 2_048 + 30_522
    assert abs(n - 335e6) / 335e6 < 1e-3


@pytest.mark.parametrize(
    "name, exact",
    [
        ("mlp", 1024 * 4096 + 4096 + 4096 * 16 + 16),
        ("bert-base", 109_514_298),  # HF BertModel 109,482,240 (+ MLM head - pooler)
        ("gpt-small", 124_439_808),  # GPT-2 small as published (HF GPT2Model)
        ("gpt-medium", 354_823_168),  # GPT-2 medium
        ("gpt-1b", 1_013_573_632),
    ],
)
def test_parameter_counts(name, exact):
    assert get_model(name).num_params() == exact


def test_docstring_table_matches_counts():
    """The preset table in dsbench.models' docstring states the exact counts."""
    import dsbench.models

    rows = [line.split() for line in dsbench.models.__doc__.splitlines()]
    stated = {r[0]: int(r[1].replace(",", "")) for r in rows if r and r[0] in MODELS}
    assert stated.keys() == MODELS.keys()
    assert stated == {name: p.num_params() for name, p in MODELS.items()}


def test_gpt_sizes():
    """gpt-tiny is 1-2M parameters; gpt-1b within 5% of 1B."""
    assert 1e6 <= get_model("gpt-tiny").num_params() <= 2e6
    assert abs(get_model("gpt-1b").num_params() - 1e9) / 1e9 < 0.05


def test_meta_build_allocates_nothing():
    model = get_model("gpt-1b").build(device="meta", dtype=torch.bfloat16)
    assert all(p.is_meta and p.dtype == torch.bfloat16 for p in model.parameters())
    assert model.lm_head.weight is model.wte.weight


def test_flops_formula():
    """6·N·T per training sample, 2·N·T forward; BERT's training head on masked positions only
    (by hand for bert-large); attention FLOPs reported apart."""
    for preset in MODELS.values():
        n, t = preset.num_params(), preset.tokens_per_sample
        assert preset.flops_per_sample(training=False) == 2 * n * t
        if preset.family != "bert":
            assert preset.flops_per_sample(training=True) == 6 * n * t
    h, v = 1024, 30522
    n_head = h * h + h + 2 * h + v * h + v  # transform, its LayerNorm, tied decoder, bias
    masked = round(0.15 * 128)  # 19 of 128 positions
    want = 6 * ((335_174_458 - n_head) * 128 + n_head * masked)
    assert get_model("bert-large").flops_per_sample(training=True) == want
    assert get_model("mlp").tokens_per_sample == 1
    assert get_model("bert-large").tokens_per_sample == 128
    assert get_model("mlp").attention_flops_per_sample() == 0
    c = get_model("gpt-small").config
    assert get_model("gpt-small").attention_flops_per_sample() == 12 * 12 * 1024**2 * 768
    assert get_model("gpt-small").attention_flops_per_sample(False) == 4 * c.layers * 1024**2 * 768


# --- the seed's MLP -------------------------------------------------------------------------------


def test_mlp_matches_the_seed():
    """nn.Sequential(Linear(1024, 4096), ReLU(), Linear(4096, 16)); data randn(mb, 1024); loss =
    output.sum()."""
    preset = get_model("mlp")
    model = preset.build()
    net = model.net
    assert [type(m) for m in net] == [Linear, nn.ReLU, Linear]
    assert (net[0].in_features, net[0].out_features, net[0].bias is not None) == (1024, 4096, True)
    assert (net[2].in_features, net[2].out_features, net[2].bias is not None) == (4096, 16, True)
    assert list(model.state_dict()) == ["net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"]
    (x,) = preset.batch(16, seed=0, step=0)
    assert x.shape == (16, 1024) and x.dtype == torch.float32
    assert torch.equal(preset.loss(model, (x,)), model(x).sum())
    bound = 1024**-0.5  # nn.Linear's default init range
    assert net[0].weight.abs().max() <= bound and net[0].weight.abs().max() > 0.9 * bound


# --- every Linear is the registry's ---------------------------------------------------------------


@pytest.mark.parametrize("name", SMALL)
def test_all_linears_use_the_registry(name):
    """Every nn.Linear is dsbench's registry-backed Linear, carrying the requested impl."""
    model = get_model(name).build(gemm_impl="torch")
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert linears and all(type(m) is Linear and m.impl == "torch" for m in linears)


@pytest.mark.parametrize("name", ["mlp", "bert-tiny", "gpt-tiny"])
def test_gemm_impl_torch_equals_default(name, monkeypatch):
    monkeypatch.delenv("DSBENCH_GEMM_IMPL", raising=False)
    preset = _small(name)
    batch = preset.batch(2, seed=1, step=0)
    a = preset.loss(preset.build(gemm_impl="torch", seed=3), batch)
    b = preset.loss(preset.build(seed=3), batch)
    assert torch.equal(a, b)


# --- training smoke -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SMALL)
def test_forward_backward_and_loss_decreases(name):
    """Finite loss, a gradient for every parameter, and lower loss after 4 SGD steps on one
    batch."""
    preset = _small(name)
    model = preset.build(seed=0)
    batch = preset.batch(2, seed=0, step=0)
    opt = torch.optim.SGD(model.parameters(), lr=LR[preset.family])
    losses = []
    for _ in range(5):
        loss = preset.loss(model, batch)
        assert loss.dim() == 0 and loss.dtype == torch.float32 and torch.isfinite(loss)
        opt.zero_grad()
        loss.backward()
        if not losses:
            assert all(p.grad is not None for p in model.parameters())
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["mlp", "bert-tiny", "gpt-tiny"])
def test_half_precision_forward_backward(name, dtype):
    """Half-precision models run and give a finite fp32 loss (fp32 data into the MLP is cast)."""
    preset = _small(name, seq_len=16)
    model = preset.build(dtype=dtype)
    assert all(p.dtype == dtype for p in model.parameters())
    loss = preset.loss(model, preset.batch(2, seed=0, step=0))
    loss.backward()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)


# --- determinism ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mlp", "bert-tiny", "gpt-tiny"])
def test_batches_are_deterministic(name):
    """Same (seed, step): identical; another step or seed: different; global RNG irrelevant."""
    preset = get_model(name)

    def draw(seed, step):
        return preset.batch(3, seed=seed, step=step)

    a = draw(0, 5)
    torch.manual_seed(123)
    torch.rand(7)
    b = draw(0, 5)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], draw(0, 6)[0])
    assert not torch.equal(a[0], draw(1, 5)[0])


def test_bert_head_on_masked_positions_equals_full_logits_loss():
    """The training loss (head on masked positions only) equals cross-entropy over the full
    logits with ignored positions, as Hugging Face's BertForMaskedLM computes it."""
    import torch.nn.functional as F

    from dsbench.models.bert import IGNORE_INDEX

    preset = _small("bert-tiny")
    model = preset.build(seed=2)
    input_ids, token_types, labels = preset.batch(3, seed=4, step=1)
    full = model(input_ids, token_types)
    assert full.shape == (3, preset.config.seq_len, preset.config.vocab_size)
    want = F.cross_entropy(full.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
    got = preset.loss(model, (input_ids, token_types, labels))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_bert_batch_masking():
    """Exactly round(0.15 · seq) masked positions per row, scored there only; types 0 then 1."""
    preset = get_model("bert-small")
    ids, types, labels = preset.batch(4, seed=0, step=0)
    masked = labels != -100
    assert masked.sum(dim=1).tolist() == [round(0.15 * 64)] * 4
    assert (ids[masked] == 103).all()
    assert types[:, :32].eq(0).all() and types[:, 32:].eq(1).all()


def test_gpt_batch_is_shifted():
    inputs, targets = get_model("gpt-tiny").batch(2, seed=0, step=0)
    assert inputs.shape == targets.shape == (2, 128)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])


def test_batch_index_gives_ranks_distinct_batches():
    """Data parallel: (step·accum + micro)·world + rank enumerates 0, 1, 2, ... without gaps."""
    idx = [
        batch_index(s, rank=r, world_size=2, micro_step=m, grad_accum=3)
        for s in range(2)
        for m in range(3)
        for r in range(2)
    ]
    assert idx == list(range(12))
    with pytest.raises(ValueError):
        batch_index(0, rank=2, world_size=2)


@pytest.mark.parametrize("name", ["mlp", "bert-tiny", "gpt-tiny"])
def test_init_is_deterministic(name):
    preset = get_model(name)
    assert _same_params(preset.build(seed=7), preset.build(seed=7))
    assert not _same_params(preset.build(seed=7), preset.build(seed=8))


def test_weights_are_tied_after_build():
    gpt_model = get_model("gpt-tiny").build(dtype=torch.bfloat16)
    assert gpt_model.lm_head.weight is gpt_model.wte.weight
    bert_model = get_model("bert-tiny").build()
    assert bert_model.decoder.weight is bert_model.word_embeddings.weight


# --- KV-cache decoding ----------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 8])
def test_kv_cache_greedy_equals_recompute(batch):
    """Greedy decoding with the cache is token-for-token full-recompute greedy decoding."""
    model = get_model("gpt-tiny").build(seed=0)
    prompt = get_model("gpt-tiny").batch(batch, seed=0, step=0)[0][:, :7]
    cached = generate_greedy(model, prompt, 24)
    assert cached.shape == (batch, 7 + 24)
    assert torch.equal(cached[:, :7], prompt)
    assert torch.equal(cached, generate_greedy_recompute(model, prompt, 24))


def test_prefill_and_decode_step_logits_match_full_forward():
    """Prefill and each decode step give the full forward's logits at that position; a cache
    can be reused after reset; a chunk after a cached prefix is masked correctly."""
    model = get_model("gpt-tiny").build(seed=0)
    ids = get_model("gpt-tiny").batch(8, seed=0, step=1)[0][:, :12]
    with torch.no_grad():
        full = model(ids)
    cache = KVCache.allocate(model, 8, 12)
    for _ in range(2):
        cache.reset()
        torch.testing.assert_close(prefill(model, ids[:, :5], cache), full[:, 4])
        for t in range(5, 9):
            torch.testing.assert_close(decode_step(model, ids[:, t], cache), full[:, t])
        with torch.no_grad():
            chunk = model(ids[:, 9:12], cache)
        torch.testing.assert_close(chunk, full[:, 9:12])
        assert cache.length == 12
    with pytest.raises(UsageError, match="KV cache full"):
        decode_step(model, ids[:, 0], cache)


# --- GPU ------------------------------------------------------------------------------------------

GPU_TOL = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}
"""Loss tolerance of a GPU run against the same weights in fp32 on the CPU."""


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", list(GPU_TOL))
@pytest.mark.parametrize("name", ["mlp", "bert-tiny", "gpt-tiny"])
def test_gpu_matches_cpu(name, dtype):
    """Same weights (built on the CPU, moved) and batch: the GPU loss matches the CPU fp32 loss
    within a per-dtype tolerance, and backward runs."""
    preset = _small(name)
    batch = preset.batch(4, seed=0, step=0)
    cpu_model = preset.build(seed=0)
    ref = preset.loss(cpu_model, batch)
    model = preset.build(seed=0).to("cuda", dtype)
    loss = preset.loss(model, tuple(t.cuda() for t in batch))
    loss.backward()
    rel = abs(loss.item() - ref.item()) / max(abs(ref.item()), 1.0)
    assert torch.isfinite(loss) and rel < GPU_TOL[dtype], (loss.item(), ref.item())
    built = preset.build(dtype=dtype, device="cuda", seed=0)
    assert all(p.is_cuda and p.dtype == dtype for p in built.parameters())


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch", [1, 8])
def test_gpu_kv_cache_greedy_equals_recompute(batch, dtype):
    preset = get_model("gpt-tiny")
    model = preset.build(dtype=dtype, device="cuda", seed=0)
    prompt = preset.batch(batch, seed=0, step=0, device="cuda")[0][:, :7]
    cached = generate_greedy(model, prompt, 16)
    same = (cached == generate_greedy_recompute(model, prompt, 16)).float().mean().item()
    # fp32 must agree exactly; bf16 rounding can flip a near-tie argmax, after which the
    # sequences diverge, so only a majority of tokens is required there.
    assert same == 1.0 if dtype == torch.float32 else same > 0.5
