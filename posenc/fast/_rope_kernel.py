"""The Triton kernel of :mod:`posenc.fast.triton`, on its own so that it is built once per
mode: :func:`posenc.fast.triton._kernel` loads this file as a fresh module for the GPU and
another for Triton's interpreter (which reads ``TRITON_INTERPRET`` when a function is
decorated, and runs the functions with this module's globals). Importing it needs Triton.

Shapes: ``B`` batch, ``H`` heads, ``T`` positions, ``D`` features, ``D/2`` pairs.
"""

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def cos_sin(a, LIBDEVICE: tl.constexpr):
    # libdevice's cos and sin are CUDA's accurate ones (tl.cos may lower to an
    # approximation); the interpreter has no libdevice and runs numpy's
    if LIBDEVICE:
        return libdevice.cos(a), libdevice.sin(a)
    else:
        return tl.cos(a), tl.sin(a)


@triton.jit
def rounded(v, out_type: tl.constexpr, BY_HAND: tl.constexpr):
    # one rounding, to nearest even; the interpreter truncates float32 to bfloat16, so there
    # the bits are rounded by hand (on a GPU the conversion instruction rounds to nearest)
    if BY_HAND:
        if out_type == tl.bfloat16:
            bits = v.to(tl.uint32, bitcast=True)
            bits = bits + 0x7FFF + ((bits >> 16) & 1)
            return (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
        else:
            return v.to(out_type)
    else:
        return v.to(out_type)


@triton.jit
def rotate_heads(
    src,
    dst,
    b,
    t,
    c,
    s,
    n_heads,
    half,
    s_b,
    s_h,
    s_t,
    s_d,
    d_b,
    d_h,
    d_t,
    d_d,
    INTERLEAVED: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BY_HAND: tl.constexpr,
):
    # every head of one (batch, position), BLOCK_H heads at a time: whole rows [D] loaded as
    # they lie (contiguous when the features are), each pair's two features then split in
    # registers; the half-split layout's rows are [2, D/2], turned into [D/2, 2] first
    src_at = src + b * s_b + t * s_t
    dst_at = dst + b * d_b + t * d_t
    r = tl.arange(0, 2 * BLOCK_HALF)
    if INTERLEAVED:
        feats = r
        in_row = r < 2 * half
    else:  # the two halves of a row, each padded to BLOCK_HALF when D/2 is not a power of 2
        feats = (r // BLOCK_HALF) * half + r % BLOCK_HALF
        in_row = r % BLOCK_HALF < half
    # a while loop, not range(): Triton 3.6's interpreter hands n_heads over as a one-element
    # array, which range() cannot take under NumPy 2.5 (the PTX for sm_90 is the same either way)
    h0 = 0
    while h0 < n_heads:
        heads = (h0 + tl.arange(0, BLOCK_H)).to(tl.int64)
        mask = (heads < n_heads)[:, None] & in_row[None, :]
        x = tl.load(src_at + heads[:, None] * s_h + feats[None, :] * s_d, mask=mask)
        x = x.to(c.dtype)
        if INTERLEAVED:
            x1, x2 = tl.split(tl.reshape(x, (BLOCK_H, BLOCK_HALF, 2)))
        else:
            x1, x2 = tl.split(tl.permute(tl.reshape(x, (BLOCK_H, 2, BLOCK_HALF)), (0, 2, 1)))
        o = tl.join(x1 * c - x2 * s, x1 * s + x2 * c)
        if not INTERLEAVED:
            o = tl.permute(o, (0, 2, 1))
        o = tl.reshape(o, (BLOCK_H, 2 * BLOCK_HALF))
        out_at = dst_at + heads[:, None] * d_h + feats[None, :] * d_d
        tl.store(out_at, rounded(o, dst.dtype.element_ty, BY_HAND), mask=mask)
        h0 += BLOCK_H


@triton.jit(do_not_specialize=["offset"])  # a new offset every decoding step: one build
def rope_kernel(
    q,
    q_out,
    k,
    k_out,
    pos,
    inv_freq,
    length,
    half,
    offset,
    n_q,
    n_k,
    q_sb,
    q_sh,
    q_st,
    q_sd,
    qo_sb,
    qo_sh,
    qo_st,
    qo_sd,
    k_sb,
    k_sh,
    k_st,
    k_sd,
    ko_sb,
    ko_sh,
    ko_st,
    ko_sd,
    p_sb,
    p_st,
    HAS_POS: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    INVERSE: tl.constexpr,
    F64: tl.constexpr,
    LIBDEVICE: tl.constexpr,
    BY_HAND: tl.constexpr,
    BLOCK_HQ: tl.constexpr,
    BLOCK_HK: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    # one program per (batch, position): its angles once, then every head of q and k
    row = tl.program_id(0).to(tl.int64)
    b = row // length
    t = row % length
    p = tl.load(pos + b * p_sb + t * p_st).to(tl.int64) + offset if HAS_POS else t + offset
    pairs = tl.arange(0, BLOCK_HALF)
    # the frequencies in whatever dtype they come, rounded to the angle dtype here (as
    # Tensor.to rounds them, to nearest): a float64 inv_freq costs no conversion launch
    freq = tl.load(inv_freq + pairs, mask=pairs < half, other=0.0)
    if F64:
        c, s = cos_sin(p.to(tl.float64) * freq.to(tl.float64), LIBDEVICE)
    else:
        angle = p.to(tl.float32) * freq.to(tl.float32)  # rounded to float32, as torch's
        c, s = cos_sin(angle.to(tl.float64), LIBDEVICE)
        c = c.to(tl.float32)
        s = s.to(tl.float32)
    if INVERSE:
        s = -s
    c = c[None, :]
    s = s[None, :]
    rotate_heads(
        q, q_out, b, t, c, s, n_q, half,
        q_sb, q_sh, q_st, q_sd, qo_sb, qo_sh, qo_st, qo_sd,
        INTERLEAVED, BLOCK_HQ, BLOCK_HALF, BY_HAND,
    )  # fmt: skip
    rotate_heads(
        k, k_out, b, t, c, s, n_k, half,
        k_sb, k_sh, k_st, k_sd, ko_sb, ko_sh, ko_st, ko_sd,
        INTERLEAVED, BLOCK_HK, BLOCK_HALF, BY_HAND,
    )  # fmt: skip
