"""RoPE inside a trained model: the experiments of chapter 15 on SmolLM2-135M.

Each function runs the model through :func:`posenc.decoder.forward` (its weights, our plain
code, RoPE in sight) with changed positions, frequencies, rotation or precision, and
returns numbers a chapter can print or draw:

- what the model makes of wrong positions, shuffled or all 0 (inputs it never met in
  training, so a measure of that damage, not of what position is worth):
  :func:`position_ablation`, :func:`dog_similarity`;
- only offsets matter, up to rounding: :func:`recipe_rope`, :func:`shift_drift`;
- our RoPE in the model and the layout of the GGUF file: :func:`swap_check`,
  :func:`gguf_row_order`;
- which frequencies carry what: :func:`head_statistics`, :func:`energy_figure`,
  :func:`heads_figure`, :func:`frequency_removal`, :func:`previous_token_ablation`;
- a gap in a short text, a probe of what gaps do (length itself is measured on a long text
  by :mod:`posenc.book.long_text`): :func:`gap_probe`, :func:`probe_figure`;
- decoding with a cache: :func:`generation_check`.

The text is the Zen of Python (:func:`zen_text`), which every Python installation carries
in its ``this`` module. Shapes: ``L`` layers, ``H`` query heads, ``H_kv`` key/value heads,
``T`` tokens, ``D`` head features (``D/2`` pairs, in the ``"half"`` layout of transformers
checkpoints: pair ``i`` is features ``i`` and ``i + D/2``).
"""

from __future__ import annotations

import codecs
import contextlib
import copy
import io
import math
import os
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from posenc._validate import (
    check_dict,
    check_int,
    check_int_sequence,
    check_option,
    check_real,
    check_same_device,
    check_sequence,
    check_str,
    check_str_sequence,
    check_tensor,
)
from posenc.decoder import (
    _check_config,
    _check_model,
    _check_token_ids,
    config_inv_freq,
    config_rope_base,
    forward,
    generate,
)
from posenc.display import plots
from posenc.precision import RECIPES, recipe_angles
from posenc.rope import apply_rope, apply_rope_, permute_qk_rows
from posenc.scaling import (
    llama3_inv_freq,
    ntk_aware_inv_freq,
    p_rope_inv_freq,
    position_interpolation_inv_freq,
    yarn_inv_freq,
)

__all__ = [
    "SCALINGS",
    "dog_similarity",
    "energy_figure",
    "frequency_removal",
    "gap_probe",
    "generation_check",
    "gguf_row_order",
    "head_statistics",
    "heads_figure",
    "nll",
    "perplexity",
    "position_ablation",
    "previous_token_ablation",
    "probe_figure",
    "recipe_rope",
    "scaled_inv_freq",
    "shift_drift",
    "swap_check",
    "zen_text",
]

SCALINGS = ("none", "PI", "NTK-aware", "YaRN", "llama3")
"""The context-extension recipes of chapter 12, by name (``"none"``: plain RoPE)."""


def _model_ids(model: object, ids: object, min_length: int = 2) -> torch.Tensor:
    """Check a model and the ``[T]`` token ids to run it on."""
    return _check_token_ids(ids, _check_model(model), dims=(1,), min_length=min_length)


def _check_smol(smol: object):
    from posenc.data.smol import Smol

    if not isinstance(smol, Smol):
        raise TypeError(
            f"smol must be a posenc.data.smol.Smol (from posenc.data.smol.load()), got {type(smol).__name__}"
        )
    return smol


def _check_names(name: str, value: object, options) -> list[str]:
    names = check_str_sequence(name, value)
    for v in names:
        check_option(name, v, options)
    return names


_STATS = ("q_share", "k_share", "previous", "first")


def _check_stats(stats: object) -> dict[str, torch.Tensor]:
    stats = check_dict("stats", stats)
    for key in _STATS:
        if key not in stats:
            raise ValueError(
                f"stats must be the result of head_statistics, with {_STATS}; it lacks {key!r}"
            )
        # shares [L, H, D/2], attention [L, H]
        check_tensor(f"stats[{key!r}]", stats[key], min_dim=3 if key.endswith("share") else 2)
    return stats


def zen_text() -> str:
    """The Zen of Python: the text ``import this`` prints, read without printing it.

    Example:
        >>> zen_text().splitlines()[0]
        'The Zen of Python, by Tim Peters'
    """
    with contextlib.redirect_stdout(io.StringIO()):
        import this
    return codecs.decode(this.s, "rot13")


