"""RoPE against an independent reference: Hugging Face transformers' Llama code."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import rope
from posenc import scaling as sc

transformers = pytest.importorskip("transformers")

EPS = torch.finfo(torch.float32).eps


def relative_error(ours, hf):
    """The largest ``|ours - hf| / ours`` over the pairs: frequencies span 1 down to 1e-7,
    so an absolute tolerance would accept almost anything for the slowest pairs."""
    return float(((ours - hf.double()).abs() / ours).max())


def _llama():
    """transformers' Llama modelling code, imported when a test first needs it (seconds of
    imports that every worker would otherwise pay while collecting)."""
    from transformers.models.llama import modeling_llama

    return modeling_llama


def _rope_init(rope_type):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return ROPE_INIT_FUNCTIONS[rope_type]


LLAMA_3_2_1B = {
    "rope_type": "llama3",
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def llama_config(head_dim=64, theta=500000.0, scaling=None, max_positions=131072):
    heads = 4
    return transformers.LlamaConfig(
        hidden_size=head_dim * heads,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        rope_theta=theta,
        rope_scaling=scaling,
        max_position_embeddings=max_positions,
    )


def hf_rope(q, k, positions, config):
    """transformers' own path: LlamaRotaryEmbedding, then apply_rotary_pos_emb ([B, H, T, D])."""
    emb = _llama().LlamaRotaryEmbedding(config=config)
    cos, sin = emb(q, positions[None])
    return _llama().apply_rotary_pos_emb(q, k, cos, sin), emb.inv_freq


@pytest.mark.parametrize(
    ("head_dim", "theta", "scaling", "max_position"),
    [
        (64, 500000.0, LLAMA_3_2_1B, 131071),
        (64, 500000.0, None, 4096),
        (128, 10000.0, None, 2048),
        (
            32,
            12345.0,
            {**LLAMA_3_2_1B, "factor": 8.0, "original_max_position_embeddings": 2048},
            20000,
        ),
    ],
)
def test_half_layout_matches_transformers(head_dim, theta, scaling, max_position):
    gen = torch.Generator().manual_seed(head_dim)
    q, k = torch.randn(2, 1, 4, 16, head_dim, generator=gen)  # [B, H, T, D] each
    positions = torch.randint(0, max_position + 1, (16,), generator=gen)
    (q_hf, k_hf), hf_inv_freq = hf_rope(q, k, positions, llama_config(head_dim, theta, scaling))
    ours_inv_freq = rope.rope_inv_freq(head_dim, theta)
    if scaling is not None:
        ours_inv_freq = sc.llama3_inv_freq(
            ours_inv_freq,
            scaling["factor"],
            scaling["low_freq_factor"],
            scaling["high_freq_factor"],
            scaling["original_max_position_embeddings"],
        )
    # transformers computes in float32: a few units in its last place, relative to each pair
    assert relative_error(ours_inv_freq, hf_inv_freq) < 4 * EPS
    # same float32 frequencies in, same rotation out (to float32 round-off)
    q_ours = rope.apply_rope(q, positions, inv_freq=hf_inv_freq, layout="half")
    k_ours = rope.apply_rope(k, positions, inv_freq=hf_inv_freq, layout="half")
    assert (q_ours - q_hf).abs().max() < 1e-5 and (k_ours - k_hf).abs().max() < 1e-5


@settings(max_examples=20, deadline=None)
@given(
    half=st.integers(2, 64),
    log_theta=st.floats(2, 7),
    factor=st.floats(1.5, 64),
    low=st.floats(0.5, 2),
    gap=st.floats(0.5, 8),
    original=st.integers(256, 16384),
)
def test_llama3_frequencies_match_transformers(half, log_theta, factor, low, gap, original):
    scaling = {
        "rope_type": "llama3",
        "factor": factor,
        "low_freq_factor": low,
        "high_freq_factor": low + gap,
        "original_max_position_embeddings": original,
    }
    config = llama_config(2 * half, 10**log_theta, scaling)
    hf, _ = _rope_init("llama3")(config, None)
    ours = sc.llama3_inv_freq(
        rope.rope_inv_freq(2 * half, 10**log_theta), factor, low, low + gap, original
    )
    # transformers' float32 round-off, relative to each pair: the exponent 2i/D rounded to
    # float32 moves theta**(2i/D) by up to ln(theta)/2 units in the last place, the divisions
    # by a few more; in the band between, the blend weight (original / wavelength - low) / gap
    # carries that error times (low + gap) / gap, and the result moves by up to factor - 1
    # times the weight's error (measured: at most a seventh of this bound)
    bound = EPS * (math.log(10**log_theta) + 4) * (1 + (factor - 1) * (low + gap) / gap)
    assert relative_error(ours, hf) < bound


@settings(max_examples=300, deadline=None)
@given(
    half=st.integers(1, 64),
    base=st.floats(1.5, 1e7),
    factor=st.floats(1.0, 64.0),
    trained=st.integers(1, 1 << 20),
    fast=st.floats(1.5, 64.0),
    slow=st.floats(0.1, 1.4),
)
def test_yarn_keeps_fast_pairs_and_divides_slow_ones(half, base, factor, trained, fast, slow):
    """What yarn_inv_freq says of every pair, short trained contexts included: one that turns
    more than beta_fast times in the trained context is kept, one that turns fewer than
    beta_slow times is divided by the factor, one in between lies between the two."""
    got, _ = sc.yarn_inv_freq(2 * half, base, factor, trained, beta_fast=fast, beta_slow=slow)
    plain = rope.rope_inv_freq(2 * half, base)
    turns = trained * plain / (2 * math.pi)
    kept, divided = turns > fast, turns < slow
    torch.testing.assert_close(got[kept], plain[kept], rtol=1e-12, atol=0)
    torch.testing.assert_close(got[divided], plain[divided] / factor, rtol=1e-12, atol=0)
    between = ~kept & ~divided
    assert bool((got[between] <= plain[between] * (1 + 1e-12)).all())
    assert bool((got[between] >= plain[between] / factor * (1 - 1e-12)).all())


@pytest.mark.parametrize("base", [1.0, 0.5])
def test_yarn_needs_frequencies_that_fall(base):
    with pytest.raises(ValueError, match="base must exceed 1"):
        sc.yarn_inv_freq(8, base, 2.0, 4096)


def test_yarn_matches_transformers():
    # transformers before 4.5x read the trained length from max_position_embeddings
    config = llama_config(
        128,
        10000.0,
        {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096},
        max_positions=4096,
    )
    hf, hf_scale = _rope_init("yarn")(config, None)
    ours, scale = sc.yarn_inv_freq(128, 10000.0, 8.0, 4096)
    assert relative_error(ours, hf) < 4 * EPS
    assert math.isclose(scale, hf_scale)
