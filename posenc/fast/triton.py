"""RoPE as one Triton kernel, built for what a model passes it.

A model rotates the queries and keys of every layer, ``q [B, H, T, D]`` and
``k [B, H_kv, T, D]``, usually as views of its projection ``[B, T, H, D]`` (not contiguous
in ``[B, H, T, D]`` order), at positions it keeps on the GPU (``[T]``, ``[B, T]`` or an
offset into a KV cache). The kernel takes all of that as it is:

- **one launch for q and k**: a program per (batch, position) computes that position's
  angles once and rotates every head of both tensors with them;
- **any strides**: each tensor is addressed through its own four strides, so the model's
  transposed view is read where it lies, with no copy;
- **both layouts alike**: the interleaved pairs ``(x[2i], x[2i+1])`` are loaded as whole
  rows and split in registers, the half-split pairs ``(x[i], x[i + D/2])`` as each row's two
  contiguous halves; no feature moves between threads, only each pair's cos and sin, made
  once per program. (An earlier form that loaded the halves separately ran at half the
  speed on an H200, with 8 warps; compiled today, that form makes each cos and sin again in
  every thread holding a copy of the pair, 10 times the float64 work, the likely cause.)
- **no host work that reads the device**: the angles are made in the kernel from the
  positions and ``inv_freq`` (no table to look up or rebuild, no device-to-host copy), so
  a call can be captured in a CUDA graph;
- **launched through public APIs**: ``kernel[grid](...)``, inside two operations registered
  with torch's ``torch.library.triton_op`` (``wrap_triton`` around the kernel, so that
  ``torch.compile`` sees the kernel itself) where the installed torch has it, a plain
  ``torch.library.custom_op`` otherwise. Nothing a call does reads the device back, so a
  decoding step can be captured in a CUDA graph, which removes the host's time per call;
- **training**: the backward is the same kernel turning the other way, registered with the
  operations (``register_autograd``), in eager mode and under ``torch.compile``
  (``fullgraph=True``). Under ``torch.func`` transforms and forward-mode AD, whose tensors
  are wrappers or carry tangents that a kernel writing through pointers cannot see, the same
  arithmetic runs as tensor operations.

The arithmetic is the reference's: the angle ``p * theta_i`` rounded to float32 (float64
for float64 inputs); its cosine and sine evaluated in float64 and rounded once to float32,
the nearest float32 values there are; the rotation in float32 with each product rounded,
then the sum (no fused multiply-add); one rounding to the output dtype. Against the same
rotation in float64 the result is within half a unit in the last place of a bfloat16 or
float16 output, plus float32's own far smaller error. The kernel evaluates the float64
cosines and sines itself (one reduction by pi/2 and both Taylor series; libdevice's, which
reduce each angle twice and read their coefficients from memory, serve angles past 2**30),
and they then cost little time even where memory does not bound it. In one run on an NVIDIA
H200 (bf16, the model's layout, positions given, GPU time alone), a decoding step (B=64)
took 2.78 µs with libdevice's float64 cosines and sines, and 2.46 with the kernel's own and
each row's largest angle checked against 2**30 (an exchange between the program's warps),
as a caller's frequencies are; a build that checked the position instead, as the kernel
does for the frequencies posenc makes from a base (every one at most 1), took 2.29.
Liger-Kernel took 2.12, and ``copy_`` of the same bytes 3.71. At B=1, T=4,096, D=64: 10.87,
10.27 and 9.59 µs; Liger 9.06, ``copy_`` 12.52. In the stored H100 run, with the positions
given, the kernel rotated in place faster than Liger-Kernel on the two large cases and at
0.92 to 1.01 of its speed on the three small ones.

On a CPU the kernel runs only under Triton's interpreter (``TRITON_INTERPRET=1``), which is
how the tests check it without a GPU (within the interpreter's own rounding: see
``triton_kernel.py``); elsewhere the registered op computes the same arithmetic with torch.
Without a GPU the tests also have Triton compile every build for an H100 and for an AMD
MI300, behind a stand-in driver, and find the float64 numbers of the cosines and sines bit
for bit in the Triton IR compiled; ``python -m tools.triton_versions`` runs those tests under
each Triton release from 3.0, the oldest posenc accepts.

Shapes: ``B`` batch, ``H`` heads, ``T`` positions, ``D`` features, ``D/2`` pairs.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os

import torch

from posenc._validate import (
    check_bool,
    check_int,
    check_layout,
    check_no_overlap,
)
from posenc.fast._checks import check_offset_sum, check_writable, one_memory, transforming
from posenc.fast._triton_args import (
    TRITON_DTYPES,
    _check_not_negated,
    _check_qk,
    _check_x,
    _freqs,
    _integer_tensor,
    _positions_rows,
    _spread,
)
from posenc.rope import _rotate

__all__ = ["TRITON_DTYPES", "rope_qk_triton", "rope_triton", "triton_available"]


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") == "1"


def triton_available(device: str = "cuda") -> bool:
    """Whether the Triton kernel can run on ``device``.

    On ``"cuda"``: Triton is installed, torch sees a GPU, and torch registers custom ops
    (``torch.library.custom_op``, torch 2.4 or later). On ``"cpu"``: Triton is installed
    and its interpreter is switched on (``TRITON_INTERPRET=1``), which runs the kernel in
    numpy, slowly, to check it.

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
    if _DEFINE is None or not _INSTALLED:
        return False
    if device == "cuda":
        return torch.cuda.is_available()
    return _interpreting()


