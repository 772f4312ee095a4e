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
- **or none made at all**: a model that makes its angles once per step
  (:func:`posenc.fast.tables.rope_angles`, as transformers makes its ``cos`` and ``sin``)
  hands them to every layer, and the kernel reads them where it would make them. The
  kernel makes its own cosines and sines cheaply (below), so that saves no time: in the
  stored H100 run (bf16, in place, ``posenc/bench/results/rope_peers_h100.json``), a
  decoding step ran at 1.69 of ``copy_``'s speed with the angles made and 1.66 with them
  read, and the smallest prefill case (B=1, T=4,096, D=64) at 1.53 either way;
  Liger-Kernel, which is handed its ``cos`` and ``sin`` the same way, at 1.83 and 1.55;
- **little host work at all**: once Triton has compiled the kernel for a kind of call,
  posenc hands later calls of that kind to the compiled kernel's launcher itself, with the
  arguments Triton would pass, and skips Triton's own launch path (about 20 µs of Python a
  call, more than the kernel's time at a decoding step); and a call of ``rope_qk`` (or
  ``apply_rope``, ``apply_rope_``, ``rope_triton``, ``rope_qk_triton``) alike to one made
  before (the same shapes, strides, dtypes, devices and flags, as every layer's call at
  every step of a model is) skips the checks and the assembly of its launch too, and makes
  the launch that one made with its own tensors (``tests/test_triton_launch.py`` checks
  that the launcher receives what it receives when nothing is remembered). What is left is
  the launcher's own time and the lookup, and posenc reads the lookup's key and assembles
  the launch's arguments in C++ (:mod:`posenc.fast.host`, built on the first such call on
  a GPU), handing the launcher the tensors' addresses as integers (for a tensor, Triton's
  launcher asks it for its address and the driver whether the address is the GPU's), and
  calls the launcher's C function itself where Triton's Python wrapper only passes the
  arguments on (``_c_launch``). On the host of the stored H100 run (Triton 3.6), at a
  decoding step, a remembered in-place ``rope_qk`` took 11 µs of the host's time in the
  benchmark, out of place 15, where ``copy_`` of q and k took 17; in a loop of its own on
  the same host, 15 µs with the key read in C++ against 24 with it read in Python (and 63
  with nothing remembered), ``copy_`` of q alone 11;
- **training**: the backward is the same kernel turning the other way, through a plain
  ``torch.autograd.Function`` in eager mode and through ops registered with
  ``torch.library`` under ``torch.compile`` (``fullgraph=True``). Under ``torch.func``
  transforms and forward-mode AD, whose tensors are wrappers or carry tangents that a kernel
  writing through pointers cannot see, the same arithmetic runs as tensor operations.

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
how the tests check it without a GPU; elsewhere the registered op computes the same
arithmetic with torch. Without a GPU the tests also have Triton compile every build for an
H100 and for an AMD MI300, behind a stand-in driver, and find the float64 numbers of the
cosines and sines bit for bit in the Triton IR compiled; ``python -m tools.triton_versions``
runs those tests under each Triton release from 3.0, the oldest posenc accepts.

Shapes: ``B`` batch, ``H`` heads, ``T`` positions, ``D`` features, ``D/2`` pairs.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Callable
from operator import itemgetter
from typing import NamedTuple

import torch

from posenc._validate import (
    check_base,
    check_bool,
    check_int,
    check_layout,
    check_no_overlap,
    check_offset_sum,
    check_positions,
    check_tensor,
    check_writable,
    one_memory,
    reach,
    transforming,
    written,
)
from posenc.fast import host
from posenc.fast.tables import Angles, _at_most_one, _default_inv_freq, _not_angles
from posenc.rope import _check_inv_freq, _rotate, rope_inv_freq

__all__ = ["TRITON_DTYPES", "rope_qk_triton", "rope_triton", "triton_available"]


