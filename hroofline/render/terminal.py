"""Text that is safe to show in a terminal. Kernel, layer and file names come from whoever built the profiled
program: a name holding escape sequences would otherwise retitle or recolour the user's terminal, or (with
bidirectional overrides) show one text and mean another. Such characters are shown escaped, as Python writes them
(``\\x1b``, ``\\u202e``); the HTML report escapes on its own."""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline shown escaped."""
    return _UNSAFE.sub(_escaped, text) if _UNSAFE.search(text) else text


def one_line(text: str) -> str:
    """``text`` escaped for a table cell: tab and newline escaped too, so that a cell stays one line wide."""
    return printable(text).replace("\t", "\\t").replace("\n", "\\n")
