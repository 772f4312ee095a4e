"""RoPE's frequencies and what they mean for length: the code of chapter 12.

Pair ``i`` of a RoPE head turns by ``theta_i = base**(-2i/D)`` per position, so it comes
back to where it started every ``2 pi / theta_i`` positions. This module measures what that
implies:

- periods: :func:`periods`, :func:`longest_period`, :func:`period_table`,
  :func:`pair_cosines_figure`;
- the score as a function of distance and RoFormer's long-term-decay bound:
  :func:`scores_at_distances`, :func:`pair_scores`, :func:`abel_partial_sums`,
  :func:`relative_upper_bound`, :func:`decay_bound`, :func:`decay_figure`;
- whether positions repeat: :func:`encoding_distance`, :func:`nearest_return`;
- angles never seen in training: :func:`angle_overshoot`, :func:`unseen_angles_figure`;
- context extension: :func:`scaled_frequencies`, :func:`scaling_table`,
  :func:`scaling_figure`;
- p-RoPE against partial rotary: :func:`p_rope`, :func:`partial_rotary`,
  :func:`unrotated_features`, :func:`format_ranges`, :func:`rotating_periods_figure`;
- RoPE and the relative methods as schemes for the property checks of chapter 2:
  :func:`rope_scheme`, :func:`relative_schemes`.

Scores are written in complex form: pair ``i`` of a vector is the complex number
``x[2i] + 1j * x[2i+1]`` (the interleaved layout), RoPE multiplies it by
``exp(1j * p * theta_i)``, and the score of a query ``m`` positions after a key is
``Re(sum_i h_i exp(1j * m * theta_i))`` with ``h_i = q_i * conj(k_i)``.

Shapes: ``N`` pairs of random vectors, ``M`` distances, ``D`` features (``D/2`` pairs),
``T`` positions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from posenc import relative
from posenc._validate import (
    check_base,
    check_callable,
    check_even_dim,
    check_int,
    check_int_sequence,
    check_layout,
    check_positions,
    check_positive_float,
    check_sequence,
    check_tensor,
    same_device,
)
from posenc.display import plots
from posenc.display.table import Table
from posenc.properties import Scheme
from posenc.rope import apply_rope, rope_inv_freq
from posenc.scaling import (
    llama3_inv_freq,
    ntk_aware_inv_freq,
    p_rope_inv_freq,
    position_interpolation_inv_freq,
    yarn_inv_freq,
)

__all__ = [
    "abel_partial_sums",
    "angle_overshoot",
    "decay_bound",
    "decay_figure",
    "encoding_distance",
    "format_ranges",
    "longest_period",
    "nearest_return",
    "p_rope",
    "pair_cosines_figure",
    "pair_scores",
    "partial_rotary",
    "period_table",
    "periods",
    "relative_schemes",
    "relative_upper_bound",
    "rope_scheme",
    "rotating_periods_figure",
    "scaled_frequencies",
    "scaling_figure",
    "scaling_table",
    "scores_at_distances",
    "unrotated_features",
    "unseen_angles_figure",
]

TWO_PI = 2 * math.pi


# --- periods -------------------------------------------------------------------------------


def _check_freq(name: str, f: object) -> torch.Tensor:
    """A 1-D, non-empty, finite, non-negative frequency tensor, as float64."""
    check_tensor(name, f, min_dim=1)
    if f.dim() != 1 or f.numel() == 0:
        raise ValueError(f"{name} must be 1-D and non-empty ([D/2]), got shape {tuple(f.shape)}")
    if not bool(torch.isfinite(f).all()) or bool((f < 0).any()):
        raise ValueError(f"{name} must be finite and non-negative")
    return f.to(torch.float64)


def periods(inv_freq: torch.Tensor) -> torch.Tensor:
    """Positions per full turn of each pair: ``2 pi / theta_i`` (``inf`` for a still pair).

    Args:
        inv_freq: frequencies ``[D/2]`` in radians per position.

    Returns:
        float64 ``[D/2]``.

    Raises:
        TypeError: if ``inv_freq`` is not a floating tensor.
        ValueError: if it is not 1-D, is empty, or has negative or non-finite entries.

    Example:
        >>> periods(torch.tensor([1.0, 0.0])).tolist()
        [6.283185307179586, inf]
    """
    f = _check_freq("inv_freq", inv_freq)
    return torch.where(f > 0, TWO_PI / f, torch.inf)


def longest_period(dim: int, base: float = 10000.0) -> float:
    """The period of RoPE's slowest pair: ``2 pi * base**((D-2)/D)``.

    The exponent ``2i/D`` stops at ``(D-2)/D``, so this is always below ``2 pi * base``.

    Args:
        dim: head features ``D`` (even).
        base: frequency base.

    Returns:
        The period in positions.

    Raises:
        TypeError, ValueError: for a bad ``dim`` or ``base``.

    Example:
        >>> round(longest_period(64))
        47117
    """
    check_even_dim("dim", dim)
    base = check_base("base", base)
    return TWO_PI * base ** ((dim - 2) / dim)


def _period_text(period: float) -> str:
    """A period in positions: 3 significant digits below 1,000, whole positions up to a
    million, then millions to 3 significant digits."""
    if period < 1000:
        return f"{period:.3g}"
    if period < 1e6:
        return f"{round(period):,}"
    return f"{period / 1e6:.3g} million"


def period_table(
    dim: int,
    bases: Sequence[float] = (10000.0, 500000.0),
    pairs: Sequence[int] | None = None,
) -> Table:
    """The period ``2 pi / theta_i`` of the pairs of a ``D``-feature head, for several bases.

    Args:
        dim: head features ``D`` (even).
        bases: the bases to compare, one column each.
        pairs: the pair indices to list, each in ``0 .. D/2 - 1`` (default: every pair).

    Returns:
        A :class:`posenc.display.table.Table`, one row per pair ``i``, one period per base, in
        positions: 3 significant digits below 1,000, whole positions up to a million, then
        millions.

    Raises:
        TypeError, ValueError: for a bad ``dim`` or base, no bases, or a pair out of range.

    Example:
        >>> print(period_table(4, bases=(100.0, 10000.0)))
        Positions that pair i of a D = 4 head takes to turn once: 2π/θ with θ = base^(-2i/D) radians per position.
        pair i  period, base 100 (positions)  period, base 10,000 (positions)
             0                          6.28                             6.28
             1                          62.8                              628
    """
    check_even_dim("dim", dim)
    bases = check_sequence("bases", bases)
    cols = [check_base(f"bases[{i}]", b) for i, b in enumerate(bases)]
    if pairs is None:
        pairs = range(dim // 2)
    pairs = check_int_sequence("pairs", pairs, minimum=0)
    for i in pairs:
        if i >= dim // 2:
            raise ValueError(f"pairs must be below D/2 = {dim // 2}, got pair {i}")
    header = ["pair i"] + [f"period, base {b:,g} (positions)" for b in cols]
    tables = [rope_inv_freq(dim, b) for b in cols]
    rows = [[i] + [_period_text(TWO_PI / f[i].item()) for f in tables] for i in pairs]
    which = "" if len(pairs) == dim // 2 else f" (pairs {format_ranges(sorted(set(pairs)))})"
    caption = (
        f"Positions that pair i of a D = {dim} head takes to turn once{which}: 2π/θ with "
        "θ = base^(-2i/D) radians per position."
    )
    return Table(header, rows, caption=caption, align=["right"] * len(header))


def pair_cosines_figure(
    dim: int = 64,
    base: float = 10000.0,
    pairs: Sequence[int] = (0, 8, 16, 24, 31),
    max_distance: int = 100_000,
):
    """``cos(m theta_i)`` against distance ``m`` (log axis) for a few pairs.

    Each curve is what pair ``i`` of an aligned query and key adds to the score, divided by
    ``|q_i| |k_i|``: fast pairs swing within a few tokens, slow pairs stay near 1 for
    thousands.

    Args:
        dim: head features ``D``.
        base: frequency base.
        pairs: pair indices to draw (each in ``0 .. D/2 - 1``).
        max_distance: the right end of the axis.

    Returns:
        The figure.

    Raises:
        TypeError, ValueError: for bad arguments or a pair out of range.

    Example:
        >>> fig = pair_cosines_figure(16, pairs=(0, 7), max_distance=1000)
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    check_int("max_distance", max_distance, minimum=10)
    f = rope_inv_freq(dim, base)
    for i in check_int_sequence("pairs", pairs, minimum=0):
        if i >= dim // 2:
            raise ValueError(f"pairs must be below D/2 = {dim // 2}, got pair {i}")
    fig, ax = plots.figure(height=3.4)
    for i in pairs:
        # each curve stops after three turns: past that it only repeats
        end = min(float(max_distance), 3 * TWO_PI / f[i].item())
        m = torch.logspace(0, math.log10(end), 600, dtype=torch.float64)
        ax.plot(m.numpy(), torch.cos(m * f[i]).numpy(), lw=1.4, label=f"pair {i}")
    ax.set_xscale("log")
    ax.set_xlim(1, max_distance)
    ax.set_xlabel("distance m (positions)")
    ax.set_ylabel(r"$\cos(m\,\theta_i)$")
    ax.set_title(f"D = {dim}, base {base:g}, each pair drawn for three turns")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncols=len(pairs), frameon=False)
    return fig


