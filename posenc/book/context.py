"""Position in the context of attention: what an added position vector does to ``q . k``.

With an additive encoding a token enters attention as ``x_i = e_i + p_i`` (content plus
position), so its query is ``(e_i + p_i) W_q`` and the score of query ``i`` against key
``j`` splits into four bilinear terms::

    q_i . k_j = e_i W_q . e_j W_k      content-content
              + e_i W_q . p_j W_k      content-position
              + p_i W_q . e_j W_k      position-content
              + p_i W_q . p_j W_k      position-position

This module computes the terms (:func:`score_terms` for every pair of a sequence,
:func:`pair_terms` for chosen (query, key) pairs), their sizes (:func:`term_rms`), the
sinusoidal encoding at the scale of a set of embeddings (:func:`scaled_sinusoidal`), seeded
projections (:func:`seeded_projections`), the same pair scored with RoPE for comparison
(:func:`rope_pair_scores`), and chapter 8's figures.

Shapes: ``T`` positions, ``E`` input features, ``D`` features of a query or key, ``M``
(query, key) pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import matplotlib as mpl
import torch

from posenc._validate import (
    check_base,
    check_int,
    check_int_sequence,
    check_positions,
    check_positive_float,
    check_str_sequence,
    check_tensor,
    same_device,
)
from posenc.display import plots
from posenc.encodings import sinusoidal_encoding
from posenc.rope import apply_rope
from posenc.rotation import rotation_matrix

__all__ = [
    "TERM_NAMES",
    "ScoreTerms",
    "dot_product_figure",
    "pair_terms",
    "pair_terms_figure",
    "rope_pair_scores",
    "scaled_sinusoidal",
    "score_terms",
    "seeded_projections",
    "span_basis",
    "term_rms",
    "terms_figure",
]

TERM_NAMES = ("content-content", "content-position", "position-content", "position-position")
"""The four terms of ``q . k`` in order: query side first, key side second."""


class ScoreTerms(NamedTuple):
    """The four terms of an additive score, each with the shape of the scores."""

    content_content: torch.Tensor
    content_position: torch.Tensor
    position_content: torch.Tensor
    position_position: torch.Tensor

    def total(self) -> torch.Tensor:
        """The sum of the four terms: the full score."""
        return (
            self.content_content
            + self.content_position
            + self.position_content
            + self.position_position
        )

    def named(self) -> dict[str, torch.Tensor]:
        """``{name: term}`` with the names of :data:`TERM_NAMES`."""
        return dict(zip(TERM_NAMES, self, strict=True))


def _check_projections(w_q: object, w_k: object, in_dim: int) -> None:
    check_tensor("w_q", w_q, min_dim=2)
    check_tensor("w_k", w_k, min_dim=2)
    if w_q.shape != w_k.shape:
        raise ValueError(
            f"w_q and w_k must have one shape [..., E, D], got {tuple(w_q.shape)} and "
            f"{tuple(w_k.shape)}"
        )
    if w_q.shape[-2] != in_dim:
        raise ValueError(
            f"w_q and w_k must be [..., E, D] with E={in_dim} (the inputs' features), "
            f"got {tuple(w_q.shape)}"
        )


def _check_sequence(content: object, position: object) -> None:
    check_tensor("content", content, min_dim=2)
    check_tensor("position", position, min_dim=2)
    if content.shape[-2:] != position.shape[-2:]:
        raise ValueError(
            f"content and position must both end in [T, E], got {tuple(content.shape)} and "
            f"{tuple(position.shape)}"
        )


@same_device
def score_terms(
    content: torch.Tensor, position: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor
) -> ScoreTerms:
    """The four terms of the raw score ``q_i . k_j``, each computed on its own.

    With ``x = content + position``, ``q = x W_q`` and ``k = x W_k``, the terms add up to
    ``q k^T`` (no ``1/sqrt(D)``, no softmax).

    Args:
        content: token vectors ``[..., T, E]``.
        position: position vectors ``[..., T, E]``.
        w_q, w_k: ``[E, D]`` or ``[H, E, D]``.

    Returns:
        A :class:`ScoreTerms` of four ``[..., T, T]`` tensors; ``.total()`` is the score.

    Raises:
        TypeError, ValueError: for non-tensors, shapes that do not match, or projections
            whose input size is not ``E``.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> e, p, wq, wk = (torch.randn(3, 3, generator=g, dtype=torch.float64) for _ in range(4))
        >>> torch.allclose(score_terms(e, p, wq, wk).total(), ((e + p) @ wq) @ ((e + p) @ wk).T)
        True
    """
    _check_sequence(content, position)
    _check_projections(w_q, w_k, content.shape[-1])
    qe, qp = content @ w_q, position @ w_q  # [..., T, D]
    ke, kp = content @ w_k, position @ w_k
    return ScoreTerms(qe @ ke.mT, qe @ kp.mT, qp @ ke.mT, qp @ kp.mT)


@same_device
def pair_terms(
    query_content: torch.Tensor,
    key_content: torch.Tensor,
    query_position: torch.Tensor,
    key_position: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
) -> ScoreTerms:
    """The four terms for chosen (query, key) pairs, one score per row.

    Row ``m`` scores the query ``query_content[m] + query_position[m]`` against the key
    ``key_content[m] + key_position[m]``. Contents may be single vectors ``[E]``, used for
    every row (the same two words at many places).

    Args:
        query_content, key_content: ``[E]`` or ``[M, E]``.
        query_position, key_position: ``[M, E]``.
        w_q, w_k: ``[E, D]`` or ``[H, E, D]``.

    Returns:
        A :class:`ScoreTerms` of four ``[M]`` tensors (``[H, M]`` for ``H`` heads).

    Raises:
        TypeError: if an input is not a floating tensor.
        ValueError: if shapes disagree.

    Example:
        >>> w = torch.eye(2)
        >>> dog, cat = torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0])
        >>> pos = torch.tensor([[0.0, 0.0], [0.0, 1.0]])  # two places
        >>> terms = pair_terms(dog, cat, pos, pos, w, w)
        >>> terms.content_content, terms.total()
        (tensor([1., 1.]), tensor([1., 3.]))
    """
    for name, t in (("query_position", query_position), ("key_position", key_position)):
        check_tensor(name, t, min_dim=2)
        if t.dim() != 2:
            raise ValueError(f"{name} must be [M, E], got shape {tuple(t.shape)}")
    if query_position.shape != key_position.shape:
        raise ValueError(
            f"query_position and key_position must have one shape, got "
            f"{tuple(query_position.shape)} and {tuple(key_position.shape)}"
        )
    m, e = query_position.shape
    for name, t in (("query_content", query_content), ("key_content", key_content)):
        check_tensor(name, t, min_dim=1)
        if t.shape not in ((e,), (m, e)):
            raise ValueError(f"{name} must be [E] or [M, E] = [{m}, {e}], got {tuple(t.shape)}")
    _check_projections(w_q, w_k, e)

    def dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.expand(m, e), b.expand(m, e)  # [M, E]
        return ((a @ w_q) * (b @ w_k)).sum(-1)  # [..., M]

    return ScoreTerms(
        dot(query_content, key_content),
        dot(query_content, key_position),
        dot(query_position, key_content),
        dot(query_position, key_position),
    )


def term_rms(terms: ScoreTerms) -> dict[str, float]:
    """Root mean square of each term: a size that does not care about sign.

    Args:
        terms: from :func:`score_terms` or :func:`pair_terms`.

    Returns:
        ``{name: rms}`` in the order of :data:`TERM_NAMES`.

    Raises:
        TypeError: if ``terms`` is not a :class:`ScoreTerms`.

    Example:
        >>> t = ScoreTerms(*(torch.full((2,), v) for v in (3.0, -1.0, 1.0, 0.0)))
        >>> term_rms(t)
        {'content-content': 3.0, 'content-position': 1.0, 'position-content': 1.0, 'position-position': 0.0}
    """
    if not isinstance(terms, ScoreTerms):
        raise TypeError(f"terms must be a ScoreTerms, got {type(terms).__name__}")
    return {name: float(t.double().pow(2).mean().sqrt()) for name, t in terms.named().items()}


def scaled_sinusoidal(positions, like: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """The sinusoidal encoding at ``positions``, scaled to the size of the vectors ``like``.

    Every sinusoidal row has norm ``sqrt(E/2)`` (one unit circle per pair); it is scaled
    by ``mean ||like row|| / sqrt(E/2)`` so its rows have the mean norm of ``like``'s rows:
    content and position of equal size, as when an encoding is added to embeddings of their
    own scale.

    Args:
        positions: ``T`` non-negative integer positions.
        like: ``[N, E]`` (e.g. token embeddings), E even; any N.
        base: the frequency base.

    Returns:
        ``[T, E]`` in ``like``'s dtype and device.

    Raises:
        TypeError, ValueError: for bad positions, ``like`` or ``base``.

    Example:
        >>> like = torch.full((3, 4), 0.5)  # rows of norm 1
        >>> scaled_sinusoidal([0, 7], like).norm(dim=-1)
        tensor([1.0000, 1.0000])
    """
    p = check_positions("positions", positions)
    check_tensor("like", like, min_dim=2)
    if like.dim() != 2 or like.shape[-1] % 2:
        raise ValueError(f"like must be [N, E] with E even, got shape {tuple(like.shape)}")
    base = check_base("base", base)
    e = like.shape[-1]
    scale = like.double().norm(dim=-1).mean() / math.sqrt(e / 2)
    table = sinusoidal_encoding(int(p.max()) + 1, e, base).double()  # [max + 1, E], CPU
    return (table[p].to(like.device) * scale).to(like.dtype)


def span_basis(rows: torch.Tensor, energy: float = 1.0) -> torch.Tensor:
    """An orthonormal basis of the fewest directions that hold ``energy`` of ``rows``.

    The directions are the rows' principal axes (eigenvectors of ``rows^T rows``), taken in
    order of decreasing singular value until their share of the summed squared norm reaches
    ``energy``. With ``energy=1`` it spans the rows, leaving out directions whose singular
    value is below ``1e-6`` of the largest (rounding). Computed in float64: from the
    ``[E, E]`` Gram matrix when there are at least as many rows as features (much faster
    for long tables), else by a singular value decomposition.

    Args:
        rows: ``[N, E]``, e.g. ``N`` position vectors.
        energy: the share of ``sum ||row||^2`` to hold, in ``(0, 1]``.

    Returns:
        ``[E, k]`` float64 on ``rows``' device, orthonormal columns; ``k <= min(N, E)``.

    Raises:
        TypeError, ValueError: for bad ``rows`` or ``energy``.

    Example:
        >>> rows = torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.1, 0.0]])
        >>> span_basis(rows).shape, span_basis(rows, energy=0.9).shape
        (torch.Size([3, 2]), torch.Size([3, 1]))
    """
    check_tensor("rows", rows, min_dim=2)
    if rows.dim() != 2:
        raise ValueError(f"rows must be [N, E], got shape {tuple(rows.shape)}")
    energy = check_positive_float("energy", energy)
    if energy > 1:
        raise ValueError(f"energy must be in (0, 1], got {energy}")
    r = rows.double()
    if r.shape[0] >= r.shape[1]:
        s2, u = torch.linalg.eigh(r.T @ r)  # ascending, [E], [E, E]
        s2, u = s2.flip(0).clamp(min=0), u.flip(1)
    else:
        u, s, _ = torch.linalg.svd(r.T, full_matrices=False)  # [E, N], [N]
        s2 = s**2
    if not bool(s2[0] > 0):
        raise ValueError("rows must hold a nonzero, finite row, got all zeros or non-finite")
    if energy == 1:
        k = int((s2 > 1e-12 * s2[0]).sum())
    else:
        share = s2.cumsum(0) / s2.sum()  # [min(N, E)] or [E]
        k = int((share < energy).sum()) + 1
    return u[:, :k]


def seeded_projections(
    in_dim: int,
    out_dim: int,
    *,
    num_heads: int | None = None,
    seed: int = 0,
    dtype=torch.float32,
    device=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two projections ``W_q``, ``W_k`` with entries ``N(0, 1/E)``, from a seed.

    Drawn on the CPU from their own generator, so the same seed gives the same matrices on
    every machine. With this scale each output feature has the variance of an input feature
    averaged, ``|x|^2 / E``, so ``|x W|^2`` is ``(D / E) |x|^2`` on average: every term a
    chapter compares is scaled alike.

    Args:
        in_dim: ``E``.
        out_dim: ``D``.
        num_heads: ``H`` to get one pair of projections per head, or None for one.
        seed: the generator's seed.
        dtype: a floating dtype.
        device: where to put them (default CPU).

    Returns:
        ``(w_q, w_k)``, each ``[E, D]``, or ``[H, E, D]`` with ``num_heads``.

    Raises:
        TypeError, ValueError: for bad sizes, seed or dtype.

    Example:
        >>> w_q, w_k = seeded_projections(8, 4, seed=1)
        >>> w_q.shape, torch.equal(w_q, seeded_projections(8, 4, seed=1)[0])
        (torch.Size([8, 4]), True)
        >>> seeded_projections(8, 4, num_heads=3)[1].shape
        torch.Size([3, 8, 4])
    """
    check_int("in_dim", in_dim, minimum=1)
    check_int("out_dim", out_dim, minimum=1)
    heads = () if num_heads is None else (check_int("num_heads", num_heads, minimum=1),)
    check_int("seed", seed)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    gen = torch.Generator().manual_seed(seed)
    shape = (2, *heads, in_dim, out_dim)
    w = torch.randn(shape, generator=gen, dtype=torch.float64) / math.sqrt(in_dim)
    w = w.to(dtype=dtype, device=device)
    return w[0], w[1]


