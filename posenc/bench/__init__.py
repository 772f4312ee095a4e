"""Benchmark RoPE: every implementation, the two copy bounds and transformers, in one run.

Command line (``--help`` lists every option)::

    python -m posenc.bench                       # default grid, results in ./bench-results
    python -m posenc.bench --quick --out /tmp/b  # a small grid, in seconds

This module measures; :mod:`posenc.bench.report` turns a result into tables, the targets'
verdicts, figures and files, and ``posenc/bench/__main__.py`` is the command line.

RoPE reads ``q`` and ``k`` and writes them back, so moving those bytes is the yardstick of
every implementation. Two bounds are measured on the same tensors in the same run:

- the **allocation bound**, ``q.clone(), k.clone()``: the copy plus the fresh memory any
  out-of-place result needs;
- the **traffic bound**, ``q_buf.copy_(q), k_buf.copy_(k)`` into buffers that already exist:
  the memory traffic alone (an in-place rotation, which writes back where it read, can
  match it or edge past it).

For every point of a grid (positions ``T``, head size ``D``, dtype, layout) each
implementation of :mod:`posenc.bench.forms` rotates the same ``q`` and ``k`` ``[B, H, T, D]``
and is timed with warm-up rounds and the median of several rounds; the rounds visit the
implementations in turn, so a noisy neighbour slows all of them alike. Reported per row:
time, bytes moved (``q`` and ``k`` read once and written once), achieved bandwidth, the
ratio to each bound (bound time / time: 1 means as fast as the copy) and the speed-up over
transformers' ``apply_rotary_pos_emb`` (the half layout, ``cos``/``sin`` given). Every
output is first checked against the elementwise reference.

On Linux with glibc, large blocks of memory are by default sometimes recycled and
sometimes mapped fresh, depending on the process's history, which makes the cost of a
fresh result jump between runs. With ``fresh_memory`` (the default) the benchmark fixes
glibc's mmap threshold so every large allocation maps fresh pages: the allocation bound then
means the same thing in every run.

Results go to ``rope_bench.json`` (machine-readable) and ``rope_bench.png`` (a plot) in the
output directory.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import torch

from posenc import rope
from posenc._extras import require
from posenc._validate import check_bool, check_int
from posenc.bench import forms as fast_rope
from posenc.fast import cpu_kernel, tables, triton

# the timings compare against transformers' RoPE; the report draws with matplotlib
require("posenc.bench", "transformers", "matplotlib")

__all__ = [
    "BOUNDS",
    "HEADLINE",
    "IMPLEMENTATIONS",
    "TARGET_SHAPE",
    "Config",
    "default_config",
    "dimension_sweep",
    "fresh_memory",
    "measure_targets",
    "quick_config",
    "rows_where",
    "run",
    "time_rounds",
]

IMPLEMENTATIONS = (
    *(name for name in fast_rope.IMPLEMENTATIONS if name not in ("compiled", "triton")),
    "apply_rope",
    "rope_qk",
    "compiled",
    "triton",
    "apply_rope_",
)
"""The RoPE implementations timed, slowest idea first; ``apply_rope_`` works in place.
``blocked`` is the best of tensor operations, ``c`` the one-pass C loop (CPU, float32)."""

BOUNDS = ("clone", "copy_")
"""The allocation bound and the traffic bound."""

REFERENCE = "transformers"
"""transformers' eager ``apply_rotary_pos_emb``, the speed-up reference."""

TARGET_SHAPE = (1, 32, 4096, 64)
"""``[B, H, T, D]`` of the performance targets (float32, CPU)."""

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_TOLERANCE = {"float32": 1e-5, "bfloat16": 1.6e-2, "float16": 4e-3}
"""Largest error, relative to the largest entry, that counts as agreeing with the reference:
a few units in the last place of each dtype."""