TRITON_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
"""The dtypes the Triton kernel takes: every GPU Triton supports computes in them (float8
formats are not supported on every architecture; the dispatch sends them to torch)."""


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
    if _OPS is None or not _INSTALLED:
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
    path = os.path.join(os.path.dirname(__file__), "_rope_kernel.py")
    name = f"posenc.fast._rope_kernel_{'interpreted' if interpret else 'compiled'}"
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
whatever the warps (a test counts them in the compiled code). With the angles read from a
table, a later sweep on the same H100 kept 4 warps: at a decoding step 1.66 of ``copy_``'s
speed, against 1.54 with 2 warps and 1.63 with 8 (2 warps were 1% ahead at B=1, T=4,096,
D=64)."""


_CONSTEXPRS = (
    "HAS_POS", "INTERLEAVED", "INVERSE", "F64", "LIBDEVICE", "SMALL_FREQS", "BY_HAND",
    "BLOCK_HQ", "BLOCK_HK", "BLOCK_HALF", "TABLE",
)  # fmt: skip
"""The kernel's compile-time parameters, in the order of its signature (after the others). The
numbers of heads of q and k and of pairs per head are compile-time constants too, passed among
the others: a model's never change, and with them fixed, heads that fit one tile (a model's
usual case) take no loop and the masks of a whole tile vanish (on an H100 at a decoding step,
2 to 8% faster; at B=1, T=4,096, D=128 with the angles read, 7%). ``[N, T, D]`` inputs are
split so that every ``N`` shares a few builds (:func:`_bhtd`)."""


_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
"""The current GPU's index: torch's own C function behind ``torch.cuda.current_device``, less
its lazy initialisation, which a tensor on a GPU has already done (a microsecond a call)."""

_INTERPRETED_DEVICES = ("cpu",)
"""Device types whose launches go to Triton's interpreter (a test of the GPU's launch path on
a CPU empties it)."""


def _launch(q, q_out, k, k_out, pos, offset, inv_freq, interleaved, inverse) -> None:
    """Rotate ``q [B, H, T, D]`` into ``q_out`` (and ``k`` into ``k_out``) in one launch.

    ``pos`` is None, integers ``[T]``, ``[B or 1, T]`` or ``[B or 1, 1, T]``, or the angles'
    table ``[B or 1, T, 2, D/2]`` (floating, in the angle dtype: see :func:`_is_table`);
    ``inv_freq`` ``[D/2]`` on q's device in a dtype of :data:`TRITON_DTYPES` (the kernel
    rounds it to the angle dtype, float64 for float64 q and float32 otherwise, as
    ``Tensor.to`` does; not read with a table); ``k`` may be None.
    """
    tape = getattr(_TAPE, "calls", None)
    if tape is not None:  # a call being remembered (see _remembered)
        tape.append(("launch", q, q_out, k, k_out, pos, offset, inv_freq, interleaved, inverse))
    if q.shape[0] * q.shape[2] == 0:
        return
    interpret = q.device.type in _INTERPRETED_DEVICES
    call = _arguments(q, q_out, k, k_out, pos, offset, inv_freq, interleaved, inverse, interpret)
    if interpret:
        _by_triton(_kernel(True), *call, interleaved)
        return
    index = q.device.index
    if index == _current_device():
        _run_compiled(index, *call, interleaved)
    else:  # Triton launches on the current device
        with torch.cuda.device(index):
            _run_compiled(index, *call, interleaved)


def _arguments(q, q_out, k, k_out, pos, offset, inv_freq, interleaved, inverse, interpret):
    """The launch of :func:`_launch`: ``(grid, arguments, compile-time arguments)``, the
    arguments in the kernel's order, the compile-time ones in :data:`_CONSTEXPRS`' order."""
    n_b, n_q, length, dim = q.shape
    if k is None:  # no heads of k: its loop never runs, and q stands in for its pointers
        k, k_out, n_k = q, q, 0
    else:
        n_k = k.shape[1]
    table = _is_table(pos)
    if pos is None:
        p_strides = (0, 0)
    elif table:  # [B or 1, T, 2, D/2]: a row of cos and sin per (batch entry, position)
        p_strides = (pos.stride(0) if pos.shape[0] > 1 else 0, pos.stride(1))
    else:  # [T], [B or 1, T] or [B or 1, 1, T]: a batch stride (0 for one row), a position one
        p_strides = (pos.stride(0) if pos.dim() > 1 and pos.shape[0] > 1 else 0, pos.stride(-1))
    args = (
        q, q_out, k, k_out, q if pos is None else pos, inv_freq, length, dim // 2, offset, n_q, n_k,
        *q.stride(), *q_out.stride(), *k.stride(), *k_out.stride(), *p_strides,
    )  # fmt: skip
    consts = (
        pos is not None and not table,  # HAS_POS
        interleaved,
        inverse,
        q.dtype == torch.float64,  # F64: the angle dtype
        not interpret,  # LIBDEVICE
        _at_most_one(inv_freq),  # SMALL_FREQS
        interpret,  # BY_HAND
        *_blocks(n_q, n_k, dim),
        table,
    )
    return n_b * length, args, consts


def _is_table(pos) -> bool:
    """Whether ``pos`` holds the angles' table of :class:`~posenc.fast.tables.Angles` (floating)
    rather than positions (integers)."""
    return pos is not None and pos.is_floating_point()


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


def _by_triton(kernel, grid, args, consts, interleaved):
    """One launch through Triton's own launcher; returns the compiled kernel it ran."""
    return kernel[(grid,)](
        *args,
        **dict(zip(_CONSTEXPRS, consts, strict=True)),
        num_warps=_WARPS[interleaved],
        enable_fp_fusion=False,  # round each product, then the sum, as the reference
    )


_COMPILED: dict[tuple, object] = {}
"""Kernels compiled by Triton, by everything of a call Triton compiles for, on a GPU."""


def _run_compiled(index: int, grid: int, args: tuple, consts: tuple, interleaved: bool) -> None:
    """Launch on GPU ``index`` (the current device), calling the compiled kernel's launcher
    directly once Triton has compiled it for a call like this one.

    Triton's own launch looks at every argument again to choose (or build) the compiled
    kernel: about 20 µs of Python on a fast CPU, more than this kernel takes at a decoding
    step. Which compiled kernel serves a call depends only on the arguments' dtypes, on
    whether each pointer is 16-byte aligned, on the integers' values (the numbers of heads
    and pairs are compile-time constants, and Triton specializes the others on the ones
    equal to 1 and the multiples of 16) and on the offset's width; with all of them
    in the key, a call with the same key is one Triton would send to the same compiled
    kernel, and it gets the arguments Triton would pass (``tests/test_triton_launch.py``
    checks both, against Triton's own launch). Triton versions that launch otherwise, or
    that are newer than the ones checked, and GPUs other than NVIDIA's, keep Triton's own
    launch.
    """
    q, q_out, k, k_out, pos, freqs = args[:6]
    offset = args[8]
    key = (
        index,
        consts,
        args[6:8],
        args[9:],
        *_offset_width(offset),
        q.dtype, q_out.dtype, k.dtype, k_out.dtype, pos.dtype, freqs.dtype,
        q.data_ptr() % 16 == 0, q_out.data_ptr() % 16 == 0, k.data_ptr() % 16 == 0,
        k_out.data_ptr() % 16 == 0, pos.data_ptr() % 16 == 0, freqs.data_ptr() % 16 == 0,
    )  # fmt: skip
    compiled = _COMPILED.get(key)
    tape = getattr(_TAPE, "calls", None)
    if compiled is None:
        compiled = _by_triton(_kernel(False), grid, args, consts, interleaved)
        known = _launcher_known(compiled)
        if tape is not None:
            tape.append(("triton", known))
        if known:
            if len(_COMPILED) >= 4096:  # many shapes seen: start again
                _COMPILED.clear()
            _COMPILED[key] = compiled
        return
    if tape is not None:
        tape.append(("direct", compiled, grid, args, consts))
    _fire(compiled, index, grid, (*args, *consts))


def _fire(compiled, index: int, grid: int, everything: tuple) -> None:
    """Launch ``compiled`` on GPU ``index`` (the current device) by its own launcher, as
    Triton launches it: on the current stream, with the launch hooks Triton keeps, and
    ``everything`` as Triton passes it, every parameter in order. Without hooks, the
    launcher's C function is called directly where :func:`_c_launch` allows."""
    hooks, driver = _launch_state()
    stream = driver.active.get_current_stream(index)
    enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
    # no hook to call (a profiler adds some): no metadata. A hook calls nothing when it is
    # None (Triton 3.4) or a chain of none (from 3.5, whose `calls` Triton still hands the
    # launch metadata it builds); a plain function is its own (truthy) `calls`
    if not getattr(enter, "calls", enter) and not getattr(leave, "calls", leave):
        launch = _C_LAUNCHES.get(compiled, _UNSEEN)
        if launch is _UNSEEN:
            if len(_C_LAUNCHES) >= 4096:
                _C_LAUNCHES.clear()
            launch = _C_LAUNCHES[compiled] = _c_launch(compiled)
        if launch is not None:
            launch(grid, stream, everything)
            return
        enter = leave = metadata = None
    else:
        metadata = compiled.launch_metadata((grid,), stream, *everything)
    compiled.run(
        grid, 1, 1, stream, compiled.function, compiled.packed_metadata, metadata,
        enter, leave, *everything,
    )  # fmt: skip


