"""Fast RoPE: every implementation against the reference, exactness where promised, bad input.

The reference is the elementwise form (``rope_elementwise``: the arithmetic ``apply_rope``
has always done), itself checked against a plain per-pair loop in float64.
"""

import importlib.util
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc._validate as _validate
import posenc.rope as rope
from posenc.bench import forms as fr
from posenc.fast import _checks as checks
from posenc.fast import cpu_kernel
from posenc.fast import dispatch as kernels
from posenc.fast import tables as tb
from posenc.fast import triton as tr

LAYOUTS = rope.LAYOUTS
DTYPES = [torch.float32, torch.bfloat16]
# agreement with the reference: a few units in the last place of the result's dtype
TOL = {
    torch.float32: {"rtol": 2e-6, "atol": 2e-6},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2},
    torch.float16: {"rtol": 2e-3, "atol": 2e-3},
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
}


def naive_rope(x, positions, base=10000.0, layout="interleaved"):
    """A loop over pairs, the angles from Python floats: float64 ``[..., T, D]``."""
    out = x.double().clone()
    dim = x.shape[-1]
    half = dim // 2
    pos = torch.as_tensor(positions, dtype=torch.float64)
    for i in range(half):
        a, b = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + half)
        angle = pos * base ** (-2 * i / dim)
        c, s = torch.cos(angle), torch.sin(angle)
        x1, x2 = x[..., a].double(), x[..., b].double()
        out[..., a] = x1 * c - x2 * s
        out[..., b] = x1 * s + x2 * c
    return out


def _contiguous(shape, dtype):
    gen = torch.Generator().manual_seed(sum(shape))
    return torch.randn(shape, generator=gen).to(dtype)


def _transposed(shape, dtype):
    """``[B, T, H, D]`` memory seen as ``[B, H, T, D]``: leading dims that do not merge."""
    b, h, t, d = shape
    return _contiguous((b, t, h, d), dtype).transpose(1, 2)


def _row_slice(shape, dtype):
    """Rows of ``D`` taken from wider rows: last stride 1, row stride ``D + 4``."""
    *lead, d = shape
    return _contiguous((*lead, d + 4), dtype)[..., 2 : 2 + d]


def _strided_features(shape, dtype):
    """Every other feature of a wider tensor: last stride 2 (no complex view)."""
    *lead, d = shape
    return _contiguous((*lead, 2 * d), dtype)[..., ::2]


MAKERS = {
    "contiguous": _contiguous,
    "transposed": _transposed,
    "row_slice": _row_slice,
    "strided": _strided_features,
}
SHAPES = [(1, 1, 1, 8), (2, 3, 5, 16), (1, 4, 33, 64)]


def _inplace(x, positions=None, **kw):
    y = x.clone()
    out = fr.apply_rope_(y, positions, **kw)
    assert out is y
    return y


def _qk_first(x, positions=None, **kw):
    return fr.rope_qk(x, x.flip(1), positions, **kw)[0]


def _qk_second(x, positions=None, **kw):
    return fr.rope_qk(x.flip(1), x, positions, **kw)[1]


def _qk_inplace(x, positions=None, **kw):
    q, k = x.clone(), x.clone()
    fr.rope_qk(q, k, positions, inplace=True, **kw)
    assert torch.equal(q, k)
    return k


IMPLS = {
    "dense": fr.rope_dense,
    "elementwise": fr.rope_elementwise,
    "rotate_half": fr.rope_rotate_half,
    "complex": fr.rope_complex,
    "cached": fr.rope_cached,
    "blocked": fr.rope_blocked,
    "blocked_tiny_blocks": lambda x, p=None, **kw: fr.rope_blocked(x, p, block_elements=8, **kw),
    # posenc.rope.apply_rope is not one of them: it is the reference's own arithmetic, and
    # comparing it with rope_elementwise would compare one computation with itself
    "fast_apply_rope": fr.apply_rope,
    "fast_apply_rope_": _inplace,
    "rope_qk_q": _qk_first,
    "rope_qk_k": _qk_second,
    "rope_qk_inplace": _qk_inplace,
}


def test_reference_is_the_naive_loop():
    x = torch.randn(2, 3, 7, 12, dtype=torch.float64)
    positions = [0, 1, -5, 17, 4096, 100000, 3]
    for layout in LAYOUTS:
        got = fr.rope_elementwise(x, positions, base=500.0, layout=layout)
        want = naive_rope(x, positions, base=500.0, layout=layout)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(IMPLS))
@pytest.mark.parametrize("maker", list(MAKERS))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_implementation_matches_reference(name, maker, shape, dtype, layout):
    x = MAKERS[maker](shape, dtype)
    x_before = x.clone()
    positions = torch.arange(shape[-2]) * 37 - 11  # negative ones too
    got = IMPLS[name](x, positions, layout=layout)
    want = fr.rope_elementwise(x, positions, layout=layout)
    assert got.shape == x.shape and got.dtype == x.dtype and got.device == x.device
    torch.testing.assert_close(got, want, **TOL[dtype])
    assert torch.equal(x, x_before), "an out-of-place implementation changed its input"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_default_path_is_bit_identical_for_small_inputs(dtype, layout):
    """``fast.apply_rope``, ``fast.apply_rope_`` and ``rope_qk`` give inputs of at most 32,768
    elements the reference's arithmetic itself: bit for bit, in every dtype."""
    x = torch.randn(3, 5, 10, dtype=torch.float64).to(dtype)
    want = rope.apply_rope(x, layout=layout)
    assert torch.equal(fr.rope_elementwise(x, layout=layout), want)
    assert torch.equal(fr.apply_rope(x, layout=layout), want)
    y = x.clone()
    assert fr.apply_rope_(y, layout=layout) is y and torch.equal(y, want)
    assert all(torch.equal(r, want) for r in fr.rope_qk(x, x.clone(), layout=layout))


