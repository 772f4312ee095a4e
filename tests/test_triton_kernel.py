"""The Triton kernel of posenc.fast.triton, checked on the CPU under Triton's interpreter.

What is checked: the arithmetic against an independent torch computation with the nearest
float32 cos and sin (on the CPU within one unit in the last place of the output, since the
interpreter truncates to bfloat16 where a GPU rounds and some Tritons' interpreters round a
fused multiply-add twice; bit for bit on a GPU), the error against the rotation in float64
(half a unit in the last place of bf16 and fp16), every stride pattern a model passes, both
layouts, offsets and per-batch positions, q and k in one launch, gradients (gradcheck in
float64), torch.compile with fullgraph=True, and that a call with warm state does no host
work that reads the device (a dispatch mode on the meta device, the launch recorded instead
of run).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from posenc import rope
from posenc.fast import triton as tr
from posenc.rope import rope_inv_freq

if importlib.util.find_spec("triton") is not None:
    # Triton builds its own library functions when it is first imported, for the GPU or for
    # the interpreter as TRITON_INTERPRET says at that moment; the interpreter runs the GPU
    # build, but a GPU launch refuses the interpreter's (Triton 3.6), so import it before any
    # test switches the interpreter on
    import triton.language  # noqa: F401

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None or tr._DEFINE is None,
    reason="needs Triton (its CPU interpreter runs the kernel) and torch 2.4 or later",
)

LAYOUTS = ("half", "interleaved")
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
MANTISSA = {torch.bfloat16: 7, torch.float16: 10}


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _oracle(x, positions, offset, layout, inverse=False, inv_freq=None):
    """The rotation spelled out: float32 angles (float64 for float64 x), their cos and sin
    rounded from float64, each product rounded, then the sum, one rounding to x's dtype."""
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    dim, length = x.shape[-1], x.shape[-2]
    p = torch.arange(length) if positions is None else torch.as_tensor(positions)
    freqs = rope_inv_freq(dim) if inv_freq is None else inv_freq
    angles = (p + offset).to(work)[..., None] * freqs.to(work)
    cos, sin = angles.double().cos().to(work), angles.double().sin().to(work)
    if inverse:
        sin = -sin
    if layout == "interleaved":
        first, second = list(range(0, dim, 2)), list(range(1, dim, 2))
    else:
        first, second = list(range(dim // 2)), list(range(dim // 2, dim))
    x1, x2 = x[..., first].to(work), x[..., second].to(work)
    out = torch.empty(torch.broadcast_shapes(x.shape, (*cos.shape[:-1], dim)), dtype=work)
    out[..., first] = x1 * cos - x2 * sin
    out[..., second] = x1 * sin + x2 * cos
    return out.to(x.dtype)


def _exact(x, positions, offset, layout):
    """The same rotation of the same float32 angles carried out in float64."""
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    dim, length = x.shape[-1], x.shape[-2]
    p = torch.arange(length) if positions is None else torch.as_tensor(positions)
    angles = ((p + offset).to(work)[..., None] * rope_inv_freq(dim).to(work)).double()
    y = x.double().clone()
    if layout == "interleaved":
        a, b = x.double()[..., 0::2], x.double()[..., 1::2]
        y[..., 0::2], y[..., 1::2] = (
            a * angles.cos() - b * angles.sin(),
            a * angles.sin() + b * angles.cos(),
        )
    else:
        a, b = x.double().chunk(2, dim=-1)
        y = torch.cat(
            [a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()], -1
        )
    return y


def _cos_sin_in_the_kernel(angles, position, small_freqs, libdevice_nan=False):
    """The kernel's own ``cos_sin_of_float32`` of float32 ``angles``, rounded to float32, as
    a program at ``position`` makes them (told, or not, that every frequency is at most 1),
    in rows of 256 angles, run by the interpreter; with ``libdevice_nan``, the rows sent to
    libdevice's cos and sin (numpy's here) come back NaN, to tell which."""
    import triton
    import triton.language as tl

    global _COS_SIN  # the interpreter runs the probe's source with this module's globals
    kernel_globals = tr._kernel(True).fn.__globals__  # the kernel's file, loaded for it
    _COS_SIN = kernel_globals["cos_sin_of_float32"]

    @triton.jit
    def probe(a_ptr, c_ptr, s_ptr, n, p, SMALL_FREQS: tl.constexpr):
        i = tl.program_id(0) * 256 + tl.arange(0, 256)
        a = tl.load(a_ptr + i, mask=i < n, other=0.0)
        c, s = _COS_SIN(a, p, SMALL_FREQS)
        tl.store(c_ptr + i, c.to(tl.float32), mask=i < n)
        tl.store(s_ptr + i, s.to(tl.float32), mask=i < n)

    @triton.jit
    def nan_cos_sin(a):
        return a * float("nan"), a * float("nan")

    cos, sin = torch.empty_like(angles), torch.empty_like(angles)
    libdevice = kernel_globals["cos_sin"]
    kernel_globals["cos_sin"] = nan_cos_sin if libdevice_nan else libdevice
    try:
        probe[(triton.cdiv(angles.numel(), 256),)](
            angles, cos, sin, angles.numel(), position, SMALL_FREQS=small_freqs
        )
    finally:
        kernel_globals["cos_sin"] = libdevice
    return cos, sin


def _interpreter_fuses_fma() -> bool:
    """Whether Triton's interpreter rounds ``tl.fma`` once, as a GPU does (3.9's does, 3.7's
    rounds the product first)."""
    import triton
    import triton.language as tl

    @triton.jit
    def fma_error(a_ptr, out):
        x, y = tl.load(a_ptr), tl.load(a_ptr + 1)
        tl.store(out, tl.fma(x, y, -(x * y)))  # the product's rounding error, if fused

    out = torch.zeros(1, dtype=torch.float64)
    fma_error[(1,)](torch.tensor([0.1, 0.3], dtype=torch.float64), out)
    return bool(out[0] != 0)


def _ulps(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest difference between ``got`` and ``want``, in units in the last place of
    their dtype at ``want``'s magnitude (NaN where both are NaN counts as 0)."""
    both_nan = got.isnan() & want.isnan()
    mantissa = {torch.bfloat16: 7, torch.float16: 10, torch.float32: 23}.get(want.dtype, 52)
    scale = torch.exp2(torch.floor(torch.log2(want.double().abs().clamp_min(1e-30))) - mantissa)
    ratio = ((got.double() - want.double()).abs() / scale).masked_fill(both_nan, 0.0)
    return float(ratio.max()) if ratio.numel() else 0.0


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Whether the kernel's ``got`` is the oracle's ``want``: bit for bit on a GPU, within
    :data:`INTERPRETER_ULPS` under the interpreter (float64: numpy's and torch's cos and sin
    may differ in the last bit)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.is_cuda or want.dtype == torch.float64:
        tol = 1e-14 if want.dtype == torch.float64 else 0.0
        return torch.allclose(got.cpu(), want.cpu(), rtol=tol, atol=tol, equal_nan=True)
    return _ulps(got, want) <= INTERPRETER_ULPS


INTERPRETER_ULPS = 1
"""How far, in units in the last place, the interpreter's numbers may lie from the arithmetic
spelled out: it truncates to bfloat16 and float16 where a GPU rounds to nearest (half a unit
at most becomes one), and some Tritons' interpreters (3.7) round a fused multiply-add twice.
On a GPU the kernel's numbers are the oracle's bit for bit (``test_on_a_gpu_the_same_numbers``)."""


def _model_view(b, t, h, d, dtype):
    """``[B, H, T, D]`` as a model makes it: its projection ``[B, T, H, D]`` transposed."""
    return torch.randn(b, t, h, d).to(dtype).transpose(1, 2)


MAKERS = {
    "contiguous": lambda dtype: torch.randn(2, 3, 5, 16).to(dtype),
    "model view": lambda dtype: _model_view(2, 5, 3, 16, dtype),
    "rows with a gap": lambda dtype: torch.randn(2, 3, 5, 22).to(dtype)[..., 3:19],
    "every other position": lambda dtype: torch.randn(2, 3, 10, 16).to(dtype)[:, :, ::2],
    "3-d": lambda dtype: torch.randn(3, 5, 16).to(dtype),
    "2-d, D not a power of 2": lambda dtype: torch.randn(5, 24).to(dtype),
    "5-d that does not merge": lambda dtype: torch.randn(3, 2, 2, 5, 16).to(dtype).transpose(0, 1),
}


def _positions(kind, x):
    length = x.shape[-2]
    if kind == "arange":
        return None
    if kind == "far and negative":
        return torch.tensor([0, -3, 1000, 131072, 131071][:length])
    if kind == "per batch" and x.dim() < 3:
        return torch.arange(length) * 3
    if kind == "per batch":  # [B, 1, T] (x's first dim), as apply_rope broadcasts them
        rows = torch.arange(length) + 977 * torch.arange(x.shape[0])[:, None]
        return rows.reshape(x.shape[0], *(1,) * (x.dim() - 3), length)
    raise ValueError(kind)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("maker", list(MAKERS))
def test_kernel_equals_the_arithmetic_spelled_out(maker, dtype, layout):
    """The oracle's numbers within :data:`INTERPRETER_ULPS`, for every stride pattern, dtype
    and layout, at positions ``0 .. T-1``, far and negative, per batch entry, and offset by 7
    or by ``2**31 + 3`` (past 32 bits: the kernel must take the offset whole); in place the
    same numbers as out of place."""
    torch.manual_seed(0)
    x = MAKERS[maker](dtype)
    kinds = (("arange", 0), ("far and negative", 0), ("per batch", 7), ("arange", 2**31 + 3))
    for kind, offset in kinds:
        positions = _positions(kind, x)
        got = tr.rope_triton(x, positions, layout=layout, offset=offset)
        want = _oracle(x, positions, offset, layout)
        assert got.shape == x.shape and got.dtype == dtype
        if dtype == torch.float64:  # numpy's and torch's float64 cos may differ in the last bit
            torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)
        else:
            assert _ulps(got, want) <= INTERPRETER_ULPS, (kind, _ulps(got, want))
        y = x.clone()
        assert tr.rope_triton(y, positions, layout=layout, inplace=True, offset=offset) is y
        assert torch.equal(y, got)


def _hard_angles() -> dict[str, torch.Tensor]:
    """float32 angles where a cosine is easy to get wrong: a model's (positions to 2**17 at a
    Llama 3 base), near multiples of pi/2 (where cos or sin is tiny and the reduction must
    keep every bit: the float32 values below 2**30 nearest them, within 4e-9 to 3e-8, and
    multiples rounded to float32), both signs over 30 octaves, and in rows of 256 past the
    fast path's limit of 2**30: finite ones to the largest float32, and infinities and a NaN
    apart."""
    gen = torch.Generator().manual_seed(0)
    rows = torch.arange(0, 2**17, 331, dtype=torch.float32)
    model = (rows[:, None] * rope_inv_freq(128, 500000.0).float()).flatten()
    nearest = torch.tensor(
        [252.89820861816406, 505.7964172363281, 42781604.0, 4.71238899230957, 52516.43359375,
         1011.5928344726562, 2709675.5, 620046656.0, 85563208.0, 9.42477798461914,
         105032.8671875, 2023.1856689453125]
    )  # fmt: skip
    multiples = torch.randint(1, 2**26, (20000,), generator=gen).double()
    near = torch.cat([nearest, -nearest, (multiples * (math.pi / 2)).float()])
    sign = torch.randint(0, 2, (20000,), generator=gen) * 2 - 1
    octaves = torch.exp2(torch.rand(20000, generator=gen, dtype=torch.float64) * 60 - 30) * sign
    past = torch.tensor([2.0**30, 2.0**40, 2.0**52, 1e15, -3e17, 1e20, 3e38, -3e38])
    finite = torch.cat([torch.rand(248, generator=gen) * 2**40 + 2**30, past])  # one row
    special = torch.tensor([math.inf, -math.inf, math.nan, 0.0, -0.0, 1.0])
    big = torch.cat([finite, special])
    return {"a model's": model, "near k pi/2": near, "30 octaves": octaves.float(), "big": big}


@pytest.mark.parametrize("small_freqs", [False, True])
@pytest.mark.parametrize("kind", ["a model's", "near k pi/2", "30 octaves", "big"])
def test_the_kernel_s_cos_and_sin_are_the_nearest_float32_values(kind, small_freqs):
    """The kernel's own float64 cos and sin (one reduction by pi/2, both Taylor series), once
    rounded, are the float32 values nearest float64's (numpy's, which stand in for
    libdevice's in the interpreter, where a row holds an angle past 2**30; NaN stays NaN):
    whether the row is told so by its largest angle, or, every frequency being at most 1,
    by its position. Bit for bit where the interpreter's ``tl.fma`` rounds once, as a GPU's
    does; within :data:`INTERPRETER_ULPS` of float32 where it rounds the product first."""
    angles = _hard_angles()[kind]
    position = 2**31 if kind == "big" else 2**30 - 1
    cos, sin = _cos_sin_in_the_kernel(angles, position, small_freqs)
    want_cos, want_sin = angles.double().cos().float(), angles.double().sin().float()
    allowed = 0 if _interpreter_fuses_fma() else INTERPRETER_ULPS
    assert _ulps(cos, want_cos) <= allowed and _ulps(sin, want_sin) <= allowed, kind


def test_a_row_goes_to_libdevice_exactly_when_an_angle_may_pass_2_30():
    """With libdevice's cos and sin made NaN, which rows take them shows: told by the row's
    largest angle, a row all below 2**30 is the kernel's own and one holding a single angle
    of 2**30 goes whole to libdevice; told by the position (every frequency at most 1), a
    row at a position below 2**30 in size is the kernel's own, whatever its angles, and one
    at 2**30 or -2**30 libdevice's."""
    gen = torch.Generator().manual_seed(0)
    below = torch.rand(256, generator=gen) * (2**30 - 128)
    one_at = below.clone()
    one_at[17] = 2.0**30
    cos, sin = _cos_sin_in_the_kernel(torch.cat([below, one_at]), 0, False, libdevice_nan=True)
    assert not cos[:256].isnan().any() and cos[256:].isnan().all() and sin[256:].isnan().all()
    for position, own in (
        (2**30 - 1, True),
        (-(2**30) + 1, True),
        (2**30, False),
        (-(2**30), False),
    ):
        cos, _ = _cos_sin_in_the_kernel(one_at, position, True, libdevice_nan=True)
        assert (not cos.isnan().any()) if own else cos.isnan().all(), position


@pytest.mark.parametrize("given", ["inv_freq", "base"])
def test_frequencies_above_1_at_angles_past_the_fast_path(given):
    """Frequencies above 1 at positions below 2**30 make angles far past it (to 2**69, where
    the fast reduction would be wrong): told by each row's largest angle, those rows go to
    libdevice (numpy's cos and sin in the interpreter), and every number is the oracle's.
    A base below 1 makes frequencies above 1 too."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 16)
    positions = torch.tensor([3, 2**20 + 7, 2**29 - 1, 12345])
    if given == "inv_freq":
        freqs = torch.tensor([1.0, 2.0**10, 2.0**20, 2.0**31, 0.5, 3.0, 2.0**40, 1e-3])
        kwargs = {"inv_freq": freqs}
    else:
        freqs, kwargs = rope_inv_freq(16, 0.25), {"base": 0.25}  # 1 up to 0.25**(-7/8)
    assert freqs.max() > 1
    got = tr.rope_triton(x, positions, layout="half", **kwargs)
    assert _same(got, _oracle(x, positions, 0, "half", inv_freq=freqs))


def test_only_frequencies_at_most_1_are_marked_so():
    """The default frequencies of a base of at least 1 are marked as at most 1 (the kernel
    then tells a row's path from its position), those of a smaller base are not, nor a
    caller's (their values are not read from the device)."""
    x = torch.zeros(1, 1, 2, 16)
    for base, marked in ((10000.0, True), (1.0, True), (0.5, False)):
        freqs, small = tr._freqs(x, base, None)
        assert small is marked and bool(freqs.abs().max() <= 1) is marked, base
    assert tr._freqs(x, 10000.0, rope_inv_freq(16))[1] is False


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16), ids=str)
def test_within_half_an_ulp_of_the_float64_rotation(dtype, layout):
    """Within half a unit in the last place of the float64 rotation on a GPU, which rounds to
    nearest; the interpreter, which truncates, within a whole one."""
    torch.manual_seed(1)
    x = (torch.randn(4, 64, 32) * 3).to(dtype)
    positions = torch.arange(64) * 2053  # up to about 130,000
    on_gpu = torch.cuda.is_available()
    x_on, p_on = (x.cuda(), positions.cuda()) if on_gpu else (x, positions)
    if on_gpu:
        os.environ.pop("TRITON_INTERPRET", None)
    got = tr.rope_triton(x_on, p_on, layout=layout).double().cpu()
    exact = _exact(x, positions, 0, layout)
    ulp = torch.exp2(torch.floor(torch.log2(exact.abs().clamp_min(1e-4))) - MANTISSA[dtype])
    float32_part = 4 * torch.finfo(torch.float32).eps * x.double().abs().amax(-1, keepdim=True)
    allowed = ulp / 2 if on_gpu else ulp * INTERPRETER_ULPS
    assert bool(((got - exact).abs() <= allowed + float32_part).all())


def test_the_output_keeps_the_model_layout():
    x = _model_view(2, 7, 4, 16, torch.bfloat16)
    out = tr.rope_triton(x, layout="half")
    assert out.stride() == x.stride()  # written where a [B, T, H, D] tensor would hold it


@pytest.fixture
def small_tiles(monkeypatch):
    """Tiles of two heads of 8 features (16 elements), the tile sizes worked out afresh."""
    monkeypatch.setattr(tr, "_TILE", 16)
    tr._blocks.cache_clear()
    yield
    tr._blocks.cache_clear()


def test_heads_beyond_one_tile_and_per_head_positions(small_tiles):
    x = torch.randn(2, 5, 3, 8)
    got = tr.rope_triton(x, layout="interleaved")
    assert _same(got, _oracle(x, None, 0, "interleaved"))
    per_head = torch.arange(15).reshape(5, 3) * 11  # [H, T]: each head its own positions
    got = tr.rope_triton(x, per_head, layout="half")
    assert _same(got, _oracle(x, per_head, 0, "half"))


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_q_and_k_beyond_one_tile_each(layout, inplace, small_tiles):
    """Five query heads take three tiles and three key heads two, the last of each half full:
    each tile is stored before the next is loaded, in place too."""
    assert tr._blocks(5, 3, 8) == (2, 2, 4)
    q, k = _model_view(2, 6, 5, 8, torch.bfloat16), _model_view(2, 6, 3, 8, torch.bfloat16)
    rows = torch.arange(6) + torch.tensor([[0], [70]])
    want = [_oracle(x, rows[:, None], 2, layout) for x in (q, k)]
    got = tr.rope_qk_triton(q, k, rows[:, None], layout=layout, offset=2, inplace=inplace)
    assert all(_same(g, w) for g, w in zip(got, want, strict=True))
    assert (got[0] is q) is inplace


@pytest.mark.parametrize("layout", LAYOUTS)
def test_q_and_k_in_one_launch(layout, monkeypatch):
    """q and k, the model's ``[B, H, T, D]`` views, with positions in each form a model
    passes: one launch, the oracle's numbers, and each result in its input's strides (the
    ``[B, T, H, D]`` memory a model's next reshape reads without a copy); in place the same."""
    launches = []
    launch = tr._launch
    monkeypatch.setattr(tr, "_launch", lambda *a: launches.append(1) or launch(*a))
    q = _model_view(2, 6, 4, 16, torch.bfloat16)  # four query heads
    k = _model_view(2, 6, 2, 16, torch.bfloat16)  # two key heads
    rows = torch.arange(6) + torch.tensor([[0], [40]])  # [B, T], as a model's position_ids
    spaced = (torch.arange(24).reshape(2, 12) * 5)[:, None, ::2]  # [B, 1, T], strided
    for positions, as_reference in (
        (rows, rows[:, None]),
        (rows[:, None], rows[:, None]),  # [B, 1, T], as apply_rope broadcasts them
        (spaced, spaced),
        (rows[1], rows[1]),  # [T]
        (rows[1:], rows[1:, None]),  # [1, T]: the same row for every batch entry
    ):
        launches.clear()
        rq, rk = tr.rope_qk_triton(q, k, positions, layout=layout, offset=3)
        assert len(launches) == 1
        assert _same(rq, _oracle(q, as_reference, 3, layout))
        assert _same(rk, _oracle(k, as_reference, 3, layout))
        assert rq.stride() == q.stride() and rk.stride() == k.stride()
    qc, kc = q.clone(), k.clone()
    assert tr.rope_qk_triton(qc, kc, positions, layout=layout, offset=3, inplace=True) == (qc, kc)
    assert torch.equal(qc, rq) and torch.equal(kc, rk)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_q_and_k_out_of_place_from_views_that_are_not_dense(layout):
    """Out of place, the results are new dense tensors whose strides differ from the inputs'
    (each tensor is addressed through its own strides, the outputs too): keys shared by two
    heads (an expanded view, stride 0), then q and k cut from one fused projection
    ``[B, T, H + 2 H_kv, D]`` (rows with gaps), each against the oracle, the inputs untouched."""
    rows = torch.arange(6) + torch.tensor([[0], [40]])  # [B, T]
    q = _model_view(2, 6, 4, 16, torch.bfloat16)
    shared = torch.randn(2, 1, 6, 16).to(torch.bfloat16).expand(2, 2, 6, 16)
    fused = torch.randn(2, 6, 4 + 2 * 2, 16).to(torch.bfloat16)
    cut_q, cut_k = fused[:, :, :4].transpose(1, 2), fused[:, :, 4:6].transpose(1, 2)
    for q_in, k_in in ((q, shared), (cut_q, cut_k)):
        before = [x.clone() for x in (q_in, k_in)]
        rq, rk = tr.rope_qk_triton(q_in, k_in, rows, layout=layout, offset=3)
        assert rk.stride() != k_in.stride()  # k's output is addressed apart from k
        assert _same(rq, _oracle(q_in, rows[:, None], 3, layout))
        assert _same(rk, _oracle(k_in, rows[:, None], 3, layout))
        assert all(torch.equal(x, b) for x, b in zip((q_in, k_in), before, strict=True))


@pytest.mark.parametrize("grad", [False, True])
def test_in_place_q_and_k_that_are_one_tensor_are_rotated_once(grad):
    """In one launch the keys' loads could see the queries' stores: the same elements passed
    as q and k are rotated once, as out of place, and q and k that share only some are
    refused before anything is written. Positions ``[B, T]`` keep their meaning."""
    x = _model_view(2, 6, 4, 16, torch.float32)
    rows = torch.arange(6) + torch.tensor([[0], [40]])  # [B, T], as a model's position_ids
    want = _oracle(x, rows[:, None], 3, "half")
    y = x.clone().requires_grad_(grad).clone() if grad else x.clone()
    assert tr.rope_qk_triton(y, y, rows, layout="half", offset=3, inplace=True) == (y, y)
    assert torch.equal(y, want)
    z = x.clone()
    with pytest.raises(ValueError, match="q and k must not share part of their memory"):
        tr.rope_qk_triton(z, z[:, 1:3], rows, inplace=True)
    assert torch.equal(z, x)


def test_gradients_are_the_inverse_rotation():
    x = _model_view(1, 4, 3, 8, torch.float64).requires_grad_()
    rows = torch.tensor([5, 9, 13, 100])
    assert torch.autograd.gradcheck(
        lambda t: tr.rope_triton(t, rows, layout="half", offset=3), (x,)
    )
    q = torch.randn(2, 3, 2, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 1, 2, 8, dtype=torch.float64, requires_grad=True)
    both = torch.tensor([[1, 2], [7, 8]])
    assert torch.autograd.gradcheck(lambda a, b: tr.rope_qk_triton(a, b, both), (q, k))
    tiny = torch.randn(1, 1, 2, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda t: tr.rope_triton(t, [3, 8]), (tiny,))
    g = torch.randn(2, 3, 5, 16)
    x = torch.randn(2, 3, 5, 16, requires_grad=True)
    tr.rope_triton(x, layout="interleaved").backward(g)
    assert torch.equal(x.grad, _oracle(g, None, 0, "interleaved", inverse=True))


@pytest.mark.parametrize("inplace", [False, True])
def test_torch_func_transforms_take_the_kernel(inplace):
    """``torch.func.grad`` (functorch) differentiates through the kernel as autograd does:
    the autograd function keeps its context in ``setup_context``, which the transforms need.
    In place, the wrappers the transforms pass (no storage of their own) are taken too.
    Both give the inverse rotation: the gradient of ``sum(rq * w)`` with respect to q is
    ``w`` turned back (the oracle with ``inverse=True``), and that of ``sum(rk * rk)`` is
    ``2 k`` (a rotation keeps lengths)."""
    q = torch.randn(2, 3, 4, 8, dtype=torch.float64)
    k = torch.randn(2, 1, 4, 8, dtype=torch.float64)
    weights = torch.arange(8.0, dtype=torch.float64)
    positions = torch.tensor([2, 3, 5, 7])

    def loss(q, k):
        q, k = (q * 1, k * 1) if inplace else (q, k)  # not the leaves themselves
        rq, rk = tr.rope_qk_triton(q, k, positions, layout="half", inplace=inplace)
        return (rq * weights).sum() + (rk * rk).sum()

    got = torch.func.grad(loss, argnums=(0, 1))(q, k)
    leaves = [x.clone().requires_grad_() for x in (q, k)]
    loss(*leaves).backward()
    assert all(torch.equal(g, x.grad) for g, x in zip(got, leaves, strict=True))
    turned_back = _oracle(weights.expand_as(q), positions, 0, "half", inverse=True)
    torch.testing.assert_close(leaves[0].grad, turned_back, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(leaves[1].grad, 2 * k, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("both", [False, True], ids=["rope_triton", "rope_qk_triton"])
def test_the_gradient_is_the_inverse_rotation_in_place_too(both, inplace, layout):
    """The gradient that reaches q and k is the incoming gradient turned back, the oracle's
    inverse rotation bit for bit: out of place, and in place on tensors autograd records
    (``x * 1``, not the leaves), where the rotation is recorded with its backward."""
    torch.manual_seed(4)
    q = _model_view(2, 5, 3, 16, torch.float32).requires_grad_()
    k = _model_view(2, 5, 1, 16, torch.float32).requires_grad_()
    gq, gk = torch.randn(q.shape), torch.randn(k.shape)
    rows = torch.tensor([[3], [900]]) + torch.arange(5)  # [B, T]
    q_in, k_in = (q * 1, k * 1) if inplace else (q, k)
    if both:
        rq, rk = tr.rope_qk_triton(q_in, k_in, rows, layout=layout, inplace=inplace, offset=2)
    else:
        rq, rk = (
            tr.rope_triton(x, rows[:, None], layout=layout, inplace=inplace, offset=2)
            for x in (q_in, k_in)
        )
    assert (rq is q_in) is inplace
    torch.autograd.backward((rq, rk), (gq, gk))
    assert torch.equal(q.grad, _oracle(gq, rows[:, None], 2, layout, inverse=True))
    assert torch.equal(k.grad, _oracle(gk, rows[:, None], 2, layout, inverse=True))


def test_in_place_on_a_leaf_that_needs_grad_is_refused_as_torch_refuses():
    x = torch.randn(3, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        tr.rope_triton(x, inplace=True)


TRANSFORMED_CALLS = {
    "rope_triton": lambda x: tr.rope_triton(x, layout="half"),
    "rope_triton in place": lambda x: tr.rope_triton(x * 1, layout="half", inplace=True),
    "rope_qk_triton": lambda x: tr.rope_qk_triton(x, x * 2, layout="half")[0],
    "rope_qk_triton in place": lambda x: tr.rope_qk_triton(
        x * 1, x * 2, layout="half", inplace=True
    )[0],
}


@pytest.mark.parametrize("call", list(TRANSFORMED_CALLS))
def test_under_forward_ad_and_torch_func_the_kernel_s_numbers(call):
    """Under a forward-mode AD level, ``torch.func.jvp`` and ``vmap``, where tensors carry
    tangents or are wrappers with no memory of their own, the calls give the kernel's
    numbers by tensor operations (the kernel writes through pointers: the tangent would be
    lost, a wrapper cannot be read), the tangent rotated as the input is."""
    torch.manual_seed(0)
    x, tangent = _model_view(2, 5, 3, 16, torch.float32), torch.randn(2, 3, 5, 16)
    fn = TRANSFORMED_CALLS[call]
    want, want_tangent = fn(x), _oracle(tangent, None, 0, "half")
    with torch.autograd.forward_ad.dual_level():
        out = fn(torch.autograd.forward_ad.make_dual(x, tangent))
        primal, got = torch.autograd.forward_ad.unpack_dual(out)
    assert torch.equal(primal, want) and torch.equal(got, want_tangent), call
    primal, got = torch.func.jvp(fn, (x,), (tangent,))
    assert torch.equal(primal, want) and torch.equal(got, want_tangent), call
    if "qk" not in call:  # rope_qk_triton takes [B, H, T, D]: vmap takes a dim away
        assert torch.equal(torch.vmap(fn)(x), want)
    leaf = x.detach().clone().requires_grad_()  # a dual that autograd records too
    with torch.autograd.forward_ad.dual_level():
        out = fn(torch.autograd.forward_ad.make_dual(leaf, tangent))
        assert torch.equal(torch.autograd.forward_ad.unpack_dual(out).tangent, want_tangent)
    small = x[:1, :1, :2]  # the Jacobian, by reverse mode over every output: a rotation's
    jacobian = torch.func.jacrev(fn)(small).reshape(small.numel(), small.numel())
    assert torch.allclose(jacobian @ jacobian.T, torch.eye(small.numel()), atol=1e-6), call


@pytest.mark.parametrize("which", ["q", "k"])
def test_in_place_on_an_inference_tensor_outside_inference_mode_is_refused(which):
    """As torch refuses any in-place update to an inference tensor outside
    ``torch.inference_mode()`` (the kernel writes through a pointer, which torch does not
    see): refused before anything is written, and taken inside it."""
    with torch.inference_mode():
        made = {
            "q": _model_view(2, 4, 2, 8, torch.float32),
            "k": _model_view(2, 4, 1, 8, torch.float32),
        }
    q = made["q"] if which == "q" else _model_view(2, 4, 2, 8, torch.float32)
    k = made["k"] if which == "k" else _model_view(2, 4, 1, 8, torch.float32)
    before = q.clone()
    with pytest.raises(RuntimeError, match=f"{which}: an inplace update to an inference tensor"):
        tr.rope_qk_triton(q, k, inplace=True)
    assert torch.equal(q, before)
    tr.rope_qk_triton(q, k)  # out of place: nothing of theirs is written
    with torch.inference_mode():
        tr.rope_qk_triton(q, k, inplace=True)
    assert not torch.equal(q, before)


def test_in_place_checks_q_and_k_before_writing_either():
    """k a leaf that requires grad: refused before q is written, as the general path does."""
    q, k = _model_view(2, 4, 2, 8, torch.float32), _model_view(2, 4, 1, 8, torch.float32)
    before = q.clone()
    with pytest.raises(RuntimeError, match="k: a leaf Variable that requires grad"):
        tr.rope_qk_triton(q, k.requires_grad_(), inplace=True)
    assert torch.equal(q, before)


@pytest.mark.parametrize(
    "view",
    [lambda t: torch.stack([t, -t], -1)[..., 0], lambda t: t[:1].expand(t.shape[0])],
    ids=["every other element", "one element, repeated"],
)
def test_frequencies_are_read_where_they_lie(view):
    """Frequencies that are a strided view (or an expanded one) are the frequencies they
    show, not the next elements of their storage."""
    x = torch.randn(2, 3, 5, 16)
    inv = view(rope_inv_freq(16) * 3)
    want = tr.rope_triton(x, inv_freq=inv.contiguous())
    assert torch.equal(tr.rope_triton(x, inv_freq=inv), want)
    torch.testing.assert_close(want, rope.apply_rope(x, inv_freq=inv), rtol=2e-6, atol=2e-6)


def test_learned_frequencies_take_the_path_with_their_gradient(monkeypatch):
    """The kernel has no gradient for the frequencies: ``posenc.fast`` sends a call with
    frequencies that require grad down the differentiable path (the reference's gradient),
    and ``rope_triton`` itself refuses them rather than drop the gradient."""
    from posenc.fast import dispatch as kernels

    monkeypatch.setattr(tr, "triton_available", lambda device="cuda": True)
    monkeypatch.setattr(kernels, "_TRITON_DEVICES", ("cuda", "cpu"))
    x = torch.randn(2, 3, 5, 16, dtype=torch.float64)
    inv = rope_inv_freq(16).double().requires_grad_()
    for fast_call in (
        lambda: kernels.apply_rope(x, inv_freq=inv),
        lambda: kernels.rope_qk(x, x[:, :1], inv_freq=inv)[0],
    ):
        (got,) = torch.autograd.grad((fast_call() * x).sum(), inv)
        (want,) = torch.autograd.grad((rope.apply_rope(x, inv_freq=inv) * x).sum(), inv)
        torch.testing.assert_close(got, want)
    with torch.no_grad():  # nothing to record: the kernel serves it
        assert torch.equal(kernels.apply_rope(x, inv_freq=inv), tr.rope_triton(x, inv_freq=inv))


def test_compiles_whole_with_no_graph_break():
    x = _model_view(2, 5, 3, 16, torch.float32)
    k = _model_view(2, 5, 1, 16, torch.float32)

    def attention_inputs(q, k, rows):
        q, k = tr.rope_qk_triton(q * 2, k, rows, offset=1)
        return tr.rope_triton(q, layout="half", inplace=True), k

    rows = torch.tensor([[0, 1, 2, 3, 4], [9, 10, 11, 12, 13]])
    compiled = torch.compile(attention_inputs, fullgraph=True, backend="aot_eager")
    got = compiled(x, k, rows)
    want = attention_inputs(x, k, rows)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("both", [False, True], ids=["rope_triton", "rope_qk_triton"])
def test_compiled_whole_and_differentiated(both):
    """Under ``torch.compile`` (``fullgraph=True``, the ``aot_eager`` backend, which runs the
    registered ops as they are) the backward is the registered ops' own: the compiled
    gradients are the eager ones, and the inverse rotation (the oracle with
    ``inverse=True``) of the incoming gradients, bit for bit."""
    torch.manual_seed(5)
    q = _model_view(2, 5, 3, 16, torch.float32).requires_grad_()
    k = _model_view(2, 5, 1, 16, torch.float32).requires_grad_()
    gq, gk = torch.randn(q.shape), torch.randn(k.shape)
    rows = torch.tensor([[0, 1, 2, 3, 4], [9, 10, 11, 12, 13]])

    def loss(q, k):
        if both:
            rq, rk = tr.rope_qk_triton(q, k, rows, offset=7)
        else:
            rq, rk = (tr.rope_triton(x, rows[:, None], layout="half", offset=7) for x in (q, k))
        return (rq * gq).sum() + (rk * gk).sum()

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    got = torch.autograd.grad(compiled(q, k), (q, k))
    want = torch.autograd.grad(loss(q, k), (q, k))
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    for grad, g in zip(got, (gq, gk), strict=True):
        assert _same(grad, _oracle(g, rows[:, None] + 7, 0, "half", inverse=True))


class _Record(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops.append((func.overloadpacket.__name__, [getattr(a, "device", None) for a in args]))
        return out


def test_a_warm_call_reads_nothing_back_from_the_device(monkeypatch):
    """On the meta device (the stand-in for a GPU), the launch recorded instead of run: the
    second call of each kind dispatches no ``item``, no copy to the host and no table."""
    launches = []
    monkeypatch.setattr(tr, "_runs_here", lambda device: True)
    monkeypatch.setattr(tr, "_launch", lambda *args: launches.append(args))
    q = torch.empty(8, 4096, 32, 128, device="meta", dtype=torch.bfloat16).transpose(1, 2)
    k = torch.empty(8, 4096, 8, 128, device="meta", dtype=torch.bfloat16).transpose(1, 2)
    rows = torch.empty(8, 4096, device="meta", dtype=torch.int64)
    inv64 = rope_inv_freq(128, 500000.0).to("meta")  # float64, as rope_inv_freq makes it
    calls = (
        lambda: tr.rope_qk_triton(q, k, rows, inplace=True),
        lambda: tr.rope_qk_triton(q, k, rows),
        lambda: tr.rope_triton(q, rows[:, None], layout="half", inplace=True, offset=17),
        lambda: tr.rope_triton(q[:, :, -1:], offset=4095),  # a decoding step
        lambda: tr.rope_qk_triton(q, k, rows, inv_freq=inv64, inplace=True),  # rounded inside
    )
    for call in calls:
        call()  # cold: the frequencies are made and kept on the device
        with _Record() as record:
            call()
        names = {name for name, _ in record.ops}
        assert not names & {"_local_scalar_dense", "item", "_to_copy", "copy_", "cos", "sin"}
        views = {"view", "unsqueeze", "slice", "select", "expand", "alias", "transpose"}
        ops = {"rope_qk", "rope_qk_"}  # posenc's own, which launch the kernel
        # and views, outputs, and the k of no heads that one tensor alone goes with
        assert names <= {"empty_like", "empty_strided", "new_empty", *views, *ops}
        assert all(d is None or d.type == "meta" for _, devices in record.ops for d in devices)
    assert len(launches) == 2 * len(calls)
    _q4, _, k4, _, pos, offset, inv_freq, _interleaved, _inverse, _small = launches[-3]
    assert k4.shape[1] == 0 and pos is None and offset == 4095 and inv_freq.device.type == "meta"
    assert launches[-1][6] is inv64  # the kernel takes it as it is


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_frequencies_in_any_dtype_are_rounded_as_to_rounds_them(dtype):
    """``inv_freq`` in float64 (as ``rope_inv_freq`` makes it), float32 or bfloat16 is
    rounded to the angle dtype inside the kernel, with the result of ``inv_freq.to`` first."""
    torch.manual_seed(2)
    x = _model_view(2, 5, 3, 16, dtype)
    rows = torch.tensor([3, 70001, 131071, 99991, 12345])  # far: a rounding shows in the angle
    work = torch.float64 if dtype == torch.float64 else torch.float32
    for freq_dtype in (torch.float64, torch.float32, torch.bfloat16):
        inv_freq = rope_inv_freq(16, 500000.0).to(freq_dtype)
        got = tr.rope_triton(x, rows, inv_freq=inv_freq, layout="half")
        assert torch.equal(got, tr.rope_triton(x, rows, inv_freq=inv_freq.to(work), layout="half"))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: tr.rope_triton(torch.randn(3, 7)), ValueError, "even"),
        (lambda: tr.rope_triton(torch.randn(3, 8).to(torch.int32)), TypeError, "floating"),
        (lambda: tr.rope_triton(torch.randn(3, 8), offset=1.5), TypeError, "offset"),
        (lambda: tr.rope_triton(torch.randn(3, 8), [0, 1]), ValueError, "one entry per position"),
        (lambda: tr.rope_triton(torch.randn(2, 3, 8), [[0, 1, 2]] * 2), ValueError, "1-D"),
        (lambda: tr.rope_triton(torch.randn(1, 8), True), TypeError, "a bool"),
        (lambda: tr.rope_triton(torch.randn(3, 8), torch.zeros(2, 3)), TypeError, "integers"),
        (
            lambda: tr.rope_triton(torch.randn(2, 3, 8), torch.zeros(4, 1, 3, dtype=torch.int64)),
            ValueError,
            "without enlarging",
        ),
        (
            lambda: tr.rope_triton(torch.randn(3, 8).expand(2, 3, 8), inplace=True),
            ValueError,
            "overlap",
        ),
        (
            lambda: tr.rope_qk_triton(torch.randn(1, 2, 3, 8), torch.randn(1, 2, 4, 8)),
            ValueError,
            "B, T and D",
        ),
        (
            lambda: tr.rope_qk_triton(torch.randn(2, 3, 8), torch.randn(2, 3, 8)),
            ValueError,
            r"\[B, H, T, D\]",
        ),
        (
            lambda: tr.rope_qk_triton(
                torch.randn(2, 2, 3, 8),
                torch.randn(2, 1, 3, 8),
                torch.zeros(3, 3, dtype=torch.int64),
            ),
            ValueError,
            r"\[T\], \[B, T\] or \[B, 1, T\] with B=2 \(or 1\)",
        ),
        (
            lambda: tr.rope_qk_triton(
                torch.randn(2, 2, 3, 8),
                torch.randn(2, 1, 3, 8),
                torch.zeros(2, 2, 3, dtype=torch.int64),  # per head: not one row for q and k
            ),
            ValueError,
            r"got shape \(2, 2, 3\)",
        ),
        (  # leading dims that do not merge, positions with too many rows or too few
            lambda: tr.rope_triton(
                torch.randn(3, 2, 2, 4, 8).transpose(0, 1), torch.zeros(5, 3, 2, 4, dtype=int)
            ),
            ValueError,
            r"must broadcast to x's leading shape \(2, 3, 2, 4\) without enlarging",
        ),
        (
            lambda: tr.rope_triton(
                torch.randn(2, 3, 2, 4, 8).transpose(0, 1), torch.zeros(2, 3, 2, 4, dtype=int)
            ),
            ValueError,
            r"must broadcast to x's leading shape \(3, 2, 2, 4\)",
        ),
        (
            lambda: tr.rope_triton(torch.randn(3, 8), inv_freq=torch.rand(4, requires_grad=True)),
            ValueError,
            "inv_freq must not require grad",
        ),
    ],
)
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_refuses_a_device_it_cannot_run_on(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(RuntimeError, match="cannot run on cpu"):
        tr.rope_triton(torch.randn(2, 4))


def _registered(name, q, k, *args):
    """``torch.ops.posenc.<name>`` on q (and k for the ``_qk`` ops): the results, or, for the
    in-place ops, the copies of q and k they rotated."""
    tr._ops()  # registered on first use
    op = getattr(torch.ops.posenc, name)
    tensors = (q, k) if "qk" in name else (q,)
    if name.endswith("_"):
        tensors = tuple(t.clone() for t in tensors)
        op(*tensors, *args)
        return tensors
    out = op(*tensors, *args)
    return out if isinstance(out, tuple) else (out,)


_ROWS = torch.tensor([[3], [900]]) + torch.arange(5)  # [B, T]


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("interleaved", [False, True], ids=["half", "interleaved"])
@pytest.mark.parametrize(
    "positions",
    [None, _ROWS[1], _ROWS, _ROWS[:, None]],
    ids=["none", "[T]", "[B, T]", "[B, 1, T]"],
)
@pytest.mark.parametrize("name", ["rope_qk", "rope_qk_"])
def test_the_registered_op_computes_the_same_on_a_device_without_the_kernel(
    name, positions, interleaved, inverse, monkeypatch
):
    """Where the kernel does not run (here: the CPU without the interpreter), each of the
    two ops computes the kernel's arithmetic with torch, so a compiled or exported graph
    runs anywhere: bit for bit the interpreter's numbers, whatever the positions (each form
    the ops take), the layout and the direction."""
    q = _model_view(2, 5, 3, 16, torch.float32)
    k = _model_view(2, 5, 1, 16, torch.float32)
    inv_freq = rope_inv_freq(16).float()
    args = (positions, 2, inv_freq, interleaved, inverse, True)
    with_kernel = _registered(name, q, k, *args)
    monkeypatch.delenv("TRITON_INTERPRET")
    assert not tr._runs_here(q.device)
    without = _registered(name, q, k, *args)
    assert all(torch.equal(a, b) for a, b in zip(with_kernel, without, strict=True))
    assert math.isclose(float(without[0].norm()), float(q.norm()), rel_tol=1e-5)


_COMPILE_FOR_A_GPU = """
import itertools, json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from posenc.fast import triton as tr

kernel = tr._kernel(False)
names = kernel.arg_names
found = {}
builds = [(*b, 32, True) for b in itertools.product(("half", "interleaved"), (2, 4, 8))]
more = [("half", 4, 4096, True), ("half", 4, 32, False), ("interleaved", 4, 32, False)]
for layout, warps, n_q, small in (*builds, *more):
    pointers = dict.fromkeys(("q", "q_out", "k", "k_out"), "*bf16")
    pointers |= {"pos": "*i64", "inv_freq": "*fp32"}
    constants = dict(
        HAS_POS=True, INTERLEAVED=layout == "interleaved", INVERSE=False, F64=False,
        SMALL_FREQS=small, BLOCK_HQ=32, BLOCK_HK=8, BLOCK_HALF=64,
        n_q=n_q, n_k=8, half=64,  # Llama 3 8B's heads, as a model always passes them
        q_sd=1, qo_sd=1, k_sd=1, ko_sd=1,  # Triton makes a stride of 1 a constant at launch
    )
    signature = {
        n: pointers.get(n, "constexpr" if n in constants else "i64" if n == "offset" else "i32")
        for n in names
    }
    # as Triton marks them at launch: pointers and strides divisible by 16
    aligned = [n for n in names if n in pointers or n.endswith(("_sb", "_sh", "_st"))]
    source = ASTSource(
        fn=kernel,
        signature=signature,
        constexprs={(names.index(n),): v for n, v in constants.items()},
        attrs={(names.index(n),): [["tt.divisibility", 16]] for n in aligned},
    )
    options = {"enable_fp_fusion": False, "num_warps": warps}
    ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]
    found[f"{layout}, {warps} warps" + ("" if small else ", row check") + f", {n_q} heads"] = ptx
json.dump(found, sys.stdout)
"""


def test_compiles_for_a_gpu_as_intended(monkeypatch):
    """Without a GPU, Triton still compiles the kernel for one (an H100, sm_90) down to PTX:
    the rotation's float32 products are not fused into multiply-adds, bf16 is rounded to
    nearest and no value toward zero, cos and sin are the kernel's own float64 series (and
    libdevice's accurate ones past 2**30: no ``.approx``), and a row of unit stride moves in
    16-byte vector loads and stores. And each pair's cos and sin are evaluated once per
    program, whatever the warps and however a row's path is told (by its position or by its
    largest angle): every build holds the same number of
    float64 multiply-adds (those of one evaluation per thread, with no more threads than
    pairs), where Triton, left to itself, has some tile shapes evaluate them again in every
    thread that holds a head's copy of the pair (4 to 12 times as many); and every load of q
    and of k (one tile each for a model's 32 and 8 heads: the heads are compile-time
    constants, so no masked load for a tile past the last one remains) comes before them,
    so that the data are on the way while they are made. Many tiles of heads take a loop,
    not as many copies of its body. (In a process of its own: Triton reads
    ``TRITON_INTERPRET`` once, when it is imported.)"""
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend compiles it")
    import triton

    if tuple(int(v) for v in triton.__version__.split(".")[:2]) < (3, 3):
        pytest.skip(
            f"Triton {triton.__version__} describes a build another way (ASTSource before "
            "3.3); tests/test_triton_builds.py compiles every build there"
        )
    monkeypatch.delenv("TRITON_INTERPRET")
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_FOR_A_GPU], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    everything = json.loads(done.stdout)
    # 4,096 heads of q (128 tiles) in a loop at run time, not unrolled: about as long a build
    many = everything.pop("half, 4 warps, 4096 heads")
    assert len(many) < 1.5 * len(everything["half, 4 warps, 32 heads"])
    everything = {build.removesuffix(", 32 heads"): ptx for build, ptx in everything.items()}
    found = everything
    assert len({ptx.count("fma.rn.f64") for ptx in found.values()}) == 1, {
        build: ptx.count("fma.rn.f64") for build, ptx in found.items()
    }
    for build, ptx in found.items():  # q's and k's tiles are asked for before the angles
        before = ptx[: ptx.index("fma.rn.f64")]
        # loads of the kernel's own data (.nc ones are libdevice's tables for cos and sin):
        # the tiles of q and k, the position and the frequencies, which the angles need
        ours = ptx.count("ld.global") - ptx.count("ld.global.nc")
        first = before.count("ld.global") - before.count("ld.global.nc")
        assert first == ours > 2, (build, first, ours)
    for layout, ptx in everything.items():
        assert "fma.rn.f32" not in ptx, layout
        assert "cvt.rn.bf16" in ptx and not re.search(r"cvt\.rz\.", ptx), layout  # nearest
        assert ".approx" not in ptx, layout
        assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx, layout


def test_the_fast_path_sends_a_gpu_call_to_one_launch(monkeypatch):
    """``posenc.fast`` on a GPU tensor (the meta device standing in, the launch recorded):
    ``rope_qk`` with positions as ``apply_rope`` takes them, ``[T]`` or ``[B, 1, T]``, is one
    launch for q and k; ``apply_rope_`` and ``apply_rope`` one launch each, with the offset."""
    from posenc.fast import dispatch as kernels

    launches = []
    monkeypatch.setattr(tr, "_runs_here", lambda device: True)
    monkeypatch.setattr(tr, "_launch", lambda *args: launches.append(args))
    monkeypatch.setattr(tr, "triton_available", lambda device="cuda": True)
    monkeypatch.setattr(kernels, "_TRITON_DEVICES", ("cuda", "meta"))
    q = torch.empty(2, 6, 4, 16, device="meta").transpose(1, 2)
    k = torch.empty(2, 6, 2, 16, device="meta").transpose(1, 2)
    per_batch = torch.zeros(2, 1, 6, dtype=torch.int64, device="meta")
    for positions in (None, torch.arange(6, device="meta"), per_batch):
        launches.clear()
        kernels.rope_qk(q, k, positions, layout="half", inplace=True, offset=5)
        assert len(launches) == 1
        _, _, k_in, _, rows, offset, *_ = launches[0]
        assert k_in is k and offset == 5
        assert rows is positions  # to the kernel as they are: no view made, nothing copied
    launches.clear()
    kernels.apply_rope_(q, per_batch, offset=3)
    kernels.apply_rope(k, offset=3)
    assert len(launches) == 2 and [a[5] for a in launches] == [3, 3]


@pytest.mark.parametrize(
    "positions",
    [
        None,
        torch.arange(5) * 7,  # [T]
        torch.tensor([[3], [9000]]) + torch.arange(5),  # [B, T]: [H, T] to apply_rope, per head
        (torch.tensor([[3], [9000]]) + torch.arange(5))[:, None],  # [B, 1, T]
        torch.arange(5)[None] + 40,  # [1, T]
        [0, 3, 6, 9, 12],  # a list: read on the host, as apply_rope reads it
    ],
    ids=["none", "[T]", "[B, T]", "[B, 1, T]", "[1, T]", "list"],
)
def test_rope_qk_on_the_kernel_rotates_as_apply_rope_does(positions, monkeypatch):
    """``posenc.fast.rope_qk`` with the kernel serving CPU tensors (under the interpreter):
    whichever positions go to the one launch and whichever do not, q and k are rotated as
    :func:`posenc.rope.apply_rope` reads the positions, each against its own shape."""
    from posenc.fast import dispatch as kernels

    monkeypatch.setattr(tr, "triton_available", lambda device="cuda": True)
    monkeypatch.setattr(kernels, "_TRITON_DEVICES", ("cuda", "cpu"))
    torch.manual_seed(3)
    q, k = _model_view(2, 5, 2, 16, torch.float32), _model_view(2, 5, 2, 16, torch.float32)
    rq, rk = kernels.rope_qk(q, k, positions, layout="half", offset=2)
    as_given = None if positions is None else torch.as_tensor(positions)
    for got, x in ((rq, q), (rk, k)):
        want = _oracle(x, as_given, 2, "half")
        torch.testing.assert_close(got, want, rtol=2e-7, atol=2e-6)  # torch's cos: 1 ulp off
    if isinstance(positions, list):  # nested lists are refused, as apply_rope refuses them
        with pytest.raises(ValueError, match="1-D"):
            kernels.rope_qk(q, k, [positions, positions])


@settings(max_examples=300, deadline=None)
@given(
    x_shape=st.lists(st.integers(0, 3), min_size=2, max_size=5),
    p_shape=st.lists(st.integers(0, 3), min_size=2, max_size=5),
)
def test_the_fast_path_takes_positions_that_broadcast_into_x(x_shape, p_shape):
    """The dispatch's shape rule, written by hand for speed, is torch's: positions go to the
    kernel when they broadcast against ``x``'s leading shape without enlarging it."""
    from posenc.fast import dispatch as kernels

    x = torch.empty(x_shape, device="meta")
    positions = torch.empty(p_shape, dtype=torch.int64, device="meta")
    try:
        fits = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
    except RuntimeError:
        fits = False
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tr, "triton_available", lambda device="cuda": True)
        patch.setattr(kernels, "_TRITON_DEVICES", ("cuda", "meta"))
        assert kernels._use_triton(x, positions) == fits


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_on_a_gpu_the_same_numbers(dtype, layout, monkeypatch):
    """The compiled kernel on a GPU gives the interpreter's numbers: the arithmetic spelled out."""
    monkeypatch.delenv("TRITON_INTERPRET")
    torch.manual_seed(0)
    for maker in MAKERS.values():
        x = maker(dtype)
        for kind, offset in (("arange", 0), ("far and negative", 0), ("per batch", 7)):
            positions = _positions(kind, x)
            on_gpu = None if positions is None else positions.cuda()
            got = tr.rope_triton(x.cuda(), on_gpu, layout=layout, offset=offset).cpu()
            want = _oracle(x, positions, offset, layout)
            if dtype == torch.float64:
                torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)
            else:
                assert torch.equal(got, want), (kind, (got.double() - want.double()).abs().max())
    q, k = _model_view(2, 64, 32, 128, dtype).cuda(), _model_view(2, 64, 8, 128, dtype).cuda()
    rows = torch.arange(64, device="cuda") + torch.tensor([[0], [4000]], device="cuda")
    for got, x in zip(tr.rope_qk_triton(q, k, rows, layout=layout), (q, k), strict=True):
        want = _oracle(x.cpu(), rows.cpu()[:, None], 0, layout)
        torch.testing.assert_close(
            got.cpu(),
            want,
            rtol=1e-14 if dtype == torch.float64 else 0,
            atol=1e-14 if dtype == torch.float64 else 0,
        )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_a_row_s_path_told_both_ways(monkeypatch):
    """Compiled, both ways of telling a row's path give the oracle's numbers: posenc's own
    frequencies (the position tells) and a caller's (the row's largest angle), far above 1
    at positions below 2**30 too."""
    monkeypatch.delenv("TRITON_INTERPRET")
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 16)
    positions = torch.tensor([3, 2**20 + 7, 2**29 - 1, 12345])
    far = torch.tensor([1.0, 2.0**10, 2.0**20, 2.0**31, 0.5, 3.0, 2.0**40, 1e-3])
    for freqs in (None, rope_inv_freq(16), far):
        kwargs = {} if freqs is None else {"inv_freq": freqs.cuda()}
        got = tr.rope_triton(x.cuda(), positions.cuda(), layout="half", **kwargs).cpu()
        assert _same(got, _oracle(x, positions, 0, "half", inv_freq=freqs))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_on_a_gpu_in_place_on_one_buffer(layout, monkeypatch):
    """In place in one launch: q and k cut from one fused projection are each rotated once
    (interleaved in memory, no element shared), and one tensor passed as both, once."""
    monkeypatch.delenv("TRITON_INTERPRET")
    torch.manual_seed(1)
    fused = torch.randn(2, 64, 32 + 2 * 8, 128).to(torch.bfloat16)  # [B, T, H + 2 H_kv, D]
    rows = torch.arange(64) + torch.tensor([[0], [4000]])
    q, k = fused[:, :, :32].transpose(1, 2), fused[:, :, 32:40].transpose(1, 2)
    want = [_oracle(x, rows[:, None], 0, layout) for x in (q, k)]
    on_gpu = fused.cuda()
    qg, kg = on_gpu[:, :, :32].transpose(1, 2), on_gpu[:, :, 32:40].transpose(1, 2)
    tr.rope_qk_triton(qg, kg, rows.cuda(), layout=layout, inplace=True)
    assert torch.equal(qg.cpu(), want[0]) and torch.equal(kg.cpu(), want[1])
    assert torch.equal(on_gpu[:, :, 40:].cpu(), fused[:, :, 40:])  # the values untouched
    again = q.cuda()
    tr.rope_qk_triton(again, again, rows.cuda(), layout=layout, inplace=True)
    assert torch.equal(again.cpu(), want[0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("inplace", [False, True])
def test_on_a_gpu_a_call_is_captured_in_a_cuda_graph(inplace, monkeypatch):
    """No host work reads the device: a call captured in a CUDA graph and replayed with new
    positions and new inputs gives what an eager call gives."""
    monkeypatch.delenv("TRITON_INTERPRET")
    q = _model_view(2, 16, 32, 128, torch.bfloat16).cuda()
    k = _model_view(2, 16, 8, 128, torch.bfloat16).cuda()
    rows = torch.arange(16, device="cuda").repeat(2, 1)
    static = [x.clone() for x in (q, k)]

    def step():
        return tr.rope_qk_triton(*static, rows, inplace=inplace, offset=5)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm: the kernel built, the frequencies cached
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    rows.copy_(rows + torch.tensor([[0], [3000]], device="cuda"))
    for s, x in zip(static, (q, k), strict=True):
        s.copy_(x)
    graph.replay()
    want = tr.rope_qk_triton(q, k, rows, offset=5)
    assert all(torch.equal(a, b) for a, b in zip(out, want, strict=True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_compiled_whole_with_inductor_and_trained(monkeypatch):
    """torch.compile's default backend (inductor) with fullgraph=True gives the eager
    numbers forward and backward, and the backward is the inverse rotation."""
    monkeypatch.delenv("TRITON_INTERPRET")
    q = _model_view(2, 64, 32, 128, torch.bfloat16).cuda().requires_grad_()
    k = _model_view(2, 64, 8, 128, torch.bfloat16).cuda().requires_grad_()
    rows = torch.arange(64, device="cuda").repeat(2, 1)

    def loss(q, k):
        rq, rk = tr.rope_qk_triton(q, k, rows, offset=7)
        return (rq.float() ** 2).sum() + (rk.float() * 3).sum()

    compiled = torch.compile(loss, fullgraph=True)
    got = torch.autograd.grad(compiled(q, k), (q, k))
    want = torch.autograd.grad(loss(q, k), (q, k))
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    # d/dk of sum(3 * rotate(k)) is the inverse rotation of 3 everywhere
    threes = torch.full_like(k, 3.0)
    inverse = _oracle(threes.cpu(), rows.cpu()[:, None] + 7, 0, "half", inverse=True)
    assert torch.equal(want[1].cpu(), inverse)


def test_three_dims_share_a_few_builds_and_rotate_as_the_oracle():
    """``x [N, T, D]`` (batch and heads flattened) is taken as ``[N / h, h, T, D]``, ``h`` the
    largest power of two dividing ``N`` within a tile: the kernel, which compiles for its
    number of heads, builds once for every ``N`` of the same ``h``; positions ``[T]`` and
    per-row ``[N, T]`` rotate as the oracle has it."""
    assert {tr._bhtd(torch.empty(n, 5, 16)).shape[1] for n in (2, 6, 10, 14)} == {2}
    assert tr._bhtd(torch.empty(96, 5, 128)).shape[:2] == (3, 32)
    assert tr._bhtd(torch.empty(1024, 5, 128)).shape[:2] == (32, 32)  # a tile: 32 heads of 128
    assert tr._bhtd(torch.empty(0, 5, 16)).shape == (0, 1, 5, 16)
    torch.manual_seed(4)
    x = torch.randn(12, 5, 16)
    rows = torch.arange(5) * 7 + 300 * torch.arange(12)[:, None]  # [N, T]: one row per x row
    for positions in (None, torch.arange(5) + 40, rows):
        for layout in LAYOUTS:
            got = tr.rope_triton(x, positions, layout=layout, offset=3)
            assert _same(got, _oracle(x, positions, 3, layout))


def test_a_lazy_negation_is_refused_by_the_kernel():
    """The kernel reads memory, which for a lazy negation (``z.conj().imag``) holds the
    negated values: ``rope_triton`` and ``rope_qk_triton`` refuse one and say how to pass it
    (``posenc.fast.apply_rope`` and ``rope_qk`` rotate it by tensor operations)."""
    q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match="resolve_neg"):
        tr.rope_triton(torch._neg_view(q))
    with pytest.raises(ValueError, match="resolve_neg"):
        tr.rope_qk_triton(q, torch._neg_view(k))


def test_frequencies_and_positions_negated_lazily_are_read_as_their_values():
    """Frequencies or positions whose memory holds their values negated are resolved before
    the kernel reads them: the results are those of the values."""
    x, k = torch.randn(1, 3, 4, 2), torch.randn(1, 1, 4, 2)  # D=2: one frequency, contiguous
    inv_freq = torch.tensor([0.3])
    want = tr.rope_triton(x, inv_freq=inv_freq, layout="half")
    assert torch.equal(tr.rope_triton(x, inv_freq=torch._neg_view(-inv_freq), layout="half"), want)
    positions = torch.arange(4) + 2
    want = tr.rope_qk_triton(x, k, positions)
    assert all(
        torch.equal(a, b)
        for a, b in zip(tr.rope_qk_triton(x, k, torch._neg_view(-positions)), want, strict=True)
    )
