"""Figures and animations of chapter 3: integer and binary positions added to a token.

Three animations follow the source post's: the integer position added to the embedding of
a token (the position dwarfs it), a position written in bits and added (252 becomes
``11111100``), and the bits of positions ``0, 1, 2, ...`` appearing one position at a time.
One static figure shows the path of the binary codes in 3-D and the length of each step.

Each animation is a ``matplotlib.animation.FuncAnimation`` of at most
:data:`MAX_FRAMES` frames drawn at :data:`DPI`, small enough to embed in the HTML book with
:func:`posenc.plots.animation_html`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib as mpl
import numpy as np
import torch
from matplotlib.animation import FuncAnimation
from matplotlib.lines import Line2D

from posenc import plots
from posenc._validate import check_int, check_positions, check_sequence, check_str
from posenc.book.bits import step_lengths, to_bitstring
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

DPI = 72
"""Resolution the animations are drawn at (dots per inch)."""

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
    scale; the title gives ``||PE(p)|| / ||e||`` over all ``E`` features.

    Args:
        embedding: the token's embedding, 1-D ``[E]``.
        positions: the positions to show, one frame each, ``1 .. 40`` of them.
        token: the token's text, for the labels.
        num_features: features shown, ``1 .. min(E, 12)``.

    Returns:
        The animation (not yet rendered).

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
    fig, (ax_t, ax_b) = plots.figure(1, 2, height=3.0, width_ratios=[1.1, 1])
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
        ax_b.legend(loc="upper left")

    def draw(frame: int) -> None:
        pos = int(p[frame])
        pe_row = integer_encoding([pos], num_features)[0]  # [F]
        total = shown + pe_row
        ratio = pos * math.sqrt(e.numel()) / e_norm if e_norm > 0 else math.inf
        table.update([shown, pe_row, total])
        ax_t.set_title(f"position p = {pos}", loc="left")
        for bar, value in zip(sums, total.tolist(), strict=True):
            bar.set_height(value)
        ax_b.set_title(rf"$\|PE(p)\| \,/\, \|e\|$ = {ratio:.0f}")

    return _animate(fig, draw, p.numel())


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
    also read the usual way (most significant first). The bars show that sum and embedding now share a
    scale.

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
    fig, (ax_t, ax_b) = plots.figure(1, 2, height=3.0, width_ratios=[1.3, 1])
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
        ax_b.set_ylim(-0.4, 1.6)
        ax_b.set_xticks(range(num_bits))
        ax_b.set_xlabel("feature j (bit j)")
        ax_b.legend(loc="upper left", ncols=2)
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

    return _animate(fig, draw, num_bits + 3)


def binary_plot_animation(num_bits: int = 5, num_positions: int = 32) -> FuncAnimation:
    """The bits of positions ``0 .. num_positions - 1``, one more position per frame.

    Left: the codes so far as a heat map (positions across, bit 0 on top). Right: the bits
    of the newest position as bars. The stripes double in width from one bit to the next.

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
    fig, (ax_h, ax_b) = plots.figure(1, 2, height=2.7, width_ratios=[2.2, 1])
    fig.set_dpi(DPI)
    cmap = mpl.colormaps["Blues"].with_extremes(bad="#f4f5f7")
    with mpl.rc_context(plots.STYLE):
        image = ax_h.imshow(
            np.full((num_bits, num_positions), np.nan),  # [n, T]: positions across
            cmap=cmap,
            vmin=-0.3,
            vmax=1.0,
            aspect="auto",
            interpolation="none",
        )
        ax_h.grid(False)
        ax_h.set_yticks(range(num_bits), [f"bit {j}" for j in range(num_bits)])
        ax_h.set_xlabel("position p")
        bars = ax_b.barh(range(num_bits), np.zeros(num_bits), color=plots.COLORS["blue"])
        ax_b.set_xlim(0, 1.1)
        ax_b.set_ylim(num_bits - 0.5, -0.5)
        ax_b.set_yticks(range(num_bits), [f"$2^{{{j}}}$" for j in range(num_bits)])
        ax_b.set_xticks([0, 1])

    def draw(frame: int) -> None:
        seen = codes.T.clone().numpy()  # [n, T]
        seen[:, frame + 1 :] = np.nan
        image.set_data(seen)
        ax_h.set_title(f"bits of positions 0 .. {frame}")
        for bar, value in zip(bars, codes[frame].tolist(), strict=True):
            bar.set_width(value)
        ax_b.set_title(f"p = {frame} = 0b{to_bitstring(frame, num_bits)}")

    return _animate(fig, draw, num_positions)


