"""The fast path's three entry points, each sending a call to the fastest kernel that serves it.

:func:`apply_rope`, :func:`apply_rope_` (in place) and :func:`rope_qk` (queries and keys in
one call) take the arguments of :func:`posenc.rope.apply_rope` and return what it returns:

- on a CPU, the one-pass C loop of :mod:`posenc.fast.cpu_kernel` (float32, float64 and
  bfloat16, any strides but a contiguous last dim), with the ``cos``/``sin`` tables cached
  between calls (:mod:`posenc.fast.tables`); a call it serves passes a few checks of its
  types and shapes, one cache lookup, and the loop;
- on CUDA with Triton, the kernel of :mod:`posenc.fast.triton`, which makes its angles
  itself;
- everything else (autograd through the tables or through ``x`` on a CPU, ``torch.func``
  transforms, positions that broadcast ``x`` to a larger shape, float16 on a CPU, no C
  compiler) by the reference's own tensor operations, which give the same numbers.

The C loop gives exactly the reference's arithmetic; the Triton kernel's ``cos`` and ``sin``
are the float32 values nearest the true ones, where torch's may be one unit off.
"""

from __future__ import annotations

import torch

from posenc._validate import (
    _compiling,
    broadcast_positions,
    check_bool,
    check_no_overlap,
    check_same_device,
    check_same_dtype,
    check_tensor,
)
from posenc.fast import cpu_kernel, triton
from posenc.fast._checks import check_offset_sum, check_writable, one_memory, transforming, written
from posenc.fast.tables import _Args, _lookup, _Tables, _tables
from posenc.rope import _rotate

__all__ = ["apply_rope", "apply_rope_", "rope_qk"]

_TRITON_DEVICES = ("cuda",)
"""Device types whose tensors go to the Triton kernel (the tests add ``cpu``, whose calls then
run under Triton's interpreter)."""

_INT64 = 2**63


def _elementwise(x, cos, sin, layout):
    """The reference's arithmetic in the angle dtype, rounded once to x's dtype: what serves
    every call no kernel takes (differentiable, broadcasting, fine under ``torch.func``)."""
    return _rotate(x.to(cos.dtype), cos, sin, layout).to(x.dtype)


def _c_tables(x, positions, base, inv_freq, layout, offset, inplace=False, k=None):
    """The cached tables of this call when the C loop serves it as it stands, else None (the
    call then takes the general path, which checks everything and names what is wrong).

    The loop takes plain CPU tensors ``x`` (and ``k``, of x's ``[T, D]`` and dtype) of a dtype
    it knows, ``[..., T, D]`` with at most 4 dims and a contiguous last dim, that nothing
    records a gradient for (in place: writable); positions None or an int64 row ``[T]`` on
    the CPU (without an offset); a layout it knows; the default frequencies; and tables
    already in the cache (the general path puts them there)."""
    if "lib" not in cpu_kernel._state or cpu_kernel._state["lib"] is None or _compiling():
        return None
    length, dim = x.shape[-2:] if type(x) is torch.Tensor and x.dim() >= 2 else (0, 0)
    for t in (x,) if k is None else (x, k):
        if not (
            type(t) is torch.Tensor
            and t.device.type == "cpu"
            and t.dtype == x.dtype
            and t.dtype in cpu_kernel._DTYPES
            and 2 <= t.dim() <= 4
            and t.shape[-2:] == (length, dim)
            and t.stride(-1) == 1
            and t.numel() > 0
            and not (t.requires_grad and torch.is_grad_enabled())
            and not t.is_neg()
            and not (inplace and t.is_inference() and not torch.is_inference_mode_enabled())
        ):
            return None
    if dim % 2 or type(offset) is not int or not (layout == "half" or layout == "interleaved"):
        return None
    if inv_freq is not None or type(base) not in (float, int) or transforming():
        return None  # a caller's frequencies: the general path checks and keys them
    if positions is None:
        if not (offset >= -_INT64 and offset + length <= _INT64):
            return None
        pos_key = ("arange", length, offset)
    elif (
        type(positions) is torch.Tensor
        and offset == 0
        and positions.dtype == torch.int64
        and positions.device.type == "cpu"
        and positions.shape == (length,)
        and not positions.is_neg()
    ):
        pos_key = ("positions", (length,), positions.numpy().tobytes())
    else:
        return None
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    return _lookup((pos_key, dim, ("base", float(base)), work, x.device))


