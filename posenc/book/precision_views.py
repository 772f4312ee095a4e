"""Chapter 14's tables, figures and measurements of RoPE in low-precision floats.

The quantities themselves (spacing of a float format, the angle recipes, the exact RoPE,
the error bound) live in :mod:`posenc.precision`; this module tabulates and draws them:

- which integers a float format holds: :func:`spacing_table`, :func:`position_rounding_figure`;
- angle errors by recipe: :func:`recipe_table`, :func:`angle_error_curves`,
  :func:`angle_error_table`, :func:`angle_error_figure`;
- what the errors do to attention scores and to the relative property:
  :func:`offset_scores`, :func:`relative_error_table`, :func:`offset_scores_figure`;
- whether ``posenc`` follows the fix: :func:`check_table`, :func:`format_checks`.

The tables the chapter shows are :class:`posenc.display.table.Table` objects: captioned HTML in a
notebook, aligned text when printed.

Shapes: ``T`` positions, ``D`` features (``D/2`` pairs), ``M`` start positions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib as mpl
import torch

from posenc._validate import check_int, check_positions, check_tensor, same_device
from posenc.display import plots
from posenc.display.table import Table
from posenc.precision import (
    F64,
    RECIPES,
    RopeCheck,
    _check_float_dtype,
    _check_inv_freq,
    _circle_errors,
    _pairs_as_complex,
    _recipe,
    recipe_angles,
    spacing,
    stored_positions,
)

__all__ = [
    "angle_error_curves",
    "angle_error_figure",
    "angle_error_table",
    "check_table",
    "format_checks",
    "offset_scores",
    "offset_scores_figure",
    "position_rounding_figure",
    "recipe_table",
    "relative_error_table",
    "spacing_table",
]


_SHORT = {
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.float32: "fp32",
    torch.float64: "fp64",
}


def _name(dtype: torch.dtype) -> str:
    return _SHORT.get(dtype, str(dtype).removeprefix("torch."))


_RECIPE_COLORS = {
    "fp32 angles": "green",
    "all bf16": "red",
    "bf16 angles": "orange",
    "bf16 inv_freq": "blue",
    "bf16 positions": "ink",
    "all fp16": "grey",
}


def _colors(names: Sequence[str]) -> dict[str, str]:
    """One colour per recipe name: the fix in green, the others from the book's palette."""
    spare = ["blue", "orange", "red", "ink", "grey"]
    return {
        n: plots.COLORS[_RECIPE_COLORS.get(n, spare[i % len(spare)])] for i, n in enumerate(names)
    }


def spacing_table(
    values: Sequence[int] = (256, 2048, 8192, 65536, 131072),
    dtypes: Sequence[torch.dtype] = (torch.bfloat16, torch.float16, torch.float32),
) -> str:
    """A text table of :func:`spacing` above each value, one column per dtype.

    Args:
        values: non-negative integers (positions).
        dtypes: signed floating dtypes.

    Returns:
        The table; ``inf`` marks a value the format cannot hold (it overflows).

    Raises:
        TypeError, ValueError: for an empty or non-integer ``values`` or a bad dtype.

    Example:
        >>> print(spacing_table([256], [torch.bfloat16]))
        above   bf16
          256      2
    """
    values = check_positions(
        "values", list(values) if isinstance(values, (list, tuple)) else values
    )
    if isinstance(dtypes, (str, bytes)) or not isinstance(dtypes, Sequence) or not dtypes:
        raise TypeError(f"dtypes must be a non-empty sequence of torch dtypes, got {dtypes!r}")
    dtypes = [_check_float_dtype(f"dtypes[{i}]", d) for i, d in enumerate(dtypes)]
    lines = ["above " + "".join(f"{_name(d):>10}" for d in dtypes)]
    for v in values.tolist():
        lines.append(f"{v:>6}" + "".join(f"{spacing(v, d):>10.3g}" for d in dtypes))
    return "\n".join(lines)