def format_ranges(indices: Sequence[int]) -> str:
    """Sorted integers as compact ranges: ``[0, 1, 2, 5]`` -> ``"0-2, 5"``.

    Args:
        indices: integers.

    Returns:
        The ranges, comma-separated (``"none"`` when empty).

    Raises:
        TypeError: if an entry is not an int.

    Example:
        >>> format_ranges([8, 9, 10, 11, 40, 41, 63])
        '8-11, 40-41, 63'
    """
    values = sorted(set(check_int_sequence("indices", indices, min_length=0)))
    if not values:
        return "none"
    parts, start = [], values[0]
    for prev, cur in zip(values, [*values[1:], None], strict=True):
        if cur is None or cur != prev + 1:
            parts.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = cur
    return ", ".join(parts)


# --- scores against distance and the decay bound ---------------------------------------------


def _check_vectors(q: object, k: object) -> tuple[torch.Tensor, torch.Tensor]:
    for name, v in (("q", q), ("k", k)):
        check_tensor(name, v, min_dim=1)
    if q.shape != k.shape or q.dim() > 2:
        raise ValueError(
            f"q and k must both be [D] or [N, D] of the same shape, got {tuple(q.shape)} "
            f"and {tuple(k.shape)}"
        )
    if q.shape[-1] == 0 or q.shape[-1] % 2:
        raise ValueError(f"head dimension must be even and positive, got D={q.shape[-1]}")
    return q.to(torch.float64), k.to(torch.float64)


def _check_distances(distances: object) -> torch.Tensor:
    return check_positions("distances", distances, nonnegative=False).to(torch.float64)


def _complex_pairs(x: torch.Tensor) -> torch.Tensor:
    """``[..., D]`` real -> ``[..., D/2]`` complex, pair ``i`` = ``x[2i] + 1j x[2i+1]``."""
    return torch.complex(x[..., 0::2], x[..., 1::2])


