"""The core's tensor functions run end to end on the meta device: shapes only, no data.

Meta tensors stand in for a GPU on a machine without one. A function that builds a table on
the CPU and mixes it with its input fails here with torch's "not on the expected device"
error, exactly as it would on CUDA; so does one that forgets to move positions or
frequencies to the data's device. Each result must come back on the meta device, in the
shape the contract promises.
"""

from __future__ import annotations

import functools

import pytest
import torch

import posenc as pe
from posenc import attention, fast, relative, rope, rotation
from posenc.book import (
    context,
    frequencies,
    llama_rope,
    relative_views,
    rope_nd_views,
    rope_views,
    shift,
)

META = torch.device("meta")


def _x(*shape, dtype=torch.float32):
    return torch.empty(*shape, dtype=dtype, device=META)


CASES = {
    "rope.apply_rope, default positions": (lambda: rope.apply_rope(_x(2, 3, 5, 8)), (2, 3, 5, 8)),
    "rope.apply_rope, a CPU position list": (
        lambda: rope.apply_rope(_x(5, 8), [0, 3, 9, 2, 7], layout="half"),
        (5, 8),
    ),
    "rope.apply_rope, CPU inv_freq": (
        lambda: rope.apply_rope(_x(5, 8), inv_freq=pe.llama3_inv_freq(pe.rope_inv_freq(8))),
        (5, 8),
    ),
    "rope.apply_rope, broadcasting positions": (
        lambda: rope.apply_rope(_x(1, 5, 8), torch.arange(10, device=META).view(2, 5)),
        (2, 5, 8),
    ),
    "rope.apply_rope_": (lambda: rope.apply_rope_(_x(4, 8), layout="half"), (4, 8)),
    "rope.apply_rope_nd": (
        lambda: rope.apply_rope_nd(_x(6, 8), torch.zeros(6, 2, dtype=torch.long, device=META)),
        (6, 8),
    ),
    "rope.permute_qk_rows": (lambda: rope.permute_qk_rows(_x(16, 4), 2), (16, 4)),
    "fast.apply_rope": (lambda: fast.apply_rope(_x(2, 5, 8), layout="half"), (2, 5, 8)),
    "fast.apply_rope_": (lambda: fast.apply_rope_(_x(2, 5, 8)), (2, 5, 8)),
    "fast.rope_qk": (lambda: fast.rope_qk(_x(1, 4, 5, 8), _x(1, 2, 5, 8))[1], (1, 2, 5, 8)),
    "rotation.rotation_matrix": (lambda: rotation.rotation_matrix(_x(3)), (3, 2, 2)),
    "rotation.block_diagonal": (lambda: rotation.block_diagonal(_x(3, 2, 2)), (6, 6)),
    "attention.self_attention": (
        lambda: attention.self_attention(_x(4, 8), _x(4, 8), _x(4, 8)),
        (4, 8),
    ),
    "attention.DemoAttention": (
        lambda: attention.DemoAttention(8, num_heads=2).to(META)(_x(1, 4, 8))[0],
        (1, 4, 8),
    ),
    "relative.shaw_attention": (
        lambda: relative.shaw_attention(_x(4, 8), _x(4, 8), _x(4, 8), _x(3, 8), _x(3, 8))[0],
        (4, 8),
    ),
    # positions and frequencies made on the CPU, as the chapters make them, with x elsewhere
    # (on an H100 each of these stopped chapters 7, 10, 11 or 16 at a device check)
    "rope.apply_rope_nd, CPU positions": (
        lambda: rope.apply_rope_nd(_x(6, 8), torch.zeros(6, 2, dtype=torch.long)),
        (6, 8),
    ),
    "rope_nd_views.mixed_rope_2d, CPU positions and frequencies": (
        lambda: rope_nd_views.mixed_rope_2d(
            _x(9, 8), rope_nd_views.grid_positions((3, 3)), pe.rope_inv_freq(8), pe.rope_inv_freq(8)
        ),
        (9, 8),
    ),
    "rope_nd_views.pairwise_scores, meta cells, CPU frequencies": (
        lambda: rope_nd_views.pairwise_scores(
            _x(8),
            _x(8),
            rope_nd_views.grid_positions((3, 3)).to(META),
            functools.partial(
                rope_nd_views.mixed_rope_2d, freq_x=pe.rope_inv_freq(8), freq_y=pe.rope_inv_freq(8)
            ),
        ),
        (9, 9),
    ),
    "rope_nd_views.pairwise_scores, CPU positions": (
        lambda: rope_nd_views.pairwise_scores(_x(8), _x(8), torch.tensor([[0, 0], [1, 0], [0, 1]])),
        (3, 3),
    ),
    "rope_views.score_grid, CPU positions": (
        lambda: rope_views.score_grid(_x(8), _x(8), torch.arange(5)),
        (5, 5),
    ),
    "rope_views.relative_scores, CPU offsets": (
        lambda: rope_views.relative_scores(_x(8), _x(8), torch.arange(-2, 3)),
        (5,),
    ),
    "rope_views.pair_scores, CPU positions": (
        lambda: rope_views.pair_scores(
            _x(6), _x(6), torch.arange(4), torch.arange(4) + 3, _x(6, 8), _x(6, 8)
        ),
        (4,),
    ),
    "rope_views.rope_attention, CPU positions": (
        lambda: rope_views.rope_attention(
            attention.DemoAttention(8, num_heads=2).to(META), _x(1, 4, 8), positions=torch.arange(4)
        )[0],
        (1, 4, 8),
    ),
    "frequencies.scores_at_distances, CPU distances and inv_freq": (
        lambda: frequencies.scores_at_distances(
            _x(8, dtype=torch.float64),
            _x(8, dtype=torch.float64),
            torch.arange(5),
            inv_freq=pe.rope_inv_freq(8).double(),
        ),
        (5,),
    ),
    "frequencies.pair_scores, CPU distances and inv_freq": (
        lambda: frequencies.pair_scores(
            _x(8), _x(8), torch.arange(5), inv_freq=pe.rope_inv_freq(8)
        ),
        (5, 4),
    ),
    "frequencies.decay_bound, CPU distances and inv_freq": (
        lambda: frequencies.decay_bound(
            _x(8, dtype=torch.float64),
            _x(8, dtype=torch.float64),
            torch.arange(5),
            inv_freq=pe.rope_inv_freq(8).double(),
        ),
        (5,),
    ),
    "context.rope_pair_scores, CPU positions": (
        lambda: context.rope_pair_scores(
            _x(6), _x(6), torch.arange(4), torch.arange(4) + 3, _x(6, 8), _x(6, 8)
        ),
        (4,),
    ),
    "llama_rope.rope_scores, CPU positions and inv_freq": (
        lambda: llama_rope.rope_scores(
            _x(5, 8),
            _x(8, 8),
            _x(8, 8),
            num_heads=2,
            positions=torch.arange(5),
            inv_freq=pe.rope_inv_freq(4),
        ),
        (2, 5, 5),
    ),
    "rope_nd_views.mrope, CPU positions": (
        lambda: rope_nd_views.mrope(_x(5, 8), torch.zeros(5, 2, dtype=torch.long), [2, 2]),
        (5, 8),
    ),
    "rope_nd_views.mispaired_rope_2d, CPU positions": (
        lambda: rope_nd_views.mispaired_rope_2d(_x(9, 8), rope_nd_views.grid_positions((3, 3))),
        (9, 8),
    ),
    "relative_views.shaw_attention_at, CPU positions": (
        lambda: relative_views.shaw_attention_at(
            _x(4, 8), _x(4, 8), _x(4, 8), _x(3, 8), _x(3, 8), torch.arange(10, 14)
        )[0],
        (4, 8),
    ),
    "relative_views.attention_at, Shaw, positions as a list": (
        lambda: relative_views.attention_at(
            relative_views.make_shift_setup(8, num_heads=2, head_dim=4, seed=0, device=META),
            "Shaw",
            list(range(3, 11)),
        )[1],
        (2, 8, 8),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_runs_on_meta(name):
    make, shape = CASES[name]
    out = make()
    assert out.device == META, f"{name}: result on {out.device}"
    assert tuple(out.shape) == shape


def test_a_table_built_on_the_cpu_fails_here():
    """The stand-in works: mixing a CPU table with a meta input raises what CUDA raises."""

    def buggy(x):  # the bug class: a table made on the default device, then mixed
        return x * torch.ones(x.shape[-1])

    with pytest.raises(RuntimeError, match="device"):
        buggy(_x(3, 4))


@pytest.mark.parametrize("apply", [rope.apply_rope, rope.apply_rope_, fast.apply_rope])
@pytest.mark.parametrize(
    "argument",
    [
        {"positions": torch.arange(3, device="meta")},
        {"positions": torch.arange(3, device="meta")[None]},
        {"inv_freq": torch.ones(4, device="meta")},
    ],
    ids=["positions [T]", "positions [1, T]", "inv_freq"],
)
def test_values_on_meta_are_not_copied_to_x(apply, argument):
    """Positions and frequencies are copied to x's device, as the reference does; from the
    meta device there is nothing to copy, and the error says so."""
    (name,) = argument
    with pytest.raises(ValueError, match=f"{name} is on the meta device, which holds no values"):
        apply(torch.randn(2, 3, 8), **argument)


@pytest.mark.parametrize(
    ("call", "name", "owner"),
    [
        (
            lambda m: rope.apply_rope_nd(torch.randn(6, 8), m(torch.zeros(6, 2, dtype=torch.long))),
            "positions",
            "x",
        ),
        (
            lambda m: rope_nd_views.mixed_rope_2d(
                torch.randn(9, 8),
                rope_nd_views.grid_positions((3, 3)),
                m(torch.ones(4)),
                torch.ones(4),
            ),
            "freq_x",
            "x",
        ),
        (
            lambda m: relative_views.shaw_attention_at(
                *torch.randn(3, 4, 8), *torch.randn(2, 3, 8), m(torch.arange(4))
            ),
            "positions",
            "q",
        ),
        (
            lambda m: llama_rope.transformers_rope(
                torch.randn(1, 4, 3, 64), torch.randn(1, 2, 3, 64), m(torch.arange(3))
            ),
            "positions",
            "q",
        ),
        (
            lambda m: frequencies.decay_bound(
                *torch.randn(2, 8, dtype=torch.float64), torch.arange(3), inv_freq=m(torch.ones(4))
            ),
            "inv_freq",
            "q",
        ),
        (
            lambda m: context.rope_pair_scores(
                *torch.randn(2, 6), torch.arange(4), m(torch.arange(4)), *torch.randn(2, 6, 8)
            ),
            "key_positions",
            "query_content",
        ),
    ],
    ids=[
        "apply_rope_nd",
        "mixed_rope_2d",
        "shaw_attention_at",
        "transformers_rope",
        "decay_bound",
        "rope_pair_scores",
    ],
)
def test_book_values_on_meta_are_not_copied(call, name, owner):
    """The book's functions copy positions and frequencies to the data's device as
    ``apply_rope`` does, and refuse them on the meta device, which has none to copy, naming
    them and the argument whose device they would go to; the same call with them on the CPU
    runs."""
    call(lambda t: t)
    with pytest.raises(ValueError, match=f"{name} is on the meta device, which holds no values"):
        call(lambda t: t.to(META))
    with pytest.raises(ValueError, match=f"to {owner}'s device cpu: put {name} on the CPU$"):
        call(lambda t: t.to(META))


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda p: pe.integer_encoding(p, 4), "positions"),
        (lambda p: pe.binary_encoding(p, 4), "positions"),
        (lambda p: pe.length_normalized_encoding(p, 4, length=5), "positions"),
        (lambda p: pe.LearnedPositionalEmbedding(5, 4)(p), "positions"),
        (lambda p: pe.permute_positions(torch.randn(3, 4), p.flip(0)), "perm"),
    ],
    ids=["integer", "binary", "length_normalized", "learned", "permute_positions"],
)
def test_values_that_must_be_checked_are_refused_on_meta_by_name(call, name):
    """Functions that read their positions' values (non-negative, within a table, a
    permutation) stopped inside torch on the meta device ("Tensor.item() cannot be called on
    meta tensors"); they now refuse the argument by name. The same call from the CPU runs."""
    positions = torch.arange(3)
    assert call(positions).device.type == "cpu"
    with pytest.raises(ValueError, match=f"^{name} is on the meta device, which holds no values"):
        call(positions.to(META))