_C_LAUNCHES: dict = {}
""":func:`_c_launch` of each compiled kernel launched directly."""
_UNSEEN = object()


def _c_launch(compiled) -> Callable | None:
    """``launch(grid, stream, everything)``: a launch of ``compiled`` without hooks, by the C
    function of Triton's launcher called as its Python ``__call__`` calls it, or None where
    that Python does more than pass arguments on (memory for scratch space, a sanitizer) or
    is not Triton's NVIDIA launcher.

    The ``__call__`` of Triton's launcher spends about a microsecond of Python on a 2-core
    cloud CPU (``python -m tools.host_time``) finding that this kernel needs no scratch
    memory, the same answer at every call. Its C function is called three ways: Triton 3.4
    passes one scratch pointer, then the kernel's metadata, the launch metadata, the two
    hooks and the kernel's arguments; 3.5 and 3.6 two scratch pointers, then the same; from
    3.7 the metadata and hooks come first, the arguments last as one tuple, after their
    annotations and signature. ``tests/test_host_time.py`` checks that the C function
    receives exactly what Triton's ``__call__`` gives it (under each, run by
    ``tools/triton_versions.py``). On an H100 (Triton 3.6) the GPU tests launch through it
    and get Triton's numbers bit for bit; that host's time per call showed no gain from it
    beyond the spread between runs."""
    try:
        from triton.backends.nvidia.driver import CudaLauncher
    except ImportError:  # a Triton without its NVIDIA backend
        return None
    run = compiled.run
    if (
        not isinstance(run, CudaLauncher)
        or run.global_scratch_size > 0
        or getattr(run, "profile_scratch_size", 0) > 0  # from Triton 3.5
        or getattr(run, "gsan_enabled", False)  # from Triton 3.8
    ):
        return None
    function, kernel = compiled.function, compiled.packed_metadata
    coop, pdl = run.launch_cooperative_grid, run.launch_pdl
    version = _triton_release()
    if version == (3, 4):

        def launch(grid, stream, everything):
            run.launch(grid, 1, 1, stream, function, coop, pdl, None,
                       kernel, None, None, None, *everything)  # fmt: skip

    elif version in ((3, 5), (3, 6)):

        def launch(grid, stream, everything):
            run.launch(grid, 1, 1, stream, function, coop, pdl, None, None,
                       kernel, None, None, None, *everything)  # fmt: skip

    elif (3, 7) <= version <= _LAUNCHER_VERSIONS[1]:
        notes, signature = run.arg_annotations, run.kernel_signature

        def launch(grid, stream, everything):
            run.launch(grid, 1, 1, stream, function, coop, pdl, kernel, None, None, None,
                       None, None, notes, signature, everything)  # fmt: skip

    else:  # a launch posenc does not repeat: Triton's own
        return None
    return launch


def _triton_release() -> tuple[int, int]:
    """The installed Triton's ``(major, minor)``."""
    import triton

    major, minor = triton.__version__.split(".")[:2]
    return int(major), int(minor)


@functools.lru_cache(maxsize=1)
def _launch_state():
    """Where Triton keeps its launch hooks and its driver (which knows the current stream)."""
    from triton import knobs
    from triton.runtime.driver import driver

    return knobs.runtime, driver


_LAUNCHER_VERSIONS = ((3, 4), (3, 9))
"""The Triton versions (first and last minor) whose launch :func:`_run_compiled` repeats:
from 3.4 every parameter is passed and the hooks live in ``triton.knobs``."""


def _launcher_known(compiled) -> bool:
    """Whether ``compiled``, what Triton's launch returned, can be launched directly: a
    kernel compiled for an NVIDIA GPU by a Triton whose launch posenc repeats (for AMD GPUs
    Triton also compiles apart tensors under and over 2 GB, which posenc's key leaves out)."""
    from triton.compiler import CompiledKernel

    first, last = _LAUNCHER_VERSIONS
    return (
        first <= _triton_release() <= last
        and isinstance(compiled, CompiledKernel)
        and compiled.metadata.target.backend == "cuda"
    )


def _stand_in(x, pos, offset, inv_freq, interleaved, inverse) -> torch.Tensor:
    """The kernel's arithmetic in torch, for devices the kernel does not run on."""
    length = x.shape[-2]
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32  # the angle dtype
    if _is_table(pos):  # [B or 1, T, 2, D/2], made as below
        cos, sin = pos[:, None, :, 0], pos[:, None, :, 1]  # [B or 1, 1, T, D/2]
    else:
        t = torch.arange(length, device=x.device) if pos is None else pos.reshape(-1, 1, length)
        angles = (t + offset).to(dtype)[..., None] * inv_freq.to(dtype)  # [(B, 1,) T, D/2]
        work = angles.to(torch.float64)
        cos, sin = work.cos().to(dtype), work.sin().to(dtype)
    layout = "interleaved" if interleaved else "half"
    return _rotate(x.to(dtype), cos, -sin if inverse else sin, layout).to(x.dtype)


def _kernel_serves(x: torch.Tensor) -> bool:
    """Whether the kernel rotates ``x`` (and the call's other tensors, on its device): not on
    a device it does not run on, nor under a ``torch.func`` transform or a forward-mode AD
    level, where tensors are wrappers or carry tangents (the stand-in's tensor operations
    serve those, with the same numbers)."""
    return _runs_here(x.device) and not transforming()


# --- the four operations ---------------------------------------------------------------------
# Out of place (differentiable: the backward is the inverse rotation) and in place, for one
# tensor and for q and k together. Tensors are [B, H, T, D] views, positions None, [T],
# [B or 1, T] or [B or 1, 1, T] on x's device (or the angles' table [B or 1, T, 2, D/2]),
# inv_freq [D/2] in a dtype the kernel loads.


def _rope(x, positions, offset, inv_freq, interleaved, inverse):
    if not _kernel_serves(x):
        return _stand_in(x, positions, offset, inv_freq, interleaved, inverse)
    out = torch.empty_like(x)
    _launch(x, out, None, None, positions, offset, inv_freq, interleaved, inverse)
    return out


