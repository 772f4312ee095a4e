"""Looking at the sinusoidal encoding: references, tables, figures and the playground of chapter 5.

The encoding itself lives in :mod:`posenc.encodings`; this module holds what the chapter
uses to check and to see it:

- :func:`naive_sinusoidal_encoding`, a loop over positions and pairs in plain Python floats,
  the independent reference for :func:`posenc.encodings.sinusoidal_encoding`;
- :func:`direct_frequencies` and :func:`log_space_frequencies`, the two ways of writing
  ``base**(-2i/D)``, and :func:`compare_frequency_forms`, which measures them in a low
  precision dtype against float64;
- :func:`wavelengths`, :func:`wavelength_table` and :func:`wavelength_range_table`;
- :func:`step_norms`, :func:`sinusoidal_step_norm`, :func:`offset_dot_products` and
  :func:`dot_product_closed_form`: the distance between neighbours and the dot product of
  two positions, measured and in closed form;
- figures: :func:`encoding_heatmap`, :func:`sinusoidal_heatmap`, :func:`playground`
  (live sliders), :func:`stepped_animation`, :func:`step_figure`, :func:`dot_product_figure`;
- :func:`fit_position_classifier`, a tiny training run that shows what happens to the rows
  of a learned position table that training never visits.

Shapes: ``T`` positions, ``D`` features (``D/2`` sine/cosine pairs), ``K`` offsets.
"""

from __future__ import annotations

import math

import matplotlib as mpl
import torch
from torch import nn

from posenc._validate import (
    check_base,
    check_even_dim,
    check_float_dtype,
    check_int,
    check_int_sequence,
    check_positions,
    check_positive_float,
    check_sequence,
    check_tensor,
)
from posenc.display import plots
from posenc.display.table import Table
from posenc.encodings import (
    LearnedPositionalEmbedding,
    binary_encoding,
    sinusoidal_encoding,
    sinusoidal_frequencies,
)

