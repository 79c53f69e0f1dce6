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

from hroofline.analyze.names import short_kernel_name
from hroofline.analyze.roofs import RooflinePoints, levels_with_dots, precisions_present
from hroofline.ceilings import LEVEL_LABELS, LEVELS, PRECISION_LABELS, Ceilings
from hroofline.render.numbers import si

LEVEL_COLOURS: dict[str, str] = {"L1": "#e45756", "L2": "#54a24b", "HBM": "#4c78a8"}
ROOF_GREY = "#555555"
ABOVE_ROOF_COLOUR = "#d00000"
# Largest dot area in px^2; areas scale linearly from 0 so that area is proportional to time.
MAX_DOT_AREA = 900
WIDTH, HEIGHT = 760, 480


@dataclass(frozen=True)
class ChartOptions:
    title: str
    levels: tuple[str, ...] = LEVELS
    phase_selector: bool = True


def roofline_chart(points: RooflinePoints, ceilings: Ceilings, options: ChartOptions) -> alt.LayerChart:
    # Levels with dots: a run that measured no L2 bytes gets no L2 dots, nor an L2 roof to confuse.
    levels = list(levels_with_dots(points.points, options.levels))
    data = _point_rows(points, levels)
    roofs = _roof_rows(points, ceilings, levels)
    x_domain, y_domain = _domains(data, roofs)
    x_axis = alt.Axis(values=_decades(x_domain), format="~g", title="arithmetic intensity (FLOP/byte)")
    y_axis = alt.Axis(values=_decades(y_domain), format="~s", title="performance (FLOP/s)")
    x = alt.X("ai:Q", axis=x_axis, scale=alt.Scale(type="log", domain=x_domain))
    y = alt.Y("flop_rate:Q", axis=y_axis, scale=alt.Scale(type="log", domain=y_domain))
    frame = pd.DataFrame(data)  # one frame shared by the layers: Altair stores it once, in "datasets"
    base = (
        alt.Chart(frame)
        .transform_fold([f"ai_{level}" for level in levels], as_=["level_key", "ai"])
        .transform_calculate(level=_level_expression(levels), above=_above_expression(levels))
        .transform_filter("isValid(datum.ai) && datum.ai > 0")
    )

    hover = alt.selection_point(name="hover", on="pointerover", fields=["kid"], empty=False, clear="pointerout")
    legend = alt.selection_point(name="levels", fields=["level"], bind="legend")
    zoom = alt.selection_interval(name="zoom", bind="scales")
    params: list[alt.Parameter] = []
    if options.phase_selector and len(points.phases) > 1:
        phase = alt.param(
            name="phase_pick", value="all", bind=alt.binding_select(options=["all", *points.phases], name="phase ")
        )
        params.append(phase)
        base = base.transform_filter("phase_pick == 'all' || datum.phase == phase_pick")

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
            tooltip=_tooltip(),
        )
        .add_params(hover, legend, zoom, *params)
    )
    above_rows = frame[frame[[f"above_{lv}" for lv in levels]].any(axis=1)] if len(frame) else frame
    above = (
        base.properties(data=above_rows)
        .transform_filter("datum.above")
        .mark_point(shape="diamond", size=220, strokeWidth=2, color=ABOVE_ROOF_COLOUR, filled=False)
        .encode(x=x, y=y, tooltip=_tooltip())
    )
    roof_lines = (
        alt.Chart(alt.Data(values=roofs["lines"]))
        .mark_line(clip=True)
        .encode(
            x=alt.X("x:Q", axis=x_axis, scale=alt.Scale(type="log", domain=x_domain)),
            y=alt.Y("y:Q", axis=y_axis, scale=alt.Scale(type="log", domain=y_domain)),
            detail="roof:N",
            color=alt.Color("colour:N", scale=None),
            strokeDash=alt.StrokeDash("dash:N", scale=None, legend=None),
            strokeWidth=alt.value(1.5),
        )
    )
    slope_angle = -math.degrees(math.atan(_pixels_per_decade(y_domain, HEIGHT) / _pixels_per_decade(x_domain, WIDTH)))
    roof_labels = [
        alt.Chart(alt.Data(values=[row for row in roofs["labels"] if row["align"] == side]))
        .mark_text(
            fontSize=11,
            clip=True,
            baseline="bottom",
            dy=-3,
            align=side,
            angle=slope_angle % 360 if side == "left" else 0,
        )
        .encode(
            x=alt.X("x:Q", axis=x_axis, scale=alt.Scale(type="log", domain=x_domain)),
            y=alt.Y("y:Q", axis=y_axis, scale=alt.Scale(type="log", domain=y_domain)),
            text="label:N",
            color=alt.Color("colour:N", scale=None),
        )
        for side in ("left", "right")
    ]
    subtitle = _subtitle(points, ceilings, levels)
    return (
        alt.layer(roof_lines, *roof_labels, joins, dots, above)
        .properties(
            width=WIDTH,
            height=HEIGHT,
            title=alt.TitleParams(options.title, subtitle=subtitle, anchor="start"),
        )
        .configure_view(stroke="#cccccc")
    )


def data_max_time(data: list[dict[str, object]]) -> float:
    times = [float(row["time_s"]) for row in data if isinstance(row["time_s"], int | float)]
    return max(times, default=1.0) or 1.0


def _level_expression(levels: list[str]) -> str:
    parts = [f"datum.level_key == 'ai_{lv}' ? '{LEVEL_LABELS[lv]}'" for lv in levels]
    return " : ".join(parts) + " : ''"


