"""posenc launches its compiled Triton kernel itself, without Triton's own launch path (about
20 µs of Python a call): checked on the CPU against that path, with Triton compiling for a
real GPU target behind a stand-in for its CUDA driver (``tests/fake_gpu_launch.py``)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

from posenc.fast import triton as tr

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None or tr._OPS is None,
    reason="needs Triton and torch 2.4 or later",
)

SCRIPT = pathlib.Path(__file__).with_name("fake_gpu_launch.py")


def test_a_direct_launch_is_the_launch_triton_makes():
    """Pairs of calls, drawn by hypothesis (dtypes, layouts, strides, padded rows, pointers
    off 16 bytes, offsets past 32 bits, one position or several): where posenc's key sends
    the second call to the kernel compiled for the first, the launcher receives exactly what
    Triton's own launch of that call gives it (the same cubin, grid, stream, arguments; with
    a launch hook set, as a profiler sets one, the hooks and the launch metadata too, and
    without, no hook to call).
    In a process of its own: Triton reads ``TRITON_INTERPRET`` once, when it is imported."""
    _launch_path_checked()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "30"], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["launches"] >= 30 and found["direct"] >= 5  # the direct launch, checked
    assert found["hooked"] >= 1  # a direct launch with a launch hook set, checked too


_OFFSET_PAIRS = """
import json, sys
import fake_gpu_launch as f

f.driver.set_active(f.FakeCuda())
check = f.check_a_direct_launch_is_the_launch_triton_makes.hypothesis.inner_test
for offsets in json.loads(sys.argv[1]):
    check(f.MODEL, None, f.ALIGNED, None, tuple(offsets), False)
print(json.dumps(f.direct))
"""


def test_offsets_of_every_width_get_the_kernel_triton_chooses():
    """Triton compiles an offset as a 32-bit integer, a 64-bit one, or an unsigned 64-bit
    one from ``2**63`` on: pairs of calls that differ only in the offset's width (after
    ``2**40``, one of ``2**63``; after ``2**63``, ``2**40``; after 7, ``2**31``) are
    launched as Triton launches the second, and two calls of one width (``2**40`` and
    ``2**41``) share the compiled kernel, the second launched directly. (The hypothesis
    draws of ``test_a_direct_launch_is_the_launch_triton_makes`` need not pair them.)"""
    _launch_path_checked()
    pairs = [(2**40, 2**63), (2**63, 2**40), (7, 2**31), (2**40, 2**41)]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    paths = [str(SCRIPT.parent), str(SCRIPT.parent.parent), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))  # fake_gpu_launch and posenc
    done = subprocess.run(
        [sys.executable, "-c", _OFFSET_PAIRS, json.dumps(pairs)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # the first three pairs are compiled apart; the last is launched directly
    assert json.loads(done.stdout.splitlines()[-1]) == [False, False, False, True]


@pytest.mark.parametrize("version", ["3.3.1", "3.10.0", "4.0.0"])
def test_other_triton_versions_and_gpus_keep_their_own_launch(version, monkeypatch):
    pytest.importorskip("triton.compiler")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import CompiledKernel

    compiled = CompiledKernel.__new__(CompiledKernel)
    compiled.module = None  # nothing loaded, nothing to unload

    def built_for(backend):
        target = GPUTarget(backend, 90 if backend == "cuda" else "gfx942", 32)
        compiled.metadata = type("Metadata", (), {"target": target})()
        return compiled

    monkeypatch.setattr(triton, "__version__", version)
    assert not tr._launcher_known(built_for("cuda"))
    monkeypatch.setattr(triton, "__version__", "3.6.0")
    assert tr._launcher_known(built_for("cuda"))
    assert not tr._launcher_known(built_for("hip"))  # AMD: tensors over 2 GB compiled apart
    assert not tr._launcher_known(None)  # what Triton returned was not a compiled kernel


def _fake_gpu(script: str, *args: str) -> str:
    """Run ``script`` with the stand-in driver of ``fake_gpu_launch.py`` importable; its
    last line of output."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    paths = [str(SCRIPT.parent), str(SCRIPT.parent.parent), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout.splitlines()[-1]