def _check_logits_ids(logits: object, ids: object) -> tuple[torch.Tensor, torch.Tensor]:
    check_tensor("logits", logits, min_dim=2)
    check_same_device(logits=logits, ids=ids)
    ids = _check_token_ids(ids, logits.device, dims=(1,), min_length=2)
    if logits.dim() == 3 and logits.shape[0] == 1:
        logits = logits[0]
    if logits.shape[0] != ids.shape[0] or ids.shape[0] < 2:
        raise ValueError(
            f"logits [T, V] and ids [T] must agree with T >= 2, got {tuple(logits.shape)} and {tuple(ids.shape)}"
        )
    return logits, ids


def nll(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Each next token's negative log-likelihood: ``[T - 1]`` (token ``t + 1`` given ``0..t``).

    Args:
        logits: ``[T, V]`` or ``[1, T, V]``.
        ids: the tokens ``[T]``.

    Returns:
        float32 ``[T - 1]``, in nats.

    Raises:
        TypeError, ValueError: for shapes that do not agree.

    Example:
        >>> [round(v, 5) for v in nll(torch.zeros(3, 4), torch.tensor([0, 1, 2])).tolist()]
        [1.38629, 1.38629]
    """
    logits, ids = _check_logits_ids(logits, ids)
    return F.cross_entropy(logits[:-1].float(), ids[1:], reduction="none")


def perplexity(logits: torch.Tensor, ids: torch.Tensor) -> float:
    """``exp`` of the mean of :func:`nll`: how many tokens the model hesitates between.

    Example:
        >>> round(perplexity(torch.zeros(3, 4), torch.tensor([0, 1, 2])), 6)
        4.0
    """
    return math.exp(nll(logits, ids).mean().item())


@torch.no_grad()
def position_ablation(model, ids: torch.Tensor, *, seed: int = 0) -> dict[str, float]:
    """Perplexity of ``ids`` with true positions, shuffled positions and all positions 0.

    Token order and the causal mask stay as they are; only the positions RoPE sees change.
    A model trained with RoPE never met shuffled or all-zero positions, so their perplexity
    measures the damage of inputs out of its training distribution, not what a model could
    do without positions (that takes a model trained without them).

    Args:
        model: a transformers ``LlamaForCausalLM``.
        ids: tokens ``[T]``.
        seed: seed of the shuffle.

    Returns:
        ``{"true": ..., "shuffled": ..., "all zero": ...}`` perplexities.

    Raises:
        TypeError, ValueError: for a model that is not a Llama, bad ids or seed.

    Example:
        >>> import transformers
        >>> tiny = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=40,
        ...     hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        ...     num_attention_heads=2, num_key_value_heads=1)).eval()
        >>> sorted(position_ablation(tiny, torch.arange(8)))
        ['all zero', 'shuffled', 'true']
    """
    ids = _model_ids(model, ids)
    check_int("seed", seed)
    t = ids.shape[-1]
    gen = torch.Generator().manual_seed(seed)
    variants = {
        "true": torch.arange(t, device=ids.device),
        "shuffled": torch.randperm(t, generator=gen).to(ids.device),
        "all zero": torch.zeros(t, dtype=torch.long, device=ids.device),
    }
    return {name: perplexity(forward(model, ids, p), ids) for name, p in variants.items()}


@torch.no_grad()
def dog_similarity(smol, sentence: str = "The dog chased another dog", word: str = " dog"):
    """Cosine similarity of the last layer's states of two equal tokens, with and without RoPE.

    Args:
        smol: a :class:`posenc.data.smol.Smol`.
        sentence: a text holding ``word`` twice.
        word: the token to compare (one token).

    Returns:
        ``{"true positions": cos, "all zero": cos}`` for the first two occurrences.

    Raises:
        TypeError: if ``smol`` is not a :class:`posenc.data.smol.Smol` or a text is not a str.
        ValueError: if ``word`` is not a token that occurs twice in ``sentence``.

    Example:
        >>> from posenc.data import smol
        >>> cos = dog_similarity(smol.load())
        >>> cos["true positions"] < cos["all zero"]
        True
    """
    smol = _check_smol(smol)
    check_str("sentence", sentence)
    check_str("word", word)
    ids = smol.encode(sentence)
    where = [i for i, piece in enumerate(smol.pieces(ids)) if piece == word]
    if len(where) < 2:
        raise ValueError(
            f"word must be a token occurring twice in sentence, got {word!r} in {sentence!r}"
        )
    out = {}
    for name, p in (
        ("true positions", torch.arange(len(ids), device=ids.device)),
        ("all zero", torch.zeros(len(ids), dtype=torch.long, device=ids.device)),
    ):
        states = smol.model(
            ids[None], position_ids=p[None], output_hidden_states=True
        ).hidden_states[-1][0]
        out[name] = F.cosine_similarity(states[where[0]], states[where[1]], dim=0).item()
    return out


def recipe_rope(recipe: str):
    """A rope function for :func:`posenc.decoder.forward` whose angles follow a precision recipe.

    The angles ``p * theta_i`` are computed as :func:`posenc.precision.recipe_angles` says
    (e.g. ``"fp32 angles"``, what transformers does; ``"bf16 angles"``; ``"exact (fp64)"``),
    then the pairs are turned in float32.

    Args:
        recipe: a key of :data:`posenc.precision.RECIPES`.

    Returns:
        ``rope(x, positions, *, inv_freq, layout)``.

    Raises:
        ValueError: for an unknown recipe.

    Example:
        >>> x = torch.randn(1, 2, 5, 8, generator=torch.Generator().manual_seed(0))
        >>> p = torch.arange(5)[None, None]
        >>> f = torch.ones(4) / 3
        >>> ours = recipe_rope("exact (fp64)")(x, p, inv_freq=f, layout="half")
        >>> torch.allclose(ours, apply_rope(x, p, inv_freq=f, layout="half"), atol=1e-6)
        True
    """
    if recipe not in RECIPES:
        raise ValueError(f"recipe must be one of {sorted(RECIPES)}, got {recipe!r}")

    def rope(x, positions, *, inv_freq, layout):
        angles = recipe_angles(positions.reshape(-1), inv_freq, recipe)  # [N, D/2], float64
        angles = angles.reshape(*positions.shape, -1)
        cos, sin = angles.cos().float(), angles.sin().float()
        half = x.shape[-1] // 2
        if layout == "half":
            a, b = x[..., :half], x[..., half:]
            return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)

    return rope


@torch.no_grad()
def shift_drift(
    model, ids: torch.Tensor, shifts: Sequence[int], recipes: Sequence[str]
) -> dict[str, list[dict[str, float]]]:
    """How far the logits move when every position is shifted by ``c``, per angle recipe.

    In exact arithmetic a shift changes nothing (scores depend on offsets only). The
    reference is the unshifted run with exact angles.

    Args:
        model: a ``LlamaForCausalLM``.
        ids: tokens ``[T]``.
        shifts: the values of ``c`` (non-negative).
        recipes: keys of :data:`posenc.precision.RECIPES`.

    Returns:
        For each recipe, one dict per shift: ``max_logit`` (largest logit change, over the
        largest logit), ``top1`` (share of next-token choices unchanged) and ``ppl``.

    Raises:
        TypeError, ValueError: for a model that is not a Llama, bad ids, shifts that are
            not non-negative ints, or unknown recipes.

    Example:
        >>> import transformers
        >>> tiny = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=40,
        ...     hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        ...     num_attention_heads=2, num_key_value_heads=1)).eval()
        >>> drift = shift_drift(tiny, torch.arange(8), [10], ["exact (fp64)"])
        >>> drift["exact (fp64)"][0]["max_logit"] < 1e-5
        True
    """
    ids = _model_ids(model, ids)
    shifts = check_int_sequence("shifts", shifts, minimum=0)
    recipes = _check_names("recipes", recipes, RECIPES)
    t = ids.shape[-1]
    ref = forward(model, ids, rope=recipe_rope("exact (fp64)"))[0]
    scale = ref.abs().max().item()
    out = {}
    for name in recipes:
        rope = recipe_rope(name)
        rows = []
        for c in shifts:
            got = forward(model, ids, torch.arange(t, device=ids.device) + c, rope=rope)[0]
            rows.append(
                {
                    "max_logit": (got - ref).abs().max().item() / scale,
                    "top1": (got.argmax(-1) == ref.argmax(-1)).float().mean().item(),
                    "ppl": perplexity(got, ids),
                }
            )
        out[name] = rows
    return out


def _interleaved_copy(model):
    """A copy of ``model`` whose W_q, W_k rows are in the interleaved order (as in GGUF files)."""
    twin = copy.deepcopy(model)
    heads, kv_heads = model.config.num_attention_heads, model.config.num_key_value_heads
    for layer in twin.model.layers:
        att = layer.self_attn
        att.q_proj.weight.data = permute_qk_rows(att.q_proj.weight.data, heads, to="interleaved")
        att.k_proj.weight.data = permute_qk_rows(att.k_proj.weight.data, kv_heads, to="interleaved")
    return twin


@torch.no_grad()
def swap_check(
    model, ids: torch.Tensor, *, reference: torch.Tensor | None = None
) -> dict[str, float]:
    """The model's own logits against ours with ``posenc``'s RoPE, in three ways.

    Args:
        model: a ``LlamaForCausalLM``.
        ids: tokens ``[T]``.
        reference: ``model(ids).logits`` ``[1, T, V]`` if already computed.

    Returns:
        The largest logit difference, over the largest logit, of
        ``"apply_rope"`` and ``"apply_rope_"`` (half layout, the model's rows) and
        ``"interleaved rows"`` (W_q, W_k rows permuted to the interleaved order, rotated with
        ``layout="interleaved"``), each against ``model(ids).logits``.

    Raises:
        TypeError, ValueError: for a model that is not a Llama, bad ids or reference.

    Example:
        >>> import transformers
        >>> tiny = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=40,
        ...     hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        ...     num_attention_heads=2, num_key_value_heads=1)).eval()
        >>> all(d < 1e-5 for d in swap_check(tiny, torch.arange(6)).values())
        True
    """
    ids = _model_ids(model, ids, min_length=1)
    if reference is not None:
        check_tensor("reference", reference, min_dim=3)
    ref = (model(ids[None]).logits if reference is None else reference)[0]
    scale = ref.abs().max().item()
    twin = _interleaved_copy(model)
    runs = {
        "apply_rope": forward(model, ids, rope=apply_rope)[0],
        "apply_rope_": forward(model, ids, rope=apply_rope_)[0],
        "interleaved rows": forward(twin, ids, layout="interleaved")[0],
    }
    return {name: (got - ref).abs().max().item() / scale for name, got in runs.items()}


def gguf_row_order(
    gguf_file, weight: torch.Tensor, num_heads: int, *, layer: int = 0
) -> dict[str, float]:
    """Which order a GGUF file keeps the rows of ``W_k`` in, read from the file.

    Each row of the file's ``blk.{layer}.attn_k.weight`` (dequantised) is matched to the
    most similar row (cosine) of ``weight``, the model's ``k_proj.weight`` as transformers
    holds it. If the file kept that order, row ``r`` would match row ``r``; if it kept the
    interleaved order, row ``r`` matches the row :func:`posenc.rope.permute_qk_rows` puts
    at ``r``.

    Args:
        gguf_file: path of the GGUF file.
        weight: the model's ``W_k`` of that layer, ``[H_kv * D, E]``.
        num_heads: key/value heads ``H_kv`` in the rows.
        layer: which layer's keys.

    Returns:
        ``{"same order": share, "interleaved order": share}``: the share of rows whose best
        match is where each hypothesis puts it.

    Raises:
        TypeError: for a path that is not one, a weight that is not a float tensor or a
            count that is not an int.
        ValueError: if the file has no such layer or its tensor's shape differs.

    Example:
        >>> from posenc.data.smol import gguf_path, read_gguf_tensor
        >>> rows = read_gguf_tensor(gguf_path(), "blk.0.attn_k.weight")  # interleaved
        >>> gguf_row_order(gguf_path(), permute_qk_rows(rows, 3), 3)["interleaved order"]
        1.0
    """
    from posenc.data.smol import read_gguf_tensor

    if not isinstance(gguf_file, (str, os.PathLike)):
        raise TypeError(f"gguf_file must be a path, got {gguf_file!r} ({type(gguf_file).__name__})")
    check_tensor("weight", weight, min_dim=2)
    check_int("num_heads", num_heads, minimum=1)
    check_int("layer", layer, minimum=0)
    rows = read_gguf_tensor(gguf_file, f"blk.{layer}.attn_k.weight")
    if rows.shape != weight.shape:
        raise ValueError(
            f"weight must have the file's shape {tuple(rows.shape)}, got {tuple(weight.shape)}"
        )
    ours = weight.detach().float().cpu()
    best = (F.normalize(rows, dim=1) @ F.normalize(ours, dim=1).T).argmax(dim=1)  # [rows]
    index = torch.arange(ours.shape[0], dtype=torch.float64)[:, None]
    interleaved = permute_qk_rows(index, num_heads, to="interleaved")[:, 0].long()
    return {
        "same order": (best == torch.arange(ours.shape[0])).float().mean().item(),
        "interleaved order": (best == interleaved).float().mean().item(),
    }


@torch.no_grad()
def head_statistics(model, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Where the norm of queries and keys sits, per frequency pair, and what each head attends to.

    Returns:
        ``q_share [L, H, D/2]`` and ``k_share [L, H_kv, D/2]``: each pair's share of the
        squared norm of a head's queries (keys) before rotation, averaged over tokens;
        ``previous [L, H]``: attention each head gives to the token just before, averaged
        over queries; ``first [L, H]``: the same for the first token.

    Raises:
        TypeError, ValueError: for a model that is not a Llama or bad ids.

    Example:
        >>> import transformers
        >>> tiny = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=40,
        ...     hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        ...     num_attention_heads=2, num_key_value_heads=1)).eval()
        >>> stats = head_statistics(tiny, torch.arange(6))
        >>> tuple(stats["q_share"].shape), tuple(stats["previous"].shape)
        ((1, 2, 4), (1, 2))
    """
    ids = _model_ids(model, ids)
    q_share, k_share, previous, first = [], [], [], []

    def share(x):  # [B, H, T, D] -> [H, D/2]
        x1, x2 = x.chunk(2, dim=-1)  # the half layout: pair i is (i, i + D/2)
        energy = x1.pow(2) + x2.pow(2)
        energy = energy / energy.sum(-1, keepdim=True)
        return energy.mean(dim=(0, 2))

    def observe(layer, q, k, weights):
        q_share.append(share(q))
        k_share.append(share(k))
        w = weights[0]  # [H, T, T]
        previous.append(w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1))
        first.append(w[:, 1:, 0].mean(-1))

    forward(model, ids, observe=observe)
    return {
        "q_share": torch.stack(q_share),
        "k_share": torch.stack(k_share),
        "previous": torch.stack(previous),
        "first": torch.stack(first),
    }


