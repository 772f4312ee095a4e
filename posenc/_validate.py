"""Checks shared by the public functions: each error names the argument, the value and the rule."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence

import torch

_INT64 = 2**63


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """Return ``value`` if it is an int (not a bool) of at least ``minimum`` that fits in
    int64, as every integer a tensor or a generator takes must."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {name}={value}")
    if not -_INT64 <= value < _INT64:
        raise ValueError(f"{name} must fit in int64 (-2**63 to 2**63 - 1), got {name}={value}")
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


def check_base(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite real number of at least ``2**-64``: the
    base of RoPE's or the sinusoidal encoding's frequencies ``base**(-2i/D)``, which then stay
    below ``2**64``, so that no angle ``p * theta`` overflows float32 at any int64 position
    (a tiny base such as ``1e-320`` gave inf frequencies and NaN angles). A base below 1, whose
    frequencies rise above 1, is taken: the fast path computes such angles exactly.

    Raises:
        TypeError: if ``value`` is not a real number.
        ValueError: naming ``value``, if it is not finite or below ``2**-64``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    if not (value >= 2.0**-64 and value < float("inf")):
        raise ValueError(
            f"{name} must be finite and at least 2**-64 (so that no angle p * base**(-2i/D) "
            f"overflows float32 at any int64 position), got {name}={value}"
        )
    return float(value)


def check_positions(name: str, positions: object, *, nonnegative: bool = True) -> torch.Tensor:
    """Return ``positions`` as a 1-D int64 tensor of integer positions.

    Accepts an int (one position), a sequence of ints, or an integer tensor of any device
    (not the meta device when ``nonnegative``: that check reads the values).
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
            if isinstance(positions, Sequence) and all(
                isinstance(p, int) and not isinstance(p, bool) for p in positions
            ):
                raise ValueError(
                    f"{name} must fit in int64 (-2**63 to 2**63 - 1), got {max(positions, key=abs)}"
                ) from None
            raise TypeError(
                f"{name} must be integers, got {type(positions).__name__}: {err}"
            ) from None
    if t.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers, got dtype {t.dtype}")
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D (one position per token), got shape {tuple(t.shape)}")
    if nonnegative and t.device.type == "meta":
        raise ValueError(
            f"{name} is on the meta device, which holds no values, and its values are needed "
            f"(each must be non-negative): put {name} on the CPU or a GPU"
        )
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
    if x.dtype not in _ARITHMETIC_FLOATS and not _holds_signed_values(x.dtype):
        raise TypeError(
            f"{name} must have a floating dtype that holds signed values one per element, "
            f"got {x.dtype}"
        )
    return x


_ARITHMETIC_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _holds_signed_values(dtype: torch.dtype) -> bool:
    """Whether a (float8, float4, ...) dtype stores one signed number per element.

    Scale formats such as ``float8_e8m0fnu`` hold powers of two and no sign; packed formats
    such as ``float4_e2m1fn_x2`` hold two numbers per element and cannot even be converted.
    """
    try:
        return torch.tensor([-1.0]).to(dtype).to(torch.float32).item() == -1.0
    except (RuntimeError, NotImplementedError, TypeError):
        return False


def _got(value: object) -> str:
    return f"got {value!r} ({type(value).__name__})"


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is a bool (not a truthy stand-in such as ``"no"`` or ``1``)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, {_got(value)}")
    return value


def check_real(
    name: str, value: object, *, minimum: float | None = None, positive: bool = False
) -> float:
    """Return ``value`` as a float if it is a finite real number (and within the bounds)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a real number, {_got(value)}")
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{name} must be finite, got {name}={value}")
    if positive and not value > 0:
        raise ValueError(f"{name} must be positive, got {name}={value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {name}={value}")
    return float(value)


def check_str(name: str, value: object) -> str:
    """Return ``value`` if it is a str."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, {_got(value)}")
    return value


LAYOUTS = ("interleaved", "half")
"""The two ways of pairing a head's features (see :mod:`posenc.rope`)."""


def check_layout(layout: object) -> str:
    """Return ``layout`` if it is one of :data:`LAYOUTS`."""
    return check_option("layout", layout, LAYOUTS)


def check_option(name: str, value: object, options) -> str:
    """Return ``value`` if it is one of ``options`` (strings)."""
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {tuple(options)}, got {name}={value!r}")
    return value


def check_sequence(
    name: str, value: object, *, min_length: int = 1, what: str = "a sequence (list or tuple)"
) -> list:
    """Return ``value`` as a list if it is a sequence (not a string) of ``min_length`` items."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be {what}, {_got(value)}")
    if len(value) < min_length:
        if len(value) == 0:
            raise ValueError(f"{name} must not be empty (a non-empty sequence), got {value!r}")
        raise ValueError(
            f"{name} must have at least {min_length} entries, got {len(value)}: {value!r}"
        )
    return list(value)


def check_int_sequence(
    name: str,
    value: object,
    *,
    minimum: int | None = None,
    min_length: int = 1,
    item: str | None = None,
) -> list[int]:
    """Return ``value`` as a list of ints (each at least ``minimum``).

    Accepts a sequence of ints or a 1-D integer tensor. ``item`` names one entry in the
    messages (``"offsets[0]: offset must be at least 1, got 0"``).
    """
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers, got a tensor of dtype {value.dtype}")
        if value.dim() != 1:
            raise ValueError(f"{name} must be 1-D, got shape {tuple(value.shape)}")
        value = value.tolist()
    items = check_sequence(name, value, min_length=min_length, what="a sequence of ints")
    for i, v in enumerate(items):
        where = f"{name}[{i}]: {item}" if item else f"{name}[{i}]"
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{where} must be an int, {_got(v)}")
        if minimum is not None and v < minimum:
            raise ValueError(f"{where} must be at least {minimum}, got {v}")
    return items


def check_str_sequence(name: str, value: object, *, min_length: int = 1) -> list[str]:
    """Return ``value`` as a list of strings."""
    items = check_sequence(name, value, min_length=min_length, what="a sequence of strings")
    for i, v in enumerate(items):
        if not isinstance(v, str):
            raise TypeError(f"{name}[{i}] must be a str, {_got(v)}")
    return items


def check_dict(name: str, value: object, *, min_length: int = 1) -> dict:
    """Return ``value`` if it is a dict with at least ``min_length`` entries."""
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict, {_got(value)}")
    if len(value) < min_length:
        raise ValueError(f"{name} must have at least {min_length} entries, got {value!r}")
    return value


def check_callable(name: str, value: object):
    """Return ``value`` if it can be called."""
    if not callable(value):
        raise TypeError(f"{name} must be callable, {_got(value)}")
    return value


def check_float_dtype(name: str, value: object, allowed=None) -> torch.dtype:
    """Return ``value`` if it is a floating torch dtype (one of ``allowed`` when given)."""
    if not isinstance(value, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, {_got(value)}")
    if not value.is_floating_point or (allowed is not None and value not in allowed):
        rule = f"one of {tuple(allowed)}" if allowed is not None else "a floating dtype"
        raise ValueError(f"{name} must be {rule}, got {name}={value}")
    return value


def _device_of(value: object) -> torch.device | None:
    """The device of a tensor, or of a module's first parameter or buffer; else None."""
    if isinstance(value, torch.Tensor):
        return value.device
    if isinstance(value, torch.nn.Module):
        for t in (*value.parameters(), *value.buffers()):
            return t.device
    return None


def check_same_device(**tensors: object) -> torch.device | None:
    """Return the one device the given tensors (or modules) live on; others are ignored.

    Raises:
        ValueError: naming two of the arguments and their devices, if they differ.
    """
    first_name, first = None, None
    for name, value in tensors.items():
        device = _device_of(value)
        if device is None:
            continue
        if first is None:
            first_name, first = name, device
        elif device != first:
            raise ValueError(
                f"{first_name} and {name} must be on one device, got {first_name} on {first} "
                f"and {name} on {device}"
            )
    return first


def check_copyable(
    name: str, t: torch.Tensor, device: torch.device, owner: str = "x"
) -> torch.Tensor:
    """Return ``t`` if it can be copied to ``device`` (where the computation runs, the device
    of the argument named ``owner``): ``t`` on that device or on the CPU. A few values from
    the CPU are what a caller has at hand (``torch.arange(T)``); from another device, the copy
    would wait on it, and the call most likely mixed its devices by mistake; a tensor on the
    meta device holds no values to copy at all.

    Raises:
        ValueError: naming ``t`` and both devices.
    """
    if t.device == device or t.device.type == "cpu":
        return t
    where = "the CPU" if device.type == "cpu" else f"{device} or on the CPU"
    if t.device.type == "meta":
        raise ValueError(
            f"{name} is on the meta device, which holds no values to copy to {owner}'s device "
            f"{device}: put {name} on {where}"
        )
    raise ValueError(
        f"{name} must be on {owner}'s device or on the CPU, got {name} on {t.device} and "
        f"{owner} on {device}: put {name} on {where}"
    )


def check_same_dtype(**tensors: torch.Tensor) -> torch.dtype:
    """Return the one dtype of tensors that a computation mixes (torch would refuse them
    deep inside, in a matrix product).

    Raises:
        TypeError: naming two of the arguments and their dtypes, if they differ.
    """
    (first_name, first), *rest = tensors.items()
    for name, t in rest:
        if t.dtype != first.dtype:
            raise TypeError(
                f"{first_name} and {name} must share one dtype, got {first_name} {first.dtype} "
                f"and {name} {t.dtype}"
            )
    return first.dtype


def same_device(func: Callable | None = None, *, copied: tuple[str, ...] = ()) -> Callable:
    """Decorate a public function whose tensor arguments must share one device.

    The check runs once, at the public edge, before the function sees its arguments, and
    its ``ValueError`` names both arguments and both devices (instead of torch's internal
    error from deep inside the computation). Arguments named in ``copied`` hold a few values
    rather than data (positions, frequencies) and the function copies them to the data's
    device, as :func:`posenc.rope.apply_rope` does: they may be on the data's device or on
    the CPU, and are refused on any other (the meta device, which holds no values to copy,
    among them).

    Args:
        func: the function (``@same_device``); None when called with ``copied``
            (``@same_device(copied=("positions",))``).
        copied: names of ``func``'s parameters that it copies to the data's device.

    Returns:
        The checked function, or a decorator when ``func`` is None.

    Raises:
        TypeError: when decorating, if ``copied`` is not a tuple of ``func``'s parameter
            names. The checked function raises ValueError for tensors on two devices, or a
            copied one on neither the data's device nor the CPU.
    """
    if not (isinstance(copied, tuple) and all(isinstance(n, str) for n in copied)):
        raise TypeError(f"copied must be a tuple of parameter names, {_got(copied)}")
    if func is None:
        return functools.partial(same_device, copied=copied)
    signature = inspect.signature(func)
    unknown = [n for n in copied if n not in signature.parameters]
    if unknown:
        raise TypeError(f"copied names {unknown}, which are not parameters of {func.__name__}")

    @functools.wraps(func)
    def checked(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return func(*args, **kwargs)  # let the call itself report a wrong signature
        shared = {n: v for n, v in bound.arguments.items() if n not in copied}
        device = check_same_device(**shared)
        owner = next((n for n, v in shared.items() if _device_of(v) is not None), None)
        for name in copied:
            value = bound.arguments.get(name)
            if device is not None and isinstance(value, torch.Tensor):
                check_copyable(name, value, device, owner)
        return func(*args, **kwargs)

    return checked


def check_real_pair(name: str, value: object) -> tuple[float, float]:
    """Return ``value`` as two finite floats ``(x, y)``: a 2-D vector given as a tuple, a
    list or a tensor of two numbers."""
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"{name} must be two numbers (x, y), got {value!r}")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name} must hold real numbers, got {value!r}")
        if not math.isfinite(v):
            raise ValueError(f"{name} must be finite, got {value!r}")
    return float(value[0]), float(value[1])


