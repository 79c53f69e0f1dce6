"""Readable kernel names: demangled C++ signatures are hundreds of characters long."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

_NAMESPACES = re.compile(r"\b(?:[A-Za-z_]\w*::)+")


def distinct_short_names(names: Iterable[str]) -> dict[str, str]:
    """Each name's :func:`short_kernel_name`, with as many template arguments as it takes to tell apart the names
    that would otherwise read alike (seven ``vectorized_elementwise_kernel<4, ...>`` in one table say nothing);
    names that differ only in their parameters or namespaces keep their whole text."""
    full = list(dict.fromkeys(names))
    shown = {name: short_kernel_name(name) for name in full}
    for arguments in (2, 3, 4, 6, None):
        clashing = _clashing(shown)
        if not clashing:
            return shown
        for name in clashing:
            shown[name] = short_kernel_name(name, arguments)
    for name in _clashing(shown):
        shown[name] = name.strip().removeprefix("void ")
    return shown


TABLE_NAME_WIDTH = 70  # characters of a name in a text table


def table_names(names: Iterable[str], width: int = TABLE_NAME_WIDTH) -> dict[str, str]:
    """Each name as a text table shows it: short, distinct, and at most ``width`` characters."""
    return fitted_names(distinct_short_names(names), width)


def with_table_names(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (changed in place) with its ``kernel`` column as a text table shows it (:func:`table_names`)."""
    table["kernel"] = table["kernel"].map(table_names(table["kernel"].astype(str)))
    return table


def fitted_names(shown: dict[str, str], width: int) -> dict[str, str]:
    """Names of at most ``width`` characters that stay as distinct as ``shown``'s: a long one is cut at its end,
    or, where that would make it read like another, around where the two first differ."""
    fitted = {name: _cut(text, 0, width) for name, text in shown.items()}
    for group in _groups(fitted):
        texts = [shown[name] for name in group]
        common = len(_common_prefix(texts))
        for name in group:
            fitted[name] = _cut(shown[name], max(common - 12, 0), width)
    return fitted


def _cut(text: str, start: int, width: int) -> str:
    """``text`` in at most ``width`` characters: from ``start`` on (its first characters kept), '...' for the cuts."""
    if len(text) <= width:
        return text
    if start <= 0:
        return text[: width - 3] + "..."
    head = text[:15] + "..."
    body = text[start : start + width - len(head)]
    return head + (body if start + len(body) >= len(text) else body[:-3] + "...")


def _groups(fitted: dict[str, str]) -> list[list[str]]:
    by_text: dict[str, list[str]] = {}
    for name, text in fitted.items():
        by_text.setdefault(text, []).append(name)
    return [names for names in by_text.values() if len(names) > 1]


def _common_prefix(texts: list[str]) -> str:
    first, last = min(texts), max(texts)
    size = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), min(len(first), len(last)))
    return first[:size]


def _clashing(shown: dict[str, str]) -> list[str]:
    return [name for group in _groups(shown) for name in group]


@cache
def short_kernel_name(name: str, template_arguments: int | None = 1) -> str:
    """``void cudnn::detail::implicit_convolve_sgemm<__half, __half, 512>(int, ...)`` ->
    ``implicit_convolve_sgemm<__half, ...>``: no return type, namespaces or parameters, and only the
    first template argument (``template_arguments`` of them; None: all)."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    text = _drop_trailing_group(text, "(", ")")
    template = ""
    if text.endswith(">"):
        start = _matching_open(text, "<", ">")
        if start > 0:
            arguments = [a.strip() for a in _split_top_level(text[start + 1 : -1])]
            # The first argument as written; those added to tell names apart without their namespaces.
            kept = arguments[:1] + [_NAMESPACES.sub("", a) for a in arguments[1 : template_arguments or len(arguments)]]
            template = "<" + ", ".join(kept) + (", ...>" if len(arguments) > len(kept) else ">")
            text = text[:start]
    base = _split_scope(text)[-1]
    return base + template


def _drop_trailing_group(text: str, opening: str, closing: str) -> str:
    if text.endswith(closing):
        start = _matching_open(text, opening, closing)
        if start > 0:
            return text[:start].rstrip()
    return text


def _matching_open(text: str, opening: str, closing: str) -> int:
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        if text[index] == closing:
            depth += 1
        elif text[index] == opening:
            depth -= 1
            if depth == 0:
                return index
    return -1


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        if char in "<([":
            depth += 1
        elif char in ">)]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _split_scope(text: str) -> list[str]:
    """Split at '::' outside template brackets."""
    parts, depth, start, index = [], 0, 0, 0
    while index < len(text):
        char = text[index]
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif depth == 0 and text.startswith("::", index):
            parts.append(text[start:index])
            start = index + 2
            index += 1
        index += 1
    parts.append(text[start:])
    return [p for p in parts if p] or [text]
