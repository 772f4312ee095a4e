"""The summary of the book: every scheme in one property table, and the road from integers
to RoPE.

- :func:`all_schemes` collects every encoding scheme of the book for
  :mod:`posenc.properties`; :func:`scheme_table` tabulates their verdicts with the chapter
  and family of each (a :class:`posenc.display.table.Table`).
- :data:`ROAD` and :func:`road_map_figure`: the book's path on one screen, each station
  with the property verdicts of its scheme.

The claims the book checks are in :mod:`posenc.book.claims`.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from posenc import properties
from posenc._validate import check_bool, check_even_dim, check_int
from posenc.display.table import Table
from posenc.rope import apply_rope, rope_inv_freq
from posenc.scaling import llama3_inv_freq

__all__ = [
    "ROAD",
    "SCHEME_INFO",
    "Station",
    "all_schemes",
    "llama32_rope_scheme",
    "road_map_figure",
    "scheme_table",
]


# ----------------------------------------------------------------------------------------
# Schemes and the property table
# ----------------------------------------------------------------------------------------

SCHEME_INFO: dict[str, tuple[int, str]] = {
    "integer": (3, "absolute"),
    "integer / length": (3, "absolute"),
    "binary": (3, "absolute"),
    "sinusoidal": (5, "absolute"),
    "learned": (5, "absolute"),
    "Shaw": (7, "relative"),
    "T5": (7, "relative"),
    "ALiBi": (7, "relative"),
    "RoPE": (9, "rotary"),
    "RoPE, Llama 3.2": (10, "rotary"),
}
"""``{scheme name: (chapter that builds it, family)}`` for every scheme of :func:`all_schemes`."""


def _got(value: object) -> str:
    return f"got {value!r} ({type(value).__name__})"


def _check_results(results: object) -> Mapping:
    """Return ``results`` if it maps scheme names to ``{property: properties.Verdict}``."""
    what = "{scheme name: {property: Verdict}}"
    if not isinstance(results, Mapping):
        raise TypeError(f"results must be a mapping {what}, {_got(results)}")
    for name, verdicts in results.items():
        if not isinstance(name, str):
            raise TypeError(f"results must be keyed by scheme names (str), got key {name!r}")
        if not isinstance(verdicts, Mapping):
            raise TypeError(
                f"results[{name!r}] must be a mapping {{property: Verdict}} as "
                f"properties.check_all returns, {_got(verdicts)}"
            )
        for label, verdict in verdicts.items():
            if not isinstance(label, str) or not isinstance(verdict, properties.Verdict):
                raise TypeError(
                    f"results[{name!r}] must map property names (str) to properties.Verdict, "
                    f"got {label!r}: {verdict!r}"
                )
    return results


def _unit_pairs(dim: int) -> torch.Tensor:
    """The unit vector with every interleaved pair ``(1, 0) / sqrt(D/2)``, float64 ``[D]``."""
    u = torch.zeros(dim, dtype=torch.float64)
    u[0::2] = (dim // 2) ** -0.5
    return u


def llama32_rope_scheme() -> properties.Scheme:
    """RoPE with Llama 3.2's frequencies as a scheme for :mod:`posenc.properties`.

    Base 500000 and the ``llama3`` rescaling (factor 32, low 1, high 4, original context
    8192) for a head of ``dim`` features; as for plain RoPE, ``E(p)`` is the key that the
    unit vector with every pair ``(1, 0) / sqrt(D/2)`` becomes at position ``p``.

    Returns:
        A :class:`posenc.properties.Scheme` named ``"RoPE, Llama 3.2"``; its vectors are
        ``[T, dim]``.

    Example:
        >>> scheme = llama32_rope_scheme()
        >>> scheme([0, 1], 8, 2).shape
        torch.Size([2, 8])
        >>> str(properties.linear_relation(scheme))
        'yes (max residual of best linear fit 0)'
    """

    def encode(p: torch.Tensor, dim: int, length: int, seed: int) -> torch.Tensor:
        check_even_dim("dim", dim)
        inv_freq = llama3_inv_freq(rope_inv_freq(dim, 500000.0))
        u = _unit_pairs(dim).expand(p.numel(), dim)  # [T, D]
        return apply_rope(u, p, inv_freq=inv_freq)

    return properties.Scheme("RoPE, Llama 3.2", encode)


def all_schemes(max_distance: int = 16) -> dict[str, properties.Scheme]:
    """Every encoding scheme of the book, in the order the book meets them.

    The five absolute schemes of Part II (:func:`posenc.properties.absolute_schemes`), the
    relative methods of chapter 7 (:func:`posenc.book.frequencies.relative_schemes`), RoPE
    (:func:`posenc.book.frequencies.rope_scheme`) and RoPE with Llama 3.2's frequencies
    (:func:`llama32_rope_scheme`).

    Args:
        max_distance: Shaw's clipping distance ``c``.

    Returns:
        ``{name: Scheme}`` with the names of :data:`SCHEME_INFO`.

    Raises:
        TypeError, ValueError: for a bad ``max_distance``.

    Example:
        >>> list(all_schemes())[:5]
        ['integer', 'integer / length', 'binary', 'sinusoidal', 'learned']
        >>> len(all_schemes())
        10
    """
    from posenc.book import frequencies

    check_int("max_distance", max_distance, minimum=1)
    schemes = dict(properties.absolute_schemes())
    schemes.update(frequencies.relative_schemes(max_distance=max_distance))
    schemes["RoPE"] = frequencies.rope_scheme()
    schemes["RoPE, Llama 3.2"] = llama32_rope_scheme()
    return schemes


def scheme_table(
    results: Mapping[str, Mapping[str, properties.Verdict]], *, evidence: bool = False
) -> Table:
    """The property table with each scheme's chapter, family and number of passes.

    Args:
        results: ``{scheme name: properties.check_all(scheme)}``; every name must be in
            :data:`SCHEME_INFO`.
        evidence: put each verdict's measured number (relative, as chapter 2 defines it)
            next to its mark.

    Returns:
        A :class:`posenc.display.table.Table`: scheme, chapter, family, the five verdicts
        (``✓``/``✗``) and ``passed`` (how many of the five hold).

    Raises:
        TypeError: if ``results`` is not a mapping of scheme names to
            ``{property: properties.Verdict}``, or ``evidence`` is not a bool.
        ValueError: if ``results`` is empty, a scheme is unknown, or the schemes were
            checked on different properties.

    Example:
        >>> s = properties.absolute_schemes()
        >>> t = scheme_table({"binary": properties.check_all(s["binary"])})
        >>> t.columns[3:]
        ['1 unique', '2 linear shift', '3 unseen in range', '4 rule', '5 axial 2-D', 'passed']
        >>> t.rows
        [['binary', '3', 'absolute', '✓', '✗', '✓', '✓', '✗', '3 of 5']]
    """
    _check_results(results)
    check_bool("evidence", evidence)
    if not results:
        raise ValueError(f"results must not be empty (one scheme at least), got {results!r}")
    unknown = [name for name in results if name not in SCHEME_INFO]
    if unknown:
        raise ValueError(f"results holds schemes with no chapter in SCHEME_INFO: {unknown}")
    labels = list(next(iter(results.values())))
    if any(list(r) != labels for r in results.values()):
        raise ValueError("every scheme must be checked on the same properties")
    rows = []
    for name, verdicts in results.items():
        chapter, family = SCHEME_INFO[name]
        marks = [
            ("✓" if v.holds else "✗") + (f" {properties._fmt(v.evidence)}" if evidence else "")
            for v in verdicts.values()
        ]
        passed = sum(v.holds for v in verdicts.values())
        rows.append([name, str(chapter), family, *marks, f"{passed} of {len(labels)}"])
    caption = "The five properties of chapter 2 for every scheme of the book: ✓ holds, ✗ fails" + (
        ", each with the number measured (relative)." if evidence else "."
    )
    align = ["left", "right", "left", *(["left"] * len(labels)), "right"]
    return Table(
        ["scheme", "chapter", "family", *labels, "passed"], rows, caption=caption, align=align
    )


# ----------------------------------------------------------------------------------------
# The road from integers to RoPE
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Station:
    """One step of the book's road.

    Attributes:
        chapter: the chapter that takes the step.
        title: what the step tries (a few words).
        lesson: what it teaches or what goes wrong (a few words).
        schemes: names of the schemes (keys of :func:`all_schemes`) whose property
            verdicts the map shows at this station; empty for a step that builds no scheme.
    """

    chapter: int
    title: str
    lesson: str
    schemes: tuple[str, ...] = ()


ROAD: tuple[Station, ...] = (
    Station(1, "attention alone", "cannot tell where a token is"),
    Station(2, "five properties", "what an encoding must do"),
    Station(3, "the integer", "drowns the token", ("integer",)),
    Station(3, "divide by length", "position 5 moves with N", ("integer / length",)),
    Station(3, "binary", "bounded, but it jumps", ("binary",)),
    Station(4, "(sin, cos)", "a pair names an angle"),
    Station(5, "sinusoidal", "smooth, any length", ("sinusoidal",)),
    Station(5, "learned table", "stops where training stopped", ("learned",)),
    Station(6, "shift = rotation", "PE(p+k) = M_k PE(p)"),
    Station(7, "relative methods", "offsets in the score", ("Shaw", "T5", "ALiBi")),
    Station(8, "added is mixed", "rotate, don't add"),
    Station(9, "RoPE", "rotate q and k by position", ("RoPE",)),
    Station(10, "Llama 3.2", "half layout, llama3 scaling", ("RoPE, Llama 3.2",)),
    Station(11, "n dimensions", "one axis per pair"),
    Station(12, "length", "slow pairs need scaling"),
    Station(13, "fast RoPE", "one pass over memory"),
    Station(14, "precision", "fp32 angles, cast last"),
    Station(15, "a trained model", "fast pairs place, slow pairs mean"),
)
"""The stations of :func:`road_map_figure`, in the order of the book."""


def road_map_figure(
    results: Mapping[str, Mapping[str, properties.Verdict]],
    road: Sequence[Station] = ROAD,
    *,
    per_row: int = 5,
):
    """The road from integers to RoPE on one screen.

    The stations run left to right, then right to left on the next row, like a line on a
    map. Each shows its chapter, what it tries and what it teaches; a station that builds a
    scheme shows the scheme's five property verdicts from ``results`` as a strip of
    squares (green: holds, red: fails).

    Args:
        results: ``{scheme name: properties.check_all(scheme)}``; must hold every scheme a
            station names.
        road: the stations.
        per_row: stations per row.

    Returns:
        A matplotlib figure (close it or pass it to :func:`posenc.display.plots.show`).

    Raises:
        TypeError: if ``results`` is not a mapping of scheme names to
            ``{property: properties.Verdict}``, ``road`` is not a sequence of
            :class:`Station` objects, or ``per_row`` is not an int.
        ValueError: for an empty road, a ``per_row`` below 1, or a scheme missing from
            ``results``.

    Example:
        >>> s = properties.absolute_schemes()
        >>> r = {"binary": properties.check_all(s["binary"])}
        >>> fig = road_map_figure(r, [Station(3, "binary", "it jumps", ("binary",))])
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    from posenc.display import plots

    check_int("per_row", per_row, minimum=1)
    road = _check_road(results, road)
    step = 1.3  # vertical distance between rows, in data units
    points = [_place(i, per_row, step) for i in range(len(road))]
    # the lowest ink: a lesson's second line, or the last strip of verdict squares
    bottom = min(
        y - 0.3 - 0.14 * max(len(station.schemes) - 1, 0) if station.schemes else y - 0.2
        for station, (_, y) in zip(road, points, strict=True)
    )
    fig, ax = plots.figure(height=1.35 * (0.9 - bottom) + 0.1)
    ax.set_axis_off()
    ax.grid(False)
    ax.set_xlim(-0.6, per_row - 0.4)
    ax.set_ylim(bottom - 0.05, 0.85)
    _draw_track(ax, points, per_row)
    for station, (x, y) in zip(road, points, strict=True):
        _draw_station(ax, station, x, y)
        for j, name in enumerate(station.schemes):
            label = name if len(station.schemes) > 1 else None
            _draw_verdicts(ax, list(results[name].values()), x, y - 0.2 - 0.14 * j, label)
    ax.text(
        -0.55,
        0.84,
        "squares: properties 1-5 of chapter 2 (unique, linear shift, longer "
        "sequences, deterministic, n-D); green holds, red fails",
        fontsize=8,
        color=plots.COLORS["ink"],
        va="top",
    )
    return fig