def _use_triton(x, positions, inv_freq=None) -> bool:
    """Whether the Triton kernel serves this call: CUDA, a dtype it takes, positions that do
    not broadcast ``x`` to a larger shape (checked on shapes only, nothing read from the GPU),
    and frequencies that are not learned (the kernel has no gradient for them)."""
    if not (
        isinstance(x, torch.Tensor)
        and x.device.type in _TRITON_DEVICES
        and x.dtype in triton.TRITON_DTYPES
        and x.dim() >= 2
        and not (not _compiling() and x.is_neg())  # the kernel reads memory
        and triton.triton_available(x.device.type)
        and (_compiling() or not transforming())  # wrappers and tangents: tensor operations
    ):
        return False
    if isinstance(inv_freq, torch.Tensor) and inv_freq.requires_grad and torch.is_grad_enabled():
        return False
    if isinstance(positions, torch.Tensor) and positions.dim() > 1:
        try:
            return broadcast_positions(positions.shape, x.shape[:-1]) == x.shape[:-1]
        except ValueError:  # reported by the path that validates them
            return False
    return True


def _needs_grad(*tensors: torch.Tensor) -> bool:
    """Whether autograd records a computation from ``tensors`` (x, or learned tables)."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _c_serves(src, tables: _Tables) -> bool:
    """Whether the C loop rotates ``src`` (checked) with ``tables``: everything
    :func:`_c_tables` asks of a call, told from the checked arguments."""
    return (
        not _compiling()
        and src.device.type == "cpu"
        and src.dtype in cpu_kernel._DTYPES
        and src.dim() <= 4
        and src.stride(-1) == 1
        and not src.is_neg()
        and tables.cos.shape == (src.shape[-2], src.shape[-1] // 2)  # one row per position,
        and tables.cos.is_contiguous()  # laid out as the loop reads it
        and tables.sin.is_contiguous()
        and not _needs_grad(src, tables.cos)
        and not transforming()
        and cpu_kernel.available()
    )


def _out_of_place(args: _Args, tables: _Tables | None = None) -> torch.Tensor:
    """The general path of ``apply_rope``, arguments checked: the C loop where it serves,
    else the reference's arithmetic (which broadcasts and records gradients)."""
    x = args.x
    tables = _tables(args) if tables is None else tables
    if args.out_shape == x.shape and x.numel() and _c_serves(x, tables):
        out = torch.empty_like(x)
        cpu_kernel._run(cpu_kernel._load(), x, out, tables.cos, tables.sin, args.layout,
                        torch.get_num_threads())  # fmt: skip
        return out
    return _elementwise(x, tables.cos, tables.sin, args.layout)


def _in_place(args: _Args, tables: _Tables | None = None) -> None:
    """Rotate ``args.x`` where it is (checked by :func:`_writable`)."""
    x = args.x
    tables = _tables(args) if tables is None else tables
    if x.numel() and _c_serves(x, tables):
        cpu_kernel._run(cpu_kernel._load(), x, x, tables.cos, tables.sin, args.layout,
                        torch.get_num_threads())  # fmt: skip
        written(x)
        return
    # autograd keeps the pairs of x it multiplied: read them from a copy the write leaves alone
    src = x.clone() if _needs_grad(x, tables.cos) else x
    x.copy_(_elementwise(src, tables.cos, tables.sin, args.layout))


def _writable(name: str, args: _Args) -> None:
    """What an in-place rotation of ``args.x`` needs, checked before anything is written."""
    x = args.x
    if args.out_shape != x.shape:
        raise ValueError(
            f"positions of shape {tuple(args.p.shape)} broadcast {name} of shape "
            f"{tuple(x.shape)} to {tuple(args.out_shape)}; an in-place rotation must keep "
            f"{name}'s shape"
        )
    check_no_overlap(name, x)  # as on a GPU, not torch's error from deep inside
    check_writable(name, x)


