"""The checks behind every claim the book settles, one function of no arguments each.

Each check recomputes a claim of a source from scratch and returns a :class:`Finding`: a
verdict (:data:`HOLDS`, :data:`CAVEAT` or :data:`WRONG`) and the measured facts behind it,
as a short machine-independent string: each yes or no beside the value it was drawn from,
``< 1e-12 (allclose: yes)``, with differences under a floor of round-off printed as
``< floor`` (:func:`posenc.book.checks.difference`). A bare yes or no remains where it is
the fact itself, or where the value would depend on the trained model's weights, which
differ between the Hub's copy and the offline one.

:data:`posenc.book.claims.CLAIMS` ties each check to its claim, its source and the chapter
section that discusses it; the chapter, chapter 17 and the "Claims checked" appendix all
run this one function.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch

from posenc.attention import DemoAttention, permute_positions, self_attention
from posenc.book.checks import difference, largest_difference
from posenc.encodings import (
    binary_encoding,
    integer_encoding,
    length_normalized_encoding,
    sinusoidal_encoding,
    sinusoidal_frequencies,
)
from posenc.rope import apply_rope, rope_inv_freq, rope_matrix
from posenc.rotation import block_diagonal, rotation_matrix, sinusoidal_shift_matrix
from posenc.scaling import ntk_aware_inv_freq, position_interpolation_inv_freq

__all__ = ["CAVEAT", "HOLDS", "VERDICTS", "WRONG", "Finding"]


HOLDS = "holds"


CAVEAT = "holds with a caveat"


WRONG = "wrong"


VERDICTS = (HOLDS, CAVEAT, WRONG)
"""The three verdicts, from best to worst."""


@dataclass(frozen=True)
class Finding:
    """What a claim's check found.

    Attributes:
        verdict: one of :data:`VERDICTS`.
        evidence: the measured facts behind it, as a short machine-independent string.
    """

    verdict: str
    evidence: str


def _verdict(holds: bool, caveat: bool = False) -> str:
    if not holds:
        return WRONG
    return CAVEAT if caveat else HOLDS


def _yes(flag: object) -> str:
    return "yes" if bool(flag) else "no"


def _gap(gap: float, flag: object, name: str = "allclose", below: float = 1e-12) -> str:
    """``"< 1e-12 (allclose: yes)"``: a measured difference, then the verdict drawn from it.

    A difference under ``below`` (round-off, which changes from machine to machine) prints
    as ``< below``, so that the text is the same on every machine.

    Example:
        >>> _gap(3e-16, True), _gap(0.0213, False, below=1e-6), _gap(2.0, True, "moves")
        ('< 1e-12 (allclose: yes)', '0.02 (allclose: no)', '2 (moves: yes)')
    """
    return f"{difference(gap, below=below)} ({name}: {_yes(flag)})"


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _check_equivariance() -> Finding:
    gen = _gen()
    x = torch.randn(6, 16, generator=gen, dtype=torch.float64)  # [T, D]
    w = torch.randn(3, 16, 16, generator=gen, dtype=torch.float64) / 4
    out = self_attention(x @ w[0], x @ w[1], x @ w[2])
    agree = 0
    for _ in range(20):
        perm = torch.randperm(6, generator=gen)
        xp = permute_positions(x, perm)
        out_p = self_attention(xp @ w[0], xp @ w[1], xp @ w[2])
        agree += bool(torch.allclose(out_p, permute_positions(out, perm)))
    return Finding(_verdict(agree == 20), f"Attention(PX) == P Attention(X) for {agree} of 20")


def _check_equal_outputs() -> Finding:
    x = torch.randn(1, 6, 64, generator=_gen())  # [B, T, E], float32 as in the source
    x[0, 5] = x[0, 2]  # the same token at positions 2 and 5
    layer = DemoAttention(64, num_heads=4, std=0.1, seed=0)
    with torch.no_grad():
        out, _ = layer(x)
        masked, _ = layer(x, causal=True)
    close = torch.allclose(out[0, 2], out[0, 5], atol=1e-6)
    causal_close = torch.allclose(masked[0, 2], masked[0, 5], atol=1e-6)
    gap, causal_gap = (largest_difference(o[0, 2], o[0, 5]) for o in (out, masked))
    # Equal only up to float32 rounding (whether the rows are bitwise equal depends on the
    # machine's kernels), and only without a causal mask: with it the second token sees more.
    return Finding(
        _verdict(close, caveat=not causal_close),
        f"outputs: largest difference {_gap(gap, close, below=1e-6)}; with a causal mask: "
        f"{_gap(causal_gap, causal_close, below=1e-6)}",
    )


def _check_integer_swamps() -> Finding:
    emb = 0.02 * torch.randn(6, 2048, generator=_gen(), dtype=torch.float64)  # [T, E]
    pos = integer_encoding(list(range(6)), 2048).double()  # [T, E]
    ratio = (pos[1].norm() / emb.norm(dim=-1).max()).item()
    ones = torch.ones(2048, dtype=torch.float64)
    cos = torch.nn.functional.cosine_similarity(emb[1:] + pos[1:], ones[None], dim=-1)
    aligned = bool((cos > 0.99).all())
    return Finding(
        _verdict(ratio > 10 and aligned),
        f"|PE(1)| / |e| {ratio:.0f} (over 10: {_yes(ratio > 10)}); sums' least cosine with "
        f"(1, ..., 1) {cos.min().item():.4f} (over 0.99: {_yes(aligned)})",
    )


def _check_length_normalised() -> Finding:
    a = length_normalized_encoding([5], 4, 10)
    b = length_normalized_encoding([5], 4, 10_000)
    moves = not torch.equal(a, b)
    moved = largest_difference(a, b)
    shared = torch.equal(
        length_normalized_encoding([1], 4, 2), length_normalized_encoding([50], 4, 100)
    )
    return Finding(
        _verdict(moves),
        f"between N = 10 and 10000 position 5 moves by {_gap(moved, moves, 'moves', 0.0)}; "
        f"1 of 2 and 50 of 100 share a vector: {_yes(shared)}",
    )


def _check_binary_252() -> Finding:
    written = format(252, "08b")
    lsb_first = binary_encoding([252], 8)[0].int().tolist()  # feature j = bit j
    value = sum(bit << j for j, bit in enumerate(lsb_first))
    return Finding(
        _verdict(written == "11111100" and value == 252),
        f"252 = {written} (MSB first); features 0..7 = {''.join(map(str, lsb_first))}",
    )


def _smallest_period(values: torch.Tensor) -> int:
    n = values.numel()
    for shift in range(1, n):
        if torch.equal(values[shift:], values[:-shift]):
            return shift
    return n


def _check_msb_cycle() -> Finding:
    n = 8
    codes = binary_encoding(list(range(4 * 2**n)), n + 2)[:, :n]  # [1024, 8], p mod 256
    msb = codes[:, n - 1]
    flips = (torch.nonzero(msb[1:] != msb[:-1]).flatten() + 1).tolist()
    gaps = {b - a for a, b in itertools.pairwise(flips)}
    period = _smallest_period(msb)
    flips_as_claimed = gaps == {2 ** (n - 1)}
    return Finding(
        _verdict(flips_as_claimed, caveat=period != 2 ** (n - 1)),
        f"8 bits: the MSB flips every {min(gaps)} positions, repeats every {period}",
    )


def _check_exponent_range() -> Finding:
    dim = 512
    exponents = 2 * torch.arange(dim // 2, dtype=torch.float64) / dim
    last = exponents[-1].item()
    return Finding(
        _verdict(math.isclose(last, dim / 2 - 1)),
        f"D = {dim}: 2i/D runs from 0 to {last:.4f} = (D-2)/D, not to D/2 - 1 = {dim // 2 - 1}",
    )


def _check_log_space() -> Finding:
    counts = {}
    for dtype, base in [(torch.float32, 5e5), (torch.float16, 1e4), (torch.float16, 5e5)]:
        exponents = 2 * torch.arange(64, dtype=dtype) / 128
        powers = torch.tensor(base, dtype=dtype) ** exponents  # base^(2i/D), D = 128
        counts[(dtype, base)] = int(torch.isinf(powers).sum())
    f32, f16_small, f16_large = counts.values()
    # The claim names the base 10000: it holds only if that base overflows somewhere.
    return Finding(
        _verdict(f16_small > 0),
        f"base^(2i/D) at inf, D = 128: float16 base 1e4 {f16_small} of 64, float32 base 5e5 "
        f"{f32}, float16 base 5e5 {f16_large}",
    )


def _check_low_dims_slow() -> Finding:
    dim = 64
    pe = sinusoidal_encoding(100, dim).double()  # [T, D]
    # a sign change is a step across zero; sin(0) = 0 to a positive value is none
    flips = (pe[1:] * pe[:-1] < 0).sum(0)  # sign changes per feature over 100 positions
    first, last = int(flips[0]), int(flips[dim - 2])
    freqs = sinusoidal_frequencies(dim)  # [D/2]
    slowing = bool((freqs.diff() < 0).all())
    return Finding(
        _verdict(first < last),
        f"D = 64, positions 0..99: feature 0 changes sign {first} times, feature 62 "
        f"{'never' if last == 0 else f'{last} times'}; frequencies fall from "
        f"{freqs[0].item():.3g} to {freqs[-1].item():.1e} (at every index: {_yes(slowing)})",
    )


def _check_sine_alone() -> Finding:
    # the point: sine alone confuses a with pi - a, which the cosine tells apart
    a = torch.linspace(0.1, 1.4, 14, dtype=torch.float64)
    confused = torch.allclose(a.sin(), (math.pi - a).sin())
    sines = largest_difference(a.sin(), (math.pi - a).sin())
    cosines = (a.cos() - (math.pi - a).cos()).abs().min().item()
    told_apart = cosines > 0.3
    # the example: integer positions, none of which shares a sine with another exactly
    p = torch.arange(101, dtype=torch.float64)
    s, c = p.sin(), p.cos()
    gap_sin = ((s[:, None] - s[None, :]).abs() + torch.eye(101, dtype=torch.float64)).min()
    both = torch.stack([s, c], dim=-1)
    gap_pair = (torch.cdist(both, both) + 2 * torch.eye(101, dtype=torch.float64)).min()
    return Finding(
        _verdict(confused and told_apart, caveat=bool(gap_sin > 0)),
        f"|sin(a) - sin(pi - a)| {difference(sines, below=1e-12)}, |cos(a) - cos(pi - a)| "
        f"{math.floor(cosines * 100) / 100:.2f} or more (cos tells them apart: "
        f"{_yes(confused and told_apart)}); integer "
        f"positions 0..100 share no sine exactly, the closest two differ by "
        f"{gap_sin.item():.1g}; as (sin, cos) pairs the closest two are {gap_pair.item():.3g} apart",
    )


def _check_key_rotation_typo() -> Finding:
    gen = _gen(3)
    q, k = torch.randn(2, 1, 8, generator=gen, dtype=torch.float64)

    def score(m, n, key_at):
        return (apply_rope(q, [m]) @ apply_rope(k, [key_at(m, n)]).T).item()

    pairs = [(0, 5), (7, 12), (3, 3), (40, 2)]
    written = [score(m, n, lambda m, n: m) for m, n in pairs]
    as_written = {round(s, 9) for s in written}
    as_meant = [score(m, n, lambda m, n: n) for m, n in pairs]
    offset_only = math.isclose(as_meant[0], as_meant[1], rel_tol=1e-9)
    relative = offset_only and as_meant[2] != as_meant[3]
    spread = max(written) - min(written)
    same_offset, other_offset = (abs(as_meant[i] - as_meant[i + 1]) for i in (0, 2))
    # as written, the key turns with the query: the formula would carry no position at all,
    # while the key as meant gives scores that follow the offset
    return Finding(
        _verdict(not (len(as_written) == 1 and relative)),
        f"key rotated by R(m) as written: scores at 4 (m, n) span "
        f"{_gap(spread, len(as_written) == 1, 'all the same')}; by R(n): apart by "
        f"{difference(same_offset, below=1e-12)} at offsets 5 and 5, at 0 and -38 by "
        f"{difference(other_offset, below=1e-12)} (follows n - m: {_yes(relative)})",
    )


def _check_cyclical() -> Finding:
    # |PE(p + k) - PE(p)|^2 = sum_i (2 - 2 cos(k w_i)): the distance depends on the offset only
    w = sinusoidal_frequencies(64)  # [D/2], float64
    k = torch.arange(1, 100_001, dtype=torch.float64)
    dist = torch.sqrt((2 - 2 * torch.cos(k[:, None] * w[None, :])).sum(-1))  # [K]
    nearest = int(k[dist.argmin()])
    one, two = _spread("sinusoidal", "copy", 1), _spread("sinusoidal", "copy", 2)
    return Finding(
        _verdict(bool(dist.min() < 1e-3)),
        f"D = 64: the closest two positions within 100,000 of each other are {nearest} apart, "
        f"their encodings at distance {dist.min().item():.2f} (shared, under 1e-3: "
        f"{_yes(bool(dist.min() < 1e-3))}); yet a model trained with it copies {one} at its "
        f"training length and {two} at twice it",
    )


def _check_longest_wavelength() -> Finding:
    claimed = 2 * math.pi * 10000
    shares = [2 * math.pi / sinusoidal_frequencies(d)[-1].item() / claimed for d in (128, 512)]
    exact = all(math.isclose(s, 1.0) for s in shares)
    near = all(0.8 < s <= 1.0 for s in shares)
    return Finding(
        _verdict(near, caveat=not exact),
        f"longest wavelength / (2 pi 10000): D = 128 {shares[0]:.3f}, D = 512 {shares[1]:.3f}",
    )


def _check_linear_offset() -> Finding:
    table = sinusoidal_encoding(256, 64).double()  # [T, D]
    worst = 0.0
    for k in (1, 5, 37, -20):
        shift = sinusoidal_shift_matrix(k, 64)  # [D, D]
        src = table[max(0, -k) : 256 - max(0, k)]
        dst = table[max(0, k) : 256 - max(0, -k)]
        worst = max(worst, (src @ shift.T - dst).abs().max().item())
    return Finding(
        _verdict(worst < 1e-6),
        f"PE(p+k) = M_k PE(p) for k = 1, 5, 37, -20: largest difference "
        f"{_gap(worst, worst < 1e-6, 'under 1e-6', below=1e-6)}",
    )


def _source_shift_blocks(angles: torch.Tensor) -> torch.Tensor:
    """The source's block ``[[cos a, sin a], [-sin a, cos a]]`` for every angle, ``[..., 2, 2]``."""
    c, s = torch.cos(angles), torch.sin(angles)
    return torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2)


