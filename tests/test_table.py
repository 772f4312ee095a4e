"""Tables of results: the HTML and the text forms say the same, group headings included."""

import re

import pytest

from posenc.display.table import Table

COLUMNS = ["case", "time (µs)", "half", "interleaved in place", "eager", "compiled"]
GROUPS = [("", 2), ("posenc", 2), ("transformers", 2)]
ROWS = [["B=1, T=4k", "22.2", "0.11", "0.13", "0.10", "0.13"]]


def test_each_group_heading_spans_its_columns_in_html():
    page = Table(COLUMNS, ROWS, caption="Speeds.", groups=GROUPS)._repr_html_()
    first_row = re.search(r"<thead><tr>(.*?)</tr>", page).group(1)
    spans = re.findall(r'<th colspan="(\d+)"[^>]*>([^<]*)</th>', first_row)
    assert [(heading, int(span)) for span, heading in spans] == GROUPS
    assert page.count("<tr>") == 3  # the groups, the columns, one row


@pytest.mark.parametrize("groups", [GROUPS, [("", 2), ("wider than its column", 1), ("", 3)]])
def test_each_group_heading_stands_over_its_columns_in_text(groups):
    """In the text form every heading lies between the columns on either side of its group,
    which move apart when a heading is wider than its columns."""
    text = repr(Table(COLUMNS, ROWS, caption="Speeds.", groups=groups)).splitlines()
    headings, lines = text[1], text[2:]
    cells = [[m.span() for m in re.finditer(r"\S+(?: \S+)*", line)] for line in lines]
    assert all(len(spans) == len(COLUMNS) for spans in cells)
    left = [min(spans[j][0] for spans in cells) for j in range(len(COLUMNS))]
    right = [max(spans[j][1] for spans in cells) for j in range(len(COLUMNS))]
    first = 0
    for heading, span in groups:
        if heading:
            at = headings.index(heading)
            assert first == 0 or right[first - 1] < at
            assert first + span == len(COLUMNS) or at + len(heading) < left[first + span]
        first += span
    assert [c.strip() for c in re.split(r"\s{2,}", lines[0])] == COLUMNS


@pytest.mark.parametrize(
    "groups, error, match",
    [
        ([("posenc", 2)], ValueError, "span the 6 columns, got spans adding up to 2"),
        ([("posenc", 0), ("", 6)], ValueError, r"groups\[0\] must span at least one column"),
        ([("posenc", 6, 1)], TypeError, r"groups\[0\] must be a \(heading, span\) pair"),
        ([("posenc", True), ("", 5)], TypeError, r"groups\[0\] must be a \(heading, span\)"),
        ("posenc", TypeError, "groups"),
    ],
)
def test_groups_that_do_not_cover_the_columns_are_refused(groups, error, match):
    with pytest.raises(error, match=match):
        Table(COLUMNS, ROWS, caption="Speeds.", groups=groups)


def test_a_missing_number_keeps_its_column_right_aligned():
    rows = [["B=8", "167.2", "-", "0.12"], ["B=1", "22.2", "0.13", "-"]]
    table = Table(["case", "copy_ (µs)", "in place", "half"], rows, caption="Speeds.")
    assert table.align == ["left", "right", "right", "right"]
    assert Table(["case", "note"], [["a", "-"], ["b", "slow"]], caption="Notes.").align == [
        "left",
        "left",
    ]
