"""Train a :class:`~posenc.train.model.TinyDecoder` on a task and measure it at longer lengths.

One run trains one encoding on one task from one seed, at lengths up to ``length``, then
measures its accuracy on the answers at ``1x``, ``2x`` and ``4x`` that length. A grid runs
every encoding on every task from every seed, several runs at a time, with the same
settings for all: the encoding is the only difference between two runs of one seed.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context

import torch
import torch.nn.functional as F

from posenc._validate import (
    check_callable,
    check_int,
    check_int_sequence,
    check_option,
    check_positive_float,
    check_str_sequence,
)
from posenc.train.model import ENCODINGS, TinyDecoder
from posenc.train.tasks import IGNORE, TASKS, sequence_length

__all__ = ["CURVE_STEPS", "MULTIPLES", "Settings", "evaluate", "grid", "train"]

MULTIPLES = (1, 2, 4)
"""The lengths a trained model is measured at, as multiples of its training length."""

CURVE_STEPS = 100
"""The training loss is recorded as its mean over each run of this many steps."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """What every run of a grid shares: the model, the data and the optimiser.

    Attributes:
        steps: optimiser steps (AdamW, one-cycle learning rate).
        batch: sequences per step.
        lr: the peak learning rate.
        width, heads, layers: the model's size (``E``, ``H``, blocks).
        lengths: the training length of each task (symbols to copy, pairs to recall);
            each step draws its length uniformly from ``1 .. length``.
        symbols: the size of each task's alphabet.
        eval_sequences: sequences scored at each length.
        threads: torch threads per run.
        device: where the models train (``"cpu"``, ``"cuda"``); the data is drawn on the CPU.

    Raises:
        TypeError, ValueError: for a count below 1, a learning rate that is not positive, a
            length or alphabet missing for a task, too few symbols for recall's keys, or a
            device torch does not know.

    Example:
        >>> settings = Settings(steps=300)
        >>> settings.length("copy"), settings.alphabet("recall"), settings.batch
        (16, 64, 64)
    """

    steps: int = 1500
    batch: int = 64
    lr: float = 3e-3
    width: int = 64
    heads: int = 4
    layers: int = 2
    lengths: tuple[tuple[str, int], ...] = (("copy", 16), ("recall", 8))
    symbols: tuple[tuple[str, int], ...] = (("copy", 16), ("recall", 64))
    eval_sequences: int = 512
    threads: int = 1
    device: str = "cpu"

    def __post_init__(self):
        for name in ("steps", "batch", "width", "heads", "layers", "eval_sequences", "threads"):
            check_int(name, getattr(self, name), minimum=1)
        check_positive_float("lr", self.lr)
        if not isinstance(self.device, str):
            raise TypeError(f"device must be a str such as 'cpu' or 'cuda', got {self.device!r}")
        try:
            torch.device(self.device)
        except RuntimeError as err:
            raise ValueError(
                f"device must name a torch device, got device={self.device!r}: {err}"
            ) from None
        for name in ("lengths", "symbols"):
            value = getattr(self, name)
            if not (
                isinstance(value, tuple)
                and all(isinstance(p, tuple) and len(p) == 2 for p in value)
                and sorted(t for t, _ in value) == sorted(TASKS)
            ):
                raise ValueError(
                    f"{name} must be a tuple of (task, int) pairs, one per task of "
                    f"{sorted(TASKS)}, got {value!r}"
                )
            for task, count in value:
                check_int(f"{name}[{task!r}]", count, minimum=1)
        for task, length in self.lengths:
            if task == "recall" and length > self.alphabet(task) // 2 // max(MULTIPLES):
                raise ValueError(
                    f"recall needs {max(MULTIPLES)} * length distinct keys, half the "
                    f"symbols: got length {length} and {self.alphabet(task)} symbols"
                )

    def length(self, task: str) -> int:
        """The training length of ``task``."""
        return dict(self.lengths)[check_option("task", task, TASKS)]

    def alphabet(self, task: str) -> int:
        """The number of symbols of ``task``."""
        return dict(self.symbols)[check_option("task", task, TASKS)]


def _check_settings(settings: object) -> Settings:
    if not isinstance(settings, Settings):
        raise TypeError(f"settings must be a Settings, got {type(settings).__name__}")
    return settings


def _model(encoding: str, task: str, seed: int, settings: Settings) -> TinyDecoder:
    length = settings.length(task)
    return TinyDecoder(
        encoding,
        vocab=settings.alphabet(task) + 2,
        width=settings.width,
        heads=settings.heads,
        layers=settings.layers,
        max_positions=sequence_length(task, max(MULTIPLES) * length),
        t5_max_distance=sequence_length(task, length),
        seed=seed,
    )


@torch.no_grad()
def evaluate(model: TinyDecoder, task: str, n: int, sequences: int, seed: int) -> float:
    """The share of answer tokens that ``model`` predicts right on ``sequences`` fresh ones.

    Args:
        model: a trained model.
        task: a name of :data:`~posenc.train.tasks.TASKS`.
        n: symbols or pairs per sequence.
        sequences: how many sequences to score (in batches of 256).
        seed: seed of the sequences (the same for every model measured).

    Returns:
        Accuracy in ``[0, 1]`` (greedy: the most likely token, given the true ones before).

    Raises:
        TypeError, ValueError: for a model that is not a :class:`TinyDecoder`, an unknown
            task, or a count or seed below its minimum.

    Example:
        >>> untrained = TinyDecoder("rope", vocab=18, width=16, heads=2, layers=1)
        >>> 0.0 <= evaluate(untrained, "copy", n=4, sequences=8, seed=0) <= 1.0
        True
    """
    if not isinstance(model, TinyDecoder):
        raise TypeError(f"model must be a TinyDecoder, got {type(model).__name__}")
    task = check_option("task", task, TASKS)
    check_int("n", n, minimum=1)
    check_int("sequences", sequences, minimum=1)
    check_int("seed", seed, minimum=0)
    device = model.head.weight.device
    gen = torch.Generator().manual_seed(seed)
    right = total = 0
    model.eval()
    for start in range(0, sequences, 256):
        tokens, targets = TASKS[task](
            min(256, sequences - start), n, model.head.out_features - 2, gen
        )
        tokens, targets = tokens.to(device), targets.to(device)
        scored = targets != IGNORE
        right += int(((model(tokens).argmax(-1) == targets) & scored).sum())
        total += int(scored.sum())
    return right / total


def train(
    encoding: str, task: str, seed: int, settings: Settings = Settings()
) -> dict[str, object]:
    """Train one model and measure it at every length of :data:`MULTIPLES`.

    Args:
        encoding: one of :data:`~posenc.train.model.ENCODINGS`.
        task: one of :data:`~posenc.train.tasks.TASKS`.
        seed: seeds the initial weights and the training data (the measurement's data is
            the same for every run of a task).
        settings: the shared settings.

    Returns:
        ``{"encoding", "task", "seed", "accuracy", "loss_curve", "seconds"}``: the share of
        answers right at each length (``{"1x": ..., "2x": ..., "4x": ...}``), the training
        loss averaged over each :data:`CURVE_STEPS` steps, and the run's wall-clock time.

    Raises:
        TypeError, ValueError: for an unknown encoding or task, a bad seed, or settings
            that are not :class:`Settings`.

    Example:
        >>> small = Settings(steps=5, batch=4, eval_sequences=8)
        >>> run = train("rope", "copy", 0, small)
        >>> sorted(run["accuracy"]), run["task"]
        (['1x', '2x', '4x'], 'copy')
    """
    check_option("encoding", encoding, ENCODINGS)
    check_int("seed", seed, minimum=0)
    _check_settings(settings)
    length, symbols = settings.length(task), settings.alphabet(task)
    threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)  # as the stored runs; the caller's is given back
    try:
        return _train(encoding, task, seed, settings, length, symbols)
    finally:
        torch.set_num_threads(threads)


def _train(
    encoding: str, task: str, seed: int, settings: Settings, length: int, symbols: int
) -> dict[str, object]:
    start = time.perf_counter()
    model = _model(encoding, task, seed, settings).to(settings.device)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=settings.lr, total_steps=settings.steps, pct_start=0.1
    )
    gen = torch.Generator().manual_seed(seed)
    model.train()
    curve, window = [], []
    for _ in range(settings.steps):
        n = int(torch.randint(1, length + 1, (1,), generator=gen))
        tokens, targets = TASKS[task](settings.batch, n, symbols, gen)
        tokens, targets = tokens.to(settings.device), targets.to(settings.device)
        logits = model(tokens)  # [B, T, V]
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
        window.append(loss.detach())
        if len(window) == CURVE_STEPS:
            curve.append(float(torch.stack(window).mean()))
            window = []
    accuracy = {
        f"{m}x": evaluate(model, task, m * length, settings.eval_sequences, seed=10_000 + m)
        for m in MULTIPLES
    }
    return {
        "encoding": encoding,
        "task": task,
        "seed": seed,
        "accuracy": accuracy,
        "loss_curve": curve,
        "seconds": time.perf_counter() - start,
    }


def _train_args(args: tuple) -> dict[str, object]:
    return train(*args)


def grid(
    encodings: Sequence[str] = ENCODINGS,
    tasks: Sequence[str] = tuple(TASKS),
    seeds: Sequence[int] = (0, 1, 2),
    settings: Settings = Settings(),
    *,
    workers: int | None = None,
    progress: Callable[[int, int, dict], None] | None = None,
) -> list[dict[str, object]]:
    """Every encoding on every task from every seed: one :func:`train` each.

    Args:
        encodings, tasks, seeds: the grid.
        settings: shared by every run.
        workers: runs at a time, each in a process of its own with ``settings.threads``
            threads (default: the CPU count divided by the threads; 1 runs them here, in
            order).
        progress: called after each run as ``progress(done, total, run)``.

    Returns:
        The runs, in grid order (encoding, task, seed), whatever order they finished in.

    Raises:
        TypeError, ValueError: for an unknown encoding or task, a bad seed, an empty list,
            or a ``progress`` that cannot be called.

    Example:
        >>> small = Settings(steps=2, batch=2, eval_sequences=4)
        >>> runs = grid(["nope", "alibi"], ["copy"], [0], small, workers=1)
        >>> [(r["encoding"], r["task"], r["seed"]) for r in runs]
        [('nope', 'copy', 0), ('alibi', 'copy', 0)]
    """
    encodings = check_str_sequence("encodings", encodings)
    tasks = check_str_sequence("tasks", tasks)
    for name, names, options in (("encodings", encodings, ENCODINGS), ("tasks", tasks, TASKS)):
        for i, value in enumerate(names):
            check_option(f"{name}[{i}]", value, options)
    seeds = check_int_sequence("seeds", seeds, minimum=0)
    _check_settings(settings)
    if progress is not None:
        check_callable("progress", progress)
    jobs = [(e, t, s, settings) for e in encodings for t in tasks for s in seeds]
    if workers is None:
        workers = max(1, (os.cpu_count() or 1) // settings.threads)
    check_int("workers", workers, minimum=1)
    results: dict[int, dict] = {}
    if workers == 1:
        for i, job in enumerate(jobs):
            results[i] = train(*job)
            if progress:
                progress(len(results), len(jobs), results[i])
    else:
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(_train_args, job): i for i, job in enumerate(jobs)}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                if progress:
                    progress(len(results), len(jobs), results[futures[future]])
    return [results[i] for i in range(len(jobs))]
