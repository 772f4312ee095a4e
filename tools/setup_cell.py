"""The setup cell every chapter starts with, generated from one template.

In Colab the cell installs ``posenc`` from the book's repository (the URL is read from
``_config.yml``, where it is written once); anywhere else it does nothing, because the
reader already installed the package. ``POSENC_INSTALL_SOURCE`` overrides where it installs
from (any pip requirement, e.g. a local checkout), which is how the tests exercise it.

    python -m tools.setup_cell           # write the current template into every chapter
    python -m tools.setup_cell --check   # exit 1 if a chapter's setup cell is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TAGS = ["remove-cell", "nbval-skip"]  # hidden in the HTML, not compared by nbval
ENV_VAR = "POSENC_INSTALL_SOURCE"

_TEMPLATE = """\
# Setup: in Colab, install `posenc` with what the chapters use; elsewhere there is nothing to do.
import importlib
import importlib.util
import os
import subprocess
import sys

source = os.environ.get("{env_var}")
if source is None and "google.colab" in sys.modules:
    source = "posenc[book] @ git+{url}@{branch}"
# a bare posenc/ folder in the working directory (origin None) is no install
spec = importlib.util.find_spec("posenc")
if source and (spec is None or spec.origin is None):
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", source], check=True
    )
    importlib.invalidate_caches()"""


def repository() -> tuple[str, str]:
    """The repository URL and branch from ``_config.yml``."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo = config["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def template(url: str | None = None, branch: str | None = None) -> str:
    """The source of the setup cell (for ``_config.yml``'s repository unless given)."""
    if url is None or branch is None:
        url, branch = repository()
    return _TEMPLATE.format(env_var=ENV_VAR, url=url, branch=branch)


def make_cell(source: str | None = None) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(template() if source is None else source)
    cell.metadata["tags"] = list(TAGS)
    cell.id = "setup"
    return cell


def is_current(nb: nbformat.NotebookNode, source: str | None = None) -> bool:
    """Whether the notebook's first cell is the current setup cell (or ``source``)."""
    if not nb.cells:
        return False
    first = nb.cells[0]
    return (
        first.cell_type == "code"
        and first.source == (template() if source is None else source)
        and first.metadata.get("tags", []) == TAGS
    )


def sync(nb: nbformat.NotebookNode, source: str | None = None) -> bool:
    """Make the first cell the current setup cell (or one with ``source``); return whether
    anything changed."""
    if is_current(nb, source):
        return False
    first = nb.cells[0] if nb.cells else None
    is_setup = (
        first is not None and first.cell_type == "code" and first.source.startswith("# Setup:")
    )
    if is_setup:  # the new source in the old cell's place, run as it was (no churn)
        cell = make_cell(source)
        cell.execution_count = first.get("execution_count")
        nb.cells[0] = cell
    else:
        nb.cells.insert(0, make_cell(source))
    return True


def chapters() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report, change nothing")
    args = parser.parse_args(argv)
    stale = []
    for path in chapters():
        nb = nbformat.read(path, as_version=4)
        if args.check:
            if not is_current(nb):
                stale.append(path)
        elif sync(nb):
            nbformat.write(nb, path)
            print(f"updated {path.relative_to(ROOT)}")
    for path in stale:
        print(f"out of date: {path.relative_to(ROOT)} (run python -m tools.setup_cell)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
