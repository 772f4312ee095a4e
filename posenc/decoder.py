"""A Llama decoder's forward pass written out, with RoPE where a reader can see it.

transformers runs a ``LlamaForCausalLM`` through many layers of abstraction; the rotary
step hides in a helper that receives precomputed cosines and sines. This module runs the
same weights with twenty lines of plain PyTorch per step, so that the chapters can change
what RoPE does (the positions, the frequencies, the function that rotates, the precision of
its angles) and see what a trained model makes of it.

One layer, for a sequence ``x[B, T, E]``:

1. ``h = rms_norm(x)``; ``q, k, v = h W_q, h W_k, h W_v`` split into heads
   ``q[B, H, T, D]``, ``k, v[B, H_kv, T, D]``;
2. **RoPE**: ``q = rope(q, positions)``, ``k = rope(k, positions)``; keys are rotated once,
   when they are made, and kept rotated in the cache;
3. causal attention in token order, each key/value head shared by ``H / H_kv`` query heads
   (through ``scaled_dot_product_attention``, which never holds the ``[B, H, T, S]`` scores of a
   long text at once, unless ``observe`` asks for the weights);
4. ``x = x + attention W_o``; ``x = x + W_down(silu(W_gate h) * W_up h)`` with
   ``h = rms_norm(x)``.

Positions are separate from token order: the mask always follows the order of the tokens,
and RoPE sees whatever positions it is given.

Everything runs in float32 (the model's own dtype if it is float64); the weights are read
from the model, never copied, so a model held in bfloat16 or float16 is refused (load it in
float32).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from posenc._validate import (
    check_callable,
    check_int,
    check_layout,
    check_positive_float,
    check_same_device,
)
from posenc.rope import _check_inv_freq, apply_rope, rope_inv_freq

__all__ = [
    "KVCache",
    "config_inv_freq",
    "config_rope_base",
    "forward",
    "generate",
    "next_token_nll",
]

Rope = Callable[..., torch.Tensor]


class KVCache:
    """Keys (already rotated) and values of the tokens seen so far, one pair per layer.

    :func:`forward` fills it and extends it; a new cache is empty.

    Attributes:
        keys, values: per layer, ``[B, H_kv, S, D]`` for the ``S`` tokens seen so far.
        positions: ``[B, S]``, the positions those tokens were given (None while empty).

    Example:
        >>> cache = KVCache()
        >>> cache.length, cache.next_positions(3).tolist()
        (0, [[0, 1, 2]])
    """

    def __init__(self):
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.positions: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """``S``: how many tokens the cache holds."""
        return 0 if self.positions is None else self.positions.shape[-1]

    def next_positions(self, count: int) -> torch.Tensor:
        """The ``count`` positions that follow the last one held: ``[B, count]``.

        Raises:
            TypeError, ValueError: if ``count`` is not an int of at least 1.
        """
        check_int("count", count, minimum=1)
        if self.positions is None:
            return torch.arange(count)[None]
        return self.positions[:, -1:] + 1 + torch.arange(count, device=self.positions.device)


def _check_model(model: object) -> torch.device:
    """The model's device, once ``model`` is known to look like a ``LlamaForCausalLM``."""
    inner = getattr(model, "model", None)
    if not (hasattr(model, "config") and hasattr(inner, "layers") and hasattr(model, "lm_head")):
        raise TypeError(
            f"model must be a transformers LlamaForCausalLM (with .config, .model.layers "
            f"and .lm_head), got {type(model).__name__}"
        )
    dtype = model.lm_head.weight.dtype
    if dtype not in (torch.float32, torch.float64):  # run as they are, never copied
        raise TypeError(
            f"model's weights must be float32 or float64, got {dtype}: load it in float32 "
            "(or call model.float())"
        )
    return model.lm_head.weight.device


def _check_config(config: object) -> None:
    for attribute in ("hidden_size", "num_attention_heads"):
        if not isinstance(getattr(config, attribute, None), int):
            raise TypeError(
                f"config must be a transformers LlamaConfig (with an int {attribute}), "
                f"got {type(config).__name__}"
            )


