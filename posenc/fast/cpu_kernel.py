"""A one-pass RoPE loop in C for the CPU, compiled on first use, used when a compiler exists.

PyTorch has no single CPU operation that rotates the pairs of the half layout: written with
tensor operations it takes three or four passes over ``x`` (see
:func:`posenc.bench.forms.rope_blocked`), and a bfloat16 ``x`` or a model's transposed view
cost a copy more. A loop that reads each pair once, rotates it and writes it back touches
every byte once; this module holds that loop, a few dozen lines of C for float32, float64
and bfloat16, both layouts, and ``[B, H, T, D]`` tensors of any strides but a contiguous
``D`` (the ``[B, T, H, D]`` projection a model views as ``[B, H, T, D]`` included), and runs
it on ``torch.get_num_threads()`` threads with OpenMP (ctypes releases the GIL during the
call). Built with OpenMP, the library shares the OpenMP runtime torch ships when there is
one, so both use one pool of threads; a compiler without OpenMP gives a one-thread loop.

The arithmetic is the elementwise form's: each product rounded, then the sum
(``-ffp-contract=off`` forbids fused multiply-adds), in float32 (float64 for float64), then
one rounding to x's dtype, to nearest even as torch rounds: results are bit-identical to
:func:`posenc.bench.forms.rope_elementwise`, which :func:`available` checks before it first
says yes.

The library is built with the system's C compiler (``$CC``, else ``cc``, ``gcc`` or
``clang``), with ``-fopenmp`` and ``-march=native`` where the compiler takes them, into
:func:`posenc.device.cache_dir`, under a name that hashes the source, the compiler, the
flags and the CPU, so a cache shared between machines never loads code built for another
processor (:mod:`posenc.fast._compiled` keeps that cache). Without a compiler, or if the
build fails, :func:`available` is False, :func:`status` says why, and ``posenc`` uses its
tensor-operation paths instead.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading
from pathlib import Path

import torch

from posenc.fast import _compiled

__all__ = ["SOURCE", "available", "status"]

SOURCE = r"""
#include <stdint.h>
#include <string.h>

/* bfloat16 in and out: the upper half of a float32, rounded to nearest even as torch rounds
   it (a NaN becomes torch's quiet NaN) */
