"""Self-attention has no sense of order: the identities chapter 1 relies on."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe


def naive_attention(q, k, v):
    """Attention written as loops over positions, the reference for the vectorised form."""
    t, d = q.shape
    out = torch.zeros(t, v.shape[1], dtype=torch.float64)
    for i in range(t):
        scores = [
            sum(q[i, c].item() * k[j, c].item() for c in range(d)) / math.sqrt(d) for j in range(t)
        ]
        top = max(scores)
        weights = [math.exp(s - top) for s in scores]
        total = sum(weights)
        for j in range(t):
            out[i] += weights[j] / total * v[j].double()
    return out


def test_self_attention_matches_naive_loop():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(5, 3, generator=gen, dtype=torch.float64) for _ in range(3))
    torch.testing.assert_close(pe.self_attention(q, k, v), naive_attention(q, k, v))


@settings(max_examples=50, deadline=None)
@given(
    t=st.integers(1, 9),
    d=st.integers(1, 8),
    seed=st.integers(0, 2**31 - 1),
    batch=st.integers(1, 3),
)
def test_attention_is_permutation_equivariant(t, d, seed, batch):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, t, d, generator=gen, dtype=torch.float64)  # [B, T, D]
    w_q, w_k, w_v = (torch.randn(d, d, generator=gen, dtype=torch.float64) for _ in range(3))
    perm = torch.randperm(t, generator=gen)
    out = pe.self_attention(x @ w_q, x @ w_k, x @ w_v)
    xp = pe.permute_positions(x, perm)
    out_p = pe.self_attention(xp @ w_q, xp @ w_k, xp @ w_v)
    torch.testing.assert_close(out_p, pe.permute_positions(out, perm))


@settings(max_examples=25, deadline=None)
@given(t=st.integers(1, 8), seed=st.integers(0, 2**31 - 1))
def test_weights_rows_sum_to_one(t, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, t, 4, generator=gen), torch.randn(2, t, 4, generator=gen)
    w = pe.attention_weights(q, k)
    assert w.shape == (2, t, t)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, t))


def test_permute_positions_then_inverse_is_identity():
    x = torch.randn(2, 7, 3)
    perm = torch.randperm(7)
    back = pe.permute_positions(pe.permute_positions(x, perm), torch.argsort(perm))
    assert torch.equal(back, x)


@pytest.mark.parametrize(
    ("perm", "error", "match"),
    [
        ([0, 1], ValueError, "permutation of 0..2"),
        ([0, 0, 1], ValueError, "permutation of 0..2"),
        ([0, 1, 3], ValueError, "permutation of 0..2"),
        ([0.0, 1.0, 2.0], TypeError, "integers"),
    ],
)
def test_permute_positions_rejects_non_permutations(perm, error, match):
    with pytest.raises(error, match=match):
        pe.permute_positions(torch.zeros(3, 2), perm)


@pytest.mark.parametrize(
    ("q", "k", "error", "match"),
    [
        ([[1.0]], torch.zeros(1, 1), TypeError, "q must be a torch.Tensor"),
        (torch.zeros(3), torch.zeros(3), ValueError, "at least 2 dimensions"),
        (torch.zeros(2, 3), torch.zeros(2, 4), ValueError, "D=3 and D=4"),
        (torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3), TypeError, "floating dtype"),
        (torch.zeros(2, 3), torch.zeros(2, 3).double(), TypeError, "q and k must share one dtype"),
        (torch.zeros(2, 0), torch.zeros(2, 0), ValueError, "D > 0"),  # rows of NaN otherwise
    ],
)
def test_attention_weights_validates(q, k, error, match):
    with pytest.raises(error, match=match):
        pe.attention_weights(q, k)


def test_self_attention_needs_as_many_values_as_keys():
    with pytest.raises(ValueError, match="T=3 and T=2"):
        pe.self_attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(2, 4))
    with pytest.raises(TypeError, match="q and v must share one dtype"):
        pe.self_attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4).double())


def test_demo_attention_is_reproducible_and_blind_to_order():
    a, b = pe.DemoAttention(16, num_heads=4, seed=3), pe.DemoAttention(16, num_heads=4, seed=3)
    for pa, pb in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)
    # the attention block's parameters are N(0, 0.1), not torch's default initialisation
    assert 0.07 < a.mha.in_proj_weight.std().item() < 0.13
    x = torch.randn(1, 5, 16, dtype=torch.float64)
    layer = a.double()
    perm = torch.tensor([4, 2, 0, 1, 3])
    with torch.no_grad():
        out, _ = layer(x)
        out_p, _ = layer(pe.permute_positions(x, perm))
    torch.testing.assert_close(out_p, pe.permute_positions(out, perm))


def test_demo_attention_seed_does_not_touch_global_rng():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    pe.DemoAttention(8, num_heads=2, seed=5)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dim": 10, "num_heads": 4}, ValueError, "num_heads must divide dim"),
        ({"dim": 0}, ValueError, "must be positive"),
        ({"dim": 8, "std": 0.0}, ValueError, "std must be positive"),
        ({"dim": 8.0}, TypeError, "dim must be an int"),
    ],
)
def test_demo_attention_validates(kwargs, error, match):
    with pytest.raises(error, match=match):
        pe.DemoAttention(**kwargs)


def test_demo_attention_rejects_wrong_width():
    with pytest.raises(ValueError, match="E=8"):
        pe.DemoAttention(8, num_heads=2)(torch.zeros(1, 3, 6))
    with pytest.raises(TypeError, match="x and weights must share one dtype"):
        pe.DemoAttention(8, num_heads=2)(torch.zeros(1, 3, 8, dtype=torch.float64))


def test_default_device(monkeypatch):
    monkeypatch.setenv("POSENC_DEVICE", "cpu")
    assert pe.default_device() == "cpu"
    monkeypatch.setenv("POSENC_DEVICE", "tpu")
    with pytest.raises(ValueError, match="POSENC_DEVICE must be one of"):
        pe.default_device()