def _phases(distances: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """``exp(1j * m * theta_i)``: ``[M, D/2]`` complex128."""
    angles = distances[:, None] * inv_freq[None, :]  # [M, D/2] float64
    return torch.polar(torch.ones_like(angles), angles)


def _inv_freq_for(dim: int, inv_freq: torch.Tensor | None, base: float) -> torch.Tensor:
    if inv_freq is None:
        return rope_inv_freq(dim, base)
    f = _check_freq("inv_freq", inv_freq)
    if f.numel() != dim // 2:
        raise ValueError(f"inv_freq must have D/2 = {dim // 2} entries, got {f.numel()}")
    return f


@same_device(copied=("distances", "inv_freq"))
def scores_at_distances(
    q: torch.Tensor,
    k: torch.Tensor,
    distances,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
) -> torch.Tensor:
    """RoPE scores of a query ``m`` positions after its key, for every ``m`` in ``distances``.

    ``score[n, j] = <apply_rope(q[n], m_j), apply_rope(k[n], 0)>`` (interleaved layout),
    computed in float64 as ``Re(sum_i h_i exp(1j m theta_i))``.

    Args:
        q, k: ``[D]`` or ``[N, D]`` (same shape).
        distances: integer distances ``[M]`` (any sign).
        base: frequency base, used when ``inv_freq`` is None.
        inv_freq: frequencies ``[D/2]``.

    Returns:
        float64 ``[M]`` (one pair) or ``[N, M]``.

    Raises:
        TypeError, ValueError: for bad vectors, distances or frequencies.

    Example:
        >>> q, k = torch.randn(2, 8, dtype=torch.float64)
        >>> direct = apply_rope(q[None], [5]) @ k
        >>> torch.allclose(scores_at_distances(q, k, [5]), direct)
        True
    """
    q, k = _check_vectors(q, k)
    m = _check_distances(distances)
    f = _inv_freq_for(q.shape[-1], inv_freq, base)
    h = _complex_pairs(q) * _complex_pairs(k).conj()  # [..., D/2]
    return (h @ _phases(m.to(h.device), f.to(h.device)).T).real  # [..., M]


@same_device(copied=("distances", "inv_freq"))
def pair_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    distances,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
) -> torch.Tensor:
    """What each pair adds to :func:`scores_at_distances`, from the rotated vectors.

    Uses :func:`posenc.rope.apply_rope` itself: pair ``i`` contributes
    ``R(m) q[2i:2i+2] . k[2i:2i+2]``; the contributions add up to the score.

    Args:
        q, k: one vector each, ``[D]``.
        distances: integer distances ``[M]``.
        base: frequency base, used when ``inv_freq`` is None.
        inv_freq: frequencies ``[D/2]``.

    Returns:
        float64 ``[M, D/2]``.

    Raises:
        TypeError, ValueError: for bad vectors, distances or frequencies.

    Example:
        >>> q, k = torch.randn(2, 8, dtype=torch.float64)
        >>> torch.allclose(pair_scores(q, k, [0, 3]).sum(-1), scores_at_distances(q, k, [0, 3]))
        True
    """
    q, k = _check_vectors(q, k)
    if q.dim() != 1:
        raise ValueError(f"q and k must be single vectors [D], got shape {tuple(q.shape)}")
    m = check_positions("distances", distances, nonnegative=False)
    f = _inv_freq_for(q.shape[-1], inv_freq, base)
    rotated = apply_rope(q.expand(m.numel(), -1), m, inv_freq=f)  # [M, D]
    return (rotated * k).reshape(m.numel(), -1, 2).sum(-1)  # [M, D/2]


@same_device(copied=("distances",))
def abel_partial_sums(distances, inv_freq: torch.Tensor) -> torch.Tensor:
    """RoFormer's partial sums ``S_j = sum_{i<j} exp(1j m theta_i)``, ``j = 1 .. D/2``.

    Args:
        distances: integer distances ``m``, ``[M]``.
        inv_freq: frequencies ``[D/2]``.

    Returns:
        complex128 ``[M, D/2]`` on ``inv_freq``'s device; column ``j - 1`` is ``S_j``.

    Raises:
        TypeError, ValueError: for bad distances or frequencies.

    Example:
        >>> abel_partial_sums([0], torch.tensor([1.0, 0.5])).real.tolist()
        [[1.0, 2.0]]
    """
    f = _check_freq("inv_freq", inv_freq)
    m = _check_distances(distances).to(f.device)
    return torch.cumsum(_phases(m, f), dim=-1)


def relative_upper_bound(distances, inv_freq: torch.Tensor) -> torch.Tensor:
    """RoFormer's relative upper bound ``(1 / (D/2)) sum_j |S_j|`` at each distance.

    The decay bound of :func:`decay_bound` is ``max_i |h_(i+1) - h_i|`` times
    ``sum_j |S_j|``; this is the second factor, averaged over the ``D/2`` sums, the curve
    RoFormer plots against relative distance. It equals ``(D/2 + 1) / 2`` at distance 0.

    Args:
        distances: integer distances ``[M]``.
        inv_freq: frequencies ``[D/2]``.

    Returns:
        float64 ``[M]``.

    Raises:
        TypeError, ValueError: for bad distances or frequencies.

    Example:
        >>> relative_upper_bound([0], rope_inv_freq(128)).item()
        32.5
    """
    return abel_partial_sums(distances, inv_freq).abs().mean(dim=-1)


@same_device(copied=("distances", "inv_freq"))
def decay_bound(
    q: torch.Tensor,
    k: torch.Tensor,
    distances,
    *,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
) -> torch.Tensor:
    """RoFormer's long-term-decay bound on ``|score|`` for given ``q`` and ``k``.

    Summation by parts (Abel) with ``h_(D/2) = 0`` and ``S_0 = 0`` gives
    ``sum_i h_i e^(i m theta_i) = -sum_j S_(j+1) (h_(j+1) - h_j)``, hence
    ``|score(m)| <= max_j |h_(j+1) - h_j| * sum_j |S_j(m)|``.

    Args:
        q, k: ``[D]`` or ``[N, D]``.
        distances: integer distances ``[M]``.
        base: frequency base, used when ``inv_freq`` is None.
        inv_freq: frequencies ``[D/2]``.

    Returns:
        float64 ``[M]`` or ``[N, M]``, at least ``|scores_at_distances(q, k, distances)|``.

    Raises:
        TypeError, ValueError: for bad vectors, distances or frequencies.

    Example:
        >>> q, k = torch.randn(2, 16, dtype=torch.float64)
        >>> d = torch.arange(100)
        >>> bool((scores_at_distances(q, k, d).abs() <= decay_bound(q, k, d)).all())
        True
    """
    q, k = _check_vectors(q, k)
    m = _check_distances(distances)
    f = _inv_freq_for(q.shape[-1], inv_freq, base)
    h = _complex_pairs(q) * _complex_pairs(k).conj()  # [..., D/2]
    h = torch.cat([h, torch.zeros_like(h[..., :1])], dim=-1)  # h_(D/2) = 0
    step = (h[..., 1:] - h[..., :-1]).abs().amax(dim=-1)  # [...]
    phases = _phases(m.to(h.device), f.to(h.device))  # [M, D/2]
    sums = torch.cumsum(phases, dim=-1).abs().sum(dim=-1)  # sum_j |S_j|, [M]
    return step[..., None] * sums


