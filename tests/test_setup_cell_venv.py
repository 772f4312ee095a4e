"""The setup cell, run for real: a fresh environment without posenc installs it and runs chapter 1.

The fresh virtual environment sees the third-party packages of the test environment (through
a ``.pth`` file: torch and friends are not downloaded again) but not ``posenc``. The setup
cell is pointed at a copy of this checkout with ``POSENC_INSTALL_SOURCE``, exactly as it is
pointed at the GitHub repository in Colab; pip runs offline.
"""

import shutil
import site
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tools import setup_cell
from tools.execute_notebooks import coalesce_streams

ROOT = Path(__file__).resolve().parents[1]
COMPARED = ("stream", "execute_result")


def _copy_checkout(dest: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def _texts(cell):
    """The compared outputs of a cell, with printed text merged however it was split."""
    outputs = coalesce_streams([o for o in cell.outputs if o.output_type in COMPARED])
    return [(o.get("name"), o.get("text") or o.get("data", {}).get("text/plain")) for o in outputs]


@pytest.mark.slow
def test_setup_cell_installs_posenc_and_chapter_1_runs(tmp_path, monkeypatch):
    checkout = _copy_checkout(tmp_path / "checkout")
    env_dir = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    child_site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (child_site / "_test_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")

    probe = [str(python), "-c", "import importlib.util; print(importlib.util.find_spec('posenc'))"]
    assert (
        subprocess.run(
            probe, cwd=tmp_path, capture_output=True, text=True, check=True
        ).stdout.strip()
        == "None"
    )

    kernels = tmp_path / "jupyter"
    subprocess.run(
        [
            str(python),
            "-m",
            "ipykernel",
            "install",
            "--prefix",
            str(kernels),
            "--name",
            "posenc-fresh",
        ],
        check=True,
        capture_output=True,
    )
    monkeypatch.setenv("JUPYTER_PATH", str(kernels / "share" / "jupyter"))
    monkeypatch.setenv(setup_cell.ENV_VAR, str(checkout))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")  # pip's spelling of --no-build-isolation
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("PYTHONPATH", raising=False)

    chapter = checkout / "notebooks" / setup_cell.chapters()[0].name
    stored = nbformat.read(chapter, as_version=4)
    run = nbformat.read(chapter, as_version=4)
    NotebookClient(
        run,
        kernel_name="posenc-fresh",
        timeout=300,
        resources={"metadata": {"path": str(chapter.parent)}},
    ).execute()

    where = subprocess.run(
        [str(python), "-c", "import posenc; print(posenc.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert Path(where.strip()).is_relative_to(env_dir), where
    for before, after in zip(stored.cells, run.cells, strict=True):
        tags = before.metadata.get("tags", [])
        if (
            before.cell_type == "code"
            and "nbval-ignore-output" not in tags
            and "nbval-skip" not in tags
        ):
            assert _texts(after) == _texts(before), before.source[:80]
