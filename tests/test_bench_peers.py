"""posenc.bench.peers on the CPU: the side-by-side harness and the model measurement run, their
rows say what they measured, and the swap of RoPE inside the model is real."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch

from posenc import rope
from posenc.bench import __main__ as cli
from posenc.bench import measured, peers


@pytest.fixture(scope="module")
def result():
    return peers.run(
        "cpu", cases=peers.small_cases(), dtypes=("bfloat16",), rounds=1, min_seconds=0.0,
        backward_case=peers.small_cases()[0].name,
    )  # fmt: skip


def test_every_implementation_is_measured_or_says_why_not(result):
    for case in peers.small_cases():
        for memory in ("model view", "contiguous"):
            rows = [r for r in result["rows"] if r["case"] == case.name and r["memory"] == memory]
            names = {r["implementation"] for r in rows if r["pass"] == "forward"}
            assert {"copy_", "clone", "posenc half in place", "posenc interleaved"} <= names
            assert {"liger in place", "flash-attn in place"} <= names
            for r in rows:
                assert ("us" in r) != bool(r["note"]), r  # a time, or the reason for none


def test_a_round_the_gpu_caught_up_in_is_timed_again_and_said(monkeypatch):
    """On a GPU a round is timed again with the GPU held back longer when the host fell
    behind; a function whose host never got ahead is reported so (here a stand-in timer)."""
    guesses = {"slow": [], "fast": []}

    def timer(device):
        def timed(fn, n, host_guess=0.0):
            name = fn()
            guesses[name].append(host_guess)
            return 1e-6, 2e-6, name == "fast"

        return timed

    monkeypatch.setattr(peers, "_timer", timer)
    times = peers._measure(
        {"slow": lambda: "slow", "fast": lambda: "fast"}, torch.device("cuda"), 2, 1e-3
    )
    assert times == {"slow": (1e-6, 2e-6, False), "fast": (1e-6, 2e-6, True)}
    assert guesses["fast"] == [0.0, 2e-6, 2e-6]  # warm-up, then one call per round
    assert guesses["slow"] == [0.0, 2e-6, 8e-6, 2e-6, 8e-6]  # each round once more, 4x


def test_a_round_the_gpu_caught_up_in_does_not_set_the_next_hold(monkeypatch):
    """When the host falls behind, its time per call may hold waits for the GPU (a full
    launch queue): that time is not taken as the next round's guess, so holds cannot grow
    from round to round."""
    guesses = []

    def timer(device):
        def timed(fn, n, host_guess=0.0):
            guesses.append(host_guess)
            return 1e-6, 1e-5 + 10 * host_guess, False  # waits that grow with the hold

        return timed

    monkeypatch.setattr(peers, "_timer", timer)
    peers._measure({"eager": lambda: None}, torch.device("cuda"), 5, 1e-3)
    assert max(guesses) <= 4 * guesses[1]  # the warm-up's guess, then at most 4 times it


def test_the_gpu_is_never_held_longer_than_a_quarter_second(monkeypatch):
    """The hold grows with the host's time per call and the calls queued, up to a bound."""
    held = []

    class Event:
        def __init__(self, enable_timing):
            pass

        def record(self):
            pass

        def query(self):
            return False

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return 1.0

    monkeypatch.setattr(peers, "_sleep_rate", lambda: 1e9)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "_sleep", held.append)
    timed = peers._timer(torch.device("cuda"))
    timed(lambda: None, peers._QUEUED, host_guess=1e-5)
    timed(lambda: None, peers._QUEUED, host_guess=10.0)
    assert held == [int(1e9 * (2 * 1e-5 * peers._QUEUED + 1e-3)), int(1e9 * peers._MOST_HELD)]


def test_on_a_cpu_there_is_no_host_to_be_ahead_of(result):
    assert all(r["host_ahead"] is None for r in result["rows"] if "us" in r)


