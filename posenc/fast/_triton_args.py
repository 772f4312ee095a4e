"""What the Triton kernel reads, checked and put in the form it reads.

The kernel reads memory through pointers and strides, so the arguments of
:func:`posenc.fast.triton.rope_triton` and :func:`~posenc.fast.triton.rope_qk_triton` are
checked here, before a launch, from shapes, dtypes and devices alone (nothing is read back
from the GPU): the tensors (a dtype the kernel computes in, an even ``D``, no lazy negation),
the positions as rows ``[T]``, ``[B or 1, T]`` or ``[B or 1, 1, T]``, and the frequencies on
the device.

Shapes: ``B`` batch, ``H`` heads, ``T`` positions, ``D`` features, ``D/2`` pairs.
"""

from __future__ import annotations

import torch

from posenc._validate import (
    check_base,
    check_positions,
    check_same_device,
    check_same_dtype,
    check_tensor,
)
from posenc.fast.tables import _default_inv_freq
from posenc.rope import _check_inv_freq, rope_inv_freq

TRITON_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
"""The dtypes the Triton kernel takes: every GPU Triton supports computes in them (float8
formats are not supported on every architecture; the dispatch sends them to torch)."""


_DTYPE_SET = frozenset(TRITON_DTYPES)


def _check_x(name: str, x: object) -> torch.Tensor:
    if not (isinstance(x, torch.Tensor) and x.dtype in _DTYPE_SET):  # the shared rule's words
        check_tensor(name, x, min_dim=2)
    elif x.dim() < 2:
        raise ValueError(f"{name} must have at least 2 dimensions, got shape {tuple(x.shape)}")
    length, dim = x.shape[-2:]
    if dim == 0 or dim % 2:
        raise ValueError(f"head dimension must be even and positive, got D={dim}")
    if length == 0:
        raise ValueError(f"{name} must have at least one position, got shape {tuple(x.shape)}")
    if x.dtype not in _DTYPE_SET:
        raise ValueError(f"{name} must have one of the dtypes {TRITON_DTYPES}, got {x.dtype}")
    return x


def _lazily_negated(x: torch.Tensor) -> bool:
    """Whether ``x``'s memory holds its values negated (``z.conj().imag``), which a kernel
    reading memory would take for its values. (Not asked under ``torch.compile``, which
    cannot trace the question.)"""
    return not torch.compiler.is_compiling() and x.is_neg()


def _check_not_negated(**tensors: torch.Tensor) -> None:
    """The kernel reads memory: a lazy negation is refused, with what to pass instead."""
    for name, t in tensors.items():
        if _lazily_negated(t):
            raise ValueError(
                f"{name} must not be a lazy negation (its memory holds the negated values, "
                f"e.g. z.conj().imag): pass {name}.resolve_neg()"
            )


def _freqs(x, base, inv_freq) -> tuple[torch.Tensor, bool]:
    """The frequencies on x's device, with no device-to-host copy, and whether every one is
    at most 1 in magnitude (those made from a base of at least 1; a caller's are not known
    without reading them). Given ones stay in their own dtype (the kernel rounds them to the
    angle dtype, so no conversion is launched per call) unless the kernel cannot load it
    (float8); else ``rope_inv_freq`` in the angle dtype, made once."""
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    if inv_freq is None:
        base = check_base("base", base)
        if torch.compiler.is_compiling():  # traced into the graph, not looked up
            return rope_inv_freq(x.shape[-1], base).to(device=x.device, dtype=dtype), base >= 1
        return _default_inv_freq(x.shape[-1], base, dtype, x.device), base >= 1
    if inv_freq.requires_grad and torch.is_grad_enabled():
        raise ValueError(
            "inv_freq must not require grad: the kernel has no gradient for the frequencies "
            "(posenc.fast.apply_rope takes learned frequencies by the differentiable path)"
        )
    freqs = _on("inv_freq", _check_inv_freq(inv_freq, x.shape[-1]), x.device)
    freqs = freqs if freqs.dtype in _DTYPE_SET else freqs.to(dtype)
    freqs = freqs.resolve_neg() if _lazily_negated(freqs) else freqs  # the kernel reads memory
    return (freqs if freqs.is_contiguous() else freqs.contiguous()), False


