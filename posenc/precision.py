"""RoPE in low-precision floats: what a float format holds, and what angles cost in it.

A model held in bfloat16 or float16 invites computing everything in that dtype, RoPE's
angles included. This module measures what that costs, against float64:

- which integers a float format holds: :func:`significand_bits`, :func:`spacing`,
  :func:`first_inexact_integer`, :func:`stored_positions`;
- angles ``p * theta_i`` computed by a :class:`Recipe` (the dtype the positions, the
  frequencies and the product are held in): :data:`RECIPES`, :func:`recipe_angles`,
  :func:`angle_errors`;
- RoPE computed exactly: :func:`exact_rope`;
- the fix and whether :func:`posenc.apply_rope` follows it: :func:`accepted_dtypes`,
  :func:`ulp`, :func:`rope_error_bound`, :func:`check_apply_rope`, :class:`RopeCheck`.

Every measurement is exact IEEE arithmetic (casts and one multiplication) or float64, so
its printed digits are the same on every machine; only :func:`check_apply_rope` runs
``apply_rope`` itself, and it reports booleans against a proven bound. Chapter 14's tables
and figures are in :mod:`posenc.book.precision_views`.

Shapes: ``T`` positions, ``D`` features (``D/2`` pairs), ``M`` start positions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from posenc._validate import (
    check_even_dim,
    check_layout,
    check_positions,
    check_tensor,
    same_device,
)
from posenc.rope import _join, _pairs, apply_rope, rope_inv_freq

__all__ = [
    "RECIPES",
    "Recipe",
    "RopeCheck",
    "accepted_dtypes",
    "angle_errors",
    "check_apply_rope",
    "exact_rope",
    "first_inexact_integer",
    "recipe_angles",
    "rope_error_bound",
    "significand_bits",
    "spacing",
    "stored_positions",
    "ulp",
]

F64 = torch.float64
TWO_PI = 2 * math.pi


def _check_float_dtype(name: str, dtype: object) -> torch.dtype:
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, got {dtype!r} ({type(dtype).__name__})")
    if not dtype.is_floating_point:
        raise ValueError(f"{name} must be a floating dtype, got {name}={dtype}")
    try:
        info = torch.finfo(dtype)
    except TypeError:
        raise ValueError(
            f"{name} must be a floating dtype with finfo, got {name}={dtype}"
        ) from None
    if info.min >= 0:
        raise ValueError(f"{name} must be a signed floating dtype, got {name}={dtype} (no sign)")
    return dtype


def _eps(dtype: torch.dtype) -> float:
    """Gap between 1 and the next number ``dtype`` holds, found by rounding (not ``finfo``).

    ``torch.finfo`` reports 0.125 for ``float8_e5m2fnuz``, which has 2 fraction bits (0.25).
    """
    if dtype in (torch.float32, F64):
        return torch.finfo(dtype).eps
    one = torch.ones((), dtype=torch.float32)
    for k in range(1, 24):
        if ((one + 2.0**-k).to(dtype).to(torch.float32) == 1).item():
            return 2.0 ** (1 - k)
    return torch.finfo(dtype).eps


def _check_inv_freq(inv_freq: object) -> torch.Tensor:
    check_tensor("inv_freq", inv_freq, min_dim=1)
    if inv_freq.dim() != 1 or inv_freq.numel() == 0:
        raise ValueError(f"inv_freq must be 1-D and non-empty ([D/2]), got {tuple(inv_freq.shape)}")
    if not bool(torch.isfinite(inv_freq).all()) or bool((inv_freq < 0).any()):
        raise ValueError(
            "inv_freq must be finite and non-negative, got a negative or non-finite entry"
        )
    return inv_freq


# --- which integers a format holds ----------------------------------------------------------


def significand_bits(dtype: torch.dtype) -> int:
    """Bits of precision of a float format, the implicit leading bit included.

    bfloat16 has 8, float16 11, float32 24, float64 53: every integer up to
    ``2**bits`` is exact, and above it only every second, fourth, ... integer.

    Args:
        dtype: a signed floating dtype.

    Returns:
        The number of significand bits, ``1 - log2(eps)``.

    Raises:
        TypeError: if ``dtype`` is not a torch.dtype.
        ValueError: if it is not a signed floating dtype.

    Example:
        >>> significand_bits(torch.bfloat16), significand_bits(torch.float16)
        (8, 11)
    """
    dtype = _check_float_dtype("dtype", dtype)
    return 1 - round(math.log2(_eps(dtype)))


def spacing(value: float, dtype: torch.dtype) -> float:
    """Gap between ``value`` and the next number above it that ``dtype`` holds.

    For a normal number ``v`` it is ``eps * 2**floor(log2 |v|)``; past the largest finite
    value of the format it is ``inf``.

    Args:
        value: a finite real number (its magnitude is used).
        dtype: a signed floating dtype.

    Returns:
        The spacing as a float.

    Raises:
        TypeError: if ``value`` is not a real number or ``dtype`` not a dtype.
        ValueError: if ``value`` is not finite or ``dtype`` not a signed floating dtype.

    Example:
        >>> spacing(256, torch.bfloat16), spacing(2048, torch.float16), spacing(1.0, torch.float32)
        (2.0, 2.0, 1.1920928955078125e-07)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"value must be a real number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value):
        raise ValueError(f"value must be finite, got value={value}")
    info = torch.finfo(_check_float_dtype("dtype", dtype))
    v = abs(value)
    if v > info.max:
        return math.inf
    exponent = math.frexp(max(v, info.smallest_normal))[1] - 1  # floor(log2 v)
    return _eps(dtype) * 2.0**exponent