def _rope_qk(q, k, positions, offset, inv_freq, interleaved, inverse):
    if not _kernel_serves(q):
        args = (positions, offset, inv_freq, interleaved, inverse)
        return _stand_in(q, *args), _stand_in(k, *args)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    _launch(q, q_out, k, k_out, positions, offset, inv_freq, interleaved, inverse)
    return q_out, k_out


def _rope_(x, positions, offset, inv_freq, interleaved, inverse):
    if not _kernel_serves(x):
        x.copy_(_stand_in(x, positions, offset, inv_freq, interleaved, inverse))
        return
    _launch(x, x, None, None, positions, offset, inv_freq, interleaved, inverse)


def _rope_qk_(q, k, positions, offset, inv_freq, interleaved, inverse):
    if not _kernel_serves(q):
        args = (positions, offset, inv_freq, interleaved, inverse)
        q.copy_(_stand_in(q, *args))
        k.copy_(_stand_in(k, *args))
        return
    _launch(q, q, k, k, positions, offset, inv_freq, interleaved, inverse)


_IMPLS = {"rope": _rope, "rope_qk": _rope_qk, "rope_": _rope_, "rope_qk_": _rope_qk_}


def _register():
    """The four operations as ``torch.ops.posenc.*`` (torch 2.4 or later; else None):
    opaque to ``torch.compile``, which sees their shapes through the fake functions, and
    differentiable through autograd."""
    if not hasattr(torch.library, "custom_op"):
        return None
    args = "Tensor? positions, int offset, Tensor inv_freq, bool interleaved, bool inverse"
    schemas = {
        "rope": ((), f"(Tensor x, {args}) -> Tensor"),
        "rope_qk": ((), f"(Tensor q, Tensor k, {args}) -> (Tensor, Tensor)"),
        "rope_": (("x",), f"(Tensor(a!) x, {args}) -> ()"),
        "rope_qk_": (("q", "k"), f"(Tensor(a!) q, Tensor(b!) k, {args}) -> ()"),
    }
    ops = {
        name: torch.library.custom_op(f"posenc::{name}", _IMPLS[name], mutates_args=m, schema=s)
        for name, (m, s) in schemas.items()
    }
    ops["rope"].register_fake(lambda x, *_: torch.empty_like(x))
    ops["rope_qk"].register_fake(lambda q, k, *_: (torch.empty_like(q), torch.empty_like(k)))
    ops["rope_"].register_fake(lambda *_: None)
    ops["rope_qk_"].register_fake(lambda *_: None)

    def keep(ctx, inputs, output):
        ctx.args = inputs[-5:]  # positions, offset, inv_freq, interleaved, inverse

    def rope_backward(ctx, grad):
        positions, offset, inv_freq, interleaved, inverse = ctx.args
        return ops["rope"](grad, positions, offset, inv_freq, interleaved, not inverse), *[None] * 5

    def rope_qk_backward(ctx, grad_q, grad_k):
        positions, offset, inv_freq, interleaved, inverse = ctx.args
        grads = ops["rope_qk"](
            grad_q, grad_k, positions, offset, inv_freq, interleaved, not inverse
        )
        return *grads, *[None] * 5

    ops["rope"].register_autograd(rope_backward, setup_context=keep)
    ops["rope_qk"].register_autograd(rope_qk_backward, setup_context=keep)
    return ops


_OPS = _register()


class _Rotation(torch.autograd.Function):
    """Autograd for ``rope`` and ``rope_qk`` outside ``torch.compile``: the same backward as
    the registered ops' (the inverse rotation), without the registered ops' layers of
    Python, which cost tens of microseconds a call."""

    @staticmethod
    def forward(name, *tensors_and_args):
        return _IMPLS[name](*tensors_and_args)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.name, ctx.args = inputs[0], inputs[-5:]

    @staticmethod
    def backward(ctx, *grads):
        positions, offset, inv_freq, interleaved, inverse = ctx.args
        back = (positions, offset, inv_freq, interleaved, not inverse)
        out = _call(ctx.name, *grads, *back, grad=torch.is_grad_enabled())
        return None, *(out if isinstance(out, tuple) else (out,)), *[None] * 5


def _call(name, *tensors_and_args, grad=False):
    """Run an operation: through ``torch.ops.posenc`` under ``torch.compile``, through
    :class:`_Rotation` for autograd, else its Python function directly (the dispatcher costs
    microseconds a call, which is what a decoding step is made of)."""
    if torch.compiler.is_compiling():
        return _OPS[name](*tensors_and_args)
    if grad and not transforming():  # (under torch.func and forward-mode AD, the four
        return _Rotation.apply(name, *tensors_and_args)  # operations' tensor operations)
    result = _IMPLS[name](*tensors_and_args)
    written(*tensors_and_args[: _WRITTEN[name]])
    return result


_WRITTEN = {"rope": 0, "rope_qk": 0, "rope_": 1, "rope_qk_": 2}
"""How many of each operation's first tensors it writes in place."""


# --- calls remembered ---------------------------------------------------------------------------
# At a decoding step the host's work is what a call costs: checking the arguments and assembling
# the launch take longer than the kernel. What they decide (the path, the errors, the kernel's
# arguments but for the pointers, the compiled kernel but for the pointers' alignment) depends
# on the call's shapes, strides, dtypes, devices and flags, not on the tensors' values. So a
# call remembers the launch it made, keyed by all of that, and a later call alike makes the same
# launch with its own tensors, after the one check that depends on where they lie (whether q and
# k, rotated in place, share memory).


class _Direct(NamedTuple):
    """A GPU launch by the compiled kernel's own launcher, as :func:`_run_compiled` made it,
    its tensors picked from a call's sources (see :class:`_Plan`)."""

    compiled: object  # Triton's compiled kernel
    grid: int
    index: int | None  # the GPU's (q's device's index)
    slots: tuple[int, ...]  # the sources of the kernel's six tensors
    sizes: tuple  # the integers before the offset
    rest: tuple  # the integers after it (heads, strides), then the compile-time arguments
    aligned: tuple[bool, ...]  # whether each of the six was 16-byte aligned...
    mask: int  # ...as bits (bit i for the i-th)
    small: bool  # whether the offset fit 32 bits (see _offset_width)


