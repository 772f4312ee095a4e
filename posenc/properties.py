"""The five properties of a good position encoding, as executable checks.

The source post asks five things of an encoding. Each becomes a function that takes a
:class:`Scheme` and returns a :class:`Verdict`: whether the property holds, and the
measured number behind the answer.

1. :func:`unique_and_length_independent`: distinct positions get distinct vectors, and
   a position gets the same vector whatever the length of its sequence.
2. :func:`linear_relation`: for each offset ``k`` one fixed matrix ``M_k`` maps the
   encoding of every ``p`` to that of ``p + k``.
3. :func:`encodes_unseen_positions`: positions past the training length get vectors that
   exist, are new, and stay in the range of values seen in training. This is a proxy: it
   asks what a model *could* use, not whether a model trained on short sequences works on
   longer ones (chapter 16 measures that, training a model with each encoding).
4. :func:`deterministic`: the vectors come from a rule, not from a random draw (two
   independent "trainings" give the same table).
5. :func:`extends_to_n_dimensions`: the axial 2-D version (half the features encode the
   row, half the column) still has properties 1 and 2 on a grid.

The encodings are float32 and the measurements float64. Every measured number is relative,
so that it means the same whatever the scale of an encoding: distances are divided by the
mean norm of the encoding's vectors, residuals by the norm of what is fitted, value ranges
by the range seen in training. The printed evidence is rounded to one significant digit,
and anything below ``1e-6`` (float32 round-off) counts and prints as 0, so tables come out
the same on every machine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from posenc import encodings
from posenc._validate import (
    check_bool,
    check_dict,
    check_even_dim,
    check_int,
    check_int_sequence,
)

__all__ = [
    "PROPERTIES",
    "Scheme",
    "Verdict",
    "absolute_schemes",
    "check_all",
    "deterministic",
    "encodes_unseen_positions",
    "extends_to_n_dimensions",
    "format_table",
    "linear_relation",
    "table_cells",
    "unique_and_length_independent",
]

ZERO = 1e-6  # below this a measured difference is float32 round-off, not a difference
TRAIN_LENGTH = 64  # the "training" sequence length of the checks


@dataclass(frozen=True)
class Scheme:
    """An absolute encoding scheme, as the checks see it.

    Attributes:
        name: short name for tables.
        encode: ``encode(positions, dim, length, seed) -> [T, dim]``; ``positions`` is an
            int64 tensor ``[T]``, ``length`` the length of the sequence they belong to,
            ``seed`` the randomness of training (a rule-based scheme ignores it). It may
            raise ``ValueError`` for positions it cannot encode.
    """

    name: str
    encode: Callable[[torch.Tensor, int, int, int], torch.Tensor]

    def __call__(self, positions, dim: int, length: int, seed: int = 0) -> torch.Tensor:
        positions = torch.as_tensor(positions, dtype=torch.int64)
        return self.encode(positions, dim, length, seed).to(torch.float64)


@dataclass(frozen=True)
class Verdict:
    """The answer of one check: does the property hold, and the number that says so.

    Attributes:
        holds: the verdict.
        evidence: the measured number (its meaning is in ``measure``).
        measure: what ``evidence`` is, e.g. ``"max change across lengths"``.
    """

    holds: bool
    evidence: float
    measure: str

    def __str__(self) -> str:
        answer = "yes" if self.holds else "no"
        if self.evidence == float("inf"):  # no number to give: the measure says why
            return f"{answer} ({self.measure})"
        return f"{answer} ({self.measure} {_fmt(self.evidence)})"


def _fmt(x: float) -> str:
    if x != x:  # NaN
        return "nan"
    if x == float("inf"):
        return "inf"
    return "0" if abs(x) < ZERO else f"{x:.1g}"


def _check_scheme(scheme: object) -> Scheme:
    if not isinstance(scheme, Scheme):
        raise TypeError(f"scheme must be a posenc.properties.Scheme, got {type(scheme).__name__}")
    return scheme


def _mean_norm(rows: torch.Tensor) -> float:
    """Mean norm of the rows of ``[T, D]``: the scale that distances are divided by."""
    return rows.norm(dim=-1).mean().clamp_min(1e-300).item()


def _min_distance(rows: torch.Tensor) -> float:
    """Smallest distance between two different rows of ``[T, D]``."""
    dist = torch.cdist(rows, rows, compute_mode="donot_use_mm_for_euclid_dist")  # [T, T]
    dist.fill_diagonal_(float("inf"))
    return dist.min().item()


def unique_and_length_independent(
    scheme: Scheme, dim: int = 16, lengths: Sequence[int] = (8, 32, 64)
) -> Verdict:
    """Property 1: unique vectors, the same for a position in sequences of any length.

    Args:
        scheme: the encoding.
        dim: features ``D`` to encode with.
        lengths: sequence lengths to compare (each at least 2).

    Returns:
        The verdict. Evidence, relative to the mean norm of the vectors of the longest
        sequence: the largest distance between one position's vectors at two of the
        ``lengths`` if that is not zero, else the smallest distance between two positions.

    Raises:
        TypeError: if ``scheme`` is not a :class:`Scheme`.
        ValueError: if ``dim`` or a length is invalid.

    Example:
        >>> str(unique_and_length_independent(absolute_schemes()["sinusoidal"]))
        'yes (min distance between positions / mean norm 0.4)'
    """
    _check_scheme(scheme)
    check_int("dim", dim, minimum=1)
    lengths = check_int_sequence("lengths", lengths, minimum=2, item="length")
    shortest = min(lengths)
    tables = [scheme(torch.arange(n), dim, n) for n in lengths]
    scale = _mean_norm(tables[lengths.index(max(lengths))])
    change = max((t[:shortest] - tables[0][:shortest]).norm(dim=-1).max().item() for t in tables)
    if change / scale >= ZERO:
        return Verdict(False, change / scale, "max change across lengths / mean norm")
    gap = min(_min_distance(t) for t in tables) / scale
    return Verdict(gap >= ZERO, gap, "min distance between positions / mean norm")


def _fit_residual(x: torch.Tensor, y: torch.Tensor) -> float:
    """Relative residual of the best linear map from the rows of ``x`` to those of ``y``."""
    m = torch.linalg.lstsq(x, y, driver="gelsd").solution
    return ((x @ m - y).norm() / y.norm().clamp_min(1e-300)).item()


def linear_relation(
    scheme: Scheme,
    dim: int = 16,
    offsets: Sequence[int] = (1, 3, 10),
    num_positions: int = TRAIN_LENGTH,
) -> Verdict:
    """Property 2: one fixed matrix ``M_k`` takes ``E(p)`` to ``E(p + k)`` for every ``p``.

    ``M_k`` is fitted by least squares over ``p = 0 .. num_positions - k - 1``. There are
    more positions than features, so a scheme without such a matrix leaves a residual.

    Args:
        scheme: the encoding.
        dim: features ``D``; keep it well below ``num_positions``.
        offsets: the shifts ``k`` to try (positive).
        num_positions: positions available, all in one sequence of that length.

    Returns:
        The verdict. Evidence: the largest relative residual of the fits,
        ``||E(p) M_k - E(p + k)|| / ||E(p + k)||`` over all ``p`` (Frobenius norms).

    Raises:
        TypeError: if ``scheme`` is not a :class:`Scheme`.
        ValueError: if an offset is not positive or leaves no more pairs than features.

    Example:
        >>> str(linear_relation(absolute_schemes()["integer"]))
        'no (max residual of best linear fit 0.1)'
    """
    _check_scheme(scheme)
    check_int("dim", dim, minimum=1)
    check_int("num_positions", num_positions, minimum=2)
    offsets = check_int_sequence("offsets", offsets, minimum=1, item="offset")
    table = scheme(torch.arange(num_positions), dim, num_positions)  # [T, D]
    worst = 0.0
    for k in offsets:
        if num_positions - k <= dim:
            raise ValueError(
                f"offset {k} leaves {num_positions - k} pairs, need more than dim={dim}"
            )
        worst = max(worst, _fit_residual(table[:-k], table[k:]))
    return Verdict(worst < 1e-6, worst, "max residual of best linear fit")


def encodes_unseen_positions(
    scheme: Scheme, dim: int = 16, train_length: int = TRAIN_LENGTH, factor: int = 4
) -> Verdict:
    """Property 3: positions past the training length get usable vectors.

    Encodes a sequence ``factor`` times longer than ``train_length``. Holds when every new
    position has a finite vector, the values stay within the range seen on training
    positions, and no new vector repeats another new one or one seen in training. A proxy
    for generalising: a scheme can pass and the model using it still fail on longer input.

    Args:
        scheme: the encoding.
        dim: features ``D``.
        train_length: positions seen in training.
        factor: how many times longer the test sequence is (at least 2).

    Returns:
        The verdict. Evidence: infinite when the scheme cannot encode the new positions;
        else the smallest distance from a new vector to any other, divided by the mean norm
        of the training vectors, if that is zero; else the largest absolute value on new
        positions divided by the largest in training.

    Raises:
        TypeError: if ``scheme`` is not a :class:`Scheme`.
        ValueError: for a non-positive ``dim``/``train_length`` or ``factor < 2``.

    Example:
        >>> str(encodes_unseen_positions(absolute_schemes()["learned"]))
        'no (cannot encode unseen positions)'
    """
    _check_scheme(scheme)
    check_int("dim", dim, minimum=1)
    check_int("train_length", train_length, minimum=2)
    check_int("factor", factor, minimum=2)
    seen = scheme(torch.arange(train_length), dim, train_length)
    try:
        longer = scheme(torch.arange(factor * train_length), dim, factor * train_length)
    except ValueError:
        return Verdict(False, float("inf"), "cannot encode unseen positions")
    new = longer[train_length:]
    if not bool(torch.isfinite(new).all()):
        return Verdict(False, float("inf"), "cannot encode unseen positions")
    # new positions must not reuse a vector that meant another position in training
    gap = min(
        torch.cdist(new, seen, compute_mode="donot_use_mm_for_euclid_dist").min().item(),
        _min_distance(new),
    ) / _mean_norm(seen)
    if gap < ZERO:
        return Verdict(False, gap, "min distance of unseen positions to others / mean norm")
    ratio = (new.abs().max() / seen.abs().max().clamp_min(1e-300)).item()
    return Verdict(ratio <= 1 + ZERO, ratio, "value range on unseen positions / trained")


def deterministic(scheme: Scheme, dim: int = 16, num_positions: int = TRAIN_LENGTH) -> Verdict:
    """Property 4: the vectors come from a rule, the same every time.

    Compares the tables of two independent trainings (seeds 0 and 1).

    Args:
        scheme: the encoding.
        dim: features ``D``.
        num_positions: positions to compare.

    Returns:
        The verdict. Evidence: the largest distance between one position's vectors in the
        two tables, divided by their mean norm.

    Raises:
        TypeError: if ``scheme`` is not a :class:`Scheme`.
        ValueError: for a non-positive ``dim`` or ``num_positions``.

    Example:
        >>> str(deterministic(absolute_schemes()["binary"]))
        'yes (max difference between two trainings / mean norm 0)'
    """
    _check_scheme(scheme)
    check_int("dim", dim, minimum=1)
    check_int("num_positions", num_positions, minimum=1)
    positions = torch.arange(num_positions)
    a = scheme(positions, dim, num_positions, 0)
    b = scheme(positions, dim, num_positions, 1)
    diff = (a - b).norm(dim=-1).max().item() / _mean_norm(a)
    return Verdict(diff < ZERO, diff, "max difference between two trainings / mean norm")


def extends_to_n_dimensions(
    scheme: Scheme, dim: int = 16, side: int = 12, shift: tuple[int, int] = (2, 3)
) -> Verdict:
    """Property 5: the axial 2-D encoding keeps properties 1 and 2 on a grid.

    Cell ``(x, y)`` of a ``side x side`` grid gets ``[E(x), E(y)]``, each half ``dim/2``
    features. Holds when all cells get distinct vectors and one fixed matrix takes every
    cell to the cell ``shift`` away.

    Args:
        scheme: the encoding.
        dim: features ``D`` (even: half per axis).
        side: grid side (``side**2`` cells).
        shift: the 2-D offset ``(dx, dy)``, both non-negative, not both zero.

    Returns:
        The verdict. Evidence: the relative residual of the best linear fit of the 2-D shift,
        as in :func:`linear_relation` (infinite if two cells share a vector).

    Raises:
        TypeError: if ``scheme`` is not a :class:`Scheme`.
        ValueError: for an odd ``dim``, a small ``side`` or a bad ``shift``.

    Example:
        >>> str(extends_to_n_dimensions(absolute_schemes()["sinusoidal"]))
        'yes (residual of the 2-D shift fit 0)'
    """
    _check_scheme(scheme)
    check_even_dim("dim", dim)
    check_int("side", side, minimum=2)
    shift = check_int_sequence("shift", shift, minimum=0, min_length=2)
    if len(shift) != 2:
        raise ValueError(f"shift must be a 2-D offset (dx, dy), got {shift!r}")
    dx, dy = shift
    if dx == dy == 0 or max(dx, dy) >= side:
        raise ValueError(f"shift must be non-zero and smaller than side={side}, got {shift}")
    axis = scheme(torch.arange(side), dim // 2, side)  # [side, D/2]
    grid = torch.cat(
        [axis[:, None, :].expand(side, side, -1), axis[None, :, :].expand(side, side, -1)], -1
    )
    cells = grid.reshape(side * side, dim)  # [side*side, D], cell (x, y) at x*side + y
    if _min_distance(cells) < ZERO:
        return Verdict(False, float("inf"), "cells share one vector: no 2-D shift fit")
    src = grid[: side - dx, : side - dy].reshape(-1, dim)
    dst = grid[dx:, dy:].reshape(-1, dim)
    residual = _fit_residual(src, dst)
    return Verdict(residual < 1e-6, residual, "residual of the 2-D shift fit")


PROPERTIES: dict[str, Callable[[Scheme], Verdict]] = {
    "1 unique": unique_and_length_independent,
    "2 linear shift": linear_relation,
    "3 unseen in range": encodes_unseen_positions,
    "4 rule": deterministic,
    "5 axial 2-D": extends_to_n_dimensions,
}
"""The five checks, keyed by a short label, in the source post's order."""


