"""The book's plotting style and the figures the chapters share.

Every figure goes through :func:`figure`, which applies one style (fonts, grid, colours)
without changing matplotlib's global state, and through :func:`show`, which displays it at
the width of the book's text column, drawn at twice that resolution for high-density
screens. So a chapter's figures look alike in Jupyter, Colab and the HTML book.

The sizes are fixed here, once: figures are :data:`FIGURE_WIDTH` inches wide and shown at
:data:`CSS_DPI` CSS pixels per inch, which makes them exactly :data:`COLUMN_PX` wide, the
text column at a 1400 px window. :func:`layout` measures a finished figure against the
book's rules (text of at least :data:`MIN_TEXT_PX`, panels of at least
:data:`MIN_PANEL_PX`, at most :data:`MAX_LINES` lines per axes); a test holds every figure
of the book to them.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from posenc._extras import missing_error

try:
    import matplotlib as mpl
    import matplotlib.figure
    import matplotlib.pyplot as plt
except ModuleNotFoundError as err:
    raise missing_error("posenc.display.plots", [err.name or "matplotlib"]) from None

from posenc._validate import check_bool, check_int, check_real, check_sequence, check_str_sequence

__all__ = [
    "COLORS",
    "COLUMN_PX",
    "CSS_DPI",
    "DIVERGING",
    "FIGURE_WIDTH",
    "MAX_LINES",
    "MIN_PANEL_PX",
    "MIN_TEXT_PX",
    "SEQUENTIAL",
    "STYLE",
    "Layout",
    "animation_html",
    "colorbar_below",
    "figure",
    "layout",
    "overlay_vectors",
    "show",
    "token_heatmap",
]

COLUMN_PX = 784
"""Width of the book's text column in CSS pixels (sphinx-book-theme at a 1400 px window)."""

CSS_DPI = 100
"""CSS pixels per figure inch: a figure is shown at ``inches * CSS_DPI`` pixels."""

FIGURE_WIDTH = COLUMN_PX / CSS_DPI
"""Width of every figure in inches: exactly the text column."""

PNG_SCALE = 2
"""Figures are drawn at this multiple of their CSS size, to stay crisp on dense screens."""

MIN_TEXT_PX = 10
"""Smallest text a figure may show, in CSS pixels at column width."""

MIN_PANEL_PX = 300
"""Narrowest panel (axes) a figure may have, in CSS pixels at column width."""

MAX_LINES = 6
"""Most lines one axes may draw; more series are faceted or labelled directly."""

COLORS = {
    "ink": "#1f2430",
    "blue": "#0072b2",
    "orange": "#e69f00",
    "green": "#009e73",
    "red": "#d55e00",
    "purple": "#cc79a7",
    "sky": "#56b4e9",
    "grey": "#9aa0a6",
}
"""Named colours of the book, from the Okabe-Ito palette (safe for colour-blind readers);
``green`` marks the token under discussion, as in the source post."""

SEQUENTIAL = "viridis"
"""The colour map for values of one sign (sizes, distances, weights)."""

DIVERGING = "RdBu_r"
"""The colour map for signed values, centred on zero."""

STYLE = {
    "figure.dpi": CSS_DPI,
    "savefig.dpi": CSS_DPI * PNG_SCALE,
    "font.size": 10,
    "axes.titlesize": 10.5,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "figure.titlesize": 11,
    "axes.edgecolor": COLORS["grey"],
    "axes.labelcolor": COLORS["ink"],
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e6e8eb",
    "grid.linewidth": 0.8,
    "xtick.color": COLORS["ink"],
    "ytick.color": COLORS["ink"],
    "axes.prop_cycle": mpl.cycler(
        color=[COLORS[c] for c in ("blue", "orange", "green", "red", "purple", "sky")]
    ),
    "image.cmap": SEQUENTIAL,
    "legend.frameon": False,
}
"""The rcParams every figure of the book is drawn with."""