class _Plan(NamedTuple):
    """The launch of a remembered call. Its tensors are picked from the call's sources,
    ``(None, q, q_out, k, k_out, positions or the angles' table, inv_freq, const)``."""

    launch: Callable  # the sources -> _launch's q, q_out, k, k_out, pos, inv_freq
    const: torch.Tensor | None  # the default frequencies, made once on the device
    flags: tuple[bool, bool]  # interleaved, inverse
    direct: _Direct | None  # on an NVIDIA GPU with a Triton whose launch posenc repeats
    spans: tuple[int, int]  # the bytes from q's first element to past its last, and k's


_PLANS: dict[tuple, _Plan | object] = {}
"""Remembered calls, by :func:`_plan_key`. The key leaves out what a program does not change:
the module settings that send calls to one path or another (the tests change them, and start
each test with no call remembered)."""

_OWN_WAY = object()
"""The plan of calls that no launch of their own can serve again from their arguments alone:
none, several, or one of tensors the call made (positions copied to the device, a table made
contiguous). Which calls those are depends on the key only; their own function serves them,
without a tape."""

_TAPE = threading.local()
"""``calls``: the launches of the call being remembered (None when none is)."""


def _plan_key(body, q, k, positions, base, inv_freq, layout, inplace, offset) -> tuple | None:
    """Everything ``body``'s checks and launch depend on but the tensors' values and where
    they lie (``k`` may be None, for a function of one tensor), or None for a call that is
    not remembered: one being compiled, or made under a ``torch.func`` transform or a
    forward-mode AD level, subclasses of torch.Tensor, q not ``[B, H, T, D]``, q on a device
    the kernel does not run on, q passed as k, tensors that need a gradient or carry a
    negative bit, in place on an inference tensor outside inference mode, positions in
    Python, frequencies on the CPU (their values are checked there), arguments of other
    types, or an offset outside int64. Frequencies a caller passes are keyed with whether
    posenc made them (see :func:`~posenc.fast.tables._at_most_one`)."""
    if (
        torch.compiler.is_compiling()
        or transforming()
        or type(offset) is not int
        or not -(2**63) <= offset < 2**63
        or type(inplace) is not bool
        or type(layout) is not str
        or type(base) not in (float, int)
    ):
        return None
    module = host._module
    if module is None:
        return _tensors_key(body, q, k, positions, base, inv_freq, layout, inplace, offset)
    angles = type(positions) is Angles
    table = positions.table if angles else positions
    found = module.signature(q, k, table, angles, inv_freq, inplace)
    if found is None:
        return None
    if found[0] == 1:  # its first byte: q's device type, 1 for CUDA, as in _runs_here
        if not _INSTALLED:
            return None
    elif not _runs_here(q.device):
        return None
    most = None if inv_freq is None else _at_most_one(inv_freq)
    return (body, found, base, layout, inplace, offset == 0, most)


def _tensors_key(body, q, k, positions, base, inv_freq, layout, inplace, offset) -> tuple | None:
    """:func:`_plan_key` read in Python, where :mod:`posenc.fast.host` is not loaded: the
    same calls remembered, keyed alike (its tensors' part is what ``host``'s ``signature``
    reads in C++)."""
    if type(q) is not torch.Tensor:
        return None
    shape, device = q.shape, q.device  # each read once: a decoding step's calls are counted
    if (
        len(shape) != 4  # others are launched as views the call makes
        or not (k is None or type(k) is torch.Tensor)
        or not _runs_here(device)
        or q is k
        or q.requires_grad
        or q.is_neg()
        or (k is not None and (k.requires_grad or k.is_neg()))
        or (  # in place on an inference tensor outside inference mode: the call refuses it
            inplace
            and (q.is_inference() or (k is not None and k.is_inference()))
            and not torch.is_inference_mode_enabled()
        )
    ):
        return None
    if positions is None:
        p = None
    elif type(positions) is torch.Tensor and not positions.is_neg():
        p = (positions.shape, positions.stride(), positions.dtype, positions.device)
    elif type(positions) is Angles and type(positions.table) is torch.Tensor:
        t = positions.table
        if t.requires_grad or t.is_neg():
            return None
        p = ("angles", t.shape, t.stride(), t.dtype, t.device)
    else:
        return None
    if inv_freq is None:
        f = None
    elif (
        type(inv_freq) is torch.Tensor
        and not inv_freq.requires_grad
        and not inv_freq.is_neg()
        and inv_freq.device.type != "cpu"
    ):
        # whether posenc made them (at most 1: the kernel is compiled to tell a row's path
        # from its position) is part of what the launch depends on
        f = (inv_freq.shape, inv_freq.stride(), inv_freq.dtype, inv_freq.device)
        f = (*f, _at_most_one(inv_freq))
    else:
        return None
    kk = None if k is None else (k.shape, k.stride(), k.dtype, k.device)
    return (
        body,
        shape,
        q.stride(),
        q.dtype,
        device,
        kk,
        p,
        f,
        base,
        layout,
        inplace,
        offset == 0,
    )


def _offset_width(offset: int) -> tuple[bool, bool]:
    """What Triton compiles an offset as: a 32-bit integer, a 64-bit one, or an unsigned one."""
    return -(2**31) <= offset < 2**31, offset < 2**63


def _remembered(body, q, k, positions, base, inv_freq, layout, inplace, offset):
    """``body(q, k, positions, base, inv_freq, layout, inplace, offset)``, a function that
    checks a call's arguments and makes its one launch, returning ``(q_out, k_out)``, or
    ``q_out`` alone for ``k`` None: the first time by ``body``, later ones alike by the
    launch ``body`` made (see :class:`_Plan`)."""
    check_offset_sum(positions, q, offset)  # the sum must not wrap, however it is made
    call = (q, k, positions, base, inv_freq, layout, inplace, offset)
    outer = getattr(_TAPE, "calls", None)
    if outer is not None:  # inside a call being remembered: that one is not to be repeated
        outer.append(("nested",))
    key = _plan_key(body, *call)
    if key is None:
        return body(*call)
    plan = _PLANS.get(key)
    if plan is _OWN_WAY:
        return body(*call)
    if plan is not None:
        if inplace and k is not None and _near(plan, q, k) and one_memory("q", q, "k", k):
            return body(*call)  # rotated once, by body (one_memory raises where body raises)
        return _replay(plan, q, k, positions, inv_freq, inplace, offset)
    _TAPE.calls = tape = []
    try:
        result = body(*call)
    finally:
        _TAPE.calls = outer
    plan = _plan(tape, result, *call)
    if plan is not None:
        if len(_PLANS) >= 4096:  # many kinds of call seen: start again
            _PLANS.clear()
        _PLANS[key] = plan
    return result


