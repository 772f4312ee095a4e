"""The repository URL is written once (``_config.yml``) and every copy agrees with it; a fork
changes it with one command."""

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tools import repository, setup_cell

ROOT = Path(__file__).resolve().parents[1]


def test_every_copy_of_the_repository_url_agrees_with_the_setting():
    assert repository.disagreements() == []


def test_the_check_command_says_so():
    done = subprocess.run(
        [sys.executable, "-m", "tools.repository", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (0, "")


@pytest.fixture
def fork(tmp_path):
    """A copy of the files the URL lives in, with two chapters."""
    for name in [repository.CONFIG, repository.PYPROJECT, *repository.CLONE_PAGES]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / "notebooks").mkdir()
    for path in setup_cell.chapters()[:2]:
        shutil.copy2(path, tmp_path / "notebooks" / path.name)
    return tmp_path


def test_a_fork_sets_its_url_once_and_every_copy_follows(fork):
    url = "https://github.com/someone/posenc-fork"
    changed = repository.set_repository(url, "draft", root=fork)
    assert set(changed) == {
        "_config.yml",
        "pyproject.toml",
        "README.md",
        "book/how-to-run.md",
        *(f"notebooks/{p.name}" for p in setup_cell.chapters()[:2]),
    }
    assert repository.setting(fork) == (url, "draft")
    assert repository.disagreements(fork) == []
    first = nbformat.read(next((fork / "notebooks").glob("*.ipynb")), as_version=4).cells[0]
    assert f"git+{url}@draft" in first.source
    assert f"git clone {url} && cd posenc-fork" in (fork / "book/how-to-run.md").read_text()
    assert repository.set_repository(url, "draft", root=fork) == []


def test_a_copy_left_behind_is_reported(fork):
    readme = fork / "README.md"
    readme.write_text(readme.read_text().replace("posenc-book/posenc", "old/place"))
    assert repository.disagreements(fork) == [
        "README.md: clones 'https://github.com/old/place', "
        "not 'https://github.com/posenc-book/posenc'"
    ]
    page = fork / "book/how-to-run.md"
    page.write_text(page.read_text().replace("&& cd posenc", "&& cd elsewhere"))
    assert repository.disagreements(fork)[-1] == (
        "book/how-to-run.md: goes into 'elsewhere' after cloning, not 'posenc'"
    )


@pytest.mark.parametrize(
    ("url", "branch"),
    [
        ("http://github.com/a/b", "main"),
        ("https://gitlab.com/a/b", "main"),
        ("https://github.com/a", "main"),
        ("https://github.com/a/b", ""),
        ("https://github.com/a/b", "two words"),
    ],
)
def test_a_url_colab_cannot_open_is_refused(fork, url, branch):
    with pytest.raises(ValueError, match=r"(url|branch) must"):
        repository.set_repository(url, branch, root=fork)


def test_no_tracked_file_holds_a_merge_conflicts_markers():
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    marked = []
    for name in filter(None, tracked):
        path = ROOT / name
        if not path.is_file():
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue
        marked += [
            f"{name}:{n}"
            for n, line in enumerate(lines, 1)
            if line.startswith(("<<<<<<< ", ">>>>>>> "))
        ]
    assert marked == []
