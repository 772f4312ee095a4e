"""Llama 3.2 1B data: the tokenizer, and the token embeddings read from the Hub.

The source post tokenizes its sentences with ``meta-llama/Llama-3.2-1B`` and looks up their
rows of the model's embedding table ``[V, E] = [128256, 2048]``. That model is gated: it
needs a Hugging Face token and a network. :func:`posenc.data.embeddings.load` uses this
module when it has both, and SmolLM2-135M's rows (:mod:`posenc.data.smol`) otherwise.

- **Tokenizer.** From the Hub with a token (:func:`hub_tokenizer`); or built offline from
  the ``tokenizer.model`` file that Meta's ``llama-models`` package ships (same BPE ranks,
  same special tokens, so the same ids), converted once and cached (:func:`offline_tokenizer`).
- **Embeddings.** From the Hub by reading only the rows needed out of
  ``model.safetensors`` (a handful of HTTP range reads, tens of KB instead of 2.47 GB),
  cached row by row (:func:`hub_embeddings`).

Every request to the Hub has a time limit (5 s to connect or for the next bytes) and none is
retried, so without a network, or with a Hub that does not answer or refuses the token, a
caller learns it within seconds.

The token is read from ``HF_TOKEN`` (or Colab's notebook secrets) and sent to the Hub alone,
through the Hugging Face client's HTTP session (never to the storage host the Hub redirects
file reads to); this module never prints, logs, stores or puts it into an error.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import torch

from posenc._extras import require
from posenc.device import cache_dir

__all__ = [
    "BOS_ID",
    "EMBEDDING_TENSOR",
    "EMBED_DIM",
    "MODEL_ID",
    "TOKENIZER_SHA256",
    "VOCAB_SIZE",
    "Llama",
    "cache_dir",
    "check_ids",
    "hub_embeddings",
    "hub_tokenizer",
    "offline_tokenizer",
    "open_for_row_reads",
    "read_safetensors_rows",
]

MODEL_ID = "meta-llama/Llama-3.2-1B"
"""The Hub repository of the model the source post uses."""

VOCAB_SIZE = 128256
"""``V``: rows of the embedding table (128000 BPE tokens and 256 special tokens)."""

EMBED_DIM = 2048
"""``E``: width of Llama 3.2 1B, the length of one embedding row."""

BOS_ID = 128000
"""Id of ``<|begin_of_text|>``, which the tokenizer puts first."""

EMBEDDING_TENSOR = "model.embed_tokens.weight"
"""Name of the embedding table inside ``model.safetensors``."""

TOKENIZER_SHA256 = "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55"
"""sha256 of the Llama 3 ``tokenizer.model`` that ``llama-models`` ships."""

_HUB_FILE = "model.safetensors"
_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64}
_MAX_HEADER_BYTES = 100_000_000
_LOADED: dict[Path, Any] = {}  # tokenizers already loaded in this process, by folder or file
_HUB_TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "special_tokens_map.json")
_HUB_TIMEOUT_S = 5.0
"""Seconds one request to the Hub may wait to connect, or for its next bytes, before failing.

No request is retried (the Hugging Face client's own downloads retry for a minute or more
when the network is down), so a reader without a network waits for one such limit at most.
"""


def _offline_requested() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _hf_token() -> str | None:
    """The Hugging Face token from the environment or Colab's secrets, or None."""
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        return token
    try:  # Colab keeps it among the notebook secrets
        from google.colab import userdata  # type: ignore[import-not-found]

        return userdata.get("HF_TOKEN") or None
    except Exception:  # not in Colab, no secret, or access not granted
        return None


def _check_token(token: object) -> str:
    """A token must be a non-empty str; the message never shows it."""
    if not isinstance(token, str):
        raise TypeError(f"token must be a str, got a {type(token).__name__}")
    if not token.strip():
        raise ValueError("token must not be empty, got an empty or blank string")
    return token


