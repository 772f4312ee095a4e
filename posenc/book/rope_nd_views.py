"""RoPE on grids: the checks and figures of chapter 11.

Axial RoPE (:func:`posenc.rope.apply_rope_nd`) gives each axis of a position its own chunk
of features and turns each pair of a chunk with that axis only. This module holds what the
chapter uses to check that the score then depends only on the offset between two cells,
and to see what goes wrong otherwise:

- :func:`grid_positions`: every cell of an ``n``-D grid;
- :func:`pairwise_scores` and :func:`offset_check`: all scores between the cells of a grid,
  grouped by offset, and how much scores with the same offset disagree;
- :func:`mispaired_rope_2d`: a wrong 2-D rotation, where the y turn acts on a plane made of
  an x feature and a y feature;
- :func:`mixed_rope_2d`: every pair turned by ``x * fx_i + y * fy_i`` (RoPE-Mixed; axial
  RoPE and the "sum of coordinates" rotation are special cases);
- :func:`mrope`: M-RoPE, one frequency ladder whose pairs are split into sections, one per
  axis (time, height, width);
- :func:`axis_frequencies` and :func:`frequency_allocation_figure`: which axis turns each
  pair, and how fast;
- :func:`score_maps_figure`: the score of a query cell against every key cell, for two
  query cells, axial and mis-paired.

Shapes: ``T`` positions (cells), ``D`` features, ``n`` axes, ``N`` cells of a grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib as mpl
import matplotlib.patches
import torch

from posenc._validate import (
    check_base,
    check_callable,
    check_even_dim,
    check_int,
    check_int_sequence,
    check_layout,
    check_real,
    check_sequence,
    check_str_sequence,
    check_tensor,
    same_device,
)
from posenc.display import plots
from posenc.rope import _check_coords, _rotate, apply_rope, apply_rope_nd, rope_inv_freq

__all__ = [
    "OffsetCheck",
    "axis_frequencies",
    "frequency_allocation_figure",
    "grid_positions",
    "mispaired_rope_2d",
    "mixed_rope_2d",
    "mrope",
    "offset_check",
    "pairwise_scores",
    "score_maps_figure",
]

Rotate = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""A position-dependent map ``rotate(x [..., T, D], positions [T, n]) -> [..., T, D]``."""


def _check_x(x: object, positions: torch.Tensor) -> torch.Tensor:
    check_tensor("x", x, min_dim=2)
    if x.shape[-2] != positions.shape[-2]:
        raise ValueError(
            f"x has T={x.shape[-2]} positions but positions has {positions.shape[-2]} cells"
        )
    return x


def _angle_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def grid_positions(shape: Sequence[int]) -> torch.Tensor:
    """Every cell of a grid, as integer coordinates, in row-major order.

    Args:
        shape: the grid's side along each axis, e.g. ``(8, 8)`` or ``(4, 4, 4)``.

    Returns:
        int64 ``[N, n]`` with ``N = prod(shape)`` cells and ``n = len(shape)`` axes; cell
        ``(a, b, ...)`` sits at row ``a * shape[1] * ... + b * ... + ...``.

    Raises:
        TypeError: if a side is not an int.
        ValueError: if ``shape`` is empty or a side is below 1.

    Example:
        >>> grid_positions((2, 3)).tolist()
        [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    """
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence) or len(shape) == 0:
        raise ValueError(f"shape must be a non-empty sequence of sides, got {shape!r}")
    shape = check_int_sequence("shape", shape, minimum=1, item="side")
    axes = [torch.arange(side) for side in shape]
    return torch.cartesian_prod(*axes).reshape(-1, len(shape))  # [N, n]


