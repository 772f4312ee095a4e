"""Bits of a position: how often each one flips, and how far apart neighbours land.

The binary encoding (:func:`posenc.encodings.binary_encoding`) writes position ``p`` as
its ``n`` bits, least significant first: column ``j`` holds bit ``j``, worth ``2**j``.
Counting up, bit ``j`` stays put for ``2**j`` positions and then changes, so it *flips*
every ``2**j`` positions and *repeats* (0s then 1s) every ``2**(j+1)``. This module
states those numbers in closed form and measures them by counting on a table of codes,
so that each can check the other. It also measures the jumps between the codes of
neighbouring positions, which is what makes the binary path "jumpy".

A table of codes is ``codes[T, n]``: one row per position ``0 .. T-1``, one column per bit,
entries 0 or 1 (any real dtype).
"""

from __future__ import annotations

import torch

from posenc._validate import check_int, check_positions
from posenc.encodings import binary_encoding

__all__ = [
    "bit_changes",
    "bit_period",
    "bits_changed",
    "flip_gaps",
    "flip_interval",
    "smallest_period",
    "step_lengths",
    "to_bitstring",
]

_MAX_BIT = 61  # bit 61 is worth 2**61; 2**62 still fits an int64 period


def flip_interval(bit: int) -> int:
    """Positions between two changes of bit ``bit``: ``2**bit``.

    Bit ``j`` is ``floor(p / 2**j) mod 2``; the quotient goes up by one every ``2**j``
    positions, and each time it does, its parity (the bit) changes.

    Args:
        bit: the bit index ``j`` (0 is the least significant bit), ``0 .. 61``.

    Returns:
        ``2**bit``.

    Raises:
        TypeError: if ``bit`` is not an int.
        ValueError: if ``bit`` is outside ``0 .. 61``.

    Example:
        >>> [flip_interval(j) for j in range(4)]
        [1, 2, 4, 8]
    """
    _check_bit(bit)
    return 2**bit


def bit_period(bit: int) -> int:
    """Period of bit ``bit`` as a function of position: ``2**(bit + 1)``.

    The bit reads ``2**bit`` zeros, then ``2**bit`` ones, and starts over: one full cycle
    takes two flips.

    Args:
        bit: the bit index ``j``, ``0 .. 61``.

    Returns:
        ``2**(bit + 1)``, twice :func:`flip_interval`.

    Raises:
        TypeError: if ``bit`` is not an int.
        ValueError: if ``bit`` is outside ``0 .. 61``.

    Example:
        >>> bit_period(0), bit_period(7)
        (2, 256)
    """
    _check_bit(bit)
    return 2 ** (bit + 1)


def to_bitstring(position: int, num_bits: int, *, order: str = "msb") -> str:
    """The bits of ``position`` as a string of 0s and 1s, in the order asked.

    ``order="msb"`` is how numbers are written on paper (most significant bit on the left);
    ``order="lsb"`` is the order of the features of :func:`posenc.binary_encoding`
    (feature 0 is bit 0).

    Args:
        position: a non-negative int below ``2**num_bits``.
        num_bits: digits in the string, ``1 .. 62``.
        order: ``"msb"`` (most significant bit first) or ``"lsb"``.

    Returns:
        A string of ``num_bits`` characters.

    Raises:
        TypeError: if ``position`` or ``num_bits`` is not an int, or ``order`` not a str.
        ValueError: if ``position`` does not fit in ``num_bits`` bits, or ``order`` is
            unknown.

    Example:
        >>> to_bitstring(252, 8), to_bitstring(252, 8, order="lsb")
        ('11111100', '00111111')
    """
    check_int("position", position, minimum=0)
    check_int("num_bits", num_bits, minimum=1)
    if num_bits > 62:
        raise ValueError(f"num_bits must be at most 62, got num_bits={num_bits}")
    if position >= 2**num_bits:
        raise ValueError(
            f"position must fit in num_bits={num_bits} bits (below {2**num_bits}), "
            f"got position={position}"
        )
    if not isinstance(order, str):
        raise TypeError(f"order must be a str, got {order!r} ({type(order).__name__})")
    lsb_first = "".join(str(int(b)) for b in binary_encoding([position], num_bits)[0].tolist())
    if order == "lsb":
        return lsb_first
    elif order == "msb":
        return lsb_first[::-1]
    else:
        raise ValueError(f"order must be 'msb' or 'lsb', got order={order!r}")


def bit_changes(codes: torch.Tensor) -> torch.Tensor:
    """Where each bit changes between neighbouring positions.

    Args:
        codes: ``[T, n]`` table of 0/1 entries, row ``p`` the code of position ``p``,
            ``T >= 2``.

    Returns:
        bool ``[T-1, n]``: entry ``[p, j]`` is True when bit ``j`` differs between
        positions ``p`` and ``p + 1``.

    Raises:
        TypeError: if ``codes`` is not a tensor.
        ValueError: if it is not 2-D, has fewer than 2 rows, or holds values other than 0
            and 1.

    Example:
        >>> bit_changes(binary_encoding([0, 1, 2, 3], 2)).int()
        tensor([[1, 0],
                [1, 1],
                [1, 0]], dtype=torch.int32)
    """
    c = _check_codes(codes)
    return c[1:] != c[:-1]