def _check_decay_inputs(distances, bound, aligned, random_scores, random_bound, cauchy_schwarz):
    """Validate :func:`decay_figure`'s tensors; return ``M``, the number of distances."""
    if not isinstance(distances, torch.Tensor):
        raise TypeError(f"distances must be a torch.Tensor, got {type(distances).__name__}")
    if distances.dim() != 1 or distances.numel() < 2:
        raise ValueError(
            f"distances must be [M] with at least 2 distances, got shape {tuple(distances.shape)}"
        )
    if distances.is_floating_point() or distances.is_complex() or distances.dtype == torch.bool:
        raise TypeError(f"distances must hold integers, got dtype {distances.dtype}")
    m = distances.numel()
    for name, t, shape in (
        ("bound", bound, "[M]"),
        ("aligned", aligned, "[M]"),
        ("random_scores", random_scores, "[N, M]"),
        ("random_bound", random_bound, "[N, M]"),
        ("cauchy_schwarz", cauchy_schwarz, "[N]"),
    ):
        check_tensor(name, t, min_dim=0)
        dims = shape.count(",") + 1
        if t.dim() != dims or t.shape[-1] == 0:
            raise ValueError(f"{name} must be {shape} (M={m}), got shape {tuple(t.shape)}")
    if bound.shape != (m,) or aligned.shape != (m,):
        raise ValueError(
            f"bound and aligned must be [M] = [{m}], got shapes {tuple(bound.shape)} and "
            f"{tuple(aligned.shape)}"
        )
    if random_scores.shape != random_bound.shape or random_scores.shape[-1] != m:
        raise ValueError(
            f"random_scores and random_bound must both be [N, M] with M={m}, got shapes "
            f"{tuple(random_scores.shape)} and {tuple(random_bound.shape)}"
        )
    if cauchy_schwarz.shape != random_scores.shape[:1]:
        raise ValueError(
            f"cauchy_schwarz must be [N] = [{random_scores.shape[0]}], got shape "
            f"{tuple(cauchy_schwarz.shape)}"
        )
    return m


