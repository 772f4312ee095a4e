"""Chapter 9: RoPE's two written forms, its relative identity, attention with RoPE, the views."""

import gc
import math

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc.book import rope_views as rv

dims = st.integers(1, 16).map(lambda n: 2 * n)  # even D in 2 .. 32
positions_st = st.integers(-5000, 5000)
bases = st.floats(2.0, 1e6)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def naive_rotation(x, positions, base=10000.0, clockwise=False):
    """A plain loop over tokens and pairs, turning each pair with 2x2 arithmetic in floats."""
    out = x.clone()
    dim = x.shape[-1]
    sign = -1.0 if clockwise else 1.0
    for t, p in enumerate(positions):
        for i in range(dim // 2):
            a = sign * p * base ** (-2 * i / dim)
            c, s = math.cos(a), math.sin(a)
            x1, x2 = x[t, 2 * i].item(), x[t, 2 * i + 1].item()
            out[t, 2 * i] = x1 * c - x2 * s
            out[t, 2 * i + 1] = x1 * s + x2 * c
    return out


# --- the source's two forms ---------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(dim=dims, p=positions_st, base=bases)
def test_clockwise_matrix_is_the_transpose_of_rope_matrix(dim, p, base):
    cw = rv.clockwise_rope_matrix(p, dim, base=base)
    ccw = pe.rope_matrix(p, dim, base=base)
    torch.testing.assert_close(cw, ccw.T, rtol=0, atol=1e-12)
    torch.testing.assert_close(cw, pe.rope_matrix(-p, dim, base=base), rtol=0, atol=1e-12)
    torch.testing.assert_close(cw @ cw.T, torch.eye(dim, dtype=torch.float64), atol=1e-12, rtol=0)


def test_clockwise_matrix_has_the_minus_sign_in_the_lower_left_corner():
    m = rv.clockwise_rope_matrix(1, 4)  # theta = 1, 0.01
    assert m[0, 1].item() == pytest.approx(math.sin(1.0))
    assert m[1, 0].item() == pytest.approx(-math.sin(1.0))
    assert m[2, 3].item() == pytest.approx(math.sin(0.01))
    assert m[0, 2].item() == m[1, 3].item() == 0.0  # nothing between pairs
    # on (1, 0) it turns clockwise: y becomes negative
    assert (m[:2, :2] @ torch.tensor([1.0, 0.0], dtype=torch.float64))[1].item() < 0


@settings(max_examples=40, deadline=None)
@given(dim=dims, data=st.data())
def test_elementwise_formula_matches_a_naive_loop_and_apply_rope(dim, data):
    t = data.draw(st.integers(1, 6))
    pos = data.draw(st.lists(positions_st, min_size=t, max_size=t))
    x = torch.randn(t, dim, dtype=torch.float64)
    got = rv.elementwise_rope(x, pos)
    torch.testing.assert_close(got, naive_rotation(x, pos), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(got, pe.apply_rope(x, pos), rtol=1e-12, atol=1e-12)


def test_the_two_forms_of_the_source_differ_except_at_zero():
    x = torch.randn(5, 8, dtype=torch.float64)
    pos = [0, 1, 2, -3, 40]
    by_matrix = torch.stack(
        [rv.clockwise_rope_matrix(p, 8) @ x[i] for i, p in enumerate(pos)]
    )  # [T, D]
    torch.testing.assert_close(by_matrix, naive_rotation(x, pos, clockwise=True))
    same = torch.isclose(by_matrix, rv.elementwise_rope(x, pos)).all(dim=-1)
    assert same.tolist() == [True, False, False, False, False]


def test_elementwise_keeps_dtype_batch_and_device():
    x = torch.randn(2, 3, 4, 6, dtype=torch.float32)
    out = rv.elementwise_rope(x)
    assert out.dtype == torch.float32 and out.shape == x.shape
    torch.testing.assert_close(out, pe.apply_rope(x))
    half = rv.elementwise_rope(x.to(torch.bfloat16))
    assert half.dtype == torch.bfloat16


# --- scores ------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(dim=dims, data=st.data())
def test_score_grid_depends_on_offset_only(dim, data):
    grid = data.draw(st.lists(positions_st, min_size=1, max_size=8))
    layout = data.draw(st.sampled_from(["interleaved", "half"]))
    q, k = torch.randn(2, dim, dtype=torch.float64)
    s = rv.score_grid(q, k, grid, layout=layout)
    p = torch.tensor(grid)
    rel = rv.relative_scores(q, k, (p[None, :] - p[:, None]).flatten(), layout=layout)
    torch.testing.assert_close(s, rel.reshape(s.shape), rtol=1e-9, atol=1e-9)
    # an independent reference: dense matrices, q^T R_m^T R_n k
    mats = [pe.rope_matrix(m, dim, layout=layout) for m in grid]
    dense = torch.tensor([[(a @ q) @ (b @ k) for b in mats] for a in mats], dtype=torch.float64)
    torch.testing.assert_close(s, dense, rtol=1e-9, atol=1e-9)


def test_clockwise_scores_are_the_transpose():
    q, k = torch.randn(2, 16, dtype=torch.float64)
    grid = list(range(-6, 7))
    s = rv.score_grid(q, k, grid)
    cw = torch.stack([rv.clockwise_rope_matrix(p, 16) for p in grid])
    s_cw = (cw @ q) @ (cw @ k).T
    torch.testing.assert_close(s_cw, s.T)
    assert not torch.allclose(s_cw, s)


def test_relative_scores_at_zero_is_the_plain_dot_product():
    q, k = torch.randn(2, 10, dtype=torch.float64)
    assert rv.relative_scores(q, k, [0]).item() == pytest.approx((q @ k).item())


# --- two tokens ----------------------------------------------------------------------------


def test_random_projections_are_seeded_and_scaled():
    a = rv.random_projections(2048, 64, seed=3)
    b = rv.random_projections(2048, 64, seed=3)
    c = rv.random_projections(2048, 64, seed=4)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0]) and not torch.equal(a[0], a[1])
    assert a[0].shape == (2048, 64) and a[0].dtype == torch.float32
    assert a[0].double().var().item() == pytest.approx(1 / 2048, rel=0.05)


