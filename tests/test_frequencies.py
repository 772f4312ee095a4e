"""RoPE's frequencies and length (chapter 12), checked against independent references."""

import cmath
import functools
import math

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc import properties
from posenc.book import frequencies as fq

F64 = torch.float64
dims = st.integers(1, 32).map(lambda n: 2 * n)
bases = st.floats(2.0, 1e6)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --- periods -------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(d=dims, base=bases)
def test_periods_and_the_longest_period(d, base):
    f = pe.rope_inv_freq(d, base)
    per = fq.periods(f)
    for i in range(d // 2):
        assert per[i].item() == pytest.approx(2 * math.pi * base ** (2 * i / d), rel=1e-12)
    assert fq.longest_period(d, base) == pytest.approx(per.max().item(), rel=1e-12)
    assert fq.longest_period(d, base) < 2 * math.pi * base


def test_a_still_pair_has_an_infinite_period():
    assert fq.periods(torch.tensor([0.5, 0.0], dtype=F64)).tolist() == [4 * math.pi, math.inf]


def test_period_table_lists_every_pair_for_every_base():
    table = fq.period_table(64)
    assert len(table.rows) == 32 and len(table.columns) == 3
    first, last = table.rows[0], table.rows[-1]
    assert first == ["0", "6.28", "6.28"]
    assert last[1] == f"{round(fq.longest_period(64)):,}" == "47,117"
    assert last[2] == "2.08 million"
    assert fq.longest_period(64, 500000.0) == pytest.approx(2.08e6, rel=1e-2)
    assert all("(positions)" in c for c in table.columns[1:])


def test_period_table_can_list_a_few_pairs():
    table = fq.period_table(64, bases=(10000.0,), pairs=[0, 8, 31])
    assert [row[0] for row in table.rows] == ["0", "8", "31"]
    assert "pairs 0, 8, 31" in table.caption
    assert "<caption>" in table._repr_html_()
    with pytest.raises(ValueError, match="below D/2"):
        fq.period_table(64, pairs=[32])


# --- scores and the decay bound ------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(d=dims, base=bases, seed=st.integers(0, 2**16))
def test_scores_at_distances_equal_the_rotated_dot_product(d, base, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 3, d, generator=gen, dtype=F64)
    m = torch.tensor([-7, 0, 1, 13, 1000])
    got = fq.scores_at_distances(q, k, m, base=base)  # [3, 5]
    rotated = pe.apply_rope(q[:, None, :].expand(3, 5, d), m, base=base)
    torch.testing.assert_close(got, (rotated * k[:, None, :]).sum(-1))
    # query m after the key == key m before the query
    key_side = pe.apply_rope(k[:, None, :].expand(3, 5, d), -m, base=base)
    torch.testing.assert_close(got, (q[:, None, :] * key_side).sum(-1))


@settings(max_examples=30, deadline=None)
@given(d=dims, seed=st.integers(0, 2**16))
def test_pair_scores_are_shifted_cosines_that_add_up_to_the_score(d, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, d, generator=gen, dtype=F64)
    m = torch.arange(0, 300, 7)
    parts = fq.pair_scores(q, k, m)
    torch.testing.assert_close(parts.sum(-1), fq.scores_at_distances(q, k, m))
    theta = pe.rope_inv_freq(d)
    for i in range(d // 2):
        qi = complex(q[2 * i], q[2 * i + 1])
        ki = complex(k[2 * i], k[2 * i + 1])
        phi = cmath.phase(qi * ki.conjugate())
        for j, mm in enumerate(m.tolist()):
            expected = abs(qi) * abs(ki) * math.cos(mm * theta[i].item() + phi)
            assert parts[j, i].item() == pytest.approx(expected, abs=1e-9)


def naive_partial_sums(m, theta):
    out, total = [], 0j
    for t in theta:
        total += cmath.exp(1j * m * t)
        out.append(total)
    return out


@settings(max_examples=30, deadline=None)
@given(d=dims, base=bases, m=st.integers(-5000, 5000))
def test_abel_partial_sums_and_relative_bound_match_a_loop(d, base, m):
    theta = pe.rope_inv_freq(d, base).tolist()
    sums = fq.abel_partial_sums([m], torch.tensor(theta, dtype=F64))[0]
    naive = naive_partial_sums(m, theta)
    for got, want in zip(sums.tolist(), naive, strict=True):
        assert abs(got - want) < 1e-9 * max(1, abs(want)) + 1e-9
    rel = fq.relative_upper_bound([m], torch.tensor(theta, dtype=F64)).item()
    assert rel == pytest.approx(sum(abs(s) for s in naive) / (d // 2), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("d", [2, 8, 128])
def test_relative_bound_starts_at_half_of_pairs_plus_one(d):
    assert fq.relative_upper_bound([0], pe.rope_inv_freq(d)).item() == pytest.approx(
        (d // 2 + 1) / 2
    )


@settings(max_examples=30, deadline=None)
@given(d=dims, m=st.integers(-3000, 3000), seed=st.integers(0, 2**16))
def test_summation_by_parts_identity_and_the_bound(d, m, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, d, generator=gen, dtype=F64)
    theta = pe.rope_inv_freq(d).tolist()
    h = [
        complex(q[2 * i], q[2 * i + 1]) * complex(k[2 * i], k[2 * i + 1]).conjugate()
        for i in range(d // 2)
    ]
    direct = sum(hi * cmath.exp(1j * m * t) for hi, t in zip(h, theta, strict=True))
    s = naive_partial_sums(m, theta)  # S_1 .. S_(D/2)
    h_ext = [*h, 0j]
    by_parts = -sum(s[j] * (h_ext[j + 1] - h_ext[j]) for j in range(d // 2))
    assert abs(direct - by_parts) < 1e-9 * (1 + abs(direct))
    score = fq.scores_at_distances(q, k, [m]).item()
    assert score == pytest.approx(direct.real, abs=1e-9)
    bound = fq.decay_bound(q, k, [m]).item()
    step = max(abs(h_ext[j + 1] - h_ext[j]) for j in range(d // 2))
    assert bound == pytest.approx(step * sum(abs(x) for x in s), rel=1e-9)
    assert abs(score) <= bound + 1e-9


def test_random_scores_do_not_decay_but_aligned_ones_do():
    gen = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 400, 64, generator=gen, dtype=F64)
    d = torch.arange(0, 2001, 50)
    s = fq.scores_at_distances(q, k, d)
    assert 0.85 < (s[:, -10:].abs().mean() / s[:, :10].abs().mean()).item() < 1.15
    aligned = fq.scores_at_distances(q, q, d).mean(0)
    assert (aligned[-1] / aligned[0]).item() < 0.3
    bound = fq.relative_upper_bound(d, pe.rope_inv_freq(64))
    assert bound[-1] < 0.3 * bound[0]


# --- do positions repeat? ------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(d=dims, base=bases, p=st.integers(0, 10**5), m=st.integers(-(10**5), 10**5))
def test_encoding_distance_is_the_distance_between_rotated_unit_vectors(d, base, p, m):
    theta = pe.rope_inv_freq(d, base)
    u = torch.zeros(d, dtype=F64)
    u[0::2] = 1 / math.sqrt(d // 2)
    e = pe.apply_rope(u.expand(2, d), [p, p + m], base=base)
    got = fq.encoding_distance([m], theta).item()
    assert got == pytest.approx((e[1] - e[0]).norm().item(), abs=1e-6)


def test_nearest_return_matches_brute_force():
    theta = pe.rope_inv_freq(16)
    d = fq.encoding_distance(torch.arange(5, 3001), theta)
    offset, gap = fq.nearest_return(3000, theta, min_distance=5, chunk=777)
    assert offset == 5 + int(d.argmin())
    assert gap == pytest.approx(d.min().item())


def test_positions_2pi_times_base_apart_are_not_the_same_encoding():
    theta = pe.rope_inv_freq(64)
    for m in (62832, round(fq.longest_period(64)), 2 * 62832):
        assert fq.encoding_distance([m], theta).item() > 1.0


# --- unseen angles and scaling -------------------------------------------------------------


def naive_overshoot(max_distance, train_length, f, trained):
    out = []
    for fi, ti in zip(f, trained, strict=True):
        seen = (train_length - 1) * ti
        reached = max_distance * fi
        out.append(min(reached / (2 * math.pi), 1.0) if seen >= 2 * math.pi else reached / seen)
    return out


@settings(max_examples=30, deadline=None)
@given(d=dims, base=st.floats(10.0, 1e6), length=st.integers(2, 10**4), mult=st.integers(0, 16))
def test_angle_overshoot_matches_a_loop(d, base, length, mult):
    f = pe.rope_inv_freq(d, base)
    got = fq.angle_overshoot(mult * (length - 1), length, f)
    want = naive_overshoot(mult * (length - 1), length, f.tolist(), f.tolist())
    assert got.tolist() == pytest.approx(want, rel=1e-12)
    if mult <= 1:
        assert bool((got <= 1 + 1e-12).all())


@pytest.mark.parametrize("factor", [2, 4, 8, 32])
def test_position_interpolation_leaves_no_unseen_angles(factor):
    f = pe.rope_inv_freq(128)
    interp = pe.scaling.position_interpolation_inv_freq(f, float(factor))
    assert bool((fq.angle_overshoot(factor * 4095, 4096, interp, f) <= 1 + 1e-9).all())
    plain = fq.angle_overshoot(factor * 4095, 4096, f)
    assert int((plain > 1 + 1e-9).sum()) == int(((4095 * f) < 2 * math.pi).sum())


def test_scaled_frequencies_and_table():
    s, length = 8.0, 8192
    freqs = fq.scaled_frequencies(128, 500000.0, s, length)
    f = freqs["RoPE"]
    torch.testing.assert_close(freqs["position interpolation"], f / s)
    assert freqs["NTK-aware"][0].item() == 1.0
    assert freqs["NTK-aware"][-1].item() == pytest.approx(f[-1].item() / s)
    torch.testing.assert_close(freqs["llama3"], pe.llama3_inv_freq(f, s, 1.0, 4.0, length))
    table = fq.scaling_table(freqs, s, length)
    rows = {row[0]: row[1:] for row in table.rows}
    assert list(rows) == list(freqs)
    assert rows["RoPE"][:4] == ["64", "0", "0", str(int(((length - 1) * f < 2 * math.pi).sum()))]
    assert rows["position interpolation"][:4] == ["0", "64", "0", "0"]
    for name in ("YaRN", "llama3"):
        assert rows[name][3] == "0"
        kept = int(torch.isclose(freqs[name], f, rtol=1e-9, atol=0).sum())
        assert rows[name][0] == str(kept)


# --- p-RoPE and partial rotary -------------------------------------------------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(("d", "p"), [(8, 0.5), (64, 0.25), (64, 0.75), (16, 1.0), (16, 0.0)])
def test_p_rope_leaves_the_slow_pairs_still(layout, d, p):
    keep = round(p * (d // 2))  # pairs still turning
    still = fq.unrotated_features(functools.partial(fq.p_rope, p=p, layout=layout), d)
    if layout == "half":
        want = [*range(keep, d // 2), *range(d // 2 + keep, d)]
    else:
        want = list(range(2 * keep, d))
    assert still == want
    x = torch.randn(5, d, dtype=F64)
    f = pe.scaling.p_rope_inv_freq(pe.rope_inv_freq(d), p)
    torch.testing.assert_close(
        fq.p_rope(x, p=p, layout=layout), pe.apply_rope(x, inv_freq=f, layout=layout)
    )


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(("d", "fraction"), [(8, 0.5), (64, 0.25), (16, 1.0), (16, 0.0)])
def test_partial_rotary_rotates_the_first_block_as_its_own_head(layout, d, fraction):
    r = int(d * fraction)
    x = torch.randn(6, d, dtype=F64)
    pos = torch.tensor([0, 3, 9, 100, 5000, 7])
    y = fq.partial_rotary(x, pos, fraction=fraction, layout=layout)
    torch.testing.assert_close(y[:, r:], x[:, r:])
    if r:
        torch.testing.assert_close(y[:, :r], pe.apply_rope(x[:, :r], pos, layout=layout))
    still = fq.unrotated_features(functools.partial(fq.partial_rotary, fraction=fraction), d)
    assert still == list(range(r, d))


@settings(max_examples=20, deadline=None)
@given(m=st.integers(-500, 500), n=st.integers(-500, 500), shift=st.integers(-500, 500))
def test_p_rope_and_partial_rotary_stay_relative(m, n, shift):
    q, k = torch.randn(2, 1, 32, dtype=F64)
    for rotate in (
        functools.partial(fq.p_rope, p=0.5),
        functools.partial(fq.partial_rotary, fraction=0.25),
    ):
        a = rotate(q, [m]) @ rotate(k, [n]).mT
        b = rotate(q, [m + shift]) @ rotate(k, [n + shift]).mT
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize(
    ("values", "text"),
    [([], "none"), ([3], "3"), ([0, 1, 2, 5], "0-2, 5"), ([9, 8, 1, 2], "1-2, 8-9")],
)
def test_format_ranges(values, text):
    assert fq.format_ranges(values) == text


# --- schemes for the property table --------------------------------------------------------


def test_rope_scheme_is_the_sinusoidal_encoding_reordered_and_scaled():
    d = 16
    e = fq.rope_scheme()(torch.arange(50), d, 50)
    pe_table = pe.sinusoidal_encoding(50, d).double() / math.sqrt(d // 2)
    torch.testing.assert_close(e[:, 0::2], pe_table[:, 1::2], atol=1e-6, rtol=0)
    torch.testing.assert_close(e[:, 1::2], pe_table[:, 0::2], atol=1e-6, rtol=0)
    torch.testing.assert_close(e.norm(dim=-1), torch.ones(50, dtype=F64))


def test_relative_schemes_encode_the_offset_signal():
    s = fq.relative_schemes(max_distance=4)
    p = torch.arange(10)
    shaw = s["Shaw"](p, 6, 10, seed=2)
    gen = torch.Generator().manual_seed(2)
    table = torch.randn(9, 6, generator=gen, dtype=F64)
    torch.testing.assert_close(shaw, table[4 - p.clamp(max=4)])
    alibi = s["ALiBi"](p, 8, 10)
    torch.testing.assert_close(alibi, torch.exp(-p[:, None] * pe.relative.alibi_slopes(8)))
    t5 = s["T5"](p, 4, 10, seed=1)
    gen = torch.Generator().manual_seed(1)
    table = torch.randn(32, 4, generator=gen, dtype=F64)
    buckets = pe.relative.t5_bucket(-p, bidirectional=False)
    torch.testing.assert_close(t5, table[buckets].exp())


def test_property_verdicts_of_rope_and_the_relative_methods():
    schemes = {"RoPE": fq.rope_scheme(), **fq.relative_schemes()}
    verdicts = {n: [v.holds for v in properties.check_all(s).values()] for n, s in schemes.items()}
    assert verdicts["RoPE"] == [True] * 5
    assert verdicts["ALiBi"] == [True] * 5
    assert verdicts["Shaw"] == [False] * 5
    assert verdicts["T5"] == [False] * 5


# --- figures and bad input -----------------------------------------------------------------


def _series(fig):
    """Lines and scatter collections drawn on each axes of ``fig``."""
    return [len(ax.lines) + len(ax.collections) for ax in fig.axes]


def test_figures_draw():
    d = torch.arange(4)
    fig = fq.decay_figure(
        d, torch.ones(4), torch.ones(4), torch.ones(2, 4), torch.ones(2, 4), torch.ones(2)
    )
    assert _series(fig) == [3, 3]  # bound, measured and its spread, on both panels
    assert _series(fq.pair_cosines_figure(16, pairs=(0, 7), max_distance=1000)) == [
        2
    ]  # a pair each
    assert _series(fq.unseen_angles_figure(16, 100.0, 64, 4)) == [4]
    scaled = fq.scaled_frequencies(16, 10000.0, 4.0, 512)
    assert all(n >= len(scaled) for n in _series(fq.scaling_figure(scaled, 512, 4.0)))
    assert _series(fq.rotating_periods_figure(16, 0.5)) == [3]


v8 = torch.randn(8)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: fq.periods(torch.tensor([1.0, -1.0])), ValueError, "non-negative"),
        (lambda: fq.periods(torch.ones(2, 2)), ValueError, "1-D"),
        (lambda: fq.periods([1.0]), TypeError, "torch.Tensor"),
        (lambda: fq.longest_period(7), ValueError, "even"),
        (lambda: fq.longest_period(8, base=0.0), ValueError, "at least 2\\*\\*-64"),
        (lambda: fq.period_table(8, bases=()), ValueError, "empty"),
        (lambda: fq.scores_at_distances(v8, torch.randn(6), [1]), ValueError, "same shape"),
        (lambda: fq.scores_at_distances(torch.randn(7), torch.randn(7), [1]), ValueError, "even"),
        (lambda: fq.scores_at_distances(v8, v8, [1.5]), TypeError, "integers"),
        (
            lambda: fq.scores_at_distances(v8, v8, [1], inv_freq=torch.ones(3)),
            ValueError,
            "D/2 = 4",
        ),
        (lambda: fq.pair_scores(torch.randn(2, 8), torch.randn(2, 8), [1]), ValueError, "single"),
        (lambda: fq.decay_bound(v8.long(), v8, [1]), TypeError, "floating"),
        (lambda: fq.nearest_return(5, pe.rope_inv_freq(8), min_distance=6), ValueError, "at least"),
        (lambda: fq.angle_overshoot(10, 1, pe.rope_inv_freq(8)), ValueError, "at least 2"),
        (
            lambda: fq.angle_overshoot(10, 8, pe.rope_inv_freq(8), pe.rope_inv_freq(6)),
            ValueError,
            "same size",
        ),
        (lambda: fq.scaling_table({}, 2.0, 8), TypeError, "non-empty dict"),
        (
            lambda: fq.scaling_table({"a": torch.ones(2), "b": torch.ones(3)}, 2.0, 8),
            ValueError,
            "same number",
        ),
        (lambda: fq.p_rope(torch.randn(2, 8), p=1.5), ValueError, r"\[0, 1\]"),
        (lambda: fq.p_rope(torch.randn(2, 8), p="half"), TypeError, "number"),
        (lambda: fq.partial_rotary(torch.randn(2, 8), fraction=0.125), ValueError, "even"),
        (
            lambda: fq.partial_rotary(torch.randn(2, 8), fraction=0.5, layout="x"),
            ValueError,
            "layout",
        ),
        (lambda: fq.unrotated_features(fq.p_rope, 8, positions=()), ValueError, "empty"),
        (lambda: fq.format_ranges([1, 2.5]), TypeError, "int"),
        (lambda: fq.rope_scheme(base=-1.0), ValueError, "at least 2\\*\\*-64"),
        (lambda: fq.relative_schemes(max_distance=0), ValueError, "at least 1"),
        (lambda: fq.pair_cosines_figure(8, pairs=(4,)), ValueError, "below D/2"),
        (
            lambda: fq.decay_figure(
                torch.arange(3),
                torch.ones(2),
                torch.ones(3),
                torch.ones(2, 3),
                torch.ones(2, 3),
                torch.ones(2),
            ),
            ValueError,
            "bound and aligned",
        ),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()
