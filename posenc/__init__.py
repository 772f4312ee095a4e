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

Modules, one idea each:

- :mod:`posenc.attention`: self-attention and the permutation checks of chapter 1.
- :mod:`posenc.llama`: the Llama 3.2 tokenizer and token embeddings, online or offline.
- :mod:`posenc.plots`: the book's plotting style.
- :mod:`posenc.device`: which device a chapter runs on.
"""

from posenc import attention, device, llama, plots
from posenc.attention import DemoAttention, attention_weights, permute_positions, self_attention
from posenc.device import default_device

__version__ = "0.1.0"

__all__ = [
    "DemoAttention",
    "attention",
    "attention_weights",
    "default_device",
    "device",
    "llama",
    "permute_positions",
    "plots",
    "self_attention",
]