def energy_figure(stats: dict[str, torch.Tensor]):
    """Two heat maps, queries and keys: each pair's share of the norm, per head of each layer.

    One row per head, the heads of a layer next to each other, layers from the bottom up.

    Args:
        stats: the result of :func:`head_statistics`.

    Returns:
        The matplotlib figure.

    Raises:
        TypeError, ValueError: if ``stats`` is not such a result.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> shares, heads = torch.full((3, 2, 4), 0.25), torch.full((3, 2), 0.5)
        >>> stats = {"q_share": shares, "k_share": shares, "previous": heads, "first": heads}
        >>> plt.close(energy_figure(stats))
    """
    stats = _check_stats(stats)
    fig, axes = plots.figure(1, 2, height=3.6)
    top = max(stats["q_share"].max().item(), stats["k_share"].max().item())
    for ax, key, title in zip(axes, ("q_share", "k_share"), ("queries", "keys"), strict=True):
        shares = stats[key].cpu()  # [L, H, D/2]
        layers, heads = shares.shape[:2]
        image = ax.imshow(
            shares.flatten(0, 1).numpy(),  # [L * H, D/2]: layer by layer, head by head
            interpolation="nearest",
            aspect="auto",
            cmap=plots.SEQUENTIAL,
            vmin=0,
            vmax=top,
            origin="lower",
        )
        ax.set_title(f"{title}: share of |x|^2 per pair")
        ax.set_xlabel("pair i (fast → slow)")
        ax.set_ylabel("layer (one row per head)")
        step = max(1, layers // 6)
        ax.set_yticks([(i + 0.5) * heads - 0.5 for i in range(0, layers, step)])
        ax.set_yticklabels([str(i) for i in range(0, layers, step)])
        ax.grid(False)
    plots.colorbar_below(image, list(axes), "share of the squared norm")
    return fig


def heads_figure(stats: dict[str, torch.Tensor]):
    """Heat map of the attention each head gives to the previous token, per layer.

    Args:
        stats: the result of :func:`head_statistics`.

    Returns:
        The matplotlib figure.

    Raises:
        TypeError, ValueError: if ``stats`` is not such a result.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> shares, heads = torch.full((3, 2, 4), 0.25), torch.full((3, 2), 0.5)
        >>> stats = {"q_share": shares, "k_share": shares, "previous": heads, "first": heads}
        >>> plt.close(heads_figure(stats))
    """
    prev = _check_stats(stats)["previous"].cpu()
    fig, ax = plots.figure(height=3.4)
    image = ax.imshow(
        prev.T.numpy(), aspect="auto", cmap=plots.SEQUENTIAL, vmin=0, vmax=1, origin="lower"
    )
    ax.set_xlabel("layer")
    ax.set_ylabel("head")
    ax.set_title("Attention to the previous token, per head")
    ax.grid(False)
    plots.colorbar_below(image, ax, "mean attention weight on token t - 1")
    return fig


def _fastest_removed(inv_freq: torch.Tensor, fraction: float) -> torch.Tensor:
    """``inv_freq`` with its fastest ``fraction`` of pairs at frequency 0: as many pairs as
    p-RoPE with ``p = 1 - fraction`` stills at the slow end."""
    n = inv_freq.shape[0]
    out = inv_freq.clone()
    out[: n - math.floor((1 - fraction) * n + 0.5)] = 0
    return out


@torch.no_grad()
def previous_token_ablation(model, ids: torch.Tensor, fraction: float = 0.25) -> dict:
    """Each head's attention to the previous token, with its fastest or slowest pairs unrotated.

    An ablation inside each layer: the queries and keys the trained model makes (before
    rotation) are rotated again with the fastest ``fraction`` of the pairs at frequency 0,
    or the slowest, and the head's attention recomputed. Everything feeding the layer stays
    as trained, so the change is the head's own use of those pairs.

    Args:
        model: a ``LlamaForCausalLM`` (pairs in the ``"half"`` layout).
        ids: tokens ``[T]``.
        fraction: the share of pairs unrotated, in ``[0, 1]``.

    Returns:
        ``{"trained", "fastest removed", "slowest removed"}``, each ``[L, H]``: the mean
        attention weight on token ``t - 1``, over the queries ``t >= 1``.

    Raises:
        TypeError, ValueError: for a model that is not a Llama, bad ids, or a fraction
            outside ``[0, 1]``.

    Example:
        >>> import transformers
        >>> tiny = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=40,
        ...     hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        ...     num_attention_heads=2, num_key_value_heads=1)).eval()
        >>> out = previous_token_ablation(tiny, torch.arange(8), 0.0)
        >>> torch.allclose(out["fastest removed"], out["trained"], atol=1e-6)
        True
    """
    ids = _model_ids(model, ids)
    fraction = check_real("fraction", fraction)
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    base = config_inv_freq(model.config).to(ids.device)
    variants = {
        "trained": base,
        "fastest removed": _fastest_removed(base, fraction),
        "slowest removed": p_rope_inv_freq(base, 1 - fraction),
    }
    t = ids.shape[-1]
    p = torch.arange(t, device=ids.device)[None, None]  # [1, 1, T]
    later = torch.ones(t, t, dtype=torch.bool, device=ids.device).triu(1)
    group = model.config.num_attention_heads // model.config.num_key_value_heads
    out = {name: [] for name in variants}

    def observe(layer, q, k, weights):
        for name, inv_freq in variants.items():
            qr = apply_rope(q, p, inv_freq=inv_freq, layout="half")  # [1, H, T, D]
            kr = apply_rope(k, p, inv_freq=inv_freq, layout="half").repeat_interleave(group, 1)
            scores = qr @ kr.transpose(-1, -2) / math.sqrt(q.shape[-1])  # [1, H, T, T]
            w = scores.masked_fill(later, float("-inf")).softmax(-1)[0]
            out[name].append(w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1))  # [H]

    forward(model, ids, observe=observe)
    return {name: torch.stack(rows) for name, rows in out.items()}


