"""The forms chapter 13 compares: the rotation of :func:`posenc.rope.apply_rope`, computed in
several ways.

RoPE turns each pair of features by an angle; per pair that is four multiplications and
two additions, nothing next to the cost of reading ``x`` from memory and writing the result
back. So RoPE is bound by memory traffic, and the way to make it fast is to touch every
byte of ``x`` as few times as possible. This module holds the forms the book compares,
from the slowest to the fastest; every one returns what :func:`posenc.rope.apply_rope`
(the reference) returns:

- :func:`rope_dense`: one dense ``[D, D]`` matrix per position, a matrix product per token.
  ``O(D^2)`` work per vector where ``O(D)`` suffices: the baseline.
- :func:`rope_elementwise`: the pairs as strided views of ``x``, rotated with ``cos`` and
  ``sin`` and put back together (``torch.stack`` or ``torch.cat``).
- :func:`rope_rotate_half`: ``x * cos + rotate(x) * sin`` with ``cos`` and ``sin``
  repeated to ``D`` features, as transformers writes it (``rotate_half``).
- :func:`rope_complex`: the pairs as complex numbers, multiplied by ``e^(i p theta)``.
- :func:`rope_cached`: the complex form with its ``cos``/``sin`` tables kept between calls.
- :func:`rope_qk`: queries and keys in one call, sharing one table.
- :func:`rope_blocked`: the best tensor operations can do. The interleaved layout is one
  complex multiplication from ``x`` to the result, with no temporary; the half layout and
  low-precision inputs take three or four operations, worked through blocks of positions
  small enough to stay in the cache, so every byte of ``x`` crosses the memory bus once
  each way.
- :func:`rope_c`: one loop in C (:mod:`posenc.fast.cpu_kernel`), compiled on first use, that
  reads each pair once and writes it once: what :func:`apply_rope` runs on a CPU when a C
  compiler is available (otherwise the elementwise form).
- :func:`~posenc.fast.dispatch.apply_rope`: the fastest correct one for x's device and
  dtype (the C loop, Triton, or the elementwise form), tables cached between calls;
  :func:`~posenc.fast.dispatch.apply_rope_` the same, writing into ``x`` itself: no fresh
  memory at all (:mod:`posenc.fast.dispatch` holds both, and :func:`rope_qk`).
- :func:`rope_compiled`: ``torch.compile`` of the elementwise form (one fused loop),
  compiled on first use.
- :func:`~posenc.fast.triton.rope_triton`: a Triton kernel, one pass over ``x``, used on
  CUDA when Triton is installed (on a CPU it runs only under Triton's interpreter,
  ``TRITON_INTERPRET=1``).

Every function takes the arguments of ``apply_rope`` (``x [..., T, D]``, integer
``positions``, ``base`` or ``inv_freq``, ``layout``), validates them the same way and
computes the angles the same way: in float32 (float64 when ``x`` is float64) whatever the
dtype of ``x``, the result rounded to ``x``'s dtype at the end.

How the results round. The elementwise form rounds each product, then the sum; so do
``rope_rotate_half``, the blocked half layout and the C loop, which are bit-identical to it. Complex
multiplication does the same in its vectorised loop, but the few elements a loop leaves over
(when a row is not a whole number of vector registers) go through a scalar routine that
fuses a multiply and an add: those may differ by one unit in the last place. ``rope_dense``
sums in the order of its matrix product and agrees to a few units in the last place.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable

import torch

from posenc._validate import check_int, check_layout, check_str_sequence, check_tensor, same_device
from posenc.fast import cpu_kernel
from posenc.fast.dispatch import _elementwise, _needs_grad, apply_rope, apply_rope_, rope_qk
from posenc.fast.tables import _angle_tables, _Args, _Tables, _tables
from posenc.fast.triton import rope_triton
from posenc.rope import LAYOUTS, _join, _pairs

__all__ = [
    "AGREEMENT_DEFAULT",
    "BLOCK_ELEMENTS",
    "IMPLEMENTATIONS",
    "agreement",
    "compile_available",
    "dense_matrices",
    "rope_blocked",
    "rope_c",
    "rope_cached",
    "rope_compiled",
    "rope_complex",
    "rope_dense",
    "rope_elementwise",
    "rope_rotate_half",
]

BLOCK_ELEMENTS = 1 << 19
"""Elements of ``x`` per block in :func:`rope_blocked` (2 MB of float32): a block, its
result and the temporaries stay in the cache, so the passes over a block after the first
read do not go to memory; blocks this large keep the number of steps (and the cost of
launching each) small."""

# --- the textbook forms -----------------------------------------------------------------------
# Each implementation spells out apply_rope's signature and the same Args, Returns and Raises,
# so that each can be read, called and tested on its own, as chapter 13 and the benchmark do;
# the repetition is deliberate (a shared wrapper would hide the signature a reader calls).


def rope_elementwise(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
) -> torch.Tensor:
    """RoPE on strided views of the pairs: ``(x1 cos - x2 sin, x1 sin + x2 cos)``.

    The form of chapter 9: select the two members of each pair (``x[2i], x[2i+1]`` or
    ``x[i], x[i + D/2]``), rotate, and interleave or concatenate the results. Each
    arithmetic step makes a temporary as large as half of ``x``, and the angles are
    computed on every call.

    Args:
        x: head vectors ``[..., T, D]``.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`.

    Returns:
        The rotated vectors, same shape, dtype and device as ``x``.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`.

    Example:
        >>> x = torch.randn(2, 3, 8)
        >>> torch.equal(rope_elementwise(x, layout="half"), rope_blocked(x, layout="half"))
        True
    """
    args = _Args(x, positions, base, inv_freq, layout)
    cos, sin = _angle_tables(args.p, args.inv_freq, args.dtype)
    return _elementwise(args.x, cos, sin, args.layout)


def _pair_index(half: int, layout: str, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Feature indices of the two members of every pair: ``[D/2]`` each."""
    return _pairs(torch.arange(2 * half, device=device), layout)