@same_device(copied=("distances",))
def decay_figure(
    distances: torch.Tensor,
    bound: torch.Tensor,
    aligned: torch.Tensor,
    random_scores: torch.Tensor,
    random_bound: torch.Tensor,
    cauchy_schwarz: torch.Tensor,
):
    """The decay bound against measured scores, in two panels.

    Left: RoFormer's relative upper bound and the mean score of aligned pairs (``k = q``),
    each divided by its value at distance 0. Right, on a log scale, for independent random
    ``q`` and ``k``: the mean ``|score|``, the mean of their decay bounds, and the mean
    ``|q| |k|`` (Cauchy-Schwarz).

    Args:
        distances: ``[M]``.
        bound: :func:`relative_upper_bound` ``[M]``.
        aligned: mean score of pairs with ``k = q``, ``[M]``.
        random_scores: scores of independent pairs ``[N, M]``.
        random_bound: their :func:`decay_bound` ``[N, M]``.
        cauchy_schwarz: ``|q| |k|`` of each pair, ``[N]``.

    Returns:
        The figure.

    Raises:
        TypeError: if an argument is not a tensor.
        ValueError: if the shapes disagree.

    Example:
        >>> d = torch.arange(4)
        >>> fig = decay_figure(d, torch.ones(4), torch.ones(4), torch.ones(2, 4),
        ...                    torch.ones(2, 4), torch.ones(2))
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    m = _check_decay_inputs(distances, bound, aligned, random_scores, random_bound, cauchy_schwarz)
    d = distances.double().cpu().numpy()
    fig, (left, right) = plots.figure(1, 2, height=3.6)
    left.plot(d, (bound / bound[0]).cpu().numpy(), label="RoFormer's relative bound")
    left.plot(d, (aligned / aligned[0]).cpu().numpy(), label="mean score, k = q")
    left.axhline(0, color=plots.COLORS["grey"], lw=0.8)
    left.set_xlabel("relative distance m")
    left.set_ylabel("divided by its value at m = 0")
    left.set_title("what decays")
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)
    right.plot(d, random_bound.mean(0).cpu().numpy(), label="decay bound (mean)")
    right.plot(
        d,
        cauchy_schwarz.mean().expand(m).cpu().numpy(),
        "--",
        label="|q| |k| (mean)",
    )
    right.plot(d, random_scores.abs().mean(0).cpu().numpy(), label="|score| (mean)")
    right.set_yscale("log")
    right.set_xlabel("relative distance m")
    right.set_title("independent random q, k")
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)
    return fig


# --- do positions repeat? --------------------------------------------------------------------


@same_device(copied=("distances",))
def encoding_distance(distances, inv_freq: torch.Tensor) -> torch.Tensor:
    """``|E(p + m) - E(p)|`` for ``E(p) = apply_rope(u, p)``, ``u`` a fixed unit vector.

    ``u`` has every pair ``(1, 0) / sqrt(D/2)``, so ``E(p)`` lists ``(cos p theta_i,
    sin p theta_i)`` scaled to length 1. Rotations keep distances, so the distance depends
    on ``m`` only: ``sqrt((2 / (D/2)) sum_i (1 - cos m theta_i))``, between 0 (the same
    vector) and 2.

    Args:
        distances: integer offsets ``m``, ``[M]``.
        inv_freq: frequencies ``[D/2]``.

    Returns:
        float64 ``[M]`` on ``inv_freq``'s device.

    Raises:
        TypeError, ValueError: for bad distances or frequencies.

    Example:
        >>> encoding_distance([0, 1], rope_inv_freq(64)).tolist()[0]
        0.0
    """
    f = _check_freq("inv_freq", inv_freq)
    m = _check_distances(distances).to(f.device)
    cos_sum = torch.cos(torch.outer(m, f)) @ torch.ones_like(f)  # sum_i cos(m theta_i), [M]
    return ((2.0 / f.numel()) * (f.numel() - cos_sum)).clamp_min(0).sqrt()


def nearest_return(
    max_distance: int, inv_freq: torch.Tensor, *, min_distance: int = 1, chunk: int = 100_000
) -> tuple[int, float]:
    """The offset in ``min_distance .. max_distance`` whose encoding comes closest to ``E(0)``.

    Scans every integer offset with :func:`encoding_distance`. Since that distance depends
    on the offset only, the answer is also the closest any two positions ``p`` and
    ``p + m`` with ``m`` in range come to each other.

    Args:
        max_distance: last offset scanned.
        inv_freq: frequencies ``[D/2]``.
        min_distance: first offset scanned (at least 1).
        chunk: offsets per batch (memory ``chunk * D/2`` floats).

    Returns:
        ``(offset, distance)``.

    Raises:
        TypeError, ValueError: for non-int bounds, an empty range, or bad frequencies.

    Example:
        >>> nearest_return(1000, rope_inv_freq(64))[0]  # the neighbour is closest
        1
    """
    check_int("min_distance", min_distance, minimum=1)
    check_int("max_distance", max_distance, minimum=min_distance)
    check_int("chunk", chunk, minimum=1)
    f = _check_freq("inv_freq", inv_freq)
    best = (0, math.inf)
    for start in range(min_distance, max_distance + 1, chunk):
        m = torch.arange(start, min(start + chunk, max_distance + 1), device=f.device)
        dist = encoding_distance(m, f)
        value, index = dist.min(dim=0)
        if value.item() < best[1]:
            best = (int(m[index]), value.item())
    return best


# --- angles never seen in training -----------------------------------------------------------


def angle_overshoot(
    max_distance: int,
    train_length: int,
    inv_freq: torch.Tensor,
    trained_inv_freq: torch.Tensor | None = None,
) -> torch.Tensor:
    """How far past its trained angles each pair turns by distance ``max_distance``.

    In training (distances ``0 .. L-1`` with frequencies ``trained_inv_freq``) pair ``i``
    turned through ``(L-1) theta_i``. A pair that completed a full turn has met every angle;
    one that did not has met only the arc ``[0, (L-1) theta_i]``. At inference with
    frequencies ``inv_freq``, up to ``max_distance``, the pair reaches
    ``max_distance * theta'_i``.

    Args:
        max_distance: the longest distance used at inference.
        train_length: ``L``, the context length of training.
        inv_freq: the frequencies used at inference ``[D/2]`` (scaled or not).
        trained_inv_freq: the frequencies of training (default: ``inv_freq``).

    Returns:
        float64 ``[D/2]``: for a pair that did not complete a turn in training, the angle
        reached divided by the arc seen (above 1: angles never seen); for one that did,
        ``min(reached / 2 pi, 1)``, at most 1.

    Raises:
        TypeError, ValueError: for bad lengths or frequencies of different sizes.

    Example:
        >>> f = rope_inv_freq(8)  # periods 6.3, 63, 628, 6283
        >>> angle_overshoot(400, 100, f).tolist()
        [1.0, 1.0, 4.04..., 4.04...]
    """
    check_int("train_length", train_length, minimum=2)
    check_int("max_distance", max_distance, minimum=0)
    f = _check_freq("inv_freq", inv_freq)
    trained = f if trained_inv_freq is None else _check_freq("trained_inv_freq", trained_inv_freq)
    if trained.shape != f.shape:
        raise ValueError(
            f"inv_freq and trained_inv_freq must have the same size, got {f.numel()} and "
            f"{trained.numel()}"
        )
    seen = (train_length - 1) * trained  # [D/2]
    reached = max_distance * f
    full = seen >= TWO_PI
    return torch.where(full, (reached / TWO_PI).clamp(max=1.0), reached / seen.clamp_min(1e-300))


def unseen_angles_figure(
    dim: int = 128,
    base: float = 10000.0,
    train_length: int = 4096,
    factor: int = 4,
):
    """Angle each pair turns through over the training length and over ``factor`` times it.

    Three curves on a log scale, pair by pair: training (distance ``L - 1``), RoPE at
    ``factor (L - 1)``, and position interpolation at ``factor (L - 1)`` (which falls on
    the training curve), with the full turn ``2 pi`` marked. Pairs below the line in
    training and above it later meet angles they never met.

    Args:
        dim: head features ``D``.
        base: frequency base.
        train_length: ``L``.
        factor: how much longer the inference context is (at least 2).

    Returns:
        The figure.

    Raises:
        TypeError, ValueError: for bad arguments.

    Example:
        >>> fig = unseen_angles_figure(16, 100.0, 64, 4)
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    check_int("train_length", train_length, minimum=2)
    check_int("factor", factor, minimum=2)
    f = rope_inv_freq(dim, base)
    pi_f = position_interpolation_inv_freq(f, float(factor))
    pair = torch.arange(dim // 2).numpy()
    fig, ax = plots.figure(height=3.4)
    longer = factor * (train_length - 1)
    ax.plot(
        pair, ((train_length - 1) * f).numpy(), lw=2.5, label=f"training, m = {train_length - 1}"
    )
    ax.plot(pair, (longer * f).numpy(), label=f"RoPE, m = {longer}")
    ax.plot(pair, (longer * pi_f).numpy(), ":", lw=2, label=f"interpolated, m = {longer}")
    ax.axhline(TWO_PI, color=plots.COLORS["ink"], lw=0.8, ls="--")
    ax.text(0, TWO_PI * 1.3, "one full turn")
    ax.set_yscale("log")
    ax.set_xlabel("pair index i")
    ax.set_ylabel(r"angle $m\,\theta_i$ (rad)")
    ax.set_title(f"D = {dim}, base {base:g}, trained on {train_length} positions")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncols=3, frameon=False)
    return fig


