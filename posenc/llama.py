"""Llama 3.2 1B data for the chapters: the tokenizer and the token embeddings.

The source post tokenizes its sentences with ``meta-llama/Llama-3.2-1B`` and looks up their
rows of the model's embedding table ``[V, E] = [128256, 2048]``. That model is gated: it
needs a Hugging Face token and a network. This module gives the chapters the same data
path with and without them.

- **Tokenizer.** From the Hub with a token; otherwise built offline from the
  ``tokenizer.model`` file that Meta's ``llama-models`` package ships (same BPE ranks,
  same special tokens, so the same ids), converted once and cached.
- **Embeddings.** From the Hub by reading only the rows needed out of
  ``model.safetensors`` (a handful of HTTP range reads, tens of KB instead of 2.47 GB),
  cached row by row; otherwise a deterministic stand-in with the real shape and a
  realistic scale, each row generated from its token id so the table is never built.

:func:`load` picks the source (``"hub"`` or ``"offline"``) and says which one it used in
:attr:`Llama.source`. ``HF_HUB_OFFLINE=1``, or no token, selects the offline path at once,
without touching the network.

The token is read from ``HF_TOKEN`` (or Colab's notebook secrets) and handed straight to the
Hugging Face client; this module never prints, logs, stores or puts it into an error.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import struct
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import torch

from posenc.device import cache_dir

__all__ = [
    "BOS_ID",
    "EMBEDDING_TENSOR",
    "EMBED_DIM",
    "MODEL_ID",
    "STAND_IN_STD",
    "TOKENIZER_SHA256",
    "VOCAB_SIZE",
    "Llama",
    "cache_dir",
    "check_ids",
    "hub_embeddings",
    "hub_tokenizer",
    "load",
    "offline_tokenizer",
    "open_for_row_reads",
    "read_safetensors_rows",
    "stand_in_embeddings",
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

STAND_IN_STD = 0.02
"""Standard deviation of the offline stand-in rows.

