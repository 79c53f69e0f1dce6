"""How a notebook shows what the API returns: a table in SI units (still a DataFrame), a chart that needs no
network (still the Altair chart), a comparison as its tables. Each view is the object itself plus its display;
the display is :mod:`hroofline.render.notebook`'s."""

from __future__ import annotations

from typing import Any

import pandas as pd

from hroofline.render.notebook import TABLE_STYLE, chart_html, frame_html


class Table(pd.DataFrame):
    """A DataFrame that a notebook shows in SI units with the columns that hold data (``pd.DataFrame(t)`` or any
    operation on it gives a plain one)."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def _repr_html_(self) -> str:  # type: ignore[override]
        return frame_html(self)


class ChartView:
    """An Altair chart that a notebook (and its HTML export) shows with no network: the chart's own methods
    (``.save``, ``.to_dict``, ``.properties``) are the chart's."""

    def __init__(self, chart: Any, title: str) -> None:
        self.chart = chart
        self.title = title

    def __getattr__(self, name: str) -> Any:
        if name == "chart":  # not set yet (a copy being made): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.chart, name)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": self._repr_html_(), "text/plain": repr(self)}

    def _repr_html_(self) -> str:
        return chart_html(self.chart.to_dict(), self.title)

    def __repr__(self) -> str:
        return f"<hroofline chart {self.title!r}: .save('x.html') writes it, .chart is the Altair chart>"


class ComparisonView:
    """A comparison (:class:`hroofline.analyze.compare.Comparison`, whose fields it gives) shown as the tables of
    ``hroofline compare``; ``phase_table`` is its ``phases`` as a DataFrame."""

    def __init__(self, comparison: Any, count: int = 5) -> None:
        self.comparison = comparison
        self.count = count

    def __getattr__(self, name: str) -> Any:
        if name == "comparison":
            raise AttributeError(name)
        return getattr(self.comparison, name)

    @property
    def phase_table(self) -> Table:
        """``phases`` as a table, one row per phase and the total: base and candidate time (s), FLOPs, tensor
        share and bytes per level, speedup and ratios (the columns of ``hroofline compare --format csv``)."""
        from hroofline.render.compare_text import phase_frame

        return Table(phase_frame(self.comparison).set_index("phase").astype(float))  # unknown: NaN, not None

    def _repr_html_(self) -> str:
        from hroofline.render.compare_text import comparison_tables
        from hroofline.render.report import comparison_html

        return TABLE_STYLE + comparison_html(comparison_tables(self.comparison, self.count))

    def __repr__(self) -> str:
        phases = ", ".join(self.comparison.phases)
        return (
            f"<comparison {self.comparison.base} -> {self.comparison.candidate}: {phases}; .phase_table, .phases, "
            ".families>"
        )
