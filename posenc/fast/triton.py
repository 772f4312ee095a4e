"""RoPE as one Triton kernel: ``x`` read once and written once, on CUDA.

Each program loads a block of rows and their table rows, rotates them in the angle dtype
with the reference's arithmetic (no fused multiply-add) and stores the result. On a CPU the
kernel runs only under Triton's interpreter (``TRITON_INTERPRET=1``), which is how the tests
check it without a GPU.

Shapes: ``T`` positions, ``D`` features, ``D/2`` pairs.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import os

import torch

from posenc._validate import check_bool
from posenc.fast.tables import _Args, _as_3d, _Tables, _tables

__all__ = ["TRITON_DTYPES", "rope_triton", "triton_available"]


TRITON_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
"""The dtypes the Triton kernel takes: every GPU Triton supports computes in them (float8
formats are not supported on every architecture; the dispatch sends them to torch)."""


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
        >>> import os
        >>> if os.environ.get("TRITON_INTERPRET") != "1":  # on a CPU only under the interpreter
        ...     assert not triton_available("cpu")
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