@same_device(copied=("positions",))
def pairwise_scores(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, rotate: Rotate = apply_rope_nd
) -> torch.Tensor:
    """Scores of a query at every cell against a key at every cell.

    ``scores[a, b] = <rotate(q, cell a), rotate(k, cell b)>``: the same query and key
    vectors, placed at all cells.

    Args:
        q, k: one head vector each, ``[D]``.
        positions: the cells, int ``[N, n]`` (e.g. :func:`grid_positions`).
        rotate: the position encoding, ``rotate(x [N, D], positions [N, n])``; default
            axial RoPE.

    Returns:
        ``[N, N]``: query cell down, key cell across, in ``q``'s dtype.

    Raises:
        TypeError: if ``q`` or ``k`` is not a floating tensor or ``positions`` not integers.
        ValueError: if ``q`` and ``k`` are not 1-D of the same size.

    Example:
        >>> q, k = torch.randn(2, 8, dtype=torch.float64)
        >>> pairwise_scores(q, k, grid_positions((3, 3))).shape
        torch.Size([9, 9])
    """
    for name, v in (("q", q), ("k", k)):
        check_tensor(name, v, min_dim=1)
        if v.dim() != 1:
            raise ValueError(f"{name} must be one vector [D], got shape {tuple(v.shape)}")
    if q.shape != k.shape or q.numel() == 0:
        raise ValueError(
            f"q and k must have the same size (not 0), got {q.shape[0]} and {k.shape[0]}"
        )
    check_callable("rotate", rotate)
    positions = _check_coords(positions)
    if positions.dim() != 2:
        raise ValueError(f"positions must be [N, n], got shape {tuple(positions.shape)}")
    cells = positions.shape[0]
    rq = rotate(q.expand(cells, -1), positions)  # [N, D]
    rk = rotate(k.expand(cells, -1), positions)  # [N, D]
    return rq @ rk.T  # [N, N]


@dataclass(frozen=True)
class OffsetCheck:
    """Do scores between cells depend only on their offset?

    Attributes:
        pairs: ordered pairs of cells compared (``N**2``).
        offsets: distinct offsets ``key cell - query cell`` among them.
        max_spread: the largest ``max - min`` of the scores that share an offset.
        relative_spread: ``max_spread`` divided by the largest ``|score|``.
    """

    pairs: int
    offsets: int
    max_spread: float
    relative_spread: float

    def holds(self, tol: float = 1e-9) -> bool:
        """True when every offset's scores agree to ``tol`` (relative to the largest score).

        Raises:
            TypeError, ValueError: if ``tol`` is not a finite non-negative number.
        """
        return self.relative_spread <= check_real("tol", tol, minimum=0.0)


@same_device(copied=("positions",))
def offset_check(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, rotate: Rotate = apply_rope_nd
) -> OffsetCheck:
    """Group all cell-pair scores by offset and measure how much each group disagrees.

    If the encoding is relative, every pair of cells with the same offset
    ``(dx, dy, ...)`` gets the same score, and the spread is float round-off.

    Args:
        q, k: ``[D]`` (use float64 to see round-off near ``1e-15``).
        positions: the cells, int ``[N, n]``.
        rotate: as :func:`pairwise_scores`.

    Returns:
        An :class:`OffsetCheck`.

    Raises:
        TypeError, ValueError: as :func:`pairwise_scores`.

    Example:
        >>> q, k = torch.randn(2, 8, dtype=torch.float64)
        >>> c = offset_check(q, k, grid_positions((4, 4)))
        >>> c.pairs, c.offsets, c.holds()
        (256, 49, True)
    """
    scores = pairwise_scores(q, k, positions, rotate).reshape(-1)  # [N*N]
    positions = positions.to(torch.int64)
    offsets = (positions[None, :, :] - positions[:, None, :]).reshape(-1, positions.shape[1])
    _, group = torch.unique(offsets, dim=0, return_inverse=True)  # [N*N]
    count = int(group.max()) + 1  # read where the positions are (the CPU's, often)
    group = group.to(scores.device)
    hi = torch.full((count,), -math.inf, dtype=scores.dtype, device=scores.device).scatter_reduce(
        0, group, scores, "amax"
    )
    lo = torch.full((count,), math.inf, dtype=scores.dtype, device=scores.device).scatter_reduce(
        0, group, scores, "amin"
    )
    spread = (hi - lo).max().item()
    scale = scores.abs().max().item()
    return OffsetCheck(scores.numel(), count, spread, spread / scale if scale > 0 else 0.0)


