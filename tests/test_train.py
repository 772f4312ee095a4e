"""posenc.train: the tasks, the small decoder with each encoding, a run, the grid and its command."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import rope_inv_freq, train
from posenc.scaling import p_rope_inv_freq
from posenc.train import model as tiny
from posenc.train import run, tasks
from posenc.train.__main__ import main

SMALL = train.Settings(steps=4, batch=4, eval_sequences=8)

# --- the tasks ------------------------------------------------------------------------------


@given(n=st.integers(1, 20), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=25, deadline=None)
def test_a_copy_answers_with_the_symbols_in_their_order(n, seed):
    x, y = tasks.copy_batch(3, n, 16, torch.Generator().manual_seed(seed))
    assert x.shape == y.shape == (3, tasks.sequence_length("copy", n))
    assert (x[:, 0] == tasks.BOS).all() and (x[:, n + 1] == tasks.SEP).all()
    scored = y != tasks.IGNORE
    assert scored.sum(1).tolist() == [n] * 3
    assert torch.equal(y[scored].view(3, n), x[:, 1 : n + 1])  # the answer is the question


@given(n=st.integers(1, 16), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=25, deadline=None)
def test_recall_asks_every_key_once_and_scores_its_value(n, seed):
    x, y = tasks.recall_batch(2, n, 64, torch.Generator().manual_seed(seed))
    assert x.shape == y.shape == (2, tasks.sequence_length("recall", n))
    for row, target in zip(x, y, strict=True):
        keys, values = row[1 : 2 * n + 1 : 2], row[2 : 2 * n + 1 : 2]
        assert len(set(keys.tolist())) == n  # distinct keys
        assert (keys < 2 + 32).all() and (values >= 2 + 32).all()  # keys, values apart
        book = dict(zip(keys.tolist(), values.tolist(), strict=True))
        asked = row[2 * n + 2 :: 2]  # the keys asked, after SEP
        assert sorted(asked.tolist()) == sorted(keys.tolist())
        answers = target[2 * n + 2 :: 2]  # each asked key's prediction target
        assert answers.tolist() == [book[k] for k in asked.tolist()]
        assert (target != tasks.IGNORE).sum() == n


def test_tasks_refuse_what_they_cannot_draw():
    gen = torch.Generator()
    with pytest.raises(ValueError, match="n must be at most symbols // 2 = 4"):
        tasks.recall_batch(1, 5, 8, gen)
    with pytest.raises(TypeError, match=r"gen must be a torch\.Generator"):
        tasks.copy_batch(1, 2, 8, 0)
    with pytest.raises(ValueError, match="task must be one of"):
        tasks.sequence_length("sort", 3)


# --- the model ------------------------------------------------------------------------------


def _model(encoding, **kw):
    return tiny.TinyDecoder(encoding, vocab=12, width=32, heads=4, layers=2, max_positions=40, **kw)


@pytest.mark.parametrize("encoding", tiny.ENCODINGS)
def test_no_position_sees_a_later_token(encoding):
    model = _model(encoding).eval()
    x = torch.randint(12, (2, 20), generator=torch.Generator().manual_seed(1))
    changed = x.clone()
    changed[:, 12:] = (changed[:, 12:] + 1) % 12
    with torch.no_grad():
        a, b = model(x), model(changed)
    assert torch.equal(a[:, :12], b[:, :12])
    assert not torch.allclose(a[:, 12:], b[:, 12:])


@pytest.mark.parametrize(
    ("encoding", "silence"),
    [
        ("sinusoidal", lambda m: m.sinusoid.zero_()),
        ("learned", lambda m: m.table.weight.data.zero_()),
        ("alibi", lambda m: m.slopes.zero_()),
        ("t5", lambda m: m.t5_table.data.zero_()),
        ("rope", lambda m: m.inv_freq.zero_()),
        ("p-rope", lambda m: m.inv_freq.zero_()),
    ],
)
def test_each_encoding_is_nope_once_its_positions_say_nothing(encoding, silence):
    """Same seed, same weights: with a zero table, zero slopes or frozen angles, every
    encoding gives NoPE's logits, so the encoding is the only difference between models."""
    model, nope = _model(encoding, seed=3).eval(), _model("nope", seed=3).eval()
    x = torch.randint(12, (2, 17), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        if encoding == "t5":  # T5's table starts at zero, as nothing is known of offsets
            model.t5_table.normal_()
        before = model(x)
        silence(model)
        assert not torch.allclose(before, nope(x), atol=1e-6)
        torch.testing.assert_close(model(x), nope(x), rtol=1e-5, atol=1e-5)


def test_rotary_encodings_turn_their_pairs_as_posenc_says():
    rope, prope = _model("rope"), _model("p-rope")
    d = 32 // 4
    assert torch.equal(rope.inv_freq, rope_inv_freq(d).float())
    assert torch.equal(prope.inv_freq, p_rope_inv_freq(rope_inv_freq(d), 0.75).float())
    assert int((prope.inv_freq == 0).sum()) == 1  # 4 pairs: the slowest quarter is still


def test_the_learned_table_trains_only_the_rows_it_sees():
    model = _model("learned")
    start = model.table.weight.detach().clone()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    x = torch.randint(12, (4, 10))
    for _ in range(3):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    rows = model.table.weight.detach()
    assert not torch.equal(rows[:10], start[:10])
    assert torch.equal(rows[10:], start[10:])  # past the training length: as initialised


def test_the_model_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match="encoding must be one of"):
        _model("absolute")
    with pytest.raises(ValueError, match="width must be a multiple of heads=4"):
        tiny.TinyDecoder("rope", vocab=5, width=30, heads=4)
    with pytest.raises(ValueError, match="must be even"):
        tiny.TinyDecoder("rope", vocab=5, width=12, heads=4)
    with pytest.raises(ValueError, match="tokens must be at most max_positions=40"):
        _model("nope")(torch.zeros(1, 41, dtype=torch.long))