def _check_shift_matrix() -> Finding:
    dim, k = 32, 7
    table = sinusoidal_encoding(128, dim).double()  # [T, D], pairs (sin, cos)
    omega = sinusoidal_frequencies(dim)  # [D/2]
    shift = block_diagonal(_source_shift_blocks(omega * k))  # [D, D]
    fits = torch.allclose(table[:-k] @ shift.T, table[k:], atol=1e-6)
    misfit = largest_difference(table[:-k] @ shift.T, table[k:])
    clockwise = torch.allclose(_source_shift_blocks(omega * k), rotation_matrix(-omega * k))
    turn = largest_difference(_source_shift_blocks(omega * k), rotation_matrix(-omega * k))
    return Finding(
        _verdict(fits),
        f"maps PE(p) to PE(p+7) for every p: largest difference {_gap(misfit, fits, below=1e-6)}; "
        f"against the clockwise R(-w k): {_gap(turn, clockwise)}",
    )


def _check_rotation_index() -> Finding:
    omega = torch.tensor(0.3, dtype=torch.float64)
    m = torch.arange(16, dtype=torch.float64)[:, None]  # [M, 1]
    n = torch.arange(16, dtype=torch.float64)[None, :]  # [1, N]
    product = rotation_matrix(m * omega).mT @ rotation_matrix(n * omega)  # [M, N, 2, 2]
    n_minus_m = torch.allclose(product, rotation_matrix((n - m) * omega))
    gap = largest_difference(product, rotation_matrix((n - m) * omega))
    fits = torch.isclose(product, rotation_matrix((m - n) * omega)).flatten(-2).all(-1)
    only_diagonal = torch.equal(fits, torch.eye(16, dtype=torch.bool))
    return Finding(
        _verdict(bool(fits.all())),
        f"R_m^T R_n against R_(n-m): {_gap(gap, n_minus_m)}; = R_(m-n) at "
        f"{int(fits.sum())} of {fits.numel()} (m, n), those with m = n: {_yes(only_diagonal)}",
    )