def config_rope_base(config) -> float:
    """RoPE's base for a Llama config with plain RoPE (10000 if the config names none).

    Reads ``config.rope_parameters`` (transformers 5) or ``config.rope_theta`` (transformers 4).

    Args:
        config: a ``LlamaConfig``.

    Returns:
        The base, a float.

    Raises:
        TypeError: if ``config`` is not a Llama config.
        ValueError: if the config asks for a scaled RoPE (``rope_type`` other than
            ``"default"``).

    Example:
        >>> from transformers import LlamaConfig
        >>> config_rope_base(LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=500.0))
        500.0
    """
    _check_config(config)
    params = getattr(config, "rope_parameters", None) or {}
    theta = params.get("rope_theta", getattr(config, "__dict__", {}).get("rope_theta"))
    kind = params.get("rope_type", "default")
    scaling = getattr(config, "__dict__", {}).get("rope_scaling")
    if scaling:
        kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind != "default":
        raise ValueError(f"config_rope_base reads plain RoPE only, got rope_type={kind!r}")
    return 10000.0 if theta is None else float(theta)


def _head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def config_inv_freq(config) -> torch.Tensor:
    """RoPE's frequencies ``[D/2]`` (float64) for a Llama config with plain RoPE.

    Reads the base from ``config.rope_parameters`` (transformers 5) or ``config.rope_theta``
    (transformers 4).

    Args:
        config: a ``LlamaConfig``.

    Returns:
        float64 ``[D/2]``: ``base**(-2i/D)``.

    Raises:
        TypeError, ValueError: as :func:`config_rope_base`; for a scaled RoPE, pass the
            scaled frequencies to :func:`forward` instead.

    Example:
        >>> from transformers import LlamaConfig
        >>> config_inv_freq(LlamaConfig(hidden_size=64, num_attention_heads=4))[:2]
        tensor([1.0000, 0.3162], dtype=torch.float64)
    """
    base = config_rope_base(config)  # checks the config first
    return rope_inv_freq(_head_dim(config), base)


def _rms_norm(x: torch.Tensor, norm: torch.nn.Module) -> torch.Tensor:
    eps = getattr(norm, "variance_epsilon", None) or getattr(norm, "eps", 1e-6)
    return norm.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _heads(x: torch.Tensor, count: int) -> torch.Tensor:
    """``[B, T, count * D] -> [B, count, T, D]``."""
    b, t, _ = x.shape
    return x.view(b, t, count, -1).transpose(1, 2)


def _check_token_ids(
    ids: object, device: torch.device, *, dims=(1, 2), min_length: int = 1
) -> torch.Tensor:
    """``ids`` if it is an integer tensor of token ids on ``device`` with ``T >= min_length``.

    Args:
        ids: the token ids to check.
        device: the model's device, where ``ids`` must be.
        dims: the accepted numbers of dimensions (1: ``[T]``, 2: ``[B, T]``).
        min_length: the fewest tokens ``T`` accepted.

    Returns:
        ``ids``, unchanged.

    Raises:
        TypeError: if ``ids`` is not an integer tensor.
        ValueError: for a shape with other dimensions, too few tokens, or another device.

    Example:
        >>> _check_token_ids(torch.tensor([5, 7]), torch.device("cpu")).tolist()
        [5, 7]
        >>> _check_token_ids(torch.tensor([5]), torch.device("cpu"), min_length=2)
        Traceback (most recent call last):
        ...
        ValueError: ids must be [T] or [B, T] with T >= 2, got shape (1,)
    """
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"ids must be an integer tensor of token ids, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"ids must hold integers, got dtype {ids.dtype}")
    shapes = " or ".join(["[T]", "[B, T]"][d - 1] for d in dims)
    if ids.dim() not in dims or ids.shape[-1] < min_length:
        raise ValueError(
            f"ids must be {shapes} with T >= {min_length}, got shape {tuple(ids.shape)}"
        )
    if ids.device != device:
        raise ValueError(
            f"ids must be on the model's device {device}, got ids on device {ids.device}"
        )
    return ids


