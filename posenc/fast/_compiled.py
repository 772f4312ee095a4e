"""Native code posenc compiles on first use and keeps in :func:`posenc.device.cache_dir`.

:mod:`posenc.fast.cpu_kernel` (a C loop) builds a shared library from a source string with
the machine's compiler, trying a list of flag sets in order, under a name that hashes
everything the build depends on, so that a cache shared between machines or torch versions
never loads another's build. What is here keeps that cache from ever costing more than a
fallback:

- **verified before it is loaded**: a build is recorded, once complete, with its size and
  sha256 (``<library>.sha256``); a library that does not match its record (cut short,
  emptied, or put there by something else) is built again rather than mapped, which could
  kill the process. A build that still fails to load (a symbol missing) is discarded and
  built once more.
- **built once**: builds of one library take a lock file (``<library>.lock``), so processes
  that start together compile it once and the others load that build.
- **a compiler that does not answer is given up on**: it is asked for its version first,
  with a limit of :data:`_PROBE_S` seconds, and each build has a limit of its own; a
  compiler that runs past either is remembered in the cache (``<library>.failed``) for
  :data:`_REMEMBER_S` seconds, so that no other process waits on it in that time.
- **the compiler asked for**: ``$CC`` or ``$CXX`` naming a program that is not on the PATH
  is refused with that reason (the fast path then runs without the compiled piece, and its
  ``status()`` says why), rather than replaced by another compiler.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

_TIMEOUT = 300  # seconds a build may take by default before it is given up on
_PROBE_S = 10.0  # seconds the compiler has to answer ``--version``
_REMEMBER_S = 3600.0  # how long a compiler that ran past its limit is remembered as failed


def compiler(variable: str, names: Sequence[str]) -> str | None:
    """The path of the compiler named by the environment's ``variable``, else of the first
    of ``names`` on the PATH, or None when neither names one.

    Raises:
        RuntimeError: when ``variable`` is set and names no program on the PATH (it asks for
            that compiler: none other is taken in its place).
    """
    named = os.environ.get(variable, "").strip()
    if named:
        found = shutil.which(named)
        if found is None:
            raise RuntimeError(
                f"${variable} names {named!r}, which is not a program on the PATH: set it to "
                f"a compiler, or unset it to use the first of {', '.join(names)}"
            )
        return found
    for name in names:
        if shutil.which(name):
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


def built(found: Sequence[tuple[Path, tuple[str, ...]]]) -> Path | None:
    """The first of ``found`` (from :func:`targets`) that is built and matches its record."""
    return next((target for target, _ in found if _verified(target)), None)


def load(
    opener: Callable[[Path], object], stem: str, source: str, compiler: str,
    variants: Sequence[Sequence[str]], identity: str, suffix: str, extension: str, what: str,
    *, limit: float = _TIMEOUT,
) -> object:  # fmt: skip
    """``opener(path)`` of the library :func:`build` gives; if it fails to load (OSError,
    ImportError, or AttributeError for a symbol ``opener`` looks up), the build is discarded
    and made once more, and a second failure is remembered as :func:`build`'s time limits
    are.

    Raises:
        RuntimeError: as :func:`build`, or when the library built again does not load either.
    """
    found = targets(stem, source, compiler, variants, identity, suffix)
    path = build(stem, source, compiler, variants, identity, suffix, extension, what, limit=limit)
    try:
        return opener(path)
    except (OSError, ImportError, AttributeError):
        _discard(path, found[0][0], _PROBE_S + len(found) * limit + 5)
    path = build(stem, source, compiler, variants, identity, suffix, extension, what, limit=limit)
    # the new build under a name of its own: opened by the old name, the library this
    # process mapped before would be handed back
    fresh = Path(tempfile.mkdtemp(prefix=f"{stem}-loading-", dir=path.parent)) / path.name
    try:
        try:
            os.link(path, fresh)
        except OSError:
            shutil.copyfile(path, fresh)
        return opener(fresh)
    except (OSError, ImportError, AttributeError) as err:
        reason = f"{what} built with {compiler} does not load: {type(err).__name__}: {err}"
        _remember(found[0][0], reason)
        raise RuntimeError(reason) from None
    finally:
        shutil.rmtree(fresh.parent, ignore_errors=True)  # what is mapped stays mapped


def build(
    stem: str, source: str, compiler: str, variants: Sequence[Sequence[str]], identity: str,
    suffix: str, extension: str, what: str, *, limit: float = _TIMEOUT,
) -> Path:  # fmt: skip
    """The library built from ``source`` (a file ending ``extension``) with the first flag
    set of ``variants`` the compiler accepts, or one built before that matches its record.

    It is compiled into a folder of its own under a lock, moved into place at once and then
    recorded, so a concurrent process loads a whole file or waits for it. ``what`` names it in
    the error. A folder left by a build that cannot still be running (a process that exited
    while compiling) is removed first.

    Raises:
        RuntimeError: when no flag set builds, with the compiler's last line for each; when
            the compiler does not answer within :data:`_PROBE_S` seconds or a build runs past
            ``limit`` seconds (both remembered for :data:`_REMEMBER_S` seconds, so that the
            processes that ask meanwhile get this error at once); or when another process
            holds the build's lock for longer than its builds may take.
    """
    found = targets(stem, source, compiler, variants, identity, suffix)
    done = built(found)
    if done is not None:
        return done
    key = found[0][0]  # the lock and a remembered failure go by the first flag set's name
    _recall(key)
    key.parent.mkdir(parents=True, exist_ok=True)
    with _locked(key, _PROBE_S + len(found) * limit + 5, what):
        done = built(found)  # by the process that held the lock
        if done is not None:
            return done
        _recall(key)
        _remove_abandoned(key.parent, stem)
        _probe(compiler, key)
        errors = []
        for target, flags in found:
            with tempfile.TemporaryDirectory(prefix=f"{stem}-building-", dir=key.parent) as tmp:
                src = Path(tmp) / f"{stem}{extension}"
                src.write_text(source)
                out = Path(tmp) / target.name
                code, last = _run([compiler, str(src), "-o", str(out), *flags], limit)
                if code is None:
                    reason = f"{compiler} did not build {what} within {limit:g} s"
                    _remember(key, reason)
                    raise RuntimeError(reason)
                if code == 0:
                    _install(out, target)
                    return target
                errors.append([last] if last else [f"exit {code}"])
    raise RuntimeError(f"{compiler} could not build {what}: {errors}")


def _record(target: Path) -> Path:
    return Path(f"{target}.sha256")


def _verified(target: Path) -> bool:
    """Whether ``target`` is whole: its size and sha256 those its build recorded."""
    try:
        want = json.loads(_record(target).read_text())
        data = target.read_bytes()
    except (OSError, ValueError):
        return False
    return (
        isinstance(want, dict)
        and want.get("size") == len(data)
        and want.get("sha256") == hashlib.sha256(data).hexdigest()
    )


def _install(out: Path, target: Path) -> None:
    """Move a finished build into place, then record it (a reader verifies the pair)."""
    data = out.read_bytes()
    record = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    partial = Path(f"{out}.sha256")
    partial.write_text(json.dumps(record))
    _record(target).unlink(missing_ok=True)  # no old record stands for the new file
    os.replace(out, target)
    os.replace(partial, _record(target))


def _discard(target: Path, key: Path, wait: float) -> None:
    """Remove a build that does not load, under its lock (a process mapping it keeps it)."""
    with _locked(key, wait, "the build"):
        _record(target).unlink(missing_ok=True)
        target.unlink(missing_ok=True)


def _run(command: list[str], limit: float) -> tuple[int | None, str]:
    """Run ``command`` with a time limit: its exit status (None when it ran past the limit,
    and it and every process it started were killed) and the last line of its stderr."""
    with subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: a compiler's children die with it
    ) as run:
        try:
            _, err = run.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
            return None, ""
    lines = err.strip().splitlines()
    return run.returncode, lines[-1] if lines else ""


def _probe(compiler: str, key: Path) -> None:
    """Ask the compiler for its version; remember and raise when it does not answer."""
    try:
        code, _ = _run([compiler, "--version"], _PROBE_S)
    except OSError as err:
        raise RuntimeError(f"{compiler} cannot be run: {err}") from None
    if code is None:
        reason = f"{compiler} did not answer within {_PROBE_S:g} s (asked for its version)"
        _remember(key, reason)
        raise RuntimeError(reason)


def _failed(key: Path) -> Path:
    return Path(f"{key}.failed")


def _remember(key: Path, reason: str) -> None:
    with contextlib.suppress(OSError):
        partial = Path(f"{_failed(key)}.{os.getpid()}")
        partial.write_text(json.dumps({"time": time.time(), "reason": reason}))
        os.replace(partial, _failed(key))


def _recall(key: Path) -> None:
    """Raise the failure remembered for ``key`` while it is recent."""
    try:
        failed = json.loads(_failed(key).read_text())
        age = time.time() - float(failed["time"])
        reason = str(failed["reason"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if 0 <= age < _REMEMBER_S:
        raise RuntimeError(
            f"{reason} (remembered {age:.0f} s ago; tried again after {_REMEMBER_S:g} s, or "
            f"once {_failed(key)} is removed)"
        )


@contextlib.contextmanager
def _locked(key: Path, wait: float, what: str):
    """Hold ``<key>.lock`` (every process and thread in turn), waiting at most ``wait`` s."""
    try:
        import fcntl
    except ImportError:  # no advisory locks here (Windows): builds may then run twice
        yield
        return
    with open(f"{key}.lock", "a") as handle:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"another process has been building {what} for over {wait:.0f} s"
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_abandoned(folder: Path, stem: str) -> None:
    """Remove the build folders of ``stem`` in ``folder`` older than any build can run."""
    oldest = time.time() - 2 * _TIMEOUT
    for left in folder.glob(f"{stem}-building-*"):
        try:
            if left.is_dir() and left.stat().st_mtime < oldest:
                shutil.rmtree(left, ignore_errors=True)
        except OSError:  # removed meanwhile by another process's sweep
            pass
