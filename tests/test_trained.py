"""posenc.book.trained on small random Llamas (chapter 15 runs it on SmolLM2-135M)."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch
import transformers

from posenc import decoder
from posenc.book import claim_checks, long_text, trained


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


# ----------------------------------------------------------------------------------------
# The previous-token ablation
# ----------------------------------------------------------------------------------------


def _tiny(max_positions=64, seed=0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=40,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        rope_theta=100.0,
    )
    return transformers.LlamaForCausalLM(config).eval()


def test_the_ablation_keeps_the_trained_attention_and_changes_only_the_rotation():
    """'trained' is the model's own attention to t - 1 (head_statistics'); with every pair
    unrotated, removing the fastest or the slowest pairs is the same thing, and in layer 0
    (fed by the embeddings alone) it is the attention the model gives with all positions 0."""
    model, ids = _tiny(), torch.arange(12) % 40
    stats = trained.head_statistics(model, ids)
    part = trained.previous_token_ablation(model, ids, 0.5)
    torch.testing.assert_close(part["trained"], stats["previous"])
    assert not torch.allclose(part["fastest removed"], part["trained"], atol=1e-4)
    every = trained.previous_token_ablation(model, ids, 1.0)
    torch.testing.assert_close(every["fastest removed"], every["slowest removed"])
    seen = []
    decoder.forward(
        model, ids, torch.zeros(12, dtype=torch.long), observe=lambda *a: seen.append(a)
    )
    zero_weights = seen[0][3][0]  # layer 0, [H, T, T]
    want = zero_weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)
    torch.testing.assert_close(every["fastest removed"][0], want)


# ----------------------------------------------------------------------------------------
# The long text
# ----------------------------------------------------------------------------------------


def test_one_pass_gives_every_prefix():
    """Attention is causal: the first n losses of a pass over the whole text are those of a
    pass over its first n + 1 tokens alone, with a recipe's frequencies and score factor."""
    model = _tiny()
    ids = torch.arange(40) % 37
    whole = long_text.score(model, ids, "YaRN", factor=2.0)
    for n in (5, 17):
        alone = long_text.score(model, ids[: n + 1], "YaRN", factor=2.0)
        torch.testing.assert_close(whole[:n], alone, rtol=1e-5, atol=1e-5)


