"""The chapters' token embeddings: Llama 3.2's tokenizer offline, row reads over HTTP, the
fallback to SmolLM2's rows, bad input."""

import http.server
import io
import re
import struct
import subprocess
import sys
import threading
import time
import warnings

import pytest
import torch
from local_hub import TOKEN, table_row
from safetensors import safe_open
from safetensors.torch import save_file

from posenc.data import embeddings, llama

SENTENCES = [
    "The dog chased another dog",
    "Once upon a time, a Dog attacks the Cat.",
    "  leading spaces and trailing   ",
    "Numbers: 1234567 3.14159 -42 1e-8",
    "naïve café résumé, 東京 and Ελληνικά 🙂",
    "def f(x):\n    return x ** 2  # code\n\n",
    "URLs like https://example.org/a?b=c&d=e",
    "I'm sure they'll say it's fine, won't they?",
    "RoPE rotates (q, k) pairs by m*theta_i.",
    "a special token <|begin_of_text|> inside the text",
]


@pytest.fixture(scope="module")
def offline():
    return embeddings.load("offline")


@pytest.fixture(scope="module")
def llama_tokenizer():
    return llama.offline_tokenizer()


def test_dog_sentence_ids_offline(llama_tokenizer):
    ids = llama_tokenizer("The dog chased another dog")["input_ids"]
    assert ids == [128000, 791, 5679, 62920, 2500, 5679]
    assert llama_tokenizer.decode([5679]) == " dog"


@pytest.mark.parametrize("text", SENTENCES)
def test_offline_tokenizer_matches_metas_tiktoken_tokenizer(llama_tokenizer, text):
    # Meta's own reference implementation, reading the same file through tiktoken; like the
    # Hub tokenizer, ours reads special tokens written in the text as special tokens
    from llama_models.llama3.tokenizer import Tokenizer

    meta = Tokenizer(llama._tokenizer_model_path())
    expected = meta.encode(text, bos=True, eos=False, allowed_special="all")
    assert llama_tokenizer(text)["input_ids"] == expected


def test_offline_tokenizer_is_cached(tmp_path):
    start = time.perf_counter()
    first = llama.offline_tokenizer(cache=tmp_path)
    built = time.perf_counter() - start
    assert len(list(tmp_path.glob("llama3-tokenizer-*.json"))) == 1
    llama._LOADED.clear()  # forget the in-process copy: load from the file
    start = time.perf_counter()
    second = llama.offline_tokenizer(cache=tmp_path)
    reloaded = time.perf_counter() - start
    assert reloaded < built
    assert len(second) == llama.VOCAB_SIZE
    text = SENTENCES[4]
    assert first(text)["input_ids"] == second(text)["input_ids"]


# --- the offline source: SmolLM2's rows -----------------------------------------------------


def test_offline_rows_are_smollm2s_trained_rows(offline):
    from posenc.data import smol

    assert (offline.source, offline.width) == ("offline", 576)
    ids = offline.encode("The dog chased another dog")
    assert ids[0] == smol.START_ID
    assert offline.pieces(ids)[1:] == ["The", " dog", " chased", " another", " dog"]
    rows = offline.embed(ids)
    assert rows.dtype == torch.float32 and rows.shape == (6, 576)
    # the rows of the whole table, dequantised in one piece by gguf's own routine
    table = smol.read_gguf_tensor(smol.gguf_path(), smol.EMBEDDING_TENSOR)
    assert torch.equal(rows, table[ids])
    # trained, not random: lengths spread over the vocabulary, rows sharing a direction
    norms = table.norm(dim=-1)
    assert norms.std() > 0.1 * norms.mean()
    assert table.mean(0).norm() > 0.3 * norms.mean()


def test_offline_rows_load_fast_once_cached():
    code = (
        "import time; t = time.perf_counter(); from posenc.data import embeddings; "
        "d = embeddings.load('offline'); d.embed(d.encode('The dog chased another dog')); "
        "print(time.perf_counter() - t)"
    )
    embeddings.load("offline")  # the cache is built (or found) first
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(done.stdout) < 10, done.stdout  # about 2 s on two cores, imports included


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "error", "match"),
    [
        ([], ValueError, "must not be empty"),
        ([-1], ValueError, r"0\.\.128255 .* got -1 at index 0"),
        ([5, 128256], ValueError, "got 128256 at index 1"),
        ("dog", TypeError, "got a str"),
        ([1.0], TypeError, r"ints, got 1\.0"),
        ([True], TypeError, "ints, got True"),
        (5679, TypeError, "sequence of token ids, got int"),
        (torch.tensor([[1, 2]]), ValueError, "1-D"),
        (torch.tensor([1.0]), TypeError, "dtype torch.float32"),
    ],
)
def test_bad_ids_get_a_clear_error(ids, error, match):
    with pytest.raises(error, match=match):
        llama.check_ids(ids)


