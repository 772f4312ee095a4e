"""Bits of a position (chapter 3): flip intervals, periods, steps, and the chapter's animations."""

import base64
import gc
import io
import re

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.animation import FuncAnimation
from PIL import Image

import posenc as pe
from posenc.book import absolute_animations, bits


def naive_bits(p: int, n: int) -> list[int]:
    """Bits of p, least significant first, by repeated halving (the reference)."""
    out = []
    for _ in range(n):
        out.append(p % 2)
        p //= 2
    return out


def naive_codes(n: int, t: int) -> torch.Tensor:
    return torch.tensor([naive_bits(p, n) for p in range(t)], dtype=torch.float32)


# --- closed forms against counting -------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_counted_flip_gaps_are_powers_of_two(n):
    codes = naive_codes(n, 2 ** (n + 1))  # two full cycles of the most significant bit
    assert bits.flip_gaps(codes) == [[bits.flip_interval(j)] for j in range(n)]


@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_counted_period_of_each_bit(n):
    codes = naive_codes(n, 2 ** (n + 1))
    for j in range(n):
        assert bits.smallest_period(codes[:, j]) == bits.bit_period(j) == 2 * bits.flip_interval(j)


def test_msb_flips_every_half_cycle_and_repeats_every_full_cycle():
    n = 8
    codes = naive_codes(n, 4 * 2**n)
    msb = codes[:, n - 1]
    flips_at = (torch.nonzero(msb[1:] != msb[:-1]).flatten() + 1).tolist()
    assert flips_at == [128, 256, 384, 512, 640, 768, 896]
    assert bits.smallest_period(msb) == 2**n
    assert not torch.equal(msb[2 ** (n - 1) :], msb[: -(2 ** (n - 1))])  # 2^(n-1) is no period


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 9), data=st.data())
def test_first_flip_of_bit_j_is_at_position_two_to_the_j(n, data):
    j = data.draw(st.integers(0, n - 1))
    column = bits.bit_changes(naive_codes(n, 2**n))[:, j]  # [T-1]
    first = int(torch.nonzero(column)[0]) + 1
    assert first == 2**j


def test_flip_gaps_of_a_bit_that_never_flips_twice():
    codes = naive_codes(4, 10)  # bit 2 flips at 4 and 8, bit 3 only at 8
    assert bits.flip_gaps(codes) == [[1], [2], [4], []]


# --- bit strings ---------------------------------------------------------------------------


def test_252_is_11111100():
    assert bits.to_bitstring(252, 8) == "11111100" == format(252, "08b")
    assert bits.to_bitstring(252, 8, order="lsb") == "00111111"


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), data=st.data())
def test_bitstring_reads_back_and_matches_the_encoding(n, data):
    p = data.draw(st.integers(0, 2**n - 1))
    msb = bits.to_bitstring(p, n)
    assert int(msb, 2) == p and msb == format(p, f"0{n}b")
    lsb = bits.to_bitstring(p, n, order="lsb")
    assert lsb == msb[::-1]
    assert [int(c) for c in lsb] == pe.binary_encoding([p], n)[0].int().tolist()


# --- steps between neighbours --------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 10))
def test_squared_step_is_the_number_of_changed_bits(n):
    t = 2**n
    steps = bits.step_lengths(pe.binary_encoding(list(range(t)), n))
    changed = bits.bits_changed(list(range(t - 1)))
    torch.testing.assert_close(steps**2, changed.double())
    assert bits.bit_changes(naive_codes(n, t)).sum(dim=1).tolist() == changed.tolist()


@settings(max_examples=60, deadline=None)
@given(p=st.integers(0, 2**61))
def test_bits_changed_is_one_plus_trailing_ones(p):
    trailing = len(bin(p)) - len(bin(p).rstrip("1"))
    assert bits.bits_changed([p]).item() == 1 + trailing == bin(p ^ (p + 1)).count("1")


@pytest.mark.parametrize("n", [3, 8])
def test_distinct_steps_are_square_roots_of_one_to_n(n):
    steps = bits.step_lengths(pe.binary_encoding(list(range(2**n)), n))
    assert sorted({round(s, 9) for s in steps.tolist()}) == [
        round(k**0.5, 9) for k in range(1, n + 1)
    ]


def test_sinusoidal_steps_are_all_equal():
    steps = bits.step_lengths(pe.sinusoidal_encoding(300, 16).double())
    assert float(steps.max() - steps.min()) < 1e-5


def test_step_lengths_match_a_loop():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(7, 5, generator=gen, dtype=torch.float64)
    expected = torch.tensor([((x[i + 1] - x[i]) ** 2).sum().sqrt() for i in range(6)])
    torch.testing.assert_close(bits.step_lengths(x), expected.double())


