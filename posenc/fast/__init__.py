"""posenc.fast: RoPE built for speed, with the reference's contract and results.

:func:`posenc.rope.apply_rope` is written to be read; this subpackage computes the same
rotation as fast as the machine allows, and is what chapter 13 and ``python -m posenc.bench``
measure. It depends on the core (:mod:`posenc.rope` validates and defines the arithmetic);
the core never imports it.

- :mod:`posenc.fast.dispatch`: :func:`apply_rope`, :func:`apply_rope_` and :func:`rope_qk`,
  each sending a call to the fastest kernel that serves it;
- :mod:`posenc.bench.forms`: every implementation chapter 13 compares, from the dense matrix
  to ``torch.compile``;
- :mod:`posenc.fast.tables`: the ``cos``/``sin`` tables, cached between calls;
- :mod:`posenc.fast.cpu_kernel`: the one-pass loop in C, compiled on first use
  (:mod:`posenc.fast._compiled` keeps the build);
- :mod:`posenc.fast.triton_kernel`: the one-pass Triton kernel for CUDA, and
  :mod:`posenc.fast.triton`, the functions that launch it through ``kernel[grid]`` inside
  operations registered with ``torch.library`` (``posenc.fast._triton_args`` checks what
  they pass it);
- ``posenc.fast._checks``: what a kernel writing through a pointer must check itself
  (aliasing, autograd, ``torch.func``).

Use it as ``from posenc import fast`` and call ``fast.apply_rope(x, positions, ...)`` or
``fast.apply_rope_(x, ...)`` (in place) where :func:`posenc.apply_rope` would go.
"""

from posenc.fast.dispatch import apply_rope, apply_rope_, rope_qk
from posenc.fast.tables import cache_clear, cache_info

__all__ = [
    "apply_rope",
    "apply_rope_",
    "cache_clear",
    "cache_info",
    "rope_qk",
]
