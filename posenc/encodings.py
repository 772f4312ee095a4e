"""Absolute position encodings: a vector per position, added to the token embedding.

Part II of the book tries them in order: the integer itself, the integer divided by the
sequence length, its bits, sines and cosines of geometrically spaced frequencies, and a
learned table. Every function returns ``[T, D]``: one ``D``-feature row per position.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc._validate import (
    check_base,
    check_even_dim,
    check_float_dtype,
    check_int,
    check_positions,
)

__all__ = [
    "LearnedPositionalEmbedding",
    "binary_encoding",
    "integer_encoding",
    "length_normalized_encoding",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
]


def integer_encoding(positions, dim: int) -> torch.Tensor:
    """The position itself, copied into every feature: row ``p`` is ``[p, p, ..., p]``.

    Args:
        positions: integer positions, length ``T`` (an int, a list or an integer tensor).
        dim: features ``D`` per row.

    Returns:
        float32 ``[T, D]`` on the positions' device.

    Raises:
        TypeError: if ``positions`` are not integers or ``dim`` is not an int.
        ValueError: if ``positions`` is empty, not 1-D or negative, on the meta device (no
            values to check), or ``dim < 1``.

    Example:
        >>> integer_encoding([0, 3], 4)
        tensor([[0., 0., 0., 0.],
                [3., 3., 3., 3.]])
    """
    p = check_positions("positions", positions)
    check_int("dim", dim, minimum=1)
    return p.to(torch.float32)[:, None].expand(-1, dim).clone()


def length_normalized_encoding(positions, dim: int, length: int) -> torch.Tensor:
    """The position divided by the sequence length ``N``: row ``p`` is ``[p/N, ..., p/N]``.

    Values stay in ``[0, 1)``, but the same position gets a different vector in sequences
    of different lengths.

    Args:
        positions: integer positions, each in ``0 .. length-1``.
        dim: features ``D`` per row.
        length: the sequence length ``N``.

    Returns:
        float32 ``[T, D]``.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``length < 1``, a position is outside ``0 .. length-1``, or the
            positions are on the meta device (no values to check).

    Example:
        >>> length_normalized_encoding([1], 2, length=4)
        tensor([[0.2500, 0.2500]])
    """
    p = check_positions("positions", positions)
    check_int("dim", dim, minimum=1)
    check_int("length", length, minimum=1)
    if int(p.max()) >= length:
        raise ValueError(f"positions must be below length={length}, got position {int(p.max())}")
    return (p.to(torch.float64) / length).to(torch.float32)[:, None].expand(-1, dim).clone()


def binary_encoding(positions, num_bits: int) -> torch.Tensor:
    """The bits of each position as 0/1 floats, least significant bit first.

    Args:
        positions: integer positions, each in ``0 .. 2**num_bits - 1``.
        num_bits: bits per row (the features ``D``); at most 62.

    Returns:
        float32 ``[T, num_bits]``; column ``j`` is bit ``j`` (worth ``2**j``).

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``num_bits`` is outside ``1 .. 62``, a position does not fit, or the
            positions are on the meta device (no values to check).

    Example:
        >>> binary_encoding([252], 8)  # 252 = 0b11111100, read right to left
        tensor([[0., 0., 1., 1., 1., 1., 1., 1.]])
    """
    p = check_positions("positions", positions)
    check_int("num_bits", num_bits, minimum=1)
    if num_bits > 62:
        raise ValueError(f"num_bits must be at most 62, got num_bits={num_bits}")
    if int(p.max()) >= 2**num_bits:
        raise ValueError(
            f"positions must be below 2**num_bits={2**num_bits}, got position {int(p.max())}"
        )
    bits = torch.arange(num_bits, device=p.device)
    return ((p[:, None] >> bits) & 1).to(torch.float32)


def sinusoidal_frequencies(dim: int, base: float = 10000.0, *, dtype=torch.float64) -> torch.Tensor:
    """Angular frequencies ``w_i = base**(-2i/dim)`` of the sinusoidal encoding, ``i < dim/2``.

    The exponent ``2i/dim`` runs over ``0, 2/dim, ..., (dim-2)/dim``: the first pair turns
    by one radian per position, the last one by ``base**(2/dim) / base``, a little more than
    ``1/base``.

    Args:
        dim: features ``D`` (even).
        base: the base of the geometric progression (10000 in Vaswani et al.).
        dtype: floating dtype of the result.

    Returns:
        ``[D/2]`` frequencies, in radians per position.

    Raises:
        TypeError: if ``dim`` is not an int, ``base`` not a number or ``dtype`` not a dtype.
        ValueError: if ``dim`` is not positive and even, ``base`` below 2**-64 or not finite, or
            ``dtype`` not a floating dtype.

    Example:
        >>> sinusoidal_frequencies(4, base=100.0)
        tensor([1.0000, 0.1000], dtype=torch.float64)
    """
    check_even_dim("dim", dim)
    base = check_base("base", base)
    check_float_dtype("dtype", dtype)
    exponent = torch.arange(0, dim, 2, dtype=torch.float64) / dim  # 2i/dim
    return (base**-exponent).to(dtype)


def sinusoidal_encoding(num_positions: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The sinusoidal encoding of Vaswani et al.: ``PE[p, 2i] = sin(p w_i)``, ``PE[p, 2i+1] = cos(p w_i)``.

    Angles are computed in float64 and the result is rounded once to float32.

    Args:
        num_positions: positions ``0 .. T-1`` to encode.
        dim: features ``D`` (even).
        base: frequency base, see :func:`sinusoidal_frequencies`.

    Returns:
        float32 ``[T, D]``.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``num_positions < 1``, ``dim`` is not positive and even, or
            ``base`` below 2**-64 or not finite.

    Example:
        >>> sinusoidal_encoding(2, 4)
        tensor([[0.0000, 1.0000, 0.0000, 1.0000],
                [0.8415, 0.5403, 0.0100, 0.9999]])
    """
    check_int("num_positions", num_positions, minimum=1)
    w = sinusoidal_frequencies(dim, base)  # [D/2]
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] * w  # [T, D/2]
    pe = torch.stack([angles.sin(), angles.cos()], dim=-1)  # [T, D/2, 2]
    return pe.reshape(num_positions, dim).to(torch.float32)