@settings(max_examples=40, deadline=None)
@given(
    lead=st.lists(st.integers(1, 4), min_size=0, max_size=2),
    length=st.integers(1, 40),
    pairs=st.integers(1, 24),
    budget=st.integers(1, 3000),
    layout=st.sampled_from(LAYOUTS),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16]),
    transpose=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_blocks_of_any_size_give_the_same_result(
    lead, length, pairs, budget, layout, dtype, transpose, seed
):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*lead, length, 2 * pairs, generator=gen, dtype=torch.float64).to(dtype)
    if transpose and x.dim() >= 3:
        x = x.transpose(0, -2).contiguous().transpose(0, -2)  # same values, other strides
    positions = torch.randint(-5000, 5000, (length,), generator=gen)
    want = fr.rope_elementwise(x, positions, layout=layout)
    got = fr.rope_blocked(x, positions, layout=layout, block_elements=budget)
    y = x.clone()
    fr._rotate_into(y, y, tb._tables(tb._Args(y, positions, 1e4, None, layout)), layout, budget)
    if layout == "half":
        # the four-step kernel rounds each product once, as the reference does
        assert torch.equal(got, want) and torch.equal(y, want)
    else:
        torch.testing.assert_close(got, want, **TOL[dtype])
        torch.testing.assert_close(y, want, **TOL[dtype])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.skipif(not cpu_kernel.available(), reason="needs the C loop")
def test_the_c_loop_serves_the_calls_it_takes(layout, monkeypatch):
    """``fast.apply_rope`` and ``fast.apply_rope_`` hand x to the C loop, the first call
    (which makes the tables) and the later ones (which find them cached) alike, in place for
    ``apply_rope_`` into x's own memory, bit for bit the reference."""
    x = torch.randn(2, 8, 300, 64)
    calls = []
    run = cpu_kernel._run
    monkeypatch.setattr(cpu_kernel, "_run", lambda lib, *a: calls.append(a) or run(lib, *a))
    want = fr.rope_elementwise(x, layout=layout)
    tb.cache_clear()
    got = fr.apply_rope(x, layout=layout)
    assert torch.equal(got, want) and torch.equal(fr.apply_rope(x, layout=layout), want)
    y = x.clone()
    ptr = y.data_ptr()
    assert fr.apply_rope_(y, layout=layout) is y and y.data_ptr() == ptr
    assert torch.equal(y, want)
    # one pass of the loop each: from x into the result (twice), and from y into y itself
    assert len(calls) == 3
    assert calls[0][0] is x and calls[0][1] is got
    assert calls[2][0] is y and calls[2][1] is y


OFFSET_FORMS = {
    "apply_rope": lambda q, k, **kw: (fr.apply_rope(q, **kw),),
    "apply_rope_": lambda q, k, **kw: (fr.apply_rope_(q.clone(), **kw),),
    "rope_qk": lambda q, k, **kw: fr.rope_qk(q, k, **kw),
    "rope_qk_inplace": lambda q, k, **kw: fr.rope_qk(q.clone(), k.clone(), inplace=True, **kw),
}