def test_each_result_is_checked_against_float64(result):
    timed = [r for r in result["rows"] if r.get("max_error") is not None]
    assert {r["implementation"] for r in timed} >= {"posenc half", "transformers eager"}
    for r in timed:  # bfloat16 outputs of magnitude up to about 4: half an ulp is 1/64
        bound = 2**-6 if r["implementation"].startswith("posenc") else 2**-4
        assert r["max_error"] <= bound, r


def test_forward_plus_backward_times_what_autograd_takes(result):
    """posenc in place refuses a leaf that needs grad (as torch does): not timed, and the row
    says why; posenc out of place and transformers are timed."""
    backward = {r["implementation"]: r for r in result["rows"] if r["pass"] == "forward+backward"}
    assert "us" in backward["posenc half"] and "us" in backward["transformers eager"]
    assert "us" not in backward["posenc half in place"]
    assert "leaf Variable that requires grad" in backward["posenc half in place"]["note"]


def test_a_training_step_hands_each_leaf_its_gradient_afresh():
    """Every timed step leaves the gradient of that step alone in ``.grad`` (as after an
    optimizer's ``zero_grad()``), so no step pays for adding into the last one's."""
    from posenc.fast import dispatch as fast

    q, k = torch.randn(1, 4, 6, 8).requires_grad_(), torch.randn(1, 2, 6, 8).requires_grad_()
    grads = (torch.randn(1, 4, 6, 8), torch.randn(1, 2, 6, 8))
    for _ in range(3):
        peers._train_step(lambda a, b: fast.rope_qk(a, b, layout="half"), (q, k), grads)
    for leaf, grad in zip((q, k), grads, strict=True):  # the inverse rotation of the gradient
        want = rope.apply_rope(grad, -torch.arange(6), layout="half")
        torch.testing.assert_close(leaf.grad, want)


def test_the_model_measurement_swaps_rope_for_real():
    rows = peers.model_share(
        "cpu", shape=peers.TINY_MODEL, prefill=((1, 16),), decode=(2, 15), rounds=1
    )
    for row in rows:
        assert row["posenc_vs_transformers"] < 1e-5  # posenc's RoPE: transformers' output
        assert row["none_vs_transformers"] > 1e-3  # no RoPE: another output
        assert row["ms_none"] > 0 and row["ms_posenc"] > 0  # times; their ratio is noise here
        assert row["share_posenc"] == pytest.approx(1 - row["ms_none"] / row["ms_posenc"])


def test_rope_s_share_is_paired_within_rounds_and_every_variant_goes_first(monkeypatch):
    """Each round's clock runs slower than the last, by far more than RoPE costs, and the
    first pass of a round pays a cold start: each share still comes out as RoPE's cost. The
    times are compared within a round, and the variants take turns at going first: a round
    a cold start spoils reads too high a share where the variant went first and too low one
    where the pass without RoPE did, and as neither kind makes up half the rounds, the
    median is a clean round's share. The second pass without RoPE reads no difference where
    there is none."""
    from transformers.models.llama import modeling_llama

    cost = {"apply_rotary_pos_emb": 1.10, "posenc_rope": 1.02, "no_rope": 1.0}
    timed = []

    def wall(fn, device):
        fn()
        timed.append(modeling_llama.apply_rotary_pos_emb.__name__)
        r, place = divmod(len(timed) - 1, 4)
        return cost[timed[-1]] * (1 + 0.5 * r) + (0.3 if place == 0 else 0.0)

    monkeypatch.setattr(peers, "_wall", wall)
    rows = peers.model_share(
        "cpu", shape=peers.TINY_MODEL, prefill=((1, 16),), decode=(2, 15), rounds=9
    )
    for row in rows:
        assert row["share_transformers"] == pytest.approx(1 - 1 / 1.10)
        assert row["share_posenc"] == pytest.approx(1 - 1 / 1.02)
        assert row["share_noise"] == 0
        assert row["ms_transformers"] > row["ms_posenc"] > row["ms_none"]
    firsts = timed[::4]
    assert len(timed) == 36 * len(rows) and set(firsts) == set(cost)