def _check_shaw_clipping() -> Finding:
    from posenc.relative import shaw_relative_indices

    idx = shaw_relative_indices(50, 2)  # [T, T] table rows
    rows = idx.unique().numel()
    offsets = torch.arange(50)[None, :] - torch.arange(50)[:, None]
    toeplitz = torch.equal(idx, offsets.clamp(-2, 2) + 2)
    matches = int((idx == offsets.clamp(-2, 2) + 2).sum())
    return Finding(
        _verdict(rows == 5 and toeplitz),
        f"T = 50, c = 2: {rows} table rows serve every pair; row = clip(j - i, -c, c) + c for "
        f"{matches} of {idx.numel()} pairs",
    )


def _check_t5_buckets() -> Finding:
    from posenc.relative import t5_bucket

    offsets = torch.arange(-1000, 1001)
    buckets = t5_bucket(offsets, bidirectional=True, num_buckets=32, max_distance=128)
    last = buckets[-1].item()
    first_shared = int(offsets[buckets == last].min())
    used = buckets.unique().numel()
    # the claim: offsets past 128 share one bucket (each direction), nearer ones grow apart
    shared = bool((buckets[offsets >= 128] == last).all())
    shared = shared and bool((buckets[offsets <= -128] == buckets[0]).all())
    near = buckets[(offsets >= 0) & (offsets < 8)].unique().numel() == 8  # one bucket each
    return Finding(
        _verdict(shared and near and first_shared <= 128, caveat=first_shared < 128 or used < 32),
        f"encoder: all offsets from {first_shared} on share the last bucket; "
        f"{used} of 32 buckets used",
    )


def _check_concept_note_sinusoidal() -> Finding:
    dim, length = 64, 100
    # the note's recipe, float32 throughout: frequencies as exp(-2i ln(10000) / d)
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * -(math.log(10000.0) / dim))
    angles = torch.arange(length, dtype=torch.float32)[:, None] * div  # [T, D/2]
    table = torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(-2)  # [T, D]
    error = (table - sinusoidal_encoding(length, dim)).abs().max().item()
    return Finding(
        _verdict(error < 1e-4),
        f"D = 64, positions 0..99: largest difference from PE "
        f"{_gap(error, error < 1e-4, 'under 1e-4', below=1e-5)}",
    )