def first_inexact_integer(dtype: torch.dtype) -> int:
    """The smallest positive integer that ``dtype`` cannot hold: ``2**bits + 1``.

    Args:
        dtype: a signed floating dtype.

    Returns:
        The integer (257 for bfloat16, 2049 for float16, 16777217 for float32).

    Raises:
        TypeError, ValueError: as :func:`significand_bits`.

    Example:
        >>> first_inexact_integer(torch.bfloat16)
        257
    """
    return 2 ** significand_bits(dtype) + 1


def stored_positions(positions, dtype: torch.dtype) -> torch.Tensor:
    """The positions as they come back after being stored in ``dtype``, in float64.

    Args:
        positions: integer positions ``[T]`` (int, sequence or integer tensor).
        dtype: a signed floating dtype.

    Returns:
        float64 ``[T]`` on the positions' device: rounded to the nearest value ``dtype``
        holds, ``inf`` past its largest finite value.

    Raises:
        TypeError, ValueError: for non-integer or empty positions or a bad dtype.

    Example:
        >>> stored_positions([255, 256, 257, 258], torch.bfloat16).tolist()
        [255.0, 256.0, 256.0, 258.0]
    """
    p = check_positions("positions", positions, nonnegative=False)
    dtype = _check_float_dtype("dtype", dtype)
    return p.to(F64).to(dtype).to(F64)


# --- angles computed in a given precision --------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """How an implementation computes RoPE's angles ``p * theta_i``.

    ``angle = round_angle( round_position(p) * round_freq(theta_i) )``: the position is
    stored in ``position_dtype``, the frequency in ``freq_dtype``, and their product is
    rounded to ``angle_dtype`` as torch code computes it: one IEEE multiplication in that
    dtype when all three agree; else the product in float64 (exact for the factors of
    :data:`RECIPES`, which hold at most 24 significant bits or a float64 angle), then
    torch's cast, which takes float64 to bfloat16 through float32 (two roundings, as in
    ``(p.float() * theta.float()).bfloat16()``).

    Attributes:
        position_dtype, freq_dtype, angle_dtype: signed floating dtypes.

    Raises:
        TypeError, ValueError: if a field is not a signed floating dtype.

    Example:
        >>> r = Recipe(torch.bfloat16, torch.float64, torch.float64)  # positions in bf16
        >>> recipe_angles([300], torch.tensor([1.0]), r).item()  # 300 is stored as 300
        300.0
        >>> recipe_angles([301], torch.tensor([1.0]), r).item()  # 301 is not
        300.0
    """

    position_dtype: torch.dtype
    freq_dtype: torch.dtype
    angle_dtype: torch.dtype

    def __post_init__(self):
        for name in ("position_dtype", "freq_dtype", "angle_dtype"):
            _check_float_dtype(name, getattr(self, name))


_BF, _FP, _F32 = torch.bfloat16, torch.float16, torch.float32
RECIPES = {
    "exact (fp64)": Recipe(F64, F64, F64),
    "fp32 angles": Recipe(_F32, _F32, _F32),
    "bf16 positions": Recipe(_BF, F64, F64),
    "bf16 inv_freq": Recipe(F64, _BF, F64),
    "bf16 angles": Recipe(_F32, _F32, _BF),
    "all bf16": Recipe(_BF, _BF, _BF),
    "fp16 positions": Recipe(_FP, F64, F64),
    "fp16 inv_freq": Recipe(F64, _FP, F64),
    "fp16 angles": Recipe(_F32, _F32, _FP),
    "all fp16": Recipe(_FP, _FP, _FP),
}
"""The recipes chapter 14 compares, by name.

