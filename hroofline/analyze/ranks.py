"""Traces: the GPU time per rank (or profiler step) and phase, and how far the slowest rank lags.

Times are GPU activity time summed over launches (kernels, copies and sets; streams that overlap count
twice), the same as every other phase total. The spread of a phase compares the ranks' time outside
communication kernels (a fast rank waits for a slow one inside its collectives, so totals would even out):
the slowest rank's minus the median of all ranks', the extra time the others wait for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hroofline.model.run import PHASES, Run

GROUPINGS: tuple[str, ...] = ("rank", "step")


@dataclass(frozen=True)
class GroupRow:
    """One rank (or step) in one phase."""

    key: int
    phase: str
    time_s: float
    communication_s: float
    launches: int


@dataclass(frozen=True)
class PhaseSpread:
    phase: str
    ranks: int
    slowest_rank: int
    slowest_s: float
    median_s: float
    extra_s: float


def grouped_summary(run: Run, by: str) -> list[GroupRow]:
    """Per rank (``by="rank"``) or profiler step (``"step"``) and phase, in order; launches without one are left out."""
    launches = run.launches[run.launches[by].notna()]
    rows = []
    communication = launches["category"] == "communication"
    for (key, phase), group in launches.groupby([by, "phase"], sort=True, observed=True):
        rows.append(
            GroupRow(
                key=int(key),
                phase=str(phase),
                time_s=float(group["time_s"].sum()),
                communication_s=float(group.loc[communication.loc[group.index], "time_s"].sum()),
                launches=int(group["launches"].sum()),
            )
        )
    order = {p: i for i, p in enumerate(PHASES)}
    return sorted(rows, key=lambda r: (r.key, order.get(r.phase, len(order))))


def rank_spread(run: Run) -> list[PhaseSpread]:
    """Per phase of a run with two or more ranks: the slowest rank (by time outside communication) and its time
    over the median."""
    launches = run.launches[run.launches["rank"].notna() & (run.launches["category"] != "communication")]
    if launches["rank"].nunique() < 2:
        return []
    times = launches.groupby(["phase", "rank"], observed=True)["time_s"].sum().unstack("rank").fillna(0.0)
    spreads = []
    for phase in [p for p in PHASES if p in times.index]:
        row = times.loc[phase]
        median = float(row.median())
        slowest = int(row.idxmax())
        spreads.append(PhaseSpread(phase, len(row), slowest, float(row.max()), median, float(row.max()) - median))
    return spreads


def work_known_share(rows: pd.DataFrame) -> float | None:
    """Of the compute kernels' time, the share whose work is known (trace runs: analytic work found)."""
    kernels = rows[rows["category"] == "kernel"]
    total = float(kernels["time_s"].sum())
    if not len(kernels) or total <= 0:
        return None
    return float(kernels.loc[kernels["flops_fp32"].notna(), "time_s"].sum()) / total


def work_source_shares(rows: pd.DataFrame) -> dict[str, float]:
    """Of the compute kernels' time, the share by where their work came from (the ``work_source`` column: formula,
    inductor, tensors, unknown), largest first; empty for runs without it (not a trace, or imported before it)."""
    kernels = rows[rows["category"] == "kernel"]
    total = float(kernels["time_s"].sum())
    if "work_source" not in kernels or kernels["work_source"].isna().all() or total <= 0:
        return {}
    times = kernels.groupby(kernels["work_source"].astype("string").fillna("unknown"))["time_s"].sum()
    return {str(source): float(time) / total for source, time in times.sort_values(ascending=False).items()}