def _check_ids(ids: object, device: torch.device) -> torch.Tensor:
    ids = _check_token_ids(ids, device)
    return ids if ids.dim() == 2 else ids[None]


def _check_positions(positions: object, ids: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
    if positions is None:
        if cache is not None:
            return cache.next_positions(ids.shape[1]).expand(ids.shape[0], -1)
        return torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
    if not isinstance(positions, torch.Tensor):
        try:
            positions = torch.as_tensor(positions)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"positions must be integers [T] or [B, T], got {positions!r}: {err}"
            ) from None
    check_same_device(ids=ids, positions=positions)
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must hold integers, got dtype {positions.dtype}")
    if positions.dim() == 1:
        positions = positions[None]
    if positions.dim() != 2 or positions.shape[-1] != ids.shape[1]:
        raise ValueError(
            f"positions must be [T] or [B, T] with T={ids.shape[1]}, got shape {tuple(positions.shape)}"
        )
    return positions.to(torch.int64).expand(ids.shape[0], -1)


@torch.no_grad()
def forward(
    model,
    ids: torch.Tensor,
    positions=None,
    *,
    rope: Rope = apply_rope,
    inv_freq: torch.Tensor | None = None,
    layout: str = "half",
    score_scale: float = 1.0,
    cache: KVCache | None = None,
    observe: Callable | None = None,
) -> torch.Tensor:
    """Run a ``LlamaForCausalLM``'s weights on ``ids``, rotating with ``rope``.

    Args:
        model: a transformers ``LlamaForCausalLM`` (its weights are used, not its code).
        ids: token ids ``[T]`` or ``[B, T]``.
        positions: integer positions ``[T]`` or ``[B, T]`` given to RoPE; default
            ``0 .. T-1``, or the positions that follow the cache's.
        rope: the rotation, called as ``rope(x, positions, inv_freq=..., layout=...)`` on
            ``x[B, H, T, D]`` with ``positions[B, 1, T]`` (``posenc.apply_rope``,
            ``posenc.apply_rope_`` or any function with that contract).
        inv_freq: frequencies ``[D/2]``; default :func:`config_inv_freq` of the model.
        layout: which features form a pair in the model's ``W_q, W_k`` rows: ``"half"`` for
            transformers checkpoints, ``"interleaved"`` for Meta's and GGUF files.
        score_scale: a factor on every attention score (YaRN's temperature; 1 otherwise).
        cache: a :class:`KVCache` to attend to and extend (greedy decoding).
        observe: called after each layer's attention as
            ``observe(layer, q, k, weights)`` with the queries ``[B, H, T, D]`` and keys
            ``[B, H_kv, T, D]`` before rotation and the attention weights ``[B, H, T, S]``.
            Without it the weights are never formed whole (see the module's docstring).

    Returns:
        float32 logits ``[B, T, V]`` (``[1, T, V]`` for 1-D ``ids``).

    Raises:
        TypeError: if ``model`` is not a Llama causal LM with float32 or float64 weights,
            ``ids`` or ``positions`` are not integer tensors, or ``rope`` is not callable.
        ValueError: for shapes that do not match, an unknown layout, or a non-positive
            ``score_scale``.

    Example:
        >>> import torch, transformers
        >>> cfg = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64,
        ...     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
        >>> model = transformers.LlamaForCausalLM(cfg).eval()
        >>> ids = torch.tensor([[3, 14, 15, 9, 26]])
        >>> ours = forward(model, ids)
        >>> torch.allclose(ours, model(ids).logits, atol=1e-5)
        True
    """
    states = _final_states(
        model,
        ids,
        positions,
        rope=rope,
        inv_freq=inv_freq,
        layout=layout,
        score_scale=score_scale,
        cache=cache,
        observe=observe,
    )
    return model.lm_head(states).to(states.dtype)


