"""The floors ``pyproject.toml`` declares for the model packages hold: installed together, at
exactly those versions, the tests and chapters that use them pass.

The packages are those of the Llama 3.2 and SmolLM2 paths: transformers, tokenizers,
huggingface-hub, safetensors, accelerate, gguf, tiktoken and llama-models. A fresh venv gets
the torch that runs this test (its version, the CPU build where there is no GPU, as the
README's commands install it), then the book extra with each of those packages pinned to
its floor (``==``; the extra's other packages as declared), and the test tools. In it,
``python -m posenc.data.smol`` converts SmolLM2 with that transformers (the converted copy is
kept per transformers release, beside the others in the shared cache), and pytest runs the
test files and chapters below. Slow: a few minutes, most of it the install and chapter 15.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from packaging.utils import canonicalize_name
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

ROOT = Path(__file__).resolve().parents[1]

MODEL_PACKAGES = (
    "transformers",
    "tokenizers",
    "huggingface-hub",
    "safetensors",
    "accelerate",
    "gguf",
    "tiktoken",
    "llama-models",
)
TOOLS = ("pytest>=8", "nbval>=0.11", "nbclient>=0.10", "ipykernel>=6", "hypothesis>=6.100")
RUN = [
    "tests/test_llama.py",
    "tests/test_llama_rope.py",
    "tests/test_rope_transformers.py",
    "tests/test_smol.py",
    "tests/test_decoder.py",
    "tests/test_trained.py",
    "tests/test_secrets.py",
    "tests/test_local_hub.py",
    "notebooks/01_the_problem.ipynb",
    "notebooks/10_rope_in_llama.ipynb",
    "notebooks/15_rope_in_a_trained_model.ipynb",
]


def floor_requirements() -> list[str]:
    """The book extra, each model package pinned to its declared floor."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = []
    for requirement in extra["optional-dependencies"]["book"]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)
        if name in MODEL_PACKAGES:
            floor = re.search(r">=\s*([0-9][^,;\s]*)", requirement)
            assert floor, f"{requirement} declares no floor"
            requirement = f"{name}=={floor.group(1)}"
        pinned.append(requirement)
    assert sum(r.split("==")[0] in MODEL_PACKAGES for r in pinned) == len(MODEL_PACKAGES)
    return pinned


def test_every_model_package_has_a_floor_to_pin():
    pins = [r for r in floor_requirements() if "==" in r]
    assert sorted(p.split("==")[0] for p in pins) == sorted(MODEL_PACKAGES)


def _run(command: list[str], env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command[:4])} ... failed:\n{output[-6000:]}"
    return output


@pytest.mark.slow
def test_the_declared_floors_pass_the_tests_and_chapters_that_use_them(tmp_path):
    venv = tmp_path / "floors"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    # posenc from this checkout, for the chapters' kernels too (it is not installed there)
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    env["POSENC_TORCH"] = f"torch=={torch.__version__.split('+')[0]}"
    _run([python, "-m", "tools.install_torch"], env, 1200)
    _run([python, "-m", "pip", "install", "--quiet", *floor_requirements(), *TOOLS], env, 1200)
    frozen = _run([python, "-m", "pip", "list", "--format=freeze"], env, 120).splitlines()
    installed = dict(
        (canonicalize_name(n), Version(v))
        for n, v in (line.split("==") for line in frozen if "==" in line)
    )
    for pin in (r for r in floor_requirements() if "==" in r):
        name, version = pin.split("==")
        assert installed.get(canonicalize_name(name)) == Version(version), f"{pin} not installed"
    _run([python, "-m", "posenc.data.smol"], env, 900)
    _run(
        [python, "-m", "pytest", "-p", "no:xdist", "-q", "--nbval", *RUN],
        env,
        1800,
    )
