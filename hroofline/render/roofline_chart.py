"""The hierarchical roofline chart as an Altair (Vega-Lite) spec.

Log-log axes, arithmetic intensity (FLOP/byte) against FLOP/s. Every kernel group is one dot per memory
level at the same FLOP/s, joined by a thin line; colour = level, dot area proportional to time. Diagonal
bandwidth roofs per level and horizontal compute roofs for the precisions present, each labelled.
Interactive in HTML: hover highlights a kernel at all levels, the legend filters levels, a selector picks
the phase, the scales zoom and pan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import altair as alt
import pandas as pd

from hroofline.analyze.binding import MEASURED, RooflinePoints
from hroofline.model.names import short_kernel_name
from hroofline.model.numbers import plain, si
from hroofline.model.quantities import LEVEL_LABELS, LEVELS
from hroofline.render.axes import (
    HEIGHT,
    LEVEL_COLOURS,
    MAX_DOT_AREA,
    WIDTH,
    Axes,
    axes,
    clip_floor,
    dot_positions,
    dot_radius_px,
    label_boxes,
    roof_layers,
    roof_rows,
    subtitle_lines,
)
from hroofline.render.point_labels import NumberedDot, number_dots
from hroofline.roofs.ceilings import RunRoofs

ABOVE_ROOF_COLOUR = "#d00000"
PHASE_FILTER = "phase_pick == 'all' || datum.phase == phase_pick"  # the phase selector, on every layer
HIGHLIGHT_PARAM = "highlight"  # a kernel's full name: its dots are ringed


def _groups(group_by: str) -> str:
    """What one dot stands for, counted."""
    return {"launch": "launch(es)", "name": "kernel group(s)"}.get(group_by, "layer(s)")


def _unbroken(text: str) -> str:
    """``text`` with no-break spaces: a wrapped subtitle keeps a kernel's number, name and time on one line."""
    return text.replace(" ", "\u00a0")


@dataclass(frozen=True)
class ChartOptions:
    title: str
    levels: tuple[str, ...] = LEVELS
    phase_selector: bool = True
    labels: int = 5  # the kernels (by time) whose names are written beside their dots


