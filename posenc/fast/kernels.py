"""Fast RoPE: the rotation of :func:`posenc.rope.apply_rope`, computed in several ways.

RoPE turns each pair of features by an angle; per pair that is four multiplications and
two additions, nothing next to the cost of reading ``x`` from memory and writing the result
back. So RoPE is bound by memory traffic, and the way to make it fast is to touch every
byte of ``x`` as few times as possible. This module holds the forms the book compares,
from the slowest to the fastest; every one returns what ``apply_rope`` returns:

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
  reads each pair once and writes it once: what ``apply_rope`` runs on a CPU for float32
  and float64 when a C compiler is available (otherwise it runs ``rope_blocked``).
- :func:`apply_rope_` (``pe.apply_rope_``): the same, writing into ``x`` itself: no
  fresh memory at all.
- :func:`rope_compiled`: ``torch.compile`` of the elementwise form (one fused loop),
  compiled on first use.
- :func:`rope_triton`: a Triton kernel, one pass over ``x``, used on CUDA when Triton is
  installed (on a CPU it runs only under Triton's interpreter, ``TRITON_INTERPRET=1``).

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
``apply_rope`` gives inputs of at most 32,768 elements the elementwise arithmetic itself.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable

import torch

from posenc._validate import (
    check_bool,
    check_even_dim,
    check_positions,
    check_positive_float,
    check_str_sequence,
    check_tensor,
    same_device,
)
from posenc.fast import cpu_kernel
from posenc.rope import (
    LAYOUTS,
    _angles,
    _check_inv_freq,
    _check_layout,
    _check_rope_input,
    _rotate,
    rope_inv_freq,
)

__all__ = [
    "AGREEMENT_DEFAULT",
    "BLOCK_ELEMENTS",
    "IMPLEMENTATIONS",
    "agreement",
    "apply_rope",
    "apply_rope_",
    "cache_clear",
    "cache_info",
    "compile_available",
    "dense_matrices",
    "rope_blocked",
    "rope_c",
    "rope_cached",
    "rope_compiled",
    "rope_complex",
    "rope_dense",
    "rope_elementwise",
    "rope_qk",
    "rope_rotate_half",
    "rope_tables",
    "rope_triton",
    "triton_available",
]

BLOCK_ELEMENTS = 1 << 19
"""Elements of ``x`` per block in :func:`rope_blocked` (2 MB of float32): a block, its
result and the temporaries stay in the cache, so the passes over a block after the first
read do not go to memory; blocks this large keep the number of steps (and the cost of
launching each) small."""

_SMALL = 1 << 15
"""Inputs of at most this many elements take the elementwise arithmetic itself: as fast as
anything at that size, and bit for bit the reference."""

_CACHE_SIZE = 16
_CACHE_BYTES = 256 * 2**20
_CACHE_MAX_POSITIONS = 1 << 16  # explicit positions up to this many entries are cached


# --- arguments and tables ---------------------------------------------------------------------


class _Args:
    """Validated arguments: ``x``, positions ``p`` (int64 on x's device), the frequencies
    (computed when first asked for), the angle dtype, the layout, the result's shape and
    the cache key of the tables."""

    __slots__ = ("_base", "_inv_freq", "dtype", "key", "layout", "out_shape", "p", "x")

    def __init__(self, x, positions, base, inv_freq, layout):
        x, p = _check_rope_input(x, positions)
        self.layout = _check_layout(layout)
        dim = x.shape[-1]
        if inv_freq is None:
            self._base = check_positive_float("base", base)
            self._inv_freq = None
            freq_key = ("base", self._base)
        else:
            self._base = None
            self._inv_freq = _check_inv_freq(inv_freq, dim)
            # a key from the values costs a device-to-host copy unless they are on the CPU
            on_cpu = inv_freq.device.type == "cpu"
            freq_key = ("inv_freq", inv_freq.dtype, tuple(inv_freq.tolist())) if on_cpu else None
        self.x, self.p = x, p
        self.dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        if p.dim() == 1:
            self.out_shape = x.shape
        else:
            self.out_shape = torch.Size((*torch.broadcast_shapes(p.shape, x.shape[:-1]), dim))
        if positions is None:
            pos_key = ("arange", x.shape[-2])
        elif p.device.type == "cpu" and p.numel() <= _CACHE_MAX_POSITIONS:
            pos_key = ("positions", tuple(p.shape), p.numpy().tobytes())
        else:
            pos_key = None  # not cached: hashing would cost a device sync or a long key
        if pos_key is None or freq_key is None:
            self.key = None
        else:
            self.key = (pos_key, dim, freq_key, self.dtype, x.device)

    @property
    def inv_freq(self) -> torch.Tensor:
        if self._inv_freq is None:
            self._inv_freq = rope_inv_freq(self.x.shape[-1], self._base)
        return self._inv_freq


def rope_tables(
    positions,
    dim: int,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``cos`` and ``sin`` tables of RoPE's angles ``positions * theta_i``.

    Computed exactly as ``apply_rope`` computes them: the positions and frequencies cast to
    ``dtype``, multiplied, then ``cos`` and ``sin``.

    Args:
        positions: integer positions ``[T]`` (an int, a sequence or an integer tensor), or an
            integer tensor ``[..., T]``; the tables live on its device.
        dim: head features ``D`` (even).
        base: frequency base, used when ``inv_freq`` is None.
        inv_freq: the frequencies ``[D/2]`` to use instead.
        dtype: float32 or float64, the dtype of the angles.

    Returns:
        ``(cos, sin)``, each ``[..., T, D/2]`` in ``dtype``.

    Raises:
        TypeError, ValueError: for non-integer positions, a bad ``dim``, ``base``,
            ``inv_freq`` or ``dtype``.

    Example:
        >>> cos, sin = rope_tables([0, 1], 4, base=100.0)
        >>> cos.shape, bool(cos[0].eq(1).all()), round(float(sin[1, 1]), 4)
        (torch.Size([2, 2]), True, 0.0998)
    """
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    check_even_dim("dim", dim)
    if isinstance(positions, torch.Tensor) and positions.dim() > 1:
        if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"positions must hold integers, got dtype {positions.dtype}")
        if positions.shape[-1] == 0:
            raise ValueError(f"positions must not be empty, got shape {tuple(positions.shape)}")
        p = positions.to(torch.int64)
    else:
        p = check_positions("positions", positions, nonnegative=False)
    inv_freq = rope_inv_freq(dim, base) if inv_freq is None else _check_inv_freq(inv_freq, dim)
    return _angle_tables(p, inv_freq, dtype)