def _check_shaw_tensors() -> Finding:
    from posenc.relative import shaw_attention

    gen, length, dim, clip = _gen(), 7, 8, 2
    q, k, v = torch.randn(3, length, dim, generator=gen, dtype=torch.float64)  # [T, D] each
    t_k, t_v = torch.randn(2, 2 * clip + 1, dim, generator=gen, dtype=torch.float64)
    offsets = torch.arange(length)[None, :] - torch.arange(length)[:, None]  # [T, T]: j - i
    rows = offsets.clamp(-clip, clip) + clip  # the table row of each pair, as Shaw et al.
    a_k, a_v = t_k[rows], t_v[rows]  # the note's L x L x d tensors, [T, T, D]
    scores = (q[:, None, :] * (k[None, :, :] + a_k)).sum(-1) / dim**0.5  # [T, T]
    z = (scores.softmax(-1)[..., None] * (v[None, :, :] + a_v)).sum(-2)  # [T, D]
    shaw = shaw_attention(q, k, v, t_k, t_v)[0]
    same = torch.allclose(z, shaw)
    distinct = a_k.reshape(-1, dim).unique(dim=0).shape[0]
    return Finding(
        _verdict(same),
        f"softmax(Q (K + A^K)^T / sqrt(d)) (V + A^V) row by row against Shaw attention: "
        f"{_gap(largest_difference(z, shaw), same)}; "
        f"distinct vectors in A^K: {distinct} of {length * length}",
    )


def _check_alibi_slopes() -> Finding:
    from posenc.relative import alibi_slopes

    slopes = alibi_slopes(8)  # [H]
    expected = 2.0 ** (-8.0 * torch.arange(1, 9, dtype=torch.float64) / 8)
    same = torch.allclose(slopes.double(), expected)
    six = alibi_slopes(6).double()  # H not a power of two, as the paper's code makes them
    ratios = six[1:] / six[:-1]  # [H - 1]
    geometric = torch.allclose(ratios, ratios[0].expand(5))
    return Finding(
        _verdict(same, caveat=not geometric),
        f"8 heads against 1/2, 1/4, ..., 1/256: {_gap(largest_difference(slopes, expected), same)}"
        f"; 6 heads (the paper's code): ratios of neighbours {ratios.min().item():.3g} to "
        f"{ratios.max().item():.3g} (geometric: {_yes(geometric)})",
    )


def _check_translation_invariance() -> Finding:
    q, k = torch.randn(2, 8, 32, generator=_gen(), dtype=torch.float64)  # [T, D] each
    scores = [
        apply_rope(q, list(range(s, s + 8))) @ apply_rope(k, list(range(s, s + 8))).T
        for s in (0, 100, 10_000)
    ]  # [T, T] each
    same = all(torch.allclose(s, scores[0]) for s in scores)
    # angles of positions near 10,000 carry float64 round-off near 1e-12 into the scores
    shifted = max(largest_difference(s, scores[0]) for s in scores)
    rotated = not torch.allclose(scores[0], q @ k.T)  # positions entered the scores
    return Finding(
        _verdict(same and rotated),
        f"RoPE scores of 8 tokens at 0, 100 and 10000 onwards: largest difference "
        f"{_gap(shifted, same, below=1e-9)}; from the scores without RoPE: "
        f"{_gap(largest_difference(scores[0], q @ k.T), rotated, 'differ')}",
    )


def _check_additive_pollutes() -> Finding:
    gen = _gen()
    dim, head = 256, 32
    e_dog, e_cat = torch.randn(2, dim, generator=gen, dtype=torch.float64)
    w_q, w_k = torch.randn(2, dim, head, generator=gen, dtype=torch.float64) / dim**0.5
    pe = sinusoidal_encoding(70, dim).double() * (e_dog.norm() / (dim / 2) ** 0.5)
    scores = torch.stack(
        [((e_dog + pe[m]) @ w_q) @ ((e_cat + pe[m + 3]) @ w_k) for m in range(64)]
    )  # [M]
    content = ((e_dog @ w_q) @ (e_cat @ w_k)).abs()
    spread = ((scores.max() - scores.min()) / content).item()
    moves = spread > 0.1
    return Finding(
        _verdict(moves),
        f"same two words 3 apart at 64 places: the score's range / the words' own score "
        f"{spread:.2g} (over 0.1: {_yes(moves)})",
    )


def _check_norm_carries_meaning() -> Finding:
    gen = _gen(4)
    q = torch.randn(64, generator=gen, dtype=torch.float64)  # [D]
    keys = torch.randn(1000, 64, generator=gen, dtype=torch.float64)  # [K, D]
    keys = 2 * keys / keys.norm(dim=-1, keepdim=True)  # every key of length 2
    cos = (keys @ q) / (2 * q.norm())  # [K]: each score over its bound |q| |k|
    told_apart = (cos.max() - cos.min()).item() > 0.5  # one length, very different scores
    turned = apply_rope(q.expand(32, -1), list(range(32)))  # [T, D]: q at positions 0..31
    kept = torch.allclose(turned.norm(dim=-1), q.norm().expand(32))
    stretch = largest_difference(turned.norm(dim=-1), q.norm().expand(32))
    cos_turned = (turned @ q) / q.norm() ** 2  # [T]
    # the claim: the length holds the meaning, so rotation keeps it; a length is one number,
    # and keys of one length are told apart by direction, which is what RoPE turns
    return Finding(
        _verdict(kept and not told_apart),
        f"1000 keys of one length against one query: scores from {cos.min():.2f} to "
        f"{cos.max():.2f} times |q||k|; RoPE changes the length by "
        f"{_gap(stretch, kept, 'kept')}, and turns the "
        f"direction: the query's cosine with itself at position 0 falls to "
        f"{cos_turned.min():.2f} within 31 positions",
    )


def _rope_grid(q: torch.Tensor, k: torch.Tensor, positions: list[int]) -> torch.Tensor:
    n = len(positions)
    return apply_rope(q.expand(n, -1), positions) @ apply_rope(k.expand(n, -1), positions).T


