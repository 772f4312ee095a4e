"""Check the built book in a real browser: headless Chromium, offline, from disk.

    python -m tools.browser_check [--html _build/html] [--out _build/browser-check]

Debian's ``chromium`` is driven through Playwright's sync API (``executable_path``:
Playwright never downloads a browser of its own). Every page of the table of contents is
opened from ``file://`` with every network request blocked, once at each of
:data:`WIDTHS` (1400 px, a desktop window, and 420 px, a phone). On every page, at each
width, it checks that

- the math is typeset: MathJax's output elements (``mjx-container``) are present on a
  chapter, every math element holds one, and no raw TeX (``$$``, ``\\begin``, ``\\(``,
  ``\\[``) is left in the visible text;
- every image has loaded (``naturalWidth > 0``);
- nothing in the main column (``article.bd-article``) is wider than the column: no
  element's box and no line of text reaches past either edge of the column (whether an
  ``overflow: hidden`` box cuts it off or not), and the page does not scroll sideways.
  Content inside a scroll box (an element with ``overflow-x: auto`` or ``scroll``: code
  cells, ``.math-wrapper``) may be wide; such boxes are listed in the report, not failed,
  but an inline formula that scrolls is failed: the screenshots hide scroll bars, and
  where a reader's browser always shows them, one would sit under the line of text;
- the console shows no errors and no exception, and no request tried the network.

On a chapter page it also checks that

- every ``img`` (animation players included) sits in a ``figure`` with a non-empty
  ``figcaption``;
- every image is displayed at no less than :data:`MIN_IMAGE_SCALE` of its natural CSS
  width (its ``width`` attribute, or inline ``style`` width, in px when set, as for the
  book's 2x PNGs, else its ``naturalWidth``) at 1400 px; at 420 px the scale is measured
  and printed, not failed (see :data:`MIN_IMAGE_SCALE`); a folded image has no scale;
- the visible (unfolded) code input cells take at most :data:`MAX_CODE_SHARE` of the
  height of the main column at every width (printed as a table per chapter, with the
  figures' captions and scales);
- the chapter shows a visible link to its own notebook on Colab in the main column (not
  only in the launch menu), and every animation has its player and pressing its play
  button advances the frame (the slider moves and the image changes).

On every page with an explorer (``posenc.book.explorers``: sliders that run in the page),
at each width, it checks that every explorer has started, that moving each of its sliders
from the keyboard (End, or Home for one already at its end) changes its picture, and that
it is no wider than the column; a console error or a network request on the way fails the
page as anywhere else. Each explorer is also shot on its own before and after its sliders
moved (``09_rope-420-explorer1.jpg``, ``09_rope-420-explorer1-moved.jpg``), and the run
prints how many explorers and sliders it moved.

For the whole site it checks, without the browser, that every internal link points at a
file that exists and, where it has one, at an ``#anchor`` that exists in it; and in the
browser that the search page finds a chapter. Full-page screenshots of every page at both
widths (``09_rope-1400.jpg``, ``09_rope-420.jpg``, ...; only API reference pages are cut,
at :data:`MAX_SHOT_PX`) are saved under ``--out`` for a person to look at, with
``report.json`` (every measurement, every failure).

Exit status 0 when everything passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import html.parser
import json
import re
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml

from tools import setup_cell

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = (1400, 420)
"""Window widths in CSS px every page is checked at: a desktop window and a phone."""
HEIGHT = 900
"""Window height in CSS px (screenshots take the whole page whatever it is)."""
MAX_CODE_SHARE = 0.25
"""Largest share of a chapter's main column that visible code input cells may take."""
MIN_IMAGE_SCALE = 0.5
"""Smallest displayed width of an image, as a share of its natural CSS width, at the first
of :data:`WIDTHS` (where the column is as wide as the book's figures are drawn). At a
phone's width every column-wide figure is shown smaller (a 784 px figure in a cell's
output is 372 px wide at 420 px: 0.47); the scale there is measured and reported, not
failed."""
PRINTED_PER_PAGE = 12
"""Failures printed per page; report.json has them all."""
TOLERANCE_PX = 1
"""How far (CSS px) a box may reach past the column before it counts: sub-pixel rounding."""
MAX_SHOT_PX = 30_000
"""Tallest screenshot in CSS px: every chapter fits (the longest is about 20000 px at
420 px); the longest API reference pages (up to 180000 px, more than a JPEG's 65535 rows)
are shot down to here only, which also keeps the run short."""
# On top of Playwright's own flags. Every host name fails to resolve, so even a request
# that got past the routing below could not leave the machine.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--host-resolver-rules=MAP * ~NOTFOUND",
]
EXPLORER = "main .pe-explorer"
"""The explorers of posenc.book.explorers, as the book's pages hold them."""
NETWORK = re.compile(r"^(https?|wss?|ftp)://", re.IGNORECASE)
RAW_TEX = ("$$", "\\begin", "\\(", "\\[")