def roofline_chart(points: RooflinePoints, roofs_used: RunRoofs, options: ChartOptions) -> alt.LayerChart:
    # Levels with dots: a run that measured no L2 bytes gets no L2 dots, nor an L2 roof to confuse.
    levels = list(points.levels_drawn)
    data = _point_rows(points, levels)
    rates = [float(row["flop_rate"]) for row in data]  # type: ignore[arg-type]
    floor = clip_floor(rates, [float(row["time_s"]) for row in data])  # type: ignore[arg-type]
    for row, rate in zip(data, rates, strict=True):
        row["clipped"] = floor is not None and rate < floor
    in_range = [not row["clipped"] for row in data]
    roofs = roof_rows(points.points[in_range], points.peaks, levels)
    frame_axes = axes(roofs, [rate for rate, kept in zip(rates, in_range, strict=True) if kept])
    x, y = frame_axes.x("ai"), frame_axes.y("flop_rate")
    frame = pd.DataFrame(data)  # one frame shared by the layers: Altair stores it once, in "datasets"
    base = (
        alt.Chart(frame)
        .transform_filter("!datum.clipped")
        .transform_fold([f"ai_{level}" for level in levels], as_=["level_key", "ai"])
        .transform_calculate(level=_level_expression(levels), above=_above_expression(levels))
        .transform_filter("isValid(datum.ai) && datum.ai > 0")
    )

    hover = alt.selection_point(name="hover", on="pointerover", fields=["kid"], empty=False, clear="pointerout")
    # set by the page (a click on a kernel's row in the report): that kernel's dots get a ring
    highlight = alt.param(name=HIGHLIGHT_PARAM, value="")
    legend = alt.selection_point(name="levels", fields=["level"], bind="legend")
    zoom = alt.selection_interval(name="zoom", bind="scales")
    params: list[alt.Parameter] = []
    by_phase = options.phase_selector and len(points.phases) > 1
    if by_phase:
        phase = alt.param(
            name="phase_pick", value="all", bind=alt.binding_select(options=["all", *points.phases], name="phase ")
        )
        params.append(phase)
        base = base.transform_filter(PHASE_FILTER)
    # the legend filters too; this is the same as a control beside the chart (a list, not radio buttons: those
    # of several charts on one page would share one group)
    if len(levels) > 1:
        names = [LEVEL_LABELS[lv] for lv in levels]
        level_pick = alt.param(
            name="level_pick", value="all", bind=alt.binding_select(options=["all", *names], name="memory level ")
        )
        params.append(level_pick)
        base = base.transform_filter("level_pick == 'all' || datum.level == level_pick")

    colour = alt.Color(
        "level:N",
        title="memory level",
        scale=alt.Scale(
            domain=[LEVEL_LABELS[lv] for lv in levels], range=[LEVEL_COLOURS[LEVEL_LABELS[lv]] for lv in levels]
        ),
        legend=alt.Legend(orient="right", symbolType="circle"),
    )
    joins = base.mark_line(strokeWidth=0.8, color="#888888").encode(
        x=x,
        y=y,
        detail="kid:N",
        order="ai:Q",
        opacity=alt.condition(hover, alt.value(1.0), alt.value(0.35)),
    )
    dots = (
        base.mark_circle(stroke="#222222")
        .encode(
            x=x,
            y=y,
            color=colour,
            size=alt.Size(
                "time_s:Q",
                title="kernel time",
                scale=alt.Scale(type="linear", zero=True, domain=[0, data_max_time(data)], range=[0, MAX_DOT_AREA]),
                legend=alt.Legend(
                    labelExpr="format(datum.value * 1e3, '.3~g') + ' ms'",
                    symbolFillColor="#bbbbbb",
                    symbolStrokeColor="#222222",
                ),
            ),
            opacity=alt.condition(legend, alt.value(0.75), alt.value(0.05)),
            strokeWidth=alt.condition(hover, alt.value(2.0), alt.value(0.3)),
            tooltip=_tooltip(points.group_by),
        )
        .add_params(hover, legend, zoom, highlight, *params)
    )
    rings = (
        base.transform_filter(f"datum.name == {HIGHLIGHT_PARAM}")
        .mark_point(shape="circle", filled=False, size=520, stroke="#111111", strokeWidth=2.5)
        .encode(x=x, y=y)
        .properties(name="highlight")
    )
    above_rows = frame[frame[[f"above_{lv}" for lv in levels]].any(axis=1)] if len(frame) else frame
    above = (
        base.properties(data=above_rows)
        .transform_filter("datum.above")
        .mark_point(shape="diamond", size=220, strokeWidth=2, color=ABOVE_ROOF_COLOUR, filled=False)
        .encode(x=x, y=y, tooltip=_tooltip(points.group_by))
    )
    roof_lines, *roof_labels = roof_layers(roofs, frame_axes)
    out_of_range = [row for row in data if row["clipped"]]
    below_range = None
    if out_of_range and floor is not None:
        seconds = sum(float(row["time_s"]) for row in out_of_range)  # type: ignore[arg-type]
        below_range = (
            f"▼ at the bottom edge: {len(out_of_range)} {_groups(points.group_by)} under {si(floor, 'FLOP/s')}, "
            f"{si(seconds, 's')} (hover them)."
        )
    subtitle = _subtitle(points, roofs_used, levels, below_range)
    below = _below_layer(out_of_range, levels, frame_axes, by_phase, points.group_by)
    top = top_dots(data, levels, options.labels)
    numbered = number_dots(
        [(d.ai, d.flop_rate, d.radius_px, d.name) for d in top],
        frame_axes,
        label_boxes(roofs, frame_axes),
        dot_positions(frame, levels),
    )
    if numbered:  # one paragraph, not a line each: the subtitle stays a few lines above the plot
        phases = {str(row["phase"]) for row in data}
        titled = len(phases) == 1 and phases.pop() in str(options.title)  # the chart's phase, said in its title
        entries = [
            _unbroken(f"{n.number} {n.name} ({'' if titled else d.phase + ', '}{si(d.time_s, 's')})")
            for n, d in zip(numbered, top, strict=True)
        ]
        subtitle.append("Numbered, most time first: " + "; ".join(entries) + ".")
    named = _number_layer(numbered, top, frame_axes, by_phase)
    return (
        alt.layer(roof_lines, joins, dots, above, rings, *below, *roof_labels, *named)
        .properties(
            width=WIDTH,
            height=HEIGHT,
            title=alt.TitleParams(options.title, subtitle=subtitle_lines(subtitle), anchor="start"),
        )
        .configure_view(stroke="#cccccc")
    )