def _check_relative_identity() -> Finding:
    q, k = torch.randn(2, 64, generator=_gen(), dtype=torch.float64)
    grid = list(range(-20, 21))  # chapter 9's grid
    scores = _rope_grid(q, k, grid)  # [N, N]: S[m, n] = <R_m q, R_n k>
    offsets = [n - m for m in grid for n in grid]
    relative = (q * apply_rope(k.expand(len(offsets), -1), offsets)).sum(-1)
    holds = torch.allclose(scores.flatten(), relative)
    varies = not torch.allclose(relative, relative[0].expand_as(relative))
    span = (relative.max() - relative.min()).item()
    n = len(grid)
    return Finding(
        _verdict(holds and varies),
        f"<R_m q, R_n k> = <q, R_(n-m) k> on {n} x {n} positions: largest difference "
        f"{_gap(largest_difference(scores.flatten(), relative), holds)}; scores span "
        f"{_gap(span, varies, 'change with n - m')}",
    )


def _check_matrix_vs_elementwise() -> Finding:
    from posenc.book.rope_views import elementwise_rope  # the post's formula, written out

    dim = 64
    theta = rope_inv_freq(dim)  # [D/2]
    positions = [0, 1, 2, 3, 7, 10, 31, 100, 1000, 4096, 131071, -1, -2, -5, -100, -9999]
    x = torch.randn(dim, generator=_gen(), dtype=torch.float64)
    agree = []
    for p in positions:
        source_matrix = block_diagonal(_source_shift_blocks(p * theta))  # [D, D]
        if torch.allclose(source_matrix @ x, elementwise_rope(x[None], [p])[0]):
            agree.append(p)
    # both versions are relative: the matrix form's score grid is the other's transposed
    q, k = torch.randn(2, dim, generator=_gen(1), dtype=torch.float64)
    mats = torch.stack([block_diagonal(_source_shift_blocks(p * theta)) for p in positions])
    clockwise = (mats @ q) @ (mats @ k).T  # [N, N]
    transposed = _rope_grid(q, k, positions).T
    mirrored = torch.allclose(clockwise, transposed)
    return Finding(
        _verdict(len(agree) == len(positions)),
        f"matrix form = elementwise form at {len(agree)} of {len(positions)} positions "
        f"(p = {', '.join(map(str, agree))}); "
        f"score grids, one against the other transposed: "
        f"{_gap(largest_difference(clockwise, transposed), mirrored, 'mirrored')}",
    )


def _check_dog_cat() -> Finding:
    from posenc.data import embeddings

    tok = embeddings.load()
    found = []
    for text in ("Dog attacks the Cat", "Once upon a time, a Dog attacks the Cat"):
        ids = tok.encode(text)
        words = [piece.strip() for piece in tok.pieces(ids)]
        dog, cat = words.index("Dog"), words.index("Cat")
        found.append((ids[dog], dog, cat))
    (id_a, dog_a, cat_a), (id_b, dog_b, cat_b) = found
    q, k = torch.randn(2, 64, generator=_gen(), dtype=torch.float64)
    score_a = (apply_rope(q[None], [dog_a]) * apply_rope(k[None], [cat_a])).sum()
    score_b = (apply_rope(q[None], [dog_b]) * apply_rope(k[None], [cat_b])).sum()
    same_score = torch.isclose(score_a, score_b).item()
    one_further = (apply_rope(q[None], [dog_a]) * apply_rope(k[None], [cat_a + 1])).sum()
    relative = not torch.isclose(score_a, one_further).item()  # position is in the score
    moved = (score_a - one_further).abs().item()
    same_token = id_a == id_b
    return Finding(
        _verdict(same_score and relative and cat_a - dog_a == cat_b - dog_b, caveat=not same_token),
        f"offset 3 in both: {_yes(cat_a - dog_a == cat_b - dog_b == 3)}; RoPE scores of equal "
        f"vectors differ by {_gap((score_a - score_b).abs().item(), same_score, 'equal')}, at "
        f"offset 4 by {_gap(moved, relative, 'different')}; 'Dog' the same token in both: "
        f"{_yes(same_token)}",
    )


def _check_dogs_differ() -> Finding:
    from posenc.book.rope_views import rope_attention

    x = torch.randn(1, 6, 64, generator=_gen())  # [B, T, E]
    x[0, 5] = x[0, 2]  # two equal tokens
    layer = DemoAttention(64, num_heads=4, std=0.1, seed=0)
    with torch.no_grad():
        plain, _ = rope_attention(layer, x, rope=False)
        rotary, _ = rope_attention(layer, x)
    before = torch.allclose(plain[0, 2], plain[0, 5], atol=1e-6)
    after = torch.allclose(rotary[0, 2], rotary[0, 5], atol=1e-6)
    gap, rotary_gap = (largest_difference(o[0, 2], o[0, 5]) for o in (plain, rotary))
    return Finding(
        _verdict(before and not after),
        f"equal tokens' outputs, largest difference without RoPE "
        f"{_gap(gap, before, below=1e-6)}, with RoPE {_gap(rotary_gap, after, below=1e-6)}",
    )


def _check_rotated_query_form() -> Finding:
    q, k = torch.randn(2, 32, generator=_gen(), dtype=torch.float64)
    grid = list(range(-8, 9))
    scores = _rope_grid(q, k, grid)  # [N, N], <R_m q, R_n k>
    pairs = [(m, n) for m in grid for n in grid]

    def rotated_q(offset_of) -> torch.Tensor:
        offsets = [offset_of(m, n) for m, n in pairs]
        return (apply_rope(q.expand(len(pairs), -1), offsets) * k).sum(-1).reshape(scores.shape)

    claimed = rotated_q(lambda m, n: n - m)  # <R_(n-m) q, k>
    right = rotated_q(lambda m, n: m - n)  # <R_(m-n) q, k>
    fits = torch.isclose(scores, claimed)
    return Finding(
        _verdict(bool(fits.all())),
        f"<R_m q, R_n k> = <R_(n-m) q, k> at {int(fits.sum())} of {fits.numel()} (m, n); "
        f"against <R_(m-n) q, k>: "
        f"{_gap(largest_difference(scores, right), torch.allclose(scores, right))}",
    )


