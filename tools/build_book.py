"""Build the HTML book from the notebooks' stored outputs, warnings treated as errors.

    python -m tools.build_book [--builddir DIR]

MathJax 3 is copied from the ``django-static-mathjax`` package into ``_vendor/`` first, so
the book typesets its math without any CDN (see ``mathjax_path`` in ``_config.yml``).

A successful build leaves ``_build/html.inputs``: a digest of every file it was built from
(the checkout's files outside ``tests/`` and ``.ci/``) and of the installed packages.
:func:`is_current` compares it with the checkout, so the tests of the HTML reuse a build
made from exactly the same inputs instead of building the same book again.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "_vendor" / "_static" / "mathjax"


def vendor_mathjax() -> Path:
    """Copy MathJax's combined TeX component and its CHTML fonts into ``_vendor/``."""
    import mathjax  # the django-static-mathjax distribution

    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    entry = source / "tex-mml-chtml.js"
    if not entry.is_file():
        raise FileNotFoundError(f"MathJax entry point not found at {entry}")
    if VENDOR.exists():
        shutil.rmtree(VENDOR)
    VENDOR.mkdir(parents=True)
    shutil.copy2(entry, VENDOR / entry.name)
    shutil.copytree(source / "output" / "chtml" / "fonts", VENDOR / "output" / "chtml" / "fonts")
    return VENDOR


STAMP = "html.inputs"  # beside _build/html, not served with it
NOT_INPUTS = ("tests/", ".ci/")  # what the HTML cannot depend on


def inputs_digest() -> str | None:
    """A digest of what the HTML is built from, or None outside a git checkout.

    The files git lists (tracked, and untracked but not ignored) outside ``tests/`` and
    ``.ci/``, names and contents, and the versions of :func:`build_packages`.
    """
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        return None
    digest = hashlib.sha256()
    for name in sorted(filter(None, listed)):
        path = ROOT / name.decode()
        if name.decode().startswith(NOT_INPUTS) or not path.is_file():
            continue
        digest.update(name + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    digest.update("\n".join(build_packages()).encode())
    return digest.hexdigest()


def build_packages() -> list[str]:
    """``name==version`` of every installed distribution the build needs: ``posenc[docs]``
    and what it requires, recursively (the test extra's packages do not change the book)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: dict[str, str] = {}
    todo = [("posenc", frozenset({"docs"}))]
    seen = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found[canonicalize_name(name)] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            wanted = req.marker is None or any(
                req.marker.evaluate({"extra": extra}) for extra in extras | {""}
            )
            if wanted:
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return sorted(f"{name}=={version}" for name, version in found.items())


def is_current(html: Path) -> bool:
    """Whether ``html`` (a ``_build/html``) was built by :func:`build` from the current inputs."""
    stamp = html.parent / STAMP
    digest = inputs_digest()
    return (
        digest is not None
        and (html / "index.html").is_file()
        and stamp.is_file()
        and stamp.read_text().strip() == digest
    )


def build(builddir: Path) -> Path:
    digest = inputs_digest()
    html = builddir / "_build" / "html"
    (html.parent / STAMP).unlink(missing_ok=True)
    # Sphinx keeps the pages of chapters that were renamed or removed; the book must not.
    shutil.rmtree(html, ignore_errors=True)
    vendor_mathjax()
    command = [
        sys.executable,
        "-c",
        "from jupyter_book.cli.main import main; main()",
        "build",
        str(ROOT),
        "--path-output",
        str(builddir),
        "--warningiserror",
        "--keep-going",
    ]
    subprocess.run(command, check=True, cwd=ROOT)
    if digest is not None and digest == inputs_digest():  # nothing changed while it built
        (html.parent / STAMP).write_text(digest + "\n")
    return html / "index.html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--builddir", type=Path, default=ROOT, help="where _build/ goes (default: repo root)"
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    index = build(args.builddir.resolve())
    print(f"Book built in {time.perf_counter() - start:.1f} s: open {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
