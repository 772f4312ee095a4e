"""Chapter 7's relative views: offsets, biases, buckets and the shift experiment.

Every function that takes explicit positions is checked against a plain loop and against
:mod:`posenc.relative` (which uses positions ``0 .. T-1``); the shift experiment is checked
to find exactly what the mathematics says: no change for relative schemes, a change for
absolute ones.
"""

import math

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc.book import relative_views as rv

position_lists = st.lists(st.integers(0, 500), min_size=1, max_size=8)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def naive_attention(q, k, v, bias):
    """Softmax attention for one head, one query at a time, in plain loops."""
    t, d = q.shape
    out = torch.zeros_like(v)
    weights = torch.zeros(t, t, dtype=q.dtype)
    for i in range(t):
        e = torch.stack([q[i] @ k[j] / math.sqrt(d) + bias[i, j] for j in range(t)])
        weights[i] = e.softmax(0)
        out[i] = sum(weights[i, j] * v[j] for j in range(t))
    return out, weights


# --- offsets and biases at given positions ---------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(positions=position_lists)
def test_offset_matrix_is_key_minus_query(positions):
    got = rv.offset_matrix(positions)
    for i, pi in enumerate(positions):
        for j, pj in enumerate(positions):
            assert got[i, j].item() == pj - pi


@settings(max_examples=40, deadline=None)
@given(positions=position_lists, clip=st.integers(0, 6))
def test_clipped_indices_follow_the_clip_formula(positions, clip):
    got = rv.clipped_offset_indices(positions, clip)
    for i, pi in enumerate(positions):
        for j, pj in enumerate(positions):
            assert got[i, j].item() == max(-clip, min(clip, pj - pi)) + clip


@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 12), clip=st.integers(0, 5), shift=st.integers(0, 10_000))
def test_clipped_indices_at_any_start_are_shaws(t, clip, shift):
    expected = pe.relative.shaw_relative_indices(t, clip)
    assert torch.equal(rv.clipped_offset_indices(list(range(shift, shift + t)), clip), expected)


@settings(max_examples=30, deadline=None)
@given(positions=position_lists, clip=st.integers(0, 4), heads=st.integers(1, 3))
def test_clipped_bias_reads_the_table_row_of_the_clipped_offset(positions, clip, heads):
    table = torch.randn(2 * clip + 1, heads, dtype=torch.float64)
    got = rv.clipped_bias(positions, table)
    assert got.shape == (heads, len(positions), len(positions))
    for i, pi in enumerate(positions):
        for j, pj in enumerate(positions):
            row = max(-clip, min(clip, pj - pi)) + clip
            assert torch.equal(got[:, i, j], table[row])


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("t", [1, 5, 40])
def test_t5_bias_at_the_first_positions_is_the_library_bias(bidirectional, t):
    table = torch.randn(32, 3, dtype=torch.float64)
    expected = pe.relative.t5_bias(t, table, bidirectional=bidirectional)
    got = rv.t5_bias_at(list(range(t)), table, bidirectional=bidirectional)
    assert torch.equal(got, expected)


@settings(max_examples=30, deadline=None)
@given(positions=position_lists, shift=st.integers(0, 100_000))
def test_biases_do_not_move_with_the_sequence(positions, shift):
    moved = [p + shift for p in positions]
    table = torch.randn(32, 2, dtype=torch.float64)
    assert torch.equal(rv.t5_bias_at(moved, table), rv.t5_bias_at(positions, table))
    slopes = pe.relative.alibi_slopes(4)
    assert torch.equal(rv.alibi_bias_at(moved, slopes), rv.alibi_bias_at(positions, slopes))
    clip_table = torch.randn(5, 2, dtype=torch.float64)
    assert torch.equal(rv.clipped_bias(moved, clip_table), rv.clipped_bias(positions, clip_table))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("heads", [1, 3, 8])
def test_alibi_bias_at_the_first_positions_is_the_library_bias(causal, heads):
    slopes = pe.relative.alibi_slopes(heads)
    expected = pe.relative.alibi_bias(7, slopes, causal=causal)
    assert torch.equal(rv.alibi_bias_at(list(range(7)), slopes, causal=causal), expected)


def test_alibi_bias_at_scattered_positions_is_minus_slope_times_distance():
    positions = [3, 10, 11, 40]
    bias = rv.alibi_bias_at(positions, torch.tensor([0.5], dtype=torch.float64), causal=True)
    for i, pi in enumerate(positions):
        for j, pj in enumerate(positions):
            expected = -math.inf if pj > pi else -0.5 * abs(pi - pj)
            assert bias[0, i, j].item() == expected