def flip_gaps(codes: torch.Tensor) -> list[list[int]]:
    """Count, for each bit, the distinct gaps between its successive flips.

    A flip of bit ``j`` "at position ``p``" means it differs between ``p - 1`` and ``p``.
    The gaps are the differences between successive flip positions; if a bit flips every
    ``k`` positions, its list is ``[k]``. A bit that flips at most once has no gap (``[]``).

    Args:
        codes: ``[T, n]`` table of 0/1 entries, ``T >= 2``.

    Returns:
        ``n`` sorted lists of ints, one per bit (column order).

    Raises:
        TypeError, ValueError: as :func:`bit_changes`.

    Example:
        >>> flip_gaps(binary_encoding(list(range(16)), 4))  # bit 3 flips only once, at 8
        [[1], [2], [4], []]
    """
    changed = bit_changes(codes)  # [T-1, n]
    gaps = []
    for column in changed.T:  # one bit at a time, [T-1]
        at = torch.nonzero(column).flatten() + 1  # positions p where the bit has just flipped
        gaps.append(sorted({int(g) for g in at.diff().tolist()}))
    return gaps


def smallest_period(values) -> int:
    """The smallest ``P`` with ``values[p + P] == values[p]`` for every ``p`` in range.

    Only ``P <= T // 2`` is considered, so the sequence shows at least two full
    repetitions of what is claimed to repeat.

    Args:
        values: a 1-D tensor or sequence of length ``T >= 2``.

    Returns:
        The period ``P``, an int in ``1 .. T // 2``.

    Raises:
        TypeError: if ``values`` cannot be made into a tensor.
        ValueError: if it is not 1-D, is shorter than 2, or repeats with no period up to
            ``T // 2`` (pass a longer sequence).

    Example:
        >>> smallest_period([0, 0, 1, 1, 0, 0, 1, 1])
        4
    """
    try:
        v = torch.as_tensor(values)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(
            f"values must be a 1-D sequence, got {type(values).__name__}: {err}"
        ) from None
    if v.dim() != 1 or v.numel() < 2:
        raise ValueError(f"values must be 1-D with at least 2 entries, got shape {tuple(v.shape)}")
    t = v.numel()
    for period in range(1, t // 2 + 1):
        if torch.equal(v[period:], v[:-period]):
            return period
    raise ValueError(
        f"values of length T={t} have no period up to T // 2 = {t // 2}; pass a longer sequence"
    )


def step_lengths(codes: torch.Tensor) -> torch.Tensor:
    """Euclidean length of each step ``codes[p + 1] - codes[p]`` along a path of codes.

    For a binary code the squared step is the number of bits that change; for a smooth
    encoding the steps are all alike. Computed in float64.

    Args:
        codes: ``[T, D]`` real tensor, one encoding per position, ``T >= 2``.

    Returns:
        float64 ``[T-1]``.

    Raises:
        TypeError: if ``codes`` is not a real floating tensor.
        ValueError: if it is not 2-D or has fewer than 2 rows.

    Example:
        >>> step_lengths(binary_encoding([0, 1, 2, 3, 4], 3))
        tensor([1.0000, 1.4142, 1.0000, 1.7321], dtype=torch.float64)
    """
    if not isinstance(codes, torch.Tensor):
        raise TypeError(f"codes must be a torch.Tensor, got {type(codes).__name__}")
    if not codes.is_floating_point():
        raise TypeError(f"codes must have a floating dtype, got {codes.dtype}")
    if codes.dim() != 2 or codes.shape[0] < 2:
        raise ValueError(f"codes must be [T, D] with T >= 2, got shape {tuple(codes.shape)}")
    c = codes.to(torch.float64)
    return (c[1:] - c[:-1]).norm(dim=-1)  # [T-1]


def bits_changed(positions) -> torch.Tensor:
    """How many bits change from ``p`` to ``p + 1``, in closed form.

    Adding 1 turns the trailing 1s of ``p`` into 0s and the 0 above them into a 1, so
    ``1 + (trailing ones of p)`` bits change: the popcount of ``p XOR (p + 1)``.

    Args:
        positions: non-negative integer positions ``p`` (an int, a list or an integer
            tensor), each below ``2**62``.

    Returns:
        int64 ``[T]``.

    Raises:
        TypeError: if ``positions`` are not integers.
        ValueError: if ``positions`` is empty, not 1-D, negative or too large.

    Example:
        >>> bits_changed([0, 1, 3, 7, 127])
        tensor([1, 2, 3, 4, 8])
    """
    p = check_positions("positions", positions)
    if int(p.max()) >= 2**62:
        raise ValueError(f"positions must be below 2**62, got position {int(p.max())}")
    changed = p ^ (p + 1)  # ones exactly where a bit changes: 2**(t+1) - 1
    count = torch.zeros_like(p)
    while bool(changed.any()):
        count += changed & 1
        changed = changed >> 1
    return count


def _check_bit(bit: object) -> None:
    check_int("bit", bit, minimum=0)
    if bit > _MAX_BIT:
        raise ValueError(f"bit must be at most {_MAX_BIT}, got bit={bit}")


def _check_codes(codes: object) -> torch.Tensor:
    if not isinstance(codes, torch.Tensor):
        raise TypeError(f"codes must be a torch.Tensor, got {type(codes).__name__}")
    if codes.dim() != 2 or codes.shape[0] < 2:
        raise ValueError(f"codes must be [T, n] with T >= 2, got shape {tuple(codes.shape)}")
    if not bool(((codes == 0) | (codes == 1)).all()):
        raise ValueError("codes must hold only 0s and 1s")
    return codes
