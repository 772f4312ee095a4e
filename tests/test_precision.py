"""Chapter 14's measurements of RoPE in low precision, checked against independent references."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc import precision as pr
from posenc.book import llama_rope
from posenc.book import precision_views as pv

F64 = torch.float64
BF16, FP16, F32 = torch.bfloat16, torch.float16, torch.float32
LOW = [BF16, FP16, torch.float8_e4m3fn, torch.float8_e5m2]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --- which integers a format holds ------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "bits"), [(BF16, 8), (FP16, 11), (F32, 24), (F64, 53)])
def test_significand_bits(dtype, bits):
    assert pr.significand_bits(dtype) == bits
    assert pr.first_inexact_integer(dtype) == 2**bits + 1


@pytest.mark.parametrize("dtype", [BF16, FP16, *LOW[2:]])
def test_first_inexact_integer_by_brute_force(dtype):
    n = torch.arange(0, 5000, dtype=F64)
    wrong = n[n.to(dtype).to(F64) != n]
    assert int(wrong[0]) == pr.first_inexact_integer(dtype)


def _next_up(v: float, dtype: torch.dtype) -> float:
    """The next number above ``v`` that ``dtype`` holds, found by scanning float64 values."""
    x = torch.tensor(v, dtype=F64)
    step = max(abs(v), 1.0) * 2.0**-30
    cand = x + step * torch.arange(1, 2**14, dtype=F64) * 2.0**10
    held = cand.to(dtype).to(F64)
    return float(held[held > v].min())


@pytest.mark.parametrize("dtype", [BF16, FP16])
@pytest.mark.parametrize("value", [1.0, 3.0, 256.0, 300.0, 2048.0, 8192.0, 0.1])
def test_spacing_is_the_gap_to_the_next_held_number(dtype, value):
    held = float(torch.tensor(value).to(dtype))  # a number the format holds
    assert pr.spacing(held, dtype) == pytest.approx(_next_up(held, dtype) - held, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(v=st.floats(1e-30, 1e30))
def test_spacing_matches_nextafter_in_float32(v):
    x = torch.tensor(v, dtype=F32)
    up = torch.nextafter(x, torch.tensor(math.inf, dtype=F32))
    assert pr.spacing(float(x), F32) == pytest.approx(float(up) - float(x), rel=1e-12)


def test_spacing_past_the_largest_value_is_infinite():
    assert pr.spacing(65536, FP16) == math.inf
    assert pr.spacing(65504, FP16) == 32.0


def test_ulp_of_the_broken_finfo_format():
    # torch.finfo reports eps = 0.125 for float8_e5m2fnuz, whose numbers are 1, 1.25, ...
    assert pr.ulp(torch.tensor([1.0]), torch.float8_e5m2fnuz).item() == 0.25
    assert pr.significand_bits(torch.float8_e5m2fnuz) == 3


def test_spacing_table_lists_the_claims():
    lines = pv.spacing_table([256, 2048, 8192], [BF16, FP16]).splitlines()
    assert lines[0].split() == ["above", "bf16", "fp16"]
    assert [line.split()[1:] for line in lines[1:]] == [["2", "0.25"], ["16", "2"], ["64", "8"]]


@settings(max_examples=40, deadline=None)
@given(p=st.lists(st.integers(0, 200000), min_size=1, max_size=20))
def test_stored_positions_are_the_rounded_positions(p):
    for dtype in (BF16, FP16):
        stored = pr.stored_positions(p, dtype)
        want = torch.tensor([float(torch.tensor(float(v)).to(dtype)) for v in p], dtype=F64)
        assert torch.equal(stored, want)
        finite = torch.isfinite(stored)
        err = (stored[finite] - torch.tensor(p, dtype=F64)[finite]).abs()
        # rounding to nearest: at most half the spacing
        bound = torch.tensor([pr.spacing(float(v), dtype) / 2 for v in stored[finite]])
        assert bool((err <= bound).all())


def test_float16_positions_overflow_from_65520():
    stored = pr.stored_positions([65504, 65519, 65520, 131072], FP16)
    assert stored[:2].tolist() == [65504.0, 65504.0]
    assert bool(torch.isinf(stored[2:]).all())


# --- angles -----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(p=st.lists(st.integers(-200000, 200000), min_size=1, max_size=10), seed=st.integers(0, 99))
def test_recipes_match_plain_torch_arithmetic(p, seed):
    f = pe.rope_inv_freq(16, [100.0, 10000.0, 500000.0][seed % 3])
    pos = torch.tensor(p)
    exact = pos.to(F64)[:, None] * f
    assert torch.equal(pr.recipe_angles(p, f, "exact (fp64)"), exact)
    # one IEEE multiplication in the dtype, as an implementation would write it
    for name, dtype in [("fp32 angles", F32), ("all bf16", BF16), ("all fp16", FP16)]:
        direct = pos.to(dtype)[:, None] * f.to(dtype)[None, :]
        assert torch.equal(pr.recipe_angles(p, f, name), direct.to(F64)), name
    direct = (pos.to(F32)[:, None] * f.to(F32)).to(BF16)
    assert torch.equal(pr.recipe_angles(p, f, "bf16 angles"), direct.to(F64))


def test_angle_errors_are_taken_on_the_circle():
    f = torch.tensor([1.0, 0.5], dtype=F64)
    r = pr.Recipe(F64, F64, F64)
    assert pr.angle_errors([0, 7, 1000], f, r).tolist() == [0.0, 0.0, 0.0]
    # an error of a whole turn plus 0.25 counts as 0.25
    got = torch.tensor([[2 * math.pi + 0.25, -2 * math.pi - 0.1]], dtype=F64)
    assert pr._circle_errors(got, torch.zeros(1, 2, dtype=F64)).item() == pytest.approx(0.25)
    assert pr._circle_errors(torch.tensor([[math.inf, 0.0]]), torch.zeros(1, 2)).item() == math.inf


def test_bf16_positions_are_exact_to_256_then_wrong():
    f = pe.rope_inv_freq(8)
    err = pr.angle_errors(list(range(300)), f, "bf16 positions")
    assert bool((err[:257] == 0).all())
    assert err[257].item() == pytest.approx(1.0)  # 257 is stored as 256: pair 0 is off by 1 rad


@settings(max_examples=30, deadline=None)
@given(p=st.lists(st.integers(0, 2**20), min_size=1, max_size=50), base=st.sampled_from([1e4, 5e5]))
def test_float32_angle_error_is_within_its_bound(p, base):
    f = pe.rope_inv_freq(64, base)
    err = pr.angle_errors(p, f, "fp32 angles")
    u = 2.0**-24
    bound = (2 * u + u * u) * torch.tensor(p, dtype=F64) * f.max()
    assert bool((err <= bound + 1e-15).all())


def test_angle_error_table_reports_running_maxima():
    f = pe.rope_inv_freq(8)
    curves = pv.angle_error_curves(f, 2000, ["fp32 angles", "bf16 positions", "all fp16"])
    table = pv.angle_error_table(curves, [100, 2000])
    assert table.columns == ["recipe", "p \u2264 100 (rad)", "p \u2264 2,000 (rad)"]
    assert [row[0] for row in table.rows] == list(curves)
    for name, *cells in table.rows:
        for cell, c in zip(cells, [100, 2000], strict=True):
            want = curves[name][: c + 1].max().item()
            assert (cell == "0" and want < 1e-12) or float(cell) == pytest.approx(want, rel=0.05)


def test_angle_error_table_rejects_checkpoints_past_the_curves():
    curves = pv.angle_error_curves(pe.rope_inv_freq(8), 100, ["fp32 angles"])
    with pytest.raises(ValueError, match="checkpoints must be at most"):
        pv.angle_error_table(curves, [200])


# --- scores -----------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), t=st.integers(1, 8), h=st.integers(1, 16))
def test_exact_rope_is_the_rotation_matrix(layout, seed, t, h):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(t, 2 * h, generator=gen, dtype=F64)
    p = torch.randint(-5000, 5000, (t,), generator=gen)
    f = pe.rope_inv_freq(2 * h)
    got = pr.exact_rope(x, p, f, layout=layout)
    want = torch.stack([pe.rope_matrix(int(p[i]), 2 * h, layout=layout) @ x[i] for i in range(t)])
    assert torch.allclose(got, want, atol=1e-12)


def test_exact_rope_with_a_recipe_rotates_by_that_recipes_angles():
    f = pe.rope_inv_freq(4)
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]], dtype=F64)
    got = pr.exact_rope(x, [257], f, "bf16 positions")  # position stored as 256
    assert torch.allclose(got, pr.exact_rope(x, [256], f))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), offset=st.integers(-300, 300))
def test_offset_scores_are_rotated_dot_products(seed, offset):
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 8, generator=gen, dtype=F64)
    f = pe.rope_inv_freq(8)
    m = torch.tensor([0, 3, 300, 70000])
    for name in ("exact (fp64)", "all bf16", "bf16 inv_freq", "fp32 angles"):
        rq = pr.exact_rope(q.expand(4, 8), m, f, name)
        rk = pr.exact_rope(k.expand(4, 8), m + offset, f, name)
        want = (rq * rk).sum(-1) / (q.norm() * k.norm())
        got = pv.offset_scores(q, k, m, offset, f, name)
        assert torch.allclose(got, want, atol=1e-12), name
    exact = pv.offset_scores(q, k, m, offset, f)
    assert float(exact.max() - exact.min()) < 1e-9  # depends on the offset only


def test_rounded_frequencies_keep_the_relative_property_and_positions_do_not():
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 64, generator=gen, dtype=F64)
    f = llama_rope.llama32_inv_freq()
    starts = torch.arange(0, 131072, 997)
    inv = pv.offset_scores(q, k, starts, 100, f, "bf16 inv_freq")
    pos = pv.offset_scores(q, k, starts, 100, f, "bf16 positions")
    assert float(inv.max() - inv.min()) < 1e-12
    assert float(pos.max() - pos.min()) > 0.1


def test_fp16_positions_past_the_range_give_nan_scores():
    q, k = torch.randn(2, 8, dtype=F64)
    s = pv.offset_scores(q, k, [100, 70000], 1, pe.rope_inv_freq(8), "fp16 positions")
    assert not math.isnan(s[0].item()) and math.isnan(s[1].item())


def test_relative_error_table_cells_are_the_measured_maxima():
    gen = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 8, generator=gen, dtype=F64)
    f = pe.rope_inv_freq(8)
    table = pv.relative_error_table(
        q, k, f, offsets=[2], ranges=[(0, 50), (1000, 1400)], recipes=["all bf16"], samples=10**6
    )
    assert table.columns == ["offset", "recipe", "0\u201149", "1,000\u20111,399"]
    cells = table.rows[0][-2:]
    exact = pv.offset_scores(q, k, [0], 2, f)[0]
    for cell, (a, b) in zip(cells, [(0, 50), (1000, 1400)], strict=True):
        want = (pv.offset_scores(q, k, torch.arange(a, b), 2, f, "all bf16") - exact).abs().max()
        assert float(cell) == pytest.approx(want.item(), rel=0.05)


# --- the fix, and posenc --------------------------------------------------------------------------


def test_accepted_dtypes_are_the_signed_floating_ones():
    got = pr.accepted_dtypes()
    assert {BF16, FP16, F32, F64} <= set(got)
    assert torch.float8_e8m0fnu not in got  # holds no sign: apply_rope refuses it
    assert got[-1] == F64  # most precise last


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [BF16, FP16, F32, F64, torch.float8_e4m3fn])
def test_apply_rope_is_within_the_bound_at_long_positions(dtype, layout):
    gen = torch.Generator().manual_seed(7)
    p = torch.cat([torch.arange(4), torch.randint(0, 131073, (252,), generator=gen)])
    x = torch.randn(256, 64, generator=gen)
    c = pr.check_apply_rope(x, p, dtype, inv_freq=llama_rope.llama32_inv_freq(), layout=layout)
    assert c.dtype_kept and c.within_bound
    if dtype in (BF16, torch.float8_e4m3fn):
        assert c.max_error <= 2 * c.rounding_step  # as good as rounding the exact answer
    if dtype in (BF16, FP16):
        assert c.max_naive > 10 * c.rounding_step or math.isnan(c.max_naive)


def test_the_bound_catches_angles_computed_in_bfloat16(monkeypatch):
    """Replace apply_rope by the naive in-dtype computation: the check must notice."""

    def naive(x, positions, *, inv_freq, layout):
        return pr._naive_rope(x, positions, inv_freq, layout)

    monkeypatch.setattr(pr, "apply_rope", naive)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 16, generator=gen)
    p = torch.randint(1000, 100000, (64,), generator=gen)
    c = pr.check_apply_rope(x, p, BF16)
    assert c.dtype_kept and not c.within_bound
    assert "False" in pv.format_checks([c]).splitlines()[1]


def test_the_bound_is_tight_enough_to_mean_something():
    # for bfloat16 the bound is about the rounding step, not a blanket tolerance
    x = torch.randn(8, 64)
    b = pr.rope_error_bound(x.to(BF16), list(range(8)), pe.rope_inv_freq(64), BF16)
    step = pr.ulp(pr.exact_rope(x.to(BF16), list(range(8)), pe.rope_inv_freq(64)).abs(), BF16) / 2
    assert bool((b <= 1.01 * step + 1e-5).all())


def test_format_checks_shows_booleans_per_dtype_and_layout():
    x = torch.randn(4, 8)
    checks = [
        pr.check_apply_rope(x, [0, 1, 2, 3], d, layout=lay)
        for d in (BF16, F64)
        for lay in ("half", "interleaved")
    ]
    lines = pv.format_checks(checks).splitlines()
    assert len(lines) == 5
    assert lines[1].split()[:2] == ["bf16", "half"]
    assert lines[-1].split()[-2:] == ["-", "-"]  # float64 is the reference dtype
    assert all(word in ("True", "False", "-") for line in lines[1:] for word in line.split()[2:])


def test_apply_rope_refuses_float_positions():
    x = torch.randn(4, 8).to(BF16)
    with pytest.raises(TypeError, match="positions must hold integers"):
        pe.apply_rope(x, torch.arange(4).to(BF16))


def test_figures_draw():
    f = pe.rope_inv_freq(8)
    fig = pv.position_rounding_figure(3000, window=8, window_start=2040)
    assert len(fig.axes) == 2
    curves = pv.angle_error_curves(f, 3000, ["fp32 angles", "all bf16", "bf16 positions"])
    ax = pv.angle_error_figure(curves, bins=10).axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(curves)
    q, k = torch.randn(2, 8, dtype=F64)
    fig = pv.offset_scores_figure(q, k, f, max_position=3000, samples=50)
    assert len(fig.axes[0].get_lines()) == 4  # three recipes and the exact line


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: pr.significand_bits("bf16"), TypeError, "dtype must be a torch.dtype"),
        (lambda: pr.significand_bits(torch.int32), ValueError, "floating dtype"),
        (lambda: pr.significand_bits(torch.float8_e8m0fnu), ValueError, "signed"),
        (lambda: pr.spacing(math.nan, BF16), ValueError, "value must be finite"),
        (lambda: pr.spacing("1", BF16), TypeError, "value must be a real number"),
        (lambda: pr.stored_positions([1.5], BF16), TypeError, "positions must"),
        (
            lambda: pr.recipe_angles([1], pe.rope_inv_freq(4), "fp8 angles"),
            ValueError,
            "recipe must be",
        ),
        (
            lambda: pr.recipe_angles([1], torch.tensor([math.nan]), "fp32 angles"),
            ValueError,
            "inv_freq must be finite",
        ),
        (lambda: pr.Recipe(F32, torch.int64, F32), ValueError, "freq_dtype"),
        (lambda: pv.angle_error_curves(pe.rope_inv_freq(4), 0), ValueError, "max_position"),
        (lambda: pv.angle_error_table({}, [1]), ValueError, "curves must not be empty"),
        (lambda: pv.angle_error_figure({"a": torch.zeros(3)}, bins=1), ValueError, "bins"),
        (
            lambda: pr.exact_rope(torch.randn(2, 6), [0, 1], pe.rope_inv_freq(4)),
            ValueError,
            "D = 2 \\* len\\(inv_freq\\)",
        ),
        (
            lambda: pr.exact_rope(torch.randn(2, 4), [0], pe.rope_inv_freq(4)),
            ValueError,
            "one entry per position",
        ),
        (
            lambda: pr.exact_rope(torch.randn(2, 4), [0, 1], pe.rope_inv_freq(4), layout="x"),
            ValueError,
            "layout",
        ),
        (
            lambda: pv.offset_scores(torch.randn(4), torch.randn(6), [0], 1, pe.rope_inv_freq(4)),
            ValueError,
            "same shape",
        ),
        (
            lambda: pv.offset_scores(torch.randn(4), torch.randn(4), [0], 1.5, pe.rope_inv_freq(4)),
            TypeError,
            "offset",
        ),
        (
            lambda: pv.relative_error_table(
                torch.randn(4), torch.randn(4), pe.rope_inv_freq(4), ranges=[(5, 5)]
            ),
            ValueError,
            "ranges stop",
        ),
        (
            lambda: pr.check_apply_rope(torch.randn(2, 2, 4), [0, 1], BF16),
            ValueError,
            "x must be \\[T, D\\]",
        ),
        (lambda: pr.check_apply_rope(torch.randn(2, 4), [0, 1], "bf16"), TypeError, "dtype"),
        (
            lambda: pv.relative_error_table(
                torch.randn(4), torch.randn(4), pe.rope_inv_freq(4), offsets=[1.5]
            ),
            TypeError,
            "offsets",
        ),
        (lambda: pv.format_checks([]), ValueError, "checks must not be empty"),
        (lambda: pv.check_table([]), ValueError, "checks must not be empty"),
        (lambda: pv.recipe_table(["fp8 angles"]), ValueError, "recipe"),
        (lambda: pv.format_checks([1]), TypeError, "RopeCheck"),
        (lambda: pr.ulp([1.0], BF16), TypeError, "values must be a torch.Tensor"),
        (lambda: pv.spacing_table([256], "bf16"), TypeError, "dtypes"),
        (lambda: pv.position_rounding_figure(1000, []), ValueError, "dtypes must not be empty"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()