def position_rounding_figure(
    max_position: int = 131072,
    dtypes: Sequence[torch.dtype] = (torch.bfloat16, torch.float16),
    *,
    window: int = 56,
    window_start: int = 2020,
):
    """Left: largest rounding error of a stored position; right: stored against true positions.

    Left, the largest ``|stored p - p|`` over log-spaced bins of positions up to
    ``max_position`` (a dotted line where a format overflows); right, ``window`` consecutive
    positions from ``window_start`` as each format stores them.

    Args:
        max_position: last position (at least 2).
        dtypes: signed floating dtypes to draw.
        window: positions in the close-up (at least 2).
        window_start: first position of the close-up (non-negative).

    Returns:
        The matplotlib figure.

    Raises:
        TypeError, ValueError: for bad sizes or dtypes.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> plt.close(position_rounding_figure(1000, window=8, window_start=300))
    """
    check_int("max_position", max_position, minimum=2)
    check_int("window", window, minimum=2)
    check_int("window_start", window_start, minimum=0)
    dtypes = _check_dtypes(dtypes)
    fig, (left, right) = plots.figure(1, 2, height=3.6)
    p = torch.arange(1, max_position + 1)
    close = torch.arange(window_start, window_start + window)
    colors = [plots.COLORS[c] for c in ("blue", "orange", "red", "green", "ink")]
    with mpl.rc_context(plots.STYLE):
        right.plot(close, close, color=plots.COLORS["grey"], lw=1.0, label="exact")
        for i, d in enumerate(dtypes):
            color = colors[i % len(colors)]
            stored = stored_positions(p, d)
            finite = torch.isfinite(stored)
            err = (stored - p.to(F64)).abs()
            x, top = _log_bins(err[finite], p[finite], 60)
            top = torch.where(top > 0, top, torch.nan)
            left.step(x, top, where="pre", lw=1.5, color=color, label=_name(d))
            if not bool(finite.all()):
                first = int(p[~finite][0])
                left.axvline(
                    first, ls=":", color=color, lw=1.2, label=f"{_name(d)} overflows ({first})"
                )
            right.step(close, stored_positions(close, d), where="mid", lw=1.5, color=color)
        left.set_xscale("log")
        left.set_yscale("log", base=2)
        left.set_xlabel("position p")
        left.set_ylabel("largest |stored p - p|")
        left.set_title("Rounding error of a stored position")
        right.set_xlabel("position p")
        right.set_ylabel("stored p")
        right.set_title(f"Positions {window_start} to {window_start + window - 1}")
        handles, labels = left.get_legend_handles_labels()
        exact, _ = right.get_legend_handles_labels()
        fig.legend(
            [*handles, *exact],
            [*labels, "exact (right)"],
            loc="outside lower center",
            ncols=len(labels) + 1,
        )
    return fig


def _check_dtypes(dtypes: object) -> list[torch.dtype]:
    if isinstance(dtypes, (str, bytes, torch.dtype)) or not isinstance(dtypes, Sequence):
        raise TypeError(f"dtypes must be a sequence of torch dtypes, got {dtypes!r}")
    if not dtypes:
        raise ValueError("dtypes must not be empty, got an empty sequence")
    return [_check_float_dtype(f"dtypes[{i}]", d) for i, d in enumerate(dtypes)]


def _check_names(recipes: object) -> list[str]:
    if isinstance(recipes, (str, bytes)) or not isinstance(recipes, Sequence):
        raise TypeError(f"recipes must be a sequence of recipe names, got {recipes!r}")
    if not recipes:
        raise ValueError("recipes must not be empty, got an empty sequence")
    for name in recipes:
        if not isinstance(name, str):
            raise TypeError(f"recipes must hold names (str), got {name!r}")
        _recipe(name)
    return list(recipes)


def _check_ints(name: str, values: object, *, minimum: int | None) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of ints, got {values!r}")
    if not values:
        raise ValueError(f"{name} must not be empty, got {values!r}")
    for v in values:
        check_int(f"{name} entries", v, minimum=minimum)
    return list(values)


def recipe_table(recipes: Sequence[str] = tuple(RECIPES)) -> Table:
    """The dtype each recipe holds the position, the frequency and the angle in.

    Args:
        recipes: names in :data:`RECIPES`.

    Returns:
        A :class:`posenc.display.table.Table`, one row per recipe.

    Raises:
        TypeError, ValueError: for recipe names that are not in :data:`RECIPES`.

    Example:
        >>> recipe_table(["fp32 angles", "bf16 angles"]).rows
        [['fp32 angles', 'float32', 'float32', 'float32'], ['bf16 angles', 'float32', 'float32', 'bfloat16']]
    """
    names = _check_names(recipes)

    def short(dtype: torch.dtype) -> str:
        return str(dtype).removeprefix("torch.")

    rows = []
    for name in names:
        r = RECIPES[name]
        rows.append([name, short(r.position_dtype), short(r.freq_dtype), short(r.angle_dtype)])
    return Table(
        ["recipe", "position p", "frequency \u03b8", "angle p\u03b8"],
        rows,
        caption=(
            "The recipes: the dtype that holds each of the three numbers of an angle. "
            "The angle is the exact product of the stored p and the stored \u03b8, rounded "
            "once to its own dtype."
        ),
    )