@dataclasses.dataclass(frozen=True)
class Config:
    """What to measure.

    Attributes:
        lengths: positions ``T`` of the grid.
        dims: head sizes ``D`` of the grid.
        dtypes: names in ``("float32", "bfloat16", "float16")``.
        layouts: ``"interleaved"`` and/or ``"half"``.
        implementations: names from :data:`IMPLEMENTATIONS`.
        batch, heads: ``B`` and ``H`` of ``q`` and ``k``.
        device: ``"cpu"`` or ``"cuda"``.
        warmup: untimed rounds after the first call of each implementation (which checks
            its output and also warms it up: caches, compilation).
        repeats: timed rounds at most; the median is reported.
        min_repeats: timed rounds at least, even past ``seconds_per_point``.
        seconds_per_point: stop adding rounds to a grid point after this long.
        max_dense_macs: skip ``dense`` when ``q`` and ``k`` need more multiply-adds.
        max_all_elements: when ``q`` and ``k`` hold more elements, time only the headline
            implementations (``apply_rope``, ``apply_rope_``, ``compiled``, ``triton``):
            the others' cost per element is already measured at the smaller points.
        fresh_memory: fix glibc's mmap threshold (see :func:`fresh_memory`).
        seed: for the random ``q`` and ``k``.
        target_rounds: on a CPU, after the grid, time the targets' shape
            (:data:`TARGET_SHAPE`, float32) again with only the bounds, transformers,
            ``apply_rope`` and ``apply_rope_``, in this many rounds (0: skip), so the targets
            are judged on medians of many rounds, not the few a crowded grid point allows.

    Raises:
        TypeError, ValueError: for a field of the wrong type or out of its range, named in
            the message.

    Example:
        >>> Config(lengths=(128, 1024), dims=(64,)).heads
        32
    """

    lengths: tuple[int, ...] = (128, 1024, 4096, 16384)
    dims: tuple[int, ...] = (64, 128)
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    layouts: tuple[str, ...] = rope.LAYOUTS
    implementations: tuple[str, ...] = IMPLEMENTATIONS
    batch: int = 1
    heads: int = 32
    device: str = "cpu"
    warmup: int = 0
    repeats: int = 7
    min_repeats: int = 3
    seconds_per_point: float = 2.0
    max_dense_macs: float = 1.1e9
    max_all_elements: int = 1 << 24
    fresh_memory: bool = True
    seed: int = 0
    target_rounds: int = 21

    def __post_init__(self):
        for name in ("lengths", "dims"):
            values = getattr(self, name)
            if (
                not isinstance(values, tuple)
                or not values
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values)
            ):
                raise ValueError(
                    f"{name} must be a non-empty tuple of positive ints, got {name}={values!r}"
                )
        if any(d % 2 for d in self.dims):
            raise ValueError(f"dims must be even (features come in pairs), got {self.dims}")
        _check_names("dtypes", self.dtypes, tuple(_DTYPES))
        _check_names("layouts", self.layouts, rope.LAYOUTS)
        _check_names("implementations", self.implementations, IMPLEMENTATIONS)
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        for name in ("batch", "heads", "repeats", "min_repeats", "max_all_elements"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("warmup", self.warmup, minimum=0)
        check_int("target_rounds", self.target_rounds, minimum=0)
        check_int("seed", self.seed, minimum=0)
        check_bool("fresh_memory", self.fresh_memory)
        if self.min_repeats > self.repeats:
            raise ValueError(
                f"min_repeats must not exceed repeats, got {self.min_repeats} > {self.repeats}"
            )
        _check_positive("seconds_per_point", self.seconds_per_point)
        _check_positive("max_dense_macs", self.max_dense_macs)


def _check_positive(name: str, value: object) -> float:
    """``value`` if it is a real number above 0 (infinity allowed: no limit)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a positive number, got {value!r} ({type(value).__name__})")
    if not value > 0:  # NaN fails too
        raise ValueError(f"{name} must be positive, got {name}={value}")
    return float(value)


def _check_names(name: str, values: Sequence[str], allowed: tuple[str, ...]) -> None:
    if not isinstance(values, (tuple, list)) or not values or any(v not in allowed for v in values):
        raise ValueError(f"{name} must be a non-empty tuple from {allowed}, got {name}={values!r}")


def default_config(device: str = "cpu") -> Config:
    """The default grid: ``T`` 128 to 16384, ``D`` 64 and 128, float32 and bfloat16
    (and float16 on a GPU), ``B = 1``, ``H = 32``.

    On a 2-core CPU it finishes in under 3 minutes.

    Args:
        device: ``"cpu"`` or ``"cuda"``.

    Returns:
        A :class:`Config`.

    Raises:
        ValueError: for another device.

    Example:
        >>> default_config().lengths
        (128, 1024, 4096, 16384)
    """
    if device == "cuda":
        return Config(
            device="cuda",
            dtypes=("float32", "bfloat16", "float16"),
            warmup=3,
            repeats=20,
            min_repeats=10,
        )
    return Config(device=device)


def quick_config(device: str = "cpu") -> Config:
    """A small grid (``T`` 16 and 64, ``D`` 64, ``H`` 2), no ``torch.compile``: seconds.

    Args:
        device: ``"cpu"`` or ``"cuda"``.

    Returns:
        A :class:`Config`.

    Raises:
        ValueError: for another device.

    Example:
        >>> "compiled" in quick_config().implementations
        False
    """
    return Config(
        lengths=(16, 64),
        dims=(64,),
        heads=2,
        implementations=tuple(i for i in IMPLEMENTATIONS if i != "compiled"),
        repeats=3,
        min_repeats=3,
        seconds_per_point=1.0,
        device=device,
        target_rounds=0,
    )


# --- timing ---------------------------------------------------------------------------------


def fresh_memory(apply: bool = True) -> str:
    """Make every large allocation map fresh pages (glibc only); say what was done.

    glibc's malloc raises its mmap threshold as large blocks are freed, so whether a fresh
    32 MB tensor costs page faults depends on what the process did before. Fixing the
    threshold at its default (128 KiB) turns that adjustment off for this process.

    Args:
        apply: change the setting; with False only say what applying would do.

    Returns:
        A short description of the allocator setting, for the results file.

    Example:
        >>> fresh_memory(apply=False).split(",")[0] in ("glibc", "system allocator")
        True
    """
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return "system allocator, unchanged (not glibc)"
    done = "glibc, blocks of 128 KiB and more always mapped fresh (mmap threshold fixed)"
    if not apply:
        return done
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_mmap_threshold = -3
        if libc.mallopt(m_mmap_threshold, 128 * 1024) != 1:
            return "glibc, unchanged (mallopt refused)"
    except OSError:
        return "glibc, unchanged (libc not loadable)"
    return done


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_rounds(
    fns: dict[str, Callable[[], object]],
    *,
    warmup: int = 1,
    repeats: int = 5,
    min_repeats: int = 3,
    seconds: float = math.inf,
    device: str = "cpu",
) -> dict[str, list[float]]:
    """Time several functions in rounds: each round calls every function once, in turn.

    Args:
        fns: name to a function of no arguments.
        warmup: untimed rounds first.
        repeats: timed rounds at most.
        min_repeats: timed rounds at least.
        seconds: stop after the round in which this much time has passed (once
            ``min_repeats`` rounds are done).
        device: ``"cuda"`` synchronises around each call.

    Returns:
        name to the list of times in seconds, one per timed round.

    Raises:
        TypeError: if ``fns`` is not a dict of callables, or a count or ``seconds`` is not a
            number.
        ValueError: for an empty ``fns``, round counts below 1 (``warmup`` may be 0),
            ``min_repeats`` above ``repeats``, a negative or NaN ``seconds``, or an unknown
            ``device``.

    Example:
        >>> times = time_rounds({"sum": lambda: sum(range(100))}, repeats=3)
        >>> len(times["sum"])
        3
    """
    if not isinstance(fns, dict):
        raise TypeError(f"fns must be a dict of name to function, got {fns!r}")
    if not fns:
        raise ValueError(f"fns must name at least one function, got fns={fns!r}")
    for name, fn in fns.items():
        if not callable(fn):
            raise TypeError(f"fns[{name!r}] must be callable, got {fn!r}")
    check_int("warmup", warmup, minimum=0)
    check_int("repeats", repeats, minimum=1)
    check_int("min_repeats", min_repeats, minimum=1)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"seconds must be a number, got {seconds!r} ({type(seconds).__name__})")
    if not seconds >= 0:  # NaN fails too
        raise ValueError(f"seconds must be at least 0, got seconds={seconds}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got device={device!r}")
    if min_repeats > repeats:
        raise ValueError(f"min_repeats must not exceed repeats, got {min_repeats} > {repeats}")
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    _sync(device)
    times: dict[str, list[float]] = {name: [] for name in fns}
    start = time.perf_counter()
    for done in range(1, repeats + 1):
        for name, fn in fns.items():
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            times[name].append(time.perf_counter() - t0)
        if done >= min_repeats and time.perf_counter() - start > seconds:
            break
    return times


# --- the grid ---------------------------------------------------------------------------------


def _transformers_rope():
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except ImportError:  # transformers is a dependency, but keep the benchmark usable without
        return None
    return apply_rotary_pos_emb


def _out_of_place(fn, layout):
    return lambda q, k: (fn(q, layout=layout), fn(k, layout=layout))


def _implementation(name: str, layout: str):
    """``(call, in_place)``: ``call(q, k)`` returns the two results (or rotates in place)."""
    if name == "apply_rope":
        return _out_of_place(fast_rope.apply_rope, layout), False
    if name == "apply_rope_":
        return _out_of_place(fast_rope.apply_rope_, layout), True
    if name == "rope_qk":
        return (lambda q, k: fast_rope.rope_qk(q, k, layout=layout)), False
    funcs = {
        "dense": fast_rope.rope_dense,
        "elementwise": fast_rope.rope_elementwise,
        "rotate_half": fast_rope.rope_rotate_half,
        "complex": fast_rope.rope_complex,
        "cached": fast_rope.rope_cached,
        "blocked": fast_rope.rope_blocked,
        "c": fast_rope.rope_c,
        "compiled": fast_rope.rope_compiled,
        "triton": triton.rope_triton,
    }
    if name in funcs:
        return _out_of_place(funcs[name], layout), False
    raise ValueError(f"unknown implementation {name!r}; choose from {IMPLEMENTATIONS}")


HEADLINE = ("apply_rope", "apply_rope_", "compiled", "triton")
"""The implementations timed at every grid point, however large."""


def _unavailable(name: str, config: Config, macs: int, dim: int, dtype: torch.dtype) -> str | None:
    """Why ``name`` is not timed at this point, or None."""
    if name == "dense" and macs > config.max_dense_macs:
        return f"skipped: {macs:.2g} multiply-adds (D^2 per vector)"
    if name not in HEADLINE and macs // dim > config.max_all_elements:
        return "skipped: measured at smaller T"
    if name == "compiled" and not fast_rope.compile_available():
        return "unavailable: torch.compile needs dynamo and a C++ compiler"
    if name == "triton" and not (config.device == "cuda" and triton.triton_available()):
        return "unavailable: needs CUDA and Triton"
    if name == "c" and config.device != "cpu":
        return "unavailable: a CPU loop"
    if name == "c" and dtype != torch.float32 and dtype != torch.float64:
        return "unavailable: float32 and float64 only"
    if name == "c" and not cpu_kernel.available():
        return f"unavailable: {cpu_kernel.status()}"[:120]
    return None


class _Reference:
    """The elementwise results on a few heads of ``q`` and ``k``, per layout, computed once
    and compared with every implementation's output (relative to the largest entry)."""

    def __init__(self, q, k, heads):
        self.q, self.k, self.heads, self._want = q, k, heads, {}

    def error(self, got, layout: str) -> float:
        if layout not in self._want:
            self._want[layout] = [
                (x.narrow(1, h, 1), fast_rope.rope_elementwise(x.narrow(1, h, 1), layout=layout))
                for x in (self.q, self.k)
                for h in self.heads
            ]
        errors = []
        for i, out in enumerate(got):
            for j, h in enumerate(self.heads):
                want = self._want[layout][i * len(self.heads) + j][1].float()
                diff = (out.narrow(1, h, 1).float() - want).abs().max()
                errors.append(float(diff / want.abs().max().clamp_min(1e-30)))
        return max(errors)


def _try_implementation(name, layout, q, k, q_buf, k_buf, reference, tol):
    """Run ``name`` once and check it against the reference: ``(the call to time, or None
    when it failed here, and what the row records)``."""
    call, in_place = _implementation(name, layout)
    try:
        if in_place:
            q_buf.copy_(q)
            k_buf.copy_(k)
            call(q_buf, k_buf)
            got = (q_buf, k_buf)
        else:
            got = call(q, k)
    except RuntimeError as err:  # compile or kernel failure on this machine
        return None, {"layout": layout, "note": f"failed: {err}"[:160]}
    err = reference.error(got, layout)
    info = {"layout": layout, "max_error": err, "ok": err <= tol}
    if in_place:
        return (lambda: call(q_buf, k_buf)), info
    return (lambda: call(q, k)), info


def _row(config: Config, dtype_name, length, dim, key, info, times, moved) -> dict:
    """One row of the result: an implementation (or bound) at one grid point."""
    med = {name: statistics.median(v) for name, v in times.items()}
    name = key.split("/")[0]
    seconds = med.get(key)

    def per(value):  # None for a row that was not timed
        return None if seconds is None else value(seconds)

    return {
        "device": config.device,
        "dtype": dtype_name,
        "batch": config.batch,
        "heads": config.heads,
        "length": length,
        "dim": dim,
        "layout": info["layout"],
        "implementation": name,
        "in_place": name == "apply_rope_" or name == "copy_",
        "ms": per(lambda s: s * 1e3),
        "min_ms": per(lambda s: min(times[key]) * 1e3),
        "rounds": len(times.get(key, [])),
        "bytes": moved,
        "gbps": per(lambda s: moved / s / 1e9),
        "alloc_ratio": per(lambda s: med["clone"] / s),
        "traffic_ratio": per(lambda s: med["copy_"] / s),
        "speedup_vs_transformers": (
            None if seconds is None or REFERENCE not in med else med[REFERENCE] / seconds
        ),
        "max_error": info.get("max_error"),
        "ok": info.get("ok", True),
        "note": info.get("note", ""),
    }


def _point(config: Config, dtype_name: str, length: int, dim: int, log) -> list[dict]:
    """Measure one grid point: every implementation, both bounds and transformers."""
    dtype, device = _DTYPES[dtype_name], config.device
    shape = (config.batch, config.heads, length, dim)
    gen = torch.Generator().manual_seed(config.seed)
    q = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    k = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    q_buf, k_buf = torch.empty_like(q), torch.empty_like(k)
    moved = 2 * (q.nbytes + k.nbytes)  # q and k read once, results written once
    macs = (q.numel() + k.numel()) * dim
    tol = _TOLERANCE[dtype_name]
    calls: dict[str, Callable[[], object]] = {
        "clone": lambda: (q.clone(), k.clone()),
        "copy_": lambda: (q_buf.copy_(q), k_buf.copy_(k)),
    }
    rows_info: dict[str, dict] = {"clone": {"layout": "-"}, "copy_": {"layout": "-"}}
    # outputs are checked on the first and last head
    reference = _Reference(q, k, sorted({0, config.heads - 1}))
    hf = _transformers_rope()
    if hf is not None:
        cos, sin = tables.rope_tables(torch.arange(length, device=device), dim)
        cos_hf = torch.cat([cos, cos], dim=-1)[None].to(dtype)  # [1, T, D] as transformers
        sin_hf = torch.cat([sin, sin], dim=-1)[None].to(dtype)
        calls[REFERENCE] = lambda: hf(q, k, cos_hf, sin_hf)
        err = reference.error(calls[REFERENCE](), "half")
        rows_info[REFERENCE] = {"layout": "half", "max_error": err, "ok": err <= 4 * tol}
    for layout in config.layouts:
        for name in config.implementations:
            key = f"{name}/{layout}"
            why = _unavailable(name, config, macs, dim, dtype)
            if why is not None:
                rows_info[key] = {"layout": layout, "note": why}
                continue
            call, rows_info[key] = _try_implementation(
                name, layout, q, k, q_buf, k_buf, reference, tol
            )
            if call is not None:
                calls[key] = call
    times = time_rounds(
        calls,
        warmup=config.warmup,
        repeats=config.repeats,
        min_repeats=config.min_repeats,
        seconds=config.seconds_per_point,
        device=device,
    )
    rows = [
        _row(config, dtype_name, length, dim, key, info, times, moved)
        for key, info in rows_info.items()
    ]
    log(
        f"  {dtype_name:8s} T={length:<6d} D={dim:<4d} {len(calls)} timed, {len(times['clone'])} rounds"
    )
    return rows


def _machine(config: Config, allocator: str) -> dict:
    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "allocator": allocator,
    }
    if config.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        info["transformers"] = None
    return info


