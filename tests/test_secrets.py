"""A Hugging Face token never leaves the process: not printed, logged, raised or cached.

The Llama loader runs in a subprocess with a fake token in ``HF_TOKEN`` and the Hub
unreachable (``HF_ENDPOINT`` points at a closed local port). Everything it can write goes
to a temporary directory (``HF_HOME``, ``POSENC_CACHE_DIR``, ``XDG_CACHE_HOME``,
``TRANSFORMERS_CACHE``); logging is at DEBUG for every library and warnings are always
shown. The subprocess exercises every path that handles the token: ``load()`` (tries the
Hub's tokenizer, falls back with a warning), ``load("hub")`` (raises, quoting the Hub
client's error) and ``hub_embeddings`` (the ranged reads; raises).
Then stdout, stderr and every file written are scanned for the token, whole or in part.

To stay quick the subprocess replaces ``time.sleep`` by a no-op: huggingface_hub still makes
all of its retries (and logs each of them), it only stops waiting between them.
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

from posenc import llama

ROOT = Path(__file__).resolve().parents[1]

LOADER = r"""
import logging, sys, time, warnings
time.sleep = lambda seconds: None  # keep every retry, skip the waiting
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
warnings.simplefilter("always")

from posenc import llama

token = llama._hf_token()
assert token, "the token did not reach the loader"

l = llama.load()
print("auto:", l.source, l.describe())
print("ids:", l.encode("The dog chased another dog"))
print("rows:", tuple(l.embed([5679]).shape))
for name, call in [
    ("load('hub')", lambda: llama.load("hub")),
    ("hub_embeddings", lambda: llama.hub_embeddings([791], token)),
]:
    try:
        call()
    except Exception as err:  # the message and the traceback go to the output we scan
        import traceback
        print(f"{name} raised {type(err).__name__}: {err}")
        traceback.print_exc()
    else:
        print(f"{name} did not raise")
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


def run_loader(tmp_path: Path, token: str) -> subprocess.CompletedProcess:
    cache = tmp_path / "posenc-cache"
    cache.mkdir()
    # the converted tokenizer, if this machine has one: saves rebuilding it (5 s)
    for built in llama.cache_dir().glob("llama3-tokenizer-*.json"):
        shutil.copy(built, cache / built.name)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "HUGGING_FACE", "TRANSFORMERS_", "POSENC_"))
    }
    env.update(
        HF_TOKEN=token,
        HF_ENDPOINT=f"http://127.0.0.1:{closed_port()}",
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
def loader_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("secrets")
    token = fake_token()
    return token, tmp, run_loader(tmp, token)


def test_the_loader_ran_every_path_that_sees_the_token(loader_run):
    _, _, done = loader_run
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "auto: offline" in out  # fell back after trying the Hub
    assert "using the offline path; the Hub could not be read" in done.stderr
    for name in ("load('hub')", "hub_embeddings"):
        assert f"{name} raised" in out, out
    assert "Connection refused" in done.stderr or "connect" in done.stderr.lower()
    assert out.rstrip().endswith("done")


def test_the_token_appears_in_no_output_log_message_or_file(loader_run):
    token, tmp, done = loader_run
    hits = scan(token, {"stdout": done.stdout, "stderr": done.stderr}, tmp)
    assert not hits, f"the token leaked: {hits}"


def test_the_scan_finds_a_leak(tmp_path):
    token = fake_token()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "cache.json").write_text('{"auth": "Bearer ' + token[3:20] + '"}')
    hits = scan(token, {"stdout": "ok", "stderr": f"header {token}"}, tmp_path)
    assert any(h.startswith("stderr") for h in hits)
    assert any(h.startswith("sub/cache.json") for h in hits)
    assert not scan(token, {"stdout": "ok"}, tmp_path / "sub" / "none")