def check_no_overlap(name: str, t: torch.Tensor) -> None:
    """An in-place rotation needs every element of ``t`` once: refuse a view that holds one
    element in several places (an expanded view, stride 0; or windows that overlap, as
    ``unfold`` makes), where writing one element changes another.

    Told from the sizes and strides: the dims taken from the smallest stride up, a tensor
    whose every stride passes the reach of the dims before it (the usual case: any dense or
    sliced tensor) holds each element once; otherwise the offsets of its elements are
    counted (nothing is read). While ``torch.compile`` traces, only stride 0 is looked for.

    Raises:
        ValueError: naming ``t`` and its strides, when it holds an element twice.

    Example:
        >>> check_no_overlap("x", torch.zeros(3, 4)[:, ::2])
        >>> check_no_overlap("x", torch.arange(16.0).unfold(0, 4, 2))
        Traceback (most recent call last):
        ...
        ValueError: x must not overlap itself for an in-place rotation, got shape (7, 4) and strides (2, 1)
    """
    dims = [(st, n) for n, st in zip(t.shape, t.stride(), strict=True) if n > 1]
    overlaps = any(st == 0 for st, _ in dims)
    if not overlaps and not _compiling():
        span = 0  # how far the dims with smaller strides reach
        for st, n in sorted(dims):
            if st <= span:
                overlaps = _repeats(dims)
                break
            span += (n - 1) * st
    if overlaps:
        raise ValueError(
            f"{name} must not overlap itself for an in-place rotation, got shape "
            f"{tuple(t.shape)} and strides {t.stride()}"
        )


