"""Train small decoders with each positional encoding of the book, and measure them at longer lengths.

The book's other chapters judge an encoding by its vectors, angles and scores. Here models
learn: one small decoder (:class:`~posenc.train.model.TinyDecoder`), trained from scratch
with each encoding on tasks where position matters (:mod:`posenc.train.tasks`), everything
but the encoding the same, then measured at one, two and four times the length it was
trained on (:mod:`posenc.train.run`).

``python -m posenc.train`` runs the whole grid and writes its results as JSON, with the
machine, the torch version and the commit; :func:`stored` reads the run the book shows.

This layer sits above the core and imports only the core and torch.
"""

from __future__ import annotations

import json
from pathlib import Path

from posenc.train.model import ENCODINGS, TinyDecoder
from posenc.train.run import MULTIPLES, Settings, evaluate, grid, train
from posenc.train.tasks import TASKS

__all__ = [
    "ENCODINGS",
    "MULTIPLES",
    "STORED",
    "TASKS",
    "Settings",
    "TinyDecoder",
    "evaluate",
    "grid",
    "load",
    "stored",
    "train",
]

STORED = Path(__file__).parent / "results" / "grid_cpu.json"
"""The grid's results from one full run on a 2-core CPU, shown in the book."""


def load(path: str | Path) -> dict:
    """The results a ``python -m posenc.train`` run wrote to ``path``.

    Args:
        path: a JSON file written by :func:`posenc.train.__main__.main`.

    Returns:
        ``{"machine", "settings", "encodings", "tasks", "seeds", "seconds", "runs"}``.

    Raises:
        TypeError: if ``path`` is not a str or a Path.
        ValueError: if the file holds no runs.
    """
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or a Path, got {path!r} ({type(path).__name__})")
    results = json.loads(Path(path).read_text())
    if not isinstance(results, dict) or not results.get("runs"):
        raise ValueError(f"{path} holds no runs of python -m posenc.train")
    return results


def stored() -> dict:
    """The stored CPU run of the whole grid (:data:`STORED`), as :func:`load` reads it."""
    return load(STORED)