@torch.no_grad()
def frequency_removal(
    model, ids: torch.Tensor, fractions: Sequence[float]
) -> dict[str, list[float]]:
    """Perplexity with the rotation removed from the slowest or the fastest pairs.

    ``"slowest"`` is p-RoPE (:func:`posenc.scaling.p_rope_inv_freq` with ``p = 1 - f``): the
    slowest fraction ``f`` of the pairs get frequency 0. ``"fastest"`` does the same to the
    fastest pairs.

    Returns:
        ``{"slowest": [ppl per fraction], "fastest": [ppl per fraction]}``.

    Raises:
        TypeError, ValueError: for a model that is not a Llama, bad ids, or fractions
            that are not numbers in ``[0, 1]``.

    Example:
        >>> import transformers
        >>> tiny = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=40,
        ...     hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        ...     num_attention_heads=2, num_key_value_heads=1)).eval()
        >>> removed = frequency_removal(tiny, torch.arange(8), [0.0])
        >>> removed["slowest"] == removed["fastest"]  # nothing removed either way
        True
    """
    ids = _model_ids(model, ids)
    fractions = [
        check_real(f"fractions[{i}]", f)
        for i, f in enumerate(check_sequence("fractions", fractions))
    ]
    base = config_inv_freq(model.config)
    out = {"slowest": [], "fastest": []}
    for f in fractions:
        if not 0 <= f <= 1:
            raise ValueError(f"fractions must be in [0, 1], got {f}")
    for f in fractions:
        slow, fast = p_rope_inv_freq(base, 1 - f), _fastest_removed(base, f)
        out["slowest"].append(perplexity(forward(model, ids, inv_freq=slow.to(ids.device)), ids))
        out["fastest"].append(perplexity(forward(model, ids, inv_freq=fast.to(ids.device)), ids))
    return out