@same_device(copied=("positions",))
def mispaired_rope_2d(
    x: torch.Tensor, positions: torch.Tensor, *, base: float = 10000.0
) -> torch.Tensor:
    """A wrong 2-D RoPE: the y turn shares a feature with the x turn.

    The first ``D/2`` features are turned with ``x`` exactly as in axial RoPE (interleaved
    pairs ``(2i, 2i+1)`` by ``x * theta_i``, ``theta = rope_inv_freq(D/2, base)``). Then the
    y turn acts on the plane made of x feature ``2i + 1`` and y feature ``D/2 + 2i``, by
    ``y * theta_i``: one 2x2 rotation holding an x feature and a y feature. The odd y
    features are not turned at all. Each step is a rotation, so lengths are kept, but the
    two turns share a feature and no longer commute.

    Args:
        x: head vectors ``[..., T, D]``, ``D`` divisible by 4.
        positions: integer cells ``[T, 2]`` (or ``[..., T, 2]`` broadcasting with ``x``).
        base: frequency base.

    Returns:
        Same shape, dtype and device as ``x``.

    Raises:
        TypeError: if ``x`` is not a floating tensor or ``positions`` not integers.
        ValueError: if ``D`` is not divisible by 4 or the shapes disagree.

    Example:
        >>> x = torch.randn(1, 8, dtype=torch.float64)
        >>> y = mispaired_rope_2d(x, torch.tensor([[3, 5]]))
        >>> bool(torch.isclose(y.norm(), x.norm()))  # still a rotation
        True
    """
    positions = _check_coords(positions, 2)
    _check_x(x, positions)
    dim = x.shape[-1]
    if dim % 4:
        raise ValueError(f"head dimension D={dim} must be divisible by 4 (2 axes of pairs)")
    base = check_base("base", base)
    half = dim // 2
    dtype = _angle_dtype(x)
    xs = apply_rope(x[..., :half].to(dtype), positions[..., 0], base=base)  # [..., T, D/2]
    ys = x[..., half:].to(dtype)  # [..., T, D/2]
    theta = rope_inv_freq(half, base).to(device=x.device, dtype=dtype)  # [D/4]
    angle = positions[..., 1].to(device=x.device, dtype=dtype)[..., None] * theta  # [..., T, D/4]
    a, b = xs[..., 1::2], ys[..., 0::2]  # an x feature and a y feature per plane
    a, b = a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()
    xs = torch.stack([xs[..., 0::2], a], dim=-1).flatten(-2)
    ys = torch.stack([b, ys[..., 1::2]], dim=-1).flatten(-2)
    return torch.cat([xs, ys], dim=-1).to(x.dtype)