def _on(name: str, t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` on ``device``: from the CPU it is copied there (as the reference does); from any
    other device it is refused, since that copy would go through the host."""
    if t.device == device:
        return t
    if t.device.type != "cpu":
        raise ValueError(
            f"{name} must be on x's device or the CPU, got {name} on {t.device} and x on {device}"
        )
    return t.to(device)


def _integer_tensor(positions, device) -> torch.Tensor:
    """Positions as an integer tensor on ``device``: a tensor as it is (copied there from the
    CPU), Python integers by the reference's rule (an int or a flat sequence)."""
    if isinstance(positions, torch.Tensor):
        if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"positions must hold integers, got dtype {positions.dtype}")
        if _lazily_negated(positions):  # the kernel reads memory
            positions = positions.resolve_neg()
        return _on("positions", positions, device)
    return check_positions("positions", positions, nonnegative=False).to(device)


def _spread(p: torch.Tensor, x_shape) -> torch.Tensor:
    """Positions ``[..., T]`` as a view of x's leading shape ``[..., T]``, by the reference's
    rule: one entry per position, broadcast without enlarging ``x``."""
    if p.dim() == 0 or p.shape[-1] != x_shape[-2]:
        raise ValueError(
            f"positions must have one entry per position (T={x_shape[-2]}), got shape "
            f"{tuple(p.shape)}"
        )
    try:
        return p.expand(x_shape[:-1])
    except RuntimeError:
        raise ValueError(
            f"positions of shape {tuple(p.shape)} must broadcast to x's leading shape "
            f"{tuple(x_shape[:-1])} without enlarging x"
        ) from None


def _positions_rows(positions, x4: torch.Tensor, x_shape) -> torch.Tensor | str | None:
    """Positions as rows for the kernel (``[T]``, ``[B or 1, T]`` or ``[B or 1, 1, T]``), None
    for ``0 .. T-1``, or ``"heads"`` when they differ between the heads of one batch entry
    (the caller then goes head by head).

    ``positions`` follow :func:`posenc.rope.apply_rope`: ``[T]``, or ``[..., T]`` broadcast
    against x's leading shape ``[..., T]`` without enlarging it.
    """
    if positions is None:
        return None
    p = _integer_tensor(positions, x4.device)
    if p.dim() == 1 and p.shape[0] == x_shape[-2]:
        return p
    if (
        p.dim() == len(x_shape) - 1 == 3
        and p.shape[1] == 1
        and p.shape[0] in (1, x_shape[0])
        and p.shape[2] == x_shape[-2]
    ):
        return p  # [B or 1, 1, T] for [B, H, T, D], as a model passes them: no view to make
    wide = _spread(p, x_shape)
    rows = wide.reshape(x4.shape[:-1])  # [B, H, T], as x4 lays out x's leading dims
    if rows.shape[1] > 1 and rows.stride(1) != 0:
        return "heads"
    return rows[:, 0]


def _check_qk(q: object, k: object) -> None:
    """``q [B, H, T, D]`` and ``k [B, H_kv, T, D]`` as the kernel takes them: alike but for
    the heads, with a dtype it computes in."""
    for name, t in (("q", q), ("k", k)):
        _check_x(name, t)
        if t.dim() != 4:
            raise ValueError(f"{name} must be [B, H, T, D], got shape {tuple(t.shape)}")
    (batch, _, length, dim), k_shape = q.shape, k.shape
    if k_shape[0] != batch or k_shape[2] != length or k_shape[3] != dim:
        raise ValueError(
            f"k must share q's B, T and D, got q {tuple(q.shape)} and k {tuple(k_shape)}"
        )
    check_same_device(q=q, k=k)
    check_same_dtype(q=q, k=k)
