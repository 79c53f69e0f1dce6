"""Tables as aligned text, CSV or JSON. Machine formats keep full precision; text is for people: SI with
units (8.16 TFLOP/s, 24.0 ms, 1.27 GB), by the column's name."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hroofline.model.names import TABLE_NAME_WIDTH
from hroofline.model.numbers import frame_records, json_value, plain, si
from hroofline.model.quantities import UTILIZATION_COLUMNS
from hroofline.render.terminal import one_line

if TYPE_CHECKING:  # a table of records needs no pandas: `hroofline runs` starts without it
    import pandas as pd

_MAX_NAME = TABLE_NAME_WIDTH
FORMATS: tuple[str, ...] = ("table", "csv", "json")  # every read command's --format: for people, or data
# Shares of a whole, shown as percentages.
SHARE_COLUMNS = frozenset({"work_known", "tensor_share"})
SMALLEST_SHOWN_PCT = 0.05  # MFU, HFU, MBU below this print as "< 0.05%", not as a 0.0% that reads as none


def render_frame(frame: pd.DataFrame, fmt: str) -> str:
    if fmt == "csv":
        buffer = io.StringIO()
        spreadsheet_safe(frame).to_csv(buffer, index=False, na_rep="")
        return buffer.getvalue()
    if fmt == "json":
        return to_json(frame_records(frame))
    columns = list(frame.columns)
    rows = [[cell_text(v, c) for v, c in zip(row, columns, strict=True)] for row in frame.itertuples(index=False)]
    return text_table([columns, *rows])


# A cell a spreadsheet would take for a formula (OWASP's "CSV injection"): kernel names come from whoever built
# the profiled program, and =HYPERLINK(...) in one would run when the CSV is opened.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")  # and full-width ones
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each text cell that a spreadsheet would evaluate prefixed with ``'``, as the spreadsheets'
    own guidance says; numbers, and text that is a plain number, are left as they are."""
    from pandas.api.types import is_object_dtype, is_string_dtype

    text_columns = [c for c in frame.columns if is_object_dtype(frame[c]) or is_string_dtype(frame[c])]
    if not text_columns:
        return frame
    safe = frame.copy()
    for column in text_columns:
        safe[column] = frame[column].map(_safe_cell)
    return safe


def _safe_cell(value: object) -> object:
    if not isinstance(value, str) or _PLAIN_NUMBER.fullmatch(value):
        return value
    # Spreadsheets skip leading spaces and line breaks before a formula: so does the check.
    return "'" + value if value.lstrip(" \n").startswith(_FORMULA_START) else value


def records_table(records: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """Records as aligned text, the cells as :func:`render_frame` writes them."""
    return text_table([list(columns), *([cell_text(record.get(c), c) for c in columns] for record in records)])


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


def _quantity(column: str) -> str:
    """The quantity a column holds: an SQL aggregate's argument, a comparison's side (base_, candidate_) left
    out."""
    aggregate = _SAME_UNIT_AGGREGATE.fullmatch(column)
    column = aggregate.group(1) if aggregate else column
    return column.removeprefix("base_").removeprefix("candidate_")


def column_unit(column: str) -> str | None:
    """The SI unit a text table prints a column's numbers in, by the column's name (None: a plain number)."""
    return _quantity_unit(_quantity(column))


def _quantity_unit(column: str) -> str | None:
    if column.endswith("_ratio"):  # candidate over base: a plain number
        return None
    if column.endswith("flop_rate") or column.endswith("flop_per_s"):
        return "FLOP/s"
    if column.endswith("byte_per_s"):
        return "B/s"
    if column.endswith("_s"):
        return "s"
    if column.startswith("flops"):
        return "FLOP"
    if column.startswith("ops_"):
        return "op"
    if column.startswith("bytes") or column.endswith("_bytes"):
        return "B"
    return None


def cell_text(value: object, column: str) -> str:
    """One value as a text table shows it: SI units by the column's name, shares in %, long names cut."""
    value = json_value(value)
    if value is None:
        return "-"
    if isinstance(value, list | dict):
        value = json.dumps(value)
    if isinstance(value, float):
        quantity = _quantity(column)
        unit = _quantity_unit(quantity)
        if column in UTILIZATION_COLUMNS and 0 < value < SMALLEST_SHOWN_PCT:
            return f"< {SMALLEST_SHOWN_PCT}%"  # a tiny step's MFU is small, not zero
        if column.endswith("_pct"):
            return f"{value:.1f}%"
        if quantity in SHARE_COLUMNS:
            return f"{value * 100:.1f}%"
        if unit:
            return si(value, unit)
        return f"{int(value):,}" if value.is_integer() and abs(value) < 1e15 else plain(value)
    text = one_line(str(value))
    return text if len(text) <= _MAX_NAME else text[: _MAX_NAME - 3] + "..."


_NUMBER = re.compile(r"-|[+-]?\d[\d,]*(\.\d+)?(e[+-]?\d+)?( [a-zA-Zµ/]+)?%?")


def _is_number(text: str) -> bool:
    """A number, with or without its SI unit ("24.0 ms", "8.16 TFLOP/s", "18.6%"): right-aligned."""
    return bool(_NUMBER.fullmatch(text))


def summary_table(summary: Mapping[str, Mapping[str, object]], columns: Sequence[str]) -> str:
    rows = [["phase", *columns]]
    rows += [[phase, *(cell_text(values[c], c) for c in columns)] for phase, values in summary.items()]
    return text_table(rows)