def test_what_a_pass_leaves_for_the_next_favours_no_variant(monkeypatch):
    """The pass right after posenc's is slowed (by what posenc's left behind), by more than
    posenc's RoPE costs. Turning the order round by round, the pass without RoPE would follow
    posenc's in three rounds of four, and posenc's share would read below zero; in the
    balanced orders each variant follows posenc's in one round of four, and the median is a
    clean round's share."""
    from transformers.models.llama import modeling_llama

    cost = {"apply_rotary_pos_emb": 1.10, "posenc_rope": 1.02, "no_rope": 1.0}
    timed = []

    def wall(fn, device):
        fn()
        timed.append(modeling_llama.apply_rotary_pos_emb.__name__)
        after_posenc = len(timed) % 4 != 1 and timed[-2] == "posenc_rope"  # in its round
        return cost[timed[-1]] + (0.05 if after_posenc else 0.0)

    monkeypatch.setattr(peers, "_wall", wall)
    rows = peers.model_share(
        "cpu", shape=peers.TINY_MODEL, prefill=((1, 16),), decode=(2, 15), rounds=9
    )
    for row in rows:
        assert row["rounds"] == 9
        assert row["share_transformers"] == pytest.approx(1 - 1 / 1.10)
        assert row["share_posenc"] == pytest.approx(1 - 1 / 1.02)


def test_the_decoding_cache_is_made_with_transformers_rope(monkeypatch):
    """The KV cache a decoding step reads is made as the model makes it, with its own RoPE,
    whichever RoPE the step before was timed with."""
    from transformers.models.llama import modeling_llama

    own, lengths = modeling_llama.apply_rotary_pos_emb, []

    def counted(q, k, *args, **kwargs):
        lengths.append(q.shape[2])
        return own(q, k, *args, **kwargs)

    monkeypatch.setattr(modeling_llama, "apply_rotary_pos_emb", counted)
    peers.model_share("cpu", shape=peers.TINY_MODEL, prefill=((1, 16),), decode=(2, 15), rounds=1)
    assert lengths.count(15) == peers.TINY_MODEL.get("num_hidden_layers", 2)  # the cache, once


def test_in_bfloat16_the_model_keeps_its_float32_frequencies():
    """transformers keeps its frequencies in a buffer, which ``.to(bfloat16)`` would round:
    its RoPE would turn pair i by ``p * bf16(theta_i)``, radians off at long positions, and
    would no longer be the rotation posenc's is compared with. The model is Llama 3's base."""
    model, inv_freq = peers._llama(peers.TINY_MODEL, "cpu", torch.bfloat16)
    assert model.embed_tokens.weight.dtype == torch.bfloat16
    assert model.rotary_emb.inv_freq.dtype == torch.float32
    dim = peers.TINY_MODEL["hidden_size"] // peers.TINY_MODEL["num_attention_heads"]
    want = rope.rope_inv_freq(dim, peers.BASE).float()
    torch.testing.assert_close(model.rotary_emb.inv_freq, want, rtol=1e-6, atol=0)
    torch.testing.assert_close(inv_freq, want, rtol=1e-6, atol=0)


def test_files_are_written(result, tmp_path):
    json_path, png_path = peers.write(result, tmp_path)
    assert json_path.stat().st_size > 0 and png_path.stat().st_size > 0
    with pytest.raises(ValueError, match="no forward rows"):
        peers.figure(result, dtype="float16")


def test_the_figure_shows_only_what_ran(result):
    """A peer that could not run here (Liger and flash-attn need CUDA) gets no bars and no
    legend entry; the ones that ran get one bar per case, centred on the case."""
    import matplotlib.pyplot as plt

    fig = peers.figure(result)
    ran = {r["implementation"] for r in result["rows"] if "copy_ratio" in r}
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == [name for name in peers._FIGURE_SERIES if name in ran]
    assert "liger in place" not in legend and "posenc half" in legend
    bars = fig.axes[0].patches
    cases = len(fig.axes[0].get_xticks())
    assert len(bars) == len(legend) * cases
    first = [b.get_x() + b.get_width() / 2 for b in bars[::cases]]  # each series at case 0
    assert first[0] == pytest.approx(-first[-1])  # centred on the tick
    plt.close(fig)
    bounds_only = {**result, "rows": [r for r in result["rows"] if r["implementation"] == "copy_"]}
    with pytest.raises(ValueError, match="no implementation that ran"):
        peers.figure(bounds_only)


