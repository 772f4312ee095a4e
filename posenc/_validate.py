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


def check_offset_sum(positions: object, x: object, offset: object) -> None:
    """Refuse an ``offset`` that takes a position past int64 (where ``positions + offset``
    would wrap around to the other end and rotate by a wrong angle, with no error).

    ``positions`` None stands for ``0 .. T-1``, T being ``x.shape[-2]``. A tensor's values
    are read only where that is sound and needed: not for an integer dtype too narrow for
    ``offset`` to take it out of int64, nor on the meta device, nor while ``torch.compile``
    traces, a ``torch.func`` transform runs or a CUDA graph is being captured (nothing may
    be read from the device then); positions on a GPU with a non-zero offset are otherwise
    read once (their least and largest values). Arguments of other kinds are left to the
    caller's own checks, which run after this one.

    Raises:
        ValueError: naming the offset and the range of the positions, when a sum leaves int64.
    """
    if type(offset) is not int or offset == 0 or not -_INT64 <= offset < _INT64:
        return
    if positions is None:
        if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.shape[-2] < 1:
            return
        low, high = 0, x.shape[-2] - 1
    elif isinstance(positions, torch.Tensor):
        dtype = positions.dtype
        if positions.is_floating_point() or positions.is_complex() or dtype == torch.bool:
            return
        info = torch.iinfo(dtype)
        if info.min + offset >= -_INT64 and info.max + offset < _INT64:
            return  # no value of this dtype leaves int64
        if not _readable(positions):
            return
        low, high = (int(v) for v in torch.aminmax(positions.to(torch.int64)))
    elif isinstance(positions, int) and not isinstance(positions, bool):
        low = high = positions
    elif (
        isinstance(positions, Sequence)
        and not isinstance(positions, (str, bytes))
        and len(positions) > 0
        and all(isinstance(p, int) and not isinstance(p, bool) for p in positions)
    ):
        low, high = min(positions), max(positions)
    else:
        return
    if low + offset < -_INT64 or high + offset >= _INT64:
        raise ValueError(
            f"positions + offset must fit in int64 (-2**63 to 2**63 - 1), got offset={offset} "
            f"with positions from {low} to {high}"
        )


def _readable(t: torch.Tensor) -> bool:
    """Whether ``t``'s values can be read on the host now: it holds some, on a real device,
    and nothing is being traced, transformed or captured."""
    if t.numel() == 0 or t.device.type == "meta" or _compiling() or transforming():
        return False
    return not (t.device.type == "cuda" and torch.cuda.is_current_stream_capturing())


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


def check_writable(name: str, t: torch.Tensor) -> None:
    """Refuse, before anything is written, what torch refuses when it is written: an in-place
    operation on a leaf that requires grad, or on a view of one, while autograd records; or
    on an inference tensor outside ``torch.inference_mode()`` (a kernel that writes through a
    pointer is not stopped by torch; under ``torch.compile``, which cannot trace that check,
    it is taken, as inductor takes a compiled ``Tensor.mul_``).

    Raises:
        RuntimeError: naming ``t``, in torch's words.
    """
    if not _compiling() and t.is_inference() and not torch.is_inference_mode_enabled():
        raise RuntimeError(
            f"{name}: an inplace update to an inference tensor outside InferenceMode is not "
            "allowed (rotate a clone of it, or rotate it under torch.inference_mode())"
        )
    if t.requires_grad and torch.is_grad_enabled():
        base = t._base
        if t.is_leaf or (base is not None and base.is_leaf):
            what = "a leaf Variable" if t.is_leaf else "a view of a leaf Variable"
            raise RuntimeError(
                f"{name}: {what} that requires grad is being used in an in-place operation "
                "(rotate it out of place, or under torch.no_grad())"
            )


def written(*tensors: torch.Tensor) -> None:
    """Count ``tensors`` as written in place, as torch's own in-place operations count theirs
    (a kernel that writes through a pointer is not seen by autograd): a backward that saved
    one of them then refuses to run on the new values."""
    if _increment_versions is not None:
        _increment_versions(tensors)
    elif _increment_version is not None:
        for t in tensors:
            _increment_version(t)


_increment_version = getattr(torch.autograd.graph, "increment_version", None)


def _many_at_once():
    """torch's own C function behind ``increment_version``, where it takes several tensors in
    one call (as it does in recent torch): at a decoding step, the public wrapper's call per
    tensor is a measurable part of a call's host time. None where it does not."""
    bump = getattr(torch._C, "_increment_version", None)
    if bump is None:
        return None
    probe = torch.empty(1)
    before = probe._version
    try:
        bump((probe,))
    except (TypeError, RuntimeError):
        return None
    return bump if probe._version == before + 1 else None


_increment_versions = _many_at_once()


