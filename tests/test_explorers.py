"""The explorers of posenc.book.explorers: their HTML (deterministic, light, self-contained,
shipped as package data) and, in Debian's Chromium through Playwright, their numbers.

The browser tests write a page with all five explorers (posenc.book.explorers.page), open it
from ``file://`` with every network request blocked (tools/browser_check.Tab), set the
sliders over a grid, read every ``data-value`` the explorer shows and compare it with the
posenc functions its chapter uses: to 1e-9 relative, with an absolute floor of 1e-12 times
the quantity's natural size where it crosses zero (a sine at a multiple of pi)."""

import gzip
import html
import itertools
import math
import random
import re
import shutil
from fnmatch import fnmatch
from pathlib import Path

import pytest
import torch

import posenc as pe
from posenc.book import explorers as ex
from posenc.book import frequencies as fq
from posenc.book import rope_views, sinusoidal_views, waves
from tools import browser_check

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
RTOL = 1e-9
FLOOR = 1e-12
MAX_BYTES = 100_000
"""The most a page may grow by for its explorers."""

ALL = {
    "sine-wave": ex.sine_wave_explorer,
    "encoding-heatmap": ex.encoding_heatmap_explorer,
    "rotation": ex.rotation_matrix_explorer,
    "rope": ex.rope_explorer,
    "scaling": ex.scaling_explorer,
}


def close(actual: float, expected: float, scale: float = 1.0) -> bool:
    return abs(actual - expected) <= RTOL * abs(expected) + FLOOR * scale


# ---------------------------------------------------------------------------------------
# The HTML, without a browser
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_explorer_html_is_the_same_every_time_and_self_contained(name):
    text = ALL[name]().html
    assert text == ALL[name]().html
    assert f'data-explorer="{name}"' in text
    assert not re.search(r"[0-9a-f]{32}", text), "no random ids"
    assert not re.search(r"(src|href)\s*=", text), "nothing loaded from elsewhere"
    assert "window.parent" not in text and "require(" not in text
    assert text.count("</script>") == 2  # the data and the code, nothing else


@pytest.mark.parametrize("name", ALL)
def test_explorer_is_light(name):
    size = len(ALL[name]().html.encode())
    packed = len(gzip.compress(ALL[name]().html.encode(), mtime=0))
    print(f"{name}: {size:,} bytes, {packed:,} gzipped")
    assert size < MAX_BYTES / 2 and packed < size / 2


def test_chapters_grow_by_less_than_100_kb_for_their_explorers():
    import json

    found = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        size = 0
        for cell in nb["cells"]:
            for output in cell.get("outputs", []):
                text = "".join(output.get("data", {}).get("text/html", []))
                if 'class="pe-explorer"' in text:
                    size += len(text.encode())
        if size:
            found[path.stem] = size
    print(found)
    assert found, "no chapter shows an explorer"
    assert all(size < MAX_BYTES for size in found.values()), found