# ---------------------------------------------------------------------------------------
# Links, without a browser
# ---------------------------------------------------------------------------------------


class _Anchors(html.parser.HTMLParser):
    """Collects the ids (and legacy ``<a name>``) of a page and its links."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id",) + (("name",) if tag == "a" else ()):
            if values.get(key):
                self.ids.add(values[key])
        for key in ("href", "src"):
            if values.get(key) and tag in ("a", "link", "img", "script", "iframe", "source"):
                self.links.append(values[key])


def _parse(path: Path, cache: dict[Path, _Anchors]) -> _Anchors:
    if path not in cache:
        parser = _Anchors()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = parser
    return cache[path]


def broken_links(html_dir: Path) -> list[str]:
    """Every internal link of the site that points nowhere.

    A link is internal when it has no scheme and no host. Its file must exist (a folder
    means its ``index.html``); a ``#fragment`` on an HTML page must be an ``id`` (or an
    ``<a name>``) of the target page.

    Returns:
        One line per broken link: ``page: link (reason)``.
    """
    html_dir = Path(html_dir).resolve()
    cache: dict[Path, _Anchors] = {}
    problems = []
    for page in sorted(html_dir.rglob("*.html")):
        if "_static" in page.relative_to(html_dir).parts:
            continue
        for link in _parse(page, cache).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("//", "javascript:")):
                continue
            if not parts.path:
                target = page
            else:
                target = (page.parent / unquote(parts.path)).resolve()
                if target.is_dir():
                    target = target / "index.html"
            where = f"{page.relative_to(html_dir)}: {link}"
            if not target.is_file():
                problems.append(f"{where} (no file {target})")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html" and fragment not in _parse(target, cache).ids:
                problems.append(f"{where} (no id {fragment!r} in {target.name})")
    return problems


# ---------------------------------------------------------------------------------------
# The browser
# ---------------------------------------------------------------------------------------


class Tab:
    """One page of the browser at one window width, offline, recording what goes wrong.

    Console errors, uncaught exceptions and every attempt to reach the network (failed at
    once) are collected until :meth:`problems` is called.
    """

    def __init__(self, browser, width: int) -> None:
        self.width = width
        self._found: list[str] = []
        self.context = browser.new_context(
            viewport={"width": width, "height": HEIGHT},
            device_scale_factor=1,
            service_workers="block",
        )
        self.context.set_default_timeout(30_000)
        self.context.route(NETWORK, self._block)
        self.context.route_web_socket(NETWORK, self._block_socket)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", self._exception)

    def _block(self, route) -> None:
        self._found.append(f"network request blocked: {route.request.url}")
        route.abort("blockedbyclient")

    def _block_socket(self, socket) -> None:
        self._found.append(f"network request blocked: {socket.url}")
        socket.close()

    def _exception(self, error) -> None:
        self._found.append(f"exception: {error.name or 'Error'}: {error.message}")

    def _console(self, message) -> None:
        if message.type in ("error", "assert"):
            text = message.text
            if text.startswith("Failed to load resource"):
                text += f" {message.location.get('url', '')}"
            self._found.append(f"console error: {text.strip()}")

    def problems(self) -> list[str]:
        """Console errors, exceptions and network attempts recorded since the last call."""
        found, self._found = self._found, []
        return found

    def open(self, url: str) -> None:
        """Navigate, wait for the load event, MathJax's typesetting, fonts and images."""
        self.page.goto(url, wait_until="load")
        self.page.evaluate(_WAIT_FOR_PAGE)

    def evaluate(self, expression: str, arg=None):
        return self.page.evaluate(expression, arg)

    def screenshot(self, path: Path) -> int | None:
        """The whole page, one image pixel per CSS pixel, as JPEG.

        A page taller than :data:`MAX_SHOT_PX` (only API reference pages) is cut there.
        Returns the height cut at, or None.
        """
        height = self.page.evaluate("document.scrollingElement.scrollHeight")
        clip = None
        if height > MAX_SHOT_PX:
            width = self.page.evaluate("document.scrollingElement.scrollWidth")
            clip = {"x": 0, "y": 0, "width": width, "height": MAX_SHOT_PX}
        self.page.screenshot(path=path, full_page=True, clip=clip, type="jpeg", quality=70)
        return MAX_SHOT_PX if clip else None


