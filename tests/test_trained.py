"""posenc.book.trained on small random Llamas (chapter 15 runs it on SmolLM2-135M)."""

from __future__ import annotations

import torch
import transformers

from posenc import decoder
from posenc.book import trained


def test_head_statistics_take_the_models_own_head_size():
    """A config may set head_dim apart from hidden_size / heads (as Gemma and Qwen3 do): each
    pair's share is read from the heads as they are, and the shares of a head sum to 1."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=40,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,  # not 16 / 4
    )
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.arange(7)
    stats = trained.head_statistics(model, ids)
    assert stats["q_share"].shape == (2, 4, 4) and stats["k_share"].shape == (2, 2, 4)
    torch.testing.assert_close(stats["q_share"].sum(-1), torch.ones(2, 4))
    seen = []
    decoder.forward(model, ids, observe=lambda layer, q, k, w: seen.append(q))
    x1, x2 = seen[1].chunk(2, dim=-1)  # layer 1, the half layout: pair i is (i, i + D/2)
    energy = x1**2 + x2**2
    want = (energy / energy.sum(-1, keepdim=True)).mean(dim=(0, 2))
    torch.testing.assert_close(stats["q_share"][1], want)
