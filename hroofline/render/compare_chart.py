"""Two runs on one roofline: each kernel family of the base run, an arrow to the same family in the
candidate run. Colour = run, dot area proportional to time, one memory level."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from hroofline.analyze.compare import ComparisonRoofs
from hroofline.model.numbers import si
from hroofline.model.quantities import COMPUTE_ROOF_OF, LEVEL_LABELS
from hroofline.render.axes import HEIGHT, MAX_DOT_AREA, WIDTH, axes, roof_layers, roof_rows, subtitle_lines

RUN_COLOURS = ("#9e9e9e", "#4c78a8")  # base, candidate
MIN_ARROW_PX = 10.0  # shorter moves get no arrow: its head would cover the dots
MIN_DOT_AREA = 12


def compare_chart(
    matched: pd.DataFrame, found: ComparisonRoofs, level: str, names: tuple[str, str], title: str
) -> alt.LayerChart:
    records = matched.to_dict(orient="records")
    rows: list[dict[str, object]] = []
    for key, record in enumerate(records):
        for step, (side, name) in enumerate(zip(("base", "candidate"), names, strict=True)):
            rows.append(
                {
                    "key": key,
                    "step": step,  # draws each shaft from base to candidate
                    "run": name,
                    "family": record["family"],
                    "phase": record["phase"],
                    "ai": float(record[f"ai_{level}_{side}"]),
                    "flop_rate": float(record[f"flop_rate_{side}"]),
                    "time_s": float(record[f"time_s_{side}"]),
                    "time_text": si(float(record[f"time_s_{side}"]), "s"),
                    "rate_text": si(float(record[f"flop_rate_{side}"]), "FLOP/s"),
                }
            )
    frame = pd.DataFrame(rows)
    roof_frame = pd.DataFrame(
        {
            f"ai_{level}": frame["ai"] if len(frame) else [],
            "flop_rate": frame["flop_rate"] if len(frame) else [],  # where the dots are: labels go elsewhere
            "time_s": frame["time_s"] if len(frame) else [],
            **{
                column: pd.concat([matched[f"{column}_base"], matched[f"{column}_candidate"]], ignore_index=True)
                for column in COMPUTE_ROOF_OF
            },
        }
    )
    prefix = f"{found.gpus[0]} " if found.gpus else ""
    roofs = roof_rows(roof_frame, found.peaks, [level], prefix)
    if found.candidate_peaks is not None and found.gpus:
        roofs = roofs.merged(roof_rows(roof_frame, found.candidate_peaks, [level], f"{found.gpus[1]} ", muted=True))
    frame_axes = axes(roofs, list(frame["flop_rate"]) if len(frame) else [])
    heads = []
    still = set()  # families that barely moved: no arrow, whose head would sit alone on its dots
    for key, record in enumerate(records):
        ends = [(record[f"ai_{level}_{side}"], record[f"flop_rate_{side}"]) for side in ("base", "candidate")]
        (x0, y0), (x1, y1) = ((frame_axes.x_px(ai), frame_axes.y_px(rate)) for ai, rate in ends)
        if math.hypot(x1 - x0, y1 - y0) < MIN_ARROW_PX:
            still.add(key)
            continue
        angle = frame_axes.screen_angle(ends[1][0] / ends[0][0], ends[1][1] / ends[0][1])
        heads.append({"ai": ends[1][0], "flop_rate": ends[1][1], "angle": angle % 360})
    if len(frame):
        frame["moved"] = ~frame["key"].isin(still)
    x, y = frame_axes.x("ai"), frame_axes.y("flop_rate")
    colour = alt.Color("run:N", title="run", scale=alt.Scale(domain=list(names), range=list(RUN_COLOURS)))
    tooltip = [
        alt.Tooltip("family:N", title="kernel family"),
        alt.Tooltip("phase:N"),
        alt.Tooltip("run:N"),
        alt.Tooltip("time_text:N", title="time"),
        alt.Tooltip("rate_text:N", title="performance"),
        alt.Tooltip("ai:Q", title=f"intensity at {LEVEL_LABELS[level]} (FLOP/byte)", format=".3g"),
    ]
    base = alt.Chart(frame)
    shafts = (
        base.transform_filter("datum.moved")
        .mark_line(strokeWidth=1.2, color="#444444")
        .encode(x=x, y=y, detail="key:N", order="step:Q")
    )
    dots = base.mark_circle(stroke="#222222", strokeWidth=0.3, opacity=0.8).encode(
        x=x,
        y=y,
        color=colour,
        size=alt.Size(
            "time_s:Q",
            scale=alt.Scale(type="linear", zero=True, range=[MIN_DOT_AREA, MAX_DOT_AREA]),
            legend=alt.Legend(title="time", labelExpr="format(datum.value * 1e3, '.3~g') + ' ms'"),
        ),
        tooltip=tooltip,
    )
    tips = (
        alt.Chart(pd.DataFrame(heads))
        .mark_point(shape="triangle-right", filled=True, size=60, color="#444444")
        .encode(x=x, y=y, angle=alt.Angle("angle:Q", scale=None))
    )
    roof_lines, *roof_labels = roof_layers(roofs, frame_axes)
    layers = [roof_lines, shafts, dots, *([tips] if heads else []), *roof_labels]
    described = f"Roofs: {found.label}"
    if found.gpus and found.candidate_label:
        described = f"Roofs: {found.gpus[0]}: {found.label}; {found.gpus[1]} (grey): {found.candidate_label}"
    subtitle = [
        f"{described}. {LEVEL_LABELS[level]} intensity; dot area proportional to time.",
        f"Arrows go from {names[0]} to {names[1]}, one per kernel family and phase ({len(matched)} shown"
        + (f"; {len(still)} barely moved and have no arrow" if still else "")
        + f"). Dots are at least {MIN_DOT_AREA} px² so that short kernels show.",
    ]
    return (
        alt.layer(*layers)
        .properties(
            width=WIDTH, height=HEIGHT, title=alt.TitleParams(title, subtitle=subtitle_lines(subtitle), anchor="start")
        )
        .configure_view(stroke="#cccccc")
        .interactive()
    )
