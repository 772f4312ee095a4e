"""Links of the built book: none points nowhere, and the claims appendix reaches the
chapter section of every claim. The browser itself is exercised by tools/browser_check.py
(in CI, after the build); here the link checker it uses is tested on its own."""

import re
import shutil
from pathlib import Path

import pytest

from posenc.book import claim_checks, claims
from tests.test_book import built_book
from tools import browser_check


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    return built_book(tmp_path_factory)


def test_no_internal_link_of_the_site_points_nowhere(html):
    assert browser_check.broken_links(html) == []


def test_claims_page_links_every_claim_to_an_existing_section(html):
    page = (html / "book" / "claims.html").read_text()
    links = re.findall(r'href="(\.\./notebooks/[^"#]+\.html)#([^"]+)"', page)
    assert len(links) == len(claims.CLAIMS)
    for target, anchor in links:
        chapter = (html / "book" / target).resolve()
        assert chapter.is_file(), f"no page {target}"
        assert f'id="{anchor}"' in chapter.read_text(), f"no #{anchor} in {target}"
    linked = sorted(int(Path(target).name[:2]) for target, _ in links)
    assert linked == sorted(c.chapter for c in claims.CLAIMS)


def test_claims_page_shows_every_verdict(html):
    text = re.sub(r"<[^>]+>", "", (html / "book" / "claims.html").read_text())
    for verdict in claim_checks.VERDICTS:
        assert text.count(verdict) >= sum(c.verdict == verdict for c in claims.CLAIMS)


def test_intro_links_every_chapter_of_the_toc(html):
    page = (html / "book" / "intro.html").read_text()
    main = page[page.index("<main") :]
    linked = set(re.findall(r'href="\.\./notebooks/([^"#]+)\.html"', main))
    on_disk = {p.stem for p in (html / "notebooks").glob("[0-9][0-9]_*.html")}
    assert on_disk <= linked


def _site(tmp_path: Path, pages: dict[str, str]) -> Path:
    for name, body in pages.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"<html><body>{body}</body></html>")
    return tmp_path


def test_link_checker_accepts_good_links(tmp_path):
    site = _site(
        tmp_path,
        {
            "index.html": '<a href="a/page.html#sec">x</a> <a href="#top">y</a> <p id="top"></p>'
            '<a href="https://example.org/missing">external</a> <a href="a/">folder</a>'
            '<img src="a/figure.png">',
            "a/page.html": '<section id="sec"></section><a href="../index.html">back</a>',
            "a/index.html": "",
            "a/figure.png": "",
        },
    )
    assert browser_check.broken_links(site) == []


@pytest.mark.parametrize(
    ("link", "reason"),
    [
        ('<a href="missing.html">x</a>', "no file"),
        ('<a href="page.html#nowhere">x</a>', "no id 'nowhere'"),
        ('<a href="#nowhere">x</a>', "no id 'nowhere'"),
        ('<img src="_images/gone.png">', "no file"),
    ],
)
def test_link_checker_reports_broken_links(tmp_path, link, reason):
    site = _site(tmp_path, {"index.html": link, "page.html": '<p id="here"></p>'})
    problems = browser_check.broken_links(site)
    assert len(problems) == 1
    assert problems[0].startswith("index.html: ") and reason in problems[0]


def test_browser_check_visits_every_page_of_the_toc():
    pages = browser_check.toc_pages()
    assert pages[0] == "book/intro"
    assert "book/claims" in pages and "book/api" in pages
    chapters = [p for p in pages if p.startswith("notebooks/")]
    assert chapters == sorted(chapters) and chapters


def test_colab_url_names_the_notebook():
    url = browser_check.colab_url("notebooks/09_rope")
    assert url.startswith("https://colab.research.google.com/github/")
    assert url.endswith("/notebooks/09_rope.ipynb")


CHROMIUM = shutil.which("chromium")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
def test_browser_check_reports_what_a_reader_would_see(tmp_path):
    site = _site(
        tmp_path,
        {
            "notebooks/01_bad.html": "<main><p>$$x^2$$</p><img src='gone.png'>"
            "<img src='https://example.org/remote.png'>"
            "<script>console.error('boom')</script></main>",
            "book/good.html": "<main><p>All fine.</p></main>",
        },
    )
    browser = browser_check.Browser(CHROMIUM)
    try:
        tab = browser_check.Tab(browser)
        bad = browser_check.check_page(tab, site, "notebooks/01_bad", None)
        good = browser_check.check_page(tab, site, "book/good", None)
    finally:
        browser.close()
    problems = "\n".join(bad.problems)
    for expected in (
        "raw TeX visible",
        "images not loaded",
        "console error: boom",
        "network request blocked: https://example.org/remote.png",
        "no typeset math",
        "no Colab link",
    ):
        assert expected in problems
    assert good.problems == []
