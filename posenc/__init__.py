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
- :mod:`posenc.encodings`: absolute encodings (integer, binary, sinusoidal, learned).
- :mod:`posenc.rotation`: 2x2 rotations and their block-diagonal stacks.
- :mod:`posenc.properties`: the five properties of a good encoding, as checks.
- :mod:`posenc.relative`: relative methods (Shaw et al., T5 buckets, ALiBi).
- :mod:`posenc.relative_views`: chapter 7's tables, figures and shift experiment.
- :mod:`posenc.context`: the four terms of a score with additive encodings (chapter 8).
- :mod:`posenc.rope`: rotary position embedding, its layouts, n-D and frequency scaling.
- :mod:`posenc.fast_rope`: RoPE computed in every way chapter 13 compares.
- :mod:`posenc.cpu_kernel`: the one-pass RoPE loop in C that ``apply_rope`` runs on a CPU.
- :mod:`posenc.bench`: the RoPE benchmark (``python -m posenc.bench``).
- :mod:`posenc.precision`: chapter 14's low-precision positions, frequencies and angles.
- :mod:`posenc.rope_views`: chapter 9's RoPE playground, animation and demonstrations.
- :mod:`posenc.llama_rope`: RoPE exactly as Llama 3.2 runs it, next to transformers.
- :mod:`posenc.rope_nd_views`: chapter 11's grid checks of RoPE in n dimensions.
- :mod:`posenc.frequencies`: chapter 12's periods, decay bound, scaling and schemes.
- :mod:`posenc.summary`: chapter 15's property table, road map and checked claims.
- :mod:`posenc.bits`: how the bits of a binary position encoding change.
- :mod:`posenc.absolute_animations`: the animations of chapter 3.
- :mod:`posenc.waves`: sine waves, the sine-wave explorer of chapter 4.
- :mod:`posenc.sinusoidal_views`: chapter 5's views of the sinusoidal encoding.
- :mod:`posenc.shift`: the symbolic derivation "a shift is a rotation" (sympy).
- :mod:`posenc.rotation_explorer`: the rotation playground of chapter 6.
- :mod:`posenc.llama`: the Llama 3.2 tokenizer and token embeddings, online or offline.
- :mod:`posenc.plots`: the book's plotting style.
- :mod:`posenc.device`: which device a chapter runs on.
"""

from posenc import (
    absolute_animations,
    attention,
    bits,
    context,
    cpu_kernel,
    device,
    encodings,
    fast_rope,
    frequencies,
    llama,
    llama_rope,
    plots,
    precision,
    properties,
    relative,
    relative_views,
    rope,
    rope_nd_views,
    rope_views,
    rotation,
    rotation_explorer,
    shift,
    sinusoidal_views,
    summary,
    waves,
)
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
    llama3_inv_freq,
    permute_qk_rows,
    rope_inv_freq,
    rope_matrix,
)
from posenc.rotation import block_diagonal, rotation_matrix, sinusoidal_shift_matrix

__version__ = "0.1.0"

__all__ = [
    "DemoAttention",
    "LearnedPositionalEmbedding",
    "absolute_animations",
    "apply_rope",
    "apply_rope_",
    "apply_rope_nd",
    "attention",
    "attention_weights",
    "binary_encoding",
    "bits",
    "block_diagonal",
    "context",
    "cpu_kernel",
    "default_device",
    "device",
    "encodings",
    "fast_rope",
    "frequencies",
    "integer_encoding",
    "layout_permutation",
    "length_normalized_encoding",
    "llama",
    "llama3_inv_freq",
    "llama_rope",
    "permute_positions",
    "permute_qk_rows",
    "plots",
    "precision",
    "properties",
    "relative",
    "relative_views",
    "rope",
    "rope_inv_freq",
    "rope_matrix",
    "rope_nd_views",
    "rope_views",
    "rotation",
    "rotation_explorer",
    "rotation_matrix",
    "self_attention",
    "shift",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
    "sinusoidal_views",
    "summary",
    "waves",
]