@contextlib.contextmanager
def open_browser(chromium: str, widths: tuple[int, ...] = WIDTHS) -> Iterator[list[Tab]]:
    """Debian's Chromium, headless, with one :class:`Tab` per window width."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield [Tab(browser, width) for width in widths]
        finally:
            browser.close()


# ---------------------------------------------------------------------------------------
# The JavaScript probes
# ---------------------------------------------------------------------------------------

_WAIT_FOR_PAGE = """
(async () => {
  const mathjax = [...document.scripts].some(s => /mathjax/i.test(s.src));
  for (let i = 0; mathjax && i < 200 && !(window.MathJax && MathJax.startup
                                           && MathJax.startup.promise); i++)
    await new Promise(r => setTimeout(r, 25));
  if (mathjax && window.MathJax && MathJax.startup) await MathJax.startup.promise;
  await Promise.all([...document.images].map(img => img.complete ? null :
    new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r);
                       setTimeout(r, 5000); })));
  await document.fonts.ready;
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return true;
})()
"""

_INSPECT = """
(() => {
  const main = document.querySelector('main') || document.body;
  const column = document.querySelector('article.bd-article') || main;
  const skip = 'PRE, CODE, SCRIPT, STYLE, TEXTAREA, MJX-CONTAINER, .highlight, .output';
  const raw = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skip)) continue;
    const style = getComputedStyle(parent);
    if (style.display === 'none' || style.visibility === 'hidden') continue;
    for (const tex of RAW_TEX) if (node.textContent.includes(tex))
      raw.push(node.textContent.trim().slice(0, 80));
  }
  const maths = [...main.querySelectorAll('.math')];
  const untypeset = maths.filter(m => !m.querySelector('mjx-container'))
                         .map(m => m.textContent.trim().slice(0, 80));
  const images = [...main.querySelectorAll('img')].filter(img => !img.closest('.animation'))
    .map(img => ({src: (img.getAttribute('src') || '').slice(0, 80),
                  ok: img.complete && img.naturalWidth > 0}));
  const animations = [...main.querySelectorAll('.animation')].map(a => ({
    img: !!a.querySelector('img[id^="_anim_img"]'),
    slider: !!a.querySelector('input.anim-slider'),
    play: !!a.querySelector('button[title="Play"]'),
  }));
  const shown = a => a.checkVisibility({visibilityProperty: true, opacityProperty: true})
                     && a.getBoundingClientRect().width > 0;
  const links = [...document.querySelectorAll('a[href*="colab.research.google.com"]')];
  return {mjx: main.querySelectorAll('mjx-container').length, maths: maths.length,
          untypeset, raw, images, animations, title: document.title,
          colab: links.map(a => a.href),
          colab_visible: links.filter(a => column.contains(a) && shown(a)).map(a => a.href)};
})()
""".replace("RAW_TEX", json.dumps(list(RAW_TEX)))

# The layout of the main column at the current width: what is wider than the column,
# the images (caption, displayed scale) and the height taken by visible code cells.
_MEASURE = """
(tolerance) => {
  const column = document.querySelector('article.bd-article')
                 || document.querySelector('main') || document.body;
  // the column is the article's content box: the text column, without its padding
  const outer = column.getBoundingClientRect(), own = getComputedStyle(column);
  const left = outer.left + parseFloat(own.borderLeftWidth) + parseFloat(own.paddingLeft);
  const right = outer.right - parseFloat(own.borderRightWidth) - parseFloat(own.paddingRight);
  const box = {left, right, width: right - left, height: outer.height};
  const shown = el => el.checkVisibility({visibilityProperty: true, contentVisibilityAuto: true});
  const name = el => {
    let s = el.tagName.toLowerCase();
    if (el.id) return s + '#' + el.id;
    const classes = [...el.classList].filter(c => !/^(docutils|container|notranslate)$/.test(c));
    return s + classes.slice(0, 2).map(c => '.' + c).join('');
  };
  const selector = el => {
    const parts = [];
    for (let e = el; e && e !== column && parts.length < 3; e = e.parentElement)
      parts.unshift(name(e));
    return parts.join(' > ');
  };
  const text = el => (el.innerText || el.textContent || el.getAttribute('alt') || '')
    .replace(/\\s+/g, ' ').trim().slice(0, 60);
  const scrolls = style => style.overflowX === 'auto' || style.overflowX === 'scroll';

  // (a) Top down: the outermost element that reaches past the column is reported and its
  // children are not (they would repeat it); so is a line of text that runs past it. A
  // scroll box may hold wide content; text hidden for screen readers is no content.
  const overflow = [], scrolling = [];
  // top: where it is on the page (and in the screenshot), in CSS px from the top
  const report = (el, why, r) => overflow.push(
    {selector: selector(el), text: text(el), why,
     width: Math.round(Math.max(r.right, box.right) - Math.min(r.left, box.left)),
     column: Math.round(box.width), top: Math.round(r.top + window.scrollY)});
  const hidden = style => style.clip !== 'auto' || style.clipPath !== 'none';
  const past = r => r.width > 0 && (r.right > box.right + tolerance
                                     || r.left < box.left - tolerance);
  const walk = parent => {
    for (const node of parent.childNodes) {
      if (node.nodeType === Node.TEXT_NODE) {
        if (!node.textContent.trim()) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        const r = range.getBoundingClientRect();
        if (past(r)) report(parent, 'text past the column', r);
        continue;
      }
      if (node.nodeType !== Node.ELEMENT_NODE) continue;
      const el = node, style = getComputedStyle(el);
      if (style.display === 'none' || el.tagName === 'MJX-ASSISTIVE-MML') continue;
      if (style.display === 'contents') { walk(el); continue; }
      if (!shown(el) || style.position === 'fixed' || hidden(style)) continue;
      const r = el.getBoundingClientRect();
      if (past(r)) {
        report(el, 'box past the column', r);
      } else if (scrolls(style)) {
        // it, or the scroll boxes inside it that hold the wide content (a display
        // equation's mjx-container inside div.math)
        const boxes = [el, ...el.querySelectorAll('*')].filter(e => e === el || (
          e.scrollWidth > e.clientWidth + tolerance && scrolls(getComputedStyle(e))));
        for (const e of boxes) if (e.scrollWidth > e.clientWidth + tolerance && shown(e))
          scrolling.push({selector: selector(e), text: text(e), width: e.scrollWidth,
                          shown: e.clientWidth, top: Math.round(e.getBoundingClientRect().top
                                                                + window.scrollY),
                          inline: e.tagName === 'MJX-CONTAINER'
                                  && e.getAttribute('display') !== 'true'});
      } else {
        walk(el);
      }
    }
  };
  walk(column);
  const page = document.scrollingElement;
  if (page.scrollWidth > page.clientWidth + tolerance)
    overflow.push({selector: 'the page', text: '', why: 'the page scrolls sideways',
                   width: page.scrollWidth, column: page.clientWidth});

  // (b) Images: in a captioned figure, shown at no less than half their natural CSS width.
  const cssWidth = img => {
    const attribute = (img.getAttribute('width') || '').trim();
    if (/^[0-9.]+(px)?$/.test(attribute)) return parseFloat(attribute);
    if (/^[0-9.]+px$/.test(img.style.width)) return parseFloat(img.style.width);
    return img.naturalWidth;
  };
  const images = [...column.querySelectorAll('img')].map(img => {
    const figure = img.closest('figure');
    const caption = figure && figure.querySelector('figcaption');
    const natural = cssWidth(img);
    const visible = shown(img) && img.getBoundingClientRect().width > 0;
    const displayed = visible ? img.getBoundingClientRect().width : 0;
    const src = img.getAttribute('src') || '';
    return {src: (src.startsWith('data:') || !src ? '#' + img.id : src.split('/').pop()).slice(0, 24),
            where: selector(img), figure: !!figure,
            caption: caption ? caption.textContent.replace(/\\s+/g, ' ').trim().slice(0, 60) : '',
            natural: Math.round(natural), displayed: Math.round(displayed), visible,
            scale: natural > 0 && visible ? Math.round(displayed / natural * 1000) / 1000 : null};
  });

  // (c) Code: the height of the code input cells a reader sees without unfolding anything.
  const cells = [...column.querySelectorAll('.cell_input')];
  const open = cells.filter(c => shown(c) && c.getBoundingClientRect().height > 0);
  const lines = c => (c.querySelector('pre') || c).textContent.replace(/\\n$/, '').split('\\n').length;
  const code = open.reduce((sum, c) => sum + c.getBoundingClientRect().height, 0);
  return {column_px: Math.round(box.width), height_px: Math.round(box.height),
          overflow, scrolling, images,
          code: {cells: cells.length, visible: open.length, code_px: Math.round(code),
                 share: box.height > 0 ? Math.round(code / box.height * 1000) / 1000 : 0,
                 longest: Math.max(0, ...open.map(lines))}};
}
"""

_PLAY = """
(async () => {
  const results = [];
  for (const anim of document.querySelectorAll('main .animation')) {
    anim.scrollIntoView();
    const img = anim.querySelector('img[id^="_anim_img"]');
    const slider = anim.querySelector('input.anim-slider');
    const before = {frame: slider.value, src: img.src};
    const frames = parseInt(slider.max) + 1;
    anim.querySelector('button[title="Play"]').click();
    let after = before;
    // a player may hold a frame for a few steps: wait until the picture itself changes
    for (let i = 0; i < 60 && (after.frame === before.frame || after.src === before.src); i++) {
      await new Promise(r => setTimeout(r, 50));
      after = {frame: slider.value, src: img.src};
    }
    anim.querySelector('button[title="Pause"]').click();
    results.push({frames, loaded: img.naturalWidth > 0, advanced: after.frame !== before.frame,
                  image_changed: after.src !== before.src});
  }
  window.scrollTo(0, 0);
  return results;
})()
"""

_SEARCH = """
(async () => {
  // Sphinx reports "Search finished, found ..." once every hit is listed
  for (let i = 0; i < 200; i++) {
    const status = document.querySelector('.search-summary');
    if (status && /finished|did not match/i.test(status.textContent)) break;
    await new Promise(r => setTimeout(r, 50));
  }
  return [...document.querySelectorAll('ul.search li a')].map(a => a.getAttribute('href'));
})()
"""


# ---------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------


@dataclass
class PageReport:
    """What one page showed: its problems, and the facts measured at every width."""

    page: str
    chapter: bool
    problems: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)
    widths: dict[int, dict] = field(default_factory=dict)


def toc_pages(root: Path = ROOT) -> list[str]:
    """Every page of ``_toc.yml`` (without suffix), the root first, in the book's order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    pages = [toc["root"]]

    def walk(entries: list[dict]) -> None:
        for entry in entries:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    walk(toc.get("chapters", []))
    return pages


