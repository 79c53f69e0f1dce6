"""NVTX range cells of ncu CSV exports.

A push/pop cell is the thread id, then one quoted ``domain:range:PL_Type:PL_Value:CLR_Type:Color:
Msg_Type:Msg`` entry per stack level, outermost first::

    4713  "<default domain>:train_step:none:none:none:none:none:none"  "<default domain>:forward:none:..."

A start/end cell holds entries with an extra leading range id. Range names may contain ':'; the six
trailing attribute fields do not, so the name is what lies between the leading fields and those.
"""

from __future__ import annotations

import re

_ENTRY = re.compile(r'"([^"]*)"')
_TRAILING_FIELDS = 6


def push_pop_ranges(cell: str | None) -> tuple[str, ...]:
    return _ranges(cell, leading_fields=1)


def start_end_ranges(cell: str | None) -> tuple[str, ...]:
    return _ranges(cell, leading_fields=2)


def _ranges(cell: str | None, leading_fields: int) -> tuple[str, ...]:
    if not cell:
        return ()
    names = []
    for entry in _ENTRY.findall(cell):
        parts = entry.split(":")
        if len(parts) >= leading_fields + 1 + _TRAILING_FIELDS:
            names.append(":".join(parts[leading_fields:-_TRAILING_FIELDS]))
        elif len(parts) > leading_fields:
            names.append(":".join(parts[leading_fields:]))
    return tuple(name for name in names if name)


def stack_label(ranges: tuple[str, ...]) -> str:
    """How a stack is stored and shown: ncu's own push/pop filter notation, ``outer/inner``."""
    return "/".join(ranges)