def test_the_grid_is_written_before_the_model_is_measured(result, tmp_path, monkeypatch):
    """A failure in the model's measurement (out of memory, say) costs that measurement only:
    the bfloat16 grid (what the targets read) is on disk before the model is measured, the file
    says what went wrong, and the other dtypes are measured after it and added."""
    calls, on_disk = [], []

    def run(device, *, dtypes, **kwargs):
        calls.append(dtypes)
        rows = [{**r, "dtype": d} for d in dtypes for r in result["rows"]]
        return {"machine": result["machine"], "rows": copy.deepcopy(rows)}

    def fails(*args, **kwargs):
        on_disk.append(json.loads((tmp_path / "rope_peers.json").read_text()))
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(peers, "run", run)
    monkeypatch.setattr(peers, "model_share", fails)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        status = cli.main(["--peers", "--device", "cpu", "--out", str(tmp_path)])
    plt.close("all")
    assert status == 0 and "model share not measured: RuntimeError" in out.getvalue()
    assert calls == [("bfloat16",), ("float16", "float32")]
    assert on_disk[0]["rows"] == result["rows"]
    written = json.loads((tmp_path / "rope_peers.json").read_text())
    assert [r["dtype"] for r in written["rows"]] == [
        d for d in ("bfloat16", "float16", "float32") for _ in result["rows"]
    ]
    assert written["model_error"] == "RuntimeError: CUDA out of memory"


def test_each_case_is_printed_as_it_is_measured():
    """A run cut short by a time limit still shows what it measured."""
    lines = []
    peers.run(
        "cpu", cases=peers.small_cases()[:1], dtypes=("float32",), rounds=1, min_seconds=0.0,
        backward_case=None, log=lines.append,
    )  # fmt: skip
    assert len(lines) == 2  # the model's layout, then contiguous
    assert lines[0].startswith(f"{peers.small_cases()[0].name}, model view, float32, forward")
    assert "posenc half in place" in lines[0] and "x copy_" in lines[0]


_ROOT = Path(__file__).resolve().parents[1]


def _chapter_13_prose() -> str:
    """Chapter 13's markdown, its whitespace made single spaces."""
    path = _ROOT / "notebooks" / "13_fast_rope.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return " ".join(text.split())


def _appendix() -> tuple[str, str]:
    """The appendix page's prose (its tables taken out) and its tables, each with its
    whitespace made single spaces."""
    page = measured.PAGE.read_text(encoding="utf-8")
    blocks = [m.group(3) for m in measured._BLOCK.finditer(page)]
    prose = measured._BLOCK.sub("", page)
    return " ".join(prose.split()), " ".join(" ".join(blocks).split())


def test_the_appendix_holds_the_tables_of_the_stored_run():
    """The page's tables are what ``measured.tables`` makes of the stored run, one of each;
    a table edited by hand, or a run stored anew, fails here."""
    page = measured.PAGE.read_text(encoding="utf-8")
    names = [m.group(2) for m in measured._BLOCK.finditer(page)]
    assert sorted(names) == sorted(measured.tables()), "one block per table"
    assert measured.fill(page) == page, "run python -m posenc.bench.measured"
    edited = page.replace(">0.97<", ">0.99<", 1)
    assert edited != page and measured.fill(edited) == page
    with pytest.raises(ValueError, match="table name must be one of"):
        measured.fill("<!-- table: nowhere -->\n<!-- end table -->")


def test_every_number_the_appendix_quotes_is_in_one_of_its_tables():
    """A decimal or a percentage in the prose is one a reader finds in a table on the page
    (the run's versions and the bfloat16 unit apart)."""
    prose, tables = _appendix()
    cells = set(re.findall(r">([^<>]*)<", tables))
    words = set(re.findall(r"[\d.]+%?", " ".join(cells)))
    quoted = set(re.findall(r"(?<![\w.])(\d+\.\d+%?|\d+%)(?!\w|\.\d)", prose))
    versions = {"2.11.0", "3.6.0", "5.17.0", "0.8.5", "13.0"}
    assert quoted - versions, "the prose quotes no number"
    assert quoted - versions <= words, sorted(quoted - versions - words)