@same_device(copied=("query_positions", "key_positions"))
def rope_pair_scores(
    query_content: torch.Tensor,
    key_content: torch.Tensor,
    query_positions,
    key_positions,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    *,
    base: float = 10000.0,
) -> torch.Tensor:
    """Scores of chosen pairs with RoPE instead of an added position (chapter 9's method).

    ``q = rope(query_content W_q, m)``, ``k = rope(key_content W_k, n)``, score ``q . k``.

    Args:
        query_content, key_content: ``[E]``.
        query_positions, key_positions: ``M`` positions each.
        w_q, w_k: ``[E, D]`` or ``[H, E, D]``, D even.
        base: RoPE's frequency base.

    Returns:
        ``[M]`` (``[H, M]`` for ``H`` heads).

    Raises:
        TypeError, ValueError: for bad tensors or positions.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> a, b = torch.randn(2, 4, generator=g, dtype=torch.float64)
        >>> w = torch.eye(4, dtype=torch.float64)
        >>> s = rope_pair_scores(a, b, [0, 10, 20], [3, 13, 23], w, w)
        >>> torch.allclose(s, s[0].expand(3))
        True
    """
    for name, t in (("query_content", query_content), ("key_content", key_content)):
        check_tensor(name, t, min_dim=1)
        if t.dim() != 1 or t.numel() == 0:
            raise ValueError(
                f"{name} must be one vector [E], not empty, got shape {tuple(t.shape)}"
            )
    if query_content.shape != key_content.shape:
        raise ValueError(
            f"query_content and key_content must have one size E, got {query_content.numel()} "
            f"and {key_content.numel()}"
        )
    _check_projections(w_q, w_k, query_content.shape[0])
    check_base("base", base)
    m = check_positions("query_positions", query_positions)
    n = check_positions("key_positions", key_positions)
    if m.shape != n.shape:
        raise ValueError(
            f"query_positions and key_positions must have one length, got {m.numel()} and "
            f"{n.numel()}"
        )
    d = w_q.shape[-1]
    q = (query_content @ w_q)[..., None, :].expand(*w_q.shape[:-2], m.numel(), d)  # [..., M, D]
    k = (key_content @ w_k)[..., None, :].expand(*w_k.shape[:-2], n.numel(), d)
    q = apply_rope(q, m.to(q.device), base=base)
    k = apply_rope(k, n.to(k.device), base=base)
    return (q * k).sum(-1)


