"""Rotations of the plane, and the block-diagonal rotation of a whole encoding vector.

Chapter 6 finds that shifting a sinusoidal encoding by ``k`` positions is a rotation of
each ``(sin, cos)`` pair; RoPE (Part IV) makes that rotation the encoding itself.
"""

from __future__ import annotations

import torch

from posenc._validate import (
    check_base,
    check_even_dim,
    check_int,
    check_tensor,
)
from posenc.encodings import sinusoidal_frequencies

__all__ = ["block_diagonal", "rotation_matrix", "sinusoidal_shift_matrix"]


def rotation_matrix(theta) -> torch.Tensor:
    """The counter-clockwise rotation by ``theta`` radians: ``[[cos, -sin], [sin, cos]]``.

    Args:
        theta: an angle (float) or a tensor of angles of any shape ``[...]``.

    Returns:
        ``[..., 2, 2]``; float64 for a float64 tensor, else float32.

    Raises:
        TypeError: if ``theta`` is not a number or a floating/integer tensor.

    Example:
        >>> quarter = rotation_matrix(torch.pi / 2)  # turns x = (1, 0) into y = (0, 1)
        >>> torch.allclose(quarter @ torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), atol=1e-6)
        True
    """
    if isinstance(theta, bool) or not isinstance(theta, (int, float, torch.Tensor)):
        raise TypeError(f"theta must be a number or a tensor, got {type(theta).__name__}")
    t = torch.as_tensor(float(theta) if isinstance(theta, int) else theta)  # any int, as a float
    if t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"theta must be real, got dtype {t.dtype}")
    if t.dtype != torch.float64:
        t = t.to(torch.float32)
    c, s = t.cos(), t.sin()
    return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


def block_diagonal(blocks: torch.Tensor) -> torch.Tensor:
    """Place ``n`` 2x2 blocks on the diagonal of a ``2n x 2n`` matrix.

    Args:
        blocks: ``[..., n, 2, 2]``.

    Returns:
        ``[..., 2n, 2n]``, zero off the blocks (whatever the blocks hold, NaN and inf
        included); block ``i`` acts on features ``2i, 2i+1``.

    Raises:
        TypeError: if ``blocks`` is not a floating tensor.
        ValueError: if its last two axes are not ``2 x 2``.

    Example:
        >>> block_diagonal(torch.ones(2, 2, 2))
        tensor([[1., 1., 0., 0.],
                [1., 1., 0., 0.],
                [0., 0., 1., 1.],
                [0., 0., 1., 1.]])
    """
    check_tensor("blocks", blocks, min_dim=3)
    if blocks.shape[-2:] != (2, 2):
        raise ValueError(f"blocks must have shape [..., n, 2, 2], got {tuple(blocks.shape)}")
    *lead, n, _, _ = blocks.shape
    on = torch.eye(n, dtype=torch.bool, device=blocks.device)[:, None, :, None]  # [n, 1, n, 1]
    # out[..., i, a, j, b] = blocks[..., i, a, b] where i == j, else 0: chosen, not multiplied
    # by 0, so that a NaN or inf in one block stays in that block
    out = torch.where(on, blocks[..., :, :, None, :], blocks.new_zeros(()))
    return out.reshape(*lead, 2 * n, 2 * n)


def sinusoidal_shift_matrix(offset: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The matrix ``M_k`` with ``PE(p + k) = M_k PE(p)`` for every position ``p``.

    For one ``(sin w p, cos w p)`` pair the angle-addition identities give the block
    ``[[cos wk, sin wk], [-sin wk, cos wk]]``: a rotation by ``-w k`` (clockwise, because
    the pair lists ``sin`` before ``cos``). ``M_k`` stacks one such block per frequency.

    Args:
        offset: the shift ``k`` (any integer; negative shifts go back).
        dim: features ``D`` (even).
        base: frequency base of the encoding.

    Returns:
        float64 ``[D, D]``.

    Raises:
        TypeError, ValueError: for a non-int ``offset`` or a bad ``dim`` / ``base``.

    Example:
        >>> from posenc.encodings import sinusoidal_encoding
        >>> pe = sinusoidal_encoding(10, 8).double()
        >>> torch.allclose(pe[7], sinusoidal_shift_matrix(3, 8) @ pe[4], atol=1e-6)
        True
    """
    check_int("offset", offset)
    check_even_dim("dim", dim)
    check_base("base", base)
    w = sinusoidal_frequencies(dim, base)  # [D/2]
    return block_diagonal(rotation_matrix(-w * offset))
