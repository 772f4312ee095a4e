"""Rotary position embedding (RoPE): rotate each pair of features by ``position * theta_i``.

A head vector ``x[..., T, D]`` is split into ``D/2`` pairs; pair ``i`` of the token at
position ``p`` is turned counter-clockwise by the angle ``p * theta_i``, with
``theta_i = base**(-2i/D)``. Because rotations compose by adding angles and a rotation's
transpose is its inverse, ``<apply_rope(q, m), apply_rope(k, n)>`` depends on ``n - m`` only.

Two layouts say which features form a pair:

- ``"interleaved"``: ``(x[2i], x[2i+1])``, as in RoFormer and Meta's Llama code;
- ``"half"``: ``(x[i], x[i + D/2])``, as in GPT-NeoX and Hugging Face transformers.

They are the same rotation up to a fixed permutation of the features
(:func:`layout_permutation`), which is why the Hugging Face conversion of Llama permutes the
rows of ``W_q`` and ``W_k`` (:func:`permute_qk_rows`).

Angles are computed in float32 (float64 when ``x`` is float64) from integer positions,
whatever the dtype of ``x``; the result is cast to ``x``'s dtype at the end.
"""

from __future__ import annotations

import math

import torch

from posenc._validate import (
    LAYOUTS,
    broadcast_positions,
    check_base,
    check_copyable,
    check_even_dim,
    check_int,
    check_layout,
    check_no_overlap,
    check_option,
    check_positions,
    check_tensor,
    same_device,
)
from posenc.rotation import block_diagonal, rotation_matrix

__all__ = [
    "LAYOUTS",
    "apply_rope",
    "apply_rope_",
    "apply_rope_nd",
    "layout_permutation",
    "permute_qk_rows",
    "rope_inv_freq",
    "rope_matrix",
]