@torch.no_grad()
def next_token_nll(
    model,
    ids: torch.Tensor,
    positions=None,
    *,
    rope: Rope = apply_rope,
    inv_freq: torch.Tensor | None = None,
    layout: str = "half",
    score_scale: float = 1.0,
    chunk: int = 1024,
) -> torch.Tensor:
    """Each next token's negative log-likelihood under :func:`forward`, for a long text.

    The same pass as :func:`forward`, but the logits ``[T, V]`` (3.2 GB for 16,384 tokens
    and SmolLM2's 49,152 tokens) are made ``chunk`` positions at a time and reduced to the
    loss at once.

    Args:
        model, positions, rope, inv_freq, layout, score_scale: as for :func:`forward`.
        ids: token ids ``[T]``, ``T >= 2``.
        chunk: how many positions' logits to hold at a time (at least 1).

    Returns:
        float32 ``[T - 1]``, in nats: entry ``t`` is ``-log p(ids[t + 1] | ids[0..t])``.

    Raises:
        TypeError, ValueError: as :func:`forward`, for fewer than 2 ids, or a ``chunk``
            that is not a positive int.

    Example:
        >>> import torch, transformers
        >>> cfg = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64,
        ...     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
        >>> model = transformers.LlamaForCausalLM(cfg).eval()
        >>> ids = torch.tensor([3, 14, 15, 9, 26])
        >>> logits = model(ids[None]).logits[0, :-1]
        >>> want = torch.nn.functional.cross_entropy(logits, ids[1:], reduction="none")
        >>> torch.allclose(next_token_nll(model, ids, chunk=2), want, atol=1e-5)
        True
    """
    ids = _check_token_ids(ids, _check_model(model), dims=(1,), min_length=2)
    chunk = check_int("chunk", chunk, minimum=1)
    states = _final_states(
        model,
        ids,
        positions,
        rope=rope,
        inv_freq=inv_freq,
        layout=layout,
        score_scale=score_scale,
        cache=None,
        observe=None,
    )[0, :-1]  # [T - 1, E]: each position predicts the next token
    targets = ids[1:]
    losses = [
        F.cross_entropy(
            model.lm_head(states[i : i + chunk]).float(), targets[i : i + chunk], reduction="none"
        )
        for i in range(0, targets.shape[0], chunk)
    ]
    return torch.cat(losses)


def _attend(q, k, v, *, scale: float, start: int, weights: bool):
    """Causal attention of ``q[B, H, T, D]`` to ``k, v[B, H, S, D]``; queries sit at
    ``start .. start + T - 1`` of the ``S`` keys. Returns ``(out [B, H, T, D], weights)``,
    the weights ``[B, H, T, S]`` only when asked for (else None)."""
    t, s = q.shape[2], k.shape[2]
    if not weights:  # no [B, H, T, S] in memory at once
        if start == 0:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale), None
        allowed = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(start)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale), None
    later = torch.ones(t, s, dtype=torch.bool, device=q.device).triu(start + 1)
    w = (q @ k.transpose(-1, -2) * scale).masked_fill(later, float("-inf")).softmax(dim=-1)
    return w @ v, w


