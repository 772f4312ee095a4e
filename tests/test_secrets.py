"""A Hugging Face token never leaves the process: not printed, logged, raised or cached.

The Llama loader runs in a subprocess with a fake token in ``HF_TOKEN``, against the local
Hub of ``tests/local_hub.py`` and then with the Hub unreachable. Everything it can write
goes to a temporary directory (``HF_HOME``, ``POSENC_CACHE_DIR``, ``XDG_CACHE_HOME``,
``TRANSFORMERS_CACHE``); logging is at DEBUG for every library and warnings are always
shown. The subprocess exercises every path that handles the token, four times over:

1. a token the Hub grants access: ``load()`` takes the Hub path, downloads and caches the
   tokenizer and embedding rows (files the scan then reads), ``load("hub")`` and
   ``hub_embeddings`` (the ranged reads) succeed;
2. a token the Hub knows but has not granted access (403), and
3. one it does not know (401): ``load()`` falls back with a warning, ``load("hub")`` raises
   quoting the Hub's refusal, ``hub_embeddings`` raises the client's error;
4. the same token with the Hub unreachable (the endpoint moved to a closed local port):
   ``load()`` falls back, ``load("hub")`` and ``hub_embeddings`` raise.

Then stdout, stderr and every file written are scanned for each token, whole or in part.

posenc does not retry a request; should a retry loop come back, the subprocess replaces
``time.sleep`` by a no-op, so the test stays quick and the retries still show in the logs.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import string
import subprocess
import sys
from pathlib import Path

import pytest
from local_hub import LocalHub, link_smollm2_rows

from posenc.data import llama

ROOT = Path(__file__).resolve().parents[1]

LOADER = r"""
import logging, os, sys, time, traceback, warnings
time.sleep = lambda seconds: None  # keep every retry, skip the waiting
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
warnings.simplefilter("always")

import huggingface_hub.constants
import huggingface_hub.file_download
from posenc.data import embeddings, llama

def attempt(name, call):
    try:
        result = call()
    except Exception as err:  # the message and the traceback go to the output we scan
        print(f"{name} raised {type(err).__name__}: {err}")
        traceback.print_exc()
    else:
        print(f"{name} gave {result}")

STAGES = [("access", "ACCESS"), ("no-access", "NO_ACCESS"), ("unknown", "UNKNOWN"), ("no Hub", "ACCESS")]
for row, (who, token) in enumerate(STAGES, start=128100):  # a row not cached yet, each time
    if who == "no Hub":  # huggingface_hub read HF_ENDPOINT when it was imported
        closed = os.environ["CLOSED_ENDPOINT"]
        huggingface_hub.constants.ENDPOINT = closed
        huggingface_hub.constants.HUGGINGFACE_CO_URL_TEMPLATE = (
            closed + "/{repo_id}/resolve/{revision}/{filename}"
        )
        if hasattr(huggingface_hub.file_download, "HUGGINGFACE_CO_URL_TEMPLATE"):  # before 1.0
            huggingface_hub.file_download.HUGGINGFACE_CO_URL_TEMPLATE = (
                huggingface_hub.constants.HUGGINGFACE_CO_URL_TEMPLATE
            )
    os.environ["HF_TOKEN"] = os.environ["TOKEN_" + token]
    assert llama._hf_token(), "the token did not reach the loader"
    l = embeddings.load()
    print(f"{who} auto: {l.source}; {l.describe()}")
    print(f"{who} ids:", l.encode("The dog chased another dog"))
    print(f"{who} rows:", tuple(l.embed([5679]).shape))
    attempt(f"{who} load('hub')", lambda: embeddings.load("hub").source)
    attempt(f"{who} hub_embeddings", lambda: tuple(llama.hub_embeddings([row], llama._hf_token()).shape))
print("done")
"""


def fake_token() -> str:
    """A fresh token in the Hugging Face format: ``hf_`` and 34 letters and digits."""
    alphabet = string.ascii_letters + string.digits
    return "hf_" + "".join(secrets.choice(alphabet) for _ in range(34))


def closed_port() -> int:
    """A local TCP port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fragments(token: str) -> list[str]:
    """The token and long pieces of it: a leak may be truncated or split."""
    body = token.removeprefix("hf_")
    return [token, body, body[:16], body[-16:]]