@same_device(copied=("positions", "freq_x", "freq_y"))
def mixed_rope_2d(
    x: torch.Tensor,
    positions: torch.Tensor,
    freq_x: torch.Tensor,
    freq_y: torch.Tensor,
    *,
    layout: str = "interleaved",
) -> torch.Tensor:
    """Turn every pair ``i`` by ``x * freq_x[i] + y * freq_y[i]`` (RoPE-Mixed).

    Both axes turn the same planes, so the two turns commute and the score depends only on
    ``(dx, dy)``. Heo et al. learn ``freq_x`` and ``freq_y``; with ``freq_x = [theta, 0]``
    and ``freq_y = [0, theta]`` this is axial RoPE, and with ``freq_x == freq_y`` every pair
    sees only ``x + y``.

    Args:
        x: head vectors ``[..., T, D]`` (D even).
        positions: integer cells ``[T, 2]`` (or ``[..., T, 2]``).
        freq_x, freq_y: frequencies ``[D/2]`` per axis (any sign).
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        Same shape, dtype and device as ``x``.

    Raises:
        TypeError: for a non-floating ``x`` or frequencies, or non-integer positions.
        ValueError: for an odd ``D``, frequencies not ``[D/2]``, or an unknown layout.

    Example:
        >>> x = torch.randn(1, 8, dtype=torch.float64)
        >>> f = torch.tensor([1.0, 0.1, 0.0, 0.0], dtype=torch.float64)
        >>> axial = apply_rope_nd(x, torch.tensor([[2, 7]]), base=100.0)
        >>> torch.allclose(mixed_rope_2d(x, torch.tensor([[2, 7]]), f, f.roll(2)), axial)
        True
    """
    positions = _check_coords(positions, 2)
    _check_x(x, positions)
    check_layout(layout)
    dim = x.shape[-1]
    if dim == 0 or dim % 2:
        raise ValueError(f"head dimension must be even and positive, got D={dim}")
    dtype = _angle_dtype(x)
    freqs = []
    for name, f in (("freq_x", freq_x), ("freq_y", freq_y)):
        check_tensor(name, f, min_dim=1)
        if f.shape != (dim // 2,):
            raise ValueError(f"{name} must have shape [D/2] = [{dim // 2}], got {tuple(f.shape)}")
        if not bool(torch.isfinite(f).all()):
            raise ValueError(f"{name} must be finite, got {f.tolist()}")
        freqs.append(f.to(device=x.device, dtype=dtype))
    p = positions.to(device=x.device, dtype=dtype)
    angles = p[..., 0:1] * freqs[0] + p[..., 1:2] * freqs[1]  # [..., T, D/2]
    return _rotate(x.to(dtype), angles.cos(), angles.sin(), layout).to(x.dtype)


def _check_sections(sections: object, dim: int) -> list[int]:
    sections = check_int_sequence("sections", sections, minimum=0)
    if sum(sections) != dim // 2:
        raise ValueError(
            f"sections must add up to D/2 = {dim // 2} pairs, got {list(sections)} "
            f"(sum {sum(sections)})"
        )
    return list(sections)


@same_device(copied=("positions",))
def mrope(
    x: torch.Tensor,
    positions: torch.Tensor,
    sections: Sequence[int],
    *,
    base: float = 10000.0,
    layout: str = "half",
) -> torch.Tensor:
    """M-RoPE (Qwen2-VL): one frequency ladder, its pairs split into one section per axis.

    The ``D/2`` pairs keep RoPE's frequencies ``theta_i = base**(-2i/D)``; the first
    ``sections[0]`` pairs turn with coordinate 0 (time), the next ``sections[1]`` with
    coordinate 1 (height), and so on. For a text token all coordinates equal its position,
    and M-RoPE is 1-D RoPE. (Axial RoPE instead gives each axis its own full ladder.)

    Args:
        x: head vectors ``[..., T, D]``.
        positions: integer coordinates ``[T, n]`` (or ``[..., T, n]``), ``n = len(sections)``.
        sections: pairs per axis, adding up to ``D/2`` (Qwen2-VL: ``[16, 24, 24]`` for
            ``D = 128``).
        base: frequency base.
        layout: ``"half"`` (as in Qwen2-VL's code) or ``"interleaved"``.

    Returns:
        Same shape, dtype and device as ``x``.

    Raises:
        TypeError: for a non-floating ``x``, non-integer positions or bad ``sections``.
        ValueError: if the sections do not add up to ``D/2`` or the shapes disagree.

    Example:
        >>> x = torch.randn(5, 8, dtype=torch.float64)
        >>> text = torch.arange(5)[:, None].expand(5, 3)  # t = h = w = position
        >>> torch.allclose(mrope(x, text, [2, 1, 1]), apply_rope(x, layout="half"))
        True
    """
    positions = _check_coords(positions)
    _check_x(x, positions)
    check_layout(layout)
    dim = x.shape[-1]
    if dim == 0 or dim % 2:
        raise ValueError(f"head dimension must be even and positive, got D={dim}")
    sections = _check_sections(sections, dim)
    if positions.shape[-1] != len(sections):
        raise ValueError(
            f"positions must have one coordinate per section ({len(sections)}), "
            f"got shape {tuple(positions.shape)}"
        )
    base = check_base("base", base)
    dtype = _angle_dtype(x)
    axis = torch.repeat_interleave(torch.arange(len(sections)), torch.tensor(sections))  # [D/2]
    p = positions.to(device=x.device, dtype=dtype)[..., axis.to(x.device)]  # [..., T, D/2]
    angles = p * rope_inv_freq(dim, base).to(device=x.device, dtype=dtype)
    return _rotate(x.to(dtype), angles.cos(), angles.sin(), layout).to(x.dtype)


def axis_frequencies(
    dim: int, base: float = 10000.0, *, axes: int | None = None, sections=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Which axis turns each pair, and at what frequency.

    Give ``axes`` for axial RoPE (:func:`posenc.rope.apply_rope_nd`: ``D/n`` features per
    axis, each with its own ladder ``rope_inv_freq(D/n)``) or ``sections`` for M-RoPE (one
    ladder ``rope_inv_freq(D)`` cut into sections).

    Args:
        dim: head features ``D``.
        base: frequency base.
        axes: number of axes ``n`` (axial).
        sections: pairs per axis (M-RoPE).

    Returns:
        ``(axis int64 [D/2], inv_freq float64 [D/2])``, pair by pair.

    Raises:
        TypeError: for arguments of the wrong type.
        ValueError: unless exactly one of ``axes`` and ``sections`` is given, or if ``D``
            does not split as asked.

    Example:
        >>> axis, f = axis_frequencies(8, 100.0, axes=2)
        >>> axis.tolist(), f.tolist()
        ([0, 0, 1, 1], [1.0, 0.1, 1.0, 0.1])
    """
    check_even_dim("dim", dim)
    base = check_base("base", base)
    if (axes is None) == (sections is None):
        raise ValueError("give exactly one of axes (axial RoPE) and sections (M-RoPE)")
    if axes is not None:
        check_int("axes", axes, minimum=1)
        if dim % (2 * axes):
            raise ValueError(f"dim={dim} must be divisible by 2 * axes = {2 * axes}")
        per_axis = dim // axes // 2
        axis = torch.arange(axes).repeat_interleave(per_axis)
        return axis, rope_inv_freq(dim // axes, base).repeat(axes)
    sections = _check_sections(sections, dim)
    axis = torch.repeat_interleave(torch.arange(len(sections)), torch.tensor(sections))
    return axis, rope_inv_freq(dim, base)


def frequency_allocation_figure(
    dim: int = 96,
    base: float = 10000.0,
    sections: Sequence[int] = (12, 18, 18),
    labels: Sequence[str] = ("time", "height", "width"),
):
    """Pair frequencies coloured by axis: axial 3-D RoPE beside M-RoPE.

    Args:
        dim: head features ``D`` (divisible by 6 for the axial panel).
        base: frequency base.
        sections: M-RoPE's pairs per axis.
        labels: a name per axis.

    Returns:
        The figure.

    Raises:
        TypeError, ValueError: as :func:`axis_frequencies`, or if ``labels`` does not have
            one entry per section.

    Example:
        >>> fig = frequency_allocation_figure(12, sections=(2, 2, 2))
        >>> len(fig.axes)
        2
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    check_even_dim("dim", dim)
    sections = check_int_sequence("sections", sections, minimum=0)
    labels = check_str_sequence("labels", labels)
    if len(labels) != len(sections):
        raise ValueError(f"labels must have one entry per section ({len(sections)}), got {labels}")
    sections = _check_sections(sections, dim)
    panels = [
        ("axial RoPE: a full ladder per axis", axis_frequencies(dim, base, axes=len(sections))),
        ("M-RoPE: one ladder cut into sections", axis_frequencies(dim, base, sections=sections)),
    ]
    fig, axs = plots.figure(1, 2, height=3.2, sharey=True)
    colors = [plots.COLORS[c] for c in ("blue", "orange", "green", "red", "ink")]
    for ax, (title, (axis, freq)) in zip(axs, panels, strict=True):
        pair = torch.arange(freq.numel())
        for a, label in enumerate(labels):
            sel = axis == a
            ax.scatter(
                pair[sel], freq[sel], s=12, color=colors[a % len(colors)], label=label, zorder=3
            )
        ax.set_yscale("log")
        ax.set_xlabel("pair index")
        ax.set_title(title)
    axs[0].set_ylabel(r"frequency $\theta$ (rad / step)")
    fig.legend(
        *axs[0].get_legend_handles_labels(),
        loc="outside lower center",
        ncols=len(labels),
        frameon=False,
    )
    return fig


@same_device
def _check_query_cells(query_cells, side: int, window: int) -> list:
    """Two cells ``(x, y)``, each at least ``window`` from the border of the grid."""
    query_cells = check_sequence("query_cells", query_cells)
    if len(query_cells) != 2:
        raise ValueError(f"query_cells must hold two cells, got {query_cells!r}")
    for i, cell in enumerate(query_cells):
        check_int_sequence(f"query_cells[{i}]", cell, min_length=2)
        if len(cell) != 2:
            raise ValueError(f"query_cells must hold cells (x, y), got {cell!r}")
    for cx, cy in query_cells:
        if not (window <= cx < side - window and window <= cy < side - window):
            raise ValueError(
                f"query cell {(cx, cy)} must be at least window={window} from the border "
                f"of a {side}x{side} grid"
            )
    return query_cells


def _score_map(ax, m: torch.Tensor, cell, vmax: float, side: int, window: int, title: str):
    """The scores ``m[x, y]`` of one query against every key cell, the query marked.

    The map is divided by ``vmax``; a dashed square marks the cells within ``window`` of
    the query. Returns the image, for a colour bar.
    """
    image = ax.imshow(
        (m / vmax).T.cpu().numpy(), origin="lower", cmap=plots.DIVERGING, vmin=-1, vmax=1
    )
    ax.plot([cell[0]], [cell[1]], "x", color=plots.COLORS["ink"], ms=9, mew=2.5)
    corner = (cell[0] - window - 0.5, cell[1] - window - 0.5)
    ax.add_patch(
        mpl.patches.Rectangle(
            corner,
            2 * window + 1,
            2 * window + 1,
            fill=False,
            ls="--",
            lw=1.4,
            color=plots.COLORS["ink"],
        )
    )
    ax.set_xticks(range(0, side, 5))
    ax.set_yticks(range(0, side, 5))
    ax.set_title(title)
    ax.grid(False)
    return image


def score_maps_figure(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    side: int = 16,
    query_cells: Sequence[tuple[int, int]] = ((5, 5), (10, 9)),
    base: float = 100.0,
    window: int = 4,
):
    """Score of a query cell against every key cell, for axial and mis-paired 2-D RoPE.

    One row per encoding (:func:`posenc.rope.apply_rope_nd`, :func:`mispaired_rope_2d`),
    one column per query cell (marked with a cross). Each row is divided by its largest
    ``|score|``. A dashed square marks the keys within ``window`` of the query; the title
    of the second column gives the largest difference between the two squares, read
    relative to their query. It is zero when the encoding is relative.

    Args:
        q, k: ``[D]``, ``D`` divisible by 4.
        side: the grid is ``side x side``.
        query_cells: two cells ``(x, y)``, each at least ``window`` away from the border.
        base: frequency base (small values give patterns visible on a small grid).
        window: half-width of the compared square around each query.

    Returns:
        The figure: four maps in two rows and a colour bar.

    Raises:
        TypeError, ValueError: for bad vectors, or cells too close to the border.

    Example:
        >>> q, k = torch.randn(2, 8, dtype=torch.float64)
        >>> fig = score_maps_figure(q, k, side=8, query_cells=((2, 2), (5, 4)), window=2)
        >>> len(fig.axes)  # four maps and the colour bar
        5
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    check_int("side", side, minimum=2)
    check_int("window", window, minimum=1)
    base = check_base("base", base)
    query_cells = _check_query_cells(query_cells, side, window)
    cells = grid_positions((side, side))
    rotations = {
        "axial": lambda x, p: apply_rope_nd(x, p, base=base),
        "mis-paired": lambda x, p: mispaired_rope_2d(x, p, base=base),
    }
    fig, axs = plots.figure(2, 2, height=8.7)
    for row, (name, rotate) in enumerate(rotations.items()):
        scores = pairwise_scores(q, k, cells, rotate).reshape(side, side, side, side)
        maps = [scores[cx, cy] for cx, cy in query_cells]  # [side, side] each, [x, y]
        vmax = max(m.abs().max().item() for m in maps)
        windows = [
            m[cx - window : cx + window + 1, cy - window : cy + window + 1] / vmax
            for (cx, cy), m in zip(query_cells, maps, strict=True)
        ]
        diff = (windows[1] - windows[0]).abs().max().item()
        for col, ((cx, cy), m) in enumerate(zip(query_cells, maps, strict=True)):
            title = f"{name}, query at {(cx, cy)}"
            if col == 1:
                title += f"\nsquares differ by {diff:.2f}"
            image = _score_map(axs[row, col], m, (cx, cy), vmax, side, window, title)
    for ax in axs[1]:
        ax.set_xlabel("key x")
    for ax in axs[:, 0]:
        ax.set_ylabel("key y")
    bar = plots.colorbar_below(image, axs, label="score / largest |score| of the row")
    bar.set_ticks([-1, -0.5, 0, 0.5, 1])
    return fig
