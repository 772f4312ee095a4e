"""Every public function of posenc rejects bad input with a clear error.

The test walks the public API: every module of the package (those re-exported in
``posenc.__all__`` and every other non-private module), everything in each module's
``__all__`` that is a function or a class, and the public methods those classes define.
For each callable it

1. builds one valid call (``BASELINE``: values by parameter name, then per-function
   overrides) and checks that the call runs;
2. introspects the signature and replaces one argument at a time by garbage chosen from
   the valid value: a wrong type, an empty tensor, a 0-d tensor where a vector is needed,
   a tensor of the wrong dtype, NaN where a number or a table of parameters is meant, an
   odd feature size where the docstring asks for an even one, a negative size, an unknown
   option string, ``None`` where it is not allowed, and a tensor on another device (CUDA
   when there is a GPU, else the meta device): mixed with CPU tensors it must be refused by
   posenc's check naming both devices (or be a documented mix, ``MIXING``); alone, the
   function may run there, but must not fail on a tensor it built on the CPU itself;
3. fails for any garbage that is accepted silently, that fails with anything but
   ``TypeError``/``ValueError``, that fails inside another library (torch, matplotlib, ...)
   instead of posenc's own check, or whose message does not name the argument.

Removing a check from posenc makes this test fail. Delete ``check_even_dim("dim", dim)``
from :func:`posenc.encodings.sinusoidal_frequencies` and both it and
:func:`posenc.encodings.sinusoidal_encoding` fail: ``dim="3"`` then raises torch's
``arange() received an invalid combination of arguments`` (which does not name ``dim``),
``dim=-7`` an internal ``RuntimeError`` (``upper bound and lower bound inconsistent with
step sign``), and ``dim=2.5`` is accepted silently.

Each case runs in milliseconds: garbage is caught before any real work starts, and a case
still running after a few seconds counts as garbage taken.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import importlib
import inspect
import io
import math
import os
import pkgutil
import re
import signal
import tempfile
import threading
import traceback
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch

import posenc

# garbage cases build a fresh valid animation each time and drop it unrendered
pytestmark = pytest.mark.filterwarnings("ignore:Animation was deleted without rendering")

F64 = torch.float64
POSENC_DIR = Path(posenc.__file__).resolve().parent

# --- which modules and callables are public --------------------------------------------------


def short_name(module: str) -> str:
    """``posenc.book.bits`` -> ``bits``, ``posenc.bench.forms`` -> ``forms``: the names
    the tables below use (module names are unique across the layers)."""
    return (
        module.removeprefix("posenc.")
        .removeprefix("book.")
        .removeprefix("fast.")
        .removeprefix("display.")
    )


def public_modules() -> dict[str, types.ModuleType]:
    """Every non-private module of the package, in every layer, by :func:`short_name`."""
    found = pkgutil.walk_packages(posenc.__path__, prefix="posenc.")
    names = [m.name for m in found if not any(p.startswith("_") for p in m.name.split("."))]
    modules = {short_name(n): importlib.import_module(n) for n in sorted(names)}
    assert len(modules) == len(names), "two public modules share a short name"
    return modules


MODULES = public_modules()

# Dataclasses that only carry results (built by posenc, read by the reader): their
# constructors take whatever they are given, like a tuple. Their methods are still walked.
RECORDS = {
    "context.ScoreTerms",
    "data.llama.Llama",
    "llama_rope.TransformersRope",
    "precision.Recipe",  # validates in __post_init__, walked below all the same
    "precision.RopeCheck",
    "properties.Scheme",
    "properties.Verdict",
    "relative_views.ShiftSetup",
    "rope_nd_views.OffsetCheck",
    "claims.Claim",
    "claims.ClaimReport",
    "claim_checks.Finding",
    "summary.Station",
    "plots.Layout",
    "training_views.Spread",
    "training_views.Conclusion",
    "training_views.Conclusions",
}
WALKED_RECORDS = {"precision.Recipe"}


@dataclass(frozen=True)
class Target:
    """One public callable: ``module.name`` or ``module.Class.method``."""

    qualname: str
    module: str
    func: Callable
    is_method: bool = False

    def __str__(self) -> str:
        return self.qualname


def _methods(module_name: str, cls: type) -> list[Target]:
    out = []
    for name, member in vars(cls).items():
        if name.startswith("_") or not inspect.isfunction(member):
            continue
        out.append(Target(f"{module_name}.{cls.__name__}.{name}", module_name, member, True))
    return out


def public_callables() -> list[Target]:
    seen: dict[int, Target] = {}
    for module_name, module in MODULES.items():
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            home = short_name(obj.__module__)
            if home != module_name and home in MODULES:
                continue  # re-exported: walked in the module that defines it
            qualname = f"{module_name}.{name}"
            if inspect.isclass(obj):
                for m in _methods(module_name, obj):
                    seen.setdefault(id(m.func), m)
                if qualname in RECORDS and qualname not in WALKED_RECORDS:
                    continue
            seen.setdefault(id(obj), Target(qualname, module_name, obj))
    return sorted(seen.values(), key=str)


TARGETS = public_callables()

# --- one valid call per callable --------------------------------------------------------------


def _randn(*shape, dtype=F64, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@functools.cache
def _llama():
    # the Hub's tokenizer is the offline one; the rows need the Hub (NO_BASELINE)
    return posenc.data.llama.Llama(posenc.data.llama.offline_tokenizer(), "hf_" + "x" * 34)


@functools.cache
def _smol_rows():
    return posenc.data.smol.token_rows()


@functools.cache
def _shift_setup():
    return posenc.book.relative_views.make_shift_setup(4, num_heads=2, head_dim=4)


def _score_terms():
    return posenc.book.context.ScoreTerms(*_randn(4, 4))


def _safetensors_file():
    from safetensors.torch import save

    return io.BytesIO(save({"t": torch.arange(12.0).reshape(4, 3)}))


def _animation():
    return posenc.book.rotation_explorer.rotation_animation(frames=2, dpi=20)


@functools.cache
def _verdicts():
    p = posenc.properties
    return {"binary": p.check_all(p.absolute_schemes()["binary"])}


class _LocalFS:
    """A filesystem with the ``open`` an fsspec filesystem has, over local files."""

    def open(self, path, mode="rb", **kwargs):
        return open(path, mode)


# Values by parameter name, used for every required parameter (and where a default has to
# be replaced to make a call valid). Each is a factory, so every call gets fresh objects.
VALUES: dict[str, Callable[[], object]] = {
    "x": lambda: _randn(4, 8),
    "q": lambda: _randn(8, seed=1),
    "k": lambda: _randn(8, seed=2),
    "v": lambda: _randn(4, 8, seed=3),
    "positions": lambda: [0, 1, 2, 3],
    "dim": lambda: 8,
    "num_positions": lambda: 4,
    "num_bits": lambda: 4,
    "num_heads": lambda: 2,
    "inv_freq": lambda: posenc.rope.rope_inv_freq(8),
    "distances": lambda: [0, 1, 5],
    "offsets": lambda: [1, 2],
    "offset": lambda: 2,
    "position": lambda: 3,
    "factor": lambda: 4.0,
    "max_distance": lambda: 3,
    "train_length": lambda: 4,
    "labels": lambda: ["a", "b", "c", "d"],
    "dtype": lambda: torch.float32,
    "scheme": lambda: posenc.properties.absolute_schemes()["sinusoidal"],
    "w_q": lambda: _randn(8, 8, seed=4),
    "w_k": lambda: _randn(8, 8, seed=5),
    "content": lambda: _randn(4, 8, seed=6),
    "starts": lambda: [0, 1, 2],
    "terms": _score_terms,
    "ids": lambda: [128000, 791],
    "slopes": lambda: posenc.relative.alibi_slopes(2),
    "setup": _shift_setup,
    "embedding": lambda: _randn(16, dtype=torch.float32),
    "bit": lambda: 2,
    "codes": lambda: posenc.encodings.binary_encoding(list(range(8)), 3),
    "values": lambda: [0, 0, 1, 1, 0, 0, 1, 1],
    "query_content": lambda: _randn(8, seed=7),
    "key_content": lambda: _randn(8, seed=8),
    "query_positions": lambda: [0, 10, 20],
    "key_positions": lambda: [3, 13, 23],
    "encoding": lambda: posenc.encodings.sinusoidal_encoding(8, 8),
    "max_offset": lambda: 2,
    "t": lambda: torch.tensor([0.0, 0.25], dtype=F64),
    "theta": lambda: torch.tensor([0.5, 1.0], dtype=F64),
    "blocks": lambda: _randn(3, 2, 2),
    "weight": lambda: torch.arange(8.0)[:, None],
    "matrix": lambda: torch.full((2, 2), 0.5),
    "anim": _animation,
    "fig": lambda: plt.figure(),
    "token": lambda: "hf_" + "x" * 34,
    "source": lambda: "offline",
    "fs": _LocalFS,
    "f": _safetensors_file,
    "tensor": lambda: "t",
    "rows": lambda: [2, 0],
    "text": lambda: "The dog",
    "layer": lambda: posenc.attention.DemoAttention(8, num_heads=2),
    "like": lambda: torch.full((3, 4), 0.5),
    "in_dim": lambda: 8,
    "out_dim": lambda: 4,
    "embed_dim": lambda: 16,
    "head_dim": lambda: 4,
    "max_positions": lambda: 8,
    "length": lambda: 4,
    "value": lambda: 256.0,
    "curves": lambda: posenc.book.precision_views.angle_error_curves(
        posenc.rope.rope_inv_freq(8), 300, ["fp32 angles"]
    ),
    "recipe": lambda: "fp32 angles",
    "checks": lambda: [posenc.precision.check_apply_rope(_randn(2, 4), [0, 9], torch.bfloat16)],
    "position_dtype": lambda: torch.float32,
    "freq_dtype": lambda: torch.float32,
    "angle_dtype": lambda: torch.float32,
    "results": _verdicts,
    "indices": lambda: [8, 9, 10, 40],
    "fraction": lambda: 0.5,
    "p": lambda: 0.5,
    "bands": lambda: ["kept", "kept", "divided"],
    "shape": lambda: (2, 3),
    "shifts": lambda: [1, 5],
    "shift": lambda: 3,
    "perm": lambda: [2, 0, 1, 3],
    "relative_position": lambda: torch.tensor([-200, -20, 0, 3, 200]),
    "table": lambda: torch.arange(32.0)[:, None],
    "a_k": lambda: torch.zeros(7, 8, dtype=F64),
    "a_v": lambda: torch.zeros(7, 8, dtype=F64),
    "points": lambda: torch.tensor([0.0, 0.5, 1e-12, 0.5]),
    "frequency": lambda: 1.0,
    "sin": lambda: torch.sin(torch.tensor([0.5, 3.0], dtype=F64)),
    "cos": lambda: torch.cos(torch.tensor([0.5, 3.0], dtype=F64)),
    "rotate": lambda: posenc.rope.apply_rope_nd,
    "vectors": lambda: [torch.zeros(4), torch.ones(4)],
    "config": lambda: posenc.book.llama_rope.llama32_config(),
    "changes": lambda: {"T5": [0.0, 0.0]},
    "weights": lambda: {"T5": [0.0], "sinusoidal": [0.23]},
    "tokenizer": lambda: _llama().tokenizer,
    "fns": lambda: {"nothing": lambda: None},
}

# Per-callable replacements of the values above (and of defaults that are not valid alone).
BASELINE: dict[str, dict[str, Callable[[], object]]] = {}


def base(qualname: str, **values: Callable[[], object]) -> None:
    BASELINE.setdefault(qualname, {}).update(values)


_POS_2D = lambda: torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7]])  # noqa: E731
for _name in ("attention.attention_weights", "attention.self_attention"):
    base(_name, q=lambda: _randn(4, 8, seed=1), k=lambda: _randn(4, 8, seed=2))
base("attention.permute_positions", x=lambda: _randn(4, 2))
base("rope.apply_rope_nd", positions=_POS_2D)
base("rope_nd_views.mispaired_rope_2d", positions=_POS_2D)
base(
    "rope_nd_views.mixed_rope_2d",
    positions=_POS_2D,
    freq_x=lambda: torch.tensor([1.0, 0.1, 0.0, 0.0], dtype=F64),
    freq_y=lambda: torch.tensor([0.0, 0.0, 1.0, 0.1], dtype=F64),
)
base(
    "rope_nd_views.mrope",
    positions=lambda: torch.arange(4)[:, None].expand(4, 3).contiguous(),
    sections=lambda: [2, 1, 1],
)
for _name in ("rope_nd_views.offset_check", "rope_nd_views.pairwise_scores"):
    base(_name, positions=lambda: posenc.book.rope_nd_views.grid_positions((3, 3)))
base(
    "rope_nd_views.score_maps_figure",
    side=lambda: 8,
    query_cells=lambda: ((2, 2), (5, 4)),
    window=lambda: 2,
)
base("rope_nd_views.frequency_allocation_figure", dim=lambda: 12, sections=lambda: (2, 2, 2))
base("rope_nd_views.grid_positions", shape=lambda: (2, 3))
base("relative.shaw_attention", q=lambda: _randn(5, 4), k=lambda: _randn(5, 4))
base(
    "relative.shaw_attention",
    v=lambda: _randn(5, 4),
    a_k=lambda: torch.zeros(3, 4, dtype=F64),
    a_v=lambda: torch.zeros(3, 4, dtype=F64),
)
base("relative.alibi_bias", num_positions=lambda: 3)
base("relative.t5_bias", num_positions=lambda: 3)
base("relative.shaw_relative_indices", max_distance=lambda: 1)
base(
    "relative_views.shaw_attention_at",
    q=lambda: _randn(4, 2),
    k=lambda: _randn(4, 2),
    v=lambda: _randn(4, 2),
    a_k=lambda: _randn(3, 2),
    a_v=lambda: _randn(3, 2),
)
base(
    "relative_views.biased_attention",
    q=lambda: torch.zeros(1, 2, 4),
    k=lambda: torch.zeros(1, 2, 4),
    v=lambda: torch.zeros(1, 2, 4),
)
base("relative_views.clipped_bias", table=lambda: torch.tensor([[-2.0], [0.0], [2.0]]))
base("relative_views.clipped_offset_indices", max_distance=lambda: 1)
base("relative_views.attention_at", scheme=lambda: "T5")
base("relative_views.shift_change", scheme=lambda: "ALiBi", shift=lambda: 100)
base("relative_views.shift_changes", shifts=lambda: [1, 5], schemes=lambda: ["T5"])
base(
    "relative_views.alibi_figure",
    num_positions=lambda: 8,
    num_heads=lambda: 4,
    heads=lambda: (0, 3),
)
base("relative_views.t5_figure", num_positions=lambda: 12)
base(
    "relative_views.bucket_table",
    rows=lambda: posenc.book.relative_views.bucket_ranges(num_buckets=4, max_distance=4),
)
base("relative_views.shift_figure", shifts=lambda: [1, 2])
base("relative_views.t5_bias_at", positions=lambda: [7, 8, 9])
base("relative_views.alibi_bias_at", positions=lambda: [4, 5], slopes=lambda: torch.tensor([0.25]))
base("context.score_terms", content=lambda: _randn(3, 3), position=lambda: _randn(3, 3, seed=1))
base("context.score_terms", w_q=lambda: _randn(3, 3, seed=2), w_k=lambda: _randn(3, 3, seed=3))
base(
    "context.pair_terms",
    query_content=lambda: torch.tensor([1.0, 0.0]),
    key_content=lambda: torch.tensor([1.0, 1.0]),
    query_position=lambda: torch.tensor([[0.0, 0.0], [0.0, 1.0]]),
    key_position=lambda: torch.tensor([[0.0, 0.0], [0.0, 1.0]]),
    w_q=lambda: torch.eye(2),
    w_k=lambda: torch.eye(2),
)
base(
    "context.pair_terms_figure",
    starts=lambda: [0, 1, 2],
    terms=lambda: posenc.book.context.ScoreTerms(*_randn(4, 3)),
)
base(
    "context.rope_pair_scores",
    query_content=lambda: _randn(4, seed=1),
    key_content=lambda: _randn(4, seed=2),
    w_q=lambda: torch.eye(4, dtype=F64),
    w_k=lambda: torch.eye(4, dtype=F64),
)
base(
    "context.terms_figure",
    terms=lambda: posenc.book.context.ScoreTerms(*_randn(4, 3, 3)),
    labels=lambda: ["a", "b", "c"],
)
base("context.scaled_sinusoidal", positions=lambda: [0, 7])
base("context.span_basis", rows=lambda: _randn(3, 4))
base(
    "plots.colorbar_below",
    image=lambda: plt.figure().add_subplot().imshow([[0.0, 1.0]]),
    axes=lambda: posenc.display.plots.figure(1, 2)[1],
)
base(
    "table.Table",
    columns=lambda: ["offset", "score"],
    rows=lambda: [[1, "0.5"], [2, "0.25"]],
    caption=lambda: "Two scores.",
)
base("encodings.length_normalized_encoding", positions=lambda: [1], dim=lambda: 2, length=lambda: 4)
base("encodings.LearnedPositionalEmbedding", max_positions=lambda: 4)
base("encodings.LearnedPositionalEmbedding.forward", positions=lambda: [0, 3])
base("attention.DemoAttention.forward", x=lambda: torch.ones(1, 3, 8))
base("attention.DemoAttention", dim=lambda: 8, num_heads=lambda: 2)
base(
    "absolute_animations.binary_encoding_animation",
    embedding=lambda: torch.zeros(8),
    position=lambda: 5,
    num_bits=lambda: 3,
)
base("absolute_animations.binary_plot_animation", num_bits=lambda: 3, num_positions=lambda: 8)
base(
    "absolute_animations.integer_encoding_animation",
    embedding=lambda: torch.zeros(16),
    positions=lambda: [0, 1, 2],
)
base("absolute_animations.binary_path_figure", step_bits=lambda: 4)
base("bits.step_lengths", codes=lambda: posenc.encodings.binary_encoding([0, 1, 2, 3, 4], 3))
base("bits.bits_changed", positions=lambda: [0, 1, 3, 7, 127])
base("bits.to_bitstring", position=lambda: 252, num_bits=lambda: 8)
base(
    "frequencies.abel_partial_sums",
    distances=lambda: [0],
    inv_freq=lambda: torch.tensor([1.0, 0.5]),
)
base("frequencies.angle_overshoot", max_distance=lambda: 400, train_length=lambda: 100)
for _name in ("decay_bound", "pair_scores", "scores_at_distances"):
    base(f"frequencies.{_name}", q=lambda: _randn(8, seed=1), k=lambda: _randn(8, seed=2))
base(
    "frequencies.decay_figure",
    distances=lambda: torch.arange(4),
    bound=lambda: torch.ones(4),
    aligned=lambda: torch.ones(4),
    random_scores=lambda: torch.ones(2, 4),
    random_bound=lambda: torch.ones(2, 4),
    cauchy_schwarz=lambda: torch.ones(2),
)
base(
    "frequencies.nearest_return",
    max_distance=lambda: 1000,
    inv_freq=lambda: posenc.rope.rope_inv_freq(64),
)
base("frequencies.p_rope", x=lambda: _randn(3, 8), positions=lambda: [0, 1, 2], p=lambda: 0.5)
base(
    "frequencies.partial_rotary",
    x=lambda: _randn(3, 8),
    positions=lambda: [0, 1, 2],
    fraction=lambda: 0.5,
)
base(
    "frequencies.pair_cosines_figure",
    dim=lambda: 16,
    pairs=lambda: (0, 7),
    max_distance=lambda: 1000,
)
base("frequencies.period_table", dim=lambda: 4, bases=lambda: (100.0,))
base("frequencies.rotating_periods_figure", dim=lambda: 16, fraction=lambda: 0.5)
base(
    "frequencies.scaled_frequencies",
    dim=lambda: 16,
    base=lambda: 10000.0,
    factor=lambda: 4.0,
    original_max_positions=lambda: 512,
)
_FREQS = lambda: posenc.book.frequencies.scaled_frequencies(16, 10000.0, 4.0, 512)  # noqa: E731
base("frequencies.scaling_figure", freqs=_FREQS, train_length=lambda: 512, factor=lambda: 4.0)
base("frequencies.scaling_table", freqs=_FREQS, train_length=lambda: 512, factor=lambda: 4.0)
base(
    "frequencies.unrotated_features",
    rotate=lambda: functools.partial(posenc.book.frequencies.partial_rotary, fraction=0.5),
)
base(
    "frequencies.unseen_angles_figure",
    dim=lambda: 16,
    base=lambda: 100.0,
    train_length=lambda: 64,
    factor=lambda: 4,
)
base("frequencies.relative_upper_bound", distances=lambda: [0, 3])
base("frequencies.encoding_distance", distances=lambda: [0, 1])
base("frequencies.relative_schemes", max_distance=lambda: 4, num_buckets=lambda: 8)
base("data.llama.open_for_row_reads", path=lambda: __file__)
base("data.llama.read_safetensors_rows", tensor=lambda: "t", rows=lambda: [2, 0])
base("data.llama.offline_tokenizer")
base("data.llama.Llama.encode", text=lambda: "The dog")
base("data.llama.Llama.pieces", ids=lambda: [5679])
base(
    "llama_rope.bands_from_ratio",
    scaled=lambda: torch.tensor([1.0, 0.3, 0.25]),
    unscaled=lambda: torch.ones(3),
)
base("llama_rope.complex_rope", x=lambda: _randn(5, 8), positions=lambda: [0, 1, 2, 3, 4])
base("llama_rope.concept_note_rope", x=lambda: _randn(1, 5, 2, 8))
base("llama_rope.converter_permute", weight=lambda: torch.arange(8.0)[:, None])
base(
    "llama_rope.band_table",
    unscaled=lambda: posenc.book.llama_rope.llama32_inv_freq(scaled=False),
    scaled=lambda: posenc.book.llama_rope.llama32_inv_freq(scaled=False),
    bands=lambda: ["kept"] * 32,
    pairs=lambda: [0],
)
base(
    "llama_rope.frequency_figure",
    unscaled=lambda: posenc.book.llama_rope.llama32_inv_freq(scaled=False),
    scaled=lambda: posenc.book.llama_rope.llama32_inv_freq(),
    bands=lambda: posenc.book.llama_rope.llama3_bands(
        posenc.book.llama_rope.llama32_inv_freq(scaled=False)
    ),
)
base(
    "llama_rope.llama3_bands",
    inv_freq=lambda: posenc.book.llama_rope.llama32_inv_freq(scaled=False),
)
base(
    "llama_rope.rope_scores",
    x=lambda: _randn(4, 6, dtype=torch.float32),
    w_q=lambda: _randn(8, 6, dtype=torch.float32),
    w_k=lambda: _randn(4, 6, dtype=torch.float32),
    num_heads=lambda: 2,
    num_kv_heads=lambda: 1,
)
base("llama_rope.rope_settings", config=lambda: posenc.book.llama_rope.llama32_config(scaled=False))
base("llama_rope.rotation_partners", matrix=lambda: posenc.rope.rope_matrix(1, 6))
base(
    "llama_rope.transformers_rope",
    q=lambda: _randn(1, 4, 3, 64, dtype=torch.float32),
    k=lambda: _randn(1, 4, 3, 64, dtype=torch.float32, seed=1),
    positions=lambda: [0, 5, 900],
)
base("plots.token_heatmap", labels=lambda: ["a", "b"])
base("plots.overlay_vectors", labels=lambda: ["a", "b"])
base("precision.exact_rope", x=lambda: _randn(4, 8))
base("precision.check_apply_rope", x=lambda: _randn(4, 8), dtype=lambda: torch.bfloat16)
base("precision.rope_error_bound", dtype=lambda: torch.bfloat16)
base("precision_views.angle_error_curves", max_position=lambda: 300)
base("precision_views.angle_error_table", checkpoints=lambda: [100, 300])
base("precision_views.angle_error_figure", bins=lambda: 4)
base("precision_views.offset_scores_figure", max_position=lambda: 500, samples=lambda: 20)
base(
    "precision_views.position_rounding_figure",
    max_position=lambda: 1000,
    window=lambda: 8,
    window_start=lambda: 300,
)
base("precision_views.relative_error_table", ranges=lambda: [(0, 64)], samples=lambda: 16)
base("precision.spacing", dtype=lambda: torch.bfloat16)
base("precision.stored_positions", dtype=lambda: torch.bfloat16)
base("precision.ulp", values=lambda: torch.tensor([1.0, 3.0]), dtype=lambda: torch.bfloat16)
for _name in ("significand_bits", "first_inexact_integer"):
    base(f"precision.{_name}", dtype=lambda: torch.bfloat16)
base("precision.Recipe", position_dtype=lambda: torch.float32)
base("properties.format_table", results=_verdicts)
for _name in (
    "check_all",
    "deterministic",
    "extends_to_n_dimensions",
    "encodes_unseen_positions",
    "linear_relation",
    "unique_and_length_independent",
):
    base(f"properties.{_name}", scheme=lambda: posenc.properties.absolute_schemes()["binary"])
base("properties.extends_to_n_dimensions", side=lambda: 4)
base("properties.encodes_unseen_positions", train_length=lambda: 8)
base("properties.linear_relation", num_positions=lambda: 32)
base("properties.unique_and_length_independent", lengths=lambda: (4, 8))
base("rope.apply_rope_", x=lambda: _randn(4, 8))
base("rope.permute_qk_rows", weight=lambda: torch.arange(8.0)[:, None])
base("scaling.position_interpolation_inv_freq", inv_freq=lambda: torch.tensor([1.0, 0.01]))
base("scaling.llama3_inv_freq", inv_freq=lambda: posenc.rope.rope_inv_freq(64, 500000.0))
base("scaling.ntk_aware_inv_freq", base=lambda: 10000.0, factor=lambda: 16.0)
base(
    "scaling.yarn_inv_freq",
    dim=lambda: 64,
    base=lambda: 10000.0,
    factor=lambda: 8.0,
    original_max_positions=lambda: 4096,
)
base("scaling.p_rope_inv_freq", p=lambda: 0.5)
base(
    "rope_views.pair_scores",
    x_query=lambda: _randn(8, dtype=torch.float32),
    x_key=lambda: _randn(8, dtype=torch.float32, seed=1),
)
base(
    "rope_views.pair_scores",
    query_positions=lambda: [1, 7],
    key_positions=lambda: [4, 10],
    w_q=lambda: posenc.book.rope_views.random_projections(8, 4)[0],
    w_k=lambda: posenc.book.rope_views.random_projections(8, 4)[1],
)
base("rope_views.relative_scores", offsets=lambda: [3])
base("rope_views.rope_attention", x=lambda: _randn(1, 3, 8, dtype=torch.float32))
base(
    "rope_views.offset_sweep_figure",
    starts=lambda: [0, 1],
    scores=lambda: {"rope": torch.ones(2)},
    offset=lambda: 3,
)
base("rope_views.score_grid_figure", scores=lambda: torch.eye(3), positions=lambda: [0, 1, 2])
base(
    "rope_views.score_grids_figure",
    grids=lambda: {"a": torch.eye(3), "b": -torch.eye(3)},
    positions=lambda: [0, 1, 2],
)
base(
    "rope_views.distance_figure",
    distances=lambda: {"a": torch.tensor([[0.0, 1e-5], [1e-5, 0.0]])},
    labels=lambda: ["x", "y"],
)
base("rope_views.rotation_animation", num_positions=lambda: 3, dpi=lambda: 20)
base(
    "rope_views.rotation_frames",
    num_positions=lambda: 4,
    pairs=lambda: (0,),
    dim=lambda: 2,
    vector=lambda: (1.0, 0.0),
)
base("rope_views.elementwise_rope", x=lambda: _randn(1, 2), positions=lambda: [1])
base("rope_views.playground_state", m=lambda: 2, n=lambda: 5)
base("rope_views.random_projections", embed_dim=lambda: 16, head_dim=lambda: 4)
base("rope_views.clockwise_rope_matrix", position=lambda: 1, dim=lambda: 2)
base("rotation.sinusoidal_shift_matrix", offset=lambda: 3)
base("rotation.rotation_matrix", theta=lambda: torch.tensor([0.5, 1.0]))
base("rotation_explorer.rotation_animation", frames=lambda: 2, dpi=lambda: 20)
base(
    "shift.max_shift_error",
    encoding=lambda: posenc.encodings.sinusoidal_encoding(8, 4),
    offsets=lambda: [-2, 3],
)
base(
    "shift.max_shift_error",
    shift_matrices=lambda: torch.stack(
        [posenc.book.shift.sympy_shift_matrix(k, 4) for k in (-2, 3)]
    ),
)
base("shift.swap_pair_order", x=lambda: torch.tensor([0.0, 1.0, 2.0, 3.0]))
base("shift.symbolic_rotation", theta=lambda: __import__("sympy").Symbol("w"))
base("shift.sympy_shift_matrix", offset=lambda: 1, dim=lambda: 2)
base("shift.draw_pair_orders", omega=lambda: 0.5, num_positions=lambda: 4)
base("sinusoidal_views.compare_frequency_forms", base=lambda: 500000.0, dtype=lambda: torch.float16)
base("sinusoidal_views.direct_frequencies", dim=lambda: 4, base=lambda: 100.0)
base("sinusoidal_views.log_space_frequencies", dim=lambda: 4, base=lambda: 100.0)
base("sinusoidal_views.dot_product_closed_form", offsets=lambda: [0, 1], dim=lambda: 2)
base(
    "sinusoidal_views.dot_product_figure",
    dim=lambda: 8,
    max_offset=lambda: 4,
    starts=lambda: [0, 2],
)
base("sinusoidal_views.encoding_heatmap", encoding=lambda: torch.zeros(3, 4))
base(
    "sinusoidal_views.fit_position_classifier",
    table=lambda: posenc.encodings.LearnedPositionalEmbedding(8, 4),
    train_length=lambda: 4,
    steps=lambda: 5,
)
base("sinusoidal_views.naive_sinusoidal_encoding", num_positions=lambda: 2, dim=lambda: 2)
base("sinusoidal_views.offset_dot_products", encoding=lambda: torch.eye(3), max_offset=lambda: 1)
base("sinusoidal_views.sinusoidal_heatmap", num_positions=lambda: 10, dim=lambda: 8)
base("sinusoidal_views.step_figure", num_positions=lambda: 8, dim=lambda: 4)
base(
    "sinusoidal_views.step_norms",
    encoding=lambda: posenc.encodings.binary_encoding([0, 1, 2, 3], 2),
)
base("sinusoidal_views.stepped_animation", num_frames=lambda: 2, dim=lambda: 4, dpi=lambda: 20)
base("sinusoidal_views.playground", num_positions=lambda: 10, dim=lambda: 8)
base("sinusoidal_views.sinusoidal_step_norm", dim=lambda: 2)
base("sinusoidal_views.wavelength_range_table", dims=lambda: (8, 16))
base("sinusoidal_views.wavelength_table", dim=lambda: 8)
base("sinusoidal_views.wavelengths", dim=lambda: 4, base=lambda: 100.0)
base("waves.angle_from_pair", sin=lambda: torch.sin(torch.tensor([0.5, 3.0], dtype=F64)))
base("waves.circle_animation", frames=lambda: 2, dpi=lambda: 20)
base(
    "waves.format_table",
    labels=lambda: ["0", "pi"],
    values=lambda: torch.tensor([[0.0, 1.0]]),
    names=lambda: ["y"],
)
base("waves.rounded", x=lambda: torch.tensor([-1e-9, 0.1234567], dtype=F64))
base("waves.sine_partner", t=lambda: torch.tensor([0.0, 0.5], dtype=F64))
base("waves.value_table", quarters=lambda: 2)
base("waves.wave", t=lambda: torch.tensor([0.0, 0.25]))
base("waves.collisions", points=lambda: torch.tensor([0.0, 0.5, 1e-12, 0.5]))
base("bench.forms.rope_blocked", block_elements=lambda: 16)
base(
    "dispatch.rope_qk",
    q=lambda: _randn(1, 4, 6, 8),
    k=lambda: _randn(1, 2, 6, 8),
    positions=lambda: None,
)
base("bench.forms.dense_matrices", layout=lambda: "half")
base(
    "bench.forms.dense_matrices",
    cos=lambda: posenc.fast.tables.rope_tables([3], 4, base=100.0, dtype=F64)[0],
    sin=lambda: posenc.fast.tables.rope_tables([3], 4, base=100.0, dtype=F64)[1],
)
base("tables.rope_tables", positions=lambda: [0, 1], dim=lambda: 4)
base("triton.rope_triton", x=lambda: _randn(4, 8))
base(
    "triton.rope_qk_triton",
    q=lambda: _randn(1, 4, 6, 8),
    k=lambda: _randn(1, 2, 6, 8),
    positions=lambda: None,
)
for _name in (
    "rope_blocked",
    "rope_cached",
    "rope_compiled",
    "rope_complex",
    "rope_dense",
    "rope_elementwise",
    "rope_rotate_half",
    "rope_triton",
):
    base(f"bench.forms.{_name}", x=lambda: _randn(4, 8))
for _name in ("apply_rope", "apply_rope_"):
    base(f"dispatch.{_name}", x=lambda: _randn(4, 8))


base("rope_nd_views.axis_frequencies", axes=lambda: 2)


def _claim():
    return next(c for c in posenc.book.claims.CLAIMS if c.key == "binary-252")


def _findings():
    return {
        "binary-252": posenc.book.claim_checks.Finding(
            posenc.book.claim_checks.HOLDS, "252 = 11111100"
        )
    }


def _claims_page():
    import tempfile

    page = Path(tempfile.mkdtemp()) / "claims.md"
    s = posenc.book.claims_tables
    page.write_text("# Claims\n" + s.CLAIMS_BEGIN + "\n" + s.CLAIMS_END + "\n")
    return page


base("checks.compare", a=lambda: _randn(3, 4), b=lambda: _randn(3, 4, seed=1))
base("checks.largest_difference", a=lambda: _randn(3, 4), b=lambda: _randn(3, 4, seed=1))
base("claims.check_claim", claim=_claim)
base("claims.check_claims", claims=lambda: [_claim()])
base("claims.report", key=lambda: "binary-252")
base("claims_tables.claims_markdown", claims=lambda: [_claim()])
base("claims_tables.format_findings", findings=_findings)
base("claims_tables.source_tally", findings=_findings)
base(
    "claims_tables.format_source_tally",
    tally=lambda: {"su2024roformer": {"holds": 1, "holds with a caveat": 1, "wrong": 0}},
)
base(
    "summary.road_map_figure",
    results=_verdicts,
    road=lambda: [posenc.book.summary.Station(3, "binary", "it jumps", ("binary",))],
)
base("summary.scheme_table", results=_verdicts)
base(
    "bench.report.sweep_figure",
    sweep=lambda: {"dims": [8, 16], "ms": {"dense": [1.0, 4.0], "apply_rope": [0.5, 1.0]}},
)
_BENCH = lambda: posenc.bench.run(  # noqa: E731  a tiny grid, in milliseconds
    posenc.bench.Config(
        lengths=(8, 16),
        dims=(8,),
        dtypes=("float32",),
        heads=2,
        implementations=("elementwise", "apply_rope", "apply_rope_"),
        repeats=3,
        fresh_memory=False,
        target_rounds=0,
    )
)
base("bench.report.time_figure", result=_BENCH)
base("bench.report.ratio_figure", result=_BENCH)
_TABLE = lambda: _randn(4, 4).cos()  # noqa: E731  [T, D/2] for x of shape [.., 4, 8]
base("claims_tables.slugify", title=lambda: "A query at $m$, a key at $n$")
base("claims_tables.update_claims_page", path=_claims_page, claims=lambda: [_claim()])


# --- the trained model of chapter 15: a tiny random Llama stands in, the real tokenizer ----


@functools.cache
def _tiny_config():
    import transformers

    return transformers.LlamaConfig(
        vocab_size=49152,  # SmolLM2's, so that its tokenizer's ids fit
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
    )


@functools.cache
def _tiny_llama():
    import transformers

    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(_tiny_config()).eval()


@functools.cache
def _tiny_smol():
    folder = posenc.data.smol._offline_folder(posenc.device.cache_dir())
    return posenc.data.smol.Smol(
        "offline", posenc.data.smol._saved_tokenizer(folder), _tiny_llama()
    )


def _tiny_ids():
    return torch.tensor([504, 3575, 282, 4649, 314, 7042])


def _tiny_stats():
    return posenc.book.trained.head_statistics(_tiny_llama(), _tiny_ids())


@functools.cache
def _k_rows_once():
    rows = posenc.data.smol.read_gguf_tensor(posenc.data.smol.gguf_path(), "blk.0.attn_k.weight")
    return posenc.rope.permute_qk_rows(rows, 3)


def _k_rows():
    return _k_rows_once().clone()


VALUES["model"] = _tiny_llama
VALUES["smol"] = _tiny_smol


@functools.cache
def _tiny_long_run_once():
    """A long-text run (posenc.book.long_text.run) of a tiny model trained on 128 positions,
    over 256 tokens: plain RoPE, PI and the windows past 128."""
    import transformers

    config = _tiny_config()
    config.max_position_embeddings = 128
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    smol = posenc.data.smol.Smol("offline", _tiny_smol().tokenizer, model)
    return posenc.book.long_text.run(smol, tokens=256, runs=["none", "PI", "window"])


def _tiny_long_run():
    import copy

    return copy.deepcopy(_tiny_long_run_once())


for _name in (
    "decoder.forward",
    "decoder.next_token_nll",
    "decoder.generate",
    "trained.position_ablation",
    "trained.previous_token_ablation",
    "trained.shift_drift",
    "trained.swap_check",
    "trained.head_statistics",
    "trained.frequency_removal",
    "trained.gap_probe",
    "long_text.score",
):
    base(_name, ids=_tiny_ids)
base("decoder.config_inv_freq", config=_tiny_config)
base("decoder.config_rope_base", config=_tiny_config)
base("decoder.generate", steps=lambda: 2)
base("decoder.KVCache.next_positions", count=lambda: 3)
base("trained.nll", logits=lambda: torch.zeros(3, 4), ids=lambda: torch.tensor([0, 1, 2]))
base("trained.perplexity", logits=lambda: torch.zeros(3, 4), ids=lambda: torch.tensor([0, 1, 2]))
base("trained.shift_drift", shifts=lambda: [0, 10], recipes=lambda: ["fp32 angles"])
base("trained.frequency_removal", fractions=lambda: [0.25])
base("long_text.score", name=lambda: "none")
base("long_text.run_settings", config=_tiny_config, name=lambda: "YaRN")
base("long_text.run", tokens=lambda: 128, runs=lambda: ["none"])
base("long_text.token_ids", count=lambda: 8)
for _name in (
    "long_text.perplexity",
    "long_text.block_perplexities",
    "long_text.ratios",
    "long_text.describe",
    "long_text.length_table",
    "long_text.ratio_table",
    "long_text.ratio_figure",
    "long_text.live_point",
):
    base(_name, result=_tiny_long_run)
for _name in ("long_text.perplexity", "long_text.block_perplexities", "long_text.ratios"):
    base(_name, name=lambda: "PI")
base("long_text.block_perplexities", size=lambda: 128)
base(
    "long_text.ratios", start=lambda: 0, stop=lambda: 128, against=lambda: "none", size=lambda: 128
)
base("long_text.length_table", lengths=lambda: [128], size=lambda: 128)
base("long_text.ratio_table", size=lambda: 128)
base("long_text.ratio_figure", names=lambda: ["PI"], size=lambda: 128)
base("long_text.live_point", tokens=lambda: 128)
base("trained.gap_probe", gaps=lambda: [0, 100], methods=lambda: ["none", "PI"])
base("trained.energy_figure", stats=_tiny_stats)
base("trained.heads_figure", stats=_tiny_stats)
base(
    "trained.probe_figure",
    probe=lambda: {"span": [100, 20000], "none": [20.0, 900.0], "PI": [20.0, 60.0]},
    trained=lambda: 8192,
    xlabel=lambda: "span",
    title=lambda: "A probe",
)
base("trained.scaled_inv_freq", config=_tiny_config, method=lambda: "YaRN", factor=lambda: 4.0)
base(
    "trained.gguf_row_order",
    gguf_file=posenc.data.smol.gguf_path,
    weight=_k_rows,
    num_heads=lambda: 3,
)
base("trained.generation_check", prompt=lambda: "The capital of France is", steps=lambda: 2)
base(
    "data.smol.read_gguf_tensor",
    path=posenc.data.smol.gguf_path,
    name=lambda: "blk.0.attn_k.weight",
)
base(
    "data.smol.cached_folder",
    folder=lambda: Path(tempfile.mkdtemp()) / "made",
    build=lambda: lambda d: (d / "a.txt").write_text("hi"),
)
base(
    "data.smol.Smol",
    source=lambda: "offline",
    tokenizer=lambda: _tiny_smol().tokenizer,
    model=_tiny_llama,
)
base("data.smol.Smol.pieces", ids=lambda: [504, 3575])
base(
    "data.smol.TokenRows",
    tokenizer=lambda: _smol_rows().tokenizer,
    path=posenc.data.smol.gguf_path,
)
base("data.smol.TokenRows.encode", text=lambda: "The dog")
base("data.smol.TokenRows.pieces", ids=lambda: [0, 2767])
base("data.smol.TokenRows.embed", ids=lambda: [0, 2767])

# --- the training experiment of chapter 16: tiny settings and models, the stored grid -------


def _tiny_settings():
    return posenc.train.Settings(steps=2, batch=2, eval_sequences=4)


def _tiny_decoder():
    return posenc.train.TinyDecoder("rope", vocab=18, width=8, heads=2, layers=1, max_positions=16)


def _stored_run():
    return dict(next(r for r in posenc.train.stored()["runs"] if r["encoding"] == "rope"))


for _name in ("tasks.copy_batch", "tasks.recall_batch"):
    base(
        f"train.{_name}",
        batch=lambda: 2,
        n=lambda: 3,
        symbols=lambda: 16,
        gen=lambda: torch.Generator().manual_seed(0),
    )
base("train.tasks.sequence_length", task=lambda: "copy", n=lambda: 4)
base("train.model.TinyDecoder", encoding=lambda: "rope", vocab=lambda: 18, max_positions=lambda: 16)
base("train.model.TinyDecoder.forward", tokens=lambda: torch.zeros(2, 5, dtype=torch.long))
base(
    "train.run.evaluate",
    model=_tiny_decoder,
    task=lambda: "copy",
    n=lambda: 3,
    sequences=lambda: 4,
    seed=lambda: 0,
)
base(
    "train.run.train",
    encoding=lambda: "nope",
    task=lambda: "copy",
    seed=lambda: 0,
    settings=_tiny_settings,
)
base(
    "train.run.grid",
    encodings=lambda: ["nope"],
    tasks=lambda: ["copy"],
    seeds=lambda: [0],
    settings=_tiny_settings,
    workers=lambda: 1,
)
base("train.run.Settings.length", task=lambda: "copy")
base("train.run.Settings.alphabet", task=lambda: "copy")
base("train.load", path=lambda: posenc.train.STORED)
for _name in (
    "spread",
    "accuracy_table",
    "accuracy_figure",
    "conclusions",
    "describe",
    "loss_at",
    "loss_table",
):
    base(f"training_views.{_name}", results=posenc.train.stored)
base("training_views.loss_at", encoding=lambda: "rope", task=lambda: "copy", step=lambda: 500)

base("training_views.spread", encoding=lambda: "rope", task=lambda: "copy", multiple=lambda: 2)
base("training_views.accuracy_table", task=lambda: "recall")
base("training_views.example", task=lambda: "recall", n=lambda: 2)
base("training_views.live_check", run=_stored_run, results=posenc.train.stored)

# Calls that need something this machine may not have: the Hub (network and a token), a GPU
# with Triton. Their garbage is still fed (it must be refused before any of that is
# needed); only the valid call is not made.
NO_BASELINE = {
    "data.llama.hub_tokenizer": "needs the Hugging Face Hub and a token",
    "data.llama.hub_embeddings": "needs the Hugging Face Hub and a token",
    "data.llama.Llama.embed": "needs the Hugging Face Hub and a token",
    "triton.rope_triton": "needs a CUDA GPU with Triton",
    "triton.rope_qk_triton": "needs a CUDA GPU with Triton",
    "bench.forms.rope_compiled": "torch.compile takes tens of seconds on first use",
    "data.smol.load": "loads a 135M-parameter model (seconds); tests/test_smol.py loads it",
}

# The benchmark harness is walked only where a call is cheap and
# has no side effect: the rest runs benchmarks or needs their results.
BENCH_WALKED = {"bench.Config", "bench.default_config", "bench.quick_config", "bench.time_rounds"}

# Callables not walked at all, with the reason.
NOT_WALKED = {
    "bench.fresh_memory": "changes this process's memory allocator",
    "bench.run": "runs the benchmark (minutes); its Config is walked instead",
}

# Instances for methods.
INSTANCES: dict[str, Callable[[], object]] = {
    "attention.DemoAttention": lambda: posenc.attention.DemoAttention(8, num_heads=2),
    "encodings.LearnedPositionalEmbedding": lambda: posenc.encodings.LearnedPositionalEmbedding(
        4, 8
    ),
    "data.llama.Llama": _llama,
    "data.smol.Smol": _tiny_smol,
    "data.smol.TokenRows": _smol_rows,
    "decoder.KVCache": lambda: posenc.decoder.KVCache(),
    "context.ScoreTerms": _score_terms,
    "precision.Recipe": lambda: posenc.precision.RECIPES["fp32 angles"],
    "properties.Verdict": lambda: posenc.properties.Verdict(True, 0.0, "max error"),
    "rope_nd_views.OffsetCheck": lambda: posenc.book.rope_nd_views.OffsetCheck(4, 3, 0.0, 0.0),
    "plots.Layout": lambda: posenc.display.plots.Layout(784.0, 12.0, "x", 400.0, 2),
    "train.model.TinyDecoder": _tiny_decoder,
    "train.run.Settings": _tiny_settings,
    "training_views.Spread": lambda: posenc.book.training_views.Spread((0.5, 1.0)),
}


def _params(target: Target) -> list[inspect.Parameter]:
    sig = inspect.signature(target.func)
    params = list(sig.parameters.values())
    if target.is_method:
        params = params[1:]  # self
    return [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _owner(target: Target) -> str:
    return target.qualname.rsplit(".", 1)[0]


def valid_call(target: Target) -> tuple[Callable, dict[str, object]]:
    """The callable (bound to an instance for methods) and one valid set of arguments."""
    func = target.func
    if target.is_method:
        owner = _owner(target)
        if owner not in INSTANCES:
            raise LookupError(f"no instance for {owner}: add it to INSTANCES")
        func = getattr(INSTANCES[owner](), target.func.__name__)
    override = BASELINE.get(target.qualname, {})
    kwargs = {}
    for p in _params(target):
        if p.name in override:
            kwargs[p.name] = override[p.name]()
        elif p.default is p.empty:
            if p.name not in VALUES:
                raise LookupError(f"no valid value for {target}({p.name}=...): add it to VALUES")
            kwargs[p.name] = VALUES[p.name]()
    return func, kwargs


# --- garbage ------------------------------------------------------------------------------------

# Parameters that name a size or a count: negative values are garbage.
SIZE = re.compile(
    r"^(dim|num_\w+|max_\w+|min_\w+|\w+_dim|length|train_length|side|frames|bits|bins|"
    r"samples|window|zoom|steps|chunk|quarters|decimals|block\w*|in_dim|out_dim|every|"
    r"original_max_positions|per_row|path_bits|step_bits|heads|head|pair|bit|dpi|nrows|ncols)$"
)
# Text that only labels a figure: any value is printed as it is.
COSMETIC = {"title", "label", "xlabel", "compare_label", "token_label"}
# Tensors of numbers that parameterise something (frequencies, slopes, tables): NaN is garbage.
# For data tensors (x, q, k, ...) NaN propagates like in any torch function.
PARAMETER_TENSORS = re.compile(r"^(inv_freq|trained_inv_freq|freq_\w+|slopes|unscaled|scaled)$")
# Other words by which a message may name an argument: D is the last size of x.
ALIASES = {"x": ("head dimension", "D=")}


@dataclass(frozen=True)
class Garbage:
    """A bad value for one argument.

    ``evidence``: strings of which one must appear in the error message (it shows what was
    received). ``questionable``: input that some functions can legitimately take (integers
    where floats are expected: ints are numbers too); it must then either work or be
    refused clearly, but being accepted is not a failure.
    """

    label: str
    value: object
    evidence: tuple[str, ...] = ()
    questionable: bool = False
    other_device: bool = False


def _even_feature_rule(target: Target, name: str) -> bool:
    """Whether the docstring asks for an even feature count in this argument."""
    doc = inspect.getdoc(target.func) or ""
    match = re.search(rf"^\s+{re.escape(name)}[^:\n]*:(.*?)(?=^\s+\w[\w, ]*:|\Z)", doc, re.M | re.S)
    return bool(match and re.search(r"\beven\b|D even", match.group(1)))


def garbage_for(target: Target, param: inspect.Parameter, valid: object) -> list[Garbage]:
    name = param.name
    out: list[Garbage] = []
    annotation = str(param.annotation)
    optional = param.default is None or "None" in annotation
    if not optional and name not in COSMETIC:
        out.append(Garbage("None", None, ("None", "NoneType")))
    if isinstance(valid, bool):
        out.append(Garbage("a str for a bool", "yes", ("'yes'", "str")))
    elif isinstance(valid, int):
        out.append(Garbage("a str for an int", "3", ("'3'", "str")))
        out.append(Garbage("a float for an int", 2.5, ("2.5", "float")))
        out.append(Garbage("an int past int64", 2**64, ("int64",)))
        if SIZE.match(name):
            out.append(Garbage("a negative size", -7, ("-7",)))
    elif isinstance(valid, float):
        out.append(Garbage("a str for a number", "1.0", ("'1.0'", "str")))
        out.append(Garbage("NaN", math.nan, ("nan",)))
    elif isinstance(valid, str):
        if name not in COSMETIC:
            out.append(Garbage("an int for a str", 3, ("3", "int")))
        takes_option = name in OPTIONS.get(target.qualname, ()) or param.default is not param.empty
        if takes_option and name not in COSMETIC and name not in FREE_TEXT:
            out.append(Garbage("an unknown option", "no-such-option", ("no-such-option",)))
    elif isinstance(valid, torch.Tensor):
        out.append(Garbage("a str for a tensor", "garbage", ("str", "'garbage'")))
        if valid.numel() > 0:
            out.append(Garbage("an empty tensor", valid.flatten()[:0]))
        if valid.dim() >= 1:
            out.append(Garbage("a 0-d tensor", valid.flatten()[0].clone()))
        if valid.is_floating_point():
            out.append(
                Garbage("an integer tensor", valid.round().long(), ("int64", "integer"), True)
            )
            if PARAMETER_TENSORS.match(name):
                bad = valid.clone()
                bad.view(-1)[0] = math.nan
                out.append(Garbage("NaN in a parameter tensor", bad, ("nan", "finite", "NaN")))
            if (
                valid.dim() >= 1
                and valid.shape[-1] >= 2
                and valid.shape[-1] % 2 == 0
                and _even_feature_rule(target, name)
            ):
                odd = valid[..., :-1].contiguous()
                out.append(Garbage("an odd feature size", odd, (str(odd.shape[-1]),)))
        elif valid.dtype not in (torch.bool,):
            out.append(Garbage("a float tensor for integers", valid.double() + 0.5, ("float",)))
        if valid.device.type != OTHER_DEVICE:
            moved = valid.to(OTHER_DEVICE)
            out.append(Garbage("a tensor on another device", moved, ("device",), other_device=True))
    elif isinstance(valid, torch.dtype):
        out.append(Garbage("a str for a dtype", "float32", ("float32", "str")))
        out.append(Garbage("an integer dtype", torch.int64, ("int64",)))
    elif isinstance(valid, (list, tuple)) and not hasattr(valid, "_fields"):  # not a NamedTuple
        out.append(Garbage("a str for a sequence", "abc", ("'abc'", "str", "'a'")))
        if valid:
            out.append(Garbage("an empty sequence", type(valid)(), ("empty", "[]", "()", "0")))
            if all(isinstance(v, int) and not isinstance(v, bool) for v in valid):
                out.append(Garbage("a sequence holding a str", [*valid[:-1], "x"], ("'x'", "str")))
    elif isinstance(valid, dict):
        out.append(Garbage("a str for a dict", "abc", ("'abc'", "str")))
        out.append(Garbage("an empty dict", {}, ("empty", "{}")))
    elif callable(valid) or not isinstance(valid, (int, float, str, type(None))):
        out.append(Garbage("an int for an object", 3, ("int", "3")))
    return out


OTHER_DEVICE = "cuda" if torch.cuda.is_available() else "meta"
"""The second device of the walk. Without a GPU the meta device stands in: mixing a meta
tensor with a CPU one raises the same "not on the expected device" error CUDA would."""

# Functions that take tensors on different devices on purpose, with where the result lives
# (each says so in its docstring).
MIXING: dict[tuple[str, str], str] = {}


def mixing(qualname: str, param: str, reason: str) -> None:
    MIXING[(qualname, param)] = reason


# Positions and frequencies are a few values, copied to x's device as apply_rope copies them:
# x on another device than CPU positions is a call these functions take.
for _name in ("rope.apply_rope_nd", "rope_nd_views.mixed_rope_2d", "rope_nd_views.mrope"):
    mixing(_name, "x", "positions (and frequencies) are copied to x's device")
mixing("rope_nd_views.mispaired_rope_2d", "x", "positions are copied to x's device")
for _name in ("precision.exact_rope", "precision.rope_error_bound"):
    mixing(_name, "x", "positions and frequencies are copied to x's device")
mixing("shift.max_shift_error", "encoding", "the shift matrices are copied to its device")


# String parameters that take one of a few options (beyond those with a default).
OPTIONS: dict[str, set[str]] = {
    "relative_views.attention_at": {"scheme"},
    "relative_views.shift_change": {"scheme"},
    "data.embeddings.load": {"source"},
    "data.smol.load": {"source"},
    "data.smol.Smol": {"source"},
    "trained.recipe_rope": {"recipe"},
    "trained.scaled_inv_freq": {"method"},
    "bench.forms.dense_matrices": {"layout"},
    "precision.exact_rope": {"recipe"},
    "precision_views.offset_scores": {"recipe"},
    "precision.recipe_angles": {"recipe"},
    "precision.angle_errors": {"recipe"},
}
# String parameters that take free text, or names that refer to the data.
FREE_TEXT = {"text", "path", "token", "tensor", "name"}

# Garbage that is not garbage for this argument, with the reason.
ACCEPTED: dict[tuple[str, str, str], str] = {}


def accept(qualname: str, param: str, label: str, reason: str) -> None:
    ACCEPTED[(qualname, param, label)] = reason


_ELEMENTWISE = "elementwise: an empty or 0-d input gives an output of the same shape"
for _name, _param in (
    ("waves.rounded", "x"),
    ("waves.wave", "t"),
    ("waves.sine_partner", "t"),
    ("rotation.rotation_matrix", "theta"),
    ("relative.t5_bucket", "relative_position"),
    ("precision.ulp", "values"),
):
    accept(_name, _param, "an empty tensor", _ELEMENTWISE)
    accept(_name, _param, "a 0-d tensor", _ELEMENTWISE)
accept("shift.swap_pair_order", "x", "an empty tensor", _ELEMENTWISE)
accept("shift.symbolic_rotation", "theta", "an int for an object", "any sympy expression, ints too")
accept("frequencies.format_ranges", "indices", "an empty sequence", "no indices: an empty string")
accept("data.llama.read_safetensors_rows", "rows", "an empty sequence", "no rows: a [0, C] tensor")
accept("llama_rope.band_counts", "bands", "an empty sequence", "no bands: every count is 0")

# --- running a case -------------------------------------------------------------------------


@dataclass
class Outcome:
    ok: bool
    why: str = ""


def _innermost_frame_file(err: BaseException) -> str:
    tb = traceback.extract_tb(err.__traceback__)
    return tb[-1].filename if tb else ""


def _in_posenc(filename: str, home: Path = POSENC_DIR) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(home)
    except (OSError, ValueError):
        return False


class _TooSlow(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Interrupt the body after ``seconds``: garbage must be refused before any real work."""
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def stop(signum, frame):
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


