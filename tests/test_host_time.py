"""``tools/host_time.py``: posenc's calls at a decoding step reach the driver once each, through
Triton's own launcher built against the stand-in libcuda, and the tool says how long the host
took for them."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import sysconfig

import pytest

from posenc.fast import triton as tr
from tools import host_time


def _triton_launch_repeated() -> bool:
    if importlib.util.find_spec("triton") is None or tr._OPS is None:
        return False
    import triton

    first, last = tr._LAUNCHER_VERSIONS
    return first <= tuple(int(p) for p in triton.__version__.split(".")[:2]) <= last


def _compiler() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is not None


@pytest.mark.skipif(
    not _triton_launch_repeated() or not _compiler(),
    reason="needs a Triton whose launch posenc repeats, and a C compiler",
)
def test_every_call_reaches_the_driver_once_and_is_timed():
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend compiles it")
    done = subprocess.run(
        [sys.executable, "-m", "tools.host_time", "--number", "50", "--rounds", "2"],
        capture_output=True, text=True, timeout=600, cwd=host_time.ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["calls"] == 3 * 50 * 2 and found["launches"] == found["calls"]
    us = found["us"]
    assert set(us) == {"rope_qk in place", "rope_qk out of place", "Triton's launcher alone"}
    assert all(v > 0 for v in us.values())
    # a call is the launcher's work and posenc's own
    assert us["Triton's launcher alone"] < us["rope_qk in place"]
    assert "launches the driver received: 300 for 300 calls" in done.stdout


@pytest.mark.parametrize("argv", [["--number", "0"], ["--rounds", "0"]])
def test_counts_below_one_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        host_time.main(argv)
    assert "must be at least 1" in capsys.readouterr().err