# --- figures ----------------------------------------------------------------------------------


def terms_figure(terms: ScoreTerms, labels: Sequence[str]):
    """Heat maps of the four terms and their sum on one colour scale.

    The four terms sit as in the sum's expansion: rows by what the query brings (content,
    then position), columns by what the key brings; the sum is below, beside the colour bar.
    Queries run down, keys across.

    Args:
        terms: from :func:`score_terms`, each ``[T, T]``.
        labels: ``T`` token labels.

    Returns:
        The figure.

    Raises:
        TypeError, ValueError: if ``terms`` is not ``[T, T]`` terms or labels do not match.

    Example:
        >>> t = ScoreTerms(*torch.randn(4, 3, 3))
        >>> fig = terms_figure(t, ["a", "b", "c"])
        >>> len(fig.axes)  # five panels and the colour bar
        6
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    if not isinstance(terms, ScoreTerms):
        raise TypeError(f"terms must be a ScoreTerms, got {type(terms).__name__}")
    mats = [*terms, terms.total()]
    if any(m.dim() != 2 or m.shape[0] != m.shape[1] for m in mats):
        raise ValueError(f"terms must be [T, T], got shape {tuple(mats[0].shape)}")
    labels = check_str_sequence("labels", labels)
    if len(labels) != mats[0].shape[0]:
        raise ValueError(f"labels must have T={mats[0].shape[0]} entries, got {len(labels)}")
    limit = max(float(m.abs().max()) for m in mats) or 1.0
    n = len(labels)
    fig, grid = plots.figure(3, 2, height=2.1 * 3 + 0.15 * n, squeeze=False)
    panels = [grid[0, 0], grid[0, 1], grid[1, 0], grid[1, 1], grid[2, 0]]
    titles = [*TERM_NAMES, "sum: the score q . k"]
    names = [s.strip() or repr(s) for s in labels]
    with mpl.rc_context(plots.STYLE):
        for ax, m, title in zip(panels, mats, titles, strict=True):
            image = ax.imshow(
                m.detach().float().cpu().numpy(),
                cmap=plots.DIVERGING,
                vmin=-limit,
                vmax=limit,
                aspect="auto",
            )
            ax.grid(False)
            ax.set_title(title)
            ax.set_yticks(range(n), names if ax in (grid[0, 0], grid[1, 0], grid[2, 0]) else [])
            below = ax in (grid[1, 1], grid[2, 0])  # the lowest panel of each column
            ax.set_xticks(range(n), names if below else [], rotation=90)
        grid[2, 0].set_xlabel("key")
        grid[2, 0].set_ylabel("query")
        slot = grid[2, 1].get_subplotspec()
        grid[2, 1].remove()  # the colour bar takes a thin strip of the free slot
        bar = fig.add_subplot(slot.subgridspec(3, 1, height_ratios=[2, 1, 5])[1])
        fig.colorbar(image, cax=bar, orientation="horizontal", label="q . k (every panel)")
    return fig


def pair_terms_figure(
    starts: Sequence[int], terms: ScoreTerms, rope_scores: torch.Tensor | None = None
):
    """The four terms and the score of one pair placed at many starts, against the start.

    Args:
        starts: the query positions ``m`` (x axis), ``M`` of them.
        terms: from :func:`pair_terms`, each ``[M]``.
        rope_scores: optional ``[M]`` scores of the same pair with RoPE, drawn dashed.

    Returns:
        The figure.

    Raises:
        TypeError, ValueError: if the lengths disagree.

    Example:
        >>> t = ScoreTerms(*torch.randn(4, 3))
        >>> fig = pair_terms_figure([0, 1, 2], t)
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    if not isinstance(terms, ScoreTerms):
        raise TypeError(f"terms must be a ScoreTerms, got {type(terms).__name__}")
    starts = check_int_sequence("starts", starts)
    m = len(starts)
    if any(t.shape != (m,) for t in terms):
        raise ValueError(f"terms must each be [M] with M={m} starts")
    if rope_scores is not None and tuple(rope_scores.shape) != (m,):
        raise ValueError(f"rope_scores must be [M] with M={m}, got {tuple(rope_scores.shape)}")
    fig, ax = plots.figure(height=3.4)
    xs = list(starts)
    with mpl.rc_context(plots.STYLE):
        for name, t in terms.named().items():
            ax.plot(xs, t.detach().float().cpu().numpy(), lw=1.2, label=name)
        ax.plot(
            xs,
            terms.total().detach().float().cpu().numpy(),
            color=plots.COLORS["ink"],
            lw=2.2,
            label="score (sum)",
        )
        if rope_scores is not None:
            ax.plot(
                xs,
                rope_scores.detach().float().cpu().numpy(),
                "--",
                color=plots.COLORS["grey"],
                lw=2.0,
                label="score with RoPE",
            )
        ax.set_xlabel("query position m (key at m + offset)")
        ax.set_ylabel("q . k")
        ax.set_title("one pair of words, same distance, different places")
        ax.legend(ncols=3, loc="upper center", bbox_to_anchor=(0.5, -0.22))
    return fig


