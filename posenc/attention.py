"""Self-attention, and why it cannot see order.

Chapter 1 needs three things: attention written out as the formula
``softmax(q k^T / sqrt(D)) v``, a way to reorder the positions of a sequence, and the
blog's demonstration layer (three projections followed by ``nn.MultiheadAttention``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from posenc._validate import check_bool, check_int, check_real, check_same_dtype, same_device
from posenc._validate import check_tensor as _check_tensor

__all__ = ["DemoAttention", "attention_weights", "permute_positions", "self_attention"]


@same_device
def attention_weights(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Scaled dot-product attention weights ``softmax(q k^T / sqrt(D))``.

    Args:
        q: queries, shape ``[..., T, D]``.
        k: keys, shape ``[..., T, D]`` (same ``D``; leading axes broadcast).

    Returns:
        The weights, shape ``[..., T, T]``; row ``i`` says how much query ``i`` takes
        from each key, and sums to 1.

    Raises:
        TypeError: if ``q`` or ``k`` is not a floating tensor, or they differ in dtype.
        ValueError: if they have fewer than 2 dimensions, different ``D`` or ``D = 0``.

    Example:
        >>> q = torch.zeros(3, 4)
        >>> attention_weights(q, q)  # equal scores: every key gets 1/3
        tensor([[0.3333, 0.3333, 0.3333],
                [0.3333, 0.3333, 0.3333],
                [0.3333, 0.3333, 0.3333]])
    """
    _check_tensor("q", q, min_dim=2)
    _check_tensor("k", k, min_dim=2)
    check_same_dtype(q=q, k=k)
    if q.shape[-1] != k.shape[-1] or q.shape[-1] == 0:
        raise ValueError(
            f"q and k must share one feature size D > 0, got D={q.shape[-1]} and D={k.shape[-1]}"
        )
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [..., T, T]
    return scores.softmax(dim=-1)


@same_device
def self_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Scaled dot-product attention ``softmax(q k^T / sqrt(D)) v``, with no positions.

    Args:
        q: queries, shape ``[..., T, D]``.
        k: keys, shape ``[..., T, D]``.
        v: values, shape ``[..., T, D_v]``.

    Returns:
        The outputs, shape ``[..., T, D_v]``: each a weighted mean of the values.

    Raises:
        TypeError: if an input is not a floating tensor, or they differ in dtype.
        ValueError: if ``q`` and ``k`` differ in ``D`` or ``k`` and ``v`` differ in ``T``.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> self_attention(x, x, x).shape
        torch.Size([2, 2])
    """
    _check_tensor("q", q, min_dim=2)
    _check_tensor("k", k, min_dim=2)
    _check_tensor("v", v, min_dim=2)
    check_same_dtype(q=q, k=k, v=v)
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions T, got T={k.shape[-2]} and T={v.shape[-2]}"
        )
    return attention_weights(q, k) @ v


def permute_positions(x: torch.Tensor, perm: torch.Tensor | list[int]) -> torch.Tensor:
    """Reorder the positions of a sequence: ``y[..., i, :] = x[..., perm[i], :]``.

    Args:
        x: a sequence, shape ``[..., T, D]``.
        perm: a permutation of ``0 .. T-1`` (list or integer tensor of length ``T``).

    Returns:
        The reordered sequence, same shape, dtype and device as ``x``.

    Raises:
        TypeError: if ``x`` is not a tensor or ``perm`` is not integers.
        ValueError: if ``perm`` is not a permutation of ``0 .. T-1``, or is on the meta
            device (no values to check).

    Example:
        >>> x = torch.arange(6.0).reshape(3, 2)
        >>> permute_positions(x, [2, 0, 1])
        tensor([[4., 5.],
                [0., 1.],
                [2., 3.]])
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < 2:
        raise ValueError(f"x must have shape [..., T, D], got shape {tuple(x.shape)}")
    if isinstance(perm, torch.Tensor):
        perm_t = perm
    elif (
        isinstance(perm, Sequence)
        and not isinstance(perm, (str, bytes))
        and all(isinstance(i, int) and not isinstance(i, bool) for i in perm)
    ):
        perm_t = torch.tensor(list(perm), dtype=torch.int64)
    else:
        raise TypeError(f"perm must be a list of integers or an integer tensor, got {perm!r}")
    if perm_t.is_floating_point() or perm_t.is_complex() or perm_t.dtype == torch.bool:
        raise TypeError(f"perm must hold integers, got dtype {perm_t.dtype}")
    if perm_t.device.type == "meta":
        raise ValueError(
            "perm is on the meta device, which holds no values, and its values are needed (it "
            "must be a permutation): put perm on the CPU or on x's device"
        )
    n = x.shape[-2]
    if (
        perm_t.dim() != 1
        or perm_t.numel() != n
        or not torch.equal(perm_t.sort().values.cpu(), torch.arange(n))
    ):
        raise ValueError(f"perm must be a permutation of 0..{n - 1} (T={n}), got {perm_t.tolist()}")
    return x.index_select(-2, perm_t.to(x.device))


