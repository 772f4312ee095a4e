"""Property-based tests of posenc's identities, in every dtype and on every device available.

Each identity below is checked by hypothesis on random inputs, for float32, float64 and
(where the function computes in it) bfloat16, on the CPU and, when there is one, the GPU:

- rotations keep norms, compose by adding angles, and invert by transposing;
- ``block_diagonal`` acts block by block;
- RoPE: position 0 is the identity, norms are kept, the score depends only on the offset
  (any shift of both positions), the two layouts agree under ``layout_permutation``, the
  dense ``rope_matrix`` equals the elementwise form, the in-place form equals the
  out-of-place one, permuting ``W_q``/``W_k`` rows keeps ``q . k``, axial n-D RoPE depends
  only on coordinate differences, and scaled positions with scaled frequencies give the
  same rotation (position interpolation);
- frequencies: ``rope_inv_freq`` is a geometric ladder from 1; llama3 scaling keeps the fast
  pairs, divides the slow ones by the factor and stays between the two in any input dtype;
- the sinusoidal encoding: ``PE(p + k) = M_k PE(p)`` and ``PE(p) . PE(p + k)`` depends on
  ``k`` only; the binary encoding gives back its integer;
- self-attention is permutation-equivariant; ALiBi's bias and Shaw's indices depend on
  ``j - i`` only;
- ``precision.exact_rope`` (complex numbers) equals ``apply_rope`` in float64.

Number of examples: every property runs :data:`EXAMPLES` hypothesis examples per dtype and
device (``derandomize=True``, so CI sees the same examples on every run). With 3 dtypes on a
CPU-only machine that is about 1,200 examples, about 15 s on a 2-core CPU.

Tolerances come from the dtype: an answer in dtype ``d`` is compared with float64 to a few
times ``eps(d)`` relative to the size of the values, plus RoPE's float32 angle error
(``~2^-23 p``) for positions up to :data:`MAX_POSITION`.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc import precision, relative

EXAMPLES = 25
"""Hypothesis examples per property, dtype and device."""

MAX_POSITION = 4096
"""Largest position drawn: keeps float32 angle errors below ~1e-3 rad."""

SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)

F64 = torch.float64
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
DTYPES = [torch.float32, torch.float64, torch.bfloat16]

device_param = pytest.mark.parametrize("device", DEVICES)
dtype_param = pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))

seeds = st.integers(0, 2**31 - 1)
half_dims = st.integers(1, 16)  # D = 2 * half_dims
positions = st.integers(-MAX_POSITION, MAX_POSITION)
bases = st.sampled_from([100.0, 10000.0, 500000.0])
layouts = st.sampled_from(["interleaved", "half"])


def rtol(dtype: torch.dtype) -> float:
    """Relative tolerance for one computed value in ``dtype``, against float64."""
    return {torch.float64: 1e-10, torch.float32: 2e-5, torch.bfloat16: 2e-2}[dtype]


def rope_tol(dtype: torch.dtype, max_position: int) -> float:
    """Tolerance (relative to the norms) of a RoPE result at positions up to ``max_position``.

    Rounding of the dtype, plus the float32 angle's error of at most ``~3 * 2^-24 p`` rad
    (float64 angles for float64 input).
    """
    u = 2.0**-53 if dtype == F64 else 2.0**-24
    return 4 * rtol(dtype) + 3 * u * max_position


def randn(seed: int, *shape, dtype=F64, device="cpu") -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=F64).to(device=device, dtype=dtype)


def close(got: torch.Tensor, want: torch.Tensor, tol: float, scale: float = 1.0) -> bool:
    err = (got.double().cpu() - want.double().cpu()).abs().max().item()
    return err <= tol * max(scale, 1e-300)


# --- rotations ---------------------------------------------------------------------------------


@device_param
@dtype_param
@SETTINGS
@given(a=st.floats(-50, 50), b=st.floats(-50, 50), seed=seeds)
def test_rotations_keep_norms_compose_and_invert(device, dtype, a, b, seed):
    ra = pe.rotation_matrix(torch.tensor(a, dtype=dtype, device=device)).double()
    rb = pe.rotation_matrix(torch.tensor(b, dtype=dtype, device=device)).double()
    v = randn(seed, 2, device=device)
    tol = rtol(torch.float32 if dtype == torch.bfloat16 else dtype) * 100
    # angles rounded to the dtype first: compare with the float64 rotation by those angles
    a64 = torch.tensor(a, dtype=dtype).double().item()
    b64 = torch.tensor(b, dtype=dtype).double().item()
    assert close((ra @ v).norm(), v.norm(), tol, v.norm().item())
    assert close(ra @ rb, pe.rotation_matrix(torch.tensor(a64 + b64, dtype=F64)), tol)
    assert close(ra.T @ ra, torch.eye(2, dtype=F64), tol)
    assert close(ra.T, pe.rotation_matrix(torch.tensor(-a64, dtype=F64)), tol)


@device_param
@dtype_param
@SETTINGS
@given(n=st.integers(1, 6), seed=seeds)
def test_block_diagonal_acts_block_by_block(device, dtype, n, seed):
    blocks = randn(seed, n, 2, 2, dtype=dtype, device=device)
    x = randn(seed + 1, 2 * n, dtype=dtype, device=device)
    dense = pe.block_diagonal(blocks)
    assert dense.dtype == dtype and dense.device.type == device
    by_block = torch.einsum("nij,nj->ni", blocks.double(), x.double().view(n, 2)).flatten()
    scale = blocks.double().abs().max().item() * x.double().abs().max().item() * 2
    assert close(dense.double() @ x.double(), by_block, 1e-12, scale)
    off = dense.clone()
    for i in range(n):
        off[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = 0
    assert bool((off == 0).all())


# --- RoPE --------------------------------------------------------------------------------------


@device_param
@dtype_param
@SETTINGS
@given(h=half_dims, t=st.integers(1, 6), seed=seeds, base=bases, layout=layouts)
def test_rope_position_zero_is_the_identity_and_norms_are_kept(
    device, dtype, h, t, seed, base, layout
):
    x = randn(seed, t, 2 * h, dtype=dtype, device=device)
    zero = pe.apply_rope(x, [0] * t, base=base, layout=layout)
    assert zero.dtype == dtype and zero.device.type == device
    assert torch.equal(zero, x)
    p = torch.randint(0, MAX_POSITION, (t,), generator=torch.Generator().manual_seed(seed))
    rotated = pe.apply_rope(x, p.to(device), base=base, layout=layout)
    norms = x.double().norm(dim=-1)
    tol = rope_tol(dtype, MAX_POSITION)
    assert close(rotated.double().norm(dim=-1), norms, tol, norms.max().item())


@device_param
@dtype_param
@SETTINGS
@given(
    h=half_dims, m=positions, n=positions, shift=positions, seed=seeds, base=bases, layout=layouts
)
def test_rope_score_depends_on_the_offset_only(device, dtype, h, m, n, shift, seed, base, layout):
    q, k = randn(seed, 2, 1, 2 * h, dtype=dtype, device=device)

    def score(a, b):
        rq = pe.apply_rope(q, [a], base=base, layout=layout).double()
        rk = pe.apply_rope(k, [b], base=base, layout=layout).double()
        return (rq * rk).sum()

    scale = q.double().norm().item() * k.double().norm().item()
    tol = 2 * rope_tol(dtype, 2 * MAX_POSITION)
    assert close(score(m, n), score(m + shift, n + shift), tol, scale)
    # <R_m q, R_n k> = <q, R_(n-m) k>
    q0 = q.double()
    assert close(
        score(m, n),
        (q0 * pe.apply_rope(k, [n - m], base=base, layout=layout).double()).sum(),
        tol,
        scale,
    )


@device_param
@dtype_param
@SETTINGS
@given(h=half_dims, t=st.integers(1, 5), seed=seeds, base=bases)
def test_rope_layouts_agree_under_the_permutation(device, dtype, h, t, seed, base):
    x = randn(seed, t, 2 * h, dtype=dtype, device=device)
    p = torch.randint(
        -MAX_POSITION, MAX_POSITION, (t,), generator=torch.Generator().manual_seed(seed)
    )
    perm = pe.layout_permutation(2 * h).to(device)
    inter = pe.apply_rope(x, p.to(device), base=base, layout="interleaved")
    half = pe.apply_rope(x[..., perm], p.to(device), base=base, layout="half")
    assert torch.equal(torch.argsort(perm)[perm], torch.arange(2 * h, device=device))
    # the same arithmetic on the same pairs: equal up to the last rounding
    assert close(inter[..., perm], half, 2 * rtol(dtype), x.double().abs().max().item() * 2)


@device_param
@dtype_param
@SETTINGS
@given(h=half_dims, position=positions, seed=seeds, base=bases, layout=layouts)
def test_rope_dense_matrix_equals_the_elementwise_form(
    device, dtype, h, position, seed, base, layout
):
    x = randn(seed, 1, 2 * h, dtype=dtype, device=device)
    dense = pe.rope_matrix(position, 2 * h, base=base, layout=layout)  # float64
    want = dense @ x.double().cpu()[0]
    got = pe.apply_rope(x, [position], base=base, layout=layout)[0]
    assert close(got, want, rope_tol(dtype, MAX_POSITION), x.double().norm().item())
    # and the dense matrix is a rotation: orthogonal
    assert close(dense.T @ dense, torch.eye(2 * h, dtype=F64), 1e-12)


@device_param
@dtype_param
@SETTINGS
@given(h=half_dims, t=st.integers(1, 5), seed=seeds, layout=layouts)
def test_rope_in_place_equals_out_of_place(device, dtype, h, t, seed, layout):
    if not hasattr(pe.rope, "apply_rope_"):
        pytest.skip("posenc.rope.apply_rope_ is not available")
    x = randn(seed, 2, t, 2 * h, dtype=dtype, device=device)
    p = torch.randint(0, MAX_POSITION, (t,), generator=torch.Generator().manual_seed(seed))
    want = pe.apply_rope(x, p.to(device), layout=layout)
    y = x.clone()
    out = pe.rope.apply_rope_(y, p.to(device), layout=layout)
    assert out is y
    assert close(y, want, 2 * rtol(dtype), x.double().abs().max().item() * 2)


@device_param
@dtype_param
@SETTINGS
@given(heads=st.integers(1, 3), h=half_dims, e=st.integers(1, 6), seed=seeds)
def test_permuting_qk_rows_keeps_the_scores(device, dtype, heads, h, e, seed):
    d = 2 * h
    w_q, w_k = randn(seed, 2, heads * d, e, dtype=dtype, device=device)
    x = randn(seed + 1, 4, e, dtype=dtype, device=device)
    back = pe.permute_qk_rows(pe.permute_qk_rows(w_q, heads), heads, to="interleaved")
    assert torch.equal(back, w_q)
    p = torch.tensor([0, 3, 17, 400], device=device)

    def scores(wq, wk, layout):
        q = (x @ wq.T).view(4, heads, d).transpose(0, 1)  # [H, T, D]
        k = (x @ wk.T).view(4, heads, d).transpose(0, 1)
        q, k = pe.apply_rope(q, p, layout=layout), pe.apply_rope(k, p, layout=layout)
        return q.double() @ k.double().transpose(-1, -2)  # [H, T, T]

    meta = scores(w_q, w_k, "interleaved")
    hf = scores(pe.permute_qk_rows(w_q, heads), pe.permute_qk_rows(w_k, heads), "half")
    scale = (x.double().norm(dim=-1).max() ** 2 * w_q.double().norm() * w_k.double().norm()).item()
    assert close(meta, hf, 4 * rtol(dtype), scale)


@device_param
@dtype_param
@SETTINGS
@given(n_axes=st.integers(1, 3), h=st.integers(1, 4), seed=seeds, data=st.data())
def test_axial_rope_depends_on_coordinate_differences(device, dtype, n_axes, h, seed, data):
    d = 2 * n_axes * h
    q, k = randn(seed, 2, 1, d, dtype=dtype, device=device)
    coords = st.lists(st.integers(-500, 500), min_size=n_axes, max_size=n_axes)
    a, b, s = data.draw(coords), data.draw(coords), data.draw(coords)

    def score(u, v):
        rq = pe.apply_rope_nd(q, torch.tensor([u], device=device)).double()
        rk = pe.apply_rope_nd(k, torch.tensor([v], device=device)).double()
        return (rq * rk).sum()

    shifted = score(
        [x + y for x, y in zip(a, s, strict=True)], [x + y for x, y in zip(b, s, strict=True)]
    )
    scale = q.double().norm().item() * k.double().norm().item()
    assert close(score(a, b), shifted, 2 * rope_tol(dtype, 1000), scale)


@device_param
@dtype_param
@SETTINGS
@given(h=half_dims, m=st.integers(0, 1000), factor=st.sampled_from([2, 4, 8]), seed=seeds)
def test_position_interpolation_is_the_same_rotation(device, dtype, h, m, factor, seed):
    x = randn(seed, 1, 2 * h, dtype=dtype, device=device)
    f = pe.rope_inv_freq(2 * h)
    interp = pe.scaling.position_interpolation_inv_freq(f, float(factor))
    got = pe.apply_rope(x, [factor * m], inv_freq=interp)
    want = pe.apply_rope(x, [m], inv_freq=f)
    assert close(got, want, 2 * rope_tol(dtype, factor * 1000), x.double().norm().item())


@SETTINGS
@given(h=half_dims, t=st.integers(1, 6), seed=seeds, base=bases, layout=layouts)
def test_exact_rope_equals_apply_rope_in_float64(h, t, seed, base, layout):
    x = randn(seed, t, 2 * h)
    p = torch.randint(
        -MAX_POSITION, MAX_POSITION, (t,), generator=torch.Generator().manual_seed(seed)
    )
    f = pe.rope_inv_freq(2 * h, base)
    got = precision.exact_rope(x, p, f, layout=layout)
    assert close(got, pe.apply_rope(x, p, base=base, layout=layout), 1e-11, x.abs().max().item())


@dtype_param
@SETTINGS
@given(h=st.integers(2, 64), base=bases, factor=st.sampled_from([2.0, 8.0, 32.0]))
def test_llama3_scaling_stays_between_kept_and_divided(dtype, h, base, factor):
    f = pe.rope_inv_freq(2 * h, base).to(dtype)  # frequencies held in the dtype
    out = pe.llama3_inv_freq(f, factor, 1.0, 4.0, 8192)
    f64 = f.double()
    assert out.dtype == F64
    assert bool((out <= f64 * (1 + 1e-12)).all()) and bool(
        (out >= f64 / factor * (1 - 1e-12)).all()
    )
    # fast pairs (short wavelengths) are kept exactly, the slowest are divided by the factor
    wavelength = 2 * math.pi / f64
    assert torch.equal(out[wavelength < 8192 / 4], f64[wavelength < 8192 / 4])
    assert torch.allclose(out[wavelength > 8192], f64[wavelength > 8192] / factor, rtol=1e-12)


@SETTINGS
@given(h=st.integers(1, 64), base=st.floats(2.0, 1e7))
def test_rope_frequencies_are_geometric(h, base):
    f = pe.rope_inv_freq(2 * h, base)
    assert f[0].item() == 1.0 and bool((f > 0).all())
    ratios = f[1:] / f[:-1]
    assert torch.allclose(ratios, torch.full_like(ratios, base ** (-2 / (2 * h))), rtol=1e-9)


# --- absolute encodings ------------------------------------------------------------------------


@SETTINGS
@given(h=st.integers(1, 16), p=st.integers(0, 200), k=st.integers(-50, 50), base=bases)
def test_sinusoidal_shift_is_a_rotation(h, p, k, base):
    if p + k < 0:
        k = -p
    d = 2 * h
    enc = pe.sinusoidal_encoding(p + max(k, 0) + 1, d, base).double()  # float32 table
    m = pe.sinusoidal_shift_matrix(k, d, base)  # float64
    tol = 3 * 2.0**-24 * (p + abs(k)) + 1e-6  # the table is float32
    assert close(m @ enc[p], enc[p + k], tol)
    assert close(m.T @ m, torch.eye(d, dtype=F64), 1e-12)


@SETTINGS
@given(
    h=st.integers(1, 16),
    k=st.integers(0, 30),
    starts=st.lists(st.integers(0, 300), min_size=2, max_size=5),
)
def test_sinusoidal_dot_product_depends_on_the_offset_only(h, k, starts):
    d = 2 * h
    enc = pe.sinusoidal_encoding(max(starts) + k + 1, d).double()
    dots = torch.stack([enc[s] @ enc[s + k] for s in starts])
    assert close(dots, dots[0].expand(len(starts)), 1e-5 * d)


@SETTINGS
@given(values=st.lists(st.integers(0, 2**12 - 1), min_size=1, max_size=8))
def test_binary_encoding_gives_back_its_integer(values):
    bits = pe.binary_encoding(values, 12)
    weights = 2.0 ** torch.arange(12)
    assert torch.equal(bits @ weights, torch.tensor(values, dtype=torch.float32))
    assert bool(((bits == 0) | (bits == 1)).all())


# --- attention and relative methods ------------------------------------------------------------


@device_param
@dtype_param
@SETTINGS
@given(t=st.integers(2, 6), d=st.integers(1, 8), seed=seeds, data=st.data())
def test_self_attention_is_permutation_equivariant(device, dtype, t, d, seed, data):
    q, k, v = randn(seed, 3, t, d, dtype=dtype, device=device)
    perm = data.draw(st.permutations(list(range(t))))
    out = pe.self_attention(q, k, v)
    out_p = pe.self_attention(*(pe.permute_positions(a, perm) for a in (q, k, v)))
    assert out.dtype == dtype and out.device.type == device
    scale = v.double().abs().max().item()
    assert close(out_p, pe.permute_positions(out, perm), 8 * rtol(dtype), scale)


@device_param
@dtype_param
@SETTINGS
@given(t=st.integers(2, 12), heads=st.integers(1, 8))
def test_alibi_bias_depends_on_the_offset_only(device, dtype, t, heads):
    slopes = relative.alibi_slopes(heads).to(device=device, dtype=dtype)
    bias = relative.alibi_bias(t, slopes, causal=False)  # [H, T, T]
    assert bias.dtype == dtype
    for offset in range(-t + 1, t):
        diag = torch.diagonal(bias, offset=offset, dim1=-2, dim2=-1)  # [H, T - |offset|]
        assert torch.equal(diag, diag[..., :1].expand_as(diag))


@SETTINGS
@given(t=st.integers(1, 12), clip=st.integers(0, 6))
def test_shaw_indices_depend_on_the_clipped_offset_only(t, clip):
    idx = relative.shaw_relative_indices(t, clip)
    i, j = torch.meshgrid(torch.arange(t), torch.arange(t), indexing="ij")
    assert torch.equal(idx, (j - i).clamp(-clip, clip) + clip)


# --- the tolerances are not vacuous -------------------------------------------------------------


def test_the_relative_check_catches_a_broken_rope():
    """With angles rounded to bfloat16 the offset-only property fails at these tolerances."""
    q, k = randn(0, 2, 1, 8)
    f = pe.rope_inv_freq(8)

    def score(a, b):
        rq = precision.exact_rope(q, [a], f, "all bf16")
        rk = precision.exact_rope(k, [b], f, "all bf16")
        return (rq * rk).sum()

    scale = q.norm().item() * k.norm().item()
    assert not close(
        score(3, 10), score(3003, 3010), 2 * rope_tol(torch.bfloat16, 2 * MAX_POSITION), scale
    )
