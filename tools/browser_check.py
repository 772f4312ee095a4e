"""Check the built book in a real browser: headless Chromium, offline, from disk.

    python -m tools.browser_check [--html _build/html] [--out _build/browser-check]

Chromium (Debian's ``chromium``) opens every page of the table of contents from
``file://`` with every network request blocked, and is driven over the DevTools protocol
through a pipe (``--remote-debugging-pipe``), so nothing beyond the standard library and
the browser is needed. On every chapter page it checks that

- the math is typeset: MathJax's output elements (``mjx-container``) are present, every
  math element holds one, and no raw TeX (``$$``, ``\\begin``, ``\\(``, ``\\[``) is left in
  the visible text;
- every figure image has loaded (``naturalWidth > 0``);
- every animation has its player, and pressing its play button advances the frame (the
  slider moves and the image changes);
- the Colab button points at the chapter's own notebook;
- the console shows no errors and no exception, and no request tried the network.

Other pages (intro, appendices) get the math, image, console and network checks. For the
whole site it checks, without the browser, that every internal link points at a file that
exists and, where it has one, at an ``#anchor`` that exists in it; and in the browser that
the search page finds a chapter. A screenshot of every chapter (the whole page at half
scale) is saved under ``--out`` for a person to look at, with ``report.json``.

Exit status 0 when everything passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import html.parser
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml

from tools import setup_cell

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--window-size=1280,900",
    "--remote-debugging-pipe",
]
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
# The DevTools protocol over a pipe
# ---------------------------------------------------------------------------------------


class Browser:
    """Headless Chromium driven through ``--remote-debugging-pipe``.

    Chromium reads NUL-terminated JSON commands on its fd 3 and writes responses and
    events on its fd 4.
    """

    def __init__(self, executable: str, *, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="posenc-chromium-")
        to_child, self._to_browser = os.pipe()
        self._from_browser, from_child = os.pipe()

        def wire() -> None:  # in the child: the pipe ends become fds 3 and 4
            high_in = fcntl.fcntl(to_child, fcntl.F_DUPFD, 10)
            high_out = fcntl.fcntl(from_child, fcntl.F_DUPFD, 10)
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        command = [executable, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=wire,
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        self._ignored: set[int] = set()  # ids of commands whose replies nobody waits for
        self.events: list[dict] = []

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def _write(self, method: str, params: dict | None, session: str | None) -> int:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _read_message(self, deadline: float) -> dict:
        """The next message. A paused request is failed at once (the book must work offline)."""
        while True:
            while b"\0" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no message from Chromium in time")
                ready, _, _ = select.select([self._from_browser], [], [], left)
                if ready:
                    chunk = os.read(self._from_browser, 1 << 20)
                    if not chunk:
                        raise RuntimeError("Chromium closed the DevTools pipe")
                    self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            message = json.loads(raw)
            if message.get("id") in self._ignored:
                self._ignored.discard(message["id"])
                continue
            if message.get("method") == "Fetch.requestPaused":
                params = {
                    "requestId": message["params"]["requestId"],
                    "errorReason": "BlockedByClient",
                }
                self._ignored.add(
                    self._write("Fetch.failRequest", params, message.get("sessionId"))
                )
            return message

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send one command and return its result; events seen meanwhile are queued."""
        sent = self._write(method, params, session)
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == sent:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method: str, session: str, timeout: float | None = None) -> dict:
        """Wait for an event (queued or new) of one session."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method and event.get("sessionId") == session:
                    return self.events.pop(i)
            message = self._read_message(deadline)
            if "method" in message:
                self.events.append(message)

    def poll(self, seconds: float) -> None:
        """Collect events for a while."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                message = self._read_message(deadline)
                if "method" in message:
                    self.events.append(message)
        except TimeoutError:
            pass


class Tab:
    """One page of the browser, with its console errors and blocked requests recorded."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        # every request that is not a file is failed at once and recorded (see _read_message)
        self.send("Fetch.enable", {"patterns": [{"urlPattern": "http*"}, {"urlPattern": "ws*"}]})
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        )

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, self.session)

    def problems(self) -> list[str]:
        """Console errors, exceptions and network attempts recorded since the last call.

        Consumes this tab's queued events; events of other sessions stay queued.
        """
        found, keep = [], []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                keep.append(event)
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                text = " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params.get("args", [])
                )
                found.append(f"console error: {text}")
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                text = details.get("exception", {}).get("description") or details.get("text")
                found.append(f"exception: {text}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                found.append(f"console error: {entry.get('text')} {entry.get('url', '')}".strip())
            elif method == "Fetch.requestPaused":
                found.append(f"network request blocked: {params['request']['url']}")
        self.browser.events = keep
        return found

    def open(self, url: str) -> None:
        """Navigate, wait for the load event, MathJax's typesetting and every image."""
        self.send("Page.navigate", {"url": url})
        self.browser.wait_event("Page.loadEventFired", self.session)
        self.evaluate(_WAIT_FOR_MATHJAX)

    def evaluate(self, expression: str):
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise RuntimeError(details.get("exception", {}).get("description", details.get("text")))
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        """The whole page at half scale, as JPEG.

        The viewport is made as tall as the page for the shot (capturing beyond a normal
        viewport garbles some pages), then set back.
        """
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        height = int(min(size["height"], 16000))
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": height, "deviceScaleFactor": 0.5, "mobile": False},
        )
        try:
            self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            shot = self.send("Page.captureScreenshot", {"format": "jpeg", "quality": 70})
        finally:
            self.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            )
        path.write_bytes(base64.b64decode(shot["data"]))


