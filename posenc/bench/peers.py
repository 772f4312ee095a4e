"""posenc's RoPE beside its peers, on one device, called as a model calls them.

``python -m posenc.bench --peers [--device cuda]`` runs it. A model rotates ``q [B, 32, T, D]``
and ``k [B, 8, T, D]`` (grouped keys, as Llama 3) that are views of its projections
``[B, T, H, D]``, at positions it keeps on the device; the cases are the ones models meet:

- prefill, B=1 and B=8 at T=4,096, B=1 at T=32,768; decoding, B=64 at T=1 (a KV cache of
  4,095 positions before it), where the host's time per call is what counts;
- the model's layout (the transposed views) and contiguous ``[B, H, T, D]`` tensors;
- forward alone, and forward plus backward (training);
- bfloat16, float16, float32.

Timed side by side in one run, each on fresh copies of the same tensors: posenc in place
and out of place (both layouts), Liger-Kernel's RoPE and flash-attn's rotary kernel where
they are installed, transformers' ``apply_rotary_pos_emb`` eager and under
``torch.compile``, and the two bounds, ``copy_`` of q and k into existing buffers (the memory
traffic) and ``clone`` (traffic plus fresh memory). Peers that take ``cos`` and ``sin`` get
them made beforehand, once, as a model makes them once per forward pass. Every row carries
its time, its ratio to ``copy_`` (1 = as fast as moving the bytes), its host time per call
and its largest error against the same rotation in float64. On a GPU the time is the GPU's
alone, measured with the host ahead of it (the GPU held back while the calls are queued, so
that they run back to back); the host's time is a column of its own, since a call whose host
work outlasts its kernel is as slow as its host, whatever its kernel does.

:func:`model_share` measures what RoPE costs inside a model: a two-layer Llama shaped like
Llama 3 8B (transformers, random weights, SDPA attention), timed with transformers' RoPE,
with posenc's swapped in, and with none.

On a CPU the same code runs with the peers that run there (a smoke test; the numbers that
matter come from a GPU).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import importlib.util
import inspect
import itertools
import math
import operator
import platform
import statistics
import time
from collections.abc import Callable

import torch

from posenc import rope
from posenc.fast import dispatch as fast

__all__ = [
    "CASES",
    "TINY_MODEL",
    "Case",
    "figure",
    "format_rows",
    "format_targets",
    "model_share",
    "run",
    "small_cases",
    "stored",
    "table",
    "targets",
    "write",
]

HEADS = (32, 8)
"""Query and key heads, as Llama 3 8B (grouped-query attention)."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One call shape: ``q [batch, 32, length, dim]``, ``k [batch, 8, length, dim]``.

    Example:
        >>> Case("decode", batch=64, length=1, dim=128, offset=4095).offset
        4095
    """

    name: str
    batch: int
    length: int
    dim: int
    offset: int = 0
    """positions start here (a KV cache's length when decoding)"""


CASES = (
    Case("B=1, T=4k, D=64", 1, 4096, 64),
    Case("B=1, T=4k, D=128", 1, 4096, 128),
    Case("B=8, T=4k, D=128", 8, 4096, 128),
    Case("B=1, T=32k, D=128", 1, 32768, 128),
    Case("decode: B=64, T=1, D=128", 64, 1, 128, offset=4095),
)
"""The cases of the GPU measurement."""


def small_cases() -> tuple[Case, ...]:
    """Cases small enough for a CPU smoke run (seconds).

    Example:
        >>> [c.name for c in small_cases()]
        ['B=1, T=64, D=64', 'decode: B=4, T=1, D=64']
    """
    return (Case("B=1, T=64, D=64", 1, 64, 64), Case("decode: B=4, T=1, D=64", 4, 1, 64, 63))


TINY_MODEL = dict(
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=64,
)
"""A Llama small enough for a CPU smoke run of :func:`model_share` (its ``shape``)."""

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
BASE = 500000.0
"""Llama 3's RoPE base."""


def _make(case: Case, heads: int, dtype, device, layout: str, generator) -> torch.Tensor:
    shape = (case.batch, case.length, heads, case.dim)
    x = torch.randn(shape, generator=generator, dtype=torch.float32).to(device=device, dtype=dtype)
    x = x.transpose(1, 2)  # [B, H, T, D] view of the projection [B, T, H, D]
    return x.contiguous() if layout == "contiguous" else x


def _tables(case: Case, dtype, device):
    """cos and sin as transformers makes them: ``[B, T, D]`` in x's dtype (both halves)."""
    inv_freq = rope.rope_inv_freq(case.dim, BASE).float().to(device)
    rows = torch.arange(case.length, device=device) + case.offset
    angles = rows.float()[:, None] * inv_freq
    emb = torch.cat([angles, angles], dim=-1)[None].expand(case.batch, -1, -1)
    return emb.cos().to(dtype), emb.sin().to(dtype), angles


def _peers(case: Case, dtype, device, positions) -> dict[str, tuple[Callable, bool] | str]:
    """name -> (function of (q, k) returning (q, k), whether it needs writable inputs) or
    the reason it cannot run here."""
    cos, sin, angles = _tables(case, dtype, device)
    peers: dict[str, tuple[Callable, bool] | str] = {}
    for layout in ("half", "interleaved"):
        peers[f"posenc {layout} in place"] = (
            lambda q, k, lay=layout: fast.rope_qk(
                q, k, positions, base=BASE, layout=lay, inplace=True
            ),
            True,
        )
        peers[f"posenc {layout}"] = (
            lambda q, k, lay=layout: fast.rope_qk(q, k, positions, base=BASE, layout=lay),
            False,
        )
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        peers["transformers eager"] = (lambda q, k: apply_rotary_pos_emb(q, k, cos, sin), False)
        compiled = torch.compile(apply_rotary_pos_emb, dynamic=False)
        peers["transformers compiled"] = (lambda q, k: compiled(q, k, cos, sin), False)
    except ImportError as err:
        peers["transformers eager"] = peers["transformers compiled"] = f"not installed: {err}"
    if device.type != "cuda":
        peers["liger in place"] = peers["flash-attn in place"] = "needs CUDA"
        return peers
    if importlib.util.find_spec("liger_kernel") is None:
        peers["liger in place"] = "not installed (pip install liger-kernel)"
    else:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb

        peers["liger in place"] = (lambda q, k: liger_rotary_pos_emb(q, k, cos, sin), True)
    try:
        from flash_attn.layers.rotary import apply_rotary_emb

        c2, s2 = angles.cos().to(dtype), angles.sin().to(dtype)  # [T, D/2]

        def flash(q, k):  # [B, T, H, D] views, rotated where they lie
            for x in (q, k):
                apply_rotary_emb(x.transpose(1, 2), c2, s2, inplace=True)
            return q, k

        peers["flash-attn in place"] = (flash, True)
    except ImportError as err:
        peers["flash-attn in place"] = f"not installed: {err}"
    return peers


def _sleep_rate() -> float:
    """Cycles per second of ``torch.cuda._sleep`` on the current GPU (its clock, measured)."""
    cycles = 10**7
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / (start.elapsed_time(end) / 1e3)


def _timer(device):
    """A function timing ``fn`` called ``n`` times in a row: ``(seconds, host seconds, ahead)``
    per call.

    On a GPU the seconds are the GPU's alone: it is kept busy (``torch.cuda._sleep``, sized
    from ``host_guess``, the host's seconds per call) while the host queues the ``n`` calls,
    so that they run back to back and the host's pace does not enter the time; ``ahead``
    says whether that held (the sleep still ran when the last call was queued). The host's
    time is its own, measured while it queues. On a CPU both are the wall time per call and
    ``ahead`` is None.
    """
    if device.type != "cuda":

        def timed_here(fn, n, host_guess=0.0):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            seconds = (time.perf_counter() - t0) / n
            return seconds, seconds, None

        return timed_here
    rate = _sleep_rate()

    def timed(fn, n, host_guess=0.0):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        hold = min(2 * host_guess * n + 1e-3, _MOST_HELD)
        torch.cuda._sleep(int(rate * hold))
        start.record()  # after the sleep, in the GPU's order
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        host = time.perf_counter() - t0
        ahead = not start.query()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / n, host / n, ahead

    return timed


def _wall(fn, device) -> float:
    """Seconds from the call to its result (the host's work and the GPU's, as a model runs)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


_QUEUED = 64
"""The most calls queued in one timed round on a GPU: the driver's queue holds about a
thousand launches, and a full queue would hold the host back until the GPU frees it (its
wait would then count as host time); transformers' eager RoPE launches ten kernels a call."""


_MOST_HELD = 0.25
"""The longest the GPU is held (seconds) while a round is queued."""


def _measure(fns: dict[str, Callable], device, rounds: int, min_seconds: float) -> dict:
    """Median seconds and host seconds per call of every function, in interleaved rounds,
    and whether the host stayed ahead of the GPU in every round (None on a CPU)."""
    timed = _timer(device)
    most = _QUEUED if device.type == "cuda" else 1000
    calls, hosts = {}, {}
    for name, fn in fns.items():  # warm up (compiles), then size a round to min_seconds
        fn()
        t, hosts[name], _ = timed(fn, 1)
        calls[name] = max(1, min(most, math.ceil(min_seconds / max(t, 1e-7))))
    found = {name: ([], [], []) for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t, host, ahead = timed(fn, calls[name], hosts[name])
            if ahead is False:  # once more, with the GPU held back four times longer
                t, host, ahead = timed(fn, calls[name], 4 * hosts[name])
            if ahead is not False:  # a round the GPU caught up in may hold waits: not a guess
                hosts[name] = host
            for values, v in zip(found[name], (t, host, ahead), strict=True):
                values.append(v)
    return {
        name: (statistics.median(t), statistics.median(h), None if a[0] is None else all(a))
        for name, (t, h, a) in found.items()
    }


def _reference(q, k, case: Case, layout: str):
    inv = rope.rope_inv_freq(case.dim, BASE)  # float64 angles, float64 rotation
    rows = torch.arange(case.length, device=q.device) + case.offset
    return tuple(
        rope.apply_rope(x.double(), rows, inv_freq=inv.to(q.device), layout=layout) for x in (q, k)
    )


def _train_step(fn, leaves, grads) -> None:
    """Forward and backward, the gradients handed to the leaves as an optimizer's
    ``zero_grad()`` leaves them (None): what is timed is RoPE's, not adding into old ones."""
    for leaf in leaves:
        leaf.grad = None
    torch.autograd.backward(fn(*leaves), grads)


def _case_rows(case, dtype_name, device, memory, rounds, min_seconds, backward, log):
    dtype = _DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    q0 = _make(case, HEADS[0], dtype, device, memory, gen)
    k0 = _make(case, HEADS[1], dtype, device, memory, gen)
    positions = torch.arange(case.length, device=device)[None].expand(case.batch, -1) + case.offset
    positions = positions[:, None]  # [B, 1, T]: per batch entry, as apply_rope broadcasts
    torch.compiler.reset()  # a fresh compile per case: no recompile limit across shapes
    peers = _peers(case, dtype, device, positions)
    want = {lay: _reference(q0, k0, case, lay) for lay in ("half", "interleaved")}
    q_buf, k_buf = torch.empty_like(q0), torch.empty_like(k0)
    fns: dict[str, Callable] = {
        "copy_": lambda: (q_buf.copy_(q0), k_buf.copy_(k0)),
        "clone": lambda: (q0.clone(), k0.clone()),
    }
    rows, errors = [], {}
    for name, peer in peers.items():
        if isinstance(peer, str):
            rows.append({"implementation": name, "note": peer})
            continue
        fn, writes = peer
        layout = "interleaved" if "interleaved" in name else "half"
        try:
            q, k = q0.clone(), k0.clone()
            rq, rk = fn(q, k)
            err = max(
                float((a.double() - b).abs().max())
                for a, b in zip((rq, rk), want[layout], strict=True)
            )
        except Exception as exc:  # a peer that fails here is reported, not fatal
            rows.append({"implementation": name, "note": f"failed: {type(exc).__name__}: {exc}"})
            continue
        errors[name] = err
        if backward:
            leaves = (q0.clone().requires_grad_(), k0.clone().requires_grad_())
            grads = (torch.ones_like(q0), torch.ones_like(k0))
            step = functools.partial(_train_step, fn, leaves, grads)
            try:  # posenc in place refuses a leaf that needs grad, as torch does; an in-place
                step()  # peer whose autograd function takes one (Liger's) is timed
            except RuntimeError as exc:
                rows.append({"implementation": name, "note": f"not timed: {exc}"})
                continue
            fns[name] = step
        else:  # one writable copy per in-place peer, rotated again at every call
            args = (q0.clone(), k0.clone()) if writes else (q0, k0)
            fns[name] = lambda fn=fn, a=args: fn(*a)
    times = _measure(fns, device, rounds, min_seconds)
    copy = times["copy_"][0]
    clone = times.get("clone", (math.nan,))[0]
    for name, (seconds, host_seconds, ahead) in times.items():
        rows.append(
            {
                "implementation": name,
                "us": seconds * 1e6,
                "host_us": host_seconds * 1e6,
                "host_ahead": ahead,
                "copy_ratio": copy / seconds,
                "clone_ratio": clone / seconds,
                "max_error": errors.get(name),
                "note": "",
            }
        )
    common = {
        "case": case.name,
        "memory": memory,
        "dtype": dtype_name,
        "pass": "forward+backward" if backward else "forward",
    }
    rows = [{**common, **row} for row in rows]
    log(format_rows({"rows": rows}))
    return rows


def run(
    device: str | torch.device = "cuda",
    *,
    cases: tuple[Case, ...] = CASES,
    dtypes: tuple[str, ...] = ("bfloat16", "float16", "float32"),
    rounds: int = 7,
    min_seconds: float = 2e-3,
    backward_case: str | None = "B=8, T=4k, D=128",
    log: Callable[[str], None] = lambda line: None,
) -> dict:
    """Time posenc and its peers on every case, memory layout and dtype, in one run.

    Args:
        device: where to run (``"cuda"`` for the numbers that matter).
        cases: the call shapes (:data:`CASES`, or :func:`small_cases` on a CPU).
        dtypes: names from ``bfloat16``, ``float16``, ``float32``.
        rounds: timed rounds (medians reported); each round calls each function enough
            times to last ``min_seconds``.
        min_seconds: the least time of one round of one function.
        backward_case: the case also timed forward plus backward (None: none).
        log: called with each case's rows as text (:func:`format_rows`) once it is measured.

    Returns:
        ``{"machine": dict, "rows": [dict, ...]}``; a row holds ``case, memory, dtype, pass,
        implementation, us, host_us, host_ahead, copy_ratio, clone_ratio, max_error, note``
        (``host_ahead``: on a GPU, whether the host stayed ahead of it in every round, so
        that ``us`` is the GPU's time alone; None on a CPU; a row with only a ``note`` says
        why that peer did not run).

    Raises:
        ValueError: for an unknown dtype or case name, or a device torch cannot use.

    Example:
        >>> result = run("cpu", cases=small_cases()[:1], dtypes=("float32",), rounds=1,
        ...              min_seconds=0.0, backward_case=None)
        >>> row = next(r for r in result["rows"] if r["implementation"] == "posenc half")
        >>> row["max_error"] < 1e-5, row["copy_ratio"] > 0
        (True, True)
    """
    device = torch.device(device)
    for name in dtypes:
        if name not in _DTYPES:
            raise ValueError(f"dtypes must be from {tuple(_DTYPES)}, got {name!r}")
    names = [c.name for c in cases]
    if backward_case is not None and backward_case not in names:
        raise ValueError(f"backward_case must be one of {names}, got {backward_case!r}")
    machine = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "platform": platform.platform(),
        "torch": torch.__version__,
    }
    for package in ("triton", "transformers", "liger_kernel", "flash_attn"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            machine[package] = importlib.metadata.version(package.replace("_", "-"))
    rows = []
    for case in cases:
        for memory in ("model view", "contiguous"):
            for dtype_name in dtypes:
                rows += _case_rows(
                    case, dtype_name, device, memory, rounds, min_seconds, False, log
                )
        if case.name == backward_case:
            for dtype_name in dtypes:
                rows += _case_rows(
                    case, dtype_name, device, "model view", rounds, min_seconds, True, log
                )
    return {"machine": machine, "rows": rows}


def _llama(shape: dict | None, device, dtype):
    """A random two-layer LlamaModel shaped like Llama 3 8B (``shape`` changes fields) in
    ``dtype`` on ``device``, and its RoPE frequencies ``[D/2]``, float32 on ``device``."""
    from transformers import LlamaConfig, LlamaModel

    fields = dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_hidden_layers=2,
        vocab_size=1024,
        max_position_embeddings=131072,
        attn_implementation="sdpa",
    )
    fields.update(shape or {})
    if "rope_parameters" in inspect.signature(LlamaConfig.__init__).parameters:
        fields["rope_parameters"] = {"rope_type": "default", "rope_theta": BASE}
    else:  # transformers 4
        fields["rope_theta"] = BASE
    torch.manual_seed(0)
    model = LlamaModel(LlamaConfig(**fields))
    # the model's own frequencies, in float32 as it computes them: .to(bfloat16) would round
    # that buffer too, and its RoPE would turn pair i by p * bf16(theta_i), not p * theta_i
    inv_freq = model.rotary_emb.inv_freq.float().to(device)
    model = model.to(device=device, dtype=dtype).eval()
    model.rotary_emb.inv_freq = inv_freq.clone()
    return model, inv_freq


def model_share(
    device: str | torch.device = "cuda",
    *,
    shape: dict | None = None,
    prefill: tuple[tuple[int, int], ...] = ((1, 4096), (8, 4096)),
    decode: tuple[int, int] = (64, 4095),
    rounds: int = 32,
    dtype: torch.dtype | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> list[dict]:
    """The share of a model's forward pass spent in RoPE: transformers' own, posenc's, none.

    A two-layer ``LlamaModel`` shaped like Llama 3 8B (hidden 4,096, 32 heads, 8 key/value
    heads, 14,336 MLP features, base 500,000), random weights, bfloat16 on a GPU, SDPA
    attention. Timed on the same inputs as transformers runs it; with its
    ``apply_rotary_pos_emb`` replaced by posenc's ``rope_qk`` (in place, positions from the
    step); and twice with RoPE replaced by nothing. The rotary module still makes its ``cos``
    and ``sin`` in every one.

    Each round times every variant once, in an order that changes from round to round
    (:func:`_balanced_order`: over four rounds each variant goes first once and follows
    each of the others once, so that neither a cold first pass nor what one pass leaves
    for the next favours a variant), and the share of a RoPE is the median over rounds of
    ``(t - t_none) / t`` within a round:
    a clock that drifts between rounds (a GPU's does, by a few percent) moves both times
    alike. The second pass without RoPE shows what the measurement reads where there is no
    difference at all: ``share_noise`` is the median over rounds of how far its share
    (against the first) lies from zero, the noise of one round's share.

    Args:
        device: where to run.
        shape: LlamaConfig fields to change (a CPU smoke run passes a tiny model).
        prefill: ``(B, T)`` forward passes over ``T`` new tokens.
        decode: ``(B, cached)``: one new token after a KV cache of ``cached`` positions.
        rounds: timed rounds (median), the variants taking turns (balanced in each block
            of four).
        dtype: the model's weights (default bfloat16 on a GPU, float32 elsewhere); its RoPE
            frequencies stay float32, as transformers computes them.
        log: called with a line per measurement.

    Returns:
        One dict per step: ``step, rounds, ms_transformers, ms_posenc, ms_none`` (medians),
        ``share_transformers, share_posenc, share_noise`` (see above), and
        ``posenc_vs_transformers``, ``none_vs_transformers``: the largest
        difference of the last hidden state from transformers' own, over its largest entry
        (small with posenc's RoPE, rounding apart; large without any: the swap took effect).

    Raises:
        ImportError: without transformers.

    Example:
        >>> rows = model_share("cpu", shape=TINY_MODEL, prefill=((1, 16),), decode=(2, 15), rounds=1)
        >>> [r["step"] for r in rows]
        ['prefill B=1, T=16', 'decode B=2 after 15']
    """
    from transformers import DynamicCache
    from transformers.models.llama import modeling_llama

    device = torch.device(device)
    if dtype is None:
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model, inv_freq = _llama(shape, device, dtype)
    vocab = model.config.vocab_size
    state = {"offset": 0}
    # transformers 5.x renames past_key_values to cache
    cache_arg = (
        "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    )
    own = modeling_llama.apply_rotary_pos_emb

    def posenc_rope(q, k, cos, sin, *args, **kwargs):
        return fast.rope_qk(
            q, k, None, inv_freq=inv_freq, layout="half", inplace=True, offset=state["offset"]
        )

    def no_rope(q, k, *args, **kwargs):
        return q, k

    variants = {"transformers": own, "posenc": posenc_rope, "none": no_rope, "none again": no_rope}
    names = list(variants)
    steps = [(f"prefill B={b}, T={t}", b, t, 0) for b, t in prefill]
    steps.append((f"decode B={decode[0]} after {decode[1]}", decode[0], 1, decode[1]))
    out = []
    try:
        for label, batch, length, cached in steps:
            ids = torch.randint(0, vocab, (batch, length), device=device)
            cache = None
            if cached:  # the cache made by the model as it is, transformers' RoPE included
                modeling_llama.apply_rotary_pos_emb = own
                cache = DynamicCache()
                with torch.no_grad():
                    past = torch.randint(0, vocab, (batch, cached), device=device)
                    model(past, use_cache=True, **{cache_arg: cache})
            position_ids = (torch.arange(length, device=device) + cached)[None].expand(batch, -1)
            state["offset"] = cached

            def forward(cache=cache, ids=ids, position_ids=position_ids, length=length):
                with torch.no_grad():
                    model(ids, position_ids=position_ids, use_cache=True, **{cache_arg: cache})
                if cache is not None:
                    cache.crop(-length)  # drop the new token: the same cache for every call

            found, hidden = {name: [] for name in variants}, {}
            for name in names[:3]:
                modeling_llama.apply_rotary_pos_emb = variants[name]
                with torch.no_grad():  # the swap is real: the output with posenc's RoPE
                    hidden[name] = model(  # is transformers', and without RoPE it is not
                        ids, position_ids=position_ids, use_cache=True, **{cache_arg: cache}
                    ).last_hidden_state.float()
                if cache is not None:
                    cache.crop(-length)
            for r in range(rounds):
                for i in _balanced_order(len(names), r):
                    modeling_llama.apply_rotary_pos_emb = variants[names[i]]
                    found[names[i]].append(_wall(forward, device))
            ms = {name: statistics.median(t) * 1e3 for name, t in found.items()}

            def shares(name, found=found):  # each round's own share, against its "none"
                return [(t - none) / t for t, none in zip(found[name], found["none"], strict=True)]

            scale = float(hidden["transformers"].abs().max())
            out.append(
                {
                    "step": label,
                    "rounds": rounds,
                    "ms_transformers": ms["transformers"],
                    "ms_posenc": ms["posenc"],
                    "ms_none": ms["none"],
                    "share_transformers": statistics.median(shares("transformers")),
                    "share_posenc": statistics.median(shares("posenc")),
                    "share_noise": statistics.median(map(abs, shares("none again"))),
                    "posenc_vs_transformers": float(
                        (hidden["posenc"] - hidden["transformers"]).abs().max() / scale
                    ),
                    "none_vs_transformers": float(
                        (hidden["none"] - hidden["transformers"]).abs().max() / scale
                    ),
                }
            )
            log(f"  {label}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in ms.items()))
    finally:
        modeling_llama.apply_rotary_pos_emb = own
    return out


def _balanced_order(n: int, r: int) -> list[int]:
    """Round ``r``'s order of ``n`` variants (``n`` even): row ``r % n`` of a Williams square,
    ``0, 1, n-1, 2, n-2, ...`` each shifted by ``r``. Over ``n`` rounds each variant goes
    first once and follows each of the others once.

    Example:
        >>> [_balanced_order(4, r) for r in range(4)]
        [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]
    """
    if n < 2 or n % 2:
        raise ValueError(f"n must be even and at least 2, got {n}")
    first = [0]
    for i in range(1, n):
        first.append((i + 1) // 2 if i % 2 else n - i // 2)
    return [(v + r) % n for v in first]


_FIGURE_SERIES = (
    "posenc half in place",
    "posenc half in place, angles",
    "posenc half",
    "liger in place",
    "flash-attn in place",
    "transformers eager",
    "transformers compiled",
)


def format_rows(result: dict) -> str:
    """The measured rows as text: one block per (case, memory, dtype, pass).

    Example:
        >>> row = dict(case="c", memory="model view", dtype="bfloat16", pass_="forward")
        >>> print(format_rows({"rows": [{**row, "pass": "forward", "implementation": "copy_",
        ...     "us": 2.0, "host_us": 1.0, "copy_ratio": 1.0, "clone_ratio": 1.1,
        ...     "max_error": None, "note": ""}]}))
        c, model view, bfloat16, forward
          copy_                           2.0 us  x copy_ 1.00  host 1.0 us
    """
    lines, last = [], None
    for r in result["rows"]:
        head = (r["case"], r["memory"], r["dtype"], r["pass"])
        if head != last:
            lines.append(", ".join(head))
            last = head
        if "us" not in r:
            lines.append(f"  {r['implementation']:26s}  {r['note']}")
            continue
        err = "" if r["max_error"] is None else f"  max error {r['max_error']:.2g}"
        behind = "  (the GPU waited for the host)" if r.get("host_ahead") is False else ""
        lines.append(
            f"  {r['implementation']:26s} {r['us']:8.1f} us  x copy_ {r['copy_ratio']:.2f}"
            f"  host {r['host_us']:.1f} us{err}{behind}"
        )
    return "\n".join(lines)


_TABLE_SERIES = (
    "posenc half in place",
    "posenc half in place, angles",
    "posenc half",
    "liger in place",
    "transformers eager",
    "transformers compiled",
)
_VALUES = {
    "copy_ratio": ("Speed against copying the same bytes (time of copy_ / time)", ".2f"),
    "host_us": ("Host time per call (µs)", ".0f"),
    "max_error": ("Largest error against the same rotation in float64", ".3f"),
}


def table(
    result: dict,
    *,
    value: str = "copy_ratio",
    dtype: str = "bfloat16",
    memory: str = "model view",
    pass_: str = "forward",
):
    """One value of each implementation in each case, as a captioned table.

    Args:
        result: what :func:`run` returned (or :func:`stored`).
        value: ``"copy_ratio"`` (1 = as fast as copying the bytes), ``"host_us"`` or
            ``"max_error"``.
        dtype, memory, pass_: which rows (``memory`` ``"model view"`` or ``"contiguous"``,
            ``pass_`` ``"forward"`` or ``"forward+backward"``).

    Returns:
        A :class:`posenc.display.table.Table`: a row per case, with the time of ``copy_`` and a
        column per implementation (``-`` where it did not run).

    Raises:
        ValueError: for an unknown ``value``, or when no row matches.

    Example:
        >>> row = dict(case="c", memory="model view", dtype="bfloat16", implementation="copy_",
        ...            us=2.0, copy_ratio=1.0, note="", **{"pass": "forward"})
        >>> print(table({"machine": {"device": "cpu"}, "rows": [row]}).rows)
        [['c', '2.0', '-', '-', '-', '-', '-', '-']]
    """
    from posenc.display.table import Table

    if value not in _VALUES:
        raise ValueError(f"value must be one of {tuple(_VALUES)}, got {value!r}")
    rows = [
        r
        for r in result["rows"]
        if (r["dtype"], r["memory"], r["pass"]) == (dtype, memory, pass_) and "us" in r
    ]
    if not rows:
        raise ValueError(f"result has no rows for {dtype!r}, {memory!r}, {pass_!r}")
    what, spec = _VALUES[value]
    body = []
    for case in dict.fromkeys(r["case"] for r in rows):
        found = {r["implementation"]: r for r in rows if r["case"] == case}
        cells = [case, f"{found['copy_']['us']:.1f}"]
        for name in _TABLE_SERIES:
            v = found.get(name, {}).get(value)
            cells.append("-" if v is None else format(v, spec))
        body.append(cells)
    caption = (
        f"{what}: q [B, 32, T, D] and k [B, 8, T, D], {dtype}, {memory}, {pass_}, "
        f"on {result['machine']['device']}."
    )
    # each library's name once, over its columns: eight full names do not fit a page's width
    libraries = [name.split(" ", 1) for name in _TABLE_SERIES]
    groups = [("", 2)] + [
        (library, len(list(names)))
        for library, names in itertools.groupby(libraries, key=operator.itemgetter(0))
    ]
    columns = ["case", "copy_ (µs)", *(rest for _, rest in libraries)]
    return Table(columns, body, caption=caption, groups=groups)


def share_table(result: dict):
    """RoPE's share of the model's forward pass, from the ``"model"`` entry of a result.

    Args:
        result: what :func:`run` and :func:`model_share` wrote (or :func:`stored`).

    Returns:
        A :class:`posenc.display.table.Table`: a row per step, with the forward pass's time (ms)
        with no RoPE, with transformers' and with posenc's (each the median of its rounds),
        and RoPE's share of the time for each, ``(with - without) / with`` (as
        :func:`model_share` measures it: the median of the rounds' own shares, which need
        not be the share of the medians shown; a small share can come out below zero, the
        times of two passes differing by a little noise); and, where the result holds it,
        one round's noise (``share_noise``, see :func:`model_share`).

    Raises:
        ValueError: when ``result`` holds no model measurement.

    Example:
        >>> step = dict(step="prefill B=1, T=8", ms_none=9.0, ms_transformers=10.0,
        ...             ms_posenc=9.1, share_transformers=0.1, share_posenc=0.011)
        >>> share_table({"machine": {"device": "cpu"}, "model": [step]}).rows
        [['prefill B=1, T=8', '9.00', '10.00', '9.10', '10.0%', '1.1%']]
    """
    from posenc.display.table import Table

    keys = ("step", "ms_none", "ms_transformers", "ms_posenc", "share_transformers", "share_posenc")
    steps = result.get("model") if isinstance(result, dict) else None
    if (
        not isinstance(steps, list)
        or not steps
        or not all(isinstance(s, dict) and all(k in s for k in keys) for s in steps)
        or "device" not in result.get("machine", {})
    ):
        raise ValueError(
            "result must hold a model measurement under 'model' (model_share's rows, each with "
            f"{', '.join(keys)}) and the machine's device"
        )
    noise = all("share_noise" in s for s in steps)
    body = [
        [
            s["step"],
            f"{s['ms_none']:.2f}",
            f"{s['ms_transformers']:.2f}",
            f"{s['ms_posenc']:.2f}",
            f"{s['share_transformers']:.1%}",
            f"{s['share_posenc']:.1%}",
        ]
        + ([f"{s['share_noise']:.1%}"] if noise else [])
        for s in steps
    ]
    parts = [
        "A two-layer model shaped like Llama 3 8B, forward pass: time with no RoPE, "
        f"with transformers' and with posenc's, and RoPE's share, on {result['machine']['device']}",
        "times are medians over rounds, shares the median of each round's own share",
    ]
    columns = ["step", "none", "transformers", "posenc", "transformers", "posenc"]
    groups = [("", 1), ("time (ms)", 3), ("RoPE's share", 2)]
    if noise:
        columns.append("noise")
        groups.append(("", 1))
        parts.append(
            "noise: how far one round's share lies from zero where there is no difference "
            "(a second pass without RoPE against the first)"
        )
    caption = "; ".join(parts) + "."
    return Table(columns, body, caption=caption, groups=groups)


_LARGE = ("B=8, T=4k, D=128", "B=1, T=32k, D=128")
_DECODE = "decode: B=64, T=1, D=128"
_LIGER = "liger in place"
_OPS = {">=": operator.ge, "<=": operator.le, "<": operator.lt}
_copy_ratio = operator.itemgetter("copy_ratio")
_clone_ratio = operator.itemgetter("clone_ratio")
_host_us = operator.itemgetter("host_us")


def targets(result: dict, *, dtype: str = "bfloat16") -> list[dict]:
    """posenc's speed targets, checked on a result of :func:`run` (bf16, the model's layout).

    - in place at least 0.97 of ``copy_``, out of place at least 0.93 of ``clone``, on the
      two large cases (B=8, T=4k and B=1, T=32k, D=128);
    - in place at least Liger's ratio in every case, or at least 0.9 of it where Liger's
      exceeds 1 (data held in L2);
    - interleaved at least 0.9 of half's ratio, in place, in every case;
    - forward plus backward at most 2.2 times the time of ``copy_`` (twice the traffic, and
      a tenth more);
    - host time per call at decode at most 15 µs, in place and out of place;
    - with ``result["model"]`` (:func:`model_share`): posenc's RoPE at most 1% of the
      forward pass at T=4,096, and a smaller share than transformers' RoPE at decode.

    Only the cases the result holds are checked: a CPU run's small cases give no check.

    Args:
        result: what :func:`run` returned (or :func:`stored`), optionally with ``"model"``.
        dtype: which dtype's rows.

    Returns:
        One dict per check: ``check, case, value, op, goal, met, note``: ``met`` is
        ``value op goal`` (``op`` ``">="``, ``"<="`` or ``"<"``), or None where a row it needs is
        missing (``note`` says which); ``note`` also says when the host fell behind the GPU
        in a row it uses, so that the time there is not the GPU's alone.

    Raises:
        TypeError: if ``result`` is not a dict holding a list of rows.
        ValueError: for a dtype the benchmark does not run.

    Example:
        >>> row = dict(case="B=8, T=4k, D=128", memory="model view", dtype="bfloat16", note="")
        >>> rows = [{**row, "pass": "forward", "implementation": name, "us": us,
        ...          "copy_ratio": 100 / us, "clone_ratio": 110 / us, "host_ahead": True}
        ...         for name, us in (("copy_", 100), ("posenc half in place", 102.0))]
        >>> check = targets({"rows": rows})[0]
        >>> check["check"], round(check["value"], 3), check["met"]
        ('in place / copy_', 0.98, True)
    """
    if not isinstance(result, dict) or not isinstance(result.get("rows"), list):
        raise TypeError(
            f"result must be a dict with a list of rows, as run returns, got {type(result).__name__}"
        )
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {tuple(_DTYPES)}, got {dtype!r}")
    rows = {
        (r["case"], r["pass"], r["implementation"]): r
        for r in result["rows"]
        if r["dtype"] == dtype and r["memory"] == "model view" and "us" in r
    }
    fwd, train = "forward", "forward+backward"
    half, inter = "posenc half in place", "posenc interleaved in place"
    every = tuple(c.name for c in CASES)
    goals = (  # check, cases, op, goal, the rows it reads, its value from them
        ("in place / copy_", _LARGE, ">=", 0.97, [(fwd, half)], _copy_ratio),
        ("out of place / clone", _LARGE, ">=", 0.93, [(fwd, "posenc half")], _clone_ratio),
        ("in place / Liger's bar", every, ">=", 1.0, [(fwd, half), (fwd, _LIGER)], _over_liger),
        ("interleaved / half, in place", every, ">=", 0.9, [(fwd, inter), (fwd, half)], _over),
        ("forward+backward / copy_", every, "<=", 2.2, [(train, "posenc half"), (train, "copy_")],
         _time_over),
        ("host µs per call, in place", (_DECODE,), "<=", 15.0, [(fwd, half)], _host_us),
        ("host µs per call, out of place", (_DECODE,), "<=", 15.0, [(fwd, "posenc half")],
         _host_us),
    )  # fmt: skip
    checks = []
    for name, cases, op, goal, needs, value in goals:
        for case in cases:
            if (case, needs[0][0], "copy_") not in rows:
                continue  # not a case (or pass) this result measured
            used = [rows.get((case, *need)) for need in needs]
            missing = [need[1] for need, r in zip(needs, used, strict=True) if r is None]
            notes = ["no row of " + ", ".join(missing)] if missing else []
            if any(r is not None and r.get("host_ahead") is False for r in used):
                notes.append("the GPU waited for the host")
            note = "; ".join(notes)
            got = None if missing else value(*used)
            met = None if got is None else _OPS[op](got, goal)
            checks.append(dict(check=name, case=case, value=got, op=op, goal=goal, met=met,
                               note=note))  # fmt: skip
    for step in result.get("model", []):
        if step["step"] == "decode B=64 after 4095":
            op, goal, name = "<", step["share_transformers"], "below transformers'"
        elif step["step"].startswith("prefill") and step["step"].endswith("T=4096"):
            op, goal, name = "<=", 0.01, "at most 1%"
        else:
            continue
        value = step["share_posenc"]
        noise = step.get("share_noise")
        close = noise is not None and abs(value - goal) < noise
        note = f"by less than one round's noise ({noise:.1%})" if close else ""
        checks.append(dict(check=f"model: RoPE's share, {name}", case=step["step"], value=value,
                           op=op, goal=goal, met=_OPS[op](value, goal), note=note))  # fmt: skip
    return checks


def _over(row, other):
    """``row``'s ratio to ``copy_`` over ``other``'s."""
    return row["copy_ratio"] / other["copy_ratio"]


def _over_liger(row, liger):
    """``row``'s ratio over Liger's, or over 0.9 of Liger's where Liger's exceeds 1."""
    return row["copy_ratio"] / (liger["copy_ratio"] * (0.9 if liger["copy_ratio"] > 1 else 1.0))


def _time_over(row, bound):
    """``row``'s time over ``bound``'s."""
    return row["us"] / bound["us"]


def format_targets(checks: list[dict]) -> str:
    """The checks of :func:`targets` as text, one line each.

    Args:
        checks: what :func:`targets` returned.

    Returns:
        Lines ``check, case, value (goal op g) met|MISSED|not checked``, with the note
        in parentheses where there is one.

    Example:
        >>> c = dict(check="in place / copy_", case="B=8, T=4k, D=128", value=0.95, op=">=",
        ...          goal=0.97, met=False, note="")
        >>> format_targets([c]).split()[-5:]
        ['0.950', '(goal', '>=', '0.97)', 'MISSED']
    """
    lines = []
    for c in checks:
        verdict = {True: "met", False: "MISSED", None: "not checked"}[c["met"]]
        value = "-" if c["value"] is None else f"{c['value']:.3f}"
        note = f"  ({c['note']})" if c["note"] else ""
        lines.append(
            f"{c['check']:44s} {c['case']:26s} {value:>7s} (goal {c['op']} {c['goal']:.3g})"
            f" {verdict}{note}"
        )
    return "\n".join(lines)


def stored(name: str = "h100") -> dict:
    """A result of :func:`run` (and :func:`model_share`, under ``"model"``) stored with
    posenc, as ``python -m posenc.bench --peers --device cuda`` wrote it.

    Args:
        name: ``"h100"``: one run on an NVIDIA H100 80GB HBM3 (torch 2.11, Triton 3.6,
            transformers 5.17, Liger-Kernel 0.8.5; flash-attn was not installed).

    Returns:
        The result: ``{"machine": dict, "rows": [dict, ...], "model": [dict, ...]}``.

    Raises:
        ValueError: for a name with no stored result.

    Example:
        >>> stored()["machine"]["device"]
        'NVIDIA H100 80GB HBM3'
    """
    import importlib.resources
    import json

    names = ("h100",)
    if name not in names:
        raise ValueError(f"name must be one of {names}, got {name!r}")
    path = importlib.resources.files("posenc.bench") / "results" / f"rope_peers_{name}.json"
    return json.loads(path.read_text())


def figure(result: dict, *, dtype: str = "bfloat16", memory: str = "model view"):
    """Each case's ratio to ``copy_`` (1 = as fast as moving the bytes), per implementation.

    Args:
        result: what :func:`run` returned.
        dtype: which dtype's rows.
        memory: ``"model view"`` or ``"contiguous"``.

    Returns:
        A matplotlib figure: a group of bars per case, one per implementation that ran (a
        peer that is not installed, or needs CUDA, is left out, legend entry and all).

    Raises:
        ValueError: when ``result`` has no forward rows for ``dtype`` and ``memory``, or
            none of an implementation that ran.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> row = dict(case="c", memory="model view", dtype="bfloat16", implementation="posenc half",
        ...            copy_ratio=0.9, note="")
        >>> plt.close(figure({"machine": {"device": "cpu"}, "rows": [{**row, "pass": "forward"}]}))
    """
    from posenc.display import plots

    rows = [
        r
        for r in result["rows"]
        if r["dtype"] == dtype and r["memory"] == memory and r["pass"] == "forward"
    ]
    if not rows:
        raise ValueError(f"result has no forward rows for dtype={dtype!r}, memory={memory!r}")
    cases = list(dict.fromkeys(r["case"] for r in rows))
    ratio = {(r["case"], r["implementation"]): r["copy_ratio"] for r in rows if "copy_ratio" in r}
    # only what ran: a peer that is not installed gets neither bars nor a legend entry
    shown = [name for name in _FIGURE_SERIES if any((c, name) in ratio for c in cases)]
    if not shown:
        raise ValueError(f"result has no implementation that ran for {dtype!r}, {memory!r}")
    fig, ax = plots.figure(height=3.4)
    width = 0.8 / len(shown)
    for i, name in enumerate(shown):
        at = [j + (i - (len(shown) - 1) / 2) * width for j in range(len(cases))]
        ax.bar(at, [ratio.get((c, name), 0.0) for c in cases], width, label=name)
    ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
    ax.set_xticks(range(len(cases)), [c.replace(", D", "\nD") for c in cases])
    ax.set_ylabel("time of copy_ / time")
    ax.set_title(f"{result['machine']['device']}, {dtype}, {memory}")
    ax.legend(fontsize=9, ncols=2)
    return fig


def write(result: dict, out_dir) -> tuple:
    """Write ``rope_peers.json`` and ``rope_peers.png`` (bfloat16, the model's layout).

    Example:
        >>> import tempfile
        >>> row = dict(case="c", memory="model view", dtype="bfloat16",
        ...            implementation="posenc half", copy_ratio=1.0, note="", **{"pass": "forward"})
        >>> [p.name for p in write({"machine": {"device": "cpu"}, "rows": [row]}, tempfile.mkdtemp())]
        ['rope_peers.json', 'rope_peers.png']
    """
    import json
    from pathlib import Path

    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out / "rope_peers.json", out / "rope_peers.png"
    json_path.write_text(json.dumps(result, indent=1) + "\n")
    dtype = (
        "bfloat16"
        if any(r["dtype"] == "bfloat16" for r in result["rows"])
        else result["rows"][0]["dtype"]
    )
    fig = figure(result, dtype=dtype)
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return json_path, png_path