__all__ = [
    "compare_frequency_forms",
    "direct_frequencies",
    "dot_product_closed_form",
    "dot_product_figure",
    "encoding_heatmap",
    "fit_position_classifier",
    "frequency_forms_table",
    "log_space_frequencies",
    "naive_sinusoidal_encoding",
    "offset_dot_products",
    "playground",
    "sinusoidal_heatmap",
    "sinusoidal_step_norm",
    "step_figure",
    "step_norms",
    "stepped_animation",
    "wavelength_range_table",
    "wavelength_table",
    "wavelengths",
]

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def naive_sinusoidal_encoding(num_positions: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The sinusoidal encoding written as two loops over Python floats (float64).

    Entry by entry, straight from the formula ``PE[p, 2i] = sin(p / base**(2i/D))`` and
    ``PE[p, 2i+1] = cos(p / base**(2i/D))``, with ``math.sin`` and ``math.cos``: no
    vectorisation, no shared code with :func:`posenc.encodings.sinusoidal_encoding`.
    Slow (``T * D`` Python operations); meant as a reference for small sizes.

    Args:
        num_positions: positions ``0 .. T-1``.
        dim: features ``D`` (even).
        base: the base of the wavelengths.

    Returns:
        float64 ``[T, D]``.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``num_positions < 1``, ``dim`` is not positive and even, or
            ``base`` is not finite or below 2**-64.

    Example:
        >>> naive_sinusoidal_encoding(2, 2)
        tensor([[0.0000, 1.0000],
                [0.8415, 0.5403]], dtype=torch.float64)
    """
    check_int("num_positions", num_positions, minimum=1)
    check_even_dim("dim", dim)
    base = check_base("base", base)
    rows = []
    for p in range(num_positions):
        row = []
        for i in range(dim // 2):
            angle = p / base ** (2 * i / dim)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


def _check_float_dtype(dtype: object) -> torch.dtype:
    if dtype not in _FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {_FLOAT_DTYPES}, got dtype={dtype}")
    return dtype


def direct_frequencies(dim: int, base: float = 10000.0, *, dtype=torch.float32) -> torch.Tensor:
    """Frequencies ``1 / base**(2i/D)``, with the power computed in ``dtype``.

    This is the formula as it is printed: raise the base to the exponent, then divide. The
    intermediate ``base**(2i/D)`` grows up to almost ``base``, so it overflows to ``inf``
    when the base does not fit in ``dtype`` (float16 stops at 65504).

    Args:
        dim: features ``D`` (even).
        base: the base of the wavelengths.
        dtype: one of float16, bfloat16, float32, float64.

    Returns:
        ``[D/2]`` frequencies in ``dtype``, on the CPU.

    Raises:
        TypeError: if ``dim`` or ``base`` has the wrong type.
        ValueError: if ``dim`` is not positive and even, ``base`` not finite or below 2**-64,
            or ``dtype`` not a floating dtype listed above.

    Example:
        >>> direct_frequencies(4, base=100.0)
        tensor([1.0000, 0.1000])
        >>> direct_frequencies(4, base=500000.0, dtype=torch.float16)  # base is inf in float16
        tensor([1., 0.], dtype=torch.float16)
    """
    check_even_dim("dim", dim)
    base = check_base("base", base)
    dtype = _check_float_dtype(dtype)
    exponent = torch.arange(0, dim, 2, dtype=dtype) / dim  # 2i/D, [D/2]
    return 1.0 / torch.tensor(base, dtype=dtype) ** exponent


def log_space_frequencies(dim: int, base: float = 10000.0, *, dtype=torch.float32) -> torch.Tensor:
    """Frequencies ``exp(-(2i/D) ln base)``: one ``exp`` of an ``arange``, in ``dtype``.

    The same numbers as ``base**(-2i/D)`` in exact arithmetic. ``ln base`` is taken in
    Python (float64); the product and the ``exp`` run in ``dtype``. The largest
    intermediate is ``2i`` itself (below ``D``), never the base: nothing overflows, whatever
    the base.

    Args:
        dim: features ``D`` (even).
        base: the base of the wavelengths.
        dtype: one of float16, bfloat16, float32, float64.

    Returns:
        ``[D/2]`` frequencies in ``dtype``, on the CPU.

    Raises:
        TypeError: if ``dim`` or ``base`` has the wrong type.
        ValueError: if ``dim`` is not positive and even, ``base`` not finite or below 2**-64,
            or ``dtype`` not a floating dtype listed above.

    Example:
        >>> log_space_frequencies(4, base=100.0, dtype=torch.float64)
        tensor([1.0000, 0.1000], dtype=torch.float64)
        >>> log_space_frequencies(4, base=500000.0, dtype=torch.float16)
        tensor([1.0000, 0.0014], dtype=torch.float16)
    """
    check_even_dim("dim", dim)
    base = check_base("base", base)
    dtype = _check_float_dtype(dtype)
    return torch.exp(torch.arange(0, dim, 2, dtype=dtype) * (-math.log(base) / dim))


def compare_frequency_forms(dim: int, base: float = 10000.0, *, dtype=torch.float16) -> dict:
    """Measure the direct and the log-space frequencies in ``dtype`` against float64.

    Args:
        dim: features ``D`` (even).
        base: the base of the wavelengths.
        dtype: the dtype both forms are computed in.

    Returns:
        A dict with

        - ``"overflow"``: how many of the ``D/2`` powers ``base**(2i/D)`` are ``inf``;
        - ``"direct_zeros"``, ``"log_zeros"``: frequencies that came out exactly 0;
        - ``"direct_error"``, ``"log_error"``: largest relative error of each form against
          :func:`posenc.encodings.sinusoidal_frequencies` in float64 (a float).

    Raises:
        TypeError: if ``dim`` or ``base`` has the wrong type.
        ValueError: as :func:`direct_frequencies`.

    Example:
        >>> r = compare_frequency_forms(8, base=500000.0, dtype=torch.float16)
        >>> r["overflow"], r["direct_zeros"], r["log_zeros"]
        (3, 3, 0)
    """
    direct = direct_frequencies(dim, base, dtype=dtype)
    log_space = log_space_frequencies(dim, base, dtype=dtype)
    reference = sinusoidal_frequencies(dim, base, dtype=torch.float64)
    exponent = torch.arange(0, dim, 2, dtype=dtype) / dim
    power = torch.tensor(base, dtype=dtype) ** exponent  # [D/2], the direct form's intermediate

    def error(w: torch.Tensor) -> float:
        return ((w.double() - reference).abs() / reference).max().item()

    return {
        "overflow": int(torch.isinf(power).sum()),
        "direct_zeros": int((direct == 0).sum()),
        "log_zeros": int((log_space == 0).sum()),
        "direct_error": error(direct),
        "log_error": error(log_space),
    }


def frequency_forms_table(
    dims=(128, 512), bases=(10000.0, 500000.0), dtypes=(torch.float16, torch.float32)
) -> Table:
    """:func:`compare_frequency_forms` for every dtype, base and ``D``, as one table.

    Args:
        dims: feature sizes ``D`` (each positive and even).
        bases: bases of the wavelengths (each finite and at least 2**-64).
        dtypes: the dtypes both forms are computed in (float16, bfloat16, float32,
            float64).

    Returns:
        A :class:`posenc.display.table.Table`, one row per ``(dtype, base, D)``: the powers
        ``base**(2i/D)`` that are infinite, the frequencies that came out 0 in each form,
        and each form's largest relative error against float64.

    Raises:
        TypeError: if an argument is not a sequence, or an entry has the wrong type.
        ValueError: if a sequence is empty, a ``D`` is not positive and even, a base not
            positive and finite, or a dtype not one listed above.

    Example:
        >>> table = frequency_forms_table([8], [500000.0], [torch.float16])
        >>> table.columns[3:]
        ['powers at inf', 'zeros, direct', 'zeros, log', 'error, direct', 'error, log']
        >>> table.rows  # 3 of the 4 powers overflow, and those frequencies come out 0
        [['float16', '5e+05', '8', '3', '3', '0', '1e+00', '3e-03']]
    """
    dims = check_int_sequence("dims", dims)
    for i, d in enumerate(dims):
        check_even_dim(f"dims[{i}]", d)
    bases = check_sequence("bases", bases)
    bases = [check_base(f"bases[{i}]", b) for i, b in enumerate(bases)]
    dtypes = check_sequence("dtypes", dtypes)
    dtypes = [check_float_dtype(f"dtypes[{i}]", t, _FLOAT_DTYPES) for i, t in enumerate(dtypes)]
    rows = []
    for dtype in dtypes:
        for base in bases:
            for d in dims:
                r = compare_frequency_forms(d, base, dtype=dtype)
                rows.append(
                    [
                        str(dtype).removeprefix("torch."),
                        f"{base:.0e}",
                        d,
                        r["overflow"],
                        r["direct_zeros"],
                        r["log_zeros"],
                        f"{r['direct_error']:.0e}",
                        f"{r['log_error']:.0e}",
                    ]
                )
    return Table(
        [
            "dtype",
            "base",
            "D",
            "powers at inf",
            "zeros, direct",
            "zeros, log",
            "error, direct",
            "error, log",
        ],
        rows,
        caption="Frequencies computed directly and in log space, compared with float64.",
    )


def wavelengths(dim: int, base: float = 10000.0) -> torch.Tensor:
    """Wavelength of each pair, ``2 pi / w_i = 2 pi base**(2i/D)``, in positions (float64).

    Args:
        dim: features ``D`` (even).
        base: the base of the wavelengths.

    Returns:
        float64 ``[D/2]``, growing geometrically from ``2 pi`` by a factor ``base**(2/D)``.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``dim`` is not positive and even or ``base`` not finite or below 2**-64.

    Example:
        >>> wavelengths(4, base=100.0)
        tensor([ 6.2832, 62.8319], dtype=torch.float64)
    """
    return 2 * math.pi / sinusoidal_frequencies(dim, base, dtype=torch.float64)


def wavelength_table(dim: int, base: float = 10000.0, *, every: int = 1) -> Table:
    """A captioned table of pair index, exponent, frequency and wavelength for one ``D``.

    Args:
        dim: features ``D`` (even).
        base: the base of the wavelengths.
        every: list every ``every``-th pair; the last pair is always listed.

    Returns:
        A :class:`posenc.display.table.Table` (HTML in a notebook, aligned text when printed), one
        row per listed pair, numbers rounded to 4 significant digits.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``dim`` is not positive and even, ``base`` not finite or below 2**-64,
            or ``every < 1``.

    Example:
        >>> print(wavelength_table(4, base=100.0))
        Frequency and wavelength of every pair, D = 4, base = 100.
        pair i  exponent 2i/D  frequency (rad/position)  wavelength (positions)
             0          0.000                         1                   6.283
             1          0.500                       0.1                   62.83
    """
    check_even_dim("dim", dim)
    base = check_base("base", base)
    check_int("every", every, minimum=1)
    w = sinusoidal_frequencies(dim, base)
    lam = wavelengths(dim, base)
    pairs = list(range(0, dim // 2, every))
    if pairs[-1] != dim // 2 - 1:
        pairs.append(dim // 2 - 1)
    which = "every pair" if every == 1 else f"every {_ordinal(every)} pair and the last"
    return Table(
        ["pair i", "exponent 2i/D", "frequency (rad/position)", "wavelength (positions)"],
        [[i, f"{2 * i / dim:.3f}", f"{w[i].item():.4g}", f"{lam[i].item():.4g}"] for i in pairs],
        caption=f"Frequency and wavelength of {which}, D = {dim}, base = {base:g}.",
    )


def _ordinal(n: int) -> str:
    """``2 -> "2nd"``, ``8 -> "8th"``, ``21 -> "21st"``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def wavelength_range_table(dims=(128, 512), base: float = 10000.0) -> str:
    """First and last wavelength for several ``D``: computed, exact, and ``2 pi base``.

    "Computed" is :func:`wavelengths`; "exact" is the closed form ``2 pi base**((D-2)/D)``
    in Python floats; ``2 pi base`` is the value the last pair only approaches as ``D``
    grows (the exponent never reaches 1).

    Args:
        dims: feature sizes ``D`` (each positive and even).
        base: the base of the wavelengths.

    Returns:
        The table, one line per ``D``, rounded to 1 decimal.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``dims`` is empty, a ``D`` not positive and even, or ``base`` not
            positive and finite.

    Example:
        >>> print(wavelength_range_table([4], base=100.0))
           D  first (2 pi)  last, computed  2 pi base^((D-2)/D)  2 pi base
           4           6.3            62.8                 62.8      628.3
    """
    if isinstance(dims, (list, tuple)) and not dims:
        raise ValueError(f"dims must name at least one feature size D, got none: {dims!r}")
    dims = check_int_sequence("dims", dims)
    base = check_base("base", base)
    lines = [
        f"{'D':>4} {'first (2 pi)':>13} {'last, computed':>15} "
        f"{'2 pi base^((D-2)/D)':>20} {'2 pi base':>10}"
    ]
    for d in dims:
        lam = wavelengths(d, base)
        exact = 2 * math.pi * base ** ((d - 2) / d)
        lines.append(
            f"{d:>4} {lam[0].item():>13.1f} {lam[-1].item():>15.1f} "
            f"{exact:>20.1f} {2 * math.pi * base:>10.1f}"
        )
    return "\n".join(lines)


def step_norms(encoding: torch.Tensor) -> torch.Tensor:
    """Distance between the encodings of neighbouring positions, ``||E[p+1] - E[p]||``.

    Args:
        encoding: ``[T, D]``, row ``p`` the vector of position ``p``, ``T >= 2``.

    Returns:
        ``[T-1]``, entry ``p`` the Euclidean norm of ``E[p+1] - E[p]``.

    Raises:
        TypeError: if ``encoding`` is not a floating tensor.
        ValueError: if it is not 2-D or has fewer than 2 rows.

    Example:
        >>> step_norms(binary_encoding([0, 1, 2, 3], 2))  # 0->1 flips 1 bit, 1->2 flips 2
        tensor([1.0000, 1.4142, 1.0000])
    """
    e = _check_encoding("encoding", encoding)
    if e.shape[0] < 2:
        raise ValueError(f"encoding needs at least 2 positions, got shape {tuple(e.shape)}")
    return (e[1:] - e[:-1]).norm(dim=-1)


def sinusoidal_step_norm(dim: int, base: float = 10000.0) -> float:
    """The closed form of the sinusoidal step: ``sqrt(sum_i 4 sin^2(w_i / 2))``.

    Each pair moves along its circle by an angle ``w_i``, a chord of length
    ``2 sin(w_i / 2)``; the pairs are orthogonal, so the squares add. Nothing depends on
    ``p``.

    Args:
        dim: features ``D`` (even).
        base: the base of the wavelengths.

    Returns:
        The step length, a float.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``dim`` is not positive and even or ``base`` not finite or below 2**-64.

    Example:
        >>> round(sinusoidal_step_norm(2), 6)  # one pair turning 1 radian: 2 sin(1/2)
        0.958851
    """
    w = sinusoidal_frequencies(dim, base)
    return (4 * torch.sin(w / 2) ** 2).sum().sqrt().item()


def offset_dot_products(encoding: torch.Tensor, max_offset: int) -> torch.Tensor:
    """Dot products ``E[p] . E[p+k]`` for every start ``p`` and offset ``k = 0 .. max_offset``.

    Args:
        encoding: ``[T, D]``, with ``T > max_offset``.
        max_offset: the largest offset ``K``.

    Returns:
        ``[T-K, K+1]``, entry ``[p, k]`` is ``E[p] . E[p+k]``; in ``encoding``'s dtype and
        device.

    Raises:
        TypeError: if ``encoding`` is not a floating tensor or ``max_offset`` not an int.
        ValueError: if ``encoding`` is not 2-D, ``max_offset < 0`` or ``T <= max_offset``.

    Example:
        >>> offset_dot_products(torch.eye(3), 1)
        tensor([[1., 0.],
                [1., 0.]])
    """
    e = _check_encoding("encoding", encoding)
    check_int("max_offset", max_offset, minimum=0)
    t = e.shape[0]
    if t <= max_offset:
        raise ValueError(f"encoding needs more than max_offset={max_offset} positions, got T={t}")
    starts = t - max_offset
    later = e.unfold(0, max_offset + 1, 1)  # [T-K, D, K+1]: later[p, :, k] = E[p+k]
    return torch.einsum("pd,pdk->pk", e[:starts], later)


def dot_product_closed_form(offsets, dim: int, base: float = 10000.0) -> torch.Tensor:
    """``PE(p) . PE(p+k) = sum_i cos(w_i k)``: the sinusoidal dot product, free of ``p``.

    From ``sin a sin b + cos a cos b = cos(b - a)`` applied to each pair.

    Args:
        offsets: integer offsets ``k`` (an int, a list or an integer tensor; may be
            negative).
        dim: features ``D`` (even).
        base: the base of the wavelengths.

    Returns:
        float64 ``[K]``, one value per offset.

    Raises:
        TypeError: if ``offsets`` are not integers or ``dim``/``base`` have the wrong type.
        ValueError: if ``offsets`` is empty or not 1-D, ``dim`` not positive and even, or
            ``base`` not finite or below 2**-64.

    Example:
        >>> dot_product_closed_form([0, 1], 2)  # one pair: cos(0), cos(1)
        tensor([1.0000, 0.5403], dtype=torch.float64)
    """
    k = check_positions("offsets", offsets, nonnegative=False).to(torch.float64)
    w = sinusoidal_frequencies(dim, base)  # [D/2]
    return torch.cos(k[:, None] * w).sum(-1)  # [K]


def _check_encoding(name: str, encoding: object) -> torch.Tensor:
    e = check_tensor(name, encoding, min_dim=2)
    if e.dim() != 2:
        raise ValueError(f"{name} must be 2-D [T, D], got shape {tuple(e.shape)}")
    return e


def encoding_heatmap(
    encoding: torch.Tensor, *, ax=None, title: str = "", limit=None, xlabel: str = "feature"
):
    """Draw a ``[T, D]`` encoding as a heat map: positions down, features across.

    Args:
        encoding: ``[T, D]``.
        ax: axes to draw into; a new figure when None.
        title: axes title.
        limit: the colour scale runs over ``[-limit, limit]``; the largest absolute entry
            when None.
        xlabel: label of the feature axis.

    Returns:
        The axes.

    Raises:
        TypeError: if ``encoding`` is not a floating tensor.
        ValueError: if it is not 2-D, or ``limit`` is not positive.

    Example:
        >>> ax = encoding_heatmap(torch.zeros(3, 4))
        >>> import matplotlib.pyplot as plt
        >>> plt.close(ax.figure)
    """
    e = _check_encoding("encoding", encoding).detach().float().cpu()
    if limit is None:
        limit = max(e.abs().max().item(), 1e-12)
    else:
        limit = check_positive_float("limit", limit)
    if ax is None:
        _, ax = plots.figure(height=3.6)
    with mpl.rc_context(plots.STYLE):
        image = ax.imshow(
            e.numpy(),
            aspect="auto",
            cmap=plots.DIVERGING,
            vmin=-limit,
            vmax=limit,
            interpolation="nearest",
        )
        ax.grid(False)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("position")
        ax.figure.colorbar(image, ax=ax, shrink=0.85)
        ax.set_title(title)
    return ax


def sinusoidal_heatmap(num_positions: int = 100, dim: int = 128, base: float = 10000.0, *, ax=None):
    """The sinusoidal encoding as a heat map, for given ``T``, ``D`` and base.

    Fast pairs (left) flicker from row to row; slow pairs (right) hardly change over the
    rows shown.

    Args:
        num_positions: positions ``T`` (rows).
        dim: features ``D`` (columns, even).
        base: the base of the wavelengths.
        ax: axes to draw into; a new figure when None.

    Returns:
        The axes.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: as :func:`posenc.encodings.sinusoidal_encoding`.

    Example:
        >>> ax = sinusoidal_heatmap(10, 8)
        >>> ax.get_title()
        'T = 10, D = 8, base = 10000'
        >>> import matplotlib.pyplot as plt
        >>> plt.close(ax.figure)
    """
    pe = sinusoidal_encoding(num_positions, dim, base)  # [T, D]
    return encoding_heatmap(
        pe,
        ax=ax,
        title=f"T = {num_positions}, D = {dim}, base = {base:g}",
        limit=1.0,
        xlabel="feature (sin, cos, sin, cos, ...)",
    )


def playground(num_positions: int = 100, dim: int = 128, base: float = 10000.0):
    """Live sliders for :func:`sinusoidal_heatmap` (Jupyter or Colab, with a kernel).

    Three sliders: positions ``T`` (10 to 400), features ``D`` (4 to 512, even) and the
    base (10 to 10^6, on a log scale). Each change redraws the heat map. In the static
    HTML book there is no kernel to call, so the chapter shows a fixed heat map as well.

    Args:
        num_positions, dim, base: the sliders' starting values.

    Returns:
        The drawing function as ``ipywidgets.interact`` returns it (already displayed);
        its ``.widget`` holds the three sliders.

    Raises:
        TypeError: if a starting value has the wrong type.
        ValueError: if a starting value is outside its slider's range, or ``dim`` is odd.
    """
    check_int("num_positions", num_positions, minimum=10)
    if num_positions > 400:
        raise ValueError(f"num_positions must be at most 400, got num_positions={num_positions}")
    check_even_dim("dim", dim)
    if not 4 <= dim <= 512:
        raise ValueError(f"dim must be in 4 .. 512, got dim={dim}")
    base = check_base("base", base)
    if not 10 <= base <= 1e6:
        raise ValueError(f"base must be in 10 .. 1e6, got base={base}")
    import ipywidgets as widgets

    def draw(num_positions: int, dim: int, base: float) -> None:
        fig, ax = plots.figure(height=3.8)
        sinusoidal_heatmap(num_positions, dim, base, ax=ax)
        plots.show(fig)

    return widgets.interact(
        draw,
        num_positions=widgets.IntSlider(
            value=num_positions,
            min=10,
            max=400,
            step=10,
            description="positions T",
            continuous_update=False,
        ),
        dim=widgets.IntSlider(
            value=dim,
            min=4,
            max=512,
            step=2,
            description="features D",
            continuous_update=False,
        ),
        base=widgets.FloatLogSlider(
            value=base,
            base=10,
            min=1,
            max=6,
            step=0.25,
            description="base",
            continuous_update=False,
        ),
    )


def stepped_animation(
    num_frames: int = 32, dim: int = 16, base: float = 10000.0, *, dpi: int = plots.CSS_DPI
):
    """Animate position ``p = 0, 1, ...``: its bits beside its sinusoidal vector.

    Left, the ``D`` bits of ``p`` (least significant first); right, the ``D`` features of
    ``PE(p)``, sines and cosines in two colours with wavelengths growing to the right. In
    both, the left features change fast and the right ones slowly; the bits jump, the
    sinusoids glide. The player opens at position ``num_frames // 3`` (10 for 32 frames,
    with bits and sinusoids already spread out) and loops round from there.

    Args:
        num_frames: positions shown, ``0 .. num_frames-1`` (1 to 40).
        dim: features ``D`` of both encodings (even, at most 62).
        base: the base of the wavelengths.
        dpi: resolution of the frames (20 to 100); the default draws them at the CSS size
            of the book's figures (``posenc.display.plots.CSS_DPI``).

    Returns:
        A ``matplotlib.animation.FuncAnimation``; show it with
        :func:`posenc.display.plots.animation_html`.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``num_frames`` is outside ``1 .. 40``, ``dim`` is not positive, even
            and at most 62, ``base`` not finite or below 2**-64, or ``dpi`` outside
            ``20 .. 100``.

    Example:
        >>> anim = stepped_animation(6, 4, dpi=20)
        >>> list(anim.new_frame_seq())  # opens at position 2
        [2, 3, 4, 5, 0, 1]
        >>> html = plots.animation_html(anim)  # renders, then closes
        >>> html.data.count("data:image/png")
        6
    """
    from matplotlib.animation import FuncAnimation

    check_int("num_frames", num_frames, minimum=1)
    if num_frames > 40:
        raise ValueError(f"num_frames must be at most 40, got num_frames={num_frames}")
    check_even_dim("dim", dim)
    if dim > 62:
        raise ValueError(f"dim must be at most 62 (bits of a position), got dim={dim}")
    base = check_base("base", base)
    check_int("dpi", dpi, minimum=20)
    if dpi > plots.CSS_DPI:
        raise ValueError(f"dpi must be at most {plots.CSS_DPI}, got dpi={dpi}")

    bits = binary_encoding(torch.arange(num_frames), dim)  # [T, D]
    sines = sinusoidal_encoding(num_frames, dim, base)  # [T, D]
    fig, (ax_b, ax_s) = plots.figure(1, 2, height=2.6, dpi=dpi)
    features = range(dim)
    sin_cos = [plots.COLORS["blue"], plots.COLORS["orange"]] * (dim // 2)
    with mpl.rc_context(plots.STYLE):
        bars_b = ax_b.bar(features, bits[num_frames // 3].numpy(), color=plots.COLORS["ink"])
        bars_s = ax_s.bar(features, sines[num_frames // 3].numpy(), color=sin_cos)
        ax_b.set_title("binary, least significant bit first")
        ax_s.set_title("sinusoidal (blue sin, orange cos)")
        for ax in (ax_b, ax_s):
            ax.set_ylim(-1.1, 1.1)
            ax.set_xticks(range(0, dim, max(1, dim // 4)))
            ax.set_yticks([-1, 0, 1], [] if ax is ax_s else ["-1", "0", "1"])
            ax.grid(False)
            ax.axhline(0, color=plots.COLORS["grey"], lw=0.8)
            ax.set_xlabel("feature")
        first = num_frames // 3
        label = fig.suptitle(f"position {first} = {first:b} in binary")
        # Lay the figure out once; redoing it for every frame would triple the drawing time.
        fig.canvas.draw()
        fig.set_layout_engine(None)  # nor an extra draw per frame when saved

    def update(p: int):
        for bar, h in zip(bars_b, bits[p].tolist(), strict=True):
            bar.set_height(h)
        for bar, h in zip(bars_s, sines[p].tolist(), strict=True):
            bar.set_height(h)
        label.set_text(f"position {p} = {p:b} in binary")
        return [*bars_b, *bars_s, label]

    order = [(first + j) % num_frames for j in range(num_frames)]
    return FuncAnimation(fig, update, frames=order, interval=400, blit=False)


def step_figure(num_positions: int = 64, dim: int = 16, base: float = 10000.0):
    """Plot ``||E(p+1) - E(p)||`` against ``p`` for the binary and sinusoidal encodings.

    Args:
        num_positions: positions ``T`` (at least 2, at most ``2**dim``).
        dim: features ``D`` of both encodings (even, at most 62).
        base: the base of the wavelengths.

    Returns:
        ``(fig, ax)``.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``num_positions < 2`` or does not fit in ``dim`` bits, or as
            :func:`posenc.encodings.sinusoidal_encoding`.

    Example:
        >>> fig, ax = step_figure(8, 4)
        >>> import matplotlib.pyplot as plt
        >>> plt.close(fig)
    """
    check_int("num_positions", num_positions, minimum=2)
    check_even_dim("dim", dim)
    binary = step_norms(binary_encoding(torch.arange(num_positions), dim))
    smooth = step_norms(sinusoidal_encoding(num_positions, dim, base))
    fig, ax = plots.figure(height=3.2)
    with mpl.rc_context(plots.STYLE):
        ax.step(range(num_positions - 1), binary.numpy(), where="mid", label="binary")
        ax.plot(range(num_positions - 1), smooth.numpy(), lw=2, label="sinusoidal")
        ax.set_xlabel("p")
        ax.set_ylabel("||E(p+1) - E(p)||")
        ax.set_ylim(0, None)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncols=2)
        ax.set_title(f"distance from one position to the next, D = {dim}")
    return fig, ax


def dot_product_figure(
    dim: int = 128, base: float = 10000.0, *, max_offset: int = 200, starts=(0, 100, 1000)
):
    """Plot ``PE(p) . PE(p+k)`` against ``k`` for a few ``p``, over the closed form.

    Args:
        dim: features ``D`` (even).
        base: the base of the wavelengths.
        max_offset: largest offset ``k`` drawn.
        starts: the positions ``p`` drawn (non-negative ints).

    Returns:
        ``(fig, ax)``.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``max_offset < 1``, ``starts`` is empty or holds a negative value,
            or as :func:`posenc.encodings.sinusoidal_encoding`.

    Example:
        >>> fig, ax = dot_product_figure(8, max_offset=4, starts=[0, 2])
        >>> import matplotlib.pyplot as plt
        >>> plt.close(fig)
    """
    check_int("max_offset", max_offset, minimum=1)
    if isinstance(starts, (list, tuple)) and not starts:
        raise ValueError(f"starts must name at least one position p, got none: {starts!r}")
    starts = check_int_sequence("starts", starts, minimum=0)
    pe = sinusoidal_encoding(max(starts) + max_offset + 1, dim, base).double()
    k = torch.arange(max_offset + 1)
    fig, ax = plots.figure(height=3.4)
    styles = ["-", "--", ":", "-."]
    with mpl.rc_context(plots.STYLE):
        for n, p in enumerate(starts):
            dots = pe[p + k] @ pe[p]  # [K+1]
            ax.plot(k.numpy(), dots.numpy(), styles[n % 4], lw=2.2 - 0.4 * n, label=f"p = {p}")
        closed = dot_product_closed_form(k, dim, base)
        ax.plot(
            k.numpy(),
            closed.numpy(),
            "o",
            ms=3,
            markevery=max(1, max_offset // 40),
            color=plots.COLORS["ink"],
            label=r"$\sum_i \cos(\omega_i k)$",
        )
        ax.set_xlabel("offset k")
        ax.set_ylabel("PE(p) . PE(p+k)")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=len(starts) + 1)
        ax.set_title(f"dot product of two positions, D = {dim}, base = {base:g}")
    return fig, ax


def fit_position_classifier(
    table: LearnedPositionalEmbedding,
    train_length: int,
    *,
    steps: int = 200,
    lr: float = 1.0,
    seed: int = 0,
) -> nn.Linear:
    """Train ``table`` (in place) and a linear read-out to tell positions ``0 .. L-1`` apart.

    The task stands in for any training on sequences of length ``L``: every step looks up
    the rows of positions ``0 .. L-1`` and asks a linear layer to name the position
    (cross-entropy). Plain SGD with no momentum and no weight decay, so a row the loss
    never reaches gets a gradient of exactly zero and does not move. The steps run on one
    CPU thread (the thread count is restored afterwards): at these sizes a second thread
    only adds waiting.

    Args:
        table: the learned table, ``max_positions >= L`` rows of ``D`` features.
        train_length: ``L``, the sequence length seen in training.
        steps: gradient steps.
        lr: learning rate.
        seed: seed of the read-out's initialisation.

    Returns:
        The trained read-out, ``nn.Linear(D, L)``.

    Raises:
        TypeError: if ``table`` is not a :class:`posenc.encodings.LearnedPositionalEmbedding`
            or a number has the wrong type.
        ValueError: if ``train_length`` is below 2 or above ``table.max_positions``,
            ``steps < 1`` or ``lr`` not positive.

    Example:
        >>> table = LearnedPositionalEmbedding(8, 4)
        >>> before = table.weight.detach().clone()
        >>> _ = fit_position_classifier(table, 4, steps=5)
        >>> torch.equal(table.weight[4:], before[4:]), torch.equal(table.weight[:4], before[:4])
        (True, False)
    """
    if not isinstance(table, LearnedPositionalEmbedding):
        raise TypeError(f"table must be a LearnedPositionalEmbedding, got {type(table).__name__}")
    check_int("train_length", train_length, minimum=2)
    if train_length > table.max_positions:
        raise ValueError(
            f"train_length must be at most max_positions={table.max_positions}, "
            f"got train_length={train_length}"
        )
    check_int("steps", steps, minimum=1)
    lr = check_positive_float("lr", lr)
    check_int("seed", seed)
    dim = table.weight.shape[1]
    gen = torch.Generator().manual_seed(seed)
    # made on meta, so that its default initialisation draws nothing from the global RNG
    readout = nn.Linear(dim, train_length, device="meta").to_empty(device=table.weight.device)
    with torch.no_grad():
        bound = 1 / math.sqrt(dim)
        weight = torch.rand(train_length, dim, generator=gen) * 2 * bound - bound
        readout.weight.copy_(weight)
        readout.bias.zero_()
    params = [*table.parameters(), *readout.parameters()]
    positions = torch.arange(train_length)
    target = positions.to(table.weight.device)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # matrices this small only wait on a second thread
    try:
        for _ in range(steps):
            loss = nn.functional.cross_entropy(readout(table(positions)), target)
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for param, grad in zip(params, grads, strict=True):
                    param -= lr * grad  # plain SGD: a zero gradient leaves a row as it was
    finally:
        torch.set_num_threads(threads)
    return readout
