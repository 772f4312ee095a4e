"""Marks the tests whose checks compare timings, so they can run alone.

Chapter 13 prints conclusions drawn from timings measured while it runs (fresh memory costs
more than a copy, the fast path beats transformers, ...). They hold with wide margins on an
idle machine, but not while another test process competes for the same cores: that is why
``tools/run_tests.sh`` runs the tests marked ``timed`` by themselves, after the others.
"""

from pathlib import Path

import pytest

TIMED = {Path("notebooks/13_fast_rope.ipynb")}
ROOT = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        try:
            path = Path(item.path).resolve().relative_to(ROOT)
        except ValueError:
            continue
        if path in TIMED:
            item.add_marker(pytest.mark.timed)