def test_the_window_run_scores_each_token_in_its_own_window():
    """Past the trained length W each prediction is scored by a fresh pass over the window
    that starts W/2 before its half-window: positions 0..W-1, never beyond."""
    model = _tiny(max_positions=8)
    ids = torch.arange(23) % 37
    got = long_text.score(model, ids, "window")  # predictions 8 .. 21
    assert got.shape == (22 - 8,)
    for t in range(8, 22):
        start = (t // 4 - 1) * 4  # the window whose second half holds t
        alone = decoder.next_token_nll(model, ids[start : start + 9])
        torch.testing.assert_close(got[t - 8], alone[t - start], rtol=1e-5, atol=1e-5)


def _result(model, tokens, runs, monkeypatch):
    """long_text.run on a tiny model, the text tokenized into the tiny vocabulary."""
    monkeypatch.setattr(long_text, "token_ids", lambda smol, count: torch.arange(count + 1) % 37)
    monkeypatch.setattr(trained, "_check_smol", lambda smol: smol)
    smol = SimpleNamespace(model=model, source="offline", describe=lambda: "a tiny model")
    return long_text.run(smol, tokens=tokens, runs=runs)


def test_a_run_stores_block_means_that_give_each_prefix_and_the_baseline(monkeypatch):
    model = _tiny(max_positions=128)
    result = _result(model, 512, ["none", "p-RoPE", "window"], monkeypatch)
    ids = torch.arange(513) % 37
    losses = long_text.score(model, ids, "none")
    for n in (128, 384):
        want = math.exp(losses[:n].double().mean().item())
        assert math.isclose(long_text.perplexity(result, "none", 0, n), want, rel_tol=1e-9)
    # the baseline: plain RoPE inside the trained length, the windows past it
    window = long_text.score(model, ids, "window")
    assert math.isclose(
        long_text.perplexity(result, "baseline", 128, 512),
        math.exp(window.double().mean().item()),
        rel_tol=1e-9,
    )
    torch.testing.assert_close(
        long_text.block_perplexities(result, "baseline", 0, 128, size=128),
        long_text.block_perplexities(result, "none", 0, 128, size=128),
    )
    assert long_text.ratios(result, "p-RoPE", 0, 512, against="p-RoPE", size=128).eq(1).all()
    with pytest.raises(ValueError, match="multiples of 128"):
        long_text.perplexity(result, "window", 0, 256)  # the windows start at 128
    assert result["factor"] == 4.0 and result["git"].keys() == {"commit", "modified"}


def test_a_check_of_the_long_text_changes_its_verdict_with_the_evidence(monkeypatch):
    """The chapter-15 claims read the stored run: a run where p-RoPE costs 20% more, or
    where plain RoPE matches the windows past the trained length, gets another verdict."""
    model = _tiny(max_positions=512)
    result = _result(model, 1024, long_text.RUNS, monkeypatch)
    p_rope = claim_checks._p_rope_finding
    worse = copy.deepcopy(result)
    worse["runs"]["p-RoPE"]["losses"] = [v + 0.2 for v in result["runs"]["none"]["losses"]]
    same = copy.deepcopy(result)
    same["runs"]["p-RoPE"]["losses"] = list(result["runs"]["none"]["losses"])
    facts = {"slow heavier": True, "fast costly": True, "heads lose": True}
    assert p_rope(same, facts).verdict == claim_checks.HOLDS
    assert p_rope(worse, facts).verdict == claim_checks.WRONG
    assert p_rope(same, {**facts, "heads lose": False}).verdict == claim_checks.WRONG
    general = claim_checks._generalisation_finding
    broken, fine = copy.deepcopy(result), copy.deepcopy(result)
    window = result["runs"]["window"]["losses"]
    inside = result["runs"]["none"]["losses"][:4]  # the blocks inside the trained length
    for name in ("none", *long_text.FACTOR_RUNS):
        broken["runs"][name]["losses"] = inside + [v + 2.0 for v in window]
        fine["runs"][name]["losses"] = inside + list(window)
    assert general(broken).verdict == claim_checks.WRONG
    assert general(fine).verdict == claim_checks.HOLDS
    fine["runs"]["YaRN"]["losses"][:4] = [v + 1.0 for v in inside]
    assert "YaRN" not in general(fine).evidence.split("without training:")[1]


def test_the_text_is_the_stored_bytes_and_long_enough():
    from posenc.data import smol

    text = long_text.text()
    assert text.startswith("The standard type hierarchy\n")
    assert "Special method names\n********************" in text
    ids = long_text.token_ids(smol.load(), long_text.TOKENS)
    assert ids.shape == (long_text.TOKENS + 1,)


@pytest.mark.slow
def test_a_long_point_of_the_stored_run_is_recomputed():
    """YaRN (factor 2) over the first 8,192 tokens of the text, scored again from scratch on
    the stored run's copy of the model: every block of 128 tokens as stored."""
    from posenc.data import smol

    run = long_text.stored()
    model = smol.load(run["model"]["source"])
    ids = long_text.token_ids(model, run["tokens"])[: run["trained"] + 1]
    losses = long_text.score(model.model, ids, "YaRN", factor=run["factor"])
    blocks = losses.double().view(-1, run["block"]).mean(-1)
    stored = torch.tensor(run["runs"]["YaRN"]["losses"][: blocks.shape[0]], dtype=torch.float64)
    torch.testing.assert_close(blocks, stored, rtol=0, atol=2e-4)
