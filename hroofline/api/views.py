"""How a notebook shows what the API returns: a table in SI units (still a DataFrame), a chart that needs no
network (still the Altair chart), a comparison as its tables. Each view is the object itself plus its display;
the display is :mod:`hroofline.render.notebook`'s."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hroofline.model.quantities import LEVELS
from hroofline.render.notebook import TABLE_STYLE, chart_html, frame_html

if TYPE_CHECKING:
    from hroofline.model.run import Run


class Table(pd.DataFrame):
    """A DataFrame that a notebook shows in SI units with the columns that hold data (``pd.DataFrame(t)`` or any
    operation on it gives a plain one)."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def _repr_html_(self) -> str:  # type: ignore[override]
        return frame_html(self)


class ChartView:
    """An Altair chart that a notebook (and its HTML export) shows with no network; ``.save(path)`` writes it as
    ``hroofline chart --out`` does (.html with its JavaScript inlined: it opens offline; .png, .svg, .json); the
    chart's other methods (``.to_dict``, ``.properties``) are the chart's."""

    def __init__(self, chart: Any, title: str) -> None:
        self.chart = chart
        self.title = title

    def __getattr__(self, name: str) -> Any:
        if name == "chart":  # not set yet (a copy being made): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.chart, name)

    def save(self, path: str | Path) -> Path:
        """Writes the chart to ``path`` as ``hroofline chart --out`` does, its format by extension: .html (one page
        with Vega inlined, no network needed; Altair's own ``save`` loads Vega from a CDN), .png, .svg, .json."""
        from hroofline.render.output import write_chart

        target = Path(path)
        write_chart(self.chart.to_dict(), target, self.title)
        return target

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": self._repr_html_(), "text/plain": repr(self)}

    def _repr_html_(self) -> str:
        return chart_html(self.chart.to_dict(), self.title)

    def __repr__(self) -> str:
        return f"<hroofline chart {self.title!r}: .save('x.html') writes it, .chart is the Altair chart>"


def comparison_report(comparison: Any, base: Run, candidate: Run, count: int) -> str:
    """What ``hroofline compare`` prints: the comparison's tables, then the advice for ``base`` and whether
    ``candidate`` shows each acted on."""
    from hroofline.analyze.advice.rules import advise, confirm_advice
    from hroofline.analyze.compare import unlike_models
    from hroofline.render.advice import confirmation_lines, no_roofs_line, not_judged_lines
    from hroofline.render.compare_text import comparison_text
    from hroofline.roofs.ceilings import roofs_unknown

    text = comparison_text(comparison, count)
    roofless = [(run.name, why) for run in (base, candidate) if (why := roofs_unknown(run))]
    unlike = unlike_models(base, candidate)  # another model: whether it "did" base's advice is no verdict
    if roofless:  # the advice needs roofs: the comparison stands without it
        lines = [no_roofs_line(base.name, *roofless[0])]
    elif unlike:
        lines = not_judged_lines(advise(base), base.name, candidate.name, unlike)
    else:
        lines = confirmation_lines(confirm_advice(base, candidate), base.name, candidate.name)
    return text + ("\n" + "\n".join(lines) + "\n" if lines else "")


def verdict_of(base: Run, candidate: Run, comparison: Any, thresholds: dict[str, float]) -> Any:
    """``compare --fail-on-regression``'s verdict (:class:`hroofline.analyze.gate.Verdict`) at ``thresholds``
    ({level: PCT}, levels "phase", "layer", "family"; each PCT checked)."""
    from hroofline.analyze.gate import LEVELS, check_pct, gate
    from hroofline.api.options import check_choice

    checked = {check_choice("level", level, LEVELS): check_pct(level, pct) for level, pct in thresholds.items()}
    return gate(base, candidate, comparison, checked)


def markdown_summary(comparison: Any, base: Run, candidate: Run, verdict: Any | None) -> str:
    """``compare --format markdown``: the summary, with the advice for the candidate run on the phases that
    regressed (all of it without a gate)."""
    from hroofline.analyze.advice.rules import advise
    from hroofline.render.compare_markdown import comparison_markdown
    from hroofline.roofs.ceilings import roofs_unknown

    findings = [] if roofs_unknown(candidate) else advise(candidate)
    if verdict is not None:
        regressed = {item.phase for item in verdict.regressions}
        findings = [f for f in findings if regressed & set(f.evidence.phase_share)]
    return comparison_markdown(comparison, verdict, findings)


class VerdictView:
    """The gate's verdict (:class:`hroofline.analyze.gate.Verdict`, whose fields it gives): ``passed``,
    ``regressions``, ``improvements``; ``print()`` gives the text ``compare --fail-on-regression`` prints,
    ``to_json()`` its ``gate`` object."""

    def __init__(self, verdict: Any) -> None:
        self.verdict = verdict

    def __getattr__(self, name: str) -> Any:
        if name == "verdict":
            raise AttributeError(name)
        return getattr(self.verdict, name)

    def __str__(self) -> str:
        from hroofline.render.gate_text import verdict_text

        return verdict_text(self.verdict)

    def __repr__(self) -> str:
        return str(self)


class ComparisonView:
    """A comparison (:class:`hroofline.analyze.compare.Comparison`, whose fields it gives) shown as the tables of
    ``hroofline compare``: ``print()`` (and a Python prompt) gives the text the command prints, a notebook its
    tables; ``phase_table`` is its ``phases`` as a DataFrame."""

    def __init__(self, comparison: Any, base: Run, candidate: Run, count: int = 8) -> None:
        self.comparison = comparison
        self.base_run = base
        self.candidate_run = candidate
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

    def chart(self, level: str = "hbm", ceilings: str | None = None) -> ChartView:
        """Both runs on one roofline at memory ``level`` (l1, l2, hbm), an arrow per kernel family from base to
        candidate, against ``ceilings`` (default: the base run's GPU), as ``hroofline compare --out``."""
        from hroofline.api.options import check_choice
        from hroofline.api.outputs import comparison_chart

        drawn = comparison_chart(self.base_run, self.candidate_run, check_choice("level", level, LEVELS), ceilings)
        return ChartView(drawn.chart, drawn.title)

    def gate(self, phase: float | None = 5.0, layer: float | None = None, family: float | None = None) -> VerdictView:
        """Whether the candidate is slower than the base, per phase, layer and kernel family, by more than each
        level's percentage (None: that level not gated) and the runs' noise, as ``hroofline compare
        --phase-gate/--layer-gate/--family-gate``: ``.passed`` is what its exit status says."""
        levels = {"phase": phase, "layer": layer, "family": family}
        thresholds = {level: pct for level, pct in levels.items() if pct is not None}
        return VerdictView(verdict_of(self.base_run, self.candidate_run, self.comparison, thresholds))

    def markdown(self, verdict: VerdictView | None = None) -> str:
        """``hroofline compare --format markdown``: the summary for a pull request, with ``verdict`` (from
        :meth:`gate`) where given."""
        found = verdict.verdict if verdict is not None else None
        return markdown_summary(self.comparison, self.base_run, self.candidate_run, found)

    def __str__(self) -> str:
        return comparison_report(self.comparison, self.base_run, self.candidate_run, self.count)

    def __repr__(self) -> str:
        return str(self)
