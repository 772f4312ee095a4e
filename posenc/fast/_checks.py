"""What the fast path checks before a kernel writes through a pointer, which torch cannot see.

A kernel that reads and writes memory by address (the C loop, the Triton kernel) skips the
checks torch's own operations make. So the fast path makes them itself, from shapes, strides
and flags alone (nothing is read from the device):

- :func:`one_memory`: whether ``q`` and ``k``, rotated in place, are one tensor passed twice
  (rotate it once) or share some elements (refused);
- :func:`check_writable`: what torch refuses to write in place (a leaf that requires grad, a
  view of one, an inference tensor outside inference mode);
- :func:`written`: a tensor written in place counted as written, as torch counts it;
- :func:`check_offset_sum`: an offset that would take a position past int64;
- :func:`transforming`: whether ``torch.func`` or forward-mode AD is at work, when tensors
  are wrappers or carry tangents that a kernel reading memory would not see.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from posenc._validate import _compiling

__all__ = ["check_offset_sum", "check_writable", "one_memory", "transforming", "written"]

_INT64 = 2**63


# --- the one place posenc reads torch's internals ----------------------------------------------
# torch has no public way to ask whether a torch.func transform (vmap, grad, jvp) or a
# forward-mode AD level is active, nor whether a tensor is a view of a leaf: the first decides
# whether a kernel that reads memory may serve a call at all (wrappers have no memory, tangents
# would be dropped), the second whether writing in place is refused as torch refuses it.


def transforming() -> bool:
    """Whether a ``torch.func`` transform (``vmap``, ``grad``, ``jvp``) or a forward-mode AD
    level (``torch.autograd.forward_ad.dual_level``) is active: tensors may then be wrappers
    with no memory of their own, or carry tangents that a kernel writing through pointers
    would drop, and only tensor operations serve them. (Not traceable by ``torch.compile``:
    call it where nothing is being compiled.)"""
    level = torch._C._functorch.maybe_current_level()
    return torch.autograd.forward_ad._current_level >= 0 or level is not None


def _view_of_a_leaf(t: torch.Tensor) -> bool:
    """Whether ``t`` is a view of a leaf tensor."""
    base = t._base
    return base is not None and base.is_leaf


# --- the end of that place ---------------------------------------------------------------------


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
    if t.requires_grad and torch.is_grad_enabled() and (t.is_leaf or _view_of_a_leaf(t)):
        what = "a leaf Variable" if t.is_leaf else "a view of a leaf Variable"
        raise RuntimeError(
            f"{name}: {what} that requires grad is being used in an in-place operation "
            "(rotate it out of place, or under torch.no_grad())"
        )


def written(*tensors: torch.Tensor) -> None:
    """Count ``tensors`` as written in place, as torch's own in-place operations count theirs
    (a kernel that writes through a pointer is not seen by autograd): a backward that saved
    one of them then refuses to run on the new values."""
    torch.autograd.graph.increment_version(tensors)


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


def one_memory(first: str, a: torch.Tensor, second: str, b: torch.Tensor) -> bool:
    """Whether two tensors to be rotated in place are the same elements in the same places
    (True: rotate them once), told from shapes, strides and offsets alone (nothing is read).

    Views with the same strides (slices of one tensor, q and k cut from one fused
    projection) are told exactly. For others, False when they share no element, and also
    when neither fills its span with no gap and holds the other's lowest or highest element,
    which metadata alone does not settle cheaply; they pass, as they pass torch's own
    in-place checks. Under ``torch.func`` transforms, whose wrappers have no storage to
    compare, only one tensor passed twice is told.

    Raises:
        ValueError: naming both arguments, when they share elements but are not the same
            elements in the same places: on the same strides, always; otherwise when one of
            them is dense and holds the other's lowest or highest element.
    """
    if a is b:
        return True
    if a.numel() == 0 or b.numel() == 0 or _compiling():
        return False
    try:  # the address of each storage's memory: the same memory, the same storage
        at = a.untyped_storage().data_ptr()
        if at == 0 or at != b.untyped_storage().data_ptr():  # (0: the meta device's, no memory)
            return False
    except (NotImplementedError, RuntimeError):  # wrappers of torch.func: no storage
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
    ranges = [(0, 0)] * (len(dims) + 1)
    for i in range(len(dims) - 1, -1, -1):
        stride, top_a, top_b = dims[i]
        low, high = ranges[i + 1]
        ranges[i] = (low - stride * top_b, high + stride * top_a)
    todo = [(0, b.storage_offset() - a.storage_offset())]  # (dim, what is left to reach)
    while todo:
        i, left = todo.pop()
        if i == len(dims):
            if left == 0:
                return True
            continue
        stride, top_a, top_b = dims[i]
        low, high = ranges[i + 1]
        first, last = max(-top_b, -((high - left) // stride)), min(top_a, (left - low) // stride)
        if last - first > 3:  # too many ways: leave it to the span test
            return None
        todo.extend((i + 1, left - c * stride) for c in range(first, last + 1))
    return False


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
