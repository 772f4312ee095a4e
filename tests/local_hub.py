"""A local Hugging Face Hub serving one gated repository: ``meta-llama/Llama-3.2-1B``.

It answers the parts of the Hub's HTTP API that :mod:`posenc.data.llama` and ``huggingface_hub``
use for that repository, on ``127.0.0.1`` and a free port, from a thread:

- model info, ``GET /api/models/{repo}`` and ``/api/models/{repo}/revision/{rev}``;
- the file listing, ``GET /api/models/{repo}/tree/{rev}[/{path}]`` and
  ``POST /api/models/{repo}/paths-info/{rev}`` (what ``HfFileSystem`` asks);
- the files, ``HEAD`` and ``GET /{repo}/resolve/{rev}/{file}``, with single byte ranges
  (``206`` and ``Content-Range``) and the headers ``huggingface_hub.file_download`` reads:
  ``X-Repo-Commit``, ``ETag`` and, for the files kept in LFS, ``X-Linked-Etag`` and
  ``X-Linked-Size``. The real Hub redirects LFS files to a storage host; this one serves them
  itself.
- the gate, as the Hub answers it: no token is ``401`` with ``X-Error-Code: GatedRepo``, an
  unknown token ``401`` with ``X-Error-Message: Invalid credentials in Authorization header``,
  a known token without access ``403`` with ``X-Error-Code: GatedRepo``. Model info and the
  listing are public, as on the Hub; only an unknown token is refused there.

The repository is written by :func:`build_repo`: the offline tokenizer saved as
``save_pretrained`` writes it (``tokenizer.json``, ``tokenizer_config.json``) with the
``special_tokens_map.json`` the Hub repository also has (transformers 5 no longer writes one),
a ``config.json``, and a ``model.safetensors`` holding ``model.embed_tokens.weight`` with the
real shape ``[128256, 2048]`` and dtype bfloat16 between two unrelated tensors. The table is
a sparse file: row ``i`` is :func:`table_row` of ``i`` (``N(0, 0.02^2)`` from a seed made of
``i``, unlike the offline stand-in's), written into the file the first time a request touches
it, so the file holds the rows that were served and reading it back gives what was sent.

The server counts the bytes it sends per path, logs each request (method, path, range and
whose token it carried, never the token), and can be made to misbehave with
:meth:`LocalHub.misbehave`: hang (accept and never answer), drop the connection half way
through a file, or answer 401 or 403 whatever the token.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import re
import shutil
import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

REPO_ID = "meta-llama/Llama-3.2-1B"
COMMIT = hashlib.sha1(b"posenc local hub").hexdigest()
TOKEN = "hf_fake_token_for_tests_0123456789"
"""A token with access to the repository."""
NO_ACCESS_TOKEN = "hf_fake_token_without_access_0123456789"
"""A token of an account that has not been granted access (403)."""
WRONG_TOKEN = "hf_fake_token_nobody_has_0123456789"
"""A token the Hub does not know (401)."""

EMBEDDING_TENSOR = "model.embed_tokens.weight"
ROWS, WIDTH = 128256, 2048
ROW_BYTES = 2 * WIDTH
LFS_FILES = ("model.safetensors", "tokenizer.json")
MISBEHAVIOURS = ("hang", "drop", "401", "403")

_GATED = f"Access to model {REPO_ID} is restricted. You must have access to it and be authenticated to access it. Please log in."
_NOT_GRANTED = (
    f"Access to model {REPO_ID} is restricted and you are not in the authorized list. "
    f"Visit https://huggingface.co/{REPO_ID} to ask for access."
)
_INVALID = "Invalid credentials in Authorization header"

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": WIDTH,
    "initializer_range": 0.02,
    "intermediate_size": 8192,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 16,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 32.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "vocab_size": ROWS,
}
SPECIAL_TOKENS_MAP = {
    name: {
        "content": content,
        "lstrip": False,
        "normalized": False,
        "rstrip": False,
        "single_word": False,
    }
    for name, content in (("bos_token", "<|begin_of_text|>"), ("eos_token", "<|end_of_text|>"))
}


def table_row(token_id: int) -> bytes:
    """Row ``token_id`` of the repository's embedding table: 2048 bfloat16 values, as bytes."""
    import torch

    gen = torch.Generator().manual_seed(1_000_003 * (token_id + 1))
    row = (torch.randn(WIDTH, generator=gen) * 0.02).to(torch.bfloat16)
    return row.view(torch.uint8).numpy().tobytes()


