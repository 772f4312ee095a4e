"""posenc: positional encoding in transformers, from integers to RoPE.

The code behind the chapters of the book. Notebooks import it as ``import posenc as pe``.

Shape vocabulary, used in every docstring and reshape comment:

- ``B``: batch size.
- ``H``: attention heads.
- ``T``: positions (tokens) in a sequence.
- ``D``: features of one head vector (``E`` when the whole model width is meant,
  e.g. ``E = 2048`` for Llama 3.2 1B).
- ``V``: vocabulary size.

A head vector lives in ``x[..., T, D]``: positions on the second-to-last axis, features
last.

Devices: the data a function computes with (``x``, ``q``, ``k``, weights) must share one
device, and a function says so, naming both, when they do not. Positions, distances and
frequencies are a few values: they may also come from the CPU, and are copied to the
data's device; from any other device they are refused (a copy from a GPU would wait on it,
and the meta device holds no values at all).

The package has its layers (``posenc/README.md`` draws them):

- **the core**, the modules of this folder, one idea each and importing torch alone:
  :mod:`~posenc.encodings` (integer, binary, sinusoidal, learned), :mod:`~posenc.rotation`,
  :mod:`~posenc.rope` (the reference ``apply_rope``, layouts, n-D), :mod:`~posenc.scaling`
  (frequencies for longer contexts), :mod:`~posenc.relative` (Shaw, T5, ALiBi),
  :mod:`~posenc.attention`, :mod:`~posenc.properties`, :mod:`~posenc.precision`,
  :mod:`~posenc.decoder` (a Llama forward pass by hand), :mod:`~posenc.device`,
  ``_validate`` and ``_extras``, on torch alone;
- **the data**, :mod:`posenc.data`: the Llama 3.2 tokenizer and embeddings
  (:mod:`~posenc.data.llama`, also ``pe.llama``) and SmolLM2-135M, a small trained Llama
  (:mod:`~posenc.data.smol`, also ``pe.smol``), from the Hub or offline; they need the
  ``book`` extra (``pip install 'posenc[book]'``: transformers, the tokenizers, the Hub
  client, gguf) to load anything, and say so when it is missing;
- **the fast path**, :mod:`posenc.fast`: the same RoPE built for speed (C loop, Triton,
  cached tables), opt-in, and measured by ``python -m posenc.bench``;
- **the training experiment**, :mod:`posenc.train`: small decoders trained from scratch
  with each encoding of the core and measured past their training length (torch alone);
- **the book**, :mod:`posenc.book`, :mod:`posenc.display.plots`, :mod:`posenc.display.table` and
  :mod:`posenc.bench`: each chapter's views, figures, tables, animations and playgrounds;
  all but ``table`` need the ``book`` extra, and say so on import when it is missing.

The core imports none of the other layers; importing ``posenc`` loads the core only, and
the other layers load when first named (``pe.fast``, ``pe.book``, ``pe.plots``,
``pe.table``, ``pe.train``).
"""

from __future__ import annotations

import importlib

from posenc.attention import DemoAttention, attention_weights, permute_positions, self_attention
from posenc.device import default_device
from posenc.encodings import (
    LearnedPositionalEmbedding,
    binary_encoding,
    integer_encoding,
    length_normalized_encoding,
    sinusoidal_encoding,
    sinusoidal_frequencies,
)
from posenc.rope import (
    apply_rope,
    apply_rope_,
    apply_rope_nd,
    layout_permutation,
    permute_qk_rows,
    rope_inv_freq,
    rope_matrix,
)
from posenc.rotation import block_diagonal, rotation_matrix, sinusoidal_shift_matrix
from posenc.scaling import llama3_inv_freq

__version__ = "0.1.0"

_SUBMODULES = (
    "attention",
    "book",
    "decoder",
    "device",
    "encodings",
    "data",
    "display",
    "fast",
    "precision",
    "properties",
    "relative",
    "rope",
    "rotation",
    "scaling",
    "train",
)


def __getattr__(name: str):
    """Import a submodule when first named (``pe.fast``, ``pe.plots``, ``pe.llama`` ...)."""
    if name in _SUBMODULES:
        return importlib.import_module(f"posenc.{name}")
    if name in ("llama", "smol"):  # the data readers, as the chapters name them
        return importlib.import_module(f"posenc.data.{name}")
    if name in ("plots", "table"):  # the figures and tables, as the chapters name them
        return importlib.import_module(f"posenc.display.{name}")
    raise AttributeError(f"module 'posenc' has no attribute {name!r}")


__all__ = [
    "DemoAttention",
    "LearnedPositionalEmbedding",
    "apply_rope",
    "apply_rope_",
    "apply_rope_nd",
    "attention_weights",
    "binary_encoding",
    "block_diagonal",
    "default_device",
    "integer_encoding",
    "layout_permutation",
    "length_normalized_encoding",
    "llama3_inv_freq",
    "permute_positions",
    "permute_qk_rows",
    "rope_inv_freq",
    "rope_matrix",
    "rotation_matrix",
    "self_attention",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
]
