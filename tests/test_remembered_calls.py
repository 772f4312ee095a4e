"""Calls remembered by posenc's fast path (``_remembered`` in ``posenc.fast.triton``): a call
of ``rope_qk``, ``rope_qk_triton``, ``apply_rope``, ``apply_rope_`` or ``rope_triton`` alike
to one made before (shapes, strides, dtypes, devices, flags) is served by the launch that
one made, with its own tensors, and skips the checks. Checked here under Triton's
interpreter, with the calls' keys read in Python and in C++: the second of two calls gives
what it gives when nothing is remembered, the same numbers, the same layout, the same
error. The GPU's direct launch of a remembered call is checked in
``tests/test_triton_launch.py``.
"""

from __future__ import annotations

import gc
import importlib.util
import weakref

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from posenc import fast
from posenc.fast import host, kernels
from posenc.fast import triton as tr
from posenc.fast.tables import Angles, rope_angles

if importlib.util.find_spec("triton") is not None:
    import triton.language  # noqa: F401  (imported before the interpreter is switched on)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None or tr._OPS is None,
    reason="needs Triton (its CPU interpreter runs the kernel) and torch 2.4 or later",
)


def _apply_rope(q, k, positions, *, inplace, **kwargs):
    return ((fast.apply_rope_ if inplace else fast.apply_rope)(q, positions, **kwargs),)


ENTRIES = {  # each remembered function, called as (q, k, positions, **keywords) -> results
    "rope_qk": fast.rope_qk,
    "rope_qk_triton": tr.rope_qk_triton,
    "apply_rope(_)": _apply_rope,  # k not passed: q alone
    "rope_triton": lambda q, k, positions, **kwargs: (tr.rope_triton(q, positions, **kwargs),),
}

FIELDS = {  # each field of a call, and the values a call may take
    "entry": tuple(ENTRIES),
    "batch": (1, 2),
    "heads_k": (1, 2),
    "length": (1, 3),
    "dim": (8, 12),
    "dtype": (torch.float32, torch.bfloat16, torch.float64),
    "k_dtype": ("q's", "another"),
    "q_view": ("contiguous", "model view", "padded rows", "one projection"),
    "k_view": ("contiguous", "model view", "padded rows", "one projection"),
    "memory": ("apart", "k is q", "k is q's elements", "k inside q"),
    "positions": (
        "none",
        "[T]",
        "[B, T]",
        "[B, 1, T]",
        "[B, 1, T] every other",
        "[B, 1, T] negated lazily",
        "list",
        "angles",
        "angles [B]",
        "angles laid out otherwise",
    ),
    "base": (10000.0, 500000.0, 10000, 1, True),
    "inv_freq": ("none", "on the CPU"),
    "layout": ("half", "interleaved", "diagonal"),
    "inplace": (False, True),
    "offset": (0, 5, 2**31, 2**63, -(2**63) - 1),  # the last two outside int64: refused
    "needs grad": ("nothing", "q", "k", "the angles"),
    "grad mode": ("on", "off"),
    "inference": ("no", "tensors made in it", "tensors made and called in it"),
}
CALLS = st.fixed_dictionaries({name: st.sampled_from(values) for name, values in FIELDS.items()})
CHANGES = st.one_of(  # none, or one field of a call
    st.none(),
    st.sampled_from(list(FIELDS)).flatmap(
        lambda name: st.tuples(st.just(name), st.sampled_from(FIELDS[name]))
    ),
)
MODEL = dict(entry="rope_qk", batch=2, heads_k=2, length=3, dim=8, dtype=torch.bfloat16,
             k_dtype="q's", q_view="model view", k_view="model view", memory="apart",
             positions="[B, 1, T]", base=500000.0, inv_freq="none", layout="half",
             inplace=True, offset=0, inference="no", **{"needs grad": "nothing", "grad mode": "on"})  # fmt: skip
"""A model's call; its q and k have the same heads, strides and dtype, so that a call that
differs from it in one field differs in one respect only."""
ANGLES = {**MODEL, "positions": "angles", "base": 10000.0}
ONE_PROJECTION = {**MODEL, "q_view": "one projection", "k_view": "one projection", "heads_k": 1}


