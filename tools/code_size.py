"""Code lines of the package, per layer, and its largest modules.

A code line is a line that holds a token other than a comment, and that is not part of a
docstring (the string that opens a module, class or function). Other strings count, so C
source kept in a Python string counts as code.

Usage: ``python -m tools.code_size [--top N]``.
"""

from __future__ import annotations

import argparse
import ast
import io
import pathlib
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Each layer of posenc/README.md, as (name, folder relative to posenc/, whole subtree?).
LAYERS = (
    ("core posenc/*.py", "", False),
    ("posenc/display", "display", True),
    ("posenc/data", "data", True),
    ("posenc/fast", "fast", True),
    ("posenc/train", "train", True),
    ("posenc/bench", "bench", True),
    ("posenc/book", "book", True),
)


def _docstring_lines(tree: ast.AST) -> set[int]:
    """Line numbers (1-based) covered by docstrings in ``tree``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def code_lines(source: str) -> int:
    """Count the code lines of Python ``source``.

    Args:
        source: the text of a Python module.

    Returns:
        The number of lines holding a token other than a comment, outside docstrings.

    Example:
        >>> code_lines('\"\"\"Doc.\"\"\"\\n# note\\nx = 1  # one\\n\\ny = \"\"\"a\\nb\"\"\"\\n')
        3
    """
    docs = _docstring_lines(ast.parse(source))
    lines: set[int] = set()
    skip = {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
        tokenize.ENCODING,
    }
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in skip:
            continue
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - docs)


def measure(
    package: pathlib.Path = ROOT / "posenc",
) -> tuple[dict[str, int], list[tuple[int, str]]]:
    """Code lines per layer and per module.

    Args:
        package: the ``posenc`` folder.

    Returns:
        ``(layers, modules)``: code lines per layer name of ``LAYERS``, and ``(lines, path)``
        for every module, largest first.
    """
    layers: dict[str, int] = {}
    modules: list[tuple[int, str]] = []
    for name, folder, subtree in LAYERS:
        base = package / folder
        files = sorted(base.rglob("*.py") if subtree else base.glob("*.py"))
        total = 0
        for path in files:
            n = code_lines(path.read_text(encoding="utf-8"))
            total += n
            modules.append((n, str(path.relative_to(package.parent))))
        layers[name] = total
    modules.sort(reverse=True)
    return layers, modules


def main(argv: list[str] | None = None) -> None:
    """Print code lines per layer and the largest modules."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=12, help="how many modules to list")
    args = parser.parse_args(argv)
    layers, modules = measure()
    print("code lines per layer (docstrings, comments and blank lines not counted)")
    for name, n in layers.items():
        print(f"  {name:<20} {n:>6,}")
    print(f"  {'all':<20} {sum(layers.values()):>6,}")
    print(f"largest modules (top {args.top})")
    for n, path in modules[: args.top]:
        print(f"  {path:<40} {n:>6,}")


if __name__ == "__main__":
    main()