# --- a run, the grid, the command -----------------------------------------------------------


class _Copier(tiny.TinyDecoder):
    """Answers a copy by looking ``n + 1`` tokens back: right every time."""

    def __init__(self, vocab: int):
        super().__init__("nope", vocab=vocab, width=8, heads=2, layers=1)

    def forward(self, tokens):
        n = (tokens[0] == tasks.SEP).nonzero()[0, 0].item() - 1
        nxt = torch.roll(tokens, n, dims=1)  # the answer at t is the token n places back
        return torch.nn.functional.one_hot(nxt, self.head.out_features).float()


def test_evaluate_scores_a_perfect_copier_one_and_a_constant_about_chance():
    assert run.evaluate(_Copier(18), "copy", 5, 64, seed=0) == 1.0
    constant = tiny.TinyDecoder("nope", vocab=18, width=32, heads=4, layers=1, max_positions=40)
    with torch.no_grad():
        constant.head.weight.zero_()
        constant.head.bias.copy_(torch.arange(18.0))  # always the last symbol
    assert 0.0 < run.evaluate(constant, "copy", 8, 256, seed=0) < 0.15  # 1 in 16


def test_a_run_is_reproducible_and_its_seed_matters():
    a = train.train("rope", "recall", 0, SMALL)
    b = train.train("rope", "recall", 0, SMALL)
    c = train.train("rope", "recall", 1, SMALL)
    assert a["accuracy"] == b["accuracy"] and a["loss_curve"] == b["loss_curve"]
    assert a["loss_curve"] != c["loss_curve"] or a["accuracy"] != c["accuracy"]
    assert set(a["accuracy"]) == {"1x", "2x", "4x"}


def test_training_lowers_the_loss():
    longer = dataclasses.replace(SMALL, steps=300, batch=32)
    result = train.train("alibi", "copy", 0, longer)
    assert result["loss_curve"][-1] < 0.5 * result["loss_curve"][0]
    assert result["accuracy"]["1x"] > 0.5


def test_the_grid_keeps_its_order_and_gives_the_same_runs_in_parallel():
    alone = train.grid(["nope", "rope"], ["copy"], [0, 1], SMALL, workers=1)
    parallel = train.grid(["nope", "rope"], ["copy"], [0, 1], SMALL, workers=2)
    assert [(r["encoding"], r["seed"]) for r in alone] == [
        ("nope", 0),
        ("nope", 1),
        ("rope", 0),
        ("rope", 1),
    ]
    assert [r["accuracy"] for r in alone] == [r["accuracy"] for r in parallel]


def test_settings_refuse_what_cannot_run():
    with pytest.raises(ValueError, match="steps must be at least 1"):
        train.Settings(steps=0)
    with pytest.raises(ValueError, match="recall needs 4 \\* length distinct keys"):
        train.Settings(lengths=(("copy", 4), ("recall", 9)))
    with pytest.raises(ValueError, match="lengths must be a tuple of"):
        train.Settings(lengths=(("copy", 4),))
    with pytest.raises(TypeError, match="settings must be a Settings"):
        train.train("rope", "copy", 0, {"steps": 3})


def test_the_command_writes_runs_machine_torch_and_commit(tmp_path, capsys):
    out = tmp_path / "grid.json"
    argv = ["--encodings", "nope", "--tasks", "copy", "--seeds", "0", "--steps", "2"]
    assert main([*argv, "--workers", "1", "--out", str(out)]) == 0
    results = train.load(out)
    assert results["machine"]["torch"] == torch.__version__
    assert results["machine"]["cpu_count"] >= 1
    assert "commit" in results
    assert [r["encoding"] for r in results["runs"]] == ["nope"]
    assert results["settings"]["steps"] == 2
    printed = capsys.readouterr()
    assert "1/1" in printed.err and "1 runs in" in printed.out
    json.loads(out.read_text())


def test_load_refuses_a_file_without_runs(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("{}")
    with pytest.raises(ValueError, match="holds no runs"):
        train.load(path)


def test_a_run_gives_back_the_callers_threads():
    threads = torch.get_num_threads()
    train.train("nope", "copy", 0, dataclasses.replace(SMALL, threads=threads + 1))
    assert torch.get_num_threads() == threads


@pytest.mark.slow
def test_the_chapters_conclusions_hold_when_copying_is_trained_again():
    """Chapter 16's conclusions about copying, on every encoding trained again from scratch
    from two of the three seeds (14 runs with the chapter's settings, about 8 minutes of one
    core)."""
    from posenc.book import training_views

    fresh = {"runs": train.grid(train.ENCODINGS, ["copy"], [0, 1])}
    found = training_views.conclusions(fresh, tasks=["copy"])
    assert len(found) == 9
    assert all(c.holds for c in found), "\n".join(str(c) for c in found if not c.holds)
