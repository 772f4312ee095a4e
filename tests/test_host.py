"""``posenc.fast.host``: a remembered call's key and its launch's arguments, in C++. Its key
remembers exactly the calls the key read in Python remembers, and tells two calls apart
exactly when that one does; its arguments hold the tensors' own addresses, given only when
their alignment is the one remembered."""

from __future__ import annotations

import importlib.util
import os
import time

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_remembered_calls import ANGLES, CALLS, CHANGES, FIELDS, MODEL, _arguments

from posenc.fast import _compiled, host, kernels
from posenc.fast import triton as tr
from posenc.fast.tables import Angles

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None or tr._OPS is None,
    reason="the keys are those of the Triton kernel's calls (Triton, torch 2.4 or later)",
)


@pytest.fixture(scope="module")
def module():
    if not host.available():
        pytest.skip(f"posenc.fast.host is not built here: {host.status()}")
    return host._module


_ODD = {  # calls the fields of test_remembered_calls do not make
    "q a Parameter": lambda q, k, p, kw: (torch.nn.Parameter(q, requires_grad=False), k, p, kw),
    "k a Parameter": lambda q, k, p, kw: (q, torch.nn.Parameter(k, requires_grad=False), p, kw),
    "q of 3 dimensions": lambda q, k, p, kw: (q[0], k, p, kw),
    "k None": lambda q, k, p, kw: (q, None, p, kw),
    "k is q": lambda q, k, p, kw: (q, q, p, kw),
    "q sparse": lambda q, k, p, kw: (q.float().to_sparse(), k, p, kw),
    "positions sparse": lambda q, k, p, kw: (q, k, torch.arange(3).to_sparse(), kw),
    "positions needing grad": lambda q, k, p, kw: (
        q, k, torch.arange(3.0, requires_grad=True), kw),
    "angles a Parameter": lambda q, k, p, kw: (
        q, k, Angles(torch.nn.Parameter(p.table, requires_grad=False)), kw),
    "angles' table passed as positions": lambda q, k, p, kw: (q, k, p.table, kw),
    "frequencies on another device": lambda q, k, p, kw: (
        q, k, p, {**kw, "inv_freq": torch.rand(4, device="meta")}),
    "frequencies of another dtype": lambda q, k, p, kw: (
        q, k, p, {**kw, "inv_freq": torch.rand(4, device="meta", dtype=torch.float64)}),
    "frequencies negated lazily": lambda q, k, p, kw: (
        q, k, p, {**kw, "inv_freq": torch._neg_view(torch.rand(4, device="meta"))}),
    "frequencies needing grad": lambda q, k, p, kw: (
        q, k, p, {**kw, "inv_freq": torch.rand(4, device="meta", requires_grad=True)}),
    "q on another device": lambda q, k, p, kw: (q.to("meta"), k, p, kw),
    "k on another device": lambda q, k, p, kw: (q, k.to("meta"), p, kw),
    "layout not a string": lambda q, k, p, kw: (q, k, p, {**kw, "layout": 0}),
    "in place not a bool": lambda q, k, p, kw: (q, k, p, {**kw, "inplace": 1}),
}  # fmt: skip
ODD = st.one_of(st.none(), st.sampled_from(sorted(_ODD)))


def _call(call, odd, seed):
    """The arguments of ``_plan_key`` for a call of test_remembered_calls' kind, made odd."""
    q, k, positions, kwargs = _arguments(call, seed)
    if odd is not None:
        if odd.startswith("angles") and not isinstance(positions, Angles):
            positions = _arguments(ANGLES, seed)[2]
        q, k, positions, kwargs = _ODD[odd](q, k, positions, kwargs)
    return (
        kernels._rope_qk, q, k, positions, kwargs["base"], kwargs["inv_freq"], kwargs["layout"],
        kwargs["inplace"], kwargs["offset"],
    )  # fmt: skip


def _keys(module, monkeypatch, args):
    """``_plan_key`` of ``args`` read in Python, then in C++."""
    monkeypatch.setattr(host, "_module", None)
    by_python = tr._plan_key(*args)
    monkeypatch.setattr(host, "_module", module)
    return by_python, tr._plan_key(*args)