def _repeats(dims: list[tuple[int, int]]) -> bool:
    """Whether two indices of dims ``(stride, size)`` give the same offset (counted)."""
    offsets = torch.zeros((), dtype=torch.int64)
    for st, n in dims:
        offsets = (offsets[..., None] + torch.arange(n, dtype=torch.int64) * st).flatten()
    return offsets.unique().numel() < offsets.numel()


def broadcast_positions(positions: torch.Size, lead: torch.Size) -> torch.Size:
    """The shape that positions of shape ``positions`` and x's leading shape ``lead`` (x's
    shape without D) broadcast to, worked out on the sizes alone (``torch.broadcast_shapes``
    costs tens of microseconds, more than a decoding step's kernel).

    Raises:
        ValueError: naming both shapes, when they do not broadcast.

    Example:
        >>> tuple(broadcast_positions(torch.Size([2, 1, 5]), torch.Size([2, 4, 5])))
        (2, 4, 5)
    """
    n = max(len(positions), len(lead))
    out = []
    for a, b in zip((1,) * (n - len(positions)) + tuple(positions),
                    (1,) * (n - len(lead)) + tuple(lead), strict=True):  # fmt: skip
        if a == b or b == 1:
            out.append(a)
        elif a == 1:
            out.append(b)
        else:
            raise ValueError(
                f"positions of shape {tuple(positions)} do not broadcast with x's leading "
                f"shape {tuple(lead)}"
            )
    return torch.Size(out)


_compiling = getattr(torch.compiler, "is_compiling", lambda: False)  # torch 2.3 and later