def run(config: Config | None = None, *, log: Callable[[str], None] | None = None) -> dict:
    """Measure the grid of ``config`` (default: :func:`default_config`).

    Args:
        config: what to measure.
        log: called with a line of progress per grid point (default: silent).

    Returns:
        ``{"config": dict, "machine": dict, "seconds": float, "rows": [dict, ...]}``; a row
        holds ``device, dtype, batch, heads, length, dim, layout, implementation, in_place,
        ms, min_ms, rounds, bytes, gbps, alloc_ratio, traffic_ratio,
        speedup_vs_transformers, max_error, ok, note, group``: ``group`` is ``"grid"``, or
        ``"targets"`` for the rows of the focused measurement (``target_rounds``). ``ms`` is
        the median of the rounds
        and every ratio is computed from medians; ``min_ms`` is the fastest round. Times
        and ratios are None for rows that were not timed (``note`` says why).

    Raises:
        TypeError: if ``config`` is not a :class:`Config`.
        ValueError: if ``config.device`` is ``"cuda"`` and there is no GPU.

    Example:
        >>> cfg = Config(lengths=(8,), dims=(8,), dtypes=("float32",), heads=2,
        ...              implementations=("apply_rope", "apply_rope_"), repeats=3,
        ...              fresh_memory=False, target_rounds=0)
        >>> result = run(cfg)
        >>> sorted({r["implementation"] for r in result["rows"]})[:3]
        ['apply_rope', 'apply_rope_', 'clone']
        >>> all(r["ok"] for r in result["rows"])
        True
    """
    config = default_config() if config is None else config
    if not isinstance(config, Config):
        raise TypeError(f"config must be a posenc.bench.Config, got {type(config).__name__}")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("config.device is 'cuda' but torch sees no GPU")
    log = log or (lambda line: None)
    allocator = fresh_memory() if config.fresh_memory and config.device == "cpu" else "unchanged"
    start = time.perf_counter()
    rows: list[dict] = []
    for dtype_name in config.dtypes:
        for dim in config.dims:
            for length in config.lengths:
                rows += [
                    {**r, "group": "grid"} for r in _point(config, dtype_name, length, dim, log)
                ]
    if config.device == "cpu" and config.target_rounds:
        rows += _target_rows(config, log)
    return {
        "config": dataclasses.asdict(config),
        "machine": _machine(config, allocator),
        "seconds": time.perf_counter() - start,
        "rows": rows,
    }


