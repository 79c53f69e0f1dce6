"""Where each kernel sits against its roofs: binding roof, % of roof, time at roof, dots above a roof.

The roofline model, per kernel (or kernel group), with the ceilings of one set:

- compute time at roof  t_c = sum over precisions p of FLOPs_p / peak_p   (a mixed kernel pays each part)
- memory time at roof   t_L = bytes_L / bandwidth_L                       for L in L1, L2, HBM
- time at roof          t_roof = max(t_c, t_L1, t_L2, t_HBM); the binding roof is the term that is largest
- roof_pct              100 * t_roof / time          (= achieved FLOP/s / attainable FLOP/s)
- recoverable time      time - t_roof

A kernel cannot run faster than its time at roof. Per memory level, its dot (intensity FLOPs/bytes_L,
FLOP/s) lies above the roof of that level when time < max(t_c, t_L): then the ceilings or the metrics are
wrong, and hroofline says so instead of drawing it quietly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hroofline.analyze.kernels import KernelQuery, kernel_table
from hroofline.analyze.names import short_kernel_name
from hroofline.ceilings import LEVEL_LABELS, LEVELS, PRECISION_LABELS, PRECISIONS, Ceilings
from hroofline.model import PHASES, Run
from hroofline.render.numbers import si

# Relative slack for the above-roof test: float rounding only, not measurement noise.
ABOVE_ROOF_SLACK = 1e-9

ROOF_COLUMNS: tuple[str, ...] = ("bound", "roof_pct", "time_at_roof_s", "recoverable_s")
TOP_COLUMNS: tuple[str, ...] = (
    "kernel",
    "phase",
    "count",
    "time_s",
    "phase_share_pct",
    "flop_rate",
    "ai_l1",
    "ai_l2",
    "ai_hbm",
    *ROOF_COLUMNS,
)


@dataclass
class RoofNotes:
    """What the roof analysis could not do, in sentences for the user."""

    above_roof: list[str] = field(default_factory=list)
    missing_roofs: list[str] = field(default_factory=list)


def with_roofs(table: pd.DataFrame, ceilings: Ceilings, notes: RoofNotes | None = None) -> pd.DataFrame:
    """Adds the roof columns (and above_<level> flags) to a kernel table from :func:`kernel_table`."""
    out = table.copy()
    terms: dict[str, pd.Series] = {}
    compute_parts: dict[str, pd.Series] = {}
    for precision in PRECISIONS:
        flops = out[f"flops_{precision}"]
        peak = ceilings.compute.get(precision)
        if peak is None:
            used = int((flops > 0).sum())
            if used and notes is not None:
                notes.missing_roofs.append(
                    f"{used} kernel(s) run {PRECISION_LABELS[precision]} FLOPs but {ceilings.label} has no "
                    f"{PRECISION_LABELS[precision]} peak; their compute roof leaves that part out"
                )
            continue
        compute_parts[precision] = flops.fillna(0.0) / peak
    compute_time = pd.concat(compute_parts, axis=1).sum(axis=1) if compute_parts else pd.Series(0.0, out.index)
    terms["compute"] = compute_time.where(compute_time > 0)
    for level in LEVELS:
        bandwidth = ceilings.bandwidth.get(level)
        terms[level] = out[f"bytes_{level}"] / bandwidth if bandwidth else pd.Series(np.nan, out.index)
        measured = int((out[f"bytes_{level}"] > 0).sum())
        if not bandwidth and measured and notes is not None:
            notes.missing_roofs.append(
                f"{ceilings.label} has no {LEVEL_LABELS[level]} bandwidth: {LEVEL_LABELS[level]} traffic of "
                f"{measured} kernel(s) has no roof and does not enter their time at roof"
            )
    frame = pd.DataFrame(terms)
    time_at_roof = frame.max(axis=1, skipna=True)
    bound_term = frame.fillna(-1.0).idxmax(axis=1).where(time_at_roof.notna())
    dominant_precision = (
        pd.DataFrame(compute_parts).idxmax(axis=1) if compute_parts else pd.Series(None, out.index, dtype=object)
    )
    out["bound"] = [
        _bound_label(term, precision) for term, precision in zip(bound_term, dominant_precision, strict=True)
    ]
    seconds = out["time_s"]
    out["time_at_roof_s"] = time_at_roof
    out["roof_pct"] = 100.0 * time_at_roof / seconds.where(seconds > 0)
    out["recoverable_s"] = seconds - time_at_roof
    # A kernel faster than its time at roof beats a roof, drawn or not (zero-FLOP kernels too).
    out["above_roof"] = (seconds < time_at_roof * (1 - ABOVE_ROOF_SLACK)).fillna(False)
    for level in LEVELS:
        # The dot at this level: above when faster than both the compute roof and this level's roof.
        level_roof_time = pd.concat([terms["compute"], terms[level]], axis=1).max(axis=1, skipna=True)
        out[f"above_{level}"] = (seconds < level_roof_time * (1 - ABOVE_ROOF_SLACK)).fillna(False)
    if notes is not None:
        notes.above_roof.extend(_above_roof_sentences(out, ceilings))
    return out


def _bound_label(term: object, precision: object) -> str | None:
    if not isinstance(term, str):
        return None
    if term == "compute":
        return PRECISION_LABELS.get(str(precision), "compute")
    return LEVEL_LABELS[term]


def _above_roof_sentences(table: pd.DataFrame, ceilings: Ceilings) -> list[str]:
    sentences = []
    for row in table[table["above_roof"]].itertuples(index=False):
        sentences.append(
            f"{short_kernel_name(str(row.kernel))} ({row.phase}) beats its {row.bound} roof of {ceilings.label}: "
            f"it took {si(row.time_s, 's')}, less than the {si(row.time_at_roof_s, 's')} the roofs allow; "
            "check the ceilings or the metrics"
        )
    return sentences


def top_kernels(
    run: Run, ceilings: Ceilings, phase: str | None = None, count: int | None = None, notes: RoofNotes | None = None
) -> pd.DataFrame:
    """Kernels grouped by name within each phase, ranked by time, with their roofs."""
    table = _roof_table(run, ceilings, KernelQuery(group_by="name", phase=phase), notes)
    table = table.sort_values("time_s", ascending=False, kind="stable", na_position="last")
    if count is not None:
        table = table.head(count)
    return table[list(TOP_COLUMNS)].reset_index(drop=True)


@dataclass
class RooflinePoints:
    """What a roofline chart draws: one row per kernel group (or launch), and what it leaves out."""

    points: pd.DataFrame
    phases: list[str]
    notes: RoofNotes
    not_drawn: int  # kernel groups with no FLOPs, no time or no bytes at the levels drawn
    not_drawn_time_s: float
    no_flops: int  # of those, the ones with no FLOPs at all
    per_launch: bool


def _roof_table(run: Run, ceilings: Ceilings, query: KernelQuery, notes: RoofNotes | None) -> pd.DataFrame:
    """The kernel table with each row's share of its phase's time and its roofs."""
    table = kernel_table(run, query)
    phase_time = run.launches.groupby("phase", observed=True)["time_s"].sum()
    table["phase_share_pct"] = 100.0 * table["time_s"] / table["phase"].map(phase_time).astype("float64")
    return with_roofs(table, ceilings, notes)


def roofline_points(
    run: Run,
    ceilings: Ceilings,
    phase: str | None = None,
    per_launch: bool = False,
    levels: tuple[str, ...] = LEVELS,
) -> RooflinePoints:
    """The kernel groups (or launches) a chart can place: time, FLOPs and bytes at one of ``levels``."""
    notes = RoofNotes()
    table = _roof_table(run, ceilings, KernelQuery(group_by="launch" if per_launch else "name", phase=phase), notes)
    drawable = (table["flop_rate"] > 0) & table[[f"ai_{level}" for level in levels]].gt(0).any(axis=1)
    hidden = table[~drawable]
    points = table[drawable].reset_index(drop=True)
    points.insert(0, "kid", np.arange(len(points)))
    present = set(points["phase"].astype(str))
    phases = [p for p in PHASES if p in present] + sorted(present - set(PHASES))
    return RooflinePoints(
        points=points,
        phases=phases,
        notes=notes,
        not_drawn=len(hidden),
        not_drawn_time_s=float(hidden["time_s"].sum()),
        no_flops=int((hidden["flops"].fillna(0) <= 0).sum()),
        per_launch=per_launch,
    )


def precisions_present(points: pd.DataFrame) -> list[str]:
    """Precisions with FLOPs in the drawn kernels: their compute roofs are the ones worth drawing."""
    return [p for p in PRECISIONS if (points[f"flops_{p}"].fillna(0) > 0).any()]


def levels_with_dots(points: pd.DataFrame, levels: tuple[str, ...]) -> tuple[str, ...]:
    """Of ``levels``, those where some kernel has an intensity to draw (all of them when none has)."""
    drawn = tuple(lv for lv in LEVELS if lv in levels and points[f"ai_{lv}"].gt(0).any())
    return drawn or tuple(lv for lv in LEVELS if lv in levels)
