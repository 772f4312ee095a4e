"""The benchmark's report: tables, the targets' verdicts, figures, and the files it writes.

Everything here reads a result of :func:`posenc.bench.run` (or
:func:`posenc.bench.measure_targets`); nothing is timed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from posenc import plots
from posenc.bench import BOUNDS, REFERENCE, TARGET_SHAPE, rows_where

__all__ = ["figure", "format_table", "format_targets", "sweep_figure", "target_report", "write"]


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


def figure(result: dict, *, dtype: str = "float32", dim: int | None = None, layout: str = "half"):
    """Two panels: time against ``T`` for every implementation, and at the largest ``T``
    each implementation's ratio to its bound (out of place: the allocation bound; in place:
    the traffic bound).

    Args:
        result: what :func:`run` returned.
        dtype: which dtype's rows to draw.
        dim: which ``D`` (default: the smallest in the results).
        layout: which layout's implementations to draw.

    Returns:
        A matplotlib figure.

    Raises:
        ValueError: if there are no rows for that dtype, ``D`` and layout.

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
    import matplotlib.pyplot as plt

    rows = [r for r in rows_where(result, dtype=dtype) if r.get("group") != "targets"]
    if dim is None and rows:
        dim = min(r["dim"] for r in rows)
    rows = [r for r in rows if r["dim"] == dim and r["layout"] in ("-", layout)]
    if not rows:
        raise ValueError(f"no rows for dtype={dtype!r}, dim={dim}, layout={layout!r}")
    names = list(dict.fromkeys(r["implementation"] for r in rows))
    palette = plt.get_cmap("tab20" if len(names) > 10 else "tab10")
    colour = {name: palette(i) for i, name in enumerate(names)}
    fig, (ax_t, ax_r) = plots.figure(1, 2, height=4.0)
    lengths = sorted({r["length"] for r in rows})
    for name in names:
        pts = sorted((r["length"], r["ms"]) for r in rows if r["implementation"] == name)
        pts = [(t, ms) for t, ms in pts if ms is not None]
        if not pts:
            continue
        style = "--" if name in BOUNDS else ":" if name == REFERENCE else "-"
        ax_t.plot(*zip(*pts, strict=True), style, marker="o", ms=3, color=colour[name], label=name)
    ax_t.set(xscale="log", yscale="log", xlabel="positions T", ylabel="ms (q and k)")
    ax_t.minorticks_off()
    ax_t.set_xticks(lengths, [str(t) for t in lengths])
    ax_t.set_title(f"time, {dtype}, D={dim}, {layout} layout")
    ax_t.legend(fontsize=7, ncol=2, loc="upper left")
    longest = lengths[-1]
    last = [
        r
        for r in rows
        if r["length"] == longest and r["implementation"] not in BOUNDS and r["ms"] is not None
    ]
    ratios = [r["traffic_ratio"] if r["in_place"] else r["alloc_ratio"] for r in last]
    bars = [plots.COLORS["orange"] if r["in_place"] else plots.COLORS["blue"] for r in last]
    ys = list(range(len(last)))
    ax_r.barh(ys, ratios, 0.6, color=bars)
    ax_r.set_yticks(ys, [r["implementation"] for r in last], fontsize=8)
    ax_r.axvline(1.0, color=plots.COLORS["ink"], lw=0.8)
    ax_r.set(xlabel="bound time / time (1 = as fast as the copy)")
    ax_r.set_title(f"ratio to the bound, T={longest}")
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=plots.COLORS["blue"]),
        plt.Rectangle((0, 0), 1, 1, color=plots.COLORS["orange"]),
    ]
    ax_r.legend(handles, ["out of place: clone", "in place: copy_"], fontsize=8)
    return fig


def sweep_figure(sweep: dict):
    """Time against ``D`` (log-log) from :func:`dimension_sweep`, with slopes 1 and 2 drawn.

    Args:
        sweep: what :func:`dimension_sweep` returned.

    Returns:
        A matplotlib figure.

    Example:
        >>> fig = sweep_figure({"dims": [8, 16], "ms": {"dense": [1.0, 4.0]}})
        >>> len(fig.axes[0].lines)
        3
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    fig, ax = plots.figure(height=3.6)
    dims = sweep["dims"]
    for name, ms in sweep["ms"].items():
        ax.plot(dims, ms, marker="o", label=name)
    first = min(ms[0] for ms in sweep["ms"].values())
    for power, style in ((1, ":"), (2, "--")):
        ref = [first * (d / dims[0]) ** power for d in dims]
        ax.plot(dims, ref, style, color=plots.COLORS["grey"], label=f"grows as D^{power}")
    ax.set(xscale="log", yscale="log", xlabel="head size D", ylabel="ms per call")
    ax.minorticks_off()
    ax.set_xticks(dims, [str(d) for d in dims])
    ax.set_title("cost against head size")
    ax.legend(fontsize=8)
    return fig


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