def _angle_tables(p, inv_freq, dtype):
    angles = _angles(p, inv_freq, dtype)  # [..., T, D/2], exactly as apply_rope's reference
    return angles.cos(), angles.sin()


class _Tables:
    """``cos`` and ``sin`` ``[..., T, D/2]`` for one set of angles, and forms derived from
    them on first use: ``cos + i sin`` and the full-width tables of :func:`_half_block`."""

    __slots__ = ("_rot", "_wide", "cos", "sin")

    def __init__(self, cos, sin):
        self.cos, self.sin, self._rot, self._wide = cos, sin, None, {}

    @property
    def rot(self):
        if self._rot is None:
            self._rot = torch.complex(self.cos, self.sin)
        return self._rot

    def wide(self, layout):
        """``(c, c)`` and ``(s, -s)`` in the feature order of ``layout``: ``[..., T, D]``."""
        if layout not in self._wide:
            self._wide[layout] = (
                _join(self.cos, self.cos, layout),
                _join(self.sin, -self.sin, layout),
            )
        return self._wide[layout]


_cache: OrderedDict = OrderedDict()
_cache_lock = threading.Lock()
_cache_stats = {"hits": 0, "misses": 0}


def _charge(tables: _Tables) -> int:
    """Bytes an entry may come to hold: cos and sin, cos + i sin, and the two wide tables."""
    return 8 * tables.cos.nbytes