def scaled_inv_freq(config, method: str, factor: float) -> tuple[torch.Tensor, float]:
    """Frequencies ``[D/2]`` and an attention-score factor for one context-extension recipe.

    Args:
        config: the model's ``LlamaConfig`` (base, head size, trained length).
        method: one of :data:`SCALINGS`.
        factor: the extension factor (at least 1; ``"none"`` ignores it).

    Returns:
        ``(inv_freq float64 [D/2], score_scale)``; ``score_scale`` is 1 except for YaRN,
        whose factor on ``cos`` and ``sin`` scales every score by its square.

    Raises:
        TypeError: if ``config`` is not a Llama config or ``factor`` not a number.
        ValueError: for an unknown method, a factor below 1, or a scaled config.

    Example:
        >>> import transformers
        >>> cfg = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4)
        >>> inv_freq, scale = scaled_inv_freq(cfg, "PI", 4.0)
        >>> float(inv_freq[0]), scale
        (0.25, 1.0)
    """
    _check_config(config)
    method = check_option("method", method, SCALINGS)
    factor = check_real("factor", factor, minimum=1.0)
    base = config_inv_freq(config)
    dim = 2 * base.shape[0]
    theta = config_rope_base(config)
    trained = int(config.max_position_embeddings)
    if method == "none":
        return base, 1.0
    if method == "PI":
        return position_interpolation_inv_freq(base, factor), 1.0
    if method == "NTK-aware":
        return ntk_aware_inv_freq(dim, theta, factor), 1.0
    if method == "YaRN":
        inv_freq, attention = yarn_inv_freq(dim, theta, factor, trained)
        return inv_freq, attention**2
    if method == "llama3":
        return llama3_inv_freq(base, factor, original_max_positions=trained), 1.0
    raise ValueError(f"method must be one of {SCALINGS}, got {method!r}")


