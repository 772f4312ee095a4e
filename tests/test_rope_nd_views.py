"""RoPE on grids (chapter 11): offsets, the mis-paired rotation, RoPE-Mixed and M-RoPE."""

import functools
import itertools
import math

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc.book import rope_nd_views as nd

F64 = torch.float64


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def rot2(angle):
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, -s], [s, c]], dtype=F64)


def plane_rotation(dim, i, j, angle):
    """The identity with a counter-clockwise turn in the plane of features i and j."""
    m = torch.eye(dim, dtype=F64)
    r = rot2(angle)
    for a, row in enumerate((i, j)):
        for b, col in enumerate((i, j)):
            m[row, col] = r[a, b]
    return m


def naive_axial(cell, dim, base):
    """Axial RoPE as a dense matrix, built plane by plane with math.cos/sin."""
    n = len(cell)
    chunk = dim // n
    m = torch.eye(dim, dtype=F64)
    for a, coord in enumerate(cell):
        for i in range(chunk // 2):
            theta = base ** (-2 * i / chunk)
            start = a * chunk + 2 * i
            m = plane_rotation(dim, start, start + 1, coord * theta) @ m
    return m


def naive_mispaired(cell, dim, base):
    """The mis-paired rotation as a dense matrix: x planes first, then the crossing planes."""
    x, y = cell
    half = dim // 2
    rx = torch.eye(dim, dtype=F64)
    ry = torch.eye(dim, dtype=F64)
    for i in range(half // 2):
        theta = base ** (-2 * i / half)
        rx = plane_rotation(dim, 2 * i, 2 * i + 1, x * theta) @ rx
        ry = plane_rotation(dim, 2 * i + 1, half + 2 * i, y * theta) @ ry
    return ry @ rx


def naive_offset_spread(q, k, cells, matrix):
    """Largest max - min of the scores sharing an offset, with a Python dict."""
    groups = {}
    mats = {c: matrix(c) for c in cells}
    for a in cells:
        for b in cells:
            score = float((mats[a] @ q) @ (mats[b] @ k))
            offset = tuple(bb - aa for aa, bb in zip(a, b, strict=True))
            groups.setdefault(offset, []).append(score)
    return len(groups), max(max(v) - min(v) for v in groups.values())


# --- grids and the offset check ------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1,), (3,), (2, 3), (3, 2, 2), (2, 2, 2, 2)])
def test_grid_positions_lists_every_cell_in_row_major_order(shape):
    cells = nd.grid_positions(shape)
    assert cells.dtype == torch.int64
    assert cells.tolist() == [list(c) for c in itertools.product(*(range(s) for s in shape))]


@pytest.mark.parametrize(("shape", "dim", "base"), [((3, 3), 8, 100.0), ((2, 2, 3), 12, 10.0)])
def test_offset_check_matches_a_naive_dense_loop(shape, dim, base):
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, dim, generator=gen, dtype=F64)
    cells = nd.grid_positions(shape)
    rotate = functools.partial(pe.apply_rope_nd, base=base)
    check = nd.offset_check(q, k, cells, rotate)
    offsets, spread = naive_offset_spread(
        q, k, [tuple(c) for c in cells.tolist()], lambda c: naive_axial(c, dim, base)
    )
    assert check.offsets == offsets
    assert check.pairs == len(cells) ** 2
    assert check.max_spread < 1e-12 and spread < 1e-12
    # and the scores themselves agree with the dense matrices
    scores = nd.pairwise_scores(q, k, cells, rotate)
    mats = [naive_axial(tuple(c), dim, base) for c in cells.tolist()]
    dense = torch.stack([m @ q for m in mats]) @ torch.stack([m @ k for m in mats]).T
    torch.testing.assert_close(scores, dense, rtol=1e-10, atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 3),
    pairs_per_axis=st.integers(1, 4),
    base=st.floats(2.0, 1e5),
    layout=st.sampled_from(["interleaved", "half"]),
    seed=st.integers(0, 2**16),
)
def test_axial_rope_score_depends_only_on_the_offset(n, pairs_per_axis, base, layout, seed):
    dim = 2 * n * pairs_per_axis
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, dim, generator=gen, dtype=F64)
    cells = nd.grid_positions((4,) * n)
    check = nd.offset_check(
        q, k, cells, functools.partial(pe.apply_rope_nd, base=base, layout=layout)
    )
    assert check.offsets == 7**n
    assert check.holds(1e-12)


# --- the mis-paired rotation ---------------------------------------------------------------


@pytest.mark.parametrize(("dim", "base"), [(4, 10.0), (8, 100.0), (16, 10000.0)])
@pytest.mark.parametrize("cell", [(0, 0), (3, 0), (0, 2), (5, 7), (-2, 9)])
def test_mispaired_rotation_is_the_naive_product_of_plane_rotations(dim, base, cell):
    x = torch.randn(3, dim, dtype=F64)
    got = nd.mispaired_rope_2d(x, torch.tensor([cell] * 3), base=base)
    torch.testing.assert_close(got, x @ naive_mispaired(cell, dim, base).T)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), quarter=st.integers(1, 6))
