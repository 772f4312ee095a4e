"""A check's printed line: the value it measured beside its verdict.

A chapter that compares two tensors prints how far apart they are, not only whether they
pass a tolerance: ``largest difference < 1e-12 (allclose: True)``. Differences below a
floor (round-off, which changes from machine to machine) print as ``< floor``, so that a
stored output holds on every machine; larger ones print with one significant digit.

- :func:`difference`: a measured value as the line prints it;
- :func:`largest_difference`: ``max |a - b|`` of two tensors, in float64;
- :func:`compare`: the whole line for ``torch.allclose`` or ``torch.equal``.
"""

from __future__ import annotations

import math

import torch

__all__ = ["compare", "difference", "largest_difference"]


def difference(value: float, *, below: float = 0.0) -> str:
    """A measured value, with one significant digit, or ``< below`` under the floor.

    Args:
        value: the measured value, at least 0 (``inf`` prints as such).
        below: the floor; a value under it prints as ``< below``. 0 prints every value.

    Returns:
        ``"0"``, ``"< 1e-12"``, ``"3e-04"``, ``"0.5"``, ``"2"`` or ``"1e+03"``.

    Raises:
        TypeError: if ``value`` or ``below`` is not a real number.
        ValueError: if ``value`` or ``below`` is negative or NaN, or ``below`` infinite.

    Example:
        >>> difference(3.2e-16, below=1e-12), difference(0.0), difference(0.0483)
        ('< 1e-12', '0', '0.05')
        >>> difference(0.51), difference(2.4), difference(1234.0)
        ('0.5', '2', '1e+03')
    """
    for name, v in (("value", value), ("below", below)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name} must be a real number, got {v!r}")
    if math.isnan(value) or math.isnan(below) or math.isinf(below):
        raise ValueError(f"value and below must be numbers, below finite, got {value} and {below}")
    if value < 0 or below < 0:
        raise ValueError(f"value and below must be at least 0, got {value} and {below}")
    if math.isinf(value):
        return "inf"
    if value < below:
        return f"< {below:.0e}"
    if value == 0:
        return "0"
    if 0.01 <= value < 100:
        return f"{float(f'{value:.1g}'):g}"
    return f"{value:.0e}"


def _check_pair(a: object, b: object) -> None:
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
        if t.is_complex():
            raise TypeError(f"{name} must hold real numbers, got {t.dtype}")
    if a.device != b.device:
        raise ValueError(f"a and b must be on one device, got a on {a.device}, b on {b.device}")
    if a.device.type == "meta":
        raise ValueError("a and b are on the meta device, which holds no values to compare")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have one shape, got {tuple(a.shape)} and {tuple(b.shape)}")


def largest_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max |a - b|`` over all elements, computed in float64 on ``a``'s device.

    Args:
        a, b: tensors of one shape on one device, any real dtype.

    Returns:
        The largest absolute difference, a Python float (0.0 for empty tensors).

    Raises:
        TypeError: if ``a`` or ``b`` is not a real tensor.
        ValueError: if their shapes or devices differ, or they are on the meta device.

    Example:
        >>> largest_difference(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))
        0.5
    """
    _check_pair(a, b)
    gap = (a.double() - b.double()).abs()
    return float(gap.max()) if gap.numel() else 0.0


def compare(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    atol: float = 1e-8,
    rtol: float = 1e-5,
    exact: bool = False,
    below: float | None = None,
) -> str:
    """``largest difference <value> (allclose: <verdict>)`` for two tensors.

    Args:
        a, b: tensors of one shape.
        atol, rtol: ``torch.allclose``'s tolerances (ignored when ``exact``).
        exact: judge with ``torch.equal`` (bitwise) instead, printing ``(equal: ...)``.
        below: the floor under which the difference prints as ``< below``; default
            1e-12 when both tensors are float64, else 1e-5 (0 when ``exact``).

    Returns:
        The line's text, e.g. ``"largest difference < 1e-12 (allclose: True)"``.

    Raises:
        TypeError: if ``a`` or ``b`` is not a real tensor, or ``exact`` not a bool.
        ValueError: if the shapes or devices differ, a tensor is on the meta device, or a
            tolerance or the floor is negative or not finite.

    Example:
        >>> x = torch.tensor([1.0, 2.0], dtype=torch.float64)
        >>> compare(x, x + 1e-15)
        'largest difference < 1e-12 (allclose: True)'
        >>> compare(x, x + 0.3)
        'largest difference 0.3 (allclose: False)'
        >>> compare(x, x, exact=True)
        'largest difference 0 (equal: True)'
    """
    _check_pair(a, b)
    if not isinstance(exact, bool):
        raise TypeError(f"exact must be True or False, got {exact!r}")
    for name, v in (("atol", atol), ("rtol", rtol)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or math.isinf(v):
            raise ValueError(f"{name} must be a finite number at least 0, got {name}={v!r}")
    if below is not None:
        difference(0.0, below=below)  # refuses a bad floor by name
    gap = largest_difference(a, b)
    if exact:
        verdict, floor = f"equal: {torch.equal(a, b)}", 0.0
    else:
        close = torch.allclose(a, b.to(a.dtype), atol=atol, rtol=rtol)
        # round-off of a float64 result stays far below 1e-12; of a float32 one, below 1e-5
        double = a.dtype == b.dtype == torch.float64
        verdict, floor = f"allclose: {close}", 1e-12 if double else 1e-5
    floor = floor if below is None else below
    return f"largest difference {difference(gap, below=floor)} ({verdict})"