# --- attention -------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(t=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))
def test_biased_attention_matches_a_loop(t, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(3, t, 4, generator=gen, dtype=torch.float64)
    bias = torch.randn(t, t, generator=gen, dtype=torch.float64)
    out, weights = rv.biased_attention(q, k, v, bias)
    ref_out, ref_weights = naive_attention(q, k, v, bias)
    torch.testing.assert_close(weights, ref_weights)
    torch.testing.assert_close(out, ref_out)


def test_biased_attention_without_bias_is_plain_attention():
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    out, weights = rv.biased_attention(x, x, x)
    torch.testing.assert_close(out, pe.self_attention(x, x, x))
    torch.testing.assert_close(weights, pe.attention_weights(x, x))


def test_shaw_attention_at_the_first_positions_is_the_library_method():
    gen = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 2, 6, 4, generator=gen, dtype=torch.float64)  # [H, T, D]
    a_k, a_v = torch.randn(2, 5, 4, generator=gen, dtype=torch.float64)
    for got, expected in zip(
        rv.shaw_attention_at(q, k, v, a_k, a_v),
        pe.relative.shaw_attention(q, k, v, a_k, a_v),
        strict=True,
    ):
        torch.testing.assert_close(got, expected)


@settings(max_examples=20, deadline=None)
@given(
    positions=st.lists(st.integers(0, 60), min_size=1, max_size=6),
    clip=st.integers(0, 3),
    seed=st.integers(0, 2**31 - 1),
)
def test_shaw_attention_at_scattered_positions_matches_a_loop(positions, clip, seed):
    gen = torch.Generator().manual_seed(seed)
    t, d = len(positions), 4
    q, k, v = torch.randn(3, t, d, generator=gen, dtype=torch.float64)
    a_k, a_v = torch.randn(2, 2 * clip + 1, d, generator=gen, dtype=torch.float64)
    z, weights = rv.shaw_attention_at(q, k, v, a_k, a_v, positions)
    for i in range(t):
        rows = [max(-clip, min(clip, positions[j] - positions[i])) + clip for j in range(t)]
        e = torch.stack([q[i] @ (k[j] + a_k[rows[j]]) / math.sqrt(d) for j in range(t)])
        alpha = e.softmax(0)
        torch.testing.assert_close(weights[i], alpha)
        expected = sum(alpha[j] * (v[j] + a_v[rows[j]]) for j in range(t))
        torch.testing.assert_close(z[i], expected)


