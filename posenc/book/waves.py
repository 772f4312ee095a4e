"""Sine waves: amplitude, frequency, phase, and why a (sin, cos) pair names an angle.

Chapter 4 uses these functions to take a single wave ``y = A sin(f t + phi)`` apart, to
show that sine alone cannot tell two angles of one turn apart, and that the pair
``(sin t, cos t)`` can (``atan2`` gives ``t`` back). Frequencies here are angular: ``f``
radians per unit of ``t``, so one period lasts ``2 pi / f``, as in the sinusoidal encoding
of chapter 5.

Shapes: ``t`` is any ``[...]``; a set of ``T`` points to compare is ``[T]`` or ``[T, D]``.
"""

from __future__ import annotations

import fractions
import math
from collections.abc import Sequence

import matplotlib as mpl
import matplotlib.animation
import torch

from posenc._validate import check_int, check_positive_float, check_str_sequence, same_device
from posenc.display import plots

__all__ = [
    "ambiguity_figure",
    "angle_from_pair",
    "circle_animation",
    "collisions",
    "explorer",
    "explorer_figure",
    "format_table",
    "period",
    "rounded",
    "sine_partner",
    "value_table",
    "wave",
]

TWO_PI = 2 * math.pi


def _check_real(name: str, value: object, *, minimum: float | None = None) -> float:
    """Return ``value`` as a float if it is a finite real number of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {name}={value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {name}={value}")
    return float(value)


def _check_floating(name: str, x: object) -> torch.Tensor:
    """A floating tensor; the message says what came instead (a type or a dtype)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"{name} must be a floating torch.Tensor, got {got}")
    return x


def _as_angles(name: str, t: object) -> torch.Tensor:
    """``t`` as a real floating tensor: float64 stays float64, anything else becomes float32."""
    if isinstance(t, bool) or not isinstance(t, (int, float, torch.Tensor)):
        raise TypeError(f"{name} must be a number or a tensor, got {type(t).__name__}")
    x = torch.as_tensor(t)
    if x.is_complex() or x.dtype == torch.bool:
        raise TypeError(f"{name} must be real, got dtype {x.dtype}")
    return x if x.dtype == torch.float64 else x.to(torch.float32)


def wave(t, amplitude: float = 1.0, frequency: float = 1.0, phase: float = 0.0) -> torch.Tensor:
    """The sine wave ``A sin(f t + phi)``.

    ``A`` (amplitude) sets the height: the wave stays in ``[-A, A]``. ``f`` (angular
    frequency) sets the speed: one full cycle every ``2 pi / f``. ``phi`` (phase) slides
    the wave: ``wave(t, A, f, phi) == wave(t + phi / f, A, f, 0)``.

    Args:
        t: a number or a tensor ``[...]`` of inputs (angles for ``f = 1``).
        amplitude: ``A >= 0``.
        frequency: ``f > 0``, radians per unit of ``t``.
        phase: ``phi``, any finite number of radians.

    Returns:
        ``[...]`` like ``t``, on its device; float64 for a float64 ``t``, else float32.

    Raises:
        TypeError: if ``t`` is not a real number or tensor, or a parameter is not a number.
        ValueError: if ``amplitude`` is negative, ``frequency`` is not positive, or a
            parameter is not finite.

    Example:
        >>> wave(torch.tensor([0.0, 0.25]), amplitude=2.0, frequency=2 * math.pi)
        tensor([0., 2.])
    """
    x = _as_angles("t", t)
    a = _check_real("amplitude", amplitude, minimum=0.0)
    f = check_positive_float("frequency", frequency)
    phi = _check_real("phase", phase)
    return a * torch.sin(f * x + phi)


def period(frequency: float) -> float:
    """The period ``2 pi / f`` of a wave of angular frequency ``f``: it repeats after that.

    Args:
        frequency: ``f > 0``.

    Returns:
        The period, a float.

    Raises:
        TypeError, ValueError: if ``frequency`` is not a positive finite number.

    Example:
        >>> round(period(1.0), 4), period(math.pi)
        (6.2832, 2.0)
    """
    return TWO_PI / check_positive_float("frequency", frequency)