def apply_rope(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
    offset: int = 0,
) -> torch.Tensor:
    """:func:`posenc.rope.apply_rope`, by the fastest correct path for x's device and dtype.

    Same arguments, result and rounding as the reference; ``cos``/``sin`` tables are cached
    between calls. On a CPU: the C loop (:mod:`posenc.fast.cpu_kernel`) for float32, float64
    and bfloat16 in any strides with a contiguous last dim, when a C compiler is available.
    On CUDA, when Triton is installed, the kernel of :mod:`posenc.fast.triton`: any strides
    in one launch, angles made in the kernel (no table, nothing read back from the GPU),
    differentiable. Everything else (autograd on a CPU, learned frequencies, ``torch.func``
    transforms, float16 on a CPU) by the reference's tensor operations. The C loop and the
    tensor operations give exactly the reference's arithmetic; the Triton kernel's ``cos``
    and ``sin`` are the float32 values nearest the true ones, where torch's may be one unit
    off.

    Args:
        x: head vectors ``[..., T, D]`` (D even), any floating dtype.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`.
        offset: added to every position (a KV cache's length): ``positions + offset``,
            each sum within int64 (a ValueError otherwise; with a non-zero offset, positions on
            a GPU are read once for it, except while a CUDA graph is being captured).

    Returns:
        The rotated vectors, as :func:`posenc.rope.apply_rope` returns them (laid out as
        ``torch.empty_like`` lays out ``x`` where a kernel serves the call).

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`.

    Example:
        >>> from posenc import rope
        >>> x = torch.randn(2, 5, 8)
        >>> torch.equal(apply_rope(x, layout="half"), rope.apply_rope(x, layout="half"))
        True
    """
    tables = _c_tables(x, positions, base, inv_freq, layout, offset)
    if tables is not None:  # the C loop, arguments checked when the tables were made
        out = torch.empty_like(x)
        cpu_kernel._run(cpu_kernel._state["lib"], x, out, tables.cos, tables.sin, layout,
                        torch.get_num_threads())  # fmt: skip
        return out
    check_offset_sum(positions, x, offset)
    if _use_triton(x, positions, inv_freq):
        return triton.rope_triton(x, positions, base=base, inv_freq=inv_freq, layout=layout,
                                  offset=offset)  # fmt: skip
    return _out_of_place(_Args(x, positions, base, inv_freq, layout, offset))


def apply_rope_(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
    offset: int = 0,
) -> torch.Tensor:
    """RoPE written into ``x`` itself; returns ``x``.

    No memory is allocated for the result, so nothing is paid for fresh pages: the cost is
    one read and one write of every byte, the least any RoPE can do. Same paths as
    :func:`apply_rope`.

    Args:
        x: head vectors ``[..., T, D]``, overwritten.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`;
            positions must not broadcast ``x`` to a larger shape.
        offset: added to every position (a KV cache's length): ``positions + offset``,
            each sum within int64 (a ValueError otherwise; with a non-zero offset, positions on
            a GPU are read once for it, except while a CUDA graph is being captured).

    Returns:
        ``x``, rotated.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`, and ValueError when
            positions would broadcast ``x`` to a larger shape, or ``x`` holds one element in
            several places (an expanded view, or windows that overlap as ``unfold`` makes).
        RuntimeError: as torch, while autograd records, for ``x`` a leaf that requires grad
            (or a view of one), or for an inference tensor outside inference mode.

    Example:
        >>> from posenc import rope
        >>> x = torch.randn(3, 8)
        >>> expected = rope.apply_rope(x, [4, 5, 6])
        >>> apply_rope_(x, [4, 5, 6]) is x, torch.equal(x, expected)
        (True, True)
    """
    tables = _c_tables(x, positions, base, inv_freq, layout, offset, inplace=True)
    if tables is not None:
        check_no_overlap("x", x)
        cpu_kernel._run(cpu_kernel._state["lib"], x, x, tables.cos, tables.sin, layout,
                        torch.get_num_threads())  # fmt: skip
        written(x)
        return x
    check_offset_sum(positions, x, offset)
    if _use_triton(x, positions, inv_freq):
        return triton.rope_triton(x, positions, base=base, inv_freq=inv_freq, layout=layout,
                                  inplace=True, offset=offset)  # fmt: skip
    args = _Args(x, positions, base, inv_freq, layout, offset)
    _writable("x", args)
    _in_place(args)
    return x


def rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
    inplace: bool = False,
    offset: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries and keys in one call, with one table for both (looked up or computed once).

    On CUDA with Triton, ``q [B, H, T, D]`` and ``k [B, H_kv, T, D]`` at positions None, a
    tensor ``[T]``, ``[1, T]`` or ``[B, 1, T]`` (the same for every head) go through one launch
    of :func:`~posenc.fast.triton.rope_qk_triton`, each position's angles made once for every
    head of both, the positions read where they lie. On a CPU, the C loop rotates each with
    the one table.

    Args:
        q: queries ``[..., H, T, D]``.
        k: keys ``[..., H_kv, T, D]`` (other leading dims allowed, same ``T`` and ``D``).
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`.
        inplace: rotate ``q`` and ``k`` where they are (as :func:`apply_rope_`); one tensor
            passed as both is rotated once, as out of place.
        offset: added to every position (a KV cache's length): ``positions + offset``,
            each sum within int64 (a ValueError otherwise; with a non-zero offset, positions on
            a GPU are read once for it, except while a CUDA graph is being captured).

    Returns:
        ``(q_rotated, k_rotated)``; with ``inplace`` these are ``q`` and ``k``.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`, or if ``q`` and ``k``
            differ in ``T`` or ``D``, dtype or device; ValueError with ``inplace`` when they
            share some elements and not others (``k`` a slice of ``q``), or one holds an
            element in several places (an expanded view, or windows that overlap as
            ``unfold`` makes).
        RuntimeError: as torch, with ``inplace`` while autograd records, for a leaf that
            requires grad (or a view of one); checked for both before either is written.

    Example:
        >>> from posenc.rope import apply_rope as reference
        >>> q, k = torch.randn(1, 4, 6, 8), torch.randn(1, 2, 6, 8)  # 4 query, 2 key heads
        >>> rq, rk = rope_qk(q, k)
        >>> torch.equal(rq, reference(q)), torch.equal(rk, reference(k))
        (True, True)
    """
    check_bool("inplace", inplace)
    # k=None would read as "no k" there: anything but a tensor goes the general way, checked
    tables = (
        _c_tables(q, positions, base, inv_freq, layout, offset, inplace, k)
        if type(k) is torch.Tensor
        else None
    )
    if tables is not None:  # the C loop, arguments checked when the tables were made
        lib, threads = cpu_kernel._state["lib"], torch.get_num_threads()
        if not inplace:
            q_out, k_out = torch.empty_like(q), torch.empty_like(k)
            cpu_kernel._run(lib, q, q_out, tables.cos, tables.sin, layout, threads)
            cpu_kernel._run(lib, k, k_out, tables.cos, tables.sin, layout, threads)
            return q_out, k_out
        check_no_overlap("q", q)
        check_no_overlap("k", k)
        once = one_memory("q", q, "k", k)
        cpu_kernel._run(lib, q, q, tables.cos, tables.sin, layout, threads)
        if not once:
            cpu_kernel._run(lib, k, k, tables.cos, tables.sin, layout, threads)
        written(q) if once else written(q, k)
        return q, k
    check_offset_sum(positions, q, offset)
    if _fuses(q, k, positions, inv_freq):  # q and k checked as rope_qk_triton checks them
        return triton._checked_qk(q, k, positions, base, inv_freq, layout, inplace, offset)
    check_tensor("q", q, min_dim=2)
    check_tensor("k", k, min_dim=2)
    qa = _Args(q, positions, base, inv_freq, layout, offset)
    if k.shape[-2:] != q.shape[-2:]:
        raise ValueError(
            f"k must have q's last two dims [T, D] = {list(q.shape[-2:])}, got {list(k.shape[-2:])}"
        )
    check_same_device(q=q, k=k)
    check_same_dtype(q=q, k=k)
    return _qk_with_tables(qa, qa.sharing(k), _tables(qa), inplace)  # one table for both


def _qk_with_tables(qa: _Args, ka: _Args, tables: _Tables, inplace: bool):
    """The rest of :func:`rope_qk` on the general path, q's and k's arguments checked."""
    q, k = qa.x, ka.x
    if inplace:  # everything checked before anything is written
        _writable("q", qa)
        _writable("k", ka)
        one = one_memory("q", q, "k", k)
        _in_place(qa, tables)
        if not one:  # the same elements are rotated once
            _in_place(ka, tables)
        return q, k
    return _out_of_place(qa, tables), _out_of_place(ka, tables)


def _fuses(q, k, positions, inv_freq=None) -> bool:
    """Whether one launch of :func:`~posenc.fast.triton.rope_qk_triton` rotates ``q`` and
    ``k`` at ``positions`` as :func:`posenc.rope.apply_rope` would rotate each (shapes only,
    nothing read): ``[B, H, T, D]`` and ``[B, H_kv, T, D]`` alike but for the heads, and
    positions None or a tensor ``[T]``, ``[1, T]`` or ``[B or 1, 1, T]`` (the same for every
    head)."""
    if not (
        _use_triton(q, positions, inv_freq)
        and isinstance(k, torch.Tensor)
        and not k.is_neg()
        and k.dtype == q.dtype
        and k.device == q.device
        and q.dim() == 4
        and k.dim() == 4
    ):
        return False
    batch, _, length, dim = q.shape
    if k.shape[0] != batch or k.shape[2] != length or k.shape[3] != dim:
        return False
    if length == 0 or dim == 0 or dim % 2:  # the reference's errors, by the general path
        return False
    if not isinstance(positions, torch.Tensor):  # integers on the host take the general path,
        return positions is None  # which reads them as apply_rope does ([H, T] is per head)
    shape = positions.shape  # broadcasts into q's [B, H, T]: _use_triton checked it
    if len(shape) <= 1:
        return shape == (length,)
    return shape[-1] == length and shape[-2] == 1  # [1, T] or [B or 1, 1, T]
