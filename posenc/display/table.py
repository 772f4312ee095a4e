"""Tables of results, shown as HTML tables in the book and as aligned text elsewhere.

A chapter that prints more than a handful of rows of numbers hands them to :class:`Table`
instead: in Jupyter, Colab and the HTML book the last expression of a cell renders as a
captioned HTML table; ``print`` and any plain-text view get the same rows as aligned text.
Cells are formatted by the caller (numbers rounded to what the text discusses), so both
forms are identical on every machine.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from posenc._validate import check_sequence

__all__ = ["RANGE_DASH", "Table"]

RANGE_DASH = "\u2060\u2013\u2060"
"""An en dash between the two ends of a range (0.85 to 0.86), held to both by word joiners
so that a narrow column never breaks the range at it."""


class Table:
    """A captioned table of already formatted cells.

    Args:
        columns: the column headings (with units where a column has them).
        rows: one sequence of cells per row, each a ``str``, ``int`` or ``bool``.
        caption: one sentence saying what the table shows.
        align: per column ``"left"`` or ``"right"``; by default text columns are left-
            and number-like columns right-aligned (``"-"``, a number that is missing, counts
            as one).
        groups: ``(heading, span)`` pairs over the columns in order, shown as a row of
            headings above theirs (``""`` for columns of no group), so that columns which
            share a word (a library's name) need not each repeat it.

    Raises:
        TypeError: if a cell is not a ``str``, ``int`` or ``bool``, or the caption not a
            string.
        ValueError: if a row's length differs from the number of columns, the caption is
            empty, an alignment is unknown, or the groups' spans do not add up to the columns.

    Example:
        >>> t = Table(["offset", "score"], [[1, "0.50"], [10, "0.25"]], caption="Two scores.")
        >>> print(t)
        Two scores.
        offset  score
             1   0.50
            10   0.25
        >>> "<caption>Two scores.</caption>" in t._repr_html_()
        True
        >>> print(Table(["n", "eager", "compiled"], [[1, "0.5", "0.9"]], caption="Speeds.",
        ...             groups=[("", 1), ("torch", 2)]))
        Speeds.
                torch
        n  eager  compiled
        1    0.5       0.9
    """

    def __init__(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[object]],
        *,
        caption: str,
        align: Sequence[str] | None = None,
        groups: Sequence[tuple[str, int]] | None = None,
    ) -> None:
        check_sequence("columns", columns)
        check_sequence("rows", rows)
        if not isinstance(caption, str):
            raise TypeError(f"caption must be a string, got {type(caption).__name__}")
        if not caption.strip():
            raise ValueError("caption must say what the table shows, got an empty string")
        self.columns = [str(c) for c in columns]
        self.rows = []
        for i, row in enumerate(rows):
            check_sequence(f"rows[{i}]", row)
            if len(row) != len(self.columns):
                raise ValueError(
                    f"rows[{i}] must have {len(self.columns)} cells (one per column), "
                    f"got {len(row)}"
                )
            for j, cell in enumerate(row):
                if not isinstance(cell, (str, int, bool)):
                    raise TypeError(
                        f"rows[{i}][{j}] must be a str, int or bool (format numbers first), "
                        f"got {type(cell).__name__}: {cell!r}"
                    )
            self.rows.append([str(cell) for cell in row])
        self.caption = caption.strip()
        if align is None:
            align = [
                "right"
                if self.rows and all(_numeric(r[j]) or r[j] == "-" for r in self.rows)
                else "left"
                for j in range(len(self.columns))
            ]
        check_sequence("align", align)
        if len(align) != len(self.columns) or any(a not in ("left", "right") for a in align):
            raise ValueError(
                f"align must give 'left' or 'right' for each of {len(self.columns)} columns, "
                f"got {list(align)!r}"
            )
        self.align = list(align)
        self.groups = None if groups is None else _check_groups(groups, len(self.columns))

    def __repr__(self) -> str:
        widths = [
            max(len(r[j]) for r in [self.columns, *self.rows]) for j in range(len(self.columns))
        ]
        headings, first = [], 0
        for heading, span in self.groups or ():  # a heading wider than its columns widens them
            room = sum(widths[first : first + span]) + 2 * (span - 1)
            widths[first + span - 1] += max(0, len(heading) - room)
            headings.append(heading.center(max(room, len(heading))))
            first += span

        def line(cells: list[str]) -> str:
            return "  ".join(
                c.rjust(w) if a == "right" else c.ljust(w)
                for c, w, a in zip(cells, widths, self.align, strict=True)
            ).rstrip()

        lines = [self.caption, line(self.columns), *(line(r) for r in self.rows)]
        if headings:
            lines.insert(1, "  ".join(headings).rstrip())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        def cells(tag: str, values: list[str]) -> str:
            return "".join(
                f'<{tag} style="text-align: {a}">{html.escape(v)}</{tag}>'
                for v, a in zip(values, self.align, strict=True)
            )

        head = f"<tr>{cells('th', self.columns)}</tr>"
        if self.groups:
            head = (
                "<tr>"
                + "".join(
                    f'<th colspan="{span}" class="posenc-group">{html.escape(heading)}</th>'
                    if heading
                    else f'<th colspan="{span}" class="posenc-blank"></th>'
                    for heading, span in self.groups
                )
                + f"</tr>{head}"
            )
        body = "".join(f"<tr>{cells('td', r)}</tr>" for r in self.rows)
        return (
            '<table class="posenc-table">'
            f"<caption>{html.escape(self.caption)}</caption>"
            f"<thead>{head}</thead>"
            f"<tbody>{body}</tbody></table>"
        )


def _check_groups(groups: object, columns: int) -> list[tuple[str, int]]:
    check_sequence("groups", groups)
    out = []
    for i, group in enumerate(groups):
        if not (
            isinstance(group, (tuple, list))
            and len(group) == 2
            and isinstance(group[0], str)
            and isinstance(group[1], int)
            and not isinstance(group[1], bool)
        ):
            raise TypeError(f"groups[{i}] must be a (heading, span) pair, got {group!r}")
        if group[1] < 1:
            raise ValueError(f"groups[{i}] must span at least one column, got {group!r}")
        out.append((group[0], group[1]))
    if sum(span for _, span in out) != columns:
        raise ValueError(
            f"groups must span the {columns} columns, got spans adding up to "
            f"{sum(span for _, span in out)}"
        )
    return out


def _numeric(text: str) -> bool:
    cleaned = text.replace(",", "").replace("%", "").replace("\u00d7", "").replace("x", "").strip()
    try:
        float(cleaned)
    except ValueError:
        return False
    return True
