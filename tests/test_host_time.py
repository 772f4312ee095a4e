"""Triton's own launcher, built against a stand-in libcuda (``tools/host_time.py``): posenc's
launch by the launcher's C function hands it what Triton's ``__call__`` hands it, and a
decoding step's calls reach the driver once each, timed by the tool."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from posenc.fast import host
from posenc.fast import triton as tr
from tools import host_time


def _triton_launch_repeated() -> bool:
    if importlib.util.find_spec("triton") is None or tr._OPS is None:
        return False
    first, last = tr._LAUNCHER_VERSIONS
    return first <= tr._triton_release() <= last


needs_stand_in = pytest.mark.skipif(
    not _triton_launch_repeated() or host_time.compiler() is None,
    reason="needs a Triton whose launch posenc repeats, and a C compiler",
)

_SAME_LAUNCH = """
import json
import torch
from tools import host_time

record = []
host_time.use_stand_in_driver(record)
from posenc import fast
from posenc.fast import triton as tr


def values(args, inputs):
    # a launch's arguments as values: a pointer (a tensor, or its address as an integer, as
    # a remembered call passes it) by where it lies if it is one of the call's tensors, else
    # as a new one (an integer that large is no size); hooks that call nothing, and the
    # launch metadata that only hooks read, as None
    def value(a):
        if isinstance(a, torch.Tensor):
            return ("pointer", a.data_ptr() if a.data_ptr() in inputs else "new")
        if type(a) is int and (a in inputs or a >= 2**44):
            return ("pointer", a if a in inputs else "new")
        if isinstance(a, tuple):
            return tuple(value(b) for b in a)
        if getattr(a, "calls", None) == [] or type(a).__name__ == "LazyDict":
            return None
        return a
    return [value(a) for a in args]


def view(b, h, t, d, dtype):  # [B, H, T, D], a view of the projection's [B, T, H, D]
    return torch.randn(b, t, h, d).to(dtype).transpose(1, 2)


q16, k16 = view(2, 4, 3, 64, torch.bfloat16), view(2, 2, 3, 64, torch.bfloat16)
q32, k32 = view(1, 4, 5, 128, torch.float32), view(1, 1, 5, 128, torch.float32)
x64 = torch.randn(3, 7, 32, dtype=torch.float64, requires_grad=True)
qh, kh = (torch.randn(2, h, 4, 64, dtype=torch.float16) for h in (2, 1))
angles = fast.rope_angles(torch.arange(4), 64)  # made once, read by every call
positions = torch.tensor([[7, 8, 9], [0, 1, 2]])[:, None, :]  # [B, 1, T]
freqs = torch.rand(16, dtype=torch.float64)
calls = {
    "bf16, half, in place, positions": (
        lambda: fast.rope_qk(q16, k16, positions, layout="half", inplace=True), (q16, k16)),
    "float32, interleaved, out of place, offset past 32 bits": (
        lambda: fast.rope_qk(q32, k32, offset=2**40), (q32, k32)),
    "float16, angles made, in place": (
        lambda: fast.rope_qk(qh, kh, angles, inplace=True), (qh, kh, angles.table)),
    "float64, own frequencies, forward and backward": (
        lambda: fast.apply_rope(x64, inv_freq=freqs).sum().backward(), (x64,)),
}
from posenc.fast import host

module = host._module if host.available() else None
checked = {}
for name, (call, tensors) in calls.items():
    record.clear()
    host._module = None  # keys and addresses read in Python
    for _ in range(3):  # Triton's launch (compiling), then posenc's, then a remembered call's
        call()
    inputs = {t.data_ptr() for t in tensors}
    n = len(record) // 3  # launches a call makes (2 with its backward)
    seen = [values(args, inputs) for args in record]
    own = seen[:n]
    assert len(seen) == 3 * n and seen[n:2 * n] == own and seen[2 * n:] == own, (name, seen)
    if module is not None:  # and read in C++: a call remembered anew, then one remembered
        host._module = module
        tr._PLANS.clear()
        record.clear()
        call()
        call()
        seen = [values(args, inputs) for args in record]
        assert seen == own + own, (name, "C++", seen)
    checked[name] = [len(args) for args in own]
launches = list(tr._C_LAUNCHES.values())
print(json.dumps({"checked": checked, "c_launches": len(launches),
                  "all_c": all(v is not None for v in launches), "cpp": module is not None}))
"""


@needs_stand_in
def test_posenc_hands_the_launcher_what_triton_hands_it():
    """Triton's own launch of a call (its ``__call__`` of the launcher) and posenc's (the C
    function called directly, ``posenc.fast.triton._c_launch``) give the C function the same
    arguments: dtypes, both layouts, in place and out of place, positions, an offset past
    32 bits, angles made beforehand, a caller's frequencies, the inverse rotation. Triton
    compiles for an H100, and its launcher module is built against the stand-in libcuda."""
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend compiles it")
    with tempfile.TemporaryDirectory() as folder:
        host_time.build_stand_in(Path(folder))
        done = subprocess.run(
            [sys.executable, "-c", _SAME_LAUNCH], capture_output=True, text=True, timeout=600,
            cwd=host_time.ROOT, env=host_time.stand_in_env(folder),
        )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    launches = found["checked"]  # the arguments of each launch a call makes
    assert len(launches) == 4 and all(n >= 10 for each in launches.values() for n in each)
    assert [len(each) for each in launches.values()] == [1, 1, 1, 2]  # the last, backward too
    assert found["c_launches"] == 5 and found["all_c"]  # one kernel each, all launched by C
    assert found["cpp"] == host.available()  # remembered calls checked with C++ keys too


@needs_stand_in
def test_every_call_reaches_the_driver_once_and_is_timed():
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend compiles it")
    done = subprocess.run(
        [sys.executable, "-m", "tools.host_time", "--number", "50", "--rounds", "2"],
        capture_output=True, text=True, timeout=600, cwd=host_time.ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    us = found["us"]
    readers = ("Python", "C++") if host.available() else ("Python",)
    assert set(us) == {
        *(
            f"rope_qk {how}, keys read in {r}"
            for r in readers
            for how in ("in place", "out of place")
        ),
        "Triton's launcher, as Triton calls it",
    }
    calls = len(us) * 50 * 2
    assert found["calls"] == calls and found["launches"] == calls
    assert all(v > 0 for v in us.values())
    # a call is a launch and posenc's own work besides
    assert us["Triton's launcher, as Triton calls it"] < us["rope_qk in place, keys read in Python"]
    assert f"launches the driver received: {calls} for {calls} calls" in done.stdout


@pytest.mark.parametrize("argv", [["--number", "0"], ["--rounds", "0"]])
def test_counts_below_one_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        host_time.main(argv)
    assert "must be at least 1" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs Triton")
def test_without_the_nvidia_backend_triton_launches_itself(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton.backends.nvidia.driver", None)  # import fails
    assert tr._c_launch(object()) is None
