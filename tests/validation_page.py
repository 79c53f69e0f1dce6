"""The figures of the validation page (docs/validation.md), read as the tests compare them: the page is cut into
blocks (paragraphs, tables, lists, code blocks: lines between blank lines), each block with a figure opened by a
comment line naming its key, ``<!-- figures: KEY -->``. A figure is a number outside code spans, links' targets and
comments ("x1.16", "0.435", "1,118", "12.5%"), printed to its own rounding: a test that computes it compares within
half its last digit (tests/test_validation_page.py lists every key, and which test reads it or why it is recorded)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "validation.md"
KEY_LINE = re.compile(r"^<!-- figures: ([a-z0-9-]+) -->$")
# a number not inside a word or a name (H100, fp32, 3x3, v2): optionally an error factor's x, then digits with
# thousands' commas, decimals and an exponent (1.73e9), optionally a ratio's x (2.75x)
NUMBER = re.compile(r"(?<![\w.\-])x?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:[eE]([+-]?\d+))?x?(?!\w)")
# what is not prose: code spans, links' targets, comments
NOT_FIGURES = re.compile(r"`[^`]*`|\]\([^)]*\)|<!--.*?-->")


@dataclass(frozen=True)
class Figure:
    line: int  # on the page, from 1
    text: str
    value: float
    decimals: int
    exponent: int = 0  # of 10, as printed (1.73e9: 9)

    def matches(self, computed: float) -> bool:
        """``computed`` printed to the page's rounding is this figure (half a last digit either way)."""
        return abs(computed - self.value) <= (0.5 * 10.0**-self.decimals + 1e-9) * 10.0**self.exponent


@dataclass(frozen=True)
class Block:
    key: str | None  # None: no key line above it
    first: int  # its first line on the page
    lines: tuple[str, ...]
    figures: tuple[Figure, ...]


def line_figures(number: int, line: str) -> list[Figure]:
    """The figures of one line of the page."""
    prose = NOT_FIGURES.sub(lambda found: " " * len(found.group()), line)
    found = []
    for match in NUMBER.finditer(prose):
        whole, decimals, exponent = match.group(1).replace(",", ""), match.group(2) or "", int(match.group(3) or 0)
        value = float(whole + decimals) * 10.0**exponent
        found.append(Figure(number, match.group(), value, max(len(decimals) - 1, 0), exponent))
    return found


def page_blocks(text: str) -> list[Block]:
    """The page's blocks in order (a fenced code block is one block: its comments' numbers are figures too)."""
    blocks: list[Block] = []
    key, current, first, fenced = None, [], 0, False

    def close() -> None:
        nonlocal key, current
        if current:
            figures = [
                figure
                for offset, line in enumerate(current)
                if not line.startswith("```")
                for figure in line_figures(first + offset, line)
            ]
            blocks.append(Block(key, first, tuple(current), tuple(figures)))
            key = None
        current = []

    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and not line.startswith("```") and not line.strip():
            close()
            continue
        named = KEY_LINE.match(line)
        if named and not current:
            key = named.group(1)
            continue
        if not current:
            first = number
        current.append(line)
    close()
    return blocks


@cache
def keyed_blocks() -> dict[str, Block]:
    blocks = page_blocks(PAGE.read_text(encoding="utf-8"))
    return {block.key: block for block in blocks if block.key is not None}


def page_figures(key: str) -> list[Figure]:
    """The figures of the block the page keys ``key``, in reading order."""
    return list(keyed_blocks()[key].figures)


def table_row(key: str, label: str) -> list[Figure]:
    """The figures of the table keyed ``key`` in its row whose first cell starts with ``label``, its first cell's
    (what the row describes) left out."""
    block = keyed_blocks()[key]
    rows = [(block.first + i, line) for i, line in enumerate(block.lines) if line.startswith(f"| {label}")]
    assert len(rows) == 1, f"{PAGE.name}: {len(rows)} rows of table {key!r} start with {label!r}"
    number, line = rows[0]
    cells = line.split("|")
    first_cell_end = len(cells[0]) + len(cells[1]) + 1
    return line_figures(number, " " * first_cell_end + line[first_cell_end:])


def assert_page_shows(figures: list[Figure], computed: list[float], what: str) -> None:
    """The page's ``figures`` are ``computed`` to the page's rounding, one by one; else a message naming the line."""
    shown = [figure.text for figure in figures]
    assert len(figures) == len(computed), (
        f"{PAGE.name}:{figures[0].line if figures else '?'}: {what}: the page shows {shown}, the test computes "
        f"{len(computed)} figures {[round(value, 4) for value in computed]}"
    )
    for figure, value in zip(figures, computed, strict=True):
        assert figure.matches(value), (
            f"{PAGE.name}:{figure.line}: {what}: the page shows {figure.text}, computed now {value:.4f}"
        )