def colab_url(page: str) -> str:
    url, branch = setup_cell.repository()
    owner_repo = url.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{owner_repo}/blob/{branch}/{page}.ipynb"


def shot_name(page: str, width: int) -> str:
    """The screenshot file of a page at a width: ``09_rope-1400.jpg``, ``api-rope-420.jpg``."""
    return f"{'-'.join(Path(page).parts[1:]) or page}-{width}.jpg"


def layout_problems(measured: dict, chapter: bool, first: bool = True) -> list[str]:
    """The failures in one :data:`_MEASURE` result: what is wider than the column and, on a
    chapter, at the first width only (``first``), images without a caption (they do not
    change with the width) and images shown under :data:`MIN_IMAGE_SCALE`."""
    problems = []
    for o in measured["overflow"]:
        where = f" at y={o['top']}" if "top" in o else ""
        problems.append(
            f"wider than the column ({o['why']}, {o['width']} px in {o['column']} px): "
            f"{o['selector']} {o['text']!r}{where}"
        )
    for s in measured["scrolling"]:
        if s.get("inline"):  # the screenshots hide scroll bars; many readers' browsers do not
            problems.append(
                f"an inline formula scrolls ({s['width']} px in {s['shown']} px: a scroll bar "
                f"under the line wherever scroll bars show): {s['text']!r} at y={s['top']}"
            )
    if not chapter:
        return problems
    for img in measured["images"]:
        if first and not img["caption"]:
            where = "no figure" if not img["figure"] else "figure without figcaption"
            problems.append(f"image without a caption ({where}): {img['src']} in {img['where']}")
        if first and img["scale"] is not None and img["scale"] < MIN_IMAGE_SCALE:
            problems.append(
                f"image shown at {img['scale']:.2f} of its natural width "
                f"({img['displayed']} of {img['natural']} px, under {MIN_IMAGE_SCALE}): "
                f"{img['src']}"
            )
    return problems