@pytest.mark.parametrize("form", list(OFFSET_FORMS))
@pytest.mark.parametrize("length", [5, 300], ids=["small", "large"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_offset_shifts_the_default_positions(form, length, layout):
    """``offset`` (a KV cache's length) with the default positions rotates as the reference
    does at ``arange(T) + offset``: ``fast.apply_rope``, ``apply_rope_`` and ``rope_qk`` (out
    of place and in place), below and above the small-input threshold, each first called at
    offset 0, so that the tables of ``arange(T)`` are in the cache (a cache key that forgot
    the offset would hand them back). Bit for bit where the docstring promises it (small
    inputs, the C loop), else to float32 round-off."""
    gen = torch.Generator().manual_seed(length)
    q = torch.randn(2, 8, length, 64, generator=gen)
    k = torch.randn(2, 2, length, 64, generator=gen)  # fewer key heads
    exact = length == 5 or cpu_kernel.available()

    def check(got, positions):
        for g, x in zip(got, (q, k)[: len(got)], strict=True):
            want = rope.apply_rope(x, positions, layout=layout)
            if exact:
                assert torch.equal(g, want)
            else:
                torch.testing.assert_close(g, want, **TOL[torch.float32])

    check(OFFSET_FORMS[form](q, k, layout=layout), torch.arange(length))
    for offset in (5, 70000):
        shifted = torch.arange(length) + offset
        # the offset matters: the reference's rotation at it is another
        assert not torch.allclose(rope.apply_rope(q, shifted, layout=layout), rope.apply_rope(q))
        check(OFFSET_FORMS[form](q, k, layout=layout, offset=offset), shifted)


TOP = 2**63 - 1  # the largest int64


@pytest.mark.parametrize("form", list(OFFSET_FORMS))
@pytest.mark.parametrize(
    ("positions", "offset"),
    [
        ([2**62], 2**62),  # one past the top: wrapped to -2**63 before
        (torch.tensor([0, 2**62]), 2**62),
        (torch.tensor([-(2**62) - 1, 0]), -(2**62)),  # one below the bottom
        (None, TOP),  # arange(T) + offset: the second position is past the top
    ],
    ids=["list", "tensor", "below", "default positions"],
)
def test_an_offset_that_takes_a_position_past_int64_is_refused(form, positions, offset):
    """A sum of positions and offset outside int64 wrapped around silently (the rotation at
    the far end of the range); now it is refused, naming the offset."""
    q, k = torch.randn(1, 2, 2, 8), torch.randn(1, 1, 2, 8)
    with pytest.raises(
        ValueError, match=rf"positions \+ offset must fit in int64.*offset={offset}"
    ):
        OFFSET_FORMS[form](q, k, positions=positions, offset=offset)


@pytest.mark.parametrize("form", list(OFFSET_FORMS))
def test_an_offset_up_to_the_ends_of_int64_rotates_as_the_reference(form):
    """Sums that land exactly on the ends of int64 are kept, and rotate as the reference at
    the summed positions (Python's exact sums), also from a narrower integer dtype."""
    q, k = torch.randn(1, 2, 2, 8), torch.randn(1, 1, 2, 8)
    cases = [
        (torch.tensor([2**62 - 1, 0]), 2**62, [TOP, 2**62]),
        (torch.tensor([-(2**62), 5]), -(2**62), [-(2**63), 5 - 2**62]),
        (torch.tensor([7, -3], dtype=torch.int32), 2**62, [2**62 + 7, 2**62 - 3]),
        (None, TOP - 1, [TOP - 1, TOP]),
    ]
    for positions, offset, summed in cases:
        got = OFFSET_FORMS[form](q, k, positions=positions, offset=offset)
        for g, x in zip(got, (q, k), strict=False):
            want = rope.apply_rope(x, torch.tensor(summed))
            torch.testing.assert_close(g, want, **TOL[torch.float32])


@pytest.mark.parametrize("name", ["fast_apply_rope", "blocked", "cached", "complex", "dense"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_positions_with_leading_dims_broadcast_like_the_reference(name, layout):
    x = torch.randn(2, 3, 4, 8)
    positions = torch.tensor([[0, 5, 9, 2], [7, 7, 1, -3]])[:, None, :]  # [B, 1, T]
    got = IMPLS[name](x, positions, layout=layout)
    torch.testing.assert_close(got, fr.rope_elementwise(x, positions, layout=layout))
    for b in range(2):
        torch.testing.assert_close(
            got[b], fr.rope_elementwise(x[b], positions[b, 0], layout=layout)
        )
    # positions that make the result larger than x: out of place as the reference, not in place
    wide = torch.arange(8).view(2, 4)
    small = torch.randn(4, 8)
    assert torch.equal(fr.apply_rope(small, wide), rope.apply_rope(small, wide))
    assert fr.apply_rope(small, wide).shape == (2, 4, 8)
    for in_place in (fr.apply_rope_, rope.apply_rope_):
        with pytest.raises(ValueError, match="in-place rotation must keep x's shape"):
            in_place(small, wide)


def test_tables_are_cached_by_positions_frequencies_and_dtype():
    tb.cache_clear()
    x = torch.randn(2, 6, 8)
    fr.rope_cached(x)
    fr.rope_cached(x)
    assert tb.cache_info()["hits"] == 1 and tb.cache_info()["misses"] == 1
    # other positions, other frequencies (same shape), another angle dtype: new tables
    slow = rope.rope_inv_freq(8, 10.0)
    for call in (
        lambda: fr.rope_cached(x, [1, 2, 3, 4, 5, 6]),
        lambda: fr.rope_cached(x, inv_freq=slow),
        lambda: fr.rope_cached(x.double()),
    ):
        call()
    assert tb.cache_info()["misses"] == 4
    torch.testing.assert_close(
        fr.rope_cached(x, inv_freq=slow), fr.rope_elementwise(x, inv_freq=slow)
    )
    torch.testing.assert_close(
        fr.rope_cached(x, [1, 2, 3, 4, 5, 6]), fr.rope_elementwise(x, [1, 2, 3, 4, 5, 6])
    )
    for t in range(1, 40):  # the cache holds a bounded number of tables
        fr.rope_cached(torch.randn(t, 8))
    assert tb.cache_info()["size"] == tb.cache_info()["maxsize"]


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("fast_apply_rope", (3, 5, 8)),
        # past the small-input threshold: the fast path's own autograd route, out of place
        ("fast_apply_rope", (2, 8, 300, 64)),
        # in place, on copies of x (a non-leaf): apply_rope_, and rope_qk's k
        ("fast_apply_rope_", (2, 8, 300, 64)),
        ("rope_qk_inplace", (2, 8, 300, 64)),
        ("blocked", (3, 5, 8)),
        ("cached", (3, 5, 8)),
        ("complex", (3, 5, 8)),
        ("rotate_half", (3, 5, 8)),
    ],
    ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v,
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gradient_is_the_inverse_rotation(name, shape, layout):
    """While autograd records, the result is the reference's rotation, and the gradient of
    ``<R(p) x, w>`` with respect to x is ``R(p)^T w = R(-p) w`` (float64). In place and past
    the small-input threshold, the half layout's backward once failed: the rotation read
    views of the x it overwrote."""
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    w = torch.randn(shape, dtype=torch.float64)
    positions = torch.arange(shape[-2]) * 37 - 11
    out = IMPLS[name](x, positions, layout=layout)
    assert out.requires_grad
    want = fr.rope_elementwise(x.detach(), positions, layout=layout)
    torch.testing.assert_close(out, want, **TOL[torch.float64])
    (out * w).sum().backward()
    torch.testing.assert_close(x.grad, fr.rope_elementwise(w, -positions, layout=layout))


@pytest.mark.parametrize("in_place", [fr.apply_rope_, rope.apply_rope_], ids=["fast", "reference"])
def test_in_place_records_autograd_on_a_non_leaf(in_place):
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    y = x * 1.0
    in_place(y, [1, 2, 3, 4])
    y.sum().backward()
    torch.testing.assert_close(
        x.grad, fr.rope_elementwise(torch.ones(4, 8, dtype=torch.float64), [-1, -2, -3, -4])
    )
    leaf = torch.randn(4, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        in_place(leaf)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_small_inputs_are_bit_identical_also_with_autograd_and_broadcasting(layout):
    """The promise of ``apply_rope`` for inputs of up to 32,768 elements holds on every path:
    while autograd records, and when positions ``[1, T]`` broadcast ``x [T, D]``."""
    x = torch.randn(5, 8)
    grows = torch.arange(5)[None] + 7  # [1, T]
    for got, want in (
        (fr.apply_rope(x.requires_grad_(), layout=layout), rope.apply_rope(x, layout=layout)),
        (fr.apply_rope(x.detach(), grows, layout=layout), rope.apply_rope(x, grows, layout=layout)),
    ):
        assert torch.equal(got, want) and got.shape == want.shape


def test_learned_frequencies_are_never_cached():
    """Tables made from frequencies that require grad would carry the graph of the call that
    made them: each call makes its own, so that each gets its gradient (a new tensor of the
    same values, a second backward, a call after one under no_grad)."""
    x = torch.randn(5, 8, dtype=torch.float64)
    base = rope.rope_inv_freq(8).double()

    def grad_of(inv):
        (out,) = torch.autograd.grad((fr.apply_rope(x, inv_freq=inv) * x).sum(), inv)
        return out

    inv = base.clone().requires_grad_()
    with torch.no_grad():
        fr.apply_rope(x, inv_freq=inv)
    assert fr.apply_rope(x, inv_freq=inv).requires_grad
    first = grad_of(inv)
    torch.testing.assert_close(first, grad_of(inv))  # the same tensor again
    torch.testing.assert_close(first, grad_of(base.clone().requires_grad_()))  # another one
    reference = torch.autograd.grad((rope.apply_rope(x, inv_freq=inv) * x).sum(), inv)[0]
    torch.testing.assert_close(first, reference)


def test_frequencies_are_cached_by_their_bits():
    """-0.0 and 0.0 are equal numbers but not the same frequency: each gets its own table,
    and the result's signs are the reference's."""
    x = torch.tensor([[1.0, -0.0]])
    for inv in (torch.tensor([0.0]), torch.tensor([-0.0])):
        got, want = fr.apply_rope(x, [1], inv_freq=inv), rope.apply_rope(x, [1], inv_freq=inv)
        assert torch.equal(got.signbit(), want.signbit()), (inv, got, want)


def test_torch_func_transforms_take_the_fast_path():
    """grad and vmap over ``fast.apply_rope`` and ``fast.apply_rope_`` give the reference's
    numbers, on inputs small and large (past the C loop's threshold), positions batched too."""
    from torch.func import grad, vmap

    x = torch.randn(5, 8, dtype=torch.float64)
    positions = [1, 2, 3, 4, 5]

    def loss(apply):
        return lambda z: apply(z, positions).pow(3).sum()

    def loss_in_place(z):
        z = z.clone()
        fr.apply_rope_(z, positions)
        return z.pow(3).sum()

    want = grad(loss(rope.apply_rope))(x)
    assert torch.equal(grad(loss(fr.apply_rope))(x), want)
    assert torch.equal(grad(loss_in_place)(x), want)
    big = torch.randn(2, 4, 300, 64)  # each call of the vmapped function past 32,768 elements
    rows = torch.randint(0, 1000, (2, 300))
    assert torch.equal(vmap(fr.apply_rope)(big), vmap(rope.apply_rope)(big))
    assert torch.equal(vmap(fr.apply_rope)(big, rows), vmap(rope.apply_rope)(big, rows))


def test_empty_leading_dims():
    x = torch.randn(0, 3, 8)
    for name in ("fast_apply_rope", "blocked", "fast_apply_rope_"):
        assert IMPLS[name](x).shape == (0, 3, 8)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("position", [0, 1, -7, 1000])
def test_dense_matrices_are_rope_matrix(layout, position):
    cos, sin = tb.rope_tables([position], 10, base=321.0, dtype=torch.float64)
    mats = fr.dense_matrices(cos, sin, layout)
    torch.testing.assert_close(mats[0], rope.rope_matrix(position, 10, base=321.0, layout=layout))


def test_rope_tables_match_the_contract():
    positions = torch.tensor([[0, 1, 2], [5, 6, 70000]])
    cos, sin = tb.rope_tables(positions, 6, base=100.0)
    assert cos.shape == (2, 3, 3) and cos.dtype == torch.float32
    # the contract: positions and frequencies cast to float32, then multiplied
    angles = positions.float()[..., None] * rope.rope_inv_freq(6, 100.0).float()
    assert torch.equal(cos, angles.cos()) and torch.equal(sin, angles.sin())
    exact = positions.double()[..., None] * rope.rope_inv_freq(6, 100.0)
    torch.testing.assert_close(cos.double(), exact.cos(), atol=1e-2, rtol=0)  # float32 angles
    assert torch.equal(tb.rope_tables(range(3), 6, base=100.0)[1], sin[0])


def test_rope_qk_with_fewer_key_heads():
    q, k = torch.randn(2, 8, 5, 16), torch.randn(2, 2, 5, 16)
    rq, rk = fr.rope_qk(q, k, [3, 4, 5, 6, 7], layout="half")
    torch.testing.assert_close(rq, fr.rope_elementwise(q, [3, 4, 5, 6, 7], layout="half"))
    torch.testing.assert_close(rk, fr.rope_elementwise(k, [3, 4, 5, 6, 7], layout="half"))


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("size", [5, 600])  # the elementwise form, and the blocked one
def test_rope_qk_broadcasts_positions_over_each_of_q_and_k(inplace, size):
    """Positions ``[B, 1, T]`` (one row per batch entry) turn every head of q and of k, with
    its own number of heads, as ``apply_rope`` turns each alone."""
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(3, 8, size, 16, generator=gen), torch.randn(3, 2, size, 16, generator=gen)
    positions = torch.randint(-50, 5000, (3, 1, size), generator=gen)
    want = [rope.apply_rope(x, positions, layout="half", inv_freq=rope.rope_inv_freq(16, 10.0))
            for x in (q, k)]  # fmt: skip
    got = fr.rope_qk(
        q, k, positions, layout="half", inv_freq=rope.rope_inv_freq(16, 10.0), inplace=inplace
    )
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)
    assert (got[0] is q) is inplace and (got[1] is k) is inplace


def test_rope_qk_refuses_positions_that_fit_q_and_not_k():
    q, k = torch.randn(1, 4, 6, 8), torch.randn(1, 2, 6, 8)
    positions = torch.arange(24).view(4, 6)  # one row per query head: k has two
    with pytest.raises(ValueError, match=r"\(4, 6\) do not broadcast .* \(1, 2, 6\)"):
        fr.rope_qk(q, k, positions)


@pytest.mark.parametrize("size", [5, 600])  # the elementwise form, and the blocked one
@pytest.mark.parametrize("grad", [False, True])
def test_rope_qk_in_place_rotates_one_tensor_passed_twice_once(size, grad):
    """``rope_qk(x, x, inplace=True)`` leaves in ``x`` what ``rope_qk(x, x)`` returns for
    both: one rotation, not two."""
    x = torch.randn(2, 3, size, 16)
    want = fr.rope_qk(x, x, layout="half")[0]
    x = x.clone().requires_grad_(grad).clone() if grad else x  # not a leaf: autograd records it
    rq, rk = fr.rope_qk(x, x.view(x.shape), layout="half", inplace=True)
    assert rq is x and torch.equal(x, want) and torch.equal(rk, want)


def test_rope_qk_in_place_under_torch_func_transforms():
    """``torch.func`` passes wrappers with no storage of their own: in place still works,
    and one tensor passed twice is still rotated once (its gradient is one rotation's)."""
    q, k = torch.randn(1, 2, 5, 8), torch.randn(1, 1, 5, 8)
    weights = torch.arange(8.0)

    def once(q):
        return (rope.apply_rope(q) * weights).sum()

    def apart(q):
        rq, _ = fr.rope_qk(q * 1, k * 1, inplace=True)
        return (rq * weights).sum()

    def twice(q):
        y = q * 1
        rq, _ = fr.rope_qk(y, y, inplace=True)
        return (rq * weights).sum()

    want = torch.func.grad(once)(q)
    assert torch.allclose(torch.func.grad(apart)(q), want)
    assert torch.allclose(torch.func.grad(twice)(q), want)
    batch = torch.randn(3, 1, 2, 5, 8)
    rotated = torch.vmap(lambda t: fr.rope_qk(t * 1, t * 1, inplace=True)[0])(batch)
    assert torch.allclose(rotated, rope.apply_rope(batch))


def test_rope_qk_in_place_checks_both_before_writing_either():
    """An error about k leaves q as it was: positions that would enlarge k alone, and k a
    leaf that requires grad (torch's refusal, made before anything is written)."""
    rows = torch.arange(4).expand(2, 1, 4)  # [2, 1, T]: fits q [2, ...], enlarges k [1, ...]
    q, k = torch.randn(2, 3, 4, 8), torch.randn(1, 3, 4, 8)
    before = q.clone()
    with pytest.raises(ValueError, match="must keep k's shape"):
        fr.rope_qk(q, k, rows, inplace=True)
    assert torch.equal(q, before)
    for k in (
        torch.randn(2, 3, 4, 8, requires_grad=True),
        torch.randn(2, 3, 8, 4).requires_grad_(),
    ):
        k = k if k.shape[-1] == 8 else k.transpose(-1, -2)  # a view of a leaf, too
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            fr.rope_qk(q, k, inplace=True)
        assert torch.equal(q, before)
    with torch.no_grad():  # as torch allows it
        fr.rope_qk(q, k, inplace=True)
    assert not torch.equal(q, before)


FORWARD_AD_CALLS = {
    "apply_rope": lambda x: fr.apply_rope(x, layout="half"),
    "apply_rope_": lambda x: fr.apply_rope_(x * 1, layout="half"),
    "rope_qk": lambda x: fr.rope_qk(x, x * 2, layout="half")[0],
    "rope_qk in place": lambda x: fr.rope_qk(x * 1, x * 2, layout="half", inplace=True)[0],
}


@pytest.mark.parametrize("call", list(FORWARD_AD_CALLS))
def test_forward_mode_ad_carries_the_tangent(call):
    """A tangent is rotated as the input is (the rotation is linear), through a dual level
    and through ``torch.func.jvp``, on inputs large enough for the C loop, which writes
    through pointers and so would drop it: inside a forward-mode level tensor operations
    serve the call."""
    x = torch.randn(2, 3, 64, 256)
    tangent = torch.randn_like(x)
    fn = FORWARD_AD_CALLS[call]
    want = rope.apply_rope(tangent, layout="half")
    with torch.autograd.forward_ad.dual_level():
        out = fn(torch.autograd.forward_ad.make_dual(x, tangent))
        primal, got = torch.autograd.forward_ad.unpack_dual(out)
    assert got is not None and torch.allclose(got, want, atol=1e-5), call
    assert torch.allclose(primal, rope.apply_rope(x, layout="half"), atol=1e-5)
    primal, got = torch.func.jvp(fn, (x,), (tangent,))
    assert torch.allclose(got, want, atol=1e-5), call


def test_in_place_on_an_inference_tensor_outside_inference_mode_is_refused():
    """In torch's words, as ``Tensor.mul_`` refuses it, by every in-place function; inside
    ``torch.inference_mode()`` it is taken."""
    with torch.inference_mode():
        x = torch.randn(2, 3, 4, 8)
    kept = x.clone()
    with pytest.raises(RuntimeError, match="inference tensor outside InferenceMode"):
        x.mul_(1)
    calls = (lambda: fr.apply_rope_(x), lambda: fr.rope_qk(x, x.clone(), inplace=True))
    for call in calls:
        with pytest.raises(RuntimeError, match="inference tensor outside InferenceMode"):
            call()
        assert torch.equal(x, kept)
        with torch.inference_mode():
            call()
        assert not torch.equal(x, kept)
        kept = x.clone()


def test_rope_qk_in_place_refuses_q_and_k_that_share_some_elements():
    x = torch.randn(2, 4, 600, 16)
    kept = x.clone()
    with pytest.raises(ValueError, match="q and k must not share part of their memory"):
        fr.rope_qk(x, x[:, 1:3], inplace=True)
    assert torch.equal(x, kept)  # refused before anything was written


@pytest.mark.parametrize("size", [5, 600])  # the elementwise form, and the blocked one
def test_in_place_refuses_a_tensor_that_overlaps_itself_as_on_a_gpu(size):
    """An expanded view holds one element in several places: refused with the GPU path's
    error, naming the argument, and before q is written when k is the expanded one."""
    expanded = torch.randn(2, 1, size, 16).expand(2, 3, size, 16)
    for in_place in (fr.apply_rope_, rope.apply_rope_):  # the reference says the same
        with pytest.raises(ValueError, match=r"x must not overlap itself .* strides \("):
            in_place(expanded)
    q = torch.randn(2, 3, size, 16)
    kept = q.clone()
    with pytest.raises(ValueError, match="k must not overlap itself"):
        fr.rope_qk(q, expanded, inplace=True)
    assert torch.equal(q, kept)


def _holds_an_element_twice(t: torch.Tensor) -> bool:
    """The oracle: write distinct values through ``t`` into a fresh storage and count."""
    storage = torch.zeros(t.storage_offset() + checks.reach(t) + 1, dtype=torch.float64)
    view = storage.as_strided(t.shape, t.stride(), t.storage_offset())
    view.copy_(torch.arange(1, t.numel() + 1, dtype=torch.float64).view(t.shape))
    return not torch.equal(view.flatten().sort().values, torch.arange(1.0, t.numel() + 1))


@pytest.mark.parametrize(
    ("shape", "strides"),
    [
        ((7, 4), (2, 1)),  # torch.arange(16.0).unfold(0, 4, 2): windows that overlap
        ((3, 2, 4), (8, 3, 1)),  # rows of 4 every 3: the last entry of one is the next's first
        ((2, 2), (1, 1)),  # two dims on one stride
        ((3, 2), (2, 3)),  # a stride past no reach but every element once: taken
        ((2, 3, 4), (1, 8, 2)),  # a permuted dense tensor: taken
        ((4, 6), (6, 1)),  # dense
    ],
)
def test_in_place_refuses_a_view_whose_windows_overlap_and_keeps_every_other(shape, strides):
    """Views that hold one element in several places without a zero stride (as ``unfold``
    makes) gave a result that differed from the reference's, with no error: now refused by
    both in-place functions before anything is written; views that hold each element once
    are rotated as the reference rotates a copy. The oracle writes through the view."""
    storage = torch.randn(64, dtype=torch.float64)
    v = storage.as_strided(shape, strides)
    want = rope.apply_rope(v.clone())
    kept = storage.clone()
    for in_place in (fr.apply_rope_, rope.apply_rope_):
        if _holds_an_element_twice(v):
            with pytest.raises(ValueError, match=r"x must not overlap itself .* strides \("):
                in_place(v)
            assert torch.equal(storage, kept)
        else:
            assert torch.equal(in_place(v), want)
            storage.copy_(kept)


def test_the_view_of_the_report_is_refused():
    v = torch.arange(16.0).unfold(0, 4, 2)
    assert _holds_an_element_twice(v)
    for in_place in (fr.apply_rope_, rope.apply_rope_):
        with pytest.raises(ValueError, match="x must not overlap itself"):
            in_place(v)
    with pytest.raises(ValueError, match="q must not overlap itself"):
        fr.rope_qk(v[None, None], torch.randn(1, 1, 7, 4), inplace=True)


def test_rope_qk_in_place_takes_q_and_k_split_from_one_fused_projection():
    """q and k cut from one ``[B, T, (H + 2 H_kv) D]`` projection cross each other's span
    without sharing an element: each is rotated once, as on its own."""
    fused = torch.randn(2, 600, (4 + 2 * 2) * 16).view(2, 600, 8, 16)
    q, k = fused[:, :, :4].transpose(1, 2), fused[:, :, 4:6].transpose(1, 2)
    want = [rope.apply_rope(t, layout="half") for t in (q, k)]
    fr.rope_qk(q, k, layout="half", inplace=True)
    assert torch.equal(q, want[0]) and torch.equal(k, want[1])


def _strided_view(data, buffer):
    """A view of ``buffer`` with drawn sizes, strides and offset, inside it."""
    dims = data.draw(st.integers(1, 3))
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=dims, max_size=dims))
    strides = data.draw(st.lists(st.integers(0, 12), min_size=dims, max_size=dims))
    span = sum((n - 1) * s for n, s in zip(sizes, strides, strict=True))
    offset = data.draw(st.integers(0, buffer.numel() - 1 - span))
    return buffer.as_strided(sizes, strides, offset)


def _fills_its_span(elements: list[int]) -> bool:
    return len(set(elements)) == len(elements) == max(elements) - min(elements) + 1


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_one_memory_says_only_what_the_elements_bear_out(data):
    """Against the elements themselves (each view holds the indices of its elements in one
    buffer): True only for the same elements in the same places; an error only when some
    are shared and they are not that; and whenever one view fills its span with no gap and
    holds the other's lowest or highest element, never False."""
    buffer = torch.arange(120)  # room for the widest view: 3 * 3 * 12 + 1 elements
    a, b = _strided_view(data, buffer), _strided_view(data, buffer)
    lists = a.flatten().tolist(), b.flatten().tolist()
    shared = set(lists[0]) & set(lists[1])
    alike = a.shape == b.shape and torch.equal(a, b)
    try:
        one = checks.one_memory("q", a, "k", b)
    except ValueError:
        assert shared and not alike
        return
    if one:
        assert alike
    else:
        assert not any(
            _fills_its_span(mine) and (min(other) in mine or max(other) in mine)
            for mine, other in (lists, lists[::-1])
        )


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_one_memory_tells_exactly_for_slices_of_one_tensor(data):
    """Slices of one tensor share its strides: for them the answer is exact (an error when
    they share some elements, False when none), whatever their order of dims."""
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    whole = torch.arange(math.prod(shape)).view(shape)
    order = data.draw(st.permutations(range(len(shape))))
    whole = whole.permute(order)  # a transposed view, as a model's [B, H, T, D] is

    def cut():
        starts = [data.draw(st.integers(0, n - 1)) for n in whole.shape]
        return whole[
            tuple(
                slice(lo, data.draw(st.integers(lo + 1, n)))
                for lo, n in zip(starts, whole.shape, strict=True)
            )
        ]

    a, b = cut(), cut()
    shared = set(a.flatten().tolist()) & set(b.flatten().tolist())
    assert checks._shared_on_one_grid(a, b) == bool(shared)
    alike = a.shape == b.shape and torch.equal(a, b)
    if shared and not alike:
        with pytest.raises(ValueError, match="must not share part of their memory"):
            checks.one_memory("q", a, "k", b)
    else:
        assert checks.one_memory("q", a, "k", b) == alike


def test_one_memory_tells_apart_tensors_of_other_storages():
    x = torch.randn(4, 8)
    assert not checks.one_memory("q", x, "k", x.clone())
    assert not checks.one_memory("q", x[:2], "k", x[2:])  # one storage, no element shared
    assert checks.one_memory("q", x, "k", x.view(4, 8))


def test_scores_depend_on_the_offset_only_with_the_fast_path():
    """``rope_qk`` on inputs past the small-input threshold rotates q and k as the reference
    does, so the scores ``q_m . k_n`` depend on ``m - n`` alone: shifting every position by
    12,345 leaves them as they were, and they are not the scores of the unrotated q and k."""
    q, k = torch.randn(2, 2, 300, 64, dtype=torch.float64)  # [2, 300, 64] each
    base = torch.arange(300)

    def scores(shift):
        positions = base + shift
        rq, rk = fr.rope_qk(q, k, positions)
        for got, x in ((rq, q), (rk, k)):
            torch.testing.assert_close(got, fr.rope_elementwise(x, positions), **TOL[torch.float64])
        return rq @ rk.mT

    unshifted = scores(0)
    torch.testing.assert_close(unshifted, scores(12345))
    assert not torch.allclose(unshifted, q @ k.mT, rtol=1e-2, atol=1e-2)


# --- bad input --------------------------------------------------------------------------------

PUBLIC = {
    "dense": fr.rope_dense,
    "elementwise": fr.rope_elementwise,
    "rotate_half": fr.rope_rotate_half,
    "complex": fr.rope_complex,
    "cached": fr.rope_cached,
    "blocked": fr.rope_blocked,
    "c": fr.rope_c,
    "compiled": fr.rope_compiled,
    "triton": tr.rope_triton,
    "fast_apply_rope": fr.apply_rope,
    "fast_apply_rope_": fr.apply_rope_,
    "apply_rope": rope.apply_rope,
    "apply_rope_": rope.apply_rope_,
}


@pytest.mark.parametrize("name", list(PUBLIC))
@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((torch.zeros(3, 7),), {}, ValueError, "even and positive, got D=7"),
        ((torch.zeros(3, 4), [0, 1]), {}, ValueError, "T=3"),
        ((torch.zeros(3, 4), [0.0, 1.0, 2.0]), {}, TypeError, "integers"),
        ((torch.zeros(3, 4),), {"layout": "rotate_half"}, ValueError, "layout must be one of"),
        (
            (torch.zeros(3, 4),),
            {"base": -1.0},
            ValueError,
            "base must be finite and at least 2\\*\\*-64",
        ),
        ((torch.zeros(3, 4),), {"inv_freq": torch.ones(3)}, ValueError, r"\[D/2\] = \[2\]"),
        ((torch.zeros(3, 4, dtype=torch.long),), {}, TypeError, "floating dtype"),
        (([[0.0, 1.0]],), {}, TypeError, "torch.Tensor"),
    ],
)
def test_bad_input_gets_the_errors_of_apply_rope(name, args, kwargs, error, match):
    with pytest.raises(error, match=match):
        PUBLIC[name](*args, **kwargs)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: fr.rope_blocked(torch.zeros(2, 4), block_elements=0), ValueError, "at least 1"),
        (lambda: fr.rope_blocked(torch.zeros(2, 4), block_elements=2.0), TypeError, "an int"),
        (lambda: fr.rope_dense(torch.zeros(2, 4), block=0), ValueError, "block must be"),
        (lambda: fr.rope_qk(torch.zeros(2, 4), torch.zeros(3, 4)), ValueError, "last two"),
        (lambda: fr.rope_qk(torch.zeros(2, 4), torch.zeros(3, 4), [0, 1]), ValueError, r"\[3, 4\]"),
        (lambda: fr.rope_qk(torch.zeros(1, 2, 4), torch.zeros(1, 2, 6)), ValueError, "last two"),
        (
            lambda: fr.rope_qk(torch.zeros(2, 4), torch.zeros(2, 4, dtype=torch.float64)),
            TypeError,
            "q and k must share one dtype",
        ),
        (
            lambda: fr.rope_qk(torch.zeros(2, 4), torch.zeros(2, 4), inplace=1),
            TypeError,
            "True or False",
        ),
        (lambda: tb.rope_tables([0, 1], 5), ValueError, "even"),
        (lambda: tb.rope_tables([0.5], 4), TypeError, "integers"),
        (lambda: tb.rope_tables([0], 4, dtype=torch.float16), TypeError, "float32"),
        (lambda: fr.dense_matrices(torch.ones(2), torch.ones(3), "half"), ValueError, "one shape"),
        (lambda: fr.dense_matrices(torch.ones(2), torch.ones(2), "pairs"), ValueError, "layout"),
        (lambda: tr.triton_available("tpu"), ValueError, "'cuda' or 'cpu'"),
    ],
)
def test_bad_arguments_of_the_fast_forms(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- torch.compile and Triton -------------------------------------------------------------------


def test_compile_needs_a_cpp_compiler(monkeypatch):
    monkeypatch.setattr(fr.shutil, "which", lambda name: None)
    assert fr.compile_available() is False
    monkeypatch.setattr(fr.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert fr.compile_available() is True


def test_compiled_matches_reference():
    """``rope_compiled`` agrees with the reference on one case (float32, the half layout, a
    ``[B, H, T, D]`` view of ``[B, T, H, D]`` memory, negative positions too): one compile,
    a second or two on a 2-core CPU once test_the_fast_path_compiles_whole has paid for
    inductor's first start (about 10 s cold, whichever of the two runs first)."""
    if not fr.compile_available():
        pytest.skip("torch.compile is not available here")
    x = _transposed((2, 3, 5, 8), torch.float32)
    positions = torch.arange(5) - 3
    got = fr.rope_compiled(x, positions, layout="half")
    want = fr.rope_elementwise(x, positions, layout="half")
    torch.testing.assert_close(got, want, **TOL[torch.float32])


def test_the_fast_path_compiles_whole():
    """Under torch.compile with fullgraph=True the tables are traced, not looked up in the
    cache (its lock and its keys would break the graph); inductor's fused arithmetic may
    differ from eager's by a unit in the last place."""
    if not fr.compile_available():
        pytest.skip("torch.compile is not available here")
    torch.compiler.reset()
    x = torch.randn(2, 5, 8)
    compiled = torch.compile(
        lambda z: fr.apply_rope(z, [4, 5, 6, 7, 8], layout="half"), fullgraph=True
    )
    want = rope.apply_rope(x, [4, 5, 6, 7, 8], layout="half")
    torch.testing.assert_close(compiled(x), want, **TOL[torch.float32])


def test_triton_kernel_says_why_it_cannot_run(monkeypatch):
    """Without Triton (here made so whether it is installed or not) the kernel is available
    nowhere, not even under the interpreter, and says why it cannot run."""
    monkeypatch.setattr(tr, "_INSTALLED", False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert tr.triton_available() is False and tr.triton_available("cpu") is False
    with pytest.raises(RuntimeError, match="cannot run on cpu: it needs Triton"):
        tr.rope_triton(torch.randn(2, 4))
    if importlib.util.find_spec("triton") is not None and tr._DEFINE is not None:
        monkeypatch.setattr(tr, "_INSTALLED", True)  # the same machine with Triton: it runs
        assert tr.triton_available("cpu") is True


def test_registry_names_every_out_of_place_form():
    assert set(fr.IMPLEMENTATIONS) == {
        "dense",
        "elementwise",
        "rotate_half",
        "complex",
        "cached",
        "blocked",
        "c",
        "compiled",
        "triton",
    }
    assert all(callable(f) for f in fr.IMPLEMENTATIONS.values())


_sizes = st.lists(st.integers(0, 3), max_size=4).map(tuple)


@given(_sizes, _sizes)
@settings(max_examples=300, deadline=None)
def test_positions_broadcast_as_torch_broadcasts(positions, lead):
    """The broadcast worked out by hand (torch's costs a decoding step's time) agrees with
    torch's on every pair of shapes, zero sizes included, and refuses what torch refuses."""
    try:
        want = torch.broadcast_shapes(positions, lead)
    except RuntimeError:
        with pytest.raises(ValueError, match="do not broadcast"):
            _validate.broadcast_positions(torch.Size(positions), torch.Size(lead))
    else:
        assert _validate.broadcast_positions(torch.Size(positions), torch.Size(lead)) == want


@pytest.mark.parametrize("inplace", [False, True])
def test_learned_frequencies_keep_their_gradient_on_large_inputs(inplace):
    """Frequencies that require grad, with ``q`` and ``k`` that do not: on inputs
    larger than the small-input shortcut (the C loop and the blocks record no gradient) the
    rotation takes the differentiable path, and in place on the small ones it reads a copy of
    the pairs autograd keeps; the gradient is the elementwise form's."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 8, 64, 64), torch.randn(2, 4, 64, 64)  # k no larger than the shortcut
    wq, wk = torch.randn(q.shape), torch.randn(k.shape)  # a rotation keeps norms: weigh it
    positions = torch.arange(64) * 3
    inv = rope.rope_inv_freq(64, 500.0).float().requires_grad_()
    rq, rk = fr.rope_qk(q.clone(), k.clone(), positions, inv_freq=inv, layout="half",
                        inplace=inplace)  # fmt: skip
    assert rq.requires_grad and rk.requires_grad
    ((rq * wq).sum() + (rk * wk).sum()).backward()
    got, inv.grad = inv.grad.clone(), None
    angles = positions.float()[:, None] * inv
    cos, sin = angles.cos(), angles.sin()
    want_q = kernels._elementwise(q, cos, sin, "half")
    want_k = kernels._elementwise(k, cos, sin, "half")
    ((want_q * wq).sum() + (want_k * wk).sum()).backward()
    # summed in another order than the elementwise form's: float32's rounding apart
    torch.testing.assert_close(got, inv.grad, rtol=1e-4, atol=1e-6 * float(got.abs().max()))


def test_the_c_loop_refuses_what_needs_a_gradient():
    if not cpu_kernel.available():
        pytest.skip("no C compiler here")
    x = torch.randn(2, 4, 40, 8)
    with pytest.raises(ValueError, match="records no gradient"):
        fr.rope_c(x.requires_grad_())
    with pytest.raises(ValueError, match="records no gradient"):
        fr.rope_c(torch.randn(2, 4, 40, 8), inv_freq=torch.ones(4, requires_grad=True))


@pytest.mark.parametrize("shape", [(1, 4, 8, 16), (4, 8, 512, 64)])  # small, and the C loop's
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("rotate", ["apply_rope_", "rope_qk in place"])
def test_an_in_place_rotation_counts_as_a_write_for_autograd(shape, dtype, rotate):
    """Whichever path rotates in place (tensor operations, or the C loop writing through a
    pointer), autograd sees the write, as after torch's own in-place operations: a backward
    that saved the tensor before refuses to run on the rotated values."""
    x, k = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)
    w = torch.ones((), dtype=dtype, requires_grad=True)
    saved = (x * w).sum()  # keeps x for w's gradient
    if rotate == "apply_rope_":
        fr.apply_rope_(x, layout="half")
    else:
        fr.rope_qk(x, k, layout="half", inplace=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        saved.backward()


@pytest.mark.parametrize("shape", [(1, 4, 8, 16), (4, 8, 512, 64)])  # small, and the C loop's
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_a_lazy_negation_is_rotated_as_its_values(shape, dtype, layout):
    """A tensor whose memory holds its values negated (``z.conj().imag``, here
    ``torch._neg_view``) is rotated as the values it stands for, by every path, in place or
    not, the C loop's form too."""
    x = torch.randn(shape).to(dtype)
    want = rope.apply_rope(x.neg(), layout=layout)
    assert torch._neg_view(x).is_neg()
    assert torch.equal(fr.apply_rope(torch._neg_view(x), layout=layout), want)
    assert torch.equal(fr.rope_qk(torch._neg_view(x), x, layout=layout)[0], want)
    written = torch._neg_view(x.clone())
    fr.apply_rope_(written, layout=layout)
    assert torch.equal(written, want)
    written, k = torch._neg_view(x.clone()), x.clone()
    fr.rope_qk(written, k, layout=layout, inplace=True)
    assert torch.equal(written, want)
    if cpu_kernel.available():
        assert torch.equal(fr.rope_c(torch._neg_view(x), layout=layout), want)


def test_rope_qk_names_a_missing_k_once_its_tables_are_cached():
    q = torch.randn(1, 2, 4, 8)
    kernels.rope_qk(q, q.clone())  # the tables of this call now cached: the C loop's way
    with pytest.raises(TypeError, match=r"k must be a torch\.Tensor"):
        kernels.rope_qk(q, None)