def dot_product_figure(a=(1.0, 0.4), b=(0.3, 1.1), angle: float = 60.0):
    """``a . b = |a| |b| cos(angle)`` in the plane: turning a vector changes only the angle.

    Left: ``a``, ``b``, and ``b`` turned by ``angle`` degrees (norm kept, score changed);
    also both turned together (score kept). Right: ``a . R(t) b`` for every turn ``t``, a
    cosine of amplitude ``|a||b|``.

    Args:
        a, b: two 2-D vectors (pairs of numbers), not zero.
        angle: the turn in degrees.

    Returns:
        The figure.

    Raises:
        TypeError, ValueError: for vectors that are not two finite numbers, or zero.

    Example:
        >>> fig = dot_product_figure()
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    vecs = []
    for name, v in (("a", a), ("b", b)):
        try:
            t = torch.as_tensor(v, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{name} must be two numbers, got {v!r}") from None
        if t.shape != (2,) or not bool(t.isfinite().all()) or float(t.norm()) == 0.0:
            raise ValueError(f"{name} must be two finite numbers, not both 0, got {v!r}")
        vecs.append(t)
    va, vb = vecs
    if isinstance(angle, bool) or not isinstance(angle, (int, float)) or not math.isfinite(angle):
        raise TypeError(f"angle must be a finite number of degrees, got {angle!r}")
    r = rotation_matrix(torch.tensor(math.radians(angle), dtype=torch.float64))
    rb, ra = r @ vb, r @ va
    fig, (ax_p, ax_c) = plots.figure(1, 2, height=4.9)
    colors = plots.COLORS
    with mpl.rc_context(plots.STYLE):
        reach = 1.15 * float(max(va.norm(), vb.norm()))
        for v, color, style, label in (
            (va, colors["blue"], "-", f"a  (a . b = {float(va @ vb):.2f})"),
            (vb, colors["orange"], "-", "b"),
            (rb, colors["red"], "-", f"R b: b turned  (a . Rb = {float(va @ rb):.2f})"),
            (ra, colors["blue"], ":", f"R a: both turned  (Ra . Rb = {float(ra @ rb):.2f})"),
        ):
            ax_p.annotate(
                "",
                xy=(float(v[0]), float(v[1])),
                xytext=(0, 0),
                arrowprops={"arrowstyle": "->", "color": color, "lw": 2, "linestyle": style},
            )
            ax_p.plot([], [], style, color=color, label=label)
        circle = torch.linspace(0, 2 * math.pi, 200)
        ax_p.plot(
            float(vb.norm()) * circle.cos(),
            float(vb.norm()) * circle.sin(),
            ":",
            color=colors["grey"],
            lw=1,
        )
        ax_p.set_xlim(-reach, reach)
        ax_p.set_ylim(-reach, reach)
        ax_p.set_aspect("equal")
        ax_p.set_title(f"turn by {angle:g} degrees")
        turns = torch.linspace(0, 360, 181, dtype=torch.float64)
        rs = rotation_matrix(turns.deg2rad())  # [N, 2, 2]
        scores = (rs @ vb) @ va  # [N]
        ax_c.plot(turns, scores, color=colors["red"], lw=2, label="a . R(t) b, every turn t")
        amp = float(va.norm() * vb.norm())
        ax_c.axhline(amp, color=colors["grey"], ls="--", lw=1, label="+-|a||b|")
        ax_c.axhline(-amp, color=colors["grey"], ls="--", lw=1)
        ax_c.axvline(angle, color=colors["green"], lw=1, label=f"t = {angle:g} degrees")
        ax_c.set_xlabel("turn t of b (degrees)")
        ax_c.set_ylabel("score")
        ax_c.set_title("the score follows the angle")
        handles = [*ax_p.get_legend_handles_labels()[0], *ax_c.get_legend_handles_labels()[0]]
        fig.legend(handles=handles, loc="outside lower center", ncols=2)
    return fig