static inline float bf_in(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint16_t bf_out(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return f != f ? 0x7FC0 : (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
#define AS_IS(v) (v)

/* A part of the work: x and y [B, H, T, D] by their strides (in elements) of B, H and T,
   D contiguous; the tables [T, D/2]; heads g0 <= b * H + h < g1, positions t0 <= t < t1 in
   tiles of tb. */
typedef struct {
    const void *x;
    void *y;
    const void *c, *s;
    int64_t H, D, xs[3], ys[3], g0, g1, t0, t1, tb;
} job_t;

/* Positions go in tiles, every head of the part in turn, so the tile's rows of the tables
   stay in the L1 cache while the rows of x stream past. Each pair (a, e) becomes
   (a c - e s, a s + e c): each product rounded, then the sum (no fused multiply-add), in the
   angle dtype W, then rounded once to x's dtype F. Out of place (R restrict) x and y are
   told apart; in place one pointer serves both, so that the loop still vectorizes. */
#define LOOP(NAME, F, W, IN, OUT, A, B, R, INPLACE)                                      \
    static void NAME(const job_t *j) {                                                   \
        const int64_t h = j->D / 2;                                                      \
        for (int64_t s0 = j->t0; s0 < j->t1; s0 += j->tb) {                              \
            int64_t s1 = s0 + j->tb < j->t1 ? s0 + j->tb : j->t1;                        \
            for (int64_t g = j->g0; g < j->g1; g++) {                                    \
                int64_t b = g / j->H, hd = g % j->H;                                     \
                for (int64_t t = s0; t < s1; t++) {                                      \
                    F *R y = (F *)j->y + b * j->ys[0] + hd * j->ys[1] + t * j->ys[2];    \
                    const F *R x = INPLACE ? y                                           \
                        : (const F *)j->x + b * j->xs[0] + hd * j->xs[1] + t * j->xs[2]; \
                    const W *restrict c = (const W *)j->c + t * h;                       \
                    const W *restrict s = (const W *)j->s + t * h;                       \
                    for (int64_t i = 0; i < h; i++) {                                    \
                        W a = IN(x[A]), e = IN(x[B]);                                    \
                        y[A] = OUT(a * c[i] - e * s[i]);                                 \
                        y[B] = OUT(a * s[i] + e * c[i]);                                 \
                    }                                                                    \
                }                                                                        \
            }                                                                            \
        }                                                                                \
    }
#define DTYPES(L, A, B)                                                                  \
    LOOP(L##_f32, float, float, AS_IS, AS_IS, A, B, restrict, 0)                         \
    LOOP(L##_f64, double, double, AS_IS, AS_IS, A, B, restrict, 0)                       \
    LOOP(L##_bf16, uint16_t, float, bf_in, bf_out, A, B, restrict, 0)                    \
    LOOP(L##_f32_, float, float, AS_IS, AS_IS, A, B, , 1)                                \
    LOOP(L##_f64_, double, double, AS_IS, AS_IS, A, B, , 1)                              \
    LOOP(L##_bf16_, uint16_t, float, bf_in, bf_out, A, B, , 1)
DTYPES(half, i, i + h)
DTYPES(inter, 2 * i, 2 * i + 1)

static void (*const LOOPS[12])(const job_t *) = {
    half_f32, half_f64, half_bf16, half_f32_, half_f64_, half_bf16_,
    inter_f32, inter_f64, inter_bf16, inter_f32_, inter_f64_, inter_bf16_};

/* RoPE of x into y (y may be x) with the tables c and s. kind: 3 * layout (0 half, 1
   interleaved) + dtype (0 float32, 1 float64, 2 bfloat16). n: B, H, T, D, the strides of B,
   H, T of x then of y, positions per tile, parts. The parts split the heads when there are
   enough, else the positions; with OpenMP they run on its threads (torch's runtime where
   torch ships one). */
int rope(int kind, const void *x, void *y, const void *c, const void *s, const int64_t *n) {
    int64_t B = n[0], H = n[1], T = n[2], D = n[3], tb = n[10], parts = n[11];
    if (kind < 0 || kind > 5 || B < 1 || H < 1 || T < 1 || D < 2 || D % 2 || tb < 1) return -1;
    kind = 6 * (kind / 3) + kind % 3 + (x == y ? 3 : 0);
    if (parts < 1) parts = 1;
#ifdef _OPENMP
#pragma omp parallel for num_threads(parts) schedule(static, 1)
#endif
    for (int64_t w = 0; w < parts; w++) {
        job_t j = {x, y, c, s, H, D, {n[4], n[5], n[6]}, {n[7], n[8], n[9]}, 0, B * H, 0, T, tb};
        if (B * H >= parts) {
            j.g0 = B * H * w / parts;
            j.g1 = B * H * (w + 1) / parts;
        } else {
            j.t0 = T * w / parts;
            j.t1 = T * (w + 1) / parts;
        }
        LOOPS[kind](&j);
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
"""The C source of the kernel: a loop per layout, dtype and kind of call (in place or not),
and ``rope``, which splits the work into parts and runs them on OpenMP's threads when built
with it."""

_FLAGS = ("-O3", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared")
# gcc 12 fuses the interleaved multiply-subtract-add pattern (vfmaddsub) in its SLP
# vectorizer even with -ffp-contract=off; without SLP the loop vectorizer still vectorizes
_STRICT = ("-fno-tree-slp-vectorize",)
# tried in this order: the fastest build the compiler accepts
_VARIANTS = (("-fopenmp", "-march=native"), ("-fopenmp",), ("-march=native",), ())
_DTYPES = {torch.float32: 0, torch.float64: 1, torch.bfloat16: 2}
"""The dtypes the loop takes, by their number in ``rope``'s ``kind``."""
_MIN_ROWS_PER_THREAD = 512
_TABLE_TILE_BYTES = 16 * 1024  # cos and sin rows of one tile of positions: a third of an L1 cache
_BUILD_S = 60  # seconds a build may take (it takes about one)
_SIZES = ctypes.c_int64 * 12

_lock = threading.Lock()
_state: dict = {}


def _cpu_identity() -> str:
    """What the compiled code depends on: the machine, and on Linux the CPU's model and
    instruction-set flags."""
    parts = [platform.machine(), platform.processor()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            parts += [ln.strip() for ln in f if ln.startswith(("model name", "flags", "Features"))][
                :2
            ]
    except OSError:
        pass
    return "\n".join(parts)


def _open(path: Path):
    """The library at ``path`` with its functions' signatures set (AttributeError when a
    function is missing: a library that is not this kernel's)."""
    lib = ctypes.CDLL(str(path))
    lib.rope.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 5
    lib.rope.restype = ctypes.c_int
    lib.rope_threaded.argtypes = []
    lib.rope_threaded.restype = ctypes.c_int
    return lib


def _load():
    """The loaded library, or None; the outcome (and the reason for None) is kept."""
    with _lock:
        if "lib" in _state:
            return _state["lib"]
        lib, why = None, None
        try:
            compiler = _compiled.compiler("CC", ("cc", "gcc", "clang"))
            if compiler is None:
                why = "no C compiler found ($CC, cc, gcc or clang)"
            else:
                variants = [(*_FLAGS, *_STRICT, *extra) for extra in _VARIANTS]
                lib = _compiled.load(_open, "rope_kernel", SOURCE, compiler, variants,
                                     _cpu_identity(), ".so", ".c", "the kernel", limit=_BUILD_S)  # fmt: skip
                mismatch = _self_check(lib)
                compiler = os.path.basename(compiler)  # its name, not this machine's path
                if mismatch:
                    lib, why = None, f"built with {compiler} but not bit-identical: {mismatch}"
                else:
                    threads = "OpenMP threads" if lib.rope_threaded() else "one thread (no OpenMP)"
                    why = f"built with {compiler}, {threads}"
        except (OSError, RuntimeError) as exc:
            lib, why = None, f"{type(exc).__name__}: {exc}"
        _state.update(lib=lib, why=why)
        return lib


def _self_check(lib) -> str | None:
    """Run the loaded kernel against the tensor arithmetic on a few shapes (lengths of rows
    that leave remainders to every vector width, a model's transposed view); None if all are
    bit-identical, else what differed. A compiler that fuses a multiply and an add despite
    the flags is caught here."""
    from posenc.rope import _angles, _rotate, rope_inv_freq

    gen = torch.Generator().manual_seed(0)
    for dtype in _DTYPES:
        work = torch.float64 if dtype == torch.float64 else torch.float32
        for pairs in (1, 7, 37, 64):
            x = torch.randn(2, 5, 3, 2 * pairs, generator=gen).to(dtype).transpose(1, 2)
            p = torch.tensor([0, 1, -9, 4096, 131071])
            angles = _angles(p, rope_inv_freq(2 * pairs, 10000.0), work)
            cos, sin = angles.cos().contiguous(), angles.sin().contiguous()
            for layout in ("interleaved", "half"):
                want = _rotate(x.to(work), cos, sin, layout).to(dtype)
                out, y = torch.empty_like(x), x.contiguous()
                _run(lib, x, out, cos, sin, layout, workers=1)
                _run(lib, y, y, cos, sin, layout, workers=1)
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


def _run(lib, src, dst, cos, sin, layout: str, workers: int) -> None:
    """The loop on checked tensors: ``[..., T, D]`` seen as ``[B, H, T, D]``."""
    shape, dim = src.shape, src.shape[-1]
    pad = 4 - len(shape)
    sizes = (1,) * pad + tuple(shape)
    rows = sizes[0] * sizes[1] * sizes[2]
    n = _SIZES(
        *sizes,
        *(0,) * pad, *src.stride()[:-1],
        *(0,) * pad, *dst.stride()[:-1],
        max(1, _TABLE_TILE_BYTES // (cos.element_size() * dim)),  # cos and sin rows of a tile
        max(1, min(workers, rows // _MIN_ROWS_PER_THREAD)),
    )  # fmt: skip
    kind = (3 if layout == "interleaved" else 0) + _DTYPES[src.dtype]
    code = lib.rope(kind, src.data_ptr(), dst.data_ptr(), cos.data_ptr(), sin.data_ptr(), n)
    if code != 0:  # the arguments were checked: this is a bug, not bad input
        raise RuntimeError(f"the C kernel refused its arguments (status {code})")
