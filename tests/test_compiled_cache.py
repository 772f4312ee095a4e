"""The C loop's build cache (posenc.fast._compiled), broken in the ways a cache breaks.

Each case runs in a process of its own, as a program meets the cache: a library that kills
the process that maps it (SIGBUS) is then a failed test, not a dead worker.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posenc.fast import _compiled

ROOT = Path(__file__).resolve().parents[1]

KERNEL = r"""
import json, sys, time
import torch
from posenc import rope
from posenc.fast import cpu_kernel, dispatch
start = time.perf_counter()
available = cpu_kernel.available()
took = time.perf_counter() - start
x = torch.randn(4, 8, 300, 64, generator=torch.Generator().manual_seed(0))  # the C loop's size
same = torch.equal(dispatch.apply_rope(x, layout="half"), rope.apply_rope(x, layout="half"))
print(json.dumps({"available": available, "status": cpu_kernel.status(), "took": took,
                  "same": same}))
"""

STAND_IN = r"""
#include <Python.h>
static PyObject *init(PyObject *, PyObject *) { Py_RETURN_NONE; }
static PyMethodDef methods[] = {{"init", (PyCFunction)init, METH_O, nullptr},
                                {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_posenc_host", nullptr, -1, methods};
PyMODINIT_FUNC PyInit__posenc_host(void) { return PyModule_Create(&module); }
"""

PIECES = {
    "kernel": ("CC", ("cc", "gcc", "clang"), "rope_kernel_*.so", KERNEL),
}


def _compiler(piece: str) -> str:
    _, names, _, _ = PIECES[piece]
    found = next((shutil.which(n) for n in names if shutil.which(n)), None)
    if found is None:
        pytest.skip(f"no compiler for the {piece} ({', '.join(names)})")
    return found


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "CXX")}
    env.update(POSENC_CACHE_DIR=str(cache), OMP_NUM_THREADS="1", **extra)
    return env


def _start(piece: str, cache: Path, **extra: str) -> subprocess.Popen:
    script = PIECES[piece][3]
    return subprocess.Popen(
        [sys.executable, "-c", script, STAND_IN],
        cwd=ROOT,
        env=_env(cache, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(run: subprocess.Popen, timeout: float = 240) -> dict:
    try:
        out, err = run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        run.kill()
        run.communicate()
        pytest.fail(f"the process did not finish within {timeout} s")
    assert run.returncode == 0, f"exit status {run.returncode} (135: SIGBUS)\n{err[-3000:]}"
    return json.loads(out.splitlines()[-1])


def _run(piece: str, cache: Path, **extra: str) -> dict:
    return _finish(_start(piece, cache, **extra))


def _library(piece: str, cache: Path) -> Path:
    (found,) = cache.glob(PIECES[piece][2])
    return found


def _whole(library: Path) -> bool:
    """The library matches the record its build wrote (read here independently)."""
    record = json.loads(Path(f"{library}.sha256").read_text())
    data = library.read_bytes()
    return record == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _built_and_used(result: dict) -> None:
    assert result["available"] and result["status"].startswith("built with"), result
    assert result["same"], result


def _truncated(library: Path) -> None:
    data = library.read_bytes()
    library.write_bytes(data[: len(data) // 2])


def _emptied(library: Path) -> None:
    library.write_bytes(b"")


def _garbage(library: Path) -> None:
    library.write_bytes(os.urandom(library.stat().st_size))


def _recorded_without_the_symbol(library: Path) -> None:
    """Another shared library, loadable, without the piece's functions, recorded as whole:
    verification passes it, and loading it finds its functions missing."""
    src = library.parent / "other.c"
    src.write_text("int other(void) { return 1; }\n")
    subprocess.run(["cc", str(src), "-shared", "-fPIC", "-o", str(library)], check=True)
    data = library.read_bytes()
    record = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    Path(f"{library}.sha256").write_text(json.dumps(record))


def _unrecorded_without_the_symbol(library: Path) -> None:
    _recorded_without_the_symbol(library)
    Path(f"{library}.sha256").unlink()


DAMAGE = {
    "truncated": _truncated,
    "emptied": _emptied,
    "garbage": _garbage,
    "no symbol, recorded": _recorded_without_the_symbol,
    "no symbol, unrecorded": _unrecorded_without_the_symbol,
}


CASES = [("kernel", d) for d in DAMAGE]


@pytest.mark.parametrize(("piece", "damage"), CASES)
def test_a_damaged_build_is_replaced_without_harm(piece, damage, tmp_path):
    """A build cut short (which SIGBUS-killed the process that mapped it), emptied, made of
    garbage, or another library at its name (whose missing symbol broke every call): the
    next process neither dies nor fails, builds the piece again, uses it, and leaves a whole
    library with its record."""
    _compiler(piece)
    _built_and_used(_run(piece, tmp_path))
    library = _library(piece, tmp_path)
    assert _whole(library)
    DAMAGE[damage](library)
    _built_and_used(_run(piece, tmp_path))
    assert _library(piece, tmp_path) == library and _whole(library)


def _program(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("piece", list(PIECES))
def test_a_compiler_that_does_not_answer_is_given_up_on_within_seconds_and_remembered(
    piece, tmp_path
):
    """A compiler that hangs cost the first call of every process 300 s. It is now given up
    on after the probe's limit (seconds), the fast path still gives the reference's result,
    and the next process is told at once, from the cache."""
    variable = PIECES[piece][0]
    hang = _program(tmp_path, "hanging-cc", "exec sleep 120\n")
    cache = tmp_path / "cache"
    first = _run(piece, cache, **{variable: str(hang)})
    assert not first["available"] and first["same"], first
    assert f"did not answer within {_compiled._PROBE_S:g} s" in first["status"], first
    assert first["took"] < _compiled._PROBE_S + 5, first
    second = _run(piece, cache, **{variable: str(hang)})
    assert not second["available"] and "remembered" in second["status"], second
    assert second["took"] < 2, second


@pytest.mark.parametrize("piece", list(PIECES))
def test_processes_that_start_together_build_once(piece, tmp_path):
    """Two processes on an empty cache: one compiles (a lock), the other waits for it and
    loads its build; both use it. The compiler logs each build it is asked for and takes
    three seconds over it, so that without a lock the two builds would overlap."""
    real = _compiler(piece)
    log = tmp_path / "builds.log"
    slow = _program(
        tmp_path,
        "logging-cc",
        f'case "$1" in --version) exec {real} --version;; esac\n'
        f'echo build >> {log}\nsleep 3\nexec {real} "$@"\n',
    )
    cache = tmp_path / "cache"
    runs = [_start(piece, cache, **{PIECES[piece][0]: str(slow)}) for _ in range(2)]
    for result in [_finish(run) for run in runs]:
        _built_and_used(result)
    assert log.read_text().splitlines() == ["build"]


@pytest.mark.parametrize("piece", list(PIECES))
def test_a_compiler_variable_that_names_no_program_is_refused_by_name(piece, tmp_path):
    """``CC=nonesuch`` was ignored (another compiler built the piece); it now stops the build
    with a status that names the variable and the value, and the fast path falls back."""
    _compiler(piece)
    variable = PIECES[piece][0]
    result = _run(piece, tmp_path, **{variable: "nonesuch-compiler"})
    assert not result["available"] and result["same"], result
    assert result["status"].startswith(
        f"RuntimeError: ${variable} names 'nonesuch-compiler', which is not a program on the PATH"
    ), result
    assert not list(tmp_path.glob(PIECES[piece][2]))


def test_a_remembered_failure_is_forgotten_after_its_time(tmp_path, monkeypatch):
    """A failure is remembered for _REMEMBER_S seconds, then the build is tried again."""
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    key = tmp_path / "piece_0123.so"
    _compiled._remember(key, "the compiler did not answer")
    with pytest.raises(RuntimeError, match=r"the compiler did not answer \(remembered 0 s ago"):
        _compiled._recall(key)
    old = json.loads(Path(f"{key}.failed").read_text())
    old["time"] = time.time() - _compiled._REMEMBER_S - 1
    Path(f"{key}.failed").write_text(json.dumps(old))
    _compiled._recall(key)  # forgotten: nothing raised
