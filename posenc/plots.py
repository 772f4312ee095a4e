"""The book's plotting style and the figures the chapters share.

Every figure goes through :func:`figure`, which applies one style (fonts, grid, colours)
without changing matplotlib's global state, so a chapter's figures look alike in Jupyter,
Colab and the HTML book.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import matplotlib as mpl
import matplotlib.figure
import matplotlib.pyplot as plt
import torch

from posenc._validate import check_bool, check_int, check_real, check_sequence, check_str_sequence

__all__ = [
    "COLORS",
    "STYLE",
    "animation_html",
    "figure",
    "overlay_vectors",
    "show",
    "token_heatmap",
]

COLORS = {
    "ink": "#1f2430",
    "blue": "#3b75af",
    "green": "#699c52",
    "orange": "#e08a2e",
    "red": "#c0392b",
    "grey": "#9aa0a6",
}
"""Named colours of the book; ``green`` marks the token under discussion, as in the source post."""

STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
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
        color=[COLORS[c] for c in ("blue", "orange", "green", "red", "ink")]
    ),
    "image.cmap": "viridis",
    "legend.frameon": False,
}
"""The rcParams every figure of the book is drawn with."""


def figure(nrows: int = 1, ncols: int = 1, *, width: float = 7.0, height: float = 3.2, **kwargs):
    """A new figure and axes in the book's style.

    Args:
        nrows, ncols: grid of axes, as ``plt.subplots``.
        width, height: size in inches.
        **kwargs: passed to ``plt.subplots``.

    Returns:
        ``(fig, ax)`` as ``plt.subplots`` returns them.

    Raises:
        TypeError: if ``nrows`` or ``ncols`` is not an int, or ``width`` or ``height`` is not
            a real number.
        ValueError: if a size or grid dimension is not positive, or a size is not finite.

    Example:
        >>> fig, ax = figure()
        >>> fig.get_size_inches().tolist()
        [7.0, 3.2]
        >>> plt.close(fig)
    """
    check_int("nrows", nrows, minimum=1)
    check_int("ncols", ncols, minimum=1)
    check_real("width", width, positive=True)
    check_real("height", height, positive=True)
    with mpl.rc_context(STYLE):
        fig, ax = plt.subplots(nrows, ncols, figsize=(width, height), **kwargs)
        fig.set_layout_engine("constrained")
    return fig, ax


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
        _, ax = figure(width=4.2, height=3.6)
    with mpl.rc_context(STYLE):
        image = ax.imshow(m.numpy(), norm=norm)
        ax.set_xticks(range(len(labels)), [repr(s) for s in labels], rotation=45, ha="right")
        ax.set_yticks(range(len(labels)), [repr(s) for s in labels])
        ax.grid(False)
        ax.figure.colorbar(image, ax=ax, shrink=0.8, label=label)
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
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=len(rows))
        ax.set_title(title)
    return ax


def show(fig) -> None:
    """Display a finished figure once and release it.

    In a notebook the figure is displayed as an image and closed, so it is neither shown
    twice nor kept in memory; elsewhere ``plt.show()`` is called.

    Args:
        fig: a matplotlib figure.

    Raises:
        TypeError: if ``fig`` is not a matplotlib figure.
    """
    if not isinstance(fig, mpl.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(fig)
        plt.close(fig)
    else:
        plt.show()


def animation_html(anim) -> object:
    """An animation as a self-contained HTML player that plays in the static book.

    The frames are embedded as images with matplotlib's ``to_jshtml``; the figure is closed
    so that no stray still frame is shown after the player. Keep animations small (at most
    about 40 frames at dpi 80: a few hundred KB).

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
    # matplotlib names the player with a random id; derive it from the frames instead, so
    # that re-running an unchanged chapter stores the same bytes
    random_id = re.search(r'id="_anim_img([0-9a-f]{32})"', html)
    if random_id:
        stable = hashlib.md5(html.replace(random_id.group(1), "").encode()).hexdigest()
        html = html.replace(random_id.group(1), stable)
    return HTML(html)