_INSTALLED = importlib.util.find_spec("triton") is not None


def _runs_here(device: torch.device) -> bool:
    """Whether the kernel (not the torch stand-in) serves a tensor on ``device``."""
    if device.type == "cuda":
        return _INSTALLED
    return device.type == "cpu" and _interpreting() and _INSTALLED


# --- the kernel -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=2)
def _kernel(interpret: bool):
    """The kernel, built for the GPU or for Triton's interpreter (``interpret`` keys the cache:
    Triton reads the switch when it decorates, so each mode loads its own copy of the file)."""
    path = os.path.join(os.path.dirname(__file__), "triton_kernel.py")
    name = f"posenc.fast.triton_kernel_{'interpreted' if interpret else 'compiled'}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.rope_kernel


_TILE = 4096
"""Elements per tile of heads: 32 heads of 128 features in one load, as a model's q has."""


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


_WARPS = {False: 4, True: 4}
"""Warps per program, for the half-split (False) and interleaved (True) layouts. Timed on an
H100 (Triton 3.6, bf16, q with 32 heads and k with 8, GPU time alone, five cases): 4 warps
gave the best geometric mean of the speed against ``copy_`` in both layouts (1.02, against
1.01 with 2 warps and 0.98 with 8) and the most at a decoding step (1.11 to 1.13 in a CUDA
graph, against 1.03 to 1.07). With 4 warps a thread needs about 70 (half) and 60
(interleaved) registers, so that 7 or 8 programs share a multiprocessor, each with its q and
k loading while it makes its angles. Each pair's cos and sin are made once per program
whatever the warps (a test counts them in the compiled code)."""


_CONSTEXPRS = (
    "HAS_POS", "INTERLEAVED", "INVERSE", "F64", "SMALL_FREQS", "BLOCK_HQ", "BLOCK_HK",
    "BLOCK_HALF",
)  # fmt: skip
"""The kernel's compile-time parameters, in the order of its signature (after the others). The
numbers of heads of q and k and of pairs per head are compile-time constants too, passed among
the others: a model's never change, and with them fixed, heads that fit one tile (a model's
usual case) take no loop and the masks of a whole tile vanish (on an H100 at a decoding step,
2 to 8% faster). ``[N, T, D]`` inputs are
split so that every ``N`` shares a few builds (:func:`_bhtd`)."""


_INTERPRETED_DEVICES = ("cpu",)
"""Device types whose launches go to Triton's interpreter."""


def _launch(q, q_out, k, k_out, pos, offset, inv_freq, interleaved, inverse, small) -> None:
    """Rotate ``q [B, H, T, D]`` into ``q_out`` (and ``k`` into ``k_out``) in one launch.

    ``pos`` is None or integers ``[T]``, ``[B or 1, T]`` or ``[B or 1, 1, T]``;
    ``inv_freq`` ``[D/2]`` on q's device in a dtype of :data:`TRITON_DTYPES` (the kernel
    rounds it to the angle dtype, float64 for float64 q and float32 otherwise, as
    ``Tensor.to`` does), ``small`` whether every one is at most 1;
    ``k`` may have no heads (one tensor rotated alone).
    """
    if q.shape[0] * q.shape[2] == 0:
        return
    interpret = q.device.type in _INTERPRETED_DEVICES
    grid, args, consts = _arguments(q, q_out, k, k_out, pos, offset, inv_freq, interleaved,
                                    inverse, small)  # fmt: skip
    kernel = _kernel(interpret)
    if not interpret:  # the interpreter's kernel is not a JITFunction that torch can wrap
        kernel = _wrap(kernel)
    with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():  # Triton's
        kernel[(grid,)](
            *args,
            **dict(zip(_CONSTEXPRS, consts, strict=True)),
            num_warps=_WARPS[interleaved],
            enable_fp_fusion=False,  # round each product, then the sum, as the reference
        )


