"""posenc's direct launch against Triton's own, on a CPU: run as a script by
``tests/test_triton_launch.py``, in a process of its own.

Triton is given a stand-in for its CUDA driver: it compiles the kernel for a real GPU target
(an H100, sm_90, down to a cubin with its own ptxas), and the stand-in records every launch
instead of making it, with the compiled kernel's cubin standing for its function handle.
For pairs of calls, the first compiles and fills posenc's cache, and the second goes through
posenc's direct launch wherever posenc's key says a compiled kernel serves it; what the
launcher then receives must be exactly what Triton's own launch of the second call gives it:
the same compiled kernel, grid, stream and arguments. Prints how many launches were direct.
Run without ``TRITON_INTERPRET`` set: Triton reads it once, when it is imported.

The same stand-in checks remembered calls (``check_a_remembered_call_launches_as_its_checks_
would``, with CPU tensors taken through the GPU's launch path): a call after one alike hands
the launcher what it hands it when nothing is remembered. And every build is compiled, with
any Triton from 3.0 (``check_every_build_compiles``), whichever way posenc launches it there.
"""

from __future__ import annotations

import hashlib
import json
import sys
from functools import partial

import torch
import triton
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_remembered_calls import ANGLES as ANGLES_CALL
from test_remembered_calls import CALLS, CHANGES, ENTRIES, _arguments, misaligned
from test_remembered_calls import MODEL as MODEL_CALL
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver

from posenc.fast import triton as tr
from posenc.fast.tables import Angles
from posenc.rope import rope_inv_freq

LAUNCHES: list[tuple] = []
BUILDS: list = []  # the metadata of each kernel Triton compiled
STREAM = 1234
_TRITON = tuple(int(part) for part in triton.__version__.split(".")[:2])


class Launcher:
    def __init__(self, src, metadata):
        BUILDS.append(metadata)

    def __call__(self, *args):
        LAUNCHES.append(args)


class Utils:
    def get_device_properties(self, device):
        return {"max_shared_mem": 232448, "multiprocessor_count": 132, "max_num_regs": 65536}

    def load_binary(self, name, kernel, shared, device):
        # module, function, registers, spills, most threads (from Triton 3.4); the function
        # names the cubin
        loaded = (name, hashlib.sha256(kernel).hexdigest(), 32, 0, 1024)
        return loaded if _TRITON >= (3, 4) else loaded[:4]


class FakeCuda:
    """Just what Triton's launch path asks of its driver; the GPU an H100 unless ``target``
    says otherwise (``GPUTarget("hip", "gfx942", 64)``: an AMD MI300)."""

    launcher_cls = Launcher
    utils = Utils()

    def __init__(self, target=None):
        self.target = GPUTarget("cuda", 90, 32) if target is None else target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return STREAM

    def get_current_target(self):
        return self.target

    def is_active(self):
        return True


def comparable(launch: tuple) -> tuple:
    """A launch as values: tensors by identity, the launch metadata by its type; hooks that
    call nothing (None, or an empty chain) as None, and then the metadata, which only hooks
    read, as None too."""
    idle = all(h is None or getattr(h, "calls", None) == [] for h in launch[7:9])
    return tuple(
        ("tensor", id(a)) if isinstance(a, torch.Tensor)
        else None if idle and i in (6, 7, 8)
        else type(a).__name__ if i == 6
        else a
        for i, a in enumerate(launch)
    )  # fmt: skip


def listen(on: bool) -> None:
    """Set a launch hook (a profiler's stand-in) or take it away again: Triton 3.4 keeps one
    hook, later versions a chain of them. The stand-in launcher never calls it: what counts
    is that the launcher is handed it, with the metadata, as Triton hands it."""
    from triton import knobs  # from Triton 3.4, as the direct launch

    runtime = knobs.runtime
    if hasattr(runtime.launch_enter_hook, "add"):
        (runtime.launch_enter_hook.add if on else runtime.launch_enter_hook.remove)(profiler)
    else:
        runtime.launch_enter_hook = profiler if on else None


