"""tools.code_size counts code as the limits on the package's size mean it, and the limits that
hold are kept: the core at most 1,800 code lines, no module of the fast path over 400."""

from __future__ import annotations

import pytest

from tools import code_size


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ('"""Module doc."""\n', 0),
        ("# a comment\n\n   \n", 0),
        ("x = 1  # counted once\n", 1),
        ('def f():\n    """Doc\n    on two lines."""\n    return 1\n', 2),
        ('class A:\n    """Doc."""\n\n    x = 2\n', 2),
        ('SOURCE = """\nint main() {\n  return 0;\n}\n"""\n', 5),  # C in a string counts
        ("y = (\n    1,\n    2,\n)\n", 4),
    ],
)
def test_code_lines_leave_out_docstrings_comments_and_blanks(source, lines):
    assert code_size.code_lines(source) == lines


def test_every_module_is_in_one_layer():
    layers, modules = code_size.measure()
    assert sum(layers.values()) == sum(n for n, _ in modules)
    paths = [p for _, p in modules]
    assert len(paths) == len(set(paths))
    assert "posenc/display/plots.py" in paths and "posenc/data/llama.py" in paths


def test_the_core_is_positional_encoding_at_most_1800_lines():
    layers, _ = code_size.measure()
    assert layers["core posenc/*.py"] <= 1800, layers


def test_no_module_of_the_fast_path_is_over_400_lines():
    _, modules = code_size.measure()
    fast = {p: n for n, p in modules if p.startswith("posenc/fast/")}
    assert fast and max(fast.values()) <= 400, fast


def test_the_command_prints_each_layer(capsys):
    code_size.main(["--top", "3"])
    out = capsys.readouterr().out
    for name, *_ in code_size.LAYERS:
        assert name in out
    assert out.count("posenc/") >= 3
