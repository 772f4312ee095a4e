"""The Triton kernel of :mod:`posenc.fast.triton`, on its own so that it is built once per
mode: :func:`posenc.fast.triton._kernel` loads this file as a fresh module for the GPU and
another for Triton's interpreter (which reads ``TRITON_INTERPRET`` when a function is
decorated, and runs the functions with this module's globals). Importing it needs Triton.

The kernel is the GPU's: no branch serves the interpreter alone. The interpreter runs it in
numpy, where some operations round otherwise (3.7's fuses no multiply-add, and bfloat16
conversions truncate), so the tests that run it on a CPU allow for that, and the
bit-for-bit tests run on a GPU.

Shapes: ``B`` batch, ``H`` heads, ``T`` positions, ``D`` features, ``D/2`` pairs.
"""

import triton
import triton.language as tl

__all__: list[str] = []  # nothing to call: posenc.fast.triton launches rope_kernel


@triton.jit
def cos_sin(a):
    # float64 cos and sin: Triton lowers them to libdevice's (CUDA's accurate ones) on a GPU
    return tl.cos(a), tl.sin(a)


@triton.jit
def cos_sin_of_float32(angle, p, SMALL_FREQS: tl.constexpr):
    # the cos and sin of float32 angles, in float64 (rounded to float32 later: the nearest
    # float32 values, but where one lies within a float64 error of halfway between two), by
    # one reduction to the multiple of pi/2 nearest the angle and both Taylor series of what
    # is left, r (|r| <= pi/4, where the first terms left out are below 2e-18, a fiftieth of
    # a float64 unit). libdevice's float64 cos and sin each reduce the angle again and read
    # their coefficients from memory: in one run on an H200, a decoding step's kernel took
    # 2.78 µs with them and 2.46 with these (2.29 with the position's check below).
    # pi/2 is split into three float64 parts (p1 + p2 + p3 is pi/2 to 1e-49), and each fused
    # multiply-add below takes k's multiple of one part off exactly, but for one rounding of
    # the remainder: up to 2**30, r is then within a few float64 units of its own size,
    # however small. Larger angles (a position past a billion, at a frequency of 1) go to
    # libdevice's cos and sin, whose slower reduction is exact at any size, for the whole row.
    # Which rows those are the position alone tells when every frequency is at most 1 (those
    # posenc makes from a base of at least 1: an angle then stays within 2**30 while the
    # position does); else the row's largest angle does, which takes an exchange between the
    # program's warps (it cost about 7% of a decoding step's kernel, exchanged in float64)
    x = angle.to(tl.float64)
    if SMALL_FREQS:
        small = (p < 1073741824) & (p > -1073741824)  # 2**30
    else:
        # in float32, the angles' own dtype (half the data to exchange); a NaN stays NaN
        small = tl.reduce(tl.abs(angle), 0, larger) < 1073741824.0  # either way
    if small:
        k = tl.floor(tl.fma(x, f64(0x3FE45F306DC9C883), 0.5))  # x 2/pi: the nearest multiple
        r = tl.fma(-k, f64(0x3FF921FB54442D18), x)  # p1
        r = tl.fma(-k, f64(0x3C91A62633145C07), r)  # p2
        r = tl.fma(-k, f64(0xB91F1976B7ED8FBC), r)  # p3
        z = r * r
        # sin r = r - r^3/3! + ... + r^17/17!, cos r = 1 - r^2/2! + ... + r^16/16!, by Horner
        s = tl.fma(z, f64(0x3CE952C77030AD4A), f64(0xBD6AE7F3E733B81F))  # 1/17!, -1/15!
        s = tl.fma(z, s, f64(0x3DE6124613A86D09))  # 1/13!
        s = tl.fma(z, s, f64(0xBE5AE64567F544E4))  # -1/11!
        s = tl.fma(z, s, f64(0x3EC71DE3A556C734))  # 1/9!
        s = tl.fma(z, s, f64(0xBF2A01A01A01A01A))  # -1/7!
        s = tl.fma(z, s, f64(0x3F81111111111111))  # 1/5!
        s = tl.fma(z, s, f64(0xBFC5555555555555))  # -1/3!
        s = tl.fma(r * z, s, r)
        c = tl.fma(z, f64(0x3D2AE7F3E733B81F), f64(0xBDA93974A8C07C9D))  # 1/16!, -1/14!
        c = tl.fma(z, c, f64(0x3E21EED8EFF8D898))  # 1/12!
        c = tl.fma(z, c, f64(0xBE927E4FB7789F5C))  # -1/10!
        c = tl.fma(z, c, f64(0x3EFA01A01A01A01A))  # 1/8!
        c = tl.fma(z, c, f64(0xBF56C16C16C16C17))  # -1/6!
        c = tl.fma(z, c, f64(0x3FA5555555555555))  # 1/4!
        c = tl.fma(z, c, -0.5)  # -1/2!
        c = tl.fma(z, c, 1.0)
        # the angle is k pi/2 + r: turn (cos r, sin r) by k quarter turns
        n = k - 4.0 * tl.floor(k * 0.25)  # k mod 4 (in float64: no cast of a huge k)
        odd = (n == 1.0) | (n == 3.0)
        cos_a = tl.where(odd, s, c)
        sin_a = tl.where(odd, c, s)
        cos_a = tl.where((n == 1.0) | (n == 2.0), -cos_a, cos_a)
        sin_a = tl.where(n >= 2.0, -sin_a, sin_a)
    else:
        cos_a, sin_a = cos_sin(x)
    return cos_a, sin_a


