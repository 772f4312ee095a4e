"""Absolute encodings and rotations: their defining identities, and bad input."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc.book import sinusoidal_views


@pytest.mark.parametrize(
    ("num_positions", "dim", "base"), [(1, 2, 10000.0), (17, 8, 10000.0), (50, 64, 500000.0)]
)
def test_sinusoidal_matches_the_formula(num_positions, dim, base):
    got = pe.sinusoidal_encoding(num_positions, dim, base)
    assert got.dtype == torch.float32 and got.shape == (num_positions, dim)
    torch.testing.assert_close(
        got.double(),
        sinusoidal_views.naive_sinusoidal_encoding(num_positions, dim, base),
        atol=1e-6,
        rtol=0,
    )


def test_frequency_exponents_run_from_zero_to_d_minus_2_over_d():
    dim, base = 8, 10000.0
    w = pe.sinusoidal_frequencies(dim, base)
    exponents = -torch.log(w) / math.log(base)
    torch.testing.assert_close(exponents, torch.tensor([0, 2, 4, 6], dtype=torch.float64) / dim)


@settings(max_examples=40, deadline=None)
@given(p=st.integers(0, 500), k=st.integers(-200, 200), half=st.integers(1, 16))
def test_shift_matrix_moves_every_pair(p, k, half):
    dim = 2 * half
    if p + k < 0:
        k = -p
    pe_table = pe.sinusoidal_encoding(max(p, p + k) + 1, dim).double()
    moved = pe.sinusoidal_shift_matrix(k, dim) @ pe_table[p]
    torch.testing.assert_close(moved, pe_table[p + k], atol=2e-6, rtol=0)


@settings(max_examples=40, deadline=None)
@given(a=st.floats(-10, 10), b=st.floats(-10, 10))
def test_rotations_compose_keep_norms_and_invert_by_transpose(a, b):
    ra, rb = (
        pe.rotation_matrix(torch.tensor(a, dtype=torch.float64)),
        pe.rotation_matrix(torch.tensor(b, dtype=torch.float64)),
    )
    torch.testing.assert_close(
        ra @ rb, pe.rotation_matrix(torch.tensor(a + b, dtype=torch.float64))
    )
    torch.testing.assert_close(ra.T @ ra, torch.eye(2, dtype=torch.float64))
    torch.testing.assert_close(torch.linalg.det(ra), torch.tensor(1.0, dtype=torch.float64))
    v = torch.tensor([0.3, -1.7], dtype=torch.float64)
    torch.testing.assert_close((ra @ v).norm(), v.norm())


def test_rotation_is_counter_clockwise_and_position_zero_is_identity():
    quarter = pe.rotation_matrix(math.pi / 2)
    torch.testing.assert_close(
        quarter @ torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), atol=1e-6, rtol=0
    )
    assert torch.equal(pe.rotation_matrix(torch.zeros(3)), torch.eye(2).expand(3, 2, 2))
    assert torch.equal(pe.sinusoidal_shift_matrix(0, 6), torch.eye(6, dtype=torch.float64))


def test_block_diagonal_equals_blockwise_application():
    blocks = torch.randn(4, 2, 2, dtype=torch.float64)
    x = torch.randn(8, dtype=torch.float64)
    blockwise = torch.cat([blocks[i] @ x[2 * i : 2 * i + 2] for i in range(4)])
    torch.testing.assert_close(pe.block_diagonal(blocks) @ x, blockwise)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_block_diagonal_keeps_a_nan_or_inf_in_its_own_block(value):
    """A value that is not finite stays where it was put: every entry off the blocks is 0
    (multiplying by a 0 mask spread a NaN along the block's rows to (0, 2) and (0, 4))."""
    blocks = torch.randn(2, 3, 2, 2)
    blocks[0, 0, 0, 0] = value
    got = pe.block_diagonal(blocks)
    on = torch.block_diag(*[torch.ones(2, 2)] * 3).bool()
    assert torch.equal(got[..., ~on], torch.zeros(2, 24))
    for i in range(3):  # each block as given, bit for bit (NaN where it was)
        block = got[..., 2 * i : 2 * i + 2, 2 * i : 2 * i + 2]
        assert torch.equal(block.nan_to_num(7.0), blocks[:, i].nan_to_num(7.0))


@pytest.mark.parametrize("base", [1e-320, 5e-324, 1e-30, 2.0**-65, 0.0])
def test_a_base_too_small_for_float32_angles_is_refused_by_every_function_that_takes_one(base):
    """A subnormal base passed and gave NaN (its frequencies overflow); every base below
    2**-64, where an angle could overflow float32, is now refused, naming it, by the core's
    functions and the fast path."""
    from posenc import fast, scaling

    calls = [
        lambda: pe.rope_inv_freq(8, base),
        lambda: pe.apply_rope(torch.randn(4, 8), base=base),
        lambda: pe.apply_rope_(torch.randn(4, 8), base=base),
        lambda: pe.rope_matrix(3, 8, base=base),
        lambda: pe.sinusoidal_encoding(4, 8, base),
        lambda: pe.sinusoidal_frequencies(8, base),
        lambda: pe.sinusoidal_shift_matrix(2, 8, base),
        lambda: scaling.ntk_aware_inv_freq(8, base, 2.0),
        lambda: fast.apply_rope(torch.randn(4, 8), base=base),
        lambda: fast.apply_rope_(torch.randn(4, 8), base=base),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"base must be finite and at least 2\*\*-64"):
            call()


@settings(max_examples=60, deadline=None)
@given(
    base=st.one_of(st.just(2.0**-64), st.floats(2.0**-64, 1e300)),
    position=st.integers(-(2**63), 2**63 - 1),
)
def test_every_base_taken_gives_finite_rotations_that_keep_norms(base, position):
    """From base 2**-64 up, at any int64 position, RoPE's result is finite and keeps the
    norm (the frequencies stay below 2**64, the angles p * theta finite in float32)."""
    x = torch.randn(1, 16, dtype=torch.float64)
    for dtype in (torch.float32, torch.float64):
        y = pe.apply_rope(x.to(dtype), [position], base=base)
        assert torch.isfinite(y).all()
        torch.testing.assert_close(y.double().norm(), x.norm(), rtol=1e-5, atol=0)


@settings(max_examples=40, deadline=None)
@given(positions=st.lists(st.integers(0, 2**20 - 1), min_size=1, max_size=20))
def test_binary_encoding_reads_back(positions):
    bits = pe.binary_encoding(positions, 20)
    weights = 2.0 ** torch.arange(20)
    assert bits.sum(-1).le(20).all()
    assert (bits @ weights).long().tolist() == positions


def test_binary_example_from_the_source():
    assert pe.binary_encoding(252, 8).long().flip(-1).tolist() == [[1, 1, 1, 1, 1, 1, 0, 0]]


def test_integer_encodings():
    assert pe.integer_encoding([0, 5], 3).tolist() == [[0, 0, 0], [5, 5, 5]]
    a = pe.length_normalized_encoding([5], 2, length=10)
    b = pe.length_normalized_encoding([5], 2, length=20)
    assert a.tolist() == [[0.5, 0.5]] and b.tolist() == [[0.25, 0.25]]


def test_learned_table_has_a_hard_limit_and_is_seeded():
    table = pe.LearnedPositionalEmbedding(8, 4, seed=1)
    assert torch.equal(table([7]), pe.LearnedPositionalEmbedding(8, 4, seed=1)([7]))
    assert not torch.equal(table([7]), pe.LearnedPositionalEmbedding(8, 4, seed=2)([7]))
    with pytest.raises(ValueError, match="below max_positions=8"):
        table([8])


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: pe.sinusoidal_encoding(4, 7), ValueError, "dim must be even"),
        (lambda: pe.sinusoidal_encoding(4, 0), ValueError, "dim must be at least 1"),
        (lambda: pe.sinusoidal_encoding(0, 4), ValueError, "num_positions must be at least 1"),
        (
            lambda: pe.sinusoidal_encoding(4, 4, base=-1.0),
            ValueError,
            "base must be finite and at least 2\\*\\*-64",
        ),
        (lambda: pe.sinusoidal_encoding(4.0, 4), TypeError, "num_positions must be an int"),
        (lambda: pe.binary_encoding([256], 8), ValueError, "below 2\\*\\*num_bits=256"),
        (lambda: pe.binary_encoding([-1], 8), ValueError, "non-negative"),
        (lambda: pe.binary_encoding([1.5], 8), TypeError, "integers"),
        (lambda: pe.binary_encoding([], 8), ValueError, "not be empty"),
        (lambda: pe.integer_encoding([[1]], 2), ValueError, "1-D"),
        (lambda: pe.length_normalized_encoding([4], 2, length=4), ValueError, "below length=4"),
        (lambda: pe.rotation_matrix("pi"), TypeError, "theta must be a number"),
        (lambda: pe.block_diagonal(torch.zeros(2, 3, 3)), ValueError, "n, 2, 2"),
        (lambda: pe.sinusoidal_shift_matrix(1.5, 4), TypeError, "offset must be an int"),
        (
            lambda: pe.LearnedPositionalEmbedding(0, 4),
            ValueError,
            "max_positions must be at least 1",
        ),
    ],
)
def test_bad_input_gets_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_a_rotation_by_an_int_of_any_size_is_a_rotation():
    """An angle given as a Python int is a number of radians, however large (as a float)."""
    big = pe.rotation_matrix(2**70)
    assert big.shape == (2, 2) and torch.allclose(big @ big.mT, torch.eye(2), atol=1e-6)