@example(MODEL, None, None, None, False)
@example(MODEL, ("q_view", "contiguous"), None, None, False)
@example(MODEL, None, "frequencies on another device", "frequencies of another dtype", False)
@example(MODEL, None, "frequencies on another device", "frequencies on another device", True)
@example(ANGLES, None, "angles a Parameter", None, False)
@example(MODEL, None, "q sparse", None, False)
@example(MODEL, ("inference", "tensors made in it"), None, None, True)
@given(
    first=st.one_of(st.just(MODEL), st.just(ANGLES), CALLS),
    change=CHANGES,
    odd=ODD,
    other=ODD,
    inference_mode=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_the_key_read_in_c_plus_plus_is_the_key_read_in_python(
    module, first, change, odd, other, inference_mode
):
    """For a call, and a second one like it (the same, or one field changed, or made odd
    another way): the C++ key is None exactly when the Python key is, and the two calls'
    C++ keys are equal exactly when their Python keys are."""
    second = first if change is None else {**first, change[0]: change[1]}
    with pytest.MonkeyPatch.context() as patch, torch.inference_mode(inference_mode):
        patch.setenv("TRITON_INTERPRET", "1")
        a = _keys(module, patch, _call(first, odd, seed=0))
        b = _keys(module, patch, _call(second, other, seed=1))
    for by_python, by_cpp in (a, b):
        assert (by_python is None) == (by_cpp is None), (by_python, by_cpp)
    if a[0] is not None and b[0] is not None:
        assert (a[0] == b[0]) == (a[1] == b[1]), (a, b)


@pytest.mark.parametrize("start", ["model", "angles"])
def test_every_single_change_of_a_model_s_call_is_told_apart_alike(module, monkeypatch, start):
    """Every call one field, or one odd argument, away from a model's call (with positions,
    or with angles): its C++ key is None exactly when its Python key is, and equal to the
    model's exactly when the Python keys are equal; most of them have a key, and some of
    those keep the model's."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    model = MODEL if start == "model" else ANGLES
    want = _keys(module, monkeypatch, _call(model, None, seed=0))
    assert None not in want
    changes = [
        ({**model, name: value}, None) for name, values in FIELDS.items() for value in values
    ]
    changes += [(model, odd) for odd in _ODD]
    keyed = same = 0
    for call, odd in changes:
        by_python, by_cpp = _keys(module, monkeypatch, _call(call, odd, seed=1))
        assert (by_python is None) == (by_cpp is None), (call, odd)
        assert (by_python == want[0]) == (by_cpp == want[1]), (call, odd)
        keyed += by_cpp is not None
        same += by_cpp == want[1]
    assert keyed > 40 and 10 < same < keyed - 10


def test_without_the_interpreter_a_cpu_call_has_no_key(module, monkeypatch):
    """q's device decides as in Python: the CPU only under Triton's interpreter."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert _keys(module, monkeypatch, _call(MODEL, None, seed=0)) == (None, None)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert None not in _keys(module, monkeypatch, _call(MODEL, None, seed=0))


@given(
    shifts=st.lists(st.integers(0, 7), min_size=1, max_size=6),
    wrong=st.integers(0, 5),
    dtype=st.sampled_from([torch.float16, torch.float32, torch.float64]),
    offset=st.sampled_from([0, 7, 2**40]),
)
@settings(max_examples=60, deadline=None)
def test_arguments_hold_the_tensors_addresses_when_aligned_as_remembered(
    module, shifts, wrong, dtype, offset
):
    """``arguments``: each picked tensor's ``data_ptr()``, then the sizes, the offset and the
    rest, when the mask holds each one's 16-byte alignment; None when one bit differs; the
    same as ``_launch_arguments`` read in Python."""
    base = torch.zeros(64, dtype=dtype)
    sources = (None, *(base[s : s + 4] for s in shifts))
    slots = tuple(reversed(range(1, len(sources))))  # picked in another order
    at = tuple(sources[i].data_ptr() for i in slots)
    aligned = tuple(a % 16 == 0 for a in at)
    mask = sum(1 << i for i, a in enumerate(aligned) if a)
    sizes, rest = (3, 4), (5, True, None)
    want = (*at, *sizes, offset, *rest)
    assert module.arguments(mask, slots, sources, sizes, offset, rest) == want
    flipped = mask ^ (1 << (wrong % len(slots)))
    assert module.arguments(flipped, slots, sources, sizes, offset, rest) is None
    direct = tr._Direct(None, 1, None, slots, sizes, rest, aligned, mask, True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(host, "_module", None)
        assert tr._launch_arguments(direct, sources, offset) == want
        patch.setattr(host, "_module", module)
        assert tr._launch_arguments(direct, sources, offset) == want


def test_arguments_refuse_what_is_not_a_plain_tensor(module):
    t = torch.zeros(4)
    assert module.arguments(1, (0, 1), (t, 3), (), 0, ()) is None
    assert module.arguments(1, (0,), (torch.nn.Parameter(t),), (), 0, ()) is None
    with pytest.raises(IndexError, match="a slot past the sources"):
        module.arguments(1, (1,), (t,), (), 0, ())
    with pytest.raises(TypeError, match="takes a mask, slots, sources"):
        module.arguments(t)
    with pytest.raises(TypeError, match="6 arguments"):
        module.signature(t)


def test_status_says_how_it_was_built(module):
    assert host.status().startswith("built with") and host.available()


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """``posenc.fast.host`` as if nothing were built or loaded, with an empty cache."""
    monkeypatch.setattr(host, "_state", {})
    monkeypatch.setattr(host, "_module", None)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_without_a_compiler_calls_read_their_keys_in_python(fresh, monkeypatch):
    """No compiler: not available, the reason said, and a GPU call's start of the build
    changes nothing (it raises nothing, and keys stay Python's)."""
    monkeypatch.setattr(host, "_compiler", lambda: None)
    host._start()
    assert host._module is None and not host.available()
    assert host.status() == "no C++ compiler found ($CXX, c++, g++ or clang++)"


def test_the_compiler_named_by_the_environment_comes_first(monkeypatch, tmp_path):
    """``$CXX`` (or ``$CC``) when it names a program on the PATH, refused by name when it
    names none (not replaced by another), else the first of the usual names found, else
    None."""
    for name in ("mycxx", "g++"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CXX", "mycxx")
    assert host._compiler() == str(tmp_path / "mycxx")
    monkeypatch.setenv("CXX", "nonesuch")
    with pytest.raises(RuntimeError, match=r"^\$CXX names 'nonesuch', which is not a program"):
        host._compiler()
    monkeypatch.delenv("CXX")
    assert host._compiler() == str(tmp_path / "g++")
    monkeypatch.delenv("CC", raising=False)
    assert _compiled.compiler("CC", ("cc", "gcc", "clang")) is None


def test_a_build_that_fails_says_why(fresh, monkeypatch):
    monkeypatch.setattr(host, "_STANDARDS", ("-std=c++nonesuch",))
    assert not host.available()
    assert host.status().startswith("RuntimeError: ") and "could not build" in host.status()
    assert not [p for p in fresh.glob("_posenc_host_*") if p.suffix != ".lock"]


def test_a_build_removes_what_an_abandoned_build_left_and_nothing_else(fresh, monkeypatch):
    """A process that exits while compiling leaves its build folder behind; the next build
    removes it once no build could still be running in it, and leaves a recent one alone."""
    monkeypatch.setattr(host, "_STANDARDS", ("-std=c++nonesuch",))  # fails at once
    old, recent = (fresh / f"{host._NAME}-building-{n}" for n in ("old", "recent"))
    for folder in (old, recent):
        folder.mkdir()
        (folder / "half.o").write_bytes(b"")
    age = time.time() - 2 * _compiled._TIMEOUT - 60
    os.utime(old, (age, age))
    assert not host.available()
    assert not old.exists() and recent.exists()
    assert sorted(p.name for p in fresh.iterdir() if p.suffix != ".lock") == [recent.name]


def test_a_build_in_a_thread_is_used_once_loaded(fresh):
    """The first start builds in a thread (nothing built before in this cache), the next
    process's start loads the build at once."""
    if host._compiler() is None:
        pytest.skip("no C++ compiler")
    host._start()
    host._start()  # once only
    assert host.available() and host._module is not None  # waits for the thread's build
    assert len(list(fresh.glob("_posenc_host_*.so"))) == 1
    host._state.clear()
    host._module = None
    host._start()  # built before: loaded at once, no thread
    assert host._module is not None
