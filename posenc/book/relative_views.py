"""Chapter 7's views of relative position: offsets, biases, tables, figures and the shift test.

The relative methods themselves live in :mod:`posenc.relative`, where every position is
``0 .. T-1``. To ask what happens when a whole sequence moves, this module computes the same
things from any integer ``positions``:

- :func:`offset_matrix`, :func:`clipped_offset_indices`: the offsets ``j - i`` and Shaw's
  clipped table rows, for given positions;
- :func:`clipped_bias`, :func:`t5_bias_at`, :func:`alibi_bias_at`: additive score biases
  ``[H, T, T]`` at given positions (a clipped per-offset table, T5's buckets, ALiBi);
- :func:`shaw_attention_at` and :func:`biased_attention`: attention with those ingredients;
- :func:`bucket_ranges` and :func:`bucket_table`: which offsets share a T5 bucket;
- :func:`t5_figure`, :func:`alibi_figure`: heat maps of the biases;
- :func:`make_shift_setup`, :func:`attention_at`, :func:`shift_change`,
  :func:`shift_changes`, :func:`format_shift_table`, :func:`shift_figure`: the shift
  experiment, which moves every position by ``s`` and measures how much attention changes.

Shapes: ``H`` heads, ``T`` positions, ``D`` features per head, ``E = H * D`` model width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib as mpl
import torch

from posenc._validate import (
    check_bool,
    check_dict,
    check_int,
    check_int_sequence,
    check_positions,
    check_real,
    check_sequence,
    check_str_sequence,
    check_tensor,
    same_device,
)
from posenc.display import plots
from posenc.display.table import Table
from posenc.encodings import sinusoidal_encoding
from posenc.relative import _check_slopes, alibi_slopes, t5_bucket
from posenc.rope import apply_rope

__all__ = [
    "SCHEMES",
    "ShiftSetup",
    "alibi_bias_at",
    "alibi_figure",
    "attention_at",
    "biased_attention",
    "bucket_ranges",
    "bucket_table",
    "clipped_bias",
    "clipped_offset_indices",
    "format_shift_table",
    "make_shift_setup",
    "offset_matrix",
    "shaw_attention_at",
    "shift_change",
    "shift_changes",
    "shift_figure",
    "t5_bias_at",
    "t5_figure",
]

SCHEMES = ("Shaw", "clipped bias", "T5", "ALiBi", "RoPE", "sinusoidal", "learned")
"""The schemes of the shift experiment: five relative ones, then two absolute additive ones."""

_ABSOLUTE = ("sinusoidal", "learned")


def offset_matrix(positions) -> torch.Tensor:
    """The offset from every query to every key: ``out[i, j] = positions[j] - positions[i]``.

    Args:
        positions: ``T`` integer positions (a list, an int tensor; negative ones allowed).

    Returns:
        int64 ``[T, T]``, on the device of ``positions`` when it is a tensor.

    Raises:
        TypeError: if ``positions`` are not integers.
        ValueError: if ``positions`` is empty or not 1-D.

    Example:
        >>> offset_matrix([5, 6, 8])
        tensor([[ 0,  1,  3],
                [-1,  0,  2],
                [-3, -2,  0]])
    """
    p = check_positions("positions", positions, nonnegative=False)
    return p[None, :] - p[:, None]  # [T, T], j - i


def clipped_offset_indices(positions, max_distance: int) -> torch.Tensor:
    """Shaw's table row for every (query, key) pair: ``clip(j - i, -c, c) + c``.

    For ``positions = 0 .. T-1`` this is :func:`posenc.relative.shaw_relative_indices`.

    Args:
        positions: ``T`` integer positions.
        max_distance: the clipping distance ``c`` (at least 0).

    Returns:
        int64 ``[T, T]`` in ``0 .. 2c``.

    Raises:
        TypeError, ValueError: for bad positions or a bad ``max_distance``.

    Example:
        >>> clipped_offset_indices([10, 11, 12, 13], 1)
        tensor([[1, 2, 2, 2],
                [0, 1, 2, 2],
                [0, 0, 1, 2],
                [0, 0, 0, 1]])
    """
    check_int("max_distance", max_distance, minimum=0)
    return offset_matrix(positions).clamp(-max_distance, max_distance) + max_distance


def _check_table(name: str, table: object, *, odd_rows: bool = False) -> torch.Tensor:
    check_tensor(name, table, min_dim=2)
    if table.dim() != 2:
        raise ValueError(f"{name} must be 2-D [rows, H], got shape {tuple(table.shape)}")
    if odd_rows and table.shape[0] % 2 == 0:
        raise ValueError(
            f"{name} must have an odd number of rows 2c + 1, got {table.shape[0]} rows"
        )
    return table


def clipped_bias(positions, table: torch.Tensor) -> torch.Tensor:
    """A learned scalar per head and clipped offset, added to the scores.

    ``bias[h, i, j] = table[clip(j - i, -c, c) + c, h]`` with ``c = (rows - 1) / 2``: Shaw's
    clipping with one number per head instead of a vector, the relative bias table of the
    concept note. T5 (:func:`t5_bias_at`) is the same idea with buckets instead of clipping.

    Args:
        positions: ``T`` integer positions.
        table: ``[2c + 1, H]``; row ``c + d`` belongs to offset ``d``.

    Returns:
        ``[H, T, T]`` in ``table``'s dtype and device.

    Raises:
        TypeError: if ``table`` is not a floating tensor or positions are not integers.
        ValueError: if ``table`` is not 2-D with an odd number of rows.

    Example:
        >>> table = torch.tensor([[-2.0], [0.0], [2.0]])  # c = 1, one head
        >>> clipped_bias([0, 1, 2], table)[0]
        tensor([[ 0.,  2.,  2.],
                [-2.,  0.,  2.],
                [-2., -2.,  0.]])
    """
    _check_table("table", table, odd_rows=True)
    idx = clipped_offset_indices(positions, (table.shape[0] - 1) // 2).to(table.device)
    return table[idx].permute(2, 0, 1)  # [T, T, H] -> [H, T, T]


def t5_bias_at(
    positions, table: torch.Tensor, *, bidirectional: bool = True, max_distance: int = 128
) -> torch.Tensor:
    """T5's bias at given positions: ``bias[h, i, j] = table[bucket(p_j - p_i), h]``.

    For ``positions = 0 .. T-1`` this is :func:`posenc.relative.t5_bias`.

    Args:
        positions: ``T`` integer positions.
        table: ``[num_buckets, H]``.
        bidirectional, max_distance: as :func:`posenc.relative.t5_bucket`.

    Returns:
        ``[H, T, T]`` in ``table``'s dtype and device.

    Raises:
        TypeError, ValueError: for bad positions, table or bucket settings.

    Example:
        >>> t5_bias_at([7, 8, 9], torch.arange(32.0)[:, None])[0]
        tensor([[ 0., 17., 18.],
                [ 1.,  0., 17.],
                [ 2.,  1.,  0.]])
    """
    _check_table("table", table)
    buckets = t5_bucket(
        offset_matrix(positions),
        bidirectional=bidirectional,
        num_buckets=table.shape[0],
        max_distance=max_distance,
    ).to(table.device)  # [T, T]
    return table[buckets].permute(2, 0, 1)  # [H, T, T]


def alibi_bias_at(positions, slopes: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
    """ALiBi's bias at given positions: ``-slope_h * |p_i - p_j|``, ``-inf`` after the query.

    For ``positions = 0 .. T-1`` this is :func:`posenc.relative.alibi_bias`.

    Args:
        positions: ``T`` integer positions.
        slopes: ``[H]``.
        causal: mask keys at a later position than the query with ``-inf``.

    Returns:
        ``[H, T, T]`` in ``slopes``' dtype and device.

    Raises:
        TypeError, ValueError: for bad positions or slopes.

    Example:
        >>> alibi_bias_at([4, 5], torch.tensor([0.25]), causal=False)[0]
        tensor([[-0.0000, -0.2500],
                [-0.2500, -0.0000]])
    """
    check_tensor("slopes", slopes, min_dim=1)
    if slopes.dim() != 1 or slopes.numel() == 0:
        raise ValueError(f"slopes must be 1-D [H] with H >= 1, got shape {tuple(slopes.shape)}")
    _check_slopes(slopes)
    check_bool("causal", causal)
    offsets = offset_matrix(positions).to(slopes.device)  # [T, T]
    bias = -slopes[:, None, None] * offsets.abs().to(slopes.dtype)  # [H, T, T]
    if causal:
        bias = bias.masked_fill(offsets > 0, float("-inf"))
    return bias


def _check_qkv(q, k, v) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, min_dim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share D, got D={q.shape[-1]} and D={k.shape[-1]}")
    if not q.shape[-2] == k.shape[-2] == v.shape[-2]:
        raise ValueError(
            f"q, k, v must have the same T, got {q.shape[-2]}, {k.shape[-2]}, {v.shape[-2]}"
        )


@same_device
def biased_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with an additive score bias: ``softmax(q k^T / sqrt(D) + bias) v``.

    Args:
        q, k: ``[..., T, D]``.
        v: ``[..., T, D_v]``.
        bias: ``[..., T, T]`` broadcasting with the scores (e.g. ``[H, T, T]`` for
            ``q [H, T, D]``), or None for plain attention.

    Returns:
        ``(out [..., T, D_v], weights [..., T, T])``.

    Raises:
        TypeError: if an input is not a floating tensor.
        ValueError: if shapes disagree.

    Example:
        >>> x = torch.zeros(1, 2, 4)
        >>> _, w = biased_attention(x, x, x, torch.tensor([[[0.0, -math.inf]] * 2]))
        >>> w[0]
        tensor([[1., 0.],
                [1., 0.]])
    """
    _check_qkv(q, k, v)
    scores = q @ k.mT / math.sqrt(q.shape[-1])  # [..., T, T]
    if bias is not None:
        check_tensor("bias", bias, min_dim=2)
        if bias.shape[-2:] != scores.shape[-2:]:
            raise ValueError(
                f"bias must end in [T, T] = {tuple(scores.shape[-2:])}, got {tuple(bias.shape)}"
            )
        scores = scores + bias
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@same_device(copied=("positions",))
def shaw_attention_at(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    a_k: torch.Tensor,
    a_v: torch.Tensor,
    positions=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Shaw et al.'s attention at given positions.

    ``e_ij = q_i . (k_j + A^K[c_ij]) / sqrt(D)``, ``z_i = sum_j softmax_j(e)_ij (v_j +
    A^V[c_ij])`` with ``c_ij = clip(p_j - p_i, -c, c) + c``. With the default positions
    ``0 .. T-1`` this is :func:`posenc.relative.shaw_attention`.

    Args:
        q, k, v: ``[..., T, D]``.
        a_k, a_v: ``[2c + 1, D]``.
        positions: ``T`` integer positions (default ``0 .. T-1``).

    Returns:
        ``(z [..., T, D], weights [..., T, T])``.

    Raises:
        TypeError, ValueError: for bad tensors, tables or positions.

    Example:
        >>> x = torch.randn(4, 2, dtype=torch.float64)
        >>> a = torch.randn(3, 2, dtype=torch.float64)
        >>> z1, _ = shaw_attention_at(x, x, x, a, a, [0, 1, 2, 3])
        >>> z2, _ = shaw_attention_at(x, x, x, a, a, [50, 51, 52, 53])
        >>> torch.equal(z1, z2)
        True
    """
    _check_qkv(q, k, v)
    for name, t in (("a_k", a_k), ("a_v", a_v)):
        _check_table(name, t, odd_rows=True)
    if a_k.shape != a_v.shape or a_k.shape[-1] != q.shape[-1] or a_v.shape[-1] != v.shape[-1]:
        raise ValueError(
            f"a_k and a_v must both be [2c + 1, D] with D={q.shape[-1]}, "
            f"got {tuple(a_k.shape)} and {tuple(a_v.shape)}"
        )
    t = q.shape[-2]
    positions = list(range(t)) if positions is None else positions
    idx = clipped_offset_indices(positions, (a_k.shape[0] - 1) // 2).to(q.device)
    if idx.shape[0] != t:
        raise ValueError(f"positions must have T={t} entries, got {idx.shape[0]}")
    rel_k, rel_v = a_k[idx], a_v[idx]  # [T, T, D]
    scores = q @ k.mT + torch.einsum("...id,ijd->...ij", q, rel_k)  # [..., T, T]
    weights = (scores / math.sqrt(q.shape[-1])).softmax(dim=-1)
    z = weights @ v + torch.einsum("...ij,ijd->...id", weights, rel_v)
    return z, weights


# --- T5 buckets -------------------------------------------------------------------------------


def bucket_ranges(
    *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> list[dict]:
    """Which offsets ``j - i`` fall in each T5 bucket, found by bucketing every offset.

    Offsets are scanned out to ``4 * max_distance`` on each side; a bucket that still holds
    the farthest offset scanned is open-ended (every offset beyond also lands in it).

    Args:
        bidirectional, num_buckets, max_distance: as :func:`posenc.relative.t5_bucket`.

    Returns:
        One dict per bucket, in order: ``bucket``, ``lo`` and ``hi`` (the smallest and
        largest offset in it, None if the bucket is empty; ``lo`` is None and ``hi`` set when
        it runs to minus infinity, and the other way round for plus infinity), and ``count``
        (offsets in it, None when open-ended).

    Raises:
        TypeError, ValueError: for bad bucket settings (see ``t5_bucket``).
        RuntimeError: if a bucket's offsets are not one contiguous run (never for T5).

    Example:
        >>> [(r["bucket"], r["lo"], r["hi"]) for r in bucket_ranges()][:3]
        [(0, 0, 0), (1, -1, -1), (2, -2, -2)]
        >>> bucket_ranges()[16]["count"]  # no key after the query is at offset 0
        0
    """
    check_int("max_distance", max_distance, minimum=1)
    reach = 4 * max_distance
    offsets = torch.arange(-reach, reach + 1)
    buckets = t5_bucket(
        offsets, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    rows = []
    for b in range(num_buckets):
        inside = offsets[buckets == b]
        if inside.numel() == 0:
            rows.append({"bucket": b, "lo": None, "hi": None, "count": 0})
            continue
        lo, hi = int(inside.min()), int(inside.max())
        if inside.numel() != hi - lo + 1:
            raise RuntimeError(f"bucket {b} is not one run of offsets: {inside.tolist()}")
        open_low, open_high = lo == -reach, hi == reach
        rows.append(
            {
                "bucket": b,
                "lo": None if open_low else lo,
                "hi": None if open_high else hi,
                "count": None if (open_low or open_high) else hi - lo + 1,
            }
        )
    return rows


def _range_text(row: dict) -> str:
    lo, hi = row["lo"], row["hi"]
    if row["count"] == 0:
        return "none"
    if lo is None:
        return f"≤ {hi}"
    if hi is None:
        return f"≥ {lo}"
    if lo == hi:
        return f"{lo}"
    return f"{lo} to {hi}"


def bucket_table(rows: Sequence[dict], *, caption: str | None = None) -> Table:
    """A captioned table of :func:`bucket_ranges`: the offsets in each T5 bucket.

    With an even number of buckets ``n``, bucket ``b`` and bucket ``b + n/2`` share a row
    (for the encoder: a key before the query and its mirror image after it), so 32 buckets
    take 16 rows. A bucket that runs to infinity has the count ``∞``; an empty one
    holds ``none``.

    Args:
        rows: the output of :func:`bucket_ranges`.
        caption: the table's caption; by default one is written from ``rows``.

    Returns:
        A :class:`posenc.display.table.Table` (HTML in a notebook, aligned text when printed).

    Raises:
        TypeError: if ``caption`` is not a string.
        ValueError: if ``rows`` is empty or its buckets are not ``0 .. n-1`` in order.

    Example:
        >>> table = bucket_table(bucket_ranges(num_buckets=4, max_distance=4))
        >>> print(table)  # doctest: +NORMALIZE_WHITESPACE
        The offsets j - i that fall in each of 4 T5 buckets: bucket b (keys at or before
        the query) beside bucket b + 2 (keys after it); ∞: the bucket takes every offset
        farther out.
        bucket  offsets j - i  count  bucket  offsets j - i  count
             0  0                  1       2  none               0
             1  ≤ -1               ∞       3  ≥ 1                ∞
    """
    if isinstance(rows, (list, tuple)) and not rows:
        raise ValueError(f"rows must be bucket_ranges() output, got an empty {rows!r}")
    rows = check_sequence("rows", rows)
    if not all(isinstance(r, dict) and "bucket" in r for r in rows) or [
        r["bucket"] for r in rows
    ] != list(range(len(rows))):
        raise ValueError(
            f"rows must be bucket_ranges() output: buckets 0 .. n-1 in order, got {rows!r:.80}"
        )
    if caption is not None and not isinstance(caption, str):
        raise TypeError(f"caption must be a string or None, got {type(caption).__name__}")

    def cells(r: dict) -> list:
        count = "∞" if r["count"] is None else r["count"]
        return [r["bucket"], _range_text(r), count]

    n = len(rows)
    columns = ["bucket", "offsets j - i", "count"]
    farther = (
        "; ∞: the bucket takes every offset farther out"
        if any(r["count"] is None for r in rows)
        else ""
    )
    if n % 2:
        body = [cells(r) for r in rows]
        shown = f"The offsets j - i that fall in each of {n} T5 buckets{farther}."
    else:
        half = n // 2
        columns = columns * 2
        body = [cells(rows[b]) + cells(rows[b + half]) for b in range(half)]
        after = any(r["lo"] is not None and r["lo"] > 0 for r in rows[half:])
        sides = " (keys at or before the query)", " (keys after it)"
        shown = (
            f"The offsets j - i that fall in each of {n} T5 buckets: bucket b"
            f"{sides[0] if after else ''} beside bucket b + {half}"
            f"{sides[1] if after else ''}{farther}."
        )
    align = ["right", "left", "right"] * (len(columns) // 3)
    return Table(columns, body, caption=shown if caption is None else caption, align=align)


# --- figures ----------------------------------------------------------------------------------


def _matrix_panel(ax, matrix: torch.Tensor, title: str, label: str, **style) -> None:
    with mpl.rc_context(plots.STYLE):
        image = ax.imshow(matrix.detach().float().cpu().numpy(), **style)
        ax.grid(False)
        ax.set_xlabel("key position j")
        ax.set_ylabel("query position i")
        ax.set_title(title)
        ax.figure.colorbar(image, ax=ax, location="bottom", shrink=0.85, label=label)


def t5_figure(
    num_positions: int = 160,
    table: torch.Tensor | None = None,
    *,
    head: int = 0,
    max_distance: int = 128,
):
    """Two heat maps: T5's bucket of every (query, key) pair, and one head's bias.

    Args:
        num_positions: ``T`` (at least 2), e.g. beyond ``max_distance`` to see the last
            bucket fill the corners.
        table: ``[32, H]`` bias table (default: seeded ``N(0, 1)``, one head).
        head: which head's bias to draw.
        max_distance: as :func:`posenc.relative.t5_bucket`.

    Returns:
        The figure.

    Raises:
        TypeError, ValueError: for a bad size, table or head.

    Example:
        >>> fig = t5_figure(12)
        >>> len(fig.axes)  # two panels and their colour bars
        4
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    check_int("num_positions", num_positions, minimum=2)
    if table is None:
        table = torch.randn(32, 1, generator=torch.Generator().manual_seed(0))
    _check_table("table", table)
    check_int("head", head, minimum=0)
    if head >= table.shape[1]:
        raise ValueError(f"head must be below H={table.shape[1]}, got head={head}")
    positions = list(range(num_positions))
    buckets = t5_bucket(
        offset_matrix(positions), num_buckets=table.shape[0], max_distance=max_distance
    )
    bias = t5_bias_at(positions, table, max_distance=max_distance)[head]
    limit = float(bias.abs().max()) or 1.0
    fig, (ax_b, ax_v) = plots.figure(1, 2, height=4.9)
    _matrix_panel(ax_b, buckets, "bucket of j - i", "bucket", cmap=plots.SEQUENTIAL)
    _matrix_panel(
        ax_v,
        bias,
        f"bias of head {head + 1}",
        "bias (the head's table entry)",
        cmap=plots.DIVERGING,
        vmin=-limit,
        vmax=limit,
    )
    return fig


def alibi_figure(num_positions: int = 24, num_heads: int = 8, *, heads=(0, 3, 7)):
    """ALiBi's causal bias for a few heads, and every head's penalty against distance.

    Drawn as the factor ``exp(bias)`` that the bias puts on a key's softmax weight (1 at
    distance 0, 0 where a key is masked out), on one colour scale: a 2 x 2 grid of the
    ``[T, T]`` factors of up to three heads (masked keys left blank), then a panel with
    one row per head: its factor at each distance ``i - j``.

    Args:
        num_positions: ``T`` (at least 2).
        num_heads: ``H``; slopes from :func:`posenc.relative.alibi_slopes`.
        heads: up to three heads to draw as heat maps.

    Returns:
        The figure.

    Raises:
        TypeError, ValueError: for a bad size or head.

    Example:
        >>> fig = alibi_figure(8, 4, heads=(0, 3))
        >>> len(fig.axes)  # two heads, the penalty panel, the colour bar
        4
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    check_int("num_positions", num_positions, minimum=2)
    slopes = alibi_slopes(num_heads)  # [H]
    heads = check_int_sequence("heads", heads, minimum=0, min_length=0)
    if not 1 <= len(heads) <= 3:
        raise ValueError(f"heads must name 1 to 3 heads, got {heads}")
    for h in heads:
        if h >= num_heads:
            raise ValueError(f"heads entries must be below H={num_heads}, got {h}")
    factor = alibi_bias_at(list(range(num_positions)), slopes).exp()  # [H, T, T], 0 masked
    distance = torch.arange(num_positions, dtype=torch.float64)
    reach = (-slopes[:, None] * distance).exp()  # [H, T]: every head's factor at each distance
    rows = (len(heads) + 2) // 2
    fig, axes = plots.figure(rows, 2, height=3.0 * rows + 0.9, squeeze=False)
    axes = axes.ravel()
    scale = {"cmap": plots.SEQUENTIAL, "vmin": 0.0, "vmax": 1.0, "aspect": "auto"}
    with mpl.rc_context(plots.STYLE):
        for ax, h in zip(axes, heads, strict=False):
            shown = factor[h].masked_fill(factor[h] == 0, float("nan"))
            image = ax.imshow(shown.float().numpy(), **scale)
            ax.grid(False)
            ax.set_title(f"head {h + 1}: slope 1/{1 / float(slopes[h]):.3g}")
            ax.set_xlabel("key j")
            ax.set_ylabel("query i")
        ax = axes[len(heads)]
        ax.imshow(reach.float().numpy(), **scale)
        ax.grid(False)
        ax.set_yticks(range(num_heads), [str(h + 1) for h in range(num_heads)])
        ax.set_xlabel("distance i - j")
        ax.set_ylabel("head")
        ax.set_title("every head, by distance")
        for spare in axes[len(heads) + 1 :]:
            spare.remove()
        plots.colorbar_below(
            image, axes[: len(heads) + 1], label="exp(bias): factor on a key's softmax weight"
        )
    return fig


# --- the shift experiment ---------------------------------------------------------------------


@dataclass(frozen=True)
class ShiftSetup:
    """Everything the shift experiment needs, drawn once from a seed.

    Attributes:
        content: token vectors ``[T, E]`` (no position in them).
        w_q, w_k, w_v: projections ``[E, E]``, split into ``H`` heads of ``D`` features.
        num_heads: ``H``.
        a_k, a_v: Shaw's tables ``[2c + 1, D]``.
        clip_table: one scalar per head and clipped offset, ``[2c + 1, H]``.
        t5_table: ``[32, H]``.
        slopes: ALiBi's slopes ``[H]``.
        learned: a learned absolute table ``[max_positions, E]`` (random, as at
            initialisation, at the sinusoidal encoding's scale).
    """

    content: torch.Tensor
    w_q: torch.Tensor
    w_k: torch.Tensor
    w_v: torch.Tensor
    num_heads: int
    a_k: torch.Tensor
    a_v: torch.Tensor
    clip_table: torch.Tensor
    t5_table: torch.Tensor
    slopes: torch.Tensor
    learned: torch.Tensor


def make_shift_setup(
    num_positions: int = 8,
    *,
    num_heads: int = 4,
    head_dim: int = 16,
    max_distance: int = 3,
    max_positions: int = 512,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device=None,
) -> ShiftSetup:
    """Draw the inputs and parameters of the shift experiment from one seed (on the CPU).

    Content vectors have entries of variance 1/2, like the sinusoidal encoding's; the
    projections have variance ``1/E`` so queries and keys have entries of order 1.

    Args:
        num_positions: ``T``.
        num_heads: ``H``.
        head_dim: ``D`` (even, for RoPE).
        max_distance: Shaw's clipping distance ``c``.
        max_positions: rows of the learned absolute table.
        seed: seed of everything drawn.
        dtype: a floating dtype.
        device: where to put the tensors (default CPU).

    Returns:
        A :class:`ShiftSetup`.

    Raises:
        TypeError, ValueError: for bad sizes or dtype.

    Example:
        >>> s = make_shift_setup(5, num_heads=2, head_dim=4)
        >>> s.content.shape, s.w_q.shape, s.a_k.shape, s.t5_table.shape
        (torch.Size([5, 8]), torch.Size([8, 8]), torch.Size([7, 4]), torch.Size([32, 2]))
    """
    for name, value in (
        ("num_positions", num_positions),
        ("num_heads", num_heads),
        ("max_positions", max_positions),
    ):
        check_int(name, value, minimum=1)
    check_int("head_dim", head_dim, minimum=2)
    if head_dim % 2:
        raise ValueError(f"head_dim must be even (RoPE rotates pairs), got head_dim={head_dim}")
    check_int("max_distance", max_distance, minimum=0)
    check_int("seed", seed)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    gen = torch.Generator().manual_seed(seed)
    e = num_heads * head_dim
    rows = 2 * max_distance + 1

    def draw(*shape: int, std: float) -> torch.Tensor:
        t = torch.randn(*shape, generator=gen, dtype=torch.float64) * std
        return t.to(dtype=dtype, device=device)

    return ShiftSetup(
        content=draw(num_positions, e, std=0.5**0.5),
        w_q=draw(e, e, std=e**-0.5),
        w_k=draw(e, e, std=e**-0.5),
        w_v=draw(e, e, std=e**-0.5),
        num_heads=num_heads,
        a_k=draw(rows, head_dim, std=1.0),
        a_v=draw(rows, head_dim, std=1.0),
        clip_table=draw(rows, num_heads, std=1.0),
        t5_table=draw(32, num_heads, std=1.0),
        slopes=alibi_slopes(num_heads).to(dtype=dtype, device=device),
        learned=draw(max_positions, e, std=0.5**0.5),
    )


def _heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    t, e = x.shape
    return x.reshape(t, num_heads, e // num_heads).transpose(0, 1)  # [T, E] -> [H, T, D]


def attention_at(setup: ShiftSetup, scheme: str, positions) -> tuple[torch.Tensor, torch.Tensor]:
    """One multi-head attention layer with the position scheme ``scheme`` at ``positions``.

    Relative schemes leave the inputs alone and act inside attention: Shaw's vectors,
    a clipped bias table, T5's buckets, ALiBi (causal), RoPE on queries and keys.
    Absolute schemes add a position vector to every input before the projections:
    the sinusoidal encoding or the learned table's row.

    Args:
        setup: from :func:`make_shift_setup`.
        scheme: one of :data:`SCHEMES`.
        positions: ``T`` non-negative integer positions.

    Returns:
        ``(out [H, T, D], weights [H, T, T])``.

    Raises:
        TypeError, ValueError: for an unknown scheme or bad positions (beyond the learned
            table for ``"learned"``).

    Example:
        >>> s = make_shift_setup(4, num_heads=2, head_dim=4)
        >>> out, w = attention_at(s, "T5", [0, 1, 2, 3])
        >>> out.shape, w.shape
        (torch.Size([2, 4, 4]), torch.Size([2, 4, 4]))
    """
    if not isinstance(setup, ShiftSetup):
        raise TypeError(f"setup must be a ShiftSetup, got {type(setup).__name__}")
    p = check_positions("positions", positions)
    t, e = setup.content.shape
    if p.numel() != t:
        raise ValueError(f"positions must have T={t} entries, got {p.numel()}")
    x = setup.content  # [T, E]
    if scheme == "sinusoidal":
        x = x + sinusoidal_encoding(int(p.max()) + 1, e).to(x)[p.to(x.device)]
    elif scheme == "learned":
        if int(p.max()) >= setup.learned.shape[0]:
            raise ValueError(
                f"positions must be below the learned table's {setup.learned.shape[0]} rows, "
                f"got {int(p.max())}"
            )
        x = x + setup.learned[p.to(x.device)]
    elif scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    h = setup.num_heads
    q, k, v = (_heads(x @ w, h) for w in (setup.w_q, setup.w_k, setup.w_v))  # [H, T, D]
    if scheme == "Shaw":
        return shaw_attention_at(q, k, v, setup.a_k, setup.a_v, p)
    if scheme == "clipped bias":
        return biased_attention(q, k, v, clipped_bias(p, setup.clip_table))
    if scheme == "T5":
        return biased_attention(q, k, v, t5_bias_at(p, setup.t5_table))
    if scheme == "ALiBi":
        return biased_attention(q, k, v, alibi_bias_at(p, setup.slopes))
    if scheme == "RoPE":
        pd = p.to(q.device)
        return biased_attention(apply_rope(q, pd), apply_rope(k, pd), v)
    if scheme in _ABSOLUTE:
        return biased_attention(q, k, v)
    raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")


def shift_change(
    setup: ShiftSetup, scheme: str, shift: int, *, start: int = 0, what: str = "weights"
) -> float:
    """How much attention changes when every position moves by ``shift``.

    Runs :func:`attention_at` at ``start .. start + T - 1`` and at the same positions plus
    ``shift``, and returns the largest absolute difference of the attention weights (or of
    the outputs).

    Args:
        setup: from :func:`make_shift_setup`.
        scheme: one of :data:`SCHEMES`.
        shift: ``s`` (``start + s`` must be non-negative).
        start: the first position before the shift.
        what: ``"weights"`` (``[H, T, T]``, each in 0 .. 1) or ``"outputs"`` (``[H, T, D]``).

    Returns:
        The largest change (0.0 when nothing changed at all).

    Raises:
        TypeError, ValueError: for bad arguments.

    Example:
        >>> s = make_shift_setup(4, num_heads=2, head_dim=4)
        >>> shift_change(s, "ALiBi", 100), shift_change(s, "sinusoidal", 100) > 0.01
        (0.0, True)
    """
    if not isinstance(setup, ShiftSetup):
        raise TypeError(f"setup must be a ShiftSetup, got {type(setup).__name__}")
    check_int("shift", shift)
    check_int("start", start, minimum=0)
    if start + shift < 0:
        raise ValueError(f"start + shift must be non-negative, got {start} + {shift}")
    if what == "outputs":
        part = 0
    elif what == "weights":
        part = 1
    else:
        raise ValueError(f"what must be 'weights' or 'outputs', got {what!r}")
    t = setup.content.shape[0]
    before = attention_at(setup, scheme, list(range(start, start + t)))[part]
    after = attention_at(setup, scheme, list(range(start + shift, start + shift + t)))[part]
    return float((after - before).abs().max())


def shift_changes(
    setup: ShiftSetup,
    shifts: Sequence[int],
    schemes: Sequence[str] = SCHEMES,
    *,
    what: str = "weights",
) -> dict[str, list[float]]:
    """:func:`shift_change` for every scheme and shift.

    Args:
        setup: from :func:`make_shift_setup`.
        shifts: the shifts ``s`` to try.
        schemes: names from :data:`SCHEMES`.
        what: ``"weights"`` or ``"outputs"``, as :func:`shift_change`.

    Returns:
        ``{scheme: [change for each shift]}``.

    Raises:
        TypeError, ValueError: for bad arguments.

    Example:
        >>> s = make_shift_setup(4, num_heads=2, head_dim=4)
        >>> shift_changes(s, [1, 5], ["T5"])
        {'T5': [0.0, 0.0]}
    """
    shifts = check_int_sequence("shifts", shifts)
    schemes = check_str_sequence("schemes", schemes)
    for name in schemes:
        if name not in SCHEMES:
            raise ValueError(f"schemes must name schemes from {SCHEMES}, got {name!r}")
    return {name: [shift_change(setup, name, s, what=what) for s in shifts] for name in schemes}


def format_shift_table(
    weights: dict[str, list[float]],
    outputs: dict[str, list[float]] | None = None,
    *,
    tolerance: float = 1e-9,
) -> str:
    """A text table of :func:`shift_changes`: the largest changes and the verdict.

    Changes are printed rounded to one significant digit (``0`` below ``tolerance``). A
    scheme counts as unchanged by a shift when every change is below ``tolerance``.

    Args:
        weights: changes of the attention weights, from :func:`shift_changes`.
        outputs: changes of the outputs for the same schemes, or None.
        tolerance: the largest change counted as rounding.

    Returns:
        The table.

    Raises:
        ValueError: if ``weights`` is empty, ``outputs`` names other schemes, or
            ``tolerance`` is not positive.

    Example:
        >>> print(format_shift_table({"T5": [0.0], "sinusoidal": [0.23]}))
        scheme        weights  unchanged by a shift
        T5                  0  True
        sinusoidal        0.2  False
    """
    check_dict("weights", weights)
    if outputs is not None:
        check_dict("outputs", outputs)
    if outputs is not None and list(outputs) != list(weights):
        raise ValueError(
            f"outputs must name the schemes of weights, got {list(outputs)} and {list(weights)}"
        )
    check_real("tolerance", tolerance, positive=True)

    def shown(value: float) -> str:
        return "0" if value < tolerance else f"{float(f'{value:.1g}'):g}"

    head = f"{'scheme':<12}{'weights':>9}"
    head += f"{'outputs':>9}" if outputs is not None else ""
    lines = [head + "  unchanged by a shift"]
    for name, values in weights.items():
        worst = max(values)
        line = f"{name:<12}{shown(worst):>9}"
        if outputs is not None:
            worst = max(worst, max(outputs[name]))
            line += f"{shown(max(outputs[name])):>9}"
        lines.append(f"{line}  {worst < tolerance}")
    return "\n".join(lines)


def shift_figure(
    changes: dict[str, list[float]], shifts: Sequence[int], *, tolerance: float = 1e-9
):
    """The largest change of attention against the shift, one line per distinct curve.

    Schemes whose changes agree within ``tolerance`` at every shift (e.g. all 0 up to
    rounding) share one line, labelled with all their names, so the lines stay few and
    none hides another.

    Args:
        changes: from :func:`shift_changes` with the same ``shifts``.
        shifts: the shifts, for the horizontal axis.
        tolerance: the largest difference counted as rounding, as in
            :func:`format_shift_table`.

    Returns:
        The figure.

    Raises:
        ValueError: if a scheme's list does not match ``shifts``, the schemes draw more
            than six distinct curves, or ``tolerance`` is not positive.

    Example:
        >>> changes = {"T5": [0.0, 0.0], "RoPE": [1e-16, 0.0], "learned": [0.1, 0.3]}
        >>> fig = shift_figure(changes, [1, 2])
        >>> [line.get_label() for line in fig.axes[0].lines]
        ['T5, RoPE', 'learned']
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    check_dict("changes", changes)
    shifts = check_int_sequence("shifts", shifts)
    for name, values in changes.items():
        if len(values) != len(shifts):
            raise ValueError(
                f"changes[{name!r}] has {len(values)} entries for {len(shifts)} shifts"
            )
    check_real("tolerance", tolerance, positive=True)
    curves: list[tuple[list[float], list[str]]] = []  # (values, names), one per line
    for name, values in changes.items():
        values = [float(v) for v in values]
        for shown, names in curves:
            if all(abs(a - b) <= tolerance for a, b in zip(shown, values, strict=True)):
                names.append(name)
                break
        else:
            curves.append((values, [name]))
    if len(curves) > plots.MAX_LINES:
        raise ValueError(
            f"changes must hold at most {plots.MAX_LINES} distinct curves, got {len(curves)}"
        )
    fig, ax = plots.figure(height=3.6)
    palette = [plots.COLORS[c] for c in ("blue", "orange", "red", "green", "purple", "sky")]
    markers = ["o", "s", "^", "D", "v", "P"]
    with mpl.rc_context(plots.STYLE):
        for n, (values, names) in enumerate(curves):
            ax.plot(
                list(shifts),
                values,
                lw=1.6,
                label=", ".join(names),
                color=palette[n],
                marker=markers[n],
                markersize=3.5,
            )
        ax.set_xlabel("shift s (every position moved by s)")
        ax.set_ylabel("largest change")
        ax.set_title("attention after moving the whole sequence")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=min(3, len(curves)))
    return fig