# --- T5 buckets ------------------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (16, 64), (8, 20), (6, 9)])
def test_bucket_ranges_hold_exactly_the_offsets_of_their_bucket(
    bidirectional, num_buckets, max_distance
):
    rows = rv.bucket_ranges(
        bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert [r["bucket"] for r in rows] == list(range(num_buckets))
    offsets = torch.arange(-3 * max_distance, 3 * max_distance + 1)
    buckets = pe.relative.t5_bucket(
        offsets, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    for offset, bucket in zip(offsets.tolist(), buckets.tolist(), strict=True):
        r = rows[bucket]
        assert r["count"] != 0
        assert r["lo"] is None or r["lo"] <= offset
        assert r["hi"] is None or offset <= r["hi"]
    # every offset lands in some row: the finite counts and the open ends cover the scan
    for r in rows:
        if r["count"]:
            inside = offsets[(offsets >= r["lo"]) & (offsets <= r["hi"])]
            assert inside.numel() == r["count"]


def test_t5_encoder_buckets_as_printed_in_chapter_7():
    rows = rv.bucket_ranges()
    assert rows[16]["count"] == 0  # keys after the query at distance 0: none exist
    assert sum(r["count"] != 0 for r in rows) == 31
    assert (rows[8]["lo"], rows[8]["hi"], rows[8]["count"]) == (-11, -8, 4)
    assert (rows[14]["lo"], rows[14]["hi"]) == (-90, -64)
    assert (rows[15]["lo"], rows[15]["hi"], rows[15]["count"]) == (None, -91, None)
    assert (rows[31]["lo"], rows[31]["hi"], rows[31]["count"]) == (91, None, None)
    counts = [rows[b]["count"] for b in range(24, 31)]
    assert counts == [4, 4, 7, 9, 14, 18, 27]


def test_decoder_buckets_send_every_key_after_the_query_to_bucket_0():
    rows = rv.bucket_ranges(bidirectional=False)
    assert rows[0]["lo"] == 0 and rows[0]["hi"] is None  # 0 and every positive offset
    assert rows[1]["lo"] == rows[1]["hi"] == -1


def test_bucket_table_rows():
    table = rv.bucket_table(rv.bucket_ranges())
    assert len(table.rows) == 16  # 16 pairs of buckets, b beside b + 16
    assert table.rows[0] == ["0", "0", "1", "16", "none", "0"]
    assert table.rows[-1] == ["15", "≤ -91", "∞", "31", "≥ 91", "∞"]
    assert "<caption>" in table._repr_html_() and "32 T5 buckets" in table.caption
    odd = rv.bucket_table(rv.bucket_ranges(bidirectional=False, num_buckets=5), caption="Five.")
    assert len(odd.rows) == 5 and len(odd.columns) == 3 and odd.caption == "Five."


# --- the shift experiment --------------------------------------------------------------------


@pytest.fixture(scope="module")
def setup():
    return rv.make_shift_setup(6, num_heads=2, head_dim=8, max_distance=2, seed=3)


@settings(max_examples=15, deadline=None)
@given(shift=st.integers(1, 300), start=st.integers(0, 100))
def test_relative_schemes_do_not_notice_a_shift(setup, shift, start):
    for scheme in ("Shaw", "clipped bias", "T5", "ALiBi"):
        for what in ("weights", "outputs"):
            assert rv.shift_change(setup, scheme, shift, start=start, what=what) == 0.0
    assert rv.shift_change(setup, "RoPE", shift, start=start) < 1e-10


@pytest.mark.parametrize("scheme", ["sinusoidal", "learned"])
@pytest.mark.parametrize("shift", [1, 7, 100])
def test_absolute_schemes_change_with_a_shift(setup, scheme, shift):
    assert rv.shift_change(setup, scheme, shift) > 1e-3
    assert rv.shift_change(setup, scheme, shift, what="outputs") > 1e-3


def test_attention_at_matches_each_method_written_out(setup):
    t = setup.content.shape[0]
    positions = list(range(t))

    def heads(w):
        return (setup.content @ w).reshape(t, 2, 8).transpose(0, 1)  # [H, T, D]

    q, k, v = heads(setup.w_q), heads(setup.w_k), heads(setup.w_v)
    expected = {
        "Shaw": pe.relative.shaw_attention(q, k, v, setup.a_k, setup.a_v),
        "T5": rv.biased_attention(q, k, v, pe.relative.t5_bias(t, setup.t5_table)),
        "ALiBi": rv.biased_attention(q, k, v, pe.relative.alibi_bias(t, setup.slopes)),
        "RoPE": rv.biased_attention(pe.apply_rope(q), pe.apply_rope(k), v),
    }
    for scheme, (out, weights) in expected.items():
        got_out, got_weights = rv.attention_at(setup, scheme, positions)
        torch.testing.assert_close(got_out, out)
        torch.testing.assert_close(got_weights, weights)
    # sinusoidal: the encoding is added to the inputs before the projections
    x = setup.content + pe.sinusoidal_encoding(t, 16).double()
    qs, ks, vs = (
        (x @ w).reshape(t, 2, 8).transpose(0, 1) for w in (setup.w_q, setup.w_k, setup.w_v)
    )
    for ref, got in zip(
        rv.biased_attention(qs, ks, vs),
        rv.attention_at(setup, "sinusoidal", positions),
        strict=True,
    ):
        torch.testing.assert_close(got, ref)


def test_shift_changes_and_table(setup):
    changes = rv.shift_changes(setup, [1, 5], ["T5", "sinusoidal"])
    assert changes["T5"] == [0.0, 0.0] and min(changes["sinusoidal"]) > 0
    outputs = rv.shift_changes(setup, [1, 5], ["T5", "sinusoidal"], what="outputs")
    lines = rv.format_shift_table(changes, outputs).splitlines()
    assert lines[1].split()[-1] == "True" and lines[2].split()[-1] == "False"
    # a change below the tolerance is reported as rounding
    assert rv.format_shift_table({"x": [1e-12]}).splitlines()[1].split() == ["x", "0", "True"]
    assert rv.format_shift_table({"x": [0.26]}).splitlines()[1].split() == ["x", "0.3", "False"]


def test_setup_is_reproducible_from_its_seed():
    a = rv.make_shift_setup(4, num_heads=2, head_dim=4, seed=7)
    b = rv.make_shift_setup(4, num_heads=2, head_dim=4, seed=7)
    assert torch.equal(a.content, b.content) and torch.equal(a.learned, b.learned)
    assert a.content.dtype == torch.float64
    c = rv.make_shift_setup(4, num_heads=2, head_dim=4, seed=7, dtype=torch.float32)
    assert c.w_q.dtype == torch.float32


def test_figures_draw():
    assert len(rv.t5_figure(20).axes) == 4
    assert len(rv.alibi_figure(10, 8, heads=(0, 7)).axes) == 4
    fig = rv.shift_figure({"T5": [0.0, 0.0], "sinusoidal": [0.1, 0.2]}, [1, 2])
    assert len(fig.axes[0].lines) == 2
    same = {"T5": [0.0, 0.0], "RoPE": [1e-17, 0.0], "ALiBi": [0.0, 0.0], "learned": [0.5, 0.9]}
    labels = [line.get_label() for line in rv.shift_figure(same, [1, 2]).axes[0].lines]
    assert labels == ["T5, RoPE, ALiBi", "learned"]  # curves equal up to rounding share a line


# --- bad input -------------------------------------------------------------------------------


def test_bad_input_raises_clear_errors(setup):
    with pytest.raises(TypeError, match="positions must hold integers"):
        rv.offset_matrix(torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="positions must not be empty"):
        rv.offset_matrix([])
    with pytest.raises(ValueError, match="max_distance must be at least 0"):
        rv.clipped_offset_indices([0, 1], -1)
    with pytest.raises(ValueError, match="odd number of rows"):
        rv.clipped_bias([0, 1], torch.zeros(4, 1))
    with pytest.raises(TypeError, match="table must have a floating dtype"):
        rv.t5_bias_at([0, 1], torch.zeros(32, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="slopes must be 1-D"):
        rv.alibi_bias_at([0, 1], torch.zeros(2, 2))
    x = torch.zeros(3, 4)
    with pytest.raises(ValueError, match="bias must end in"):
        rv.biased_attention(x, x, x, torch.zeros(2, 2))
    with pytest.raises(ValueError, match="q and k must share D"):
        rv.biased_attention(x, torch.zeros(3, 5), x)
    with pytest.raises(ValueError, match="positions must have T=3"):
        rv.shaw_attention_at(x, x, x, torch.zeros(3, 4), torch.zeros(3, 4), [0, 1])
    with pytest.raises(ValueError, match="a_k and a_v must both be"):
        rv.shaw_attention_at(x, x, x, torch.zeros(3, 4), torch.zeros(5, 4))
    with pytest.raises(ValueError, match="scheme must be one of"):
        rv.attention_at(setup, "XPos", list(range(6)))
    with pytest.raises(ValueError, match="below the learned table"):
        rv.attention_at(setup, "learned", list(range(600, 606)))
    with pytest.raises(ValueError, match="positions must have T=6"):
        rv.attention_at(setup, "T5", [0, 1])
    with pytest.raises(TypeError, match="setup must be a ShiftSetup"):
        rv.shift_change("setup", "T5", 1)
    with pytest.raises(ValueError, match="start \\+ shift must be non-negative"):
        rv.shift_change(setup, "T5", -5, start=2)
    with pytest.raises(ValueError, match="what must be"):
        rv.shift_change(setup, "T5", 1, what="scores")
    with pytest.raises(ValueError, match="shifts must not be empty"):
        rv.shift_changes(setup, [])
    with pytest.raises(ValueError, match="tolerance must be positive"):
        rv.format_shift_table({"x": [0.0]}, tolerance=0.0)
    with pytest.raises(ValueError, match="outputs must name the schemes"):
        rv.format_shift_table({"x": [0.0]}, {"y": [0.0]})
    with pytest.raises(ValueError, match="head_dim must be even"):
        rv.make_shift_setup(4, head_dim=5)
    with pytest.raises(TypeError, match="dtype must be a floating"):
        rv.make_shift_setup(4, dtype=torch.int64)
    with pytest.raises(ValueError, match="rows must be bucket_ranges"):
        rv.bucket_table([])
    with pytest.raises(ValueError, match="num_buckets must be even"):
        rv.bucket_ranges(num_buckets=31)
    with pytest.raises(ValueError, match="heads must name 1 to 3 heads"):
        rv.alibi_figure(8, 8, heads=())
    with pytest.raises(ValueError, match="heads entries must be below H=4"):
        rv.alibi_figure(8, 4, heads=(4,))
    with pytest.raises(ValueError, match="head must be below H=1"):
        rv.t5_figure(8, head=1)
    with pytest.raises(ValueError, match="changes\\['T5'\\] has 1 entries"):
        rv.shift_figure({"T5": [0.0]}, [1, 2])
    with pytest.raises(TypeError, match="caption must be a string"):
        rv.bucket_table(rv.bucket_ranges(), caption=3)
    with pytest.raises(ValueError, match="changes must hold at most 6 distinct curves"):
        rv.shift_figure({f"s{i}": [float(i)] for i in range(7)}, [1])