class SparseTable:
    """``model.safetensors`` with the real table's shape; rows are written when first read.

    Layout: ``model.layers.0.self_attn.q_proj.weight`` ``[64, 2048]``, then the embedding
    table, then ``model.norm.weight`` ``[2048]``, all bfloat16: the table starts neither at
    the start of the data nor ends at the end of the file.
    """

    def __init__(self, path: Path):
        import torch

        self.path = path
        gen = torch.Generator().manual_seed(7)
        before = (torch.randn(64, WIDTH, generator=gen) * 0.02).to(torch.bfloat16)
        after = torch.ones(WIDTH, dtype=torch.bfloat16)
        table_bytes = ROWS * ROW_BYTES
        spans = [
            ("model.layers.0.self_attn.q_proj.weight", [64, WIDTH], before.numel() * 2),
            (EMBEDDING_TENSOR, [ROWS, WIDTH], table_bytes),
            ("model.norm.weight", [WIDTH], after.numel() * 2),
        ]
        header: dict = {"__metadata__": {"format": "pt"}}
        offset = 0
        for name, shape, size in spans:
            header[name] = {
                "dtype": "BF16",
                "shape": shape,
                "data_offsets": [offset, offset + size],
            }
            offset += size
        blob = json.dumps(header).encode()
        blob += b" " * (-len(blob) % 8)
        self.data_start = 8 + len(blob)
        self.table_start = self.data_start + header[EMBEDDING_TENSOR]["data_offsets"][0]
        self.size = self.data_start + offset
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(blob)) + blob)
            f.write(before.view(torch.uint8).numpy().tobytes())
            f.seek(self.table_start + table_bytes)
            f.write(after.view(torch.uint8).numpy().tobytes())
        self.written: set[int] = set()
        self._lock = threading.Lock()
        # a stand-in for the LFS object id: hashing 525 MB of holes would only cost time
        self.sha256 = hashlib.sha256(blob + str(self.size).encode()).hexdigest()

    def fill(self, start: int, end: int) -> None:
        """Write every table row that bytes ``start .. end-1`` of the file overlap."""
        lo = max(start, self.table_start) - self.table_start
        hi = min(end, self.table_start + ROWS * ROW_BYTES) - self.table_start
        if hi <= lo:
            return
        with self._lock, open(self.path, "r+b") as f:
            for row in range(lo // ROW_BYTES, (hi - 1) // ROW_BYTES + 1):
                if row not in self.written:
                    f.seek(self.table_start + row * ROW_BYTES)
                    f.write(table_row(row))
                    self.written.add(row)


@dataclass(frozen=True)
class RepoFile:
    """One file of the repository, with the ids the Hub gives it."""

    path: Path
    size: int
    oid: str  # the git blob id (of the LFS pointer, for an LFS file)
    sha256: str | None  # the LFS object id, for a file kept in LFS


def _git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    """The repository :func:`build_repo` wrote: its files by name, and the sparse table."""

    folder: Path
    files: dict[str, RepoFile]
    table: SparseTable


def build_repo(folder: Path, tokenizer_cache: Path | None = None) -> Repo:
    """Write the repository into ``folder``.

    Args:
        folder: an empty or missing directory.
        tokenizer_cache: where :func:`posenc.data.llama.offline_tokenizer` finds (or builds) the
            converted tokenizer; default its own.

    Returns:
        The :class:`Repo`.
    """
    from posenc.data import llama

    folder.mkdir(parents=True, exist_ok=True)
    llama.offline_tokenizer(cache=tokenizer_cache).save_pretrained(str(folder))
    (folder / "special_tokens_map.json").write_text(json.dumps(SPECIAL_TOKENS_MAP, indent=2))
    (folder / "config.json").write_text(json.dumps(CONFIG, indent=2))
    table = SparseTable(folder / "model.safetensors")
    files = {}
    for path in sorted(folder.iterdir()):
        if path.name == "model.safetensors":
            files[path.name] = RepoFile(
                path, table.size, _git_oid(table.sha256.encode()), table.sha256
            )
            continue
        data = path.read_bytes()
        sha256 = hashlib.sha256(data).hexdigest() if path.name in LFS_FILES else None
        pointer = (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n"
        )
        oid = _git_oid(pointer.encode() if sha256 else data)
        files[path.name] = RepoFile(path, len(data), oid, sha256)
    return Repo(folder, files, table)


@dataclass(frozen=True)
class Request:
    """One request the server answered (or did not): never the token itself."""

    method: str
    path: str
    range: str | None
    auth: str  # "none", "access" (TOKEN), "no-access" (NO_ACCESS_TOKEN) or "unknown"
    status: int | None  # None when the server hung or dropped the connection


class LocalHub(http.server.ThreadingHTTPServer):
    """The Hub on ``127.0.0.1``; :meth:`start` it, point ``huggingface_hub`` at :attr:`url`.

    Args:
        repo: what :func:`build_repo` wrote.
        tokens: token -> ``"access"`` or ``"no-access"``; default :data:`TOKEN` with access
            and :data:`NO_ACCESS_TOKEN` without. Any other token is unknown (401).
    """

    daemon_threads = True

    def __init__(self, repo: Repo, tokens: dict[str, str] | None = None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repo = repo
        self.tokens = (
            tokens if tokens is not None else {TOKEN: "access", NO_ACCESS_TOKEN: "no-access"}
        )
        self.sent: Counter[str] = Counter()  # bytes sent (headers and body) per path
        self.requests: list[Request] = []
        self.mode: str | None = None
        self.only: str | None = None
        self.release = threading.Event()  # lets hanging requests go when the server stops
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> LocalHub:
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()

    def misbehave(self, mode: str | None, only: str | None = None) -> None:
        """Answer wrongly from now on: ``"hang"``, ``"drop"``, ``"401"``, ``"403"``, or None.

        Args:
            mode: one of :data:`MISBEHAVIOURS`, or None to behave.
            only: a file name: misbehave only for requests about it (default: all files,
                and for ``"hang"`` every request).
        """
        if mode is not None and mode not in MISBEHAVIOURS:
            raise ValueError(f"mode must be one of {MISBEHAVIOURS} or None, got {mode!r}")
        self.mode, self.only = mode, only

    def reset(self) -> None:
        """Behave again and forget the requests and byte counts."""
        self.misbehave(None)
        self.sent.clear()
        self.requests.clear()

    def bytes_for(self, filename: str) -> int:
        """Bytes sent for requests about ``filename`` (its resolve URLs, any revision)."""
        return sum(n for path, n in self.sent.items() if path.endswith(f"/{filename}"))


class _CountingWriter:
    def __init__(self, raw):
        self.raw = raw
        self.count = 0

    def write(self, data) -> int:
        self.count += len(data)
        return self.raw.write(data)

    def __getattr__(self, name):  # closed, close, flush ... of the socket writer
        return getattr(self.raw, name)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: LocalHub
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx2 expects

    def log_message(self, *args) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.wfile = _CountingWriter(self.wfile)

    # --- bookkeeping -------------------------------------------------------------------------

    def _auth(self) -> str:
        header = self.headers.get("Authorization")
        if header is None:
            return "none"
        token = header.removeprefix("Bearer ").strip()
        return self.server.tokens.get(token, "unknown")

    def _log(self, status: int | None) -> None:
        path = urlsplit(self.path).path
        self.server.sent[path] += self.wfile.count
        self.server.requests.append(
            Request(self.command, path, self.headers.get("Range"), self._auth(), status)
        )

    def _misbehaving(self, filename: str | None) -> str | None:
        mode, only = self.server.mode, self.server.only
        if mode is None or (only is not None and filename != only):
            return None
        if mode in ("drop", "401", "403") and filename is None:
            return None  # those concern files; the API answers
        return mode

    def _hang(self) -> None:
        self._log(None)
        self.server.release.wait(timeout=120)
        self.close_connection = True

    # --- answers -----------------------------------------------------------------------------

    def _send(
        self, status: int, body: bytes = b"", headers: dict | None = None, *, head=False
    ) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
        self._log(status)

    def _json(self, status: int, payload, *, head=False) -> None:
        body = json.dumps(payload).encode()
        self._send(status, body, {"Content-Type": "application/json"}, head=head)

    def _error(self, status: int, code: str | None, message: str, *, head=False) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        if code in ("EntryNotFound", "GatedRepo"):
            headers["X-Repo-Commit"] = COMMIT
        self._send(status, json.dumps({"error": message}).encode(), headers, head=head)

    def _refused(self, *, head: bool) -> bool:
        """Answer for the gate, or False when the token has access."""
        mode = self._misbehaving(self._filename())
        auth = self._auth()
        if mode == "401" or auth == "unknown":
            self._error(401, None, _INVALID, head=head)
        elif auth == "none":
            self._error(401, "GatedRepo", _GATED, head=head)
        elif mode == "403" or auth == "no-access":
            self._error(403, "GatedRepo", _NOT_GRANTED, head=head)
        else:
            return False
        return True

    def _filename(self) -> str | None:
        match = re.fullmatch(rf"/{re.escape(REPO_ID)}/resolve/[^/]+/(.+)", urlsplit(self.path).path)
        return unquote(match.group(1)) if match else None

    # --- routes ------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self.wfile.count = 0
        self._route(head=True)

    def do_GET(self) -> None:
        self.wfile.count = 0
        self._route(head=False)

    def do_POST(self) -> None:
        self.wfile.count = 0
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        path = urlsplit(self.path).path
        if self._misbehaving(None) == "hang":
            return self._hang()
        match = re.fullmatch(rf"/api/models/{re.escape(REPO_ID)}/paths-info/([^/]+)", path)
        if not match:
            return self._error(404, None, "Not Found")
        if self._auth() == "unknown":
            return self._error(401, None, _INVALID)
        if not self._revision_ok(match.group(1)):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {match.group(1)}")
        if "json" in (self.headers.get("Content-Type") or ""):
            paths = json.loads(body).get("paths", [])
        else:
            paths = parse_qs(body).get("paths", [])
        self._json(200, [self._entry(name) for name in paths if name in self.server.repo.files])

    def _route(self, *, head: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        filename = self._filename()
        if self._misbehaving(filename) == "hang":
            return self._hang()
        if filename is not None:
            return self._resolve(path, filename, head=head)
        repo = re.escape(REPO_ID)
        if match := re.fullmatch(rf"/api/models/{repo}(?:/revision/([^/]+))?", path):
            return self._model_info(match.group(1) or "main", head=head)
        if match := re.fullmatch(rf"/api/models/{repo}/tree/([^/]+)(?:/(.*))?", path):
            return self._tree(match.group(1), match.group(2) or "", head=head)
        if path.startswith("/api/models/"):
            return self._error(404, "RepoNotFound", "Repository not found", head=head)
        self._error(404, None, "Not Found", head=head)

    def _revision_ok(self, revision: str) -> bool:
        return revision in ("main", COMMIT)

    def _entry(self, name: str) -> dict:
        file = self.server.repo.files[name]
        entry = {"type": "file", "oid": file.oid, "size": file.size, "path": name}
        if file.sha256:
            entry["lfs"] = {"oid": file.sha256, "size": file.size, "pointerSize": 134}
        return entry

    def _model_info(self, revision: str, *, head: bool) -> None:
        if self._auth() == "unknown":
            return self._error(401, None, _INVALID, head=head)
        if not self._revision_ok(revision):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head=head)
        files = self.server.repo.files
        self._json(
            200,
            {
                "_id": "66e8f6d9c6c5d6a5a4b3c2d1",
                "id": REPO_ID,
                "modelId": REPO_ID,
                "author": REPO_ID.split("/")[0],
                "sha": COMMIT,
                "lastModified": "2024-10-24T15:07:13.000Z",
                "createdAt": "2024-09-18T15:03:14.000Z",
                "private": False,
                "disabled": False,
                "gated": "manual",
                "downloads": 0,
                "likes": 0,
                "library_name": "transformers",
                "pipeline_tag": "text-generation",
                "tags": ["transformers", "safetensors", "llama", "text-generation"],
                "siblings": [{"rfilename": name} for name in sorted(files)],
                "usedStorage": sum(f.size for f in files.values()),
            },
            head=head,
        )

    def _tree(self, revision: str, folder: str, *, head: bool) -> None:
        if self._auth() == "unknown":
            return self._error(401, None, _INVALID, head=head)
        if not self._revision_ok(revision):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head=head)
        if folder.strip("/"):
            return self._error(404, "EntryNotFound", f"{folder} does not exist", head=head)
        self._json(200, [self._entry(name) for name in sorted(self.server.repo.files)], head=head)

    def _resolve(self, path: str, filename: str, *, head: bool) -> None:
        revision = path.split("/resolve/", 1)[1].split("/", 1)[0]
        if self._refused(head=head):
            return None
        if not self._revision_ok(revision):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head=head)
        file = self.server.repo.files.get(filename)
        if file is None:
            return self._error(404, "EntryNotFound", f"{filename} does not exist", head=head)
        start, end = 0, file.size
        status = 200
        headers = {
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
            "X-Repo-Commit": COMMIT,
            "ETag": f'"{file.oid}"',
        }
        if file.sha256:
            headers["X-Linked-Etag"] = f'"{file.sha256}"'
            headers["X-Linked-Size"] = str(file.size)
        if (asked := self.headers.get("Range")) is not None:
            span = _parse_range(asked, file.size)
            if span is None:
                headers["Content-Range"] = f"bytes */{file.size}"
                return self._send(416, b"", headers, head=head)
            start, end = span
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{file.size}"
        if file.sha256 == self.server.repo.table.sha256 and not head:
            self.server.repo.table.fill(start, end)
        body = b""
        if not head:
            with open(file.path, "rb") as f:
                f.seek(start)
                body = f.read(end - start)
        if not head and self._misbehaving(filename) == "drop":
            return self._drop(status, headers, body)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(end - start))
        self.end_headers()
        if not head:
            self.wfile.write(body)
        self._log(status)
        return None

    def _drop(self, status: int, headers: dict, body: bytes) -> None:
        """Announce the whole body, send half of it, and close the connection."""
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2])
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self._log(None)


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """``bytes=a-b``, ``bytes=a-`` or ``bytes=-n`` as ``(start, end)``; None if unsatisfiable."""
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", header.strip())
    if match is None or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if first == "":
        start, end = max(size - int(last), 0), size
    else:
        start = int(first)
        end = min(int(last) + 1, size) if last else size
    return (start, end) if start < end else None