def figure(nrows: int = 1, ncols: int = 1, *, height: float = 3.2, **kwargs):
    """A new figure and axes in the book's style, as wide as the text column.

    At most two panels fit side by side (each :data:`MIN_PANEL_PX` wide or more); stack
    more panels in rows.

    Args:
        nrows, ncols: grid of axes, as ``plt.subplots``.
        height: height in inches (the width is always :data:`FIGURE_WIDTH`).
        **kwargs: passed to ``plt.subplots``.

    Returns:
        ``(fig, ax)`` as ``plt.subplots`` returns them.

    Raises:
        TypeError: if ``nrows`` or ``ncols`` is not an int, or ``height`` is not a real
            number.
        ValueError: if a grid dimension or the height is not positive or finite, or more
            columns are asked for than fit the column.

    Example:
        >>> fig, ax = figure()
        >>> fig.get_size_inches().tolist()
        [7.84, 3.2]
        >>> plt.close(fig)
    """
    check_int("nrows", nrows, minimum=1)
    check_int("ncols", ncols, minimum=1)
    check_real("height", height, positive=True)
    if ncols > COLUMN_PX // MIN_PANEL_PX:
        raise ValueError(
            f"ncols must be at most {COLUMN_PX // MIN_PANEL_PX} (panels of {MIN_PANEL_PX} px "
            f"or more in a {COLUMN_PX} px column), got {ncols}: stack the panels in rows"
        )
    with mpl.rc_context(STYLE):
        fig, ax = plt.subplots(nrows, ncols, figsize=(FIGURE_WIDTH, height), **kwargs)
        fig.set_layout_engine("constrained")
    return fig, ax


@dataclass(frozen=True)
class Layout:
    """A figure measured as the book shows it, at column width.

    Attributes:
        width_px: the figure's displayed width in CSS pixels.
        smallest_text_px: the smallest visible text, in CSS pixels (``inf`` if none).
        smallest_text: that text.
        narrowest_panel_px: the narrowest axes that is not a colour bar, in CSS pixels.
        most_lines: the most lines drawn in one axes.

    Example:
        >>> Layout(784.0, 9.0, "tick", 400.0, 2).problems()
        ["text 'tick' is 9.0 px, under 10 px"]
    """

    width_px: float
    smallest_text_px: float
    smallest_text: str
    narrowest_panel_px: float
    most_lines: int

    def problems(self) -> list[str]:
        """What breaks the book's rules, one sentence each (empty when nothing does)."""
        found = []
        if self.width_px > COLUMN_PX + 0.5:
            found.append(f"{self.width_px:.0f} px wide, wider than the {COLUMN_PX} px column")
        if self.smallest_text_px < MIN_TEXT_PX - 1e-6:
            found.append(
                f"text {self.smallest_text!r} is {self.smallest_text_px:.1f} px, "
                f"under {MIN_TEXT_PX} px"
            )
        if self.narrowest_panel_px < MIN_PANEL_PX:
            found.append(
                f"a panel is {self.narrowest_panel_px:.0f} px wide, under {MIN_PANEL_PX} px"
            )
        if self.most_lines > MAX_LINES:
            found.append(f"an axes draws {self.most_lines} lines, more than {MAX_LINES}")
        return found


