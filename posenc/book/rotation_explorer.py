"""The rotation explorer: a vector, its rotation, and the 2x2 matrix that does it.

Three views of one picture, all drawn by :func:`draw_rotation`:

- :func:`draw_rotation`: a static figure for one angle (what the HTML book shows);
- :func:`rotation_explorer`: live sliders for the angle and the vector (Jupyter, Colab);
- :func:`rotation_animation`: the vector turning through a full circle.

Rotations are counter-clockwise, as :func:`posenc.rotation.rotation_matrix` draws them;
angles are given in degrees, the unit a slider reads best in.
"""

from __future__ import annotations

import math

import matplotlib as mpl
import torch

from posenc._validate import check_real_pair
from posenc.display import plots
from posenc.rotation import rotation_matrix

__all__ = ["draw_rotation", "rotation_animation", "rotation_explorer"]

MAX_FRAMES = 40
"""The most frames :func:`rotation_animation` makes (the book's limit for animations)."""


def _check_angle(angle: object) -> float:
    if isinstance(angle, bool) or not isinstance(angle, (int, float)):
        raise TypeError(f"angle must be a real number (degrees), got {angle!r}")
    if not math.isfinite(angle):
        raise ValueError(f"angle must be finite, got angle={angle}")
    return float(angle)


def _fmt(value: float) -> str:
    return f"{round(value, 2) + 0.0:5.2f}"  # "+ 0.0" turns -0.00 into 0.00


def _caption(angle: float, vector: tuple[float, float]) -> tuple[str, float, float]:
    """The product ``R v`` written out, and the end point ``R v``."""
    theta = math.radians(angle)
    r = rotation_matrix(torch.tensor(theta, dtype=torch.float64))  # [2, 2]
    v = torch.tensor(vector, dtype=torch.float64)  # [2]
    rv = r @ v  # [2]
    row = [f"[{_fmt(r[i, 0].item())} {_fmt(r[i, 1].item())}]" for i in range(2)]
    col_v = [f"[{_fmt(v[i].item())}]" for i in range(2)]
    col_rv = [f"[{_fmt(rv[i].item())}]" for i in range(2)]
    lines = [
        f"R({angle:g}°) v = R v",
        "",
        f"{row[0]}   {col_v[0]}   {col_rv[0]}",
        f"{row[1]} x {col_v[1]} = {col_rv[1]}",
        "",
        f"|v| = {_fmt(v.norm().item()).strip()}   |R v| = {_fmt(rv.norm().item()).strip()}",
        "",
        f"cos = {_fmt(math.cos(theta)).strip()}   sin = {_fmt(math.sin(theta)).strip()}",
    ]
    return "\n".join(lines), rv[0].item(), rv[1].item()


def _arc(angle: float, vector: tuple[float, float]) -> tuple[torch.Tensor, torch.Tensor]:
    """Points of the arc swept from ``v`` to ``R v``, drawn at a third of ``|v|``."""
    norm = math.hypot(*vector)
    start = math.atan2(vector[1], vector[0])
    arc = start + torch.linspace(0, math.radians(angle), 60)
    return 0.35 * norm * arc.cos(), 0.35 * norm * arc.sin()


