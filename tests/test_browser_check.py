"""tools/browser_check.py on its own: the link checker, the pages it visits, and, in
Debian's Chromium through Playwright, what it reports on tiny hand-made pages (a wide
element, a line of text past the column, an uncaptioned image, an image shown too small,
too much visible code) and what it leaves alone (wide content in a scroll box, folded
code). The built book itself is checked by ``python -m tools.browser_check`` in CI."""

import json
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from tools import browser_check

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")


def _site(tmp_path: Path, pages: dict[str, str]) -> Path:
    for name, body in pages.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"<html><body>{body}</body></html>")
    return tmp_path


def _png(path: Path, width: int, height: int) -> None:
    """A grey PNG, written without any imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + b"\x80\x80\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


# ----------------------------------------------------------------------------------------
# Links, without a browser
# ----------------------------------------------------------------------------------------


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


def test_chapter_table_marks_chapters_over_the_code_target():
    def report(page, shares):
        widths = {
            w: {
                "code": {"share": s, "visible": 3, "cells": 5, "longest": 12},
                "images": [],
                "scrolling": [],
            }
            for w, s in zip(browser_check.WIDTHS, shares, strict=True)
        }
        return browser_check.PageReport(page, page.startswith("notebooks/"), widths=widths)

    reports = [report("notebooks/01_a", (0.40, 0.30)), report("notebooks/02_b", (0.10, 0.08))]
    table = browser_check.chapter_table(reports).splitlines()
    assert "code 1400" in table[1] and "code 420" in table[1]
    assert table[2].startswith("01_a") and "40%*" in table[2] and "30%*" in table[2]
    assert table[3].startswith("02_b") and "*" not in table[3]
    assert browser_check.code_problems(reports[0]) and not browser_check.code_problems(reports[1])


# ----------------------------------------------------------------------------------------
# In the browser
# ----------------------------------------------------------------------------------------

# A main column at most 600 px wide, as the book's is at most 784 px.
COLUMN = "<style>body {margin: 0} article {max-width: 600px; margin: 0}</style>"


def _good_chapter(page: str) -> str:
    """A chapter with nothing wrong: typeset math (a stand-in), a captioned figure shown at
    its natural width, a visible Colab link, one short visible code cell and a long folded
    one, and a wide printout and a wide equation (a scroll box in a scroll box) that scroll."""
    return (
        f"{COLUMN}<main><article class='bd-article'>"
        f"<h1>Good</h1><p><a href='{browser_check.colab_url(page)}'>Open in Colab</a></p>"
        "<p>Prose. <mjx-container>x</mjx-container></p>" + "<p>More prose, a line.</p>" * 30 + ""
        "<figure><img src='../fig.png' width='200'><figcaption>Figure 1. A figure.</figcaption>"
        "</figure>"
        "<div class='cell'><div class='cell_input'><pre>x = 1</pre></div></div>"
        "<div class='cell'><details><summary>Show code</summary><div class='cell_input'><pre>"
        + "check()\n"
        * 60
        + "</pre></div></details></div>"
        "<div style='overflow-x: auto'><pre style='width: 1500px'>a long printed line</pre></div>"
        "<div style='overflow-x: auto'><div style='overflow-x: auto'>"
        "<span style='display: inline-block; width: 1200px'>a wide equation</span></div></div>"
        "</article></main>"
    )


def _bad_chapter() -> str:
    return (
        f"{COLUMN}<main><article class='bd-article'>"
        "<p>$$x^2$$</p><img src='gone.png'><img src='https://example.org/remote.png'>"
        "<div id='wide' style='width: 900px'>a table too wide</div>"
        "<p style='white-space: nowrap'>" + "unbreakable " * 80 + "</p>"
        "<img src='../fig.png' width='200'>"
        "<figure><img src='../fig.png' width='500' style='width: 100px'>"
        "<figcaption>Figure 2. Shrunk.</figcaption></figure>"
        "<div class='cell'><div class='cell_input'><pre>" + "print(True)\n" * 40 + "</pre></div>"
        "</div><script>console.error('boom')</script>"
        "<script>throw new Error('kaboom')</script></article></main>"
    )


@needs_chromium
def test_browser_check_reports_what_a_reader_would_see(tmp_path):
    _png(tmp_path / "fig.png", 400, 200)
    good_page = "notebooks/02_good"
    site = _site(
        tmp_path,
        {
            "notebooks/01_bad.html": _bad_chapter(),
            f"{good_page}.html": _good_chapter(good_page),
            "book/fine.html": f"{COLUMN}<main><article class='bd-article'><p>All fine.</p>"
            "<div style='overflow-x: auto'><pre style='width: 2000px'>wide, scrolls</pre></div>"
            "</article></main>",
            "book/inline.html": f"{COLUMN}<main><article class='bd-article'><p>Inline: "
            "<mjx-container style='display: inline-block; max-width: 40px; overflow-x: auto'>"
            "<span style='display: inline-block; width: 60px'>x</span></mjx-container></p>"
            "</article></main>",
        },
    )
    with browser_check.open_browser(CHROMIUM) as tabs:
        assert [tab.width for tab in tabs] == list(browser_check.WIDTHS)
        bad = browser_check.check_page(tabs, site, "notebooks/01_bad", None)
        good = browser_check.check_page(tabs, site, good_page, None)
        fine = browser_check.check_page(tabs, site, "book/fine", None)
        inline = browser_check.check_page(tabs, site, "book/inline", None)
    problems = "\n".join(bad.problems)
    for expected in (
        "raw TeX visible",
        "images not loaded",
        "console error: boom",
        "exception: Error: kaboom",
        "network request blocked: https://example.org/remote.png",
        "no typeset math",
        "no visible Colab link",
        "box past the column, 900 px in 600 px): div#wide 'a table too wide'",
        "text past the column",
        "[420 px] wider than the column (box past the column, 900 px in 420 px): div#wide",
        "image without a caption (no figure): fig.png",
        "image shown at 0.20 of its natural width (100 of 500 px",
        "visible code takes more than 25% of the page",
    ):
        assert expected in problems, expected
    # each finding once per width, captions once
    assert sum("div#wide" in p for p in bad.problems) == 2
    assert sum("without a caption" in p for p in bad.problems) == 3  # gone, remote, fig.png
    assert sum("image shown at" in p for p in bad.problems) == 1  # failed at 1400 px only
    assert [img["scale"] for img in bad.widths[420]["images"] if img["scale"]] == [1, 0.2]

    assert good.problems == []
    assert fine.problems == []
    assert len(inline.problems) == 2  # at each width: a scroll bar under the line of text
    assert all("an inline formula scrolls (60 px in 40 px" in p for p in inline.problems)
    for width, measured in good.widths.items():
        assert measured["overflow"] == [], width
        scrolled = [s["text"] for s in measured["scrolling"]]
        assert scrolled == ["a long printed line", "a wide equation"], width
        assert measured["code"]["cells"] == 2 and measured["code"]["visible"] == 1
        assert 0 < measured["code"]["share"] < 0.1
        [image] = measured["images"]
        assert image["caption"].startswith("Figure 1") and image["natural"] == 200
        assert image["scale"] == 1.0
    code = bad.widths[1400]["code"]
    assert code["longest"] == 40 and code["share"] > browser_check.MAX_CODE_SHARE


@needs_chromium
def test_browser_check_run_saves_screenshots_and_a_report(tmp_path, capsys):
    _png(tmp_path / "site" / "fig.png", 400, 200)
    page = "notebooks/02_good"
    site = _site(tmp_path / "site", {"index.html": "", f"{page}.html": _good_chapter(page)})
    out = tmp_path / "check"
    assert browser_check.run(site, out, CHROMIUM, search_word=None, pages=[page]) == 0
    shots = sorted(p.name for p in out.glob("*.jpg"))
    assert shots == ["02_good-1400.jpg", "02_good-420.jpg"]
    report = json.loads((out / "report.json").read_text())
    assert report["failures"] == []
    assert set(report["code_share"]["02_good"]) == {"1400", "420"}
    printed = capsys.readouterr().out
    assert "Visible code as a share" in printed and "02_good" in printed