def _check_concept_note_code() -> Finding:
    from posenc.book.llama_rope import concept_note_rope

    x = torch.randn(1, 8, 2, 16, generator=_gen(), dtype=torch.float64)  # [B, T, H, D]
    note = concept_note_rope(x)
    bhtd = x.transpose(1, 2)  # [B, H, T, D]
    halves = apply_rope(bhtd, layout="half").transpose(1, 2)
    pairs = apply_rope(bhtd, layout="interleaved").transpose(1, 2)
    half, inter = torch.allclose(note, halves), torch.allclose(note, pairs)
    return Finding(
        _verdict(half or inter, caveat=not inter),
        f"the code against RoPE on pairs (x_2i, x_2i+1): "
        f"{_gap(largest_difference(note, pairs), inter)}; "
        f"on pairs (x_i, x_i+D/2): {_gap(largest_difference(note, halves), half)}",
    )


def _check_axes_apart() -> Finding:
    from posenc.book.rope_nd_views import (
        grid_positions,
        mispaired_rope_2d,
        offset_check,
        pairwise_scores,
    )

    q, k = torch.randn(2, 32, generator=_gen(), dtype=torch.float64)
    cells = grid_positions((6, 6))  # [N, 2]
    spread = pairwise_scores(q, k, cells).std().item()
    moves = spread > 1e-6  # positions enter the scores
    axial_check = offset_check(q, k, cells)
    mixed_check = offset_check(q, k, cells, mispaired_rope_2d)
    axial, mixed = axial_check.holds(1e-12), mixed_check.holds(1e-6)
    return Finding(
        _verdict(axial and moves and not mixed),
        f"6 x 6 grid, relative spread of the scores at one offset: axial "
        f"{_gap(axial_check.relative_spread, axial, 'offset only')}, axes mixed in one "
        f"rotation {_gap(mixed_check.relative_spread, mixed, 'offset only', below=1e-6)}; "
        f"axial scores' std {_gap(spread, moves, 'move', below=1e-6)}",
    )


def _check_mrope_text() -> Finding:
    from posenc.book.rope_nd_views import mrope

    x = torch.randn(10, 128, generator=_gen(), dtype=torch.float64)  # [T, D]
    text = torch.arange(10)[:, None].expand(10, 3)  # t = h = w = position
    # the reference: RoPE's dense matrix at each position (built from its entries, not with
    # the rotation routine M-RoPE shares with apply_rope)
    dense = torch.stack([rope_matrix(p, 128, layout="half") @ x[p] for p in range(10)])
    rotated = mrope(x, text, [16, 24, 24])
    same = torch.allclose(rotated, dense)
    return Finding(
        _verdict(same),
        f"M-RoPE on text against 1-D RoPE: {_gap(largest_difference(rotated, dense), same)}",
    )


def _check_rope_blog_periods() -> Finding:
    periods = {d: 2 * math.pi / rope_inv_freq(d) for d in (64, 128)}
    first = periods[64][0].item()
    last = [periods[d][-1].item() for d in (64, 128)]
    return Finding(
        _verdict(6 < first < 7 and all(1e4 <= p < 1e5 for p in last)),
        f"base 10000: pair 0 every {first:.2f} tokens, last pair every {last[0]:.0f} (D = 64), "
        f"{last[1]:.0f} (D = 128)",
    )


def _check_cosine_form() -> Finding:
    q, k = torch.randn(2, 64, generator=_gen(), dtype=torch.float64)
    qc, kc = torch.complex(q[0::2], q[1::2]), torch.complex(k[0::2], k[1::2])  # [D/2]
    phase = torch.angle(qc * kc.conj())
    m = torch.arange(0, 2000, 37)
    theta = rope_inv_freq(64)
    rotated = apply_rope(q.expand(len(m), -1), m)  # query m positions after the key
    score = (rotated * k).sum(-1)  # [M]
    general = (qc.abs() * kc.abs() * torch.cos(m[:, None] * theta + phase)).sum(-1)
    in_phase = (qc.abs() * kc.abs() * torch.cos(m[:, None] * theta)).sum(-1)
    matches_general = torch.allclose(score, general)
    matches_claim = torch.allclose(score, in_phase)
    return Finding(
        _verdict(matches_general, caveat=not matches_claim),
        f"score against sum |q_i||k_i| cos(m theta_i + phi_i): "
        f"{_gap(largest_difference(score, general), matches_general)}; "
        f"with every phi_i = 0: {_gap(largest_difference(score, in_phase), matches_claim)}",
    )


def _check_decay() -> Finding:
    from posenc.book import frequencies

    gen = _gen()
    q, k = torch.randn(2, 200, 64, generator=gen, dtype=torch.float64)  # [N, D]
    dist = torch.arange(0, 513)
    scores = frequencies.scores_at_distances(q, k, dist)  # [N, M]
    bound = frequencies.decay_bound(q, k, dist)  # [N, M]
    reach = (scores.abs() / bound).max().item()  # the bound is positive
    bound_holds = bool((scores.abs() <= bound).all())
    shrink = (bound.mean(0)[500] / bound.mean(0)[0]).item()
    bound_decays = shrink < 0.5
    far_near = (scores[:, -100:].abs().mean() / scores[:, :11].abs().mean()).item()
    aligned = frequencies.scores_at_distances(q, q, dist).mean(0)  # k = q
    aligned_ratio = (aligned[500] / aligned[0]).item()
    aligned_decays = aligned_ratio < 0.6
    random_flat = 0.8 < far_near < 1.25
    return Finding(
        _verdict(bound_holds and bound_decays and aligned_decays, caveat=random_flat),
        f"largest |score| / bound {reach:.2f} (bound holds: {_yes(bound_holds)}); "
        f"bound(500) / bound(0) {shrink:.2f} (halves: {_yes(bound_decays)}); q = k: "
        f"score(500) / score(0) {aligned_ratio:.2f} (decays: {_yes(aligned_decays)}); random "
        f"q, k: far / near |score| {far_near:.2f} (decay: {_yes(not random_flat)})",
    )


def _check_no_forced_decay() -> Finding:
    from posenc.book import frequencies

    q = torch.randn(64, generator=_gen(), dtype=torch.float64)
    k = apply_rope(q[None], [500])[0]  # k = R_500 q
    scores = frequencies.scores_at_distances(q, k, torch.arange(0, 1000))
    peak = int(scores.argmax())
    return Finding(_verdict(peak == 500), f"k = R_500 q: the score peaks at distance {peak}")


