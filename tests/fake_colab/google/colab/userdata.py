"""Colab's notebook secrets, faked: ``get("HF_TOKEN")`` returns a fake Hugging Face token.

Every call is recorded (the key and the process id, never the value), in :data:`calls`
and, when ``FAKE_COLAB_USERDATA_LOG`` names a file, appended to that file, so that a test
can tell whether a secret was read at all.
"""

from __future__ import annotations

import os

FAKE_HF_TOKEN = "hf_fake_colab_secret_0123456789"
"""What ``get("HF_TOKEN")`` returns: the form of a token, no account behind it."""

LOG_ENV = "FAKE_COLAB_USERDATA_LOG"

_SECRETS = {"HF_TOKEN": FAKE_HF_TOKEN}

calls: list[str] = []


class SecretNotFoundError(Exception):
    """Raised for a key that is not among the secrets (Colab's name)."""


def get(key: str) -> str:
    """The secret stored under ``key``, as Colab's ``userdata.get`` with access granted."""
    calls.append(key)
    log = os.environ.get(LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {key}\n")
    if key not in _SECRETS:
        raise SecretNotFoundError(f"Secret {key} does not exist.")
    return _SECRETS[key]
