"""Shifting a sinusoidal encoding by ``k`` positions is a rotation of every pair.

Chapter 6 asks for the 2x2 matrix ``M`` that takes the pair ``(sin wp, cos wp)`` to
``(sin w(p+k), cos w(p+k))`` for every position ``p``, solves for it with sympy, and checks
the answer numerically over whole encodings. This module holds both halves:

- the symbolic derivation: :func:`shift_problem`, :func:`coefficient_equations`,
  :func:`solve_shift_matrix` and :func:`symbolic_rotation` (sympy is imported inside them,
  so importing this module stays cheap);
- the numeric checks: :func:`sympy_shift_matrix` (the solved matrix turned into numbers
  with ``lambdify``, built without :mod:`posenc.rotation`), :func:`max_shift_error` and
  :func:`swap_pair_order`;
- the picture of why the order of a pair decides the sense of turning:
  :func:`draw_pair_orders`.

A pair can be listed as ``(sin, cos)``, as in the encoding of Vaswani et al., or as
``(cos, sin)``; the ``order`` argument says which (``"sin-cos"`` or ``"cos-sin"``).
"""

from __future__ import annotations

import functools

import torch

from posenc._validate import (
    check_base,
    check_even_dim,
    check_int,
    check_int_sequence,
    check_positive_float,
    check_tensor,
    same_device,
)

__all__ = [
    "ORDERS",
    "coefficient_equations",
    "draw_pair_orders",
    "max_shift_error",
    "shift_problem",
    "solve_shift_matrix",
    "swap_pair_order",
    "symbolic_rotation",
    "sympy_shift_matrix",
]

ORDERS = ("sin-cos", "cos-sin")
"""The two ways of listing a pair: ``(sin wp, cos wp)`` or ``(cos wp, sin wp)``."""


def _check_order(order: object) -> str:
    if not isinstance(order, str):
        raise TypeError(f"order must be a string, got {order!r} ({type(order).__name__})")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got order={order!r}")
    return order


def _pair(first, second, order: str):
    """``[first, second]`` for ``"sin-cos"``, ``[second, first]`` for ``"cos-sin"``."""
    if order == "sin-cos":
        return [first, second]
    elif order == "cos-sin":
        return [second, first]
    else:
        raise ValueError(f"order must be one of {ORDERS}, got order={order!r}")


def shift_problem(order: str = "sin-cos"):
    """The unknown matrix, the pair at position ``p`` and the pair at ``p + k``.

    The problem is to find ``M`` with ``M @ x == y`` for every ``p``; the symbols are
    ``u1, v1, u2, v2`` (the unknown entries), ``w`` (the frequency), ``p`` (the position)
    and ``k`` (the offset).

    Args:
        order: ``"sin-cos"`` for the pair ``(sin wp, cos wp)``, ``"cos-sin"`` for
            ``(cos wp, sin wp)``.

    Returns:
        ``(M, x, y)``: sympy matrices of shapes ``2 x 2``, ``2 x 1``, ``2 x 1``, with
        ``M = [[u1, v1], [u2, v2]]``, ``x`` the pair at ``p`` and ``y`` the pair at
        ``p + k`` (angles written ``k*w + p*w``, not yet expanded).

    Raises:
        TypeError, ValueError: if ``order`` is not one of :data:`ORDERS`.

    Example:
        >>> M, x, y = shift_problem()
        >>> print(M, x.T, y.T)
        Matrix([[u1, v1], [u2, v2]]) Matrix([[sin(p*w), cos(p*w)]]) Matrix([[sin(k*w + p*w), cos(k*w + p*w)]])
    """
    _check_order(order)
    import sympy as sp

    u1, v1, u2, v2, w, p, k = sp.symbols("u1 v1 u2 v2 w p k")
    m = sp.Matrix([[u1, v1], [u2, v2]])
    x = sp.Matrix(_pair(sp.sin(w * p), sp.cos(w * p), order))
    y = sp.Matrix(_pair(sp.sin(w * p + w * k), sp.cos(w * p + w * k), order))
    return m, x, y


