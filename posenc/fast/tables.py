"""The ``cos``/``sin`` tables of the fast path, computed once and cached between calls.

A model rotates ``q`` and ``k`` of every layer at the same positions, so the tables are
worth keeping: :func:`rope_tables` computes them exactly as the reference does (positions
and frequencies cast to the angle dtype, multiplied, then ``cos`` and ``sin``), and the
cache keeps the last 16 (at most 256 MB), least recently used first out.

On a GPU nothing is cached behind the caller's back (a key would have to read the
positions from the device): the Triton kernel makes its angles itself.

Shapes: ``B`` batch, ``T`` positions, ``D`` features, ``D/2`` pairs.
"""

from __future__ import annotations

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
from posenc.fast._checks import transforming
from posenc.rope import _angles, _check_inv_freq, _check_rope_input, _join, rope_inv_freq

__all__ = ["cache_clear", "cache_info", "rope_tables"]


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


@functools.lru_cache(maxsize=64)
def _default_inv_freq(dim: int, base: float, dtype: torch.dtype, device: torch.device):
    """``rope_inv_freq(dim, base)`` in ``dtype`` on ``device``, made once per key: later calls
    copy nothing to the device (a copy a CUDA graph could not capture)."""
    return rope_inv_freq(dim, base).to(device=device, dtype=dtype)


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
