"""Tables as aligned text, CSV or JSON. Machine formats keep full precision; text is for people: SI with
units (8.16 TFLOP/s, 24.0 ms, 1.27 GB), by the column's name."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hroofline.model.numbers import frame_records, json_value, si

if TYPE_CHECKING:  # a table of records needs no pandas: `hroofline runs` starts without it
    import pandas as pd

_MAX_NAME = 70


def render_frame(frame: pd.DataFrame, fmt: str) -> str:
    if fmt == "csv":
        buffer = io.StringIO()
        frame.to_csv(buffer, index=False, na_rep="")
        return buffer.getvalue()
    if fmt == "json":
        return to_json(frame_records(frame))
    columns = list(frame.columns)
    rows = [[_cell(v, c) for v, c in zip(row, columns, strict=True)] for row in frame.itertuples(index=False)]
    return text_table([columns, *rows])


def records_table(records: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """Records as aligned text, the cells as :func:`render_frame` writes them."""
    return text_table([list(columns), *([_cell(record.get(c), c) for c in columns] for record in records)])


def to_json(data: object) -> str:
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def text_table(rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to width; numbers right-aligned, text left-aligned."""
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    numeric = [all(_is_number(row[i]) for row in rows[1:]) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [c.rjust(w) if n else c.ljust(w) for c, w, n in zip(row, widths, numeric, strict=False)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


# SQL aggregates keep their argument's unit: sum(time_s) is in seconds.
_SAME_UNIT_AGGREGATE = re.compile(r"(?:sum|min|max|avg|mean|median|any_value|first|last)\((\w+)\)", re.IGNORECASE)


def column_unit(column: str) -> str | None:
    """The SI unit a text table prints a column's numbers in, by the column's name (None: a plain number)."""
    aggregate = _SAME_UNIT_AGGREGATE.fullmatch(column)
    column = aggregate.group(1) if aggregate else column
    if column.endswith("flop_rate") or column.endswith("flop_per_s"):
        return "FLOP/s"
    if column.endswith("_s"):
        return "s"
    if column.startswith("flops"):
        return "FLOP"
    if column.startswith("ops_"):
        return "op"
    if column.startswith("bytes") or column.endswith("_bytes"):
        return "B"
    return None


def _cell(value: object, column: str) -> str:
    value = json_value(value)
    if value is None:
        return "-"
    if isinstance(value, list | dict):
        value = json.dumps(value)
    if isinstance(value, float):
        unit = column_unit(column)
        if column.endswith("_pct"):
            return f"{value:.1f}%"
        return si(value, unit) if unit else f"{value:.4g}"
    text = str(value)
    return text if len(text) <= _MAX_NAME else text[: _MAX_NAME - 3] + "..."


_NUMBER = re.compile(r"-|[+-]?\d[\d,]*(\.\d+)?(e[+-]?\d+)?( [a-zA-Zµ/]+)?%?")


def _is_number(text: str) -> bool:
    """A number, with or without its SI unit ("24.0 ms", "8.16 TFLOP/s", "18.6%"): right-aligned."""
    return bool(_NUMBER.fullmatch(text))


def summary_table(summary: Mapping[str, Mapping[str, object]], columns: Sequence[str]) -> str:
    rows = [["phase", *columns]]
    rows += [[phase, *(_cell(values[c], c) for c in columns)] for phase, values in summary.items()]
    return text_table(rows)