def _heads(call, view, n, dtype, seed):
    b, t, d = call["batch"], call["length"], call["dim"]
    g = torch.Generator().manual_seed(seed)
    if view == "one projection":  # heads cut from [B, T, 4, D] (q's 2, then k's), transposed
        return torch.randn(b, t, 4, d, generator=g).to(dtype)[:, :, 4 - n :].transpose(1, 2)
    if view == "model view":  # [B, T, H, D] transposed, as a projection is
        return torch.randn(b, t, n, d, generator=g).to(dtype).transpose(1, 2)
    if view == "padded rows":  # each row inside a wider one
        return torch.randn(b, n, t, d + 4, generator=g).to(dtype)[..., 2 : d + 2]
    return torch.randn(b, n, t, d, generator=g).to(dtype)


def _arguments(call, seed):
    """The arguments of ``call``, the same values for the same seed."""
    with torch.inference_mode(call["inference"] != "no"):
        q, k, positions = _tensors(call, seed)
    # torch refuses to make an inference tensor need grad
    needs = call["needs grad"] if call["inference"] == "no" else "nothing"
    if needs == "q":
        q.requires_grad_()
    elif needs == "k" and k is not q:
        k.requires_grad_()
    elif needs == "the angles" and isinstance(positions, Angles):
        positions = Angles(positions.table.requires_grad_())
    inv_freq = None
    if call["inv_freq"] == "on the CPU":
        inv_freq = torch.rand(call["dim"] // 2, generator=torch.Generator().manual_seed(seed))
    return (
        q,
        k,
        positions,
        dict(
            base=call["base"],
            inv_freq=inv_freq,
            layout=call["layout"],
            inplace=call["inplace"],
            offset=call["offset"],
        ),
    )


def _tensors(call, seed):
    """q, k and the positions of ``call``."""
    q = _heads(call, call["q_view"], 2, call["dtype"], seed)
    k_dtype = call["dtype"]
    if call["k_dtype"] == "another":
        k_dtype = torch.bfloat16 if k_dtype == torch.float32 else torch.float32
    k = {
        "apart": lambda: _heads(call, call["k_view"], call["heads_k"], k_dtype, seed + 1),
        "k is q": lambda: q,
        "k is q's elements": lambda: q[:, :],  # another tensor, the same elements
        "k inside q": lambda: q[:, 1 : 1 + call["heads_k"]],  # some of q's elements
    }[call["memory"]]()
    b, t, d = call["batch"], call["length"], call["dim"]
    steps = torch.arange(t) + 3
    rows = steps + 10 * torch.arange(b)[:, None]  # [B, T]
    angle = torch.float64 if call["dtype"] == torch.float64 else torch.float32
    positions = {
        "none": lambda: None,
        "[T]": lambda: steps,
        "[B, T]": lambda: rows,
        "[B, 1, T]": lambda: rows[:, None],
        "[B, 1, T] every other": lambda: torch.stack([rows, -rows], -1).view(b, 1, 2 * t)[..., ::2],
        "[B, 1, T] negated lazily": lambda: torch._neg_view(-rows[:, None]),  # memory: -rows
        "list": lambda: steps.tolist(),
        "angles": lambda: rope_angles(steps, d, dtype=angle),
        "angles [B]": lambda: rope_angles(rows, d, dtype=angle),
        "angles laid out otherwise": lambda: Angles(  # sin beside cos, not after it
            rope_angles(steps, d, dtype=angle).table.transpose(2, 3).contiguous().transpose(2, 3)
        ),
    }[call["positions"]]()
    return q, k, positions


def misaligned(t, shift: int):
    """``t``'s values, shape and strides, ``shift`` elements further into a storage on its
    device (a pointer off 16 bytes, for a shift that is not a multiple of 16 bytes)."""
    if t is None or shift == 0:
        return t
    span = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride(), strict=True))
    storage = torch.zeros(t.storage_offset() + span + shift, dtype=t.dtype, device=t.device)
    moved = storage.as_strided(t.shape, t.stride(), t.storage_offset() + shift)
    return moved.copy_(t)