def _check_unique_positions() -> Finding:
    from posenc.book import frequencies

    theta = rope_inv_freq(64)
    longest = (2 * math.pi / theta).max().item()
    neighbours = frequencies.encoding_distance([1], theta).item()
    at_claim = frequencies.encoding_distance([62832], theta).item()
    _, closest = frequencies.nearest_return(100_000, theta, min_distance=1000)
    # the claim holds if position p + 62,832 comes back to p's encoding: no further from it
    # than a neighbour is
    return Finding(
        _verdict(at_claim <= neighbours),
        f"D = 64: longest period {longest:.0f}; |E(p + 62832) - E(p)| = {at_claim:.2f} "
        f"(neighbours {neighbours:.2f}); closest return at offsets 1,000 to 100,000: "
        f"{closest:.2f}",
    )


def _unseen_pairs(inv_freq: torch.Tensor, trained: torch.Tensor, reach: int, length: int) -> int:
    """Pairs whose angle at distance ``reach`` exceeds the largest angle seen in training."""
    turned = (length - 1) * trained >= 2 * math.pi  # met every angle in training
    seen = (length - 1) * trained
    return int(((reach * inv_freq > seen * (1 + 1e-9)) & ~turned).sum())


def _check_position_interpolation() -> Finding:
    length, theta = 8192, rope_inv_freq(128, 500000.0)
    interp = position_interpolation_inv_freq(theta, 8.0)
    unseen = _unseen_pairs(interp, theta, 8 * (length - 1), length)
    return Finding(_verdict(unseen == 0), f"8 times the context: pairs at unseen angles {unseen}")


def _check_ntk_factor() -> Finding:
    length, theta = 8192, rope_inv_freq(128, 500000.0)
    ntk = ntk_aware_inv_freq(128, 500000.0, 8.0)
    unseen = _unseen_pairs(ntk, theta, 8 * (length - 1), length)
    larger = ntk_aware_inv_freq(128, 500000.0, 32.0)
    unseen_larger = _unseen_pairs(larger, theta, 8 * (length - 1), length)
    return Finding(
        _verdict(unseen > 0 and unseen_larger < unseen),
        f"extension 8: pairs at unseen angles with factor 8 {unseen}, with factor 32 "
        f"{unseen_larger}",
    )


# --- chapter 15: a trained model -------------------------------------------------------------


def _smol_text(n: int):
    """SmolLM2-135M (from the Hub or offline) and the first ``n`` tokens of the Zen of Python."""
    from posenc.book import trained
    from posenc.data import smol

    model = smol.load()
    return model.model, model.encode(trained.zen_text())[:n]


def _check_shift_in_a_model() -> Finding:
    from posenc.book import trained

    model, ids = _smol_text(32)
    drift = trained.shift_drift(
        model, ids, [1_000_000, 10_000], ["exact (fp64)", "fp32 angles", "bf16 angles"]
    )
    exact = max(r["max_logit"] for r in drift["exact (fp64)"]) < 1e-4
    fp32 = drift["fp32 angles"][0]
    fp32_small = fp32["max_logit"] < 0.01 and fp32["top1"] == 1.0
    bf16_breaks = drift["bf16 angles"][1]["top1"] < 0.75
    return Finding(
        _verdict(exact and fp32_small, caveat=bf16_breaks),
        f"shift 1,000,000: float64 angles keep the logits: {_yes(exact)}; float32 angles "
        f"move them under 1% and keep every prediction: {_yes(fp32_small)}; bfloat16 angles "
        f"change over a quarter of the predictions at 10,000: {_yes(bf16_breaks)}",
    )


def _check_p_rope_in_a_model() -> Finding:
    from posenc.book import long_text, trained
    from posenc.decoder import forward

    model, ids = _smol_text(96)
    stats = trained.head_statistics(model, ids)
    quarter = stats["q_share"].shape[-1] // 4
    q = stats["q_share"].mean(dim=(0, 1))  # [D/2]: over layers and heads
    k = stats["k_share"].mean(dim=(0, 1))
    slow_heavier = bool(
        q[-quarter:].sum() > q[:quarter].sum() and k[-quarter:].sum() > k[:quarter].sum()
    )
    base = trained.perplexity(forward(model, ids), ids)
    fast_costly = trained.frequency_removal(model, ids, [0.25])["fastest"][0] > 3 * base
    previous = stats["previous"]  # [L, H]
    heads = previous > 0.5  # the previous-token heads
    without = trained.previous_token_ablation(model, ids, 0.25)["fastest removed"]
    heads_lose = bool(heads.any() and (without[heads] < 0.25 * previous[heads]).all())
    return _p_rope_finding(
        long_text.stored(),
        {"slow heavier": slow_heavier, "fast costly": fast_costly, "heads lose": heads_lose},
    )


def _p_rope_finding(run: dict, short: dict[str, bool]) -> Finding:
    """The p-RoPE claim's verdict from a long-text run (:func:`posenc.book.long_text.run`)
    and facts measured on a short text (``short``: ``"slow heavier"``, ``"fast costly"``,
    ``"heads lose"``, as :func:`_check_p_rope_in_a_model` measures them).

    Removing the slowest quarter's rotation "costs little" where it stays within 5% of plain
    RoPE's perplexity over the trained length, no block of 512 tokens more than 10% worse.

    Example:
        >>> from posenc.book import long_text
        >>> facts = {"slow heavier": True, "fast costly": True, "heads lose": True}
        >>> _p_rope_finding(long_text.stored(), facts).verdict in VERDICTS
        True
    """
    from posenc.book import long_text

    trained = run["trained"]
    cost = {
        n: long_text.perplexity(run, "p-RoPE", 0, n) / long_text.perplexity(run, "none", 0, n)
        for n in (min(2048, trained), trained)
    }
    blocks = long_text.ratios(run, "p-RoPE", 0, trained, against="none")
    cheap = cost[trained] < 1.05 and blocks.max().item() < 1.10
    fast = short["fast costly"] and short["heads lose"]
    costs = ", ".join(f"x{value:.2f} over the first {n:,}" for n, value in cost.items())
    return Finding(
        _verdict(cheap and fast),
        f"{run['tokens']:,} tokens of text (stored run), the slowest quarter unrotated: "
        f"perplexity {costs} (blocks of 512 tokens x{blocks.min().item():.2f} to "
        f"x{blocks.max().item():.2f}); 96 tokens: the slowest quarter holds more of the query "
        f"and key norm than the fastest: {_yes(short['slow heavier'])}; without the fastest "
        f"quarter's rotation perplexity over 3x: {_yes(short['fast costly'])}, and the "
        f"previous-token heads keep under a quarter of their attention to the previous token: "
        f"{_yes(short['heads lose'])}",
    )


