"""The host's time of posenc's calls at a decoding step, measured on a CPU.

    python -m tools.host_time
    python -m tools.host_time --number 2000 --rounds 5

At a decoding step (q ``[64, 32, 1, 128]`` and k ``[64, 8, 1, 128]`` in bfloat16, the
projections' transposed views, positions as a ``[64, 1, 1]`` tensor) the kernel takes a few
microseconds and the host's work for a call takes longer; the GPU benchmark
(``python -m posenc.bench --peers``) measures it there. This tool measures the same calls
without a GPU: Triton compiles the kernel for an H100 (as in ``tests/fake_gpu_launch.py``),
and Triton's own launcher, its C module built as on a GPU machine, launches it through a
stand-in ``libcuda.so.1`` whose functions return at once (it only counts the launches). So
the times are everything the host does for a call but the CUDA driver's own work: the
Python of posenc and of Triton's launcher, and the C that packs the arguments. They are this
CPU's, and a GPU machine's host may be slower: the stored H100 run
(``posenc.bench.peers.stored("h100")``) took 11 µs of its host for the in-place call, the
driver included, three times what this tool measures on a 2-core cloud CPU (3.3 µs, the
key read in C++). Each call is timed twice, its key and its launch's arguments read in
Python and in C++ (:mod:`posenc.fast.host`, built here first when a C++ compiler is found).

It prints each time (the best of ``--rounds`` rounds of ``--number`` calls), then, as a last
line, the same as JSON with the launches the stand-in driver received (one per call).
Needs Triton 3.4 or later (whose launch posenc repeats), its NVIDIA backend, a C compiler,
and the test extra (the stand-in driver is that of ``tests/fake_gpu_launch.py``).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import timeit
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_MARK = "POSENC_HOST_TIME_DRIVER"  # set in the process that measures: the stand-in's folder

# The driver functions Triton's launcher module links to or looks up (Triton 3.4 to 3.9),
# each answering CUDA_SUCCESS at once; the launches are counted.
_FUNCTIONS = [
    "cuCtxGetCurrent",
    "cuCtxGetDevice",
    "cuCtxGetLimit",
    "cuCtxSetCurrent",
    "cuCtxSetLimit",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDriverGetVersion",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuFuncSetCacheConfig",
    "cuGetErrorString",
    "cuGetProcAddress",
    "cuInit",
    "cuModuleGetFunction",
    "cuModuleLoadData",
    "cuModuleUnload",
    "cuOccupancyMaxActiveClusters",
    "cuPointerGetAttribute",
    "cuPointerGetAttributes",
    "cuStreamIsCapturing",
    "cuTensorMapEncodeIm2col",
    "cuTensorMapEncodeTiled",
]
STAND_IN = "\n".join(
    [
        "long launches = 0;",
        *(f"int {name}(void) {{ return 0; }}" for name in _FUNCTIONS),
        "int cuLaunchKernel(void) { launches++; return 0; }",
        "int cuLaunchKernelEx(void) { launches++; return 0; }",
    ]
)


def compiler() -> str | None:
    """The C compiler that builds the stand-in (``CC``, else Python's own), if installed."""
    cc = os.environ.get("CC") or (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc)


def build_stand_in(folder: Path) -> Path:
    """Compile the stand-in driver into ``folder`` as ``libcuda.so.1`` (and ``libcuda.so``,
    which the launcher module links to); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "libcuda.c"
    source.write_text(STAND_IN + "\n")
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler: set CC or install one")
    library = folder / "libcuda.so.1"
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O2",
            "-Wl,-soname,libcuda.so.1",
            "-o",
            str(library),
            str(source),
        ],
        check=True,
    )
    link = folder / "libcuda.so"
    link.unlink(missing_ok=True)
    link.symlink_to(library.name)
    return folder


def use_stand_in_driver(record: list | None = None) -> None:
    """Triton's driver for this process: an H100 behind the stand-in libcuda, with Triton's
    own launcher and launcher module, and a loaded kernel's handles made up (nothing is
    loaded); posenc takes CPU tensors as a GPU's. With ``record``, each call of a launcher's
    C function is appended to it, its arguments as given."""
    sys.path.insert(0, str(ROOT / "tests"))
    import fake_gpu_launch as fake
    from triton.backends.nvidia.driver import CudaLauncher, CudaUtils

    real = CudaUtils()

    class Utils(fake.Utils):
        def load_binary(self, name, kernel, shared, device):
            return (1, 2, 32, 0, 1024)  # module, function, registers, spills, most threads

        def __getattr__(self, name):
            return getattr(real, name)

    class Recording(CudaLauncher):
        def __init__(self, src, metadata):
            super().__init__(src, metadata)
            launch = self.launch

            def recorded(*args):
                record.append(args)
                return launch(*args)

            self.launch = recorded

    class Driver(fake.FakeCuda):
        launcher_cls = CudaLauncher if record is None else Recording
        utils = Utils()

    fake.driver.set_active(Driver())
    fake.on_the_gpu_s_path()


def stand_in_env(folder: str) -> dict[str, str]:
    """This process's environment with the stand-in driver in ``folder`` found first, and
    Triton's cache in it too (what Triton builds there is linked to the stand-in)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    library_path = [folder, *filter(None, [env.get("LD_LIBRARY_PATH")])]
    env.update(
        {
            _MARK: folder,
            "TRITON_LIBCUDA_PATH": folder,
            "LD_LIBRARY_PATH": os.pathsep.join(library_path),
            "TRITON_CACHE_DIR": str(Path(folder) / "triton"),
        }
    )
    return env