class _Elsewhere(torch.Tensor):
    """A tensor that says it lives on a GPU and holds nothing: any operation on it (a copy
    to the CPU, a value read) raises. It stands in for a GPU tensor where a call must refuse
    it from its device alone, before it is touched."""

    @staticmethod
    def __new__(cls, t: torch.Tensor, device: str = "cuda"):
        return torch.Tensor._make_wrapper_subclass(cls, t.shape, dtype=t.dtype, device=device)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise AssertionError(f"{func} ran on a tensor of another device")


@pytest.mark.parametrize("apply", [rope.apply_rope, rope.apply_rope_, fast.apply_rope])
@pytest.mark.parametrize(
    ("argument", "where"),
    [
        ({"positions": torch.arange(3)}, "cuda"),
        ({"positions": torch.arange(3)[None]}, "cuda:1"),
        ({"inv_freq": torch.ones(4)}, "cuda"),
    ],
    ids=["positions [T] on a GPU", "positions [1, T] on GPU 1", "inv_freq on a GPU"],
)
def test_values_on_a_third_device_are_refused(apply, argument, where):
    """Positions and frequencies come from x's device or from the CPU; from any other device
    (a GPU, for x on the CPU) the call refuses them, naming both devices, before reading
    them: the copy would wait on that device, and the call most likely mixed its devices."""
    ((name, value),) = argument.items()
    with pytest.raises(
        ValueError,
        match=f"{name} must be on x's device or on the CPU, got {name} on {where} and x on cpu",
    ):
        apply(torch.randn(2, 3, 8), **{name: _Elsewhere(value, where)})
    apply(torch.randn(2, 3, 8), **argument)  # from the CPU, the same call runs