The figure is the ``initializer_range`` (0.02) that the model's own ``config.json``
declares for its weights: the scale its embedding table starts training from. It gives the
stand-in entries of the right size (a few hundredths, clustered around 0, as the source
post describes the real ones); it is not a statistic measured on the trained table.
"""

_STAND_IN_LABEL = "a stand-in, N(0, 0.02^2) per token id"
_HUB_FILE = "model.safetensors"
_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64}
_MAX_HEADER_BYTES = 100_000_000
_SOURCES = ("auto", "hub", "offline")
_LOADED: dict[Path, Any] = {}  # converted tokenizers already loaded in this process


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


def check_ids(ids: object) -> list[int]:
    """Validate token ids and return them as a list of Python ints.

    Args:
        ids: a non-empty sequence of ints, or a 1-D integer tensor, each in ``0 .. V-1``.

    Returns:
        The ids as a list.

    Raises:
        TypeError: if ``ids`` is a string, not a sequence, or holds non-integers.
        ValueError: if ``ids`` is empty, not 1-D, or has an id outside ``0 .. 128255``.

    Example:
        >>> check_ids([128000, 791])
        [128000, 791]
        >>> check_ids([128256])
        Traceback (most recent call last):
        ...
        ValueError: ids must be token ids in 0..128255 (V=128256), got 128256 at index 0
    """
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
        if not 0 <= value < VOCAB_SIZE:
            raise ValueError(
                f"ids must be token ids in 0..{VOCAB_SIZE - 1} (V={VOCAB_SIZE}), got {value} at index {i}"
            )
        out.append(value)
    return out


# --- tokenizer ------------------------------------------------------------------------------


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

    Example:
        >>> tok = offline_tokenizer()
        >>> tok("The dog chased another dog")["input_ids"]
        [128000, 791, 5679, 62920, 2500, 5679]
    """
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

    Args:
        token: a Hugging Face token; passed to the client, never shown.

    Returns:
        The tokenizer ``AutoTokenizer`` returns for :data:`MODEL_ID`.

    Raises:
        TypeError, ValueError: if ``token`` is not a non-empty str (the message does not
            show it).
        Exception: whatever the Hub client raises when the tokenizer cannot be read.
    """
    from transformers import AutoTokenizer

    _check_token(token)
    return AutoTokenizer.from_pretrained(MODEL_ID, token=token)


# --- embeddings -----------------------------------------------------------------------------


def stand_in_embeddings(ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
    """Deterministic stand-in rows of the Llama 3.2 1B embedding table.

    Row ``i`` of the imagined ``[128256, 2048]`` table is drawn from ``N(0, 0.02^2)``
    (see :data:`STAND_IN_STD`) by a CPU generator seeded from a hash of ``i``, then rounded
    to bfloat16 like the real weights. Only the requested rows are made, so the 1 GB table
    never exists, and the same id gives the same row in every process and on every machine.
    Equal ids give equal rows, which is all chapter 1's demonstration relies on.

    Args:
        ids: token ids, each in ``0 .. V-1``.

    Returns:
        float32 tensor ``[T, E]`` on the CPU, one row per id.

    Raises:
        TypeError, ValueError: as :func:`check_ids`.

    Example:
        >>> rows = stand_in_embeddings([5679, 5679, 791])
        >>> tuple(rows.shape), bool((rows[0] == rows[1]).all()), bool((rows[0] == rows[2]).all())
        ((3, 2048), True, False)
    """
    ids = check_ids(ids)
    out = torch.empty(len(ids), EMBED_DIM)
    for row, token_id in enumerate(ids):
        seed = int.from_bytes(
            hashlib.sha256(f"posenc-llama-stand-in:{token_id}".encode()).digest()[:8], "little"
        )
        gen = torch.Generator().manual_seed(seed)
        values = torch.randn(EMBED_DIM, generator=gen) * STAND_IN_STD
        out[row] = values.to(torch.bfloat16).float()
    return out


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
    (header_len,) = struct.unpack("<Q", f.read(8))
    if not 0 < header_len <= _MAX_HEADER_BYTES:
        raise ValueError(
            f"safetensors header length must be in 1..{_MAX_HEADER_BYTES}, got {header_len}"
        )
    header = json.loads(f.read(header_len))
    if tensor not in header:
        names = sorted(k for k in header if k != "__metadata__")
        raise ValueError(
            f"tensor {tensor!r} is not in the file; it has {names[:8]}{'...' if len(names) > 8 else ''}"
        )
    info = header[tensor]
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
    ``model.safetensors`` (the header, then 4 KB per row). Cached rows are the raw bfloat16
    bytes, one file per token id.

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
        from huggingface_hub import HfFileSystem

        with open_for_row_reads(HfFileSystem(token=token), f"{MODEL_ID}/{_HUB_FILE}") as f:
            fetched = read_safetensors_rows(f, EMBEDDING_TENSOR, missing)
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
    """Llama 3.2 1B tokenizer and embeddings from one source.

    Build it with :func:`load`. ``source`` is ``"hub"`` (the real model's tokenizer and
    rows) or ``"offline"`` (the tokenizer converted from ``llama-models`` and stand-in rows).
    Token ids are the same either way.
    """

    source: str
    tokenizer: Any = field(repr=False)
    _token: str | None = field(default=None, repr=False, compare=False)

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
        if self.source == "hub":
            return hub_embeddings(ids, self._token)
        if self.source == "offline":
            return stand_in_embeddings(ids)
        raise ValueError(f"source must be 'hub' or 'offline', got {self.source!r}")

    def describe(self) -> str:
        """One line saying where the tokenizer and the embeddings came from."""
        if self.source == "hub":
            return f"hub: tokenizer and real embedding rows of {MODEL_ID}"
        return f"offline: tokenizer from llama-models, embeddings {_STAND_IN_LABEL}"


def load(source: str = "auto") -> Llama:
    """Load the Llama 3.2 tokenizer and embeddings, from the Hub when possible.

    ``"auto"`` uses the Hub when a token is available (``HF_TOKEN`` or Colab's secret) and
    ``HF_HUB_OFFLINE`` is not set, and falls back to the offline path, with a warning, if the
    Hub cannot be read (no network, or no access to the gated model). Without a token, or
    with ``HF_HUB_OFFLINE=1``, it goes offline at once.

    Args:
        source: ``"auto"``, ``"hub"`` (fail instead of falling back) or ``"offline"``.

    Returns:
        A :class:`Llama`; its ``source`` says which path was taken.

    Raises:
        ValueError: if ``source`` is unknown, or ``"hub"`` is asked for with no token or
            with ``HF_HUB_OFFLINE`` set.
        RuntimeError: if ``source="hub"`` and the Hub cannot be read.

    Example:
        >>> llama = load("offline")
        >>> llama.source, llama.encode("The dog chased another dog")[-1]
        ('offline', 5679)
    """
    if source not in _SOURCES:
        raise ValueError(f"source must be one of {_SOURCES}, got {source!r}")
    if source == "offline":
        return Llama("offline", offline_tokenizer())
    token = None if _offline_requested() else _hf_token()
    if token is None:
        if source == "hub":
            raise ValueError(
                "source='hub' needs a Hugging Face token in HF_TOKEN and HF_HUB_OFFLINE unset"
            )
        return Llama("offline", offline_tokenizer())
    try:
        tokenizer = hub_tokenizer(token)
        hub_embeddings([BOS_ID], token)  # proves access to the weights; the row is cached
    except Exception as err:
        reason = _scrub(f"{type(err).__name__}: {err}", token)
        if source == "hub":
            raise RuntimeError(f"cannot read {MODEL_ID} from the Hub: {reason}") from None
        warnings.warn(f"using the offline path; the Hub could not be read ({reason})", stacklevel=2)
        return Llama("offline", offline_tokenizer())
    return Llama("hub", tokenizer, token)
