"""A printed verdict carries the value it measured, in every chapter.

A line of a chapter's stored output that ends in ``True`` or ``False`` must also print a
number: ``largest difference < 1e-12 (allclose: True)``, not ``matrix == pair by pair:
True``. Any number counts, so a threshold printed without its measurement passes: the test
catches bare verdicts, not every weak one. Lines whose value is itself a yes or no (a
structural fact, such as "same tokens, same offset") are listed by chapter. Where the
values depend on the embeddings a run loaded (Llama 3.2's or SmolLM2's rows), the
compared cell prints the verdicts and the next cell, which nbval does not compare, prints
the values: those verdicts count as carrying them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = [f"{n:02d}" for n in range(1, 18)]  # every chapter

YES_OR_NO = {
    "06": ["exactly those with m == n: True"],
    "09": ["same Dog and Cat tokens, same offset in both: True"],
    "12": ["finite at position 1,000,000: True"],
    "13": ["same memory as the argument: True"],
}

VERDICT = re.compile(r"\b(True|False)\)?\s*$")
# a measured value: a number that is not part of a name ("R_7", "PE(p)", "2-D")
NUMBER = re.compile(r"(?<![\w(])(?:[<>] )?\d+(?:\.\d+)?(?:e[+-]\d+)?(?![\w)])")


def _text(cell: dict) -> str:
    outputs = cell.get("outputs", [])
    return "".join("".join(o["text"]) for o in outputs if o.get("output_type") == "stream")


def _printed_lines(number: str) -> list[str]:
    path = next((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    code = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    lines = []
    for cell, after in zip(code, [*code[1:], {}], strict=True):
        values_after = "nbval-ignore-output" in after.get("metadata", {}).get("tags", [])
        if not (values_after and NUMBER.search(_text(after))):
            lines += _text(cell).splitlines()
    return lines


def bare_verdicts(lines: list[str], allowed: list[str]) -> list[str]:
    """The lines that end in a verdict without a number in them, and not allowed."""
    return [
        line
        for line in lines
        if VERDICT.search(line)
        and not NUMBER.search(VERDICT.sub("", line))
        and not any(line.rstrip().endswith(a) for a in allowed)
    ]


@pytest.mark.parametrize("number", CHAPTERS)
def test_every_verdict_prints_its_value(number):
    assert bare_verdicts(_printed_lines(number), YES_OR_NO.get(number, [])) == []


def test_a_bare_verdict_would_be_caught():
    lines = [
        "max error < 1e-12: True",  # has a number: passes
        "matrix == pair by pair: True",  # bare
        "M_5 M_11 == M_16: False",  # names hold digits, but no value: bare
        "largest difference 0 (equal: True)",
    ]
    assert bare_verdicts(lines, []) == [lines[1], lines[2]]
