"""A one-pass RoPE loop in C for the CPU, compiled on first use, used when a compiler exists.

PyTorch has no single CPU operation that rotates the pairs of the half layout: written with
tensor operations it takes three or four passes over ``x`` (see
:func:`posenc.fast.kernels.rope_blocked`). A loop that reads each pair once, rotates it and
writes it back touches every byte once; this module holds that loop, a few dozen lines of
C for float32 and float64 and both layouts, and runs it on ``torch.get_num_threads()``
threads with OpenMP (ctypes releases the GIL during the call). Built with OpenMP, the
library shares the OpenMP runtime torch ships when there is one, so both use one pool of
threads; a compiler without OpenMP gives a one-thread loop.

The arithmetic is the elementwise form's: each product rounded, then the sum
(``-ffp-contract=off`` forbids fused multiply-adds), so results are bit-identical to
:func:`posenc.fast.kernels.rope_elementwise`.

The library is built with the system's C compiler (``$CC``, else ``cc``, ``gcc`` or
``clang``), with ``-fopenmp`` and ``-march=native`` where the compiler takes them, into
:func:`posenc.device.cache_dir`, under a name that hashes the source, the compiler, the
flags and the CPU, so a cache shared between machines never loads code built for another
processor. The cache is kept as :mod:`posenc.fast._compiled` describes: a build is checked
against its recorded size and sha256 before it is loaded and built again when damaged,
processes that start together build it once, and a compiler that does not answer within
seconds is given up on and remembered as failed for an hour. Without a compiler (``$CC``
naming a program that is not on the PATH counts as none: no other is taken in its place),
or if the build fails, :func:`available` is False, :func:`status` says why, and ``posenc``
uses its tensor-operation paths instead.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading
from pathlib import Path

import torch

from posenc._validate import check_option, check_tensor, written
from posenc.fast import _compiled

__all__ = ["SOURCE", "available", "rotate", "status"]

SOURCE = r"""
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* One job: rows l in [l0, l1) of x [L, T, D], positions t in [t0, t1). */
typedef struct {
    const void *src;
    void *dst;
    const void *cos_t, *sin_t;
    int64_t l0, l1, t0, t1, T, D, tb;
} job_t;

/* Vectors of 32 bytes where the compiler has them (split into smaller ones elsewhere). */
typedef float vf __attribute__((vector_size(32)));
typedef double vd __attribute__((vector_size(32)));

/* Positions go in tiles of tb, every leading row of a tile in turn, so the tile's rows of
   the cos and sin tables stay in the L1 cache while the rows of x stream past. Each pair
   (a, b) becomes (a c - b s, a s + b c); in the half layout W pairs at a time. */
#define KERNEL(NAME, F, V, A, B, VECTOR)                                                \
    static void NAME(const job_t *j) {                                                  \
        const int64_t T = j->T, D = j->D, h = D / 2, W = sizeof(V) / sizeof(F);         \
        const F *src = j->src, *cos_t = j->cos_t, *sin_t = j->sin_t;                    \
        F *dst = j->dst;                                                                \
        for (int64_t s0 = j->t0; s0 < j->t1; s0 += j->tb) {                             \
            int64_t s1 = s0 + j->tb < j->t1 ? s0 + j->tb : j->t1;                       \
            for (int64_t l = j->l0; l < j->l1; l++) {                                   \
                for (int64_t t = s0; t < s1; t++) {                                     \
                    const F *x = src + (l * T + t) * D, *c = cos_t + t * h;             \
                    const F *s = sin_t + t * h;                                         \
                    F *y = dst + (l * T + t) * D;                                       \
                    int64_t i = 0;                                                      \
                    if (VECTOR) {                                                       \
                        for (; i + W <= h; i += W) {                                    \
                            V a, b, cv, sv;                                             \
                            memcpy(&a, x + i, sizeof a);                                \
                            memcpy(&b, x + i + h, sizeof b);                            \
                            memcpy(&cv, c + i, sizeof cv);                              \
                            memcpy(&sv, s + i, sizeof sv);                              \
                            V u = a * cv - b * sv, w = a * sv + b * cv;                 \
                            memcpy(y + i, &u, sizeof u);                                \
                            memcpy(y + i + h, &w, sizeof w);                            \
                        }                                                               \
                    }                                                                   \
                    for (; i < h; i++) {                                                \
                        F a = x[A], b = x[B];                                           \
                        y[A] = a * c[i] - b * s[i];                                     \
                        y[B] = a * s[i] + b * c[i];                                     \
                    }                                                                   \
                }                                                                       \
            }                                                                           \
        }                                                                               \
    }

