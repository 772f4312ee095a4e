"""Relative position methods: attention that sees how far apart two tokens are.

Three ways of putting the offset ``j - i`` between a query ``i`` and a key ``j`` into
attention, each as small pure functions:

- Shaw et al. (2018): learned vectors ``A^K`` and ``A^V`` for every clipped offset, added
  to the keys and values inside attention.
- T5 (Raffel et al. 2020): a learned scalar per head for each *bucket* of offsets, added to
  the scores; buckets are exact for small offsets and logarithmic for large ones.
- ALiBi (Press et al. 2021): no learned parameters, a penalty ``-slope * distance`` added to
  the scores, with one geometric slope per head.

Score biases are ``[H, T, T]``: head, query position, key position.
"""

from __future__ import annotations

import math

import torch

from posenc._validate import check_bool, check_int, check_same_dtype, check_tensor, same_device

__all__ = [
    "alibi_bias",
    "alibi_slopes",
    "shaw_attention",
    "shaw_relative_indices",
    "t5_bias",
    "t5_bucket",
]


def shaw_relative_indices(num_positions: int, max_distance: int) -> torch.Tensor:
    """Row ``i``, column ``j``: the clipped offset ``clip(j - i, -c, c) + c`` in ``0 .. 2c``.

    Offsets beyond ``c = max_distance`` share the vector of the largest one, so a table of
    ``2c + 1`` vectors serves sequences of any length.

    Args:
        num_positions: ``T``.
        max_distance: the clipping distance ``c`` (at least 0).

    Returns:
        int64 ``[T, T]``.

    Raises:
        TypeError, ValueError: if an argument is not an int or is out of range.

    Example:
        >>> shaw_relative_indices(4, 1)
        tensor([[1, 2, 2, 2],
                [0, 1, 2, 2],
                [0, 0, 1, 2],
                [0, 0, 0, 1]])
    """
    check_int("num_positions", num_positions, minimum=1)
    check_int("max_distance", max_distance, minimum=0)
    pos = torch.arange(num_positions)
    offset = pos[None, :] - pos[:, None]  # [T, T], j - i
    return offset.clamp(-max_distance, max_distance) + max_distance