@settings(max_examples=30, deadline=None)
@given(start=st.integers(0, 300), shift=st.integers(1, 300), offset=st.integers(-20, 20))
def test_pair_scores_rope_is_shift_invariant_and_matches_the_formula(start, shift, offset):
    gen = torch.Generator().manual_seed(start)
    xq, xk = torch.randn(2, 32, generator=gen, dtype=torch.float64)
    w_q, w_k = rv.random_projections(32, 8, seed=1, dtype=torch.float64)
    m = [start, start + shift]
    n = [start + offset, start + shift + offset]
    s = rv.pair_scores(xq, xk, m, n, w_q, w_k, encoding="rope")
    assert s[0].item() == pytest.approx(s[1].item(), rel=1e-9, abs=1e-12)
    expected = (pe.rope_matrix(m[0], 8) @ (xq @ w_q)) @ (pe.rope_matrix(n[0], 8) @ (xk @ w_k))
    assert s[0].item() == pytest.approx(expected.item(), rel=1e-9, abs=1e-12)


def test_pair_scores_sinusoidal_is_the_added_encoding_and_depends_on_placement():
    gen = torch.Generator().manual_seed(0)
    xq, xk = torch.randn(2, 16, generator=gen, dtype=torch.float64)
    w_q, w_k = rv.random_projections(16, 4, seed=0, dtype=torch.float64)
    table = pe.sinusoidal_encoding(20, 16).double()
    s = rv.pair_scores(xq, xk, [1, 7], [4, 10], w_q, w_k, encoding="sinusoidal")
    expected = ((xq + table[7]) @ w_q) @ ((xk + table[10]) @ w_k)
    assert s[1].item() == pytest.approx(expected.item(), rel=1e-6)
    assert abs(s[0].item() - s[1].item()) > 1e-3
    none = rv.pair_scores(xq, xk, [1, 7], [4, 19], w_q, w_k, encoding="none")
    assert none[0].item() == none[1].item() == pytest.approx(((xq @ w_q) @ (xk @ w_k)).item())


