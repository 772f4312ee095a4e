"""Build the HTML book from the notebooks' stored outputs, warnings treated as errors.

    python -m tools.build_book [--builddir DIR]

MathJax 3 is copied from the ``django-static-mathjax`` package into ``_vendor/`` first, so
the book typesets its math without any CDN (see ``mathjax_path`` in ``_config.yml``).
"""

from __future__ import annotations

import argparse
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


def build(builddir: Path) -> Path:
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
    return builddir / "_build" / "html" / "index.html"


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
