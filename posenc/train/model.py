"""A small decoder that takes its position information from any encoding the book built.

Everything but the encoding is fixed: token embeddings, ``layers`` pre-norm blocks of causal
multi-head attention and a feed-forward network, a final norm and a linear read-out. The
encoding enters where each method puts it:

- ``"nope"``: nowhere; the causal mask is the only source of order;
- ``"learned"``, ``"sinusoidal"``: a vector per position added to the token embeddings
  (:class:`posenc.LearnedPositionalEmbedding`, :func:`posenc.sinusoidal_encoding`);
- ``"alibi"``, ``"t5"``: a bias on every attention score (:func:`posenc.relative.alibi_bias`
  with fixed slopes; :func:`posenc.relative.t5_bias` with a learned table shared by the
  layers, as in T5);
- ``"rope"``, ``"p-rope"``: queries and keys rotated by :func:`posenc.apply_rope`, with
  every pair turning, or with the slowest quarter of the pairs left still
  (:func:`posenc.scaling.p_rope_inv_freq`, ``p = 0.75``).

Shapes: tokens ``[B, T]``, states ``[B, T, E]``, heads ``[B, H, T, D]`` with ``E = H D``,
logits ``[B, T, V]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc import relative
from posenc._validate import check_even_dim, check_int, check_option, check_same_device
from posenc.encodings import LearnedPositionalEmbedding, sinusoidal_encoding
from posenc.rope import apply_rope, rope_inv_freq
from posenc.scaling import p_rope_inv_freq

__all__ = ["ENCODINGS", "TinyDecoder"]

ENCODINGS = ("nope", "learned", "sinusoidal", "alibi", "t5", "rope", "p-rope")
"""The encodings a :class:`TinyDecoder` can use, in the book's order."""

T5_BUCKETS = 16
"""T5's buckets for a decoder (one direction): offsets 0-7 one each, then log-spaced."""


class _Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.out = nn.Linear(width, width, bias=False)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )


class TinyDecoder(nn.Module):
    """A decoder of ``layers`` blocks whose only position information is ``encoding``.

    Args:
        encoding: one of :data:`ENCODINGS`.
        vocab: ``V``, token ids ``0 .. V-1``.
        width: ``E``, the model width.
        heads: ``H``; each head has ``D = E / H`` features (even, for the rotary encodings).
        layers: blocks.
        max_positions: the longest sequence the model will ever read; sizes the learned
            table (rows past the training length stay as initialised: nothing trains them).
        t5_max_distance: the offset from which T5's buckets all share the last one.
        seed: seed of the initial weights.

    Raises:
        TypeError, ValueError: for an unknown encoding or sizes that do not fit.

    Example:
        >>> model = TinyDecoder("rope", vocab=10, width=32, heads=4, layers=1, max_positions=16)
        >>> model(torch.zeros(2, 5, dtype=torch.long)).shape
        torch.Size([2, 5, 10])
    """

    def __init__(
        self,
        encoding: str,
        *,
        vocab: int,
        width: int = 64,
        heads: int = 4,
        layers: int = 2,
        max_positions: int = 256,
        t5_max_distance: int = 32,
        seed: int = 0,
    ):
        super().__init__()
        self.encoding = check_option("encoding", encoding, ENCODINGS)
        check_int("vocab", vocab, minimum=2)
        check_int("width", width, minimum=1)
        check_int("heads", heads, minimum=1)
        check_int("layers", layers, minimum=1)
        check_int("max_positions", max_positions, minimum=1)
        check_int("t5_max_distance", t5_max_distance, minimum=T5_BUCKETS // 2 + 1)
        check_int("seed", seed, minimum=0)
        if width % heads:
            raise ValueError(f"width must be a multiple of heads={heads}, got width={width}")
        head_dim = check_even_dim("width / heads", width // heads)
        self.max_positions = max_positions
        with torch.random.fork_rng(devices=[]):  # seeded weights, the caller's RNG untouched
            torch.manual_seed(seed)
            self.embed = nn.Embedding(vocab, width)
            self.blocks = nn.ModuleList(_Block(width, heads) for _ in range(layers))
            self.norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab)
        if encoding == "learned":
            self.table = LearnedPositionalEmbedding(max_positions, width, seed=seed)
        elif encoding == "sinusoidal":
            self.register_buffer("sinusoid", sinusoidal_encoding(max_positions, width), False)
        elif encoding == "alibi":
            self.register_buffer("slopes", relative.alibi_slopes(heads).float(), False)
        elif encoding == "t5":
            self.t5_max_distance = t5_max_distance
            self.t5_table = nn.Parameter(torch.zeros(T5_BUCKETS, heads))
        elif encoding in ("rope", "p-rope"):
            inv_freq = rope_inv_freq(head_dim)
            if encoding == "p-rope":
                inv_freq = p_rope_inv_freq(inv_freq, 0.75)
            self.register_buffer("inv_freq", inv_freq.float(), False)
        elif encoding != "nope":
            raise ValueError(f"encoding {encoding!r} has no construction")  # unreachable

    def _bias(self, t: int) -> torch.Tensor | None:
        """The additive score bias ``[H, T, T]`` with the causal mask in it, or None."""
        if self.encoding == "alibi":
            return relative.alibi_bias(t, self.slopes)  # -inf above the diagonal already
        if self.encoding == "t5":
            bias = relative.t5_bias(
                t, self.t5_table, bidirectional=False, max_distance=self.t5_max_distance
            )
            future = torch.ones(t, t, dtype=torch.bool, device=bias.device).triu(1)
            return bias.masked_fill(future, float("-inf"))
        return None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, T, V]`` for ``tokens[B, T]``, each position seeing itself and those before.

        Raises:
            TypeError: if ``tokens`` is not an integer tensor.
            ValueError: for a shape other than ``[B, T]``, a sequence longer than
                ``max_positions``, or tokens on another device than the model.
        """
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"tokens must be a tensor of token ids, got {type(tokens).__name__}")
        if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
            raise TypeError(f"tokens must hold integers, got dtype {tokens.dtype}")
        if tokens.dim() != 2 or tokens.shape[1] < 1:
            raise ValueError(f"tokens must be [B, T] with T >= 1, got shape {tuple(tokens.shape)}")
        check_same_device(tokens=tokens, model=self.embed.weight)
        b, t = tokens.shape
        if t > self.max_positions:
            raise ValueError(
                f"tokens must be at most max_positions={self.max_positions}, got T={t}"
            )
        x = self.embed(tokens)  # [B, T, E]
        if self.encoding == "learned":
            x = x + self.table(torch.arange(t, device=tokens.device))
        elif self.encoding == "sinusoidal":
            x = x + self.sinusoid[:t]
        bias = self._bias(t)
        for block in self.blocks:
            h = block.norm1(x)
            q, k, v = block.qkv(h).view(b, t, 3, block.heads, -1).permute(2, 0, 3, 1, 4)
            if self.encoding in ("rope", "p-rope"):  # q, k: [B, H, T, D]
                q = apply_rope(q, inv_freq=self.inv_freq, layout="half")
                k = apply_rope(k, inv_freq=self.inv_freq, layout="half")
            if bias is None:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            x = x + block.out(a.transpose(1, 2).reshape(b, t, -1))
            x = x + block.mlp(block.norm2(x))
        return self.head(self.norm(x))