def code_problems(report: PageReport) -> list[str]:
    """Visible code over :data:`MAX_CODE_SHARE` of the main column at any width."""
    shares = {w: m["code"]["share"] for w, m in report.widths.items()}
    if not report.chapter or not shares or max(shares.values()) <= MAX_CODE_SHARE:
        return []
    at = ", ".join(f"{share:.0%} at {w} px" for w, share in shares.items())
    code = next(iter(report.widths.values()))["code"]
    return [
        f"visible code takes more than {MAX_CODE_SHARE:.0%} of the page ({at}; "
        f"{code['visible']} of {code['cells']} code cells unfolded)"
    ]


def check_page(tabs: list[Tab], html_dir: Path, page: str, shots: Path | None) -> PageReport:
    """Open one page in every tab (one per width) and check it; see the module docstring.

    Problems found at a width other than the first are prefixed with ``[<width> px]``.
    """
    chapter = Path(page).parts[0] == "notebooks"
    report = PageReport(page, chapter)
    path = html_dir / f"{page}.html"
    if not path.is_file():
        report.problems.append(f"page not built: {path}")
        return report
    for i, tab in enumerate(tabs):
        problems: list[str] = []
        tab.problems()  # forget what an earlier page left behind
        tab.open(path.as_uri())
        facts = tab.evaluate(_INSPECT)
        measured = tab.evaluate(_MEASURE, TOLERANCE_PX)
        if facts["untypeset"]:
            problems.append(f"math not typeset: {facts['untypeset'][:3]}")
        if facts["raw"]:
            problems.append(f"raw TeX visible: {facts['raw'][:3]}")
        bad = [img["src"] for img in facts["images"] if not img["ok"]]
        if bad:
            problems.append(f"images not loaded: {bad}")
        if chapter and i == 0 and facts["mjx"] == 0:
            problems.append("no typeset math (mjx-container) on a chapter page")
        problems += layout_problems(measured, chapter, first=i == 0)
        if shots is not None:  # before the players move
            measured["screenshot_cut_at"] = tab.screenshot(shots / shot_name(page, tab.width))
        if i == 0:
            report.facts = {k: v for k, v in facts.items() if k not in ("images", "colab")}
            report.facts["images"] = len(facts["images"])
            if chapter:
                problems += _chapter_problems(tab, page, facts, report)
        problems += explorer_problems(tab, page, measured, shots)
        tab.page.wait_for_timeout(100)  # late console messages
        problems += tab.problems()
        report.widths[tab.width] = measured
        prefix = "" if i == 0 else f"[{tab.width} px] "
        report.problems += [prefix + p for p in problems]
    report.problems += code_problems(report)
    return report


