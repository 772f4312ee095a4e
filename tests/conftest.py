"""Fixtures shared by the test files: a local Hugging Face Hub (``tests/local_hub.py``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import local_hub
import pytest

# The fake google.colab package in fake_colab/ goes on a notebook kernel's path in
# test_colab_like.py. This run must never import it (--doctest-modules would, and a conftest
# there would put it on sys.path): a Colab secret store would then answer every test.
# triton_standin.py is a module that test_triton_builds.py runs in a process of its own: it
# needs Triton to import, and the stand-in driver it installs belongs to that process alone.
collect_ignore = ["fake_colab", "triton_standin.py"]


@pytest.fixture(scope="session")
def hub_cache(tmp_path_factory) -> Path:
    """A posenc cache for the local-Hub tests, shared so each tokenizer is loaded once."""
    from posenc.data import llama

    cache = tmp_path_factory.mktemp("local-hub-cache")
    local_hub.copy_offline_tokenizer(cache)
    local_hub.link_smollm2_rows(cache)
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