@torch.no_grad()
def gap_probe(
    model, ids: torch.Tensor, gaps: Sequence[int], methods: Sequence[str] = SCALINGS
) -> dict[str, list[float]]:
    """Perplexity of a text's second half when a gap of ``g`` positions opens in its middle.

    The first half keeps positions ``0 .. T/2 - 1``; the second half starts ``g`` positions
    later. Neighbours stay one position apart within each half, so the heads that read the
    previous token keep working, while every offset across the gap exceeds ``g``: a long
    context's distances without its tokens. Each recipe gets the factor that fits the span
    ``T + g`` into the trained length, ``max(1, (T + g) / trained length)``.

    Returns:
        ``{method: [ppl of the second half per gap]}`` plus ``"span"``: ``T + g`` per gap.

    Raises:
        TypeError, ValueError: for a model that is not a Llama, fewer than 4 ids, gaps
            that are not non-negative ints, or unknown methods.

    Example:
        >>> import transformers
        >>> tiny = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=40,
        ...     hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        ...     num_attention_heads=2, num_key_value_heads=1)).eval()
        >>> gap_probe(tiny, torch.arange(8), [0, 5000], ["none", "PI"])["span"]
        [8, 5008]
    """
    ids = _model_ids(model, ids, min_length=4)
    gaps = check_int_sequence("gaps", gaps, minimum=0)
    methods = _check_names("methods", methods, SCALINGS)
    t = ids.shape[-1]
    half = t // 2
    trained = int(model.config.max_position_embeddings)
    out: dict[str, list[float]] = {"span": [t + g for g in gaps]}
    done: dict[tuple[str, int], float] = {}
    for method in methods:
        out[method] = []
        for g in gaps:
            factor = max(1.0, (t + g) / trained)
            key = (method if factor > 1 else "none", g)  # every recipe is plain RoPE at factor 1
            if key not in done:
                index = torch.arange(t, device=ids.device)
                positions = index + g * (index >= half)
                inv_freq, scale = scaled_inv_freq(model.config, key[0], factor)
                logits = forward(
                    model, ids, positions, inv_freq=inv_freq.to(ids.device), score_scale=scale
                )
                done[key] = math.exp(nll(logits, ids)[half:].mean().item())
            out[method].append(done[key])
    return out