class DemoAttention(nn.Module):
    """The blog's demonstration layer: ``W_q``, ``W_k``, ``W_v``, then multi-head attention.

    Three bias-free linear maps ``E -> E`` turn the token embeddings into queries, keys
    and values, and ``nn.MultiheadAttention`` with ``num_heads`` heads attends over them.
    As in the source, every parameter of the attention block is drawn from
    ``N(0, std²)`` so that it is far from negligible; the projections keep torch's default
    initialisation. No positional information enters anywhere.

    Parameters are created on the CPU from their own seeded generator state, so the same
    ``seed`` gives the same weights on every machine; move the module with ``.to(device)``.

    Args:
        dim: model width ``E`` (2048 for Llama 3.2 1B).
        num_heads: attention heads ``H``; must divide ``dim``.
        std: standard deviation of the attention block's parameters.
        seed: seed for all parameters.

    Raises:
        ValueError: if ``dim`` or ``num_heads`` is not positive, ``num_heads`` does not
            divide ``dim``, or ``std`` is not positive.

    Example:
        >>> layer = DemoAttention(8, num_heads=2, seed=0)
        >>> out, weights = layer(torch.ones(1, 3, 8))
        >>> out.shape, weights.shape
        (torch.Size([1, 3, 8]), torch.Size([1, 3, 3]))
    """

    def __init__(self, dim: int, *, num_heads: int = 4, std: float = 0.1, seed: int = 0):
        super().__init__()
        for name, value in (("dim", dim), ("num_heads", num_heads), ("seed", seed)):
            check_int(name, value)
        if dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"dim and num_heads must be positive, got dim={dim}, num_heads={num_heads}"
            )
        if dim % num_heads:
            raise ValueError(f"num_heads must divide dim, got dim={dim}, num_heads={num_heads}")
        check_real("std", std, positive=True)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.w_q = nn.Linear(dim, dim, bias=False)
            self.w_k = nn.Linear(dim, dim, bias=False)
            self.w_v = nn.Linear(dim, dim, bias=False)
            self.mha = nn.MultiheadAttention(dim, num_heads, batch_first=True)
            with torch.no_grad():
                for param in self.mha.parameters():
                    param.normal_(0.0, std)

    @same_device
    def forward(self, x: torch.Tensor, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend over a batch of embedded sequences.

        Args:
            x: token embeddings, shape ``[B, T, E]``.
            causal: let each token attend only to itself and the tokens before it, as a
                decoder such as Llama does (the mask is built on x's device).

        Returns:
            ``(out, weights)``: outputs ``[B, T, E]`` and the attention weights averaged
            over heads, ``[B, T, T]``.

        Raises:
            TypeError: if ``x`` is not a floating tensor of the layer's dtype, or ``causal``
                not a bool.
            ValueError: if ``x`` is not ``[B, T, E]`` with this layer's ``E``.
        """
        _check_tensor("x", x, min_dim=3)
        check_same_dtype(x=x, weights=self.w_q.weight)
        if x.dim() != 3 or x.shape[-1] != self.mha.embed_dim:
            raise ValueError(
                f"x must have shape [B, T, E] with E={self.mha.embed_dim}, got shape {tuple(x.shape)}"
            )
        mask = None
        if check_bool("causal", causal):  # True above the diagonal: later tokens are hidden
            length = x.shape[-2]
            mask = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        return self.mha(self.w_q(x), self.w_k(x), self.w_v(x), attn_mask=mask)