def one_memory(first: str, a: torch.Tensor, second: str, b: torch.Tensor) -> bool:
    """Whether two tensors to be rotated in place are the same elements in the same places
    (True: rotate them once), told from shapes, strides and offsets alone (nothing is read).

    Views with the same strides (slices of one tensor, q and k cut from one fused
    projection) are told exactly. For others, False when they share no element, and also
    when neither fills its span with no gap and holds the other's lowest or highest element,
    which metadata alone does not settle cheaply; they pass, as they pass torch's own
    in-place checks.

    Raises:
        ValueError: naming both arguments, when they share elements but are not the same
            elements in the same places: on the same strides, always; otherwise when one of
            them is dense and holds the other's lowest or highest element.
    """
    if a.numel() == 0 or b.numel() == 0:
        return False
    if _compiling() or _storage(a) != _storage(b):
        return False
    start = a.storage_offset(), b.storage_offset()
    if start[0] == start[1] and a.shape == b.shape and _steps(a) == _steps(b):
        return True
    shared = _shared_on_one_grid(a, b)
    if shared is None:  # not told by the grid: a dense tensor holds every element of its span
        last = tuple(s + reach(t) for s, t in zip(start, (a, b), strict=True))
        shared = any(
            _dense(t)
            and (start[i] <= start[1 - i] <= last[i] or start[i] <= last[1 - i] <= last[i])
            for i, t in enumerate((a, b))
        )
    if shared:
        raise ValueError(
            f"{first} and {second} must not share part of their memory for an in-place "
            f"rotation, got {first} at offset {start[0]} with strides {a.stride()} and "
            f"{second} at offset {start[1]} with strides {b.stride()} in one storage"
        )
    return False


def _shared_on_one_grid(a: torch.Tensor, b: torch.Tensor) -> bool | None:
    """Whether ``a`` and ``b``, views of one storage with the same strides (as slices of one
    tensor have), share an element: exactly, by solving ``sum_d c_d * stride_d = offset(b) -
    offset(a)`` for index differences ``c_d`` in ``[-(n_b - 1), n_a - 1]``, largest stride
    first (a few candidates per dim at most); None when the strides differ or a dim has
    stride 0."""
    if a.dim() != b.dim():
        return None
    dims = []  # (stride, a's largest index, b's largest index) of every dim either spans
    for n_a, n_b, s_a, s_b in zip(a.shape, b.shape, a.stride(), b.stride(), strict=True):
        if n_a > 1 and n_b > 1 and s_a != s_b:
            return None
        stride = s_a if n_a > 1 else s_b
        if max(n_a, n_b) > 1:
            if stride <= 0:
                return None
            dims.append((stride, n_a - 1, n_b - 1))
    dims.sort(reverse=True)
    # what the dims after each one can add: from -sum(stride * b's index) to sum(stride * a's)
    reach = [(0, 0)] * (len(dims) + 1)
    for i in range(len(dims) - 1, -1, -1):
        stride, top_a, top_b = dims[i]
        low, high = reach[i + 1]
        reach[i] = (low - stride * top_b, high + stride * top_a)
    todo = [(0, b.storage_offset() - a.storage_offset())]  # (dim, what is left to reach)
    while todo:
        i, left = todo.pop()
        if i == len(dims):
            if left == 0:
                return True
            continue
        stride, top_a, top_b = dims[i]
        low, high = reach[i + 1]
        first, last = max(-top_b, -((high - left) // stride)), min(top_a, (left - low) // stride)
        if last - first > 3:  # too many ways: leave it to the span test
            return None
        todo.extend((i + 1, left - c * stride) for c in range(first, last + 1))
    return False


_compiling = getattr(torch.compiler, "is_compiling", lambda: False)  # torch 2.3 and later


def transforming() -> bool:
    """Whether a ``torch.func`` transform (``vmap``, ``grad``, ``jvp``) or a forward-mode AD
    level (``torch.autograd.forward_ad.dual_level``) is active: tensors may then be wrappers
    with no memory of their own, or carry tangents that a kernel writing through pointers
    would drop, and only tensor operations serve them. (Not traceable by ``torch.compile``:
    call it where nothing is being compiled. torch keeps its forward-mode level for the
    whole process: while one thread is inside a dual level, every thread's calls take
    tensor operations.)"""
    return _forward_ad._current_level >= 0 or _functorch_level() is not None


_forward_ad = torch.autograd.forward_ad
_functorch_level = torch._C._functorch.maybe_current_level


def _storage(t: torch.Tensor) -> int:
    """Which storage holds ``t``'s elements, also under ``torch.func`` transforms, whose
    wrappers (``grad``, ``vmap``) have no storage of their own: the wrapped tensor's."""
    try:
        return t.untyped_storage()._cdata
    except NotImplementedError:  # "Cannot access storage of TensorWrapper"
        functorch = torch._C._functorch
        while functorch.is_functorch_wrapped_tensor(t):
            t = functorch.get_unwrapped(t)
        return t.untyped_storage()._cdata


def reach(t: torch.Tensor) -> int:
    """How many elements of its storage ``t``'s last element lies past its first."""
    return sum((n - 1) * st for n, st in zip(t.shape, t.stride(), strict=True))


def _steps(t: torch.Tensor) -> tuple[int, ...]:
    """``t``'s strides, 0 where a dim has one entry (its stride then means nothing)."""
    return tuple(st if n > 1 else 0 for n, st in zip(t.shape, t.stride(), strict=True))


def _dense(t: torch.Tensor) -> bool:
    """Whether ``t``'s elements fill their span with no gap (in some order of the dims)."""
    step = 1
    for stride, n in sorted((st, n) for n, st in zip(t.shape, t.stride(), strict=True) if n > 1):
        if stride != step:
            return False
        step *= n
    return True