# --- attention with RoPE --------------------------------------------------------------------


def naive_rope_attention(layer, x, positions):
    """Head by head and row by row with explicit matrices, for one sequence x [T, E]."""
    mha = layer.mha
    e, h = mha.embed_dim, mha.num_heads
    d = e // h
    w = mha.in_proj_weight
    b = mha.in_proj_bias
    q_all = layer.w_q(x) @ w[:e].T + b[:e]
    k_all = layer.w_k(x) @ w[e : 2 * e].T + b[e : 2 * e]
    v_all = layer.w_v(x) @ w[2 * e :].T + b[2 * e :]
    heads = []
    for head in range(h):
        cols = slice(head * d, (head + 1) * d)
        rows = []
        for i, m in enumerate(positions):
            qi = pe.rope_matrix(m, d, dtype=x.dtype) @ q_all[i, cols]
            scores = torch.stack(
                [
                    qi @ (pe.rope_matrix(n, d, dtype=x.dtype) @ k_all[j, cols])
                    for j, n in enumerate(positions)
                ]
            )
            weights = (scores / math.sqrt(d)).softmax(dim=0)
            rows.append(weights @ v_all[:, cols])
        heads.append(torch.stack(rows))
    return mha.out_proj(torch.cat(heads, dim=-1))


@pytest.fixture(scope="module")
def small_layer():
    return pe.DemoAttention(16, num_heads=2, std=0.5, seed=0).double()


def test_rope_attention_without_rope_is_multihead_attention(small_layer):
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    with torch.no_grad():
        out, weights = rv.rope_attention(small_layer, x, rope=False)
        ref_out, ref_weights = small_layer(x)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)


@pytest.mark.parametrize("positions", [[0, 1, 2, 3], [5, -2, 9, 100]])
def test_rope_attention_matches_a_naive_loop(small_layer, positions):
    x = torch.randn(1, 4, 16, dtype=torch.float64)
    with torch.no_grad():
        out, _ = rv.rope_attention(small_layer, x, positions=positions)
        ref = naive_rope_attention(small_layer, x[0], positions)
    torch.testing.assert_close(out[0], ref)


def test_rope_attention_separates_equal_tokens_and_ignores_a_global_shift(small_layer):
    x = torch.randn(1, 5, 16, dtype=torch.float64)
    x[0, 4] = x[0, 1]  # the same token twice
    with torch.no_grad():
        plain, _ = rv.rope_attention(small_layer, x, rope=False)
        rotary, _ = rv.rope_attention(small_layer, x)
        moved, _ = rv.rope_attention(small_layer, x, positions=[50, 51, 52, 53, 54])
        frozen, _ = rv.rope_attention(small_layer, x, positions=[7] * 5)
    torch.testing.assert_close(plain[0, 1], plain[0, 4])
    assert (rotary[0, 1] - rotary[0, 4]).abs().max().item() > 1e-6
    torch.testing.assert_close(moved, rotary)
    torch.testing.assert_close(frozen, plain)  # every offset 0: no rotation between tokens


def test_rope_attention_half_layout_differs_but_is_also_relative(small_layer):
    x = torch.randn(1, 4, 16, dtype=torch.float64)
    with torch.no_grad():
        a, _ = rv.rope_attention(small_layer, x, layout="half")
        b, _ = rv.rope_attention(small_layer, x, layout="half", positions=[3, 4, 5, 6])
        c, _ = rv.rope_attention(small_layer, x)
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a, c)