def test_assets_are_package_data():
    """A non-editable install ships every file the explorers read."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["posenc.book"]
    folder = ROOT / "posenc" / "book" / "explorer_assets"
    assets = sorted(p.relative_to(folder.parent).as_posix() for p in folder.iterdir())
    assert {"explorer_assets/toolkit.js", "explorer_assets/toolkit.css"} <= set(assets)
    for name in ALL:
        assert f"explorer_assets/{name.replace('-', '_')}.js" in assets
    for asset in assets:
        assert any(fnmatch(asset, p) for p in patterns), f"{asset} is not in package-data"


def test_page_without_explorers_shows_all_five():
    text = ex.page()
    assert all(f'data-explorer="{name}"' in text for name in ALL)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: ex.sine_wave_explorer(amplitude=0.15), ValueError, "amplitude must be one of"),
        (lambda: ex.sine_wave_explorer(frequency="2"), TypeError, "frequency must be a real"),
        (lambda: ex.encoding_heatmap_explorer(dim=6), ValueError, "dim must be one of"),
        (lambda: ex.encoding_heatmap_explorer(dim=7), ValueError, "dim"),
        (lambda: ex.encoding_heatmap_explorer(position=50), ValueError, "must lie in the grid"),
        (lambda: ex.rotation_matrix_explorer(vector=(1.0,)), ValueError, "vector"),
        (lambda: ex.rotation_matrix_explorer(angle=7.0), ValueError, "angle must be one of"),
        (lambda: ex.rope_explorer(m=65), ValueError, "m must be one of"),
        (lambda: ex.rope_explorer(pair=4), ValueError, "pair must be one of"),
        (lambda: ex.rope_explorer(m=1.5), TypeError, "m must be"),
        (lambda: ex.scaling_explorer(method="PI"), ValueError, "method must be one of"),
        (lambda: ex.scaling_explorer(pair=64), ValueError, "pair must be below"),
        (lambda: ex.scaling_explorer(factor=5.0), ValueError, "factor must be one of"),
        (lambda: ex.page("x"), TypeError, "explorers[0] must be an Explorer"),
    ],
)
def test_explorers_validate_their_arguments(call, error, words):
    with pytest.raises(error, match=re.escape(words)):
        call()


# ---------------------------------------------------------------------------------------
# In the browser
# ---------------------------------------------------------------------------------------

_SET_AND_READ = """
([name, settings]) => {
  const root = document.querySelector(`.pe-explorer[data-explorer="${name}"]`);
  return settings.map(setting => {
    for (const [key, index] of Object.entries(setting)) {
      const input = root.querySelector(`input[data-key="${key}"]`);
      input.value = String(index);
      input.dispatchEvent(new Event('input', {bubbles: true}));
    }
    const read = {};
    for (const el of root.querySelectorAll('output[data-key], dd[data-key]'))
      read[el.dataset.key] = el.dataset.value;
    const labels = {};
    for (const el of root.querySelectorAll('output[data-key]')) labels[el.dataset.key] = el.textContent;
    return {read, labels, picture: root.querySelector('svg').outerHTML};
  });
}
"""


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module (Playwright's sync API runs one at a time)."""
    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=browser_check.CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def tab(browser, tmp_path_factory):
    """All five explorers on one page at 420 px, from disk, the network blocked."""
    path = tmp_path_factory.mktemp("explorers") / "explorers.html"
    path.write_text(ex.page(*(make() for make in ALL.values())))
    tab = browser_check.Tab(browser, 420)
    tab.open(path.as_uri())
    yield tab
    assert tab.problems() == []
    tab.context.close()


def grid(explorer: ex.Explorer, per_slider: int, most: int, seed: int = 0) -> list[dict]:
    """Settings of every slider: a few indices each (both ends and the start included; every
    value of a slider with at most 5), shuffled, at most ``most``."""
    choices = []
    for spec in explorer.sliders.values():
        count = len(spec["values"])
        picks = {0, count - 1, spec["index"]}
        picks |= set(random.Random(seed).sample(range(count), min(per_slider, count)))
        choices.append(sorted(picks) if count > 5 else list(range(count)))
    settings = list(itertools.product(*choices))
    random.Random(seed).shuffle(settings)
    return [dict(zip(explorer.sliders, s, strict=True)) for s in settings[:most]]


def drive(tab, name: str, settings: list[dict]) -> list[dict]:
    results = tab.evaluate(_SET_AND_READ, [name, settings])
    assert tab.problems() == []
    for r in results:
        r["values"] = {k: float(v) for k, v in r["read"].items()}
    return results


@needs_chromium
def test_sine_wave_matches_posenc(tab):
    results = drive(tab, "sine-wave", grid(ex.sine_wave_explorer(), 5, 150))
    for r in results:
        v = r["values"]
        a, f, phi, t = v["amplitude"], v["frequency"], v["phase"], v["t"]
        x = torch.tensor(t, dtype=torch.float64)
        assert close(v["sin"], waves.wave(x, a, f, phi).item(), a), r
        assert close(v["cos"], waves.wave(x, a, f, phi + math.pi / 2).item(), a), r
        assert close(v["angle"], f * t + phi, 1.0), r
        assert close(v["period"], waves.period(f)), r
    print(f"sine-wave: {len(results)} settings, 4 readouts each")


