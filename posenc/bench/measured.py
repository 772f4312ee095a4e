"""The tables of the appendix "RoPE kernels measured" (``book/kernels-measured.md``).

The appendix is a page of prose around tables of the GPU run stored with posenc
(:func:`posenc.bench.peers.stored`). Each table sits in the page between two comments,
``<!-- table: NAME -->`` and ``<!-- end table -->``, as the HTML that :func:`tables` makes
for it; :func:`fill` writes them in, and a test checks that the page holds what the stored
run gives::

    python -m posenc.bench.measured    # rewrite the tables of book/kernels-measured.md

- :func:`forms_table`: every form of posenc's kernel on the chosen cases;
- :func:`targets_table`: the GPU targets of :func:`posenc.bench.peers.targets`, each with the
  value measured, except the host times (they measured a launch path since removed);
- :func:`tables`: every table of the page, by name, as HTML;
- :func:`fill`: a page's text with its tables made afresh.
"""

from __future__ import annotations

import re
from pathlib import Path

from posenc.bench import peers

__all__ = ["PAGE", "fill", "forms_table", "tables", "targets_table"]

PAGE = Path(__file__).resolve().parents[2] / "book" / "kernels-measured.md"
"""The appendix page, in a checkout of the repository."""

_FORMS = (
    "posenc half in place",
    "posenc half in place, angles",
    "posenc half",
    "posenc half, angles",
    "posenc interleaved in place",
    "posenc interleaved",
)
_BLOCK = re.compile(r"(<!-- table: ([a-z0-9-]+) -->\n)(.*?)(<!-- end table -->)", re.DOTALL)


def forms_table(result: dict, cases: tuple[str, ...], *, dtype: str = "bfloat16"):
    """The speed of each form of posenc's kernel against ``copy_``, a column per case.

    Args:
        result: what :func:`posenc.bench.peers.run` returned (or ``peers.stored()``).
        cases: the cases to show, by name (``"B=8, T=4k, D=128"``).
        dtype: which dtype's rows (the model's layout, forward pass).

    Returns:
        A :class:`posenc.display.table.Table`: a row per form, ``-`` where a form did not run.

    Raises:
        ValueError: if a case has no ``copy_`` row in ``result``.

    Example:
        >>> row = dict(case="c", memory="model view", dtype="bfloat16", note="", us=1.0)
        >>> rows = [{**row, "pass": "forward", "implementation": n, "copy_ratio": v}
        ...         for n, v in (("copy_", 1.0), ("posenc half", 0.984))]
        >>> forms_table({"machine": {"device": "gpu"}, "rows": rows}, ("c",)).rows[2]
        ['half', '0.98']
    """
    from posenc.display.table import Table

    found = {
        (r["case"], r["implementation"]): r["copy_ratio"]
        for r in result["rows"]
        if (r["dtype"], r["memory"], r["pass"]) == (dtype, "model view", "forward") and "us" in r
    }
    missing = [c for c in cases if (c, "copy_") not in found]
    if missing:
        raise ValueError(f"cases must be measured in result, got {missing!r} without copy_")
    body = [
        [name.removeprefix("posenc "), *(format(found[c, name], ".2f") if (c, name) in found
                                         else "-" for c in cases)]
        for name in _FORMS
    ]  # fmt: skip
    caption = (
        f"posenc's kernel in each of its forms, speed against copying the same bytes (time of "
        f"copy_ / time): {dtype}, model view, forward, on {result['machine']['device']}; "
        "'angles': with angles made beforehand by rope_angles (removed since: it saved no time)."
    )
    return Table(["form", *cases], body, caption=caption)