def test_the_stored_gpu_run_bears_out_its_prose():
    """Every number the appendix and chapter 13 quote from the stored H100 run, read from
    their prose and computed from the run as the prose rounds it (so that a changed number in
    either fails): speeds, training ratios, errors and the model's shares. The run's host
    times measured a launch path since removed: both name the run's commit and quote none of
    them."""
    result = peers.stored("h100")
    assert result["machine"]["device"] == "NVIDIA H100 80GB HBM3"
    prose, _ = _appendix()
    chapter = _chapter_13_prose()
    rows = [r for r in result["rows"] if "us" in r]

    def pick(case=None, name=None, memory="model view", pass_="forward", dtype="bfloat16"):
        found = [
            r
            for r in rows
            if (r["memory"], r["pass"], r["dtype"]) == (memory, pass_, dtype)
            and (case is None or r["case"] in case)
            and (name is None or r["implementation"].startswith(name))
        ]
        assert found, (case, name, memory, pass_, dtype)
        return found

    def one(case, name, **kwargs):  # the row of exactly that implementation
        (row,) = [r for r in pick((case,), name, **kwargs) if r["implementation"] == name]
        return row

    def ratio(case, name, **kwargs):
        return format(one(case, name, **kwargs)["copy_ratio"], ".2f")

    def span(found, key="copy_ratio", spec=".2f"):
        values = [format(r[key], spec) for r in found]
        return min(values, key=float), max(values, key=float)

    def says(phrase, text=prose):
        assert phrase in text, phrase

    for text in (prose, chapter):
        says("commit 72bbae9", text)
        assert "11 to 30 µs" not in text and "posenc.fast.host" not in text
        assert "host µs" not in text
    machine = result["machine"]
    versions = [machine[k].split("+")[0] for k in ("torch", "triton", "transformers")]
    says(f"torch {versions[0]} (CUDA 13.0), Triton {versions[1]}, transformers {versions[2]}")
    says(f"Liger-Kernel {machine['liger_kernel']}")

    large = ("B=8, T=4k, D=128", "B=1, T=32k, D=128")
    lo, hi = span(pick(large, "posenc"))
    says(f"kernel runs at {lo} to {hi} of the copy's speed in its six forms")
    assert len({r["implementation"] for r in pick(large, "posenc")}) == 6
    a, b = (ratio(c, "liger in place") for c in large)
    (compiled,) = {format(r["copy_ratio"], ".2f") for r in pick(large, "transformers compiled")}
    (eager,) = {format(r["copy_ratio"], ".2f") for r in pick(large, "transformers eager")}
    says(f"Liger's at {a} and {b}, transformers' compiled function at {compiled}")
    says(f"several passes over the data, at {eager}.")
    (made,) = {ratio(c, "posenc half in place, angles") for c in large}
    says(f"runs at {made} in place on both")
    own = [ratio(c, "posenc half in place") for c in large]
    says(
        f"posenc's half in place at {own[0]} and {own[1]}, Liger's at {a} and {b}), while "
        f"transformers' eager function, several passes over the data, reaches {eager}",
        chapter,
    )
    small = ("B=1, T=4k, D=64", "B=1, T=4k, D=128")
    liger = [ratio(c, "liger in place") for c in small]
    ours = [ratio(c, "posenc half in place") for c in small]
    read = [ratio(c, "posenc half in place, angles") for c in small]
    says(
        f"runs at {liger[0]} and {liger[1]} of the copy's speed; posenc's, making its own "
        f"angles, at {ours[0]} and {ours[1]} in place, and reading those `rope_angles` made, "
        f"at {read[0]} and {read[1]}"
    )
    decode = "decode: B=64, T=1, D=128"
    says(
        f"takes {one(decode, 'copy_')['us']:.1f} µs, and one kernel for both $q$ and $k$ "
        f"beats it: posenc's at {ratio(decode, 'posenc half in place')} making its angles and "
        f"{ratio(decode, 'posenc half in place, angles')} reading them, in place, Liger's at "
        f"{ratio(decode, 'liger in place')}."
    )
    lo, hi = span([r for n in peers._TABLE_SERIES[:3] for r in pick(large, n, "contiguous")])
    a, b = (ratio(c, "liger in place", memory="contiguous") for c in large)
    says(f"keeps {lo} to {hi} of the copy's speed on the large cases, where Liger's falls to {a}")
    says(f"falls to {a} and {b}.")
    worst = max(r["max_error"] for r in pick(None, "posenc"))
    says(f"its largest error, {worst:.3f}, is half a unit")
    prefill = [c for c in dict.fromkeys(r["case"] for r in rows) if not c.startswith("decode")]
    others = [
        r["max_error"] for n in ("liger", "transformers eager") for r in pick(prefill, n)
    ]  # more than a unit (1/32) in every prefill case
    assert min(others) > 1 / 32
    says(f"off by more than a unit (up to {max(others):.3f}) in the prefill cases")
    training = [
        ratio("B=8, T=4k, D=128", n, pass_="forward+backward")
        for n in ("posenc half", "liger in place", "transformers compiled", "transformers eager")
    ]
    says(
        f"reaches {training[0]}, Liger's {training[1]}, transformers' compiled function "
        f"{training[2]} and its eager one {training[3]}."
    )
    one_, eight, step = result["model"]
    says(
        f"With transformers' RoPE, {one_['share_transformers']:.1%} of the prefill's time at "
        f"B=1 and {eight['share_transformers']:.1%} at B=8 goes to the rotation; with "
        f"posenc's, {one_['share_posenc']:.1%} and {eight['share_posenc']:.1%}, against a "
        f"noise of {one_['share_noise']:.1%} and {eight['share_noise']:.1%}"
    )
    says(f"the median of {one_['rounds']} rounds")
    says(
        f"shares are {step['share_transformers']:.1%} and {step['share_posenc']:.1%}, with a "
        f"noise of {step['share_noise']:.1%}"
    )
    table = peers.table(result, value="max_error")
    assert len(table.rows) == 5 and table.rows[2][0] == "B=8, T=4k, D=128"
    named = [name for name, span_ in table.groups[1:] for _ in range(span_)]  # each library once
    full = [f"{library} {rest}" for library, rest in zip(named, table.columns[2:], strict=True)]
    assert full == list(peers._TABLE_SERIES) and table.groups[0] == ("", 2)
    with pytest.raises(ValueError, match="value must be one of"):
        peers.table(result, value="speed")
    with pytest.raises(ValueError, match="name must be one of"):
        peers.stored("a100")


