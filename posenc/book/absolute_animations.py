"""Figures and animations of chapter 3: integer and binary positions added to a token.

Three animations follow the source post's: the integer position added to the embedding of
a token (the position dwarfs it), a position written in bits and added (252 becomes
``11111100``), and the bits of positions ``0, 1, 2, ...`` appearing one position at a time.
One static figure shows the path of the binary codes in 3-D and the length of each step.

Each animation is a ``matplotlib.animation.FuncAnimation`` of at most
:data:`MAX_FRAMES` frames, as wide as the book's column and drawn at :data:`DPI` (the CSS
size of the static figures, so their text is as large), small enough to embed in the HTML
book with :func:`posenc.display.plots.animation_html`. Each opens on a frame that already shows its
point (the finished picture), then plays its frames in order and loops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib as mpl
import numpy as np
import torch
from matplotlib.animation import FuncAnimation
from matplotlib.lines import Line2D
from mpl_toolkits.mplot3d.art3d import Line3DCollection

from posenc._validate import check_int, check_positions, check_sequence, check_str
from posenc.book.bits import step_lengths, to_bitstring
from posenc.display import plots
from posenc.encodings import binary_encoding, integer_encoding

__all__ = [
    "DPI",
    "MAX_FRAMES",
    "binary_encoding_animation",
    "binary_path_figure",
    "binary_plot_animation",
    "integer_encoding_animation",
]

MAX_FRAMES = 40
"""Most frames an animation of this chapter may have."""

DPI = plots.CSS_DPI
"""Resolution the animations are drawn at (dots per inch): one pixel per CSS pixel."""

_INTERVAL_MS = 400  # time between frames in the HTML player


def integer_encoding_animation(
    embedding: torch.Tensor,
    positions: Sequence[int],
    *,
    token: str = "chased",
    num_features: int = 8,
) -> FuncAnimation:
    """The integer position added to a token's embedding, one frame per position.

    Each frame shows the first ``num_features`` features of the embedding ``e``, of the
    position vector ``PE(p) = [p, ..., p]`` and of their sum, as numbers and as bars on one
    scale; the title gives ``||PE(p)|| / ||e||`` over all ``E`` features. The player opens on
    the last position, where the position dwarfs the token most, then plays from the first.

    Args:
        embedding: the token's embedding, 1-D ``[E]``.
        positions: the positions to show, one frame each, ``1 .. 40`` of them.
        token: the token's text, for the labels.
        num_features: features shown, ``1 .. min(E, 12)``.

    Returns:
        The animation (not yet rendered), one frame per position.

    Raises:
        TypeError: if ``embedding`` is not a floating tensor or ``positions`` not integers.
        ValueError: if ``embedding`` is not 1-D, there are more than 40 positions, or
            ``num_features`` is out of range.

    Example:
        >>> anim = integer_encoding_animation(torch.zeros(16), [0, 1, 2])
        >>> plots.animation_html(anim).data.count("data:image/png;base64")
        3
    """
    e = _check_embedding(embedding)
    check_str("token", token)
    if not isinstance(positions, torch.Tensor):
        positions = check_sequence("positions", positions)
    p = check_positions("positions", positions)
    _check_frames(p.numel())
    check_int("num_features", num_features, minimum=1)
    if num_features > min(e.numel(), 12):
        raise ValueError(
            f"num_features must be at most min(E, 12) = {min(e.numel(), 12)}, "
            f"got num_features={num_features}"
        )
    e_norm = float(e.norm())
    shown = e[:num_features]  # [F]
    fig, (ax_t, ax_b) = plots.figure(1, 2, height=3.4, width_ratios=[1.1, 1])
    fig.set_dpi(DPI)
    with mpl.rc_context(plots.STYLE):
        table = _Table(
            ax_t,
            [f"'{token.strip()}'", "PE(p)", "sum"],
            [plots.COLORS["green"], plots.COLORS["orange"], plots.COLORS["blue"]],
            [0.36, 0.64, 0.96],
            num_features,
        )
        x = np.arange(num_features)
        ax_b.bar(x - 0.2, shown.numpy(), 0.4, color=plots.COLORS["green"], label="embedding")
        sums = ax_b.bar(
            x + 0.2, shown.numpy(), 0.4, color=plots.COLORS["blue"], label="embedding + PE(p)"
        )
        ax_b.set_ylim(-0.5, float(p.max()) + 1.0)
        ax_b.set_xticks(range(num_features))
        ax_b.set_xlabel("feature")
        _legend_below(ax_b, ncols=1)

    def draw(frame: int) -> None:
        pos = int(p[frame])
        pe_row = integer_encoding([pos], num_features)[0]  # [F]
        total = shown + pe_row
        ratio = pos * math.sqrt(e.numel()) / e_norm if e_norm > 0 else math.inf
        table.update([shown, pe_row, total])
        ax_t.set_title(f"position p = {pos}", loc="left")
        for bar, value in zip(sums, total.tolist(), strict=True):
            bar.set_height(value)
        ax_b.set_title(f"\u2016PE(p)\u2016 / \u2016e\u2016 = {ratio:.0f}")

    return _animate(fig, draw, p.numel(), first=p.numel() - 1)


def binary_encoding_animation(
    embedding: torch.Tensor,
    position: int = 252,
    *,
    num_bits: int = 8,
    token: str = "chased",
) -> FuncAnimation:
    """A position written in bits, least significant first, and added to a token's embedding.

    First the bits appear one per frame, bit ``j`` being ``floor(position / 2**j) mod 2``;
    then the sums appear all at once; the last two frames hold the result, with the bits
    also read the usual way (most significant first). The bars show that sum and embedding
    now share a scale. The player opens on the result, then takes the position apart again.

    Args:
        embedding: the token's embedding, 1-D ``[E]`` with ``E >= num_bits``.
        position: the position written in bits, below ``2**num_bits``.
        num_bits: bits (and features) shown, ``1 .. 12``.
        token: the token's text, for the labels.

    Returns:
        The animation, ``num_bits + 3`` frames.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``num_bits`` is out of range, ``position`` does not fit, or
            ``embedding`` is too short.

    Example:
        >>> anim = binary_encoding_animation(torch.zeros(8), 5, num_bits=3)
        >>> plots.animation_html(anim).data.count("data:image/png;base64")
        6
    """
    e = _check_embedding(embedding)
    check_str("token", token)
    check_int("num_bits", num_bits, minimum=1)
    if num_bits > 12 or num_bits > e.numel():
        raise ValueError(
            f"num_bits must be at most min(12, E={e.numel()}), got num_bits={num_bits}"
        )
    msb = to_bitstring(position, num_bits)  # validates position
    bits = binary_encoding([position], num_bits)[0]  # [n], bit j at feature j
    shown = e[:num_bits]
    total = shown + bits
    rows = torch.arange(num_bits)
    quotients = [f"{position >> j} mod 2" for j in range(num_bits)]  # floor(position / 2^j)
    fig, (ax_t, ax_b) = plots.figure(1, 2, height=3.4, width_ratios=[1.3, 1])
    fig.set_dpi(DPI)
    with mpl.rc_context(plots.STYLE):
        table = _Table(
            ax_t,
            [f"'{token.strip()}'", f"bit j of {position}", "sum"],
            [plots.COLORS["green"], plots.COLORS["orange"], plots.COLORS["blue"]],
            [0.3, 0.7, 0.97],
            num_bits,
            formats=["{:+.3f}", "{:.0f}", "{:+.3f}"],
            notes_x=0.35,
        )
        x = np.arange(num_bits)
        ax_b.bar(x - 0.2, shown.numpy(), 0.4, color=plots.COLORS["green"], label="embedding")
        sums = ax_b.bar(
            x + 0.2, np.zeros(num_bits), 0.4, color=plots.COLORS["blue"], label="embedding + bits"
        )
        ax_b.set_ylim(-0.4, 1.4)
        ax_b.set_xticks(range(num_bits))
        ax_b.set_xlabel("feature j (bit j)")
        _legend_below(ax_b, ncols=1)
        ax_b.set_title(f"position {position} in bits, added")

    def draw(frame: int) -> None:
        bits_shown = min(frame + 1, num_bits)
        sums_shown = num_bits if frame >= num_bits else 0
        bit_col = torch.where(rows < bits_shown, bits, math.nan)
        sum_col = torch.where(rows < sums_shown, total, math.nan)
        notes = [q if j < bits_shown else "" for j, q in enumerate(quotients)]
        table.update([shown, bit_col, sum_col], notes)
        if frame > num_bits:
            ax_t.set_title(f"{position} = 0b{msb} (read bottom to top)", loc="left")
        else:
            ax_t.set_title(rf"bit $j$ = $\lfloor {position} / 2^j \rfloor$ mod 2", loc="left")
        for bar, value in zip(sums, torch.nan_to_num(sum_col, nan=0.0).tolist(), strict=True):
            bar.set_height(value)

    return _animate(fig, draw, num_bits + 3, first=num_bits + 1)


def binary_plot_animation(num_bits: int = 5, num_positions: int = 32) -> FuncAnimation:
    """The bits of positions ``0 .. num_positions - 1``, one more position per frame.

    The codes so far are a table, positions across and bit 0 on top, each cell coloured by
    its bit; the newest position's column is outlined, its bits written in it and its code
    in the title. The stripes double in width from one bit to the next. The player
    opens on the finished table, then writes it again from position 0.

    Args:
        num_bits: bits per code, ``1 .. 12``.
        num_positions: positions (and frames), ``2 .. 40`` and at most ``2**num_bits``.

    Returns:
        The animation, ``num_positions`` frames.

    Raises:
        TypeError: if an argument is not an int.
        ValueError: if an argument is out of range.

    Example:
        >>> anim = binary_plot_animation(3, 8)
        >>> plots.animation_html(anim).data.count("data:image/png;base64")
        8
    """
    check_int("num_bits", num_bits, minimum=1)
    if num_bits > 12:
        raise ValueError(f"num_bits must be at most 12, got num_bits={num_bits}")
    check_int("num_positions", num_positions, minimum=2)
    _check_frames(num_positions)
    if num_positions > 2**num_bits:
        raise ValueError(
            f"num_positions must be at most 2**num_bits = {2**num_bits}, "
            f"got num_positions={num_positions}"
        )
    codes = binary_encoding(list(range(num_positions)), num_bits)  # [T, n]
    fig, ax = plots.figure(height=0.9 + 0.3 * num_bits)
    fig.set_dpi(DPI)
    cmap = mpl.colormaps[plots.SEQUENTIAL].with_extremes(bad="#f4f5f7")
    with mpl.rc_context(plots.STYLE):
        image = ax.imshow(
            np.full((num_bits, num_positions), np.nan),  # [n, T]: positions across
            cmap=cmap,
            vmin=-0.25,  # 0 and 1 away from the map's darkest and lightest ends
            vmax=1.25,
            aspect="auto",
            interpolation="none",
        )
        ax.grid(False)
        ax.set_yticks(range(num_bits), [f"bit {j}" for j in range(num_bits)])
        ax.set_xticks(range(0, num_positions, max(1, num_positions // 16)))
        ax.set_xlabel("position p")
        digits = [ax.text(0, j, "", ha="center", va="center") for j in range(num_bits)]
        newest = mpl.patches.Rectangle(
            (-0.5, -0.5), 1, num_bits, fill=False, edgecolor=plots.COLORS["red"], lw=2.5
        )
        ax.add_patch(newest)

    def draw(frame: int) -> None:
        seen = codes.T.clone().numpy()  # [n, T]
        seen[:, frame + 1 :] = np.nan
        image.set_data(seen)
        for j, digit in enumerate(digits):  # the newest code, written out
            bit = int(codes[frame, j])
            digit.set_text(str(bit))
            digit.set_x(frame)
            digit.set_color("white" if bit == 0 else plots.COLORS["ink"])
        newest.set_x(frame - 0.5)
        ax.set_title(
            f"bits of positions 0 .. {frame}; the newest, "
            f"p = {frame} = 0b{to_bitstring(frame, num_bits)}"
        )

    return _animate(fig, draw, num_positions, first=num_positions - 1)


def _cube_path(ax3, points: torch.Tensor) -> list[Line2D]:
    """The path of the codes ``points [8, 3]`` along the edges of the unit cube, each step
    coloured by how many bits it flips; returns the legend's handles."""
    colors = {1: plots.COLORS["green"], 2: plots.COLORS["orange"], 3: plots.COLORS["red"]}
    corners = points.tolist()
    edges = [  # the edges of the cube, faint: one collection, not twelve lines
        (a, b)
        for a in corners
        for b in corners
        if a < b and sum(x != y for x, y in zip(a, b, strict=True)) == 1
    ]
    ax3.add_collection3d(Line3DCollection(edges, colors="#b8bcc2", linewidths=0.9, linestyles=":"))
    flipped = [round(length**2) for length in step_lengths(points).tolist()]  # [7]
    steps = [(corners[p], corners[p + 1]) for p in range(len(flipped))]
    ax3.add_collection3d(
        Line3DCollection(steps, colors=[colors[k] for k in flipped], linewidths=2.2)
    )
    ax3.scatter(*points.T.tolist(), color=plots.COLORS["ink"], s=18, depthshade=False)
    for p, xyz in enumerate(corners):
        ax3.text(*[c + 0.06 for c in xyz], str(p))
    ax3.set_xlabel("bit 0")
    ax3.set_ylabel("bit 1")
    ax3.set_zlabel("bit 2")
    ax3.set_xticks([0, 1])
    ax3.set_yticks([0, 1])
    ax3.set_zticks([0, 1])
    ax3.view_init(elev=22, azim=-58)
    ax3.set_box_aspect(None, zoom=0.85)
    ax3.set_title("3-bit codes of positions 0..7")
    return [
        Line2D([], [], color=colors[k], lw=2.2, label=f"{k} bit{'s' if k > 1 else ''}")
        for k in (1, 2, 3)
    ]