def _tables(args: _Args) -> _Tables:
    """The tables for ``args``, from the cache when possible (least recently used first out)."""
    if args.key is None:
        return _Tables(*_angle_tables(args.p, args.inv_freq, args.dtype))
    with _cache_lock:
        hit = _cache.get(args.key)
        if hit is not None:
            _cache.move_to_end(args.key)
            _cache_stats["hits"] += 1
            return hit
        _cache_stats["misses"] += 1
    tables = _Tables(*_angle_tables(args.p, args.inv_freq, args.dtype))
    if _charge(tables) > _CACHE_BYTES:
        return tables
    with _cache_lock:
        _cache[args.key] = tables
        while len(_cache) > _CACHE_SIZE or sum(map(_charge, _cache.values())) > _CACHE_BYTES:
            _cache.popitem(last=False)
    return tables


def cache_info() -> dict:
    """Hits, misses, entries and bytes of the table cache.

    At most 16 tables are kept, and at most 256 MB (counting the forms each may grow:
    ``cos``, ``sin``, ``cos + i sin`` and the full-width tables); least recently used
    first out.

    Returns:
        ``{"hits", "misses", "size", "maxsize", "bytes", "maxbytes"}``, all ints.

    Example:
        >>> sorted(cache_info())
        ['bytes', 'hits', 'maxbytes', 'maxsize', 'misses', 'size']
    """
    with _cache_lock:
        return {
            **_cache_stats,
            "size": len(_cache),
            "maxsize": _CACHE_SIZE,
            "bytes": sum(map(_charge, _cache.values())),
            "maxbytes": _CACHE_BYTES,
        }


def cache_clear() -> None:
    """Empty the table cache and reset its counters.

    Example:
        >>> cache_clear(); cache_info()["size"]
        0
    """
    with _cache_lock:
        _cache.clear()
        _cache_stats.update(hits=0, misses=0)


def _needs_grad(x: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and x.requires_grad


# --- the textbook forms -----------------------------------------------------------------------


def _pairs(x, layout):
    """The two members of every pair: ``[..., T, D/2]`` views of ``x``."""
    if layout == "interleaved":
        return x[..., 0::2], x[..., 1::2]
    if layout == "half":
        return x.chunk(2, dim=-1)
    raise ValueError(f"layout must be one of {LAYOUTS}, got layout={layout!r}")


def _join(a, b, layout):
    """Inverse of :func:`_pairs`: ``[..., T, D]`` from the two members."""
    if layout == "interleaved":
        return torch.stack([a, b], dim=-1).flatten(-2)
    if layout == "half":
        return torch.cat([a, b], dim=-1)
    raise ValueError(f"layout must be one of {LAYOUTS}, got layout={layout!r}")


def _elementwise(x, cos, sin, layout):
    return _rotate(x.to(cos.dtype), cos, sin, layout).to(x.dtype)


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
    i = torch.arange(half, device=device)
    if layout == "interleaved":
        return 2 * i, 2 * i + 1
    if layout == "half":
        return i, i + half
    raise ValueError(f"layout must be one of {LAYOUTS}, got layout={layout!r}")


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
    _check_layout(layout)
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
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be an int of at least 1, got block={block!r}")
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
    if layout == "interleaved":
        return cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
    if layout == "half":
        return torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)
    raise ValueError(f"layout must be one of {LAYOUTS}, got layout={layout!r}")


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