@dataclass(frozen=True)
class TopDot:
    """A kernel among those with the most time: its rightmost dot (highest intensity) and what to call it."""

    ai: float
    flop_rate: float
    radius_px: float
    name: str
    phase: str
    time_s: float


def top_dots(data: list[dict[str, object]], levels: list[str], count: int) -> list[TopDot]:
    largest = data_max_time(data)
    dots = []
    for row in sorted(data, key=lambda row: -float(row["time_s"]))[:count]:  # type: ignore[arg-type]
        drawn = _intensities(row, levels)
        rate, seconds = float(row["flop_rate"]), float(row["time_s"])  # type: ignore[arg-type]
        if drawn and rate > 0:
            radius = dot_radius_px(seconds, largest)
            dots.append(TopDot(max(drawn), rate, radius, str(row["short"]), str(row["phase"]), seconds))
    return dots


def _intensities(row: dict[str, object], levels: list[str]) -> list[float]:
    """A kernel's intensities at the levels where it has one (its dots)."""
    return [float(row[f"ai_{lv}"]) for lv in levels if row.get(f"ai_{lv}")]  # type: ignore[arg-type]


def _number_layer(
    numbered: list[NumberedDot], dots: list[TopDot], frame_axes: Axes, phase_filter: bool
) -> list[alt.Chart]:
    if not numbered:
        return []
    rows = [
        {"label_x": n.label_x, "label_y": n.label_y, "number": str(n.number), "phase": dot.phase}
        for n, dot in zip(numbered, dots, strict=True)
    ]
    base = alt.Chart(pd.DataFrame(rows))
    if phase_filter:
        base = base.transform_filter(PHASE_FILTER)
    return [
        base.mark_text(align="left", baseline="bottom", fontSize=12, fontWeight="bold", color="#111111").encode(
            x=frame_axes.x("label_x"), y=frame_axes.y("label_y"), text="number:N"
        )
    ]


def _below_layer(
    rows: list[dict[str, object]], levels: list[str], frame_axes: Axes, phase_filter: bool, group_by: str
) -> list[alt.Chart]:
    """A mark at the bottom edge for each kernel below the y range, at its rightmost intensity (kept inside the
    x range), with its numbers in the tooltip."""
    if not rows:
        return []
    (x_low, x_high), (y_low, y_high) = frame_axes.x_domain, frame_axes.y_domain
    edge = y_low * (y_high / y_low) ** 0.015
    marked = []
    for row in rows:
        intensities = _intensities(row, levels)
        at = min(max(max(intensities, default=x_low), x_low * 1.2), x_high / 1.2)
        marked.append({**row, "edge_x": at, "edge_y": edge, "level": "below the range drawn"})
    base = alt.Chart(pd.DataFrame(marked))
    if phase_filter:
        base = base.transform_filter(PHASE_FILTER)
    return [
        base.mark_point(shape="triangle-down", filled=True, size=70, color="#666666", opacity=0.9).encode(
            x=frame_axes.x("edge_x"), y=frame_axes.y("edge_y"), tooltip=_tooltip(group_by)
        )
    ]


def data_max_time(data: list[dict[str, object]]) -> float:
    times = [float(row["time_s"]) for row in data if isinstance(row["time_s"], int | float)]
    return max(times, default=1.0) or 1.0


def _level_expression(levels: list[str]) -> str:
    parts = [f"datum.level_key == 'ai_{lv}' ? '{LEVEL_LABELS[lv]}'" for lv in levels]
    return " : ".join(parts) + " : ''"


def _above_expression(levels: list[str]) -> str:
    return " || ".join(f"(datum.level_key == 'ai_{lv}' && datum.above_{lv})" for lv in levels)


def _tooltip(group_by: str = "name") -> list[alt.Tooltip]:
    by_layer = group_by == "layer"
    return [
        alt.Tooltip("short:N", title="layer" if by_layer else "kernel"),
        alt.Tooltip("name:N", title="its kernel with the most time" if by_layer else "full name"),
        alt.Tooltip("phase:N", title="phase"),
        alt.Tooltip("launches:Q", title="launches"),
        alt.Tooltip("time_text:N", title="time"),
        alt.Tooltip("rate_text:N", title="performance"),
        alt.Tooltip("level:N", title="this dot"),
        alt.Tooltip("ai_text:N", title="intensity (FLOP/byte)"),
        alt.Tooltip("roof_text:N", title="binding roof"),
    ]