# --- context extension -----------------------------------------------------------------------


def scaled_frequencies(
    dim: int = 128,
    base: float = 500000.0,
    factor: float = 8.0,
    original_max_positions: int = 8192,
) -> dict[str, torch.Tensor]:
    """RoPE's frequencies and four ways of stretching them by ``factor``.

    Args:
        dim: head features ``D``.
        base: frequency base.
        factor: context extension factor.
        original_max_positions: the trained context length (for YaRN and llama3).

    Returns:
        ``{name: float64 [D/2]}`` for ``"RoPE"``, ``"position interpolation"``,
        ``"NTK-aware"``, ``"YaRN"`` and ``"llama3"`` (low/high factors 1 and 4).

    Raises:
        TypeError, ValueError: as the functions of :mod:`posenc.rope`.

    Example:
        >>> list(scaled_frequencies(16, 10000.0, 4.0, 512))
        ['RoPE', 'position interpolation', 'NTK-aware', 'YaRN', 'llama3']
    """
    f = rope_inv_freq(dim, base)
    return {
        "RoPE": f,
        "position interpolation": position_interpolation_inv_freq(f, factor),
        "NTK-aware": ntk_aware_inv_freq(dim, base, factor),
        "YaRN": yarn_inv_freq(dim, base, factor, original_max_positions)[0],
        "llama3": llama3_inv_freq(f, factor, 1.0, 4.0, original_max_positions),
    }


def _check_freq_dict(freqs: object) -> dict[str, torch.Tensor]:
    if not isinstance(freqs, dict) or not freqs:
        raise TypeError(f"freqs must be a non-empty dict {{name: inv_freq}}, got {freqs!r}")
    out = {name: _check_freq(f"freqs[{name!r}]", f) for name, f in freqs.items()}
    if len({f.shape for f in out.values()}) != 1:
        raise ValueError("every entry of freqs must have the same number of pairs")
    return out


def scaling_table(freqs: dict[str, torch.Tensor], factor: float, train_length: int) -> Table:
    """Compare scaled frequencies with the first entry of ``freqs`` (the original).

    Columns: pairs kept (ratio 1), divided by exactly ``factor``, changed by something in
    between; pairs meeting unseen angles by distance ``factor * (L - 1)``, and the largest
    overshoot (:func:`angle_overshoot`); the slowest pair's period.

    Args:
        freqs: ``{name: inv_freq [D/2]}``, the original first (e.g. :func:`scaled_frequencies`).
        factor: the extension factor.
        train_length: ``L``.

    Returns:
        A :class:`posenc.display.table.Table`, one row per entry of ``freqs``.

    Raises:
        TypeError, ValueError: for bad arguments.

    Example:
        >>> print(scaling_table(scaled_frequencies(16, 10000.0, 4.0, 512), 4.0, 512))
        The 8 pairs of a head trained on L = 512 positions, extended 4 times: how many pairs each method keeps, divides by 4 or changes in between; how many meet angles unseen in training by distance 4(L - 1), and how far past its trained arc the furthest one turns.
        method                  kept  divided by 4  in between  at unseen angles  largest angle / trained arc  longest period (positions)
        RoPE                       8             0           0                 4                            4                      19,869
        position interpolation     0             8           0                 0                            1                      79,477
        NTK-aware                  1             1           6                 3                          1.8                      79,477
        YaRN                       1             4           3                 0                            1                      79,477
        llama3                     3             4           1                 0                            1                      79,477
    """
    f = _check_freq_dict(freqs)
    factor = check_positive_float("factor", factor)
    check_int("train_length", train_length, minimum=2)
    original = next(iter(f.values()))
    longest = round(factor * (train_length - 1))
    header = [
        "method",
        "kept",
        f"divided by {factor:g}",
        "in between",
        "at unseen angles",
        "largest angle / trained arc",
        "longest period (positions)",
    ]
    rows = []
    for name, g in f.items():
        ratio = g / original
        kept = int(torch.isclose(ratio, torch.ones_like(ratio), rtol=1e-9, atol=0).sum())
        div = int(torch.isclose(ratio, torch.full_like(ratio, 1 / factor), rtol=1e-9, atol=0).sum())
        over = angle_overshoot(longest, train_length, g, original)
        unseen = int((over > 1 + 1e-9).sum())
        longest_period = periods(g).max().item()
        rows.append(
            [
                name,
                kept,
                div,
                ratio.numel() - kept - div,
                unseen,
                f"{over.max().item():.2g}",
                "never" if math.isinf(longest_period) else _period_text(longest_period),
            ]
        )
    caption = (
        f"The {original.numel()} pairs of a head trained on L = {train_length:,} positions, "
        f"extended {factor:g} times: how many pairs each method keeps, divides by {factor:g} "
        f"or changes in between; how many meet angles unseen in training by distance "
        f"{factor:g}(L - 1), and how far past its trained arc the furthest one turns."
    )
    return Table(header, rows, caption=caption, align=["left"] + ["right"] * (len(header) - 1))