TIME_LIMIT_S = 5.0


def _stopped(err: BaseException) -> bool:
    """Whether ``err`` comes of the time limit, raised inside a call that caught it and
    raised its own error (``rope_compiled`` wraps whatever stops ``torch.compile``)."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, _TooSlow):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def _still_running(garbage: Garbage) -> Outcome:
    """A call still running at the time limit took its argument: a failure for garbage,
    but not for a tensor on another device that the function may take (it was working on
    it there: compiling for a GPU takes longer than the limit)."""
    if garbage.other_device and garbage.questionable:
        return Outcome(True, f"accepted (still running after {TIME_LIMIT_S:g} s)")
    return Outcome(False, f"still running after {TIME_LIMIT_S:g} s: the garbage was taken")


def judge(
    func: Callable, kwargs: dict, param: str, garbage: Garbage, *, home: Path = POSENC_DIR
) -> Outcome:
    """Call ``func`` with garbage in ``param`` and say whether it was refused clearly.

    ``home`` is the package whose own checks count: an error raised anywhere else (torch,
    matplotlib, ...) is an internal error, not a validation.
    """
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            torch.no_grad(),
            _time_limit(TIME_LIMIT_S),
        ):
            warnings.simplefilter("ignore")
            func(**kwargs)
    except _TooSlow:
        return _still_running(garbage)
    except (TypeError, ValueError) as err:
        if _stopped(err):
            return _still_running(garbage)
        message = str(err)
        where = _innermost_frame_file(err)
        if not _in_posenc(where, home):
            return Outcome(False, f"{type(err).__name__} from {Path(where).name}: {message!r}")
        names = (param, *ALIASES.get(param, ()))
        if not any(re.search(rf"(?<!\w){re.escape(n)}", message) for n in names):
            return Outcome(False, f"message does not name {param!r}: {message!r}")
        if garbage.evidence and not any(e.lower() in message.lower() for e in garbage.evidence):
            return Outcome(False, f"message does not show the value: {message!r}")
        if garbage.other_device and not garbage.questionable:
            low = message.lower()
            shown = "cpu" in low and OTHER_DEVICE in low and "device" in low
            if not shown:
                return Outcome(False, f"message does not name both devices: {message!r}")
        return Outcome(True)
    except Exception as err:  # an internal error: IndexError, RuntimeError, AttributeError ...
        if _stopped(err):
            return _still_running(garbage)
        where = Path(_innermost_frame_file(err)).name
        if (
            garbage.other_device
            and garbage.questionable
            and OTHER_DEVICE == "meta"
            and not _DEVICE_MISMATCH.search(str(err))
        ):
            # meta tensors hold no values: what needs them cannot run there, which says
            # nothing about a real second device; a device mismatch is still a failure. A
            # mix that must be refused is not excused: on a GPU, the values a meta tensor
            # cannot give are read (copied to the CPU), and the mix is taken silently
            return Outcome(True, f"cannot run on meta: {str(err)[:80]!r}")
        return Outcome(False, f"internal {type(err).__name__} in {where}: {str(err)[:150]!r}")
    finally:
        plt.close("all")
    if garbage.questionable:
        return Outcome(True, "accepted (a legitimate input here)")
    return Outcome(False, "accepted silently")


def _skip_unwalked(target: Target) -> None:
    if target.qualname in NOT_WALKED:
        pytest.skip(NOT_WALKED[target.qualname])
    if target.module.split(".")[0] == "bench" and target.qualname not in BENCH_WALKED:
        pytest.skip("benchmark harness: runs benchmarks or needs their results")


@pytest.fixture(autouse=True)
def _offline_and_quiet(monkeypatch, request):
    # anything that reaches for the Hub must fail at once: no network, a closed port
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with warnings.catch_warnings():
        # the walk makes animations it never shows; matplotlib warns when each is collected,
        # so the animations are collected here, not in whichever test runs next
        warnings.filterwarnings("ignore", "Animation was deleted", UserWarning)
        yield
        plt.close("all")
        if "anim" in request.node.name:
            gc.collect()


# --- the tests ----------------------------------------------------------------------------------


def test_the_walk_finds_the_public_api():
    names = {str(t) for t in TARGETS}
    assert len(TARGETS) > 150, len(TARGETS)
    for expected in (
        "rope.apply_rope",
        "encodings.sinusoidal_encoding",
        "precision.check_apply_rope",
        "attention.DemoAttention",
        "attention.DemoAttention.forward",
        "data.llama.Llama.encode",
    ):
        assert expected in names
    top = {
        n
        for n in posenc.__all__
        if callable(getattr(posenc, n)) and not inspect.ismodule(getattr(posenc, n))
    }
    walked = {id(t.func) for t in TARGETS}
    missing = [n for n in top if id(getattr(posenc, n)) not in walked]
    assert not missing, f"re-exported callables not walked: {missing}"


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_valid_call_runs(target):
    _skip_unwalked(target)
    if target.qualname in NO_BASELINE:
        pytest.skip(NO_BASELINE[target.qualname])
    func, kwargs = valid_call(target)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        result = func(**kwargs)
    plt.close("all")
    # the baseline is a real call: it returns what the signature promises
    returns = inspect.signature(target.func).return_annotation
    if inspect.isclass(target.func):
        assert isinstance(result, target.func)
    elif returns in (None, "None"):
        assert result is None, f"{target} returned {type(result).__name__}, declared None"
    else:
        assert result is not None, f"{target} returned None"


def _cases(target: Target):
    _, kwargs = valid_call(target)
    for p in _params(target):
        valid = kwargs.get(p.name, p.default)
        if p.name in kwargs or p.default is not p.empty:
            for g in garbage_for(target, p, valid):
                if (target.qualname, p.name, g.label) in ACCEPTED:
                    continue
                fresh_func, fresh = valid_call(target)
                if g.other_device:
                    g = _device_case(target, p.name, fresh_func, fresh, g)
                fresh[p.name] = g.value
                yield p.name, g, fresh_func, fresh


def _holds_tensors(value: object) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, torch.nn.Module):
        return any(True for _ in value.parameters()) or any(True for _ in value.buffers())
    if isinstance(value, (list, tuple)):
        return any(_holds_tensors(v) for v in value)
    return False


def _device_case(target: Target, name: str, func: Callable, kwargs: dict, g: Garbage) -> Garbage:
    """A tensor moved to the other device is *mixed* when another argument (or the instance
    of a method) holds tensors still on the CPU: it must be refused by posenc's own check,
    naming the argument and both devices, unless the function takes the mix on purpose
    (``MIXING``). Moved *alone*, the function may run on that device."""
    others = [v for k, v in kwargs.items() if k != name] + [getattr(func, "__self__", None)]
    if not any(_holds_tensors(v) for v in others):
        return dataclasses.replace(g, label="a tensor alone on another device", questionable=True)
    if (target.qualname, name) in MIXING:
        return dataclasses.replace(
            g, label="a tensor mixed with CPU ones (taken)", questionable=True
        )
    return dataclasses.replace(g, label="a tensor mixed with CPU ones", evidence=())


_DEVICE_MISMATCH = re.compile(r"same device|expected device|two devices|different device")


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_garbage_is_refused_with_a_clear_error(target):
    _skip_unwalked(target)
    valid_call(target)
    problems = []
    count = 0
    for name, garbage, func, kwargs in _cases(target):
        count += 1
        outcome = judge(func, kwargs, name, garbage)
        if not outcome.ok:
            problems.append(f"{name} = {garbage.label}: {outcome.why}")
    assert not problems, f"{target}: {count} cases, {len(problems)} problems:\n" + "\n".join(
        problems
    )


# --- the judge itself -------------------------------------------------------------------------


def _silent(x):
    return x


def _internal(dim):
    return [0][dim]  # IndexError for dim != 0


def _named(dim):
    raise ValueError(f"dim must be even, got dim={dim}")


def _unnamed(dim):
    raise ValueError("bad input")


def test_the_judge_flags_silence_internal_errors_and_unclear_messages():
    g = Garbage("a negative size", -7, ("-7",))
    here = Path(__file__).resolve().parent  # this file's functions play posenc's part
    assert judge(_silent, {"x": -7}, "x", g, home=here).why == "accepted silently"
    assert "internal IndexError" in judge(_internal, {"dim": -7}, "dim", g, home=here).why
    assert judge(_named, {"dim": -7}, "dim", g, home=here).ok
    assert "does not name" in judge(_unnamed, {"dim": -7}, "dim", g, home=here).why
    shown = Garbage("a negative size", -7, ("-9",))
    assert "does not show the value" in judge(_named, {"dim": -7}, "dim", shown, home=here).why


def _compiling(x):  # as rope_compiled does when the time limit stops torch.compile
    try:
        raise _TooSlow
    except _TooSlow as err:
        raise RuntimeError(f"torch.compile failed here: {type(err).__name__}") from err


def test_the_time_limit_counts_also_when_a_call_wraps_it():
    """A call stopped by the time limit took its argument, whatever error it turned the stop
    into: garbage taken, and an input the function may take accepted."""
    here = Path(__file__).resolve().parent
    garbage = Garbage("a negative size", -7, ("-7",))
    stopped = judge(_compiling, {"x": -7}, "x", garbage, home=here)
    assert not stopped.ok and stopped.why.startswith("still running")
    legitimate = Garbage(
        "a tensor alone on another device", 0, questionable=True, other_device=True
    )
    assert judge(_compiling, {"x": 0}, "x", legitimate, home=here).ok
    taken = Garbage("an int for a float", 0, questionable=True)  # may be taken, not hang
    assert not judge(_compiling, {"x": 0}, "x", taken, home=here).ok


def test_a_torch_error_is_not_a_validation():
    g = Garbage("a str for a tensor", "garbage", ("str",))
    outcome = judge(torch.sin, {"input": "garbage"}, "input", g)
    assert not outcome.ok and "from" in outcome.why


def test_garbage_values_cover_the_kinds():
    t = Target("encodings.sinusoidal_encoding", "encodings", posenc.encodings.sinusoidal_encoding)
    params = {p.name: p for p in _params(t)}
    labels = {g.label for g in garbage_for(t, params["dim"], 8)}
    assert {"a str for an int", "a float for an int", "a negative size", "None"} <= labels
    labels = {g.label for g in garbage_for(t, params["base"], 10000.0)}
    assert {"NaN", "a str for a number"} <= labels
    rope = Target("rope.apply_rope", "rope", posenc.rope.apply_rope)
    x = {p.name: p for p in _params(rope)}["x"]
    labels = {g.label for g in garbage_for(rope, x, _randn(4, 8))}
    assert {"an empty tensor", "an integer tensor", "an odd feature size", "a 0-d tensor"} <= labels


def test_environment_is_offline_during_the_walk():
    assert os.environ["HF_HUB_OFFLINE"] == "1"