def _above_expression(levels: list[str]) -> str:
    return " || ".join(f"(datum.level_key == 'ai_{lv}' && datum.above_{lv})" for lv in levels)


def _tooltip() -> list[alt.Tooltip]:
    return [
        alt.Tooltip("short:N", title="kernel"),
        alt.Tooltip("name:N", title="full name"),
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
        record: dict[str, object] = {
            "kid": int(row.kid),
            "short": short_kernel_name(str(row.kernel)),
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


def _roof_rows(points: RooflinePoints, ceilings: Ceilings, levels: list[str]) -> dict[str, list[dict[str, object]]]:
    """Line segments and labels of the roofs, in data coordinates."""
    precisions = [p for p in precisions_present(points.points) if p in ceilings.compute] or [
        p for p in ("fp32",) if p in ceilings.compute
    ]
    bandwidths = {lv: ceilings.bandwidth[lv] for lv in levels if lv in ceilings.bandwidth}
    top = max((ceilings.compute[p] for p in precisions), default=None)
    ais = pd.concat([points.points[f"ai_{lv}"] for lv in levels]) if levels else pd.Series(dtype=float)
    ais = ais[ais > 0]
    x_low = _decade_below(float(ais.min()) / 3) if len(ais) else 1e-2
    right_edges = [float(ais.max()) * 3] if len(ais) else [1e3]
    if top:  # room for every ridge point, where a bandwidth roof meets the top compute roof
        right_edges += [top / b * 3 for b in bandwidths.values()]
    x_high = _decade_above(max(right_edges))
    lines: list[dict[str, object]] = []
    labels: list[dict[str, object]] = []
    for level, bandwidth in bandwidths.items():
        name = LEVEL_LABELS[level]
        x_end = top / bandwidth if top else x_high
        for x_value in (x_low, x_end):
            lines.append(
                {"roof": name, "x": x_value, "y": bandwidth * x_value, "colour": LEVEL_COLOURS[name], "dash": "solid"}
            )
        label_x = x_low * 1.6
        labels.append(
            {
                "x": label_x,
                "y": bandwidth * label_x,
                "label": f"{name} {si(bandwidth, 'B/s', 4)}",
                "align": "left",
                "colour": LEVEL_COLOURS[name],
            }
        )
    fastest = max(bandwidths.values(), default=None)
    for precision in precisions:
        peak = ceilings.compute[precision]
        name = ceilings.tensor_label if precision == "tensor" else PRECISION_LABELS[precision]
        x_start = peak / fastest if fastest else x_low
        for x_value in (x_start, x_high):
            lines.append({"roof": name, "x": x_value, "y": peak, "colour": ROOF_GREY, "dash": "dash"})
        labels.append(
            {
                "x": x_high / 1.15,
                "y": peak,
                "label": f"{name} {si(peak, 'FLOP/s', 4)}",
                "align": "right",
                "colour": ROOF_GREY,
            }
        )
    return {"lines": lines, "labels": labels, "x_domain": [x_low, x_high]}


def _domains(
    data: list[dict[str, object]], roofs: dict[str, list[dict[str, object]]]
) -> tuple[list[float], list[float]]:
    x_domain = [float(v) for v in roofs["x_domain"]]  # type: ignore[arg-type]
    rates = [float(row["flop_rate"]) for row in data]  # type: ignore[arg-type]
    peaks = [float(row["y"]) for row in roofs["labels"] if row["align"] == "right"]  # type: ignore[arg-type]
    y_low = _decade_below(min(rates, default=1e9) / 3)
    y_high = _decade_above(max([*rates, *peaks], default=1e12) * 2)
    return x_domain, [y_low, y_high]


def _subtitle(points: RooflinePoints, ceilings: Ceilings, levels: list[str]) -> list[str]:
    lines = [
        f"Roofs: {ceilings.label}.",
        "One dot per kernel"
        + (" launch" if points.per_launch else " name and phase")
        + " and memory level ("
        + ", ".join(LEVEL_LABELS[lv] for lv in levels)
        + "), joined by a line; dot area proportional to time.",
    ]
    if points.not_drawn:
        unit = "launch(es)" if points.per_launch else "kernel group(s)"
        why = f"{points.no_flops} with no FLOPs"
        if points.not_drawn > points.no_flops:
            why += f", {points.not_drawn - points.no_flops} with no bytes at the levels drawn"
        lines.append(f"Not drawn: {points.not_drawn} {unit} ({why}), {si(points.not_drawn_time_s, 's')} in all.")
    lines += points.notes.missing_roofs
    if points.notes.above_roof:
        lines.append(
            f"⚠ {len(points.notes.above_roof)} kernel(s) beat a roof (red diamonds mark their dots): "
            "check the ceilings or the metrics."
        )
    return lines


def _decades(domain: list[float]) -> list[float]:
    low, high = (round(math.log10(v)) for v in domain)
    return [10.0**k for k in range(low, high + 1)]


def _pixels_per_decade(domain: list[float], pixels: int) -> float:
    return pixels / math.log10(domain[1] / domain[0])


def _decade_below(value: float) -> float:
    return 10.0 ** math.floor(math.log10(value)) if value > 0 else 1e-3


def _decade_above(value: float) -> float:
    return 10.0 ** math.ceil(math.log10(value)) if value > 0 else 1.0


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _fmt(value: object) -> str:
    return f"{value:.3g}" if _finite(value) else "-"
