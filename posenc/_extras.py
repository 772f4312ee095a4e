"""Packages beyond torch, and the error that says how to install them.

``pip install posenc`` brings torch alone: the core's mathematics needs nothing more. The
Llama 3.2 and SmolLM2 loaders (:mod:`posenc.data.llama`, :mod:`posenc.data.smol`), the figures and
the chapters' helpers (:mod:`posenc.display.plots`, :mod:`posenc.book`) and the benchmark
(:mod:`posenc.bench`) need the ``book`` extra. Where one of its packages is missing they say
so, naming what asked, what is missing and the command, instead of a bare
``ModuleNotFoundError`` from deep inside.
"""

from __future__ import annotations

import importlib.util

INSTALL = "pip install 'posenc[book]'"
"""The command that installs what :func:`require` asks for."""


def require(what: str, *modules: str) -> None:
    """Check that the top-level ``modules`` can be imported (without importing them).

    Args:
        what: who needs them, named in the error (``"posenc.data.llama.load"``).
        modules: top-level module names (``"transformers"``).

    Raises:
        ModuleNotFoundError: naming ``what``, each missing module and :data:`INSTALL`.

    Example:
        >>> require("the example", "torch")
        >>> require("the example", "no_such_module_anywhere")
        Traceback (most recent call last):
        ...
        ModuleNotFoundError: the example needs no_such_module_anywhere, which is not installed: install posenc's book extra with pip install 'posenc[book]'
    """
    missing = [m for m in modules if _absent(m)]
    if missing:
        raise missing_error(what, missing)


def missing_error(what: str, missing: list[str]) -> ModuleNotFoundError:
    """The error :func:`require` raises for ``missing`` modules (for an import that failed)."""
    verb = "is" if len(missing) == 1 else "are"
    return ModuleNotFoundError(
        f"{what} needs {', '.join(missing)}, which {verb} not installed: install posenc's "
        f"book extra with {INSTALL}",
        name=missing[0],
    )


def _absent(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a parent that fails to import, or a broken entry
        return True