@settings(max_examples=40, deadline=None)
@given(period=st.integers(1, 12), repeats=st.integers(2, 5), seed=st.integers(0, 2**31 - 1))
def test_smallest_period_finds_a_planted_period(period, repeats, seed):
    gen = torch.Generator().manual_seed(seed)
    block = torch.randint(0, 3, (period,), generator=gen)
    found = bits.smallest_period(block.repeat(repeats))
    assert period % found == 0  # the block may itself repeat
    assert torch.equal(block.repeat(repeats)[found:], block.repeat(repeats)[:-found])


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: bits.flip_interval(-1), ValueError, "bit must be at least 0"),
        (lambda: bits.flip_interval(62), ValueError, "at most 61"),
        (lambda: bits.bit_period(1.0), TypeError, "bit must be an int"),
        (lambda: bits.to_bitstring(256, 8), ValueError, "position must fit"),
        (lambda: bits.to_bitstring(3, 8, order="big"), ValueError, "order must be 'msb' or 'lsb'"),
        (lambda: bits.to_bitstring(3, 8, order=1), TypeError, "order must be a str"),
        (lambda: bits.to_bitstring(-1, 8), ValueError, "position must be at least 0"),
        (lambda: bits.bit_changes([[0, 1]]), TypeError, "codes must be a torch.Tensor"),
        (lambda: bits.bit_changes(torch.zeros(1, 3)), ValueError, "T >= 2"),
        (lambda: bits.bit_changes(torch.full((2, 3), 2.0)), ValueError, "only 0s and 1s"),
        (lambda: bits.smallest_period([1, 2, 3]), ValueError, "no period"),
        (lambda: bits.smallest_period([[1, 1]]), ValueError, "1-D"),
        (lambda: bits.step_lengths(torch.zeros(3, 2, dtype=torch.int64)), TypeError, "floating"),
        (lambda: bits.step_lengths(torch.zeros(3)), ValueError, r"\[T, D\]"),
        (lambda: bits.bits_changed([-2]), ValueError, "non-negative"),
        (lambda: bits.bits_changed([2**62]), ValueError, "below 2\\*\\*62"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- the chapter's animations --------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Animation was deleted without rendering")
def test_animations_are_column_wide_at_the_css_dpi_and_open_on_the_point():
    e = torch.zeros(64)
    made = {  # animation: the frame it must open on
        absolute_animations.integer_encoding_animation(e, list(range(20))): 19,  # largest p
        absolute_animations.binary_encoding_animation(e, 252): 9,  # the result
        absolute_animations.binary_plot_animation(5, 32): 31,  # the whole table
    }
    for anim, first in made.items():
        assert isinstance(anim, FuncAnimation)
        assert anim._save_count <= absolute_animations.MAX_FRAMES
        assert anim._fig.dpi == pe.plots.CSS_DPI
        assert anim._fig.get_figwidth() == pytest.approx(pe.plots.FIGURE_WIDTH)
        # frames in their natural order, so that the slider's place names the frame
        assert list(anim.new_frame_seq()) == list(range(anim._save_count))
        assert anim.start_frame == first
        plt.close(anim._fig)
    del made, anim
    gc.collect()  # the never-rendered animations go now, while their warning is ignored


def test_the_player_opens_on_the_start_frame_with_its_slider_there():
    anim = absolute_animations.integer_encoding_animation(torch.full((64,), 0.01), range(4))
    html = pe.plots.animation_html(anim).data
    made = re.search(r"(anim[0-9a-f]{32}) = new Animation\([^;]*\);\s*(\S*)", html)
    assert made is not None
    assert made.group(2) == f"{made.group(1)}.set_frame(3);"  # set_frame moves the slider too
    assert 'value="0"' in html  # the slider's markup before the script moves it


def test_the_binary_plot_opens_on_the_whole_table():
    anim = absolute_animations.binary_plot_animation(3, 8)
    (image,) = anim._fig.axes[0].get_images()
    seen = image.get_array()  # [n, T], masked where a position is not written yet
    assert not seen.mask.any()
    assert seen.tolist() == pe.binary_encoding(list(range(8)), 3).T.tolist()
    html = anim.to_jshtml()
    plt.close(anim._fig)
    assert html.count("data:image/png;base64") == 8
    assert len(html) < 600_000


def test_the_player_holds_the_frames_as_drawn_one_by_one():
    """Saving skips matplotlib's redraw before each frame; the frames stay the same."""
    anim = absolute_animations.binary_plot_animation(2, 3)
    html = anim.to_jshtml().replace("\\\n", "")
    saved = [
        np.asarray(Image.open(io.BytesIO(base64.b64decode(b))))
        for b in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)
    ]
    assert len(saved) == 3
    for frame, image in zip(anim.new_frame_seq(), saved, strict=True):
        anim._func(frame)
        buffer = io.BytesIO()
        anim._fig.savefig(buffer, format="png", dpi=absolute_animations.DPI)
        assert np.array_equal(np.asarray(Image.open(buffer)), image)
    plt.close(anim._fig)


def test_the_path_figure_draws_few_lines():
    fig = absolute_animations.binary_path_figure(compare=pe.sinusoidal_encoding(64, 8))
    (ax3,) = [a for a in fig.axes if a.name == "3d"]
    (ax,) = [a for a in fig.axes if a.name != "3d"]
    # the cube's 12 edges and the 7 steps are one collection each, not 19 lines
    assert len(ax3.collections) == 3  # edges, steps, corners
    steps = ax3.collections[1]
    assert len(steps.get_edgecolor()) == 7  # one colour per step
    assert len(ax.get_lines()) == 2  # binary markers, sinusoidal line
    assert pe.plots.layout(fig).problems() == []
    plt.close(fig)


@pytest.mark.filterwarnings("ignore:Animation was deleted without rendering")
@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: absolute_animations.integer_encoding_animation(torch.zeros(8), range(41)),
            ValueError,
            "at most 40 frames",
        ),
        (
            lambda: absolute_animations.integer_encoding_animation(torch.zeros(2, 8), [1]),
            ValueError,
            "1-D",
        ),
        (
            lambda: absolute_animations.integer_encoding_animation([0.0] * 8, [1]),
            TypeError,
            "torch.Tensor",
        ),
        (
            lambda: absolute_animations.binary_encoding_animation(torch.zeros(8), 256),
            ValueError,
            "position must fit",
        ),
        (
            lambda: absolute_animations.binary_plot_animation(3, 9),
            ValueError,
            "at most 2\\*\\*num_bits",
        ),
        (
            lambda: absolute_animations.binary_path_figure(path_bits=4),
            ValueError,
            "path_bits must be 3",
        ),
    ],
)
def test_animation_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
    plt.close("all")