def test_the_appendix_tables_show_each_form_and_each_target_measured():
    result = peers.stored()
    forms = measured.forms_table(result, ("B=8, T=4k, D=128",))
    assert [row[0] for row in forms.rows] == [n.removeprefix("posenc ") for n in measured._FORMS]
    want = {r["implementation"]: r["copy_ratio"] for r in result["rows"]
            if (r["case"], r["dtype"], r["memory"], r["pass"])
            == ("B=8, T=4k, D=128", "bfloat16", "model view", "forward") and "us" in r}  # fmt: skip
    assert [row[1] for row in forms.rows] == [f"{want[n]:.2f}" for n in measured._FORMS]
    with pytest.raises(ValueError, match="cases must be measured"):
        measured.forms_table(result, ("B=2, T=1, D=8",))
    targets = measured.targets_table(result)
    checks = [c for c in peers.targets(result) if not c["check"].startswith("host")]
    assert len(targets.rows) == len(checks) and len(checks) < len(peers.targets(result))
    assert all(not row[0].startswith("host") for row in targets.rows)
    missed = {**result, "rows": [{**r, "copy_ratio": r["copy_ratio"] / 2}
                                 if r["implementation"] == "posenc half in place" and "us" in r else r
                                 for r in result["rows"]]}  # fmt: skip
    assert "missed" in [row[-1] for row in measured.targets_table(missed).rows]
    with pytest.raises(ValueError, match="a case the targets read"):
        measured.targets_table({"machine": {"device": "cpu"}, "rows": []})