def targets_table(result: dict, *, dtype: str = "bfloat16"):
    """The GPU targets of :func:`posenc.bench.peers.targets`, each with its measured value.

    The host times per call are left out: the stored run measured them on a launch path
    posenc no longer has.

    Args:
        result: what :func:`posenc.bench.peers.run` returned (or ``peers.stored()``).
        dtype: which dtype's rows.

    Returns:
        A :class:`posenc.display.table.Table`: a row per check and case, with the value, the goal and
        whether it was met (with the check's note, where it has one).

    Raises:
        ValueError: if ``result`` holds no case a target reads.

    Example:
        >>> row = dict(case="B=8, T=4k, D=128", memory="model view", dtype="bfloat16", note="")
        >>> rows = [{**row, "pass": "forward", "implementation": n, "us": us,
        ...          "copy_ratio": 100 / us, "clone_ratio": 110 / us, "host_ahead": True}
        ...         for n, us in (("copy_", 100), ("posenc half in place", 102.0))]
        >>> targets_table({"machine": {"device": "gpu"}, "rows": rows}).rows[0]
        ['in place / copy_', 'B=8, T=4k, D=128', '0.980', '≥ 0.97', 'met']
    """
    from posenc.display.table import Table

    checks = [c for c in peers.targets(result, dtype=dtype) if not c["check"].startswith("host")]
    if not checks:
        raise ValueError("result must hold a case the targets read, got none")
    signs = {">=": "≥", "<=": "≤", "<": "<"}
    body = []
    for c in checks:
        share = c["check"].startswith("model")
        spec = ".1%" if share else ".3f"
        value = "-" if c["value"] is None else format(c["value"], spec)
        goal = format(c["goal"], ".1%" if share else ".3g")
        verdict = {True: "met", False: "missed", None: "not checked"}[c["met"]]
        verdict += f" ({c['note']})" if c["note"] else ""
        body.append([c["check"], c["case"], value, f"{signs[c['op']]} {goal}", verdict])
    caption = (
        f"posenc's targets on the GPU, {dtype}, model view, on {result['machine']['device']}: "
        "each measured value beside its goal (Liger's bar: posenc's speed over Liger's, or "
        "over 0.9 of it where Liger's beats the copy)."
    )
    return Table(["check", "case", "measured", "goal", "verdict"], body, caption=caption)


def tables(result: dict | None = None) -> dict[str, str]:
    """Every table of the appendix, by name, as the HTML the page holds.

    Args:
        result: a result of :func:`posenc.bench.peers.run`; by default the stored H100 run.

    Returns:
        ``{name: html}``, each table wrapped as a notebook's output is, so that a table
        wider than the column scrolls in its own box.

    Example:
        >>> sorted(tables())[:3]
        ['bfloat16', 'contiguous', 'errors']
    """
    run = peers.stored() if result is None else result
    large = ("B=8, T=4k, D=128", "B=1, T=32k, D=128")
    made = {
        "bfloat16": peers.table(run),
        "forms": forms_table(run, large),
        "float16": forms_table(run, large, dtype="float16"),
        "float32": forms_table(run, large, dtype="float32"),
        "contiguous": peers.table(run, memory="contiguous"),
        "errors": peers.table(run, value="max_error"),
        "training": peers.table(run, pass_="forward+backward"),
        "model": peers.share_table(run),
        "targets": targets_table(run),
    }
    return {
        name: f'<div class="cell_output"><div class="output text_html">{t._repr_html_()}'
        "</div></div>"
        for name, t in made.items()
    }


def fill(text: str, result: dict | None = None) -> str:
    """``text`` (the page) with each table between its two comments made afresh.

    Args:
        text: the page's markdown.
        result: as for :func:`tables`.

    Returns:
        The page with every ``<!-- table: NAME -->`` block holding ``tables()[NAME]``.

    Raises:
        ValueError: for a block whose name :func:`tables` does not make.

    Example:
        >>> page = "<!-- table: model -->\\nold\\n<!-- end table -->"
        >>> '<table class="posenc-table">' in fill(page)
        True
    """
    made = tables(result)

    def one(match: re.Match) -> str:
        name = match.group(2)
        if name not in made:
            raise ValueError(f"table name must be one of {sorted(made)}, got {name!r}")
        return f"{match.group(1)}{made[name]}\n{match.group(4)}"

    return _BLOCK.sub(one, text)


if __name__ == "__main__":
    PAGE.write_text(fill(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"tables written in {PAGE}")