KERNEL(half_f32, float, vf, i, i + h, 1)
KERNEL(half_f64, double, vd, i, i + h, 1)
KERNEL(interleaved_f32, float, vf, 2 * i, 2 * i + 1, 0)
KERNEL(interleaved_f64, double, vd, 2 * i, 2 * i + 1, 0)

static void (*const KERNELS[4])(const job_t *) = {half_f32, half_f64, interleaved_f32,
                                                  interleaved_f64};

/* x [L, T, D] (dst may be src); kind 0-3 as KERNELS. The work is split into `workers`
   parts, by leading rows when there are enough, else by positions; with OpenMP the parts
   run on its threads (the same runtime as torch's when torch ships one). */
int rope(int kind, const void *src, void *dst, const void *cos_t, const void *sin_t,
         int64_t L, int64_t T, int64_t D, int64_t tb, int64_t workers) {
    if (kind < 0 || kind > 3 || L < 1 || T < 1 || D < 2 || tb < 1) return -1;
    if (workers < 1) workers = 1;
#ifdef _OPENMP
#pragma omp parallel for num_threads(workers) schedule(static, 1)
#endif
    for (int64_t w = 0; w < workers; w++) {
        job_t job = {src, dst, cos_t, sin_t, 0, L, 0, T, T, D, tb};
        if (L >= workers) {
            job.l0 = L * w / workers;
            job.l1 = L * (w + 1) / workers;
        } else {
            job.t0 = T * w / workers;
            job.t1 = T * (w + 1) / workers;
        }
        KERNELS[kind](&job);
    }
    return 0;
}

/* 1 when the parts run on threads (built with OpenMP), else 0. */
int rope_threaded(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}
"""
"""The C source of the kernel: a loop per layout and dtype, and ``rope``, which splits the
work into parts and runs them on OpenMP's threads when built with it."""

