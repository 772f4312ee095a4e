"""Chapter 9's views of RoPE: the source's two forms, scores, attention, playground, animation.

RoPE itself lives in :mod:`posenc.rope`; this module holds what the chapter uses to check
it and to see it:

- :func:`clockwise_rope_matrix` and :func:`elementwise_rope`: the block-diagonal matrix and
  the elementwise formula exactly as the source post writes them, built independently of
  :mod:`posenc.rope` (they turn the pairs in opposite directions);
- :func:`score_grid` and :func:`relative_scores`: the score ``<R_m q, R_n k>`` for every
  ``(m, n)`` of a grid, and ``<q, R_d k>`` for every offset ``d``;
- :func:`random_projections` and :func:`pair_scores`: the attention score between two
  tokens with RoPE, with the additive sinusoidal encoding, or with no position at all;
- :func:`rope_attention`: chapter 1's demonstration layer (:class:`posenc.DemoAttention`)
  computed head by head with RoPE applied to every head's queries and keys;
- the RoPE playground: :func:`playground_vectors`, :func:`playground_state`,
  :func:`playground_figure` (static) and :func:`playground` (live sliders);
- figures: :func:`score_grid_figure`, :func:`score_grids_figure`, :func:`offset_sweep_figure`,
  :func:`distance_figure`;
- the rotation animation: :func:`rotation_frames` (its data) and :func:`rotation_animation`.

Shapes: ``B`` batch, ``H`` heads, ``T`` positions, ``D`` head features (``D/2`` pairs),
``E`` model width, ``N`` positions or offsets of a grid, ``F`` animation frames, ``P``
pairs shown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib as mpl
import torch
from torch.nn import functional

from posenc._validate import (
    check_base,
    check_bool,
    check_even_dim,
    check_int,
    check_layout,
    check_positions,
    check_real_pair,
    check_str_sequence,
    check_tensor,
    same_device,
)
from posenc.attention import DemoAttention
from posenc.display import plots
from posenc.encodings import sinusoidal_encoding
from posenc.rope import _check_rope_input, apply_rope, rope_inv_freq

__all__ = [
    "ENCODINGS",
    "MAX_FRAMES",
    "clockwise_rope_matrix",
    "distance_figure",
    "elementwise_rope",
    "offset_sweep_figure",
    "pair_scores",
    "playground",
    "playground_figure",
    "playground_state",
    "playground_vectors",
    "random_projections",
    "relative_scores",
    "rope_attention",
    "rotation_animation",
    "rotation_frames",
    "score_grid",
    "score_grid_figure",
    "score_grids_figure",
]

ENCODINGS = ("rope", "sinusoidal", "none")
"""How :func:`pair_scores` puts position into a score."""

MAX_FRAMES = 40
"""The most frames :func:`rotation_animation` makes (the book's limit for animations)."""

_MAX_SLIDER_POSITION = 64
"""The playground's position sliders run over ``0 .. 64``."""


def _angle_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _check_vector(name: str, x: object, dim: int | None = None) -> torch.Tensor:
    check_tensor(name, x, min_dim=1)
    if x.dim() != 1 or x.numel() == 0:
        raise ValueError(f"{name} must be one non-empty vector [D], got shape {tuple(x.shape)}")
    if dim is not None and x.shape[0] != dim:
        raise ValueError(f"{name} must have {dim} features, got shape {tuple(x.shape)}")
    return x


def _check_head_vector(name: str, x: object) -> torch.Tensor:
    _check_vector(name, x)
    if x.shape[0] == 0 or x.shape[0] % 2:
        raise ValueError(
            f"{name} must have an even, positive number of features, got D={x.shape[0]}"
        )
    return x


# --- the source's two forms --------------------------------------------------------------


def clockwise_rope_matrix(
    position: int, dim: int, *, base: float = 10000.0, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """RoPE's matrix as the source post writes it: blocks ``[[cos, sin], [-sin, cos]]``.

    Block ``i`` sits at rows and columns ``2i, 2i+1`` (interleaved pairs) and holds
    ``[[cos(p theta_i), sin(p theta_i)], [-sin(p theta_i), cos(p theta_i)]]`` with
    ``theta_i = base**(-2i/D)``: the minus sign is in the lower-left corner, so each block
    is the *clockwise* rotation ``R(-p theta_i)``. The entries are filled one by one, without
    :mod:`posenc.rotation` or :mod:`posenc.rope`'s matrices, so the chapter can compare the
    two independently.

    Args:
        position: the position ``p`` (any integer).
        dim: head features ``D`` (even).
        base: frequency base.
        dtype: floating dtype of the result.

    Returns:
        ``[D, D]`` orthogonal matrix.

    Raises:
        TypeError: if ``position`` or ``dim`` is not an int, ``base`` not a number or
            ``dtype`` not a floating dtype.
        ValueError: if ``dim`` is not positive and even or ``base`` is below 2**-64 or not finite.

    Example:
        >>> clockwise_rope_matrix(1, 2, dtype=torch.float32)  # theta_0 = 1 rad
        tensor([[ 0.5403,  0.8415],
                [-0.8415,  0.5403]])
    """
    check_int("position", position)
    check_even_dim("dim", dim)
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    angles = position * rope_inv_freq(dim, base)  # [D/2], float64
    cos, sin = angles.cos(), angles.sin()
    even = torch.arange(0, dim, 2)  # [D/2]: the first feature of each pair
    dense = torch.zeros(dim, dim, dtype=torch.float64)
    dense[even, even] = cos
    dense[even, even + 1] = sin
    dense[even + 1, even] = -sin
    dense[even + 1, even + 1] = cos
    return dense.to(dtype)


def elementwise_rope(x: torch.Tensor, positions=None, *, base: float = 10000.0) -> torch.Tensor:
    """RoPE's elementwise formula as the source post writes it (interleaved pairs).

    ``R q = q * (cos p theta_1, cos p theta_1, cos p theta_2, ...)
    + (-q_2, q_1, -q_4, q_3, ...) * (sin p theta_1, sin p theta_1, sin p theta_2, ...)``,
    that is ``(q_1 cos - q_2 sin, q_1 sin + q_2 cos)`` for each pair: the
    *counter-clockwise* rotation ``R(+p theta_i)``. Written with repeated cosines and a
    swapped copy of ``x``, not with :mod:`posenc.rope`, so it is an independent reference
    for :func:`posenc.rope.apply_rope` (layout ``"interleaved"``).

    Args:
        x: head vectors ``[..., T, D]`` (D even), floating.
        positions: ``T`` integer positions (default ``0 .. T-1``); negative ones allowed.
        base: frequency base.

    Returns:
        The rotated vectors, same shape, dtype and device as ``x``; angles are computed in
        float32 (float64 for float64 input).

    Raises:
        TypeError: if ``x`` is not a floating tensor or positions are not integers.
        ValueError: for an odd or zero ``D``, no positions, or positions of the wrong length.

    Example:
        >>> x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)  # one pair at position 1
        >>> elementwise_rope(x, [1])  # (cos 1, sin 1): turned counter-clockwise
        tensor([[0.5403, 0.8415]], dtype=torch.float64)
    """
    x, p = _check_rope_input(x, positions)
    dtype = _angle_dtype(x)
    theta = rope_inv_freq(x.shape[-1], base).to(device=x.device, dtype=dtype)  # [D/2]
    angles = p.to(dtype)[..., None] * theta  # [..., T, D/2]
    cos = angles.cos().repeat_interleave(2, dim=-1)  # [T, D]: c1 c1 c2 c2 ...
    sin = angles.sin().repeat_interleave(2, dim=-1)  # [T, D]
    xf = x.to(dtype)
    swapped = torch.stack([-xf[..., 1::2], xf[..., 0::2]], dim=-1).flatten(-2)  # [..., T, D]
    return (xf * cos + swapped * sin).to(x.dtype)


# --- scores over many positions ----------------------------------------------------------


@same_device(copied=("positions",))
def score_grid(
    q: torch.Tensor,
    k: torch.Tensor,
    positions,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> torch.Tensor:
    """RoPE scores ``S[a, b] = <R_m q, R_n k>`` with ``m = positions[a]``, ``n = positions[b]``.

    The same query vector ``q`` and key vector ``k`` are placed at every position of the
    grid and rotated with :func:`posenc.rope.apply_rope`.

    Args:
        q, k: one query and one key, ``[D]`` each (D even).
        positions: ``N`` integer positions (negative ones allowed).
        base: frequency base.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        ``[N, N]`` scores, in ``q``'s dtype and device.

    Raises:
        TypeError: if ``q`` or ``k`` is not a floating tensor, or positions not integers.
        ValueError: if ``q`` and ``k`` are not equal-length vectors of even size, the
            positions are empty or not 1-D, or ``layout`` is unknown.

    Example:
        >>> q, k = torch.randn(2, 8, dtype=torch.float64)
        >>> s = score_grid(q, k, [0, 1, 2, 3])
        >>> torch.allclose(s.diagonal(1), s[0, 1].expand(3))  # offset 1 everywhere
        True
    """
    _check_head_vector("q", q)
    _check_vector("k", k, q.shape[0])
    check_layout(layout)
    check_base("base", base)
    p = check_positions("positions", positions, nonnegative=False).to(q.device)
    n, dim = p.numel(), q.shape[0]
    rq = apply_rope(q.expand(n, dim), p, base=base, layout=layout)  # [N, D]
    rk = apply_rope(k.to(q).expand(n, dim), p, base=base, layout=layout)  # [N, D]
    return rq @ rk.T


@same_device(copied=("offsets",))
def relative_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    offsets,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> torch.Tensor:
    """``<q, R_d k>`` for each offset ``d``: the right-hand side of RoPE's identity.

    ``<R_m q, R_n k> = <q, R_(n-m) k>``, so ``score_grid(q, k, positions)[a, b]`` equals
    ``relative_scores(q, k, [n - m])`` with ``m = positions[a]`` and ``n = positions[b]``.

    Args:
        q, k: one query and one key, ``[D]`` each (D even).
        offsets: ``N`` integer offsets ``d = n - m`` (negative ones allowed).
        base: frequency base.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        ``[N]`` scores, in ``q``'s dtype and device.

    Raises:
        TypeError, ValueError: as :func:`score_grid`.

    Example:
        >>> q, k = torch.randn(2, 8, dtype=torch.float64)
        >>> torch.allclose(relative_scores(q, k, [3]), score_grid(q, k, [10, 13])[0, 1])
        True
    """
    _check_head_vector("q", q)
    _check_vector("k", k, q.shape[0])
    check_layout(layout)
    check_base("base", base)
    d = check_positions("offsets", offsets, nonnegative=False).to(q.device)
    rk = apply_rope(k.to(q).expand(d.numel(), q.shape[0]), d, base=base, layout=layout)
    return rk @ q  # [N]


def _check_grid(name: str, scores: object, count: int) -> None:
    check_tensor(name, scores, min_dim=2)
    if scores.dim() != 2 or scores.shape[0] != scores.shape[1]:
        raise ValueError(f"{name} must be square [N, N], got shape {tuple(scores.shape)}")
    if scores.shape[0] != count:
        raise ValueError(
            f"{name} is [{scores.shape[0]}, {scores.shape[0]}] but {count} positions given"
        )


def score_grid_figure(
    scores: torch.Tensor, positions, *, ax=None, title: str = "", colorbar: bool = True
):
    """Draw a score grid ``S[m, n]``: queries down, keys across.

    A score that depends only on ``n - m`` is constant along every diagonal, which shows as
    stripes running from the top left to the bottom right. The colour map is the book's
    diverging one, centred on zero.

    Args:
        scores: ``[N, N]``, e.g. from :func:`score_grid`.
        positions: the ``N`` integer positions of the rows and columns.
        ax: axes to draw into; a new figure when None.
        title: axes title.
        colorbar: draw a colour bar beside the axes (leave it out for grids that share
            one, e.g. two panels on the same scale).

    Returns:
        The axes.

    Raises:
        TypeError: if ``scores`` is not a floating tensor or positions not integers.
        ValueError: if ``scores`` is not square or does not match the positions.

    Example:
        >>> ax = score_grid_figure(torch.eye(3), [0, 1, 2])
        >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    p = check_positions("positions", positions, nonnegative=False)
    _check_grid("scores", scores, p.numel())
    check_bool("colorbar", colorbar)
    s = scores.detach().double().cpu()
    if ax is None:
        _, ax = plots.figure(height=4.0)
    limit = max(s.abs().max().item(), 1e-12)
    lo, hi = p[0].item(), p[-1].item()
    with mpl.rc_context(plots.STYLE):
        image = ax.imshow(
            s.numpy(),
            cmap=plots.DIVERGING,
            vmin=-limit,
            vmax=limit,
            extent=(lo - 0.5, hi + 0.5, hi + 0.5, lo - 0.5),
        )
        ax.grid(False)
        ax.set_xlabel("key position n")
        ax.set_ylabel("query position m")
        if colorbar:
            ax.figure.colorbar(image, ax=ax, shrink=0.8, panchor=False, label="score")
        ax.set_title(title)
    return ax


def score_grids_figure(grids: dict, positions):
    """One or two score grids side by side, on one colour scale with one colour bar below.

    Each panel is drawn by :func:`score_grid_figure` (queries down, keys across); the
    panels share the query axis and a symmetric colour scale, so that equal scores have
    equal colours in both.

    Args:
        grids: title -> ``[N, N]`` scores, one or two entries.
        positions: the ``N`` integer positions of the rows and columns.

    Returns:
        The matplotlib figure.

    Raises:
        TypeError: if a grid is not a floating tensor or positions are not integers.
        ValueError: if ``grids`` is empty or has more than two entries, or a grid is not
            square or does not match the positions.

    Example:
        >>> fig = score_grids_figure({"a": torch.eye(3), "b": -torch.eye(3)}, [0, 1, 2])
        >>> len(fig.axes)  # two panels and one colour bar
        3
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    if not isinstance(grids, dict) or not 1 <= len(grids) <= 2:
        raise ValueError(
            f"grids must be a dict of one or two title -> [N, N] scores, got {grids!r}"
        )
    p = check_positions("positions", positions, nonnegative=False)
    for title, scores in grids.items():
        _check_grid(f"grids[{title!r}]", scores, p.numel())
    count = len(grids)
    fig, axes = plots.figure(1, count, height=4.6, sharey=True)
    axes = [axes] if count == 1 else list(axes)
    limit = max(max(g.detach().abs().max().item() for g in grids.values()), 1e-12)
    for j, (ax, (title, scores)) in enumerate(zip(axes, grids.items(), strict=True)):
        score_grid_figure(scores, positions, ax=ax, title=title, colorbar=False)
        ax.images[0].set_clim(-limit, limit)
        if j:
            ax.set_ylabel("")
    plots.colorbar_below(axes[0].images[0], axes, label="score")
    return fig


# --- the score of two tokens -------------------------------------------------------------


def random_projections(
    embed_dim: int, head_dim: int, *, seed: int = 0, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two seeded projection matrices ``W_q``, ``W_k`` from the model width to one head.

    Entries are drawn from ``N(0, 1/E)``, so a projected vector's features have about the
    same size as the input's. They are drawn on the CPU from their own generator: the same
    seed gives the same matrices on every machine.

    Args:
        embed_dim: model width ``E``.
        head_dim: head features ``D``.
        seed: seed of the generator.
        dtype: floating dtype of the result.

    Returns:
        ``(w_q, w_k)``, each ``[E, D]`` (a row vector ``x [E]`` projects as ``x @ w_q``).

    Raises:
        TypeError: if a size or the seed is not an int, or ``dtype`` is not floating.
        ValueError: if a size is not positive.

    Example:
        >>> w_q, w_k = random_projections(16, 4)
        >>> w_q.shape, torch.equal(w_q, random_projections(16, 4)[0])
        (torch.Size([16, 4]), True)
    """
    check_int("embed_dim", embed_dim, minimum=1)
    check_int("head_dim", head_dim, minimum=1)
    check_int("seed", seed)
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(2, embed_dim, head_dim, generator=gen, dtype=torch.float64)
    w = (w / math.sqrt(embed_dim)).to(dtype)
    return w[0], w[1]


@same_device(copied=("query_positions", "key_positions"))
def pair_scores(
    x_query: torch.Tensor,
    x_key: torch.Tensor,
    query_positions,
    key_positions,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    *,
    encoding: str = "rope",
    base: float = 10000.0,
) -> torch.Tensor:
    """The attention score of one token attending to another, placed at given positions.

    For each ``j``, the token embedded as ``x_query`` sits at ``m = query_positions[j]``
    and the one embedded as ``x_key`` at ``n = key_positions[j]``; the score is ``q . k``
    with

    - ``"rope"``: ``q = R_m (x_query W_q)``, ``k = R_n (x_key W_k)`` (interleaved RoPE);
    - ``"sinusoidal"``: ``q = (x_query + PE(m)) W_q``, ``k = (x_key + PE(n)) W_k``, the
      sinusoidal encoding of width ``E`` added before the projections;
    - ``"none"``: ``q = x_query W_q``, ``k = x_key W_k`` (positions ignored).

    No scaling by ``sqrt(D)``: it would multiply every score by the same number.

    Args:
        x_query, x_key: embeddings ``[E]``.
        query_positions, key_positions: ``N`` integer positions each (non-negative for
            ``"sinusoidal"``, whose table starts at 0).
        w_q, w_k: projections ``[E, D]`` (D even for ``"rope"``).
        encoding: one of :data:`ENCODINGS`.
        base: frequency base of RoPE or of the sinusoidal encoding.

    Returns:
        ``[N]`` scores, in ``x_query``'s dtype and device.

    Raises:
        TypeError: if a tensor is not floating or positions are not integers.
        ValueError: if shapes do not fit, the two position lists differ in length, a
            sinusoidal position is negative, or ``encoding`` is unknown.

    Example:
        >>> w_q, w_k = random_projections(8, 4)
        >>> a, b = torch.randn(2, 8)
        >>> s = pair_scores(a, b, [1, 7], [4, 10], w_q, w_k)  # offset 3 twice
        >>> torch.allclose(s[0], s[1], atol=1e-6)
        True
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got encoding={encoding!r}")
    _check_vector("x_query", x_query)
    embed_dim = x_query.shape[0]
    _check_vector("x_key", x_key, embed_dim)
    check_base("base", base)
    for name, w in (("w_q", w_q), ("w_k", w_k)):
        check_tensor(name, w, min_dim=2)
        if w.dim() != 2 or w.shape[0] != embed_dim:
            raise ValueError(f"{name} must have shape [E={embed_dim}, D], got {tuple(w.shape)}")
    if w_q.shape != w_k.shape:
        raise ValueError(
            f"w_q and w_k must have the same shape, got {tuple(w_q.shape)}, {tuple(w_k.shape)}"
        )
    nonnegative = encoding == "sinusoidal"
    m = check_positions("query_positions", query_positions, nonnegative=nonnegative)
    n = check_positions("key_positions", key_positions, nonnegative=nonnegative)
    if m.numel() != n.numel():
        raise ValueError(
            f"query_positions and key_positions must have equal length, got {m.numel()} and {n.numel()}"
        )
    device, dtype = x_query.device, x_query.dtype
    w_q, w_k, x_key = w_q.to(device, dtype), w_k.to(device, dtype), x_key.to(device, dtype)
    count, head_dim = m.numel(), w_q.shape[1]
    if encoding == "rope":
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head dimension, got D={head_dim}")
        q = apply_rope((x_query @ w_q).expand(count, head_dim), m.to(device), base=base)
        k = apply_rope((x_key @ w_k).expand(count, head_dim), n.to(device), base=base)
    elif encoding == "sinusoidal":
        if embed_dim % 2:
            raise ValueError(f"the sinusoidal encoding needs an even width, got E={embed_dim}")
        table = sinusoidal_encoding(int(max(m.max(), n.max())) + 1, embed_dim, base)
        table = table.to(device, dtype)  # [max position + 1, E]
        q = (x_query + table[m.to(device)]) @ w_q  # [N, D]
        k = (x_key + table[n.to(device)]) @ w_k  # [N, D]
    elif encoding == "none":
        q = (x_query @ w_q).expand(count, head_dim)
        k = (x_key @ w_k).expand(count, head_dim)
    else:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got encoding={encoding!r}")
    return (q * k).sum(dim=-1)


def offset_sweep_figure(starts, scores: dict, *, offset: int, ax=None, title: str = ""):
    """Scores of the same two tokens at positions ``(s, s + offset)`` for each start ``s``.

    Args:
        starts: ``N`` integer start positions.
        scores: label -> ``[N]`` scores (e.g. one curve per encoding from
            :func:`pair_scores`), at most :data:`posenc.display.plots.MAX_LINES` curves; with more
            than one, a legend below the axes names them.
        offset: the fixed distance between the two tokens (for the axis label).
        ax: axes to draw into; a new figure when None.
        title: axes title.

    Returns:
        The axes.

    Raises:
        TypeError: if a curve is not a floating tensor or ``offset`` not an int.
        ValueError: if ``scores`` is empty, has more than ``MAX_LINES`` curves, or a curve
            does not have ``N`` values.

    Example:
        >>> ax = offset_sweep_figure([0, 1], {"rope": torch.ones(2)}, offset=3)
        >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    s = check_positions("starts", starts, nonnegative=False)
    check_int("offset", offset)
    if not isinstance(scores, dict) or not scores:
        raise ValueError(f"scores must be a non-empty dict of label -> [N] scores, got {scores!r}")
    if len(scores) > plots.MAX_LINES:
        raise ValueError(
            f"scores must have at most {plots.MAX_LINES} curves (one axes), got {len(scores)}"
        )
    curves = {}
    for label, curve in scores.items():
        _check_vector(f"scores[{label!r}]", curve, s.numel())
        curves[label] = curve.detach().double().cpu()
    if ax is None:
        _, ax = plots.figure(height=3.0)
    with mpl.rc_context(plots.STYLE):
        for i, (label, curve) in enumerate(curves.items()):
            ax.plot(s.numpy(), curve.numpy(), ["-o", "-s", "-^", "-v"][i % 4], ms=3, label=label)
        ax.set_xlabel(f"position s of the query (key at s + {offset})")
        ax.set_ylabel("score q · k")
        if len(curves) > 1:
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=len(curves))
        ax.set_title(title)
    return ax


# --- chapter 1's layer with RoPE ---------------------------------------------------------


@same_device(copied=("positions",))
def rope_attention(
    layer: DemoAttention,
    x: torch.Tensor,
    *,
    positions=None,
    rope: bool = True,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run a :class:`posenc.DemoAttention` layer by hand, with RoPE inside every head.

    The layer's own weights are used: ``W_q``, ``W_k``, ``W_v``, then the query, key and
    value rows of ``mha.in_proj_weight`` (and bias), a split into ``H`` heads of ``D = E/H``
    features, RoPE on each head's queries and keys, ``softmax(q k^T / sqrt(D)) v`` per
    head, the heads joined again and ``mha.out_proj``. With ``rope=False`` this is exactly
    what ``nn.MultiheadAttention`` computes, so it reproduces ``layer(x)`` up to float
    rounding.

    Args:
        layer: the demonstration layer.
        x: token embeddings ``[B, T, E]``.
        positions: ``T`` integer positions for RoPE (default ``0 .. T-1``); only with
            ``rope=True``.
        rope: rotate queries and keys (True) or not (False).
        base: RoPE's frequency base.
        layout: RoPE's pairing, ``"interleaved"`` or ``"half"``.

    Returns:
        ``(out, weights)``: outputs ``[B, T, E]`` and the attention weights averaged over
        heads ``[B, T, T]``, as ``layer(x)`` returns them.

    Raises:
        TypeError: if ``layer`` is not a DemoAttention, ``x`` not a floating tensor or
            ``rope`` not a bool.
        ValueError: if ``x`` is not ``[B, T, E]`` with the layer's ``E``, positions are
            given with ``rope=False`` or do not fit, the head size is odd, or ``layout`` is
            unknown.

    Example:
        >>> layer = DemoAttention(8, num_heads=2, seed=0)
        >>> x = torch.randn(1, 3, 8)
        >>> with torch.no_grad():
        ...     same = torch.allclose(rope_attention(layer, x, rope=False)[0], layer(x)[0],
        ...                           atol=1e-6)
        >>> same
        True
    """
    if not isinstance(layer, DemoAttention):
        raise TypeError(f"layer must be a posenc.DemoAttention, got {type(layer).__name__}")
    if not isinstance(rope, bool):
        raise TypeError(f"rope must be a bool, got {rope!r}")
    mha = layer.mha
    check_base("base", base)
    check_tensor("x", x, min_dim=3)
    if x.dim() != 3 or x.shape[-1] != mha.embed_dim:
        raise ValueError(
            f"x must have shape [B, T, E] with E={mha.embed_dim}, got shape {tuple(x.shape)}"
        )
    check_layout(layout)
    batch, length, width = x.shape
    heads = mha.num_heads
    head_dim = width // heads
    if rope and head_dim % 2:
        raise ValueError(f"RoPE needs an even head size, got D = E / H = {head_dim}")
    if not rope and positions is not None:
        raise ValueError("positions are used only with rope=True")
    w_in = mha.in_proj_weight.chunk(3)  # 3 x [E, E]: query, key, value rows
    b_in = (None,) * 3 if mha.in_proj_bias is None else mha.in_proj_bias.chunk(3)
    inputs = (layer.w_q(x), layer.w_k(x), layer.w_v(x))  # 3 x [B, T, E]
    q, k, v = (
        functional.linear(inp, w, b).view(batch, length, heads, head_dim).transpose(1, 2)
        for inp, w, b in zip(inputs, w_in, b_in, strict=True)
    )  # each [B, H, T, D]
    if rope:
        q = apply_rope(q, positions, base=base, layout=layout)
        k = apply_rope(k, positions, base=base, layout=layout)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(head_dim)).softmax(dim=-1)  # [B, H, T, T]
    joined = (weights @ v).transpose(1, 2).reshape(batch, length, width)  # [B, T, E]
    return mha.out_proj(joined), weights.mean(dim=1)


def distance_figure(distances: dict, labels: Sequence[str]):
    """Distances between the outputs of every pair of tokens, side by side, one colour scale.

    One panel per entry of ``distances`` (one or two), all on the same logarithmic colour
    scale with one colour bar below, so that a pair at float-rounding distance in one panel
    and an ordinary pair in another look as different as they are. The diagonal (a token
    with itself, distance 0) is left blank.

    Args:
        distances: title -> ``[T, T]`` non-negative distances, one or two entries.
        labels: ``T`` token labels, shown as given: keep them short (a word, ``"BOS"`` for
            a start token) so that two panels fit the column.

    Returns:
        The matplotlib figure.

    Raises:
        TypeError: if a matrix is not a floating tensor.
        ValueError: if ``distances`` is empty or has more than two entries, a matrix is
            not ``[T, T]`` with ``T`` the number of labels, an entry is negative, or no
            off-diagonal entry is positive.

    Example:
        >>> d = torch.tensor([[0.0, 1e-5], [1e-5, 0.0]])
        >>> fig = distance_figure({"a": d, "b": 1e3 * d}, ["x", "y"])
        >>> len(fig.axes)  # two panels and one colour bar
        3
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    if not isinstance(distances, dict) or not distances:
        raise ValueError(
            f"distances must be a non-empty dict of title -> [T, T] distances, got {distances!r}"
        )
    if len(distances) > 2:
        raise ValueError(
            f"distances must have at most 2 entries (two panels fit the column), "
            f"got {len(distances)}"
        )
    size = len(check_str_sequence("labels", labels))
    off_diagonal = ~torch.eye(size, dtype=torch.bool)
    mats = {}
    for title, dist in distances.items():
        check_tensor(f"distances[{title!r}]", dist, min_dim=2)
        if tuple(dist.shape) != (size, size):
            raise ValueError(
                f"distances[{title!r}] must be [T, T] with T={size} labels, "
                f"got shape {tuple(dist.shape)}"
            )
        d = dist.detach().double().cpu()
        if bool((d < 0).any()):
            raise ValueError(f"distances[{title!r}] must be non-negative")
        mats[title] = d
    positive = torch.cat([d[off_diagonal] for d in mats.values()])
    positive = positive[positive > 0]
    if positive.numel() == 0:
        raise ValueError("distances need at least one positive off-diagonal entry")
    norm = mpl.colors.LogNorm(vmin=positive.min().item(), vmax=positive.max().item())
    count = len(mats)
    fig, axes = plots.figure(1, count, height=5.2, sharey=True)
    axes = [axes] if count == 1 else list(axes)
    with mpl.rc_context(plots.STYLE):
        for ax, (title, d) in zip(axes, mats.items(), strict=True):
            shown = d.clone()
            shown[~off_diagonal] = float("nan")  # blank diagonal
            shown[shown <= 0] = positive.min()  # an exact 0 between different tokens
            image = ax.imshow(shown.numpy(), norm=norm, cmap=plots.SEQUENTIAL)
            ax.set_xticks(range(size), labels, rotation=45, ha="right")
            ax.set_yticks(range(size), labels)
            ax.grid(False)
            ax.set_title(title)
        plots.colorbar_below(image, axes, label="L2 distance")
    return fig


# --- the RoPE playground -----------------------------------------------------------------


def playground_vectors(dim: int = 8, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The query and key of the playground: seeded float64 vectors ``[D]``.

    Args:
        dim: head features ``D`` (even).
        seed: seed of the CPU generator.

    Returns:
        ``(q, k)``, float64 ``[D]`` each, drawn from ``N(0, 1)``.

    Raises:
        TypeError, ValueError: if ``dim`` is not a positive even int or ``seed`` not an int.

    Example:
        >>> q, k = playground_vectors(4)
        >>> q.shape, q.dtype
        (torch.Size([4]), torch.float64)
    """
    check_even_dim("dim", dim)
    check_int("seed", seed)
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, dim, generator=gen, dtype=torch.float64)
    return q, k


def _wrapped_angle(a: torch.Tensor, b: torch.Tensor) -> float:
    """The angle from 2-D vector ``a`` to ``b``, counter-clockwise, in ``(-pi, pi]``."""
    turn = math.atan2(b[1].item(), b[0].item()) - math.atan2(a[1].item(), a[0].item())
    turn = math.remainder(turn, 2 * math.pi)  # in [-pi, pi]
    return math.pi if turn == -math.pi else turn


def playground_state(
    m: int, n: int, pair: int = 0, *, dim: int = 8, base: float = 10000.0, seed: int = 0
) -> dict:
    """Everything the playground shows for a query at ``m`` and a key at ``n``.

    The vectors are :func:`playground_vectors` ``(dim, seed=seed)``, rotated with
    :func:`posenc.rope.apply_rope` (interleaved: pair ``i`` is features ``2i, 2i+1``).

    Args:
        m: the query's position.
        n: the key's position.
        pair: which pair ``i`` to look at, ``0 .. D/2 - 1``.
        dim: head features ``D`` (even).
        base: frequency base.
        seed: seed of the vectors.

    Returns:
        A dict with ``theta`` (pair ``i``'s frequency, rad per position), ``q_pair`` and
        ``k_pair`` (pair ``i`` before rotation, float64 ``[2]``), ``rq_pair`` and ``rk_pair``
        (after: turned by ``m theta`` and ``n theta``), ``angle`` (from the rotated query pair to the rotated key pair, counter-clockwise,
        in ``(-pi, pi]``), ``pair_score`` (their dot product)
        and ``score`` (the dot product of the whole rotated vectors: the sum over pairs).

    Raises:
        TypeError: if a position, ``pair``, ``dim`` or ``seed`` is not an int.
        ValueError: if ``pair`` is out of range, ``dim`` odd or ``base`` below 2**-64 or not finite.

    Example:
        >>> a, b = playground_state(2, 5), playground_state(12, 15)
        >>> math.isclose(a["score"], b["score"], rel_tol=1e-9)
        True
    """
    check_int("m", m)
    check_int("n", n)
    q, k = playground_vectors(dim, seed=seed)
    check_int("pair", pair, minimum=0)
    if pair >= dim // 2:
        raise ValueError(f"pair must be in 0 .. {dim // 2 - 1} (D={dim}), got pair={pair}")
    base = check_base("base", base)
    rq = apply_rope(q[None], [m], base=base)[0]  # [D]
    rk = apply_rope(k[None], [n], base=base)[0]  # [D]
    rq_pairs, rk_pairs = rq.view(-1, 2), rk.view(-1, 2)  # [D/2, 2]
    return {
        "theta": rope_inv_freq(dim, base)[pair].item(),
        "q_pair": q.view(-1, 2)[pair],
        "k_pair": k.view(-1, 2)[pair],
        "rq_pair": rq_pairs[pair],
        "rk_pair": rk_pairs[pair],
        "angle": _wrapped_angle(rq_pairs[pair], rk_pairs[pair]),
        "pair_score": (rq_pairs[pair] @ rk_pairs[pair]).item(),
        "score": (rq @ rk).item(),
    }


def _fmt(value: float, digits: int = 3) -> str:
    return f"{round(value, digits) + 0.0:.{digits}f}"  # "+ 0.0" turns -0.000 into 0.000


def _arrow(ax, xy, color, *, faint: bool = False):
    ax.annotate(
        "",
        xy=(float(xy[0]), float(xy[1])),
        xytext=(0, 0),
        arrowprops={
            "arrowstyle": "-|>",
            "color": color,
            "lw": 1.2 if faint else 2.2,
            "alpha": 0.35 if faint else 1.0,
            "linestyle": "--" if faint else "-",
            "shrinkA": 0,
            "shrinkB": 0,
        },
    )


def playground_figure(
    m: int = 2, n: int = 5, pair: int = 0, *, dim: int = 8, base: float = 10000.0, seed: int = 0
):
    """The RoPE playground for one setting: a pair of the query and key, turned, and the score.

    Left: pair ``i`` of the query (blue) and of the key (orange) before rotation (faint,
    dashed) and after (solid): the query turned by ``m theta_i``, the key by ``n theta_i``.
    Right: the legend and the numbers: positions, offset, angles, the pair's score and the
    whole score.

    Args:
        m, n, pair, dim, base, seed: as :func:`playground_state`.

    Returns:
        The matplotlib figure; show it with :func:`posenc.display.plots.show`.

    Raises:
        TypeError, ValueError: as :func:`playground_state`.

    Example:
        >>> fig = playground_figure(2, 5)
        >>> "offset n - m = 3" in fig.axes[1].texts[0].get_text()
        True
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    s = playground_state(m, n, pair, dim=dim, base=base, seed=seed)
    fig, (ax, ax_text) = plots.figure(1, 2, height=3.9)
    blue, orange, grey = plots.COLORS["blue"], plots.COLORS["orange"], plots.COLORS["grey"]
    radius = max(s["q_pair"].norm().item(), s["k_pair"].norm().item())
    reach = 1.2 * radius
    with mpl.rc_context(plots.STYLE):
        for vec in (s["q_pair"], s["k_pair"]):
            ring = mpl.patches.Circle((0, 0), vec.norm().item(), fill=False, color=grey, lw=0.6)
            ax.add_patch(ring)
        ax.axhline(0, color=grey, lw=0.6)
        ax.axvline(0, color=grey, lw=0.6)
        handles = []
        for before, after, color, label in (
            (s["q_pair"], s["rq_pair"], blue, f"query pair at m = {m}"),
            (s["k_pair"], s["rk_pair"], orange, f"key pair at n = {n}"),
        ):
            _arrow(ax, before, color, faint=True)
            _arrow(ax, after, color)
            handles.append(mpl.lines.Line2D([], [], color=color, lw=2.2, label=label))
        handles.append(
            mpl.lines.Line2D([], [], color=grey, lw=1.2, ls="--", label="before rotation")
        )
        ax.set_xlim(-reach, reach)
        ax.set_ylim(-reach, reach)
        ax.set_aspect("equal")
        ax.set_xlabel(f"feature {2 * pair}")
        ax.set_ylabel(f"feature {2 * pair + 1}")
        ax.set_title(f"pair {pair} of {dim // 2}")
        theta = s["theta"]
        lines = [
            f"pair i = {pair}: θ_i = {theta:.4g} rad/position",
            f"query at m = {m}: turned {_fmt(m * theta)} rad",
            f"key   at n = {n}: turned {_fmt(n * theta)} rad",
            f"offset n - m = {n - m}",
            f"angle from query to key = {_fmt(s['angle'])} rad",
            "",
            f"score of this pair  = {_fmt(s['pair_score'])}",
            f"score of all {dim // 2} pairs = {_fmt(s['score'])}",
            "",
            "move m and n together:",
            "angle and scores stay the same",
        ]
        ax_text.axis("off")
        ax_text.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, 1.0))
        ax_text.text(
            0.0,
            0.0,
            "\n".join(lines),
            family="monospace",
            va="bottom",
            ha="left",
            color=plots.COLORS["ink"],
            transform=ax_text.transAxes,
        )
    return fig


def playground(
    m: int = 2, n: int = 5, pair: int = 0, *, dim: int = 8, base: float = 10000.0, seed: int = 0
) -> None:
    """Display the live RoPE playground: sliders for ``m`` and ``n``, a pair selector.

    Each change redraws :func:`playground_figure`. Needs a running Jupyter or Colab kernel
    with ``ipywidgets`` (imported here, not at module import); the HTML book shows a static
    :func:`playground_figure` instead.

    Args:
        m, n: starting positions, ``0 .. 64``.
        pair: starting pair, ``0 .. D/2 - 1``.
        dim, base, seed: as :func:`playground_state` (fixed while the sliders move).

    Raises:
        TypeError, ValueError: as :func:`playground_state`, or if a starting position is
            outside ``0 .. 64``.
        ImportError: if ``ipywidgets`` is not installed.
    """
    playground_state(m, n, pair, dim=dim, base=base, seed=seed)  # validates everything
    for name, value in (("m", m), ("n", n)):
        if not 0 <= value <= _MAX_SLIDER_POSITION:
            raise ValueError(
                f"{name} must be in 0 .. {_MAX_SLIDER_POSITION} for the slider, got {name}={value}"
            )
    import ipywidgets as widgets
    from IPython.display import display

    theta = rope_inv_freq(dim, base)
    controls = {
        "m": widgets.IntSlider(
            value=m,
            min=0,
            max=_MAX_SLIDER_POSITION,
            description="query m",
            continuous_update=False,
        ),
        "n": widgets.IntSlider(
            value=n,
            min=0,
            max=_MAX_SLIDER_POSITION,
            description="key n",
            continuous_update=False,
        ),
        "pair": widgets.Dropdown(
            options=[(f"pair {i} (θ = {theta[i].item():.3g})", i) for i in range(dim // 2)],
            value=pair,
            description="pair",
        ),
    }

    def redraw(m: int, n: int, pair: int) -> None:
        plots.show(playground_figure(m, n, pair, dim=dim, base=base, seed=seed))

    output = widgets.interactive_output(redraw, controls)
    display(widgets.VBox([widgets.HBox(list(controls.values())), output]))


# --- the rotation animation --------------------------------------------------------------


def _check_pair_vector(vector: object) -> torch.Tensor:
    x, y = check_real_pair("vector", vector)
    if x == 0 and y == 0:
        raise ValueError("vector must not be zero (it would not show a rotation)")
    return torch.tensor([x, y], dtype=torch.float64)


def rotation_frames(
    num_positions: int = 24,
    pairs: Sequence[int] = (0, 1),
    *,
    dim: int = 8,
    base: float = 10000.0,
    vector=(1.0, 0.3),
) -> tuple[torch.Tensor, torch.Tensor]:
    """The data of the rotation animation: one query pair turned at each position.

    Every pair of a query of ``D`` features is set to ``vector``; the query is rotated with
    :func:`posenc.rope.apply_rope` at positions ``0 .. num_positions - 1`` and the pairs in
    ``pairs`` are kept.

    Args:
        num_positions: positions ``F`` (2 .. 40), one frame each.
        pairs: the pairs ``i`` to follow (distinct, each in ``0 .. D/2 - 1``).
        dim: head features ``D`` (even).
        base: frequency base.
        vector: the pair before rotation, two numbers, not both zero.

    Returns:
        ``(points, theta)``: float64 ``[F, P, 2]``, pair ``pairs[j]`` at position ``p`` in
        ``points[p, j]``; and float64 ``[P]``, each followed pair's frequency.

    Raises:
        TypeError: if a count, pair or ``dim`` is not an int, or ``vector`` is malformed.
        ValueError: for a count outside 2 .. 40, pairs repeated or out of range, or a zero
            ``vector``.

    Example:
        >>> points, theta = rotation_frames(4, (0,), dim=2, vector=(1.0, 0.0))
        >>> points[1, 0]  # position 1 turns pair 0 by theta_0 = 1 rad
        tensor([0.5403, 0.8415], dtype=torch.float64)
    """
    check_int("num_positions", num_positions, minimum=2)
    if num_positions > MAX_FRAMES:
        raise ValueError(
            f"num_positions must be at most {MAX_FRAMES} (one frame each), got {num_positions}"
        )
    check_even_dim("dim", dim)
    check_base("base", base)
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence) or not pairs:
        raise TypeError(f"pairs must be a non-empty sequence of ints, got {pairs!r}")
    for i in pairs:
        check_int("pairs entry", i, minimum=0)
        if i >= dim // 2:
            raise ValueError(f"pairs entries must be in 0 .. {dim // 2 - 1} (D={dim}), got {i}")
    if len(set(pairs)) != len(pairs):
        raise ValueError(f"pairs must be distinct, got {list(pairs)}")
    v = _check_pair_vector(vector)
    query = v.repeat(dim // 2)  # [D]: every pair set to vector
    rotated = apply_rope(query.expand(num_positions, dim), base=base)  # [F, D]
    index = torch.tensor(list(pairs))
    points = rotated.view(num_positions, dim // 2, 2)[:, index]  # [F, P, 2]
    return points, rope_inv_freq(dim, base)[index]


def _pair_panel(ax, start: torch.Tensor, radius: float, color: str, title: str) -> tuple:
    """One pair's panel of :func:`rotation_animation`: its circle, the arrow to ``start``, an
    empty trail and label; returns ``(trail, arrow, label)`` for the frames to update."""
    reach = 1.25 * radius
    ring = mpl.patches.Circle((0, 0), radius, fill=False, color=plots.COLORS["grey"], lw=0.8)
    ax.add_patch(ring)
    ax.axhline(0, color=plots.COLORS["grey"], lw=0.6)
    ax.axvline(0, color=plots.COLORS["grey"], lw=0.6)
    trail = ax.scatter([], [], s=16, color=color)
    arrow = ax.annotate(
        "",
        xy=tuple(start.tolist()),
        xytext=(0, 0),
        arrowprops={"arrowstyle": "-|>", "color": color, "lw": 2.2, "shrinkA": 0},
    )
    # no ticks: the axis machinery and spines are hidden, and the angle is a plain text
    # under the circle (cheaper to redraw in every frame than an axis label)
    label = ax.text(0.5, -0.03, " ", transform=ax.transAxes, ha="center", va="top")
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-reach, reach)
    ax.set_aspect("equal")
    ax.xaxis.set_visible(False)
    ax.yaxis.set_visible(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(title)
    return trail, arrow, label


def rotation_animation(
    num_positions: int = 24,
    pairs: Sequence[int] = (0, 1),
    *,
    dim: int = 8,
    base: float = 10000.0,
    vector=(1.0, 0.3),
    start: int | None = None,
    dpi: int = plots.CSS_DPI,
):
    """A query's pairs turning as its position advances, one panel per pair (one or two).

    Frame ``p`` shows each followed pair of the query at position ``p`` (an arrow) and
    where it was at the earlier positions (fading dots): a fast pair sweeps round the
    circle, a slow one creeps. The length never changes. The frames run over the positions
    in order and loop; the player opens on position ``start``, which already shows a trail,
    with its slider there too (the animation's ``start_frame``, which
    :func:`posenc.display.plots.animation_html` reads).

    Args:
        num_positions, pairs, dim, base, vector: as :func:`rotation_frames`; at most two
            pairs (panels side by side).
        start: the position the player opens on, ``0 .. num_positions - 1`` (default: a
            quarter of the way, ``num_positions // 4``).
        dpi: resolution of each frame, 20 .. :data:`posenc.display.plots.CSS_DPI` (the default:
            the player is shown at column width, its text as large as a static figure's).

    Returns:
        A ``matplotlib.animation.FuncAnimation``; display it with
        :func:`posenc.display.plots.animation_html`.

    Raises:
        TypeError, ValueError: as :func:`rotation_frames`, or for more than two pairs, a
            ``start`` out of range or a ``dpi`` outside 20 .. 100.

    Example:
        >>> anim = rotation_animation(3, dpi=20)
        >>> anim.to_jshtml().count("data:image/png")  # one image per frame
        3
        >>> import matplotlib.pyplot as plt; plt.close(anim._fig)
    """
    from matplotlib.animation import FuncAnimation

    points, theta = rotation_frames(num_positions, pairs, dim=dim, base=base, vector=vector)
    count = points.shape[1]
    if count > 2:
        raise ValueError(f"pairs must have at most 2 entries (one panel each), got {list(pairs)}")
    if start is None:
        start = num_positions // 4
    check_int("start", start, minimum=0)
    if start >= num_positions:
        raise ValueError(f"start must be below num_positions = {num_positions}, got start={start}")
    check_int("dpi", dpi, minimum=20)
    if dpi > plots.CSS_DPI:
        raise ValueError(f"dpi must be at most {plots.CSS_DPI}, got dpi={dpi}")
    fig, axes = plots.figure(1, count, height=4.0 if count == 2 else 4.6)
    fig.set_dpi(dpi)
    axes = [axes] if count == 1 else list(axes)
    radius = points[0, 0].norm().item()
    colors = [plots.COLORS[c] for c in ("blue", "orange")]
    artists = []
    with mpl.rc_context(plots.STYLE):
        for j, ax in enumerate(axes):
            title = f"pair {pairs[j]}: θ = {theta[j].item():.3g} rad/position"
            artists.append(_pair_panel(ax, points[0, j], radius, colors[j], title))
        title = fig.suptitle(" ")
    fig.canvas.draw()
    fig.set_layout_engine("none")  # keep the first layout: no re-solving per frame

    def update(p: int) -> list:
        changed = [title]
        title.set_text(f"query at position p = {p}")
        for j, (trail, arrow, label) in enumerate(artists):
            past = points[: p + 1, j]  # [p + 1, 2]
            trail.set_offsets(past.numpy())
            trail.set_alpha(None)
            trail.set_facecolors(
                [
                    (*mpl.colors.to_rgb(colors[j]), a)
                    for a in torch.linspace(0.15, 0.9, p + 1).tolist()
                ]
            )
            arrow.xy = tuple(points[p, j].tolist())
            turns = p * theta[j].item() / (2 * math.pi)
            label.set_text(f"angle p·θ = {p * theta[j].item():.1f} rad = {turns:.2f} turns")
            changed += [trail, arrow, label]
        return changed

    update(start)
    anim = FuncAnimation(fig, update, frames=num_positions, interval=250, repeat=True)
    anim.start_frame = start
    return anim