def test_mispaired_rotation_keeps_norms_but_breaks_the_offset_property(seed, quarter):
    dim = 4 * quarter
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, dim, generator=gen, dtype=F64)
    cells = nd.grid_positions((6, 6))
    rotated = nd.mispaired_rope_2d(q.expand(len(cells), dim), cells)
    torch.testing.assert_close(rotated.norm(dim=-1), q.norm().expand(len(cells)))
    bad = nd.offset_check(q, k, cells, nd.mispaired_rope_2d)
    assert bad.relative_spread > 1e-3
    # cells of one row share y: the y turn cancels
    row = nd.grid_positions((6, 1)) + torch.tensor([0, 4])
    assert nd.offset_check(q, k, row, nd.mispaired_rope_2d).holds(1e-12)


def test_mispaired_breaks_it_by_a_large_margin_on_the_chapters_grid():
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 32, generator=gen, dtype=F64)
    bad = nd.offset_check(q, k, nd.grid_positions((8, 8)), nd.mispaired_rope_2d)
    assert bad.relative_spread > 0.5
    assert not bad.holds()


# --- RoPE-Mixed and M-RoPE -----------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(half=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_mixed_rope_is_relative_for_any_frequencies(half, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 2 * half, generator=gen, dtype=F64)
    fx, fy = torch.randn(2, half, generator=gen, dtype=F64)
    rotate = functools.partial(nd.mixed_rope_2d, freq_x=fx, freq_y=fy)
    assert nd.offset_check(q, k, nd.grid_positions((4, 4)), rotate).holds(1e-12)


