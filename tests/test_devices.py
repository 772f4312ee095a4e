"""The chapters' stored outputs hold on every device, offline.

Every chapter picks its device with ``pe.default_device()``, which ``POSENC_DEVICE`` can
force. For each device this machine has, the chapters are re-executed under nbval (in a
subprocess, exactly as ``pytest --nbval`` runs them) with the device forced, with
``HF_HUB_OFFLINE=1``, no token and the Hub unreachable, and their outputs compared with the
stored ones.

The normal ``pytest --nbval`` run already executes every chapter on the default device
(the GPU when there is one, else the CPU), so running all of them again on that device
would only double a minute of CI time. So:

- on the default device nothing is run again: forcing it is checked by
  ``test_posenc_device_is_honoured`` (the override picks it), and the normal run is the rest;
- on any other device (the CPU of a GPU machine) every chapter is run;
- a device this machine does not have is skipped, saying so.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tools import setup_cell

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = setup_cell.chapters()


def available() -> list[str]:
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def natural_default() -> str:
    """The device a chapter picks when nothing is forced."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def offline_env(device: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE"))}
    env.update(
        POSENC_DEVICE=device,
        HF_HUB_OFFLINE="1",
        HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}",
    )
    env.pop(setup_cell.ENV_VAR, None)
    return env


def run_nbval(paths: list[Path], device: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "-q", "-p", "no:randomly"]
        + [str(p.relative_to(ROOT)) for p in paths],
        cwd=ROOT,  # the sanitize file in pyproject's addopts is relative to the root
        env=offline_env(device),
        capture_output=True,
        text=True,
        timeout=1800,
    )


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_posenc_device_is_honoured(device):
    if device not in available():
        pytest.skip(f"no {device} device on this machine")
    got = subprocess.run(
        [sys.executable, "-c", "import posenc; print(posenc.default_device())"],
        cwd=ROOT,
        env=offline_env(device),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert got == device


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_chapters_hold_with_the_device_forced(device):
    if device not in available():
        pytest.skip(
            f"no {device} device on this machine: this case runs every chapter with "
            f"POSENC_DEVICE={device} on a machine that has one"
        )
    if device == natural_default():
        pytest.skip(
            f"{device} is this machine's default device: the normal nbval run is this run, and "
            "test_posenc_device_is_honoured checks that forcing it picks it"
        )
    done = run_nbval(CHAPTERS, device)
    assert done.returncode == 0, (
        f"nbval with POSENC_DEVICE={device}, offline, failed:\n{done.stdout[-6000:]}\n"
        f"{done.stderr[-2000:]}"
    )
    assert " passed" in done.stdout
