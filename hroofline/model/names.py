"""Readable kernel names: demangled C++ signatures are hundreds of characters long."""

from __future__ import annotations

from functools import cache


@cache
def short_kernel_name(name: str) -> str:
    """``void cudnn::detail::implicit_convolve_sgemm<__half, __half, 512>(int, ...)`` ->
    ``implicit_convolve_sgemm<__half, ...>``: no return type, namespaces or parameters, and only the
    first template argument."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    text = _drop_trailing_group(text, "(", ")")
    template = ""
    if text.endswith(">"):
        start = _matching_open(text, "<", ">")
        if start > 0:
            arguments = _split_top_level(text[start + 1 : -1])
            template = "<" + arguments[0].strip() + (", ...>" if len(arguments) > 1 else ">")
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