def scaling_figure(freqs: dict[str, torch.Tensor], train_length: int, factor: float):
    """Period per pair and ratio to the original frequency, one line per method.

    Args:
        freqs: ``{name: inv_freq [D/2]}``, the original first.
        train_length: the trained context ``L`` (drawn as a line, with ``factor * L``).
        factor: the extension factor.

    Returns:
        The figure.

    Raises:
        TypeError, ValueError: for bad arguments.

    Example:
        >>> fig = scaling_figure(scaled_frequencies(16, 10000.0, 4.0, 512), 512, 4.0)
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    f = _check_freq_dict(freqs)
    check_int("train_length", train_length, minimum=2)
    factor = check_positive_float("factor", factor)
    original = next(iter(f.values()))
    pair = torch.arange(original.numel()).numpy()
    fig, (left, right) = plots.figure(1, 2, height=4.0)
    styles = ["-", "--", "-.", "-", ":"]
    for j, (name, g) in enumerate(f.items()):
        style = styles[j % len(styles)]
        left.plot(pair, periods(g).numpy(), style, lw=1.6, label=name)
        right.plot(pair, (g / original).numpy(), style, lw=1.6, label=name)
    # the band between the trained and the extended context (a patch, not two more lines)
    left.axhspan(train_length, factor * train_length, color=plots.COLORS["grey"], alpha=0.25)
    left.text(
        pair[-1],
        math.sqrt(factor) * train_length,
        f"context L to {factor:g}L",
        ha="right",
        va="center",
    )
    left.set_yscale("log")
    left.set_xlabel("pair index i")
    left.set_ylabel("period (positions)")
    left.set_title("period of each pair")
    right.axhline(1 / factor, color=plots.COLORS["grey"], lw=0.8, ls="--")
    right.text(0, 1 / factor + 0.03, f"1 / {factor:g}")
    right.set_xlabel("pair index i")
    right.set_ylabel(r"$\theta'_i / \theta_i$")
    right.set_title("scaled / original frequency")
    fig.legend(
        *left.get_legend_handles_labels(), loc="outside lower center", ncols=3, frameon=False
    )
    return fig


# --- p-RoPE and partial rotary ---------------------------------------------------------------


def _check_fraction(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be in [0, 1], got {name}={value}")
    return float(value)


def p_rope(
    x: torch.Tensor, positions=None, *, p: float, base: float = 10000.0, layout: str = "half"
) -> torch.Tensor:
    """p-RoPE: RoPE with only the fastest fraction ``p`` of its frequencies.

    :func:`posenc.rope.apply_rope` with ``inv_freq = p_rope_inv_freq(rope_inv_freq(D), p)``:
    the slowest ``1 - p`` of the pairs get frequency 0 and are never turned.

    Args:
        x: head vectors ``[..., T, D]``.
        positions: as :func:`posenc.rope.apply_rope`.
        p: fraction of pairs kept rotating, in ``[0, 1]``.
        base: frequency base.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        Same shape, dtype and device as ``x``.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`, or ``p`` outside ``[0, 1]``.

    Example:
        >>> x = torch.randn(3, 8)
        >>> torch.equal(p_rope(x, p=0.0), x)
        True
    """
    check_tensor("x", x, min_dim=2)
    dim = x.shape[-1]
    check_even_dim("head dimension D", dim)
    p = _check_fraction("p", p)
    f = p_rope_inv_freq(rope_inv_freq(dim, base), p)
    return apply_rope(x, positions, inv_freq=f, layout=layout)


def partial_rotary(
    x: torch.Tensor,
    positions=None,
    *,
    fraction: float,
    base: float = 10000.0,
    layout: str = "half",
) -> torch.Tensor:
    """Partial rotary (GPT-NeoX's ``rotary_pct``): RoPE on the first features only.

    The first ``R = int(D * fraction)`` features are rotated as a head of ``R`` features,
    with frequencies ``rope_inv_freq(R, base)`` (fast to slow over ``R/2`` pairs); the other
    ``D - R`` features pass through.

    Args:
        x: head vectors ``[..., T, D]``.
        positions: as :func:`posenc.rope.apply_rope`.
        fraction: share of the features rotated, in ``[0, 1]``; ``R`` must come out even.
        base: frequency base.
        layout: pairing inside the rotated block, ``"half"`` (GPT-NeoX) or ``"interleaved"``.

    Returns:
        Same shape, dtype and device as ``x``.

    Raises:
        TypeError, ValueError: as :func:`posenc.rope.apply_rope`, or if ``R`` is odd.

    Example:
        >>> x = torch.randn(3, 8)
        >>> y = partial_rotary(x, fraction=0.5)
        >>> torch.equal(y[:, 4:], x[:, 4:]), torch.equal(y[:, :4], x[:, :4])
        (True, False)
    """
    check_tensor("x", x, min_dim=2)
    dim = x.shape[-1]
    fraction = _check_fraction("fraction", fraction)
    check_layout(layout)
    rotary = int(dim * fraction)
    if rotary % 2:
        raise ValueError(
            f"fraction={fraction} of D={dim} gives {rotary} rotated features, which must be even"
        )
    if rotary == 0:
        return x.clone()
    rotated = apply_rope(x[..., :rotary], positions, base=base, layout=layout)
    return torch.cat([rotated, x[..., rotary:]], dim=-1)


def unrotated_features(
    rotate: Callable[..., torch.Tensor],
    dim: int,
    positions: Sequence[int] = (1, 7, 100, 12345),
) -> list[int]:
    """The features that a position encoding never changes.

    Rotates one random vector at position 0 and at each of ``positions`` and lists the
    features equal in all of them (float64, exact comparison).

    Args:
        rotate: ``rotate(x [T, D], positions [T]) -> [T, D]`` (e.g. :func:`p_rope` with
            ``p`` bound by ``functools.partial``).
        dim: head features ``D``.
        positions: the positions to compare with position 0.

    Returns:
        Sorted feature indices.

    Raises:
        TypeError, ValueError: for a bad ``dim`` or empty ``positions``.

    Example:
        >>> import functools
        >>> unrotated_features(functools.partial(partial_rotary, fraction=0.5), 8)
        [4, 5, 6, 7]
    """
    check_callable("rotate", rotate)
    check_even_dim("dim", dim)
    positions = check_int_sequence("positions", positions)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, dim, generator=gen, dtype=torch.float64)
    pos = [0, *positions]
    rotated = rotate(x.expand(len(pos), dim), torch.tensor(pos))  # [T, D]
    still = (rotated == rotated[:1]).all(dim=0)  # [D]
    return torch.nonzero(still).flatten().tolist()


def rotating_periods_figure(dim: int = 64, fraction: float = 0.25, base: float = 10000.0):
    """The periods of the pairs that rotate: RoPE, p-RoPE and partial rotary.

    One row per method, one tick per rotating pair, periods on a log axis.

    Args:
        dim: head features ``D``.
        fraction: p-RoPE's ``p`` and partial rotary's share of features.
        base: frequency base.

    Returns:
        The figure.

    Raises:
        TypeError, ValueError: for bad arguments.

    Example:
        >>> fig = rotating_periods_figure(16, 0.5)
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    check_even_dim("dim", dim)
    fraction = _check_fraction("fraction", fraction)
    f = rope_inv_freq(dim, base)
    rows = {
        f"RoPE ({dim // 2} pairs)": f,
        f"p-RoPE, p = {fraction:g}": p_rope_inv_freq(f, fraction),
        f"partial rotary, {fraction:g}": rope_inv_freq(int(dim * fraction), base)
        if int(dim * fraction) >= 2
        else torch.zeros(0, dtype=torch.float64),
    }
    fig, ax = plots.figure(height=2.6)
    colors = [plots.COLORS[c] for c in ("ink", "blue", "orange")]
    for j, g in enumerate(rows.values()):
        g = g[g > 0]
        y = len(rows) - 1 - j
        ax.scatter((TWO_PI / g).numpy(), [y] * g.numel(), marker="|", s=200, color=colors[j])
    ax.set_yticks(range(len(rows)), list(rows)[::-1])
    ax.set_xscale("log")
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("period of a rotating pair (positions)")
    ax.set_title(f"which periods are left, D = {dim}, base {base:g}")
    return fig


# --- schemes for the property table ----------------------------------------------------------


def _unit_pairs(dim: int) -> torch.Tensor:
    """The unit vector with every pair ``(1, 0) / sqrt(D/2)``: ``[D]`` float64."""
    u = torch.zeros(dim, dtype=torch.float64)
    u[0::2] = 1 / math.sqrt(dim // 2)
    return u


def rope_scheme(base: float = 10000.0) -> Scheme:
    """RoPE as a scheme for :mod:`posenc.properties`: ``E(p) = apply_rope(u, p)``.

    ``u`` is the fixed unit vector with every pair ``(1, 0) / sqrt(D/2)``, so ``E(p)`` is
    the key (or query) that ``u`` becomes at position ``p``: pair ``i`` is
    ``(cos p theta_i, sin p theta_i) / sqrt(D/2)``.

    Args:
        base: frequency base.

    Returns:
        A :class:`posenc.properties.Scheme` named ``"RoPE"``.

    Raises:
        TypeError, ValueError: for a bad ``base``.

    Example:
        >>> from posenc import properties
        >>> str(properties.linear_relation(rope_scheme()))
        'yes (max residual of best linear fit 0)'
    """
    base = check_base("base", base)

    def encode(p: torch.Tensor, dim: int, length: int, seed: int) -> torch.Tensor:
        check_even_dim("dim", dim)
        return apply_rope(_unit_pairs(dim).expand(p.numel(), dim), p, base=base)

    return Scheme("RoPE", encode)


def relative_schemes(max_distance: int = 16, num_buckets: int = 32) -> dict[str, Scheme]:
    """Shaw, T5 and ALiBi as schemes for :mod:`posenc.properties`.

    A relative method gives no vector to a position; it gives a signal to an offset. The
    scheme's ``E(p)`` is that signal for a key ``p`` positions before the query (offset
    ``-p``):

    - ``"Shaw"``: the learned vector ``a^K`` of the clipped offset
      (:func:`posenc.relative.shaw_relative_indices`), one draw per seed;
    - ``"T5"``: ``exp`` of the learned bias of the offset's bucket
      (:func:`posenc.relative.t5_bucket`, decoder buckets), one feature per head, one
      draw per seed;
    - ``"ALiBi"``: ``exp(-slope_h p)`` (:func:`posenc.relative.alibi_bias`), one feature
      per head.

    ``exp`` of a bias is the factor by which it multiplies the attention weight before
    normalisation.

    Args:
        max_distance: Shaw's clipping distance ``c``.
        num_buckets: T5's buckets (``max_distance`` 128).

    Returns:
        ``{name: Scheme}``.

    Raises:
        TypeError, ValueError: for bad arguments.

    Example:
        >>> from posenc import properties
        >>> str(properties.unique_and_length_independent(relative_schemes()["Shaw"]))
        'no (min distance between positions / mean norm 0)'
    """
    check_int("max_distance", max_distance, minimum=1)
    check_int("num_buckets", num_buckets, minimum=4)

    def shaw(p: torch.Tensor, dim: int, length: int, seed: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        table = torch.randn(2 * max_distance + 1, dim, generator=gen, dtype=torch.float64)
        index = relative.shaw_relative_indices(int(p.max()) + 1, max_distance)[p, 0]
        return table[index]  # [T, D]

    def t5(p: torch.Tensor, dim: int, length: int, seed: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        table = torch.randn(num_buckets, dim, generator=gen, dtype=torch.float64)  # [buckets, H]
        bucket = relative.t5_bucket(-p, bidirectional=False, num_buckets=num_buckets)
        return table[bucket].exp()  # [T, H]

    def alibi(p: torch.Tensor, dim: int, length: int, seed: int) -> torch.Tensor:
        bias = relative.alibi_bias(int(p.max()) + 1, relative.alibi_slopes(dim))  # [H, T, T]
        return bias[:, p, 0].T.exp()  # [T, H]: query at p, key at 0

    return {
        "Shaw": Scheme("Shaw", shaw),
        "T5": Scheme("T5", t5),
        "ALiBi": Scheme("ALiBi", alibi),
    }