def _point_rows(points: RooflinePoints, levels: list[str]) -> list[dict[str, object]]:
    frame = points.points
    rows: list[dict[str, object]] = []
    for row in frame.itertuples(index=False):
        share = row.phase_share_pct
        time_text = f"{si(row.time_s, 's')}" + (f" ({share:.1f}% of {row.phase})" if _finite(share) else "")
        ai_text = ", ".join(f"{LEVEL_LABELS[lv]} {_fmt(getattr(row, f'ai_{lv}'))}" for lv in levels)
        roof_text = f"{row.bound}, {row.roof_pct:.0f}% of roof" if row.bound and _finite(row.roof_pct) else "-"
        by_layer = points.group_by == "layer"
        record: dict[str, object] = {
            "kid": int(row.kid),
            "short": str(row.layer) if by_layer else short_kernel_name(str(row.kernel)),
            "name": str(row.kernel),
            "phase": str(row.phase),
            "launches": int(row.count),
            "time_s": float(row.time_s),
            "flop_rate": float(row.flop_rate),
            "time_text": time_text,
            "rate_text": si(row.flop_rate, "FLOP/s"),
            "ai_text": ai_text,
            "roof_text": roof_text,
        }
        for lv in levels:
            value = getattr(row, f"ai_{lv}")
            record[f"ai_{lv}"] = float(value) if _finite(value) else None
            record[f"above_{lv}"] = bool(getattr(row, f"above_{lv}"))
        rows.append(record)
    return rows


def _subtitle(points: RooflinePoints, roofs_used: RunRoofs, levels: list[str], below_range: str | None) -> list[str]:
    per = {"launch": ["kernel launch"], "name": ["kernel name", "phase"]}.get(points.group_by)
    per = list(per or ["layer (module)", "phase"])
    if len(levels) > 1:
        per.append("level (" + ", ".join(LEVEL_LABELS[lv] for lv in levels) + ")")
    what = "One dot per " + (", ".join(per[:-1]) + " and " if len(per) > 1 else "") + per[-1]
    what += ", joined by a line" if len(levels) > 1 else f", at {LEVEL_LABELS[levels[0]]}" if levels else ""
    lines = [
        f"Roofs: {roofs_used.label}." + (f" {' '.join(n + '.' for n in roofs_used.notes)}" if roofs_used.notes else ""),
        what + "; area proportional to time.",
    ]
    left_out = []  # what is not where the reader looks for it, in one line
    if points.not_drawn:
        unit = _groups(points.group_by)
        no_bytes = points.not_drawn - points.no_flops  # the rest of those not drawn
        why = "with no FLOPs"
        if no_bytes:
            why = f"({points.no_flops} {why}, {no_bytes} with no bytes at the levels drawn)"
        left_out.append(f"Not drawn: {points.not_drawn} {unit} {why}, {si(points.not_drawn_time_s, 's')} in all.")
    if below_range:
        left_out.append(below_range)
    if left_out:
        lines.append(" ".join(left_out))
    for level, count in points.unknown_at.items():
        lines.append(f"No {LEVEL_LABELS[level]} dot for {count}: their {LEVEL_LABELS[level]} bytes are unknown.")
    if points.predicted:
        lines.append(
            "Predicted (no kernel ran): FLOPs and the fewest bytes (at HBM) of each op, at its estimated time "
            "(roofline bound / its class's efficiency, with a host floor): no dot reaches a roof by construction."
        )
    elif points.analytic_work:
        lines.append(
            "Time measured (PyTorch profiler); FLOPs and bytes analytic: each op's recorded shapes, the fewest bytes "
            "it must move (at one level: HBM on a GPU, L1 on a CPU); ops without shapes or formula are not drawn."
        )
    lines += points.notes.missing_roofs
    if points.notes.above:
        measured = any(above.kind == MEASURED for above in points.notes.above)
        why = (
            "check the ceilings or the metrics."
            if measured
            else "their analytic work is more than the kernels did (L2-resident data, cheaper algorithms)."
        )
        lines.append(f"⚠ {len(points.notes.above)} kernel(s) beat a roof (red diamonds mark their dots): {why}")
    return lines


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _fmt(value: object) -> str:
    return plain(value) if _finite(value) else "-"  # type: ignore[arg-type]
