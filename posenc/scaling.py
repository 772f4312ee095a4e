"""RoPE's frequencies rescaled for contexts longer than the trained one.

Each recipe takes RoPE's frequencies ``theta_i`` (or their base) and returns new ones that
:func:`posenc.rope.apply_rope` takes as ``inv_freq``:

- :func:`position_interpolation_inv_freq`: every frequency divided by the factor;
- :func:`ntk_aware_inv_freq`: a larger base, so high frequencies stay and low ones stretch;
- :func:`llama3_inv_freq`: Llama 3's bands, kept, smoothed or divided (as transformers'
  ``llama3`` rope type);
- :func:`yarn_inv_freq`: YaRN's ramp between kept and divided pairs, with its attention
  factor;
- :func:`p_rope_inv_freq`: p-RoPE, the lowest frequencies set to zero.

Shapes: ``D`` head features, ``D/2`` frequencies.
"""

from __future__ import annotations

import math

import torch

from posenc._validate import (
    check_base,
    check_even_dim,
    check_int,
    check_positive_float,
    check_tensor,
)
from posenc.rope import _check_inv_freq, rope_inv_freq

__all__ = [
    "llama3_inv_freq",
    "ntk_aware_inv_freq",
    "p_rope_inv_freq",
    "position_interpolation_inv_freq",
    "yarn_inv_freq",
]


def _check_factor(factor: object) -> float:
    factor = check_positive_float("factor", factor)
    if factor < 1:
        raise ValueError(
            f"factor must be at least 1 (it stretches the context), got factor={factor}"
        )
    return factor


def position_interpolation_inv_freq(inv_freq: torch.Tensor, factor: float) -> torch.Tensor:
    """Position interpolation (Chen et al. 2023): divide every frequency by ``factor``.

    Positions up to ``factor`` times the trained length then turn through the same angles
    as the trained positions did.

    Args:
        inv_freq: frequencies ``[D/2]``.
        factor: the context extension factor (at least 1).

    Returns:
        float64 ``[D/2]``.

    Raises:
        TypeError, ValueError: for a bad ``inv_freq`` or a ``factor`` below 1.

    Example:
        >>> position_interpolation_inv_freq(torch.tensor([1.0, 0.01]), 4.0)
        tensor([0.2500, 0.0025], dtype=torch.float64)
    """
    inv_freq = _check_inv_freq(inv_freq, 2 * _len1d("inv_freq", inv_freq))
    return inv_freq.to(torch.float64) / _check_factor(factor)


def _len1d(name: str, t: object) -> int:
    check_tensor(name, t, min_dim=1)
    if t.dim() != 1 or t.numel() == 0:
        raise ValueError(f"{name} must be 1-D and non-empty, got shape {tuple(t.shape)}")
    return t.numel()


def ntk_aware_inv_freq(dim: int, base: float, factor: float) -> torch.Tensor:
    """NTK-aware scaling: raise the base to ``base * factor**(D / (D - 2))``.

    The highest frequency (pair 0) is unchanged, the lowest is divided by exactly
    ``factor``, and the ones between are divided by less and less: fast pairs keep their
    resolution while slow pairs are stretched.

    Args:
        dim: head features ``D`` (even, at least 4).
        base: the original base.
        factor: the context extension factor (at least 1).

    Returns:
        float64 ``[D/2]``.

    Raises:
        TypeError, ValueError: for a bad ``dim``, ``base`` or ``factor``.

    Example:
        >>> f = ntk_aware_inv_freq(8, 10000.0, 16.0)
        >>> bool(f[0] == 1.0), bool(torch.isclose(f[-1], rope_inv_freq(8)[-1] / 16))
        (True, True)
    """
    check_even_dim("dim", dim)
    if dim < 4:
        raise ValueError(f"dim must be at least 4 for NTK-aware scaling, got dim={dim}")
    base = check_base("base", base)
    factor = _check_factor(factor)
    return rope_inv_freq(dim, base * factor ** (dim / (dim - 2)))


def llama3_inv_freq(
    inv_freq: torch.Tensor,
    factor: float = 32.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    original_max_positions: int = 8192,
) -> torch.Tensor:
    """Llama 3's frequency scaling (transformers' ``"llama3"`` rope type).

    Each pair's wavelength ``2 pi / theta`` is compared with the trained context
    ``original_max_positions``:

    - shorter than ``original / high_freq_factor``: kept;
    - longer than ``original / low_freq_factor``: divided by ``factor``;
    - in between: a smooth mix of the two, linear in ``original / wavelength``.

    Args:
        inv_freq: frequencies ``[D/2]`` (e.g. ``rope_inv_freq(64, 500000.0)``).
        factor: division for the slow pairs (32 for Llama 3.2, 8 for Llama 3.1).
        low_freq_factor, high_freq_factor: the band edges (1 and 4 in Llama 3.x).
        original_max_positions: the context length of pre-training (8192).

    Returns:
        float64 ``[D/2]``.

    Raises:
        TypeError, ValueError: for a bad ``inv_freq``, non-positive factors,
            ``high_freq_factor <= low_freq_factor``, or a non-positive length.

    Example:
        >>> f = llama3_inv_freq(rope_inv_freq(64, 500000.0))
        >>> kept = f == rope_inv_freq(64, 500000.0)
        >>> divided = torch.isclose(f, rope_inv_freq(64, 500000.0) / 32)
        >>> int(kept.sum()), int((~kept & ~divided).sum()), int(divided.sum())
        (15, 3, 14)
    """
    inv_freq = _check_inv_freq(inv_freq, 2 * _len1d("inv_freq", inv_freq)).to(torch.float64)
    factor = _check_factor(factor)
    low = check_positive_float("low_freq_factor", low_freq_factor)
    high = check_positive_float("high_freq_factor", high_freq_factor)
    if high <= low:
        raise ValueError(f"high_freq_factor must exceed low_freq_factor, got {high} <= {low}")
    check_int("original_max_positions", original_max_positions, minimum=1)
    wavelen = 2 * math.pi / inv_freq
    low_freq_wavelen = original_max_positions / low
    high_freq_wavelen = original_max_positions / high
    smooth = (original_max_positions / wavelen - low) / (high - low)
    mixed = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    out = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, mixed)
    return torch.where(wavelen < high_freq_wavelen, inv_freq, out)


