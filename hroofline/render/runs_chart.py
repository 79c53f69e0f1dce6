"""Many runs on rooflines: one chart per GPU, side by side, each with that GPU's roofs and its runs as dots
(:mod:`hroofline.analyze.step_points`). Colour = run; with phases, shape = phase; dot area = time."""

from __future__ import annotations

import altair as alt
import pandas as pd

from hroofline.analyze.step_points import StepPoints
from hroofline.model.numbers import plain, si
from hroofline.model.quantities import LEVEL_LABELS
from hroofline.render.axes import (
    HEIGHT,
    WIDTH,
    Axes,
    Box,
    axes,
    dot_positions,
    label_boxes,
    roof_layers,
    roof_rows,
    subtitle_lines,
)
from hroofline.render.point_labels import place_texts
from hroofline.render.text import text_table

MAX_DOT_AREA = 700
MAX_LABELLED = 8  # dots per chart that get their run's name written beside them
PHASE_SHAPES = {"step": "circle", "forward": "circle", "backward": "square", "optimizer": "triangle-up"}


def runs_chart(found: StepPoints, title: str) -> alt.HConcatChart | alt.LayerChart:
    level = found.level
    points = found.points[found.drawable].copy()
    points["time_text"] = points["time_s"].map(lambda v: si(v, "s"))
    points["rate_text"] = points["flop_rate"].map(lambda v: si(v, "FLOP/s"))
    points["attainable_text"] = points["attainable_flop_rate"].map(lambda v: si(v, "FLOP/s"))
    points["label"] = points["series"] + points["phase"].map(lambda p: "" if p == "step" else f" · {p}")
    series = list(dict.fromkeys(points["series"]))
    colour = alt.Color("series:N", title=None, scale=alt.Scale(domain=series), legend=alt.Legend(labelLimit=400))
    phases = list(dict.fromkeys(points["phase"]))
    drawn_gpus = points["gpu"].nunique()
    charts = []
    for gpu, peaks in found.peaks.items():
        mine = points[points["gpu"] == gpu].rename(columns={"intensity": f"ai_{level}"})
        if mine.empty:  # none of this GPU's runs has bytes at the level drawn
            continue
        width = WIDTH if drawn_gpus == 1 else WIDTH * 2 // 3
        roofs = roof_rows(mine, peaks, [level], width=width)
        frame_axes = axes(roofs, list(mine["flop_rate"]), width)
        x, y = frame_axes.x(f"ai_{level}"), frame_axes.y("flop_rate")
        base = alt.Chart(mine)
        encoding = {
            "x": x,
            "y": y,
            "color": colour,
            "size": alt.Size(
                "time_s:Q",
                scale=alt.Scale(type="linear", zero=True, range=[0, MAX_DOT_AREA]),
                legend=alt.Legend(title="time", labelExpr="format(datum.value * 1e3, '.3~g') + ' ms'"),
            ),
            "tooltip": [
                alt.Tooltip("run:N"),
                alt.Tooltip("series:N", title="what"),
                alt.Tooltip("phase:N"),
                alt.Tooltip("gpu:N", title="GPU"),
                alt.Tooltip("time_text:N", title="time"),
                alt.Tooltip("rate_text:N", title="performance"),
                alt.Tooltip("attainable_text:N", title="attainable (every kernel at its roof)"),
                alt.Tooltip(f"ai_{level}:Q", title=f"intensity at {LEVEL_LABELS[level]} (FLOP/byte)", format=".3g"),
            ],
        }
        if len(phases) > 1:
            encoding["shape"] = alt.Shape(
                "phase:N", scale=alt.Scale(domain=phases, range=[PHASE_SHAPES.get(p, "diamond") for p in phases])
            )
        dots = base.mark_point(filled=True, stroke="#222222", strokeWidth=0.4, opacity=0.85).encode(**encoding)
        layers = [*roof_layers(roofs, frame_axes), dots]
        if len(mine) <= MAX_LABELLED:
            layers.append(_name_layer(mine, level, frame_axes, label_boxes(roofs, frame_axes)))
        subtitle = f"{gpu}: {found.roof_labels[gpu]}"
        charts.append(
            alt.layer(*layers).properties(
                width=width,
                height=HEIGHT,
                title=alt.TitleParams(subtitle, anchor="start", fontSize=12),
            )
        )
    caption = [
        f"One dot per run{' and phase' if len(phases) > 1 else ''}: whole-step FLOPs / {LEVEL_LABELS[level]} bytes "
        "against FLOPs / time; dot area proportional to time.",
        "Each GPU's chart has its own roofs.",
    ]
    top = alt.hconcat(*charts) if len(charts) > 1 else charts[0]
    return top.properties(
        title=alt.TitleParams(title, subtitle=subtitle_lines(caption), anchor="start")
    ).configure_view(stroke="#cccccc")


NAME_CHAR_PX = 5.6  # 10 px text


def _name_layer(mine: pd.DataFrame, level: str, frame_axes: Axes, roof_labels: list[Box]) -> alt.Chart:
    """Each run's name beside its dot, where it covers no roof label, other name or dot."""
    dots = dot_positions(mine, [level], MAX_DOT_AREA)  # one per (drawable) run, in its row's order
    anchors = [(*dot, NAME_CHAR_PX * len(label)) for dot, label in zip(dots, mine["label"], strict=True)]
    corners = place_texts(anchors, frame_axes, roof_labels, dots)
    names = pd.DataFrame({"label": list(mine["label"]), "x": [c[0] for c in corners], "y": [c[1] for c in corners]})
    return (
        alt.Chart(names)
        .mark_text(align="left", baseline="bottom", fontSize=10, color="#333333")
        .encode(x=frame_axes.x("x"), y=frame_axes.y("y"), text="label:N")
    )


def points_text(table: pd.DataFrame) -> str:
    """The table of :meth:`StepPoints.table` for a terminal, SI units."""
    phases = table["phase"].nunique() > 1
    rows = [["run", "GPU", *(["phase"] if phases else []), "time", "FLOPs", "bytes", "FLOP/byte", "FLOP/s"]]
    rows[0] += ["attainable", "% of attainable"]
    level = next(c for c in table.columns if c.startswith("bytes_"))
    for row in table.to_dict(orient="records"):
        rows.append(
            [
                str(row["run"]),
                str(row["gpu"]),
                *([str(row["phase"])] if phases else []),
                si(row["time_s"], "s"),
                si(row["flops"], "FLOP"),
                si(row[level], "B"),
                plain(row["intensity"]) if pd.notna(row["intensity"]) else "-",
                si(row["flop_rate"], "FLOP/s"),
                si(row["attainable_flop_rate"], "FLOP/s"),
                f"{row['attainable_pct']:.1f}%" if pd.notna(row["attainable_pct"]) else "-",
            ]
        )
    note = f"bytes at {level.removeprefix('bytes_').upper()}; attainable: FLOPs / time with every kernel at its roof\n"
    return text_table(rows) + note