def _outcome(call, seed):
    """What ``call`` gives: its results and its inputs afterwards, with their strides, or
    its error."""
    q, k, positions, kwargs = _arguments(call, seed)
    try:
        inside = call["inference"] == "tensors made and called in it"
        with torch.set_grad_enabled(call["grad mode"] == "on"), torch.inference_mode(inside):
            results = ENTRIES[call["entry"]](q, k, positions, **kwargs)
    except (TypeError, ValueError, RuntimeError) as error:
        return type(error), str(error)
    return [
        (t.detach().clone(), t.stride(), t is q, t is k, t.grad_fn is not None)
        for t in (*results, q, k)
    ]


def _same(got, want):
    if isinstance(want, tuple):  # an error
        assert got == want
        return
    assert not isinstance(got, tuple), f"no error where one was due: {want}"
    for (a, stride_a, *who_a), (b, stride_b, *who_b) in zip(got, want, strict=True):
        assert torch.equal(a, b) and stride_a == stride_b and who_a == who_b


@pytest.fixture(autouse=True, params=["Python", "C++"])
def _interpreter(request, monkeypatch):
    """The kernel run by Triton's interpreter, and ``rope_qk`` sending CPU tensors to it;
    each test run twice, with the keys and addresses of remembered calls read in Python and
    in C++ (:mod:`posenc.fast.host`, as a GPU's calls read them once it is built)."""
    if request.param == "C++" and not host.available():
        pytest.skip(f"posenc.fast.host is not built here: {host.status()}")
    monkeypatch.setattr(host, "_module", host._module if request.param == "C++" else None)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(kernels, "triton_available", lambda device="cuda": True)
    monkeypatch.setattr(kernels, "_TRITON_DEVICES", ("cuda", "cpu"))


def _forgetting(monkeypatch):
    """Nothing remembered from here on: every call goes its own way."""
    monkeypatch.setattr(tr, "_plan_key", lambda *args: None)


@example(MODEL, None)
@example(MODEL, ("memory", "k is q's elements"))  # one memory: rotated once, another way
@example(ONE_PROJECTION, ("memory", "k inside q"))  # refused, as without the plan
@example({**MODEL, "memory": "k is q", "inplace": False}, ("memory", "apart"))  # apart again
@example(MODEL, ("q_view", "contiguous"))  # q's strides alone
@example(MODEL, ("k_view", "padded rows"))  # k's strides alone
@example(MODEL, ("k_dtype", "another"))  # refused
@example(MODEL, ("positions", "[B, 1, T] every other"))  # the positions' strides
@example(MODEL, ("positions", "[B, 1, T] negated lazily"))  # memory that holds -positions
@example(MODEL, ("layout", "interleaved"))
@example(MODEL, ("layout", "diagonal"))  # refused
@example(MODEL, ("inplace", False))
@example(MODEL, ("base", True))  # refused
@example({**MODEL, "base": 1}, ("base", True))  # True == 1, but refused
@example(MODEL, ("base", 10000.0))
@example(MODEL, ("batch", 1))
@example({**MODEL, "inplace": False}, ("offset", 2**31))
@example({**MODEL, "entry": "rope_qk_triton", "positions": "[B, T]"}, ("entry", "rope_qk"))
@example({**MODEL, "offset": 5}, ("offset", 2**63))  # outside int64: refused
@example({**MODEL, "offset": 5}, ("offset", -(2**63) - 1))
@example({**MODEL, "inplace": False}, ("needs grad", "q"))  # differentiable, as without
@example(MODEL, ("needs grad", "k"))  # in place on a leaf that needs grad: refused
@example(
    {**MODEL, "inference": "tensors made and called in it"}, ("inference", "tensors made in it")
)
@example(MODEL, ("inference", "tensors made in it"))  # in place outside inference mode: refused
@example({**MODEL, "inplace": False}, ("grad mode", "off"))
@example({**ANGLES, "inplace": False}, ("needs grad", "the angles"))  # learned angles
@example({**MODEL, "entry": "apply_rope(_)"}, None)  # q alone, in place
@example({**MODEL, "entry": "apply_rope(_)", "inplace": False}, ("q_view", "contiguous"))
@example({**MODEL, "entry": "rope_triton", "positions": "[T]"}, ("offset", 5))
@example({**MODEL, "entry": "rope_triton"}, ("entry", "apply_rope(_)"))
@example(ANGLES, ("offset", 5))  # angles with an offset: refused
@example(ANGLES, ("base", 500000.0))  # refused
@example(ANGLES, ("dtype", torch.float64))  # angles of another dtype: refused
@example(ANGLES, ("positions", "angles laid out otherwise"))  # copied first, each call
@example(ANGLES, ("positions", "angles [B]"))
@given(first=CALLS, change=CHANGES)
@settings(max_examples=40, deadline=None)
def test_a_call_after_one_alike_gives_what_it_gives_alone(first, change):
    """A call made after another (the same in every respect, or in all but one) gives the
    same results, laid out alike, in place where it was asked to be, or the same error, as
    when nothing is remembered; the tensors of the two calls are not the same."""
    second = first if change is None else {**first, change[0]: change[1]}
    tr._PLANS.clear()
    _outcome(first, seed=0)  # remembered, if a call can be
    remembered = _outcome(second, seed=10)
    with pytest.MonkeyPatch.context() as patch:
        _forgetting(patch)
        _same(remembered, _outcome(second, seed=10))


