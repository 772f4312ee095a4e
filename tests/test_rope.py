"""RoPE: its identities (norm kept, relative invariance, layouts, position 0) and bad input."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import rope
from posenc import scaling as sc


def test_llama_3_2_bands_are_15_3_14():
    base = rope.rope_inv_freq(64, 500000.0)
    scaled = sc.llama3_inv_freq(base)
    kept = scaled == base
    divided = torch.isclose(scaled, base / 32, rtol=1e-12, atol=0)
    assert (int(kept.sum()), int((~kept & ~divided).sum()), int(divided.sum())) == (15, 3, 14)


vectors = st.integers(1, 16).map(lambda h: 2 * h)


@settings(max_examples=40, deadline=None)
@given(
    dim=vectors,
    m=st.integers(-5000, 5000),
    n=st.integers(-5000, 5000),
    shift=st.integers(-5000, 5000),
    seed=st.integers(0, 2**31 - 1),
    layout=st.sampled_from(rope.LAYOUTS),
)
def test_score_depends_on_offset_only(dim, m, n, shift, seed, layout):
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, dim, generator=gen, dtype=torch.float64)

    def score(a, b):
        return (
            rope.apply_rope(q, [a], layout=layout) @ rope.apply_rope(k, [b], layout=layout).mT
        ).item()

    assert math.isclose(score(m, n), score(m + shift, n + shift), rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    dim=vectors,
    p=st.integers(-(10**6), 10**6),
    seed=st.integers(0, 2**31 - 1),
    layout=st.sampled_from(rope.LAYOUTS),
)
def test_norm_kept_and_dense_equals_elementwise(dim, p, seed, layout):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(3, dim, generator=gen, dtype=torch.float64)
    rotated = rope.apply_rope(x, [p, p, p], layout=layout)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    dense = rope.rope_matrix(p, dim, layout=layout)
    torch.testing.assert_close(x @ dense.T, rotated)


@settings(max_examples=30, deadline=None)
@given(dim=vectors, seed=st.integers(0, 2**31 - 1), t=st.integers(1, 12))
def test_layouts_are_equal_under_the_permutation(dim, seed, t):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, t, dim, generator=gen, dtype=torch.float64)
    positions = torch.randint(-1000, 1000, (t,), generator=gen)
    perm = rope.layout_permutation(dim)
    inter = rope.apply_rope(x, positions, layout="interleaved")
    torch.testing.assert_close(
        inter[..., perm], rope.apply_rope(x[..., perm], positions, layout="half")
    )


@pytest.mark.parametrize("layout", rope.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_position_zero_is_the_identity(layout, dtype):
    x = torch.randn(1, 8, dtype=torch.float64).to(dtype)
    assert torch.equal(rope.apply_rope(x, [0], layout=layout), x)
    assert torch.equal(rope.rope_matrix(0, 8, layout=layout), torch.eye(8, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_input_gets_float32_angles(dtype):
    x = torch.randn(4, 64, dtype=torch.float64)
    positions = torch.tensor([0, 1000, 65537, 131071])
    exact = rope.apply_rope(x, positions)
    low = rope.apply_rope(x.to(dtype), positions)
    assert low.dtype == dtype
    # the only error is rounding x and the result to `dtype`, not the angles
    assert (low.double() - exact).abs().max() < 4 * torch.finfo(dtype).eps * x.abs().max()


def test_hf_row_permutation_keeps_scores():
    gen = torch.Generator().manual_seed(0)
    heads, head_dim, width, t = 2, 8, 16, 5
    w_q, w_k = torch.randn(2, heads * head_dim, width, generator=gen, dtype=torch.float64)
    x = torch.randn(t, width, generator=gen, dtype=torch.float64)

    def scores(wq, wk, layout):
        q = (x @ wq.T).view(t, heads, head_dim).transpose(0, 1)  # [H, T, D]
        k = (x @ wk.T).view(t, heads, head_dim).transpose(0, 1)
        return rope.apply_rope(q, layout=layout) @ rope.apply_rope(k, layout=layout).mT  # [H, T, T]

    meta = scores(w_q, w_k, "interleaved")
    hf = scores(rope.permute_qk_rows(w_q, heads), rope.permute_qk_rows(w_k, heads), "half")
    torch.testing.assert_close(hf, meta)
    back = rope.permute_qk_rows(rope.permute_qk_rows(w_q, heads), heads, to="interleaved")
    assert torch.equal(back, w_q)
    # without the permutation the half layout pairs the wrong features
    assert not torch.allclose(scores(w_q, w_k, "half"), meta)


@settings(max_examples=25, deadline=None)
@given(
    axes=st.integers(1, 4),
    pairs=st.integers(1, 3),
    seed=st.integers(0, 2**31 - 1),
    data=st.data(),
)
def test_axial_score_depends_on_coordinate_differences(axes, pairs, seed, data):
    dim = 2 * axes * pairs
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, dim, generator=gen, dtype=torch.float64)
    coords = st.lists(st.integers(-500, 500), min_size=axes, max_size=axes)
    a, b, shift = data.draw(coords), data.draw(coords), data.draw(coords)

    def score(u, v):
        return (
            rope.apply_rope_nd(q, torch.tensor([u])) @ rope.apply_rope_nd(k, torch.tensor([v])).mT
        )

    moved = [[x + s for x, s in zip(c, shift, strict=True)] for c in (a, b)]
    torch.testing.assert_close(score(a, b), score(*moved))


def test_scalings_keep_fast_pairs_and_stretch_slow_ones():
    base = rope.rope_inv_freq(64, 10000.0)
    pi = sc.position_interpolation_inv_freq(base, 4.0)
    ntk = sc.ntk_aware_inv_freq(64, 10000.0, 4.0)
    torch.testing.assert_close(pi, base / 4)
    assert ntk[0] == base[0] and torch.isclose(ntk[-1], base[-1] / 4)
    assert bool(((base / 4 <= ntk + 1e-15) & (ntk <= base + 1e-15)).all())
    keep = sc.p_rope_inv_freq(base, 0.25)
    assert torch.equal(keep[:8], base[:8]) and bool((keep[8:] == 0).all())


@pytest.mark.parametrize(("pairs", "p", "kept"), [(1, 0.5, 1), (3, 0.5, 2), (5, 0.5, 3),
                                                  (7, 0.5, 4), (2, 0.75, 2), (10, 0.29, 3)])  # fmt: skip
def test_p_rope_keeps_the_nearest_count_of_pairs_halves_up(pairs, p, kept):
    rotating = sc.p_rope_inv_freq(rope.rope_inv_freq(2 * pairs), p) > 0
    assert rotating.tolist() == [True] * kept + [False] * (pairs - kept)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: rope.apply_rope(torch.zeros(3, 7)), ValueError, "even and positive, got D=7"),
        (lambda: rope.apply_rope(torch.zeros(3, 0)), ValueError, "got D=0"),
        (lambda: rope.apply_rope(torch.zeros(3, 4), [0, 1]), ValueError, "T=3"),
        (lambda: rope.apply_rope(torch.zeros(3, 4), [0.0, 1.0, 2.0]), TypeError, "integers"),
        (lambda: rope.apply_rope(torch.zeros(3, 4), [0, 1, 2**70]), ValueError, "fit in int64"),
        (lambda: rope.rope_matrix(2**63, 4), ValueError, "position must fit in int64"),
        (lambda: rope.apply_rope(torch.zeros(3, 4), torch.zeros(1, 3)), TypeError, "integers"),
        (
            lambda: rope.apply_rope(torch.zeros(3, 4), layout="rotate_half"),
            ValueError,
            "layout must be one of",
        ),
        (
            lambda: rope.apply_rope(torch.zeros(3, 4), base=0.0),
            ValueError,
            "base must be finite and at least 2\\*\\*-64",
        ),
        (
            lambda: rope.apply_rope(torch.zeros(3, 4), inv_freq=torch.ones(3)),
            ValueError,
            r"\[D/2\] = \[2\]",
        ),
        (lambda: rope.apply_rope(torch.zeros(3, 4, dtype=torch.long)), TypeError, "floating dtype"),
        (lambda: rope.apply_rope([[0.0, 1.0]]), TypeError, "torch.Tensor"),
        (lambda: rope.rope_matrix(1.5, 4), TypeError, "position must be an int"),
        (lambda: sc.llama3_inv_freq(rope.rope_inv_freq(8), factor=0.5), ValueError, "at least 1"),
        (
            lambda: sc.llama3_inv_freq(
                rope.rope_inv_freq(8), low_freq_factor=4.0, high_freq_factor=1.0
            ),
            ValueError,
            "exceed",
        ),
        (lambda: sc.ntk_aware_inv_freq(8, 10000.0, -2.0), ValueError, "factor must be positive"),
        (
            lambda: rope.apply_rope_nd(torch.zeros(2, 6), torch.zeros(2, 2, dtype=torch.long)),
            ValueError,
            "divisible by 2 \\* n = 4",
        ),
        (lambda: rope.apply_rope_nd(torch.zeros(2, 8), torch.zeros(2, 2)), TypeError, "integers"),
        (lambda: rope.permute_qk_rows(torch.zeros(6, 3), 2), ValueError, "even size"),
        (lambda: sc.p_rope_inv_freq(rope.rope_inv_freq(8), 1.5), ValueError, r"\[0, 1\]"),
    ],
)
def test_bad_input_gets_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()
