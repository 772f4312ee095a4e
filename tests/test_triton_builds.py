"""The Triton kernel compiled for real GPUs on a CPU: Triton compiles every build for an H100
and an AMD MI300 behind a stand-in for its driver (``tests/triton_standin.py``), in a process
of its own (Triton reads ``TRITON_INTERPRET`` once, when it is imported)."""

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
    importlib.util.find_spec("triton") is None or tr._DEFINE is None,
    reason="needs Triton and torch 2.4 or later",
)

SCRIPT = pathlib.Path(__file__).with_name("triton_standin.py")


def _fake_gpu(script: str, *args: str) -> str:
    """Run ``script`` with the stand-in driver of ``triton_standin.py`` importable; its
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
    installed Triton for an H100 and for an AMD MI300, and launched once per pass (by
    ``kernel[grid]``); and every build that makes float32 angles' cosines and sines itself has the
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
    # 4 dtypes x 2 layouts x 2 dims x 4 calls, the backward's two passes two launches
    assert (found["calls"], found["launches"]) == (64, 80)
    assert found["builds"] >= 16  # at least one per dtype, layout and dim
    # bf16, fp16, fp32 x 2 layouts x 2 dims x (positions, offset, frequencies, both passes)
    assert found["own_cos_sin"] == 60


_BUILDS = """
import json, sys
import triton_standin as f
from triton.backends.compiler import GPUTarget

backend, arch, warp = sys.argv[1:]
f.driver.set_active(f.FakeCuda(GPUTarget(backend, int(arch) if arch.isdigit() else arch, int(warp))))
print(json.dumps(f.check_every_build_compiles()))
"""