@triton.jit
def f64(bits: tl.constexpr):
    # a float64 constant from its bits: a float literal is made float32 first by some Triton
    # versions (3.6 among them), which would take 29 bits off these constants
    return tl.full([], bits, tl.uint64).to(tl.float64, bitcast=True)


@triton.jit
def larger(a, b):
    # the combining function of the row's largest angle (tl.max is Triton's own jit function,
    # which its interpreter cannot call when it was switched on after Triton was imported)
    return tl.maximum(a, b)


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
               BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):  # fmt: skip
    # the pairs turned in the angle dtype (each product rounded, then the sum) and rounded
    # once to the output's dtype, stored where load_tile found them
    x1 = x1.to(c.dtype)
    x2 = x2.to(c.dtype)
    out_type = at.dtype.element_ty
    o1 = (x1 * c - x2 * s).to(out_type)
    o2 = (x1 * s + x2 * c).to(out_type)
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
                 BLOCK_HALF: tl.constexpr):  # fmt: skip
    # the numbers of heads and pairs are compile-time constants (a model's are fixed): with one
    # tile of heads, a model's usual case, no loop and no load past it remain, and the masks of
    # a whole tile vanish (a decoding step's program is a fifth shorter). Several tiles are
    # taken in turn by a loop at run time, each pass storing one tile and loading the next
    # (past the last head its mask is empty): unrolled, a large count would compile for long
    if n_heads > BLOCK_H:
        h0 = 0
        while h0 < n_heads:
            store_tile(dst, x1, x2, c, s, h0, n_heads, half, d_h, d_d,
                       INTERLEAVED, BLOCK_H, BLOCK_HALF)  # fmt: skip
            h0 += BLOCK_H
            x1, x2 = load_tile(src, h0, n_heads, half, s_h, s_d,
                               INTERLEAVED, BLOCK_H, BLOCK_HALF)  # fmt: skip
    elif n_heads > 0:
        store_tile(dst, x1, x2, c, s, 0, n_heads, half, d_h, d_d,
                   INTERLEAVED, BLOCK_H, BLOCK_HALF)  # fmt: skip


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
    SMALL_FREQS: tl.constexpr,
    BLOCK_HQ: tl.constexpr,
    BLOCK_HK: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
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
    p = tl.load(pos + b * p_sb + t * p_st).to(tl.int64) + offset if HAS_POS else t + offset
    pairs = tl.arange(0, BLOCK_HALF)
    # the frequencies in whatever dtype they come, rounded to the angle dtype here (as
    # Tensor.to rounds them, to nearest): a float64 inv_freq costs no conversion launch
    freq = tl.load(inv_freq + pairs, mask=pairs < half, other=0.0)
    if F64:
        c, s = cos_sin(p.to(tl.float64) * freq.to(tl.float64))
    else:
        angle = p.to(tl.float32) * freq.to(tl.float32)  # rounded to float32, as torch's
        c, s = cos_sin_of_float32(angle, p, SMALL_FREQS)
        c = c.to(tl.float32)
        s = s.to(tl.float32)
    if INVERSE:
        s = -s
    c = as_row(c)
    s = as_row(s)
    rotate_heads(q_at, qo_at, q1, q2, c, s, n_q, half, q_sh, q_sd, qo_sh, qo_sd,
                 INTERLEAVED, BLOCK_HQ, BLOCK_HALF)  # fmt: skip
    rotate_heads(k_at, ko_at, k1, k2, c, s, n_k, half, k_sh, k_sd, ko_sh, ko_sd,
                 INTERLEAVED, BLOCK_HK, BLOCK_HALF)  # fmt: skip