def test_bad_ids_for_smollm2_name_its_vocabulary(offline):
    with pytest.raises(ValueError, match=r"0\.\.49151 \(V=49152\), got 49152 at index 1"):
        offline.embed([0, 49152])
    with pytest.raises(TypeError, match="got a str"):
        offline.pieces("dog")


def test_bad_text_and_source(offline):
    with pytest.raises(TypeError, match="text must be a str"):
        offline.encode(["dog"])
    with pytest.raises(ValueError, match="must not be empty"):
        offline.encode("")
    with pytest.raises(ValueError, match="source must be one of"):
        embeddings.load("internet")


# --- choosing the source --------------------------------------------------------------------


def test_offline_env_is_quick_and_never_reaches_the_hub(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)

    def no_hub(*args, **kwargs):
        raise AssertionError("the Hub was contacted although HF_HUB_OFFLINE=1")

    monkeypatch.setattr(llama, "hub_tokenizer", no_hub)
    monkeypatch.setattr(llama, "hub_embeddings", no_hub)
    embeddings.load("offline")  # built (or read) once; what is timed is the choice of path
    start = time.perf_counter()
    data = embeddings.load()
    assert data.source == "offline"
    assert time.perf_counter() - start < 5
    with pytest.raises(ValueError, match="needs a Hugging Face token"):
        embeddings.load("hub")


def test_no_token_means_offline(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    assert embeddings.load().source == "offline"


def test_hub_failure_falls_back_without_showing_the_token(monkeypatch):
    secret = "hf_" + "S3cr3t" * 6
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_TOKEN", secret)

    def leaky_failure(token):
        raise OSError(f"401 Client Error for token {token}")

    monkeypatch.setattr(llama, "hub_tokenizer", leaky_failure)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = embeddings.load()
    assert data.source == "offline"
    assert caught and all(secret not in str(w.message) for w in caught)
    assert secret not in repr(data)
    with pytest.raises(RuntimeError) as info:
        embeddings.load("hub")
    assert secret not in str(info.value) and info.value.__cause__ is None


# --- reading rows over HTTP -----------------------------------------------------------------


class RangeServer(http.server.ThreadingHTTPServer):
    """Serves one in-memory file, honours single byte ranges, counts the bytes it sends."""

    def __init__(self, payload: bytes):
        self.payload = payload
        self.sent = 0
        self.requests = []
        super().__init__(("127.0.0.1", 0), RangeHandler)


class RangeHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _span(self):
        size = len(self.server.payload)
        header = self.headers.get("Range")
        if header is None:
            return 0, size, False
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", header.strip())
        start = int(match.group(1))
        end = min(int(match.group(2)) + 1 if match.group(2) else size, size)
        return start, end, True

    def _reply(self, with_body):
        start, end, partial = self._span()
        body = self.server.payload[start:end]
        self.send_response(206 if partial else 200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        if partial:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(self.server.payload)}")
        self.end_headers()
        self.server.requests.append((self.command, self.headers.get("Range")))
        if with_body:
            self.wfile.write(body)
            self.server.sent += len(body)

    def do_HEAD(self):
        self._reply(with_body=False)

    def do_GET(self):
        self._reply(with_body=True)


@pytest.fixture(scope="module")
def safetensors_file(tmp_path_factory):
    gen = torch.Generator().manual_seed(0)
    tensors = {
        "model.norm.weight": torch.ones(2048),
        llama.EMBEDDING_TENSOR: (torch.randn(3000, 2048, generator=gen) * 0.02).to(torch.bfloat16),
        "model.layers.0.self_attn.q_proj.weight": torch.randn(256, 2048, generator=gen).to(
            torch.bfloat16
        ),
    }
    path = tmp_path_factory.mktemp("st") / "model.safetensors"
    save_file(tensors, str(path))
    return path


def test_row_reads_over_http_match_safe_open(safetensors_file):
    fsspec = pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    payload = safetensors_file.read_bytes()
    server = RangeServer(payload)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        rows = [2999, 5, 0, 5, 1234, 77]
        fs = fsspec.filesystem("http", skip_instance_cache=True)
        url = f"http://127.0.0.1:{server.server_address[1]}/model.safetensors"
        with llama.open_for_row_reads(fs, url) as f:
            got = llama.read_safetensors_rows(f, llama.EMBEDDING_TENSOR, rows)
    finally:
        server.shutdown()
        server.server_close()
    with safe_open(str(safetensors_file), "pt") as ref:
        expected = ref.get_slice(llama.EMBEDDING_TENSOR)[:][rows]
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, expected)
    assert len(payload) > 12_000_000
    assert server.sent < 100_000, f"transferred {server.sent} bytes"
    assert all(rng is not None for method, rng in server.requests if method == "GET")