def _check_cache(cache: object) -> Path:
    """The cache directory: ``cache`` (a path) or :func:`cache_dir`."""
    if cache is None:
        return cache_dir()
    if not isinstance(cache, (str, os.PathLike)):
        raise TypeError(f"cache must be a path or None, got {cache!r} ({type(cache).__name__})")
    return Path(cache)


def _scrub(message: str, token: str | None) -> str:
    return message.replace(token, "<token>") if token else message


def check_ids(ids: object, vocab_size: int = VOCAB_SIZE) -> list[int]:
    """Validate token ids and return them as a list of Python ints.

    Args:
        ids: a non-empty sequence of ints, or a 1-D integer tensor, each in ``0 .. V-1``.
        vocab_size: ``V``, Llama 3.2's by default.

    Returns:
        The ids as a list.

    Raises:
        TypeError: if ``ids`` is a string, not a sequence, or holds non-integers.
        ValueError: if ``ids`` is empty, not 1-D, or has an id outside ``0 .. V-1``.

    Example:
        >>> check_ids([128000, 791])
        [128000, 791]
        >>> check_ids([128256])
        Traceback (most recent call last):
        ...
        ValueError: ids must be token ids in 0..128255 (V=128256), got 128256 at index 0
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, got {vocab_size!r}")
    if not 0 < vocab_size < 2**63:
        raise ValueError(
            f"vocab_size must be positive and fit in int64, got vocab_size={vocab_size}"
        )
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"ids must be a sequence of token ids, got a {type(ids).__name__}: {ids!r}")
    if isinstance(ids, torch.Tensor):
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise TypeError(f"ids must hold integers, got a tensor of dtype {ids.dtype}")
        if ids.dim() != 1:
            raise ValueError(f"ids must be 1-D, got shape {tuple(ids.shape)}")
        ids = ids.tolist()
    if not isinstance(ids, Sequence):
        raise TypeError(f"ids must be a sequence of token ids, got {type(ids).__name__}")
    if len(ids) == 0:
        raise ValueError("ids must not be empty, got []")
    out = []
    for i, value in enumerate(ids):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"ids must be ints, got {value!r} ({type(value).__name__}) at index {i}"
            )
        if not 0 <= value < vocab_size:
            raise ValueError(
                f"ids must be token ids in 0..{vocab_size - 1} (V={vocab_size}), got {value} at index {i}"
            )
        out.append(value)
    return out


# --- bounded reads from the Hub -------------------------------------------------------------


@dataclass(frozen=True)
class _HubFile:
    """One file of :data:`MODEL_ID`: where its bytes are read, and its size if known."""

    url: str  # the Hub, or the storage the Hub redirects to
    size: int | None
    headers: dict[str, str] = field(repr=False)  # the token goes only to the Hub itself
    commit: str | None = None


def _hub_headers(token: str | None) -> dict[str, str]:
    """Headers for a request to the Hub: who asks, and the token if one is to be sent.

    Made here, not by ``huggingface_hub.utils.build_hf_headers``: in huggingface_hub 2.x its
    first call in a process also fetches a registry from the Hub, 3 s more without a network.
    """
    from huggingface_hub import __version__

    headers = {"user-agent": f"posenc; huggingface_hub/{__version__}"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return headers


def _hub_request(
    method: str, url: str, headers: dict[str, str], *, follow: bool, ranged: bool = False
) -> tuple[Any, bytes]:
    """One request through the Hub client's HTTP session, not retried: the response, its body.

    The session is httpx's from huggingface_hub 1.0 on, requests' before; both wait at most
    :data:`_HUB_TIMEOUT_S` to connect and for each read. A body cut short raises the HTTP
    library's error, or the ``ValueError`` below where it does not notice.

    Raises:
        HfHubHTTPError: (or requests' ``HTTPError``) for an answer of 400 or more.
        ValueError: if a range request is answered with anything but 206 (the whole file
            would follow), or the body is not as long as announced.
    """
    from huggingface_hub import get_session
    from huggingface_hub.utils import hf_raise_for_status

    session = get_session()
    if hasattr(session, "build_request"):  # httpx
        request = session.build_request(method, url, headers=headers, timeout=_HUB_TIMEOUT_S)
        response = session.send(request, stream=True, follow_redirects=follow)
    else:  # requests
        response = session.request(
            method,
            url,
            headers=headers,
            timeout=_HUB_TIMEOUT_S,
            stream=True,
            allow_redirects=follow,
        )

    def read() -> bytes:
        return response.read() if hasattr(response, "read") else response.content

    try:
        if response.status_code >= 400:
            read()  # the client's error message quotes the body
            hf_raise_for_status(response)
        if ranged and response.status_code != 206:
            raise ValueError(
                f"the Hub answered a range request with HTTP {response.status_code}, not 206"
            )
        body = read() if method != "HEAD" else b""
    finally:
        response.close()
    announced = response.headers.get("Content-Length")
    encoded = response.headers.get("Content-Encoding", "identity") != "identity"
    if method != "HEAD" and announced is not None and not encoded and len(body) != int(announced):
        raise ValueError(f"the Hub sent {len(body)} bytes of the {announced} it announced")
    return response, body


def _hub_file(filename: str, token: str, *, revision: str = "main") -> _HubFile:
    """Ask the Hub about ``filename`` with one HEAD request (and its redirects), not retried.

    Raises whatever the client raises: ``GatedRepoError`` or another ``HfHubHTTPError`` for
    a refused token, a connection error or a timeout without a network.
    """
    from urllib.parse import urljoin, urlsplit

    from huggingface_hub import hf_hub_url

    url = hf_hub_url(MODEL_ID, filename, revision=revision)
    # identity: the size the Hub gives must be the file's, not a compressed body's
    asking = {**_hub_headers(token), "Accept-Encoding": "identity"}
    for _ in range(5):
        response, _ = _hub_request("HEAD", url, asking, follow=False)
        location = response.headers.get("Location")
        if location is None:  # the bytes are here
            size = response.headers.get("X-Linked-Size") or response.headers.get("Content-Length")
            headers = _hub_headers(token)
            break
        target = urljoin(url, location)
        if urlsplit(target)[:2] != urlsplit(url)[:2]:
            # a signed storage URL: this answer describes the file; the token stays on the Hub
            size = response.headers.get("X-Linked-Size")
            url, headers = target, _hub_headers(None)
            break
        url = target  # a renamed repository, on the Hub itself
    else:
        raise ValueError(f"the Hub redirected {filename} more than 5 times")
    commit = response.headers.get("X-Repo-Commit")
    if commit is None or size is None:
        raise ValueError(f"the Hub's answer for {filename} lacks its commit or its size")
    return _HubFile(url, int(size), headers, commit)


def _hub_get(file: _HubFile, start: int = 0, end: int | None = None) -> bytes:
    """Bytes ``start .. end-1`` of ``file`` (to its end by default) with one GET, not retried."""
    if end is None:
        end = file.size
    headers = dict(file.headers)
    ranged = not (start == 0 and end == file.size)
    if ranged:
        headers["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
    # the token is not sent on to another host: both HTTP libraries drop it on such redirects
    _, body = _hub_request("GET", file.url, headers, follow=True, ranged=ranged)
    if end is not None and len(body) != end - start:
        raise ValueError(f"the Hub sent {len(body)} bytes of the {end - start} asked for")
    return body


class _HubReader:
    """A file on the Hub as a seekable binary file: each read is one ranged GET of its bytes."""

    def __init__(self, file: _HubFile):
        self._file = file
        self._pos = 0

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._file.size}[whence]
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int = -1) -> bytes:
        end = (
            self._file.size if size is None or size < 0 else min(self._pos + size, self._file.size)
        )
        if end <= self._pos:
            return b""
        data = _hub_get(self._file, self._pos, end)
        self._pos = end
        return data


def _hub_failure(err: Exception, token: str) -> str:
    """Why the Hub could not be read, in one line that never shows the token."""
    from huggingface_hub import constants

    status = getattr(getattr(err, "response", None), "status_code", None)
    name = type(err).__name__
    if status in (401, 403):
        said = getattr(err, "server_message", None) or str(err).strip().splitlines()[0]
        reason = f"{name}: HTTP {status}, the Hub refused the token ({said.strip()})"
    elif "Timeout" in name:
        reason = f"{name}: {constants.ENDPOINT} did not answer within {_HUB_TIMEOUT_S:g} s"
    elif name in ("ConnectError", "ConnectionError"):  # httpx's, requests' (before 1.0)
        reason = f"{name}: cannot connect to {constants.ENDPOINT} ({err})"
    else:
        lines = str(err).strip().splitlines()
        reason = f"{name}: {lines[0] if lines else 'no message'}"
    return _scrub(reason, token)


# --- tokenizer ------------------------------------------------------------------------------


_OFFLINE_PACKAGES = ("transformers", "tokenizers", "tiktoken", "llama_models")
"""What the offline tokenizer is built with (the ``book`` extra)."""


def _tokenizer_model_path() -> Path:
    path = importlib.resources.files("llama_models.llama3") / "tokenizer.model"
    return Path(str(path))


def _wrap_tokenizer(backend: Any) -> Any:
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|begin_of_text|>",
        eos_token="<|end_of_text|>",
        clean_up_tokenization_spaces=False,
    )


def _build_offline_backend(model_path: Path) -> Any:
    """Convert Meta's tiktoken BPE file into a ``tokenizers.Tokenizer`` with Llama 3's specials."""
    from llama_models.llama3.tokenizer import Tokenizer as MetaTokenizer
    from tokenizers import AddedToken, Regex, decoders, pre_tokenizers, processors
    from transformers.convert_slow_tokenizer import TikTokenConverter

    meta = MetaTokenizer(model_path)  # the reference: its pattern and its special tokens
    # The converter turns tiktoken's ranks into BPE vocabulary and merges; the rest is set
    # here because its `converted()` differs between transformers 4.x and 5.x.
    backend = TikTokenConverter(vocab_file=str(model_path), pattern=meta.pat_str).tokenizer()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(meta.pat_str), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    specials = sorted(meta.special_tokens.items(), key=lambda item: item[1])
    backend.add_special_tokens(
        [AddedToken(name, normalized=False, special=True) for name, _ in specials]
    )
    for name, expected in specials:
        if backend.token_to_id(name) != expected:
            raise RuntimeError(
                f"special token {name} got id {backend.token_to_id(name)}, expected {expected}"
            )
    bos = "<|begin_of_text|>"
    backend.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{bos}:0 $A:0",
                pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
                special_tokens=[(bos, BOS_ID)],
            ),
        ]
    )
    return backend


def offline_tokenizer(*, cache: Path | None = None) -> Any:
    """The Llama 3.2 tokenizer, built without the Hub from ``llama-models``' ``tokenizer.model``.

    Llama 3.2 uses the Llama 3 tokenizer: a tiktoken BPE file of 128000 ranks plus 256
    special tokens. The file is converted to a Hugging Face fast tokenizer once (about 5 s)
    and the result is cached as a ``tokenizer.json`` file that later processes load in about
    a second; within one process the tokenizer is loaded once. A BOS token is put in front of every encoded text, as the Hub tokenizer does.

    Args:
        cache: directory for the converted tokenizer; default :func:`cache_dir`.

    Returns:
        A ``transformers.PreTrainedTokenizerFast``.

    Raises:
        TypeError: if ``cache`` is not a path.
        RuntimeError: if the shipped ``tokenizer.model`` is not the known Llama 3 file.
        ModuleNotFoundError: without the ``book`` extra, naming ``pip install 'posenc[book]'``.

    Example:
        >>> tok = offline_tokenizer()
        >>> tok("The dog chased another dog")["input_ids"]
        [128000, 791, 5679, 62920, 2500, 5679]
    """
    require("posenc.data.llama.offline_tokenizer", *_OFFLINE_PACKAGES)
    import tokenizers
    from tokenizers import Tokenizer

    model_path = _tokenizer_model_path()
    digest = hashlib.sha256(model_path.read_bytes()).hexdigest()
    if digest != TOKENIZER_SHA256:
        raise RuntimeError(
            f"{model_path} has sha256 {digest}, expected the Llama 3 tokenizer {TOKENIZER_SHA256}"
        )
    # keyed by the tokenizers version too: its JSON format is not promised to be stable
    name = f"llama3-tokenizer-{digest[:16]}-tokenizers{tokenizers.__version__}.json"
    cached = _check_cache(cache) / name
    if cached not in _LOADED:
        if cached.is_file():
            backend = Tokenizer.from_file(str(cached))
        else:
            backend = _build_offline_backend(model_path)
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_suffix(f".{os.getpid()}.tmp")
            backend.save(str(partial))
            os.replace(partial, cached)
        _LOADED[cached] = _wrap_tokenizer(backend)
    return _LOADED[cached]


def hub_tokenizer(token: str) -> Any:
    """The Llama 3.2 tokenizer from the Hub (needs a token with access to the gated model).

    One request asks the Hub which commit its ``main`` is; the tokenizer files of that
    commit (``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``) are
    downloaded once into :func:`cache_dir` and loaded with ``AutoTokenizer``. Each request
    has a time limit and none is retried.

    Args:
        token: a Hugging Face token; passed to the client, never shown or stored.

    Returns:
        The tokenizer ``AutoTokenizer`` makes from :data:`MODEL_ID`'s tokenizer files.

    Raises:
        TypeError, ValueError: if ``token`` is not a non-empty str (the message does not
            show it).
        Exception: whatever the Hub client raises when the tokenizer cannot be read.
    """
    import shutil

    from huggingface_hub import hf_hub_url

    _check_token(token)
    probe = _hub_file(_HUB_TOKENIZER_FILES[0], token)  # proves access, and names the commit
    folder = cache_dir() / "llama-3.2-1b-tokenizer" / probe.commit
    if folder not in _LOADED:
        if not all((folder / name).is_file() for name in _HUB_TOKENIZER_FILES):
            shutil.rmtree(folder, ignore_errors=True)  # left incomplete by hand
            partial = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
            partial.mkdir(parents=True, exist_ok=True)
            try:
                headers = _hub_headers(token)
                for name in _HUB_TOKENIZER_FILES:
                    url = hf_hub_url(MODEL_ID, name, revision=probe.commit)
                    (partial / name).write_bytes(_hub_get(_HubFile(url, None, headers)))
                try:
                    os.replace(partial, folder)
                except OSError:  # another process put the same files there first
                    if not (folder / _HUB_TOKENIZER_FILES[-1]).is_file():
                        raise
            finally:
                shutil.rmtree(partial, ignore_errors=True)
        from transformers import AutoTokenizer

        _LOADED[folder] = AutoTokenizer.from_pretrained(str(folder))
    return _LOADED[folder]


# --- embeddings -----------------------------------------------------------------------------


def open_for_row_reads(fs: Any, path: str) -> BinaryIO:
    """Open a remote file for a few small reads, each fetched with one HTTP range request.

    ``block_size=4096, cache_type="none"`` makes every ``read`` of ``n`` bytes one ranged GET
    of exactly those bytes (the fsspec default would fetch about 5 MB per seek).

    Args:
        fs: an fsspec filesystem (``huggingface_hub.HfFileSystem``, fsspec's HTTP one, ...).
        path: the file's path in that filesystem.

    Returns:
        A binary file object supporting ``seek`` and ``read``.

    Raises:
        TypeError: if ``fs`` has no ``open`` method or ``path`` is not a str.
    """
    if not callable(getattr(fs, "open", None)):
        raise TypeError(f"fs must be a filesystem with an open() method, got {type(fs).__name__}")
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, got {path!r} ({type(path).__name__})")
    return fs.open(path, "rb", block_size=4096, cache_type="none")


def read_safetensors_rows(f: BinaryIO, tensor: str, rows: Sequence[int]) -> torch.Tensor:
    """Read selected rows of a 2-D tensor from a safetensors file, touching only those bytes.

    The file starts with an 8-byte little-endian header length, then a JSON header giving
    each tensor's dtype, shape and byte range. Row ``r`` of a row-major ``[N, C]`` tensor sits
    at ``data_start + r * C * itemsize``: one read per row, plus two for the header.

    Args:
        f: a seekable binary file (local, or remote through :func:`open_for_row_reads`).
        tensor: name of a 2-D tensor in the file.
        rows: row indices, each in ``0 .. N-1``; may repeat.

    Returns:
        ``[len(rows), C]`` tensor in the file's dtype, rows in the order asked.

    Raises:
        ValueError: if the header is malformed, ``tensor`` is missing or not 2-D, its dtype
            is not a float type, or a row is out of range.

    Example:
        >>> import io, safetensors.torch
        >>> table = torch.arange(12.0).reshape(4, 3)
        >>> blob = io.BytesIO(safetensors.torch.save({"t": table}))
        >>> read_safetensors_rows(blob, "t", [2, 0])
        tensor([[6., 7., 8.],
                [0., 1., 2.]])
    """
    for method in ("read", "seek"):
        if not callable(getattr(f, method, None)):
            raise TypeError(
                f"f must be a binary file with read() and seek(), got {type(f).__name__}"
            )
    if not isinstance(tensor, str):
        raise TypeError(f"tensor must be a str (a tensor's name), got {tensor!r}")
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
        raise TypeError(f"rows must be a sequence of row indices, got {rows!r}")
    start = f.read(8)
    if len(start) != 8:
        raise ValueError(f"a safetensors file starts with 8 bytes of header length, got {start!r}")
    (header_len,) = struct.unpack("<Q", start)
    if not 0 < header_len <= _MAX_HEADER_BYTES:
        raise ValueError(
            f"safetensors header length must be in 1..{_MAX_HEADER_BYTES}, got {header_len}"
        )
    try:
        header = json.loads(f.read(header_len))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"the safetensors header is not JSON: {err}") from None
    names = sorted(k for k in header if k != "__metadata__") if isinstance(header, dict) else []
    if tensor not in names:
        raise ValueError(
            f"tensor {tensor!r} is not in the file; it has {names[:8]}{'...' if len(names) > 8 else ''}"
        )
    info = header[tensor]
    fields = isinstance(info, dict) and {"dtype", "shape", "data_offsets"} <= info.keys()
    if not fields:
        raise ValueError(
            f"the header's entry for {tensor!r} must give dtype, shape and data_offsets, "
            f"got {info!r}"
        )
    if info["dtype"] not in _DTYPES:
        raise ValueError(
            f"tensor {tensor!r} must have a float dtype {sorted(_DTYPES)}, got {info['dtype']}"
        )
    if len(info["shape"]) != 2:
        raise ValueError(f"tensor {tensor!r} must be 2-D, got shape {info['shape']}")
    num_rows, num_cols = info["shape"]
    for i, r in enumerate(rows):
        if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < num_rows:
            raise ValueError(f"rows must be ints in 0..{num_rows - 1}, got {r!r} at index {i}")
    dtype = _DTYPES[info["dtype"]]
    row_bytes = num_cols * torch.empty((), dtype=dtype).element_size()
    data_start = 8 + header_len + info["data_offsets"][0]
    fetched: dict[int, torch.Tensor] = {}
    for r in sorted(set(rows)):
        f.seek(data_start + r * row_bytes)
        buf = f.read(row_bytes)
        if len(buf) != row_bytes:
            raise ValueError(f"row {r} of {tensor!r} is truncated: {len(buf)} of {row_bytes} bytes")
        fetched[r] = torch.frombuffer(bytearray(buf), dtype=dtype)
    if not fetched:
        return torch.empty(0, num_cols, dtype=dtype)
    return torch.stack([fetched[r] for r in rows])


def hub_embeddings(
    ids: Sequence[int] | torch.Tensor, token: str, *, cache: Path | None = None
) -> torch.Tensor:
    """Real Llama 3.2 1B embedding rows, read from the Hub a row at a time and cached.

    Only rows not already in the cache are fetched, with ranged reads of
    ``model.safetensors`` (one request for its metadata, two for the header, then one of
    4 KB per row); each request has a time limit and none is retried. Cached rows are the raw
    bfloat16 bytes, one file per token id.

    Args:
        ids: token ids, each in ``0 .. V-1``.
        token: a Hugging Face token with access to :data:`MODEL_ID`; never shown or stored.
        cache: cache directory; default :func:`cache_dir`.

    Returns:
        float32 tensor ``[T, E]`` on the CPU.

    Raises:
        TypeError, ValueError: as :func:`check_ids`, or for a token that is not a non-empty
            str or a ``cache`` that is not a path.
        Exception: whatever the Hub client raises when the file cannot be read.
    """
    ids = check_ids(ids)
    _check_token(token)
    cache = _check_cache(cache)
    row_dir = cache / "llama-3.2-1b-embed-rows"
    rows: dict[int, torch.Tensor] = {}
    for token_id in set(ids):
        path = row_dir / f"{token_id}.bf16"
        if path.is_file() and path.stat().st_size == 2 * EMBED_DIM:
            rows[token_id] = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.bfloat16)
    missing = sorted(set(ids) - rows.keys())
    if missing:
        fetched = read_safetensors_rows(
            _HubReader(_hub_file(_HUB_FILE, token)), EMBEDDING_TENSOR, missing
        )
        if fetched.dtype != torch.bfloat16 or fetched.shape[1] != EMBED_DIM:
            raise ValueError(
                f"expected bfloat16 rows of width {EMBED_DIM}, got {fetched.dtype} {tuple(fetched.shape)}"
            )
        row_dir.mkdir(parents=True, exist_ok=True)
        for token_id, row in zip(missing, fetched, strict=True):
            partial = row_dir / f"{token_id}.{os.getpid()}.tmp"
            partial.write_bytes(row.contiguous().view(torch.uint8).numpy().tobytes())
            os.replace(partial, row_dir / f"{token_id}.bf16")
            rows[token_id] = row
    return torch.stack([rows[i] for i in ids]).float()


# --- the choice of source -------------------------------------------------------------------


@dataclass(frozen=True)
class Llama:
    """Llama 3.2 1B's tokenizer and token embedding rows, from the Hugging Face Hub.

    :func:`posenc.data.embeddings.load` builds it when the Hub gives the rows, and a
    :class:`posenc.data.smol.TokenRows` of the same interface (``source``, ``width``,
    ``encode``, ``pieces``, ``embed``, ``describe``) otherwise.
    """

    tokenizer: Any = field(repr=False)
    _token: str = field(repr=False, compare=False)
    source: ClassVar[str] = "hub"
    width: ClassVar[int] = EMBED_DIM
    """``E``, the length of one row."""

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, with the BOS id first.

        Raises:
            TypeError: if ``text`` is not a string.
            ValueError: if ``text`` is empty.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text:
            raise ValueError("text must not be empty, got ''")
        return list(self.tokenizer(text)["input_ids"])

    def pieces(self, ids: Sequence[int] | torch.Tensor) -> list[str]:
        """The text of each token, e.g. ``[" dog"]`` for ``[5679]``."""
        return [self.tokenizer.decode([i]) for i in check_ids(ids)]

    def embed(self, ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """Embedding rows for ``ids``: float32 ``[T, E]`` on the CPU."""
        return hub_embeddings(ids, self._token)

    def describe(self) -> str:
        """One line saying where the tokenizer and the embeddings came from."""
        return f"hub: tokenizer and real embedding rows of {MODEL_ID} (E = {self.width})"
