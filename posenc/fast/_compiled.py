"""Native code posenc compiles on first use and keeps in :func:`posenc.device.cache_dir`.

:mod:`posenc.fast.cpu_kernel` (a C loop) and :mod:`posenc.fast.host` (C++ against torch)
both build a shared library from a source string with the machine's compiler, trying a list
of flag sets in order, under a name that hashes everything the build depends on, so that a
cache shared between machines or torch versions never loads another's build.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

_TIMEOUT = 300  # seconds a compiler may take before the build gives up


def compiler(variable: str, names: Sequence[str]) -> str | None:
    """The path of the compiler named by the environment's ``variable``, else of the first
    of ``names`` on the PATH, or None."""
    for name in (os.environ.get(variable), *names):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def targets(
    stem: str, source: str, compiler: str, variants: Sequence[Sequence[str]], identity: str,
    suffix: str,
) -> list[tuple[Path, tuple[str, ...]]]:  # fmt: skip
    """Where the build of each flag set in ``variants`` is kept, with those flags: named
    ``stem``, a hash of the source, compiler, flags and ``identity`` (what else the code
    depends on), and ``suffix``."""
    from posenc.device import cache_dir

    found = []
    for flags in variants:
        key = "\n".join((source, compiler, " ".join(flags), identity))
        name = f"{stem}_{hashlib.sha256(key.encode()).hexdigest()[:16]}{suffix}"
        found.append((cache_dir() / name, tuple(flags)))
    return found


def build(
    stem: str, source: str, compiler: str, variants: Sequence[Sequence[str]], identity: str,
    suffix: str, extension: str, what: str,
) -> Path:  # fmt: skip
    """The library built from ``source`` (a file ending ``extension``) with the first flag
    set of ``variants`` the compiler accepts, or one built before; compiled into a folder
    of its own and moved into place at once, so that a concurrent build loads a whole file.
    ``what`` names it in the error. A folder left by a build that cannot still be running (a
    process that exited while compiling) is removed first.

    Raises:
        RuntimeError: when no flag set builds, with the compiler's last line for each.
    """
    found = targets(stem, source, compiler, variants, identity, suffix)
    for target, _ in found:
        if target.exists():
            return target
    errors = []
    for target, flags in found:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(target.parent, stem)
        with tempfile.TemporaryDirectory(prefix=f"{stem}-building-", dir=target.parent) as tmp:
            src = Path(tmp) / f"{stem}{extension}"
            src.write_text(source)
            out = Path(tmp) / target.name
            run = subprocess.run(
                [compiler, str(src), "-o", str(out), *flags],
                capture_output=True,
                text=True,
                timeout=_TIMEOUT,
            )
            if run.returncode == 0:
                os.replace(out, target)
                return target
            errors.append(run.stderr.strip().splitlines()[-1:] or [f"exit {run.returncode}"])
    raise RuntimeError(f"{compiler} could not build {what}: {errors}")


def _remove_abandoned(folder: Path, stem: str) -> None:
    """Remove the build folders of ``stem`` in ``folder`` older than any build can run."""
    oldest = time.time() - 2 * _TIMEOUT
    for left in folder.glob(f"{stem}-building-*"):
        try:
            if left.is_dir() and left.stat().st_mtime < oldest:
                shutil.rmtree(left, ignore_errors=True)
        except OSError:  # removed meanwhile by another process's sweep
            pass