_EXPLORER_STATE = """
(root) => ({
  ready: root.hasAttribute('data-ready'),
  picture: [...root.querySelectorAll('svg')].map(s => s.outerHTML).join(''),
  width: root.getBoundingClientRect().width, scroll: root.scrollWidth, client: root.clientWidth,
  left: root.getBoundingClientRect().left, right: root.getBoundingClientRect().right,
})
"""


def explorer_problems(tab: Tab, page: str, measured: dict, shots: Path | None) -> list[str]:
    """Move every slider of every explorer on the page; see the module docstring.

    The counts go into ``measured["explorers"]`` (one entry per explorer: its name, its
    sliders, how many changed the picture).
    """
    problems: list[str] = []
    roots = tab.page.locator(EXPLORER)
    found = []
    column = tab.evaluate(
        "() => { const c = document.querySelector('article.bd-article') || document.body;"
        " const r = c.getBoundingClientRect(), s = getComputedStyle(c);"
        " return [r.left + parseFloat(s.paddingLeft), r.right - parseFloat(s.paddingRight)]; }"
    )
    for i in range(roots.count()):
        root = roots.nth(i)
        root.scroll_into_view_if_needed()
        state = root.evaluate(_EXPLORER_STATE)
        name = root.get_attribute("data-explorer") or f"#{i + 1}"
        where = f"explorer {name} (#{i + 1})"
        entry = {"name": name, "sliders": 0, "changed": 0}
        found.append(entry)
        if not state["ready"] or not state["picture"]:
            problems.append(f"{where} did not start (no picture)")
            continue
        if state["scroll"] > state["client"] + TOLERANCE_PX or (
            state["left"] < column[0] - TOLERANCE_PX or state["right"] > column[1] + TOLERANCE_PX
        ):
            problems.append(
                f"{where} is wider than the column ({round(state['width'])} px, content "
                f"{state['scroll']} px, in {round(column[1] - column[0])} px)"
            )
        shot = None if shots is None else shots / shot_name(page, tab.width)
        if shot is not None:
            root.screenshot(path=shot.with_name(f"{shot.stem}-explorer{i + 1}.jpg"), quality=80)
        sliders = root.locator('input[type="range"]')
        for j in range(sliders.count()):
            slider = sliders.nth(j)
            at_end = slider.evaluate("s => s.value === s.max")
            before = root.evaluate(_EXPLORER_STATE)["picture"]
            slider.press("Home" if at_end else "End")
            after = root.evaluate(_EXPLORER_STATE)
            entry["sliders"] += 1
            label = slider.get_attribute("data-key") or f"#{j + 1}"
            if after["picture"] == before:
                problems.append(f"{where}: moving slider {label} left the picture unchanged")
            else:
                entry["changed"] += 1
            if after["scroll"] > after["client"] + TOLERANCE_PX:
                problems.append(
                    f"{where}: with slider {label} moved it is wider than itself "
                    f"({after['scroll']} px in {after['client']} px)"
                )
        if shot is not None:
            root.screenshot(
                path=shot.with_name(f"{shot.stem}-explorer{i + 1}-moved.jpg"), quality=80
            )
    measured["explorers"] = found
    return problems