def test_the_share_table_shows_each_step_of_the_model():
    """``share_table``: a row per model step, the three times, the two shares and one
    round's noise; without the noise (a result measured before it was), the shares alone,
    one below zero shown as measured; and a clear error for a result without a model
    measurement."""
    result = peers.stored()
    table = peers.share_table(result)
    assert [row[0] for row in table.rows] == [s["step"] for s in result["model"]]
    assert table.rows[0][-3:] == ["8.2%", "0.9%", "0.5%"]
    assert table.groups == [("", 1), ("time (ms)", 3), ("RoPE's share", 2), ("", 1)]
    assert "the median of each round's own share" in table.caption
    assert table.columns[-1] == "noise" and "a second pass without RoPE" in table.caption
    older = copy.deepcopy(result)
    for s in older["model"]:
        del s["share_noise"]
    older["model"][1]["share_posenc"] = -0.018
    table = peers.share_table(older)
    assert table.rows[1][-2:] == ["8.3%", "-1.8%"] and len(table.columns) == 6
    assert table.groups == [("", 1), ("time (ms)", 3), ("RoPE's share", 2)]
    step = result["model"][0]
    for bad in (
        {"machine": {}, "rows": []},
        {"machine": {}, "model": []},
        [],
        {"model": [{}]},
        {"model": [step]},  # no machine
        {
            "machine": result["machine"],
            "model": [{k: v for k, v in step.items() if k != "ms_none"}],
        },
    ):
        with pytest.raises(ValueError, match="model measurement"):
            peers.share_table(bad)


def _result(us: dict, *, host_us=5.0, ahead=True, model=()):
    """A result of ``peers.run`` made by hand: ``us[(case, pass, implementation)]`` times,
    each with its ratios to that case's ``copy_`` and ``clone``, in bf16, the model's layout."""
    rows = []
    for (case, pass_, name), t in us.items():
        copy, clone = us[case, pass_, "copy_"], us.get((case, pass_, "clone"), math.nan)
        rows.append(
            {"case": case, "memory": "model view", "dtype": "bfloat16", "pass": pass_,
             "implementation": name, "us": t, "host_us": host_us, "host_ahead": ahead,
             "copy_ratio": copy / t, "clone_ratio": clone / t, "max_error": None, "note": ""}
        )  # fmt: skip
    return {"machine": {"device": "stand-in"}, "rows": rows, "model": list(model)}


_B8, _DECODE = "B=8, T=4k, D=128", "decode: B=64, T=1, D=128"


def _verdicts(result):
    return {(c["check"], c["case"]): c for c in peers.targets(result)}


@pytest.mark.parametrize(
    ("name", "us", "check", "value"),
    [  # each target at its bound, and a little past it
        ("posenc half in place", 100 / 0.97, "in place / copy_", 0.97),
        ("posenc half", 120 / 0.93, "out of place / clone", 0.93),
        ("posenc interleaved in place", 100 / (0.9 * 0.98), "interleaved / half, in place", 0.9),
    ],
)
@pytest.mark.parametrize("past", [False, True])
def test_each_speed_target_is_met_at_its_bound_and_missed_past_it(name, us, check, value, past):
    us = us * 1.01 if past else us
    times = {"copy_": 100.0, "clone": 120.0, "posenc half in place": 100 / 0.98,
             "posenc half": 120 / 0.95, "posenc interleaved in place": 100 / 0.97,
             "liger in place": 110.0, name: us}  # fmt: skip
    result = _result({(_B8, "forward", n): t for n, t in times.items()})
    got = _verdicts(result)[check, _B8]
    assert got["value"] == pytest.approx(value / 1.01 if past else value)
    assert got["met"] is (not past)