def rounded(x: torch.Tensor, decimals: int = 6) -> torch.Tensor:
    """Round to ``decimals`` places and turn every ``-0.0`` into ``0.0``, for printing.

    ``sin(2 pi)`` is ``-2.4e-16`` in float64, which rounds to ``-0.0``; adding ``0.0``
    (``-0.0 + 0.0 == +0.0`` in IEEE arithmetic) removes the sign.

    Args:
        x: a floating tensor ``[...]``.
        decimals: places kept, ``>= 0``.

    Returns:
        ``[...]``, same dtype and device.

    Raises:
        TypeError: if ``x`` is not a floating tensor or ``decimals`` not an int.
        ValueError: if ``decimals < 0``.

    Example:
        >>> rounded(torch.tensor([-1e-9, 0.1234567, -0.0], dtype=torch.float64), 3).tolist()
        [0.0, 0.123, 0.0]
    """
    _check_floating("x", x)
    check_int("decimals", decimals, minimum=0)
    return torch.round(x, decimals=decimals) + 0.0


def _quarter_label(k: int) -> str:
    """``k pi / 2`` written in lowest terms: 0, π/2, π, 3π/2, 2π, ..."""
    if k < 0:
        raise ValueError(f"k must be at least 0, got k={k}")
    if k == 0:
        return "0"
    half, odd = divmod(k, 2)
    if odd:
        return "π/2" if k == 1 else f"{k}π/2"
    return "π" if half == 1 else f"{half}π"


def value_table(quarters: int = 4, *, decimals: int = 6) -> tuple[list[str], torch.Tensor]:
    """``sin t`` and ``cos t`` at every quarter turn ``t = k pi / 2``, ``k = 0 .. quarters``.

    Computed in float64 and passed through :func:`rounded`, so the tiny rounding residues
    (``cos(pi/2) = 6.1e-17``) print as exact zeros, without a sign.

    Args:
        quarters: last ``k``; the default ``4`` covers one turn, ``0 .. 2 pi``.
        decimals: places kept.

    Returns:
        ``(labels, values)``: ``quarters + 1`` labels (``"0"``, ``"π/2"``, ...) and a
        float64 ``[2, quarters + 1]`` tensor, row 0 ``sin t``, row 1 ``cos t``.

    Raises:
        TypeError, ValueError: if ``quarters < 0`` or ``decimals < 0`` or not ints.

    Example:
        >>> labels, values = value_table(2)
        >>> labels, values.tolist()
        (['0', 'π/2', 'π'], [[0.0, 1.0, 0.0], [1.0, 0.0, -1.0]])
    """
    check_int("quarters", quarters, minimum=0)
    check_int("decimals", decimals, minimum=0)
    t = torch.arange(quarters + 1, dtype=torch.float64) * (math.pi / 2)  # [T]
    values = torch.stack([torch.sin(t), torch.cos(t)])  # [2, T]
    return [_quarter_label(k) for k in range(quarters + 1)], rounded(values, decimals)


def format_table(labels: Sequence[str], values: torch.Tensor, names: Sequence[str]) -> str:
    """A small text table: a header row of ``labels``, then one row per entry of ``names``.

    Numbers are printed with ``:g`` (``1``, ``-1``, ``0.5``), right-aligned in columns.

    Args:
        labels: ``T`` column headers.
        values: ``[R, T]`` numbers.
        names: ``R`` row names.

    Returns:
        The table as one string, lines separated by ``\\n``.

    Raises:
        TypeError: if ``values`` is not a 2-D tensor.
        ValueError: if ``labels`` or ``names`` do not match the shape of ``values``.

    Example:
        >>> print(format_table(["0", "π"], torch.tensor([[0.0, 1.0]]), ["y"]))
        t   0  π
        y   0  1
    """
    if not isinstance(values, torch.Tensor) or values.dim() != 2 or values.numel() == 0:
        got = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
        raise TypeError(f"values must be a non-empty 2-D torch.Tensor [R, T], got {got}")
    labels = check_str_sequence("labels", labels)
    names = check_str_sequence("names", names)
    if len(labels) != values.shape[1]:
        raise ValueError(f"labels must have T={values.shape[1]} entries, got {len(labels)}")
    if len(names) != values.shape[0]:
        raise ValueError(f"names must have R={values.shape[0]} entries, got {len(names)}")
    cells = [["t", *labels]] + [
        [name, *(f"{v:g}" for v in row)] for name, row in zip(names, values.tolist(), strict=True)
    ]
    first = max(len(row[0]) for row in cells)
    width = max(len(c) for row in cells for c in row[1:])
    return "\n".join(
        f"{row[0]:<{first}} " + " ".join(f"{c:>{width + 1}}" for c in row[1:]) for row in cells
    )


