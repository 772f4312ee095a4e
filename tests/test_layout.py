"""The package's layers, read from its source (posenc/README.md draws them).

- the core (``posenc/*.py``) imports only the core;
- ``posenc.data`` (the Llama 3.2 and SmolLM2 readers) imports the core and itself;
- ``posenc.fast`` imports the core, never the data nor the chapters' helpers
  (``posenc.book``, ``posenc.display``);
- ``posenc.train`` (the training experiment) imports the core and torch alone;
- ``posenc.book``, ``posenc.display`` and ``posenc.bench`` import anything
  below them;
- the import graph has no cycle, counting imports inside functions too;
- importing the core loads no plotting, widget, symbolic or model library.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "posenc"

NOT_CORE = (
    "posenc.data",
    "posenc.fast",
    "posenc.book",
    "posenc.display",
    "posenc.bench",
    "posenc.train",
)
HEAVY = ("matplotlib", "ipywidgets", "IPython", "sympy", "transformers", "triton")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def is_core(name: str) -> bool:
    return name.startswith("posenc") and not any(
        name == n or name.startswith(n + ".") for n in NOT_CORE
    )


def imports(path: Path) -> list[tuple[str, bool]]:
    """``(module, at_top_level)`` for every import in the file, ``posenc`` names resolved to
    the submodule they name where they name one."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                found.append((full if full in MODULES else node.module, id(node) in top))
    return found


def graph() -> dict[str, set[str]]:
    return {
        name: {m for m, _ in imports(path) if m in MODULES and m != name}
        for name, path in MODULES.items()
    }


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph, as a list of nodes, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_package_has_its_layers():
    names = set(MODULES)
    assert {
        "posenc.rope",
        "posenc.data.llama",
        "posenc.bench.forms",
        "posenc.train",
        "posenc.book.rope_views",
    } <= names


def test_no_import_cycle():
    # The package's __init__ re-exports the core; every "from posenc.x import" runs it
    # first, so it is left out of the graph unless a module names it ("import posenc").
    assert find_cycle(graph()) is None


@pytest.mark.parametrize("name", sorted(n for n in MODULES if is_core(n)))
def test_the_core_imports_only_the_core(name):
    for module, at_top in imports(MODULES[name]):
        if module.startswith("posenc"):
            assert is_core(module), f"{name} imports {module}"
        elif module.split(".")[0] in HEAVY:
            assert not at_top, f"{name} imports {module} when it is imported"
            assert module.split(".")[0] not in ("matplotlib", "ipywidgets", "IPython"), (
                f"{name} imports {module}"
            )


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("posenc.train")))
def test_training_imports_only_the_core_and_torch(name):
    for module, _ in imports(MODULES[name]):
        if module.startswith("posenc"):
            assert is_core(module) or module.startswith("posenc.train"), f"{name} imports {module}"
        else:
            assert module.split(".")[0] not in HEAVY, f"{name} imports {module}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("posenc.data")))
def test_the_data_imports_only_the_core_and_itself(name):
    for module, _ in imports(MODULES[name]):
        if module.startswith("posenc"):
            assert is_core(module) or module.startswith("posenc.data"), f"{name} imports {module}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("posenc.fast")))
def test_the_fast_path_imports_no_book_helpers(name):
    for module, _ in imports(MODULES[name]):
        assert not module.startswith(("posenc.book", "posenc.display", "posenc.data")), (
            f"{name} imports {module}"
        )


def test_importing_the_core_loads_no_heavy_library():
    core = sorted(n for n in MODULES if is_core(n))
    code = (
        "import importlib, json, sys\n"
        f"for m in {core!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = json.loads(out.stdout)
    bad = [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(NOT_CORE)]
    assert not bad, f"importing the core loaded {bad}"
    assert "posenc.rope" in loaded  # the probe really imported the core


# the import names of the book extra's packages (numpy stays: torch may import it)
BOOK_PACKAGES = (
    "matplotlib",
    "transformers",
    "tokenizers",
    "tiktoken",
    "llama_models",
    "safetensors",
    "huggingface_hub",
    "sympy",
    "ipywidgets",
    "gguf",
    "accelerate",
)

WITHOUT_THE_BOOK_EXTRA = """
import importlib, runpy, sys
for name in {blocked!r}:
    sys.modules[name] = None  # as if not installed: importing it fails, find_spec finds none
import torch
import posenc as pe
print("core", tuple(pe.apply_rope(torch.randn(3, 8)).shape))
asks = {{
    "posenc.data.embeddings.load": lambda: importlib.import_module("posenc.data.embeddings").load("offline"),
    "posenc.data.llama.offline_tokenizer": lambda: pe.llama.offline_tokenizer(),
    "posenc.data.smol.load": lambda: pe.smol.load("offline"),
    "posenc.data.smol.read_gguf_tensor": lambda: pe.smol.read_gguf_tensor("x.gguf", "t"),
    "posenc.display.plots": lambda: pe.plots,
    "posenc.book": lambda: importlib.import_module("posenc.book.rope_views"),
    "posenc.bench": lambda: runpy.run_module("posenc.bench", run_name="__main__"),
}}
for what, ask in asks.items():
    try:
        ask()
        print(what, "| no error")
    except ModuleNotFoundError as err:
        print(what, "|", err)
"""


def test_without_the_book_extra_each_part_that_needs_it_says_how_to_install_it():
    """``pip install posenc`` brings torch alone: the core runs, and the loaders, the
    figures, the chapters' helpers and ``python -m posenc.bench`` each say what they need and
    the command that installs it, instead of a bare ModuleNotFoundError."""
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_BOOK_EXTRA.format(blocked=BOOK_PACKAGES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    core, *lines = done.stdout.splitlines()
    assert core == "core (3, 8)"
    assert len(lines) == 7, done.stdout
    for line in lines:
        what, message = line.split(" | ")
        assert message.startswith(f"{what} needs "), line
        assert message.endswith("install posenc's book extra with pip install 'posenc[book]'"), line