``"exact (fp64)"`` is the reference; ``"fp32 angles"`` is the fix (integer positions and
frequencies turned into float32 only to multiply them, as ``posenc`` and transformers do);
the others hold one or all of the three quantities in bfloat16 or float16."""


def _recipe(recipe: object) -> Recipe:
    if isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, str):
        if recipe in RECIPES:
            return RECIPES[recipe]
        raise ValueError(f"recipe must be a Recipe or one of {sorted(RECIPES)}, got {recipe!r}")
    raise TypeError(f"recipe must be a Recipe or a name (str), got {type(recipe).__name__}")


def recipe_angles(positions, inv_freq: torch.Tensor, recipe) -> torch.Tensor:
    """RoPE's angles ``p * theta_i`` as ``recipe`` computes them, returned in float64.

    Args:
        positions: integer positions ``[T]`` (may be negative).
        inv_freq: frequencies ``[D/2]`` (any floating dtype; read as float64).
        recipe: a :class:`Recipe` or a key of :data:`RECIPES`.

    Returns:
        float64 ``[T, D/2]`` on the positions' device; ``inf`` where a position overflows
        the position dtype or the angle overflows the angle dtype.

    Raises:
        TypeError, ValueError: for bad positions, frequencies or recipe.

    Example:
        >>> f = torch.tensor([1.0, 0.75], dtype=torch.float64)
        >>> recipe_angles([257], f, "bf16 positions").tolist()
        [[256.0, 192.0]]
    """
    p = check_positions("positions", positions, nonnegative=False)
    f = _check_inv_freq(inv_freq)
    r = _recipe(recipe)
    p = p.to(F64).to(r.position_dtype).to(F64)  # [T]
    f = f.to(device=p.device, dtype=F64).to(r.freq_dtype).to(F64)  # [D/2]
    # factors of at most 24 significant bits (or a float64 angle): the float64 product is
    # exact, and the cast below rounds as torch code would
    return (p[:, None] * f[None, :]).to(r.angle_dtype).to(F64)


def _circle_errors(got: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """Largest distance on the circle over the last axis: ``[..., D/2] -> [...]`` in [0, pi].

    An angle that is not finite gives NaN in the wrap and ``inf`` in the result.
    """
    d = got - exact
    d -= torch.round(d / TWO_PI).mul_(TWO_PI)
    top = d.abs_().amax(dim=-1)
    return torch.where(torch.isnan(top), torch.inf, top)


def angle_errors(positions, inv_freq: torch.Tensor, recipe) -> torch.Tensor:
    """Largest angle error over the pairs, per position, against the float64 angles.

    Errors are taken modulo ``2 pi`` (an angle off by a whole turn is right), so they lie in
    ``[0, pi]``; ``inf`` marks a position whose angle overflowed.

    Args:
        positions: integer positions ``[T]``.
        inv_freq: frequencies ``[D/2]``.
        recipe: a :class:`Recipe` or a key of :data:`RECIPES`.

    Returns:
        float64 ``[T]``, radians.

    Raises:
        TypeError, ValueError: as :func:`recipe_angles`.

    Example:
        >>> f = torch.tensor([1.0, 0.75], dtype=torch.float64)
        >>> angle_errors([256, 257], f, "bf16 positions").tolist()
        [0.0, 1.0]
    """
    got = recipe_angles(positions, inv_freq, recipe)
    exact = recipe_angles(positions, inv_freq, RECIPES["exact (fp64)"])
    return _circle_errors(got, exact)


# --- effect on scores -----------------------------------------------------------------------


def _pairs_as_complex(x: torch.Tensor, layout: str) -> torch.Tensor:
    """``x[..., D]`` float64 -> complex ``[..., D/2]``, pair ``i`` as ``a + 1j b``."""
    return torch.complex(*_pairs(x, layout))


@same_device(copied=("positions", "inv_freq"))
def exact_rope(
    x: torch.Tensor,
    positions,
    inv_freq: torch.Tensor,
    recipe="exact (fp64)",
    *,
    layout: str = "interleaved",
) -> torch.Tensor:
    """RoPE in float64 with the angles of ``recipe``: only the angles carry rounding.

    Written independently of :func:`posenc.apply_rope`: each pair is a complex number,
    multiplied by ``exp(1j * angle)``. With the default recipe it is the float64 reference
    every other result is compared with.

    Args:
        x: head vectors ``[..., T, D]`` (read as float64).
        positions: integer positions ``[T]``.
        inv_freq: frequencies ``[D/2]``.
        recipe: a :class:`Recipe` or a key of :data:`RECIPES`.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        float64 ``[..., T, D]`` on ``x``'s device.

    Raises:
        TypeError, ValueError: for a bad ``x`` (odd ``D``, no positions, ``D/2`` not the
            length of ``inv_freq``), positions of the wrong length, a bad recipe or layout.

    Example:
        >>> x = torch.randn(3, 8, dtype=torch.float64)
        >>> torch.allclose(exact_rope(x, [0, 5, 9], rope_inv_freq(8)), apply_rope(x, [0, 5, 9]))
        True
    """
    check_tensor("x", x, min_dim=2)
    layout = check_layout(layout)
    f = _check_inv_freq(inv_freq)
    dim, length = x.shape[-1], x.shape[-2]
    if dim == 0 or dim % 2 or dim // 2 != f.numel():
        raise ValueError(
            f"x must have D = 2 * len(inv_freq) = {2 * f.numel()} features, got D={dim}"
        )
    p = check_positions("positions", positions, nonnegative=False)
    if p.numel() != length:
        raise ValueError(
            f"positions must have one entry per position (T={length}), got {p.numel()}"
        )
    angles = recipe_angles(p.to(x.device), f.to(x.device), recipe)  # [T, D/2]
    z = _pairs_as_complex(x.to(F64), layout) * torch.polar(torch.ones_like(angles), angles)
    return _join(z.real, z.imag, layout)


# --- the fix, and whether posenc follows it -------------------------------------------------


def accepted_dtypes(device: str | torch.device = "cpu") -> list[torch.dtype]:
    """The floating dtypes :func:`posenc.apply_rope` takes and gives back on ``device``.

    Every floating dtype of this torch build is tried on a small tensor; those that
    :func:`posenc.apply_rope` accepts and returns in the same dtype are listed, in order of
    precision (most significand bits last).

    Args:
        device: where to try (``"cpu"``, ``"cuda"``, a ``torch.device``).

    Returns:
        A list of dtypes (bfloat16, float16, float32, float64 and the signed float8 formats
        in recent torch builds).

    Raises:
        TypeError, ValueError: if ``device`` does not name a device.

    Example:
        >>> {torch.bfloat16, torch.float16, torch.float32, torch.float64} <= set(accepted_dtypes())
        True
    """
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a str or torch.device, got {device!r}")
    try:
        device = torch.device(device)
    except RuntimeError:
        raise ValueError(
            f"device must name a device such as 'cpu' or 'cuda', got {device!r}"
        ) from None
    found = {getattr(torch, n) for n in dir(torch) if isinstance(getattr(torch, n), torch.dtype)}
    ok = []
    x = torch.tensor([[1.0, -0.5], [0.25, 2.0]], device=device)
    for d in sorted(found, key=str):
        if not d.is_floating_point:
            continue
        try:
            out = apply_rope(x.to(d), torch.tensor([0, 3], device=device))
        except (TypeError, ValueError, RuntimeError, NotImplementedError):
            continue
        if out.dtype == d:
            ok.append(d)
    return sorted(ok, key=lambda d: (-_eps(d), str(d)))


def ulp(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Spacing of ``dtype`` at each of ``values``: ``eps * 2**floor(log2 |v|)``, float64.

    Below the smallest normal number the subnormal spacing is used.

    Args:
        values: a floating tensor of any shape (read as float64).
        dtype: a signed floating dtype.

    Returns:
        float64 tensor of the same shape.

    Raises:
        TypeError, ValueError: for a non-floating tensor or a bad dtype.

    Example:
        >>> ulp(torch.tensor([1.0, 3.0, 256.0]), torch.bfloat16).tolist()
        [0.0078125, 0.015625, 2.0]
    """
    check_tensor("values", values, min_dim=0)
    info = torch.finfo(_check_float_dtype("dtype", dtype))
    v = values.to(F64).abs().clamp_min(info.smallest_normal)
    return _eps(dtype) * torch.exp2(torch.floor(torch.log2(v)))


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype posenc computes RoPE in for an input of ``dtype`` (DESIGN section 4)."""
    return F64 if dtype == F64 else torch.float32


@same_device(copied=("positions", "inv_freq"))
def rope_error_bound(
    x: torch.Tensor,
    positions,
    inv_freq: torch.Tensor,
    dtype: torch.dtype,
    *,
    layout: str = "interleaved",
) -> torch.Tensor:
    """A bound on ``|apply_rope(x in dtype) - exact|`` per element, for the float32 recipe.

    With unit roundoff ``u`` of the compute dtype (float32, or float64 for float64 input),
    integer positions exact in it, and the frequencies rounded once, the angle
    ``round(p * round(theta))`` is off by at most ``(2u + u^2) |p| theta``; cos, sin and
    the rotation of the pair add at most ``8u`` relative to the pair's length ``r``. The
    result is then rounded once to ``dtype``: half its spacing. So per element

    ``bound = e + ulp_dtype(|exact| + e) / 2``, with ``e = r (3u |p| theta + 8u)``.

    Args:
        x: head vectors ``[T, D]`` already in ``dtype`` (read as float64).
        positions: integer positions ``[T]``.
        inv_freq: frequencies ``[D/2]``.
        dtype: the dtype of the result.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        float64 ``[T, D]``.

    Raises:
        TypeError, ValueError: for bad arguments.

    Example:
        >>> x = torch.ones(1, 2)
        >>> b = rope_error_bound(x, [0], torch.ones(1), torch.bfloat16)  # p = 0: no angle error
        >>> [round(v, 5) for v in b[0].tolist()]  # half the spacing 2**-7 at 1, plus 8u r
        [0.00391, 0.00391]
    """
    check_tensor("x", x, min_dim=2)
    dtype = _check_float_dtype("dtype", dtype)
    layout = check_layout(layout)
    exact = exact_rope(x, positions, inv_freq, layout=layout)  # validates the rest
    p = check_positions("positions", positions, nonnegative=False).to(x.device)
    return _bound(x, exact, p, inv_freq, dtype, layout)


def _bound(x, exact, p, inv_freq, dtype, layout) -> torch.Tensor:
    """:func:`rope_error_bound` for checked arguments and a known ``exact`` result."""
    u = torch.finfo(_compute_dtype(dtype)).eps / 2
    f = inv_freq.to(device=x.device, dtype=F64)
    radius = _pairs_as_complex(x.to(F64), layout).abs()  # [T, D/2]
    pair_err = radius * (3 * u * p.to(F64).abs()[:, None] * f + 8 * u)  # [T, D/2]
    e = _join(pair_err, pair_err, layout)  # [T, D], per element
    return e + ulp(exact.abs() + e, dtype) / 2


@dataclass(frozen=True)
class RopeCheck:
    """What :func:`check_apply_rope` found for one dtype.

    Attributes:
        dtype: the input dtype.
        layout: the layout checked.
        dtype_kept: the output has the input's dtype and device.
        within_bound: every element is within :func:`rope_error_bound`.
        max_error: largest ``|apply_rope - exact|``.
        rounding_step: half the spacing of ``dtype`` at the largest ``|exact|``: the error
            of rounding the exact answer to ``dtype`` can reach it, and no implementation
            returning ``dtype`` can promise less.
        max_naive: largest error when the angles, cos and sin are computed in ``dtype``
            itself (``nan`` where that overflows; None for dtypes torch cannot compute in).
        angle_part: largest angle term ``3u |p| theta`` of the bound, in radians.
    """

    dtype: torch.dtype
    layout: str
    dtype_kept: bool
    within_bound: bool
    max_error: float
    rounding_step: float
    max_naive: float | None
    angle_part: float


def _naive_rope(x: torch.Tensor, p: torch.Tensor, f: torch.Tensor, layout: str) -> torch.Tensor:
    """RoPE computed entirely in ``x``'s dtype (the bug), interleaved or half."""
    d = x.dtype
    angles = p.to(d)[:, None] * f.to(device=x.device, dtype=d)[None, :]  # [T, D/2] in dtype
    cos, sin = angles.cos(), angles.sin()
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    a, b = x.chunk(2, dim=-1)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def check_apply_rope(
    x: torch.Tensor,
    positions,
    dtype: torch.dtype,
    *,
    inv_freq: torch.Tensor | None = None,
    layout: str = "interleaved",
) -> RopeCheck:
    """Run :func:`posenc.apply_rope` on ``x`` cast to ``dtype`` and measure it against float64.

    The reference is :func:`exact_rope` of the same rounded input, so only the work of
    ``apply_rope`` is measured.

    Args:
        x: head vectors ``[T, D]`` (any floating dtype, any device).
        positions: integer positions ``[T]``.
        dtype: the dtype to run ``apply_rope`` in (e.g. from :func:`accepted_dtypes`).
        inv_freq: frequencies ``[D/2]``; default ``rope_inv_freq(D)``.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        A :class:`RopeCheck`.

    Raises:
        TypeError, ValueError: for bad arguments.

    Example:
        >>> x = torch.randn(4, 8)
        >>> c = check_apply_rope(x, [0, 1, 500, 70000], torch.bfloat16)
        >>> c.dtype_kept, c.within_bound, c.max_error <= c.rounding_step
        (True, True, True)
    """
    check_tensor("x", x, min_dim=2)
    if x.dim() != 2:
        raise ValueError(f"x must be [T, D], got shape {tuple(x.shape)}")
    dtype = _check_float_dtype("dtype", dtype)
    layout = check_layout(layout)
    if inv_freq is None:
        check_even_dim("x.shape[-1]", x.shape[-1])
        inv_freq = rope_inv_freq(x.shape[-1])
    xd = x.to(dtype)
    exact = exact_rope(xd, positions, inv_freq, layout=layout)  # validates the rest
    p = check_positions("positions", positions, nonnegative=False).to(x.device)
    out = apply_rope(xd, p, inv_freq=inv_freq, layout=layout)
    kept = out.dtype == dtype and out.device == xd.device
    err = (out.to(F64) - exact).abs()
    bound = _bound(xd, exact, p, inv_freq, dtype, layout)
    try:
        naive = _naive_rope(xd, p, inv_freq, layout).to(F64)
        diff = (naive - exact).abs()
        max_naive = torch.nan if bool(diff.isnan().any()) else diff.max().item()
    except (RuntimeError, NotImplementedError):  # no arithmetic in this dtype (float8)
        max_naive = None
    u = torch.finfo(_compute_dtype(dtype)).eps / 2
    angle_part = (3 * u * p.abs().max().to(F64) * inv_freq.to(F64).max()).item()
    return RopeCheck(
        dtype=dtype,
        layout=layout,
        dtype_kept=bool(kept),
        within_bound=bool((err <= bound).all()),
        max_error=err.max().item(),
        rounding_step=(ulp(exact.abs().max(), dtype) / 2).item(),
        max_naive=max_naive,
        angle_part=angle_part,
    )