def rope_inv_freq(dim: int, base: float = 10000.0) -> torch.Tensor:
    """RoPE's frequencies ``theta_i = base**(-2i/dim)`` for ``i = 0 .. dim/2 - 1``.

    Computed in float64 (rounded once when cast to the angle dtype).

    Args:
        dim: head features ``D`` (even).
        base: the base (10000 in RoFormer, 500000 in Llama 3).

    Returns:
        float64 ``[D/2]``, in radians per position, from 1 down to ``base**(2/D) / base``,
        a little more than ``1/base``.

    Raises:
        TypeError: if ``dim`` is not an int or ``base`` not a number.
        ValueError: if ``dim`` is not positive and even or ``base`` is below 2**-64 or not finite.

    Example:
        >>> rope_inv_freq(4, base=100.0)
        tensor([1.0000, 0.1000], dtype=torch.float64)
    """
    check_even_dim("dim", dim)
    base = check_base("base", base)
    return base ** -(torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def _check_inv_freq(inv_freq: object, dim: int) -> torch.Tensor:
    if not isinstance(inv_freq, torch.Tensor):
        raise TypeError(f"inv_freq must be a torch.Tensor, got {type(inv_freq).__name__}")
    if not inv_freq.is_floating_point():
        raise TypeError(f"inv_freq must have a floating dtype, got {inv_freq.dtype}")
    if inv_freq.dim() != 1 or inv_freq.numel() != dim // 2:
        raise ValueError(
            f"inv_freq must have shape [D/2] = [{dim // 2}], got {tuple(inv_freq.shape)}"
        )
    # Values are read only where that costs no device-to-host copy; a short list read in
    # Python costs less than the four tensor operations of the same test.
    if inv_freq.device.type == "cpu" and not all(0.0 <= v < math.inf for v in inv_freq.tolist()):
        raise ValueError("inv_freq must be finite and non-negative")
    return inv_freq


def _angles(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``positions[..., None] * inv_freq`` in ``dtype``: ``[..., T, D/2]``."""
    return positions.to(dtype)[..., None] * inv_freq.to(device=positions.device, dtype=dtype)


def _pairs(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The two members of every pair: ``[..., T, D/2]`` views of ``x[..., T, D]``."""
    if layout == "interleaved":
        return x[..., 0::2], x[..., 1::2]
    if layout == "half":
        return x.chunk(2, dim=-1)
    raise ValueError(f"layout must be one of {LAYOUTS}, got layout={layout!r}")


def _join(a: torch.Tensor, b: torch.Tensor, layout: str) -> torch.Tensor:
    """Inverse of :func:`_pairs`: ``[..., T, D]`` from the two members ``[..., T, D/2]``."""
    if layout == "interleaved":
        return torch.stack([a, b], dim=-1).flatten(-2)
    if layout == "half":
        return torch.cat([a, b], dim=-1)
    raise ValueError(f"layout must be one of {LAYOUTS}, got layout={layout!r}")


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """Rotate the pairs of ``x[..., T, D]`` by angles given as ``cos, sin`` ``[..., T, D/2]``."""
    x1, x2 = _pairs(x, layout)
    return _join(x1 * cos - x2 * sin, x1 * sin + x2 * cos, layout)


def _check_rope_input(x: object, positions: object) -> tuple[torch.Tensor, torch.Tensor]:
    check_tensor("x", x, min_dim=2)
    dim, length = x.shape[-1], x.shape[-2]
    if dim == 0 or dim % 2:
        raise ValueError(f"head dimension must be even and positive, got D={dim}")
    if length == 0:
        raise ValueError(f"x must have at least one position, got shape {tuple(x.shape)}")
    if positions is None:
        return x, torch.arange(length, device=x.device)
    if isinstance(positions, torch.Tensor) and positions.dim() > 1:
        if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"positions must hold integers, got dtype {positions.dtype}")
        p = positions
    else:
        p = check_positions("positions", positions, nonnegative=False)
    if p.shape[-1] != length:
        raise ValueError(
            f"positions must have one entry per position (T={length}), got shape {tuple(p.shape)}"
        )
    broadcast_positions(p.shape, x.shape[:-1])
    return x, check_copyable("positions", p, x.device).to(device=x.device, dtype=torch.int64)


def _check_args(x, positions, base, inv_freq, layout):
    """Validate :func:`apply_rope`'s arguments once.

    Returns ``(x, p, inv_freq, layout)`` with ``p`` int64 on x's device.
    """
    x, p = _check_rope_input(x, positions)
    layout = check_layout(layout)
    if inv_freq is None:
        inv_freq = rope_inv_freq(x.shape[-1], base)
    else:
        inv_freq = check_copyable("inv_freq", _check_inv_freq(inv_freq, x.shape[-1]), x.device)
    return x, p, inv_freq, layout


def apply_rope(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
) -> torch.Tensor:
    """Rotate every pair of features of ``x`` by ``position * theta_i``.

    The reference implementation, written to be read: the angles ``p * theta_i`` in float32
    (float64 when ``x`` is float64), their cosines and sines, then every pair
    ``(x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos)`` in that dtype, rounded to x's dtype
    once at the end. :mod:`posenc.fast` has the same function, with the same contract and
    results, built for speed.

    Args:
        x: head vectors ``[..., T, D]`` (D even), any floating dtype.
        positions: integer positions: ``[T]`` (default ``0 .. T-1``) or any integer shape
            ``[..., T]`` that broadcasts with ``x.shape[:-1]`` (e.g. ``[B, 1, T]``).
            Negative positions rotate the other way.
        base: frequency base, used when ``inv_freq`` is None.
        inv_freq: the frequencies ``[D/2]`` to use instead (e.g. from
            :func:`posenc.scaling.llama3_inv_freq`).
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        The rotated vectors, same dtype and device as ``x``; same shape, or the shape
        ``x`` broadcasts to with ``positions``.

    Raises:
        TypeError: if ``x`` is not a floating tensor, positions are not integers, or
            ``inv_freq`` is not a floating tensor.
        ValueError: for an odd or zero ``D``, no positions, positions of the wrong length or
            shape, a bad ``base`` or ``inv_freq``, or an unknown ``layout``.

    Example:
        >>> q, k = torch.randn(2, 8, dtype=torch.float64)
        >>> def score(m, n):
        ...     return apply_rope(q[None], [m]) @ apply_rope(k[None], [n]).T
        >>> torch.allclose(score(3, 10), score(103, 110))  # only n - m matters
        True
    """
    x, p, inv_freq, layout = _check_args(x, positions, base, inv_freq, layout)
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    angles = _angles(p, inv_freq, dtype)  # [..., T, D/2]
    return _rotate(x.to(dtype), angles.cos(), angles.sin(), layout).to(x.dtype)


def apply_rope_(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
) -> torch.Tensor:
    """In-place :func:`apply_rope`: write the rotated pairs back into ``x`` and return ``x``.

    Same arguments, angles and rounding as :func:`apply_rope`. This reference computes the
    result out of place, then copies it; :func:`posenc.fast.apply_rope_` rotates where the
    data lies, allocating nothing.

    Args:
        x: head vectors ``[..., T, D]``, overwritten.
        positions, base, inv_freq, layout: as for :func:`apply_rope`; positions must not
            broadcast ``x`` to a larger shape.

    Returns:
        ``x``, rotated.

    Raises:
        TypeError, ValueError: as :func:`apply_rope`, and ValueError when the positions
            would broadcast ``x`` to a larger shape, or ``x`` holds one element in several
            places (an expanded view, or windows that overlap as ``unfold`` makes).

    Example:
        >>> x = torch.randn(2, 5, 8)
        >>> expected = apply_rope(x, layout="half")
        >>> apply_rope_(x, layout="half") is x, torch.equal(x, expected)
        (True, True)
    """
    out = apply_rope(x, positions, base=base, inv_freq=inv_freq, layout=layout)
    if out.shape != x.shape:
        raise ValueError(
            f"positions broadcast x of shape {tuple(x.shape)} to {tuple(out.shape)}; "
            "an in-place rotation must keep x's shape"
        )
    check_no_overlap("x", x)
    return x.copy_(out)


def rope_matrix(
    position: int,
    dim: int,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """The dense ``[D, D]`` matrix of RoPE at one position.

    ``rope_matrix(p, D) @ x[t]`` equals ``apply_rope(x, positions)[t]`` where
    ``positions[t] = p``. In the interleaved layout it is block-diagonal with the 2x2
    rotations on the diagonal; in the half layout the same entries sit at rows and columns
    ``i`` and ``i + D/2``.

    Args:
        position: the position ``p`` (an integer that fits in int64).
        dim: head features ``D`` (even).
        base: frequency base, used when ``inv_freq`` is None.
        inv_freq: the frequencies ``[D/2]`` to use instead.
        layout: ``"interleaved"`` or ``"half"``.
        dtype: floating dtype of the result.

    Returns:
        ``[D, D]`` orthogonal matrix.

    Raises:
        TypeError, ValueError: for a non-int ``position``, a bad ``dim``, ``base``,
            ``inv_freq``, ``layout`` or ``dtype``.

    Example:
        >>> m = rope_matrix(5, 4)
        >>> torch.allclose(m.T @ m, torch.eye(4, dtype=torch.float64))
        True
    """
    check_int("position", position)
    check_even_dim("dim", dim)
    check_layout(layout)
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    inv_freq = rope_inv_freq(dim, base) if inv_freq is None else _check_inv_freq(inv_freq, dim)
    blocks = rotation_matrix(position * inv_freq.to(torch.float64))  # [D/2, 2, 2]
    dense = block_diagonal(blocks)  # interleaved
    if layout == "half":
        perm = layout_permutation(dim)
        dense = dense[perm][:, perm]
    return dense.to(dtype)


def layout_permutation(dim: int) -> torch.Tensor:
    """Feature order that turns the interleaved layout into the half layout.

    With ``perm = layout_permutation(D)``, feature ``j`` of the half layout is feature
    ``perm[j]`` of the interleaved one: ``perm = [0, 2, 4, ..., 1, 3, 5, ...]``. So
    ``apply_rope(x, layout="interleaved")[..., perm] == apply_rope(x[..., perm], layout="half")``,
    and ``torch.argsort(perm)`` goes back.

    Args:
        dim: head features ``D`` (even).

    Returns:
        int64 ``[D]``.

    Raises:
        TypeError, ValueError: if ``dim`` is not a positive even int.

    Example:
        >>> layout_permutation(6)
        tensor([0, 2, 4, 1, 3, 5])
    """
    check_even_dim("dim", dim)
    return torch.cat([torch.arange(0, dim, 2), torch.arange(1, dim, 2)])


def permute_qk_rows(weight: torch.Tensor, num_heads: int, *, to: str = "half") -> torch.Tensor:
    """Reorder the output rows of a ``W_q`` or ``W_k`` matrix, head by head, between layouts.

    A projection's output rows are the features of each head, head after head. Converting
    a checkpoint written for interleaved RoPE (Meta's) to run with half-split RoPE (Hugging
    Face's) applies :func:`layout_permutation` to each head's rows; ``to="interleaved"``
    undoes it. Queries and keys are then permuted the same way, so ``q . k`` is unchanged.

    Args:
        weight: ``[H * D, E]`` (output rows, input columns), or ``[H * D]`` for a bias.
        num_heads: heads ``H`` in the rows.
        to: target layout, ``"half"`` or ``"interleaved"``.

    Returns:
        The weight with its rows reordered, same shape.

    Raises:
        TypeError: if ``weight`` is not a floating tensor or ``num_heads`` not an int.
        ValueError: if the rows do not split into ``num_heads`` heads of even size, or ``to``
            is unknown.

    Example:
        >>> w = torch.arange(8.0)[:, None]  # 2 heads of D=4, one input column
        >>> permute_qk_rows(w, 2).flatten().tolist()
        [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]
    """
    check_tensor("weight", weight, min_dim=1)
    check_int("num_heads", num_heads, minimum=1)
    check_option("to", to, LAYOUTS)
    rows = weight.shape[0]
    if weight.numel() == 0:
        raise ValueError(f"weight must not be empty, got shape {tuple(weight.shape)}")
    if rows % num_heads or (rows // num_heads) % 2:
        raise ValueError(
            f"weight rows must split into num_heads={num_heads} heads of even size, got {rows} rows"
        )
    perm = layout_permutation(rows // num_heads)
    if to == "interleaved":
        perm = torch.argsort(perm)
    head_dim = rows // num_heads
    index = (torch.arange(num_heads)[:, None] * head_dim + perm[None, :]).flatten()  # [H * D]
    return weight[index.to(weight.device)]


def _check_coords(positions: object, n: int | None = None) -> torch.Tensor:
    """Integer coordinates ``[..., T, n]`` (``n`` fixed when given)."""
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"positions must be an integer tensor [..., T, n], got {type(positions).__name__}"
        )
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must hold integers, got dtype {positions.dtype}")
    if positions.dim() < 2 or positions.shape[-1] < 1:
        raise ValueError(f"positions must have shape [..., T, n], got {tuple(positions.shape)}")
    if n is not None and positions.shape[-1] != n:
        raise ValueError(
            f"positions must have n={n} coordinates per cell, got shape {tuple(positions.shape)}"
        )
    return positions.to(torch.int64)


@same_device(copied=("positions",))
def apply_rope_nd(
    x: torch.Tensor, positions: torch.Tensor, *, base: float = 10000.0, layout: str = "interleaved"
) -> torch.Tensor:
    """Axial RoPE for positions with several coordinates (a pixel's row and column, ...).

    The ``D`` features are cut into ``n`` equal chunks, one per axis; chunk ``a`` is rotated
    by :func:`apply_rope` with coordinate ``a`` of each position and its own frequencies
    ``rope_inv_freq(D / n, base)``. Each pair turns with one axis only, so the score of two
    tokens depends only on the difference of their coordinates.

    Args:
        x: head vectors ``[..., T, D]``.
        positions: integer coordinates ``[T, n]`` (or ``[..., T, n]`` broadcasting with
            ``x.shape[:-1]``), on x's device or the CPU (copied, as :func:`apply_rope` does).
        base: frequency base.
        layout: pairing inside each chunk, ``"interleaved"`` or ``"half"``.

    Returns:
        The rotated vectors, same shape, dtype and device as ``x``.

    Raises:
        TypeError: if ``x`` is not a floating tensor or ``positions`` not integers.
        ValueError: if ``D`` is not divisible by ``2 n``, or ``positions`` has the wrong shape.

    Example:
        >>> q, k = torch.randn(2, 1, 8, dtype=torch.float64)
        >>> def score(a, b):
        ...     return apply_rope_nd(q, torch.tensor([a])) @ apply_rope_nd(k, torch.tensor([b])).mT
        >>> torch.allclose(score((1, 2), (4, 7)), score((11, 5), (14, 10)))  # (dx, dy) = (3, 5)
        True
    """
    check_tensor("x", x, min_dim=2)
    positions = _check_coords(positions)
    n, dim = positions.shape[-1], x.shape[-1]
    if dim == 0 or dim % (2 * n):
        raise ValueError(
            f"head dimension D={dim} must be divisible by 2 * n = {2 * n} (n={n} axes)"
        )
    chunks = x.chunk(n, dim=-1)
    return torch.cat(
        [apply_rope(c, positions[..., a], base=base, layout=layout) for a, c in enumerate(chunks)],
        dim=-1,
    )