@same_device
def shaw_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, a_k: torch.Tensor, a_v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Self-attention with Shaw et al.'s relative position vectors.

    ``e_ij = q_i . (k_j + A^K_(j-i)) / sqrt(D)``, ``alpha = softmax_j(e)``,
    ``z_i = sum_j alpha_ij (v_j + A^V_(j-i))``, offsets clipped at ``c = (len(a_k) - 1) / 2``.

    Args:
        q, k, v: ``[..., T, D]``.
        a_k, a_v: tables ``[2c + 1, D]``; row ``c + d`` is the vector of offset ``d``.

    Returns:
        ``(z [..., T, D], weights [..., T, T])``.

    Raises:
        TypeError: if an input is not a floating tensor, or they differ in dtype.
        ValueError: if shapes disagree or a table has an even number of rows.

    Example:
        >>> x = torch.randn(5, 4)
        >>> z, w = shaw_attention(x, x, x, torch.zeros(3, 4), torch.zeros(3, 4))
        >>> z.shape, bool(torch.allclose(w.sum(-1), torch.ones(5)))
        (torch.Size([5, 4]), True)
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, min_dim=2)
    for name, t in (("a_k", a_k), ("a_v", a_v)):
        check_tensor(name, t, min_dim=2)
        if t.dim() != 2 or t.shape[0] % 2 == 0:
            raise ValueError(
                f"{name} must be [2c + 1, D] (an odd number of rows), got {tuple(t.shape)}"
            )
    check_same_dtype(q=q, k=k, v=v, a_k=a_k, a_v=a_v)
    if not (q.shape[-1] == k.shape[-1] == a_k.shape[-1]) or v.shape[-1] != a_v.shape[-1]:
        raise ValueError(
            f"feature sizes must agree: q {q.shape[-1]}, k {k.shape[-1]}, a_k {a_k.shape[-1]}, "
            f"v {v.shape[-1]}, a_v {a_v.shape[-1]}"
        )
    if a_k.shape[0] != a_v.shape[0]:
        raise ValueError(
            f"a_k and a_v must have the same rows, got {a_k.shape[0]} and {a_v.shape[0]}"
        )
    if not (q.shape[-2] == k.shape[-2] == v.shape[-2]):
        raise ValueError(
            f"q, k, v must have the same T, got {q.shape[-2]}, {k.shape[-2]}, {v.shape[-2]}"
        )
    t, dim = q.shape[-2], q.shape[-1]
    idx = shaw_relative_indices(t, (a_k.shape[0] - 1) // 2).to(q.device)  # [T, T]
    rel_k, rel_v = a_k[idx], a_v[idx]  # [T, T, D]
    scores = (q @ k.mT + torch.einsum("...id,ijd->...ij", q, rel_k)) / math.sqrt(dim)  # [..., T, T]
    weights = scores.softmax(dim=-1)
    z = weights @ v + torch.einsum("...ij,ijd->...id", weights, rel_v)
    return z, weights


def t5_bucket(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's bucket for each offset ``j - i``: exact near 0, logarithmic further out.

    With ``bidirectional``, half the buckets are for keys after the query. Within a
    direction, the first half of the buckets hold offsets ``0, 1, 2, ...`` one each; the rest
    are spaced on a log scale that would reach ``max_distance`` at the last bucket, but as
    bucket numbers are rounded down the last bucket starts earlier: with the defaults every
    offset of 91 or more (in one direction) shares it.

    Args:
        relative_position: integer offsets ``j - i``, any shape.
        bidirectional: separate buckets for positive offsets (encoder) or not (decoder,
            where positive offsets are treated as 0).
        num_buckets: buckets in all (even when bidirectional).
        max_distance: the offset at which the log scale would reach the last bucket
            (every offset from ``max_distance`` on is in it; with rounding down, from
            earlier on too).

    Returns:
        int64 buckets, same shape, in ``0 .. num_buckets - 1``.

    Raises:
        TypeError: if offsets are not integers.
        ValueError: if ``num_buckets`` is too small or ``max_distance`` too short.

    Example:
        >>> t5_bucket(torch.tensor([-200, -20, -3, 0, 3, 20, 200]))
        tensor([15, 10,  3,  0, 19, 26, 31])
    """
    if not isinstance(relative_position, torch.Tensor):
        raise TypeError(
            f"relative_position must be an integer tensor, got {type(relative_position).__name__}"
        )
    if (
        relative_position.is_floating_point()
        or relative_position.is_complex()
        or relative_position.dtype == torch.bool
    ):
        raise TypeError(
            f"relative_position must hold integers, got dtype {relative_position.dtype}"
        )
    check_bool("bidirectional", bidirectional)
    check_int("num_buckets", num_buckets, minimum=4 if bidirectional else 2)
    if bidirectional and num_buckets % 2:
        raise ValueError(f"num_buckets must be even when bidirectional, got {num_buckets}")
    n = num_buckets // 2 if bidirectional else num_buckets
    max_exact = n // 2
    check_int("max_distance", max_distance, minimum=max_exact + 1)
    rel = relative_position.to(torch.int64)
    buckets = torch.zeros_like(rel)
    if bidirectional:
        buckets = buckets + (rel > 0).to(torch.int64) * n
        distance = rel.abs()
    else:
        distance = -rel.clamp(max=0)
    is_small = distance < max_exact
    # log-spaced buckets for max_exact <= distance < max_distance, then one shared bucket
    log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(
        max_distance / max_exact
    )
    large = max_exact + (log_ratio * (n - max_exact)).to(torch.int64)
    large = large.clamp(max=n - 1)
    return buckets + torch.where(is_small, distance, large)


def t5_bias(
    num_positions: int,
    table: torch.Tensor,
    *,
    bidirectional: bool = True,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's additive score bias: ``bias[h, i, j] = table[bucket(j - i), h]``.

    Args:
        num_positions: ``T``.
        table: learned scalars ``[num_buckets, H]``.
        bidirectional, max_distance: as :func:`t5_bucket`.

    Returns:
        ``[H, T, T]`` in ``table``'s dtype.

    Raises:
        TypeError, ValueError: for a bad ``num_positions`` or ``table``.

    Example:
        >>> t5_bias(3, torch.arange(32.0)[:, None])[0]
        tensor([[ 0., 17., 18.],
                [ 1.,  0., 17.],
                [ 2.,  1.,  0.]])
    """
    check_int("num_positions", num_positions, minimum=1)
    check_tensor("table", table, min_dim=2)
    check_bool("bidirectional", bidirectional)
    if table.dim() != 2:
        raise ValueError(f"table must be [num_buckets, H], got {tuple(table.shape)}")
    pos = torch.arange(num_positions, device=table.device)
    rel = pos[None, :] - pos[:, None]  # [T, T], j - i
    buckets = t5_bucket(
        rel, bidirectional=bidirectional, num_buckets=table.shape[0], max_distance=max_distance
    )
    return table[buckets].permute(2, 0, 1)  # [H, T, T]


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's head slopes, fixed: for ``H`` a power of two, ``2**(-8h/H)``, ``h = 1 .. H``.

    For ``H`` a power of two they are a geometric sequence from ``2**(-8/H)`` down to
    ``1/256``: for 8 heads ``1/2, 1/4, ..., 1/256``. Otherwise the slopes of the largest
    power of two below ``H`` are followed by every other slope of twice that many heads, as
    in the paper's code (for 6 heads ``1/4, 1/16, 1/64, 1/256`` then ``1/2, 1/8``: neither
    geometric nor decreasing).

    Args:
        num_heads: ``H``.

    Returns:
        float64 ``[H]`` (decreasing when ``H`` is a power of two).

    Raises:
        TypeError, ValueError: if ``num_heads`` is not a positive int.

    Example:
        >>> (1 / alibi_slopes(8)).tolist()
        [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]
    """
    check_int("num_heads", num_heads, minimum=1)

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (h + 1) for h in range(n)]

    closest = 2 ** math.floor(math.log2(num_heads))
    slopes = power_of_two(closest)
    if closest < num_heads:
        slopes += power_of_two(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float64)


def _check_slopes(slopes: object) -> torch.Tensor:
    """ALiBi slopes: a non-empty, finite, 1-D floating tensor ``[H]``."""
    check_tensor("slopes", slopes, min_dim=1)
    if slopes.dim() != 1 or slopes.numel() == 0:
        raise ValueError(f"slopes must be [H] (1-D, H >= 1), got shape {tuple(slopes.shape)}")
    if not bool(torch.isfinite(slopes).all()):
        raise ValueError(f"slopes must be finite, got {slopes.tolist()}")
    return slopes


def alibi_bias(num_positions: int, slopes: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
    """ALiBi's additive score bias: ``-slope_h * |i - j|``.

    Args:
        num_positions: ``T``.
        slopes: ``[H]``, e.g. :func:`alibi_slopes`.
        causal: put ``-inf`` on keys after the query (a decoder's mask).

    Returns:
        ``[H, T, T]`` in ``slopes``' dtype.

    Raises:
        TypeError, ValueError: for a bad ``num_positions`` or ``slopes`` (not ``[H]``, empty
            or not finite) or a ``causal`` that is not a bool.

    Example:
        >>> alibi_bias(3, torch.tensor([0.5]))[0]
        tensor([[ 0.0000,    -inf,    -inf],
                [-0.5000,  0.0000,    -inf],
                [-1.0000, -0.5000,  0.0000]])
    """
    check_int("num_positions", num_positions, minimum=1)
    _check_slopes(slopes)
    check_bool("causal", causal)
    pos = torch.arange(num_positions, device=slopes.device)
    # minus the distance, formed in integers so that the diagonal is 0, not -0
    offset = -(pos[:, None] - pos[None, :]).abs()  # [T, T]
    bias = slopes[:, None, None] * offset.to(slopes.dtype)  # [H, T, T]
    if causal:
        future = pos[None, :] > pos[:, None]
        bias = bias.masked_fill(future, float("-inf"))
    return bias
