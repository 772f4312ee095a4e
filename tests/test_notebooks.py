"""Book-level checks of the stored chapters: setup cell, table of contents, no secrets."""

import json
import re
import subprocess
from pathlib import Path

import nbformat
import pytest
import yaml

from tools import execute_notebooks, setup_cell

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = setup_cell.chapters()
# Hugging Face user access tokens: "hf_" then 30+ letters and digits
TOKEN_PATTERN = re.compile(r"hf_[A-Za-z0-9]{30,}")


def test_there_are_chapters():
    assert CHAPTERS, "no notebooks/NN_*.ipynb found"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_setup_cell_is_the_current_template(path):
    nb = nbformat.read(path, as_version=4)
    assert setup_cell.is_current(nb), f"{path.name}: run python -m tools.setup_cell"


def test_setup_cell_check_detects_a_stale_cell(tmp_path, monkeypatch):
    nb = nbformat.read(CHAPTERS[0], as_version=4)
    nb.cells[0].source = nb.cells[0].source.replace("--quiet", "-q")
    assert not setup_cell.is_current(nb)
    assert setup_cell.sync(nb) and setup_cell.is_current(nb)


def test_setup_cell_installs_from_the_configured_repository():
    url, branch = setup_cell.repository()
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert url == config["repository"]["url"]
    # the chapters' extra too: the core alone lacks matplotlib, transformers, ...
    assert f'"posenc[book] @ git+{url}@{branch}"' in setup_cell.template()
    assert setup_cell.ENV_VAR in setup_cell.template()


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_stored_notebook_has_no_churn(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata == execute_notebooks.METADATA
    for cell in nb.cells:
        assert "execution" not in cell.metadata, "per-cell timestamps: re-execute with tools"
    code = [c for c in nb.cells[1:] if c.cell_type == "code"]
    assert any(c.outputs for c in code), "stored without outputs"
    for cell in code:
        assert len(execute_notebooks.coalesce_streams(list(cell.outputs))) == len(cell.outputs), (
            "printed text split over several stream outputs: re-execute with tools"
        )


def _toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part["chapters"]]
    return files


def test_toc_lists_every_chapter_and_only_existing_files():
    files = _toc_files()
    for name in files:
        assert any((ROOT / f"{name}{ext}").is_file() for ext in (".md", ".ipynb")), name
    listed = {f for f in files if f.startswith("notebooks/")}
    assert listed == {f"notebooks/{p.stem}" for p in CHAPTERS}


def test_no_hugging_face_token_in_notebooks_or_repository():
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    paths = {ROOT / p for p in tracked if p} | set(CHAPTERS)
    hits = []
    for path in sorted(paths):
        if not path.is_file():
            continue
        text = path.read_text(errors="ignore")
        if path.suffix == ".ipynb":  # outputs and attachments included
            text = json.dumps(json.loads(text))
        hits += [
            f"{path.relative_to(ROOT)}: {m.group()[:6]}..." for m in TOKEN_PATTERN.finditer(text)
        ]
    assert not hits, f"possible Hugging Face tokens: {hits}"


def test_token_scan_would_catch_one():
    assert TOKEN_PATTERN.search('{"text": "token hf_' + "aB3" * 11 + '"}')