def test_a_model_s_calls_are_remembered_and_replayed(monkeypatch):
    """The calls a model makes (bf16, its transposed views, positions ``[B, 1, T]`` or
    angles, in place or not, an offset) are remembered by the first and served by that
    launch from the second on: the checks do not run again."""
    replays, checks = [], []
    replay, fuses = tr._replay, kernels._fuses
    monkeypatch.setattr(tr, "_replay", lambda *a: replays.append(1) or replay(*a))
    for positions in ("[B, 1, T]", "angles", "none"):
        for inplace in (True, False):
            call = {**MODEL, "positions": positions, "inplace": inplace, "offset": 7}
            if positions == "angles":  # they fix the positions and the frequencies
                call.update(offset=0, base=10000.0)
            tr._PLANS.clear()
            replays.clear()
            _outcome(call, seed=0)
            assert len(tr._PLANS) == 1 and not replays
            checks.clear()
            with monkeypatch.context() as patch:  # the first of rope_qk's checks
                patch.setattr(kernels, "_fuses", lambda *a: checks.append(1) or fuses(*a))
                remembered = _outcome(call, seed=1)
            assert replays == [1] and not checks
            with monkeypatch.context() as patch:
                _forgetting(patch)
                _same(remembered, _outcome(call, seed=1))


def test_what_is_remembered_holds_no_tensor_of_a_call():
    """A remembered call keeps none of the call's tensors alive: a model's activations are
    freed when it lets go of them."""
    q, k, positions, kwargs = _arguments({**MODEL, "inplace": False}, seed=0)
    for _ in range(2):
        rq, rk = fast.rope_qk(q, k, positions, **kwargs)
    assert len(tr._PLANS) == 1
    gone = [weakref.ref(t) for t in (q, k, positions, rq, rk)]
    del q, k, positions, rq, rk
    gc.collect()
    assert all(ref() is None for ref in gone)


def test_calls_that_launch_nothing_are_remembered_as_such(monkeypatch):
    """A call the kernel does not serve (the general path: positions per head) is
    remembered as one that launches nothing, and later calls alike go their own way, with no
    tape of their launches."""
    call = {**MODEL, "entry": "rope_qk"}
    q, k, _, kwargs = _arguments(call, seed=0)
    per_head = torch.arange(2 * 3).view(1, 2, 3)  # [1, H, T]: each head its positions
    fast.rope_qk(q, k[:, :1].expand(-1, 2, -1, -1).clone(), per_head, **kwargs)
    assert list(tr._PLANS.values()) == [tr._OWN_WAY]
    monkeypatch.setattr(tr, "_plan", lambda *a: pytest.fail("a tape was made"))
    fast.rope_qk(q, k[:, :1].expand(-1, 2, -1, -1).clone(), per_head, **kwargs)


