"""Install PyTorch into the environment the README's commands set up, the build this machine needs.

    python -m tools.install_torch

- A PyTorch that is already installed is kept, whatever its build (Colab's, or one you chose).
- With an NVIDIA GPU (``nvidia-smi`` lists one, or the driver shows one under
  ``/proc/driver/nvidia/gpus``), pip's default build, which on Linux is the CUDA one.
- Without one, the CPU build from PyTorch's own CPU wheel index (as pytorch.org's install page
  documents: ``pip install torch --index-url https://download.pytorch.org/whl/cpu``): a few
  hundred MB instead of several GB of CUDA libraries. When installing from that index fails
  (it cannot be reached, or has no build for this Python), the default build after all.

It prints which build it installed and from where. ``POSENC_TORCH`` overrides the requirement
(default ``torch>=2.1``, the floor ``posenc`` declares).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
REQUIREMENT = "torch>=2.1"
# pip waits this long for the CPU index before the default build is installed instead
INDEX_TIMEOUT_S = 15

Runner = Callable[[Sequence[str]], int]


def installed_torch() -> str | None:
    """The installed PyTorch's version (``2.13.0+cpu``), or None."""
    importlib.invalidate_caches()  # pip may have installed it since this process started
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def has_nvidia_gpu(driver: Path = Path("/proc/driver/nvidia/gpus")) -> bool:
    """Whether an NVIDIA GPU is present: ``nvidia-smi -L`` lists one, or the driver does."""
    if driver.is_dir() and any(driver.iterdir()):
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listed.returncode == 0 and "GPU" in listed.stdout


def _pip(args: Sequence[str]) -> int:
    return subprocess.run([sys.executable, "-m", "pip", "install", *args]).returncode


def build_of(version: str | None) -> str:
    """What a torch version says of its build: ``2.13.0+cpu`` is the CPU build."""
    local = (version or "").partition("+")[2]
    if local == "cpu":
        return "the CPU build"
    if local.startswith("cu"):
        return f"a CUDA build ({local})"
    if local.startswith("rocm"):
        return f"a ROCm build ({local})"
    return "pip's default build (on Linux x86_64 a CUDA one)"


def install(
    requirement: str = REQUIREMENT,
    *,
    gpu: bool | None = None,
    index: str = CPU_INDEX,
    pip: Runner = _pip,
    say: Callable[[str], None] = print,
) -> str:
    """Install PyTorch as the module docstring says; return which path it took (``"kept"``,
    ``"default"``, ``"cpu"`` or ``"default after the CPU index failed"``).

    Args:
        requirement: the pip requirement for torch.
        gpu: whether an NVIDIA GPU is present (default: :func:`has_nvidia_gpu`).
        index: the CPU wheel index.
        pip: runs ``pip install ARGS`` and returns its exit status.
        say: where the lines about the choice go.

    Raises:
        RuntimeError: if pip fails to install the default build.
    """
    version = installed_torch()
    if version is not None:
        say(f"PyTorch {version} is already installed: kept.")
        return "kept"
    if gpu is None:
        gpu = has_nvidia_gpu()
    how = "default"
    if not gpu:
        say(f"No NVIDIA GPU found: installing PyTorch's CPU build from {index}.")
        timeout = ["--timeout", str(INDEX_TIMEOUT_S), "--retries", "1"]
        if pip(["--index-url", index, *timeout, requirement]) == 0:
            version = installed_torch()
            say(f"Installed PyTorch {version}, {build_of(version)}.")
            return "cpu"
        say(
            f"Installing from {index} failed (see pip above): installing the default build instead."
        )
        how = "default after the CPU index failed"
    if pip([requirement]) != 0:
        raise RuntimeError(f"pip could not install {requirement}")
    version = installed_torch()
    say(f"Installed PyTorch {version}, {build_of(version)}.")
    return how


def main() -> int:
    install(os.environ.get("POSENC_TORCH", REQUIREMENT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
