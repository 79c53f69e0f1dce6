"""Two runs on one roofline: each kernel family of the base run, an arrow to the same family in the
candidate run. Colour = run, dot area proportional to time, one memory level."""

from __future__ import annotations

import altair as alt
import pandas as pd

from hroofline.analyze.compare import ComparisonRoofs
from hroofline.ceilings import LEVEL_LABELS
from hroofline.metricset import COMPUTE_ROOF_OF
from hroofline.render.numbers import si
from hroofline.render.roofs import HEIGHT, MAX_DOT_AREA, WIDTH, axes, roof_layers, roof_rows, subtitle_lines

RUN_COLOURS = ("#9e9e9e", "#4c78a8")  # base, candidate


def compare_chart(
    matched: pd.DataFrame, found: ComparisonRoofs, level: str, names: tuple[str, str], title: str
) -> alt.LayerChart:
    rows: list[dict[str, object]] = []
    arrows: list[dict[str, object]] = []
    for key, record in enumerate(matched.to_dict(orient="records")):
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
        arrows.append({"key": key})
    frame = pd.DataFrame(rows)
    roof_frame = pd.DataFrame(
        {
            f"ai_{level}": frame["ai"] if len(frame) else [],
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
    for record in matched.to_dict(orient="records"):
        angle = frame_axes.screen_angle(
            record[f"ai_{level}_candidate"] / record[f"ai_{level}_base"],
            record["flop_rate_candidate"] / record["flop_rate_base"],
        )
        heads.append(
            {"ai": record[f"ai_{level}_candidate"], "flop_rate": record["flop_rate_candidate"], "angle": angle % 360}
        )
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
    shafts = base.mark_line(strokeWidth=1.2, color="#444444").encode(x=x, y=y, detail="key:N", order="step:Q")
    dots = base.mark_circle(stroke="#222222", strokeWidth=0.3, opacity=0.8).encode(
        x=x,
        y=y,
        color=colour,
        size=alt.Size(
            "time_s:Q",
            scale=alt.Scale(type="linear", zero=True, range=[0, MAX_DOT_AREA]),
            legend=alt.Legend(title="time", labelExpr="format(datum.value * 1e3, '.3~g') + ' ms'"),
        ),
        tooltip=tooltip,
    )
    tips = (
        alt.Chart(pd.DataFrame(heads))
        .mark_point(shape="triangle-right", filled=True, size=60, color="#444444")
        .encode(x=x, y=y, angle=alt.Angle("angle:Q", scale=None))
    )
    layers = [*roof_layers(roofs, frame_axes), shafts, dots]
    if heads:
        layers.append(tips)
    described = f"Roofs: {found.label}"
    if found.gpus and found.candidate_label:
        described = f"Roofs: {found.gpus[0]}: {found.label}; {found.gpus[1]} (grey): {found.candidate_label}"
    subtitle = [
        f"{described}. {LEVEL_LABELS[level]} intensity; dot area proportional to time.",
        f"Arrows go from {names[0]} to {names[1]}, one per kernel family and phase ({len(matched)} shown).",
    ]
    return (
        alt.layer(*layers)
        .properties(
            width=WIDTH, height=HEIGHT, title=alt.TitleParams(title, subtitle=subtitle_lines(subtitle), anchor="start")
        )
        .configure_view(stroke="#cccccc")
        .interactive()
    )