@pytest.mark.parametrize(
    ("liger", "ours", "met"),
    [(0.8, 0.8, True), (0.8, 0.79, False), (1.2, 1.08, True), (1.2, 1.07, False)],
)
def test_liger_sets_the_bar_and_a_tenth_less_where_it_beats_the_copy(liger, ours, met):
    """Read from the rows of posenc in place and of Liger in place."""
    times = {"copy_": 100.0, "liger in place": 100 / liger, "posenc half in place": 100 / ours}
    got = _verdicts(_result({(_B8, "forward", n): t for n, t in times.items()}))
    assert got["in place / Liger's bar", _B8]["met"] is met


def test_training_host_and_model_targets():
    times = {(_B8, "forward+backward", "copy_"): 100.0,
             (_B8, "forward+backward", "posenc half"): 221.0,
             (_DECODE, "forward", "copy_"): 8.0, (_DECODE, "forward", "posenc half"): 8.0,
             (_DECODE, "forward", "posenc half in place"): 8.0}  # fmt: skip
    model = [
        {"step": "prefill B=1, T=4096", "share_transformers": 0.04, "share_posenc": 0.01},
        {"step": "prefill B=8, T=4096", "share_transformers": 0.07, "share_posenc": 0.011},
        {"step": "decode B=64 after 4095", "share_transformers": 0.09, "share_posenc": 0.09},
    ]
    got = _verdicts(_result(times, host_us=15.0, model=model))
    assert got["forward+backward / copy_", _B8]["value"] == pytest.approx(2.21)
    assert got["forward+backward / copy_", _B8]["met"] is False
    assert got["host µs per call, in place", _DECODE]["met"] is True  # 15 µs: at the bound
    assert got["host µs per call, out of place", _DECODE]["met"] is True
    share = "model: RoPE's share, at most 1%"
    assert got[share, "prefill B=1, T=4096"]["met"] is True
    assert got[share, "prefill B=8, T=4096"]["met"] is False
    below = "model: RoPE's share, below transformers'"
    assert got[below, "decode B=64 after 4095"]["met"] is False  # equal is not smaller


def test_a_target_without_its_rows_is_not_checked_and_says_why():
    times = {"copy_": 100.0, "posenc half in place": 101.0, "posenc interleaved in place": 99.0}
    got = _verdicts(_result({(_B8, "forward", n): t for n, t in times.items()}, ahead=False))
    liger = got["in place / Liger's bar", _B8]
    assert liger["met"] is None and liger["value"] is None
    assert liger["note"] == "no row of liger in place; the GPU waited for the host"
    assert got["in place / copy_", _B8]["note"] == "the GPU waited for the host"
    assert ("forward+backward / copy_", _B8) not in got  # a pass the result did not time
    text = peers.format_targets(list(got.values()))
    assert "not checked  (no row of liger in place; the GPU waited" in text


def test_a_cpu_run_of_small_cases_has_no_target_to_check(result):
    assert peers.targets(result) == []
    with pytest.raises(ValueError, match="dtype must be one of"):
        peers.targets(result, dtype="bf16")
    with pytest.raises(TypeError, match="result must be a dict"):
        peers.targets(result["rows"])


def test_every_number_chapter_13_quotes_is_in_one_of_its_outputs():
    """A decimal or a percentage in chapter 13's prose is one a reader finds in an output of
    the chapter (the versions of the stored run's software and Llama's apart)."""
    path = _ROOT / "notebooks" / "13_fast_rope.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    shown = " ".join(
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/html", ""))
        for c in cells
        if c["cell_type"] == "code"
        for o in c["outputs"]
    )
    words = set(re.findall(r"[\d.]+%?", shown))
    quoted = set(re.findall(r"(?<![\w.])(\d+\.\d+%?|\d+%)(?!\w|\.\d)", _chapter_13_prose()))
    names = {"2.11", "3.6", "5.17", "0.8.5", "3.2"}  # torch, Triton, transformers; Llama 3.2
    assert quoted - names, "the prose quotes no number"
    assert quoted - names <= words, sorted(quoted - names - words)
