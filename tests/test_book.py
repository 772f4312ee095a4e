"""The built HTML: Colab buttons, local MathJax, numbering and titles as in the table of
contents, the intro's chapter map, search, references, the API reference, and links (none
points nowhere; the claims appendix reaches the section of every claim). One file, so the
book is built once. The browser itself is exercised by tools/browser_check.py (in CI, after
the build); tests/test_browser_check.py tests that tool on its own."""

import html as html_lib
import importlib
import inspect
import pkgutil
import posixpath
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

import posenc
from posenc.book import claim_checks, claims
from tools import browser_check, build_book, setup_cell

ROOT = Path(__file__).resolve().parents[1]


def built_book(tmp_path_factory) -> Path:
    """Build the book once per test session (per worker) and return its ``_build/html``.

    Every module that needs the HTML calls this; the first call builds, the others reuse.
    The book the README's build command made is used instead when it was built from exactly
    these files and packages (``tools.build_book.is_current``): CI builds it just before.
    """
    if build_book.is_current(ROOT / "_build" / "html"):
        return ROOT / "_build" / "html"
    out = tmp_path_factory.getbasetemp() / "book-build"
    html = out / "_build" / "html"
    if not (html / "index.html").is_file():
        subprocess.run(
            [sys.executable, "-m", "tools.build_book", "--builddir", str(out)],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    return html


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    return built_book(tmp_path_factory)


def toc_files() -> list[str]:
    """Every file of ``_toc.yml`` (without suffix), in order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries:
            files.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc["parts"]:
        walk(part["chapters"])
    return files


def toc_chapters() -> list[tuple[Path, bool]]:
    """The chapter notebooks of the table of contents, each with whether it is numbered."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    found = []
    for part in toc["parts"]:
        for entry in part["chapters"]:
            if entry["file"].startswith("notebooks/"):
                found.append((ROOT / f"{entry['file']}.ipynb", bool(part.get("numbered"))))
    return found


def chapter_title(path: Path) -> str:
    """The notebook's title: its first level-1 heading."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^# +(.+?)\s*$", cell.source, flags=re.MULTILINE)
            if match:
                return match.group(1)
    raise AssertionError(f"{path.name} has no title")


CHAPTERS = [path for path, _ in toc_chapters()]


def _text(fragment: str) -> str:
    return html_lib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", fragment))).strip()


# ----------------------------------------------------------------------------------------
# Colab, MathJax, references
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_chapter_page_has_its_colab_link(html, chapter):
    page = (html / "notebooks" / f"{chapter.stem}.html").read_text()
    url, branch = setup_cell.repository()
    owner_repo = url.removeprefix("https://github.com/")
    expected = f"https://colab.research.google.com/github/{owner_repo}/blob/{branch}/notebooks/{chapter.name}"
    assert expected in page


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
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


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_pages_fetch_nothing_and_declare_each_script_once(html, chapter):
    page = (html / "notebooks" / f"{chapter.stem}.html").read_text()
    stylesheets = re.findall(r'<link[^>]*rel="stylesheet"[^>]*href="([^"]+)"', page)
    assert not [s for s in stylesheets if re.match(r"(https?:)?//", s)], stylesheets
    inline = re.findall(r"<script>(.*?)</script>", page, flags=re.DOTALL)
    repeated = {body[:60] for body in inline if inline.count(body) > 1}
    assert not repeated, f"scripts declared twice: {repeated}"


def test_references_page_renders_the_bibliography(html):
    page = (html / "book" / "references.html").read_text()
    assert "Attention is all you need" in page
    assert "You could have designed state of the art positional encoding" in page


def bib_keys() -> list[str]:
    return re.findall(r"^@\w+\{([^,]+),", (ROOT / "book" / "references.bib").read_text(), re.M)


def test_every_bibliography_entry_is_cited_somewhere():
    sources = [p.read_text() for p in (ROOT / "book").rglob("*.md")]
    for path in setup_cell.chapters():
        nb = nbformat.read(path, as_version=4)
        sources += [c.source for c in nb.cells if c.cell_type == "markdown"]
    cited = set()
    for text in sources:
        for keys in re.findall(r"\{cite:[a-z]+\}`([^`]+)`", text):
            cited.update(k.strip() for k in keys.split(","))
    keys = bib_keys()
    assert len(keys) == len(set(keys)), "duplicate bibliography keys"
    assert not set(keys) - cited, f"entries cited nowhere: {sorted(set(keys) - cited)}"
    assert not cited - set(keys), f"citations of missing entries: {sorted(cited - set(keys))}"


@pytest.mark.parametrize(
    "needed",
    [
        "vaswani2017attention",
        "shaw2018self",
        "raffel2020exploring",
        "press2022train",
        "su2024roformer",
        "chen2023extending",
        "peng2024yarn",
        "barbero2025round",
        "heo2024rotary",
        "fleetwood2024designing",
        "source2025concept",
        "source2025interactive",
        "source2025ropeblog",
    ],
)
def test_the_papers_and_posts_of_the_book_are_in_the_bibliography(html, needed):
    entry = re.search(
        rf"^@\w+\{{{needed},(.*?)^\}}", (ROOT / "book" / "references.bib").read_text(), re.M | re.S
    )
    assert entry, f"{needed} is not in book/references.bib"
    page = _text((html / "book" / "references.html").read_text()).lower()
    url = re.search(r"url\s*=\s*\{([^}]+)\}", entry.group(1))
    title = re.search(r"title\s*=\s*\{(.+?)\},?\s*$", entry.group(1), re.M).group(1)
    title = re.sub(r"[{}]", "", title).lower()
    assert (url and url.group(1).lower() in page) or title in page, f"{needed} not rendered"


# ----------------------------------------------------------------------------------------
# Navigation: numbering, titles, the intro's map, search
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chapter", "numbered"), toc_chapters(), ids=[p.name for p, _ in toc_chapters()]
)
def test_chapter_heading_has_its_title_and_number(html, chapter, numbered):
    page = (html / "notebooks" / f"{chapter.stem}.html").read_text()
    heading = re.search(r"<section[^>]*>\s*<h1>(.*?)</h1>", page, flags=re.DOTALL).group(1)
    h1 = _text(heading).rstrip("#").strip()
    title = chapter_title(chapter)
    number = int(chapter.name[:2])
    expected = f"{number}. {title}" if numbered else title
    assert h1 == expected


def test_numbered_chapters_are_numbered_as_their_files():
    """Sphinx numbers the chapters of numbered parts in sequence: no gaps are allowed."""
    numbered = [int(path.name[:2]) for path, is_numbered in toc_chapters() if is_numbered]
    assert numbered == list(range(1, len(numbered) + 1)), numbered


def test_sidebar_lists_every_page_of_the_toc(html):
    index = (html / "book" / "intro.html").read_text()
    links = re.findall(r'<li class="toctree-l1[^"]*"><a [^>]*href="([^"]+)"[^>]*>(.*?)</a>', index)
    targets = [posixpath.normpath(f"book/{href}").removesuffix(".html") for href, _ in links]
    top_level = [f for f in toc_files()[1:] if f.count("/") == 1]
    assert targets == top_level
    labels = dict(zip(targets, (_text(t) for _, t in links), strict=True))
    for chapter, numbered in toc_chapters():
        label = labels[f"notebooks/{chapter.stem}"]
        title = chapter_title(chapter)
        assert label == (f"{int(chapter.name[:2])}. {title}" if numbered else title)


MAP_LINE = re.compile(
    r"Chapter (?P<number>\d+), (?:\[\*(?P<linked>[^*]+)\*\]\((?P<href>[^)]+)\)|\*(?P<plain>[^*]+)\*)"
    r"(?P<pending> \(in preparation\))?"
)


def intro_map() -> dict[int, dict]:
    text = (ROOT / "book" / "intro.md").read_text()
    found = {}
    for m in MAP_LINE.finditer(text):
        number = int(m["number"])
        assert number not in found, f"chapter {number} listed twice in the intro"
        found[number] = {
            "title": m["linked"] or m["plain"],
            "href": m["href"],
            "pending": bool(m["pending"]),
        }
    return found


def test_intro_chapter_map_matches_the_table_of_contents():
    chapters = intro_map()
    assert sorted(chapters) == list(range(1, max(chapters) + 1)), "the map skips a chapter"
    in_toc = {int(path.name[:2]): path for path, _ in toc_chapters()}
    for number, path in in_toc.items():
        entry = chapters.get(number)
        assert entry, f"chapter {number} ({path.name}) is in the toc but not in the intro's map"
        assert entry["title"] == chapter_title(path), f"chapter {number}: title differs"
        assert not entry["pending"], f"chapter {number} is in the toc but marked in preparation"
        assert entry["href"] == f"../notebooks/{path.name}", f"chapter {number}: link"
    for number, entry in chapters.items():
        if number not in in_toc:
            assert entry["pending"], f"chapter {number} is not in the toc: mark it in preparation"
            assert entry["href"] is None, f"chapter {number} is not in the toc but linked"
    on_disk = {int(p.name[:2]) for p in setup_cell.chapters()}
    assert on_disk <= set(chapters), f"chapters missing from the map: {on_disk - set(chapters)}"


def test_intro_map_parser_sees_both_kinds_of_entry():
    text = "Chapter 3, [*Integers and bits*](../notebooks/03_x.ipynb): a\nChapter 13, *Fast RoPE* (in preparation): b"
    found = [m.groupdict() for m in MAP_LINE.finditer(text)]
    assert [f["number"] for f in found] == ["3", "13"]
    assert found[0]["linked"] == "Integers and bits" and not found[0]["pending"]
    assert found[1]["plain"] == "Fast RoPE" and found[1]["pending"]


def test_search_page_and_index_exist_and_know_the_chapters(html):
    assert (html / "search.html").is_file()
    index = (html / "searchindex.js").read_text()
    assert index.startswith("Search.setIndex(")
    for chapter in CHAPTERS:
        assert f'"notebooks/{chapter.stem}"' in index, f"{chapter.stem} not indexed"
        assert chapter_title(chapter) in index
    for word in ("rotat", "sinusoid", "llama"):  # stems of words of the chapters
        assert f'"{word}' in index.lower()


# ----------------------------------------------------------------------------------------
# The API reference
# ----------------------------------------------------------------------------------------


def api_modules() -> list[str]:
    """The modules the API reference must cover: every public module of the package, in
    every layer (``rope``, ``fast.forms``, ``book.summary`` ...)."""
    found = pkgutil.walk_packages(posenc.__path__, prefix="posenc.")
    return sorted(
        m.name.removeprefix("posenc.")
        for m in found
        if not m.ispkg and not any(part.startswith("_") for part in m.name.split("."))
    )


def public_objects(module_name: str) -> list[tuple[str, object]]:
    module = importlib.import_module(f"posenc.{module_name}")
    return [
        (name, getattr(module, name))
        for name in module.__all__
        if inspect.isfunction(getattr(module, name)) or inspect.isclass(getattr(module, name))
    ]


# Public functions and classes without a doctest example. Classes (dataclasses, modules)
# are documented by their attributes; the functions reach the network, open live widgets
# or display output, which a doctest cannot show. properties.absolute_schemes and
# properties.check_all should get examples in posenc/properties.py.
NO_EXAMPLE = {
    "book.context.ScoreTerms",
    "data.llama.Llama",
    "data.llama.hub_embeddings",
    "data.llama.hub_tokenizer",
    "data.llama.open_for_row_reads",
    "book.llama_rope.TransformersRope",
    "display.plots.animation_html",
    "precision.RopeCheck",
    "display.plots.show",
    "properties.Scheme",
    "properties.Verdict",
    "properties.absolute_schemes",
    "properties.check_all",
    "book.relative_views.ShiftSetup",
    "book.rope_nd_views.OffsetCheck",
    "book.rope_views.playground",
    "book.rotation_explorer.rotation_explorer",
    "book.sinusoidal_views.playground",
    "book.claims.Claim",
    "book.claims.ClaimReport",
    "book.claim_checks.Finding",
    "book.summary.Station",
    "book.training_views.Conclusion",
    "book.waves.explorer",
}


@pytest.mark.parametrize("module_name", api_modules())
def test_api_reference_documents_every_public_function(html, module_name):
    pages = "".join(p.read_text() for p in (html / "book" / "api").glob("*.html"))
    assert f'id="module-posenc.{module_name}"' in pages, f"posenc.{module_name} has no API page"
    for name, _ in public_objects(module_name):
        assert f'id="posenc.{module_name}.{name}"' in pages, f"posenc.{module_name}.{name}"


@pytest.mark.parametrize("module_name", api_modules())
def test_every_public_function_has_a_docstring_and_an_example(module_name):
    for name, obj in public_objects(module_name):
        doc = inspect.getdoc(obj) or ""
        assert doc, f"posenc.{module_name}.{name} has no docstring"
        if f"{module_name}.{name}" not in NO_EXAMPLE:
            assert ">>>" in doc, f"posenc.{module_name}.{name} has no example"


def test_api_page_shows_arguments_returns_and_example(html):
    page = (html / "book" / "api" / "rope.html").read_text()
    start = page.index('id="posenc.rope.apply_rope"')
    end = page.index('id="posenc.rope.', start + 1)  # the next entry
    entry = _text(page[start:end])
    for part in ("Parameters", "Returns", "Raises", "Example", ">>>"):
        assert part in entry, f"{part!r} missing from the apply_rope entry"


# ----------------------------------------------------------------------------------------
# Links, and the browser check
# ----------------------------------------------------------------------------------------


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
