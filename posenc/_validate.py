"""Checks shared by the public functions: each error names the argument, the value and the rule."""

from __future__ import annotations

import torch


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """Return ``value`` if it is an int (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {name}={value}")
    return value


def check_even_dim(name: str, value: object) -> int:
    """Return ``value`` if it is a positive even int (a feature size made of pairs)."""
    check_int(name, value, minimum=1)
    if value % 2:
        raise ValueError(f"{name} must be even (features come in pairs), got {name}={value}")
    return value


def check_positive_float(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite real number above 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    if not (value > 0 and value < float("inf")):
        raise ValueError(f"{name} must be positive and finite, got {name}={value}")
    return float(value)


def check_positions(name: str, positions: object, *, nonnegative: bool = True) -> torch.Tensor:
    """Return ``positions`` as a 1-D int64 tensor of integer positions.

    Accepts an int (one position), a sequence of ints, or an integer tensor of any device.
    """
    if isinstance(positions, bool):
        raise TypeError(f"{name} must be integers, got a bool")
    if isinstance(positions, int):
        positions = [positions]
    if isinstance(positions, torch.Tensor):
        t = positions
    else:
        try:
            t = torch.as_tensor(positions)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"{name} must be integers, got {type(positions).__name__}: {err}"
            ) from None
    if t.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers, got dtype {t.dtype}")
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D (one position per token), got shape {tuple(t.shape)}")
    if nonnegative and bool((t < 0).any()):
        raise ValueError(f"{name} must be non-negative, got minimum {int(t.min())}")
    return t.to(torch.int64)


def check_tensor(name: str, x: object, *, min_dim: int) -> torch.Tensor:
    """Return ``x`` if it is a floating tensor with at least ``min_dim`` dimensions."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimensions, got shape {tuple(x.shape)}"
        )
    if not x.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype, got {x.dtype}")
    return x
