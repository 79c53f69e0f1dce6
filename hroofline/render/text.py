"""Tables as aligned text, CSV or JSON. Machine formats keep full precision; text rounds for reading."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

_MAX_NAME = 70


def render_frame(frame: pd.DataFrame, fmt: str) -> str:
    if fmt == "csv":
        buffer = io.StringIO()
        frame.to_csv(buffer, index=False, na_rep="")
        return buffer.getvalue()
    if fmt == "json":
        return to_json(frame_records(frame))
    return text_table([list(frame.columns)] + [[_cell(v) for v in row] for row in frame.itertuples(index=False)])


def frame_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: json_value(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def json_value(value: object) -> object:
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return json_value(value.item())  # numpy scalars
    return value


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


def _cell(value: object) -> str:
    value = json_value(value)
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= _MAX_NAME else text[: _MAX_NAME - 3] + "..."


def _is_number(text: str) -> bool:
    if text == "-":
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def summary_table(summary: Mapping[str, Mapping[str, object]], columns: Sequence[str]) -> str:
    rows = [["phase", *columns]]
    rows += [[phase, *(_cell(values[c]) for c in columns)] for phase, values in summary.items()]
    return text_table(rows)