def _as_3d(*tensors):
    """Views ``[L, T, last]`` of tensors that share their leading shape, or None."""
    try:
        return [t.view(-1, t.shape[-2], t.shape[-1]) for t in tensors]
    except RuntimeError:
        return None


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
    if args.out_shape != x.shape or _needs_grad(x):  # broadcasting positions, or autograd
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
    a CPU for float32 and float64 when a C compiler is available.

    Each pair is read once, rotated and written once, in either layout, with the
    elementwise arithmetic: the result is bit-identical to :func:`rope_elementwise`.

    Args:
        x: head vectors ``[..., T, D]``, float32 or float64, on the CPU (any strides: a
            non-contiguous ``x`` is copied first).
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`; positions
            must be one row ``[T]``.

    Returns:
        The rotated vectors, a new contiguous tensor of x's shape and dtype.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`; ValueError for a device
            other than the CPU, another dtype, or positions with leading dimensions.
        RuntimeError: when the kernel is not available (``cpu_kernel.status()`` says why).

    Example:
        >>> x = torch.randn(2, 4, 40, 8)
        >>> if cpu_kernel.available():
        ...     assert torch.equal(rope_c(x, layout="half"), rope_elementwise(x, layout="half"))
    """
    args = _Args(x, positions, base, inv_freq, layout)
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64):
        raise ValueError(
            f"x must be a float32 or float64 tensor on the CPU for the C kernel, got dtype "
            f"{x.dtype} on device {x.device}"
        )
    if args.p.dim() != 1:
        raise ValueError(
            f"positions must be one row [T] for the C kernel, got shape {tuple(args.p.shape)}"
        )
    tables = _tables(args)
    src = x.contiguous()
    out = torch.empty_like(src)
    cpu_kernel.rotate(src, out, tables.cos, tables.sin, args.layout)
    return out


def _check_budget(block_elements):
    if isinstance(block_elements, bool) or not isinstance(block_elements, int):
        raise TypeError(f"block_elements must be an int, got {block_elements!r}")
    if block_elements < 1:
        raise ValueError(f"block_elements must be at least 1, got {block_elements}")
    return block_elements


def apply_rope(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
) -> torch.Tensor:
    """:func:`posenc.rope.apply_rope`, by the fastest correct path for x's device and dtype.

    Same arguments, result and rounding as the reference; ``cos``/``sin`` tables are cached
    between calls. On a CPU: the C loop (:mod:`posenc.fast.cpu_kernel`) for float32 and
    float64 when a C compiler is available, else one complex multiplication (interleaved)
    or cache-sized blocks of tensor operations (:func:`rope_blocked`); on CUDA the Triton
    kernel when Triton is installed. Inputs of up to 32,768 elements, and the C loop, give
    exactly the reference's arithmetic; the other paths may differ from it by one unit in
    the last place.

    Args:
        x: head vectors ``[..., T, D]`` (D even), any floating dtype.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`.

    Returns:
        The rotated vectors, as :func:`posenc.rope.apply_rope` returns them.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`.

    Example:
        >>> from posenc import rope
        >>> x = torch.randn(2, 5, 8)
        >>> torch.equal(apply_rope(x, layout="half"), rope.apply_rope(x, layout="half"))
        True
    """
    return _fastest(_Args(x, positions, base, inv_freq, layout))


def apply_rope_(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
) -> torch.Tensor:
    """RoPE written into ``x`` itself; returns ``x``.

    No memory is allocated for the result, so nothing is paid for fresh pages: the cost is
    one read and one write of every byte, the least any RoPE can do. Same kernels as
    :func:`rope_blocked` (the Triton kernel on CUDA when available).

    Args:
        x: head vectors ``[..., T, D]``, overwritten.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`;
            positions must not broadcast ``x`` to a larger shape.

    Returns:
        ``x``, rotated.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`, and ValueError when
            positions would broadcast ``x`` to a larger shape.

    Example:
        >>> x = torch.randn(3, 8)
        >>> expected = rope_elementwise(x, [4, 5, 6])
        >>> apply_rope_(x, [4, 5, 6]) is x, torch.equal(x, expected)
        (True, True)
    """
    args = _Args(x, positions, base, inv_freq, layout)
    _inplace(args)
    return x


def _inplace(args: _Args, tables: _Tables | None = None) -> None:
    x = args.x
    if args.out_shape != x.shape:
        raise ValueError(
            f"positions of shape {tuple(args.p.shape)} broadcast x of shape {tuple(x.shape)} "
            f"to {tuple(args.out_shape)}; an in-place rotation must keep x's shape"
        )
    tables = _tables(args) if tables is None else tables
    if _needs_grad(x):  # autograd records the copy; a leaf that needs grad raises here
        x.copy_(_complex(x, tables.rot, args.layout))
    elif x.numel() <= _SMALL or x.device.type not in ("cpu", "cuda"):
        x.copy_(_elementwise(x, tables.cos, tables.sin, args.layout))
    elif _use_triton(x):
        _triton_rotate(x, x, tables, args.layout)
    else:
        _rotate_best(x, x, tables, args.layout)


def _budget_for(x):
    # on a GPU there is no cache to stay in: whole-tensor steps, fewest launches
    return BLOCK_ELEMENTS if x.device.type == "cpu" else max(1, x.numel())


def _rotate_best(src, dst, tables: _Tables, layout: str) -> None:
    """The C loop of :mod:`posenc.fast.cpu_kernel` where it applies (one pass, bit-identical to
    the elementwise form), else the blocks of tensor operations."""
    if cpu_kernel._applicable(src, dst, tables.cos) and cpu_kernel.available():
        cpu_kernel.rotate(src, dst, tables.cos, tables.sin, layout)
    else:
        _rotate_into(src, dst, tables, layout, _budget_for(src))


TRITON_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
"""The dtypes the Triton kernel takes: every GPU Triton supports computes in them (float8
formats are not supported on every architecture; the dispatch sends them to torch)."""


def _use_triton(x) -> bool:
    return (
        x.device.type == "cuda"
        and x.dtype in TRITON_DTYPES
        and triton_available()
        and not _needs_grad(x)
    )


def _fastest(args: _Args, tables: _Tables | None = None) -> torch.Tensor:
    """The default path of ``apply_rope``: the fastest correct kernel for x's device."""
    x = args.x
    tables = _tables(args) if tables is None else tables
    if args.out_shape != x.shape or _needs_grad(x):  # broadcasting positions, or autograd
        return _complex(x.expand(args.out_shape), tables.rot, args.layout)
    if x.numel() <= _SMALL or x.device.type not in ("cpu", "cuda"):
        return _elementwise(x, tables.cos, tables.sin, args.layout)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if _use_triton(x):
        _triton_rotate(x, out, tables, args.layout)
    else:
        _rotate_best(x, out, tables, args.layout)
    return out


def rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
    inplace: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries and keys in one call, with one table for both (looked up or computed once).

    Args:
        q: queries ``[..., H, T, D]``.
        k: keys ``[..., H_kv, T, D]`` (other leading dims allowed, same ``T`` and ``D``).
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`.
        inplace: rotate ``q`` and ``k`` where they are (as :func:`apply_rope_`).

    Returns:
        ``(q_rotated, k_rotated)``; with ``inplace`` these are ``q`` and ``k``.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`, or if ``q`` and ``k``
            differ in ``T`` or ``D``, dtype or device.

    Example:
        >>> q, k = torch.randn(1, 4, 6, 8), torch.randn(1, 2, 6, 8)  # 4 query, 2 key heads
        >>> rq, rk = rope_qk(q, k)
        >>> torch.equal(rq, rope_elementwise(q)), torch.equal(rk, rope_elementwise(k))
        (True, True)
    """
    check_bool("inplace", inplace)
    check_tensor("q", q, min_dim=2)
    check_tensor("k", k, min_dim=2)
    qa = _Args(q, positions, base, inv_freq, layout)
    ka = _Args(k, positions, base, inv_freq, layout)
    if k.shape[-2:] != q.shape[-2:]:
        raise ValueError(
            f"k must have q's last two dims [T, D] = {list(q.shape[-2:])}, got {list(k.shape[-2:])}"
        )
    if k.dtype != q.dtype or k.device != q.device:
        raise ValueError(
            f"q and k must share dtype and device, got {q.dtype} on {q.device} "
            f"and {k.dtype} on {k.device}"
        )
    tables = _tables(qa)  # one table for both
    if inplace:
        _inplace(qa, tables)
        _inplace(ka, tables)
        return q, k
    return _fastest(qa, tables), _fastest(ka, tables)


# --- torch.compile --------------------------------------------------------------------------


def compile_available() -> bool:
    """Whether ``torch.compile`` can be tried here (dynamo supported; a C++ compiler on CPU).

    Returns:
        True when :func:`rope_compiled` may compile; the first call can still fail.

    Example:
        >>> isinstance(compile_available(), bool)
        True
    """
    try:
        import torch._dynamo as dynamo
    except ImportError:  # pragma: no cover - very old or stripped torch
        return False
    supported = getattr(dynamo, "is_dynamo_supported", lambda: True)()
    return bool(supported) and any(shutil.which(c) for c in ("g++", "c++", "clang++", "cc"))


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


# --- Triton -----------------------------------------------------------------------------------


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") == "1"


def triton_available(device: str = "cuda") -> bool:
    """Whether the Triton kernel can run on ``device``.

    On ``"cuda"``: Triton is installed and torch sees a GPU. On ``"cpu"``: Triton is
    installed and its interpreter is switched on (``TRITON_INTERPRET=1``), which runs the
    kernel in numpy, slowly, to check it.

    Args:
        device: ``"cuda"`` or ``"cpu"``.

    Returns:
        True if :func:`rope_triton` can run there.

    Raises:
        ValueError: for another device.

    Example:
        >>> isinstance(triton_available(), bool)
        True
    """
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' or 'cpu', got {device!r}")
    if importlib.util.find_spec("triton") is None:
        return False
    if device == "cuda":
        return torch.cuda.is_available()
    return _interpreting()


@functools.lru_cache(maxsize=2)
def _triton_kernel(interpret: bool):
    """Build the kernel (``interpret`` keys the cache: Triton reads the switch at decoration)."""
    import triton
    import triton.language as tl

    @triton.jit
    def rope_kernel(
        src,
        dst,
        cos,
        sin,
        n_rows,
        length,
        half,
        s_l,
        s_t,
        s_d,
        d_l,
        d_t,
        d_d,
        c_l,
        c_t,
        INTERLEAVED: tl.constexpr,
        BLOCK_ROWS: tl.constexpr,
        BLOCK_HALF: tl.constexpr,
    ):
        # one program: BLOCK_ROWS rows (a row is one vector of D features) x all pairs
        rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
        pairs = tl.arange(0, BLOCK_HALF)
        mask = (rows < n_rows)[:, None] & (pairs < half)[None, :]
        lead = rows // length
        pos = rows % length
        if INTERLEAVED:
            f1 = 2 * pairs
            f2 = f1 + 1
        else:
            f1 = pairs
            f2 = pairs + half
        src_row = (lead * s_l + pos * s_t)[:, None]
        dst_row = (lead * d_l + pos * d_t)[:, None]
        tab = (lead * c_l + pos * c_t)[:, None] + pairs[None, :]
        c = tl.load(cos + tab, mask=mask, other=1.0)
        s = tl.load(sin + tab, mask=mask, other=0.0)
        x1 = tl.load(src + src_row + f1[None, :] * s_d, mask=mask, other=0.0).to(c.dtype)
        x2 = tl.load(src + src_row + f2[None, :] * s_d, mask=mask, other=0.0).to(c.dtype)
        o1 = x1 * c - x2 * s
        o2 = x1 * s + x2 * c
        tl.store(dst + dst_row + f1[None, :] * d_d, o1.to(dst.dtype.element_ty), mask=mask)
        tl.store(dst + dst_row + f2[None, :] * d_d, o2.to(dst.dtype.element_ty), mask=mask)

    return rope_kernel


def _triton_rotate(src, dst, tables: _Tables, layout: str) -> None:
    """One Triton launch per ``[L, T, D]`` view: read ``src`` once, write ``dst`` once."""
    half = src.shape[-1] // 2
    lead = src.shape[:-1]
    cos = tables.cos.expand((*lead, half))
    sin = tables.sin.expand((*lead, half))
    if src.dim() == 2:
        src, dst, cos, sin = (t.unsqueeze(0) for t in (src, dst, cos, sin))
    views = _as_3d(src, dst, cos, sin)
    if views is None or views[2].stride() != views[3].stride() or views[2].stride(-1) != 1:
        for i in range(src.shape[0]):
            _triton_rotate(src[i], dst[i], _Tables(cos[i], sin[i]), layout)
        return
    s3, d3, c3, n3 = views
    n_rows = s3.shape[0] * s3.shape[1]
    block_half = 1 << max(0, (half - 1).bit_length())
    block_rows = max(1, min(128, 4096 // block_half))
    kernel = _triton_kernel(_interpreting())
    grid = (math.ceil(n_rows / block_rows),)
    with _device_guard(src):
        kernel[grid](
            s3,
            d3,
            c3,
            n3,
            n_rows,
            s3.shape[1],
            half,
            *s3.stride(),
            *d3.stride(),
            *c3.stride()[:2],
            INTERLEAVED=layout == "interleaved",
            BLOCK_ROWS=block_rows,
            BLOCK_HALF=block_half,
            enable_fp_fusion=False,  # round each product, then the sum, as the reference
        )


def _device_guard(t):
    return torch.cuda.device(t.device) if t.device.type == "cuda" else contextlib.nullcontext()


def rope_triton(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
    inplace: bool = False,
) -> torch.Tensor:
    """RoPE as one Triton kernel: each program loads a block of rows and their table rows,
    rotates in the angle dtype and stores, so ``x`` is read once and written once.

    Args:
        x: head vectors ``[..., T, D]`` on CUDA (or on the CPU under ``TRITON_INTERPRET=1``).
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`.
        inplace: write into ``x`` and return it.

    Returns:
        The rotated vectors, same shape, dtype and device as ``x``.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`; ValueError for a dtype
            not in :data:`TRITON_DTYPES`.
        RuntimeError: when Triton cannot run on x's device (see :func:`triton_available`).

    Example:
        >>> x = torch.randn(2, 4, 8)
        >>> y = rope_triton(x.cuda()) if triton_available() else x  # doctest: +SKIP
    """
    check_bool("inplace", inplace)
    args = _Args(x, positions, base, inv_freq, layout)
    if x.dtype not in TRITON_DTYPES:
        raise ValueError(f"x must have one of the dtypes {TRITON_DTYPES} for Triton, got {x.dtype}")
    if x.device.type not in ("cuda", "cpu") or not triton_available(x.device.type):
        raise RuntimeError(
            f"the Triton kernel cannot run on {x.device}: it needs Triton and a CUDA tensor "
            "(or TRITON_INTERPRET=1 for a CPU tensor)"
        )
    if args.out_shape != x.shape:
        raise ValueError(
            f"positions of shape {tuple(args.p.shape)} broadcast x of shape {tuple(x.shape)} "
            f"to {tuple(args.out_shape)}; the Triton kernel keeps x's shape"
        )
    out = x if inplace else torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        _triton_rotate(x, out, _tables(args), args.layout)
    return out


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


AGREEMENT_DEFAULT = (
    "dense",
    "elementwise",
    "rotate_half",
    "complex",
    "cached",
    "blocked",
    "rope_qk",
    "apply_rope",
    "apply_rope_",
)
"""What :func:`agreement` checks unless told otherwise (no compilation, no Triton)."""


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
