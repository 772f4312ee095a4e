"""Where posenc runs and where it keeps files.

Every chapter asks :func:`default_device` once. It picks the GPU when there is one, and the
environment variable ``POSENC_DEVICE`` can force a choice (the tests use it to run the
chapters on each available device). :func:`cache_dir` is where converted tokenizers, fetched
rows and the compiled C loop of :mod:`posenc.fast` are kept.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

__all__ = ["cache_dir", "default_device"]

_CHOICES = ("cpu", "cuda")


def default_device() -> str:
    """Return ``"cuda"`` when a GPU is available, else ``"cpu"``.

    ``POSENC_DEVICE`` (``cpu`` or ``cuda``) overrides the automatic choice.

    Returns:
        The device name, a string accepted by ``torch.device``.

    Raises:
        ValueError: if ``POSENC_DEVICE`` names something other than ``cpu`` or ``cuda``,
            or asks for ``cuda`` on a machine without a GPU.

    Example:
        >>> default_device() in ("cpu", "cuda")
        True
    """
    forced = os.environ.get("POSENC_DEVICE", "").strip().lower()
    if not forced:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if forced not in _CHOICES:
        raise ValueError(f"POSENC_DEVICE must be one of {_CHOICES}, got {forced!r}")
    if forced == "cuda" and not torch.cuda.is_available():
        raise ValueError("POSENC_DEVICE='cuda' but torch sees no GPU on this machine")
    return forced


def cache_dir() -> Path:
    """The directory where converted tokenizers and fetched rows are kept.

    ``POSENC_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/posenc``, else ``~/.cache/posenc``.
    It holds no credentials.

    Returns:
        The directory (not created here).

    Example:
        >>> cache_dir().name in ("posenc", os.environ.get("POSENC_CACHE_DIR", "posenc").rstrip("/").split("/")[-1])
        True
    """
    if os.environ.get("POSENC_CACHE_DIR"):
        return Path(os.environ["POSENC_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "posenc"