def probe_figure(probe: dict[str, list[float]], trained: int, *, xlabel: str, title: str):
    """Perplexity against the positions a text spans, one line per recipe.

    Args:
        probe: the result of :func:`gap_probe`.
        trained: the model's trained length (a dotted vertical line).
        xlabel, title: the axis label and the title.

    Returns:
        The matplotlib figure.

    Raises:
        ValueError: if ``probe`` has no ``"span"`` or more than six recipes.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> probe = {"span": [100, 20000], "none": [20.0, 900.0], "PI": [20.0, 60.0]}
        >>> plt.close(probe_figure(probe, 8192, xlabel="span", title="A probe"))
    """
    probe = check_dict("probe", probe)
    check_int("trained", trained, minimum=1)
    if "span" not in probe:
        raise ValueError(
            f"probe must hold a 'span' list and one list per recipe, got keys {sorted(probe)}"
        )
    names = [k for k in probe if k != "span"]
    if not 1 <= len(names) <= plots.MAX_LINES:
        raise ValueError(f"probe must hold 1 to {plots.MAX_LINES} recipes, got {len(names)}")
    fig, ax = plots.figure(height=3.6)
    spans = probe["span"]
    palette = [c for k, c in plots.COLORS.items() if k != "ink"]
    for i, name in enumerate(names):
        label = "plain RoPE" if name == "none" else name
        ax.plot(spans, probe[name], "o-", ms=4, color=palette[i % len(palette)], label=label)
    ax.axvline(trained, color=plots.COLORS["ink"], lw=0.8, ls=":")
    ax.text(trained * 1.05, 0.95, "trained length", va="top", transform=ax.get_xaxis_transform())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("perplexity")
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=min(len(names), 5))
    return fig