def profiler(metadata) -> None:
    """The launch hook a profiler would set."""


def tensor(shape, dtype, shift, transpose=False, pad=0):
    """A tensor whose data start ``shift`` elements into its storage (16-byte aligned or not),
    its rows ``pad`` elements apart beyond their length (the rest of a wider projection)."""
    *lead, dim = shape
    n = torch.Size([*lead, dim + pad]).numel()
    flat = torch.randn(n + shift).to(dtype)[shift:]
    t = flat.view(*lead, dim + pad)[..., :dim]
    return t.transpose(1, 2) if transpose else t


def call(spec, shifts, offset):
    batch, heads_k, length, dim, dtype, transpose, pad, with_pos, interleaved, inplace = spec
    q = tensor((batch, length, 4, dim) if transpose else (batch, 4, length, dim), dtype,
               shifts[0], transpose, pad)  # fmt: skip
    k = tensor((batch, length, heads_k, dim) if transpose else (batch, heads_k, length, dim),
               dtype, shifts[1], transpose, pad) if heads_k else None  # fmt: skip
    q_out = q if inplace else tensor(q.shape, dtype, shifts[2])
    k_out = k if inplace or k is None else tensor(k.shape, dtype, shifts[3])
    pos = torch.arange(batch * length + shifts[4])[shifts[4] :].view(batch, length)
    inv_freq = torch.empty(dim // 2 + shifts[5])[shifts[5] :]
    inv_freq.copy_(rope_inv_freq(dim))
    return tr._arguments(
        q, q_out, k, k_out, pos if with_pos else None, offset, inv_freq, interleaved, False, False
    ), interleaved


SPECS = st.tuples(
    st.sampled_from([1, 2]),  # B
    st.sampled_from([0, 1, 2]),  # k's heads (0: q alone)
    st.sampled_from([1, 3, 16]),  # T
    st.sampled_from([24, 128]),  # D (at 128 Triton vectorizes: alignment and strides matter)
    st.sampled_from([torch.bfloat16, torch.float32]),
    st.booleans(),  # the model's transposed view
    st.sampled_from([0, 8]),  # padded rows: other strides, same shapes
    st.booleans(),  # positions given
    st.booleans(),  # interleaved
    st.booleans(),  # in place
)
SHIFTS = st.lists(st.sampled_from([0, 1, 4, 8]), min_size=6, max_size=6)
OFFSETS = st.sampled_from([0, 1, 7, 16, 4095, 2**31 - 1, 2**31, 2**40, 2**63])
direct = []
hooks = []


MODEL = (2, 2, 16, 128, torch.bfloat16, True, 0, True, False, True)  # as a model calls it
ALIGNED = [0] * 6


# calls that Triton compiles apart: padded rows (other strides), a pointer off 16 bytes,
# an offset past 32 bits, a single position (a 1 is compiled in); q alone off 16 bytes
@example(MODEL, (6, (*MODEL[:6], 8, *MODEL[7:])), ALIGNED, None, (0, 0), False)
@example(MODEL, None, ALIGNED, [0, 1, 0, 0, 0, 0], (0, 0), False)
@example((*MODEL[:9], False), None, ALIGNED, [1, 0, 0, 0, 0, 0], (0, 0), False)  # out of place
@example(MODEL, None, ALIGNED, None, (4095, 2**31), False)
@example(MODEL, (2, (2, 2, 1, *MODEL[3:])), ALIGNED, None, (0, 0), False)
@example(MODEL, None, ALIGNED, None, (0, 7), True)  # a profiler's hook set: handed on
@given(
    spec=SPECS,
    change=st.one_of(st.none(), st.tuples(st.integers(0, 9), SPECS)),  # one field, or none
    first=SHIFTS,
    second=st.one_of(st.none(), SHIFTS),  # None: the first's shifts, in new tensors
    offsets=st.tuples(OFFSETS, OFFSETS),
    hooked=st.booleans(),  # a launch hook set, as a profiler sets one
)
def check_a_direct_launch_is_the_launch_triton_makes(spec, change, first, second, offsets, hooked):
    other = spec
    if change is not None:  # the second call differs from the first in one respect
        field, values = change
        other = (*spec[:field], values[field], *spec[field + 1 :])
    second = first if second is None else second
    listen(hooked)
    (grid, args, consts), interleaved = call(spec, first, offsets[0])
    tr._COMPILED.clear()
    tr._run_compiled(0, grid, args, consts, interleaved)  # Triton's launch, kept by posenc
    (grid, args, consts), interleaved = call(other, second, offsets[1])
    cached = len(tr._COMPILED)
    LAUNCHES.clear()
    tr._run_compiled(0, grid, args, consts, interleaved)  # direct if posenc's key matches
    ours = LAUNCHES[-1]
    direct.append(cached == 1 and len(tr._COMPILED) == 1)
    tr._COMPILED.clear()
    LAUNCHES.clear()
    tr._run_compiled(0, grid, args, consts, interleaved)  # Triton's own launch of that call
    listen(False)
    assert len(LAUNCHES) == 1
    assert comparable(ours) == comparable(LAUNCHES[-1])
    if hooked:  # the hook is handed the metadata, as Triton hands it
        assert ours[7] is not None and ours[6] is not None
        hooks.append(direct[-1])


# --- calls remembered: a call alike to one made before, launched as its own checks would ----


def on_the_gpu_s_path() -> None:
    """CPU tensors taken by posenc as a GPU's: the kernel compiled for the GPU target and
    launched by the stand-in driver, not run by Triton's interpreter."""
    from posenc.fast import kernels

    tr._INTERPRETED_DEVICES = ()
    tr._runs_here = lambda device: True
    kernels._TRITON_DEVICES = ("cpu",)
    kernels.triton_available = lambda device="cuda": True
    tr._current_device = lambda: None  # a CPU tensor's device index


def outcome(call, seed, shifts):
    """The launch a call makes (each tensor by its role in the call), or its error."""
    q, k, positions, kwargs = _arguments(call, seed)
    if call["memory"] == "apart":
        q, k = misaligned(q, shifts[0]), misaligned(k, shifts[1])
    if isinstance(positions, torch.Tensor):
        positions = misaligned(positions, shifts[2])
    LAUNCHES.clear()
    try:
        result = ENTRIES[call["entry"]](q, k, positions, **kwargs)
    except (TypeError, ValueError, RuntimeError) as error:
        return type(error), str(error)
    table = positions.table if isinstance(positions, Angles) else positions
    outputs = dict(zip(("q out", "k out"), result, strict=False))  # one result, or two
    roles = {"q": q, "k": k, "positions": table, "inv_freq": kwargs["inv_freq"], **outputs}

    # a remembered call hands the launcher its six tensors' addresses, as integers; the
    # tensors they are: the call's, or the default frequencies a remembered launch keeps
    kept = [plan.const for plan in tr._PLANS.values() if getattr(plan, "const", None) is not None]
    known = {t.data_ptr(): t for t in (*kept, *(t for t in roles.values() if t is not None))}

    def role(a):
        names = [name for name, t in roles.items() if t is a]
        return names[0] if names else ("made by the call", a.shape, a.stride(), a.dtype)

    def value(i, a, c):
        if isinstance(a, torch.Tensor):
            return role(a)
        if 9 <= i < 15 and type(a) is int:  # a pointer: the tensor at that address
            return role(known[a]) if a in known else ("an address nothing here holds", a)
        return c

    launched = [
        tuple(value(i, a, c) for i, (a, c) in enumerate(zip(one, comparable(one), strict=True)))
        for one in LAUNCHES
    ]
    return launched or "no launch"


replayed: list[bool] = []


NONE = (0, 0, 0)  # q, k and the positions where they would be, 16-byte aligned


MODEL_GPU = {**MODEL_CALL, "dim": 128}  # at D=128 Triton vectorizes: alignment matters


# one field changed where that changes the launch but not the checks' verdict
@example(MODEL_GPU, None, NONE, False)
@example(MODEL_GPU, None, (1, 0, 0), False)  # q off 16 bytes: compiled apart
@example(MODEL_GPU, None, (0, 8, 0), True)  # k off 16 bytes; a profiler's hook
@example(MODEL_GPU, ("q_view", "contiguous"), NONE, False)  # q's strides alone
@example(MODEL_GPU, ("k_view", "contiguous"), NONE, False)  # k's strides alone
@example(MODEL_GPU, ("positions", "[B, 1, T] every other"), NONE, False)
@example({**MODEL_GPU, "offset": 5}, None, NONE, False)  # the call's own offset
@example({**MODEL_GPU, "offset": 5}, ("offset", 2**31), NONE, False)  # an offset of 64 bits
@example(MODEL_GPU, ("inplace", False), NONE, False)
@example(MODEL_GPU, ("memory", "k inside q"), NONE, False)  # refused
@example(ANGLES_CALL, None, NONE, False)
@example(ANGLES_CALL, ("positions", "angles laid out otherwise"), NONE, False)
@given(
    first=st.one_of(st.just(MODEL_CALL), CALLS),
    change=CHANGES,
    shifts=st.lists(st.sampled_from([0, 1, 8]), min_size=3, max_size=3),
    hooked=st.booleans(),
)
def check_a_remembered_call_launches_as_its_checks_would(first, change, shifts, hooked):
    """A call made after one alike (or after one that differs in one field) hands the
    launcher what it hands it when nothing is remembered: the same compiled kernel, grid,
    stream, integers, and tensors in the same roles; or it raises the same error."""
    second = first if change is None else {**first, change[0]: change[1]}
    listen(hooked)
    tr._PLANS.clear()
    for seed in (0, 2):  # Triton compiles the first; the second is launched directly
        outcome(first, seed, (0, 0, 0))
    fired = []
    fire = tr._fire
    tr._fire = lambda *a: fired.append(1) or fire(*a)
    run_compiled = tr._run_compiled
    tr._run_compiled = lambda *a: fired.append(0) or run_compiled(*a)
    try:
        remembered = outcome(second, 4, shifts)
    finally:
        tr._fire, tr._run_compiled = fire, run_compiled
    replayed.append(fired == [1])  # served by the plan's direct launch alone
    plan_key = tr._plan_key
    tr._plan_key = lambda *a: None
    try:
        alone = outcome(second, 4, shifts)
    finally:
        tr._plan_key = plan_key
        listen(False)
    assert remembered == alone, (remembered, alone)


def series_constants() -> dict[str, float]:
    """The float64 numbers the kernel's own cosines and sines are made of (see
    ``cos_sin_of_float32`` in ``posenc/fast/_rope_kernel.py``), from their definitions: 2/pi,
    pi/2 in three parts (each the float64 nearest what the parts before it leave), and
    1/n! for n from 3 to 17 (1/2! is 0.5 in every format)."""
    from fractions import Fraction
    from math import factorial

    import mpmath

    mpmath.mp.prec = 300
    found = {"2/pi": float(2 / mpmath.pi)}
    left = mpmath.pi / 2
    for i in (1, 2, 3):
        found[f"pi/2, part {i}"] = part = float(left)
        left -= part
    for n in range(3, 18):
        found[f"1/{n}!"] = float(Fraction(1, factorial(n)))  # rounded to nearest
    return found


def ir_lacks(metadata, constants: dict[str, float]) -> list[str]:
    """The names of ``constants`` that the Triton IR of a build (``.ttir``: what the kernel's
    source became, before any library is linked in, whose own constants could stand in for
    the kernel's) holds neither as they are nor negated, among its float64 constants and its
    64-bit integer ones read as float64 bits (the kernel makes its constants from their
    bits)."""
    import re
    import struct

    from triton.runtime.cache import get_cache_manager

    with open(get_cache_manager(metadata.hash).get_file(f"{metadata.name}.ttir")) as file:
        ir = file.read()
    held = set()
    for bits in re.findall(r"arith\.constant (-?\d+) : i64", ir):
        held.add(struct.unpack("<d", struct.pack("<q", int(bits)))[0])
    for value in re.findall(
        r"arith\.constant (?:dense<)?([^\s>]+)>? : (?:tensor<\w*xf64>|f64)", ir
    ):
        if value.startswith("0x"):  # not written exactly in decimal: its bits
            held.add(struct.unpack("<d", struct.pack("<Q", int(value, 16)))[0])
        elif not value.startswith("["):  # (a list of values is left out: reported lacking)
            held.add(float(value))
    return [n for n, v in constants.items() if v not in held and -v not in held]


def _forward_and_backward(x, positions, layout):
    from posenc import fast

    fast.apply_rope(x, positions, layout=layout).sum().backward()


def check_every_build_compiles() -> dict:
    """Each kind of call a GPU gets, through posenc's public functions, compiled for a GPU
    by this Triton (from 3.0; before 3.4 posenc keeps Triton's own launch): every
    dtype, both layouts, D of 64 and 128; positions ``[B, 1, T]`` rotated in place, an
    offset past 32 bits out of place, angles made beforehand, a caller's frequencies, and
    the backward pass. Each call makes its one launch (two with the backward); and each
    build that makes float32 angles' cosines and sines itself carries every float64 number
    they are made of, bit for bit, in the Triton IR it compiles (a Triton that makes a float
    literal float32 first would drop 29 of their bits). The GPU is the stand-in driver's
    target."""
    from posenc import fast

    on_the_gpu_s_path()
    constants = series_constants()
    calls = own_cos_sin = 0
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        angle = torch.float64 if dtype == torch.float64 else torch.float32
        for layout in ("half", "interleaved"):
            for dim in (64, 128):
                q = tensor((2, 3, 32, dim), dtype, 0, transpose=True)  # [B, H, T, D] views
                k = tensor((2, 3, 8, dim), dtype, 0, transpose=True)
                positions = torch.arange(3).expand(2, 3).contiguous()[:, None]  # [B, 1, T]
                freqs = torch.rand(dim // 2, dtype=angle)
                made = fast.rope_angles(positions, dim, dtype=angle)
                x = torch.randn(2, 4, 3, dim, dtype=dtype, requires_grad=True)
                for run, launches, makes_cos_sin in (
                    (partial(fast.rope_qk, q, k, positions, layout=layout, inplace=True), 1, True),
                    (partial(fast.rope_qk, q, k, None, layout=layout, offset=2**33), 1, True),
                    (partial(fast.rope_qk, q, k, made, layout=layout), 1, False),
                    (partial(fast.apply_rope, q, positions, inv_freq=freqs, layout=layout), 1,
                     True),
                    (partial(_forward_and_backward, x, positions, layout), 2, True),
                ):  # fmt: skip
                    before, built = len(LAUNCHES), len(BUILDS)
                    run()
                    assert len(LAUNCHES) - before == launches, (dtype, layout, dim, launches)
                    if makes_cos_sin and dtype != torch.float64:  # float64: libdevice's
                        for metadata in BUILDS[built:]:
                            lacks = ir_lacks(metadata, constants)
                            assert not lacks, (dtype, layout, dim, lacks)
                            own_cos_sin += 1
                    calls += 1
    return {"calls": calls, "builds": len(BUILDS), "launches": len(LAUNCHES),
            "own_cos_sin": own_cos_sin}  # fmt: skip


if __name__ == "__main__":
    driver.set_active(FakeCuda())
    runs = settings(max_examples=int(sys.argv[1]), deadline=None, database=None, derandomize=True)
    runs(check_a_direct_launch_is_the_launch_triton_makes)()
    print(json.dumps({"launches": len(direct), "direct": sum(direct), "hooked": sum(hooks)}))
