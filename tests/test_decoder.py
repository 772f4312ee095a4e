"""posenc.decoder: a Llama forward pass by hand, checked against transformers' own.

A tiny random Llama (two layers, grouped keys and values) stands in for SmolLM2, so every
identity is checked in milliseconds; tests/test_smol.py checks the real model.
"""

from __future__ import annotations

import copy

import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc import decoder
from posenc.rope import permute_qk_rows

# a tiny Llama: two layers, two query heads to each key and value head, D = 8
CONFIG = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    rope_theta=100.0,
)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**CONFIG)).double().eval()


IDS = torch.tensor([3, 14, 15, 9, 26, 5, 35, 8])


@pytest.mark.parametrize("rope", [pe.apply_rope, pe.apply_rope_])
def test_forward_equals_transformers(model, rope):
    reference = model(IDS[None]).logits  # transformers computes cos, sin in float32
    assert torch.allclose(decoder.forward(model, IDS, rope=rope), reference, atol=1e-6)


def test_given_positions_equal_transformers_position_ids(model):
    positions = torch.tensor([7, 3, 0, 0, 12, 5, 5, 40])
    reference = model(IDS[None], position_ids=positions[None]).logits
    assert torch.allclose(decoder.forward(model, IDS, positions), reference, atol=1e-6)


BATCH = torch.stack([IDS, IDS.flip(0)])
BATCH_POSITIONS = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7], [7, 3, 0, 0, 12, 5, 5, 40]])


@pytest.mark.parametrize("split", [None, 3], ids=["whole", "cache filled in two chunks"])
def test_a_batch_with_its_own_positions_per_entry_equals_transformers(model, split):
    """ids ``[B, T]`` with positions ``[B, T]`` (each batch entry its own, as transformers'
    ``position_ids``), in one pass or through a cache filled in two chunks: transformers'
    logits for the whole batch."""
    reference = model(BATCH, position_ids=BATCH_POSITIONS).logits
    if split is None:
        ours = decoder.forward(model, BATCH, BATCH_POSITIONS)
    else:
        cache = decoder.KVCache()
        ours = torch.cat(
            [
                decoder.forward(model, BATCH[:, :split], BATCH_POSITIONS[:, :split], cache=cache),
                decoder.forward(model, BATCH[:, split:], BATCH_POSITIONS[:, split:], cache=cache),
            ],
            dim=1,
        )
        assert torch.equal(cache.positions, BATCH_POSITIONS)
    assert ours.shape == reference.shape
    assert torch.allclose(ours, reference, atol=1e-6)


@pytest.mark.parametrize("base", [1000.0, 7.0])
def test_given_frequencies_are_the_ones_used(model, base):
    """``inv_freq`` given to ``forward`` replaces the config's: the model's weights with
    ``rope_inv_freq(D, base)`` are transformers' model of the same weights whose config
    says ``rope_theta=base`` (and not the model with its own base of 100)."""
    config = transformers.LlamaConfig(**{**CONFIG, "rope_theta": base})
    assert decoder.config_rope_base(config) == base
    twin = transformers.LlamaForCausalLM(config).double().eval()
    twin.load_state_dict(model.state_dict())
    reference = twin(IDS[None]).logits
    ours = decoder.forward(model, IDS, inv_freq=pe.rope_inv_freq(8, base))
    assert torch.allclose(ours, reference, atol=1e-6)
    assert not torch.allclose(ours, model(IDS[None]).logits, atol=1e-4)


def test_observe_sees_q_and_k_before_rotation(model):
    """``observe`` gets each layer's queries and keys before rotation: transformers' own
    ``q_proj`` and ``k_proj`` outputs as heads ``[B, H, T, D]`` (caught by hooks while it runs
    the model), not those outputs rotated."""
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    projected = {}

    def catch(name):
        def hook(module, inputs, output):
            projected[name] = output.unflatten(-1, (-1, head_dim)).transpose(1, 2)

        return hook

    seen = []
    handles = [
        getattr(layer.self_attn, f"{name}_proj").register_forward_hook(catch((index, name)))
        for index, layer in enumerate(model.model.layers)
        for name in ("q", "k")
    ]
    try:
        model(IDS[None])
    finally:
        for handle in handles:
            handle.remove()
    decoder.forward(model, IDS, observe=lambda layer, q, k, w: seen.append((layer, q, k)))
    assert [layer for layer, _, _ in seen] == list(range(config.num_hidden_layers))
    inv_freq = decoder.config_inv_freq(config)
    for layer, q, k in seen:
        for name, got in (("q", q), ("k", k)):
            want = projected[layer, name]
            assert got.shape == want.shape
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
            rotated = pe.apply_rope(want, inv_freq=inv_freq, layout="half")
            assert not torch.allclose(got, rotated, atol=1e-2)