def sine_partner(t) -> torch.Tensor:
    """The angle of ``[0, 2 pi)`` with the same sine as ``t``: ``(pi - t) mod 2 pi``.

    ``sin(pi - t) = sin t``, so every angle shares its sine with this partner. It is
    ``t`` itself (mod ``2 pi``) only at the top and bottom of the wave, ``pi/2`` and
    ``3 pi/2``.

    Args:
        t: a number or a tensor ``[...]`` of angles.

    Returns:
        ``[...]`` in ``[0, 2 pi)``; float64 for a float64 ``t``, else float32.

    Raises:
        TypeError: if ``t`` is not a real number or tensor.

    Example:
        >>> sine_partner(torch.tensor([0.0, math.pi / 6], dtype=torch.float64)) / math.pi
        tensor([1.0000, 0.8333], dtype=torch.float64)
    """
    return _wrap(math.pi - _as_angles("t", t))


def _wrap(x: torch.Tensor) -> torch.Tensor:
    """``x mod 2 pi`` in ``[0, 2 pi)``, even where the remainder rounds up to ``2 pi``."""
    r = torch.remainder(x, TWO_PI)
    return torch.where(r >= TWO_PI, r - TWO_PI, r)


@same_device
def angle_from_pair(sin: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    """The angle ``t`` in ``[0, 2 pi)`` with ``(sin t, cos t)`` = the given pair.

    ``atan2(sin, cos)`` reads the angle of the point ``(cos t, sin t)`` on the unit circle
    (in ``(-pi, pi]``); wrapping it into ``[0, 2 pi)`` gives ``t`` back. Only the pair can
    do this: ``sin`` alone leaves two candidates, ``t`` and ``pi - t``.

    Args:
        sin: ``[...]`` floating tensor.
        cos: ``[...]`` floating tensor of the same shape.

    Returns:
        ``[...]`` angles in ``[0, 2 pi)``, dtype and device of ``sin``.

    Raises:
        TypeError: if an argument is not a floating tensor.
        ValueError: if the shapes differ.

    Example:
        >>> t = torch.tensor([0.5, 3.0, 6.0], dtype=torch.float64)
        >>> torch.allclose(angle_from_pair(torch.sin(t), torch.cos(t)), t)
        True
    """
    for name, x in (("sin", sin), ("cos", cos)):
        _check_floating(name, x)
    if sin.shape != cos.shape:
        raise ValueError(
            f"sin and cos must have the same shape, got {tuple(sin.shape)} and {tuple(cos.shape)}"
        )
    return _wrap(torch.atan2(sin, cos))


def collisions(points: torch.Tensor, *, atol: float = 1e-9) -> torch.Tensor:
    """Every pair of different indices whose points agree to within ``atol``.

    Two points collide when no coordinate differs by more than ``atol`` (max-norm). For
    ``T`` angles, ``points = sin t`` (``[T]``) finds the angles sine cannot tell apart;
    ``points = (sin t, cos t)`` (``[T, 2]``) checks whether the pair can.

    Args:
        points: ``[T]`` (one number per index) or ``[T, D]``, floating.
        atol: tolerance ``>= 0``.

    Returns:
        int64 ``[K, 2]`` pairs ``(i, j)`` with ``i < j``, sorted, on the points' device.

    Raises:
        TypeError: if ``points`` is not a floating tensor or ``atol`` not a number.
        ValueError: if ``points`` is empty or not 1-D/2-D, or ``atol`` is negative.

    Example:
        >>> collisions(torch.tensor([0.0, 0.5, 1e-12, 0.5]))
        tensor([[0, 2],
                [1, 3]])
    """
    _check_floating("points", points)
    if points.dim() not in (1, 2) or points.shape[0] == 0:
        raise ValueError(f"points must be a non-empty [T] or [T, D], got {tuple(points.shape)}")
    tol = _check_real("atol", atol, minimum=0.0)
    pts = points[:, None] if points.dim() == 1 else points  # [T, D]
    t, d = pts.shape
    index = torch.arange(t, device=pts.device)  # [T]
    chunk = max(1, 2**22 // max(1, t * d))  # rows per block: about 4M differences at once
    found = []
    for start in range(0, t, chunk):
        block = pts[start : start + chunk]  # [C, D]
        gap = (block[:, None, :] - pts[None, :, :]).abs().amax(-1)  # [C, T]
        later = index[None, :] > index[start : start + chunk, None]  # [C, T], j > i only
        i, j = torch.nonzero((gap <= tol) & later, as_tuple=True)
        found.append(torch.stack([i + start, j], -1))
    return torch.cat(found)  # already sorted by i, then j


# Figures ---------------------------------------------------------------------------------


def _pi_ticks(ax, t_max: float) -> None:
    """Ticks at multiples of pi/2 (or pi when the axis is long) along x."""
    step = 2 if t_max > 4 * math.pi else 1
    ks = range(0, int(t_max / (math.pi / 2) + 1e-9) + 1, step)
    ax.set_xticks([k * math.pi / 2 for k in ks], [_quarter_label(k) for k in ks])


def explorer_figure(
    amplitude: float = 1.0, frequency: float = 1.0, phase: float = 0.0, *, turns: float = 2.0
):
    """Draw ``A sin(f t + phi)`` and ``A cos(f t + phi)`` together, over ``sin t`` for scale.

    The static half of the sine-wave explorer: :func:`explorer` redraws it from sliders.
    The y-axis is fixed to ``[-3.3, 3.3]`` (wider for larger ``A``), so that moving the
    amplitude slider visibly changes the height.

    Args:
        amplitude: ``A >= 0``.
        frequency: ``f > 0``.
        phase: ``phi``.
        turns: the t-axis runs over ``[0, turns * 2 pi]``; ``turns > 0``.

    Returns:
        The matplotlib figure (not shown; pass it to ``posenc.display.plots.show``).

    Raises:
        TypeError, ValueError: as :func:`wave`, or if ``turns`` is not positive.

    Example:
        >>> fig = explorer_figure(2.0, 3.0, math.pi / 4)
        >>> [line.get_label() for line in fig.axes[0].get_lines()]
        ['sin t (reference)', 'A sin(f t + φ)', 'A cos(f t + φ)']
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    t_max = check_positive_float("turns", turns) * TWO_PI
    t = torch.linspace(0.0, t_max, 801, dtype=torch.float64)  # [T]
    y_sin = wave(t, amplitude, frequency, phase)
    y_cos = wave(t, amplitude, frequency, phase + math.pi / 2)  # cos x = sin(x + pi/2)
    with mpl.rc_context(plots.STYLE):  # titles, legends, fonts of the book
        fig, ax = plots.figure(height=3.3)
        ax.plot(
            t, torch.sin(t), "--", color=plots.COLORS["grey"], lw=1.2, label="sin t (reference)"
        )
        ax.plot(t, y_sin, color=plots.COLORS["blue"], lw=2.0, label="A sin(f t + φ)")
        ax.plot(t, y_cos, color=plots.COLORS["orange"], lw=2.0, label="A cos(f t + φ)")
        limit = max(3.3, 1.1 * amplitude)
        ax.set_ylim(-limit, limit)
        ax.set_xlim(0.0, t_max)
        _pi_ticks(ax, t_max)
        ax.set_xlabel("t")
        ax.set_title(f"A = {amplitude:.2f}, f = {frequency:.2f}, φ = {phase / math.pi:.2f}π")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=3)  # below the axes
    return fig


def explorer(amplitude: float = 1.0, frequency: float = 1.0, phase: float = 0.0) -> None:
    """Display the live sine-wave explorer: sliders for ``A``, ``f`` and ``phi``.

    Each change redraws :func:`explorer_figure`. Needs a running Jupyter or Colab kernel
    with ``ipywidgets``; in the static book use :func:`explorer_figure` instead.

    Args:
        amplitude, frequency, phase: starting values of the sliders (validated as
            :func:`wave`; slider ranges are ``A`` 0-3, ``f`` 0.25-4, ``phi`` -pi-pi).

    Raises:
        TypeError, ValueError: for bad starting values.
        ImportError: if ``ipywidgets`` is not installed.
    """
    from IPython.display import display

    display(_explorer_widget(amplitude, frequency, phase))


def _explorer_widget(amplitude: float, frequency: float, phase: float):
    """The ``ipywidgets.interactive`` behind :func:`explorer` (built, not displayed)."""
    import ipywidgets as widgets

    a = _check_real("amplitude", amplitude, minimum=0.0)
    f = check_positive_float("frequency", frequency)
    phi = _check_real("phase", phase)
    style = {"description_width": "initial"}

    def slider(description, value, low, high, step):
        return widgets.FloatSlider(
            value=min(max(value, low), high),
            min=low,
            max=high,
            step=step,
            description=description,
            continuous_update=False,
            readout_format=".2f",
            style=style,
        )

    def draw(amplitude, frequency, phase):
        plots.show(explorer_figure(amplitude, frequency, phase))

    return widgets.interactive(
        draw,
        amplitude=slider("amplitude A", a, 0.0, 3.0, 0.1),
        frequency=slider("frequency f", f, 0.25, 4.0, 0.25),
        phase=slider("phase φ (rad)", phi, -math.pi, math.pi, math.pi / 12),
    )


def _times_pi(t: float) -> str:
    """``t`` as a multiple of π: a small fraction where it is one (π/6, 5π/6), else decimals."""
    ratio = fractions.Fraction(t / math.pi).limit_denominator(12)
    if not math.isclose(float(ratio), t / math.pi, abs_tol=1e-9):
        return f"{t / math.pi:.2f}π"
    if ratio == 0:
        return "0"
    top = {1: "", -1: "-"}.get(ratio.numerator, str(ratio.numerator))
    return f"{top}π" if ratio.denominator == 1 else f"{top}π/{ratio.denominator}"


def ambiguity_figure(angle: float = math.pi / 6):
    """Why sine alone is ambiguous: ``angle`` and its partner ``pi - angle`` on both views.

    Left: ``sin t`` and ``cos t`` over one turn, with the horizontal line at ``sin(angle)``
    crossing the sine curve twice. Right: the unit circle, points ``(cos t, sin t)``; the two
    angles sit at the same height (same sine) on opposite sides (opposite cosines). The
    two panels are equally wide; the legend sits below the curves.

    Args:
        angle: an angle in ``[0, 2 pi)``.

    Returns:
        The matplotlib figure.

    Raises:
        TypeError: if ``angle`` is not a number.
        ValueError: if ``angle`` is outside ``[0, 2 pi)``.

    Example:
        >>> fig = ambiguity_figure()
        >>> [ax.get_title() for ax in fig.axes]
        ['sin t = 0.5 at π/6 (●) and 5π/6 (■)', '(cos t, sin t) differ']
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    a = _check_real("angle", angle, minimum=0.0)
    if a >= TWO_PI:
        raise ValueError(f"angle must be in [0, 2 pi), got angle={angle}")
    b = float(sine_partner(torch.tensor(a, dtype=torch.float64)))
    t = torch.linspace(0.0, TWO_PI, 401, dtype=torch.float64)  # [T]
    with mpl.rc_context(plots.STYLE):  # titles, legends, fonts of the book
        fig, (ax_w, ax_c) = plots.figure(1, 2, height=3.4)
        blue, orange, ink = plots.COLORS["blue"], plots.COLORS["orange"], plots.COLORS["ink"]
        level = math.sin(a)
        ax_w.plot(t, torch.sin(t), color=blue, lw=2.0, label="sin t")
        ax_w.plot(t, torch.cos(t), color=orange, lw=2.0, label="cos t")
        ax_w.axhline(level, color=ink, lw=0.8, ls=":")
        ax_w.vlines([a, b], -1.1, 1.1, color=plots.COLORS["grey"], lw=0.8)
        for x, marker in ((a, "o"), (b, "s")):
            ax_w.scatter(
                [x, x], [math.sin(x), math.cos(x)], marker=marker, c=[blue, orange], s=50, zorder=3
            )
        _pi_ticks(ax_w, TWO_PI)
        ax_w.set_xlim(0.0, TWO_PI)
        ax_w.set_ylim(-1.1, 1.1)
        ax_w.set_xlabel("t")
        ax_w.set_title(f"sin t = {level:.2g} at {_times_pi(a)} (●) and {_times_pi(b)} (■)")
        ax_w.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)
        ax_c.plot(torch.cos(t), torch.sin(t), color=plots.COLORS["grey"], lw=1.2)
        ax_c.axhline(level, color=ink, lw=0.8, ls=":")
        for x, marker in ((a, "o"), (b, "s")):
            ax_c.plot([0, math.cos(x)], [0, math.sin(x)], color=ink, lw=1.0)
            ax_c.scatter(
                [math.cos(x)],
                [math.sin(x)],
                marker=marker,
                color=plots.COLORS["green"],
                s=64,
                zorder=3,
            )
        # equal scales, the panel as wide as its column: the x range grows instead of the box shrinking
        ax_c.set_aspect("equal", adjustable="datalim")
        ax_c.margins(0.12)
        ax_c.set_xlabel("cos t")
        ax_c.set_ylabel("sin t")
        ax_c.set_title("(cos t, sin t) differ")
    return fig


def circle_animation(frames: int = 24, *, dpi: int = plots.CSS_DPI):
    """A point going once round the unit circle, its sine and cosine traced as waves.

    Left: the point ``(cos t, sin t)``; right: ``sin`` and ``cos`` drawn from ``0`` up to
    the current ``t``. Every ``t`` of the turn is a different point of the circle, which is
    why the pair names the angle. The frames run over ``t = 2 pi j / frames``,
    ``j = 1 .. frames``; the player opens at ``j = round(5 frames / 12)`` (``t`` about
    ``5 pi / 6``, past the top of the sine) and loops round from there.

    Args:
        frames: animation frames over one turn, ``2 .. 40``.
        dpi: resolution of the frames, ``20 .. 100``; the default draws them at the CSS
            size of the book's figures (``posenc.display.plots.CSS_DPI``).

    Returns:
        A ``matplotlib.animation.FuncAnimation``; show it with
        ``posenc.display.plots.animation_html``.

    Raises:
        TypeError, ValueError: if ``frames`` or ``dpi`` is out of range.

    Example:
        >>> anim = circle_animation(12, dpi=20)
        >>> list(anim.new_frame_seq())[:3]  # opens at t = 5 pi / 6
        [4, 5, 6]
        >>> anim.to_jshtml().count('"data:image/png;base64,')  # one image per frame
        12
    """
    check_int("frames", frames, minimum=2)
    if frames > 40:
        raise ValueError(f"frames must be at most 40 (keeps the page light), got frames={frames}")
    check_int("dpi", dpi, minimum=20)
    if dpi > plots.CSS_DPI:
        raise ValueError(
            f"dpi must be at most {plots.CSS_DPI} (keeps the page light), got dpi={dpi}"
        )
    t = torch.linspace(0.0, TWO_PI, 201, dtype=torch.float64)  # [T]
    stops = torch.arange(1, frames + 1, dtype=torch.float64) * (TWO_PI / frames)  # [F]
    with mpl.rc_context(plots.STYLE):  # titles, legends, fonts of the book
        fig, (ax_c, ax_w) = plots.figure(1, 2, height=3.0, dpi=dpi)
        blue, orange = plots.COLORS["blue"], plots.COLORS["orange"]
        ax_c.plot(torch.cos(t), torch.sin(t), color=plots.COLORS["grey"], lw=1.0)
        (radius,) = ax_c.plot([], [], color=plots.COLORS["ink"], lw=1.0)
        (to_sin,) = ax_c.plot([], [], color=blue, lw=2.0)
        (to_cos,) = ax_c.plot([], [], color=orange, lw=2.0)
        (dot,) = ax_c.plot([], [], "o", color=plots.COLORS["green"], ms=7)
        ax_c.set_aspect("equal", adjustable="datalim")  # round circle, panel as wide as its column
        ax_c.margins(0.1)
        ax_c.set_xticks([-1, 0, 1])
        ax_c.set_yticks([-1, 0, 1])
        ax_c.set_xlabel("cos t")
        ax_c.set_ylabel("sin t")
        ax_c.set_title("the point (cos t, sin t)")
        (sin_line,) = ax_w.plot([], [], color=blue, lw=2.0, label="sin t (height)")
        (cos_line,) = ax_w.plot([], [], color=orange, lw=2.0, label="cos t (across)")
        ax_w.set_xlim(0.0, TWO_PI)
        ax_w.set_ylim(-1.2, 1.2)
        _pi_ticks(ax_w, TWO_PI)
        ax_w.set_xlabel("t")
        ax_w.set_title("t = 0.00π")
        ax_w.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=2)
    fig.canvas.draw()
    fig.set_layout_engine(None)  # keep this layout: no re-solving (nor extra draw) per frame

    def update(k):
        x = float(stops[k])
        c, s = math.cos(x), math.sin(x)
        radius.set_data([0, c], [0, s])
        to_sin.set_data([c, c], [0, s])  # height of the point = sine
        to_cos.set_data([0, c], [0, 0])  # horizontal offset = cosine
        dot.set_data([c], [s])
        upto = t[t <= x + 1e-12]
        sin_line.set_data(upto, torch.sin(upto))
        cos_line.set_data(upto, torch.cos(upto))
        ax_w.title.set_text(f"t = {x / math.pi:.2f}π")  # keeps the title style
        return radius, to_sin, to_cos, dot, sin_line, cos_line

    first = max(0, round(5 * frames / 12) - 1)  # stop j = first + 1: t near 5 pi / 6
    order = [(first + j) % frames for j in range(frames)]
    return matplotlib.animation.FuncAnimation(fig, update, frames=order, interval=120)
