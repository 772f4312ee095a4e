"""Every cross-reference in the chapters points at a chapter that holds what it promises.

- "chapter N" (and "chapters N and M") names a chapter of the book;
- {numref}`label` names a figure that exists, in the chapter its label's number says
  (``fig-12-...`` lives in chapter 12);
- a reference that promises a measurement of a trained model past its training length,
  or a training run, points at the chapters that hold one (15 measures a trained model,
  16 trains models), not at a chapter that only measures angles or vectors.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# "chapter 7", "Chapter 12", "chapters 5 and 6", "chapters 12, 15 and 16"
CHAPTER_REF = re.compile(r"\b[Cc]hapters? (\d+)((?:, \d+)*(?:,? (?:and|or|to) \d+)?)")
NUMREF = re.compile(r"\{numref\}`(?:[^`<]*<)?([^`>]+)>?`")

# what a reference promises -> the chapters that hold it
PROMISES = {
    "trains models": (
        re.compile(r"\btrain(?:s|ing)? (?:a |one |small )?(?:small )?models?\b"),
        {16},
    ),
    "measures a model past its training length": (
        re.compile(
            r"\bmeasures?\b[^.]*\b(?:models?|generali[sz]\w*)\b[^.]*\btraining length|"
            r"\bmeasures?\b[^.]*\b(?:past|beyond) (?:its|their|the) training length|"
            r"\bwhether (?:it|RoPE|a model) works past"
        ),
        {15, 16},
    ),
}


def _number(path: Path) -> int:
    return int(path.name[:2])


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _prose(path: Path) -> str:
    return "\n".join("".join(c["source"]) for c in _cells(path) if c["cell_type"] == "markdown")


def _labels() -> dict[str, int]:
    """Every figure label, and the chapter that defines it."""
    found: dict[str, int] = {}
    for path in CHAPTERS:
        for cell in _cells(path):
            figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
            names = [figure["name"]] if "name" in figure else []
            source = "".join(cell["source"])
            names += re.findall(r"^:name:\s*(\S+)", source, re.M)
            names += re.findall(r"^\((\S+)\)=\s*$", source, re.M)
            for name in names:
                assert name not in found, f"label {name} defined twice"
                found[name] = _number(path)
    return found


def _references(text: str):
    """(chapter numbers, the clause after the reference up to the next one or the sentence end)."""
    for sentence in re.split(r"(?<=[.;:!?])\s+", text.replace("\n", " ")):
        matches = list(CHAPTER_REF.finditer(sentence))
        for i, m in enumerate(matches):
            numbers = [int(m.group(1)), *map(int, re.findall(r"\d+", m.group(2)))]
            end = matches[i + 1].start() if i + 1 < len(matches) else len(sentence)
            yield numbers, sentence[m.start() : end]


def test_the_scan_finds_the_chapters_and_their_references():
    assert len(CHAPTERS) >= 17
    assert sum(1 for path in CHAPTERS for _ in _references(_prose(path))) > 100
    assert len(_labels()) > 40


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_references_name_chapters_that_exist(path):
    existing = {_number(p) for p in CHAPTERS}
    for numbers, clause in _references(_prose(path)):
        missing = [n for n in numbers if n not in existing]
        assert not missing, f"{path.name}: {clause!r} names no chapter of the book"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_numrefs_name_figures_of_the_chapter_their_label_says(path):
    labels = _labels()
    for label in NUMREF.findall(_prose(path)):
        assert label in labels, f"{path.name}: {{numref}} {label} is defined nowhere"
        number = re.match(r"[a-z]+-(\d+)-", label)
        assert number, f"{path.name}: label {label} does not say its chapter (fig-NN-...)"
        assert labels[label] == int(number.group(1)), (
            f"{path.name}: {label} is defined in chapter {labels[label]}"
        )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_reference_points_at_a_chapter_that_holds_what_it_promises(path):
    for numbers, clause in _references(_prose(path)):
        for promise, (pattern, holders) in PROMISES.items():
            if pattern.search(clause):
                assert set(numbers) <= holders, (
                    f"{path.name}: {clause!r} promises that chapter {numbers} {promise}; "
                    f"chapters {sorted(holders)} do"
                )


def test_a_wrong_promise_would_be_caught():
    # what chapter 2 once said, when chapter 12 measured angles only
    text = "Chapter 12 measures what happens to RoPE past its training length."
    (numbers, clause), *_ = _references(text)
    pattern, holders = PROMISES["measures a model past its training length"]
    assert pattern.search(clause) and not set(numbers) <= holders
    text = "Whether it generalises is another matter: chapter 12 measures a model past its training length."
    (numbers, clause), *_ = _references(text)
    pattern, holders = PROMISES["measures a model past its training length"]
    assert pattern.search(clause) and not set(numbers) <= holders
    text = "In chapter 16 models are compared; chapter 9 trains small models from scratch."
    found = [(n, c) for n, c in _references(text) if PROMISES["trains models"][0].search(c)]
    assert [n for n, _ in found] == [[9]]