def _check_road(results, road) -> list[Station]:
    _check_results(results)
    if isinstance(road, (str, bytes)) or not isinstance(road, Sequence):
        raise TypeError(f"road must be a sequence of Station objects, {_got(road)}")
    if len(road) == 0:
        raise ValueError(f"road must hold at least one station, got {road!r}")
    for i, station in enumerate(road):
        if not isinstance(station, Station):
            raise TypeError(f"road must hold Station objects, road[{i}] {_got(station)}")
        missing = [name for name in station.schemes if name not in results]
        if missing:
            held = f"it holds {list(results)}" if results else f"it is empty: {results!r}"
            raise ValueError(
                f"results has no verdicts for the schemes {missing} of road[{i}] ({held})"
            )
    return list(road)


def _place(index: int, per_row: int, step: float) -> tuple[float, float]:
    """Where station ``index`` stands: rows run left to right, then right to left."""
    row, col = divmod(index, per_row)
    if row % 2:
        col = per_row - 1 - col
    return float(col), -step * row


def _draw_track(ax, points: list[tuple[float, float]], per_row: int) -> None:
    """The line through the stations (one line), turning down outside them at row ends."""
    from posenc.display import plots

    xs, ys = [points[0][0]], [points[0][1] + 0.45]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if y0 != y1:
            side = x0 + (0.45 if x0 == per_row - 1 else -0.45)
            xs += [side, side]
            ys += [y0 + 0.45, y1 + 0.45]
        xs.append(x1)
        ys.append(y1 + 0.45)
    line = {"color": plots.COLORS["grey"], "lw": 3, "zorder": 0, "solid_capstyle": "round"}
    ax.plot(xs, ys, solid_joinstyle="round", **line)