def angle_error_curves(
    inv_freq: torch.Tensor,
    max_position: int = 131072,
    recipes: Sequence[str] = tuple(RECIPES)[1:],
) -> dict[str, torch.Tensor]:
    """:func:`angle_errors` at every position ``0 .. max_position``, for each recipe.

    Args:
        inv_freq: frequencies ``[D/2]``.
        max_position: the last position (at least 1).
        recipes: names in :data:`RECIPES`.

    Returns:
        ``{name: float64 [max_position + 1]}``, entry ``p`` the error at position ``p``.

    Raises:
        TypeError, ValueError: for bad frequencies, length or recipe names.

    Example:
        >>> from posenc.rope import rope_inv_freq
        >>> e = angle_error_curves(rope_inv_freq(8), 300, ["bf16 positions"])
        >>> e["bf16 positions"].shape, e["bf16 positions"][:257].max().item()
        (torch.Size([301]), 0.0)
    """
    f = _check_inv_freq(inv_freq)
    check_int("max_position", max_position, minimum=1)
    names = _check_names(recipes)
    p = torch.arange(max_position + 1, device=f.device)
    exact = recipe_angles(p, f, RECIPES["exact (fp64)"])  # [T, D/2]
    return {name: _circle_errors(recipe_angles(p, f, name), exact) for name in names}


def _check_curves(curves: object) -> dict[str, torch.Tensor]:
    if not isinstance(curves, dict):
        raise TypeError(f"curves must be a dict name -> errors, got {type(curves).__name__}")
    if not curves:
        raise ValueError("curves must not be empty, got {}")
    for name, err in curves.items():
        if not isinstance(name, str):
            raise TypeError(f"curves must be keyed by names (str), got {name!r}")
        check_tensor(f"curves[{name!r}]", err, min_dim=1)
        if err.dim() != 1 or err.numel() < 2:
            raise ValueError(
                f"curves[{name!r}] must be 1-D errors at positions 0, 1, ..., got shape "
                f"{tuple(err.shape)}"
            )
    return curves


def angle_error_table(
    curves: dict[str, torch.Tensor],
    checkpoints: Sequence[int] = (1024, 8192, 32768, 131072),
) -> Table:
    """Largest angle error over positions ``0 .. c`` for each checkpoint ``c``, per recipe.

    Args:
        curves: the result of :func:`angle_error_curves`.
        checkpoints: last positions (positive ints within the curves).

    Returns:
        A :class:`posenc.display.table.Table`, one row per recipe, errors in radians with 2
        significant digits (``inf``: the angle overflowed; an error can be at most
        ``pi`` = 3.1).

    Raises:
        TypeError, ValueError: for bad curves or checkpoints.

    Example:
        >>> f = torch.tensor([1.0, 0.75], dtype=torch.float64)
        >>> t = angle_error_table(angle_error_curves(f, 300, ["bf16 positions"]), [256, 300])
        >>> print(t)  # doctest: +NORMALIZE_WHITESPACE
        Largest angle error in radians over all positions up to each column's p: π (3.1)
        means the angle is arbitrary, inf that it overflowed.
        recipe          p ≤ 256 (rad)  p ≤ 300 (rad)
        bf16 positions              0              1
    """
    curves = _check_curves(curves)
    checkpoints = _check_ints("checkpoints", checkpoints, minimum=1)
    shortest = min(e.numel() for e in curves.values()) - 1
    if max(checkpoints) > shortest:
        raise ValueError(
            f"checkpoints must be at most the last position of the curves ({shortest}), "
            f"got {max(checkpoints)}"
        )
    rows = [
        [name, *(_fmt_err(err[: c + 1].max().item(), 0) for c in checkpoints)]
        for name, err in curves.items()
    ]
    return Table(
        ["recipe", *(f"p \u2264 {c:,} (rad)" for c in checkpoints)],
        rows,
        caption=(
            "Largest angle error in radians over all positions up to each column's p: "
            "\u03c0 (3.1) means the angle is arbitrary, inf that it overflowed."
        ),
    )


