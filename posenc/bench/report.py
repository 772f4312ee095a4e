"""The benchmark's report: tables, the targets' verdicts, figures, and the files it writes.

Everything here reads a result of :func:`posenc.bench.run` (or
:func:`posenc.bench.measure_targets`); nothing is timed. The command line prints
:func:`format_table` and :func:`format_targets`; the book shows the same numbers as
captioned tables (:func:`table`, :func:`targets_table`) and draws them in its style:
:func:`time_figure` (time against ``T``), :func:`ratio_figure` (every implementation
against its bound) and :func:`sweep_figure` (time against ``D``); :func:`figure` puts the
first two together for the PNG that :func:`write` saves.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl

from posenc.bench import BOUNDS, IMPLEMENTATIONS, REFERENCE, TARGET_SHAPE, rows_where
from posenc.display import plots
from posenc.display.table import Table

__all__ = [
    "TIME_LINES",
    "figure",
    "format_table",
    "format_targets",
    "ratio_figure",
    "sweep_figure",
    "table",
    "target_report",
    "targets_table",
    "time_figure",
    "write",
]

TIME_LINES = ("copy_", "clone", "transformers", "elementwise", "apply_rope", "apply_rope_")
"""What :func:`time_figure` draws by default: both bounds, transformers, the textbook
elementwise form, and the fast path out of place and in place."""

_STYLE = {
    "copy_": ("grey", "--"),
    "clone": ("ink", "--"),
    "transformers": ("red", ":"),
    "elementwise": ("orange", "-"),
    "apply_rope": ("blue", "-"),
    "apply_rope_": ("green", "-"),
}
"""Colour (a key of :data:`posenc.display.plots.COLORS`) and line style of the usual lines."""

_SPARE = ("purple", "sky", "orange", "blue", "green", "red")

_LAYOUT_COLOURS = {"interleaved": "blue", "half": "orange"}

_TIMES = "\u00d7"  # the multiplication sign, unit of a ratio


def _fmt(value, spec: str) -> str:
    """``value`` formatted by ``spec`` (e.g. ``"7.2f"``), or ``-`` right-aligned to its width."""
    if value is None:
        return "-".rjust(int(spec.split(".")[0] or 0))
    return format(value, spec)


def format_table(result: dict, **match) -> str:
    """A text table of the rows (filtered as :func:`rows_where`).

    Columns: dtype, D, T, layout, implementation, milliseconds, MB moved, GB/s, ratio to the
    allocation bound, ratio to the traffic bound, speed-up over transformers, and a note.

    Args:
        result: what :func:`run` returned.
        **match: optional filters.

    Returns:
        The table, one line per row.

    Example:
        >>> row = {"dtype": "float32", "dim": 8, "length": 4, "layout": "-",
        ...        "implementation": "clone", "ms": 0.01, "bytes": 1024, "gbps": 0.1,
        ...        "alloc_ratio": 1.0, "traffic_ratio": 0.5, "speedup_vs_transformers": None,
        ...        "ok": True, "note": ""}
        >>> print(format_table({"rows": [row]}).splitlines()[1].split())
        ['float32', '8', '4', '-', 'clone', '0.010', '0.0', '0.10', '1.00', '0.50', '-']
    """
    head = (
        f"{'dtype':8s} {'D':>4s} {'T':>6s} {'layout':11s} {'implementation':14s} "
        f"{'ms':>9s} {'MB':>7s} {'GB/s':>7s} {'x alloc':>7s} {'x traf':>7s} {'x HF':>6s}"
    )
    lines = [head]
    for r in rows_where(result, **match):
        flag = "" if r["ok"] else "  WRONG RESULT"
        lines.append(
            f"{r['dtype']:8s} {r['dim']:>4d} {r['length']:>6d} {r['layout']:11s} "
            f"{r['implementation']:14s} {_fmt(r['ms'], '9.3f')} {r['bytes'] / 1e6:7.1f} "
            f"{_fmt(r['gbps'], '7.2f')} {_fmt(r['alloc_ratio'], '7.2f')} "
            f"{_fmt(r['traffic_ratio'], '7.2f')} {_fmt(r['speedup_vs_transformers'], '6.2f')}"
            f"{'  ' + r['note'] if r['note'] else ''}{flag}"
        )
    return "\n".join(lines)


def target_report(result: dict) -> list[dict]:
    """The performance targets, checked on the rows of :data:`TARGET_SHAPE` (float32, CPU).

    - ``apply_rope``, each layout: at least 0.85 of the allocation bound and at least 3
      times as fast as transformers;
    - ``apply_rope_``, each layout: at least 0.6 of the traffic bound.

    The rows of the focused measurement (``group == "targets"``) are used when the result
    has them, else the grid's rows of that shape.

    Args:
        result: what :func:`run` returned.

    Returns:
        One dict per check: ``{"check", "layout", "value", "goal", "met"}``; empty when the
        grid has no CPU float32 point of the target shape.

    Example:
        >>> target_report({"rows": []})
        []
    """
    b, h, t, d = TARGET_SHAPE
    base = {"device": "cpu", "dtype": "float32", "batch": b, "heads": h, "length": t, "dim": d}
    checks = []
    goals = (
        ("apply_rope", "alloc_ratio", 0.85, "out of place vs allocation bound"),
        ("apply_rope", "speedup_vs_transformers", 3.0, "speed-up over transformers"),
        ("apply_rope_", "traffic_ratio", 0.6, "in place vs traffic bound"),
    )
    rows = result["rows"]
    if any(r.get("group") == "targets" for r in rows):
        rows = [r for r in rows if r.get("group") == "targets"]
    for name, field, goal, label in goals:
        for r in rows_where({"rows": rows}, implementation=name, **base) if rows else []:
            value = r[field]
            checks.append(
                {
                    "check": f"{name}: {label}",
                    "layout": r["layout"],
                    "value": value,
                    "goal": goal,
                    "met": value is not None and value >= goal,
                }
            )
    return checks


def format_targets(checks: list[dict]) -> str:
    """The checks of :func:`target_report` as text, one line each.

    Args:
        checks: what :func:`target_report` returned.

    Returns:
        Lines ``check, layout, value (goal >= g) met|MISSED``.

    Example:
        >>> c = {"check": "apply_rope_: in place vs traffic bound", "layout": "half",
        ...      "value": 0.7, "goal": 0.6, "met": True}
        >>> format_targets([c]).split()[-5:]
        ['0.70', '(goal', '>=', '0.6)', 'met']
    """
    lines = []
    for c in checks:
        verdict = "met" if c["met"] else "MISSED"
        lines.append(
            f"{c['check']:42s} {c['layout']:11s} {_fmt(c['value'], '6.2f')} "
            f"(goal >= {c['goal']}) {verdict}"
        )
    return "\n".join(lines)


def _check_result(result: object) -> list[dict]:
    """The rows of ``result``, if it is what :func:`posenc.bench.run` returns."""
    if not isinstance(result, dict) or not isinstance(result.get("rows"), list):
        raise TypeError(
            "result must be a dict with a list of rows, as posenc.bench.run returns, "
            f"got {type(result).__name__}"
        )
    return result["rows"]


def _num(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _same(rows: list[dict], field: str) -> bool:
    return len({r[field] for r in rows}) == 1


def table(result: dict, **match) -> Table:
    """The rows (filtered as :func:`posenc.bench.rows_where`) as a captioned table.

    One row per implementation and layout: median time per call, bandwidth, and speed
    relative to the allocation bound (``clone``), the traffic bound (``copy_``) and
    transformers, each the other's time over this one's (1: as fast; above 1: faster).
    What all rows share (dtype, device, shape ``[B, H, T, D]``, bytes moved, the machine)
    is said once in the caption; what differs gets a column. A row that was not timed
    shows ``-`` and its note.

    Args:
        result: what :func:`posenc.bench.run` returned.
        **match: filters, e.g. ``length=2048``.

    Returns:
        A :class:`posenc.display.table.Table`; the last expression of a notebook cell shows it.

    Raises:
        TypeError: if ``result`` is not a result of :func:`posenc.bench.run`.
        KeyError: for a filter on a field that rows do not have.
        ValueError: if no row matches.

    Example:
        >>> row = {"device": "cpu", "dtype": "float32", "batch": 1, "heads": 2,
        ...        "length": 4, "dim": 8, "layout": "-", "implementation": "clone",
        ...        "ms": 0.01, "bytes": 10**6, "gbps": 100.0, "alloc_ratio": 1.0,
        ...        "traffic_ratio": 0.5, "speedup_vs_transformers": None, "ok": True,
        ...        "note": ""}
        >>> t = table({"rows": [row]})
        >>> t.rows
        [['clone', '-', '0.010', '100.00', '1.00', '0.50', '-']]
        >>> t.caption.split(":")[0]
        'RoPE on q and k of shape [1, 2, 4, 8], float32 on cpu, 1.0 MB moved per call'
    """
    _check_result(result)
    rows = rows_where(result, **match)
    if not rows:
        raise ValueError(f"no rows match {match!r}")
    varying = [
        (field, head)
        for field, head in (("device", "device"), ("dtype", "dtype"), ("length", "T"), ("dim", "D"))
        if not _same(rows, field)
    ]
    columns = [head for _, head in varying]
    columns += ["implementation", "layout", "time (ms)", "GB/s"]
    columns += [f"vs {name} ({_TIMES})" for name in ("clone", "copy_", "transformers")]
    align = ["right" if head in ("T", "D") else "left" for _, head in varying]
    align += ["left", "left"] + ["right"] * 5
    notes = any(r["note"] or not r["ok"] for r in rows)
    if notes:
        columns.append("note")
        align.append("left")
    body = []
    for r in rows:
        cells = [str(r[field]) for field, _ in varying]
        cells += [r["implementation"], r["layout"], _num(r["ms"], ".3f"), _num(r["gbps"], ".2f")]
        cells += [
            _num(r[field], ".2f")
            for field in ("alloc_ratio", "traffic_ratio", "speedup_vs_transformers")
        ]
        if notes:
            cells.append(f"{'' if r['ok'] else 'WRONG RESULT '}{r['note']}".strip())
        body.append(cells)
    first = rows[0]
    shape = ", ".join(
        str(first[field]) if _same(rows, field) else name
        for field, name in (("batch", "B"), ("heads", "H"), ("length", "T"), ("dim", "D"))
    )
    kind = " ".join(
        text
        for field, text in (("dtype", first["dtype"]), ("device", f"on {first['device']}"))
        if _same(rows, field)
    )
    where = [kind] if kind else []
    if _same(rows, "bytes"):
        where.append(f"{first['bytes'] / 1e6:.1f} MB moved per call")
    machine = result.get("machine") or {}
    measured = (
        f" Measured on {machine['processor']}, {machine['torch_threads']} torch threads."
        if "processor" in machine and "torch_threads" in machine
        else ""
    )
    caption = (
        f"RoPE on q and k of shape [{shape}]{''.join(', ' + w for w in where)}: median time "
        "per call, bandwidth, and speed relative to clone (the allocation bound), copy_ (the "
        f"traffic bound) and transformers, as their time over this one's.{measured}"
    )
    return Table(columns, body, caption=caption, align=align)


def targets_table(checks: Sequence[dict]) -> Table:
    """The checks of :func:`target_report` as a captioned table.

    Args:
        checks: what :func:`target_report` returned.

    Returns:
        A :class:`posenc.display.table.Table`: target, layout, measured value, goal, verdict.

    Raises:
        TypeError: if ``checks`` is not a sequence of the dicts :func:`target_report` makes.

    Example:
        >>> c = {"check": "apply_rope_: in place vs traffic bound", "layout": "half",
        ...      "value": 0.7, "goal": 0.6, "met": True}
        >>> targets_table([c]).rows
        [['apply_rope_: in place vs traffic bound', 'half', '0.70', '≥ 0.6', 'met']]
    """
    keys = {"check", "layout", "value", "goal", "met"}
    if isinstance(checks, (str, bytes, dict)) or not isinstance(checks, Sequence):
        raise TypeError(f"checks must be a list of dicts from target_report, got {checks!r}")
    for i, c in enumerate(checks):
        if not isinstance(c, dict) or not keys <= set(c):
            raise TypeError(f"checks[{i}] must be a dict with keys {sorted(keys)}, got {c!r}")
    b, h, t, d = TARGET_SHAPE
    return Table(
        ["target", "layout", f"measured ({_TIMES})", f"goal ({_TIMES})", "verdict"],
        [
            [
                c["check"],
                c["layout"],
                _num(c["value"], ".2f"),
                f"≥ {c['goal']}",
                "met" if c["met"] else "MISSED",
            ]
            for c in checks
        ],
        caption=(
            f"The performance targets on q and k of shape [{b}, {h}, {t}, {d}], float32 on "
            "the CPU: medians of the focused measurement against each goal (ratios: the "
            "bound's or transformers' time over the implementation's)."
        ),
        align=["left", "left", "right", "right", "left"],
    )


def _grid(result: dict, dtype: str, dim: int | None) -> tuple[list[dict], int]:
    """The grid rows (not the focused targets) of one dtype and ``D`` (default: smallest)."""
    rows = [r for r in rows_where(result, dtype=dtype) if r.get("group") != "targets"]
    if dim is None and rows:
        dim = min(r["dim"] for r in rows)
    rows = [r for r in rows if r["dim"] == dim]
    if not rows:
        raise ValueError(f"no rows for dtype={dtype!r}, dim={dim}")
    return rows, dim


def _check_names(names: object) -> list[str]:
    known = (*BOUNDS, REFERENCE, *IMPLEMENTATIONS)
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise TypeError(f"names must be a sequence of implementation names, got {names!r}")
    if not names or len(names) > plots.MAX_LINES:
        raise ValueError(
            f"names must hold 1 to {plots.MAX_LINES} implementations (the lines of one "
            f"axes), got {len(names)}"
        )
    for name in names:
        if name not in known:
            raise ValueError(f"names must be among {known}, got {name!r}")
    return list(names)


def _colour(name: str, spare: int) -> tuple[str, str]:
    colour, style = _STYLE.get(name, (_SPARE[spare % len(_SPARE)], "-"))
    return plots.COLORS[colour], style


def _draw_times(ax, rows: list[dict], names: list[str], layout: str) -> None:
    """Time against ``T``, one line per name (bounds and transformers whatever the layout)."""
    lengths = sorted({r["length"] for r in rows})
    drawn = 0
    for name in names:
        pts = sorted(
            (r["length"], r["ms"])
            for r in rows
            if r["implementation"] == name
            and r["ms"] is not None
            and (name in BOUNDS or name == REFERENCE or r["layout"] == layout)
        )
        if not pts:
            continue
        colour, style = _colour(name, drawn)
        label = f"{name} (bound)" if name in BOUNDS else name
        on_top = 3 if name == REFERENCE else 2  # dotted: visible where lines coincide
        ax.plot(
            *zip(*pts, strict=True),
            style,
            marker="o",
            ms=4,
            color=colour,
            label=label,
            zorder=on_top,
        )
        drawn += 1
    if not drawn:
        raise ValueError(f"no timed rows for {names} in the {layout!r} layout")
    ax.set(xscale="log", yscale="log", xlabel="positions T", ylabel="ms per call (q and k)")
    ax.minorticks_off()
    ax.set_xticks(lengths, [str(t) for t in lengths])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=3)


def _draw_ratios(ax, rows: list[dict], length: int) -> None:
    """At ``T = length``, each implementation's speed relative to its bound, per layout."""
    at = [
        r
        for r in rows
        if r["length"] == length and r["implementation"] not in BOUNDS and r["ms"] is not None
    ]
    if not at:
        raise ValueError(f"no timed implementation at T={length}")
    names = list(dict.fromkeys(r["implementation"] for r in at))
    layouts = [lay for lay in _LAYOUT_COLOURS if any(r["layout"] == lay for r in at)]
    height = 0.8 / len(layouts)
    for j, lay in enumerate(layouts):
        ys, ratios = [], []
        for i, name in enumerate(names):
            for r in at:
                if r["implementation"] == name and r["layout"] == lay:
                    ys.append(i + (j - (len(layouts) - 1) / 2) * height)
                    ratios.append(r["traffic_ratio"] if r["in_place"] else r["alloc_ratio"])
        ax.barh(ys, ratios, height, color=plots.COLORS[_LAYOUT_COLOURS[lay]], label=lay)
    in_place = {r["implementation"] for r in at if r["in_place"]}
    labels = [f"{n} (in place)" if n in in_place else n for n in names]
    ax.set_yticks(range(len(names)), labels)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.grid(False, axis="y")
    ax.axvline(1.0, color=plots.COLORS["ink"], lw=1.0)
    ax.set_xlabel("bound's time / time (bound: clone; in place: copy_)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=len(layouts))


def time_figure(
    result: dict,
    *,
    dtype: str = "float32",
    dim: int | None = None,
    layout: str = "half",
    names: Sequence[str] = TIME_LINES,
):
    """Time per call against the positions ``T`` (log-log), one line per implementation.

    The two bounds (dashed) and transformers (dotted, always in the half layout) are drawn
    whatever ``layout``; every other name in ``layout``. Names without timed rows are left
    out. At most :data:`posenc.display.plots.MAX_LINES` lines: pass the ones the text discusses
    (:func:`ratio_figure` shows every implementation).

    Args:
        result: what :func:`posenc.bench.run` returned.
        dtype: which dtype's rows to draw.
        dim: which ``D`` (default: the smallest in the results).
        layout: ``"interleaved"`` or ``"half"``.
        names: the implementations (and bounds) to draw, default :data:`TIME_LINES`.

    Returns:
        A matplotlib figure.

    Raises:
        TypeError: if ``result`` is not a result or ``names`` not a sequence of names.
        ValueError: for a bad layout, unknown or too many names, or no timed rows.

    Example:
        >>> from posenc.bench import Config, run
        >>> cfg = Config(lengths=(8, 16), dims=(8,), dtypes=("float32",), heads=2,
        ...              implementations=("apply_rope",), repeats=3, fresh_memory=False,
        ...              target_rounds=0)
        >>> fig = time_figure(run(cfg))
        >>> len(fig.axes[0].lines) >= 3
        True
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    _check_result(result)
    if layout not in _LAYOUT_COLOURS:
        raise ValueError(f"layout must be one of {tuple(_LAYOUT_COLOURS)}, got {layout!r}")
    names = _check_names(names)
    rows, dim = _grid(result, dtype, dim)
    fig, ax = plots.figure(height=3.6)
    with mpl.rc_context(plots.STYLE):
        _draw_times(ax, rows, names, layout)
        ax.set_title(f"Time per call, {dtype}, D = {dim}, {layout} layout")
    return fig


def ratio_figure(
    result: dict, *, dtype: str = "float32", dim: int | None = None, length: int | None = None
):
    """Every implementation's speed relative to its bound, one bar per layout.

    The ratio is the bound's time over the implementation's (1: as fast as the copy): the
    allocation bound (``clone``) for out-of-place implementations, the traffic bound
    (``copy_``) for the in-place one.

    Args:
        result: what :func:`posenc.bench.run` returned.
        dtype: which dtype's rows to draw.
        dim: which ``D`` (default: the smallest in the results).
        length: which ``T`` (default: the largest).

    Returns:
        A matplotlib figure.

    Raises:
        TypeError: if ``result`` is not a result.
        ValueError: if nothing was timed at that dtype, ``D`` and ``T``.

    Example:
        >>> from posenc.bench import Config, run
        >>> cfg = Config(lengths=(8,), dims=(8,), dtypes=("float32",), heads=2,
        ...              implementations=("apply_rope", "apply_rope_"), repeats=3,
        ...              fresh_memory=False, target_rounds=0)
        >>> fig = ratio_figure(run(cfg))
        >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
        ['transformers', 'apply_rope', 'apply_rope_ (in place)']
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    _check_result(result)
    rows, dim = _grid(result, dtype, dim)
    length = max(r["length"] for r in rows) if length is None else length
    count = len({r["implementation"] for r in rows if r["implementation"] not in BOUNDS})
    fig, ax = plots.figure(height=1.4 + 0.34 * count)
    with mpl.rc_context(plots.STYLE):
        _draw_ratios(ax, rows, length)
        ax.set_title(f"Speed relative to the bound, {dtype}, D = {dim}, T = {length}")
    return fig


def figure(result: dict, *, dtype: str = "float32", dim: int | None = None, layout: str = "half"):
    """:func:`time_figure` above :func:`ratio_figure` (at the largest ``T``), in one figure.

    Args:
        result: what :func:`posenc.bench.run` returned.
        dtype: which dtype's rows to draw.
        dim: which ``D`` (default: the smallest in the results).
        layout: the layout of the time panel.

    Returns:
        A matplotlib figure.

    Raises:
        TypeError: if ``result`` is not a result.
        ValueError: if there are no rows for that dtype and ``D``, or a bad layout.

    Example:
        >>> from posenc.bench import Config, run
        >>> cfg = Config(lengths=(8, 16), dims=(8,), dtypes=("float32",), heads=2,
        ...              implementations=("apply_rope",), repeats=3, fresh_memory=False,
        ...              target_rounds=0)
        >>> fig = figure(run(cfg))
        >>> len(fig.axes)
        2
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    _check_result(result)
    if layout not in _LAYOUT_COLOURS:
        raise ValueError(f"layout must be one of {tuple(_LAYOUT_COLOURS)}, got {layout!r}")
    rows, dim = _grid(result, dtype, dim)
    count = len({r["implementation"] for r in rows if r["implementation"] not in BOUNDS})
    bars = 0.9 + 0.34 * count
    fig, (ax_t, ax_r) = plots.figure(
        2, 1, height=3.4 + bars, gridspec_kw={"height_ratios": [3.0, bars]}
    )
    longest = max(r["length"] for r in rows)
    with mpl.rc_context(plots.STYLE):
        _draw_times(ax_t, rows, list(TIME_LINES), layout)
        _draw_ratios(ax_r, rows, longest)
        ax_t.set_title(f"Time per call, {dtype}, D = {dim}, {layout} layout")
        ax_r.set_title(f"Speed relative to the bound, T = {longest}")
    return fig


def sweep_figure(sweep: dict):
    """Time against ``D`` (log-log) from :func:`posenc.bench.dimension_sweep`, with lines
    growing as ``D`` and as ``D^2`` drawn from the fastest first point.

    Args:
        sweep: what :func:`posenc.bench.dimension_sweep` returned (``"dims"`` and ``"ms"``;
            at most :data:`posenc.display.plots.MAX_LINES` - 2 implementations).

    Returns:
        A matplotlib figure.

    Raises:
        TypeError: if ``sweep`` is not a dict with ``"dims"`` and ``"ms"``.
        ValueError: if a list of times does not match ``"dims"``, or there are too many
            implementations for one axes.

    Example:
        >>> fig = sweep_figure({"dims": [8, 16], "ms": {"dense": [1.0, 4.0]}})
        >>> len(fig.axes[0].lines)
        3
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    if not isinstance(sweep, dict) or not {"dims", "ms"} <= set(sweep):
        raise TypeError(f"sweep must be a dict with 'dims' and 'ms', got {sweep!r}")
    dims, times = list(sweep["dims"]), sweep["ms"]
    if not isinstance(times, dict) or not times or not dims:
        raise TypeError(f"sweep['ms'] must map names to lists of times, got {times!r}")
    if len(times) > plots.MAX_LINES - 2:
        raise ValueError(
            f"sweep must hold at most {plots.MAX_LINES - 2} implementations (two reference "
            f"lines share the axes), got {len(times)}"
        )
    for name, ms in times.items():
        if len(ms) != len(dims):
            raise ValueError(
                f"sweep['ms'][{name!r}] must have one time per D ({len(dims)}), got {len(ms)}"
            )
    fig, ax = plots.figure(height=3.6)
    with mpl.rc_context(plots.STYLE):
        _draw_sweep(ax, dims, times)
    return fig


def _draw_sweep(ax, dims: list, times: dict) -> None:
    for i, (name, ms) in enumerate(times.items()):
        colour, _ = _colour(name, i)
        ax.plot(dims, ms, marker="o", color=colour, label=name)
    first = min(ms[0] for ms in times.values())
    for power, style in ((1, ":"), (2, "--")):
        ref = [first * (d / dims[0]) ** power for d in dims]
        label = "grows as D" if power == 1 else "grows as D²"
        ax.plot(dims, ref, style, color=plots.COLORS["grey"], label=label)
    ax.set(xscale="log", yscale="log", xlabel="head size D", ylabel="ms per call")
    ax.minorticks_off()
    ax.set_xticks(dims, [str(d) for d in dims])
    ax.set_title("Cost against head size")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=3)


def write(result: dict, out_dir: str | os.PathLike) -> tuple[Path, Path]:
    """Write ``rope_bench.json`` and ``rope_bench.png`` into ``out_dir`` (created if needed).

    Args:
        result: what :func:`run` returned.
        out_dir: a directory.

    Returns:
        The two paths.

    Raises:
        OSError: if the directory cannot be written.

    Example:
        >>> import tempfile
        >>> from posenc.bench import Config, run
        >>> cfg = Config(lengths=(8,), dims=(8,), dtypes=("float32",), heads=2,
        ...              implementations=("apply_rope",), repeats=3, fresh_memory=False,
        ...              target_rounds=0)
        >>> paths = write(run(cfg), tempfile.mkdtemp())
        >>> [p.name for p in paths]
        ['rope_bench.json', 'rope_bench.png']
    """
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out / "rope_bench.json", out / "rope_bench.png"
    payload = {**result, "targets": target_report(result)}
    json_path.write_text(json.dumps(payload, indent=1) + "\n")
    fig = figure(result)
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return json_path, png_path
