"""The book's repository URL: written once in ``_config.yml``, copied everywhere else by this tool.

``repository.url`` and ``repository.branch`` in ``_config.yml`` are the setting. The Colab
buttons are built from it when the book is built; these files carry a copy, which this tool
writes and checks:

- ``pyproject.toml``: the ``Homepage`` and ``Repository`` project URLs;
- ``README.md`` and ``book/how-to-run.md``: the clone command;
- every chapter's setup cell (``tools/setup_cell.py``): where Colab installs ``posenc`` from.

    python -m tools.repository --check                     # exit 1 if a copy disagrees
    python -m tools.repository https://github.com/you/posenc [--branch main]   # a fork
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
import yaml

from tools import setup_cell

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "_config.yml"
PYPROJECT = "pyproject.toml"
CLONE_PAGES = ("README.md", "book/how-to-run.md")
_URL = re.compile(r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_PROJECT_URLS = ("Homepage", "Repository")
_CLONE = re.compile(r"git clone ([^\s`'\")]+)(?: && cd ([^\s`'\")]+))?")


def _clone(url: str, cd: bool) -> str:
    """The clone command for ``url``, going into the clone (named as the repository) if
    ``cd``."""
    return f"git clone {url}" + (f" && cd {url.rsplit('/', 1)[1]}" if cd else "")


def setting(root: Path = ROOT) -> tuple[str, str]:
    """The repository URL and branch written in ``_config.yml``."""
    repo = yaml.safe_load((root / CONFIG).read_text())["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def disagreements(root: Path = ROOT) -> list[str]:
    """Every copy of the URL (or branch) that differs from the setting, one line each."""
    url, branch = setting(root)
    found = []
    pyproject = (root / PYPROJECT).read_text()
    for key in _PROJECT_URLS:
        match = re.search(rf'^{key} = "([^"]*)"', pyproject, re.MULTILINE)
        if match is None or match.group(1) != url:
            found.append(f"{PYPROJECT}: {key} is {match and match.group(1)!r}, not {url!r}")
    for page in CLONE_PAGES:
        clones = list(_CLONE.finditer((root / page).read_text()))
        if not clones:
            found.append(f"{page}: no `git clone {url}` command")
        name = url.rsplit("/", 1)[1]
        for c in clones:
            if c.group(1) != url:
                found.append(f"{page}: clones {c.group(1)!r}, not {url!r}")
            elif c.group(2) not in (None, name):
                found.append(f"{page}: goes into {c.group(2)!r} after cloning, not {name!r}")
    expected = setup_cell.template(url, branch)
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        first = nbformat.read(path, as_version=4).cells[0]
        if first.source != expected:
            found.append(f"notebooks/{path.name}: its setup cell is not the current one")
    return found


def set_repository(url: str, branch: str = "main", root: Path = ROOT) -> list[str]:
    """Write ``url`` and ``branch`` into the setting and every copy; return the files changed.

    Raises:
        ValueError: if ``url`` is not ``https://github.com/OWNER/NAME`` (the Colab buttons
            open notebooks from GitHub) or ``branch`` is empty or holds whitespace.
    """
    url = url.rstrip("/")
    if not _URL.match(url):
        raise ValueError(f"url must look like https://github.com/OWNER/NAME, got {url!r}")
    if not branch or re.search(r"\s", branch):
        raise ValueError(f"branch must be a branch name without spaces, got {branch!r}")
    changed = []

    def rewrite(name: str, text: str) -> None:
        path = root / name
        if path.read_text() != text:
            path.write_text(text)
            changed.append(name)

    config = (root / CONFIG).read_text()
    config = re.sub(r"(?m)^(repository:\n(?:  .*\n)*?  url: ).*$", rf"\g<1>{url}", config)
    config = re.sub(r"(?m)^(repository:\n(?:  .*\n)*?  branch: ).*$", rf"\g<1>{branch}", config)
    rewrite(CONFIG, config)
    pyproject = (root / PYPROJECT).read_text()
    for key in _PROJECT_URLS:
        pyproject = re.sub(rf'(?m)^{key} = "[^"]*"', f'{key} = "{url}"', pyproject)
    rewrite(PYPROJECT, pyproject)
    for page in CLONE_PAGES:
        text = (root / page).read_text()
        rewrite(page, _CLONE.sub(lambda c: _clone(url, c.group(2) is not None), text))
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if setup_cell.sync(nb, setup_cell.template(url, branch)):
            nbformat.write(nb, path)
            changed.append(str(path.relative_to(root)))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", help="https://github.com/OWNER/NAME of the fork")
    parser.add_argument("--branch", default="main", help="the branch Colab installs from")
    parser.add_argument("--check", action="store_true", help="report, change nothing")
    args = parser.parse_args(argv)
    if args.check == (args.url is not None):
        parser.error("give a URL to write, or --check")
    if args.check:
        found = disagreements()
        for line in found:
            print(line)
        return 1 if found else 0
    for name in set_repository(args.url, args.branch):
        print(f"updated {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