@pytest.mark.parametrize(("dim", "base"), [(4, 10.0), (16, 100.0), (32, 10000.0)])
def test_mixed_rope_with_one_zero_frequency_per_pair_is_axial_rope(dim, base):
    theta = pe.rope_inv_freq(dim // 2, base)
    zeros = torch.zeros_like(theta)
    fx, fy = torch.cat([theta, zeros]), torch.cat([zeros, theta])
    x = torch.randn(6, dim, dtype=F64)
    cells = torch.randint(-50, 50, (6, 2))
    torch.testing.assert_close(
        nd.mixed_rope_2d(x, cells, fx, fy), pe.apply_rope_nd(x, cells, base=base)
    )


def test_mixed_rope_layouts_differ_by_the_layout_permutation():
    dim = 12
    x = torch.randn(5, dim, dtype=F64)
    fx, fy = torch.randn(2, dim // 2, dtype=F64)
    cells = torch.randint(-9, 9, (5, 2))
    perm = pe.layout_permutation(dim)
    inter = nd.mixed_rope_2d(x, cells, fx, fy)
    half = nd.mixed_rope_2d(x[:, perm], cells, fx, fy, layout="half")
    torch.testing.assert_close(half, inter[:, perm])


def test_sum_rotation_cannot_tell_right_from_up():
    f = pe.rope_inv_freq(8)
    q, k = torch.randn(2, 8, dtype=F64)
    rotate = functools.partial(nd.mixed_rope_2d, freq_x=f, freq_y=f)
    s = nd.pairwise_scores(q, k, torch.tensor([[0, 0], [1, 0], [0, 1]]), rotate)
    assert torch.isclose(s[0, 1], s[0, 2], rtol=0, atol=1e-12)
    axial = nd.pairwise_scores(q, k, torch.tensor([[0, 0], [1, 0], [0, 1]]))
    assert not torch.isclose(axial[0, 1], axial[0, 2], rtol=0, atol=1e-6)


def naive_mrope(x, coords, sections, base, layout):
    """M-RoPE token by token: pair i turned by coords[axis(i)] * base**(-2i/D)."""
    dim = x.shape[-1]
    axis = [a for a, s in enumerate(sections) for _ in range(s)]
    out = x.clone()
    for t in range(x.shape[0]):
        for i in range(dim // 2):
            angle = int(coords[t][axis[i]]) * base ** (-2 * i / dim)
            a, b = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + dim // 2)
            out[t, [a, b]] = rot2(angle) @ x[t, [a, b]]
    return out


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(("dim", "sections"), [(8, [2, 1, 1]), (12, [1, 2, 3]), (10, [5, 0, 0])])
def test_mrope_matches_a_pair_by_pair_loop(layout, dim, sections):
    x = torch.randn(4, dim, dtype=F64)
    coords = torch.randint(-20, 20, (4, 3))
    got = nd.mrope(x, coords, sections, base=100.0, layout=layout)
    torch.testing.assert_close(got, naive_mrope(x, coords, sections, 100.0, layout))


@settings(max_examples=20, deadline=None)
@given(
    sections=st.lists(st.integers(0, 3), min_size=1, max_size=3).filter(lambda s: sum(s) > 0),
    layout=st.sampled_from(["interleaved", "half"]),
    seed=st.integers(0, 2**16),
)
def test_mrope_is_1d_rope_on_text_and_relative_on_grids(sections, layout, seed):
    dim = 2 * sum(sections)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(7, dim, generator=gen, dtype=F64)
    text = torch.arange(7)[:, None].expand(7, len(sections))
    torch.testing.assert_close(
        nd.mrope(x, text, sections, layout=layout), pe.apply_rope(x, layout=layout)
    )
    rotate = functools.partial(nd.mrope, sections=sections, layout=layout)
    cells = nd.grid_positions((3,) * len(sections))
    assert nd.offset_check(x[0], x[1], cells, rotate).holds(1e-12)


def test_axis_frequencies_for_axial_and_mrope():
    axis, f = nd.axis_frequencies(12, 100.0, axes=3)
    assert axis.tolist() == [0, 0, 1, 1, 2, 2]
    torch.testing.assert_close(f, pe.rope_inv_freq(4, 100.0).repeat(3))
    axis, f = nd.axis_frequencies(12, 100.0, sections=[1, 2, 3])
    assert axis.tolist() == [0, 1, 1, 2, 2, 2]
    torch.testing.assert_close(f, pe.rope_inv_freq(12, 100.0))


def test_figures_draw():
    q, k = torch.randn(2, 8, dtype=F64)
    fig = nd.score_maps_figure(q, k, side=8, query_cells=((2, 2), (5, 4)), window=2)
    assert len(fig.axes) == 5  # four maps and a colour bar
    titles = [ax.get_title() for ax in fig.axes[:4]]
    assert titles[1].endswith("squares differ by 0.00")  # axial: relative
    assert not titles[3].endswith("squares differ by 0.00")  # mis-paired: not
    fig = nd.frequency_allocation_figure(12, sections=(2, 2, 2))
    assert len(fig.axes) == 2


# --- bad input -----------------------------------------------------------------------------

x8 = torch.randn(2, 8)
cells2 = torch.tensor([[0, 1], [2, 3]])
v8 = torch.randn(8)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: nd.grid_positions(()), ValueError, "non-empty"),
        (lambda: nd.grid_positions(4), ValueError, "sequence"),
        (lambda: nd.grid_positions((2, 0)), ValueError, "side must be at least 1"),
        (lambda: nd.grid_positions((2.0, 2)), TypeError, "side must be an int"),
        (lambda: nd.pairwise_scores(v8, torch.randn(6), cells2), ValueError, "same size"),
        (lambda: nd.pairwise_scores(x8, x8, cells2), ValueError, "one vector"),
        (lambda: nd.pairwise_scores(v8, v8, cells2.float()), TypeError, "integers"),
        (lambda: nd.pairwise_scores(v8, v8, [[0, 1]]), TypeError, "integer tensor"),
        (lambda: nd.mispaired_rope_2d(torch.randn(2, 6), cells2), ValueError, "divisible by 4"),
        (lambda: nd.mispaired_rope_2d(x8, torch.tensor([[0, 1, 2]] * 2)), ValueError, "n=2"),
        (lambda: nd.mispaired_rope_2d(x8, torch.tensor([[0, 1]] * 3)), ValueError, "T=2"),
        (lambda: nd.mispaired_rope_2d(x8.long(), cells2), TypeError, "floating"),
        (
            lambda: nd.mixed_rope_2d(x8, cells2, torch.ones(3), torch.ones(4)),
            ValueError,
            r"freq_x must have shape \[D/2\]",
        ),
        (
            lambda: nd.mixed_rope_2d(x8, cells2, torch.ones(4), torch.ones(4), layout="x"),
            ValueError,
            "layout",
        ),
        (lambda: nd.mrope(x8, torch.tensor([[0, 1, 2]] * 2), [1, 1, 1]), ValueError, "add up"),
        (lambda: nd.mrope(x8, torch.tensor([[0, 1]] * 2), [2, 1, 1]), ValueError, "one coordinate"),
        (lambda: nd.mrope(x8, torch.tensor([[0, 1, 2]] * 2), 4), TypeError, "sequence of ints"),
        (lambda: nd.mrope(x8, torch.tensor([[0, 1, 2]] * 2), [2, 1.0, 1]), TypeError, "int"),
        (lambda: nd.axis_frequencies(8), ValueError, "exactly one"),
        (lambda: nd.axis_frequencies(8, axes=3), ValueError, "divisible"),
        (lambda: nd.axis_frequencies(7, axes=1), ValueError, "even"),
        (lambda: nd.frequency_allocation_figure(12, labels=("a",)), ValueError, "labels"),
        (
            lambda: nd.score_maps_figure(v8, v8, side=8, query_cells=((0, 0), (4, 4))),
            ValueError,
            "border",
        ),
        (lambda: nd.score_maps_figure(v8, v8, query_cells=((5, 5),)), ValueError, "two cells"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()
