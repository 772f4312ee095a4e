"""Sine waves: the identities chapter 4 relies on, against plain ``math`` references."""

import itertools
import math

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc.book import waves

angles = st.floats(-50.0, 50.0, allow_nan=False)
turn = st.floats(0.0, 2 * math.pi, allow_nan=False, exclude_max=True)


@settings(max_examples=60, deadline=None)
@given(
    t=st.lists(angles, min_size=1, max_size=8),
    amplitude=st.floats(0.0, 5.0),
    frequency=st.floats(0.01, 10.0),
    phase=st.floats(-10.0, 10.0),
)
def test_wave_matches_math_sin(t, amplitude, frequency, phase):
    got = waves.wave(torch.tensor(t, dtype=torch.float64), amplitude, frequency, phase)
    want = torch.tensor(
        [amplitude * math.sin(frequency * x + phase) for x in t], dtype=torch.float64
    )
    torch.testing.assert_close(got, want, rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    ("t", "dtype"),
    [
        (0.5, torch.float32),
        (torch.tensor([1, 2]), torch.float32),
        (torch.zeros(3).double(), torch.float64),
    ],
)
def test_wave_dtype(t, dtype):
    assert waves.wave(t).dtype == dtype


@settings(max_examples=50, deadline=None)
@given(t=st.lists(angles, min_size=1, max_size=16))
def test_cosine_is_sine_a_quarter_turn_ahead(t):
    x = torch.tensor(t, dtype=torch.float64)
    torch.testing.assert_close(waves.wave(x, phase=math.pi / 2), torch.cos(x), rtol=0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(t=angles, frequency=st.floats(0.05, 20.0), phase=st.floats(-4.0, 4.0))
def test_period_and_phase_shift(t, frequency, phase):
    x = torch.tensor([t], dtype=torch.float64)
    y = waves.wave(x, 1.5, frequency, phase)
    later = waves.wave(x + waves.period(frequency), 1.5, frequency, phase)
    shifted = waves.wave(x + phase / frequency, 1.5, frequency, 0.0)
    torch.testing.assert_close(later, y, rtol=0, atol=1e-9)
    torch.testing.assert_close(shifted, y, rtol=0, atol=1e-9)


@pytest.mark.parametrize("amplitude", [0.0, 0.5, 2.0, 3.0])
def test_amplitude_is_the_height(amplitude):
    t = torch.linspace(0, 2 * math.pi, 4001, dtype=torch.float64)
    y = waves.wave(t, amplitude, 3.0)
    assert abs(y.max().item() - amplitude) < 1e-5 * max(amplitude, 1.0)
    assert abs(y.min().item() + amplitude) < 1e-5 * max(amplitude, 1.0)


def test_value_table_over_one_turn():
    labels, values = waves.value_table()
    assert labels == ["0", "π/2", "π", "3π/2", "2π"]
    assert values.tolist() == [[0, 1, 0, -1, 0], [1, 0, -1, 0, 1]]
    assert all(math.copysign(1.0, v) > 0 for v in values.flatten().tolist() if v == 0)


def test_value_table_labels_further_round():
    labels, values = waves.value_table(8)
    assert labels == ["0", "π/2", "π", "3π/2", "2π", "5π/2", "3π", "7π/2", "4π"]
    torch.testing.assert_close(values[:, 4:], values[:, :5])  # one turn later, the same


def test_rounded_drops_negative_zero():
    x = torch.tensor([-1e-17, -0.0, -0.4, 0.25, -1.0000004], dtype=torch.float64)
    out = waves.rounded(x, 6)
    assert out.tolist() == [0.0, 0.0, -0.4, 0.25, -1.0]
    assert [math.copysign(1.0, v) for v in out.tolist()[:2]] == [1.0, 1.0]


def test_format_table_layout():
    text = waves.format_table(
        ["0", "π/2"], torch.tensor([[0.0, 1.0], [1.0, -0.5]]), ["sin t", "cos t"]
    )
    lines = text.split("\n")
    assert [line.split() for line in lines] == [
        ["t", "0", "π/2"],
        ["sin", "t", "0", "1"],
        ["cos", "t", "1", "-0.5"],
    ]
    assert len({len(line) for line in lines}) == 1  # columns line up


@settings(max_examples=60, deadline=None)
@given(t=turn)
def test_sine_partner_shares_the_sine_and_is_an_involution(t):
    x = torch.tensor(t, dtype=torch.float64)
    partner = waves.sine_partner(x)
    assert 0.0 <= partner.item() < 2 * math.pi
    assert abs(math.sin(partner.item()) - math.sin(t)) < 1e-12
    back = waves.sine_partner(partner).item()
    assert min(abs(back - t), 2 * math.pi - abs(back - t)) < 1e-12  # equal on the circle


@pytest.mark.parametrize(
    ("t", "same"), [(math.pi / 2, True), (3 * math.pi / 2, True), (0.3, False)]
)
def test_sine_partner_is_itself_only_at_top_and_bottom(t, same):
    partner = waves.sine_partner(torch.tensor(t, dtype=torch.float64)).item()
    assert (abs(partner - t) < 1e-12) is same


def naive_collisions(points, atol):
    rows = points.reshape(points.shape[0], -1).tolist()
    return [
        [i, j]
        for i, j in itertools.combinations(range(len(rows)), 2)
        if max(abs(a - b) for a, b in zip(rows[i], rows[j], strict=True)) <= atol
    ]


@settings(max_examples=40, deadline=None)
@given(
    data=st.lists(st.integers(-3, 3), min_size=1, max_size=24),
    d=st.sampled_from([1, 2, 3]),
    atol=st.sampled_from([0.0, 0.5, 1.0]),
)
def test_collisions_match_naive_pairs(data, d, atol):
    rows = len(data) // d or 1
    values = (data * d)[: rows * d]
    points = torch.tensor(values, dtype=torch.float64).reshape(rows, d)
    if d == 1:
        points = points[:, 0]  # [T]
    assert waves.collisions(points, atol=atol).tolist() == naive_collisions(points, atol)


def test_collisions_in_blocks_agree_with_one_block():
    gen = torch.Generator().manual_seed(0)
    points = torch.randint(0, 40, (3000,), generator=gen).double()  # several row blocks
    got = waves.collisions(points, atol=0.0)
    same = points[:, None] == points[None, :]
    want = torch.nonzero(torch.triu(same, diagonal=1))
    assert torch.equal(got, want)


@pytest.mark.parametrize("n", [4, 12, 360, 1000])
def test_sine_collides_on_a_turn_and_the_pair_does_not(n):
    t = 2 * math.pi * torch.arange(n, dtype=torch.float64) / n  # [T]
    pairs = waves.collisions(torch.sin(t))
    assert len(pairs) == (n - 2) // 2  # every angle but the top and the bottom has a partner
    partners = waves.sine_partner(t[pairs[:, 0]])
    torch.testing.assert_close(partners, t[pairs[:, 1]], rtol=0, atol=1e-12)
    assert len(waves.collisions(torch.stack([torch.sin(t), torch.cos(t)], -1))) == 0


@settings(max_examples=80, deadline=None)
@given(t=turn)
def test_angle_from_pair_recovers_the_angle(t):
    x = torch.tensor([t], dtype=torch.float64)
    got = waves.angle_from_pair(torch.sin(x), torch.cos(x)).item()
    assert 0.0 <= got < 2 * math.pi
    assert min(abs(got - t), 2 * math.pi - abs(got - t)) < 1e-12


def test_angle_from_pair_stays_below_two_pi():
    # atan2 of a point just below the positive x-axis is a tiny negative angle, whose
    # remainder mod 2 pi rounds up to 2 pi in float64; it must wrap to 0 instead.
    got = waves.angle_from_pair(torch.tensor([-1e-17], dtype=torch.float64), torch.ones(1).double())
    assert 0.0 <= got.item() < 2 * math.pi


def test_figures_and_animation():
    fig = waves.explorer_figure(2.0, 3.0, 1.0)
    _, y_sin, y_cos = (line.get_ydata() for line in fig.axes[0].get_lines())
    t = torch.as_tensor(fig.axes[0].get_lines()[1].get_xdata())
    torch.testing.assert_close(torch.as_tensor(y_sin), 2.0 * torch.sin(3.0 * t + 1.0))
    torch.testing.assert_close(torch.as_tensor(y_cos), 2.0 * torch.cos(3.0 * t + 1.0))
    plt.close(fig)
    fig = waves.ambiguity_figure(4.0)
    plt.close(fig)
    anim = waves.circle_animation(2, dpi=20)
    assert anim.to_jshtml().count('"data:image/png;base64,') == 2
    plt.close("all")


def test_figures_keep_their_legends_off_the_curves():
    fig = waves.explorer_figure(2.0, 2.0, 0.5)
    (ax,) = fig.axes
    fig.canvas.draw()
    legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.y1 <= box.y0  # below the axes, not over the waves
    plt.close(fig)


def test_circle_animation_opens_past_the_top_of_the_sine():
    anim = waves.circle_animation(24)
    order = list(anim.new_frame_seq())
    assert sorted(order) == list(range(24))  # every stop once
    assert order[0] == 9  # t = 10 * 2 pi / 24 = 5 pi / 6: the sine on its way down
    assert anim._fig.dpi == pe.plots.CSS_DPI
    assert anim._fig.get_figwidth() == pytest.approx(pe.plots.FIGURE_WIDTH)
    anim._func(order[0])
    assert anim._fig.axes[1].get_title() == "t = 0.83π"
    anim._draw_was_started = True  # inspected, not rendered: no warning when collected
    plt.close(anim._fig)


def test_live_explorer_draws_the_figure(monkeypatch):
    pytest.importorskip("ipywidgets")
    drawn = []
    monkeypatch.setattr(waves.plots, "show", lambda fig: drawn.append(fig) or plt.close(fig))
    widget = waves._explorer_widget(1.0, 2.0, 0.5)
    sliders = {w.description: w for w in widget.children[:-1]}
    assert set(sliders) == {"amplitude A", "frequency f", "phase φ (rad)"}
    sliders["amplitude A"].value = 2.5
    title = drawn[-1].axes[0].get_title()
    assert title == "A = 2.50, f = 2.00, φ = 0.16π"
    assert len(drawn) == 2  # once when built, once for the change
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    waves.explorer()
    assert len(shown) == 1


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: waves.wave("0"), TypeError, "t must be a number or a tensor"),
        (lambda: waves.wave(torch.tensor([True])), TypeError, "t must be real"),
        (lambda: waves.wave(1.0, amplitude=-1.0), ValueError, "amplitude must be at least 0"),
        (lambda: waves.wave(1.0, frequency=0.0), ValueError, "frequency must be positive"),
        (lambda: waves.wave(1.0, phase=math.inf), ValueError, "phase must be finite"),
        (lambda: waves.wave(1.0, phase="0"), TypeError, "phase must be a real number"),
        (lambda: waves.period(-2.0), ValueError, "frequency must be positive"),
        (lambda: waves.rounded([0.1]), TypeError, "x must be a floating"),
        (lambda: waves.rounded(torch.zeros(1), -1), ValueError, "decimals must be at least 0"),
        (lambda: waves.value_table(-1), ValueError, "quarters must be at least 0"),
        (lambda: waves.value_table(2.0), TypeError, "quarters must be an int"),
        (lambda: waves.format_table(["a"], torch.zeros(2), ["x"]), TypeError, "2-D"),
        (lambda: waves.format_table(["a"], torch.zeros(1, 2), ["x"]), ValueError, "labels"),
        (lambda: waves.format_table(["a"], torch.zeros(1, 1), []), ValueError, "names"),
        (lambda: waves.sine_partner(None), TypeError, "t must be a number"),
        (lambda: waves.angle_from_pair(torch.zeros(2), [1.0, 0.0]), TypeError, "cos must be"),
        (lambda: waves.angle_from_pair(torch.zeros(2), torch.zeros(3)), ValueError, "same shape"),
        (lambda: waves.collisions(torch.zeros(0)), ValueError, "non-empty"),
        (lambda: waves.collisions(torch.zeros(2, 2, 2)), ValueError, r"\[T\] or \[T, D\]"),
        (lambda: waves.collisions(torch.arange(3)), TypeError, "floating"),
        (lambda: waves.collisions(torch.zeros(3), atol=-1.0), ValueError, "atol must be at least"),
        (lambda: waves.explorer_figure(turns=0.0), ValueError, "turns must be positive"),
        (lambda: waves.explorer(amplitude=-1.0), ValueError, "amplitude must be at least 0"),
        (lambda: waves.ambiguity_figure(7.0), ValueError, r"angle must be in \[0, 2 pi\)"),
        (lambda: waves.circle_animation(41), ValueError, "frames must be at most 40"),
        (lambda: waves.circle_animation(1), ValueError, "frames must be at least 2"),
        (lambda: waves.circle_animation(dpi=101), ValueError, "dpi must be at most 100"),
        (lambda: waves.circle_animation(dpi=10), ValueError, "dpi must be at least 20"),
    ],
)
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