@same_device
def dense_matrices(cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """The dense RoPE matrices ``[..., D, D]`` for tables ``cos, sin`` of shape ``[..., D/2]``.

    Pair ``(a, b)`` gets ``[[cos, -sin], [sin, cos]]`` at rows and columns ``a, b``; every
    other entry is zero. ``dense_matrices(*rope_tables([p], D), layout)[0]`` is
    :func:`posenc.rope.rope_matrix` ``(p, D)`` in float32.

    Args:
        cos, sin: tables ``[..., D/2]`` of the same shape and floating dtype.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        ``[..., D, D]``, in the dtype of the tables.

    Raises:
        TypeError: if the tables are not floating tensors.
        ValueError: if their shapes differ or ``layout`` is unknown.

    Example:
        >>> from posenc.fast.tables import rope_tables
        >>> cos, sin = rope_tables([3], 4, base=100.0, dtype=torch.float64)
        >>> from posenc.rope import rope_matrix
        >>> torch.allclose(dense_matrices(cos, sin, "half")[0], rope_matrix(3, 4, base=100.0,
        ...     layout="half"))
        True
    """
    check_tensor("cos", cos, min_dim=1)
    check_tensor("sin", sin, min_dim=1)
    if cos.shape != sin.shape:
        raise ValueError(
            f"cos and sin must have one shape, got {tuple(cos.shape)}, {tuple(sin.shape)}"
        )
    check_layout(layout)
    half = cos.shape[-1]
    a, b = _pair_index(half, layout, cos.device)
    mats = cos.new_zeros(*cos.shape[:-1], 2 * half, 2 * half)
    mats[..., a, a] = cos
    mats[..., a, b] = -sin
    mats[..., b, a] = sin
    mats[..., b, b] = cos
    return mats


def rope_dense(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
    block: int = 256,
) -> torch.Tensor:
    """RoPE as a product with the dense ``[D, D]`` matrix of every position.

    Builds the matrices of :func:`dense_matrices` for ``block`` positions at a time (from
    the same ``cos`` and ``sin`` as ``apply_rope``), shares each between all vectors at its
    position, and multiplies: ``D^2`` multiply-adds per vector, of which ``2 D`` meet a
    non-zero entry. Matrix products add in their own order, so results agree with
    ``apply_rope`` to a few units in the last place rather than bit for bit.

    Args:
        x: head vectors ``[..., T, D]``.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`.
        block: positions (or, for positions with leading dims, vectors) whose matrices are
            built at once: memory ``block * D^2`` numbers.

    Returns:
        The rotated vectors, same shape, dtype and device as ``x``.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`, or a ``block`` below 1.

    Example:
        >>> x = torch.randn(2, 5, 8, dtype=torch.float64)
        >>> torch.allclose(rope_dense(x), rope_elementwise(x))
        True
    """
    check_int("block", block, minimum=1)
    args = _Args(x, positions, base, inv_freq, layout)
    cos, sin = _angle_tables(args.p, args.inv_freq, args.dtype)  # [..., T, D/2]
    dim, length = x.shape[-1], x.shape[-2]
    out = torch.empty(args.out_shape, dtype=args.dtype, device=x.device)
    if args.p.dim() == 1:  # one matrix per position, shared by every vector there
        xw = args.x.to(args.dtype).reshape(-1, length, dim)  # [L, T, D]
        o3 = out.view(-1, length, dim)
        for t0 in range(0, length, block):
            mats = dense_matrices(cos[t0 : t0 + block], sin[t0 : t0 + block], args.layout)
            # [b, L, D] @ [b, D, D] -> [b, L, D]: each position's vectors times its matrix
            o3[:, t0 : t0 + block] = (xw[:, t0 : t0 + block].transpose(0, 1) @ mats.mT).transpose(
                0, 1
            )
    else:  # positions with leading dims: one matrix per vector
        lead = args.out_shape[:-1]
        xr = args.x.to(args.dtype).expand(args.out_shape).reshape(-1, dim)  # [N, D]
        cr = cos.expand(*lead, dim // 2).reshape(-1, dim // 2)
        sr = sin.expand(*lead, dim // 2).reshape(-1, dim // 2)
        orow = out.view(-1, dim)
        for r0 in range(0, xr.shape[0], block):
            mats = dense_matrices(cr[r0 : r0 + block], sr[r0 : r0 + block], args.layout)
            orow[r0 : r0 + block] = (mats @ xr[r0 : r0 + block, :, None]).squeeze(-1)
    return out.to(x.dtype)


def _rotate_half(x, layout):
    """``(-x2, x1)`` in the feature order of ``layout``: the ``sin`` partner of each feature."""
    x1, x2 = _pairs(x, layout)
    return _join(-x2, x1, layout)


def _full_tables(cos, sin, layout):
    """``cos`` and ``sin`` repeated to ``D`` features in the order of ``layout``."""
    return _join(cos, cos, layout), _join(sin, sin, layout)


def rope_rotate_half(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
) -> torch.Tensor:
    """RoPE as transformers writes it: ``x * cos + rotate_half(x) * sin``.

    ``cos`` and ``sin`` are repeated to all ``D`` features; ``rotate_half`` builds
    ``(-x2, x1)`` (for the interleaved layout, the same within each adjacent pair). Three
    temporaries as large as ``x``. The products are computed in the angle dtype, as
    ``apply_rope`` does (transformers multiplies in ``x``'s dtype).

    Args:
        x: head vectors ``[..., T, D]``.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`
            (transformers uses the half layout).

    Returns:
        The rotated vectors, same shape, dtype and device as ``x``.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`.

    Example:
        >>> x = torch.randn(4, 8)
        >>> torch.equal(rope_rotate_half(x, layout="half"), rope_elementwise(x, layout="half"))
        True
    """
    args = _Args(x, positions, base, inv_freq, layout)
    cos, sin = _full_tables(*_angle_tables(args.p, args.inv_freq, args.dtype), args.layout)
    xw = args.x.to(args.dtype)
    return (xw * cos + _rotate_half(xw, args.layout) * sin).to(x.dtype)


def _as_complex(t: torch.Tensor) -> torch.Tensor | None:
    """``t [..., D]`` viewed as complex ``[..., D/2]`` (adjacent pairs), or None if its
    strides do not allow the view."""
    try:
        return torch.view_as_complex(t.unflatten(-1, (t.shape[-1] // 2, 2)))
    except RuntimeError:
        return None


def _complex(x, rot, layout):
    """Complex form, out of place and differentiable: the pairs of ``x`` times ``rot``."""
    xw = x.to(torch.float64 if rot.dtype == torch.complex128 else torch.float32)
    if layout == "interleaved":
        z = _as_complex(xw)
        if z is None:  # strides that forbid the view: make the pairs adjacent first
            z = torch.view_as_complex(xw.unflatten(-1, (xw.shape[-1] // 2, 2)).contiguous())
        return torch.view_as_real(z * rot).flatten(-2).to(x.dtype)
    if layout == "half":
        x1, x2 = xw.chunk(2, dim=-1)
        z = torch.complex(x1, x2) * rot
        return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)
    raise ValueError(f"layout must be one of {LAYOUTS}, got layout={layout!r}")


def rope_complex(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
) -> torch.Tensor:
    """RoPE as complex multiplication: pair ``(a, b)`` is ``a + ib``, times ``e^(i p theta)``.

    The form of Meta's Llama code. For the interleaved layout a float32 or float64 ``x``
    is *viewed* as complex numbers (no copy) and multiplied in one pass; ``(a + ib)(c +
    is) = (ac - bs) + i(as + bc)`` is exactly the elementwise arithmetic. For the half
    layout the complex numbers must be assembled from the two halves first.

    Args:
        x: head vectors ``[..., T, D]``.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`.

    Returns:
        The rotated vectors, same shape, dtype and device as ``x``.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`.

    Example:
        >>> x = torch.randn(2, 3, 8)
        >>> torch.allclose(rope_complex(x), rope_elementwise(x))
        True
    """
    args = _Args(x, positions, base, inv_freq, layout)
    tables = _Tables(*_angle_tables(args.p, args.inv_freq, args.dtype))
    return _complex(args.x, tables.rot, args.layout)


def rope_cached(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
) -> torch.Tensor:
    """The complex form with its tables kept between calls (see :func:`cache_info`).

    Tables are cached per positions (the default ``0 .. T-1``, or explicit positions of up
    to 65,536 entries on the CPU), frequencies, dtype and device; the 16 most recently
    used stay. A model calls RoPE with the same positions for every layer and for both q
    and k, so all calls but the first skip ``cos`` and ``sin``.

    Args:
        x: head vectors ``[..., T, D]``.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`.

    Returns:
        The rotated vectors, same shape, dtype and device as ``x``.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`.

    Example:
        >>> x = torch.randn(2, 3, 8)
        >>> torch.allclose(rope_cached(x), rope_elementwise(x))
        True
    """
    args = _Args(x, positions, base, inv_freq, layout)
    return _complex(args.x, _tables(args).rot, args.layout)


# --- blocks that stay in the cache ----------------------------------------------------------


def _block_shape(lead: int, length: int, dim: int, budget: int) -> tuple[int, int]:
    """``(lb, tb)``: leading rows and positions per block of ``[lead, length, dim]``, about
    ``budget`` elements, whole rows of positions so one block of the table serves them all."""
    lb = min(lead, max(1, budget // (dim * min(length, 8))))
    return lb, min(length, max(1, budget // (lb * dim)))


def _rotate_into(src, dst, tables: _Tables, layout: str, budget: int) -> None:
    """Write the rotation of ``src [..., T, D]`` into ``dst`` (same shape; may be ``src``).

    ``tables`` hold the angles in the work dtype (float32 or float64) and broadcast to the
    leading shape of ``src``.
    """
    work = tables.cos.dtype
    lead = src.shape[:-1]
    if layout == "interleaved":
        rot = tables.rot.expand((*lead, src.shape[-1] // 2))
        cs, cd = _as_complex(src), _as_complex(dst)
        if src.dtype == work and cs is not None and cd is not None:
            torch.mul(cs, rot, out=cd)  # one pass, no temporary
            return
        parts = (src, dst, rot)
    elif layout == "half":
        parts = (src, dst, *(t.expand(src.shape) for t in tables.wide(layout)))
    else:
        raise ValueError(f"layout must be one of {LAYOUTS}, got layout={layout!r}")
    views = _as_3d(*parts) if src.dim() != 2 else [t.unsqueeze(0) for t in parts]
    if views is None:  # leading dims that do not merge into one: one slice of dim 0 at a time
        for i in range(src.shape[0]):
            sub = _Tables(*(t.expand((*lead, t.shape[-1]))[i] for t in (tables.cos, tables.sin)))
            _rotate_into(src[i], dst[i], sub, layout, budget)
        return
    lead_n, length, dim = views[0].shape
    lb, tb = _block_shape(lead_n, length, dim, budget)
    bufs = [torch.empty((lb, tb, dim), dtype=work, device=src.device) for _ in range(2)]
    step = _complex_block if layout == "interleaved" else _half_block
    for l0 in range(0, lead_n, lb):
        ln = min(lb, lead_n - l0)
        rows = [v.narrow(0, l0, ln) for v in views]
        for t0 in range(0, length, tb):
            tn = min(tb, length - t0)
            block = [r.narrow(1, t0, tn) for r in rows]
            scratch = [b if (ln, tn) == (lb, tb) else b[:ln, :tn] for b in bufs]
            step(*block, *scratch, work)


def _as_3d(*tensors):
    """Views ``[L, T, last]`` of tensors that share their leading shape, or None."""
    try:
        return [t.view(-1, t.shape[-2], t.shape[-1]) for t in tensors]
    except RuntimeError:
        return None


def _complex_block(s, d, r, buf, _spare, work):
    """Interleaved block through a buffer: copy (and convert) in, multiply, copy out."""
    cs = _as_complex(s) if s.dtype == work else None
    cd = _as_complex(d) if d.dtype == work else None
    if cs is not None and cd is not None:
        torch.mul(cs, r, out=cd)
        return
    buf.copy_(s)  # converts bf16/f16 to the work dtype; makes the pairs adjacent
    cb = _as_complex(buf)
    if cd is not None:
        torch.mul(cb, r, out=cd)
    else:
        cb.mul_(r)
        d.copy_(buf)  # rounds to x's dtype


def _half_block(s, d, cw, sw, buf, t, work):
    """Half-layout block in four steps on whole rows: ``t = x * (s, -s)``,
    ``o = x * (c, c)``, then each half of ``o`` adds the other half of ``t``:
    ``o1 = x1 c - x2 s``, ``o2 = x2 c + x1 s``, each product rounded once, then the sum, as
    in the elementwise form."""
    src = s
    if s.dtype != work:
        buf.copy_(s)  # bf16/f16 to the work dtype
        src = buf
    target = d if d.dtype == work else src  # low precision: rotate the float copy in place
    half = s.shape[-1] // 2
    torch.mul(src, sw, out=t)  # (x1 s, -x2 s)
    torch.mul(src, cw, out=target)  # (x1 c, x2 c); in place when target is src
    target.narrow(-1, 0, half).add_(t.narrow(-1, half, half))
    target.narrow(-1, half, half).add_(t.narrow(-1, 0, half))
    if target is not d:
        d.copy_(target)  # rounds to x's dtype


def rope_blocked(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
    block_elements: int = BLOCK_ELEMENTS,
) -> torch.Tensor:
    """RoPE with cached tables, streamed through blocks that stay in the cache.

    What ``apply_rope`` runs on a CPU. A float32 (or float64) ``x`` in the interleaved
    layout is viewed as complex numbers and multiplied into the result in one pass. Every
    other case (the half layout, bfloat16 and float16, strides that forbid the complex
    view) needs several steps; they are taken block by block, a block of about
    ``block_elements`` elements small enough that the later steps read it from the cache.
    The arithmetic is the elementwise one, in the angle dtype, rounded once at the end.

    Args:
        x: head vectors ``[..., T, D]``.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`.
        block_elements: elements per block.

    Returns:
        The rotated vectors, same shape, dtype and device as ``x`` (a new tensor).

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`, or a ``block_elements``
            below 1.

    Example:
        >>> x = torch.randn(2, 3, 5, 8).to(torch.bfloat16)
        >>> torch.equal(rope_blocked(x, block_elements=16), rope_elementwise(x))
        True
    """
    budget = _check_budget(block_elements)
    args = _Args(x, positions, base, inv_freq, layout)
    tables = _tables(args)
    if args.out_shape != x.shape or _needs_grad(x, tables.cos):  # broadcasting, or autograd
        return _complex(args.x.expand(args.out_shape), tables.rot, args.layout)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        _rotate_into(x, out, tables, args.layout, budget)
    return out


def rope_c(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
) -> torch.Tensor:
    """RoPE by the one-pass C loop of :mod:`posenc.fast.cpu_kernel`: what ``apply_rope`` runs on
    a CPU when a C compiler is available.

    Each pair is read once, rotated and written once, in either layout, with the
    elementwise arithmetic: the result is bit-identical to :func:`rope_elementwise`.

    Args:
        x: head vectors ``[..., T, D]``, float32, float64 or bfloat16, on the CPU (any strides:
            a model's ``[B, H, T, D]`` view of ``[B, T, H, D]`` is read where it lies; other
            inputs are copied into that form first).
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`; positions
            must be one row ``[T]``.

    Returns:
        The rotated vectors, a new tensor of x's shape and dtype.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`; ValueError for a device
            other than the CPU, another dtype, positions with leading dimensions, or ``x`` or
            ``inv_freq`` that requires grad while autograd records (the loop has no backward).
        RuntimeError: when the kernel is not available (``cpu_kernel.status()`` says why).

    Example:
        >>> x = torch.randn(2, 4, 40, 8)
        >>> if cpu_kernel.available():
        ...     assert torch.equal(rope_c(x, layout="half"), rope_elementwise(x, layout="half"))
    """
    args = _Args(x, positions, base, inv_freq, layout)
    if x.device.type != "cpu" or x.dtype not in cpu_kernel._DTYPES:
        raise ValueError(
            f"x must be a float32, float64 or bfloat16 tensor on the CPU for the C kernel, got "
            f"dtype {x.dtype} on device {x.device}"
        )
    if args.p.dim() != 1:
        raise ValueError(
            f"positions must be one row [T] for the C kernel, got shape {tuple(args.p.shape)}"
        )
    tables = _tables(args)
    if _needs_grad(x, tables.cos):
        raise ValueError(
            "the C kernel records no gradient: x and inv_freq must not require grad here "
            "(posenc.fast.apply_rope takes them by a differentiable path)"
        )
    src = x if x.dim() <= 4 and x.stride(-1) == 1 else x.contiguous()
    src = src if src.dim() <= 4 else src.view(-1, *src.shape[-3:])
    lib = cpu_kernel._load()
    if lib is None:
        raise RuntimeError(f"the C kernel is not available: {cpu_kernel.status()}")
    src, out = src.resolve_neg(), torch.empty_like(src)  # the loop reads memory
    cpu_kernel._run(lib, src, out, tables.cos.contiguous(), tables.sin.contiguous(), args.layout,
                    torch.get_num_threads())  # fmt: skip
    return out.view(x.shape)


def _check_budget(block_elements):
    return check_int("block_elements", block_elements, minimum=1)


# --- torch.compile --------------------------------------------------------------------------


def compile_available() -> bool:
    """Whether ``torch.compile`` can be tried here (a C++ compiler on the PATH, for inductor).

    Returns:
        True when :func:`rope_compiled` may compile; the first call can still fail.

    Example:
        >>> from unittest import mock
        >>> with mock.patch("shutil.which", return_value=None):  # no C++ compiler on the PATH
        ...     compile_available()
        False
    """
    return any(shutil.which(c) for c in ("g++", "c++", "clang++", "cc"))


@functools.lru_cache(maxsize=1)
def _compiled_fn() -> Callable:
    return torch.compile(_elementwise, dynamic=True)


def rope_compiled(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
) -> torch.Tensor:
    """``torch.compile`` of the elementwise form, with cached tables.

    The compiler fuses the strided loads, the arithmetic, the casts and the interleaving
    into one loop: one read of ``x``, one write of the result. The first call compiles
    (tens of seconds on a small CPU; dynamic shapes, so later shapes rarely recompile).

    Args:
        x: head vectors ``[..., T, D]``.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`.

    Returns:
        The rotated vectors, same shape, dtype and device as ``x``.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`.
        RuntimeError: when ``torch.compile`` is not available or fails here.

    Example:
        >>> x = torch.randn(2, 4, 8)
        >>> y = rope_compiled(x) if compile_available() else rope_elementwise(x)  # doctest: +SKIP
    """
    args = _Args(x, positions, base, inv_freq, layout)
    if not compile_available():
        raise RuntimeError("torch.compile is not available here (no dynamo or no C++ compiler)")
    tables = _tables(args)
    try:
        return _compiled_fn()(args.x, tables.cos, tables.sin, args.layout)
    except Exception as err:  # the backend reports many kinds of failure
        raise RuntimeError(f"torch.compile failed here: {type(err).__name__}: {err}") from err


# --- registry -------------------------------------------------------------------------------

IMPLEMENTATIONS: dict[str, Callable[..., torch.Tensor]] = {
    "dense": rope_dense,
    "elementwise": rope_elementwise,
    "rotate_half": rope_rotate_half,
    "complex": rope_complex,
    "cached": rope_cached,
    "blocked": rope_blocked,
    "c": rope_c,
    "compiled": rope_compiled,
    "triton": rope_triton,
}
"""Out-of-place implementations by name, all called as ``f(x, positions, *, base, inv_freq,
layout)``. ``rope_qk`` (two tensors) and ``apply_rope_`` (writes into ``x``) are the other
two forms."""


_NEEDS_A_TOOL = ("c", "compiled", "triton")  # a C compiler, torch.compile, a GPU with Triton

AGREEMENT_DEFAULT = (
    *(name for name in IMPLEMENTATIONS if name not in _NEEDS_A_TOOL),
    "rope_qk",
    "apply_rope",
    "apply_rope_",
)
"""What :func:`agreement` checks unless told otherwise (no C loop, compilation or Triton)."""


def agreement(
    x: torch.Tensor,
    positions=None,
    *,
    layout: str = "interleaved",
    names: tuple[str, ...] = AGREEMENT_DEFAULT,
) -> dict[str, float]:
    """How far each implementation is from the elementwise reference on ``x``.

    Args:
        x: head vectors ``[..., T, D]``.
        positions: as for :func:`posenc.rope.apply_rope`.
        layout: ``"interleaved"`` or ``"half"``.
        names: keys of :data:`IMPLEMENTATIONS`, or ``"rope_qk"``, ``"apply_rope"``,
            ``"apply_rope_"`` (the last works on a copy of ``x``).

    Returns:
        name to the largest difference, divided by the largest entry of the reference
        (0.0 means bit-identical).

    Raises:
        ValueError: for an unknown name; otherwise as :func:`posenc.rope.apply_rope`.

    Example:
        >>> errors = agreement(torch.randn(2, 8, 16), layout="half")
        >>> errors["blocked"], errors["apply_rope_"], errors["dense"] < 1e-6
        (0.0, 0.0, True)
    """
    known = (*IMPLEMENTATIONS, "rope_qk", "apply_rope", "apply_rope_")
    for name in check_str_sequence("names", names):
        if name not in known:
            raise ValueError(f"names must be from {known}, got unknown name {name!r}")
    want = rope_elementwise(x, positions, layout=layout)
    scale = float(want.double().abs().max().clamp_min(1e-30))
    out = {}
    for name in names:
        if name in IMPLEMENTATIONS:
            got = IMPLEMENTATIONS[name](x, positions, layout=layout)
        elif name == "rope_qk":
            got = rope_qk(x, x, positions, layout=layout)[1]
        elif name == "apply_rope":
            got = apply_rope(x, positions, layout=layout)
        elif name == "apply_rope_":
            got = apply_rope_(x.clone(), positions, layout=layout)
        else:
            raise ValueError(f"names must be from {known}, got unknown name {name!r}")
        out[name] = float((got.double() - want.double()).abs().max()) / scale
    return out