def _draw_station(ax, station: Station, x: float, y: float) -> None:
    """A station: its chapter in a circle, its title and its lesson below."""
    from posenc.display import plots

    ink = plots.COLORS["ink"]
    colour = plots.COLORS["blue"] if station.schemes else plots.COLORS["grey"]
    ax.scatter([x], [y + 0.45], s=21**2, color=colour, edgecolors="white", lw=1.5, zorder=2)
    number = {"color": "white", "fontsize": 9, "fontweight": "bold", "zorder": 3}
    ax.text(x, y + 0.45, str(station.chapter), ha="center", va="center", **number)
    title = {"fontsize": 9.5, "fontweight": "bold", "color": ink}
    ax.text(x, y + 0.24, station.title, ha="center", va="top", **title)
    lesson = textwrap.fill(station.lesson, 20)  # two short lines fit under a station
    ax.text(x, y + 0.07, lesson, ha="center", va="top", fontsize=8, color=ink)


def _draw_verdicts(ax, verdicts: list, x: float, top: float, label: str | None) -> None:
    """One square per property verdict, centred under ``x`` (labelled when there are several
    schemes at a station): green holds, red fails."""
    from matplotlib.patches import Rectangle

    from posenc.display import plots

    size, gap = 0.075, 0.014  # one verdict square, in axis units
    left = x - len(verdicts) * (size + gap) / 2
    if label is not None:
        left += 0.12
        ink = plots.COLORS["ink"]
        ax.text(
            left - 0.03, top - size / 2, label, ha="right", va="center", fontsize=7.5, color=ink
        )
    for i, verdict in enumerate(verdicts):
        fill = plots.COLORS["green"] if verdict.holds else plots.COLORS["red"]
        corner = (left + i * (size + gap), top - size)
        ax.add_patch(Rectangle(corner, size, size, facecolor=fill, edgecolor="white", lw=0.5))