def link_smollm2_rows(cache: Path) -> None:
    """Link SmolLM2's GGUF file and tokenizer, which ``embeddings.load`` falls back to, from the
    project's cache into ``cache`` (built there first if missing)."""
    from posenc.data import smol
    from posenc.device import cache_dir

    smol.token_rows()
    for entry in cache_dir().glob("smollm2-*"):
        if "gguf" in entry.name or "tokenizer" in entry.name:
            (cache / entry.name).symlink_to(entry)


def copy_offline_tokenizer(cache: Path) -> None:
    """Copy the converted offline tokenizer into ``cache`` (saves rebuilding it, 5 s)."""
    from posenc.data import llama

    cache.mkdir(parents=True, exist_ok=True)
    for built in llama.cache_dir().glob("llama3-tokenizer-*.json"):
        shutil.copy(built, cache / built.name)


def point_huggingface_hub_at(monkeypatch, url: str) -> None:
    """Send this process's ``huggingface_hub`` requests to ``url``, and allow them.

    ``huggingface_hub`` (2.x, here 2.4) reads ``HF_ENDPOINT`` and ``HF_HUB_OFFLINE`` once, when
    ``huggingface_hub.constants`` is imported, and derives the resolve URL template from the
    endpoint there; by the time a test runs, something has imported it. So the environment
    is set for subprocesses, and the constants this process already read are patched:
    ``ENDPOINT`` (the API calls read it on each call), ``HUGGINGFACE_CO_URL_TEMPLATE``
    (``hf_hub_url``) and ``HF_HUB_OFFLINE`` (``is_offline_mode``, which the client's request
    hook checks; CI sets ``HF_HUB_OFFLINE=1`` for the whole run).
    """
    import huggingface_hub.constants
    import huggingface_hub.file_download

    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", url)
    template = url + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    # huggingface_hub before 1.0 (the floor's 0.34) builds hf_hub_url from its own copy
    if hasattr(huggingface_hub.file_download, "HUGGINGFACE_CO_URL_TEMPLATE"):
        monkeypatch.setattr(huggingface_hub.file_download, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    reset_sessions()


def reset_sessions() -> None:
    """Forget the client's HTTP sessions: before huggingface_hub 1.0, a session made while
    offline keeps an adapter that refuses every request (and one made online keeps none)."""
    import huggingface_hub.utils

    reset = getattr(huggingface_hub.utils, "reset_sessions", None)
    if reset is not None:
        reset()