def check_all(scheme: Scheme) -> dict[str, Verdict]:
    """Run the five checks on ``scheme`` with their default settings.

    Returns:
        ``{label: Verdict}`` in the order of :data:`PROPERTIES`.

    Raises:
        TypeError: if ``scheme`` is not a :class:`Scheme`.
    """
    _check_scheme(scheme)
    return {label: check(scheme) for label, check in PROPERTIES.items()}


def format_table(results: dict[str, dict[str, Verdict]], *, evidence: bool = False) -> str:
    """A plain-text table: one row per scheme, one column per property.

    Args:
        results: ``{scheme name: check_all(scheme)}``.
        evidence: print each verdict's measured number next to it.

    Returns:
        The table as a string (fixed-width columns).

    Raises:
        TypeError: if ``results`` is not a dict or ``evidence`` not a bool.
        ValueError: if ``results`` is empty or the schemes were checked on different
            properties.

    Example:
        >>> s = absolute_schemes()
        >>> print(format_table({"binary": check_all(s["binary"])}))
        scheme  1 unique  2 linear shift  3 unseen in range  4 rule  5 axial 2-D
        binary  ✓         ✗               ✓                  ✓       ✗
    """
    header, rows = table_cells(results, evidence=evidence)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    )


def table_cells(
    results: dict[str, dict[str, Verdict]], *, evidence: bool = False
) -> tuple[list[str], list[list[str]]]:
    """The heading and rows of :func:`format_table`, as strings, for a table of one's own.

    ``posenc.display.table.Table(*table_cells(results), caption=...)`` shows them as a captioned
    HTML table in a notebook.

    Args:
        results: ``{scheme name: check_all(scheme)}``.
        evidence: put each verdict's measured number next to it.

    Returns:
        ``(heading, rows)``: ``["scheme", *property labels]``, and one row per scheme, its
        name then ``"✓"`` or ``"✗"`` per property (with ``evidence``, followed by the number,
        rounded to one significant digit).

    Raises:
        TypeError: if ``results`` is not a dict or ``evidence`` not a bool.
        ValueError: if ``results`` is empty or the schemes were checked on different
            properties.

    Example:
        >>> s = absolute_schemes()
        >>> heading, rows = table_cells({"binary": check_all(s["binary"])}, evidence=True)
        >>> heading[1], rows[0][:3]
        ('1 unique', ['binary', '✓ 0.6', '✗ 0.6'])
    """
    if isinstance(results, dict) and not results:
        raise ValueError("results must not be empty, got {}")
    check_dict("results", results)
    check_bool("evidence", evidence)
    labels = list(next(iter(results.values())))
    if any(list(r) != labels for r in results.values()):
        raise ValueError("every scheme must be checked on the same properties")
    rows = [
        [
            name,
            *(
                ("✓" if v.holds else "✗") + (f" {_fmt(v.evidence)}" if evidence else "")
                for v in verdicts.values()
            ),
        ]
        for name, verdicts in results.items()
    ]
    return ["scheme", *labels], rows