class LearnedPositionalEmbedding(nn.Module):
    """A learned table of absolute position vectors, as in BERT and GPT-2.

    Row ``p`` is a free parameter, so there are exactly ``max_positions`` rows: a position
    past the table has no vector at all, and asking for one is an error.

    Args:
        max_positions: rows in the table (the longest sequence seen in training).
        dim: features ``D``.
        seed: seed of the ``N(0, 0.02^2)`` initialisation (drawn on the CPU).

    Raises:
        TypeError: if an argument is not an int.
        ValueError: if ``max_positions`` or ``dim`` is below 1.

    Example:
        >>> table = LearnedPositionalEmbedding(4, 8)
        >>> table([0, 3]).shape
        torch.Size([2, 8])
        >>> table([4])
        Traceback (most recent call last):
        ...
        ValueError: positions must be below max_positions=4 (the table has no row for them), got position 4
    """

    def __init__(self, max_positions: int, dim: int, *, seed: int = 0):
        super().__init__()
        check_int("max_positions", max_positions, minimum=1)
        check_int("dim", dim, minimum=1)
        check_int("seed", seed)
        gen = torch.Generator().manual_seed(seed)
        self.max_positions = max_positions
        self.weight = nn.Parameter(torch.randn(max_positions, dim, generator=gen) * 0.02)

    def forward(self, positions) -> torch.Tensor:
        """Rows for ``positions``: ``[T, D]``.

        Raises:
            ValueError: if a position is ``max_positions`` or beyond, or the positions are
                on the meta device (no values to check).
        """
        p = check_positions("positions", positions)
        if int(p.max()) >= self.max_positions:
            raise ValueError(
                f"positions must be below max_positions={self.max_positions} "
                f"(the table has no row for them), got position {int(p.max())}"
            )
        return self.weight[p.to(self.weight.device)]