def yarn_inv_freq(
    dim: int,
    base: float,
    factor: float,
    original_max_positions: int,
    *,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
) -> tuple[torch.Tensor, float]:
    """YaRN (Peng et al. 2023): interpolate slow pairs, keep fast ones, ramp in between.

    A pair that turns more than ``beta_fast`` times over the trained context is kept; one
    that turns fewer than ``beta_slow`` times is divided by ``factor``; between, a linear
    ramp in the pair index mixes the two. YaRN also scales attention logits, which is
    returned as the factor ``0.1 ln(factor) + 1`` to multiply ``cos`` and ``sin`` by.

    Args:
        dim: head features ``D`` (even).
        base: frequency base.
        factor: context extension factor (at least 1).
        original_max_positions: the trained context length.
        beta_fast, beta_slow: the turn counts bounding the ramp (32 and 1 in the paper).

    Returns:
        ``(inv_freq [D/2] float64, attention_factor)``.

    Raises:
        TypeError, ValueError: for bad arguments, ``base <= 1`` or ``beta_fast <= beta_slow``.

    Example:
        >>> f, scale = yarn_inv_freq(64, 10000.0, 8.0, 4096)
        >>> bool(f[0] == 1.0), bool(torch.isclose(f[-1], rope_inv_freq(64)[-1] / 8)), round(scale, 4)
        (True, True, 1.2079)
    """
    check_even_dim("dim", dim)
    base = check_base("base", base)
    if base <= 1:  # frequencies that do not fall with the pair index have no slow end
        raise ValueError(f"base must exceed 1 for YaRN's ramp, got base={base}")
    factor = _check_factor(factor)
    check_int("original_max_positions", original_max_positions, minimum=1)
    fast = check_positive_float("beta_fast", beta_fast)
    slow = check_positive_float("beta_slow", beta_slow)
    if fast <= slow:
        raise ValueError(f"beta_fast must exceed beta_slow, got {fast} <= {slow}")

    def pair_index(turns: float) -> float:  # the pair i that turns `turns` times in the context
        return dim * math.log(original_max_positions / (turns * 2 * math.pi)) / (2 * math.log(base))

    if pair_index(slow) < 0:  # even pair 0 turns fewer than beta_slow times: all divided
        ramp = torch.ones(dim // 2, dtype=torch.float64)
    else:
        low = max(math.floor(pair_index(fast)), 0)
        high = min(math.ceil(pair_index(slow)), dim - 1)  # the bound transformers uses
        ramp = torch.arange(dim // 2, dtype=torch.float64) - low
        ramp = (ramp / max(high - low, 1e-3)).clamp(0, 1)
    extrapolation = rope_inv_freq(dim, base)
    interpolation = extrapolation / factor
    inv_freq = interpolation * ramp + extrapolation * (1 - ramp)
    return inv_freq, 0.1 * math.log(factor) + 1.0


def p_rope_inv_freq(inv_freq: torch.Tensor, p: float) -> torch.Tensor:
    """p-RoPE (Barbero et al. 2024): keep the fastest fraction ``p`` of the frequencies.

    The slowest ``1 - p`` of the pairs get frequency 0, so they are not rotated at all and
    carry content with no position attached; ``p = 1`` is RoPE, ``p = 0`` no rotation. The
    number of pairs kept is ``p * D/2`` rounded to the nearest count, halves up.

    Args:
        inv_freq: frequencies ``[D/2]``, fastest first.
        p: fraction of pairs to keep rotating, in ``[0, 1]``.

    Returns:
        float64 ``[D/2]``.

    Raises:
        TypeError, ValueError: for a bad ``inv_freq`` or ``p`` outside ``[0, 1]``.

    Example:
        >>> p_rope_inv_freq(rope_inv_freq(8), 0.5)
        tensor([1.0000, 0.1000, 0.0000, 0.0000], dtype=torch.float64)
    """
    n = _len1d("inv_freq", inv_freq)
    inv_freq = _check_inv_freq(inv_freq, 2 * n).to(torch.float64)
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"p must be a number, got {type(p).__name__}")
    if not 0 <= p <= 1:
        raise ValueError(f"p must be in [0, 1], got p={p}")
    keep = math.floor(p * n + 0.5)  # the nearest count, halves up (round() takes the even one)
    out = inv_freq.clone()
    out[keep:] = 0.0
    return out
