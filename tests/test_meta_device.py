"""The core's tensor functions run end to end on the meta device: shapes only, no data.

Meta tensors stand in for a GPU on a machine without one. A function that builds a table on
the CPU and mixes it with its input fails here with torch's "not on the expected device"
error, exactly as it would on CUDA; so does one that forgets to move positions or
frequencies to the data's device. Each result must come back on the meta device, in the
shape the contract promises.
"""

from __future__ import annotations

import pytest
import torch

import posenc as pe
from posenc import attention, fast, relative, rope, rotation

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
