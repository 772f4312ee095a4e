"""The benchmark: the quick command runs end to end, and its bookkeeping is right.

No timing is asserted: the numbers depend on the machine. What is checked is that every
implementation ran and agreed with the reference, and that the derived columns follow from
the measured times.
"""

import contextlib
import dataclasses
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from posenc import bench
from posenc.bench import __main__ as cli
from posenc.bench import report

ROOT = Path(__file__).resolve().parents[1]


def test_quick_command_writes_results_and_plot(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "posenc.bench", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "implementation" in proc.stdout and "rope_bench.json" in proc.stdout
    result = json.loads((tmp_path / "rope_bench.json").read_text())
    assert (tmp_path / "rope_bench.png").read_bytes()[:4] == b"\x89PNG"
    config = bench.quick_config()
    assert result["config"]["lengths"] == list(config.lengths)
    assert result["machine"]["cpu_count"] >= 1 and "allocator" in result["machine"]
    rows = result["rows"]
    per_point = len(bench.BOUNDS) + 1 + len(config.layouts) * len(config.implementations)
    points = len(config.lengths) * len(config.dims) * len(config.dtypes)
    assert len(rows) == points * per_point
    for row in rows:
        assert row["ok"], row  # every result agreed with the reference
        timed = row["ms"] is not None
        assert timed or row["note"], row  # a row without a time says why
        if row["implementation"] in ("apply_rope", "apply_rope_", "cached", "clone", "copy_"):
            assert timed and row["rounds"] >= config.min_repeats
    for row in (r for r in rows if r["ms"] is not None):
        length, dim = row["length"], row["dim"]
        itemsize = 4 if row["dtype"] == "float32" else 2
        assert row["bytes"] == 2 * 2 * row["batch"] * row["heads"] * length * dim * itemsize
        assert math.isclose(row["gbps"], row["bytes"] / row["ms"] / 1e6, rel_tol=1e-9)
    for name, field in (("clone", "alloc_ratio"), ("copy_", "traffic_ratio")):
        assert all(r[field] == 1.0 for r in rows if r["implementation"] == name)
    assert all(
        r["speedup_vs_transformers"] == 1.0 for r in rows if r["implementation"] == "transformers"
    )


def test_the_default_grid_holds_the_targets_shape():
    config = bench.default_config()
    b, h, t, d = bench.TARGET_SHAPE
    assert (config.batch, config.heads) == (b, h) and t in config.lengths and d in config.dims
    assert "float16" in bench.default_config("cuda").dtypes
    assert set(bench.IMPLEMENTATIONS) >= {"dense", "compiled", "triton", "apply_rope_"}


def _row(name, ms, layout="half", **extra):
    b, h, t, d = bench.TARGET_SHAPE
    row = {
        "device": "cpu",
        "dtype": "float32",
        "batch": b,
        "heads": h,
        "length": t,
        "dim": d,
        "layout": layout,
        "implementation": name,
        "ms": ms,
        "bytes": 1000,
        "gbps": None,
        "alloc_ratio": None,
        "traffic_ratio": None,
        "speedup_vs_transformers": None,
        "ok": True,
        "note": "",
    }
    row.update(extra)
    return row


def test_target_report_compares_with_the_goals():
    rows = [
        _row("apply_rope", 25.0, alloc_ratio=0.9, speedup_vs_transformers=3.5),
        _row("apply_rope", 30.0, "interleaved", alloc_ratio=0.7, speedup_vs_transformers=2.9),
        _row("apply_rope_", 8.0, traffic_ratio=0.61),
        _row("apply_rope_", None, "interleaved", note="skipped"),
        _row("apply_rope", 1.0, length=128, alloc_ratio=0.1),  # not the target shape
    ]
    checks = report.target_report({"rows": rows})
    verdicts = {(c["check"].split(":")[0], c["layout"], c["goal"]): c["met"] for c in checks}
    assert verdicts == {
        ("apply_rope", "half", 0.85): True,
        ("apply_rope", "interleaved", 0.85): False,
        ("apply_rope", "half", 3.0): True,
        ("apply_rope", "interleaved", 3.0): False,
        ("apply_rope_", "half", 0.6): True,
        ("apply_rope_", "interleaved", 0.6): False,
    }
    text = report.format_targets(checks)
    assert text.count("MISSED") == 3 and text.count(" met") == 3


def test_target_report_prefers_the_focused_measurement():
    grid = _row("apply_rope_", 8.0, traffic_ratio=0.3, group="grid")
    focused = _row("apply_rope_", 5.0, traffic_ratio=0.9, group="targets")
    checks = report.target_report({"rows": [grid, focused]})
    assert [(c["value"], c["met"]) for c in checks] == [(0.9, True)]
    assert [c["value"] for c in report.target_report({"rows": [grid]})] == [0.3]


def test_format_table_shows_skipped_rows_and_wrong_results():
    rows = [_row("dense", None, note="skipped: too slow"), _row("complex", 2.0, ok=False)]
    table = report.format_table({"rows": rows}).splitlines()
    assert len(table) == 3
    assert table[1].split()[5] == "-" and table[1].endswith("skipped: too slow")
    assert table[2].endswith("WRONG RESULT")
    assert len(report.format_table({"rows": rows}, implementation="dense").splitlines()) == 2


_ROTATE_HALF = bench.fast_rope.rope_rotate_half  # the right one, kept before any patch
WRONG = {  # (implementation, the function the bench calls for it, a wrong stand-in)
    "no rotation": ("rotate_half", "rope_rotate_half", lambda x, **kw: x.clone()),
    "off by 1e-4": (
        "rotate_half",
        "rope_rotate_half",
        lambda x, **kw: _ROTATE_HALF(x, **kw) * (1 + 1e-4),
    ),
    "in place, nothing written": ("apply_rope_", "apply_rope_", lambda x, **kw: x),
}


@pytest.mark.parametrize("wrong", list(WRONG))
def test_a_wrong_implementation_is_flagged(wrong, monkeypatch):
    """An implementation that gives wrong numbers (none rotated, every one 1e-4 off, which
    is ten times float32's tolerance, or nothing written in place) still runs and is timed,
    but its row says ``ok=False`` with its error, and the table marks it WRONG RESULT; the
    bounds and transformers, which are right, are not marked."""
    name, attribute, function = WRONG[wrong]
    monkeypatch.setattr(bench.fast_rope, attribute, function)
    config = bench.Config(
        lengths=(16,),
        dims=(64,),
        dtypes=("float32",),
        heads=2,
        layouts=("half",),
        implementations=(name,),
        repeats=1,
        min_repeats=1,
        fresh_memory=False,
        target_rounds=0,
    )
    result = bench.run(config)
    (row,) = bench.rows_where(result, implementation=name)
    assert row["ok"] is False and row["ms"] is not None
    assert row["max_error"] > 1e-5
    assert all(r["ok"] for r in result["rows"] if r is not row)
    lines = report.format_table(result).splitlines()[1:]
    assert [line.split()[4] for line in lines if line.endswith("WRONG RESULT")] == [name]


def test_table_says_once_what_rows_share():
    rows = [
        _row("clone", 1.0, layout="-", gbps=2.0, alloc_ratio=1.0, traffic_ratio=0.5),
        _row("apply_rope", 2.0, alloc_ratio=0.5, speedup_vs_transformers=3.0),
        _row("dense", None, note="skipped: too slow"),
    ]
    table = report.table({"rows": rows})
    assert table.columns[:2] == ["implementation", "layout"] and table.columns[-1] == "note"
    assert "[1, 32, 4096, 64], float32 on cpu" in table.caption
    assert table.rows[1][2:] == ["2.000", "-", "0.50", "-", "3.00", ""]
    assert table.rows[2][2] == "-" and table.rows[2][-1] == "skipped: too slow"
    both = report.table({"rows": [*rows, _row("clone", 1.0, layout="-", length=128)]})
    assert both.columns[0] == "T" and "T, 64]" in both.caption
    with pytest.raises(ValueError, match="no rows match"):
        report.table({"rows": rows}, dim=7)
    with pytest.raises(TypeError, match="result must be"):
        report.table(rows)


def test_targets_table_shows_each_goal():
    c = {"check": "apply_rope_: in place vs traffic bound", "layout": "half"}
    table = report.targets_table([{**c, "value": 0.5, "goal": 0.6, "met": False}])
    assert table.rows == [[c["check"], "half", "0.50", "\u2265 0.6", "MISSED"]]
    with pytest.raises(TypeError, match="checks"):
        report.targets_table([c])


def test_time_figure_draws_at_most_six_lines():
    rows = [
        _row(name, ms * t / 128, layout=lay, length=t)
        for name, ms, lay in (("clone", 1.0, "-"), ("copy_", 0.5, "-"), ("apply_rope", 1.2, "half"))
        for t in (128, 256)
    ]
    fig = report.time_figure({"rows": rows})
    try:
        assert [ln.get_label() for ln in fig.axes[0].lines] == [
            "copy_ (bound)",
            "clone (bound)",
            "apply_rope",
        ]
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="1 to 6"):
        report.time_figure({"rows": rows}, names=list(bench.IMPLEMENTATIONS))
    with pytest.raises(ValueError, match="layout"):
        report.time_figure({"rows": rows}, layout="rows")


