"""The HTML report: per run, a summary, a roofline chart per phase and the top-kernels table.

Everything here is presentation of results computed in :mod:`hroofline.analyze`; the page is one
self-contained file that opens offline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from hroofline.analyze.advice.base import Finding
from hroofline.analyze.overlap import RunOverlap
from hroofline.model.names import distinct_short_names
from hroofline.model.numbers import plain, si
from hroofline.model.quantities import UTILIZATION_COLUMNS
from hroofline.model.run import SourceInfo
from hroofline.render.advice import advice_html
from hroofline.render.compare_text import ComparisonTables
from hroofline.render.html_page import ChartBlock, escape, page
from hroofline.render.overlap import overlap_html
from hroofline.render.text import column_unit

HOW_TO_READ = """
<p class="note">How to read a chart: the x axis is arithmetic intensity (FLOPs per byte moved at a memory
level), the y axis is achieved FLOP/s, both logarithmic. Each kernel appears once per memory level (L1, L2,
HBM) at the same height, joined by a thin line; the area of a dot is proportional to the kernel's time.
Diagonal lines are the bandwidth roofs of each level, horizontal lines the compute roofs of each precision.
A kernel is bound by the roof closest above its dots: a dot near its level's diagonal is bandwidth-bound
there, dots far right of the diagonals and near a horizontal roof are compute-bound. The distance below the
roof is the time that could be recovered. Hover a dot for its numbers; click the legend to show one level;
drag to pan and scroll to zoom.</p>
"""


@dataclass
class PhaseSection:
    phase: str
    spec: dict[str, Any] | None  # None: nothing to draw in this phase
    top: pd.DataFrame
    note: str | None = None
    layers: pd.DataFrame | None = None  # the phase's top layers, where the run has layers


@dataclass
class ComparisonSection:
    title: str
    tables: ComparisonTables  # what `hroofline compare` prints, as tables
    spec: dict[str, Any] | None


@dataclass
class RunsSection:
    """All runs on their GPUs' rooflines, one dot each, and their table (with predictions' bound and memory)."""

    spec: dict[str, Any]
    table: pd.DataFrame


@dataclass
class RunSection:
    name: str
    facts: list[tuple[str, str]]
    summary: dict[str, dict[str, float | int | None]]
    phases: list[PhaseSection]
    warnings: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)  # every kernel group behind a warning
    sources: list[SourceInfo] = field(default_factory=list)  # where every number came from
    advice: list[Finding] = field(default_factory=list)  # what to change (hroofline advise)
    roof_sources: list[str] = field(default_factory=list)  # how each roof is made, behind a toggle
    overlap: RunOverlap | None = None  # a run of several ranks: each rank's wall time


def report_page(
    title: str,
    runs: Sequence[RunSection],
    comparisons: Sequence[ComparisonSection] = (),
    overview: RunsSection | None = None,
) -> str:
    parts = [f"<h1>{escape(title)}</h1>", HOW_TO_READ]
    if len(runs) > 1 or comparisons:
        links = ['<a href="#all-runs">all runs</a>'] if overview is not None else []
        links += [f'<a href="#run-{i}">{escape(run.name)}</a>' for i, run in enumerate(runs, start=1)]
        links += [f'<a href="#compare-{i}">{escape(c.title)}</a>' for i, c in enumerate(comparisons, start=1)]
        parts.append(f"<p>Contents: {' · '.join(links)}</p>")
    if overview is not None:
        parts.append('<h2 id="all-runs">All runs on their GPUs\' rooflines</h2>')
        parts.append(ChartBlock("all-runs-chart", overview.spec).html())
        parts.append(_overview_table_html(overview.table))
    for index, run in enumerate(runs, start=1):
        parts.append(_run_html(index, run))
    for index, comparison in enumerate(comparisons, start=1):
        parts.append(f'<h2 id="compare-{index}">{escape(comparison.title)}</h2>')
        parts.append(comparison_html(comparison.tables))
        if comparison.spec is not None:
            parts.append(ChartBlock(f"compare-chart-{index}", comparison.spec).html())
    return page(title, "\n".join(parts))


def _provenance_html(sources: Sequence[SourceInfo]) -> str:
    """Each source of a run, folded: file and checksum, how it was collected and with which settings (clock and
    cache control), which formula gave each quantity and how kernel time was measured."""
    blocks = []
    for source in sources:
        rows: list[tuple[str, str]] = [
            ("source", source.path),
            ("kind", f"{source.collection} ({source.kind})"),
            ("source hash", source.source_hash),
            ("launches", f"{source.launches}" + (f", phase {source.phase}" if source.phase else "")),
            ("ncu version", source.ncu_version or "not recorded in the source"),
        ]
        if source.files:
            rows.append(("files", ", ".join(f["name"] for f in source.files)))
        settings = source.settings
        controls = ("clock_control", "cache_control")
        if "ncu" in source.collection:  # how ncu held the clocks and caches shapes every number it measured
            default = {"clock_control": "base", "cache_control": "all"}
            for key in controls:
                known = settings.get(key) or f"not recorded in the source (ncu's default: {default[key]})"
                rows.append((key.replace("_", " "), known))
        rows += [(key.replace("_", " "), value) for key, value in sorted(settings.items()) if key not in controls]
        rows += [(f"time: {method}", f"{count} launch(es)") for method, count in source.time_methods.items()]
        rows += [(quantity, formula) for quantity, formula in sorted(source.formulas_used.items())]
        rows += [(f"roof {key}", how) for key, how in sorted(source.roofs.items())]
        rows += [("note", note) for note in source.notes] + [("warning", warning) for warning in source.warnings]
        blocks.append(f'<table class="hr-provenance">{_key_value_rows(rows)}</table>')
    summary = f"Provenance: {len(sources)} source(s), their settings and the formula behind each number"
    return f"<details><summary>{escape(summary)}</summary>{''.join(blocks)}</details>"


def comparison_html(laid_out: ComparisonTables) -> str:
    parts = [f'<p class="note">{escape(laid_out.heading)}.</p>']
    for number, table in enumerate(laid_out.tables):
        if number:
            parts.append(f"<h3>{escape(table.title)}</h3>")
        head = "".join(
            f'<th class="{"text" if i < table.text_columns else ""}">{escape(h)}</th>'
            for i, h in enumerate(table.header)
        )
        rows = []
        for row in table.rows:
            cells = [
                f'<td class="kernel" title="{escape(cell.text)}">{escape(cell.text)}</td>'
                if i < table.text_columns
                else f"<td{_sort_value(cell.value)}>{escape(cell.text)}</td>"
                for i, cell in enumerate(row)
            ]
            rows.append("<tr>" + "".join(cells) + "</tr>")
        parts.append(f'<table class="hr-table"><tr>{head}</tr>{"".join(rows)}</table>')
        if not number:
            parts += [f'<p class="note">{escape(note)}</p>' for note in [*laid_out.left_out, *laid_out.notes]]
    return "\n".join(parts)


def _key_value_rows(pairs: Sequence[tuple[str, str]]) -> str:
    return "".join(f'<tr><th class="text">{escape(k)}</th><td class="text">{escape(v)}</td></tr>' for k, v in pairs)


def _run_html(index: int, run: RunSection) -> str:
    parts = [f'<h2 id="run-{index}">{escape(run.name)}</h2>']
    parts.append(f'<table class="hr-facts">{_key_value_rows(run.facts)}</table>')
    if run.roof_sources:
        items = "".join(f"<li>{escape(line)}</li>" for line in run.roof_sources)
        parts.append(f'<details class="hr-roofs"><summary>How each roof is made</summary><ul>{items}</ul></details>')
    if run.sources:
        parts.append(_provenance_html(run.sources))
    parts.append(_summary_html(run.summary))
    if run.advice:
        parts.append(advice_html(run.advice))
    for warning in run.warnings:
        parts.append(f'<p class="warning">⚠ {escape(warning)}</p>')
    if run.details:
        items = "".join(f"<li>{escape(line)}</li>" for line in run.details)
        parts.append(
            f'<details class="warning"><summary>The kernels behind the warnings</summary><ul>{items}</ul></details>'
        )
    if run.overlap is not None:
        parts.append(overlap_html(run.overlap, run.name, f"ranks-{index}"))
    for number, section in enumerate(run.phases, start=1):
        parts.append(f"<h3>{escape(run.name)} · {escape(section.phase)}</h3>")
        chart_id = f"chart-{index}-{number}"
        if section.spec is not None:
            parts.append(ChartBlock(chart_id, section.spec).html())
        if section.note:
            parts.append(f'<p class="note">{escape(section.note)}</p>')
        parts.append(top_table_html(section.top, chart_id if section.spec is not None else None))
        if section.layers is not None and not section.layers.empty:
            parts.append(
                f'<p class="note">Top layers of {escape(section.phase)} (each with its kernel with the most time):</p>'
            )
            parts.append(top_table_html(section.layers))
    return "\n".join(parts)


OVERVIEW_HEADERS: tuple[tuple[str, str], ...] = (
    ("run", "run"),
    ("gpu", "GPU"),
    ("time_s", "time"),
    ("time_bound_s", "bound"),
    ("flops", "FLOPs"),
    ("bytes", "bytes"),
    ("intensity", "FLOP/byte"),
    ("flop_rate", "FLOP/s"),
    ("attainable_flop_rate", "attainable FLOP/s"),
    ("attainable_pct", "% of attainable"),
    ("memory_peak_bytes", "peak memory"),
    ("fits", "fits"),
)


def _overview_table_html(table: pd.DataFrame) -> str:
    head = "".join(f'<th class="{"text" if k in ("run", "gpu") else ""}">{escape(h)}</th>' for k, h in OVERVIEW_HEADERS)
    rows = []
    for record in table.to_dict(orient="records"):
        cells = []
        for key, _ in OVERVIEW_HEADERS:
            value = record.get(key)
            if key in ("run", "gpu"):
                cells.append(f'<td class="text">{escape(str(value))}</td>')
            elif key == "fits":
                cells.append(f"<td>{'-' if value is None else ('yes' if value else 'no')}</td>")
            elif key == "intensity":
                cells.append(f"<td{_sort_value(value)}>{plain(value) if _number(value) else '-'}</td>")
            elif unit := column_unit(key):
                text = si(value if _number(value) else None, unit)
                cells.append(f"<td{_sort_value(value)}>{escape(text)}</td>")
            else:
                cells.append(f"<td{_sort_value(value)}>{escape(_top_cell(key, value))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="hr-table"><tr>{head}</tr>{"".join(rows)}</table>'


SUMMARY_SHARES: tuple[tuple[str, str], ...] = (("mfu_pct", "MFU"), ("hfu_pct", "HFU"), ("mbu_pct", "MBU"))


def _summary_html(summary: dict[str, dict[str, float | int | None]]) -> str:
    predicted = any("time_bound_s" in values for values in summary.values())
    memory = any("memory_peak_bytes" in values for values in summary.values())
    header = ["phase", "estimate" if predicted else "time", *(["bound"] if predicted else []), "FLOPs", "FLOP/s"]
    header += ["tensor share", "L1 bytes", "L2 bytes", "HBM bytes", "launches"]
    header += ["peak memory", "retained"] if memory else []
    shares = [
        (c, label) for c, label in SUMMARY_SHARES if any(values.get(c) is not None for values in summary.values())
    ]
    header += [label for _, label in shares]
    rows = []
    for phase, values in summary.items():
        time_s, flops, tensor = values.get("time_s"), values.get("flops"), values.get("flops_tensor")
        rate = flops / time_s if _number(flops) and _number(time_s) and time_s else None
        share = f"{100 * tensor / flops:.1f}%" if _number(tensor) and _number(flops) and flops else "-"
        cells = [
            si(time_s, "s"),
            *([si(values.get("time_bound_s"), "s")] if predicted else []),
            si(flops, "FLOP"),
            si(rate, "FLOP/s"),
            share,
            si(values.get("bytes_l1"), "B"),
            si(values.get("bytes_l2"), "B"),
            si(values.get("bytes_hbm"), "B"),
            str(values.get("kernels", "-")),
        ]
        if memory:
            cells += [si(values.get("memory_peak_bytes"), "B"), si(values.get("memory_retained_bytes"), "B")]
        cells += [_top_cell(c, values.get(c)) for c, _ in shares]
        rows.append(
            f'<tr><td class="text">{escape(phase)}</td>' + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>"
        )
    head = "".join(f'<th class="{"text" if h == "phase" else ""}">{escape(h)}</th>' for h in header)
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


TOP_HEADERS: tuple[tuple[str, str], ...] = (
    ("kernel", "kernel"),
    ("count", "launches"),
    ("time_s", "time"),
    ("phase_share_pct", "share of phase"),
    ("flop_rate", "FLOP/s"),
    ("ai_l1", "AI L1"),
    ("ai_l2", "AI L2"),
    ("ai_hbm", "AI HBM"),
    ("bound", "bound by"),
    ("roof_pct", "% of roof"),
    ("time_at_roof_s", "time at roof"),
    ("recoverable_s", "recoverable"),
    ("mfu_pct", "MFU"),
    ("hfu_pct", "HFU"),
    ("mbu_pct", "MBU"),
)


def top_table_html(top: pd.DataFrame, chart_id: str | None = None) -> str:
    """The top kernels, or the top layers (a ``layer`` column first, then each layer's longest kernel). With
    ``chart_id``, a click on a kernel's row rings its dots on that chart."""
    if top.empty:
        return '<p class="note">No kernels.</p>'
    by_layer = "layer" in top.columns
    # MFU, HFU, MBU only where some row has one (a trace's FLOPs are the model's, an ncu report's the hardware's)
    shown_headers = tuple(
        (key, label)
        for key, label in TOP_HEADERS[1:]
        if key not in UTILIZATION_COLUMNS or (key in top.columns and top[key].notna().any())
    )
    headers = ((("layer", "layer"), ("kernel", "longest kernel")) if by_layer else TOP_HEADERS[:1]) + shown_headers
    text_columns = ("layer", "kernel")
    head = "".join(
        f'<th class="{"text" if key in text_columns else ""}">{escape(label)}</th>' for key, label in headers
    )
    rows = []
    shown = distinct_short_names(top["kernel"].astype(str))
    for record in top.to_dict(orient="records"):
        name = str(record["kernel"])
        cells = [f'<td class="kernel">{escape(str(record["layer"]))}</td>'] if by_layer else []
        cells += [f'<td class="kernel" title="{escape(name)}">{escape(shown[name])}</td>']
        cells += [
            f"<td{_sort_value(record[key])}>{escape(_top_cell(key, record[key]))}</td>" for key, _ in shown_headers
        ]
        picks = f' data-kernel="{escape(name)}" title="click: ring its dots on the chart"' if chart_id else ""
        rows.append(f"<tr{picks}>" + "".join(cells) + "</tr>")
    linked = f' data-chart="{escape(chart_id)}"' if chart_id else ""
    return f'<table class="hr-table"{linked}><tr>{head}</tr>{"".join(rows)}</table>'


def _top_cell(key: str, value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if key.endswith("_s"):
        return si(float(value), "s")  # type: ignore[arg-type]
    if key == "flop_rate":
        return si(float(value), "FLOP/s")  # type: ignore[arg-type]
    if key.endswith("_pct"):
        return f"{float(value):.1f}%"  # type: ignore[arg-type]
    if key.startswith("ai_"):
        return plain(float(value))  # type: ignore[arg-type]
    return str(value)


def _sort_value(value: object) -> str:
    """A numeric cell's value for sorting (its text is SI with units): a data-value attribute."""
    return f' data-value="{float(value)!r}"' if _number(value) else ""  # type: ignore[arg-type]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
