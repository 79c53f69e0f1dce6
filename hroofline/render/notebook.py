"""What a notebook shows of a run, a table, a chart and a comparison. Charts carry their JavaScript with them (the
report's inlined Vega, in an iframe of their own: Jupyter's RequireJS and CSS stay out of it), so a notebook and
its HTML export show them with no network; tables are in SI units, with the columns that hold data, and short
kernel names that keep what tells them apart."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hroofline.model.names import distinct_short_names
from hroofline.render.html_page import ChartBlock, page
from hroofline.render.text import cell_text

if TYPE_CHECKING:
    import pandas as pd

CHART_FRAME_PX = 860  # a chart of the default size at a notebook's width, its legend and controls, without a scroll bar
TABLE_ROWS = 40  # rows a notebook shows of a long table; the frame itself keeps them all
TABLE_STYLE = (
    "<style>.hr-nb td,.hr-nb th{padding:2px 8px;text-align:right;white-space:nowrap}"
    ".hr-nb td.t,.hr-nb th.t{text-align:left}.hr-nb{border-collapse:collapse;font-size:0.9em}"
    ".hr-nb tr:nth-child(even){background:#f6f6f6}</style>"
)


def chart_html(spec: dict[str, Any], title: str) -> str:
    """A chart as a self-contained iframe: the page of ``hroofline chart --out x.html``, inline."""
    document = page(title, ChartBlock("chart-1", spec).html())
    return (
        f'<iframe title="{html.escape(title)}" srcdoc="{html.escape(document, quote=True)}" '
        f'style="width:100%;height:{CHART_FRAME_PX}px;border:0" loading="lazy"></iframe>'
    )


def shown_columns(frame: pd.DataFrame) -> list[str]:
    """The columns that hold something: a column of precision FLOPs that is all zero or unknown says nothing."""
    kept = []
    for column in frame.columns:
        numbers = _numbers(frame[column])
        if frame[column].isna().all():
            continue
        if numbers is not None and (numbers.fillna(0) == 0).all() and str(column) not in ALWAYS_SHOWN:
            continue
        kept.append(column)
    return kept


ALWAYS_SHOWN = ("time_s", "kernels", "count")


def _numbers(values: pd.Series) -> pd.Series | None:
    """The column as numbers, where it holds numbers (a transposed summary keeps them as objects); else None."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(values):
        return None
    if pd.api.types.is_numeric_dtype(values):
        return values
    present = values.dropna()
    if len(present) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pd.to_numeric(values, errors="coerce")
    return None


def frame_html(frame: pd.DataFrame) -> str:
    """A table as a notebook shows it: SI units by column name (as the CLI's tables), the empty columns left out,
    kernel names short (the whole name on hover), at most :data:`TABLE_ROWS` rows."""
    columns = shown_columns(frame)
    names = distinct_short_names(frame["kernel"].astype(str)) if "kernel" in frame.columns else {}
    index = frame.index.name
    text = {c: _numbers(frame[c]) is None for c in columns}  # a text column is left-aligned
    head = ([f'<th class="t">{html.escape(str(index))}</th>'] if index else []) + [
        f'<th class="{"t" if text[c] else ""}">{html.escape(str(c))}</th>' for c in columns
    ]
    rows = []
    for label, record in zip(frame.index[:TABLE_ROWS], frame[columns].head(TABLE_ROWS).to_dict("records"), strict=True):
        cells = [f'<td class="t">{html.escape(str(label))}</td>'] if index else []
        for column in columns:
            value = record[column]
            if column == "kernel" and isinstance(value, str):
                short = names.get(value, value)
                cells.append(f'<td class="t" title="{html.escape(value)}">{html.escape(short)}</td>')
            else:
                cls = ' class="t"' if text[column] else ""
                cells.append(f"<td{cls}>{html.escape(cell_text(value, str(column)))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = len(frame) - TABLE_ROWS
    tail = f"<p>... {more:,} more rows (the DataFrame holds them all)</p>" if more > 0 else ""
    return f'{TABLE_STYLE}<table class="hr-nb"><tr>{"".join(head)}</tr>{"".join(rows)}</table>{tail}'


def card_html(title: str, facts: Mapping[str, object], table: str) -> str:
    """A run (or a comparison) as a card: its name, a line of facts, then its table."""
    line = " · ".join(f"{html.escape(k)} {html.escape(str(v))}" for k, v in facts.items() if v not in (None, ""))
    return f"<div><p><b>{html.escape(title)}</b><br><small>{line}</small></p>{table}</div>"