def _log_bins(values: torch.Tensor, positions: torch.Tensor, bins: int) -> tuple:
    """Maximum of ``values`` over log-spaced bins of ``positions`` (positions >= 1)."""
    edges = torch.logspace(0, math.log10(float(positions.max()) + 1), bins + 1, dtype=F64)
    index = torch.bucketize(positions.to(F64), edges, right=True).clamp(1, bins) - 1
    top = torch.full((bins,), -torch.inf, dtype=F64).scatter_reduce(
        0, index, values, reduce="amax", include_self=True
    )
    keep = top > -torch.inf
    return edges[1:][keep], top[keep]


def angle_error_figure(curves: dict[str, torch.Tensor], *, bins: int = 80):
    """Largest angle error against position, log-log, one line per recipe.

    Each point is the largest error over a bin of positions; errors are drawn up to ``pi``
    (an angle off by ``pi`` or more is arbitrary; the axis marks that level), and an
    overflow is drawn as ``pi``. Recipes that round the positions are dotted, other
    ``fp16`` recipes dashed.

    Args:
        curves: the result of :func:`angle_error_curves`, at most
            :data:`posenc.display.plots.MAX_LINES` recipes (one line each).
        bins: number of log-spaced bins of positions (at least 2).

    Returns:
        The matplotlib figure.

    Raises:
        TypeError, ValueError: for bad curves (or too many) or bins.

    Example:
        >>> from posenc.rope import rope_inv_freq
        >>> import matplotlib.pyplot as plt
        >>> plt.close(angle_error_figure(angle_error_curves(rope_inv_freq(8), 1000, ["fp32 angles"])))
    """
    curves = _check_curves(curves)
    check_int("bins", bins, minimum=2)
    if len(curves) > plots.MAX_LINES:
        raise ValueError(
            f"curves must hold at most {plots.MAX_LINES} recipes (one line each), "
            f"got {len(curves)}: {list(curves)}"
        )
    fig, ax = plots.figure(height=3.8)
    colors = _colors(list(curves))
    with mpl.rc_context(plots.STYLE):
        for name, err in curves.items():
            p = torch.arange(1, err.numel())
            x, top = _log_bins(err[1:].cpu().clamp(max=math.pi), p, bins)
            top = torch.where(top > 0, top, torch.nan)  # exact angles: not on a log axis
            style = ":" if "positions" in name else "--" if "fp16" in name else "-"
            width = 2.2 if style == ":" else 1.5
            ax.plot(x, top, style, lw=width, label=name, color=colors[name])
        ax.set_xscale("log")
        ax.set_yscale("log")
        # decades below 1 (every other one on a tall range), and pi instead of 10^0
        low = math.floor(math.log10(max(ax.get_ylim()[0], 1e-300)))
        step = 1 if low > -4 else 2
        exponents = [e for e in range(low, 0) if e % step == 0]
        ax.set_yticks(
            [*(10.0**e for e in exponents), math.pi],
            [*(f"$10^{{{e}}}$" for e in exponents), "π"],
        )
        ax.set_ylim(top=2 * math.pi)
        ax.minorticks_off()
        ax.set_xlabel("position p")
        ax.set_ylabel("largest angle error (rad)")
        ax.set_title("Angle error against float64 (π: the angle is arbitrary)")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=3)
    return fig


