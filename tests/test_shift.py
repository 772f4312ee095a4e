"""Shifting a sinusoidal encoding is a rotation: the identities chapter 6 relies on."""

import math

import matplotlib.pyplot as plt
import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc.book import rotation_explorer, shift

K, W, P = sp.symbols("k w p")


def naive_shift_matrix(offset, dim, base=10000.0, order="sin-cos"):
    """The block-diagonal shift matrix written entry by entry with the math module."""
    out = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(dim // 2):
        angle = offset * base ** (-2 * i / dim)
        c, s = math.cos(angle), math.sin(angle)
        block = [[c, s], [-s, c]] if order == "sin-cos" else [[c, -s], [s, c]]
        for a in range(2):
            for b in range(2):
                out[2 * i + a, 2 * i + b] = block[a][b]
    return out


def naive_max_shift_error(encoding, offsets, matrices):
    """Loop over every (k, p) and every feature: the reference for ``max_shift_error``."""
    t, d = encoding.shape
    enc = encoding.double()
    worst, pairs = 0.0, 0
    for k, m in zip(offsets, matrices.double(), strict=True):
        for p in range(t):
            if 0 <= p + k < t:
                pairs += 1
                for row in range(d):
                    predicted = sum(m[row, col].item() * enc[p, col].item() for col in range(d))
                    worst = max(worst, abs(enc[p + k, row].item() - predicted))
    return worst, pairs


# --- the symbolic derivation ------------------------------------------------------------


def test_solved_matrix_is_the_one_in_the_source():
    expected = sp.Matrix([[sp.cos(K * W), sp.sin(K * W)], [-sp.sin(K * W), sp.cos(K * W)]])
    assert shift.solve_shift_matrix() == expected
    assert str(shift.solve_shift_matrix()) == (
        "Matrix([[cos(k*w), sin(k*w)], [-sin(k*w), cos(k*w)]])"
    )


@pytest.mark.parametrize(("order", "sign"), [("sin-cos", -1), ("cos-sin", 1)])
def test_solved_matrix_shifts_every_position_and_is_a_rotation(order, sign):
    m = shift.solve_shift_matrix(order)
    _, x, y = shift.shift_problem(order)
    assert sp.simplify(m * x - y) == sp.zeros(2, 1)
    assert sp.simplify(m.T * m) == sp.eye(2)
    assert sp.simplify(m.det()) == 1
    assert sp.simplify(m - shift.symbolic_rotation(sign * K * W)) == sp.zeros(2, 2)
    assert sp.simplify(m - shift.symbolic_rotation(-sign * K * W)) != sp.zeros(2, 2)


@pytest.mark.parametrize("order", shift.ORDERS)
def test_coefficient_equations_solve_for_each_unknown(order):
    equations = shift.coefficient_equations(order)
    m, _, _ = shift.shift_problem(order)
    assert [eq.lhs for eq in equations] == list(m)
    assert [eq.rhs for eq in equations] == list(shift.solve_shift_matrix(order))


@settings(max_examples=30, deadline=None)
@given(
    p=st.floats(-50, 50),
    k=st.floats(-50, 50),
    w=st.floats(1e-4, 3),
    order=st.sampled_from(shift.ORDERS),
)
def test_solved_matrix_numerically_at_random_points(p, k, w, order):
    m = shift.solve_shift_matrix(order).subs({K: k, W: w})
    _, x, y = shift.shift_problem(order)
    values = {P: p, K: k, W: w}
    lhs = [float(e) for e in m * x.subs(values)]
    rhs = [float(e) for e in y.subs(values)]
    assert lhs == pytest.approx(rhs, abs=1e-9)


def test_symbolic_rotation_is_the_counter_clockwise_rotation():
    quarter = shift.symbolic_rotation(sp.pi / 2)
    assert quarter * sp.Matrix([1, 0]) == sp.Matrix([0, 1])
    numeric = torch.tensor(shift.symbolic_rotation(0.3).evalf().tolist(), dtype=torch.float64)
    torch.testing.assert_close(numeric, pe.rotation_matrix(torch.tensor(0.3, dtype=torch.float64)))


# --- the numeric checks -----------------------------------------------------------------


@pytest.mark.parametrize("offset", [-9, -1, 0, 1, 5, 40])
@pytest.mark.parametrize("dim", [2, 8, 64])
@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_sympy_shift_matrix_matches_library_and_naive(offset, dim, base):
    ours = shift.sympy_shift_matrix(offset, dim, base)
    assert ours.shape == (dim, dim) and ours.dtype == torch.float64
    torch.testing.assert_close(ours, pe.sinusoidal_shift_matrix(offset, dim, base))
    torch.testing.assert_close(ours, naive_shift_matrix(offset, dim, base))


@pytest.mark.parametrize("offset", [-3, 0, 7])
def test_cos_sin_order_is_the_counter_clockwise_block(offset):
    dim = 8
    ours = shift.sympy_shift_matrix(offset, dim, order="cos-sin")
    w = pe.sinusoidal_frequencies(dim)
    torch.testing.assert_close(ours, pe.block_diagonal(pe.rotation_matrix(w * offset)))
    torch.testing.assert_close(ours, naive_shift_matrix(offset, dim, order="cos-sin"))


@settings(max_examples=25, deadline=None)
@given(
    t=st.integers(2, 40),
    half_dim=st.integers(1, 16),
    base=st.floats(2.0, 1e5),
    data=st.data(),
)
def test_shift_identity_holds_for_every_valid_pair(t, half_dim, base, data):
    dim = 2 * half_dim
    offsets = data.draw(st.lists(st.integers(-(t - 1), t - 1), min_size=1, max_size=5))
    enc = pe.sinusoidal_encoding(t, dim, base)
    mats = torch.stack([shift.sympy_shift_matrix(k, dim, base) for k in offsets])
    error, pairs = shift.max_shift_error(enc, offsets, mats)
    assert error < 1e-6
    assert pairs == sum(t - abs(k) for k in offsets)
    swapped = shift.swap_pair_order(enc)
    mats_cs = torch.stack(
        [shift.sympy_shift_matrix(k, dim, base, order="cos-sin") for k in offsets]
    )
    assert shift.max_shift_error(swapped, offsets, mats_cs)[0] < 1e-6


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_max_shift_error_matches_naive_loop(seed):
    gen = torch.Generator().manual_seed(seed)
    enc = torch.randn(6, 4, generator=gen)  # [T, D]
    offsets = [-2, 0, 3, 5]
    mats = torch.randn(4, 4, 4, generator=gen, dtype=torch.float64)  # [K, D, D]
    error, pairs = shift.max_shift_error(enc, offsets, mats)
    ref_error, ref_pairs = naive_max_shift_error(enc, offsets, mats)
    assert pairs == ref_pairs == 4 + 6 + 3 + 1
    assert error == pytest.approx(ref_error, rel=1e-12)


def test_max_shift_error_catches_the_wrong_sense_of_rotation():
    dim, offsets = 16, [-5, 2, 9]
    enc = pe.sinusoidal_encoding(32, dim)
    wrong = torch.stack([shift.sympy_shift_matrix(k, dim, order="cos-sin") for k in offsets])
    assert shift.max_shift_error(enc, offsets, wrong)[0] > 1.0
    right = torch.stack([shift.sympy_shift_matrix(k, dim) for k in offsets])
    assert shift.max_shift_error(enc, torch.tensor(offsets), right)[0] < 1e-6


@settings(max_examples=30, deadline=None)
@given(half=st.integers(1, 8), lead=st.integers(1, 3), seed=st.integers(0, 2**31 - 1))
def test_swap_pair_order_swaps_each_pair_and_undoes_itself(half, lead, seed):
    x = torch.randn(lead, 2 * half, generator=torch.Generator().manual_seed(seed))
    y = shift.swap_pair_order(x)
    torch.testing.assert_close(y[..., 0::2], x[..., 1::2])
    torch.testing.assert_close(y[..., 1::2], x[..., 0::2])
    torch.testing.assert_close(shift.swap_pair_order(y), x)


# --- the rotation claims of the chapter ---------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 200), n=st.integers(0, 200), w=st.floats(1e-3, 3.0))
def test_relative_rotation_index_is_n_minus_m(m, n, w):
    w = torch.tensor(w, dtype=torch.float64)
    product = pe.rotation_matrix(m * w).mT @ pe.rotation_matrix(n * w)
    torch.testing.assert_close(product, pe.rotation_matrix((n - m) * w))
    # the other index is the transpose: wrong by 2 |sin((n - m) w)| off the diagonal
    gap = (product - pe.rotation_matrix((m - n) * w)).abs().max().item()
    assert gap == pytest.approx(2 * abs(math.sin((n - m) * w.item())), abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(a=st.floats(-20, 20), b=st.floats(-20, 20), x=st.floats(-5, 5), y=st.floats(-5, 5))
def test_rotation_keeps_length_composes_and_inverts(a, b, x, y):
    ra = pe.rotation_matrix(torch.tensor(a, dtype=torch.float64))
    rb = pe.rotation_matrix(torch.tensor(b, dtype=torch.float64))
    v = torch.tensor([x, y], dtype=torch.float64)
    assert (ra @ v).norm().item() == pytest.approx(v.norm().item(), abs=1e-12)
    torch.testing.assert_close(
        ra @ rb, pe.rotation_matrix(torch.tensor(a + b, dtype=torch.float64))
    )
    torch.testing.assert_close(ra.T, pe.rotation_matrix(torch.tensor(-a, dtype=torch.float64)))
    torch.testing.assert_close(ra.T @ ra, torch.eye(2, dtype=torch.float64))


# --- the pictures -------------------------------------------------------------------------


def _turning(xs, ys):
    """Sum of cross products of successive points: > 0 counter-clockwise, < 0 clockwise."""
    return sum(xs[i] * ys[i + 1] - ys[i] * xs[i + 1] for i in range(len(xs) - 1))


def test_draw_pair_orders_turns_each_way():
    fig = shift.draw_pair_orders(0.7, 8)
    left, right = (ax.lines[1].get_data() for ax in fig.axes)
    assert (float(left[0][0]), float(left[1][0])) == (0.0, 1.0)  # (sin 0, cos 0)
    assert (float(right[0][0]), float(right[1][0])) == (1.0, 0.0)
    assert _turning(*left) < 0 < _turning(*right)
    plt.close(fig)


@pytest.mark.parametrize("angle", [0.0, 30.0, -120.0, 90.0, 180.0])
@pytest.mark.parametrize("vector", [(1.0, 0.0), (0.3, -1.2)])
def test_draw_rotation_puts_the_arrow_at_r_v(angle, vector):
    fig = rotation_explorer.draw_rotation(angle, vector)
    ax_plane, ax_text = fig.axes
    arrows = [t for t in ax_plane.texts if t.arrow_patch is not None]
    expected = pe.rotation_matrix(torch.tensor(math.radians(angle), dtype=torch.float64)) @ (
        torch.tensor(vector, dtype=torch.float64)
    )
    assert arrows[0].xy == pytest.approx(vector)
    assert arrows[1].xy == pytest.approx(expected.tolist(), abs=1e-12)
    text = ax_text.texts[0].get_text()
    assert f"R({angle:g}°)" in text
    assert f"cos = {round(math.cos(math.radians(angle)), 2) + 0.0:.2f}" in text
    assert "-0.00" not in text
    plt.close(fig)


def test_rotation_explorer_shows_three_live_sliders(monkeypatch):
    import ipywidgets

    shown, drawn = [], []
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: shown.extend(objs))
    monkeypatch.setattr(rotation_explorer.plots, "show", drawn.append)
    assert rotation_explorer.rotation_explorer(angle=30.0, vector=(0.5, 0.5)) is None
    (box,) = shown
    sliders = [w for w in box.children[0].children if isinstance(w, ipywidgets.FloatSlider)]
    assert [s.value for s in sliders] == [30.0, 0.5, 0.5]
    before = len(drawn)
    sliders[0].value = 90.0  # moving a slider redraws the figure at the new angle
    assert len(drawn) == before + 1
    assert "R(90°)" in drawn[-1].axes[1].texts[0].get_text()
    for fig in drawn:
        plt.close(fig)


def test_rotation_animation_turns_once():
    anim = rotation_explorer.rotation_animation((1.0, 0.0), frames=12, dpi=20)
    ax_plane, ax_text = anim._fig.axes
    assert ax_plane.get_title() == "rotation by 60°"  # opens on a turn, not on 0°
    assert list(anim.new_frame_seq()) == [*range(2, 12), 0, 1]
    html = anim.to_jshtml()  # draws every frame, ending on 30°
    assert html.count("data:image/png") == 12
    rotated = [t for t in ax_plane.texts if t.arrow_patch is not None][1]
    assert rotated.xy == pytest.approx((math.sqrt(3) / 2, 0.5), abs=1e-12)
    assert ax_plane.get_title() == "rotation by 30°"
    assert "R(30°)" in ax_text.texts[0].get_text()
    plt.close(anim._fig)


def test_rotation_animation_is_as_large_as_the_static_figure():
    anim = rotation_explorer.rotation_animation()
    still = rotation_explorer.draw_rotation()
    assert anim._fig.dpi == pe.plots.CSS_DPI
    assert anim._fig.get_size_inches().tolist() == still.get_size_inches().tolist()
    anim._draw_was_started = True  # inspected, not rendered: no warning when collected
    plt.close(anim._fig)
    plt.close(still)


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: shift.shift_problem("sin,cos"), ValueError, "order must be one of"),
        (lambda: shift.solve_shift_matrix(1), TypeError, "order must be a string"),
        (lambda: shift.coefficient_equations("cos"), ValueError, "order"),
        (lambda: shift.sympy_shift_matrix(1.5, 4), TypeError, "offset must be an int"),
        (lambda: shift.sympy_shift_matrix(1, 3), ValueError, "dim must be even"),
        (
            lambda: shift.sympy_shift_matrix(1, 4, -1.0),
            ValueError,
            "base must be finite and at least 2\\*\\*-64",
        ),
        (lambda: shift.symbolic_rotation("not a number"), TypeError, "theta must be"),
        (lambda: shift.swap_pair_order(torch.zeros(3)), ValueError, "even last axis"),
        (lambda: shift.swap_pair_order(torch.zeros(4, dtype=torch.int64)), TypeError, "floating"),
        (lambda: shift.swap_pair_order([1.0, 2.0]), TypeError, "torch.Tensor"),
        (
            lambda: shift.max_shift_error(torch.zeros(5, 4), [1], torch.zeros(2, 4, 4)),
            ValueError,
            r"shift_matrices must be \[K, D, D\]",
        ),
        (
            lambda: shift.max_shift_error(torch.zeros(5, 4), [5], torch.zeros(1, 4, 4)),
            ValueError,
            "leaves no position",
        ),
        (
            lambda: shift.max_shift_error(torch.zeros(5, 4), [1.0], torch.zeros(1, 4, 4)),
            TypeError,
            r"offsets\[0\] must be an int",
        ),
        (
            lambda: shift.max_shift_error(torch.zeros(5, 4), torch.ones(1), torch.zeros(1, 4, 4)),
            TypeError,
            "offsets must hold integers",
        ),
        (
            lambda: shift.max_shift_error(torch.zeros(2, 5, 4), [1], torch.zeros(1, 4, 4)),
            ValueError,
            r"encoding must be \[T, D\]",
        ),
        (lambda: shift.draw_pair_orders(0.0), ValueError, "omega must be positive"),
        (lambda: shift.draw_pair_orders(0.5, 65), ValueError, "num_positions must be at most"),
        (lambda: rotation_explorer.draw_rotation("45"), TypeError, "angle must be a real"),
        (lambda: rotation_explorer.draw_rotation(math.inf), ValueError, "angle must be finite"),
        (lambda: rotation_explorer.draw_rotation(45, (1.0,)), ValueError, "two numbers"),
        (lambda: rotation_explorer.draw_rotation(45, (1.0, "a")), TypeError, "real numbers"),
        (lambda: rotation_explorer.draw_rotation(45, (1.0, math.nan)), ValueError, "finite"),
        (lambda: rotation_explorer.rotation_explorer(angle=200.0), ValueError, "-180 .. 180"),
        (lambda: rotation_explorer.rotation_explorer(vector=(2.0, 0.0)), ValueError, "-1.5"),
        (lambda: rotation_explorer.rotation_animation(frames=41), ValueError, "at most 40"),
        (lambda: rotation_explorer.rotation_animation(frames=2.0), TypeError, "frames"),
        (lambda: rotation_explorer.rotation_animation(dpi=101), ValueError, "at most 100"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()
