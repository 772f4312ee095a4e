"""The sinusoidal encoding's identities, checked against independent references (chapter 5)."""

import math

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc.book import sinusoidal_views as sv

dims = st.integers(1, 24).map(lambda n: 2 * n)  # even D in 2 .. 48
bases = st.floats(2.0, 1e6)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --- the formula -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "d", "base"), [(1, 2, 10000.0), (50, 16, 10000.0), (300, 128, 500.0)]
)
def test_library_encoding_is_the_naive_loop_rounded_to_float32(t, d, base):
    naive = sv.naive_sinusoidal_encoding(t, d, base)
    fast = pe.sinusoidal_encoding(t, d, base)
    assert naive.shape == fast.shape == (t, d)
    # float32 rounding of values in [-1, 1] is at most half a step at 1: 2**-25.
    assert (fast.double() - naive).abs().max().item() <= 2**-25 + 1e-12


@settings(max_examples=40, deadline=None)
@given(t=st.integers(1, 40), d=dims, base=bases)
def test_naive_loop_follows_the_formula_entry_by_entry(t, d, base):
    naive = sv.naive_sinusoidal_encoding(t, d, base)
    p, i = t - 1, d // 2 - 1  # the last row and the last pair
    angle = p * math.exp(-(2 * i / d) * math.log(base))
    assert naive[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
    assert naive[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)
    # every (sin, cos) pair lies on the unit circle
    pairs = naive.reshape(t, d // 2, 2)  # [T, D/2, 2]
    torch.testing.assert_close(pairs.norm(dim=-1), torch.ones(t, d // 2, dtype=torch.float64))


# --- direct and log-space frequencies -----------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(d=dims, base=bases)
def test_both_frequency_forms_agree_in_float64(d, base):
    reference = pe.sinusoidal_frequencies(d, base)
    direct = sv.direct_frequencies(d, base, dtype=torch.float64)
    log_space = sv.log_space_frequencies(d, base, dtype=torch.float64)
    torch.testing.assert_close(direct, reference, rtol=1e-12, atol=0)
    torch.testing.assert_close(log_space, reference, rtol=1e-12, atol=0)


@pytest.mark.parametrize("d", [8, 128, 512])
def test_float16_direct_form_overflows_above_65504_and_log_form_does_not(d):
    big = sv.compare_frequency_forms(d, 500000.0, dtype=torch.float16)
    # base**0 = 1 even for base = inf; every other power is inf, so 1/inf = 0.
    assert big["overflow"] == d // 2 - 1
    assert big["direct_zeros"] == d // 2 - 1
    assert big["log_zeros"] == 0
    assert big["log_error"] < 0.02
    small = sv.compare_frequency_forms(d, 10000.0, dtype=torch.float16)
    assert small["overflow"] == small["direct_zeros"] == small["log_zeros"] == 0


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_float32_has_no_overflow_and_the_direct_form_is_the_more_precise(base):
    r = sv.compare_frequency_forms(512, base, dtype=torch.float32)
    assert r["overflow"] == 0
    assert r["direct_error"] < 2e-7
    assert r["log_error"] < 2e-6
    assert r["direct_error"] < r["log_error"]


# --- wavelengths --------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(d=dims, base=bases)
def test_wavelengths_run_from_two_pi_geometrically(d, base):
    lam = sv.wavelengths(d, base)
    assert lam.shape == (d // 2,)
    assert lam[0].item() == pytest.approx(2 * math.pi, rel=1e-12)
    assert lam[-1].item() == pytest.approx(2 * math.pi * base ** ((d - 2) / d), rel=1e-10)
    if d > 2:
        ratios = lam[1:] / lam[:-1]
        torch.testing.assert_close(ratios, torch.full_like(ratios, base ** (2 / d)))
    # the last pair never reaches 2 pi base
    assert lam[-1].item() < 2 * math.pi * base


def test_wavelength_tables_print_the_exact_values():
    summary = sv.wavelength_range_table((128, 512), 10000.0)
    assert "54410.1" in summary and "60611.5" in summary and "62831.9" in summary
    table = sv.wavelength_table(128, every=16)
    assert [row[0] for row in table.rows] == ["0", "16", "32", "48", "63"]
    assert table.rows[-1][-1] == "5.441e+04"
    assert "every 16th pair and the last" in table.caption
    assert "<caption>" in table._repr_html_()


def test_frequency_forms_table_counts_the_float16_overflow():
    table = sv.frequency_forms_table()
    assert len(table.rows) == 8  # 2 dtypes x 2 bases x 2 sizes
    by_key = {(r[0], r[1], r[2]): r for r in table.rows}
    assert by_key[("float16", "5e+05", "128")][3:6] == ["63", "63", "0"]
    assert by_key[("float32", "5e+05", "512")][3:6] == ["0", "0", "0"]
    assert by_key[("float16", "1e+04", "512")][3] == "0"  # base 1e4 fits in float16


# --- the step between neighbours ----------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(d=dims, base=bases, t=st.integers(2, 200))
def test_sinusoidal_step_is_the_same_for_every_position(d, base, t):
    steps = sv.step_norms(sv.naive_sinusoidal_encoding(t, d, base))
    closed = sv.sinusoidal_step_norm(d, base)
    torch.testing.assert_close(steps, torch.full_like(steps, closed), rtol=1e-9, atol=1e-12)


def test_binary_step_is_the_square_root_of_the_flipped_bits():
    p = torch.arange(1023)
    steps = sv.step_norms(pe.binary_encoding(torch.arange(1024), 10))
    flipped = torch.tensor([bin(a ^ (a + 1)).count("1") for a in p.tolist()])
    torch.testing.assert_close(steps, flipped.float().sqrt())
    assert steps.min().item() == 1.0 and steps.max().item() == pytest.approx(math.sqrt(10))


# --- the dot product of two positions -----------------------------------------------------


def test_offset_dot_products_match_a_double_loop():
    gen = torch.Generator().manual_seed(3)
    e = torch.randn(9, 5, generator=gen, dtype=torch.float64)
    dots = sv.offset_dot_products(e, 3)
    assert dots.shape == (6, 4)
    for p in range(6):
        for k in range(4):
            assert dots[p, k].item() == pytest.approx(float(e[p] @ e[p + k]), abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    d=dims,
    base=bases,
    p=st.integers(0, 10**6),
    k=st.integers(-(10**4), 10**4),
)
def test_sinusoidal_dot_product_depends_on_the_offset_only(d, base, p, k):
    w = pe.sinusoidal_frequencies(d, base)  # [D/2], float64
    first = torch.stack([torch.sin(p * w), torch.cos(p * w)], -1).reshape(d)
    second = torch.stack([torch.sin((p + k) * w), torch.cos((p + k) * w)], -1).reshape(d)
    closed = sv.dot_product_closed_form([k], d, base)
    # angles up to ~1e6 rad carry float64 rounding of ~1e-10 per pair
    assert (first @ second).item() == pytest.approx(closed.item(), abs=1e-8 * d)


def test_dot_product_closed_form_is_even_in_the_offset_and_d_over_2_at_zero():
    k = torch.arange(-50, 51)
    closed = sv.dot_product_closed_form(k, 64)
    torch.testing.assert_close(closed, closed.flip(0))
    assert closed[50].item() == pytest.approx(32.0)


# --- learned table ------------------------------------------------------------------------


def test_rows_never_visited_in_training_keep_their_initial_values():
    table = pe.LearnedPositionalEmbedding(32, 16, seed=1)
    before = table.weight.detach().clone()
    readout = sv.fit_position_classifier(table, 8, steps=60)
    with torch.no_grad():
        predicted = readout(table(torch.arange(8))).argmax(-1)
    assert torch.equal(predicted, torch.arange(8))
    assert torch.equal(table.weight[8:], before[8:])
    assert bool(((table.weight[:8] - before[:8]).norm(dim=-1) > 0.1).all())


def test_fitting_a_read_out_leaves_the_global_random_stream_alone():
    """The read-out is seeded on its own: a notebook's later unseeded draws do not depend on
    whether it was fitted."""
    torch.manual_seed(0)
    untouched = torch.rand(3)
    table = pe.LearnedPositionalEmbedding(8, 4, seed=1)
    torch.manual_seed(0)
    sv.fit_position_classifier(table, 4, steps=1)
    assert torch.equal(torch.rand(3), untouched)


# --- figures ------------------------------------------------------------------------------


def test_heatmap_draws_the_encoding_itself():
    ax = sv.sinusoidal_heatmap(20, 8, 100.0)
    shown = torch.as_tensor(ax.images[0].get_array().data)
    torch.testing.assert_close(shown, pe.sinusoidal_encoding(20, 8, 100.0))
    assert ax.images[0].get_clim() == (-1.0, 1.0)


def test_animation_has_one_frame_per_position_and_opens_a_third_of_the_way():
    anim = sv.stepped_animation(15, 6, dpi=20)
    fig = anim._fig
    order = list(anim.new_frame_seq())
    assert order == [*range(5, 15), *range(5)]  # opens at position 15 // 3 = 5, then loops
    assert fig._suptitle.get_text() == "position 5 = 101 in binary"  # the opening frame
    html = pe.plots.animation_html(anim)  # renders every frame, ending on position 4
    assert html.data.count("data:image/png") == 15
    heights = [bar.get_height() for bar in fig.axes[1].patches]
    torch.testing.assert_close(torch.tensor(heights), pe.sinusoidal_encoding(15, 6)[4])
    bits = [bar.get_height() for bar in fig.axes[0].patches]
    assert bits == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # 4 = 0b100, least significant bit first
    assert fig._suptitle.get_text() == "position 4 = 100 in binary"


def test_animation_is_drawn_at_the_size_of_the_figures():
    anim = sv.stepped_animation(4, 4)
    assert anim._fig.dpi == pe.plots.CSS_DPI
    assert anim._fig.get_figwidth() == pytest.approx(pe.plots.FIGURE_WIDTH)
    import matplotlib.pyplot as plt

    anim._draw_was_started = True  # inspected, not rendered: no warning when collected
    plt.close(anim._fig)


def test_playground_has_three_sliders():
    interactive = sv.playground(50, 16, 100.0)
    kinds = [type(c).__name__ for c in interactive.widget.children]
    assert kinds[:3] == ["IntSlider", "IntSlider", "FloatLogSlider"]


def test_step_and_dot_product_figures_draw_their_curves():
    _, ax = sv.step_figure(16, 6)
    assert len(ax.lines) == 2
    _, ax = sv.dot_product_figure(8, max_offset=10, starts=[0, 5])
    assert len(ax.lines) == 3


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: sv.naive_sinusoidal_encoding(0, 4),
            ValueError,
            "num_positions must be at least 1",
        ),
        (lambda: sv.naive_sinusoidal_encoding(3, 5), ValueError, "dim must be even"),
        (
            lambda: sv.naive_sinusoidal_encoding(3, 4, -1.0),
            ValueError,
            "base must be finite and at least 2\\*\\*-64",
        ),
        (lambda: sv.direct_frequencies(4, dtype=torch.int32), ValueError, "dtype must be one of"),
        (lambda: sv.log_space_frequencies(4.0), TypeError, "dim must be an int"),
        (lambda: sv.wavelength_table(8, every=0), ValueError, "every must be at least 1"),
        (lambda: sv.wavelength_range_table([]), ValueError, "dims must name"),
        (lambda: sv.step_norms(torch.zeros(1, 4)), ValueError, "at least 2 positions"),
        (lambda: sv.step_norms(torch.zeros(3)), ValueError, "at least 2 dimensions"),
        (lambda: sv.step_norms(torch.zeros(2, 3, 4)), ValueError, r"2-D \[T, D\]"),
        (lambda: sv.step_norms([[0.0, 1.0]]), TypeError, "must be a torch.Tensor"),
        (lambda: sv.offset_dot_products(torch.zeros(3, 2), 3), ValueError, "more than max_offset"),
        (lambda: sv.offset_dot_products(torch.zeros(3, 2), -1), ValueError, "at least 0"),
        (lambda: sv.dot_product_closed_form([0.5], 4), TypeError, "offsets must hold integers"),
        (lambda: sv.stepped_animation(41), ValueError, "num_frames must be at most 40"),
        (lambda: sv.stepped_animation(8, 64), ValueError, "dim must be at most 62"),
        (lambda: sv.stepped_animation(8, dpi=101), ValueError, "dpi must be at most 100"),
        (lambda: sv.frequency_forms_table(dims=[6, 7]), ValueError, r"dims\[1\] must be even"),
        (lambda: sv.frequency_forms_table(bases=[0.0]), ValueError, r"bases\[0\]"),
        (lambda: sv.frequency_forms_table(dtypes=[torch.int8]), ValueError, r"dtypes\[0\]"),
        (lambda: sv.frequency_forms_table(dtypes="float16"), TypeError, "dtypes must be"),
        (lambda: sv.playground(dim=7), ValueError, "dim must be even"),
        (lambda: sv.playground(base=5.0), ValueError, "base must be in 10 .. 1e6"),
        (lambda: sv.encoding_heatmap(torch.zeros(2, 2), limit=0.0), ValueError, "limit"),
        (lambda: sv.dot_product_figure(starts=[]), ValueError, "starts must name"),
        (lambda: sv.dot_product_figure(starts=[-1]), ValueError, r"starts\[0\]"),
        (
            lambda: sv.fit_position_classifier(torch.nn.Embedding(4, 2), 2),
            TypeError,
            "LearnedPositionalEmbedding",
        ),
        (
            lambda: sv.fit_position_classifier(pe.LearnedPositionalEmbedding(4, 2), 5),
            ValueError,
            "train_length must be at most max_positions=4",
        ),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_training_leaves_the_thread_count_as_it_was():
    threads = torch.get_num_threads()
    table = pe.LearnedPositionalEmbedding(8, 4, seed=0)
    sv.fit_position_classifier(table, 4, steps=2)
    assert torch.get_num_threads() == threads