def measure(number: int, rounds: int) -> dict:
    """Microseconds per call (the best round) of a remembered ``rope_qk`` at decoding size,
    in place and out of place, and of Triton's launcher as Triton calls it, for the same
    launch; and the launches the stand-in received against the calls made."""
    import torch
    import triton

    from posenc import fast
    from posenc.fast import host, kernels
    from posenc.fast import triton as tr

    use_stand_in_driver()
    batch, heads_q, heads_k, dim = 64, 32, 8, 128

    def view(heads):  # [B, H, 1, D], a view of the projection's [B, 1, H, D]
        return torch.randn(batch, 1, heads, dim, dtype=torch.bfloat16).transpose(1, 2)

    q, k = view(heads_q), view(heads_k)
    positions = torch.full((batch, 1, 1), 4095)  # [B, 1, T]
    kind = {"base": 500000.0, "layout": "half"}  # Llama 3's
    rope_qk = {
        "rope_qk in place": lambda: fast.rope_qk(q, k, positions, **kind, inplace=True),
        "rope_qk out of place": lambda: fast.rope_qk(q, k, positions, **kind),
    }
    # each call timed with its key and arguments read by each reader: posenc.fast.host's
    # module (C++, which a GPU's calls build) where it builds here, and Python (None)
    readers = {"Python": None, "C++": host._module if host.available() else None}
    calls = {}  # name -> (the reader's module, the call)
    for reader, module in readers.items():
        if reader == "C++" and module is None:
            continue
        host._module = module
        for name, call in rope_qk.items():  # compiled, then remembered with its direct launch
            for _ in range(3):
                call()
            calls[f"{name}, keys read in {reader}"] = (module, call)
    key = tr._plan_key(
        kernels._rope_qk, q, k, positions, kind["base"], None, kind["layout"], True, 0
    )
    plan = tr._PLANS.get(key)
    if plan is None or plan.direct is None:
        raise RuntimeError(f"Triton {triton.__version__}: no direct launch remembered")
    direct = plan.direct
    sources = (None, q, q, k, k, positions, None, plan.const)
    tensors = tuple(sources[i] for i in direct.slots)
    arguments = (*tensors, *direct.sizes, 0, *direct.rest)  # tensors, as Triton passes them
    compiled = direct.compiled
    _, driver = tr._launch_state()
    stream = driver.active.get_current_stream(None)

    def launcher():
        compiled.run(
            direct.grid, 1, 1, stream, compiled.function, compiled.packed_metadata, None, None,
            None, *arguments,
        )  # fmt: skip

    calls["Triton's launcher, as Triton calls it"] = (None, launcher)
    counter = ctypes.c_long.in_dll(ctypes.CDLL("libcuda.so.1"), "launches")
    before, made = counter.value, 0
    found = {}
    for name, (module, call) in calls.items():
        host._module = module
        best = min(timeit.repeat(call, number=number, repeat=rounds))
        found[name] = round(best / number * 1e6, 3)
        made += number * rounds
    return {
        "triton": triton.__version__,
        "us": found,
        "calls": made,
        "launches": counter.value - before,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=20000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds; the best is reported")
    args = parser.parse_args(argv)
    if args.number < 1 or args.rounds < 1:
        parser.error(f"--number and --rounds must be at least 1, got {args.number}, {args.rounds}")
    if _MARK not in os.environ:  # the stand-in must be found when the process starts
        with tempfile.TemporaryDirectory() as folder:
            build_stand_in(Path(folder))
            env = stand_in_env(folder)
            given = sys.argv[1:] if argv is None else argv
            command = [sys.executable, "-m", "tools.host_time", *given]
            return subprocess.run(command, cwd=ROOT, env=env).returncode
    result = measure(args.number, args.rounds)
    print(
        f"Triton {result['triton']}, its launcher built against a stand-in libcuda "
        "(driver calls return at once); µs per call on this CPU, the driver's work left out:"
    )
    for name, us in result["us"].items():
        print(f"  {name:38s} {us:6.2f} µs")
    print(f"  launches the driver received: {result['launches']} for {result['calls']} calls")
    print(json.dumps(result))
    return 0 if result["launches"] == result["calls"] else 1


if __name__ == "__main__":
    sys.exit(main())