_WAIT_FOR_MATHJAX = """
(async () => {
  const mathjax = [...document.scripts].some(s => /mathjax/i.test(s.src));
  for (let i = 0; mathjax && i < 200 && !(window.MathJax && MathJax.startup
                                           && MathJax.startup.promise); i++)
    await new Promise(r => setTimeout(r, 25));
  if (mathjax && window.MathJax && MathJax.startup) await MathJax.startup.promise;
  await Promise.all([...document.images].map(img => img.complete ? null :
    new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r);
                       setTimeout(r, 5000); })));
  return true;
})()
"""

_INSPECT = """
(() => {
  const main = document.querySelector('main') || document.body;
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
    .map(img => ({src: img.getAttribute('src').slice(0, 80), ok: img.complete && img.naturalWidth > 0}));
  const animations = [...main.querySelectorAll('.animation')].map(a => ({
    img: !!a.querySelector('img[id^="_anim_img"]'),
    slider: !!a.querySelector('input.anim-slider'),
    play: !!a.querySelector('button[title="Play"]'),
  }));
  const colab = [...document.querySelectorAll('a[href*="colab.research.google.com"]')]
    .map(a => a.href);
  return {mjx: main.querySelectorAll('mjx-container').length, maths: maths.length,
          untypeset, raw, images, animations, colab, title: document.title};
})()
""".replace("RAW_TEX", json.dumps(list(RAW_TEX)))

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
    for (let i = 0; i < 40 && after.frame === before.frame; i++) {
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
    page: str
    chapter: bool
    problems: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)


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


def check_page(tab: Tab, html_dir: Path, page: str, shots: Path | None) -> PageReport:
    chapter = page.startswith("notebooks/")
    report = PageReport(page, chapter)
    path = html_dir / f"{page}.html"
    if not path.is_file():
        report.problems.append(f"page not built: {path}")
        return report
    tab.problems()  # forget what an earlier page left behind
    tab.open(path.as_uri())
    facts = tab.evaluate(_INSPECT)
    report.facts = {k: v for k, v in facts.items() if k not in ("images",)}
    report.facts["images"] = len(facts["images"])
    if facts["untypeset"]:
        report.problems.append(f"math not typeset: {facts['untypeset'][:3]}")
    if facts["raw"]:
        report.problems.append(f"raw TeX visible: {facts['raw'][:3]}")
    bad = [img["src"] for img in facts["images"] if not img["ok"]]
    if bad:
        report.problems.append(f"images not loaded: {bad}")
    if chapter:
        if facts["mjx"] == 0:
            report.problems.append("no typeset math (mjx-container) on a chapter page")
        expected = colab_url(page)
        if expected not in facts["colab"]:
            report.problems.append(f"no Colab link to {expected} (found {facts['colab']})")
        incomplete = [a for a in facts["animations"] if not all(a.values())]
        if incomplete:
            report.problems.append(f"animation player incomplete: {incomplete}")
        if shots is not None:  # before the players move
            tab.screenshot(shots / f"{Path(page).name}.jpg")
        if facts["animations"]:
            played = tab.evaluate(_PLAY)
            report.facts["played"] = played
            stuck = [
                i
                for i, p in enumerate(played)
                if not (p["advanced"] and p["image_changed"] and p["loaded"])
            ]
            if stuck:
                report.problems.append(f"animations that did not advance when played: {stuck}")
    tab.browser.poll(0.2)
    report.problems += tab.problems()
    return report


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
    tab.browser.poll(0.5)
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


def run(html_dir: Path, out: Path | None, chromium: str, search_word: str = "rotation") -> int:
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
    browser = Browser(chromium)
    reports = []
    try:
        tab = Tab(browser)
        for page in toc_pages():
            began = time.monotonic()
            report = check_page(tab, html_dir, page, out)
            report.facts["seconds"] = round(time.monotonic() - began, 2)
            reports.append(report)
            status = "ok" if not report.problems else "FAIL"
            extra = ""
            if report.chapter:
                extra = (
                    f"  math {report.facts.get('mjx', 0)}, images {report.facts.get('images', 0)}, "
                    f"animations {len(report.facts.get('animations', []))}"
                )
            print(f"{status:4} {page}{extra}  ({report.facts['seconds']} s)", flush=True)
            failures += [f"{page}: {p}" for p in report.problems]
        search = check_search(tab, html_dir, search_word)
        print(f"{'ok' if not search else 'FAIL':4} search for {search_word!r}")
        failures += [f"search: {p}" for p in search]
    finally:
        browser.close()
    if out is not None:
        (out / "report.json").write_text(
            json.dumps(
                {
                    "pages": [r.__dict__ for r in reports],
                    "broken_links": links,
                    "failures": failures,
                },
                indent=1,
            )
        )
    print(
        f"{len(reports)} pages, {sum(r.chapter for r in reports)} chapters, "
        f"{len(links)} broken links, in {time.monotonic() - start:.1f} s"
    )
    for line in failures:
        print("FAIL", line)
    if out is not None:
        print(f"screenshots and report.json in {out}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "browser-check")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args(argv)
    if not (args.html / "index.html").is_file():
        parser.error(f"no built book at {args.html} (run bash tools/build_book.sh first)")
    if not Path(args.chromium).is_file():
        parser.error(f"no Chromium at {args.chromium} (apt-get install chromium)")
    return run(args.html, args.out, args.chromium)


if __name__ == "__main__":
    sys.exit(main())
