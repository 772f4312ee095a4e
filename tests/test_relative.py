"""Relative methods: Shaw's attention, T5 buckets and ALiBi against independent references."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import relative

transformers = pytest.importorskip("transformers")


def naive_shaw(q, k, v, a_k, a_v):
    t, d = q.shape
    clip = (a_k.shape[0] - 1) // 2
    z = torch.zeros_like(v)
    for i in range(t):
        e = torch.stack(
            [
                q[i] @ (k[j] + a_k[max(-clip, min(clip, j - i)) + clip]) / math.sqrt(d)
                for j in range(t)
            ]
        )
        alpha = e.softmax(0)
        for j in range(t):
            z[i] += alpha[j] * (v[j] + a_v[max(-clip, min(clip, j - i)) + clip])
    return z


@settings(max_examples=20, deadline=None)
@given(t=st.integers(1, 7), clip=st.integers(0, 4), seed=st.integers(0, 2**31 - 1))
def test_shaw_attention_matches_a_loop(t, clip, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(3, t, 4, generator=gen, dtype=torch.float64)
    a_k, a_v = torch.randn(2, 2 * clip + 1, 4, generator=gen, dtype=torch.float64)
    z, _ = relative.shaw_attention(q, k, v, a_k, a_v)
    torch.testing.assert_close(z, naive_shaw(q, k, v, a_k, a_v))


def test_shaw_attention_sees_order():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    a_k, a_v = torch.randn(2, 5, 4, generator=gen, dtype=torch.float64)
    perm = torch.tensor([4, 3, 2, 1, 0])
    z, _ = relative.shaw_attention(x, x, x, a_k, a_v)
    z_p, _ = relative.shaw_attention(x[perm], x[perm], x[perm], a_k, a_v)
    assert not torch.allclose(z_p, z[perm])


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (16, 64), (8, 20)])
def test_t5_buckets_match_transformers(bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    rel = torch.arange(-400, 401)[None, :]
    expected = T5Attention._relative_position_bucket(
        rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    got = relative.t5_bucket(
        rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(got, expected)


def test_t5_bias_is_a_function_of_the_offset():
    table = torch.randn(32, 3, dtype=torch.float64)
    bias = relative.t5_bias(40, table)
    for d in range(-39, 40):
        diag = torch.diagonal(bias, offset=d, dim1=-2, dim2=-1)  # [H, T - |d|]
        assert bool((diag == diag[:, :1]).all())


@pytest.mark.parametrize("heads", [1, 2, 5, 8, 12, 16, 24])
def test_alibi_slopes_match_bloom(heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    alibi = build_alibi_tensor(
        torch.ones(1, 2), heads, torch.float64
    )  # [H, 1, T]: slope * position
    torch.testing.assert_close(relative.alibi_slopes(heads), alibi[:, 0, 1], rtol=1e-6, atol=0)


def test_alibi_bias_penalises_distance_and_masks_the_future():
    bias = relative.alibi_bias(6, relative.alibi_slopes(4))
    assert bool(torch.isinf(bias[:, 0, 1:]).all())
    lower = torch.tril(torch.ones(6, 6, dtype=torch.bool))
    for h, slope in enumerate(relative.alibi_slopes(4)):
        i, j = torch.nonzero(lower, as_tuple=True)
        torch.testing.assert_close(bias[h][lower], -slope * (i - j).double())


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: relative.shaw_relative_indices(0, 2),
            ValueError,
            "num_positions must be at least 1",
        ),
        (
            lambda: relative.shaw_relative_indices(4, -1),
            ValueError,
            "max_distance must be at least 0",
        ),
        (
            lambda: relative.shaw_attention(
                *torch.zeros(3, 2, 4), torch.zeros(4, 4), torch.zeros(4, 4)
            ),
            ValueError,
            "odd number of rows",
        ),
        (
            lambda: relative.shaw_attention(
                *torch.zeros(3, 2, 4), torch.zeros(3, 4).double(), torch.zeros(3, 4).double()
            ),
            TypeError,
            "q and a_k must share one dtype",
        ),
        (lambda: relative.t5_bucket(torch.tensor([0.5])), TypeError, "integers"),
        (lambda: relative.t5_bucket(torch.tensor([1]), num_buckets=7), ValueError, "even"),
        (lambda: relative.t5_bias(3, torch.zeros(32)), ValueError, "at least 2 dimensions"),
        (lambda: relative.alibi_slopes(0), ValueError, "num_heads must be at least 1"),
        (lambda: relative.alibi_bias(3, torch.zeros(2, 2)), ValueError, r"slopes must be \[H\]"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
