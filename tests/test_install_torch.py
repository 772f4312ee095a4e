"""Which PyTorch the README's commands install: a torch already there is kept; without an NVIDIA
GPU the CPU build from PyTorch's CPU index, and the default build when that index is out of
reach; the choice is printed."""

import contextlib
import functools
import http.server
import os
import socket
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from tools import install_torch

ROOT = Path(__file__).resolve().parents[1]


class Pip:
    """Records ``pip install`` calls; fails those that name an index in ``unreachable``."""

    def __init__(self, unreachable=(), fails=False):
        self.calls, self.unreachable, self.fails = [], set(unreachable), fails

    def __call__(self, args):
        self.calls.append(list(args))
        if self.fails or any(a in self.unreachable for a in args):
            return 1
        return 0


@pytest.fixture
def no_torch(monkeypatch):
    monkeypatch.setattr(install_torch, "installed_torch", lambda: None)


def test_an_installed_torch_is_kept(monkeypatch):
    monkeypatch.setattr(install_torch, "installed_torch", lambda: "2.5.1+cu121")
    pip, said = Pip(), []
    assert install_torch.install(gpu=False, pip=pip, say=said.append) == "kept"
    assert pip.calls == []
    assert said == ["PyTorch 2.5.1+cu121 is already installed: kept."]


def test_without_a_gpu_the_cpu_index_is_used(no_torch):
    pip, said = Pip(), []
    assert install_torch.install(gpu=False, pip=pip, say=said.append) == "cpu"
    assert len(pip.calls) == 1
    assert pip.calls[0][:2] == ["--index-url", install_torch.CPU_INDEX]
    assert pip.calls[0][-1] == install_torch.REQUIREMENT


def test_when_the_cpu_index_is_out_of_reach_the_default_build_is_installed(no_torch):
    pip, said = Pip(unreachable=[install_torch.CPU_INDEX]), []
    how = install_torch.install(gpu=False, pip=pip, say=said.append)
    assert how == "default after the CPU index failed"
    assert pip.calls[1] == [install_torch.REQUIREMENT]
    assert "failed (see pip above)" in said[1]
    assert said[-1].startswith("Installed PyTorch")


def test_with_a_gpu_the_default_build_is_installed_directly(no_torch):
    pip, said = Pip(), []
    assert install_torch.install(gpu=True, pip=pip, say=said.append) == "default"
    assert pip.calls == [[install_torch.REQUIREMENT]]
    assert said[-1].startswith("Installed PyTorch")


def test_a_failed_default_install_is_an_error(no_torch):
    with pytest.raises(RuntimeError, match="could not install torch"):
        install_torch.install(gpu=True, pip=Pip(fails=True), say=lambda _: None)


def test_the_gpu_is_seen_by_the_driver_or_by_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setattr(install_torch.shutil, "which", lambda _: None)
    assert not install_torch.has_nvidia_gpu(tmp_path / "absent")
    (tmp_path / "gpus" / "0000:01:00.0").mkdir(parents=True)
    assert install_torch.has_nvidia_gpu(tmp_path / "gpus")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-0)'\n")
    smi.chmod(0o755)
    monkeypatch.setattr(install_torch.shutil, "which", lambda _: str(smi))
    assert install_torch.has_nvidia_gpu(tmp_path / "absent")


@pytest.mark.parametrize(
    ("version", "build"),
    [
        ("2.13.0+cpu", "the CPU build"),
        ("2.9.1+cu128", "a CUDA build (cu128)"),
        ("2.4.0+rocm6.1", "a ROCm build (rocm6.1)"),
        ("2.13.0", "pip's default build (on Linux x86_64 a CUDA one)"),
    ],
)
def test_the_build_is_read_off_the_version(version, build):
    assert install_torch.build_of(version) == build


def _fake_torch_index(root: Path, version: str) -> Path:
    """A PEP 503 index holding one tiny wheel named torch (``import torch`` gives
    ``__version__``), so pip's real resolution runs without fetching PyTorch."""
    name = f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": f"__version__ = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    (root / "torch").mkdir(parents=True)
    with zipfile.ZipFile(root / "torch" / name, "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)
        wheel.writestr(f"{info}/RECORD", "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n")
    (root / "torch" / "index.html").write_text(f'<a href="{name}">{name}</a>')
    return root


@contextlib.contextmanager
def _served(folder: Path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/"


@pytest.mark.slow
@pytest.mark.parametrize("cpu_index_up", [False, True])
def test_a_fresh_environment_gets_the_cpu_build_or_falls_back(tmp_path, cpu_index_up):
    """For real, in a new venv, with pip: the CPU index is a local one holding ``2.13.0+cpu``,
    or a closed port; pip's default index (``PIP_INDEX_URL``) holds ``2.13.0``. Pip's own
    configuration is switched off, so neither index is shadowed by a local mirror."""
    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    python = str(env_dir / "bin" / "python")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environ["PIP_CONFIG_FILE"] = os.devnull
    with contextlib.ExitStack() as stack:
        default = stack.enter_context(_served(_fake_torch_index(tmp_path / "pypi", "2.13.0")))
        cpu = (
            stack.enter_context(_served(_fake_torch_index(tmp_path / "cpu", "2.13.0+cpu")))
            if cpu_index_up
            else _closed_port()
        )
        environ["PIP_INDEX_URL"] = default
        code = (
            "from tools import install_torch; "
            f"print(install_torch.install('torch', gpu=False, index={cpu!r}))"
        )
        done = subprocess.run(
            [python, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, done.stderr[-2000:]
    said = [line for line in done.stdout.splitlines() if not line.startswith(" ")]
    if cpu_index_up:
        assert said[-2:] == ["Installed PyTorch 2.13.0+cpu, the CPU build.", "cpu"]
    else:
        assert (
            f"Installing from {cpu} failed (see pip above): installing the default build instead."
            in said
        )
        assert said[-2:] == [
            "Installed PyTorch 2.13.0, pip's default build (on Linux x86_64 a CUDA one).",
            "default after the CPU index failed",
        ]
    version = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert version == ("2.13.0+cpu" if cpu_index_up else "2.13.0")
