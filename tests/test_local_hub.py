"""posenc.data.llama's Hub path end to end, against a local Hugging Face Hub (tests/local_hub.py).

The Hub is a thread on 127.0.0.1 serving a gated ``meta-llama/Llama-3.2-1B`` with the offline
tokenizer in the Hub's format and an embedding table of the real shape; ``huggingface_hub`` is
pointed at it by the ``hub_env`` fixture (tests/conftest.py). Nothing leaves the machine.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
from local_hub import (
    NO_ACCESS_TOKEN,
    TOKEN,
    WRONG_TOKEN,
    link_smollm2_rows,
    point_huggingface_hub_at,
)
from safetensors import safe_open

from posenc.data import embeddings, llama

ROOT = Path(__file__).resolve().parents[1]

TEXTS = [
    "The dog chased another dog",
    "Once upon a time, a Dog attacks the Cat.",
    "naïve café résumé, Ελληνικά, 東京, Ærøskøbing",
    "emoji 🙂🐕‍🦺 and flags 🇫🇷, zero-width\u200bjoiner",
    "def f(x):\n\treturn x ** 2  # code {'a': [1, 2]}\n\n",
    "Numbers: 1234567 3.14159 -42 1e-8 0x1F 2,048",
    "runs   of    spaces\n\n\n\tand\ttabs  \r\n",
    "a special token <|begin_of_text|> inside the text",
]


def closed_port() -> int:
    """A local TCP port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def table_rows(repo, ids) -> torch.Tensor:
    """Rows ``ids`` of the served ``model.safetensors``, read back from the file with safetensors."""
    for i in ids:  # the rows served are in the file already; any other is written now
        start = repo.table.table_start + i * llama.EMBED_DIM * 2
        repo.table.fill(start, start + 1)
    with safe_open(str(repo.table.path), "pt") as f:
        table = f.get_slice(llama.EMBEDDING_TENSOR)
        return torch.stack([table[i : i + 1][0] for i in ids])


def files_holding(root: Path, secret: str) -> list[str]:
    """Files under ``root`` whose bytes contain ``secret``."""
    return [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*"))
        if p.is_file() and secret.encode() in p.read_bytes()
    ]


# --- the Hub path, with a token that has access ---------------------------------------------


def test_a_token_with_access_loads_from_the_hub(hub_env):
    data = embeddings.load()
    assert data.source == "hub"
    assert data.describe().startswith(f"hub: tokenizer and real embedding rows of {llama.MODEL_ID}")
    resolved = [r for r in hub_env.requests if "/resolve/" in r.path]
    assert resolved and all(r.auth == "access" and r.status in (200, 206) for r in resolved)
    assert embeddings.load("hub").source == "hub"


def test_hub_token_ids_are_the_offline_tokenizers(hub_env):
    hub, offline = embeddings.load("hub"), llama.offline_tokenizer()
    assert hub.tokenizer is not offline  # read from the Hub's files, not reused
    for text in TEXTS:
        ids = hub.encode(text)
        assert ids == offline(text)["input_ids"], text
        assert hub.pieces(ids) == [offline.decode([i]) for i in ids], text
    assert hub.encode("The dog chased another dog") == [128000, 791, 5679, 62920, 2500, 5679]


def test_hub_rows_are_the_files_rows_and_cost_under_100_kb(hub_env, hub_repo, hub_cache):
    data = embeddings.load("hub")
    hub_env.reset()
    ids = data.encode("Once upon a time, a Dog attacks the Cat.")
    rows = data.embed(ids)
    assert rows.dtype == torch.float32 and rows.shape == (len(ids), llama.EMBED_DIM)
    assert torch.equal(rows, table_rows(hub_repo, ids).float())
    sent = hub_env.bytes_for("model.safetensors")
    assert 0 < sent < 100_000, f"{sent} bytes for {len(set(ids))} rows"
    gets = [r for r in hub_env.requests if r.method == "GET"]
    assert gets and all(r.range is not None and r.status == 206 for r in gets)
    # fetched once: the rows now come from the cache
    hub_env.reset()
    assert torch.equal(data.embed(ids[::-1]), rows.flip(0))
    assert hub_env.requests == []
    assert not files_holding(hub_cache, TOKEN)


