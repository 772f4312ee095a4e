"""posenc.book.checks: a check's printed line carries the value it measured."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc.book import checks


@pytest.mark.parametrize(
    ("value", "below", "text"),
    [
        (0.0, 0.0, "0"),
        (0.0, 1e-12, "< 1e-12"),
        (3.2e-16, 1e-12, "< 1e-12"),
        (2e-12, 1e-12, "2e-12"),
        (0.0483, 0.0, "0.05"),
        (0.51, 0.0, "0.5"),
        (2.4, 0.0, "2"),
        (1234.0, 0.0, "1e+03"),
        (math.inf, 0.0, "inf"),
    ],
)
def test_difference_prints_one_significant_digit_or_the_floor(value, below, text):
    assert checks.difference(value, below=below) == text


@given(st.floats(min_value=1e-30, max_value=1e30), st.floats(min_value=0, max_value=1e30))
def test_difference_is_the_value_to_one_digit_unless_under_the_floor(value, below):
    text = checks.difference(value, below=below)
    if value < below:
        assert text.startswith("< ")
    else:
        assert float(text) == pytest.approx(value, rel=0.5)  # one significant digit


def test_difference_refuses_bad_values_by_name():
    with pytest.raises(ValueError, match="value"):
        checks.difference(-1.0)
    with pytest.raises(TypeError, match="below"):
        checks.difference(1.0, below="small")
    with pytest.raises(TypeError, match="value"):
        checks.difference(True)


def test_largest_difference_is_the_max_absolute_difference_in_float64():
    a = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float32)
    b = torch.tensor([1.5, -4.0, 3.0], dtype=torch.float64)
    assert checks.largest_difference(a, b) == 2.0
    assert checks.largest_difference(torch.empty(0), torch.empty(0)) == 0.0
    with pytest.raises(TypeError, match="b must be a tensor"):
        checks.largest_difference(a, [1.0])


def test_compare_reports_the_difference_and_the_verdict_that_can_fail():
    x = torch.linspace(0, 1, 5, dtype=torch.float64)
    assert checks.compare(x, x) == "largest difference < 1e-12 (allclose: True)"
    assert checks.compare(x, x + 0.25) == "largest difference 0.2 (allclose: False)"
    assert checks.compare(x, x.clone(), exact=True) == "largest difference 0 (equal: True)"
    near = x + 1e-14
    assert checks.compare(x, near, exact=True) == "largest difference 1e-14 (equal: False)"
    # float32 round-off prints under its own floor
    y = torch.rand(8)
    assert checks.compare(y, y + 1e-7) == "largest difference < 1e-05 (allclose: True)"
    assert checks.compare(y, y + 1e-3, atol=1e-4, rtol=0).endswith("(allclose: False)")
    with pytest.raises(ValueError, match="one shape"):
        checks.compare(x, x[:2])