def test_calls_on_a_device_the_kernel_does_not_run_on_are_not_remembered(monkeypatch):
    """Without the interpreter a CPU call goes to the CPU's own paths, and nothing is kept."""
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setattr(kernels, "_TRITON_DEVICES", ("cuda",))
    q, k, positions, kwargs = _arguments(MODEL, seed=0)
    fast.rope_qk(q, k, positions, **kwargs)
    assert not tr._PLANS


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("positions", ["[B, 1, T]", "angles", "none"])
def test_on_a_gpu_remembered_calls_give_the_same_numbers(positions, monkeypatch):
    """On a GPU, a model's calls, made again and again (as every layer makes them, with new
    tensors, an offset that moves, pointers off 16 bytes), replayed in a CUDA graph too, give
    the numbers of the same calls with nothing remembered."""
    monkeypatch.delenv("TRITON_INTERPRET")
    call = {**MODEL, "batch": 4, "length": 64, "dim": 128, "positions": positions}
    if positions == "angles":
        call.update(base=10000.0)

    def arguments(seed, offset, shift=0):
        q, k, p, kwargs = _arguments(call, seed)
        p = Angles(p.table.cuda()) if isinstance(p, Angles) else p if p is None else p.cuda()
        offset = 0 if positions == "angles" else offset
        return misaligned(q.cuda(), shift), k.cuda(), p, {**kwargs, "offset": offset}

    def run(seed, offset, shift=0, inplace=True):
        q, k, p, kwargs = arguments(seed, offset, shift)
        return [t.cpu() for t in fast.rope_qk(q, k, p, **{**kwargs, "inplace": inplace})]

    cases = [(s, o, sh, ip) for s, o in ((0, 0), (1, 5), (2, 4096)) for sh in (0, 1)
             for ip in (True, False)]  # fmt: skip
    remembered = [run(*case) for case in cases * 2]
    with monkeypatch.context() as patch:
        _forgetting(patch)
        alone = [run(*case) for case in cases * 2]
    assert any(plan.direct is not None for plan in tr._PLANS.values())  # launched directly
    for got, want in zip(remembered, alone, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    q, k, p, kwargs = arguments(3, 9)
    fresh = [t.clone() for t in (q, k)]
    graph = torch.cuda.CUDAGraph()
    fast.rope_qk(q, k, p, **kwargs)  # remembered before the capture
    q.copy_(fresh[0]), k.copy_(fresh[1])
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        fast.rope_qk(q, k, p, **kwargs)
    q.copy_(fresh[0]), k.copy_(fresh[1])
    graph.replay()
    with monkeypatch.context() as patch:
        _forgetting(patch)
        want = fast.rope_qk(*[t.clone() for t in fresh], p, **kwargs)
    assert torch.equal(q, want[0]) and torch.equal(k, want[1])


def test_a_remembered_call_under_torch_compile_is_traced_as_it_is(monkeypatch):
    """A call remembered in eager mode does not serve the same call under ``torch.compile``
    (fullgraph): the compiler traces the call's own checks and its registered operation."""
    import torch._dynamo

    call = {**MODEL, "inplace": False, "offset": 3}
    q, k, positions, kwargs = _arguments(call, seed=0)
    fast.rope_qk(q, k, positions, **kwargs)
    assert len(tr._PLANS) == 1
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda a, b, p: fast.rope_qk(a, b, p, **kwargs), backend="eager", fullgraph=True
    )
    replay = tr._replay
    monkeypatch.setattr(tr, "_replay", lambda *a: pytest.fail("replayed under compile"))
    got = compiled(q, k, positions)
    monkeypatch.setattr(tr, "_replay", replay)
    _forgetting(monkeypatch)
    want = fast.rope_qk(q, k, positions, **kwargs)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("remembered", [False, True])
def test_a_backward_that_saved_q_refuses_it_rotated_in_place(remembered, monkeypatch):
    """Rotated in place, q and k count as written, as torch's own in-place operations count
    theirs: a backward that saved q before refuses to run with the rotated values, whether
    the call is remembered or not."""
    if not remembered:
        _forgetting(monkeypatch)
    for seed in (0, 1):  # the second call of the kind is the one remembered
        q, k, positions, kwargs = _arguments(MODEL, seed)
        w = torch.ones((), dtype=q.dtype, requires_grad=True)
        y = (q * w).sum() + (k * w).sum()  # saves q and k for w's gradient
        before = q._version, k._version
        fast.rope_qk(q, k, positions, **kwargs)
        assert q._version > before[0] and k._version > before[1]
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()