def coefficient_equations(order: str = "sin-cos") -> list:
    """The four equations for ``u1, v1, u2, v2`` that matching coefficients gives.

    The right side ``y`` is expanded with the angle-addition identities
    ``sin(a + b) = sin a cos b + cos a sin b`` and ``cos(a + b) = cos a cos b - sin a sin b``.
    Both sides of each row are then a combination of ``sin(wp)`` and ``cos(wp)``; since no
    combination ``a sin(wp) + b cos(wp)`` vanishes for every ``p`` unless ``a = b = 0``, the
    coefficients of ``sin(wp)`` must agree, and so must those of ``cos(wp)``.

    Args:
        order: ``"sin-cos"`` or ``"cos-sin"``, as in :func:`shift_problem`.

    Returns:
        A list of four ``sympy.Eq`` solving for ``u1, v1, u2, v2`` in turn: row by row, the
        coefficients of the pair's first entry, then of its second.

    Raises:
        TypeError, ValueError: if ``order`` is not one of :data:`ORDERS`.

    Example:
        >>> for eq in coefficient_equations():
        ...     print(eq)
        Eq(u1, cos(k*w))
        Eq(v1, sin(k*w))
        Eq(u2, -sin(k*w))
        Eq(v2, cos(k*w))
    """
    import sympy as sp

    m, x, y = shift_problem(order)
    w, p = sp.symbols("w p")
    s, c = sp.symbols("s c")  # stand-ins for sin(wp) and cos(wp)
    stand_in = {sp.sin(w * p): s, sp.cos(w * p): c}
    lhs = (m * x).applyfunc(lambda e: sp.expand(e).subs(stand_in))
    rhs = y.applyfunc(lambda e: sp.expand(sp.expand_trig(e)).subs(stand_in))
    equations = []
    for row in range(2):
        for basis in _pair(s, c, order):  # the pair's first entry, then its second
            equations.append(sp.Eq(lhs[row].coeff(basis), rhs[row].coeff(basis)))
    return equations


def solve_shift_matrix(order: str = "sin-cos"):
    """Solve for the shift matrix ``M`` with ``M @ pair(p) == pair(p + k)`` for all ``p``.

    Args:
        order: ``"sin-cos"`` or ``"cos-sin"``, as in :func:`shift_problem`.

    Returns:
        A ``2 x 2`` sympy Matrix in the symbols ``k`` and ``w``.

    Raises:
        TypeError, ValueError: if ``order`` is not one of :data:`ORDERS`.
        RuntimeError: if the equations do not have exactly one solution.

    Example:
        >>> print(solve_shift_matrix())
        Matrix([[cos(k*w), sin(k*w)], [-sin(k*w), cos(k*w)]])
        >>> print(solve_shift_matrix("cos-sin"))
        Matrix([[cos(k*w), -sin(k*w)], [sin(k*w), cos(k*w)]])
    """
    import sympy as sp

    m, _, _ = shift_problem(order)
    unknowns = list(m)  # u1, v1, u2, v2
    solutions = sp.solve(coefficient_equations(order), unknowns, dict=True)
    if len(solutions) != 1 or set(solutions[0]) != set(unknowns):
        raise RuntimeError(f"expected one solution for {unknowns}, got {solutions}")
    return m.subs(solutions[0])


def symbolic_rotation(theta):
    """The counter-clockwise rotation ``[[cos t, -sin t], [sin t, cos t]]`` in sympy.

    The symbolic twin of :func:`posenc.rotation.rotation_matrix`.

    Args:
        theta: a sympy expression or a number (radians).

    Returns:
        A ``2 x 2`` sympy Matrix.

    Raises:
        TypeError: if ``theta`` cannot be turned into a sympy expression.

    Example:
        >>> import sympy as sp
        >>> k, w = sp.symbols("k w")
        >>> print(symbolic_rotation(-k * w))
        Matrix([[cos(k*w), sin(k*w)], [-sin(k*w), cos(k*w)]])
    """
    import sympy as sp

    try:
        t = sp.sympify(theta, strict=True)
    except (sp.SympifyError, TypeError):
        raise TypeError(
            f"theta must be a number or a sympy expression, got {type(theta).__name__}"
        ) from None
    return sp.Matrix([[sp.cos(t), -sp.sin(t)], [sp.sin(t), sp.cos(t)]])


@functools.cache
def _lambdified_shift_matrix(order: str):
    """The solved matrix as a plain function ``(k, w) -> [[a, b], [c, d]]`` (solved once)."""
    import sympy as sp

    k, w = sp.symbols("k w")
    return sp.lambdify((k, w), solve_shift_matrix(order).tolist(), modules="math")