_FLAGS = ("-O3", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared")
# gcc 12 fuses the interleaved multiply-subtract-add pattern (vfmaddsub) in its SLP
# vectorizer even with -ffp-contract=off; without SLP the loop vectorizer still vectorizes
_STRICT = ("-fno-tree-slp-vectorize",)
# tried in this order: the fastest build the compiler accepts
_VARIANTS = (
    ("-fopenmp", "-march=native"),
    ("-fopenmp",),
    ("-march=native",),
    (),
)
_KINDS = {
    ("half", torch.float32): 0,
    ("half", torch.float64): 1,
    ("interleaved", torch.float32): 2,
    ("interleaved", torch.float64): 3,
}
_DTYPES = (torch.float32, torch.float64)
_MIN_ROWS_PER_THREAD = 512
_TABLE_TILE_BYTES = 16 * 1024  # cos and sin rows of one tile of positions: a third of an L1 cache
_BUILD_S = 60  # seconds a build may take (it takes about one)

_lock = threading.Lock()
_state: dict = {}


def _compiler() -> str | None:
    return _compiled.compiler("CC", ("cc", "gcc", "clang"))


def _cpu_identity() -> str:
    """What the compiled code depends on: the machine, and on Linux the CPU's model and
    instruction-set flags."""
    parts = [platform.machine(), platform.processor()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features")):
                    parts.append(line.strip())
                if len(parts) >= 4:
                    break
    except OSError:
        pass
    return "\n".join(parts)


def _open(path: Path):
    """The library at ``path`` with its functions' signatures set (AttributeError when a
    function is missing: a library that is not this kernel's)."""
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.rope.argtypes = [ctypes.c_int] + [ptr] * 4 + [i64] * 5
    lib.rope.restype = ctypes.c_int
    lib.rope_threaded.argtypes = []
    lib.rope_threaded.restype = ctypes.c_int
    return lib


def _library(compiler: str):
    variants = [(*_FLAGS, *_STRICT, *extra) for extra in _VARIANTS]
    return _compiled.load(_open, "rope_kernel", SOURCE, compiler, variants, _cpu_identity(),
                          ".so", ".c", "the kernel", limit=_BUILD_S)  # fmt: skip


def _load():
    """The loaded library, or None; the outcome (and the reason for None) is kept."""
    with _lock:
        if "lib" in _state:
            return _state["lib"]
        lib, why = None, None
        try:
            compiler = _compiler()
            if compiler is None:
                why = "no C compiler found ($CC, cc, gcc or clang)"
            else:
                lib = _library(compiler)
                mismatch = _self_check(lib)
                compiler = os.path.basename(compiler)  # its name, not this machine's path
                if mismatch:
                    lib, why = None, f"built with {compiler} but not bit-identical: {mismatch}"
                elif lib.rope_threaded():
                    why = f"built with {compiler}, OpenMP threads"
                else:
                    why = f"built with {compiler}, one thread (no OpenMP)"
        except (OSError, RuntimeError) as exc:
            lib, why = None, f"{type(exc).__name__}: {exc}"
        _state.update(lib=lib, why=why)
        return lib


def _self_check(lib) -> str | None:
    """Run the loaded kernel against the tensor arithmetic on a few shapes (lengths of rows
    that leave remainders to every vector width); None if all are bit-identical, else what
    differed. A compiler that fuses a multiply and an add despite the flags is caught here."""
    from posenc.rope import _angles, _rotate, rope_inv_freq

    gen = torch.Generator().manual_seed(0)
    for dtype in _DTYPES:
        for pairs in (1, 7, 37, 64):
            x = torch.randn(3, 5, 2 * pairs, generator=gen, dtype=dtype)
            p = torch.tensor([0, 1, -9, 4096, 131071])
            angles = _angles(p, rope_inv_freq(2 * pairs, 10000.0), dtype)
            cos, sin = angles.cos().contiguous(), angles.sin().contiguous()
            for layout in ("interleaved", "half"):
                want = _rotate(x, cos, sin, layout)
                out = torch.empty_like(x)
                _call(lib, x, out, cos, sin, layout, workers=1)
                y = x.clone()
                _call(lib, y, y, cos, sin, layout, workers=1)
                if not (torch.equal(out, want) and torch.equal(y, want)):
                    return f"{layout} layout, {dtype}, D={2 * pairs}"
    return None


def available() -> bool:
    """Whether the C kernel is built and loaded (building it on the first call).

    Returns:
        True when a C compiler built the kernel and it loaded.

    Example:
        >>> isinstance(available(), bool)
        True
    """
    return _load() is not None


def status() -> str:
    """How the kernel was obtained, or why it is not available.

    Returns:
        ``"built with <compiler>"``, or the reason it could not be built or loaded.

    Example:
        >>> status().startswith(("built with", "no C compiler", "RuntimeError", "OSError"))
        True
    """
    _load()
    return _state["why"]


def _applicable(src: torch.Tensor, dst: torch.Tensor, cos: torch.Tensor) -> bool:
    """Whether :func:`rotate` takes these tensors: CPU float32 or float64, ``src`` and
    ``dst`` contiguous ``[..., T, D]`` of one shape and dtype (``dst`` may be ``src``), one
    table row per position (``cos`` contiguous ``[T, D/2]`` in that dtype)."""
    return (
        src.device.type == "cpu"
        and src.dtype in _DTYPES
        and dst.dtype == src.dtype
        and cos.dtype == src.dtype
        and dst.shape == src.shape
        and src.dim() >= 2
        and src.shape[-1] % 2 == 0
        and cos.dim() == 2
        and cos.shape == (src.shape[-2], src.shape[-1] // 2)
        and src.is_contiguous()
        and dst.is_contiguous()
        and cos.is_contiguous()
        and src.numel() > 0
        and dst.device == src.device
        and cos.device == src.device
        and not (src.is_neg() or dst.is_neg())  # a lazy negation: its memory holds -x
    )


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes a contiguous tensor occupies: ``[start, end)``."""
    return t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()


def _check_arguments(src, dst, cos, sin) -> None:
    """Everything the C loop trusts, checked before any pointer is taken: the loop reads and
    writes raw memory, so a tensor it cannot take would crash the process, not raise."""
    tensors = {"src": src, "dst": dst, "cos": cos, "sin": sin}
    for name, t in tensors.items():
        check_tensor(name, t, min_dim=2)
        if t.device.type != "cpu":
            raise ValueError(
                f"{name} must be on device cpu for the C loop, got {name} on device {t.device}"
            )
        if t.dtype != src.dtype:
            raise ValueError(f"{name} must have src's dtype {src.dtype}, got {t.dtype}")
        if t.is_neg():
            raise ValueError(
                f"{name} must not be a lazy negation (its memory holds the negated values, "
                f"e.g. z.conj().imag): pass {name}.resolve_neg()"
            )
    if src.dtype not in _DTYPES:
        raise ValueError(f"src must be float32 or float64 for the C loop, got {src.dtype}")
    dim = src.shape[-1]
    if dim % 2 or src.numel() == 0:
        raise ValueError(f"src must be non-empty with an even last size D, got {tuple(src.shape)}")
    if dst.shape != src.shape:
        raise ValueError(f"dst must have src's shape {tuple(src.shape)}, got {tuple(dst.shape)}")
    table = (src.shape[-2], dim // 2)
    for name in ("cos", "sin"):
        if tuple(tensors[name].shape) != table:
            raise ValueError(
                f"{name} must have shape [T, D/2] = {list(table)}, got {tuple(tensors[name].shape)}"
            )
    for name, t in tensors.items():
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous, got strides {t.stride()}")
    d0, d1 = _span(dst)
    for name in ("src", "cos", "sin"):
        t0, t1 = _span(tensors[name])
        if name == "src" and (t0, t1) == (d0, d1):
            continue  # in place: dst is src
        if t0 < d1 and d0 < t1:
            raise ValueError(f"dst must not overlap {name} (unless dst is src), and it does")


def rotate(
    src: torch.Tensor, dst: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str
) -> None:
    """Write RoPE of ``src`` into ``dst`` (in place when ``dst`` is ``src``) with the kernel.

    The kernel takes CPU tensors of float32 or float64, all contiguous and of one dtype:
    ``src`` and ``dst`` ``[..., T, D]`` of one shape, and one table row per position.

    Args:
        src: vectors ``[..., T, D]``, D even.
        dst: the result, same shape and dtype; may be ``src``.
        cos: ``cos(p theta_i)`` ``[T, D/2]``, contiguous, src's dtype.
        sin: ``sin(p theta_i)``, like ``cos``.
        layout: ``"interleaved"`` or ``"half"``.

    Raises:
        TypeError: if an argument is not a floating tensor.
        ValueError: for an unknown layout, or tensors the kernel cannot take: one not on the
            CPU, of another dtype or shape, not contiguous, or a ``dst`` that overlaps the
            tables (or ``src``, unless it is ``src``). All four are checked before the loop
            sees a pointer.
        RuntimeError: if the kernel is not available (:func:`status` says why).

    Example:
        >>> x = torch.randn(2, 3, 4)
        >>> angles = torch.arange(3.0)[:, None] * torch.tensor([1.0, 0.01])
        >>> if available():
        ...     rotate(x, x, angles.cos(), angles.sin(), "half")
    """
    _check_arguments(src, dst, cos, sin)
    check_option("layout", layout, ("interleaved", "half"))
    lib = _load()
    if lib is None:
        raise RuntimeError(f"the C kernel is not available: {status()}")
    _call(lib, src, dst, cos, sin, layout, torch.get_num_threads())
    written(dst)


def _call(lib, src, dst, cos, sin, layout: str, workers: int) -> None:
    length, dim = src.shape[-2], src.shape[-1]
    lead = src.numel() // (length * dim)
    tile = max(1, _TABLE_TILE_BYTES // (cos.element_size() * dim))  # cos and sin rows of a tile
    workers = max(1, min(workers, lead * length // _MIN_ROWS_PER_THREAD))
    status = lib.rope(
        _KINDS[layout, src.dtype],
        src.data_ptr(),
        dst.data_ptr(),
        cos.data_ptr(),
        sin.data_ptr(),
        lead,
        length,
        dim,
        tile,
        workers,
    )
    if status != 0:  # the arguments were checked above: this is a bug, not bad input
        raise RuntimeError(f"the C kernel refused its arguments (status {status})")
