"""RoPE as Llama 3.2 runs it: two layouts, permuted weights, llama3 frequencies, transformers.

Chapter 10 puts the RoPE of chapter 9 next to the code that runs Llama 3.2 1B. This module holds what that comparison needs:

- **layouts**: :func:`rotation_partners` reads off a dense RoPE matrix which feature each
  feature is turned with; :func:`complex_rope` is the form of Meta's reference code
  (consecutive pairs as complex numbers); :func:`concept_note_rope` and
  :func:`concept_note_matrix` restate the half-split code of the concept note (seed 001)
  whose prose describes consecutive pairs; :func:`layout_figure` draws both layouts.
- **converted weights**: :func:`converter_permute` is the reshape-and-transpose with which
  a Meta checkpoint's ``W_q`` and ``W_k`` are converted for Hugging Face;
  :func:`rope_scores` projects, rotates and scores, with grouped key heads as in Llama.
- **frequencies**: :func:`llama32_inv_freq`, :func:`llama3_bands` (which pairs are kept,
  smoothed or divided), :func:`bands_from_ratio`, :func:`band_counts`,
  :func:`band_table` and :func:`frequency_figure`.
- **transformers**: :func:`llama32_config` builds the Llama 3.2 1B configuration for the
  installed transformers (4.56 to 5.x), :func:`rope_settings` reads its RoPE settings back
  in one form, :func:`transformers_inv_freq` and :func:`transformers_rope` run
  transformers' own ``LlamaRotaryEmbedding`` and ``apply_rotary_pos_emb``. transformers is
  imported inside these functions, so importing this module stays cheap.

Shapes: a head vector is ``[..., T, D]``; queries ``[B, H, T, D]``, keys
``[B, H_kv, T, D]``; a projection weight ``[H * D, E]`` (output rows, input columns).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import matplotlib as mpl
import torch

from posenc._validate import (
    check_base,
    check_even_dim,
    check_int,
    check_int_sequence,
    check_positions,
    check_positive_float,
    check_real,
    check_str_sequence,
    check_tensor,
    same_device,
)
from posenc.display import plots
from posenc.display.table import Table
from posenc.rope import apply_rope, rope_inv_freq, rope_matrix
from posenc.scaling import llama3_inv_freq

__all__ = [
    "BANDS",
    "LLAMA_3_2_1B",
    "TransformersRope",
    "band_counts",
    "band_table",
    "bands_from_ratio",
    "complex_rope",
    "concept_note_matrix",
    "concept_note_rope",
    "converter_permute",
    "frequency_figure",
    "layout_figure",
    "llama3_bands",
    "llama32_config",
    "llama32_inv_freq",
    "rope_scores",
    "rope_settings",
    "rotation_partners",
    "transformers_attention_factor",
    "transformers_inv_freq",
    "transformers_rope",
]

LLAMA_3_2_1B = {
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 32.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}
"""The attention and RoPE settings of Llama 3.2 1B, as its ``config.json`` states them."""

BANDS = ("kept", "smoothed", "divided")
"""What llama3 scaling does to a pair: keeps its frequency, blends it, or divides it."""


# --- layouts ----------------------------------------------------------------------------------


def rotation_partners(matrix: torch.Tensor, *, atol: float = 1e-12) -> torch.Tensor:
    """For each feature, the one other feature a RoPE matrix turns it with.

    Column ``j`` of a RoPE matrix is the image of feature ``j``: ``cos`` on the diagonal and
    ``+-sin`` in the row of its partner, zeros elsewhere.

    Args:
        matrix: a dense ``[D, D]`` RoPE matrix at a position where every pair turns
            (e.g. ``pe.rope_matrix(1, D)``).
        atol: entries at most this large count as zero.

    Returns:
        int64 ``[D]``: ``partners[j]`` is the feature paired with feature ``j``.

    Raises:
        TypeError: if ``matrix`` is not a floating tensor.
        ValueError: if ``matrix`` is not square, or a column does not have exactly one
            non-zero entry off the diagonal (not a rotation of pairs, or a pair that does
            not turn at this position).

    Example:
        >>> rotation_partners(rope_matrix(1, 6, layout="interleaved")).tolist()
        [1, 0, 3, 2, 5, 4]
        >>> rotation_partners(rope_matrix(1, 6, layout="half")).tolist()
        [3, 4, 5, 0, 1, 2]
    """
    check_tensor("matrix", matrix, min_dim=2)
    check_real("atol", atol, minimum=0.0)
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"matrix must be square [D, D], got shape {tuple(matrix.shape)}")
    dim = matrix.shape[0]
    off = matrix.detach().abs() > atol
    off &= ~torch.eye(dim, dtype=torch.bool, device=matrix.device)
    per_column = off.sum(dim=0)
    if not bool((per_column == 1).all()):
        bad = int(torch.nonzero(per_column != 1)[0])
        raise ValueError(
            f"each column must have exactly one off-diagonal entry above atol={atol}, "
            f"column {bad} has {int(per_column[bad])}"
        )
    return off.to(torch.int64).argmax(dim=0).cpu()


def _check_inv_freq(
    name: str, inv_freq: object, size: int | None = None, *, allow_zero: bool = False
) -> torch.Tensor:
    """``inv_freq`` if it is a 1-D floating tensor of finite, positive frequencies.

    ``allow_zero`` also accepts pairs that do not turn (frequency 0), as in p-RoPE.
    """
    check_tensor(name, inv_freq, min_dim=1)
    if inv_freq.dim() != 1 or inv_freq.numel() == 0:
        raise ValueError(f"{name} must be 1-D and non-empty, got shape {tuple(inv_freq.shape)}")
    if size is not None and inv_freq.numel() != size:
        raise ValueError(f"{name} must have D/2 = {size} entries, got {inv_freq.numel()}")
    if not bool(torch.isfinite(inv_freq).all()):
        raise ValueError(f"{name} must hold finite frequencies")
    if allow_zero and bool((inv_freq < 0).any()):
        raise ValueError(f"{name} must hold non-negative frequencies, got min {inv_freq.min()}")
    if not allow_zero and bool((inv_freq <= 0).any()):
        raise ValueError(f"{name} must hold positive frequencies, got min {inv_freq.min()}")
    return inv_freq


def complex_rope(
    x: torch.Tensor, positions=None, *, inv_freq: torch.Tensor | None = None, base: float = 10000.0
) -> torch.Tensor:
    """RoPE written as Meta's Llama code writes it: consecutive pairs as complex numbers.

    Features ``(x[2i], x[2i+1])`` are read as ``z_i = x[2i] + 1j x[2i+1]`` and multiplied
    by ``exp(1j p theta_i)``; the real and imaginary parts are written back in place. This
    is the interleaved layout.

    Args:
        x: head vectors ``[..., T, D]`` (D even).
        positions: integer positions ``[T]`` (default ``0 .. T-1``).
        inv_freq: frequencies ``[D/2]``; default ``rope_inv_freq(D, base)``.
        base: frequency base, used when ``inv_freq`` is None.

    Returns:
        The rotated vectors, same shape and dtype as ``x`` (angles in float64 for float64
        input, else float32).

    Raises:
        TypeError: if ``x`` or ``inv_freq`` is not a floating tensor, or positions are
            not integers.
        ValueError: for an odd ``D``, positions of the wrong length, or bad frequencies.

    Example:
        >>> from posenc.rope import apply_rope
        >>> x = torch.randn(5, 8, dtype=torch.float64)
        >>> torch.allclose(complex_rope(x), apply_rope(x, layout="interleaved"))
        True
    """
    check_tensor("x", x, min_dim=2)
    length, dim = x.shape[-2], x.shape[-1]
    check_even_dim("x.shape[-1]", dim)
    p = (
        torch.arange(length)
        if positions is None
        else check_positions("positions", positions, nonnegative=False)
    )
    if p.numel() != length:
        raise ValueError(f"positions must have T={length} entries, got {p.numel()}")
    if inv_freq is None:
        inv_freq = rope_inv_freq(dim, base)
    _check_inv_freq("inv_freq", inv_freq, dim // 2, allow_zero=True)
    real = torch.float64 if x.dtype == torch.float64 else torch.float32
    angles = p.to(x.device, real)[:, None] * inv_freq.to(x.device, real)  # [T, D/2]
    turn = torch.polar(torch.ones_like(angles), angles)  # exp(1j angle), [T, D/2]
    z = torch.view_as_complex(x.to(real).reshape(*x.shape[:-1], dim // 2, 2).contiguous())
    return torch.view_as_real(z * turn).flatten(-2).to(x.dtype)  # [..., T, D]


def concept_note_rope(x: torch.Tensor) -> torch.Tensor:
    """The concept note's RoPE code (seed 001), restated: it splits each head into halves.

    The note describes rotating the pairs ``(x[2i], x[2i+1])`` but its code takes the
    first half ``x[:D/2]`` and the second half ``x[D/2:]`` and turns ``x[i]`` with
    ``x[i + D/2]`` by ``p * 10000**(-i / (D/2))``, counter-clockwise, at positions
    ``p = 0 .. T-1``. Its tensors are laid out ``[B, T, H, D]`` (positions before heads).

    Args:
        x: ``[B, T, H, D]`` (D even), floating.

    Returns:
        ``[B, T, H, D]``, same dtype (angles in float64 for float64 input, else float32).

    Raises:
        TypeError: if ``x`` is not a floating tensor.
        ValueError: if ``x`` is not 4-D or ``D`` is odd.

    Example:
        >>> from posenc.rope import apply_rope
        >>> x = torch.randn(1, 5, 2, 8, dtype=torch.float64)  # [B, T, H, D]
        >>> ours = apply_rope(x.transpose(1, 2), layout="half").transpose(1, 2)
        >>> torch.allclose(concept_note_rope(x), ours)
        True
    """
    check_tensor("x", x, min_dim=4)
    if x.dim() != 4:
        raise ValueError(f"x must be [B, T, H, D], got shape {tuple(x.shape)}")
    length, dim = x.shape[1], x.shape[3]
    check_even_dim("x.shape[-1]", dim)
    half = dim // 2
    real = torch.float64 if x.dtype == torch.float64 else torch.float32
    freq = 10000.0 ** -(torch.arange(half, device=x.device, dtype=real) / half)  # [D/2]
    angles = torch.arange(length, device=x.device, dtype=real)[:, None] * freq  # [T, D/2]
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]  # [T, 1, D/2]: all heads
    first, second = x.to(real)[..., :half], x.to(real)[..., half:]
    turned = torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
    return turned.to(x.dtype)


def concept_note_matrix(position: int, dim: int) -> torch.Tensor:
    """The dense ``[D, D]`` matrix of :func:`concept_note_rope` at one position.

    Built by feeding the ``D`` basis vectors through the code as ``D`` heads.

    Args:
        position: the position ``p``, from 0 to 4096.
        dim: head features ``D`` (even).

    Returns:
        float64 ``[D, D]``: column ``j`` is the image of feature ``j``.

    Raises:
        TypeError, ValueError: if ``position`` is not an int in ``[0, 4096]`` or ``dim`` not
            a positive even int.

    Example:
        >>> m = concept_note_matrix(3, 4)
        >>> torch.allclose(m.T @ m, torch.eye(4, dtype=torch.float64))
        True
    """
    check_int("position", position, minimum=0)
    if position > 4096:
        raise ValueError(
            f"position must be at most 4096 (the code runs every position up to it), got {position}"
        )
    check_even_dim("dim", dim)
    x = torch.zeros(1, position + 1, dim, dim, dtype=torch.float64)  # [B, T, H = D, D]
    x[0, position] = torch.eye(dim, dtype=torch.float64)  # head j holds feature j
    return concept_note_rope(x)[0, position].T  # rows were the images: transpose


def layout_figure(dim: int = 8, position: int = 1, *, base: float = 10.0):
    """The RoPE matrix at one position in both layouts, side by side.

    Args:
        dim: head features ``D`` (even, at most 32 to stay readable).
        position: the position drawn.
        base: frequency base (a small base makes every pair turn visibly).

    Returns:
        The matplotlib figure.

    Raises:
        TypeError, ValueError: for a bad ``dim`` (or above 32), ``position`` or ``base``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> plt.close(layout_figure())
    """
    check_even_dim("dim", dim)
    if dim > 32:
        raise ValueError(f"dim must be at most 32 for a readable figure, got dim={dim}")
    check_int("position", position)
    base = check_base("base", base)
    fig, axes = plots.figure(1, 2, height=4.8, sharey=True)
    titles = {
        "interleaved": "interleaved: pairs (2i, 2i+1)",
        "half": "half: pairs (i, i + D/2)",
    }
    ticks = range(0, dim, max(1, dim // 8))  # at most 8 labels per axis
    with mpl.rc_context(plots.STYLE):
        for ax, layout in zip(axes, titles, strict=True):
            m = rope_matrix(position, dim, base=base, layout=layout)
            image = ax.imshow(m.float().numpy(), cmap=plots.DIVERGING, vmin=-1, vmax=1)
            ax.set_xticks(ticks)
            ax.set_yticks(ticks)
            ax.grid(False)
            ax.set_xlabel("input feature")
            ax.set_title(titles[layout])
        axes[0].set_ylabel("output feature")
        plots.colorbar_below(image, axes, label="matrix entry")
        fig.suptitle(f"RoPE matrix at position {position} (D = {dim}, base {base:g})")
    return fig


# --- converted weights ------------------------------------------------------------------------


def converter_permute(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Reorder ``W_q`` or ``W_k`` rows the way the Hugging Face Llama converter writes it.

    The rows of each head, ``D`` of them, are read as ``D/2`` consecutive pairs; the
    reshape ``[H, D/2, 2, E]``, a swap of the last-but-one two axes to ``[H, 2, D/2, E]`` and
    a flatten put every pair's first row in the first half of the head and its second row
    in the second half. It is written independently of :func:`posenc.rope.permute_qk_rows`
    so that the two can be compared.

    Args:
        weight: ``[H * D, E]``.
        num_heads: heads ``H`` in the rows.

    Returns:
        ``[H * D, E]``, rows reordered.

    Raises:
        TypeError: if ``weight`` is not a floating tensor or ``num_heads`` not an int.
        ValueError: if ``weight`` is not 2-D or its rows do not split into ``num_heads``
            heads of even size.

    Example:
        >>> converter_permute(torch.arange(8.0)[:, None], 2).flatten().tolist()
        [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]
    """
    check_tensor("weight", weight, min_dim=2)
    check_int("num_heads", num_heads, minimum=1)
    if weight.dim() != 2:
        raise ValueError(f"weight must be [H * D, E], got shape {tuple(weight.shape)}")
    rows, cols = weight.shape
    if rows % num_heads or (rows // num_heads) % 2:
        raise ValueError(
            f"weight rows must split into num_heads={num_heads} heads of even size, got {rows} rows"
        )
    pairs = rows // num_heads // 2
    by_pair = weight.reshape(num_heads, pairs, 2, cols)  # [H, D/2, 2, E]
    return by_pair.transpose(1, 2).reshape(rows, cols)  # [H, 2, D/2, E] -> [H * D, E]


@same_device(copied=("positions", "inv_freq"))
def rope_scores(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    *,
    num_heads: int,
    num_kv_heads: int | None = None,
    positions=None,
    inv_freq: torch.Tensor | None = None,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> torch.Tensor:
    """Attention scores ``q_m . k_n`` of every head after RoPE (before scaling and softmax).

    ``q = x W_q^T`` and ``k = x W_k^T`` are split into heads, rotated with
    :func:`posenc.rope.apply_rope`, and each query head is scored against its key head.
    With grouped keys (``num_kv_heads < num_heads``, as in Llama) key head ``g`` serves
    query heads ``g * r .. g * r + r - 1``, ``r = num_heads / num_kv_heads``.

    Args:
        x: token vectors ``[..., T, E]``.
        w_q: ``[H * D, E]``.
        w_k: ``[H_kv * D, E]``.
        num_heads: query heads ``H``.
        num_kv_heads: key heads ``H_kv`` (default ``H``); must divide ``H``.
        positions: integer positions ``[T]`` (default ``0 .. T-1``).
        inv_freq: frequencies ``[D/2]``; default ``rope_inv_freq(D, base)``.
        base: frequency base, used when ``inv_freq`` is None.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        ``[..., H, T, T]``: entry ``[h, m, n]`` is query ``m`` against key ``n`` in head ``h``.

    Raises:
        TypeError: if a tensor is not floating or a head count not an int.
        ValueError: if the shapes do not match, the heads do not divide the rows into even
            head sizes, ``num_kv_heads`` does not divide ``num_heads``, or for a bad layout.

    Example:
        >>> from posenc.rope import permute_qk_rows
        >>> x, wq, wk = torch.randn(4, 6), torch.randn(8, 6), torch.randn(4, 6)
        >>> meta = rope_scores(x, wq, wk, num_heads=2, num_kv_heads=1)
        >>> hf = rope_scores(x, permute_qk_rows(wq, 2), permute_qk_rows(wk, 1),
        ...                  num_heads=2, num_kv_heads=1, layout="half")
        >>> meta.shape, torch.allclose(meta, hf, atol=1e-5)
        (torch.Size([2, 4, 4]), True)
    """
    check_tensor("x", x, min_dim=2)
    check_tensor("w_q", w_q, min_dim=2)
    check_tensor("w_k", w_k, min_dim=2)
    check_int("num_heads", num_heads, minimum=1)
    check_base("base", base)
    num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    check_int("num_kv_heads", num_kv_heads, minimum=1)
    if num_heads % num_kv_heads:
        raise ValueError(
            f"num_kv_heads must divide num_heads, got num_heads={num_heads}, "
            f"num_kv_heads={num_kv_heads}"
        )
    width = x.shape[-1]
    for name, w in (("w_q", w_q), ("w_k", w_k)):
        if w.dim() != 2 or w.shape[1] != width:
            raise ValueError(f"{name} must be [rows, E={width}], got shape {tuple(w.shape)}")
    if w_q.shape[0] % num_heads or (w_q.shape[0] // num_heads) % 2:
        raise ValueError(
            f"w_q rows must split into num_heads={num_heads} heads of even size, "
            f"got {w_q.shape[0]} rows"
        )
    dim = w_q.shape[0] // num_heads
    if w_k.shape[0] != num_kv_heads * dim:
        raise ValueError(
            f"w_k must have num_kv_heads * D = {num_kv_heads * dim} rows, got {w_k.shape[0]}"
        )
    q = (x @ w_q.T).unflatten(-1, (num_heads, dim)).transpose(-3, -2)  # [..., H, T, D]
    k = (x @ w_k.T).unflatten(-1, (num_kv_heads, dim)).transpose(-3, -2)  # [..., H_kv, T, D]
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=-3)  # [..., H, T, D]
    q = apply_rope(q, positions, base=base, inv_freq=inv_freq, layout=layout)
    k = apply_rope(k, positions, base=base, inv_freq=inv_freq, layout=layout)
    return q @ k.mT  # [..., H, T, T]


# --- Llama 3 frequencies ----------------------------------------------------------------------


def llama32_inv_freq(*, scaled: bool = True) -> torch.Tensor:
    """Llama 3.2 1B's RoPE frequencies, computed by ``posenc`` in float64.

    Args:
        scaled: apply the llama3 scaling (factor 32, band edges 1 and 4, trained context
            8192); ``False`` gives the plain ``500000**(-2i/64)``.

    Returns:
        float64 ``[32]``.

    Raises:
        TypeError: if ``scaled`` is not a bool.

    Example:
        >>> f = llama32_inv_freq()
        >>> f.shape, bool(f[0] == 1.0), bool(f[-1] < llama32_inv_freq(scaled=False)[-1])
        (torch.Size([32]), True, True)
    """
    if not isinstance(scaled, bool):
        raise TypeError(f"scaled must be a bool, got {scaled!r} ({type(scaled).__name__})")
    cfg, s = LLAMA_3_2_1B, LLAMA_3_2_1B["rope_scaling"]
    base = rope_inv_freq(cfg["head_dim"], cfg["rope_theta"])
    if not scaled:
        return base
    return llama3_inv_freq(
        base,
        s["factor"],
        s["low_freq_factor"],
        s["high_freq_factor"],
        s["original_max_position_embeddings"],
    )


def _check_band_edges(low: object, high: object, original: object) -> tuple[float, float, int]:
    low = check_positive_float("low_freq_factor", low)
    high = check_positive_float("high_freq_factor", high)
    if high <= low:
        raise ValueError(f"high_freq_factor must exceed low_freq_factor, got {high} <= {low}")
    check_int("original_max_positions", original, minimum=1)
    return low, high, original


def llama3_bands(
    inv_freq: torch.Tensor,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    original_max_positions: int = 8192,
) -> list[str]:
    """Which band of llama3 scaling each pair falls in, from its wavelength alone.

    A pair's wavelength is ``2 pi / theta_i`` positions. With ``L`` the trained context:

    - ``"kept"``: wavelength below ``L / high_freq_factor`` (it turns more than
      ``high_freq_factor`` times within ``L``);
    - ``"divided"``: wavelength above ``L / low_freq_factor``;
    - ``"smoothed"``: everything between.

    The scaled frequencies themselves are not used: compare with :func:`bands_from_ratio`.

    Args:
        inv_freq: the unscaled frequencies ``[D/2]``.
        low_freq_factor, high_freq_factor: the band edges.
        original_max_positions: the trained context ``L``.

    Returns:
        A list of ``D/2`` labels from :data:`BANDS`.

    Raises:
        TypeError, ValueError: for bad frequencies, non-positive factors,
            ``high_freq_factor <= low_freq_factor`` or a non-positive length.

    Example:
        >>> bands = llama3_bands(llama32_inv_freq(scaled=False))
        >>> band_counts(bands)
        {'kept': 15, 'smoothed': 3, 'divided': 14}
    """
    _check_inv_freq("inv_freq", inv_freq)
    low, high, original = _check_band_edges(
        low_freq_factor, high_freq_factor, original_max_positions
    )
    labels = []
    for theta in inv_freq.detach().double().cpu().tolist():
        wavelength = 2 * math.pi / theta
        if wavelength < original / high:
            labels.append("kept")
        elif wavelength > original / low:
            labels.append("divided")
        else:
            labels.append("smoothed")
    return labels


@same_device
def bands_from_ratio(
    scaled: torch.Tensor, unscaled: torch.Tensor, factor: float, *, rtol: float = 1e-6
) -> list[str]:
    """Read the bands off two frequency vectors: ratio 1, ratio ``1/factor``, or between.

    Args:
        scaled: frequencies after scaling ``[D/2]``.
        unscaled: frequencies before ``[D/2]``.
        factor: the division of the slow pairs (32 for Llama 3.2).
        rtol: relative tolerance for "equal" (the two vectors may be float32 and float64).

    Returns:
        A list of ``D/2`` labels from :data:`BANDS`.

    Raises:
        TypeError, ValueError: for bad frequencies or shapes, ``factor <= 1``, or a ratio
            outside ``[1/factor, 1]`` (beyond ``rtol``): not a llama3 scaling.

    Example:
        >>> bands_from_ratio(torch.tensor([1.0, 0.3, 0.25]), torch.ones(3), 4.0)
        ['kept', 'smoothed', 'divided']
    """
    _check_inv_freq("scaled", scaled)
    _check_inv_freq("unscaled", unscaled, scaled.numel())
    factor = check_positive_float("factor", factor)
    if factor <= 1:
        raise ValueError(f"factor must exceed 1, got factor={factor}")
    rtol = check_positive_float("rtol", rtol)
    ratio = scaled.detach().double().cpu() / unscaled.detach().double().cpu()
    labels = []
    for i, r in enumerate(ratio.tolist()):
        if abs(r - 1) <= rtol:
            labels.append("kept")
        elif abs(r * factor - 1) <= rtol:
            labels.append("divided")
        elif 1 / factor < r < 1:
            labels.append("smoothed")
        else:
            raise ValueError(
                f"pair {i}: scaled / unscaled = {r:.6g} is outside [1/factor, 1] = "
                f"[{1 / factor:.6g}, 1]"
            )
    return labels


def band_counts(bands: Sequence[str]) -> dict[str, int]:
    """How many pairs fall in each band.

    Args:
        bands: labels from :data:`BANDS`.

    Returns:
        ``{"kept": n, "smoothed": n, "divided": n}`` in that order.

    Raises:
        ValueError: for a label not in :data:`BANDS`.

    Example:
        >>> band_counts(["kept", "kept", "divided"])
        {'kept': 2, 'smoothed': 0, 'divided': 1}
    """
    bands = check_str_sequence("bands", bands, min_length=0)
    unknown = sorted({b for b in bands if b not in BANDS})
    if unknown:
        raise ValueError(f"bands must be labels from {BANDS}, got {unknown}")
    return {band: sum(b == band for b in bands) for band in BANDS}


@same_device
def band_table(
    unscaled: torch.Tensor,
    scaled: torch.Tensor,
    bands: Sequence[str],
    pairs: Sequence[int],
    *,
    original_max_positions: int = 8192,
) -> Table:
    """A table of some pairs: wavelength before, turns in the context, band, wavelength after.

    Wavelengths are rounded to whole positions and turns to two decimals, so the table is
    the same on every machine. In a notebook it shows as a captioned HTML table; ``print``
    gives aligned text.

    Args:
        unscaled: frequencies before scaling ``[D/2]``.
        scaled: frequencies after ``[D/2]``.
        bands: one label per pair.
        pairs: the pair indices to list.
        original_max_positions: the trained context ``L``, for the turns column.

    Returns:
        A :class:`posenc.display.table.Table`, one row per pair.

    Raises:
        TypeError, ValueError: for bad frequencies, lengths that do not match, or a pair
            index out of range.

    Example:
        >>> f = llama32_inv_freq(scaled=False)
        >>> print(band_table(f, f, ["kept"] * 32, [0]))  # doctest: +NORMALIZE_WHITESPACE
        Wavelength of each pair (positions per turn) before and after llama3 scaling, and
        its turns within the trained context of 8192 positions.
        pair  wavelength (positions)  turns in 8192  band  scaled wavelength (positions)
           0                       6        1303.80  kept                              6
    """
    _check_inv_freq("unscaled", unscaled)
    n = unscaled.numel()
    _check_inv_freq("scaled", scaled, n)
    bands = check_str_sequence("bands", bands)
    if len(bands) != n:
        raise ValueError(f"bands must have one label per pair ({n}), got {len(bands)}")
    check_int("original_max_positions", original_max_positions, minimum=1)
    pairs = check_int_sequence("pairs", pairs, minimum=0)
    before = (2 * math.pi / unscaled.detach().double().cpu()).tolist()
    after = (2 * math.pi / scaled.detach().double().cpu()).tolist()
    rows = []
    for i in pairs:
        if i >= n:
            raise ValueError(f"pairs must be below D/2 = {n}, got pair {i}")
        turns = original_max_positions / before[i]
        rows.append([i, f"{before[i]:.0f}", f"{turns:.2f}", bands[i], f"{after[i]:.0f}"])
    return Table(
        [
            "pair",
            "wavelength (positions)",
            f"turns in {original_max_positions}",
            "band",
            "scaled wavelength (positions)",
        ],
        rows,
        caption=(
            "Wavelength of each pair (positions per turn) before and after llama3 scaling, "
            f"and its turns within the trained context of {original_max_positions} positions."
        ),
    )


def _shade_bands(ax, bands: list[str]) -> None:
    """Shade the pairs of each band (kept, smoothed, divided) behind the curves."""
    shades = {"kept": "blue", "smoothed": "orange", "divided": "red"}
    for band, colour in shades.items():
        members = [i for i, b in enumerate(bands) if b == band]
        if members:
            ax.axvspan(
                min(members) - 0.5,
                max(members) + 0.5,
                color=plots.COLORS[colour],
                alpha=0.12,
                lw=0,
                label=f"{band} ({len(members)} pairs)",
            )


@same_device
def frequency_figure(
    unscaled: torch.Tensor,
    scaled: torch.Tensor,
    bands: Sequence[str],
    *,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    original_max_positions: int = 8192,
    title: str = "Llama 3.2 1B: RoPE frequencies before and after llama3 scaling",
    ax=None,
):
    """Frequencies before and after llama3 scaling, per pair, on a log scale, bands shaded.

    Args:
        unscaled: frequencies before scaling ``[D/2]``.
        scaled: frequencies after ``[D/2]``.
        bands: one label per pair (from :func:`llama3_bands`).
        low_freq_factor, high_freq_factor, original_max_positions: the band edges, drawn as
            the frequencies ``2 pi high / L`` and ``2 pi low / L``.
        title: axes title.
        ax: axes to draw into; a new figure when None.

    Returns:
        The figure.

    Raises:
        TypeError, ValueError: for bad frequencies, lengths that do not match, unknown band
            labels, or bad band edges.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> f = llama32_inv_freq(scaled=False)
        >>> plt.close(frequency_figure(f, llama32_inv_freq(), llama3_bands(f)))
    """
    _check_inv_freq("unscaled", unscaled)
    n = unscaled.numel()
    _check_inv_freq("scaled", scaled, n)
    bands = check_str_sequence("bands", bands)
    if len(bands) != n:
        raise ValueError(f"bands must have one label per pair ({n}), got {len(bands)}")
    band_counts(bands)  # validates the labels
    low, high, original = _check_band_edges(
        low_freq_factor, high_freq_factor, original_max_positions
    )
    if ax is None:
        fig, ax = plots.figure(height=4.0)
    else:
        fig = ax.figure
    with mpl.rc_context(plots.STYLE):
        _shade_bands(ax, bands)
        pair = torch.arange(n).numpy()
        curves = ((unscaled, "o-", "ink", "unscaled"), (scaled, "s--", "green", "llama3 scaled"))
        for freqs, style, colour, label in curves:
            values = freqs.detach().double().cpu().numpy()
            ax.plot(pair, values, style, ms=3.5, lw=1.2, color=plots.COLORS[colour], label=label)
        # the faster edge's label above its line, the slower one's below
        for edge, offset, align in ((high, 3, "bottom"), (low, -3, "top")):
            freq = 2 * math.pi * edge / original
            ax.axhline(freq, color=plots.COLORS["grey"], lw=0.9, ls=":")
            ax.annotate(
                f"{edge:g} turn{'' if edge == 1 else 's'} in {original}",
                (0, freq),
                xytext=(0, offset),
                textcoords="offset points",
                va=align,
                color=plots.COLORS["ink"],
            )
        ax.set_yscale("log")
        ax.set_xlabel("pair i")
        ax.set_ylabel(r"frequency $\theta_i$ (radians per position)")
        ax.set_title(title)
        handles, labels = ax.get_legend_handles_labels()
        order = [labels.index(x) for x in labels if "scaled" in x] + [
            labels.index(x) for x in labels if "pairs" in x
        ]  # the two curves, then the bands
        ax.legend(
            [handles[i] for i in order],
            [labels[i] for i in order],
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
            ncols=3,
        )
    return fig


# --- transformers -----------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet_transformers():
    """Silence transformers' logging and warnings (they differ from version to version)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(level)


def rope_settings(config) -> dict:
    """The RoPE settings of a transformers Llama config, in one form for every version.

    transformers 5.x keeps them in ``config.rope_parameters`` (``rope_theta`` included);
    4.x in ``config.rope_theta`` and ``config.rope_scaling``.

    Args:
        config: a ``transformers.LlamaConfig``.

    Returns:
        ``{"rope_theta", "rope_type", "head_dim"}`` plus, for scaled RoPE, the scaling's
        own keys (``factor``, ...), with floats as floats and lengths as ints.

    Raises:
        TypeError: if ``config`` has no RoPE settings.

    Example:
        >>> rope_settings(llama32_config(scaled=False))
        {'rope_theta': 500000.0, 'rope_type': 'default', 'head_dim': 64}
    """
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and "rope_theta" in params:  # transformers 5.x
        theta, scaling = params["rope_theta"], params
    elif hasattr(config, "rope_theta"):  # transformers 4.x
        theta, scaling = config.rope_theta, getattr(config, "rope_scaling", None) or {}
    else:
        raise TypeError(f"config has no RoPE settings: {type(config).__name__}")
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    out = {
        "rope_theta": float(theta),
        "rope_type": scaling.get("rope_type", scaling.get("type", "default")),
        "head_dim": int(head_dim),
    }
    for key in ("factor", "low_freq_factor", "high_freq_factor"):
        if key in scaling:
            out[key] = float(scaling[key])
    if "original_max_position_embeddings" in scaling:
        out["original_max_position_embeddings"] = int(scaling["original_max_position_embeddings"])
    return out


def llama32_config(*, scaled: bool = True):
    """The Llama 3.2 1B configuration for the installed transformers (4.56 to 5.x).

    ``rope_theta`` and ``rope_scaling`` are passed as keyword arguments, which every
    version from 4.43 to 5.x accepts (5.x files them under ``rope_parameters``); the
    settings are then read back with :func:`rope_settings` to make sure they were taken.

    Args:
        scaled: with the llama3 scaling (as Llama 3.2 1B ships) or without.

    Returns:
        A ``transformers.LlamaConfig`` (the attention and RoPE fields of
        :data:`LLAMA_3_2_1B`; no weights are created).

    Raises:
        TypeError: if ``scaled`` is not a bool.
        ImportError: if transformers is not installed.
        RuntimeError: if the installed transformers did not keep the RoPE settings.

    Example:
        >>> rope_settings(llama32_config())["factor"]
        32.0
    """
    if not isinstance(scaled, bool):
        raise TypeError(f"scaled must be a bool, got {scaled!r} ({type(scaled).__name__})")
    from transformers import LlamaConfig

    cfg = LLAMA_3_2_1B
    scaling = dict(cfg["rope_scaling"]) if scaled else None
    with _quiet_transformers():
        config = LlamaConfig(
            hidden_size=cfg["hidden_size"],
            num_attention_heads=cfg["num_attention_heads"],
            num_key_value_heads=cfg["num_key_value_heads"],
            head_dim=cfg["head_dim"],
            max_position_embeddings=cfg["max_position_embeddings"],
            rope_theta=cfg["rope_theta"],
            rope_scaling=scaling,
        )
    expected = {"rope_theta": cfg["rope_theta"], "head_dim": cfg["head_dim"]}
    expected.update(scaling or {"rope_type": "default"})
    got = rope_settings(config)
    if any(got.get(key) != value for key, value in expected.items()):
        import transformers

        raise RuntimeError(
            f"transformers {transformers.__version__} did not keep the RoPE settings: "
            f"expected {expected}, got {got}"
        )
    return config


class TransformersRope(NamedTuple):
    """What :func:`transformers_rope` returns."""

    q: torch.Tensor
    """Rotated queries ``[B, H, T, D]``."""
    k: torch.Tensor
    """Rotated keys ``[B, H_kv, T, D]``."""
    inv_freq: torch.Tensor
    """The float32 frequencies ``[D/2]`` transformers used."""


def _rotary_embedding(config, device):
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    with _quiet_transformers():
        return LlamaRotaryEmbedding(config=config).to(device)


def transformers_inv_freq(config=None) -> torch.Tensor:
    """The frequencies transformers' ``LlamaRotaryEmbedding`` computes for a config.

    Args:
        config: a ``LlamaConfig``; default :func:`llama32_config`.

    Returns:
        float32 ``[D/2]`` on the CPU.

    Raises:
        ImportError: if transformers is not installed.

    Example:
        >>> torch.allclose(transformers_inv_freq().double(), llama32_inv_freq())
        True
    """
    config = llama32_config() if config is None else config
    return _rotary_embedding(config, "cpu").inv_freq.detach().clone()


def transformers_attention_factor(config=None) -> float:
    """The factor transformers' ``LlamaRotaryEmbedding`` multiplies ``cos`` and ``sin`` by.

    YaRN sets it to ``0.1 ln(factor) + 1`` (a temperature on the attention scores); the
    ``llama3`` rope type leaves it at 1.

    Args:
        config: a ``LlamaConfig``; default :func:`llama32_config`.

    Returns:
        The factor, a float.

    Raises:
        ImportError: if transformers is not installed.

    Example:
        >>> transformers_attention_factor()
        1.0
    """
    config = llama32_config() if config is None else config
    return float(_rotary_embedding(config, "cpu").attention_scaling)


@same_device(copied=("positions",))
def transformers_rope(
    q: torch.Tensor, k: torch.Tensor, positions=None, config=None
) -> TransformersRope:
    """Rotate ``q`` and ``k`` with transformers' own Llama code.

    ``LlamaRotaryEmbedding(config)(q, position_ids)`` gives ``cos, sin`` ``[B, T, D]``, and
    ``apply_rotary_pos_emb(q, k, cos, sin)`` rotates in the half layout.

    Args:
        q: queries ``[B, H, T, D]``, floating.
        k: keys ``[B, H_kv, T, D]`` (same ``B``, ``T``, ``D`` and dtype).
        positions: integer positions ``[T]`` (default ``0 .. T-1``), the same for every
            batch entry, on q's device or the CPU.
        config: a ``LlamaConfig`` with head dimension ``D``; default :func:`llama32_config`.

    Returns:
        :class:`TransformersRope` ``(q, k, inv_freq)``.

    Raises:
        TypeError: if ``q`` or ``k`` is not a floating tensor or positions not integers.
        ValueError: if the shapes do not match each other, the positions or the config's
            head dimension.
        ImportError: if transformers is not installed.

    Example:
        >>> from posenc.rope import apply_rope
        >>> q, k = torch.randn(2, 1, 4, 3, 64)
        >>> out = transformers_rope(q, k, [0, 5, 900])
        >>> ours = apply_rope(q, [0, 5, 900], inv_freq=out.inv_freq, layout="half")
        >>> bool((ours - out.q).abs().max() < 1e-5)
        True
    """
    check_tensor("q", q, min_dim=4)
    check_tensor("k", k, min_dim=4)
    if q.dim() != 4 or k.dim() != 4:
        raise ValueError(
            f"q and k must be [B, H, T, D], got shapes {tuple(q.shape)} and {tuple(k.shape)}"
        )
    if q.dtype != k.dtype or q.shape[0] != k.shape[0] or q.shape[2:] != k.shape[2:]:
        raise ValueError(
            "q and k must share B, T, D and dtype, got "
            f"{tuple(q.shape)} {q.dtype} and {tuple(k.shape)} {k.dtype}"
        )
    length = q.shape[2]
    p = (
        torch.arange(length)
        if positions is None
        else check_positions("positions", positions, nonnegative=False)
    )
    if p.numel() != length:
        raise ValueError(f"positions must have T={length} entries, got {p.numel()}")
    config = llama32_config() if config is None else config
    head_dim = rope_settings(config)["head_dim"]
    if q.shape[-1] != head_dim:
        raise ValueError(f"q and k must have D = head_dim = {head_dim}, got D={q.shape[-1]}")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    emb = _rotary_embedding(config, q.device)
    position_ids = p.to(q.device)[None].expand(q.shape[0], length)  # [B, T]
    with torch.no_grad():
        cos, sin = emb(q, position_ids)  # [B, T, D] each
        q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)  # heads on axis 1
    return TransformersRope(q_rot, k_rot, emb.inv_freq.detach().cpu().clone())