def test_interleaved_rows_with_the_interleaved_layout_are_the_same_model(model):
    import copy

    twin = copy.deepcopy(model)
    heads, kv_heads = model.config.num_attention_heads, model.config.num_key_value_heads
    for layer in twin.model.layers:
        att = layer.self_attn
        att.q_proj.weight.data = permute_qk_rows(att.q_proj.weight.data, heads, to="interleaved")
        att.k_proj.weight.data = permute_qk_rows(att.k_proj.weight.data, kv_heads, to="interleaved")
    half = decoder.forward(model, IDS)
    assert torch.allclose(decoder.forward(twin, IDS, layout="interleaved"), half, atol=1e-10)
    # the wrong layout for those rows is a different model
    assert not torch.allclose(decoder.forward(twin, IDS, layout="half"), half, atol=1e-3)


@settings(max_examples=20, deadline=None)
@given(shift=st.integers(0, 10**6))
def test_a_shift_of_every_position_changes_nothing_in_float64(model, shift):
    base = decoder.forward(model, IDS)
    positions = torch.arange(len(IDS)) + shift
    assert torch.allclose(decoder.forward(model, IDS, positions), base, atol=1e-8)


def test_all_zero_positions_are_no_rotation(model):
    identity = lambda x, positions, *, inv_freq, layout: x  # noqa: E731
    zero = torch.zeros(len(IDS), dtype=torch.long)
    assert torch.allclose(
        decoder.forward(model, IDS, zero), decoder.forward(model, IDS, rope=identity), atol=1e-12
    )


@pytest.mark.parametrize("split", [1, 3, 7])
def test_a_cache_filled_in_chunks_gives_the_full_pass(model, split):
    full = decoder.forward(model, IDS)
    cache = decoder.KVCache()
    first = decoder.forward(model, IDS[:split], cache=cache)
    second = decoder.forward(model, IDS[split:], cache=cache)
    assert cache.length == len(IDS)
    assert cache.positions[0].tolist() == list(range(len(IDS)))
    assert torch.allclose(torch.cat([first, second], dim=1), full, atol=1e-10)


def test_cached_keys_are_rotated_once_when_they_enter(model):
    calls = []

    def counting_rope(x, positions, *, inv_freq, layout):
        calls.append(positions.shape[-1])
        return pe.apply_rope(x, positions, inv_freq=inv_freq, layout=layout)

    cache = decoder.KVCache()
    decoder.forward(model, IDS[:5], cache=cache, rope=counting_rope)
    calls.clear()
    decoder.forward(model, IDS[5:6], cache=cache, rope=counting_rope)
    layers = model.config.num_hidden_layers
    assert calls == [1] * (2 * layers)  # one query and one key per layer, of the new token only


def test_generate_equals_transformers_greedy_generate(model):
    prompt = torch.tensor([3, 14, 15])
    reference = model.generate(
        prompt[None], max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    assert decoder.generate(model, prompt, 6) == reference[0, 3:].tolist()


def test_score_scale_multiplies_the_scores(model):
    seen = {}

    def keep(layer, q, k, weights):
        seen.setdefault(layer, []).append(weights)

    decoder.forward(model, IDS, observe=keep)
    decoder.forward(model, IDS, score_scale=1e-9, observe=keep)
    flat = seen[0][1][0, 0]  # scores scaled to ~0: causal mean
    expected = torch.tril(torch.ones(8, 8, dtype=flat.dtype))
    expected = expected / expected.sum(-1, keepdim=True)
    assert torch.allclose(flat, expected, atol=1e-6)
    assert not torch.allclose(seen[0][0][0, 0], expected, atol=1e-3)


def test_config_inv_freq_reads_the_base_and_refuses_scaled_configs():
    cfg = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=500.0)
    assert torch.allclose(decoder.config_inv_freq(cfg), pe.rope_inv_freq(16, 500.0))
    scaled = transformers.LlamaConfig(
        hidden_size=64,
        num_attention_heads=4,
        rope_scaling={"rope_type": "linear", "factor": 2.0},
    )
    with pytest.raises(ValueError, match="plain RoPE"):
        decoder.config_inv_freq(scaled)


