"""The built HTML: Colab buttons from the one repository setting, MathJax served locally."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools import setup_cell

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    subprocess.run(
        [sys.executable, "-m", "tools.build_book", "--builddir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return out / "_build" / "html"


@pytest.mark.parametrize("chapter", setup_cell.chapters(), ids=lambda p: p.name)
def test_chapter_page_has_its_colab_link(html, chapter):
    page = (html / "notebooks" / f"{chapter.stem}.html").read_text()
    url, branch = setup_cell.repository()
    owner_repo = url.removeprefix("https://github.com/")
    expected = f"https://colab.research.google.com/github/{owner_repo}/blob/{branch}/notebooks/{chapter.name}"
    assert expected in page


@pytest.mark.parametrize("chapter", setup_cell.chapters(), ids=lambda p: p.name)
def test_math_is_typeset_by_the_local_mathjax(html, chapter):
    page = (html / "notebooks" / f"{chapter.stem}.html").read_text()
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', page)
    mathjax = [s.split("?")[0] for s in scripts if "mathjax" in s.lower()]
    assert mathjax == ["../_static/mathjax/tex-mml-chtml.js"], scripts
    remote = [s for s in scripts if re.match(r"(https?:)?//", s)]
    assert not remote, f"scripts fetched from the network: {remote}"
    assert (html / "_static" / "mathjax" / "tex-mml-chtml.js").is_file()
    fonts = html / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2"
    assert any(fonts.glob("MathJax_Main-Regular.woff")), "MathJax fonts were not copied"
    assert "\\(" in page or "\\[" in page or 'class="math' in page, "no math on the page"


def test_references_page_renders_the_bibliography(html):
    page = (html / "book" / "references.html").read_text()
    assert "Attention is all you need" in page
    assert "You could have designed state of the art positional encoding" in page