def _plan(tape, result, q, k, positions, base, inv_freq, layout, inplace, offset):
    """What to remember of a call that made ``tape``'s launches and returned ``result``: its
    :class:`_Plan`; :data:`_OWN_WAY` when no launch of its own can serve a call alike again
    from its arguments alone; or None for nothing yet: Triton compiled the kernel (the next
    call alike is remembered, with the compiled kernel's direct launch), or q and k were one
    memory (rotated once, another way)."""
    if inplace and k is not None and one_memory("q", q, "k", k):
        return None
    if not tape or tape[0][0] != "launch" or len(tape) > 2:
        return _OWN_WAY
    result = (result, None) if k is None else result
    direct = None
    if len(tape) == 2:
        if tape[1][0] == "triton":  # Triton's own launch: the next call launches directly,
            if tape[1][1]:  # unless posenc does not know this launcher
                return None
        elif tape[1][0] != "direct":
            return _OWN_WAY
    if inplace and (result[0] is not q or result[1] is not k):
        return _OWN_WAY
    *tensors, _, freqs, interleaved, inverse = tape[0][1:]
    const = None
    if inv_freq is None and not isinstance(positions, Angles):  # frequencies made for the call
        angle = torch.float64 if q.dtype == torch.float64 else torch.float32
        const = _default_inv_freq(q.shape[-1], float(base), angle, q.device)
    table = positions.table if isinstance(positions, Angles) else positions
    sources = (None, q, result[0], k, result[1], table, inv_freq, const)

    def slot(t):
        return next((i for i, s in enumerate(sources) if s is t), None)

    slots = tuple(slot(t) for t in (*tensors, freqs))
    if None in slots:
        return _OWN_WAY
    if len(tape) == 2 and tape[1][0] == "direct":
        _, compiled, grid, args, consts = tape[1]
        pointers = tuple(slot(t) for t in args[:6])
        if None in pointers:
            return _OWN_WAY
        aligned = tuple(sources[i].data_ptr() % 16 == 0 for i in pointers)
        mask = sum(1 << i for i, a in enumerate(aligned) if a)
        small = _offset_width(offset)[0]  # (the key keeps offsets within 64 bits)
        direct = _Direct(compiled, grid, q.device.index, pointers, args[6:8],
                         (*args[9:], *consts), aligned, mask, small)  # fmt: skip
        if q.is_cuda:  # a GPU's calls: their keys and addresses read in C++ once it is built
            host._start()
    spans = (_span(q), 0 if k is None else _span(k))
    return _Plan(itemgetter(*slots), const, (interleaved, inverse), direct, spans)


def _span(t: torch.Tensor) -> int:
    """The bytes from ``t``'s first element to past its last (0 for no element)."""
    if t.numel() == 0:
        return 0
    return (1 + reach(t)) * t.element_size()


def _near(plan: _Plan, q: torch.Tensor, k: torch.Tensor) -> bool:
    """Whether the spans of q's and k's memory meet: only then can they share an element, and
    :func:`~posenc._validate.one_memory` has anything to tell (the spans are the plan's, since
    the shapes and strides are)."""
    at_q, at_k = q.data_ptr(), k.data_ptr()
    return at_q < at_k + plan.spans[1] and at_k < at_q + plan.spans[0]


def _launch_arguments(direct: _Direct, sources: tuple, offset: int) -> tuple | None:
    """The arguments of ``direct``'s launch for a call's ``sources``: its six tensors'
    addresses as integers (which Triton's launcher takes as they are), the sizes, ``offset``
    and the rest; or None unless each of the six is 16-byte aligned as when ``direct`` was
    made (Triton compiled the kernel for that alignment)."""
    module = host._module
    if module is not None:
        return module.arguments(direct.mask, direct.slots, sources, direct.sizes, offset,
                                direct.rest)  # fmt: skip
    at = tuple([sources[i].data_ptr() for i in direct.slots])
    if tuple([a % 16 == 0 for a in at]) != direct.aligned:
        return None
    return (*at, *direct.sizes, offset, *direct.rest)


def _replay(plan: _Plan, q, k, positions, inv_freq, inplace, offset):
    """The launch of ``plan`` with this call's tensors: ``(q_out, k_out)``, or ``q_out``
    alone for ``k`` None."""
    if inplace:
        q_out, k_out = q, k
    else:
        q_out = torch.empty_like(q)
        k_out = None if k is None else torch.empty_like(k)
    table = positions.table if type(positions) is Angles else positions
    sources = (None, q, q_out, k, k_out, table, inv_freq, plan.const)
    direct = plan.direct
    everything = None
    if (
        direct is not None
        and (-(2**31) <= offset < 2**31) == direct.small  # _offset_width's first, inline
        and direct.index == _current_device()
    ):
        everything = _launch_arguments(direct, sources, offset)
    if everything is not None:
        _fire(direct.compiled, direct.index, direct.grid, everything)
    else:
        q_, q_out_, k_, k_out_, pos, freqs = plan.launch(sources)
        _launch(q_, q_out_, k_, k_out_, pos, offset, freqs, *plan.flags)
    if k is None:
        if inplace:
            written(q)
        return q_out
    if inplace:
        written(q, k)
    return q_out, k_out


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


_DTYPE_SET = frozenset(TRITON_DTYPES)


def _check_x(name: str, x: object) -> torch.Tensor:
    if not (isinstance(x, torch.Tensor) and x.dtype in _DTYPE_SET):  # the shared rule's words
        check_tensor(name, x, min_dim=2)
    elif x.dim() < 2:
        raise ValueError(f"{name} must have at least 2 dimensions, got shape {tuple(x.shape)}")
    length, dim = x.shape[-2:]
    if dim == 0 or dim % 2:
        raise ValueError(f"head dimension must be even and positive, got D={dim}")
    if length == 0:
        raise ValueError(f"{name} must have at least one position, got shape {tuple(x.shape)}")
    if x.dtype not in _DTYPE_SET:
        raise ValueError(f"{name} must have one of the dtypes {TRITON_DTYPES}, got {x.dtype}")
    return x


def _lazily_negated(x: torch.Tensor) -> bool:
    """Whether ``x``'s memory holds its values negated (``z.conj().imag``), which a kernel
    reading memory would take for its values. (Not asked under ``torch.compile``, which
    cannot trace the question.)"""
    return not torch.compiler.is_compiling() and x.is_neg()