@pytest.mark.parametrize(
    ("name", "rows", "match"),
    [
        ("lm_head.weight", [0], "not in the file"),
        ("model.norm.weight", [0], "must be 2-D"),
        (llama.EMBEDDING_TENSOR, [3000], r"0\.\.2999, got 3000"),
        (llama.EMBEDDING_TENSOR, [1.5], r"got 1\.5 at index 0"),
    ],
)
def test_read_rows_rejects_bad_requests(safetensors_file, name, rows, match):
    with open(safetensors_file, "rb") as f, pytest.raises(ValueError, match=match):
        llama.read_safetensors_rows(f, name, rows)


def _file(header: bytes, length: int | None = None) -> io.BytesIO:
    size = len(header) if length is None else length
    return io.BytesIO(struct.pack("<Q", size) + header)


@pytest.mark.parametrize(
    ("blob", "tensor", "match"),
    [
        (io.BytesIO(b""), "t", "starts with 8 bytes of header length"),
        (io.BytesIO(b"@\0\0\0"), "t", "starts with 8 bytes of header length"),
        (_file(b'{"t": {"dtype', 40), "t", "header is not JSON"),
        (_file(b'{"__metadata__": {}}'), "__metadata__", "not in the file"),
        (_file(b'["t"]'), "t", "not in the file"),
        (_file(b'{"t": {"dtype": "F32", "shape": [4, 3]}}'), "t", "must give dtype, shape and"),
        (_file(b'{"t": "F32"}'), "t", "must give dtype, shape and data_offsets"),
    ],
    ids=["empty", "short", "cut header", "metadata", "a list", "no offsets", "no entry"],
)
def test_read_rows_names_what_is_wrong_with_the_file(blob, tensor, match):
    """A file that is not safetensors, or an entry that lacks what the read needs: the
    ValueError the docstring promises, not struct's, json's or a KeyError."""
    with pytest.raises(ValueError, match=match):
        llama.read_safetensors_rows(blob, tensor, [0])


def test_hub_embeddings_read_once_then_from_cache(hub_env, tmp_path):
    # the local Hub of tests/local_hub.py: model.safetensors has the real table's header
    ids = [5679, 128255, 5679]
    cache = tmp_path / "cache"
    got = llama.hub_embeddings(ids, TOKEN, cache=cache)
    assert got.dtype == torch.float32 and got.shape == (3, 2048)
    assert torch.equal(got[2], got[0]) and not torch.equal(got[0], got[1])
    for row, token_id in zip(got, ids, strict=True):
        expected = torch.frombuffer(bytearray(table_row(token_id)), dtype=torch.bfloat16)
        assert torch.equal(row, expected.float())
    # one metadata request, two for the header, one per distinct row; counted, not ordered:
    # the local Hub logs a request after answering it, so on a busy machine the next one can
    # be logged first
    table = [r.method for r in hub_env.requests if r.path.endswith("/model.safetensors")]
    assert sorted(table) == ["GET", "GET", "GET", "GET", "HEAD"]
    hub_env.reset()
    again = llama.hub_embeddings([128255, 5679], TOKEN, cache=cache)
    assert not hub_env.bytes_for("model.safetensors"), "cached rows were fetched again"
    assert torch.equal(again, got[[1, 0]])
    cached = b"".join(p.read_bytes() for p in sorted(cache.rglob("*")) if p.is_file())
    assert TOKEN.encode() not in cached and len(cached) == 2 * 4096


def test_demonstration_is_the_same_with_either_source(offline):
    # chapter 1 relies on a start token first and equal ids giving equal rows; true of both
    ids = offline.encode("The dog chased another dog")
    rows = offline.embed(ids)
    assert torch.equal(rows[2], rows[5]) and not torch.equal(rows[1], rows[2])
    assert embeddings.load("offline").embed([5679]).shape == (1, offline.width)
