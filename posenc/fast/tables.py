"""The ``cos``/``sin`` tables of the fast path, computed once and cached between calls.

A model rotates ``q`` and ``k`` of every layer at the same positions, so the tables are
worth keeping: :func:`rope_tables` computes them exactly as the reference does (positions
and frequencies cast to the angle dtype, multiplied, then ``cos`` and ``sin``), and the
cache keeps the last 16 (at most 256 MB), least recently used first out.

On a GPU nothing is cached behind the caller's back (a key would have to read the
positions from the device); a model makes its angles once per step with
:func:`rope_angles`, as transformers makes its ``cos`` and ``sin``, and hands them to
:func:`posenc.fast.rope_qk` in every layer.

Shapes: ``B`` batch, ``T`` positions, ``D`` features, ``D/2`` pairs.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections import OrderedDict

import torch

from posenc._validate import (
    _compiling,
    broadcast_positions,
    check_base,
    check_copyable,
    check_even_dim,
    check_int,
    check_layout,
    check_positions,
)
from posenc.fast._checks import check_offset_sum, transforming
from posenc.rope import _angles, _check_inv_freq, _check_rope_input, _join, rope_inv_freq

__all__ = ["Angles", "cache_clear", "cache_info", "rope_angles", "rope_tables"]


_CACHE_SIZE = 16


_CACHE_BYTES = 256 * 2**20


_CACHE_MAX_POSITIONS = 1 << 16  # explicit positions up to this many entries are cached


class _Args:
    """Validated arguments: ``x``, positions ``p`` (int64 on x's device), the frequencies
    (computed when first asked for), the angle dtype, the layout, the result's shape and
    the cache key of the tables."""

    __slots__ = (
        "_inv_freq",
        "_rope_base",
        "dtype",
        "key",
        "layout",
        "out_shape",
        "p",
        "transformed",
        "x",
    )

    def __init__(self, x, positions, base, inv_freq, layout, offset=0):
        _not_angles(positions)
        x, p = _check_rope_input(x, positions)
        if check_int("offset", offset):
            p = p + offset
        self.layout = check_layout(layout)
        dim = x.shape[-1]
        # under torch.func (grad, vmap) tensors are wrappers with no data of their own: no
        # cache key can be read from them, and only plain tensor operations apply; under
        # torch.compile the tables are traced into the graph, not looked up
        self.transformed = _compiling() or transforming()
        if inv_freq is None:
            self._rope_base = check_base("base", base)
            self._inv_freq = None
            freq_key = ("base", self._rope_base)
        else:
            self._rope_base = None
            self._inv_freq = check_copyable("inv_freq", _check_inv_freq(inv_freq, dim), x.device)
            # a key from the values costs a device-to-host copy unless they are on the CPU;
            # frequencies that are learned are not cached, or their tables would keep the
            # autograd graph of the call that made them
            cached = inv_freq.device.type == "cpu" and not (
                inv_freq.requires_grad or self.transformed
            )
            freq_key = ("inv_freq", _bits(self._inv_freq)) if cached else None
        self.x, self.p = x, p
        self.dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        if p.dim() == 1:
            self.out_shape = x.shape
        else:
            self.out_shape = torch.Size((*broadcast_positions(p.shape, x.shape[:-1]), dim))
        if self.transformed:
            pos_key = None
        elif positions is None:
            pos_key = ("arange", x.shape[-2], offset)
        elif p.device.type == "cpu" and p.numel() <= _CACHE_MAX_POSITIONS:
            pos_key = ("positions", tuple(p.shape), p.numpy().tobytes())
        else:
            pos_key = None  # not cached: hashing would cost a device sync or a long key
        if pos_key is None or freq_key is None:
            self.key = None
        else:
            self.key = (pos_key, dim, freq_key, self.dtype, x.device)

    def sharing(self, x) -> _Args:
        """The same arguments for ``x``, a checked tensor of this one's ``[T, D]``, dtype and
        device (the caller checks that): positions, frequencies and cache key as they are,
        and only the broadcast of the positions over ``x`` made anew."""
        other = object.__new__(_Args)
        for name in self.__slots__:
            setattr(other, name, getattr(self, name))
        other.x = x
        if self.p.dim() == 1:
            other.out_shape = x.shape
            return other
        lead = broadcast_positions(self.p.shape, x.shape[:-1])
        other.out_shape = torch.Size((*lead, x.shape[-1]))
        return other

    @property
    def inv_freq(self) -> torch.Tensor:
        if self._inv_freq is None:
            self._inv_freq = rope_inv_freq(self.x.shape[-1], self._rope_base)
        return self._inv_freq


def _not_angles(positions) -> None:
    """Refuse :class:`Angles` where positions are asked for, saying where they go."""
    if isinstance(positions, Angles):
        raise TypeError(
            "positions must be integers here, got Angles: the angles of rope_angles are taken "
            "by posenc.fast.rope_qk and rope_qk_triton, which rotate q and k [B, H, T, D]"
        )


def _bits(t: torch.Tensor) -> tuple:
    """A CPU tensor's dtype and bytes: equal keys for equal bits (-0.0 is not 0.0 here)."""
    return t.dtype, t.contiguous().view(torch.uint8).numpy().tobytes()


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


@dataclasses.dataclass(frozen=True, eq=False)
class Angles:
    """RoPE's angles for one step of a model, made once by :func:`rope_angles` and read by
    every layer's :func:`posenc.fast.rope_qk`.

    Attributes:
        table: ``cos`` and ``sin`` side by side, ``[R, T, 2, D/2]`` (``R`` is ``B``, or 1 for
            every batch entry alike; ``table[..., 0, :]`` the cosines, ``table[..., 1, :]`` the
            sines), in the angle dtype: float32, or float64 for float64 queries and keys.
            Any strides: the kernel reads each position's row of cos and sin as one, and
            copies a table laid out otherwise first.

    Raises:
        TypeError: for a table that is not a float32 or float64 tensor.
        ValueError: for a table of another shape, or an empty one.

    Example:
        >>> Angles(torch.zeros(1, 3, 2, 4)).cos.shape
        torch.Size([1, 3, 4])
    """

    table: torch.Tensor

    def __post_init__(self):
        table = self.table
        if not isinstance(table, torch.Tensor):
            raise TypeError(f"table must be a torch.Tensor, got {type(table).__name__}")
        if table.dtype not in (torch.float32, torch.float64):
            raise TypeError(
                f"table must be float32 or float64 (the angle dtype), got {table.dtype}"
            )
        if table.dim() != 4 or table.shape[2] != 2 or 0 in table.shape:
            raise ValueError(
                f"table must be [R, T, 2, D/2] (cos and sin), non-empty, got {tuple(table.shape)}"
            )

    @property
    def cos(self) -> torch.Tensor:
        """``[R, T, D/2]``, a view of :attr:`table`."""
        return self.table[..., 0, :]

    @property
    def sin(self) -> torch.Tensor:
        """``[R, T, D/2]``, a view of :attr:`table`."""
        return self.table[..., 1, :]

    def __repr__(self) -> str:
        rows, length, _, half = self.table.shape
        return (
            f"Angles(R={rows}, T={length}, D={2 * half}, dtype={self.table.dtype}, "
            f"device={self.table.device})"
        )


@functools.lru_cache(maxsize=64)
def _default_inv_freq(dim: int, base: float, dtype: torch.dtype, device: torch.device):
    """``rope_inv_freq(dim, base)`` in ``dtype`` on ``device``, made once per key: later calls
    copy nothing to the device (a copy a CUDA graph could not capture)."""
    return rope_inv_freq(dim, base).to(device=device, dtype=dtype)


def rope_angles(
    positions,
    dim: int,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    offset: int = 0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Angles:
    """The angles of one step, made once for every layer, exactly as the kernel makes them.

    Each angle ``(p + offset) * theta_i`` is rounded to ``dtype``; its ``cos`` and ``sin`` are
    evaluated in float64 and rounded once to ``dtype``: for float32, the nearest values there
    are, the ones the Triton kernel makes when it is handed positions (for float64, torch's
    float64 ``cos`` and ``sin``). A few tensor operations on the positions' device, nothing
    read back to the host and, once the default frequencies are on the device (the first
    call puts them there), nothing copied to it, so a CUDA graph can capture them.

    Args:
        positions: integer positions ``[T]``, ``[B, T]`` or ``[B, 1, T]`` (a tensor, best on
            the device; or an int or a sequence of ints, ``[T]``).
        dim: head features ``D`` (even).
        base: frequency base, used when ``inv_freq`` is None.
        inv_freq: the frequencies ``[D/2]`` to use instead (copied to the device).
        offset: added to every position (a KV cache's length); each sum must fit in int64.
        dtype: the angle dtype: float32 (for float32, bfloat16 and float16 queries and keys)
            or float64 (for float64 ones).
        device: where to make them (default: the positions' device).

    Returns:
        :class:`Angles` whose table is ``[R, T, 2, D/2]``, ``R`` being ``B`` (1 for ``[T]``).

    Raises:
        TypeError: for positions that are not integers, another ``dtype``, or a ``dim``,
            ``offset``, ``base`` or ``inv_freq`` of the wrong type.
        ValueError: for another shape of positions, an odd or non-positive ``dim``, a
            ``base`` below 2**-64, ``inv_freq`` of another shape, or a ``device`` this torch
            cannot use (``"cuda"`` on a CPU-only build).

    Example:
        >>> angles = rope_angles(torch.arange(6) + 10, 8, base=100.0)
        >>> angles
        Angles(R=1, T=6, D=8, dtype=torch.float32, device=cpu)
        >>> cos, sin = rope_tables(torch.arange(6) + 10, 8, base=100.0)
        >>> torch.allclose(angles.cos[0], cos) and torch.allclose(angles.sin[0], sin)
        True
    """
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    dim = check_even_dim("dim", dim)
    offset = check_int("offset", offset)
    check_offset_sum(positions, None, offset)
    if isinstance(positions, torch.Tensor) and positions.dim() > 1:
        if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"positions must hold integers, got dtype {positions.dtype}")
        shape = tuple(positions.shape)
        if len(shape) > 3 or (len(shape) == 3 and shape[1] != 1) or shape[-1] == 0:
            raise ValueError(f"positions must be [T], [B, T] or [B, 1, T], got shape {shape}")
        p = positions.reshape(shape[0], shape[-1])
    else:
        p = check_positions("positions", positions, nonnegative=False)[None]
    if device is not None:
        p = _to_device(p, device)
    if inv_freq is None:
        base = check_base("base", base)
        if _compiling():  # traced into the graph, not looked up
            inv_freq = rope_inv_freq(dim, base)
        else:
            inv_freq = _default_inv_freq(dim, base, dtype, p.device)
    else:
        inv_freq = check_copyable(
            "inv_freq", _check_inv_freq(inv_freq, dim), p.device, owner="positions"
        )
    angles = (p.to(torch.int64) + offset).to(dtype)[..., None] * inv_freq.to(p.device, dtype)
    wide = angles.to(torch.float64)  # [R, T, D/2]
    return Angles(torch.stack((wide.cos(), wide.sin()), dim=-2).to(dtype))


def _to_device(p: torch.Tensor, device: object) -> torch.Tensor:
    """``p`` on ``device``, or an error naming the device when this torch has none such (a
    CPU-only torch asked for ``"cuda"`` answers with its own AssertionError)."""
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a str or a torch.device, got {type(device).__name__}")
    try:
        return p.to(device)
    except (AssertionError, RuntimeError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"device must be a device this torch can use, got {device!r}: {reason}"
        ) from None


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


def _lookup(key) -> _Tables | None:
    """The cached tables of ``key`` (see :class:`_Args`), or None."""
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            _cache_stats["hits"] += 1
        return hit


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