# --- playground and animation -------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(m=st.integers(-100, 100), n=st.integers(-100, 100), shift=st.integers(-1000, 1000))
def test_playground_state_is_invariant_to_moving_both(m, n, shift):
    for pair in range(4):
        a = rv.playground_state(m, n, pair)
        b = rv.playground_state(m + shift, n + shift, pair)
        assert a["pair_score"] == pytest.approx(b["pair_score"], abs=1e-9)
        assert a["score"] == pytest.approx(b["score"], abs=1e-9)
        assert math.cos(a["angle"]) == pytest.approx(math.cos(b["angle"]), abs=1e-9)


def test_playground_state_is_consistent():
    s = rv.playground_state(3, 11, 1, dim=8)
    q, k = rv.playground_vectors(8)
    assert s["theta"] == pytest.approx(0.1)
    # the pair's score from its lengths and angle
    lengths = s["q_pair"].norm() * s["k_pair"].norm()
    assert s["pair_score"] == pytest.approx((lengths * math.cos(s["angle"])).item())
    # the whole score is the sum over pairs
    total = sum(rv.playground_state(3, 11, i)["pair_score"] for i in range(4))
    assert s["score"] == pytest.approx(total)
    assert s["score"] == pytest.approx(rv.relative_scores(q, k, [8]).item())
    torch.testing.assert_close(s["rq_pair"].norm(), s["q_pair"].norm())


def test_playground_figure_says_what_it_shows():
    fig = rv.playground_figure(4, 10, 2)
    text = fig.axes[1].texts[0].get_text()
    assert "offset n - m = 6" in text and "query at m = 4" in text
    legend = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert legend == ["query pair at m = 4", "key pair at n = 10", "before rotation"]
    assert pe.plots.layout(fig).problems() == []


def test_rotation_frames_turn_by_theta_and_keep_length():
    points, theta = rv.rotation_frames(10, (0, 2), dim=8, vector=(0.5, -1.0))
    assert points.shape == (10, 2, 2)
    torch.testing.assert_close(theta, torch.tensor([1.0, 0.01], dtype=torch.float64))
    for p in range(10):
        for j, i in enumerate((0, 2)):
            expected = pe.rotation_matrix(torch.tensor(p * 10000 ** (-2 * i / 8)))
            expected = expected.double() @ torch.tensor([0.5, -1.0], dtype=torch.float64)
            torch.testing.assert_close(points[p, j], expected, rtol=1e-6, atol=1e-6)


def test_rotation_animation_has_one_frame_per_position():
    anim = rv.rotation_animation(4, (1,), dpi=20)
    assert anim.to_jshtml().count("data:image/png") == 4


@pytest.mark.filterwarnings("ignore:Animation was deleted without rendering")
def test_rotation_animation_starts_on_a_frame_with_a_trail():
    anim = rv.rotation_animation(10, (0, 1), start=6, dpi=20)
    fig = anim._fig
    assert fig.dpi == 20 and fig.texts[0].get_text() == "query at position p = 6"
    assert len(fig.axes[0].collections[0].get_offsets()) == 7  # positions 0 .. 6
    # the frames in position order, the player (and its slider) opened on position 6
    assert list(anim._iter_gen()) == list(range(10)) and anim.start_frame == 6
    assert ".set_frame(6);" in pe.plots.animation_html(anim).data
    default = rv.rotation_animation(8, (0,), dpi=20)
    assert default._fig.texts[0].get_text() == "query at position p = 2"
    assert rv.rotation_animation(3, (0,))._fig.dpi == pe.plots.CSS_DPI
    del anim, default
    gc.collect()  # drop the unrendered animations while their warning is filtered


def test_score_grids_share_one_scale():
    q, k = torch.randn(2, 8, dtype=torch.float64)
    grid = list(range(-4, 5))
    s = rv.score_grid(q, k, grid)
    fig = rv.score_grids_figure({"ccw": s, "cw": 2 * s.T}, grid)
    left, right, bar = fig.axes
    assert left.images[0].get_clim() == right.images[0].get_clim()
    assert right.images[0].get_clim()[1] == pytest.approx(2 * s.abs().max().item())
    assert bar.get_xlabel() == "score" and right.get_ylabel() == ""
    assert pe.plots.layout(fig).problems() == []
    ax = rv.score_grid_figure(s, grid, colorbar=False)
    assert len(ax.figure.axes) == 1


