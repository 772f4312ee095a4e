"""Which device a chapter runs on.

Every chapter asks :func:`default_device` once. It picks the GPU when there is one, and the
environment variable ``POSENC_DEVICE`` can force a choice (the tests use it to run the
chapters on each available device).
"""

from __future__ import annotations

import os

import torch

__all__ = ["default_device"]

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
