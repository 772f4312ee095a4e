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
def as_row(v):
    # [D/2] as a row [1, D/2], through a reduction over an axis of one: no arithmetic, but
    # Triton cannot make the row in another layout by making v again, so the cos and sin
    # below are made once per pair and then moved to the threads that hold the pair's
    # features; a plain v[None, :] lets Triton make them again in each of those threads (it
    # does for some tile shapes and warp counts, at several times the float64 work)
    return tl.reduce(v[None, None, :], 0, first)


@triton.jit
def first(a, b):
    # the combining function of as_row's reduction (over one value, it is never called)
    return a


@triton.jit
def load_tile(at, h0, n_heads, half, s_h, s_d, INTERLEAVED: tl.constexpr,
              BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):  # fmt: skip
    # the two members of every pair of BLOCK_H heads, [BLOCK_H, BLOCK_HALF] each: an
    # interleaved row is loaded whole and its pairs split in registers; a half-split row is
    # two contiguous halves, loaded as they lie
    heads = (h0 + tl.arange(0, BLOCK_H)).to(tl.int64)
    if INTERLEAVED:
        r = tl.arange(0, 2 * BLOCK_HALF)
        mask = (heads < n_heads)[:, None] & (r < 2 * half)[None, :]
        x = tl.load(at + heads[:, None] * s_h + r[None, :] * s_d, mask=mask)
        return tl.split(tl.reshape(x, (BLOCK_H, BLOCK_HALF, 2)))
    else:
        cols = tl.arange(0, BLOCK_HALF)
        mask = (heads < n_heads)[:, None] & (cols < half)[None, :]
        first = at + heads[:, None] * s_h + cols[None, :] * s_d
        return tl.load(first, mask=mask), tl.load(first + half * s_d, mask=mask)


@triton.jit
def store_tile(at, x1, x2, c, s, h0, n_heads, half, d_h, d_d, INTERLEAVED: tl.constexpr,
               BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr, BY_HAND: tl.constexpr):  # fmt: skip
    # the pairs turned in the angle dtype (each product rounded, then the sum) and rounded
    # once to the output's dtype, stored where load_tile found them
    x1 = x1.to(c.dtype)
    x2 = x2.to(c.dtype)
    out_type = at.dtype.element_ty
    o1 = rounded(x1 * c - x2 * s, out_type, BY_HAND)
    o2 = rounded(x1 * s + x2 * c, out_type, BY_HAND)
    heads = (h0 + tl.arange(0, BLOCK_H)).to(tl.int64)
    if INTERLEAVED:
        r = tl.arange(0, 2 * BLOCK_HALF)
        mask = (heads < n_heads)[:, None] & (r < 2 * half)[None, :]
        o = tl.reshape(tl.join(o1, o2), (BLOCK_H, 2 * BLOCK_HALF))
        tl.store(at + heads[:, None] * d_h + r[None, :] * d_d, o, mask=mask)
    else:
        cols = tl.arange(0, BLOCK_HALF)
        mask = (heads < n_heads)[:, None] & (cols < half)[None, :]
        first = at + heads[:, None] * d_h + cols[None, :] * d_d
        tl.store(first, o1, mask=mask)
        tl.store(first + half * d_d, o2, mask=mask)


@triton.jit
def rotate_heads(src, dst, x1, x2, c, s, n_heads: tl.constexpr, half: tl.constexpr,
                 s_h, s_d, d_h, d_d, INTERLEAVED: tl.constexpr, BLOCK_H: tl.constexpr,
                 BLOCK_HALF: tl.constexpr, BY_HAND: tl.constexpr):  # fmt: skip
    # the numbers of heads and pairs are compile-time constants (a model's are fixed): with one
    # tile of heads, a model's usual case, no loop and no load past it remain, and the masks of
    # a whole tile vanish (a decoding step's program is a fifth shorter). Several tiles are
    # taken in turn by a loop at run time, each pass storing one tile and loading the next
    # (past the last head its mask is empty): unrolled, a large count would compile for long
    if n_heads > BLOCK_H:
        h0 = 0
        while h0 < n_heads:
            store_tile(dst, x1, x2, c, s, h0, n_heads, half, d_h, d_d,
                       INTERLEAVED, BLOCK_H, BLOCK_HALF, BY_HAND)  # fmt: skip
            h0 += BLOCK_H
            x1, x2 = load_tile(src, h0, n_heads, half, s_h, s_d,
                               INTERLEAVED, BLOCK_H, BLOCK_HALF)  # fmt: skip
    elif n_heads > 0:
        store_tile(dst, x1, x2, c, s, 0, n_heads, half, d_h, d_d,
                   INTERLEAVED, BLOCK_H, BLOCK_HALF, BY_HAND)  # fmt: skip


@triton.jit(do_not_specialize=["offset"])  # a new offset every decoding step: one build
def rope_kernel(
    q,
    q_out,
    k,
    k_out,
    pos,
    inv_freq,
    length,
    half: tl.constexpr,
    offset,
    n_q: tl.constexpr,
    n_k: tl.constexpr,
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
    TABLE: tl.constexpr,
):
    # one program per (batch, position): its angles once, then every head of q and k
    row = tl.program_id(0).to(tl.int64)
    b = row // length
    t = row % length
    q_at = q + b * q_sb + t * q_st
    qo_at = q_out + b * qo_sb + t * qo_st
    k_at = k + b * k_sb + t * k_st
    ko_at = k_out + b * ko_sb + t * ko_st
    # the first tiles of q's heads and of k's are asked for before the angles are made, so
    # that their loads are under way meanwhile (at a decoding step, a program's whole time)
    q1, q2 = load_tile(q_at, 0, n_q, half, q_sh, q_sd, INTERLEAVED, BLOCK_HQ, BLOCK_HALF)
    k1, k2 = load_tile(k_at, 0, n_k, half, k_sh, k_sd, INTERLEAVED, BLOCK_HK, BLOCK_HALF)
    if TABLE:  # the angles made beforehand (rope_angles): pos holds rows [R, T, 2, D/2] of
        # cos and sin in the angle dtype, read as rows of every head's pairs; no arithmetic
        pairs = tl.arange(0, BLOCK_HALF)
        at = pos + b * p_sb + t * p_st
        c = tl.load(at + pairs[None, :], mask=(pairs < half)[None, :], other=0.0)
        s = tl.load(at + half + pairs[None, :], mask=(pairs < half)[None, :], other=0.0)
        if INVERSE:
            s = -s
    else:
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
        c = as_row(c)
        s = as_row(s)
    rotate_heads(q_at, qo_at, q1, q2, c, s, n_q, half, q_sh, q_sd, qo_sh, qo_sd,
                 INTERLEAVED, BLOCK_HQ, BLOCK_HALF, BY_HAND)  # fmt: skip
    rotate_heads(k_at, ko_at, k1, k2, c, s, n_k, half, k_sh, k_sd, ko_sh, ko_sd,
                 INTERLEAVED, BLOCK_HK, BLOCK_HALF, BY_HAND)  # fmt: skip