def test_figures_draw():
    ax = rv.score_grid_figure(torch.randn(3, 3), [-1, 0, 1])
    assert ax.get_xlabel() == "key position n"
    ax = rv.offset_sweep_figure([0, 1, 2], {"a": torch.zeros(3), "b": torch.ones(3)}, offset=2)
    assert len(ax.get_lines()) == 2
    assert ax.get_legend() is not None  # two curves: a legend, below the axes
    d = torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    fig = rv.distance_figure({"x": d}, ["a", "b", "c"])
    assert len(fig.axes) == 2
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["a", "b", "c"]
    one = rv.offset_sweep_figure([0, 1], {"a": torch.zeros(2)}, offset=1)
    assert one.get_legend() is None  # one curve: the title names it


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: rv.clockwise_rope_matrix(1, 5), ValueError, "even"),
        (lambda: rv.clockwise_rope_matrix(1.5, 4), TypeError, "position"),
        (lambda: rv.clockwise_rope_matrix(1, 4, dtype=torch.int64), TypeError, "dtype"),
        (lambda: rv.clockwise_rope_matrix(1, 4, base=-1.0), ValueError, "base"),
        (lambda: rv.elementwise_rope(torch.zeros(3, 5)), ValueError, "D=5"),
        (lambda: rv.elementwise_rope(torch.zeros(3, 4), [0, 1]), ValueError, "T=3"),
        (lambda: rv.elementwise_rope(torch.zeros(3, 4), [0.0, 1.0, 2.0]), TypeError, "integers"),
        (lambda: rv.elementwise_rope(torch.zeros(2, 4, dtype=torch.int64)), TypeError, "floating"),
        (lambda: rv.score_grid(torch.zeros(4), torch.zeros(6), [0]), ValueError, "6"),
        (lambda: rv.score_grid(torch.zeros(3), torch.zeros(3), [0]), ValueError, "D=3"),
        (lambda: rv.score_grid(torch.zeros(4), torch.zeros(4), []), ValueError, "empty"),
        (
            lambda: rv.score_grid(torch.zeros(4), torch.zeros(4), [0], layout="x"),
            ValueError,
            "layout",
        ),
        (lambda: rv.relative_scores(torch.zeros(2, 4), torch.zeros(4), [0]), ValueError, "one"),
        (lambda: rv.random_projections(0, 4), ValueError, "embed_dim"),
        (lambda: rv.random_projections(8, 4, dtype=torch.int32), TypeError, "dtype"),
        (lambda: rv.playground_state(1, 2, 4, dim=8), ValueError, "pair"),
        (lambda: rv.playground_state(1, 2.0), TypeError, "n"),
        (lambda: rv.playground_vectors(7), ValueError, "even"),
        (lambda: rv.rotation_frames(41), ValueError, "at most"),
        (lambda: rv.rotation_frames(10, (0, 0)), ValueError, "distinct"),
        (lambda: rv.rotation_frames(10, (4,), dim=8), ValueError, "pairs"),
        (lambda: rv.rotation_frames(10, 0), TypeError, "pairs"),
        (lambda: rv.rotation_frames(10, vector=(0, 0)), ValueError, "zero"),
        (lambda: rv.rotation_frames(10, vector=(1.0,)), ValueError, "two numbers"),
        (lambda: rv.rotation_animation(10, dpi=101), ValueError, "dpi"),
        (lambda: rv.rotation_animation(10, start=10), ValueError, "start"),
        (lambda: rv.rotation_animation(10, (0, 1, 2)), ValueError, "at most 2"),
        (lambda: rv.score_grids_figure({}, [0]), ValueError, "one or two"),
        (lambda: rv.score_grids_figure({"a": torch.eye(2)}, [0]), ValueError, "grids\\['a'\\]"),
        (lambda: rv.score_grid_figure(torch.eye(2), [0, 1], colorbar=1), TypeError, "colorbar"),
        (
            lambda: rv.offset_sweep_figure(
                [0], {str(i): torch.ones(1) for i in range(7)}, offset=1
            ),
            ValueError,
            "at most 6",
        ),
        (
            lambda: rv.distance_figure({c: torch.ones(2, 2) for c in "abc"}, ["x", "y"]),
            ValueError,
            "at most 2",
        ),
        (lambda: rv.score_grid_figure(torch.zeros(2, 3), [0, 1]), ValueError, "square"),
        (lambda: rv.score_grid_figure(torch.zeros(2, 2), [0, 1, 2]), ValueError, "positions"),
        (lambda: rv.offset_sweep_figure([0, 1], {}, offset=1), ValueError, "non-empty"),
        (
            lambda: rv.offset_sweep_figure([0, 1], {"a": torch.zeros(3)}, offset=1),
            ValueError,
            "2 features",
        ),
        (lambda: rv.distance_figure({"a": -torch.ones(2, 2)}, ["x", "y"]), ValueError, "negative"),
        (lambda: rv.distance_figure({"a": torch.ones(3, 3)}, ["x", "y"]), ValueError, "T=2"),
        (lambda: rv.distance_figure({"a": torch.zeros(2, 2)}, ["x", "y"]), ValueError, "positive"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"encoding": "alibi"}, ValueError, "encoding"),
        ({"query_positions": [0, 1]}, ValueError, "equal length"),
        ({"query_positions": [-1], "encoding": "sinusoidal"}, ValueError, "non-negative"),
        ({"w_q": torch.zeros(7, 4)}, ValueError, "w_q"),
        ({"w_k": torch.zeros(8, 6)}, ValueError, "same shape"),
        ({"x_key": torch.zeros(7)}, ValueError, "x_key"),
    ],
)
def test_pair_scores_bad_input(kwargs, error, match):
    args = {
        "x_query": torch.zeros(8),
        "x_key": torch.zeros(8),
        "query_positions": [0],
        "key_positions": [1],
        "w_q": torch.zeros(8, 4),
        "w_k": torch.zeros(8, 4),
    }
    args.update(kwargs)
    with pytest.raises(error, match=match):
        rv.pair_scores(**args)