def sympy_shift_matrix(
    offset: int, dim: int, base: float = 10000.0, *, order: str = "sin-cos"
) -> torch.Tensor:
    """The block-diagonal shift matrix of a whole encoding, built from the sympy solution.

    The solved ``2 x 2`` matrix is turned into a numeric function of ``(k, w)`` with
    ``sympy.lambdify`` and evaluated at the frequencies ``w_i = base^(-2i/D)`` (computed
    here in plain Python floats), one block per pair. Nothing of :mod:`posenc.rotation` is
    used, so comparing with :func:`posenc.rotation.sinusoidal_shift_matrix` is a real check.

    Args:
        offset: the shift ``k`` (any integer).
        dim: features ``D`` (even).
        base: frequency base of the encoding.
        order: ``"sin-cos"`` (the encoding's order) or ``"cos-sin"``.

    Returns:
        float64 ``[D, D]``; block ``i`` acts on features ``2i, 2i+1``.

    Raises:
        TypeError, ValueError: for a non-int ``offset``, a bad ``dim`` or ``base``, or an
            unknown ``order``.

    Example:
        >>> sympy_shift_matrix(1, 2, order="sin-cos")  # w = 1: [[cos 1, sin 1], [-sin 1, cos 1]]
        tensor([[ 0.5403,  0.8415],
                [-0.8415,  0.5403]], dtype=torch.float64)
    """
    check_int("offset", offset)
    check_even_dim("dim", dim)
    base = check_base("base", base)
    entries = _lambdified_shift_matrix(_check_order(order))
    blocks = [
        torch.tensor(entries(offset, base ** (-2 * i / dim)), dtype=torch.float64)
        for i in range(dim // 2)
    ]
    return torch.block_diag(*blocks)


def swap_pair_order(x: torch.Tensor) -> torch.Tensor:
    """Swap the two features of every pair: ``(x0, x1, x2, x3, ...) -> (x1, x0, x3, x2, ...)``.

    Turns an encoding listed ``(sin, cos)`` per pair into the same encoding listed
    ``(cos, sin)``, and back (the swap is its own inverse).

    Args:
        x: ``[..., D]`` with ``D`` even.

    Returns:
        ``[..., D]``, same dtype and device.

    Raises:
        TypeError: if ``x`` is not a floating tensor.
        ValueError: if ``x`` has no dimensions or an odd last axis.

    Example:
        >>> swap_pair_order(torch.tensor([0.0, 1.0, 2.0, 3.0]))
        tensor([1., 0., 3., 2.])
    """
    check_tensor("x", x, min_dim=1)
    if x.shape[-1] % 2:
        raise ValueError(
            f"x must have an even last axis (features come in pairs), got shape {tuple(x.shape)}"
        )
    pairs = x.unflatten(-1, (-1, 2))  # [..., D/2, 2]
    return pairs.flip(-1).flatten(-2)  # [..., D]


@same_device(copied=("shift_matrices",))
def max_shift_error(
    encoding: torch.Tensor, offsets, shift_matrices: torch.Tensor
) -> tuple[float, int]:
    """The largest error of ``encoding[p + k] == M_k @ encoding[p]`` over every valid pair.

    For each offset ``k`` every position ``p`` with ``0 <= p`` and ``p + k < T`` is checked,
    so negative offsets (shifting back) are covered as well as positive ones.

    Args:
        encoding: ``[T, D]``, one row per position ``0 .. T-1``.
        offsets: ``K`` integer offsets (a sequence of ints or a 1-D integer tensor).
        shift_matrices: ``[K, D, D]``, the matrix for each offset, on the encoding's device
            or on the CPU (where sympy's are made; copied to the encoding's device).

    Returns:
        ``(error, pairs)``: the largest absolute difference over every feature of every
        checked ``(p, k)`` (a float, computed in float64), and how many pairs were checked.

    Raises:
        TypeError: if ``encoding`` or ``shift_matrices`` is not a floating tensor, or an
            offset is not an integer.
        ValueError: if the shapes do not match, or an offset leaves no position to check
            (``|k| >= T``).

    Example:
        >>> from posenc.encodings import sinusoidal_encoding
        >>> enc = sinusoidal_encoding(8, 4)  # [T, D] = [8, 4]
        >>> mats = torch.stack([sympy_shift_matrix(k, 4) for k in (-2, 3)])
        >>> error, pairs = max_shift_error(enc, [-2, 3], mats)
        >>> error < 1e-6, pairs  # 6 positions for k = -2, 5 for k = 3
        (True, 11)
    """
    check_tensor("encoding", encoding, min_dim=2)
    check_tensor("shift_matrices", shift_matrices, min_dim=3)
    if isinstance(offsets, torch.Tensor):
        if offsets.is_floating_point() or offsets.is_complex() or offsets.dtype == torch.bool:
            raise TypeError(f"offsets must hold integers, got dtype {offsets.dtype}")
        offsets = offsets.tolist()
    offsets = check_int_sequence("offsets", offsets)
    if encoding.dim() != 2:
        raise ValueError(f"encoding must be [T, D], got shape {tuple(encoding.shape)}")
    t, d = encoding.shape
    if shift_matrices.shape != (len(offsets), d, d):
        raise ValueError(
            f"shift_matrices must be [K, D, D] = [{len(offsets)}, {d}, {d}] "
            f"(one per offset), got shape {tuple(shift_matrices.shape)}"
        )
    enc = encoding.double()  # [T, D]
    mats = shift_matrices.to(device=enc.device, dtype=torch.float64)  # [K, D, D]
    error, pairs = 0.0, 0
    for k, m in zip(offsets, mats, strict=True):
        if abs(k) >= t:
            raise ValueError(f"offset k={k} leaves no position p with 0 <= p, p + k < T={t}")
        start, stop = max(0, -k), t - max(0, k)  # valid p: start .. stop-1
        before = enc[start:stop]  # [T - |k|, D]
        after = enc[start + k : stop + k]  # [T - |k|, D]
        error = max(error, (after - before @ m.T).abs().max().item())
        pairs += stop - start
    return error, pairs


def draw_pair_orders(omega: float = 0.7, num_positions: int = 8):
    """One pair at positions ``0 .. T-1`` drawn as points, in both orders side by side.

    Left, ``(sin wp, cos wp)`` (first entry across, second up): it starts at the top of the
    unit circle and turns clockwise. Right, ``(cos wp, sin wp)``: it starts on the right
    and turns counter-clockwise. Each point is labelled with its position.

    Args:
        omega: the pair's frequency ``w`` in radians per position.
        num_positions: how many positions ``T`` to draw (1 .. 64).

    Returns:
        The matplotlib figure; show it with :func:`posenc.display.plots.show`.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``omega`` is not positive and finite, or ``num_positions`` is out
            of range.

    Example:
        >>> fig = draw_pair_orders(0.5, 4)
        >>> [ax.get_title() for ax in fig.axes]
        ['(sin ωp, cos ωp): clockwise', '(cos ωp, sin ωp): counter-clockwise']
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    omega = check_positive_float("omega", omega)
    check_int("num_positions", num_positions, minimum=1)
    if num_positions > 64:
        raise ValueError(f"num_positions must be at most 64, got num_positions={num_positions}")
    import matplotlib as mpl

    from posenc.display import plots

    angles = omega * torch.arange(num_positions, dtype=torch.float64)  # [T]
    s, c = angles.sin(), angles.cos()
    circle = torch.linspace(0, 2 * torch.pi, 200)
    fig, axes = plots.figure(1, 2, height=3.9)
    panels = [
        ("(sin ωp, cos ωp): clockwise", s, c),
        ("(cos ωp, sin ωp): counter-clockwise", c, s),
    ]
    with mpl.rc_context(plots.STYLE):
        for ax, (title, across, up) in zip(axes, panels, strict=True):
            ax.plot(circle.cos(), circle.sin(), color=plots.COLORS["grey"], lw=0.8)
            ax.plot(across, up, "o-", color=plots.COLORS["blue"], lw=1.2)
            for p in range(num_positions):
                ax.annotate(
                    str(p),
                    (across[p].item(), up[p].item()),
                    xytext=(5, 4),
                    textcoords="offset points",
                )
            ax.set(aspect="equal", xlim=(-1.3, 1.3), ylim=(-1.3, 1.3))
            ax.set_xlabel("first entry")
            ax.set_ylabel("second entry")
            ax.set_title(title)
    return fig
