"""The build's record of its inputs: a book is reused only when it was built from the same files
and packages (tests/test_book.py reuses the book the build command made just before)."""

import subprocess

import pytest

from tools import build_book


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A tiny git checkout standing in for the repository, with a built book beside it."""
    for name, text in {
        "notebooks/01_a.ipynb": "{}",
        "_config.yml": "title: t\n",
        "tests/test_a.py": "def test(): pass\n",
        ".ci/run": "true\n",
        ".gitignore": "_build/\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.setattr(build_book, "ROOT", tmp_path)
    # the real list is tested on its own below; reading it takes half a second
    monkeypatch.setattr(build_book, "build_packages", lambda: ["posenc==0.1", "sphinx==8.2.3"])
    html = tmp_path / "_build" / "html"
    html.mkdir(parents=True)
    (html / "index.html").write_text("<html></html>")
    (html.parent / build_book.STAMP).write_text(build_book.inputs_digest() + "\n")
    return tmp_path


def test_a_book_built_from_these_inputs_is_current(checkout):
    assert build_book.is_current(checkout / "_build" / "html")


@pytest.mark.parametrize("changed", ["notebooks/01_a.ipynb", "_config.yml", "book/new.md"])
def test_a_changed_or_new_input_makes_the_book_stale(checkout, changed):
    (checkout / changed).parent.mkdir(parents=True, exist_ok=True)
    (checkout / changed).write_text("changed")
    assert not build_book.is_current(checkout / "_build" / "html")


@pytest.mark.parametrize("changed", ["tests/test_a.py", ".ci/run", "_build/html/extra.html"])
def test_tests_ci_and_the_output_itself_are_not_inputs(checkout, changed):
    (checkout / changed).write_text("changed")
    assert build_book.is_current(checkout / "_build" / "html")


def test_the_build_packages_are_inputs_and_the_test_extra_is_not():
    packages = {line.split("==")[0] for line in build_book.build_packages()}
    assert {"posenc", "jupyter-book", "sphinx", "torch", "matplotlib"} <= packages
    assert not {"pytest", "hypothesis", "playwright"} & packages


def test_another_version_of_a_build_package_makes_the_book_stale(checkout, monkeypatch):
    real = build_book.build_packages
    monkeypatch.setattr(
        build_book, "build_packages", lambda: [p.replace("sphinx==", "sphinx==0.") for p in real()]
    )
    assert not build_book.is_current(checkout / "_build" / "html")


def test_no_stamp_or_no_git_means_no_reuse(checkout, monkeypatch):
    html = checkout / "_build" / "html"
    monkeypatch.setenv("GIT_DIR", str(checkout / "nowhere"))
    assert build_book.inputs_digest() is None
    assert not build_book.is_current(html)
    monkeypatch.delenv("GIT_DIR")
    (html.parent / build_book.STAMP).unlink()
    assert not build_book.is_current(html)