def binary_path_figure(
    *,
    path_bits: int = 3,
    step_bits: int = 6,
    compare: torch.Tensor | None = None,
    compare_label: str = "",
):
    """The binary path in 3-D, and the length of every step between neighbours.

    Left: the codes of positions ``0 .. 7`` (3 bits) as corners of the unit cube, joined
    in order, each segment coloured by how many bits it flips. Right:
    ``||code(p + 1) - code(p)||`` for every ``p`` of a ``step_bits``-bit code, and, if given,
    the same for another encoding (its first ``2**step_bits - 1`` steps). The legends are
    under the panels.

    Args:
        path_bits: bits of the 3-D path; must be 3 (one axis per bit).
        step_bits: bits of the code whose steps are plotted, ``2 .. 12``.
        compare: optional ``[T, D]`` encoding of positions ``0 .. T-1`` drawn as a line.
        compare_label: its legend label.

    Returns:
        The figure (show it with :func:`posenc.display.plots.show`).

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``path_bits`` is not 3 or ``step_bits`` is out of range.

    Example:
        >>> fig = binary_path_figure(step_bits=4)
        >>> len(fig.axes)
        2
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    check_int("path_bits", path_bits, minimum=1)
    if path_bits != 3:
        raise ValueError(f"path_bits must be 3 (one axis per bit), got path_bits={path_bits}")
    check_int("step_bits", step_bits, minimum=2)
    if step_bits > 12:
        raise ValueError(f"step_bits must be at most 12, got step_bits={step_bits}")
    if compare is not None and not isinstance(compare, torch.Tensor):
        raise TypeError(f"compare must be a torch.Tensor or None, got {type(compare).__name__}")
    points = binary_encoding(list(range(2**path_bits)), path_bits)  # [8, 3]
    steps = step_lengths(binary_encoding(list(range(2**step_bits)), step_bits))  # [T-1]
    fig, axes = plots.figure(1, 2, height=3.8)
    axes[0].remove()
    with mpl.rc_context(plots.STYLE):
        ax3 = fig.add_subplot(1, 2, 1, projection="3d")
        handles = _cube_path(ax3, points)
        ax3.legend(
            handles=handles,
            title="bits flipped by the step",
            loc="upper center",
            bbox_to_anchor=(0.5, 0.02),
            ncols=3,
        )
        ax = axes[1]
        ax.vlines(range(steps.numel()), 0, steps.numpy(), color=plots.COLORS["blue"], lw=1.2)
        ax.plot(
            steps.numpy(), "o", ms=3, color=plots.COLORS["blue"], label=f"binary, {step_bits} bits"
        )
        if compare is not None:
            compare_steps = step_lengths(compare)[: steps.numel()]
            ax.plot(compare_steps.numpy(), color=plots.COLORS["orange"], lw=2, label=compare_label)
        ax.set_ylim(0, None)
        ax.set_xlabel("position p")
        ax.set_ylabel("||code(p+1) - code(p)||")
        _legend_below(ax, ncols=1)
        ax.set_title("length of each step")
    return fig


def _legend_below(ax, *, ncols: int) -> None:
    """The axes' legend under its x label, outside the data, whatever the axes' height."""
    under_label = mpl.transforms.offset_copy(ax.transAxes, ax.figure, y=-36, units="points")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=under_label, ncols=ncols)


def _check_embedding(embedding: object) -> torch.Tensor:
    if not isinstance(embedding, torch.Tensor):
        raise TypeError(f"embedding must be a torch.Tensor, got {type(embedding).__name__}")
    if not embedding.is_floating_point():
        raise TypeError(f"embedding must have a floating dtype, got {embedding.dtype}")
    if embedding.dim() != 1 or embedding.numel() == 0:
        raise ValueError(
            f"embedding must be 1-D and non-empty [E], got shape {tuple(embedding.shape)}"
        )
    return embedding.detach().float().cpu()


def _check_frames(count: int) -> None:
    if count > MAX_FRAMES:
        raise ValueError(f"an animation has at most {MAX_FRAMES} frames, got {count}")


class _Table:
    """Rows of numbers, one per feature, in coloured columns; NaN entries are left blank.

    The text artists are made once and only their strings change from frame to frame.
    ``xs`` are the right edges of the columns in axes coordinates; optional notes (one
    string per row) are written left-aligned at ``notes_x``.
    """

    def __init__(self, ax, columns, colors, xs, rows, *, formats=None, notes_x=None):
        self.formats = formats or ["{:+.3f}"] * len(columns)
        ax.set_axis_off()
        header_y = 0.97
        ax.text(0.0, header_y, "j", ha="left", va="top", weight="bold")
        for x, name, color in zip(xs, columns, colors, strict=True):
            ax.text(x, header_y, name, ha="right", va="top", color=color, weight="bold")
        dy = 0.86 / rows
        ys = [header_y - (j + 1.2) * dy for j in range(rows)]
        for j, y in enumerate(ys):
            ax.text(0.0, y, str(j), ha="left", va="top")
        self.cells = [
            [ax.text(x, y, "", ha="right", va="top", color=color, family="monospace") for y in ys]
            for x, color in zip(xs, colors, strict=True)
        ]
        self.notes = []
        if notes_x is not None:
            self.notes = [ax.text(notes_x, y, "", ha="left", va="top", color="#6b7078") for y in ys]

    def update(self, values, notes=None) -> None:
        for cells, column, fmt in zip(self.cells, values, self.formats, strict=True):
            for cell, v in zip(cells, column.tolist(), strict=True):
                cell.set_text("" if math.isnan(v) else fmt.format(v))
        if notes is not None:
            for cell, note in zip(self.notes, notes, strict=True):
                cell.set_text(note)


def _animate(fig, draw, frames: int, *, first: int) -> FuncAnimation:
    """Lay the figure out once, then freeze the layout so frames only redraw.

    The frames play in order, ``0 .. frames - 1``, looping. The player opens on frame
    ``first`` (a frame that already shows the point) with its slider there too: the
    animation's ``start_frame``, which :func:`posenc.display.plots.animation_html` reads.
    """

    def styled(frame: int) -> None:
        with mpl.rc_context(plots.STYLE):
            draw(frame)

    styled(first)
    fig.canvas.draw()
    # no engine at all (not "none", which keeps a placeholder): savefig then skips the
    # extra layout pass it makes for an engine, a third of the cost of every frame
    fig.set_layout_engine(None)
    anim = _SavedOnce(
        fig, styled, frames=frames, interval=_INTERVAL_MS, repeat=True, cache_frame_data=False
    )
    anim.start_frame = first
    return anim


class _SavedOnce(FuncAnimation):
    """A ``FuncAnimation`` whose frames are drawn once each while it is saved.

    After updating a frame, matplotlib redraws the canvas for a live window, and then the
    writer draws the frame again to save it: while saving (``to_jshtml`` included), the
    first of the two draws is skipped, which halves the cost of a player. The saved frames
    are the same; played live, the animation redraws as usual.
    """

    _saving = False

    def save(self, *args, **kwargs):
        self._saving = True
        try:
            return super().save(*args, **kwargs)
        finally:
            self._saving = False

    def _post_draw(self, framedata, blit) -> None:
        if not self._saving:
            super()._post_draw(framedata, blit)