def _chapter_problems(tab: Tab, page: str, facts: dict, report: PageReport) -> list[str]:
    """The Colab link and the animations, checked once (at the first width)."""
    problems = []
    expected = colab_url(page)
    if expected not in facts["colab_visible"]:
        problems.append(
            f"no visible Colab link to {expected} in the main column "
            f"(visible: {facts['colab_visible']}, anywhere: {facts['colab']})"
        )
    incomplete = [a for a in facts["animations"] if not all(a.values())]
    if incomplete:
        problems.append(f"animation player incomplete: {incomplete}")
    if facts["animations"]:
        played = tab.evaluate(_PLAY)
        report.facts["played"] = played
        stuck = [
            i
            for i, p in enumerate(played)
            if not (p["advanced"] and p["image_changed"] and p["loaded"])
        ]
        if stuck:
            problems.append(f"animations that did not advance when played: {stuck}")
    return problems


def check_search(tab: Tab, html_dir: Path, word: str) -> list[str]:
    """Search the site for ``word`` in the browser; it must find a chapter.

    Sphinx's search page lists the hits from ``searchindex.js`` and then fetches each hit's
    page to show a summary. A browser does not let a ``file://`` page fetch another file,
    so those fetches fail here (on a web server they work); errors about them are left
    out, every other error counts.
    """
    tab.problems()
    tab.open((html_dir / "search.html").as_uri() + f"?q={word}")
    hits = tab.evaluate(_SEARCH)
    tab.page.wait_for_timeout(500)
    site = html_dir.as_uri()
    summary_fetch = ("Failed to fetch", "CORS policy", "net::ERR_FAILED")
    problems = [
        p
        for p in tab.problems()
        if not (any(s in p for s in summary_fetch) and (site in p or "Failed to fetch" in p))
    ]
    if not any("notebooks/" in hit for hit in hits):
        problems.append(f"search for {word!r} found no chapter (hits: {hits[:5]})")
    return problems


def chapter_table(reports: list[PageReport]) -> str:
    """Per chapter: the share of the main column taken by visible code at every width, the
    code cells shown, the longest, the images captioned and their smallest scale."""
    chapters = [r for r in reports if r.chapter and r.widths]
    if not chapters:
        return ""
    widths = list(chapters[0].widths)
    name = max(len(Path(r.page).name) for r in chapters)
    header = (
        f"{'chapter':<{name}}"
        + "".join(f"{f'code {w}':>10}" for w in widths)
        + "  cells shown  longest  captioned"
        + "".join(f"{f'scale {w}':>11}" for w in widths)
        + f"  {'scrolled ' + '/'.join(map(str, widths)):>18}"
    )
    lines = [
        f"Visible code as a share of the main column's height (at most {MAX_CODE_SHARE:.0%}, "
        f"* over), code cells shown, the longest in lines, images in a captioned figure, and "
        f"the smallest image scale (at least {MIN_IMAGE_SCALE} at {widths[0]} px), and the "
        f"scroll boxes (code, output, equations) whose content is wider than they are:",
        header,
    ]
    for r in chapters:
        first = r.widths[widths[0]]
        row = f"{Path(r.page).name:<{name}}"
        for w in widths:
            share = r.widths[w]["code"]["share"]
            row += f"{share:>9.0%}{'*' if share > MAX_CODE_SHARE else ' '}"
        code, images = first["code"], first["images"]
        captioned = sum(bool(img["caption"]) for img in images)
        row += f"  {code['visible']:>4} of {code['cells']:<3}  {code['longest']:>7}"
        row += f"  {captioned:>4} of {len(images):<3}"
        for w in widths:
            scales = [img["scale"] for img in r.widths[w]["images"] if img["scale"] is not None]
            row += f"{min(scales):>11.2f}" if scales else f"{'-':>11}"
        scrolled = "/".join(str(len(r.widths[w]["scrolling"])) for w in widths)
        row += f"  {scrolled:>18}"
        lines.append(row)
    return "\n".join(lines)


