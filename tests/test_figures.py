"""Every figure and animation of the book, measured against the book's figure rules.

Each public function that draws (a name ending in ``_figure`` or ``_animation``, and
``plots.token_heatmap`` / ``plots.overlay_vectors``) is called with the valid arguments of
the API walk, and its figure is measured as the book displays it (:func:`posenc.display.plots.layout`):
as wide as the text column, no text under ``MIN_TEXT_PX``, no panel under ``MIN_PANEL_PX``,
at most ``MAX_LINES`` lines per axes.
"""

import matplotlib as mpl
import matplotlib.pyplot as plt
import pytest
from matplotlib.animation import Animation
from test_api_validation import TARGETS, valid_call

from posenc.display import plots

pytestmark = pytest.mark.filterwarnings("ignore:Animation was deleted without rendering")

DRAWING = [
    t
    for t in TARGETS
    if not t.is_method
    and (
        t.qualname.endswith(("_figure", "_animation"))
        or t.qualname in ("plots.token_heatmap", "plots.overlay_vectors")
    )
]


def _figure_of(result):
    if isinstance(result, mpl.figure.Figure):
        return result
    if isinstance(result, Animation):
        return result._fig
    if isinstance(result, mpl.axes.Axes):
        return result.figure
    if isinstance(result, tuple):
        return next(_figure_of(r) for r in result if _figure_of(r) is not None)
    return None


def test_the_walk_finds_the_drawing_functions():
    names = {t.qualname for t in DRAWING}
    assert {"context.terms_figure", "waves.circle_animation", "plots.token_heatmap"} <= names
    assert len(names) >= 30


@pytest.mark.parametrize("target", DRAWING, ids=str)
def test_every_figure_follows_the_book_style(target):
    func, kwargs = valid_call(target)
    fig = _figure_of(func(**kwargs))
    assert fig is not None, f"{target} returned no figure"
    try:
        found = plots.layout(fig)
        assert found.problems() == [], f"{target}: {found.problems()}"
        assert fig.get_figwidth() == pytest.approx(plots.FIGURE_WIDTH)
    finally:
        plt.close(fig)


def test_the_rules_catch_what_they_forbid():
    fig, ax = plots.figure()
    ax.text(0, 0, "tiny", fontsize=5)
    for i in range(plots.MAX_LINES + 1):
        ax.plot([0, 1], [i, i])
    problems = plots.layout(fig).problems()
    plt.close(fig)
    assert any("tiny" in p for p in problems)
    assert any("lines" in p for p in problems)
    wide = plt.figure(figsize=(12, 3))
    wide.add_subplot(1, 4, 1)
    problems = plots.layout(wide).problems()
    plt.close(wide)
    assert any("wider than" in p for p in problems) and any("panel" in p for p in problems)


def test_shown_figures_are_png_at_twice_the_column_width(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.get_ipython", lambda: object())
    monkeypatch.setattr("IPython.display.display", shown.append)
    fig, _ = plots.figure()
    plots.show(fig)
    (image,) = shown
    assert image.width == plots.COLUMN_PX
    assert image.data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(image.data[16:20], "big") == plots.COLUMN_PX * plots.PNG_SCALE
    assert not plt.fignum_exists(fig.number)


def test_colorbar_below_sits_under_the_panels_without_moving_them():
    fig, axes = plots.figure(1, 2)
    image = axes[0].imshow([[0.0, 1.0]])
    fig.canvas.draw()
    before = [ax.get_position().x0 for ax in axes]
    bar = plots.colorbar_below(image, axes, label="value")
    fig.canvas.draw()
    assert bar.ax.get_position().y1 < min(ax.get_position().y0 for ax in axes)
    assert [ax.get_position().x0 for ax in axes] == pytest.approx(before, abs=0.05)
    other, _ = plots.figure()
    with pytest.raises(TypeError, match="one figure"):
        plots.colorbar_below(image, [axes[0], other.axes[0]])
    plt.close(fig)
    plt.close(other)
