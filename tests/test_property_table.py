"""Chapter 2's table: each column one measure, other reasons to fail named."""

import pytest
import torch

import posenc.properties as P
from posenc.book import property_table


def test_measured_cells_give_each_column_one_measure():
    s = P.absolute_schemes()
    results = {name: P.check_all(scheme) for name, scheme in s.items()}
    heading, rows = property_table.measured_cells(results)
    assert heading[1:] == [f"{k}: {v}" for k, v in property_table.MEASURED_COLUMNS.items()]
    cells = {row[0]: row[1:] for row in rows}
    # column 1 is the move across lengths for every scheme: none for the fixed rules
    assert [cells[n][0] for n in ("integer", "binary", "sinusoidal")] == ["✓ 0"] * 3
    move = P.unique_and_length_independent(s["integer / length"]).evidence
    assert cells["integer / length"][0] == f"✗ {move:.1g}" and move > 1
    # column 3 is the value range; other reasons to fail are named, not given a number
    assert cells["integer"][2] == "✗ 4"
    assert cells["integer / length"][2] == "✗ repeats"
    assert cells["learned"][2] == "✗ no vector"
    # a scheme whose positions all share one vector repeats in columns 1 and 5
    flat = P.Scheme("flat", lambda p, dim, length, seed: torch.ones(len(p), dim))
    (row,) = property_table.measured_cells({"flat": P.check_all(flat)})[1]
    assert row[1] == "✗ repeats" and row[5] == "✗ repeats"
    with pytest.raises(ValueError, match="checked on"):
        property_table.measured_cells({"x": {"1 unique": results["integer"]["1 unique"]}})