def test_bad_arguments_are_refused(model):
    with pytest.raises(TypeError, match="model must be"):
        decoder.forward("a model", IDS)
    with pytest.raises(TypeError, match="ids must hold integers"):
        decoder.forward(model, IDS.double())
    with pytest.raises(ValueError, match="positions must be"):
        decoder.forward(model, IDS, torch.arange(3))
    with pytest.raises(ValueError, match="device"):
        decoder.forward(model, IDS.to("meta"))
    with pytest.raises(ValueError, match=r"ids must be \[T\] with"):
        decoder.generate(model, IDS[None], 2)
    half = copy.deepcopy(model).to(torch.bfloat16)  # run as it is, or not at all
    with pytest.raises(TypeError, match=r"weights must be float32 or float64, got torch\.bfloat16"):
        decoder.forward(half, IDS)
    with pytest.raises(TypeError, match="weights must be float32 or float64"):
        decoder.generate(half, IDS, 2)


def test_every_tensor_it_makes_follows_the_inputs_device(model):
    # the meta device stands in for a GPU: a tensor made on the CPU would meet it and fail
    with torch.device("meta"):
        meta = transformers.LlamaForCausalLM(model.config).eval()
    ids = IDS.to("meta")
    assert decoder.forward(meta, ids).device.type == "meta"
    inv_freq = pe.rope_inv_freq(8, 100.0).to("meta")
    assert decoder.forward(meta, ids, inv_freq=inv_freq).device.type == "meta"
    cache = decoder.KVCache()
    decoder.forward(meta, ids[:3], cache=cache)
    assert decoder.forward(meta, ids[3:], cache=cache).device.type == "meta"
    with pytest.raises(ValueError, match="device"):
        decoder.forward(meta, IDS)  # ids on the CPU, weights elsewhere


def _materialised(model, ids, positions=None, **kwargs):
    """forward through the path that forms every [B, H, T, S] weight (observe asks for them)."""
    return decoder.forward(model, ids, positions, observe=lambda *args: None, **kwargs)


@pytest.mark.parametrize("score_scale", [1.0, 1.3])
@pytest.mark.parametrize("positions", [None, torch.tensor([7, 3, 0, 0, 12, 5, 5, 40])])
def test_the_memory_efficient_path_equals_the_weights_written_out(model, score_scale, positions):
    """Without ``observe`` attention runs through ``scaled_dot_product_attention`` (causal,
    never forming the weights); with it, the weights are formed and softmaxed as written:
    the same logits, for given positions and a score factor (YaRN's) alike."""
    fast = decoder.forward(model, BATCH, positions, score_scale=score_scale)
    slow = _materialised(model, BATCH, positions, score_scale=score_scale)
    assert torch.allclose(fast, slow, atol=1e-10)
    if score_scale != 1.0:  # the factor reaches the memory-efficient path too
        assert not torch.allclose(fast, decoder.forward(model, BATCH, positions), atol=1e-4)


@pytest.mark.parametrize("split", [1, 5])
def test_a_cache_on_the_memory_efficient_path_masks_as_written_out(model, split):
    """With a cache the new queries sit after the cached keys: the mask SDPA gets lets query
    ``i`` see keys ``0 .. start + i``, as the written-out mask does."""
    fast_cache, slow_cache = decoder.KVCache(), decoder.KVCache()
    decoder.forward(model, IDS[:split], cache=fast_cache)
    _materialised(model, IDS[:split], cache=slow_cache)
    fast = decoder.forward(model, IDS[split:], cache=fast_cache)
    slow = _materialised(model, IDS[split:], cache=slow_cache)
    assert torch.allclose(fast, slow, atol=1e-10)


@pytest.mark.parametrize("chunk", [1, 3, 100])
def test_next_token_nll_is_the_cross_entropy_of_the_logits(model, chunk):
    """``next_token_nll`` holds ``chunk`` positions' logits at a time: whatever the chunk, the
    loss of token t + 1 given tokens 0..t from the full logits, with scaled frequencies and
    a score factor passed through."""
    inv_freq = pe.rope_inv_freq(8, 100.0) / 2
    logits = decoder.forward(model, IDS, inv_freq=inv_freq, score_scale=1.2)[0]
    want = torch.nn.functional.cross_entropy(logits[:-1], IDS[1:], reduction="none")
    got = decoder.next_token_nll(model, IDS, inv_freq=inv_freq, score_scale=1.2, chunk=chunk)
    assert got.dtype == torch.float32 and got.shape == (len(IDS) - 1,)
    assert torch.allclose(got.double(), want, atol=1e-5)


def test_next_token_nll_refuses_what_it_cannot_score(model):
    with pytest.raises(ValueError, match=r"T >= 2"):
        decoder.next_token_nll(model, IDS[:1])
    with pytest.raises(ValueError, match=r"\[T\] with"):
        decoder.next_token_nll(model, BATCH)
    with pytest.raises(ValueError, match="chunk"):
        decoder.next_token_nll(model, IDS, chunk=0)