def _final_states(
    model, ids, positions, *, rope, inv_freq, layout, score_scale, cache, observe
) -> torch.Tensor:
    """The last layer's normalised states ``[B, T, E]`` (float32, or float64): :func:`forward`
    without the output layer."""
    device = _check_model(model)
    ids = _check_ids(ids, device)
    positions = _check_positions(positions, ids, cache)
    check_callable("rope", rope)
    layout = check_layout(layout)
    score_scale = check_positive_float("score_scale", score_scale)
    if cache is not None and not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache or None, got {type(cache).__name__}")
    if observe is not None:
        check_callable("observe", observe)
    config = model.config
    head_dim = _head_dim(config)
    if inv_freq is None:
        inv_freq = config_inv_freq(config)
    else:
        inv_freq = _check_inv_freq(inv_freq, head_dim)
        check_same_device(ids=ids, inv_freq=inv_freq)
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    inner = model.model
    x = inner.embed_tokens(ids)
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    x = x.to(dtype)
    p = positions[:, None, :].to(x.device)  # [B, 1, T]: one row of positions for all heads
    start = 0 if cache is None else cache.length
    scale = score_scale / math.sqrt(head_dim)
    for index, layer in enumerate(inner.layers):
        att = layer.self_attn
        h = _rms_norm(x, layer.input_layernorm)
        q = _heads(F.linear(h, att.q_proj.weight, att.q_proj.bias), heads)  # [B, H, T, D]
        k = _heads(F.linear(h, att.k_proj.weight, att.k_proj.bias), kv_heads)  # [B, Hkv, T, D]
        v = _heads(F.linear(h, att.v_proj.weight, att.v_proj.bias), kv_heads)
        q_rot = rope(q.clone(), p, inv_freq=inv_freq, layout=layout)
        k_rot = rope(k.clone(), p, inv_freq=inv_freq, layout=layout)
        if cache is not None:  # keys enter the cache rotated, once
            if index < len(cache.keys):
                k_rot = cache.keys[index] = torch.cat([cache.keys[index], k_rot], dim=2)
                v = cache.values[index] = torch.cat([cache.values[index], v], dim=2)
            else:
                cache.keys.append(k_rot)
                cache.values.append(v)
        group = heads // kv_heads
        k_all = k_rot.repeat_interleave(group, dim=1)  # [B, H, S, D]
        v_all = v.repeat_interleave(group, dim=1)
        out, weights = _attend(
            q_rot, k_all, v_all, scale=scale, start=start, weights=observe is not None
        )  # [B, H, T, D], [B, H, T, S] or None
        if observe is not None:
            observe(index, q, k, weights)
        out = out.transpose(1, 2).reshape(x.shape[0], q.shape[2], -1)
        x = x + F.linear(out, att.o_proj.weight, att.o_proj.bias)
        h = _rms_norm(x, layer.post_attention_layernorm)
        mlp = layer.mlp
        x = x + mlp.down_proj(F.silu(mlp.gate_proj(h)) * mlp.up_proj(h))
    if cache is not None:
        cache.positions = (
            p[:, 0] if cache.positions is None else torch.cat([cache.positions, p[:, 0]], -1)
        )
    return _rms_norm(x, inner.norm).to(dtype)


@torch.no_grad()
def generate(
    model, ids: torch.Tensor, steps: int, *, rope: Rope = apply_rope, layout: str = "half"
) -> list[int]:
    """Greedy decoding with a :class:`KVCache`: each new token is rotated at its position.

    The prompt goes through :func:`forward` once (its keys enter the cache rotated); then each
    step feeds only the newest token, at the position after the cache's last.

    Args:
        model: a transformers ``LlamaForCausalLM``.
        ids: the prompt, ``[T]`` token ids.
        steps: how many tokens to generate (at least 1).
        rope, layout: as for :func:`forward`.

    Returns:
        The ``steps`` new token ids (greedy: the most likely token each time; an end token
        is generated like any other).

    Raises:
        TypeError, ValueError: as :func:`forward`, and for ``steps`` < 1 or a batch of
            prompts.

    Example:
        >>> import torch, transformers
        >>> cfg = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64,
        ...     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
        >>> model = transformers.LlamaForCausalLM(cfg).eval()
        >>> prompt = torch.tensor([3, 14, 15])
        >>> ref = model.generate(prompt[None], max_new_tokens=4, do_sample=False,
        ...     eos_token_id=None, pad_token_id=0)
        >>> generate(model, prompt, 4) == ref[0, 3:].tolist()
        True
    """
    steps = check_int("steps", steps, minimum=1)
    _check_token_ids(ids, _check_model(model), dims=(1,))
    cache = KVCache()
    logits = forward(model, ids, rope=rope, layout=layout, cache=cache)
    new = []
    for _ in range(steps):
        token = int(logits[0, -1].argmax())
        new.append(token)
        if len(new) < steps:
            nxt = torch.tensor([token], device=ids.device)
            logits = forward(model, nxt, rope=rope, layout=layout, cache=cache)
    return new
