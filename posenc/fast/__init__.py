"""posenc.fast: RoPE built for speed, with the reference's contract and results.

:func:`posenc.rope.apply_rope` is written to be read; this subpackage computes the same
rotation as fast as the machine allows, and is what chapter 13 and ``python -m posenc.bench``
measure. It depends on the core (:mod:`posenc.rope` validates and defines the arithmetic);
the core never imports it.

- :mod:`posenc.fast.kernels`: every implementation chapter 13 compares, and the dispatch
  behind :func:`apply_rope` that picks the fastest correct one;
- :mod:`posenc.fast.tables`: the ``cos``/``sin`` tables, cached between calls, and
  :func:`rope_angles`, a model's angles made once per step for every layer;
- :mod:`posenc.fast.cpu_kernel`: the one-pass loop in C, compiled on first use;
- :mod:`posenc.fast.triton`: the one-pass Triton kernel for CUDA;
- :mod:`posenc.fast.host`: the host's share of a remembered GPU call (its key and its
  launch's arguments) in C++, compiled on first use.

Use it as ``from posenc import fast`` and call ``fast.apply_rope(x, positions, ...)`` or
``fast.apply_rope_(x, ...)`` (in place) where :func:`posenc.apply_rope` would go.
"""

from posenc.fast.kernels import apply_rope, apply_rope_, rope_qk
from posenc.fast.tables import Angles, cache_clear, cache_info, rope_angles

__all__ = [
    "Angles",
    "apply_rope",
    "apply_rope_",
    "cache_clear",
    "cache_info",
    "rope_angles",
    "rope_qk",
]