def test_hf_file_system_reads_the_same_rows(hub_env, hub_repo):
    from huggingface_hub import HfFileSystem

    ids = [0, 5679, 128000, 128255]
    fs = HfFileSystem(token=TOKEN, skip_instance_cache=True)
    with llama.open_for_row_reads(fs, f"{llama.MODEL_ID}/model.safetensors") as f:
        got = llama.read_safetensors_rows(f, llama.EMBEDDING_TENSOR, ids)
    assert torch.equal(got, table_rows(hub_repo, ids))
    assert any(r.path.startswith("/api/models/") for r in hub_env.requests)


def test_a_requests_session_reads_the_same(hub_env, hub_repo, monkeypatch, tmp_path):
    # huggingface_hub before 1.0 shares a requests session where later ones share httpx's
    requests = pytest.importorskip("requests")
    import huggingface_hub

    session = requests.Session()
    monkeypatch.setattr(huggingface_hub, "get_session", lambda: session)
    ids = [128000, 5679, 128255]
    rows = llama.hub_embeddings(ids, TOKEN, cache=tmp_path / "rows")
    assert torch.equal(rows, table_rows(hub_repo, ids).float())
    hub_env.misbehave("drop", "model.safetensors")
    with pytest.raises(requests.RequestException):
        llama.hub_embeddings([791], TOKEN, cache=tmp_path / "rows")
    hub_env.misbehave("403")
    with pytest.raises(RuntimeError, match="HTTP 403, the Hub refused the token"):
        embeddings.load("hub")


def test_the_client_reads_the_gate_as_on_the_hub(hub_env, tmp_path):
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError

    assert HfApi().model_info(llama.MODEL_ID, token=TOKEN).gated == "manual"
    for token, error, status in [
        (False, GatedRepoError, 401),
        (NO_ACCESS_TOKEN, GatedRepoError, 403),
        (WRONG_TOKEN, HfHubHTTPError, 401),
    ]:
        with pytest.raises(error) as info:
            hf_hub_download(llama.MODEL_ID, "config.json", token=token, cache_dir=tmp_path)
        assert info.value.response.status_code == status
    path = hf_hub_download(llama.MODEL_ID, "config.json", token=TOKEN, cache_dir=tmp_path)
    assert '"vocab_size": 128256' in Path(path).read_text()


# --- the Hub refuses, hangs, breaks or is not there -----------------------------------------

FAILURES = {
    "token without access": ({"token": NO_ACCESS_TOKEN}, "HTTP 403, the Hub refused the token"),
    "wrong token": ({"token": WRONG_TOKEN}, "HTTP 401, the Hub refused the token"),
    "Hub answers 401": ({"mode": "401"}, "HTTP 401, the Hub refused the token"),
    "Hub answers 403": ({"mode": "403"}, "HTTP 403, the Hub refused the token"),
    "Hub hangs": ({"mode": "hang"}, "did not answer within 0.5 s"),
    # httpx's name for it (huggingface_hub 1.0 on), or requests' (before)
    "drop in the tokenizer": (
        {"mode": "drop", "only": "tokenizer.json"},
        ("RemoteProtocolError", "ChunkedEncodingError"),
    ),
    "drop in the table": (
        {"mode": "drop", "only": "model.safetensors"},
        ("RemoteProtocolError", "ChunkedEncodingError"),
    ),
    "closed port": ({"closed": True}, "cannot connect to http://127.0.0.1:"),
}