def _check_not_negated(**tensors: torch.Tensor) -> None:
    """The kernel reads memory: a lazy negation is refused, with what to pass instead."""
    for name, t in tensors.items():
        if _lazily_negated(t):
            raise ValueError(
                f"{name} must not be a lazy negation (its memory holds the negated values, "
                f"e.g. z.conj().imag): pass {name}.resolve_neg()"
            )


def _check_device(x: torch.Tensor) -> None:
    """Last of the checks: every argument is sound, but can the kernel run where x is?"""
    if _OPS is None or not _runs_here(x.device):
        raise RuntimeError(
            f"the Triton kernel cannot run on {x.device}: it needs Triton, torch 2.4 or later "
            "and a CUDA tensor (or TRITON_INTERPRET=1 for a CPU tensor)"
        )


def _freqs(x, base, inv_freq) -> torch.Tensor:
    """The frequencies on x's device, with no device-to-host copy: given ones stay in their
    own dtype (the kernel rounds them to the angle dtype, so no conversion is launched per
    call) unless the kernel cannot load it (float8); else ``rope_inv_freq`` in the angle
    dtype, made once."""
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    if inv_freq is None:
        base = check_base("base", base)
        if torch.compiler.is_compiling():  # traced into the graph, not looked up
            return rope_inv_freq(x.shape[-1], base).to(device=x.device, dtype=dtype)
        return _default_inv_freq(x.shape[-1], base, dtype, x.device)
    if inv_freq.requires_grad and torch.is_grad_enabled():
        raise ValueError(
            "inv_freq must not require grad: the kernel has no gradient for the frequencies "
            "(posenc.fast.apply_rope takes learned frequencies by the differentiable path)"
        )
    freqs = _on("inv_freq", _check_inv_freq(inv_freq, x.shape[-1]), x.device)
    freqs = freqs if freqs.dtype in _DTYPE_SET else freqs.to(dtype)
    freqs = freqs.resolve_neg() if _lazily_negated(freqs) else freqs  # the kernel reads memory
    return freqs if freqs.is_contiguous() else freqs.contiguous()  # read one after another