def _setup(ax_plane, ax_text, vector: tuple[float, float]) -> dict:
    """Draw what stays fixed and create the artists :func:`_update` moves."""
    norm = math.hypot(*vector)
    reach = 1.25 * max(1.0, norm)
    with mpl.rc_context(plots.STYLE):
        circle = torch.linspace(0, 2 * math.pi, 121)
        ax_plane.plot(norm * circle.cos(), norm * circle.sin(), color=plots.COLORS["grey"], lw=0.8)
        ax_plane.axhline(0, color=plots.COLORS["grey"], lw=0.6)
        ax_plane.axvline(0, color=plots.COLORS["grey"], lw=0.6)
        (arc,) = ax_plane.plot([], [], color=plots.COLORS["green"], lw=1.4)
        arrows, keys = [], []
        for color, label in ((plots.COLORS["blue"], "v"), (plots.COLORS["orange"], "R v")):
            arrows.append(
                ax_plane.annotate(
                    "",
                    xy=vector,
                    xytext=(0, 0),
                    arrowprops={"arrowstyle": "-|>", "color": color, "lw": 2.2, "shrinkA": 0},
                )
            )
            keys.append(mpl.lines.Line2D([], [], color=color, lw=2.2, label=label))
        ax_plane.set_xlim(-reach, reach)
        ax_plane.set_ylim(-reach, reach)
        ax_plane.set_aspect("equal")
        title = ax_plane.set_title(" ")
        ax_text.axis("off")
        # the key sits in the text panel, clear of the arrows wherever they point
        ax_text.legend(handles=keys, loc="upper left", ncols=2)
        caption = ax_text.text(
            0.0,
            0.45,
            "",
            family="monospace",
            va="center",
            ha="left",
            color=plots.COLORS["ink"],
            transform=ax_text.transAxes,
        )
    return {"arc": arc, "rotated": arrows[1], "title": title, "caption": caption}


def _update(artists: dict, angle: float, vector: tuple[float, float]) -> list:
    """Move the rotated arrow, the arc and the text to ``angle``; return what changed."""
    text, x, y = _caption(angle, vector)
    artists["rotated"].xy = (x, y)
    artists["arc"].set_data(*_arc(angle, vector))
    artists["title"].set_text(f"rotation by {angle:g}°")
    artists["caption"].set_text(text)
    return list(artists.values())


def _new_figure():
    fig, (ax_plane, ax_text) = plots.figure(
        1, 2, height=3.8, gridspec_kw={"width_ratios": [1.0, 0.95]}
    )
    return fig, ax_plane, ax_text