@pytest.mark.parametrize("case", list(FAILURES))
def test_a_hub_that_cannot_be_read_means_offline_at_once(
    case, hub_env, hub_cache, monkeypatch, caplog, capfd
):
    setup, reason = FAILURES[case]
    reasons = reason if isinstance(reason, tuple) else (reason,)
    if setup.get("only") == "tokenizer.json":  # the tokenizer must come from the Hub again
        monkeypatch.setattr(
            llama, "_LOADED", {k: v for k, v in llama._LOADED.items() if k.is_file()}
        )
        for file in (hub_cache / "llama-3.2-1b-tokenizer").glob("*/*"):
            file.unlink()
    else:  # what a reader has after a first good load: only the failure is timed
        embeddings.load("hub")
        shutil.rmtree(hub_cache / "llama-3.2-1b-embed-rows")
    token = setup.get("token", TOKEN)
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setattr(llama, "_HUB_TIMEOUT_S", 0.5)
    if setup.get("closed"):
        point_huggingface_hub_at(monkeypatch, f"http://127.0.0.1:{closed_port()}")
    hub_env.reset()
    hub_env.misbehave(setup.get("mode"), setup.get("only"))
    for logger in (None, "huggingface_hub", "httpx2", "posenc"):
        caplog.set_level(logging.DEBUG, logger=logger)

    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = embeddings.load()
    took = time.perf_counter() - start
    assert data.source == "offline"
    assert took < 10, f"{took:.1f} s to fall back"
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert messages[0].startswith("using the offline path; the Hub could not be read (")
    assert any(r in messages[0] for r in reasons), messages[0]

    with pytest.raises(RuntimeError, match=f"cannot read {llama.MODEL_ID} from the Hub") as info:
        embeddings.load("hub")
    assert any(r in str(info.value) for r in reasons) and info.value.__cause__ is None

    if setup.get("mode") == "hang":  # one request per load, one wait each: no retries
        assert took < 3 * llama._HUB_TIMEOUT_S
        assert len(hub_env.requests) == 2
    assert not list(hub_cache.rglob("*.tmp")), "a partial download was left behind"
    out, err = capfd.readouterr()
    texts = [*messages, str(info.value), repr(info.value), repr(data), caplog.text, out, err]
    assert not [t for t in texts if token in t], "the token leaked"
    assert not files_holding(hub_cache, token)


def test_no_token_or_offline_mode_never_reaches_the_hub(hub_env, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    assert embeddings.load().source == "offline"
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    assert embeddings.load().source == "offline"
    assert time.perf_counter() - start < 1
    assert hub_env.requests == []


FALLBACK = r"""
import time, warnings
from posenc.data import embeddings, llama
embeddings.load("offline")  # read once; what is timed is the choice of path
start = time.perf_counter()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    source = embeddings.load().source
print(source, round(time.perf_counter() - start, 2), len(caught))
"""


def subprocess_env(tmp_path: Path, endpoint: str) -> dict[str, str]:
    """The environment of a reader with :data:`TOKEN` and a Hub at ``endpoint``, all fresh."""
    cache = tmp_path / "posenc-cache"
    cache.mkdir()
    for built in Path(os.environ["POSENC_CACHE_DIR"]).glob("llama3-tokenizer-*.json"):
        shutil.copy(built, cache / built.name)
    link_smollm2_rows(cache)  # the fallback
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "HUGGING_FACE", "TRANSFORMERS_", "POSENC_"))
    }
    env.update(
        HF_ENDPOINT=endpoint,
        HF_TOKEN=TOKEN,
        HF_HOME=str(tmp_path / "hf-home"),
        POSENC_CACHE_DIR=str(cache),
    )
    return env


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hang", "closed port"])
def test_default_time_limits_fall_back_within_10_s(mode, hub_env, tmp_path):
    # a fresh process: huggingface_hub's first request (its agent registry, 3 s at most) counts
    if mode == "hang":
        hub_env.misbehave("hang")
        endpoint = hub_env.url
    else:
        endpoint = f"http://127.0.0.1:{closed_port()}"
    done = subprocess.run(
        [sys.executable, "-c", FALLBACK],
        cwd=ROOT,
        env=subprocess_env(tmp_path, endpoint),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    source, took, warned = done.stdout.split()
    assert source == "offline" and warned == "1"
    assert float(took) < 10, f"{took} s to fall back"


# --- the chapters, read from the local Hub --------------------------------------------------

CHAPTERS = ["notebooks/01_the_problem.ipynb", "notebooks/09_rope.ipynb"]


@pytest.mark.slow
def test_chapters_give_their_stored_outputs_from_the_hub(hub_env, tmp_path):
    env = subprocess_env(tmp_path, hub_env.url)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "--nbval", "-p", "no:xdist", "-q"),
            *("--nbval-sanitize-with", "tools/nbval_sanitize.cfg", *CHAPTERS),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    resolved = [r for r in hub_env.requests if "/resolve/" in r.path]
    assert resolved and all(r.auth == "access" for r in resolved)
    assert any("model.safetensors" in r.path and r.status == 206 for r in resolved)
    assert TOKEN not in done.stdout + done.stderr