def layout(fig) -> Layout:
    """Measure a figure as the book displays it (see :class:`Layout`).

    A figure wider than the column would be scaled down to fit, and its text with it.

    Args:
        fig: a matplotlib figure.

    Returns:
        The :class:`Layout`.

    Raises:
        TypeError: if ``fig`` is not a matplotlib figure.

    Example:
        >>> fig, ax = figure()
        >>> _ = ax.plot([0, 1])
        >>> layout(fig).problems()
        []
        >>> plt.close(fig)
    """
    if not isinstance(fig, mpl.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    fig.canvas.draw()
    width_px = fig.get_figwidth() * CSS_DPI
    shrink = min(1.0, COLUMN_PX / width_px)
    px_per_pt = CSS_DPI / 72 * shrink
    smallest, smallest_text = float("inf"), ""
    for text in fig.findobj(mpl.text.Text):
        if text.get_visible() and text.get_text().strip() and _drawn(text):
            size = text.get_fontsize() * px_per_pt
            if size < smallest:
                smallest, smallest_text = size, text.get_text()
    renderer = fig.canvas.get_renderer()
    panels = [
        ax.get_window_extent(renderer).width / fig.dpi * CSS_DPI * shrink
        for ax in fig.axes
        if ax.get_visible() and ax.get_label() != "<colorbar>" and ax.axison
    ]
    lines = [sum(1 for ln in ax.get_lines() if ln.get_visible()) for ax in fig.axes]
    return Layout(
        width_px=width_px * shrink if width_px <= COLUMN_PX else width_px,
        smallest_text_px=smallest,
        smallest_text=smallest_text,
        narrowest_panel_px=min(panels, default=float("inf")),
        most_lines=max(lines, default=0),
    )


def _drawn(text) -> bool:
    """Whether a text artist is inside its figure (tick labels outside the view are not)."""
    box = text.get_window_extent()
    return box.width > 0 and box.height > 0


def _as_cpu(name: str, x: object, ndim: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    return x.detach().float().cpu()


def token_heatmap(
    matrix: torch.Tensor,
    labels: Sequence[str],
    *,
    ax=None,
    title: str = "",
    log: bool = False,
    label: str = "",
):
    """Draw a ``[T, T]`` matrix over the tokens of a sentence, rows down, columns across.

    Attention weights (queries down, keys across) or distances between the outputs of every
    pair of tokens both fit.

    Args:
        matrix: shape ``[T, T]``.
        labels: ``T`` token labels.
        ax: axes to draw into; a new figure when None.
        title: axes title.
        log: colour by ``log10`` of the entries (zeros are drawn as the smallest positive
            entry), for values that span many orders of magnitude.
        label: colour-bar label.

    Returns:
        The axes.

    Raises:
        TypeError: if ``matrix`` is not a tensor, ``labels`` is not a sequence of strings, or
            ``log`` is not a bool.
        ValueError: if ``matrix`` is not square, ``labels`` has the wrong length, or ``log``
            is asked for with negative entries or no positive entry.

    Example:
        >>> ax = token_heatmap(torch.full((2, 2), 0.5), ["a", "b"])
        >>> plt.close(ax.figure)
    """
    m = _as_cpu("matrix", matrix, 2)
    if m.shape[0] != m.shape[1]:
        raise ValueError(f"matrix must be square [T, T], got shape {tuple(m.shape)}")
    check_str_sequence("labels", labels)
    if len(labels) != m.shape[0]:
        raise ValueError(
            f"labels must have T={m.shape[0]} entries (one per row of matrix), "
            f"got {len(labels)}: {labels!r}"
        )
    check_bool("log", log)
    norm = None
    if log:
        if (m < 0).any() or not (m > 0).any():
            raise ValueError("log=True needs non-negative entries with at least one positive")
        floor = m[m > 0].min()
        m = m.clamp_min(floor)
        norm = mpl.colors.LogNorm(vmin=floor.item(), vmax=m.max().item())
    if ax is None:
        _, ax = figure(height=3.6)
    with mpl.rc_context(STYLE):
        # cells fill the panel's width (a token matrix has no geometry to keep square)
        image = ax.imshow(m.numpy(), norm=norm, aspect="auto", interpolation="none")
        names = [repr(s) for s in labels]
        # rotated about their right end, so each label ends under its own column and the
        # first one (often a long start token) stays inside the figure
        ax.set_xticks(range(len(labels)), names, rotation=30, ha="right")
        for tick in ax.get_xticklabels():
            tick.set_rotation_mode("anchor")
        ax.set_yticks(range(len(labels)), names)
        ax.grid(False)
        ax.figure.colorbar(image, ax=ax, label=label)
        ax.set_title(title)
    return ax


def overlay_vectors(
    vectors: Sequence[torch.Tensor], labels: Sequence[str], *, ax=None, title: str = ""
):
    """Draw several 1-D vectors over each other, feature index across.

    Args:
        vectors: 1-D tensors of equal length ``D``.
        labels: one legend label per vector.
        ax: axes to draw into; a new figure when None.
        title: axes title.

    Returns:
        The axes.

    Raises:
        TypeError: if ``vectors`` is not a sequence of tensors or ``labels`` not a sequence
            of strings.
        ValueError: if there are no vectors, lengths differ, or labels do not match.

    Example:
        >>> ax = overlay_vectors([torch.zeros(4), torch.ones(4)], ["a", "b"])
        >>> plt.close(ax.figure)
    """
    check_sequence("vectors", vectors, what="a sequence of 1-D tensors")
    check_str_sequence("labels", labels)
    if len(labels) != len(vectors):
        raise ValueError(
            f"labels must have one entry per vector ({len(vectors)}), got {len(labels)}: {labels!r}"
        )
    rows = [_as_cpu(f"vectors[{i}]", v, 1) for i, v in enumerate(vectors)]
    if len({r.numel() for r in rows}) != 1:
        raise ValueError(f"vectors must have equal length, got {[r.numel() for r in rows]}")
    if ax is None:
        _, ax = figure()
    with mpl.rc_context(STYLE):
        styles = ["-", "--", ":", "-."]
        for i, (row, label) in enumerate(zip(rows, labels, strict=True)):
            ax.plot(row.numpy(), styles[i % len(styles)], lw=1.6, label=label)
        ax.set_xlabel("feature")
        # below the x label, whatever the height of the axes: outside the data
        under_label = mpl.transforms.offset_copy(ax.transAxes, ax.figure, y=-36, units="points")
        ax.legend(
            loc="upper center",
            bbox_to_anchor=(0.5, 0),
            bbox_transform=under_label,
            ncols=min(len(rows), 3),
        )
        ax.set_title(title)
    return ax


def colorbar_below(image, axes, label: str = ""):
    """One colour bar under a group of panels that share a colour scale.

    Half as wide as the panels, thin, and placed without moving them, so panels with and
    without a bar line up.

    Args:
        image: what the bar shows the scale of (e.g. the result of ``ax.imshow``).
        axes: the panels it sits under: one axes or a sequence of them.
        label: the bar's label (what the colour means, with units).

    Returns:
        The matplotlib ``Colorbar``.

    Raises:
        TypeError: if ``image`` has no colour scale, or ``axes`` holds something that is not
            an axes of one figure.

    Example:
        >>> fig, axes = figure(1, 2)
        >>> bar = colorbar_below(axes[0].imshow([[0.0, 1.0]]), axes, label="value")
        >>> bar.orientation
        'horizontal'
        >>> plt.close(fig)
    """
    if not isinstance(image, mpl.cm.ScalarMappable):
        raise TypeError(
            f"image must have a colour scale (a matplotlib ScalarMappable, e.g. from imshow), "
            f"got {type(image).__name__}"
        )
    group = [axes] if isinstance(axes, mpl.axes.Axes) else list(_flat(axes))
    if not group or not all(isinstance(ax, mpl.axes.Axes) for ax in group):
        raise TypeError(f"axes must be an axes or a non-empty sequence of axes, got {axes!r}")
    fig = group[0].figure
    if any(ax.figure is not fig for ax in group):
        raise TypeError("axes must all belong to one figure")
    with mpl.rc_context(STYLE):
        return fig.colorbar(
            image, ax=group, location="bottom", shrink=0.5, aspect=30, panchor=False, label=label
        )


def _flat(axes):
    try:
        items = list(axes.flat) if hasattr(axes, "flat") else list(axes)
    except TypeError:
        return [axes]
    return items


def show(fig) -> None:
    """Display a finished figure once, at column width, and release it.

    In a notebook the figure is displayed as a PNG drawn at :data:`PNG_SCALE` times its
    CSS size and shown :data:`COLUMN_PX` wide, then closed, so it is neither shown twice
    nor kept in memory; elsewhere ``plt.show()`` is called.

    Args:
        fig: a matplotlib figure.

    Raises:
        TypeError: if ``fig`` is not a matplotlib figure.
    """
    if not isinstance(fig, mpl.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=CSS_DPI * PNG_SCALE, metadata={"Software": None})
        plt.close(fig)
        display(Image(data=buffer.getvalue(), width=round(fig.get_figwidth() * CSS_DPI)))
    else:
        plt.show()


def animation_html(anim) -> object:
    """An animation as a self-contained HTML player that plays in the static book.

    The frames are embedded as images with matplotlib's ``to_jshtml``; the figure is closed
    so that no stray still frame is shown after the player. Keep animations small (at most
    about 40 frames at full column width and dpi 100: about 1 MB). The player opens on
    frame ``anim.start_frame`` when the animation has one (frame 0 otherwise), its slider
    at that frame.

    Args:
        anim: a ``matplotlib.animation.Animation``.

    Returns:
        An ``IPython.display.HTML`` object; the last expression of a cell displays it.

    Raises:
        TypeError: if ``anim`` is not a matplotlib animation.
    """
    from matplotlib.animation import Animation

    if not isinstance(anim, Animation):
        raise TypeError(f"anim must be a matplotlib Animation, got {type(anim).__name__}")
    from IPython.display import HTML

    html = anim.to_jshtml(default_mode="loop")
    plt.close(anim._fig)
    start = getattr(anim, "start_frame", 0)
    if start:
        # matplotlib's player always opens on frame 0: move it, and its slider, once made
        made = re.search(r"(anim[0-9a-f]{32}) = new Animation\([^;]*\);", html)
        if made is None:
            raise RuntimeError("matplotlib's player template changed: cannot set its start frame")
        html = html.replace(
            made.group(0), f"{made.group(0)}\n        {made.group(1)}.set_frame({start});"
        )
    # matplotlib names the player with a random id; derive it from the frames instead, so
    # that re-running an unchanged chapter stores the same bytes
    random_id = re.search(r'id="_anim_img([0-9a-f]{32})"', html)
    if random_id:
        stable = hashlib.md5(html.replace(random_id.group(1), "").encode()).hexdigest()
        html = html.replace(random_id.group(1), stable)
    return HTML(html)
