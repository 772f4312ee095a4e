"""Chapter 16's views of the training experiment: examples, spreads, tables, figures, conclusions.

The runs come from :func:`posenc.train.grid` (stored: :func:`posenc.train.stored`); every
number here is computed from them. A *spread* is the mean over the seeds with the lowest
and the highest seed, and a conclusion is stated only where it holds for every seed.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from posenc._validate import check_bool, check_int, check_option
from posenc.display import plots
from posenc.display.table import RANGE_DASH, Table
from posenc.train import ENCODINGS, MULTIPLES, TASKS, Settings
from posenc.train.run import CURVE_STEPS
from posenc.train.tasks import BOS, IGNORE, SEP

__all__ = [
    "LABELS",
    "Conclusion",
    "Conclusions",
    "Spread",
    "accuracy_figure",
    "accuracy_table",
    "conclusions",
    "describe",
    "example",
    "live_check",
    "loss_at",
    "loss_table",
    "spread",
]

LABELS = {
    "nope": "NoPE",
    "learned": "learned",
    "sinusoidal": "sinusoidal",
    "alibi": "ALiBi",
    "t5": "T5 bias",
    "rope": "RoPE",
    "p-rope": "p-RoPE",
}
"""How the book names each encoding of :data:`posenc.train.ENCODINGS`."""


@dataclass(frozen=True)
class Spread:
    """One measurement over seeds.

    Attributes:
        values: one value per seed, in the seeds' order.

    Example:
        >>> s = Spread((0.5, 1.0, 0.9))
        >>> str(s), s.text(1)
        ('0.80 (0.50-1.00)', '0.8 (0.5-1.0)')
    """

    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def text(self, digits: int = 2, *, cell: bool = False) -> str:
        """``mean (low-high)`` with ``digits`` decimals.

        With ``cell`` (a table's cell) the range is joined by :data:`posenc.display.table.RANGE_DASH`,
        which a narrow column never breaks.

        Raises:
            TypeError, ValueError: if ``digits`` is not an int of at least 0 or ``cell`` is
                not a bool.
        """
        check_int("digits", digits, minimum=0)
        dash = RANGE_DASH if check_bool("cell", cell) else "-"
        low, high = f"{self.low:.{digits}f}", f"{self.high:.{digits}f}"
        return f"{self.mean:.{digits}f} ({low}{dash}{high})"

    def __str__(self) -> str:
        return self.text()


def _runs(results: object) -> list[dict]:
    if not isinstance(results, dict) or not isinstance(results.get("runs"), list):
        raise TypeError(
            "results must be the dict that python -m posenc.train writes (with 'runs'), "
            f"got {type(results).__name__} {str(results)[:60]}"
        )
    return results["runs"]


def spread(results: dict, encoding: str, task: str, multiple: int) -> Spread:
    """The accuracy of ``encoding`` on ``task`` at ``multiple`` times the training length.

    Args:
        results: what :func:`posenc.train.grid`'s command writes (``{"runs": [...]}``).
        encoding: one of :data:`posenc.train.ENCODINGS`.
        task: one of :data:`posenc.train.TASKS`.
        multiple: one of :data:`posenc.train.MULTIPLES`.

    Returns:
        The :class:`Spread` over the seeds that were run.

    Raises:
        TypeError: if ``results`` is not such a dict.
        ValueError: for an unknown name or multiple, or no run of that encoding and task.

    Example:
        >>> results = {"runs": [{"encoding": "rope", "task": "copy", "seed": s,
        ...                      "accuracy": {"1x": a}} for s, a in enumerate([0.5, 1.0])]}
        >>> str(spread(results, "rope", "copy", 1))
        '0.75 (0.50-1.00)'
    """
    check_option("encoding", encoding, ENCODINGS)
    check_option("task", task, TASKS)
    check_int("multiple", multiple, minimum=1)
    if multiple not in MULTIPLES:
        raise ValueError(f"multiple must be one of {MULTIPLES}, got multiple={multiple!r}")
    values = tuple(
        run["accuracy"][f"{multiple}x"]
        for run in _runs(results)
        if run["encoding"] == encoding and run["task"] == task
    )
    if not values:
        raise ValueError(f"results hold no run of encoding {encoding!r} on task {task!r}")
    return Spread(values)


def _present(results: dict, key: str, options: Sequence[str]) -> list[str]:
    """The names of ``options`` that the results hold runs of, in the options' order."""
    seen = {run[key] for run in _runs(results)}
    return [name for name in options if name in seen]


def example(task: str, n: int, *, seed: int = 0) -> str:
    """One sequence of ``task`` as a line of text, the scored answers in brackets.

    Symbols are numbered from 0 in the alphabet of :class:`posenc.train.Settings` (16 for
    copying; 64 for recall, keys 0-31 and values 32-63); ``BOS`` is shown as ``^`` and
    ``SEP`` as ``|``.

    Args:
        task: one of :data:`posenc.train.TASKS`.
        n: symbols (copy) or pairs (recall).
        seed: seed of the draw.

    Returns:
        The sequence as text.

    Raises:
        TypeError, ValueError: for an unknown task or a bad ``n`` or ``seed``.

    Example:
        >>> example("copy", 3)
        '^ 12 15 5 | [12] [15] [5]'
    """
    check_option("task", task, TASKS)
    check_int("n", n, minimum=1)
    check_int("seed", seed, minimum=0)
    symbols = Settings().alphabet(task)
    tokens, targets = TASKS[task](1, n, symbols, torch.Generator().manual_seed(seed))
    full = [*tokens[0].tolist(), targets[0, -1].item()]
    scored = [False, *(targets[0] != IGNORE).tolist()]
    names = {BOS: "^", SEP: "|"}
    return " ".join(
        f"[{t - 2}]" if s else names.get(t, str(t - 2)) for t, s in zip(full, scored, strict=True)
    )


def accuracy_table(results: dict, task: str) -> Table:
    """The accuracy of every encoding on ``task`` at each length: mean (lowest-highest seed).

    Args:
        results: what ``python -m posenc.train`` writes.
        task: one of :data:`posenc.train.TASKS`.

    Returns:
        A :class:`posenc.display.table.Table`, one row per encoding that was run.

    Raises:
        TypeError, ValueError: as :func:`spread`.

    Example:
        >>> from posenc import train
        >>> print(accuracy_table(train.stored(), "copy").rows[5][2].replace(RANGE_DASH, "-"))
        0.54 (0.54-0.56)
    """
    check_option("task", task, TASKS)
    seeds = len({run["seed"] for run in _runs(results)})
    rows = [
        [LABELS[e], *(spread(results, e, task, m).text(2, cell=True) for m in MULTIPLES)]
        for e in _present(results, "encoding", ENCODINGS)
    ]
    return Table(
        ["encoding", *(f"{m}x the length" for m in MULTIPLES)],
        rows,
        caption=f"{task.capitalize()}: the share of answers right, mean over {seeds} seeds "
        "(lowest-highest seed in brackets).",
    )


def accuracy_figure(results: dict):
    """Accuracy of every encoding at 1x, 2x and 4x the training length, one panel per task.

    Each marker is the mean over seeds; its bar runs from the lowest seed to the highest.

    Args:
        results: what ``python -m posenc.train`` writes.

    Returns:
        The matplotlib figure.

    Raises:
        TypeError, ValueError: as :func:`spread`.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> from posenc import train
        >>> fig = accuracy_figure(train.stored())
        >>> [ax.get_title() for ax in fig.axes]
        ['copy', 'recall']
        >>> plt.close(fig)
    """
    tasks = _present(results, "task", tuple(TASKS))
    encodings = _present(results, "encoding", ENCODINGS)
    fig, axes = plots.figure(len(tasks), 1, height=2.5 * len(tasks) + 0.6, squeeze=False)
    colors = [plots.COLORS[c] for c in ("blue", "orange", "red")]
    markers = ["o", "s", "^"]
    for ax, task in zip(axes[:, 0], tasks, strict=True):
        for j, (m, color, marker) in enumerate(zip(MULTIPLES, colors, markers, strict=True)):
            xs = [i + (j - 1) * 0.22 for i in range(len(encodings))]
            s = [spread(results, e, task, m) for e in encodings]
            ax.vlines(xs, [v.low for v in s], [v.high for v in s], color=color, linewidth=1.5)
            ax.plot(
                xs,
                [v.mean for v in s],
                marker,
                color=color,
                markersize=5,
                label=f"{m}x the training length",
            )
        ax.set_xticks(range(len(encodings)))
        ax.set_xticklabels([LABELS[e] for e in encodings])
        ax.set_ylim(-0.03, 1.03)
        ax.set_ylabel("answers right")
        ax.set_title(task)
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    return fig


def loss_at(results: dict, encoding: str, task: str, step: int) -> Spread:
    """The training loss of ``encoding`` on ``task`` around ``step``, over the seeds.

    Args:
        results: what ``python -m posenc.train`` writes.
        encoding, task: as :func:`spread`.
        step: a multiple of :data:`posenc.train.run.CURVE_STEPS`: the loss is the mean over
            the ``CURVE_STEPS`` steps that end there.

    Returns:
        The :class:`Spread` of that loss over the seeds.

    Raises:
        TypeError, ValueError: as :func:`spread`, and for a step the runs did not record.

    Example:
        >>> results = {"runs": [{"encoding": "rope", "task": "copy", "seed": 0,
        ...                      "loss_curve": [2.0, 0.5]}]}
        >>> str(loss_at(results, "rope", "copy", 200))
        '0.50 (0.50-0.50)'
    """
    check_option("encoding", encoding, ENCODINGS)
    check_option("task", task, TASKS)
    check_int("step", step, minimum=CURVE_STEPS)
    runs = [r for r in _runs(results) if r["encoding"] == encoding and r["task"] == task]
    if not runs:
        raise ValueError(f"results hold no run of encoding {encoding!r} on task {task!r}")
    index, rest = divmod(step, CURVE_STEPS)
    if rest or any(index > len(r["loss_curve"]) for r in runs):
        raise ValueError(
            f"step must be a multiple of {CURVE_STEPS} that the runs recorded, got step={step}"
        )
    return Spread(tuple(r["loss_curve"][index - 1] for r in runs))


def loss_table(results: dict, step: int = 500) -> Table:
    """The training loss after ``step`` steps, every encoding on every task: how fast each learns.

    Args:
        results: what ``python -m posenc.train`` writes.
        step: as :func:`loss_at`.

    Returns:
        A :class:`posenc.display.table.Table`, one row per encoding.

    Raises:
        TypeError, ValueError: as :func:`loss_at`.

    Example:
        >>> from posenc import train
        >>> loss_table(train.stored(), 500).columns
        ['encoding', 'copy', 'recall']
    """
    tasks = _present(results, "task", tuple(TASKS))
    rows = [
        [LABELS[e], *(loss_at(results, e, t, step).text(3, cell=True) for t in tasks)]
        for e in _present(results, "encoding", ENCODINGS)
    ]
    return Table(
        ["encoding", *tasks],
        rows,
        caption=f"Training loss over steps {step - CURVE_STEPS + 1}-{step} (cross-entropy of "
        "the answers, mean over the seeds, lowest-highest seed in brackets).",
    )


@dataclass(frozen=True)
class Conclusion:
    """A sentence of the chapter, checked on runs.

    Attributes:
        statement: the conclusion as the chapter states it.
        measured: the numbers it rests on, each with its spread over seeds.
        holds: whether the runs bear it out for every seed.
    """

    statement: str
    measured: str
    holds: bool

    def __str__(self) -> str:
        return f"{self.statement}\n  {self.measured} (holds: {'yes' if self.holds else 'no'})"


@dataclass(frozen=True)
class Conclusions:
    """The chapter's conclusions as it shows them: numbered, each with the numbers it rests
    on, as plain text and as HTML that wraps to the column.

    Attributes:
        items: the :class:`Conclusion` objects, in the chapter's order.

    Example:
        >>> found = Conclusions((Conclusion("ALiBi carries", "copy at 4x 0.97", True),))
        >>> print(found)
        1. ALiBi carries
          copy at 4x 0.97 (holds: yes)
        >>> len(found), all(c.holds for c in found)
        (1, True)
    """

    items: tuple[Conclusion, ...]

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __str__(self) -> str:
        return "\n".join(f"{i}. {c}" for i, c in enumerate(self.items, 1))

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        e = html.escape
        rows = "".join(
            f"<li><p><strong>{e(c.statement)}</strong>: holds in every seed: "
            f"{'yes' if c.holds else 'no'}</p><p>{e(c.measured)}</p></li>"
            for c in self.items
        )
        return f'<ol class="posenc-conclusions">{rows}</ol>'


_POSITIONAL = ("learned", "alibi", "t5", "rope", "p-rope")
_ABSOLUTE = ("learned", "sinusoidal")
_RELATIVE = ("alibi", "t5", "rope", "p-rope")


def _learn(r: dict, task: str) -> tuple[bool, str]:
    low = min(spread(r, e, task, 1).low for e in _POSITIONAL)
    nope = spread(r, "nope", task, 1)
    return low >= 0.9 and nope.high < 0.9, (
        f"{task} at 1x: learned, ALiBi, T5, RoPE and p-RoPE {low:.2f} or more; NoPE {nope}"
    )


def _sinusoidal(r: dict, task: str) -> tuple[bool, str]:
    s = spread(r, "sinusoidal", task, 1)
    return (s.low >= 0.9 if task == "copy" else s.high < 0.5), f"{task} at 1x: {s}"


def _absolute_below(r: dict, task: str) -> tuple[bool, str]:
    top = max(spread(r, e, task, 2).high for e in _ABSOLUTE)
    low = min(spread(r, e, task, 2).low for e in _RELATIVE)
    return top < low, f"{task} at 2x: absolute at most {top:.2f}, relative at least {low:.2f}"


def _alibi_best(r: dict, task: str) -> tuple[bool, str]:
    alibi = spread(r, "alibi", task, 4)
    top = max(spread(r, e, task, 4).high for e in ENCODINGS if e != "alibi")
    return alibi.low > top, f"{task} at 4x: ALiBi {alibi}, the others at most {top:.2f}"


def _rope_falls(r: dict, task: str) -> tuple[bool, str]:
    rope = spread(r, "rope", task, 4)
    return rope.high < 0.6, f"{task} at 4x: RoPE {rope}"


def _t5_above_rope(r: dict, task: str) -> tuple[bool, str]:
    t5, rope = spread(r, "t5", task, 4), spread(r, "rope", task, 4)
    return t5.low > rope.high, f"{task} at 4x: T5 {t5}, RoPE {rope}"


def _p_rope_as_rope(r: dict, task: str) -> tuple[bool, str]:
    # alike: the means differ by no more than the seeds of either spread (0.02 at least,
    # where both barely vary)
    pairs = [(spread(r, "p-rope", task, m), spread(r, "rope", task, m)) for m in MULTIPLES]
    gaps = [abs(p.mean - q.mean) for p, q in pairs]
    widths = [max(p.high - p.low, q.high - q.low, 0.02) for p, q in pairs]
    alike = all(g <= w for g, w in zip(gaps, widths, strict=True))
    return alike, f"{task}, means apart (seeds' spread): " + ", ".join(
        f"{m}x {g:.2f} ({w:.2f})" for m, g, w in zip(MULTIPLES, gaps, widths, strict=True)
    )


def _nope_below_rope(r: dict, task: str) -> tuple[bool, str]:
    nope, rope = spread(r, "nope", task, 2), spread(r, "rope", task, 2)
    return nope.high < rope.low, f"{task} at 2x: NoPE {nope}, RoPE {rope}"


def _rope_learns_fastest(r: dict, task: str) -> tuple[bool, str]:
    rope = loss_at(r, "rope", task, 500)
    others = min(loss_at(r, e, task, 500).low for e in ENCODINGS if e not in ("rope", "p-rope"))
    return (
        rope.high < others,
        f"{task}, loss at step 500: RoPE {rope.text(3)}, "
        f"the other encodings but p-RoPE {others:.3f} or more",
    )


_CONCLUSIONS = (
    (
        "At the training length every encoding with position information but the "
        "sinusoidal one answers at least 0.9 of both tasks; NoPE stays below 0.9",
        _learn,
        ("copy", "recall"),
    ),
    (
        "The sinusoidal encoding learns copying (0.9 or more) but not recall (under 0.5)",
        _sinusoidal,
        ("copy", "recall"),
    ),
    (
        "At twice the length both absolute encodings fall below every relative one",
        _absolute_below,
        ("copy", "recall"),
    ),
    (
        "At four times the length ALiBi's worst seed beats every other encoding's best",
        _alibi_best,
        ("copy", "recall"),
    ),
    (
        "At four times the length RoPE answers under 0.6 of either task",
        _rope_falls,
        ("copy", "recall"),
    ),
    ("On copying T5's bias carries further than RoPE", _t5_above_rope, ("copy",)),
    (
        "p-RoPE and RoPE are alike: at every length their means differ by no more than "
        "their spread over seeds",
        _p_rope_as_rope,
        ("copy", "recall"),
    ),
    ("NoPE falls below RoPE at twice the length", _nope_below_rope, ("copy", "recall")),
    ("RoPE learns copying fastest (with p-RoPE)", _rope_learns_fastest, ("copy",)),
)


def conclusions(results: dict, tasks: Sequence[str] | None = None) -> Conclusions:
    """The chapter's conclusions, each checked on ``results`` for every seed and task.

    A conclusion holds when it holds on each of the tasks it speaks of that are checked;
    one about tasks of which none is checked is left out.

    Args:
        results: what ``python -m posenc.train`` writes, with every encoding.
        tasks: the tasks to check them on (default: every task the results hold).

    Returns:
        :class:`Conclusions`: one :class:`Conclusion` per statement, in the chapter's order.

    Raises:
        TypeError, ValueError: as :func:`spread`, or for an unknown task.

    Example:
        >>> from posenc import train
        >>> found = conclusions(train.stored(), tasks=["copy"])
        >>> len(found), all(c.holds for c in found)
        (9, True)
    """
    present = _present(results, "task", tuple(TASKS))
    tasks = present if tasks is None else [check_option("task", t, TASKS) for t in tasks]
    out = []
    for statement, check, about in _CONCLUSIONS:
        found = [check(results, t) for t in about if t in tasks]
        if found:
            out.append(
                Conclusion(
                    statement,
                    "; ".join(text for _, text in found),
                    all(holds for holds, _ in found),
                )
            )
    return Conclusions(tuple(out))


def describe(results: dict) -> str:
    """Where and how long the grid of ``results`` ran, in one line.

    Args:
        results: what ``python -m posenc.train`` writes.

    Returns:
        Two lines: the runs and their times, then the machine, torch and the commit.

    Raises:
        TypeError: if ``results`` is not such a dict.

    Example:
        >>> from posenc import train
        >>> describe(train.stored()).splitlines()[0][:41]
        '42 runs (7 encodings x 2 tasks x 3 seeds)'
    """
    runs = _runs(results)
    machine = results.get("machine", {})
    seconds = [run["seconds"] for run in runs]
    commit = (results.get("commit") or "unknown")[:7]
    counts = " x ".join(
        f"{len({run[key] for run in runs})} {key}s" for key in ("encoding", "task", "seed")
    )
    return (
        f"{len(runs)} runs ({counts}): {results['seconds'] / 60:.1f} min in all, "
        f"{min(seconds):.0f}-{max(seconds):.0f} s a run\n"
        f"on {machine.get('processor', '?')}, {machine.get('cpu_count', '?')} cores, torch "
        f"{machine.get('torch', '?')}, commit {commit}"
    )


def live_check(run: dict, results: dict, *, margin: float = 0.02) -> str:
    """Whether a run trained now lands within the stored runs' spread of its encoding and task.

    Args:
        run: what :func:`posenc.train.train` returned.
        results: the stored grid.
        margin: how far outside the stored lowest-highest range still counts as within
            (accuracies move a little between CPUs and torch builds).

    Returns:
        The stored spread at each length, then the verdict, on two lines; the run's own
        numbers are left out, as they may differ in the last digits from machine to machine.

    Raises:
        TypeError, ValueError: for a run or results of the wrong form, or a negative margin.

    Example:
        >>> results = {"runs": [{"encoding": "rope", "task": "copy", "seed": s,
        ...     "accuracy": {"1x": 1.0, "2x": a, "4x": 0.1}} for s, a in enumerate([0.5, 0.6])]}
        >>> run = {"encoding": "rope", "task": "copy", "accuracy": {"1x": 1.0, "2x": 0.55, "4x": 0.1}}
        >>> print(live_check(run, results))
        stored seeds: 1x 1.00 (1.00-1.00), 2x 0.55 (0.50-0.60), 4x 0.10 (0.10-0.10)
        the run trained now is within 0.02 of that range at every length: yes
    """
    if not isinstance(run, dict) or not {"encoding", "task", "accuracy"} <= set(run):
        raise TypeError(f"run must be what posenc.train.train returns, got {run!r:.80}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin >= 0:
        raise ValueError(f"margin must be a number of at least 0, got margin={margin!r}")
    within, parts = True, []
    for m in MULTIPLES:
        s = spread(results, run["encoding"], run["task"], m)
        value = run["accuracy"][f"{m}x"]
        within &= s.low - margin <= value <= s.high + margin
        parts.append(f"{m}x {s}")
    return (
        f"stored seeds: {', '.join(parts)}\nthe run trained now is within {margin:.2f} of that "
        f"range at every length: {'yes' if within else 'no'}"
    )