@needs_chromium
def test_encoding_heatmap_matches_posenc(tab):
    results = drive(tab, "encoding-heatmap", grid(ex.encoding_heatmap_explorer(), 4, 150))
    for r in results:
        v = r["values"]
        T, D, base = int(v["positions"]), int(v["dim"]), v["base"]
        p, j = int(v["position"]), int(v["feature"])
        assert p < T and j < D  # the entry sliders follow the grid
        w = pe.sinusoidal_frequencies(D, base)  # float64 [D/2]
        angle = torch.tensor(float(p), dtype=torch.float64) * w[j // 2]
        expected = (angle.sin() if j % 2 == 0 else angle.cos()).item()
        assert close(v["value"], expected), r
        # the float32 table of the chapter holds the same number, rounded once
        assert abs(v["value"] - pe.sinusoidal_encoding(T, D, base)[p, j].item()) <= 6e-8, r
        assert int(v["pair"]) == j // 2
        assert close(v["frequency"], w[j // 2].item()), r
        assert close(v["wavelength"], sinusoidal_views.wavelengths(D, base)[j // 2].item()), r
    print(f"encoding-heatmap: {len(results)} settings")


@needs_chromium
def test_rotation_matches_posenc(tab):
    results = drive(tab, "rotation", grid(ex.rotation_matrix_explorer(), 8, 150))
    for r in results:
        v = r["values"]
        R = pe.rotation.rotation_matrix(torch.tensor(math.radians(v["angle"]), dtype=torch.float64))
        vec = torch.tensor([v["x"], v["y"]], dtype=torch.float64)
        rv = R @ vec
        size = max(vec.norm().item(), 1.0)
        for key, value in (("r00", R[0, 0]), ("r01", R[0, 1]), ("r10", R[1, 0]), ("r11", R[1, 1])):
            assert close(v[key], value.item()), (key, r)
        assert close(v["rv0"], rv[0].item(), size) and close(v["rv1"], rv[1].item(), size), r
        assert close(v["norm_v"], vec.norm().item()) and close(v["norm_rv"], rv.norm().item()), r
    print(f"rotation: {len(results)} settings")


@needs_chromium
def test_rope_playground_matches_posenc(tab):
    q, k = rope_views.playground_vectors(8)
    size = (q.norm() * k.norm()).item()
    results = drive(tab, "rope", grid(ex.rope_explorer(), 6, 150))
    for r in results:
        v = r["values"]
        m, n, s, pair = (int(v[key]) for key in ("m", "n", "shift", "pair"))
        state = rope_views.playground_state(m + s, n + s, pair)
        assert (v["query_position"], v["key_position"], v["offset"]) == (m + s, n + s, n - m)
        assert close(v["theta"], state["theta"]), r
        assert close(v["angle"], state["angle"]), r
        assert close(v["pair_score"], state["pair_score"], size), r
        assert close(v["score"], state["score"], size), r
    print(f"rope: {len(results)} settings")


@needs_chromium
@pytest.mark.parametrize(("m", "n", "pair"), [(2, 5, 0), (0, 64, 1), (40, 3, 3), (7, 7, 2)])
def test_rope_score_stays_fixed_as_m_and_n_move_together(tab, m, n, pair):
    q, k = rope_views.playground_vectors(8)
    size = (q.norm() * k.norm()).item()
    # the shift slider over its whole range, then m and n themselves moved by the same step
    settings = [{"m": m, "n": n, "pair": pair, "shift": s} for s in range(65)]
    settings += [
        {"m": m + d, "n": n + d, "pair": pair, "shift": 0}
        for d in range(-min(m, n), 65 - max(m, n))
    ]
    results = drive(tab, "rope", settings)
    scores = [r["values"]["score"] for r in results]
    pair_scores = [r["values"]["pair_score"] for r in results]
    offsets = {r["values"]["offset"] for r in results}
    assert offsets == {n - m}
    spread = max(scores) - min(scores)
    print(f"m={m} n={n}: {len(scores)} settings, score spread {spread:.1e} (|q||k| = {size:.2f})")
    assert spread <= 1e-12 * size and max(pair_scores) - min(pair_scores) <= 1e-12 * size
    # and the pictures did move: the rotated pairs turn while the score holds
    assert len({r["picture"] for r in results}) > len(results) // 2
    # a different offset gives a different score: the test can see a change
    other = drive(tab, "rope", [{"m": m, "n": (n + 1) % 65, "pair": pair, "shift": 0}])
    assert abs(other[0]["values"]["score"] - scores[0]) > 1e-6


@needs_chromium
def test_scaling_matches_posenc(tab):
    results = drive(tab, "scaling", grid(ex.scaling_explorer(), 4, 200))
    methods = set()
    for r in results:
        v = r["values"]
        base, D, L, s, pair = (
            v["base"],
            int(v["dim"]),
            int(v["train_length"]),
            v["factor"],
            int(v["pair"]),
        )
        method = ex.SCALING_METHODS[int(v["method"])]
        methods.add(method)
        assert r["labels"]["method"] == method and pair < D // 2
        freqs = fq.scaled_frequencies(D, base, s, L)
        g, f = freqs[method], freqs["RoPE"]
        over = fq.angle_overshoot(round(s * (L - 1)), L, g, f)
        row = fq.scaling_table({"RoPE": f, method: g}, s, L).rows[-1]
        assert int(v["kept"]) == int(row[1]) and int(v["divided"]) == int(row[2]), (row, r)
        assert int(v["unseen"]) == int(row[4]) == int((over > 1 + 1e-9).sum()), (row, r)
        assert close(v["largest"], over.max().item()), r
        assert close(v["frequency"], g[pair].item()), r
        assert close(v["period"], fq.periods(g)[pair].item()), r
        assert close(v["overshoot"], over[pair].item()), r
    assert methods == set(ex.SCALING_METHODS)
    print(f"scaling: {len(results)} settings")


@needs_chromium
@pytest.mark.parametrize("name", ALL)
def test_every_slider_changes_the_picture(tab, name):
    explorer = ALL[name]()
    start = {key: spec["index"] for key, spec in explorer.sliders.items()}
    before = drive(tab, name, [start])[0]["picture"]
    for key, spec in explorer.sliders.items():
        moved = dict(start, **{key: 0 if spec["index"] else len(spec["values"]) - 1})
        after = drive(tab, name, [moved, start])
        assert after[0]["picture"] != before, f"{name}: moving {key} left the picture alone"
        assert after[1]["picture"] == before


@needs_chromium
def test_explorer_runs_in_a_sandboxed_frame(tab, tmp_path):
    """As in Colab, whose outputs live in a frame of another origin: no access to the page
    around it, scripts allowed."""
    inner = ex.page(ex.rope_explorer())
    outer = tmp_path / "frame.html"
    outer.write_text(
        '<!DOCTYPE html><html><body style="margin:0">'
        f'<iframe sandbox="allow-scripts" style="width:400px;height:900px;border:0" srcdoc="{html.escape(inner)}">'
        "</iframe></body></html>"
    )
    page = tab.context.new_page()  # the tab's context: the network blocked
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(outer.as_uri())
        frame = page.frames[1]
        frame.wait_for_selector(".pe-explorer[data-ready] svg path")
        before = frame.evaluate("document.querySelector('dd[data-key=score]').dataset.value")
        frame.locator('input[data-key="shift"]').press("End")
        frame.locator('input[data-key="m"]').press("ArrowRight")
        after = frame.evaluate(
            "[document.querySelector('dd[data-key=score]').dataset.value,"
            " document.querySelector('output[data-key=shift]').dataset.value,"
            " document.querySelector('.pe-explorer').scrollWidth]"
        )
    finally:
        page.close()
    assert tab.problems() == [] and errors == []
    assert after[1] == "64" and after[0] != before and after[2] <= 400


# ---------------------------------------------------------------------------------------
# tools/browser_check.py on explorers
# ---------------------------------------------------------------------------------------


def _check(browser, tmp_path, body: str, widths=(420,)) -> browser_check.PageReport:
    (tmp_path / "book").mkdir(exist_ok=True)
    (tmp_path / "book" / "x.html").write_text(body)
    shots = tmp_path / "shots"
    shots.mkdir(exist_ok=True)
    tabs = [browser_check.Tab(browser, width) for width in widths]
    try:
        return browser_check.check_page(tabs, tmp_path, "book/x", shots)
    finally:
        for tab in tabs:
            tab.context.close()


@needs_chromium
def test_browser_check_moves_every_slider_of_every_explorer(browser, tmp_path):
    report = _check(browser, tmp_path, ex.page(), widths=(1400, 420))
    assert report.problems == []
    for width in (1400, 420):
        moved = report.widths[width]["explorers"]
        assert [e["name"] for e in moved] == list(ALL)
        sliders = sum(len(make().sliders) for make in ALL.values())
        assert sum(e["sliders"] for e in moved) == sum(e["changed"] for e in moved) == sliders
    assert (tmp_path / "shots" / "x-420-explorer4-moved.jpg").is_file()


@needs_chromium
@pytest.mark.parametrize(
    ("body", "words"),
    [
        # a slider that changes nothing
        (
            '<div class="pe-explorer" data-explorer="still" data-ready>'
            '<svg width="100" height="50"><circle r="5" cx="9" cy="9"/></svg>'
            '<input type="range" min="0" max="4" value="2"></div>',
            "moving slider #1 left the picture unchanged",
        ),
        # an explorer wider than a phone's column
        (
            '<div class="pe-explorer" data-explorer="wide" data-ready style="width: 900px">'
            '<svg width="900" height="50"><circle r="5" cx="9" cy="9"/></svg></div>',
            "is wider than the column",
        ),
        # an explorer whose script never ran
        ('<div class="pe-explorer" data-explorer="dead"></div>', "did not start"),
        # one that asks the network for something
        (
            '<div class="pe-explorer" data-explorer="online" data-ready>'
            '<svg width="100" height="50"><circle r="5" cx="9" cy="9"/></svg>'
            '<input type="range" min="0" max="4" value="2" '
            "oninput=\"fetch('https://example.org/x').catch(() => 0);"
            "document.querySelector('circle').setAttribute('cx', this.value * 9)\"></div>",
            "network request blocked",
        ),
    ],
)
def test_browser_check_fails_a_broken_explorer(browser, tmp_path, body, words):
    report = _check(browser, tmp_path, f"<html><body><main>{body}</main></body></html>")
    assert any(words in p for p in report.problems), report.problems


@needs_chromium
def test_explorer_takes_the_theme_colours(browser, tmp_path):
    """pydata-sphinx-theme marks dark mode as html[data-theme=dark]; the explorer follows."""
    colours = {}
    for theme in ("light", "dark"):
        path = tmp_path / f"{theme}.html"
        path.write_text(ex.page(ex.rotation_matrix_explorer(), theme=theme))
        tab = browser_check.Tab(browser, 420)
        try:
            tab.open(path.as_uri())
            colours[theme] = tab.evaluate(
                "() => { const r = document.querySelector('.pe-explorer');"
                " const arrow = r.querySelector('svg .pe-orange');"
                " return [getComputedStyle(r).color, getComputedStyle(r).backgroundColor,"
                " getComputedStyle(arrow).stroke]; }"
            )
            assert tab.problems() == []
        finally:
            tab.context.close()
    assert colours["light"][0] == "rgb(31, 36, 48)"  # the book's ink, posenc.display.plots.COLORS
    assert all(a != b for a, b in zip(colours["light"], colours["dark"], strict=True)), colours


_INSERT = {
    # JupyterLab: the output's HTML set as innerHTML, then each script made anew in place
    "in place": "s => { const n = document.createElement('script');"
    " for (const a of s.attributes) n.setAttribute(a.name, a.value);"
    " n.textContent = s.textContent; s.replaceWith(n); }",
    # the classic notebook (jQuery's html()): each script run from the head, away from the output
    "from the head": "s => { if (s.type) return; const n = document.createElement('script');"
    " n.textContent = s.textContent; document.head.appendChild(n); n.remove(); }",
}


@needs_chromium
@pytest.mark.parametrize("how", _INSERT)
def test_explorer_starts_when_a_front_end_inserts_it(browser, tmp_path, how):
    """Front ends insert an output's HTML and run its scripts in their own ways; the explorer
    finds its root either way (document.currentScript, else its name)."""
    path = tmp_path / "host.html"
    path.write_text("<!DOCTYPE html><html><body><main><div id='out'></div></main></body></html>")
    tab = browser_check.Tab(browser, 420)
    try:
        tab.open(path.as_uri())
        started = tab.evaluate(
            "([html, run]) => { const out = document.getElementById('out'); out.innerHTML = html;"
            " out.querySelectorAll('script').forEach(eval(run));"
            " const root = out.querySelector('.pe-explorer');"
            " return [root.hasAttribute('data-ready'), !!root.querySelector('svg path'),"
            " root.querySelectorAll('input[type=range]').length]; }",
            [ex.rotation_matrix_explorer().html, _INSERT[how]],
        )
        assert tab.problems() == []
    finally:
        tab.context.close()
    assert started == [True, True, 3]