def _target_rows(config: Config, log) -> list[dict]:
    """The focused measurement of :data:`TARGET_SHAPE`, float32, ``config.target_rounds``
    rounds (both layouts; the bounds and transformers in the same rounds)."""
    b, h, t, d = TARGET_SHAPE
    focused = dataclasses.replace(
        config,
        batch=b,
        heads=h,
        layouts=rope.LAYOUTS,
        implementations=("apply_rope", "apply_rope_"),
        repeats=config.target_rounds,
        min_repeats=config.target_rounds,
        seconds_per_point=math.inf,
    )
    log("targets:")
    return [{**r, "group": "targets"} for r in _point(focused, "float32", t, d, log)]


def measure_targets(rounds: int = 21, *, log: Callable[[str], None] | None = None) -> dict:
    """Only the focused measurement of the targets' shape on the CPU (what :func:`run` adds
    after its grid), for :func:`target_report`.

    Args:
        rounds: timed rounds (the medians are reported), at least 1.
        log: called with a line of progress (default: silent).

    Returns:
        A result like :func:`run`'s, whose rows all have ``group == "targets"``.

    Raises:
        TypeError, ValueError: for a ``rounds`` that is not a positive int.

    Example:
        >>> from posenc.bench.report import target_report
        >>> result = measure_targets(1)
        >>> {row["group"] for row in result["rows"]}, len(target_report(result))
        ({'targets'}, 6)
    """
    check_int("rounds", rounds, minimum=1)
    config = Config(lengths=(TARGET_SHAPE[2],), dims=(TARGET_SHAPE[3],), target_rounds=rounds)
    log = log or (lambda line: None)
    allocator = fresh_memory() if config.fresh_memory else "unchanged"
    start = time.perf_counter()
    rows = _target_rows(config, log)
    return {
        "config": dataclasses.asdict(config),
        "machine": _machine(config, allocator),
        "seconds": time.perf_counter() - start,
        "rows": rows,
    }