def test_pair_scores_rope_needs_even_head_dim():
    with pytest.raises(ValueError, match="D=3"):
        rv.pair_scores(
            torch.zeros(8), torch.zeros(8), [0], [1], torch.zeros(8, 3), torch.zeros(8, 3)
        )


def test_rope_attention_bad_input(small_layer):
    x = torch.zeros(1, 3, 16, dtype=torch.float64)
    with pytest.raises(TypeError, match="DemoAttention"):
        rv.rope_attention(small_layer.mha, x)
    with pytest.raises(ValueError, match="E=16"):
        rv.rope_attention(small_layer, torch.zeros(1, 3, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="only with rope=True"):
        rv.rope_attention(small_layer, x, rope=False, positions=[0, 1, 2])
    with pytest.raises(TypeError, match="rope must be a bool"):
        rv.rope_attention(small_layer, x, rope=1)
    with pytest.raises(ValueError, match="positions"):
        rv.rope_attention(small_layer, x, positions=[0, 1])
    with pytest.raises(ValueError, match="layout"):
        rv.rope_attention(small_layer, x, layout="complex")
    odd = pe.DemoAttention(6, num_heads=2, seed=0)
    with pytest.raises(ValueError, match="even head size"):
        rv.rope_attention(odd, torch.zeros(1, 2, 6))


def test_playground_rejects_positions_outside_the_sliders():
    pytest.importorskip("ipywidgets")
    with pytest.raises(ValueError, match=r"0 \.\. 64"):
        rv.playground(m=65, n=0)