@same_device(copied=("starts", "inv_freq"))
def offset_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    starts,
    offset: int,
    inv_freq: torch.Tensor,
    recipe="exact (fp64)",
) -> torch.Tensor:
    """Scores ``<R_m q, R_(m+offset) k> / (|q| |k|)`` for each start ``m``, angles by ``recipe``.

    In exact arithmetic the score depends on ``offset`` only, so the result is constant;
    any spread is the recipe's rounding.

    Args:
        q, k: vectors ``[D]``.
        starts: integer start positions ``[M]``.
        offset: the distance from query to key (any int).
        inv_freq: frequencies ``[D/2]``.
        recipe: a :class:`Recipe` or a key of :data:`RECIPES`.

    Returns:
        float64 ``[M]``, cosines in ``[-1, 1]`` (NaN where an angle overflowed).

    Raises:
        TypeError, ValueError: for bad vectors, positions, offset, frequencies or recipe.

    Example:
        >>> from posenc.rope import rope_inv_freq
        >>> q, k = torch.randn(2, 8, dtype=torch.float64)
        >>> s = offset_scores(q, k, [0, 1000, 5000], 3, rope_inv_freq(8))
        >>> bool(s.max() - s.min() < 1e-9)
        True
    """
    for name, v in (("q", q), ("k", k)):
        check_tensor(name, v, min_dim=1)
        if v.dim() != 1:
            raise ValueError(f"{name} must be one vector [D], got shape {tuple(v.shape)}")
    if q.shape != k.shape:
        raise ValueError(
            f"q and k must have the same shape, got {tuple(q.shape)} and {tuple(k.shape)}"
        )
    m = check_positions("starts", starts, nonnegative=False).to(q.device)
    check_int("offset", offset)
    f = _check_inv_freq(inv_freq)
    if q.shape[-1] != 2 * f.numel():
        raise ValueError(
            f"q must have D = 2 * len(inv_freq) = {2 * f.numel()} features, got D={q.shape[-1]}"
        )
    # <R_m q, R_n k> = Re sum_i q_i conj(k_i) exp(1j (a_m,i - a_n,i)), pairs as complex numbers
    h = (
        _pairs_as_complex(q.to(F64), "interleaved")
        * _pairs_as_complex(k.to(F64), "interleaved").conj()
    )
    d = recipe_angles(m, f, recipe) - recipe_angles(m + offset, f, recipe)  # [M, D/2]
    score = (h.real * d.cos() - h.imag * d.sin()).sum(-1)
    return score / (q.to(F64).norm() * k.to(F64).norm())