def test_rows_where_rejects_unknown_fields():
    with pytest.raises(KeyError, match="no field 'colour'"):
        bench.rows_where({"rows": [_row("clone", 1.0)]}, colour="red")


def test_time_rounds_counts_calls():
    calls = {"a": 0, "b": 0}

    def bump(name):
        calls[name] += 1

    times = bench.time_rounds(
        {"a": lambda: bump("a"), "b": lambda: bump("b")}, warmup=2, repeats=5, min_repeats=2
    )
    assert [len(v) for v in times.values()] == [5, 5] and calls == {"a": 7, "b": 7}
    short = bench.time_rounds({"a": lambda: None}, warmup=0, repeats=50, min_repeats=3, seconds=0)
    assert len(short["a"]) == 3  # stops as soon as the minimum is done and the time is up
    assert all(t >= 0 for t in short["a"])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"lengths": ()}, "lengths must be"),
        ({"lengths": (0,)}, "lengths must be"),
        ({"dims": (63,)}, "even"),
        ({"dtypes": ("float8",)}, "dtypes must be"),
        ({"layouts": ("rows",)}, "layouts must be"),
        ({"implementations": ("magic",)}, "implementations must be"),
        ({"device": "tpu"}, "device must be"),
        ({"repeats": 2, "min_repeats": 3}, "min_repeats must not exceed"),
        ({"seconds_per_point": 0.0}, "positive"),
        ({"heads": 0}, "heads must be at least 1"),
        ({"target_rounds": -1}, "target_rounds must be at least 0"),
    ],
)
def test_bad_config_gets_a_clear_error(change, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(bench.quick_config(), **change)


def test_run_rejects_other_configs_and_figure_needs_rows():
    with pytest.raises(TypeError, match="Config"):
        bench.run({"lengths": (8,)})
    with pytest.raises(ValueError, match="no rows"):
        report.figure({"rows": [_row("clone", 1.0, layout="-")]}, dtype="bfloat16")
    with pytest.raises(ValueError, match="unknown implementation"):
        bench._implementation("magic", "half")


def test_main_in_process_with_a_tiny_grid(tmp_path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(
            [
                "--lengths",
                "64",
                "--dims",
                "64",
                "--heads",
                "1",
                "--dtypes",
                "float32",
                "--implementations",
                "apply_rope",
                "apply_rope_",
                "dense",
                "--repeats",
                "1",
                "--keep-allocator",
                "--no-compile",
                "--target-rounds",
                "0",
                "--out",
                str(tmp_path),
            ]
        )
    plt.close("all")
    assert status == 0
    result = json.loads((tmp_path / "rope_bench.json").read_text())
    assert {r["implementation"] for r in result["rows"]} == {
        "clone",
        "copy_",
        "transformers",
        "apply_rope",
        "apply_rope_",
        "dense",
    }
    assert result["machine"]["allocator"] == "unchanged"
    assert result["targets"] == []  # H = 1 is not the target shape
