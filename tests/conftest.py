"""Fixtures shared by the test files: a local Hugging Face Hub (``tests/local_hub.py``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import local_hub
import pytest

# The fake google.colab package in fake_colab/ goes on a notebook kernel's path in
# test_colab_like.py. This run must never import it (--doctest-modules would, and a conftest
# there would put it on sys.path): a Colab secret store would then answer every test.
# fake_gpu_launch.py is a script that test_triton_launch.py runs in a process of its own: it
# needs Triton to import, and the stand-in driver it installs belongs to that process alone.
collect_ignore = ["fake_colab", "fake_gpu_launch.py"]


@pytest.fixture(scope="session")
def hub_cache(tmp_path_factory) -> Path:
    """A posenc cache for the local-Hub tests, shared so each tokenizer is loaded once."""
    from posenc import llama

    cache = tmp_path_factory.mktemp("local-hub-cache")
    local_hub.copy_offline_tokenizer(cache)
    # a copy of the same file: the tokenizer this process loaded from it serves here too
    for copied in cache.glob("llama3-tokenizer-*.json"):
        llama._LOADED[copied] = llama.offline_tokenizer()
    return cache


@pytest.fixture(scope="session")
def hub_repo(tmp_path_factory) -> local_hub.Repo:
    """The local Hub's repository, written once per session."""
    return local_hub.build_repo(tmp_path_factory.mktemp("local-hub") / "repo")


@pytest.fixture
def hub_server(hub_repo):
    """The local Hub, running; stopped after the test."""
    hub = local_hub.LocalHub(hub_repo).start()
    yield hub
    hub.stop()


@pytest.fixture
def hub_env(hub_server, hub_cache, monkeypatch) -> local_hub.LocalHub:
    """huggingface_hub pointed at the local Hub, ``HF_TOKEN`` set, no embedding rows cached."""
    local_hub.point_huggingface_hub_at(monkeypatch, hub_server.url)
    monkeypatch.setenv("HF_TOKEN", local_hub.TOKEN)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(hub_cache))
    shutil.rmtree(hub_cache / "llama-3.2-1b-embed-rows", ignore_errors=True)
    yield hub_server
    monkeypatch.undo()  # offline again, as the run was
    local_hub.reset_sessions()


@pytest.fixture(autouse=True)
def no_calls_remembered():
    """Each test starts with no remembered call of posenc's fast path (``_PLANS`` in
    ``posenc.fast.triton``): a test that patches where calls go must not meet a call
    remembered before the patch, which a program never changes."""
    from posenc.fast import triton

    triton._PLANS.clear()
    yield
    triton._PLANS.clear()


@pytest.fixture(scope="session", autouse=True)
def gpu_keys_read_in_cpp():
    """On a GPU, remembered calls read their keys in C++ once ``posenc.fast.host`` is loaded,
    which the first remembered call starts: loaded (and built, if need be) before any test,
    so that no test sees its calls' keys change form half-way."""
    import torch

    if torch.cuda.is_available():
        from posenc.fast import host

        host.available()
