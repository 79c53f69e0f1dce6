"""A griffe extension for the API reference (mkdocs.yml loads it into mkdocstrings): hroofline's docstrings use the
reStructuredText conventions that ``help()`` readers know, ``:class:`~pkg.Name``` roles and a paragraph ending in
``::`` before a literal block; the reference renders docstrings as Markdown, where both would show as written. Each
docstring is rewritten as it is loaded: a role becomes inline code (the last name with ``~``, as Sphinx shows it),
``::`` a colon (the indented block after it is a code block in Markdown already). The code is left as it is."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|obj|exc|const):`(~?)([^`]+)`")
_LITERAL = re.compile(r"(\S)?( ?)::(?=\n\s*\n)")


def rest_to_markdown(text: str) -> str:
    text = _ROLE.sub(lambda m: f"`{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}`", text)
    # "for example::" -> "for example:"; a lone "::" (after a space, or on its own) goes
    return _LITERAL.sub(lambda m: f"{m[1]}:" if m[1] and not m[2] else (m[1] or ""), text)


class ReSTMarkup(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rest_to_markdown(obj.docstring.value)
