"""Explorers: the chapters' playgrounds as sliders that run in the page, with no kernel.

Each function returns an :class:`Explorer`, an object that Jupyter, Colab and the book
display as one ``text/html`` output: a block holding its data (JSON) and the JavaScript that
draws it (a small toolkit, ``explorer_assets/toolkit.js``, and a few dozen lines per
explorer, kept as package data next to this module). Nothing is fetched from the network
and nothing is global, so the block works from ``file://``, inside Jupyter, and in an output
frame such as Colab's; the text is the same on every run, so strict nbval compares it.

- :func:`sine_wave_explorer` (chapter 4): ``A sin(f t + phi)``, its cosine, the pair at ``t``;
- :func:`encoding_heatmap_explorer` (5): the sinusoidal encoding over positions and features;
- :func:`rotation_matrix_explorer` (6): a vector, the 2x2 rotation and its product;
- :func:`rope_explorer` (9): RoPE's rotated pairs and a score fixed while ``m`` and ``n``
  move together;
- :func:`scaling_explorer` (12): periods under context scaling, and the pairs that meet
  angles unseen in training.

A slider is a native ``<input type=range>`` over a list of values written here; every number
an explorer shows carries its full-precision value in a ``data-value`` attribute, which is
how ``tests/test_explorers.py`` checks the JavaScript against the posenc functions the
chapters use. The ``ipywidgets`` playgrounds (:func:`posenc.book.waves.explorer`, ...)
stay for readers with a kernel who want to feed in their own values.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from posenc._validate import check_even_dim, check_int, check_option, check_real, check_str
from posenc.book.rope_views import playground_vectors

__all__ = [
    "SCALING_METHODS",
    "encoding_heatmap_explorer",
    "page",
    "rope_explorer",
    "rotation_matrix_explorer",
    "scaling_explorer",
    "sine_wave_explorer",
]

SCALING_METHODS = ("RoPE", "position interpolation", "NTK-aware", "YaRN", "llama3")
"""The methods of :func:`scaling_explorer`, in slider order: the names of
:func:`posenc.book.frequencies.scaled_frequencies`."""

_RDBU_R = (
    "#053061",
    "#2166ac",
    "#4393c3",
    "#92c5de",
    "#d1e5f0",
    "#f7f7f7",
    "#fddbc7",
    "#f4a582",
    "#d6604d",
    "#b2182b",
    "#67001f",
)
"""matplotlib's ``RdBu_r`` (the book's diverging map, :data:`posenc.display.plots.DIVERGING`) at 11
even steps from -1 to 1; the heat map interpolates between them."""


@cache
def _asset(name: str) -> str:
    return resources.files("posenc.book").joinpath("explorer_assets", name).read_text("utf-8")


@dataclass(frozen=True)
class Explorer:
    """One explorer, ready to display: its name, its sliders and its HTML.

    Jupyter, Colab and the book show it through :meth:`_repr_html_`; ``str`` gives the HTML
    too, to write into a page of one's own (:func:`page`).

    Attributes:
        name: the explorer's name, e.g. ``"rope"`` (its ``data-explorer`` attribute).
        title: the line shown above it.
        sliders: ``{key: {"label", "values", "index", ...}}``, in the order shown.
        extra: the other data its JavaScript reads (vectors, a colour map).
    """

    name: str
    title: str
    sliders: dict = field(repr=False)
    extra: dict = field(default_factory=dict, repr=False)

    @property
    def html(self) -> str:
        """The whole block: root element, style, data and script, the same on every call."""
        data = json.dumps({"sliders": self.sliders, **self.extra}, separators=(",", ":"))
        data = data.replace("</", "<\\/")  # no "</script>" inside the data element
        script = f'(() => {{\n"use strict";\n{_asset("toolkit.js")}\n{_asset(self.name.replace("-", "_") + ".js")}}})();'
        if "</script" in script.lower():  # would end the element early
            raise ValueError(f"the script of explorer {self.name!r} holds '</script'")
        return (
            f'<div class="pe-explorer" data-explorer="{self.name}">\n'
            f"<style>{_asset('toolkit.css')}</style>\n"
            f'<p class="pe-title">{html.escape(self.title)}</p>\n'
            '<div class="pe-body"></div>\n'
            '<p class="pe-fallback pe-note">This explorer runs in the browser: it needs '
            "JavaScript (in Jupyter, a trusted notebook).</p>\n"
            f'<script type="application/json" class="pe-data">{data}</script>\n'
            f"<script>{script}</script>\n"
            "</div>\n"
        )

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return f"Explorer({self.name!r}, sliders: {', '.join(self.sliders)})"


def page(*explorers: Explorer, title: str = "posenc explorers", theme: str = "light") -> str:
    """A standalone HTML page showing ``explorers`` in a column 720 px wide at most.

    For opening the explorers outside the book (tests, a browser from disk, an iframe).

    Args:
        *explorers: :class:`Explorer` objects; none means all five at their starting values.
        title: the page's title.
        theme: ``"light"`` or ``"dark"``: the ``data-theme`` of the page's ``html`` element,
            as the book's theme sets it.

    Returns:
        The page as a string.

    Raises:
        TypeError: if an entry is not an :class:`Explorer` or ``title`` is not a str.
        ValueError: if ``theme`` is neither ``"light"`` nor ``"dark"``.

    Example:
        >>> text = page(rotation_matrix_explorer(), theme="dark")
        >>> text.startswith("<!DOCTYPE html>"), 'data-theme="dark"' in text
        (True, True)
    """
    check_str("title", title)
    check_option("theme", theme, ("light", "dark"))
    if not explorers:
        explorers = tuple(make() for make in _ALL)
    for i, e in enumerate(explorers):
        if not isinstance(e, Explorer):
            raise TypeError(f"explorers[{i}] must be an Explorer, got {type(e).__name__}")
    body = "\n".join(e.html for e in explorers)
    background = "#ffffff" if theme == "light" else "#121416"
    return (
        f'<!DOCTYPE html>\n<html lang="en" data-theme="{theme}">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>body {{ margin: 0; background: {background}; }} "
        "main { max-width: 720px; margin: 0 auto; padding: 8px 16px; }</style>\n"
        f"</head>\n<body>\n<main>\n{body}</main>\n</body>\n</html>\n"
    )


# --- sliders ---------------------------------------------------------------------------------


def _slider(
    name: str, label: str, values: list, start: object, *, digits=2, unit=None, labels=None
) -> dict:
    """A slider over ``values``, starting at the value nearest ``start`` (which must be one)."""
    start = check_real(name, start)
    index = min(range(len(values)), key=lambda i: abs(values[i] - start))
    if abs(values[index] - start) > 1e-9 * max(1.0, abs(start)):
        shown = ", ".join(f"{v:g}" for v in values[:4])
        raise ValueError(
            f"{name} must be one of the slider's values ({shown}, ... {values[-1]:g}), "
            f"got {name}={start}"
        )
    spec = {"label": label, "values": values, "index": index, "digits": digits}
    if unit is not None:
        spec["unit"] = unit
    if labels is not None:
        spec["labels"] = labels
    return spec


# --- the explorers ---------------------------------------------------------------------------


def sine_wave_explorer(
    amplitude: float = 2.0,
    frequency: float = 2.0,
    phase: float = math.pi / 4,
    t: float = math.pi / 2,
) -> Explorer:
    """Chapter 4's sine-wave explorer: ``A sin(f t + phi)`` and ``A cos(f t + phi)``.

    Four sliders: amplitude ``A`` (0 to 3 in steps of 0.1), frequency ``f`` (0.25 to 4 in
    steps of 0.25), phase ``phi`` (-pi to pi in steps of pi/12) and a point ``t`` (0 to 4 pi
    in steps of pi/12). It draws both waves over two turns with ``sin t`` for scale, as
    :func:`posenc.book.waves.explorer_figure` does, and reads out at ``t`` the angle
    ``f t + phi``, ``A sin(f t + phi)`` (:func:`posenc.book.waves.wave`), the cosine (the
    sine at ``phi + pi/2``) and the period ``2 pi / f`` (:func:`posenc.book.waves.period`).

    Args:
        amplitude, frequency, phase, t: starting values; each must be one of its slider's.

    Returns:
        An :class:`Explorer`; a notebook displays it as the last value of a cell.

    Raises:
        TypeError: if a starting value is not a real number.
        ValueError: if a starting value is not one of its slider's values.

    Example:
        >>> e = sine_wave_explorer()
        >>> e
        Explorer('sine-wave', sliders: amplitude, frequency, phase, t)
        >>> e.sliders["phase"]["values"][e.sliders["phase"]["index"]] == math.pi / 4
        True
    """
    return Explorer(
        "sine-wave",
        "Sine-wave explorer: drag a slider, or focus it and use the arrow keys.",
        {
            "amplitude": _slider(
                "amplitude", "amplitude A", [k / 10 for k in range(31)], amplitude, digits=1
            ),
            "frequency": _slider(
                "frequency", "frequency f", [k / 4 for k in range(1, 17)], frequency
            ),
            "phase": _slider(
                "phase", "phase φ", [k * math.pi / 12 for k in range(-12, 13)], phase, unit="pi"
            ),
            "t": _slider("t", "point t", [k * math.pi / 12 for k in range(49)], t, unit="pi"),
        },
        {"turns": 2},
    )


def encoding_heatmap_explorer(
    num_positions: int = 50,
    dim: int = 64,
    base: float = 10000.0,
    position: int = 10,
    feature: int = 2,
) -> Explorer:
    """Chapter 5's heat map of the sinusoidal encoding, with one entry read out.

    Sliders: positions ``T`` (10 to 200 in steps of 10), features ``D`` (4 to 128 in steps
    of 4), the base (10 to 10^6, four steps a decade), and the entry ``(p, j)`` read out
    (``p < T``, ``j < D``). Colours are the book's diverging map from -1 to 1. The readout
    is ``PE[p, j]`` (``sin(p w_i)`` for even ``j``, ``cos`` for odd, ``i = j // 2``), the
    frequency ``w_i`` (:func:`posenc.encodings.sinusoidal_frequencies`) and its wavelength.

    Args:
        num_positions, dim, base: starting values of the first three sliders.
        position, feature: the starting entry.

    Returns:
        An :class:`Explorer`.

    Raises:
        TypeError: if a starting value has the wrong type.
        ValueError: if a starting value is not one of its slider's values, or the entry
            lies outside the starting ``T`` by ``D`` grid.

    Example:
        >>> encoding_heatmap_explorer()
        Explorer('encoding-heatmap', sliders: positions, dim, base, position, feature)
    """
    check_int("num_positions", num_positions)
    check_even_dim("dim", dim)
    check_int("position", position, minimum=0)
    check_int("feature", feature, minimum=0)
    sliders = {
        "positions": _slider(
            "num_positions",
            "positions T",
            list(range(10, 201, 10)),
            num_positions,
            digits="int",
        ),
        "dim": _slider("dim", "features D", list(range(4, 129, 4)), dim, digits="int"),
        "base": _slider("base", "base", [10 ** (k / 4) for k in range(4, 25)], base, digits="g"),
        "position": _slider("position", "entry: p", list(range(200)), position, digits="int"),
        "feature": _slider("feature", "entry: j", list(range(128)), feature, digits="int"),
    }
    if position >= num_positions or feature >= dim:
        raise ValueError(
            f"(position, feature) must lie in the grid of num_positions={num_positions} by "
            f"dim={dim}, got ({position}, {feature})"
        )
    return Explorer(
        "encoding-heatmap",
        "Sinusoidal encoding explorer: positions down, features across.",
        sliders,
        {"colormap": list(_RDBU_R)},
    )


def rotation_matrix_explorer(angle: float = 45.0, vector=(1.0, 0.5)) -> Explorer:
    """Chapter 6's rotation explorer: ``v``, ``R(angle) v`` and the matrix's four entries.

    Sliders: the angle in degrees (-180 to 180 in steps of 5) and the two entries of ``v``
    (-1.5 to 1.5 in steps of 0.05). The readout is the matrix of
    :func:`posenc.rotation.rotation_matrix`, the product ``R v`` and both lengths (equal: a
    rotation keeps lengths).

    Args:
        angle: the starting angle in degrees (counter-clockwise).
        vector: the starting ``v`` as ``(x, y)``.

    Returns:
        An :class:`Explorer`.

    Raises:
        TypeError: if a starting value is not a real number.
        ValueError: if a starting value is not one of its slider's values or ``vector``
            does not have two entries.

    Example:
        >>> rotation_matrix_explorer(90.0, (1.0, 0.0))
        Explorer('rotation', sliders: angle, x, y)
    """
    from posenc._validate import check_real_pair

    x, y = check_real_pair("vector", vector)
    steps = [round(-1.5 + 0.05 * k, 2) for k in range(61)]
    return Explorer(
        "rotation",
        "Rotation explorer: the matrix R turns v by the angle and keeps its length.",
        {
            "angle": _slider(
                "angle",
                "angle",
                [float(a) for a in range(-180, 181, 5)],
                angle,
                digits=0,
                unit="deg",
            ),
            "x": _slider("vector[0]", "v: x", steps, x),
            "y": _slider("vector[1]", "v: y", steps, y),
        },
    )


def rope_explorer(
    m: int = 2,
    n: int = 5,
    pair: int = 0,
    *,
    shift: int = 0,
    dim: int = 8,
    base: float = 10000.0,
    seed: int = 0,
) -> Explorer:
    """Chapter 9's RoPE playground: pair ``i`` of a query at ``m + s`` and a key at ``n + s``.

    Sliders: ``m`` and ``n`` (0 to 64), ``s`` (0 to 64) moving both together, and the pair
    ``i``. The query and key are :func:`posenc.book.rope_views.playground_vectors`
    ``(dim, seed=seed)``, rotated as :func:`posenc.rope.apply_rope` does (interleaved
    pairs). It draws the pair before and after rotation and reads out what
    :func:`posenc.book.rope_views.playground_state` returns: the frequency, the angle from
    the rotated query pair to the rotated key pair, the pair's score and the whole score,
    which stay fixed while ``s`` moves.

    Args:
        m, n: the starting positions of the query and the key (0 to 64).
        pair: the starting pair, ``0 .. D/2 - 1``.
        shift: the starting ``s`` (0 to 64).
        dim: head features ``D`` (even, 2 to 64).
        base: frequency base.
        seed: seed of the query and key.

    Returns:
        An :class:`Explorer`.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if a starting value is outside its slider, ``dim`` is odd or outside
            2 .. 64, or ``base`` is not a positive finite number.

    Example:
        >>> rope_explorer()
        Explorer('rope', sliders: m, n, shift, pair)
    """
    check_even_dim("dim", dim)
    if dim > 64:
        raise ValueError(f"dim must be at most 64 for the pair slider, got dim={dim}")
    base = check_real("base", base, positive=True)
    q, k = playground_vectors(dim, seed=seed)
    positions = list(range(65))
    for name, value in (("m", m), ("n", n), ("shift", shift), ("pair", pair)):
        check_int(name, value)
    return Explorer(
        "rope",
        f"RoPE playground: a query and a key of {dim} features, one pair drawn.",
        {
            "m": _slider("m", "query m", positions, m, digits="int"),
            "n": _slider("n", "key n", positions, n, digits="int"),
            "shift": _slider("shift", "move both: s", positions, shift, digits="int"),
            "pair": _slider("pair", "pair i", list(range(dim // 2)), pair, digits="int"),
        },
        {"q": q.tolist(), "k": k.tolist(), "base": base},
    )


def scaling_explorer(
    base: float = 500000.0,
    dim: int = 128,
    train_length: int = 8192,
    method: str = "RoPE",
    factor: float = 8.0,
    pair: int = 40,
) -> Explorer:
    """Chapter 12's periods and context scaling: which pairs meet angles unseen in training.

    Sliders: the base, head features ``D``, the trained length ``L``, the method (one of
    :data:`SCALING_METHODS`, the frequencies of
    :func:`posenc.book.frequencies.scaled_frequencies`), the factor ``s`` and a pair ``i``
    to read out. It draws every pair's period, original and scaled, over the band from
    ``L`` to ``s L``, and marks the pairs that by distance ``round(s (L - 1))`` turn past
    the arc they met in training (:func:`posenc.book.frequencies.angle_overshoot` above 1),
    with the counts of :func:`posenc.book.frequencies.scaling_table`.

    Args:
        base: starting base (one of 1e3, 1e4, 5e4, 1e5, 5e5, 1e6, 5e6).
        dim: starting ``D`` (one of 16, 32, 48, 64, 96, 128, 192, 256).
        train_length: starting ``L`` (a power of two from 512 to 32768).
        method: starting method, one of :data:`SCALING_METHODS` (``"RoPE"``: unscaled).
        factor: starting ``s`` (one of 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32).
        pair: starting pair ``i < D/2``.

    Returns:
        An :class:`Explorer`.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if a starting value is not one of its slider's values.

    Example:
        >>> scaling_explorer()
        Explorer('scaling', sliders: base, dim, train_length, method, factor, pair)
    """
    check_option("method", method, SCALING_METHODS)
    check_int("dim", dim)
    check_int("train_length", train_length)
    check_int("pair", pair, minimum=0)
    sliders = {
        "base": _slider("base", "base", [1e3, 1e4, 5e4, 1e5, 5e5, 1e6, 5e6], base, digits="g"),
        "dim": _slider("dim", "features D", [16, 32, 48, 64, 96, 128, 192, 256], dim, digits="int"),
        "train_length": _slider(
            "train_length", "trained L", [2**e for e in range(9, 16)], train_length, digits="int"
        ),
        "method": _slider(
            "method",
            "method",
            list(range(len(SCALING_METHODS))),
            SCALING_METHODS.index(method),
            labels=list(SCALING_METHODS),
        ),
        "factor": _slider(
            "factor",
            "factor s",
            [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0],
            factor,
            digits="g",
        ),
        "pair": _slider("pair", "pair i", list(range(128)), pair, digits="int"),
    }
    if pair >= dim // 2:
        raise ValueError(f"pair must be below D/2 = {dim // 2}, got pair={pair}")
    return Explorer(
        "scaling",
        "Context scaling explorer: periods of every pair, trained length L, extended s times.",
        sliders,
        {"labels": list(SCALING_METHODS)},
    )


_ALL = (
    sine_wave_explorer,
    encoding_heatmap_explorer,
    rotation_matrix_explorer,
    rope_explorer,
    scaling_explorer,
)
"""Every explorer, in the book's order."""