def test_the_book_refuses_values_from_a_third_device():
    """The book's functions copy positions and frequencies as ``apply_rope`` does, so they
    refuse them from a device that is neither the data's nor the CPU."""
    with pytest.raises(
        ValueError,
        match="positions must be on x's device or on the CPU, got positions on cuda and x on cpu",
    ):
        rope.apply_rope_nd(torch.randn(6, 8), _Elsewhere(torch.zeros(6, 2, dtype=torch.long)))
    with pytest.raises(
        ValueError, match="shift_matrices must be on encoding's device or on the CPU, got"
    ):
        shift.max_shift_error(torch.randn(8, 4), [1], _Elsewhere(torch.randn(1, 4, 4)))
    with pytest.raises(
        ValueError,
        match="inv_freq must be on q's device or on the CPU, got inv_freq on cuda and q on cpu",
    ):
        frequencies.decay_bound(
            *torch.randn(2, 8, dtype=torch.float64),
            torch.arange(3),
            inv_freq=_Elsewhere(torch.ones(4)),
        )


def test_same_device_takes_only_parameter_names_to_copy():
    """``copied`` names parameters: a bare string (whose letters would each count as a
    name) and a name the function does not have are refused when decorating."""
    from posenc._validate import same_device

    def rotate(x, positions=None):
        return x

    with pytest.raises(TypeError, match="copied must be a tuple of parameter names"):
        same_device(copied="positions")
    with pytest.raises(TypeError, match=r"copied names \['position'\], which are not parameters"):
        same_device(copied=("position",))(rotate)
    checked = same_device(copied=("positions",))(rotate)
    assert checked(_x(3), torch.arange(3)).device == META  # CPU positions with meta data
    with pytest.raises(ValueError, match="x and positions must be on one device"):
        same_device(rotate)(_x(3), torch.arange(3))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_on_a_gpu_book_functions_take_cpu_positions():
    """Where the meta device cannot follow (these functions read values), a GPU: CPU cells,
    distances and positions with data on the GPU give the CPU's results."""
    q, k = torch.randn(2, 8, dtype=torch.float64)
    cells = rope_nd_views.grid_positions((3, 3))
    on_gpu = rope_nd_views.offset_check(q.cuda(), k.cuda(), cells)
    assert on_gpu.holds() and on_gpu.offsets == rope_nd_views.offset_check(q, k, cells).offsets
    d = torch.arange(6)
    torch.testing.assert_close(
        frequencies.scores_at_distances(q.cuda(), k.cuda(), d).cpu(),
        frequencies.scores_at_distances(q, k, d),
    )
    qh, kh = torch.randn(1, 4, 3, 64), torch.randn(1, 2, 3, 64)
    p = torch.tensor([0, 7, 4000])
    got = llama_rope.transformers_rope(qh.cuda(), kh.cuda(), p)
    want = llama_rope.transformers_rope(qh, kh, p)
    torch.testing.assert_close(got.q.cpu(), want.q, rtol=1e-5, atol=1e-5)
