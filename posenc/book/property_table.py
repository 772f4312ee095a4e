"""Chapter 2's table of the five properties: one measure per column, with its threshold.

A :class:`~posenc.properties.Verdict`'s number means what its ``measure`` says, and for
properties 1 and 3 that depends on why the check ended. The table gives each column one
quantity and names any other reason to fail.
"""

from __future__ import annotations

from posenc import properties
from posenc._validate import check_dict

__all__ = ["MEASURED_COLUMNS", "measured_cells"]


def _evidence(x: float) -> str:
    return "0" if abs(x) < properties.ZERO else f"{x:.1g}"


MEASURED_COLUMNS: dict[str, str] = {
    "1 unique": "move, ✓ < 1e-6",
    "2 linear shift": "residual, ✓ < 1e-6",
    "3 unseen in range": "ratio, ✓ ≤ 1",
    "4 rule": "diff., ✓ < 1e-6",
    "5 axial 2-D": "residual, ✓ < 1e-6",
}
"""Each property's column in :func:`measured_cells`: the one number it shows, and the
threshold of a ✓."""


def _measured_cell(label: str, verdict: properties.Verdict) -> str:
    mark = "✓" if verdict.holds else "✗"
    if verdict.measure.startswith("min distance between positions"):
        # property 1 measured no move across lengths; it holds if the positions are distinct
        return f"{mark} 0" if verdict.holds else "✗ repeats"
    if verdict.measure.startswith(("min distance", "cells share")):
        return "✗ repeats"  # a position reuses another's vector: no number of the column
    if verdict.measure.startswith("cannot encode"):
        return "✗ no vector"
    return f"{mark} {_evidence(verdict.evidence)}"


def measured_cells(
    results: dict[str, dict[str, properties.Verdict]],
) -> tuple[list[str], list[list[str]]]:
    """The five checks as a table whose every column holds one measure with one threshold.

    Each column shows one quantity (:data:`MEASURED_COLUMNS`); a scheme that fails for
    another reason shows the reason:
    ``"repeats"`` (two positions share a vector) or ``"no vector"`` (it cannot encode the
    new positions).

    Args:
        results: ``{scheme name: check_all(scheme)}``.

    Returns:
        ``(heading, rows)``: ``["scheme", "1 unique: move, ✓ < 1e-6", ...]`` and one row
        per scheme, its name then ``"✓ 0"``, ``"✗ 2"``, ``"✗ repeats"`` or
        ``"✗ no vector"`` per property.

    Raises:
        TypeError: if ``results`` is not a dict.
        ValueError: if ``results`` is empty or was not checked on the five properties.

    Example:
        >>> from posenc.properties import absolute_schemes, check_all
        >>> s = absolute_schemes()
        >>> names = ["integer / length", "learned"]
        >>> heading, rows = measured_cells({n: check_all(s[n]) for n in names})
        >>> heading[1]
        '1 unique: move, ✓ < 1e-6'
        >>> rows[0][:4], rows[1][3]
        (['integer / length', '✗ 2', '✗ 0.1', '✗ repeats'], '✗ no vector')
    """
    if isinstance(results, dict) and not results:
        raise ValueError("results must not be empty, got {}")
    check_dict("results", results)
    if any(list(r) != list(MEASURED_COLUMNS) for r in results.values()):
        raise ValueError(f"every scheme must be checked on {list(MEASURED_COLUMNS)}")
    heading = ["scheme", *(f"{label}: {what}" for label, what in MEASURED_COLUMNS.items())]
    rows = [
        [name, *(_measured_cell(label, v) for label, v in verdicts.items())]
        for name, verdicts in results.items()
    ]
    return heading, rows