def _learned(positions: torch.Tensor, dim: int, length: int, seed: int) -> torch.Tensor:
    return encodings.LearnedPositionalEmbedding(TRAIN_LENGTH, dim, seed=seed)(positions).detach()


def absolute_schemes() -> dict[str, Scheme]:
    """The absolute schemes of Part II, ready for the checks.

    - ``integer``: the position in every feature.
    - ``integer / length``: divided by the sequence length.
    - ``binary``: the bits of the position, ``dim`` of them.
    - ``sinusoidal``: Vaswani et al., base 10000.
    - ``learned``: a table of ``TRAIN_LENGTH`` (64) rows drawn at random, one draw per seed.

    Returns:
        ``{name: Scheme}``.
    """
    return {
        "integer": Scheme("integer", lambda p, d, n, s: encodings.integer_encoding(p, d)),
        "integer / length": Scheme(
            "integer / length", lambda p, d, n, s: encodings.length_normalized_encoding(p, d, n)
        ),
        "binary": Scheme("binary", lambda p, d, n, s: encodings.binary_encoding(p, d)),
        "sinusoidal": Scheme(
            "sinusoidal", lambda p, d, n, s: encodings.sinusoidal_encoding(int(p.max()) + 1, d)[p]
        ),
        "learned": Scheme("learned", _learned),
    }
