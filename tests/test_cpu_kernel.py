"""The C loop: bit-identical to the elementwise form, in place and out of place, on every split
of the work; and a clean fallback when it cannot be built."""

import shutil

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import posenc.rope as rope
from posenc.bench import forms as fr
from posenc.fast import cpu_kernel
from posenc.fast import tables as tb

needs_kernel = pytest.mark.skipif(
    not cpu_kernel.available(), reason=f"C kernel not available: {cpu_kernel.status()}"
)


def _tables(x, positions, layout):
    return tb._tables(tb._Args(x, positions, 10000.0, None, layout))


@needs_kernel
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lead=st.lists(st.integers(1, 5), min_size=0, max_size=2),
    length=st.integers(1, 300),
    pairs=st.integers(1, 40),
    layout=st.sampled_from(rope.LAYOUTS),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
    threads=st.sampled_from([1, 2, 3]),
    seed=st.integers(0, 2**31 - 1),
    view=st.booleans(),
)
def test_kernel_is_bit_identical_to_the_elementwise_form(
    lead, length, pairs, layout, dtype, threads, seed, view, monkeypatch
):
    """Every dtype the loop takes, both layouts, contiguous tensors and a model's view (its
    ``[.., T, H, D]`` projection seen as ``[..., H, T, D]``), on every split of the work."""
    # few rows per thread, so small inputs are split too: by leading rows or by positions
    # (the same setting for every example, so one fixture serves them all)
    monkeypatch.setattr(cpu_kernel, "_MIN_ROWS_PER_THREAD", 1)
    gen = torch.Generator().manual_seed(seed)
    if view and lead:  # [..., H, T, D] as a transposed view of [..., T, H, D]
        x = torch.randn(*lead[:-1], length, lead[-1], 2 * pairs, generator=gen).to(dtype)
        x = x.transpose(-3, -2)
    else:
        x = torch.randn(*lead, length, 2 * pairs, generator=gen).to(dtype)
    positions = torch.randint(-70000, 70000, (length,), generator=gen)
    want = fr.rope_elementwise(x, positions, layout=layout)
    tables = _tables(x, positions, layout)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out, y, lib = torch.empty_like(x), x.clone(), cpu_kernel._load()
        cpu_kernel._run(lib, x, out, tables.cos, tables.sin, layout, threads)
        cpu_kernel._run(lib, y, y, tables.cos, tables.sin, layout, threads)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(out, want)
    assert torch.equal(y, want)


@needs_kernel
@pytest.mark.parametrize("layout", rope.LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_default_paths_use_the_kernel_and_stay_exact(layout, dtype):
    x = torch.randn(2, 8, 300, 64).to(dtype)
    want = fr.rope_elementwise(x, layout=layout)
    assert torch.equal(fr.apply_rope(x, layout=layout), want)
    assert torch.equal(fr.rope_c(x, layout=layout), want)
    y = x.clone()
    assert fr.apply_rope_(y, layout=layout) is y and torch.equal(y, want)
    q, _ = fr.rope_qk(x, x.flip(1), layout=layout)
    assert torch.equal(q, want)


@needs_kernel
def test_rope_c_copies_a_non_contiguous_input():
    x = torch.randn(1, 300, 4, 64).transpose(1, 2)  # [B, H, T, D] seen through [B, T, H, D]
    assert torch.equal(fr.rope_c(x, layout="half"), fr.rope_elementwise(x, layout="half"))


@needs_kernel
def test_the_loop_rotates_views_where_they_lie():
    """Any strides but the last, up to 4 dims: a model's transposed view and a slice of it are
    rotated where they lie, in place, as the reference rotates them."""
    x = torch.randn(2, 5, 3, 8).transpose(1, 2)  # [B, H, T, D] view of [B, T, H, D]
    for view in (x, x[:, 1:]):
        want = rope.apply_rope(view, layout="half")
        assert fr.apply_rope_(view, layout="half") is view and torch.equal(view, want)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda x, c: fr.rope_c(x.half()), ValueError, "float32, float64 or bfloat16"),
        (
            lambda x, c: fr.rope_c(x, torch.zeros(2, 1, 3, dtype=torch.long)),
            ValueError,
            "one row",
        ),
    ],
)
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call(torch.zeros(2, 3, 4), torch.zeros(3, 2))


@pytest.fixture
def fresh_kernel_state(monkeypatch, tmp_path):
    """A kernel that has not been loaded yet, built into an empty cache."""
    monkeypatch.setattr(cpu_kernel, "_state", {})
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_without_a_compiler_apply_rope_falls_back_and_agrees(fresh_kernel_state, monkeypatch):
    """With no C compiler the default paths of posenc.fast fall back to the reference's
    tensor operations and give its rotation: out of place, in place and through rope_qk."""
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert not cpu_kernel.available()
    assert cpu_kernel.status().startswith("no C compiler")
    x = torch.randn(2, 8, 300, 64)
    for layout in rope.LAYOUTS:
        want = rope.apply_rope(x, layout=layout)
        torch.testing.assert_close(fr.apply_rope(x, layout=layout), want, rtol=0, atol=1e-6)
        y = x.clone()
        assert fr.apply_rope_(y, layout=layout) is y
        torch.testing.assert_close(y, want, rtol=0, atol=1e-6)
        q, _ = fr.rope_qk(x, x.flip(1), layout=layout)
        torch.testing.assert_close(q, want, rtol=0, atol=1e-6)
    with pytest.raises(RuntimeError, match="not available: no C compiler"):
        fr.rope_c(x)


@needs_kernel
def test_a_source_that_does_not_compile_is_reported(fresh_kernel_state, monkeypatch):
    monkeypatch.setattr(cpu_kernel, "SOURCE", "this is not C")
    assert not cpu_kernel.available()
    assert "could not build the kernel" in cpu_kernel.status()
    assert not list(fresh_kernel_state.glob("*.so"))  # nothing half-written is left behind
    x = torch.randn(2, 8, 300, 64)  # the C loop's work: the tensor operations take it
    for layout in rope.LAYOUTS:
        assert torch.equal(fr.apply_rope(x, layout=layout), rope.apply_rope(x, layout=layout))


@needs_kernel
def test_a_kernel_that_rounds_differently_is_refused(fresh_kernel_state, monkeypatch):
    wrong = cpu_kernel.SOURCE.replace("a * c[i] - e * s[i]", "a * c[i] - (e * s[i] + 0x1p-60)")
    assert wrong != cpu_kernel.SOURCE
    monkeypatch.setattr(cpu_kernel, "SOURCE", wrong)
    assert not cpu_kernel.available()
    assert "not bit-identical" in cpu_kernel.status()


@needs_kernel
def test_the_library_is_built_once_per_source_compiler_and_cpu(fresh_kernel_state, monkeypatch):
    assert cpu_kernel.available()
    built = list(fresh_kernel_state.glob("rope_kernel_*.so"))
    assert len(built) == 1
    monkeypatch.setattr(cpu_kernel, "_state", {})
    assert cpu_kernel.available() and list(fresh_kernel_state.glob("rope_kernel_*.so")) == built
    # another processor gets its own build, never the first one's
    monkeypatch.setattr(cpu_kernel, "_state", {})
    monkeypatch.setattr(cpu_kernel, "_cpu_identity", lambda: "another cpu")
    assert cpu_kernel.available()
    assert len(list(fresh_kernel_state.glob("rope_kernel_*.so"))) == 2
