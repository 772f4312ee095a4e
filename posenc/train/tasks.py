"""Two tasks where position matters and the length can grow: copying and associative recall.

Each batch is a pair ``(tokens[B, T], targets[B, T])``: the model reads ``tokens`` and, at
every place where ``targets`` is not :data:`IGNORE`, must predict that target token (the
next token of the sequence). Only the answer part of a sequence is scored; the question
part is there to be read.

Token ids: 0 is ``BOS`` (every sequence starts with it), 1 is ``SEP`` (between question and
answer), and the symbols are ``2 .. 2 + symbols - 1``.

- **copy**: ``BOS x_1 .. x_n SEP x_1 .. x_n``: repeat the ``n`` symbols in order. Symbols
  repeat within a sequence, so finding where the current symbol stood is not enough: the
  model must know *which* occurrence it is copying, which takes position.
- **recall**: ``BOS k_1 v_1 .. k_n v_n SEP k'_1 v'_1 .. k'_n v'_n``: ``n`` distinct keys
  each followed by its value, then every key again in a shuffled order, each to be answered
  with its value. A value belongs to the key just before it: binding the two takes the
  previous token's position.
"""

from __future__ import annotations

import torch

from posenc._validate import check_int

__all__ = ["BOS", "IGNORE", "SEP", "TASKS", "copy_batch", "recall_batch", "sequence_length"]

BOS, SEP = 0, 1
IGNORE = -100
"""A target that is not scored (``torch.nn.functional.cross_entropy``'s ``ignore_index``)."""


def _check(batch: int, n: int, symbols: int, gen: object) -> None:
    check_int("batch", batch, minimum=1)
    check_int("n", n, minimum=1)
    check_int("symbols", symbols, minimum=2)
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")


def _with_targets(tokens: torch.Tensor, answer_from: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens[:, :-1], next tokens)`` with only the answer part (from ``answer_from``) scored."""
    targets = tokens[:, 1:].clone()
    targets[:, : answer_from - 1] = IGNORE  # predicting token t happens at t - 1
    return tokens[:, :-1], targets


def copy_batch(
    batch: int, n: int, symbols: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` copy sequences of ``n`` symbols: ``BOS x SEP x``.

    Args:
        batch: ``B``.
        n: symbols to copy.
        symbols: size of the symbol alphabet (drawn uniformly, with repeats).
        gen: the CPU generator that draws them.

    Returns:
        int64 ``tokens[B, 2n + 1]`` and ``targets[B, 2n + 1]``; the last ``n`` targets
        are the copy, the others :data:`IGNORE`.

    Raises:
        TypeError, ValueError: for a bad count or a ``gen`` that is not a generator.

    Example:
        >>> tokens, targets = copy_batch(1, 3, 8, torch.Generator().manual_seed(0))
        >>> tokens.shape, (targets != IGNORE).sum().item()
        (torch.Size([1, 7]), 3)
        >>> torch.equal(targets[0, -3:], tokens[0, 1:4])
        True
    """
    _check(batch, n, symbols, gen)
    x = torch.randint(symbols, (batch, n), generator=gen) + 2
    bos = torch.full((batch, 1), BOS)
    sep = torch.full((batch, 1), SEP)
    return _with_targets(torch.cat([bos, x, sep, x], dim=1), n + 2)


def recall_batch(
    batch: int, n: int, symbols: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` associative-recall sequences of ``n`` key-value pairs, all asked back.

    Keys are ``n`` distinct symbols of the first half of the alphabet, values any symbol of
    the second half; the questions ask every key once, in a random order.

    Args:
        batch: ``B``.
        n: key-value pairs (at most ``symbols // 2``).
        symbols: size of the alphabet, split into keys and values.
        gen: the CPU generator that draws them.

    Returns:
        int64 ``tokens[B, 4n + 1]`` and ``targets[B, 4n + 1]``: the ``n`` values of the
        questions are scored, every other target is :data:`IGNORE`.

    Raises:
        TypeError, ValueError: for a bad count, ``n`` above ``symbols // 2``, or a ``gen``
            that is not a generator.

    Example:
        >>> tokens, targets = recall_batch(1, 2, 8, torch.Generator().manual_seed(0))
        >>> tokens.shape, (targets != IGNORE).sum().item()
        (torch.Size([1, 9]), 2)
    """
    _check(batch, n, symbols, gen)
    half = symbols // 2
    if n > half:
        raise ValueError(f"n must be at most symbols // 2 = {half} (distinct keys), got n={n}")
    keys = torch.rand(batch, half, generator=gen).argsort(dim=1)[:, :n] + 2  # [B, n] distinct
    values = torch.randint(symbols - half, (batch, n), generator=gen) + 2 + half
    ask = torch.rand(batch, n, generator=gen).argsort(dim=1)  # [B, n] the order of questions
    pairs = torch.stack([keys, values], dim=2).flatten(1)  # [B, 2n]: k v k v ...
    asked = torch.stack([keys.gather(1, ask), values.gather(1, ask)], dim=2).flatten(1)
    bos = torch.full((batch, 1), BOS)
    sep = torch.full((batch, 1), SEP)
    tokens, targets = _with_targets(torch.cat([bos, pairs, sep, asked], dim=1), 2 * n + 2)
    targets[:, 2 * n + 1 :: 2] = IGNORE  # the asked keys are given, not predicted
    return tokens, targets


TASKS = {"copy": copy_batch, "recall": recall_batch}
"""Task name -> batch function."""


def sequence_length(task: str, n: int) -> int:
    """``T``, the number of tokens a model reads for ``n`` symbols or pairs of ``task``.

    Example:
        >>> sequence_length("copy", 16), sequence_length("recall", 8)
        (33, 33)
    """
    check_int("n", n, minimum=1)
    if task == "copy":
        return 2 * n + 1
    if task == "recall":
        return 4 * n + 1
    raise ValueError(f"task must be one of {sorted(TASKS)}, got {task!r}")
