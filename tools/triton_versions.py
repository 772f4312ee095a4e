"""posenc's Triton kernel under each Triton release ``pyproject.toml`` accepts, on a CPU.

    python -m tools.triton_versions                   # the newest patch of every release from 3.0
    python -m tools.triton_versions 3.2.0 3.6.0 --kernel

Each Triton is installed from PyPI into a folder of its own (``--into``, by default
``~/.cache/posenc/triton``; about 0.5 to 0.9 GB each), put first on the path, and given the
tests that need no GPU:

- ``tests/test_triton_builds.py``: every build compiled behind a stand-in driver for an H100
  (sm_90, down to a cubin by that Triton's own ptxas) and for an AMD MI300 (from Triton 3.5,
  or with ROCm's linker installed), one launch per call, the float64 constants of the
  kernel's cosines and sines found bit for bit in the Triton IR;
- with ``--kernel``, also the kernel's arithmetic under that Triton's interpreter
  (``tests/test_triton_kernel.py``; a few minutes),
  from Triton 3.2 on: with torch 2.13 and NumPy 2.4, the interpreters of 3.0 and 3.1 leave
  a kernel's output as it was (even a kernel of one ``tl.store``), so the tests would only
  find that.

It prints one line per version and exits non-zero if any failed. What a GPU computes is
checked on a GPU only (``pytest -k on_a_gpu``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST = (3, 0)  # the floor pyproject.toml declares
LAUNCH_TESTS = ("tests/test_triton_builds.py",)
KERNEL_TESTS = ("tests/test_triton_kernel.py",)
INTERPRETED_FROM = (3, 2)  # the first release whose interpreter writes its output here


def _release(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def newest_patches(versions: Iterable[str], first: tuple[int, int] = FIRST) -> list[str]:
    """The newest patch of each ``major.minor`` release from ``first`` on, oldest first; pre-
    releases and other spellings left out.

    Example:
        >>> newest_patches(["2.3.1", "3.0.0", "3.5.0", "3.5.1", "3.6.0rc1", "3.6.0"])
        ['3.0.0', '3.5.1', '3.6.0']
    """
    newest: dict[tuple[int, int], tuple[int, int, int]] = {}
    for version in versions:
        match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version.strip())
        if match is None:
            continue
        parts = tuple(int(p) for p in match.groups())
        release = parts[:2]
        if release >= first and parts > newest.get(release, (-1, -1, -1)):
            newest[release] = parts
    return [".".join(map(str, newest[r])) for r in sorted(newest)]


def released() -> list[str]:
    """Triton's versions on the package index, as ``pip index versions`` lists them."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "triton"],
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(
        (ln for ln in listed.stdout.splitlines() if ln.startswith("Available versions:")), None
    )
    if line is None:
        raise RuntimeError(f"pip index versions triton listed no versions:\n{listed.stdout}")
    return [v.strip() for v in line.split(":", 1)[1].split(",")]


def install(version: str, into: Path) -> Path:
    """Triton ``version`` in a folder of its own under ``into`` (installed once, kept)."""
    folder = into / f"triton-{version}"
    if not (folder / "triton" / "__init__.py").is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
             str(folder), f"triton=={version}"],
            check=True,
        )  # fmt: skip
    return folder


def check(version: str, folder: Path, tests: Sequence[str]) -> tuple[bool, str]:
    """Run ``tests`` with the Triton in ``folder`` first on the path: whether they passed,
    and pytest's last line."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), str(ROOT)]))
    env["TRITON_CACHE_DIR"] = str(folder.parent / f"cache-{version}")
    found = subprocess.run(
        [sys.executable, "-c", "import triton; print(triton.__version__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if found.stdout.strip() != version:
        return False, f"Triton {found.stdout.strip() or '?'} was imported, not {version}"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    lines = done.stdout.strip().splitlines()
    return done.returncode == 0, lines[-1] if lines else done.stderr.strip()[-300:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", help="Triton versions (default: every release)")
    parser.add_argument("--kernel", action="store_true", help="also the interpreter's tests")
    parser.add_argument(
        "--into", type=Path, default=Path.home() / ".cache" / "posenc" / "triton",
        help="where each version is installed",
    )  # fmt: skip
    args = parser.parse_args(argv)
    versions = args.versions or newest_patches(released())
    results = {}
    for version in versions:
        interpreted = args.kernel and _release(version) >= INTERPRETED_FROM
        tests = LAUNCH_TESTS + (KERNEL_TESTS if interpreted else ())
        ok, last = check(version, install(version, args.into), tests)
        results[version] = ok
        skipped = " (no interpreter tests before 3.2)" if args.kernel and not interpreted else ""
        print(f"Triton {version:8s} {'ok    ' if ok else 'FAILED'} {last}{skipped}", flush=True)
    print(json.dumps(results))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