# --- reading the results ----------------------------------------------------------------------


def rows_where(result: dict, **match) -> list[dict]:
    """The rows of ``result`` whose fields equal every ``match`` (e.g. ``dim=64``).

    Args:
        result: what :func:`run` returned (or the JSON file read back).
        **match: field name to required value.

    Returns:
        The matching rows, in order.

    Raises:
        KeyError: for a field that rows do not have.

    Example:
        >>> rows_where({"rows": [{"dim": 64, "ms": 1.0}, {"dim": 128, "ms": 2.0}]}, dim=128)
        [{'dim': 128, 'ms': 2.0}]
    """
    rows = result["rows"]
    for key in match:
        if rows and key not in rows[0]:
            raise KeyError(f"rows have no field {key!r}; fields: {sorted(rows[0])}")
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


def dimension_sweep(
    dims: Sequence[int] = (32, 64, 128, 256),
    *,
    length: int = 512,
    heads: int = 4,
    names: Sequence[str] = ("dense", "elementwise", "apply_rope"),
    layout: str = "interleaved",
    device: str = "cpu",
    repeats: int = 5,
    seed: int = 0,
) -> dict:
    """Time implementations on one float32 ``x [1, H, T, D]`` for several head sizes ``D``.

    Args:
        dims: the head sizes (even).
        length, heads: ``T`` and ``H``.
        names: implementations (as in :data:`IMPLEMENTATIONS`, but in-place ``apply_rope_``
            is not allowed here).
        layout: ``"interleaved"`` or ``"half"``.
        device: ``"cpu"`` or ``"cuda"``.
        repeats: timed rounds (the fastest is reported: the round least disturbed by
            anything else running).
        seed: for ``x``.

    Returns:
        ``{"dims": [...], "ms": {name: [...]}, "multiplies": {name: [...]}}``: milliseconds
        per call, and multiplications per vector (``D^2`` for the dense product, ``2 D``
        for the elementwise forms).

    Raises:
        ValueError: for an odd ``D``, an unknown or in-place name, or a bad device.

    Example:
        >>> sweep = dimension_sweep((8, 16), length=4, heads=1, repeats=1)
        >>> sweep["multiplies"]["dense"], sweep["multiplies"]["apply_rope"]
        ([64, 256], [16, 32])
    """
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 2 or d % 2 for d in dims):
        raise ValueError(f"dims must be even ints of at least 2, got {tuple(dims)}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if "apply_rope_" in names:
        raise ValueError("dimension_sweep times out-of-place calls; leave out 'apply_rope_'")
    calls = {name: _implementation(name, layout)[0] for name in names}
    gen = torch.Generator().manual_seed(seed)
    ms: dict[str, list[float]] = {name: [] for name in names}
    for dim in dims:
        x = torch.randn(1, heads, length, dim, generator=gen).to(device)
        # call(q, k) rotates two tensors: pass x twice, halve the time
        fns = {name: (lambda call=call, x=x: call(x, x)) for name, call in calls.items()}
        times = time_rounds(fns, warmup=1, repeats=repeats, min_repeats=repeats, device=device)
        for name in names:
            ms[name].append(min(times[name]) * 1e3 / 2)
    multiplies = {n: [d * d if n == "dense" else 2 * d for d in dims] for n in names}
    return {"dims": list(dims), "ms": ms, "multiplies": multiplies}
