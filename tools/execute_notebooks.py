"""Re-execute chapters and store their outputs, with nothing that churns between runs.

    python -m tools.execute_notebooks                    # every chapter
    python -m tools.execute_notebooks notebooks/01_*.ipynb

Before running, the setup cell is brought up to date. Outputs are recorded without
per-cell timestamps, and the notebook metadata is reduced to a fixed kernel description
(plus the Colab hint to open it on a GPU runtime), so that re-running an unchanged chapter
leaves the file unchanged.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tools import setup_cell

METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
    # Colab opens the notebook on a GPU runtime.
    "accelerator": "GPU",
    "colab": {"provenance": []},
}


def normalise(nb: nbformat.NotebookNode) -> None:
    """Drop metadata that changes from run to run or machine to machine."""
    nb.metadata = nbformat.from_dict(METADATA)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
        if cell.cell_type != "code":
            continue
        # live widgets: hidden in the HTML, not compared, and their model ids are random
        if "remove-output" in cell.metadata.get("tags", []):
            cell.outputs = []
        cell.outputs = coalesce_streams(cell.outputs)


def coalesce_streams(outputs: list) -> list:
    """Merge consecutive stream outputs of the same name.

    How printed text is split into stream messages depends on timing, not on the code.
    """
    merged: list = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (
            out.output_type == "stream"
            and prev is not None
            and prev.output_type == "stream"
            and prev.name == out.name
        ):
            prev.text += out.text
        else:
            merged.append(out)
    return merged


def execute(path: Path, *, timeout: int = 600) -> float:
    """Execute one notebook in place; return the seconds it took."""
    nb = nbformat.read(path, as_version=4)
    setup_cell.sync(nb)
    env_backup = os.environ.pop(setup_cell.ENV_VAR, None)
    start = time.perf_counter()
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            record_timing=False,
            # a cell showing a live widget can leave nbclient waiting for a reply that never
            # comes (the kernel is done): cap those cells so a stall costs seconds, not minutes
            timeout_func=lambda cell: (
                30 if "remove-output" in cell.metadata.get("tags", []) else timeout
            ),
            resources={"metadata": {"path": str(path.parent)}},
        )
        client.execute()
    finally:
        if env_backup is not None:
            os.environ[setup_cell.ENV_VAR] = env_backup
    normalise(nb)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: every chapter)")
    args = parser.parse_args(argv)
    for path in args.paths or setup_cell.chapters():
        seconds = execute(path.resolve())
        print(f"{path}: executed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