def _on(name: str, t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` on ``device``: from the CPU it is copied there (as the reference does); from any
    other device it is refused, since that copy would go through the host."""
    if t.device == device:
        return t
    if t.device.type != "cpu":
        raise ValueError(
            f"{name} must be on x's device or the CPU, got {name} on {t.device} and x on {device}"
        )
    return t.to(device)


def _integer_tensor(positions, device) -> torch.Tensor:
    """Positions as an integer tensor on ``device``: a tensor as it is (copied there from the
    CPU), Python integers by the reference's rule (an int or a flat sequence)."""
    _not_angles(positions)
    if isinstance(positions, torch.Tensor):
        if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"positions must hold integers, got dtype {positions.dtype}")
        if _lazily_negated(positions):  # the kernel reads memory
            positions = positions.resolve_neg()
        return _on("positions", positions, device)
    return check_positions("positions", positions, nonnegative=False).to(device)


def _spread(p: torch.Tensor, x_shape) -> torch.Tensor:
    """Positions ``[..., T]`` as a view of x's leading shape ``[..., T]``, by the reference's
    rule: one entry per position, broadcast without enlarging ``x``."""
    if p.dim() == 0 or p.shape[-1] != x_shape[-2]:
        raise ValueError(
            f"positions must have one entry per position (T={x_shape[-2]}), got shape "
            f"{tuple(p.shape)}"
        )
    try:
        return p.expand(x_shape[:-1])
    except RuntimeError:
        raise ValueError(
            f"positions of shape {tuple(p.shape)} must broadcast to x's leading shape "
            f"{tuple(x_shape[:-1])} without enlarging x"
        ) from None


def _positions_rows(positions, x4: torch.Tensor, x_shape) -> torch.Tensor | str | None:
    """Positions as rows for the kernel (``[T]``, ``[B or 1, T]`` or ``[B or 1, 1, T]``), None
    for ``0 .. T-1``, or ``"heads"`` when they differ between the heads of one batch entry
    (the caller then goes head by head).

    ``positions`` follow :func:`posenc.rope.apply_rope`: ``[T]``, or ``[..., T]`` broadcast
    against x's leading shape ``[..., T]`` without enlarging it.
    """
    if positions is None:
        return None
    p = _integer_tensor(positions, x4.device)
    if p.dim() == 1 and p.shape[0] == x_shape[-2]:
        return p
    if (
        p.dim() == len(x_shape) - 1 == 3
        and p.shape[1] == 1
        and p.shape[0] in (1, x_shape[0])
        and p.shape[2] == x_shape[-2]
    ):
        return p  # [B or 1, 1, T] for [B, H, T, D], as a model passes them: no view to make
    wide = _spread(p, x_shape)
    rows = wide.reshape(x4.shape[:-1])  # [B, H, T], as x4 lays out x's leading dims
    if rows.shape[1] > 1 and rows.stride(1) != 0:
        return "heads"
    return rows[:, 0]


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
    return _remembered(_rope_triton, x, None, positions, base, inv_freq, layout, inplace, offset)


def _rope_triton(x, _, positions, base, inv_freq, layout, inplace, offset):
    """:func:`rope_triton`'s checks and launch (the second argument, k, is None)."""
    check_bool("inplace", inplace)
    _check_x("x", x)
    _check_not_negated(x=x)
    layout = check_layout(layout)
    offset = check_int("offset", offset)
    freqs = _freqs(x, base, inv_freq)
    x4 = _bhtd(x)
    if x4 is None:  # leading dims that do not merge: one slice of the first at a time
        if isinstance(positions, torch.Tensor) and positions.dim() > 1:
            positions = _spread(_integer_tensor(positions, x.device), x.shape)
        if inplace:
            check_no_overlap("x", x)
            check_writable("x", x)
        out = x if inplace else torch.empty_like(x)
        for i in range(x.shape[0]):
            p_i = positions
            if isinstance(positions, torch.Tensor) and positions.dim() > 1:
                p_i = positions[i]
            part = rope_triton(
                x[i], p_i, inv_freq=freqs, layout=layout, inplace=inplace, offset=offset
            )
            if not inplace:
                out[i].copy_(part)
        return out
    rows = _positions_rows(positions, x4, x.shape)
    _check_device(x)
    if isinstance(rows, str):  # per-head positions: one launch per head
        p4 = _integer_tensor(positions, x.device).expand(x.shape[:-1]).reshape(x4.shape[:-1])
        out4 = x4 if inplace else torch.empty_like(x4)
        for h in range(x4.shape[1]):
            out4[:, h : h + 1] = rope_triton(
                x4[:, h : h + 1], p4[:, h : h + 1], inv_freq=freqs, layout=layout, offset=offset
            )
        return x if inplace else out4.view(x.shape)
    flags = (layout == "interleaved", False)
    grad = torch.is_grad_enabled() and x.requires_grad
    if not inplace:
        out = _call("rope", x4, rows, offset, freqs, *flags, grad=grad)
        return out if x4 is x else out.view(x.shape)
    check_no_overlap("x", x)
    check_writable("x", x)
    if grad:  # autograd records the copy
        x.copy_(_call("rope", x4, rows, offset, freqs, *flags, grad=True).view(x.shape))
    else:
        _call("rope_", x4, rows, offset, freqs, *flags)
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
            over the heads, is taken too. ``B`` may be 1 for every batch entry alike. Or the
            :class:`~posenc.fast.tables.Angles` of
            :func:`~posenc.fast.tables.rope_angles`, made once for every layer, read instead
            of made (``base``, ``inv_freq`` and ``offset`` then left at their defaults).
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
            ``D``, dtype or device; ValueError for angles of another shape or dtype than q's,
            or that require grad, or given with ``base``, ``inv_freq`` or ``offset``;
            ValueError with ``inplace`` when they share some elements and not others (``k``
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
    return _remembered(_rope_qk_triton, q, k, positions, base, inv_freq, layout, inplace, offset)


def _rope_qk_triton(q, k, positions, base, inv_freq, layout, inplace, offset):
    check_bool("inplace", inplace)
    _check_qk(q, k)
    _check_not_negated(q=q, k=k)
    return _checked_qk(q, k, positions, base, inv_freq, layout, inplace, offset)


def _check_qk(q: object, k: object) -> None:
    """``q [B, H, T, D]`` and ``k [B, H_kv, T, D]`` as the kernel takes them: alike but for
    the heads, with a dtype it computes in."""
    for name, t in (("q", q), ("k", k)):
        _check_x(name, t)
        if t.dim() != 4:
            raise ValueError(f"{name} must be [B, H, T, D], got shape {tuple(t.shape)}")
    (batch, _, length, dim), k_shape = q.shape, k.shape
    if k_shape[0] != batch or k_shape[2] != length or k_shape[3] != dim:
        raise ValueError(
            f"k must share q's B, T and D, got q {tuple(q.shape)} and k {tuple(k_shape)}"
        )
    if k.dtype != q.dtype or k.device != q.device:
        raise ValueError(
            f"q and k must share dtype and device, got {q.dtype} on {q.device} "
            f"and {k.dtype} on {k.device}"
        )


def _angle_table(angles: Angles, q: torch.Tensor, base, inv_freq, offset: int) -> torch.Tensor:
    """The table of ``angles`` for ``q [B, H, T, D]`` (checked), on q's device: ``[B or 1, T,
    2, D/2]`` in q's angle dtype, with ``base``, ``inv_freq`` and ``offset`` left unset."""
    if inv_freq is not None or offset != 0 or base != 10000.0:
        raise ValueError(
            "angles fix the positions and frequencies: leave base, inv_freq and offset at their "
            f"defaults, got base={base!r}, inv_freq={'a tensor' if inv_freq is not None else None}"
            f", offset={offset}"
        )
    table = angles.table  # [R, T, 2, D/2], checked when made
    batch, _, length, dim = q.shape
    if table.shape[0] not in (1, batch) or table.shape[1:] != (length, 2, dim // 2):
        raise ValueError(
            f"angles.table must be [B or 1, T, 2, D/2] = [{batch} or 1, {length}, 2, {dim // 2}] "
            f"for q of shape {tuple(q.shape)}, got {tuple(table.shape)}"
        )
    want = torch.float64 if q.dtype == torch.float64 else torch.float32
    if table.dtype != want:
        raise ValueError(
            f"angles must be in q's angle dtype, {want} for q in {q.dtype}, got {table.dtype} "
            f"(rope_angles(..., dtype={want}))"
        )
    if table.stride(3) != 1 or table.stride(2) != dim // 2:  # each row [cos, sin] read as one
        table = table.contiguous()
    if _lazily_negated(table):  # the kernel reads memory
        table = table.resolve_neg()
    return _on("angles", table, q.device)


def _checked_qk(q, k, positions, base, inv_freq, layout, inplace, offset):
    """:func:`rope_qk_triton` once ``q``, ``k`` (:func:`_check_qk`) and ``inplace`` are known
    to be sound: :func:`posenc.fast.rope_qk` checks them on its way here."""
    batch, _, length, _ = q.shape
    layout = check_layout(layout)
    offset = check_int("offset", offset)
    if isinstance(positions, Angles):
        rows = _angle_table(positions, q, base, inv_freq, offset)
        if rows.requires_grad and torch.is_grad_enabled():
            raise ValueError(
                "angles must not require grad: the kernel has no gradient for them "
                "(posenc.fast.rope_qk takes them by the differentiable path)"
            )
        freqs = rows  # not read: the kernel reads the table
        positions = None
    else:
        freqs = _freqs(q, base, inv_freq)
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
    flags = (layout == "interleaved", False)
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad)
    if not inplace:
        return _call("rope_qk", q, k, rows, offset, freqs, *flags, grad=grad)
    for name, t in (("q", q), ("k", k)):  # everything checked before anything is written
        check_no_overlap(name, t)
        check_writable(name, t)
    if one_memory("q", q, "k", k):  # one tensor passed twice: rotated once, as out of place
        if _is_table(rows):
            if grad:
                q.copy_(_call("rope", q, rows, offset, freqs, *flags, grad=True))
            else:
                _call("rope_", q, rows, offset, freqs, *flags)
            return q, k
        if rows is not None and rows.dim() == 2:
            rows = rows[:, None]  # [B, T] is per batch entry here; rope_triton reads [B, 1, T]
        rope_triton(q, rows, inv_freq=freqs, layout=layout, inplace=True, offset=offset)
        return q, k
    if grad:  # autograd records the copies
        rq, rk = _call("rope_qk", q, k, rows, offset, freqs, *flags, grad=True)
        q.copy_(rq)
        k.copy_(rk)
    else:
        _call("rope_qk_", q, k, rows, offset, freqs, *flags)
    return q, k