@torch.no_grad()
def generation_check(smol, prompt: str, steps: int = 20) -> dict[str, object]:
    """Greedy decoding with our cache and RoPE against ``model.generate``.

    Returns:
        ``{"ours": ids, "apply_rope_": ids, "generate": ids, "text": decoded}``: the new
        token ids of :func:`posenc.decoder.generate` with ``apply_rope`` and with
        ``apply_rope_``, and of transformers' own greedy ``generate``.

    Raises:
        TypeError, ValueError: if ``smol`` is not a :class:`posenc.data.smol.Smol`, ``prompt``
            is not a non-empty str or ``steps`` not a positive int.

    Example:
        >>> from posenc.data import smol
        >>> out = generation_check(smol.load(), "The capital of France is", steps=3)
        >>> out["ours"] == out["generate"]
        True
    """
    smol = _check_smol(smol)
    check_str("prompt", prompt)
    check_int("steps", steps, minimum=1)
    ids = smol.encode(prompt)
    reference = smol.model.generate(
        ids[None],
        max_new_tokens=steps,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=smol.tokenizer.eos_token_id,
    )[0, len(ids) :].tolist()
    ours = generate(smol.model, ids, steps)
    in_place = generate(smol.model, ids, steps, rope=apply_rope_)
    return {
        "ours": ours,
        "apply_rope_": in_place,
        "generate": reference,
        "text": smol.tokenizer.decode(ours),
    }
