"""Ranks' wall time (:mod:`hroofline.analyze.overlap`) drawn: tables for the terminal, a stacked bar per rank, and
the report's section. Nothing is computed here."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import altair as alt
import pandas as pd

from hroofline.analyze.overlap import RunOverlap, WallTime
from hroofline.render.html_page import ChartBlock, escape
from hroofline.render.text import render_frame

# The parts of a wall time, in the order they stack, with their legend labels and colours.
PARTS: tuple[tuple[str, str, str], ...] = (
    ("compute_s", "compute", "#4c78a8"),
    ("communication_hidden_s", "communication hidden behind compute", "#72b7b2"),
    ("communication_exposed_s", "communication exposed", "#e45756"),
    ("idle_s", "idle (waiting on the host or another rank)", "#bab0ac"),
)
WALL_COLUMNS: tuple[str, ...] = ("rank", "wall_s", *(key for key, _, _ in PARTS))
WALL_HEADING = (
    "wall time per rank, over its profiled steps (first GPU activity to last of each step; "
    "compute + communication hidden + exposed + idle = wall):"
)
CRITICAL_HEADING = (
    "critical rank per step and phase (the longest own work: compute + communication hidden; lag = its own work - "
    "the median rank's; waiting caused = the median rank's exposed communication + idle - its own; "
    "wall difference = lag - waiting caused):"
)
SPREAD_HEADING = (
    "slowest rank per phase (by its GPU time outside communication kernels, summed over launches: slowest_s and "
    "median_s are that time; extra = slowest - median of the ranks):"
)
CRITICAL_COLUMNS: tuple[str, ...] = (
    "step",
    "phase",
    "ranks",
    "critical_rank",
    "median_rank",
    "lag_s",
    "waiting_caused_s",
    "wall_difference_s",
)


def wall_records(rows: list[WallTime]) -> list[dict[str, Any]]:
    """Per rank: its wall time and the parts it is made of."""
    return [{key: asdict(row)[key] for key in WALL_COLUMNS} for row in rows]


def overlap_text(overlap: RunOverlap) -> str:
    """``summary --by rank``'s wall-time tables, or the line saying why there are none."""
    if overlap.unknown is not None:
        return f"\nnote: {overlap.unknown}\n"
    parts = [f"\n{WALL_HEADING}\n", render_frame(pd.DataFrame(wall_records(overlap.ranks)), "table")]
    if overlap.critical:
        table = pd.DataFrame([asdict(c) for c in overlap.critical])[list(CRITICAL_COLUMNS)]
        parts += [f"\n{CRITICAL_HEADING}\n", render_frame(table.astype({"step": "Int64"}), "table")]
    return "".join(parts)


def rank_bars(overlap: RunOverlap, title: str) -> alt.Chart:
    """One horizontal bar per rank, its wall time stacked from compute, hidden and exposed communication and idle."""
    labels = {key: label for key, label, _ in PARTS}
    rows = [
        {"rank": f"rank {row.rank}", "part": labels[key], "order": i, "seconds": getattr(row, key) * 1e3}
        for row in overlap.ranks
        for i, (key, _, _) in enumerate(PARTS)
    ]
    colour = alt.Color(
        "part:N",
        title=None,
        scale=alt.Scale(domain=[label for _, label, _ in PARTS], range=[c for _, _, c in PARTS]),
        legend=alt.Legend(orient="bottom", labelLimit=400),
    )
    return (
        alt.Chart(pd.DataFrame(rows), title=title)
        .mark_bar()
        .encode(
            y=alt.Y("rank:N", title=None, sort=[f"rank {r.rank}" for r in overlap.ranks]),
            x=alt.X("sum(seconds):Q", title="wall time over the profiled steps (ms)"),
            color=colour,
            order=alt.Order("order:Q"),
            tooltip=["rank:N", "part:N", alt.Tooltip("seconds:Q", title="ms", format=".4~g")],
        )
        .properties(width=640, height=max(60, 28 * len(overlap.ranks)))
    )


def overlap_html(overlap: RunOverlap, name: str, chart_id: str) -> str:
    """The report's section of a run of several ranks: the stacked bars and both tables."""
    parts = [f"<h3>{escape(name)} · wall time per rank</h3>"]
    if overlap.unknown is not None:
        return parts[0] + f'<p class="note">{escape(overlap.unknown)}</p>'
    parts.append(ChartBlock(chart_id, rank_bars(overlap, f"{name}: wall time per rank").to_dict()).html())
    parts.append(f'<p class="note">{escape(WALL_HEADING)}</p>')
    parts.append(_html_table(wall_records(overlap.ranks)))
    if overlap.critical:
        parts.append(f'<p class="note">{escape(CRITICAL_HEADING)}</p>')
        critical = [{key: asdict(c)[key] for key in CRITICAL_COLUMNS} for c in overlap.critical]
        parts.append(_html_table(critical))
    return "\n".join(parts)


def _html_table(records: list[dict[str, Any]]) -> str:
    return f'<pre class="hr-table">{escape(render_frame(pd.DataFrame(records), "table"))}</pre>'