def _check_generalisation_in_a_model() -> Finding:
    from posenc.book import long_text

    return _generalisation_finding(long_text.stored())


def _generalisation_finding(run: dict) -> Finding:
    """The verdict on "RoPE generalises excellently to longer sequences" from a long-text
    run (:func:`posenc.book.long_text.run`).

    Past the trained length each run is compared, block by block, with plain RoPE in windows
    of the trained length on the same tokens. Plain RoPE generalises if its perplexity there
    stays within 10% of the windows'; a recipe "holds up" if it does so too and costs under
    10% inside the trained length.

    Example:
        >>> from posenc.book import long_text
        >>> _generalisation_finding(long_text.stored()).verdict in VERDICTS
        True
    """
    from posenc.book import long_text

    trained, tokens = run["trained"], run["tokens"]
    window = long_text.perplexity(run, "window", trained, tokens)
    past, held = {}, []
    for name in ("none", *long_text.FACTOR_RUNS):
        past[name] = long_text.perplexity(run, name, trained, tokens) / window
        inside = long_text.perplexity(run, name, 0, trained) / long_text.perplexity(
            run, "none", 0, trained
        )
        if name != "none" and past[name] < 1.10 and inside < 1.10:
            held.append(name)
    plain_holds = past["none"] < 1.10
    blocks = long_text.ratios(run, "none", trained, tokens)
    ratios = ", ".join(f"{name} x{value:.2f}" for name, value in past.items() if name != "none")
    return Finding(
        _verdict(plain_holds, caveat=not held),
        f"{tokens:,} tokens of text (stored run), tokens {trained:,} to {tokens:,} against "
        f"plain RoPE in windows of {trained:,}: plain RoPE x{past['none']:.2f} (blocks of 512 "
        f"x{blocks.min().item():.2f} to x{blocks.max().item():.0f}); at factor "
        f"{run['factor']:g}: {ratios}; within 10% there and inside the trained length, "
        f"without training: {', '.join(held) if held else 'none'}",
    )


# --- chapter 16: models trained with each encoding (the stored grid) -------------------------


def _grid() -> dict:
    """The stored grid of chapter 16: every encoding trained on copying and recall."""
    from posenc import train

    return train.stored()


def _spread(encoding: str, task: str, multiple: int):
    from posenc.book.training_views import spread

    return spread(_grid(), encoding, task, multiple)


def _check_absolute_beyond() -> Finding:
    # each absolute encoding, on each task it learned (0.9 or more at 1x): at 2x it keeps
    # less than 60% of that in every seed
    kept, parts = [], []
    for encoding in ("learned", "sinusoidal"):
        for task in ("copy", "recall"):
            one, two = _spread(encoding, task, 1), _spread(encoding, task, 2)
            if one.low >= 0.9:
                kept.append(two.high < 0.6 * one.low)
                parts.append(f"{encoding} {task} {one.low:.2f}+ -> {two}")
    return Finding(
        _verdict(bool(kept) and all(kept)),
        "answers right at 1x -> 2x the training length, over 3 seeds: " + "; ".join(parts),
    )


def _check_relative_better() -> Finding:
    relative, absolute = ("alibi", "t5", "rope"), ("learned", "sinusoidal")
    margin = min(
        min(_spread(r, t, 2).low for r in relative) - max(_spread(a, t, 2).high for a in absolute)
        for t in ("copy", "recall")
    )  # the relative methods' worst seed over the absolute ones' best, on either task
    at2 = margin > 0
    rope4, learned4 = _spread("rope", "copy", 4), _spread("learned", "copy", 4)
    rope_behind = rope4.high < learned4.high
    return Finding(
        _verdict(at2, caveat=rope_behind),
        f"at 2x, both tasks, worst relative seed minus best absolute one {margin:+.2f} "
        f"(above: {_yes(at2)}); copying at 4x: RoPE {rope4}, learned {learned4}, ALiBi "
        f"{_spread('alibi', 'copy', 4)}",
    )


def _check_rope_generalises() -> Finding:
    rope = {t: _spread("rope", t, 4) for t in ("copy", "recall")}
    alibi = {t: _spread("alibi", t, 4) for t in ("copy", "recall")}
    falls = all(rope[t].high < 0.6 and rope[t].high < alibi[t].low for t in rope)
    return Finding(
        _verdict(not falls),
        f"answers right at 4x the training length: RoPE copy {rope['copy']}, recall "
        f"{rope['recall']}; ALiBi copy {alibi['copy']}, recall {alibi['recall']}",
    )


def _check_sinusoidal_extrapolates() -> Finding:
    sinusoidal, learned = _spread("sinusoidal", "copy", 2), _spread("learned", "copy", 2)
    margin = sinusoidal.low - learned.high  # sinusoidal's worst seed over learned's best
    better = margin > 0
    return Finding(
        _verdict(better),
        f"copying at 2x the training length: sinusoidal {sinusoidal}, learned {learned}; "
        f"sinusoidal's worst seed minus learned's best {margin:+.2f} (above: {_yes(better)})",
    )


def _check_rope_boost() -> Finding:
    from posenc.book.training_views import loss_at

    grid = _grid()
    rope = min(_spread("rope", t, 1).low for t in ("copy", "recall"))
    additive = max(_spread("learned", t, 1).low for t in ("copy", "recall"))
    loss = loss_at(grid, "rope", "copy", 500)
    others = min(
        loss_at(grid, e, "copy", 500).low for e in ("nope", "learned", "sinusoidal", "alibi", "t5")
    )
    return Finding(
        _verdict(rope >= 0.99 and loss.high < others, caveat=additive >= 0.95),
        f"at 1x: RoPE {rope:.2f} or more, the learned table {additive:.2f} or more on its "
        f"best task; copying loss at step 500: RoPE {loss.text(3)}, the other families "
        f"{others:.3f} or more",
    )