_wrap = getattr(torch.library, "wrap_triton", lambda kernel: kernel)
"""torch's ``wrap_triton`` where it has it (2.6 and later): the launch a compiled graph keeps."""


def _arguments(q, q_out, k, k_out, pos, offset, inv_freq, interleaved, inverse, small):
    """The launch of :func:`_launch`: ``(grid, arguments, compile-time arguments)``, the
    arguments in the kernel's order, the compile-time ones in :data:`_CONSTEXPRS`' order."""
    n_b, n_q, length, dim = q.shape
    n_k = k.shape[1]
    if n_k == 0:  # no heads of k: its loop never runs, and q stands in for its (empty) memory
        k, k_out = q, q
    if pos is None:
        p_strides = (0, 0)
    else:  # [T], [B or 1, T] or [B or 1, 1, T]: a batch stride (0 for one row), a position one
        p_strides = (pos.stride(0) if pos.dim() > 1 and pos.shape[0] > 1 else 0, pos.stride(-1))
    args = (
        q, q_out, k, k_out, q if pos is None else pos, inv_freq, length, dim // 2, offset, n_q, n_k,
        *q.stride(), *q_out.stride(), *k.stride(), *k_out.stride(), *p_strides,
    )  # fmt: skip
    consts = (
        pos is not None,  # HAS_POS
        interleaved,
        inverse,
        q.dtype == torch.float64,  # F64: the angle dtype
        small,  # SMALL_FREQS
        *_blocks(n_q, n_k, dim),
    )
    return n_b * length, args, consts


