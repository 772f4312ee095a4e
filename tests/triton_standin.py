"""A stand-in for Triton's CUDA driver, so that Triton compiles posenc's kernel for a real GPU
on a CPU: run as a script by ``tests/test_triton_builds.py``, in a process of its own.

Triton is given a stand-in for its driver: it compiles the kernel for a real GPU target (an
H100, sm_90, down to a cubin with its own ptxas; or an AMD MI300), and the stand-in records
every launch instead of making it. ``check_every_build_compiles`` sends each kind of call a
GPU gets through posenc's public functions and checks what was compiled. Run without
``TRITON_INTERPRET`` set: Triton reads it once, when it is imported.
"""

from __future__ import annotations

import hashlib
from functools import partial

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver  # noqa: F401 (the script sets its active driver)

from posenc.fast import cpu_kernel, dispatch
from posenc.fast import triton as tr

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


def tensor(shape, dtype, shift, transpose=False, pad=0):
    """A tensor whose data start ``shift`` elements into its storage (16-byte aligned or not),
    its rows ``pad`` elements apart beyond their length (the rest of a wider projection)."""
    *lead, dim = shape
    n = torch.Size([*lead, dim + pad]).numel()
    flat = torch.randn(n + shift).to(dtype)[shift:]
    t = flat.view(*lead, dim + pad)[..., :dim]
    return t.transpose(1, 2) if transpose else t


def on_the_gpu_s_path() -> None:
    """CPU tensors taken by posenc as a GPU's: the kernel compiled for the GPU target and
    launched by the stand-in driver, not run by Triton's interpreter nor by the C loop."""
    tr._INTERPRETED_DEVICES = ()
    tr._runs_here = lambda device: True
    tr.triton_available = lambda device="cuda": True
    dispatch._TRITON_DEVICES = ("cpu",)
    cpu_kernel._state.update(lib=None, why="a GPU's path is tested")


def series_constants() -> dict[str, float]:
    """The float64 numbers the kernel's own cosines and sines are made of (see
    ``cos_sin_of_float32`` in ``posenc/fast/triton_kernel.py``), from their definitions: 2/pi,
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
    by this Triton (from 3.0), launched by ``kernel[grid]``: every
    dtype, both layouts, D of 64 and 128; positions ``[B, 1, T]`` rotated in place, an
    offset past 32 bits out of place, a caller's frequencies, and
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
                x = torch.randn(2, 4, 3, dim, dtype=dtype, requires_grad=True)
                for run, launches, makes_cos_sin in (
                    (partial(fast.rope_qk, q, k, positions, layout=layout, inplace=True), 1, True),
                    (partial(fast.rope_qk, q, k, None, layout=layout, offset=2**33), 1, True),
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