def _cube_path(ax3, points: torch.Tensor) -> None:
    """The path of the codes ``points [8, 3]`` along the edges of the unit cube, each step
    coloured by how many bits it flips."""
    colors = {1: plots.COLORS["green"], 2: plots.COLORS["orange"], 3: plots.COLORS["red"]}
    for a in points.tolist():  # the edges of the cube, faint
        for b in points.tolist():
            if sum(x != y for x, y in zip(a, b, strict=True)) == 1 and a < b:
                ax3.plot(*zip(a, b, strict=True), color="#b8bcc2", lw=0.9, ls=":")
    for p, length in enumerate(step_lengths(points).tolist()):
        flipped = round(length**2)
        a, b = points[p], points[p + 1]
        ax3.plot(*zip(a.tolist(), b.tolist(), strict=True), color=colors[flipped], lw=2.2)
    ax3.scatter(*points.T.tolist(), color=plots.COLORS["ink"], s=18, depthshade=False)
    for p, xyz in enumerate(points.tolist()):
        ax3.text(*[c + 0.06 for c in xyz], str(p), fontsize=9)
    ax3.set_xlabel("bit 0")
    ax3.set_ylabel("bit 1")
    ax3.set_zlabel("bit 2")
    ax3.set_xticks([0, 1])
    ax3.set_yticks([0, 1])
    ax3.set_zticks([0, 1])
    ax3.view_init(elev=22, azim=-58)
    ax3.set_box_aspect(None, zoom=0.88)
    handles = [
        Line2D([], [], color=colors[k], lw=2.2, label=f"{k} bit{'s' if k > 1 else ''}")
        for k in (1, 2, 3)
    ]
    ax3.legend(handles=handles, loc="upper left", fontsize=8, title="step flips")
    ax3.set_title("3-bit codes of positions 0..7")


def binary_path_figure(
    *,
    path_bits: int = 3,
    step_bits: int = 6,
    compare: torch.Tensor | None = None,
    compare_label: str = "",
):
    """The binary path in 3-D, and the length of every step between neighbours.

    Left: the codes of positions ``0 .. 7`` (3 bits) as corners of the unit cube, joined
    in order, each segment coloured by its length. Right: ``||code(p + 1) - code(p)||`` for
    every ``p`` of a ``step_bits``-bit code, and, if given, the same for another encoding
    (its first ``2**step_bits - 1`` steps).

    Args:
        path_bits: bits of the 3-D path; must be 3 (one axis per bit).
        step_bits: bits of the code whose steps are plotted, ``2 .. 12``.
        compare: optional ``[T, D]`` encoding of positions ``0 .. T-1`` drawn as a line.
        compare_label: its legend label.

    Returns:
        The figure (show it with :func:`posenc.plots.show`).

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
        _cube_path(ax3, points)
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
        ax.legend(loc="upper left")
        ax.set_title("length of each step")
    return fig


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


def _animate(fig, draw, frames: int) -> FuncAnimation:
    """Lay the figure out once, then freeze the layout so frames only redraw."""

    def styled(frame: int) -> None:
        with mpl.rc_context(plots.STYLE):
            draw(frame)

    styled(0)
    fig.canvas.draw()
    fig.set_layout_engine("none")
    return FuncAnimation(
        fig, styled, frames=frames, interval=_INTERVAL_MS, repeat=True, cache_frame_data=False
    )