def run(
    html_dir: Path,
    out: Path | None,
    chromium: str,
    search_word: str | None = "rotation",
    pages: list[str] | None = None,
    widths: tuple[int, ...] = WIDTHS,
) -> int:
    html_dir = Path(html_dir).resolve()
    start = time.monotonic()
    failures: list[str] = []
    links = broken_links(html_dir)
    failures += [f"broken link: {line}" for line in links]
    if out is not None:
        out = Path(out)
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
    reports = []
    with open_browser(chromium, widths) as tabs:
        for page in pages if pages is not None else toc_pages():
            began = time.monotonic()
            report = check_page(tabs, html_dir, page, out)
            report.facts["seconds"] = round(time.monotonic() - began, 2)
            reports.append(report)
            status = "ok" if not report.problems else "FAIL"
            extra = ""
            if report.widths:
                overflow = "/".join(str(len(m["overflow"])) for m in report.widths.values())
                extra = f"  overflow {overflow}"
            if report.chapter and report.widths:
                first = next(iter(report.widths.values()))
                extra += (
                    f", math {report.facts.get('mjx', 0)}, images {len(first['images'])}, "
                    f"animations {len(report.facts.get('animations', []))}, "
                    f"code {first['code']['share']:.0%}"
                )
            moved = [e for m in report.widths.values() for e in m.get("explorers", [])]
            if moved:
                extra += (
                    f", explorers {len(moved) // max(1, len(report.widths))} "
                    f"({sum(e['changed'] for e in moved)} of {sum(e['sliders'] for e in moved)} "
                    f"slider moves changed the picture)"
                )
            print(f"{status:4} {page}{extra}  ({report.facts['seconds']} s)", flush=True)
            failures += [f"{page}: {p}" for p in report.problems]
        if search_word:
            search = check_search(tabs[0], html_dir, search_word)
            print(f"{'ok' if not search else 'FAIL':4} search for {search_word!r}")
            failures += [f"search: {p}" for p in search]
    table = chapter_table(reports)
    if out is not None:
        (out / "report.json").write_text(
            json.dumps(
                {
                    "widths": list(widths),
                    "max_code_share": MAX_CODE_SHARE,
                    "min_image_scale": MIN_IMAGE_SCALE,
                    "pages": [r.__dict__ for r in reports],
                    "code_share": {
                        Path(r.page).name: {w: m["code"]["share"] for w, m in r.widths.items()}
                        for r in reports
                        if r.chapter
                    },
                    "broken_links": links,
                    "failures": failures,
                },
                indent=1,
            )
        )
    print(
        f"{len(reports)} pages at {', '.join(f'{w} px' for w in widths)}, "
        f"{sum(r.chapter for r in reports)} chapters, {len(links)} broken links, "
        f"in {time.monotonic() - start:.1f} s"
    )
    moves = [
        (r.page, w, e) for r in reports for w, m in r.widths.items() for e in m.get("explorers", [])
    ]
    if moves:
        first = [e for _, w, e in moves if w == widths[0]]
        print(
            f"explorers: {len(first)} on {len({p for p, _, _ in moves})} pages, "
            f"{sum(e['sliders'] for _, _, e in moves)} slider moves at "
            f"{', '.join(f'{w} px' for w in widths)}, "
            f"{sum(e['changed'] for _, _, e in moves)} changed the picture"
        )
    if table:
        print(table)
    shown: dict[str, int] = {}
    for line in failures:
        page = line.split(": ", 1)[0]
        shown[page] = shown.get(page, 0) + 1
        if shown[page] <= PRINTED_PER_PAGE:
            print("FAIL", line)
    for page, count in shown.items():
        if count > PRINTED_PER_PAGE:
            print(f"FAIL {page}: ... {count - PRINTED_PER_PAGE} more (report.json)")
    if out is not None:
        print(f"screenshots and report.json in {out}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "browser-check")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument(
        "--page", action="append", help="check only this page (e.g. notebooks/09_rope)"
    )
    args = parser.parse_args(argv)
    if not (args.html / "index.html").is_file():
        parser.error(f"no built book at {args.html} (run bash tools/build_book.sh first)")
    if not Path(args.chromium).is_file():
        parser.error(f"no Chromium at {args.chromium} (apt-get install chromium)")
    return run(args.html, args.out, args.chromium, pages=args.page)


if __name__ == "__main__":
    sys.exit(main())