@pytest.mark.parametrize(
    ("backend", "target"), [("nvidia", "cuda 90 32"), ("amd", "hip gfx942 64")]
)
def test_every_build_compiles_for_a_gpu(backend, target):
    """Every dtype, both layouts, D of 64 and 128, positions in place, a 64-bit offset, angles
    made beforehand, a caller's frequencies and the backward pass: each compiled by the
    installed Triton for an H100 (and for an AMD MI300, where Triton's own launch serves
    every call) and launched once per pass, whichever way posenc launches with that
    version; and every build that makes float32 angles' cosines and sines itself has the
    float64 numbers they are made of (2/pi, pi/2 in three parts, 1/n!) bit for bit in the
    Triton IR it compiles. ``tools/triton_versions.py`` runs this under each Triton from
    3.0."""
    compiler = pytest.importorskip(
        f"triton.backends.{backend}.compiler", reason=f"Triton's {backend} backend"
    )
    if backend == "amd" and hasattr(compiler.HIPBackend, "path_to_rocm_lld"):
        try:  # before Triton 3.5 an AMD build needs ROCm's linker, installed apart
            compiler.HIPBackend.path_to_rocm_lld()
        except Exception as err:  # Triton raises a plain Exception
            pytest.skip(str(err))
    found = json.loads(_fake_gpu(_BUILDS, *target.split()))
    # 4 dtypes x 2 layouts x 2 dims x 5 calls, the backward's two passes two launches
    assert (found["calls"], found["launches"]) == (80, 96)
    assert found["builds"] >= 16  # at least one per dtype, layout and dim
    # bf16, fp16, fp32 x 2 layouts x 2 dims x (positions, offset, frequencies, both passes)
    assert found["own_cos_sin"] == 60


_BUILDS = """
import json, sys
import fake_gpu_launch as f
from triton.backends.compiler import GPUTarget

backend, arch, warp = sys.argv[1:]
f.driver.set_active(f.FakeCuda(GPUTarget(backend, int(arch) if arch.isdigit() else arch, int(warp))))
print(json.dumps(f.check_every_build_compiles()))
"""


def _launch_path_checked():
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend compiles it")
    import triton

    first, last = tr._LAUNCHER_VERSIONS
    if not first <= tr._triton_release() <= last:
        pytest.skip(f"Triton {triton.__version__}: posenc keeps Triton's own launch there")


def test_a_remembered_call_launches_as_its_checks_would():
    """``rope_qk`` and ``rope_qk_triton`` called as a model calls them on a GPU (taken through
    the GPU's launch path here): a call after one alike, or after one that differs in one
    field (strides of q, of k, of the positions; an offset of 64 bits; pointers off 16
    bytes; angles laid out otherwise; arguments that are refused), hands the launcher
    exactly what it hands it when nothing is remembered, or raises the same error; and calls
    alike are served by the remembered direct launch alone."""
    _launch_path_checked()
    found = json.loads(_fake_gpu(_RUN_REMEMBERED, "25"))
    assert found["calls"] >= 25 and found["replayed"] >= 8


_RUN_REMEMBERED = """
import json, sys
import fake_gpu_launch as f
from hypothesis import settings

f.driver.set_active(f.FakeCuda())
f.on_the_gpu_s_path()
runs = settings(max_examples=int(sys.argv[1]), deadline=None, database=None, derandomize=True)
runs(f.check_a_remembered_call_launches_as_its_checks_would)()
print(json.dumps({"calls": len(f.replayed), "replayed": sum(f.replayed)}))
"""


_MISALIGNED = """
import json
import fake_gpu_launch as f
from posenc.fast import triton as tr

f.driver.set_active(f.FakeCuda())
f.on_the_gpu_s_path()
served = []
for shifts in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 0, 0)]:
    tr._PLANS.clear()
    for seed in (0, 2):
        f.outcome(f.MODEL_GPU, seed, (0, 0, 0))  # compiled, then remembered
    run_compiled, ran = tr._run_compiled, []
    tr._run_compiled = lambda *a: ran.append(1) or run_compiled(*a)
    f.outcome(f.MODEL_GPU, 4, shifts)
    tr._run_compiled = run_compiled
    served.append("direct" if not ran else "by its key")
print(json.dumps(served))
"""


def test_a_remembered_call_off_16_bytes_goes_where_its_key_sends_it():
    """Triton compiles apart calls whose pointers are or are not 16-byte aligned: a call
    alike to a remembered one but for a pointer off 16 bytes (q's, k's or the positions')
    is not served by the remembered launch, but by the compiled kernel its full key picks."""
    _launch_path_checked()
    served = json.loads(_fake_gpu(_MISALIGNED))
    assert served == ["direct", "by its key", "by its key", "by its key", "direct"]


_DISPATCHED = """
import json
import fake_gpu_launch as f
from torch.utils._python_dispatch import TorchDispatchMode

f.driver.set_active(f.FakeCuda())
f.on_the_gpu_s_path()


class Record(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


found = {}
for inplace in (True, False):
    call = {**f.MODEL_GPU, "inplace": inplace}
    for seed in (0, 2):
        f.outcome(call, seed, (0, 0, 0))  # compiled, then remembered
    q, k, positions, kwargs = f._arguments(call, 4)
    with Record() as record:
        f.ENTRIES[call["entry"]](q, k, positions, **kwargs)
    found[str(inplace)] = record.ops
print(json.dumps(found))
"""


def test_a_remembered_call_dispatches_nothing_but_its_outputs():
    """A remembered call, taken through the GPU's launch path, dispatches no tensor operation
    but the allocation of its outputs: nothing read back from the device, nothing copied,
    no table made; in place, nothing at all."""
    _launch_path_checked()
    found = json.loads(_fake_gpu(_DISPATCHED))
    assert found == {"True": [], "False": ["empty_like", "empty_like"]}