def scan(token: str, texts: dict[str, str], root: Path) -> list[str]:
    """Where any fragment of ``token`` appears, in ``texts`` or in any file under ``root``."""
    hits = []
    for where, text in texts.items():
        hits += [f"{where}: {f[:6]}..." for f in fragments(token) if f in text]
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits += [
            f"{path.relative_to(root)}: {f[:6]}..." for f in fragments(token) if f.encode() in data
        ]
    return hits


def run_loader(
    tmp_path: Path, endpoint: str, tokens: dict[str, str]
) -> subprocess.CompletedProcess:
    """Run :data:`LOADER` with the Hub at ``endpoint`` and ``tokens`` (``"access"`` ...)."""
    cache = tmp_path / "posenc-cache"
    cache.mkdir()
    # the converted tokenizer, if this machine has one: saves rebuilding it (5 s)
    for built in llama.cache_dir().glob("llama3-tokenizer-*.json"):
        shutil.copy(built, cache / built.name)
    link_smollm2_rows(cache)  # what load() falls back to
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "HUGGING_FACE", "TRANSFORMERS_", "POSENC_"))
    }
    env.update(
        {f"TOKEN_{who.upper().replace('-', '_')}": token for who, token in tokens.items()},
        HF_ENDPOINT=endpoint,
        CLOSED_ENDPOINT=f"http://127.0.0.1:{closed_port()}",
        HF_HOME=str(tmp_path / "hf-home"),
        XDG_CACHE_HOME=str(tmp_path / "xdg-cache"),
        TRANSFORMERS_CACHE=str(tmp_path / "transformers-cache"),
        POSENC_CACHE_DIR=str(cache),
        HF_HUB_VERBOSITY="debug",
        TRANSFORMERS_VERBOSITY="debug",
        HF_HUB_ETAG_TIMEOUT="2",
        HF_HUB_DOWNLOAD_TIMEOUT="2",
        PYTHONWARNINGS="always",
    )
    return subprocess.run(
        [sys.executable, "-c", LOADER],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def loader_run(tmp_path_factory, hub_repo):
    tmp = tmp_path_factory.mktemp("secrets")
    tokens = {"access": fake_token(), "no-access": fake_token(), "unknown": fake_token()}
    hub = LocalHub(hub_repo, {tokens["access"]: "access", tokens["no-access"]: "no-access"})
    hub.start()
    try:
        done = run_loader(tmp, hub.url, tokens)
    finally:
        hub.stop()
    return tokens, tmp, hub, done


def test_the_loader_ran_every_path_that_sees_the_token(loader_run):
    _, tmp, hub, done = loader_run
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "\naccess auto: hub" in "\n" + out  # the Hub path, with its downloads
    assert (
        "\naccess load('hub') gave hub" in out and "\naccess hub_embeddings gave (1, 2048)" in out
    )
    assert list(tmp.rglob("llama-3.2-1b-tokenizer/*/tokenizer.json"))
    assert len(list(tmp.rglob("llama-3.2-1b-embed-rows/*.bf16"))) >= 3
    # fell back after trying the Hub: refused (403, 401), then not there at all
    for who, why in [("no-access", "HTTP 403"), ("unknown", "HTTP 401"), ("no Hub", "connect")]:
        assert f"{who} auto: offline" in out
        assert f"{who} load('hub') raised RuntimeError" in out and why in out
        assert f"{who} hub_embeddings raised" in out
    assert done.stderr.count("using the offline path; the Hub could not be read") == 3
    assert "Connection refused" in done.stderr or "connect" in done.stderr.lower()
    assert "Retrying" not in done.stderr  # huggingface_hub logs each retry it makes
    assert {r.auth for r in hub.requests} >= {"access", "no-access", "unknown"}
    assert out.rstrip().endswith("done")


def test_the_token_appears_in_no_output_log_message_or_file(loader_run):
    tokens, tmp, _, done = loader_run
    for who, token in tokens.items():
        hits = scan(token, {"stdout": done.stdout, "stderr": done.stderr}, tmp)
        assert not hits, f"the {who} token leaked: {hits}"


def test_the_scan_finds_a_leak(tmp_path):
    token = fake_token()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "cache.json").write_text('{"auth": "Bearer ' + token[3:20] + '"}')
    hits = scan(token, {"stdout": "ok", "stderr": f"header {token}"}, tmp_path)
    assert any(h.startswith("stderr") for h in hits)
    assert any(h.startswith("sub/cache.json") for h in hits)
    assert not scan(token, {"stdout": "ok"}, tmp_path / "sub" / "none")
