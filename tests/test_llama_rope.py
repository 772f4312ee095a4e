"""RoPE as Llama 3.2 runs it: layouts, converted weights, llama3 bands, transformers."""

import importlib.util
import math
from types import SimpleNamespace

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import rope, scaling
from posenc.book import llama_rope
from posenc.display import plots

even_dims = st.integers(1, 12).map(lambda h: 2 * h)


# --- naive references: plain Python loops over pairs ------------------------------------------


def naive_rotate(x, positions, inv_freq, pair):
    """Turn x[t] (a list of floats) by positions[t] * inv_freq[i] on the features pair(i)."""
    out = []
    for row, p in zip(x.tolist(), positions, strict=True):
        new = list(row)
        for i, theta in enumerate(inv_freq):
            a, b = pair(i)
            c, s = math.cos(p * theta), math.sin(p * theta)
            new[a], new[b] = row[a] * c - row[b] * s, row[a] * s + row[b] * c
        out.append(new)
    return torch.tensor(out, dtype=torch.float64)


# --- layouts -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [2, 4, 8, 64])
@pytest.mark.parametrize("position", [1, 7, 131071])
def test_rotation_partners_of_both_layouts(dim, position):
    inter = llama_rope.rotation_partners(rope.rope_matrix(position, dim, layout="interleaved"))
    half = llama_rope.rotation_partners(rope.rope_matrix(position, dim, layout="half"))
    assert inter.tolist() == [j ^ 1 for j in range(dim)]
    assert half.tolist() == [(j + dim // 2) % dim for j in range(dim)]


def test_rotation_partners_rejects_what_is_not_a_pair_rotation():
    with pytest.raises(ValueError, match="column 0 has 0"):
        llama_rope.rotation_partners(torch.eye(4))  # position 0: nothing turns
    with pytest.raises(ValueError, match="column 0 has 3"):
        llama_rope.rotation_partners(torch.ones(4, 4))
    with pytest.raises(ValueError, match="square"):
        llama_rope.rotation_partners(torch.ones(4, 2))
    with pytest.raises(TypeError, match="floating"):
        llama_rope.rotation_partners(torch.eye(4, dtype=torch.long))


@settings(max_examples=25, deadline=None)
@given(
    dim=even_dims,
    t=st.integers(1, 6),
    log_base=st.floats(1, 6),
    seed=st.integers(0, 2**31 - 1),
)
def test_complex_rope_is_the_interleaved_layout(dim, t, log_base, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(t, dim, generator=gen, dtype=torch.float64)
    positions = torch.randint(-3000, 3000, (t,), generator=gen)
    inv_freq = rope.rope_inv_freq(dim, 10**log_base)
    got = llama_rope.complex_rope(x, positions, inv_freq=inv_freq)
    expected = naive_rotate(x, positions.tolist(), inv_freq.tolist(), lambda i: (2 * i, 2 * i + 1))
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got, rope.apply_rope(x, positions, inv_freq=inv_freq))


def test_complex_rope_keeps_dtype_and_checks_input():
    x = torch.randn(3, 8)
    assert llama_rope.complex_rope(x).dtype == torch.float32
    with pytest.raises(ValueError, match="T=3"):
        llama_rope.complex_rope(x, [0, 1])
    with pytest.raises(ValueError, match="even"):
        llama_rope.complex_rope(torch.randn(3, 5))
    with pytest.raises(ValueError, match="D/2 = 4"):
        llama_rope.complex_rope(x, inv_freq=torch.ones(3))
    with pytest.raises(ValueError, match="non-negative"):
        llama_rope.complex_rope(x, inv_freq=torch.tensor([1.0, -1.0, 1.0, 1.0]))
    # a pair with frequency 0 does not turn (p-RoPE)
    still = llama_rope.complex_rope(x, inv_freq=torch.tensor([1.0, 0.5, 0.0, 0.0]))
    assert torch.equal(still[:, 4:], x[:, 4:])


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(1, 2),
    t=st.integers(1, 6),
    h=st.integers(1, 3),
    dim=even_dims,
    seed=st.integers(0, 2**31 - 1),
)
def test_concept_note_code_is_the_half_layout(b, t, h, dim, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, h, dim, generator=gen, dtype=torch.float64)  # [B, T, H, D]
    got = llama_rope.concept_note_rope(x)
    # independent reading of the note's code: theta_i = 10000**(-i / (D/2)), x[i] with x[i+D/2]
    freqs = [10000.0 ** (-i / (dim // 2)) for i in range(dim // 2)]
    for bi in range(b):
        for hi in range(h):
            expected = naive_rotate(
                x[bi, :, hi], list(range(t)), freqs, lambda i: (i, i + dim // 2)
            )
            torch.testing.assert_close(got[bi, :, hi], expected)
    half = rope.apply_rope(x.transpose(1, 2), layout="half").transpose(1, 2)
    torch.testing.assert_close(got, half)
    # and it is the interleaved layout once the features are reordered
    perm = rope.layout_permutation(dim)
    inter = rope.apply_rope(x.transpose(1, 2), layout="interleaved").transpose(1, 2)
    torch.testing.assert_close(llama_rope.concept_note_rope(x[..., perm]), inter[..., perm])


@pytest.mark.parametrize("dim", [2, 8, 64])
@pytest.mark.parametrize("position", [1, 5, 40])
def test_concept_note_matrix(dim, position):
    m = llama_rope.concept_note_matrix(position, dim)
    torch.testing.assert_close(m, rope.rope_matrix(position, dim, layout="half"))
    torch.testing.assert_close(m.T @ m, torch.eye(dim, dtype=torch.float64))
    assert llama_rope.rotation_partners(m).tolist() == [(j + dim // 2) % dim for j in range(dim)]


def test_concept_note_checks_input():
    with pytest.raises(ValueError, match=r"\[B, T, H, D\]"):
        llama_rope.concept_note_rope(torch.zeros(1, 2, 3, 4, 5))
    with pytest.raises(ValueError, match="at least 4 dimensions"):
        llama_rope.concept_note_rope(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="even"):
        llama_rope.concept_note_rope(torch.zeros(1, 2, 3, 5))
    with pytest.raises(ValueError, match="at most 4096"):
        llama_rope.concept_note_matrix(5000, 4)
    with pytest.raises(ValueError, match="at least 0"):
        llama_rope.concept_note_matrix(-1, 4)


# --- converted weights -----------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    heads=st.integers(1, 5),
    dim=even_dims,
    cols=st.integers(1, 7),
    seed=st.integers(0, 2**31 - 1),
)
def test_converter_permute_equals_permute_qk_rows(heads, dim, cols, seed):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(heads * dim, cols, generator=gen, dtype=torch.float64)
    got = llama_rope.converter_permute(w, heads)
    assert torch.equal(got, rope.permute_qk_rows(w, heads))
    # row j of head h comes from row (2j if j < D/2 else 2(j - D/2) + 1) of the same head
    for h in range(heads):
        for j in range(dim):
            src = 2 * j if j < dim // 2 else 2 * (j - dim // 2) + 1
            assert torch.equal(got[h * dim + j], w[h * dim + src])


def test_converter_permute_checks_input():
    with pytest.raises(ValueError, match="even size"):
        llama_rope.converter_permute(torch.zeros(6, 3), 2)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        llama_rope.converter_permute(torch.zeros(8), 2)
    with pytest.raises(ValueError, match=r"\[H \* D, E\]"):
        llama_rope.converter_permute(torch.zeros(8, 2, 1), 2)
    with pytest.raises(TypeError, match="num_heads must be an int"):
        llama_rope.converter_permute(torch.zeros(8, 2), 2.0)


def naive_scores(x, w_q, w_k, heads, kv_heads, positions, inv_freq, layout):
    """Loops over heads and positions with the dense RoPE matrices."""
    dim = w_q.shape[0] // heads
    q, k = x @ w_q.T, x @ w_k.T  # [T, H * D], [T, H_kv * D]
    mats = [rope.rope_matrix(p, dim, inv_freq=inv_freq, layout=layout) for p in positions]
    out = torch.zeros(heads, len(positions), len(positions), dtype=torch.float64)
    group = heads // kv_heads
    for h in range(heads):
        g = h // group
        for m in range(len(positions)):
            qm = mats[m] @ q[m, h * dim : (h + 1) * dim]
            for n in range(len(positions)):
                out[h, m, n] = qm @ (mats[n] @ k[n, g * dim : (g + 1) * dim])
    return out


@settings(max_examples=20, deadline=None)
@given(
    kv_heads=st.integers(1, 3),
    group=st.integers(1, 3),
    dim=st.sampled_from([2, 4, 8]),
    t=st.integers(1, 5),
    width=st.integers(1, 6),
    layout=st.sampled_from(rope.LAYOUTS),
    seed=st.integers(0, 2**31 - 1),
)
def test_rope_scores_against_loops_and_under_conversion(
    kv_heads, group, dim, t, width, layout, seed
):
    heads = kv_heads * group
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(t, width, generator=gen, dtype=torch.float64)
    w_q = torch.randn(heads * dim, width, generator=gen, dtype=torch.float64)
    w_k = torch.randn(kv_heads * dim, width, generator=gen, dtype=torch.float64)
    positions = torch.randint(0, 10**5, (t,), generator=gen)
    inv_freq = rope.rope_inv_freq(dim, 500.0)
    kwargs = {"num_heads": heads, "num_kv_heads": kv_heads, "positions": positions}
    got = llama_rope.rope_scores(x, w_q, w_k, inv_freq=inv_freq, layout=layout, **kwargs)
    expected = naive_scores(x, w_q, w_k, heads, kv_heads, positions.tolist(), inv_freq, layout)
    torch.testing.assert_close(got, expected)
    if layout == "interleaved":  # converting the weights keeps every score
        converted = llama_rope.rope_scores(
            x,
            rope.permute_qk_rows(w_q, heads),
            rope.permute_qk_rows(w_k, kv_heads),
            inv_freq=inv_freq,
            layout="half",
            **kwargs,
        )
        torch.testing.assert_close(converted, got)


def test_unconverted_weights_change_the_scores():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(6, 16, generator=gen, dtype=torch.float64)
    w_q, w_k = torch.randn(2, 16, 16, generator=gen, dtype=torch.float64)
    meta = llama_rope.rope_scores(x, w_q, w_k, num_heads=2)
    wrong = llama_rope.rope_scores(x, w_q, w_k, num_heads=2, layout="half")
    assert not torch.allclose(wrong, meta)
    torch.testing.assert_close(wrong[:, 0, 0], meta[:, 0, 0])  # position 0 does not turn


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_heads": 3}, ValueError, "even size"),
        ({"num_heads": 2, "num_kv_heads": 3}, ValueError, "divide"),
        ({"num_heads": 4, "num_kv_heads": 2}, ValueError, "num_kv_heads \\* D = 4 rows"),
        ({"num_heads": 2, "layout": "neox"}, ValueError, "layout"),
        ({"num_heads": 0}, ValueError, "at least 1"),
    ],
)
def test_rope_scores_checks_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        llama_rope.rope_scores(torch.zeros(3, 5), torch.zeros(8, 5), torch.zeros(8, 5), **kwargs)


def test_rope_scores_checks_widths():
    with pytest.raises(ValueError, match="E=5"):
        llama_rope.rope_scores(torch.zeros(3, 5), torch.zeros(8, 4), torch.zeros(8, 5), num_heads=2)


# --- llama3 frequencies ----------------------------------------------------------------------


def test_llama_3_2_bands():
    unscaled = llama_rope.llama32_inv_freq(scaled=False)
    bands = llama_rope.llama3_bands(unscaled)
    assert bands == ["kept"] * 15 + ["smoothed"] * 3 + ["divided"] * 14
    assert llama_rope.band_counts(bands) == {"kept": 15, "smoothed": 3, "divided": 14}
    scaled = llama_rope.llama32_inv_freq()
    assert llama_rope.bands_from_ratio(scaled, unscaled, 32.0, rtol=1e-12) == bands
    torch.testing.assert_close(unscaled, rope.rope_inv_freq(64, 500000.0))


@settings(max_examples=40, deadline=None)
@given(
    half=st.integers(2, 64),
    log_base=st.floats(2, 7),
    factor=st.floats(1.5, 64),
    low=st.floats(0.5, 2),
    gap=st.floats(0.5, 8),
    original=st.integers(256, 16384),
)
def test_bands_from_wavelength_agree_with_the_scaled_frequencies(
    half, log_base, factor, low, gap, original
):
    unscaled = rope.rope_inv_freq(2 * half, 10**log_base)
    scaled = scaling.llama3_inv_freq(unscaled, factor, low, low + gap, original)
    bands = llama_rope.llama3_bands(unscaled, low, low + gap, original)
    assert llama_rope.bands_from_ratio(scaled, unscaled, factor, rtol=1e-9) == bands
    # the rule itself, pair by pair
    for theta, band in zip(unscaled.tolist(), bands, strict=True):
        turns = original / (2 * math.pi / theta)
        assert band == ("kept" if turns > low + gap else "divided" if turns < low else "smoothed")


def test_band_helpers_check_input():
    with pytest.raises(ValueError, match="exceed"):
        llama_rope.llama3_bands(torch.ones(4), 4.0, 1.0)
    with pytest.raises(ValueError, match="positive"):
        llama_rope.llama3_bands(torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="1-D"):
        llama_rope.llama3_bands(torch.ones(2, 2))
    with pytest.raises(ValueError, match="outside"):
        llama_rope.bands_from_ratio(torch.tensor([2.0]), torch.ones(1), 4.0)
    with pytest.raises(ValueError, match="D/2 = 2"):
        llama_rope.bands_from_ratio(torch.ones(2), torch.ones(3), 4.0)
    with pytest.raises(ValueError, match="exceed 1"):
        llama_rope.bands_from_ratio(torch.ones(2), torch.ones(2), 1.0)
    with pytest.raises(ValueError, match="labels"):
        llama_rope.band_counts(["kept", "stretched"])
    with pytest.raises(TypeError, match="bool"):
        llama_rope.llama32_inv_freq(scaled=1)


def test_band_table():
    unscaled = llama_rope.llama32_inv_freq(scaled=False)
    scaled = llama_rope.llama32_inv_freq()
    bands = llama_rope.llama3_bands(unscaled)
    table = llama_rope.band_table(unscaled, scaled, bands, [0, 16, 31])
    assert table.columns[2] == "turns in 8192" and len(table.rows) == 3
    pair, before, turns, band, _ = table.rows[1]
    assert (int(pair), band) == (16, "smoothed")
    assert int(before) == round(2 * math.pi * 500000.0**0.5)
    assert float(turns) == round(8192 / (2 * math.pi * 500000.0**0.5), 2)
    assert int(table.rows[2][-1]) == round(2 * math.pi / (unscaled[31].item() / 32))
    html = table._repr_html_()
    assert "<caption>" in html and "<td" in html and "8192 positions" in table.caption
    text = str(table).splitlines()  # caption, header, one line per pair
    assert len(text) == 5 and text[2].split()[0] == "0"
    with pytest.raises(ValueError, match="below D/2 = 32"):
        llama_rope.band_table(unscaled, scaled, bands, [32])
    with pytest.raises(ValueError, match="one label per pair"):
        llama_rope.band_table(unscaled, scaled, bands[:3], [0])


def test_figures():
    unscaled = llama_rope.llama32_inv_freq(scaled=False)
    bands = llama_rope.llama3_bands(unscaled)
    fig = llama_rope.frequency_figure(unscaled, llama_rope.llama32_inv_freq(), bands)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and len(ax.lines) == 4  # two curves, two band edges
    assert ax.get_legend().get_texts()[0].get_text() == "unscaled"  # curves first
    plt.close(fig)
    fig = llama_rope.layout_figure(6, 2)
    assert len(fig.axes) == 3  # two matrices and a colour bar
    assert plots.layout(fig).problems() == []
    plt.close(fig)
    with pytest.raises(ValueError, match="at most 32"):
        llama_rope.layout_figure(64)
    with pytest.raises(ValueError, match="one label per pair"):
        llama_rope.frequency_figure(unscaled, unscaled, bands[:4])


# --- transformers ----------------------------------------------------------------------------

needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed"
)

LLAMA_SETTINGS = {
    "rope_theta": 500000.0,
    "rope_type": "llama3",
    "head_dim": 64,
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


@needs_transformers
def test_config_keeps_the_llama_3_2_settings():
    assert llama_rope.rope_settings(llama_rope.llama32_config()) == LLAMA_SETTINGS
    plain = llama_rope.rope_settings(llama_rope.llama32_config(scaled=False))
    assert plain == {"rope_theta": 500000.0, "rope_type": "default", "head_dim": 64}
    with pytest.raises(TypeError, match="bool"):
        llama_rope.llama32_config(scaled="yes")


@needs_transformers
def test_rope_settings_reads_the_4x_form():
    old = SimpleNamespace(
        rope_theta=10000,
        rope_scaling={"type": "linear", "factor": 2},
        hidden_size=64,
        num_attention_heads=2,
    )
    assert llama_rope.rope_settings(old) == {
        "rope_theta": 10000.0,
        "rope_type": "linear",
        "head_dim": 32,
        "factor": 2.0,
    }
    with pytest.raises(TypeError, match="no RoPE settings"):
        llama_rope.rope_settings(SimpleNamespace(hidden_size=64))


@needs_transformers
def test_transformers_frequencies_match_posenc():
    hf = llama_rope.transformers_inv_freq()
    assert hf.dtype == torch.float32 and hf.shape == (32,)
    ours = llama_rope.llama32_inv_freq()
    assert (hf.double() - ours).abs().max() < 1e-7
    assert ((hf.double() - ours).abs() / ours).max() < 4 * torch.finfo(torch.float32).eps
    plain = llama_rope.transformers_inv_freq(llama_rope.llama32_config(scaled=False))
    assert llama_rope.bands_from_ratio(hf, plain, 32.0) == llama_rope.llama3_bands(
        llama_rope.llama32_inv_freq(scaled=False)
    )


@needs_transformers
@settings(max_examples=10, deadline=None)
@given(t=st.integers(1, 8), seed=st.integers(0, 2**31 - 1))
def test_transformers_rope_matches_posenc_half_layout(t, seed):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 4, t, 64, generator=gen)
    k = torch.randn(2, 1, t, 64, generator=gen)
    positions = torch.randint(0, 131072, (t,), generator=gen)
    out = llama_rope.transformers_rope(q, k, positions)
    assert out.q.shape == q.shape and out.k.shape == k.shape
    for ours, theirs in ((q, out.q), (k, out.k)):
        rotated = rope.apply_rope(ours, positions, inv_freq=out.inv_freq, layout="half")
        assert (rotated - theirs).abs().max() < 1e-5
    # and not the interleaved layout (unless nothing turns)
    if bool((positions != 0).any()):
        inter = rope.apply_rope(q, positions, inv_freq=out.inv_freq, layout="interleaved")
        assert not torch.allclose(inter, out.q, atol=1e-5)


@needs_transformers
def test_transformers_rope_default_positions_and_errors():
    q, k = torch.randn(2, 1, 2, 3, 64)
    out = llama_rope.transformers_rope(q, k)
    torch.testing.assert_close(
        out.q, rope.apply_rope(q, inv_freq=out.inv_freq, layout="half"), atol=1e-5, rtol=0
    )
    with pytest.raises(ValueError, match="head_dim = 64"):
        llama_rope.transformers_rope(torch.randn(1, 1, 3, 32), torch.randn(1, 1, 3, 32))
    with pytest.raises(ValueError, match="share B, T, D"):
        llama_rope.transformers_rope(q, torch.randn(1, 2, 4, 64))
    with pytest.raises(ValueError, match="at least 4 dimensions"):
        llama_rope.transformers_rope(q[0], k[0])
    with pytest.raises(ValueError, match=r"\[B, H, T, D\]"):
        llama_rope.transformers_rope(q[None], k[None])
    with pytest.raises(ValueError, match="T=3"):
        llama_rope.transformers_rope(q, k, [0, 1])
    with pytest.raises(TypeError, match="integers"):
        llama_rope.transformers_rope(q, k, [0.0, 1.0, 2.0])
