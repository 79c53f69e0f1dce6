"""NVTX range cells of ncu CSV exports.

A push/pop cell is the thread id, then one quoted ``domain:range:PL_Type:PL_Value:CLR_Type:Color:
Msg_Type:Msg`` entry per stack level, outermost first::

    4713  "<default domain>:train_step:none:none:none:none:none:none"  "<default domain>:forward:none:..."

A start/end cell holds entries with an extra leading range id. Range names may contain ':'; the
trailing attribute fields do not, so the name is what lies between the leading fields and those. How
many attribute fields follow the name is read from the column's header (ncu 2020.2 wrote
``Id:Domain:Start/Stop_Range:PL_Type:PL_Value``, later versions add ``CLR_Type:Color:Msg_Type:Msg``).
"""

from __future__ import annotations

import re

_ENTRY = re.compile(r'"+([^"]*?)"+')
_TRAILING_FIELDS = 6


def trailing_fields(header: str | None) -> int:
    """Attribute fields after the range name, from a column header such as
    ``Id:Domain:Start/Stop_Range:PL_Type:PL_Value``."""
    if not header or "_Range" not in header:
        return _TRAILING_FIELDS
    fields = header.split(":")
    position = next(i for i, f in enumerate(fields) if "_Range" in f)
    return len(fields) - position - 1


def push_pop_ranges(cell: str | None, header: str | None = None) -> tuple[str, ...]:
    return _ranges(cell, leading_fields=1, trailing=trailing_fields(header))


def start_end_ranges(cell: str | None, header: str | None = None) -> tuple[str, ...]:
    return _ranges(cell, leading_fields=2, trailing=trailing_fields(header))


def _ranges(cell: str | None, leading_fields: int, trailing: int) -> tuple[str, ...]:
    if not cell:
        return ()
    names = []
    for entry in _ENTRY.findall(cell):
        parts = entry.split(":")
        if len(parts) >= leading_fields + 1 + trailing:
            names.append(":".join(parts[leading_fields : len(parts) - trailing]))
        elif len(parts) > leading_fields:
            names.append(":".join(parts[leading_fields:]))
    return tuple(name for name in names if name)


def stack_label(ranges: tuple[str, ...]) -> str:
    """How a stack is stored and shown: ncu's own push/pop filter notation, ``outer/inner``."""
    return "/".join(ranges)