def draw_rotation(angle: float = 45.0, vector=(1.0, 0.0)):
    """A vector before and after rotation, with the rotation matrix written out.

    Left: ``v`` and ``R v`` as arrows from the origin, the circle they both lie on and the
    arc between them. Right: the product ``R v`` with every entry to two decimals, and the
    two lengths (equal: a rotation keeps lengths).

    Args:
        angle: the rotation angle in degrees (counter-clockwise).
        vector: the vector ``v`` as ``(x, y)`` (a pair of numbers or a 2-element tensor).

    Returns:
        The matplotlib figure; show it with :func:`posenc.display.plots.show`.

    Raises:
        TypeError: if ``angle`` or an entry of ``vector`` is not a real number.
        ValueError: if ``vector`` does not have two entries, or a value is not finite.

    Example:
        >>> fig = draw_rotation(90, (1.0, 0.0))
        >>> print(fig.axes[1].texts[0].get_text())
        R(90°) v = R v
        <BLANKLINE>
        [ 0.00 -1.00]   [ 1.00]   [ 0.00]
        [ 1.00  0.00] x [ 0.00] = [ 1.00]
        <BLANKLINE>
        |v| = 1.00   |R v| = 1.00
        <BLANKLINE>
        cos = 0.00   sin = 1.00
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    angle = _check_angle(angle)
    vector = check_real_pair("vector", vector)
    fig, ax_plane, ax_text = _new_figure()
    _update(_setup(ax_plane, ax_text, vector), angle, vector)
    return fig


def rotation_explorer(angle: float = 45.0, vector=(1.0, 0.0)) -> None:
    """Live sliders for the angle and the vector, redrawing :func:`draw_rotation`.

    Needs a Jupyter or Colab front end with ipywidgets (imported here, not at module import);
    the book's HTML shows the static :func:`draw_rotation` figure instead.

    Args:
        angle: the starting angle in degrees (-180 .. 180).
        vector: the starting vector ``(x, y)``, each entry in -1.5 .. 1.5.

    Raises:
        TypeError, ValueError: as :func:`draw_rotation`, or if a starting value is outside
            its slider's range.
        ImportError: if ipywidgets is not installed.
    """
    angle = _check_angle(angle)
    vector = check_real_pair("vector", vector)
    if not -180 <= angle <= 180:
        raise ValueError(f"angle must be within -180 .. 180 degrees, got angle={angle}")
    if not all(-1.5 <= v <= 1.5 for v in vector):
        raise ValueError(f"vector entries must be within -1.5 .. 1.5, got vector={vector}")
    import ipywidgets as widgets
    from IPython.display import display

    sliders = {
        "angle": widgets.FloatSlider(
            value=angle, min=-180, max=180, step=5, description="angle (°)"
        ),
        "x": widgets.FloatSlider(value=vector[0], min=-1.5, max=1.5, step=0.05, description="x"),
        "y": widgets.FloatSlider(value=vector[1], min=-1.5, max=1.5, step=0.05, description="y"),
    }

    def redraw(angle: float, x: float, y: float) -> None:
        plots.show(draw_rotation(angle, (x, y)))

    output = widgets.interactive_output(redraw, sliders)
    display(widgets.VBox([widgets.HBox(list(sliders.values())), output]))


def rotation_animation(vector=(1.0, 0.5), *, frames: int = 24, dpi: int = plots.CSS_DPI):
    """The vector ``v`` turning once around the circle while the matrix updates.

    The frames are the angles ``360 j / frames`` degrees, ``j = 0 .. frames-1``; the player
    opens at ``j = frames // 6`` (60 degrees for 24 frames, with the arc and both arrows in
    view) and loops round from there. The figure is the one :func:`draw_rotation` draws,
    at the same size.

    Args:
        vector: the vector ``v`` as ``(x, y)``.
        frames: frames in one full turn (2 .. 40), evenly spaced in angle.
        dpi: resolution of each frame (20 .. 100); the default draws them at the CSS size
            of the book's figures (``posenc.display.plots.CSS_DPI``).

    Returns:
        A ``matplotlib.animation.FuncAnimation``; display it with
        :func:`posenc.display.plots.animation_html`.

    Raises:
        TypeError: if ``frames`` or ``dpi`` is not an int, or ``vector`` is malformed.
        ValueError: if ``frames`` is outside 2 .. 40 or ``dpi`` outside 20 .. 100.

    Example:
        >>> anim = rotation_animation(frames=12, dpi=20)
        >>> list(anim.new_frame_seq())[:3]  # opens at 60 degrees
        [2, 3, 4]
        >>> anim.to_jshtml().count("data:image/png")  # one image per frame
        12
        >>> import matplotlib.pyplot as plt; plt.close(anim._fig)
    """
    from matplotlib.animation import FuncAnimation

    from posenc._validate import check_int, check_real_pair

    vector = check_real_pair("vector", vector)
    check_int("frames", frames, minimum=2)
    if frames > MAX_FRAMES:
        raise ValueError(f"frames must be at most {MAX_FRAMES}, got frames={frames}")
    check_int("dpi", dpi, minimum=20)
    if dpi > plots.CSS_DPI:
        raise ValueError(f"dpi must be at most {plots.CSS_DPI}, got dpi={dpi}")
    fig, ax_plane, ax_text = _new_figure()
    fig.set_dpi(dpi)
    artists = _setup(ax_plane, ax_text, vector)
    angles = [360.0 * i / frames for i in range(frames)]
    _update(artists, angles[-1], vector)  # the widest title and arc, for the layout
    fig.canvas.draw()
    fig.set_layout_engine(None)  # keep that layout: no re-solving (nor extra draw) per frame

    def update(i: int) -> list:
        return _update(artists, angles[i], vector)

    first = frames // 6
    order = [(first + j) % frames for j in range(frames)]
    update(first)
    return FuncAnimation(fig, update, frames=order, interval=150, repeat=True)