def _heads_per_tile(dim: int) -> int:
    """Head rows of ``D`` features in one tile of at most :data:`_TILE` elements (a power of
    two)."""
    return max(1, _TILE // (2 * _pow2(dim // 2)))


@functools.lru_cache(maxsize=256)
def _blocks(n_q: int, n_k: int, dim: int) -> tuple[int, int, int]:
    """``(BLOCK_HQ, BLOCK_HK, BLOCK_HALF)``: heads of q and of k per tile, pairs per head row
    (powers of two, a tile at most :data:`_TILE` elements)."""
    heads_per_tile = _heads_per_tile(dim)
    return min(_pow2(n_q), heads_per_tile), min(_pow2(max(n_k, 1)), heads_per_tile), _pow2(dim // 2)


def _stand_in(x, pos, offset, inv_freq, interleaved, inverse) -> torch.Tensor:
    """The kernel's arithmetic in torch, for devices the kernel does not run on and for what
    one launch cannot take. ``pos``: None, the kernel's rows (``[T]``, ``[B or 1, T]``, which
    gain the heads' dim here, or ``[B or 1, 1, T]``), or positions of x's leading shape."""
    length = x.shape[-2]
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32  # the angle dtype
    if pos is None:
        t = torch.arange(length, device=x.device)
    else:
        t = pos if pos.dim() == x.dim() - 1 else pos.reshape(-1, 1, length)
    angles = (t + offset).to(dtype)[..., None] * inv_freq.to(dtype)  # [(B, 1,) T, D/2]
    work = angles.to(torch.float64)
    cos, sin = work.cos().to(dtype), work.sin().to(dtype)
    layout = "interleaved" if interleaved else "half"
    return _rotate(x.to(dtype), cos, -sin if inverse else sin, layout).to(x.dtype)


def _kernel_serves(x: torch.Tensor) -> bool:
    """Whether the kernel rotates ``x`` (and the call's other tensors, on its device): not on
    a device it does not run on, nor under a ``torch.func`` transform or a forward-mode AD
    level, where tensors are wrappers or carry tangents, nor while ``torch.compile`` traces a
    call for Triton's interpreter, whose launches it cannot trace (the stand-in's tensor
    operations serve those, with the same arithmetic)."""
    if x.device.type in _INTERPRETED_DEVICES and torch.compiler.is_compiling():
        return False
    return _runs_here(x.device) and not transforming()


# --- the two operations ----------------------------------------------------------------------
# q and k together, out of place (differentiable: the backward is the inverse rotation) and in
# place; one tensor alone is q with a k of no heads. Tensors are [B, H, T, D] views, positions
# None, [T], [B or 1, T] or [B or 1, 1, T] on x's device, inv_freq [D/2] in a dtype the kernel
# loads.


def _rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor | None,
    offset: int,
    inv_freq: torch.Tensor,
    interleaved: bool,
    inverse: bool,
    small: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    if not _kernel_serves(q):
        args = (positions, offset, inv_freq, interleaved, inverse)
        return _stand_in(q, *args), _stand_in(k, *args)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    _launch(q, q_out, k, k_out, positions, offset, inv_freq, interleaved, inverse, small)
    return q_out, k_out


def _rope_qk_(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor | None,
    offset: int,
    inv_freq: torch.Tensor,
    interleaved: bool,
    inverse: bool,
    small: bool,
) -> None:
    if not _kernel_serves(q):
        args = (positions, offset, inv_freq, interleaved, inverse)
        q.copy_(_stand_in(q, *args))
        k.copy_(_stand_in(k, *args))
        return
    _launch(q, q, k, k, positions, offset, inv_freq, interleaved, inverse, small)


_IMPLS = {"rope_qk": _rope_qk, "rope_qk_": _rope_qk_}


_DEFINE = getattr(torch.library, "triton_op", None) or getattr(torch.library, "custom_op", None)
"""torch's ``triton_op`` (2.6 and later) or ``custom_op`` (2.4 and later); None before 2.4."""


_REGISTERED: dict = {}


def _ops() -> dict:
    """The two operations as ``torch.ops.posenc.*``, through ``torch.library.triton_op``
    where this torch has it (2.6 and later: ``torch.compile`` then sees the kernel inside),
    else ``torch.library.custom_op`` (2.4 and later: an opaque operation whose shapes the fake
    functions give). Both differentiable through autograd: the backward is
    the inverse rotation. Registered on first use: ``triton_op`` imports inductor (and
    sympy), which ``import posenc.fast`` must not need."""
    if _REGISTERED:
        return _REGISTERED
    define = _DEFINE
    mutated = {"rope_qk": (), "rope_qk_": ("q", "k")}
    ops = {
        name: define(f"posenc::{name}", _IMPLS[name], mutates_args=mutated[name]) for name in _IMPLS
    }
    if define is not getattr(torch.library, "triton_op", None):  # triton_op traces its body
        ops["rope_qk"].register_fake(lambda q, k, *_: (torch.empty_like(q), torch.empty_like(k)))
        ops["rope_qk_"].register_fake(lambda *_: None)

    def keep(ctx, inputs, output):
        ctx.args = inputs[-6:]  # positions, offset, inv_freq, interleaved, inverse, small

    def rope_qk_backward(ctx, grad_q, grad_k):
        positions, offset, inv_freq, interleaved, inverse, small = ctx.args
        back = (positions, offset, inv_freq, interleaved, not inverse, small)
        return *ops["rope_qk"](grad_q, grad_k, *back), *[None] * 6

    ops["rope_qk"].register_autograd(rope_qk_backward, setup_context=keep)
    _REGISTERED.update(ops)
    return _REGISTERED


def _op(name: str):
    """The operation ``name``: the registered one, or under a ``torch.func`` transform or a
    forward-mode AD level its Python function, whose tensor operations the transforms see
    through (the registered operations have no rules for them)."""
    return _IMPLS[name] if transforming() else _ops()[name]


# --- the public functions -----------------------------------------------------------------------


def _bhtd(x: torch.Tensor) -> torch.Tensor | None:
    """``x [..., T, D]`` as a ``[B, H, T, D]`` view (no copy), or None if its strides forbid.

    ``[N, T, D]`` (often batch and heads flattened) becomes ``[N / h, h, T, D]``, ``h`` the
    largest power of two that divides ``N`` and fits one tile: the kernel compiles for its
    number of heads, so every ``N`` shares the same few builds."""
    if x.dim() == 4:
        return x
    if x.dim() == 3:
        n = x.shape[0]
        h = max(1, min(n & -n, _heads_per_tile(x.shape[-1])))  # n & -n: 2 ** (trailing zeros)
        return x.view(n // h, h, *x.shape[1:])
    if x.dim() < 3:
        return x[(None,) * (4 - x.dim())]
    try:
        return x.view(-1, *x.shape[-3:])
    except RuntimeError:
        return None


def _check_device(x: torch.Tensor) -> None:
    """Last of the checks: every argument is sound, but can the kernel run where x is?"""
    if _DEFINE is None or not _runs_here(x.device):
        raise RuntimeError(
            f"the Triton kernel cannot run on {x.device}: it needs Triton, torch 2.4 or later "
            "and a CUDA tensor (or TRITON_INTERPRET=1 for a CPU tensor)"
        )


def rope_triton(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
    inplace: bool = False,
    offset: int = 0,
) -> torch.Tensor:
    """RoPE by the Triton kernel: ``x`` read once and written once, in one launch.

    Args:
        x: head vectors ``[..., T, D]`` (any strides; ``[B, H, T, D]`` views of a model's
            ``[B, T, H, D]`` projection included) on CUDA, or on the CPU under
            ``TRITON_INTERPRET=1``.
        positions, base, inv_freq, layout: as for :func:`posenc.rope.apply_rope`
            (positions must not broadcast x to a larger shape); tensors stay on the device.
        inplace: write into ``x`` and return it.
        offset: added to every position (a KV cache's length): ``positions + offset``,
            each sum within int64 (a ValueError otherwise; with a non-zero offset, positions on
            a GPU are read once for it, except while a CUDA graph is being captured).

    Returns:
        The rotated vectors: x's shape, dtype and device, a new tensor unless ``inplace``,
        laid out as ``torch.empty_like`` lays out x (x's strides where x is dense, else a
        dense tensor in x's order of dimensions). Differentiable when not in place.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`; ValueError for a dtype
            not in :data:`TRITON_DTYPES`, positions that would enlarge ``x``, or ``inv_freq``
            that requires grad (the kernel has no gradient for it); ValueError for
            ``inplace`` on a tensor whose elements overlap (an expanded view, or windows
            that overlap as ``unfold`` makes).
        RuntimeError: when Triton cannot run on x's device (see :func:`triton_available`),
            or, as torch, for ``inplace`` on a leaf that requires grad.

    Example:
        >>> x = torch.randn(2, 5, 3, 16).transpose(1, 2)  # [B, H, T, D] view of [B, T, H, D]
        >>> x = x.cuda() if triton_available("cuda") else x
        >>> if triton_available(x.device.type):  # on a CPU: under TRITON_INTERPRET=1
        ...     y = rope_triton(x, torch.arange(5) + 7, layout="half")
        ...     assert y.stride() == x.stride() and torch.allclose(y.norm(dim=-1), x.norm(dim=-1))
    """
    check_offset_sum(positions, x, offset)  # the sum must not wrap, however it is made
    check_bool("inplace", inplace)
    _check_x("x", x)
    _check_not_negated(x=x)
    layout = check_layout(layout)
    offset = check_int("offset", offset)
    freqs, small = _freqs(x, base, inv_freq)
    x4 = _bhtd(x)
    rows = None if x4 is None else _positions_rows(positions, x4, x.shape)
    _check_device(x)
    if inplace:
        check_no_overlap("x", x)
        check_writable("x", x)
    if x4 is None or isinstance(rows, str):  # what one launch cannot take: tensor operations
        spread = (
            None if positions is None else _spread(_integer_tensor(positions, x.device), x.shape)
        )
        out = _stand_in(x, spread, offset, freqs, layout == "interleaved", False)
        return x.copy_(out) if inplace else torch.empty_like(x).copy_(out)
    flags = (layout == "interleaved", False, small)
    no_k = x4.new_empty((x4.shape[0], 0, *x4.shape[2:]))  # one tensor: q with a k of no heads
    if not inplace:
        out = _op("rope_qk")(x4, no_k, rows, offset, freqs, *flags)[0]
        return out if x4 is x else out.view(x.shape)
    if torch.is_grad_enabled() and x.requires_grad:  # autograd records the copy
        x.copy_(_op("rope_qk")(x4, no_k, rows, offset, freqs, *flags)[0].view(x.shape))
    else:
        _op("rope_qk_")(x4, no_k, rows, offset, freqs, *flags)
    return x


def rope_qk_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    positions=None,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    layout: str = "half",
    inplace: bool = False,
    offset: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries and keys as a model passes them, rotated in one launch that shares the angles.

    Args:
        q: queries ``[B, H, T, D]`` (any strides: a view of ``[B, T, H, D]`` is read in place).
        k: keys ``[B, H_kv, T, D]``, same ``B``, ``T``, ``D``, dtype and device.
        positions: None (``0 .. T-1``), ``[T]``, or ``[B, T]`` as a model passes
            ``position_ids`` (an integer tensor, best on the device); ``[B, 1, T]``, broadcast
            over the heads, is taken too. ``B`` may be 1 for every batch entry alike.
        base, inv_freq: the frequencies, as for :func:`posenc.rope.apply_rope`.
        layout: ``"half"`` (Hugging Face, the default here) or ``"interleaved"``.
        inplace: rotate ``q`` and ``k`` where they are; one tensor passed as both is rotated
            once, as out of place.
        offset: added to every position (the length of a KV cache); each sum must fit in
            int64.

    Returns:
        ``(q_rotated, k_rotated)``, each with its input's shape and dtype, laid out as
        ``torch.empty_like`` lays out its input (the input's strides where it is dense, as a
        view of a fused projection is not); ``(q, k)`` themselves when ``inplace``.
        Differentiable when not in place.

    Raises:
        TypeError, ValueError: for bad tensors, positions, frequencies (``inv_freq`` that
            requires grad included) or layout, or ``q`` and ``k`` that differ in ``B``, ``T``,
            ``D``, dtype or device; ValueError with ``inplace`` when they share some elements and not others (``k``
            a slice of ``q``).
        RuntimeError: when Triton cannot run on q's device (see :func:`triton_available`),
            or, as torch, for ``inplace`` on a leaf that requires grad (before anything is
            written).

    Example:
        >>> q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 6, 8)  # 4 query, 2 key heads
        >>> q, k = (q.cuda(), k.cuda()) if triton_available("cuda") else (q, k)
        >>> rows = torch.arange(6, device=q.device) + torch.tensor([[0], [100]], device=q.device)
        >>> if triton_available(q.device.type):  # on a CPU: under TRITON_INTERPRET=1
        ...     rq, rk = rope_qk_triton(q, k, rows)  # [B, T]: each batch entry its positions
        ...     assert rq.shape == q.shape and rk.shape == k.shape
    """
    check_offset_sum(positions, q, offset)  # the sum must not wrap, however it is made
    check_bool("inplace", inplace)
    _check_qk(q, k)
    _check_not_negated(q=q, k=k)
    return _checked_qk(q, k, positions, base, inv_freq, layout, inplace, offset)


def _checked_qk(q, k, positions, base, inv_freq, layout, inplace, offset):
    """:func:`rope_qk_triton` once ``q``, ``k`` (:func:`_check_qk`) and ``inplace`` are known
    to be sound: :func:`posenc.fast.rope_qk` checks them on its way here."""
    batch, _, length, _ = q.shape
    layout = check_layout(layout)
    offset = check_int("offset", offset)
    freqs, small = _freqs(q, base, inv_freq)
    rows = None
    if positions is not None:  # [T], [B or 1, T] or [B or 1, 1, T], taken as they are
        rows = _integer_tensor(positions, q.device)
        shape = rows.shape
        if shape[-1:] != (length,) or (
            len(shape) > 1
            and (
                shape[0] not in (1, batch) or len(shape) > 3 or (len(shape) == 3 and shape[1] != 1)
            )
        ):
            raise ValueError(
                f"positions must be [T], [B, T] or [B, 1, T] with B={batch} (or 1) and "
                f"T={length}, got shape {tuple(shape)}"
            )
    _check_device(q)
    flags = (layout == "interleaved", False, small)
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad)
    if not inplace:
        return _op("rope_qk")(q, k, rows, offset, freqs, *flags)
    for name, t in (("q", q), ("k", k)):  # everything checked before anything is written
        check_no_overlap(name, t)
        check_writable(name, t)
    if one_memory("q", q, "k", k):  # one tensor passed twice: rotated once, as out of place
        if rows is not None and rows.dim() == 2:
            rows = rows[:, None]  # [B, T] is per batch entry here; rope_triton reads [B, 1, T]
        rope_triton(q, rows, inv_freq=freqs, layout=layout, inplace=True, offset=offset)
        return q, k
    if grad:  # autograd records the copies
        rq, rk = _op("rope_qk")(q, k, rows, offset, freqs, *flags)
        q.copy_(rq)
        k.copy_(rk)
    else:
        _op("rope_qk_")(q, k, rows, offset, freqs, *flags)
    return q, k