@same_device(copied=("inv_freq",))
def relative_error_table(
    q: torch.Tensor,
    k: torch.Tensor,
    inv_freq: torch.Tensor,
    *,
    offsets: Sequence[int] = (1,),
    ranges: Sequence[tuple[int, int]] = ((0, 1024), (1024, 8192), (8192, 32768), (32768, 131072)),
    recipes: Sequence[str] = (
        "fp32 angles",
        "bf16 positions",
        "bf16 inv_freq",
        "all bf16",
        "all fp16",
    ),
    samples: int = 4096,
) -> Table:
    """Largest error of the score at fixed offsets, per range of start positions.

    Each cell is ``max_m |score_recipe(m) - score_exact|`` over starts ``m`` in the range,
    scores as in :func:`offset_scores` (cosines, so errors lie in ``[0, 2]``); ``nan``
    means an angle overflowed. A range longer than ``samples`` is sampled at an odd stride
    (so both even and odd starts are met), starting at its first start.

    Args:
        q, k: vectors ``[D]``.
        inv_freq: frequencies ``[D/2]``.
        offsets: the fixed distances (ints), one block of rows each.
        ranges: ``(start, stop)`` pairs of starts, ``0 <= start < stop``.
        recipes: names in :data:`RECIPES`.
        samples: most starts taken from one range (at least 1).

    Returns:
        A :class:`posenc.display.table.Table`: one row per offset and recipe, one column per range
        of starts, 2 significant digits (errors below 1e-12 shown as 0).

    Raises:
        TypeError, ValueError: for bad vectors, offsets, ranges or recipes.

    Example:
        >>> from posenc.rope import rope_inv_freq
        >>> q, k = torch.randn(2, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        >>> f = rope_inv_freq(8)
        >>> t = relative_error_table(q, k, f, ranges=[(0, 64), (256, 512)], recipes=["bf16 positions"])
        >>> t.columns, t.rows
        (['offset', 'recipe', '0\u201163', '256\u2011511'], [['1', 'bf16 positions', '0', '0.22']])
    """
    offsets = _check_ints("offsets", offsets, minimum=None)
    if isinstance(ranges, (str, bytes)) or not isinstance(ranges, Sequence) or not ranges:
        raise TypeError(
            f"ranges must be a non-empty sequence of (start, stop) pairs, got {ranges!r}"
        )
    for r in ranges:
        if not (isinstance(r, (tuple, list)) and len(r) == 2):
            raise TypeError(f"ranges must hold (start, stop) pairs, got {r!r}")
        check_int("ranges start", r[0], minimum=0)
        check_int("ranges stop", r[1], minimum=r[0] + 1)
    names = _check_names(recipes)
    check_int("samples", samples, minimum=1)
    rows = []
    for offset in offsets:
        exact = offset_scores(q, k, [0], offset, inv_freq)[0]
        for name in names:
            cells = []
            for a, b in ranges:
                stride = -(-(b - a) // samples) | 1  # ceil, made odd
                starts = torch.arange(a, b, stride)
                err = (offset_scores(q, k, starts, offset, inv_freq, name) - exact).abs()
                top = torch.nan if bool(err.isnan().any()) else err.max().item()
                cells.append(_fmt_err(top, 0))
            rows.append([str(offset), name, *cells])
    return Table(
        ["offset", "recipe", *(f"{a:,}\u2011{b - 1:,}" for a, b in ranges)],
        rows,
        caption=(
            "Largest change of the score q·k / (|q| |k|) of a query and a key a fixed "
            "offset apart, against the exact score, as the pair slides over each range of "
            "start positions m, one range per column (nan: an angle overflowed)."
        ),
    )


def _fmt_err(v: float, width: int) -> str:
    """An error with 2 significant digits; below 1e-12 (float64 noise) it is shown as 0."""
    if math.isnan(v):
        return f"{'nan':>{width}}"
    if v < 1e-12:
        return f"{'0':>{width}}"
    return f"{v:>{width}.2g}"


@same_device(copied=("inv_freq",))
def offset_scores_figure(
    q: torch.Tensor,
    k: torch.Tensor,
    inv_freq: torch.Tensor,
    *,
    offset: int = 1,
    max_position: int = 131072,
    samples: int = 3000,
    recipes: Sequence[str] = ("all bf16", "bf16 positions", "fp32 angles"),
):
    """The score of a query and a key ``offset`` apart, slid along the sequence.

    The exact score (a horizontal line) does not depend on the start ``m``; each recipe's
    scores are drawn as dots at ``samples`` log-spaced starts up to ``max_position``.

    Args:
        q, k: vectors ``[D]``.
        inv_freq: frequencies ``[D/2]``.
        offset: distance from query to key.
        max_position: last start (at least 2).
        samples: number of starts (at least 2).
        recipes: names in :data:`RECIPES`.

    Returns:
        The matplotlib figure.

    Raises:
        TypeError, ValueError: for bad arguments.

    Example:
        >>> from posenc.rope import rope_inv_freq
        >>> import matplotlib.pyplot as plt
        >>> q, k = torch.randn(2, 8, dtype=torch.float64)
        >>> plt.close(offset_scores_figure(q, k, rope_inv_freq(8), max_position=500, samples=20))
    """
    check_int("offset", offset)
    check_int("max_position", max_position, minimum=2)
    check_int("samples", samples, minimum=2)
    names = _check_names(recipes)
    starts = torch.unique(
        torch.logspace(0, math.log10(max_position), samples, dtype=F64).round().long()
    )
    fig, ax = plots.figure(height=3.6)
    exact = offset_scores(q, k, [0], offset, inv_freq)[0].item()
    colors = _colors(names)
    for name in names:
        s = offset_scores(q, k, starts, offset, inv_freq, name).cpu()
        ax.plot(starts, s, ".", ms=2.5, color=colors[name], label=name)
    ax.axhline(exact, color=plots.COLORS["ink"], lw=1.0, label="exact")
    ax.set_xscale("log")
    ax.set_xlabel("start position m")
    ax.set_ylabel("score / (|q| |k|)")
    ax.set_title(f"Query at m, key at m + {offset}")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=len(names) + 1, markerscale=4)
    return fig


def check_table(checks: Sequence[RopeCheck]) -> Table:
    """:func:`check_apply_rope` results, one row per dtype (the worst of its layouts).

    Columns: the dtype; whether dtype and device were kept and every element is within
    :func:`rope_error_bound` in every layout checked (one row covers all of them); the largest error of ``apply_rope``
    and of the angles, cos and sin computed in the dtype itself, each in rounding steps
    (half the dtype's spacing at the largest value, the error of rounding the exact answer
    to the dtype). ``-`` for float64, the reference's own dtype, and where torch cannot
    compute in the dtype; ``nan`` where that computation overflows.

    Args:
        checks: results of :func:`check_apply_rope`.

    Returns:
        A :class:`posenc.display.table.Table`.

    Raises:
        TypeError, ValueError: if ``checks`` is empty or holds something else.

    Example:
        >>> from posenc.precision import check_apply_rope
        >>> x = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
        >>> c = check_apply_rope(x, list(range(0, 80000, 10000)), torch.bfloat16)
        >>> row = check_table([c]).rows[0]
        >>> row[:3], float(row[3]) <= 2, float(row[4]) > 10
        (['bf16', 'True', 'True'], True, True)
    """
    checks = _check_rope_checks(checks)
    rows = []
    for dtype in dict.fromkeys(c.dtype for c in checks):
        mine = [c for c in checks if c.dtype == dtype]
        steps = max(c.max_error / c.rounding_step for c in mine)
        naive = [c.max_naive for c in mine]
        if dtype == F64 or any(v is None for v in naive):
            naive_steps = "-"
        elif any(math.isnan(v) for v in naive):
            naive_steps = "nan"
        else:
            naive_steps = (
                f"{max(v / c.rounding_step for v, c in zip(naive, mine, strict=True)):.2g}"
            )
        rows.append(
            [
                _name(dtype),
                str(all(c.dtype_kept for c in mine)),
                str(all(c.within_bound for c in mine)),
                "-" if dtype == F64 else f"{steps:.2g}",
                naive_steps,
            ]
        )
    return Table(
        ["dtype", "kept", "within bound", "error (steps)", "in the dtype (steps)"],
        rows,
        caption=(
            "apply_rope against the float64 rotation of the same input, per dtype (the worst "
            "of the layouts checked): whether the dtype is kept and every element is within "
            "the bound, and the largest error of apply_rope and of the naive computation in "
            "the dtype itself, in rounding steps of the dtype."
        ),
        align=["left", "left", "left", "right", "right"],
    )


def _check_rope_checks(checks: object) -> list[RopeCheck]:
    if isinstance(checks, (str, bytes)) or not isinstance(checks, Sequence):
        raise TypeError(f"checks must be a sequence of RopeCheck, got {checks!r}")
    if not checks:
        raise ValueError("checks must not be empty, got an empty sequence")
    for c in checks:
        if not isinstance(c, RopeCheck):
            raise TypeError(f"checks must hold RopeCheck results, got {type(c).__name__}")
    return list(checks)


def format_checks(checks: Sequence[RopeCheck]) -> str:
    """A text table of :class:`RopeCheck` results, booleans only (the same on every device).

    Columns: the dtype and layout; whether the dtype and device were kept; whether every
    element is within :func:`rope_error_bound`; whether the largest error is at most twice
    the rounding step (the level of rounding the output; ``-`` for float64, the dtype of the
    reference itself); whether computing the angles, cos and sin in the dtype itself is more
    than 10 times worse than the rounding step (``-`` where torch cannot compute in that
    dtype, or for float64).

    Args:
        checks: results of :func:`check_apply_rope`.

    Returns:
        The table.

    Raises:
        TypeError, ValueError: if ``checks`` is empty or holds something else.

    Example:
        >>> from posenc.precision import check_apply_rope
        >>> c = check_apply_rope(torch.randn(2, 4), [0, 9], torch.bfloat16)
        >>> print(format_checks([c]))
        dtype             layout       kept  within bound  error <= 2 steps  in-dtype > 10 steps
        bf16              interleaved  True          True              True                False
    """
    checks = _check_rope_checks(checks)
    head = ("kept", "within bound", "error <= 2 steps", "in-dtype > 10 steps")
    lines = [f"{'dtype':16}  {'layout':11}" + "".join(f"  {h}" for h in head)]
    for c in checks:
        close = "-" if c.dtype == F64 else str(c.max_error <= 2 * c.rounding_step)
        if c.max_naive is None or c.dtype == F64:
            naive = "-"
        else:
            naive = str(not (c.max_naive <= 10 * c.rounding_step))  # nan counts as worse
        cells = (str(c.dtype_kept), str(c.within_bound), close, naive)
        lines.append(
            f"{_name(c.dtype):16}  {c.layout:11}"
            + "".join(f"  {v:>{len(h)}}" for v, h in zip(cells, head, strict=True))
        )
    return "\n".join(lines)
