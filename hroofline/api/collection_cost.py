"""What measuring one launch per signature costs in accuracy: a trace and the full ncu report of the same step.

The trace's launches give the plan (:func:`hroofline.collect.distinct_launches.plan_distinct_launches`); the
report holds every launch's counters. The report is rebuilt as the distinct-launch profile would have it (each
launch carrying the counters of its signature's measured launch) and compared with itself per phase: total
FLOPs, bytes at each level, and time at roof with the report's own roofs per launch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hroofline.analyze.binding import roof_times
from hroofline.collect.distinct_launches import LaunchPlan, copy_counters, plan_distinct_launches
from hroofline.collect.ncu_top import function_name
from hroofline.errors import InputError
from hroofline.model.quantities import FLOP_QUANTITIES, LEVELS
from hroofline.model.run import Run
from hroofline.roofs.ceilings import run_roofs
from hroofline.roofs.metricset import load_metric_set


@dataclass(frozen=True)
class CopyCheck:
    plan: LaunchPlan
    per_phase: pd.DataFrame  # phase x (flops, bytes_l1, bytes_l2, bytes_hbm, time_at_roof_s): relative error

    @property
    def flops_error(self) -> float:
        return float(self.per_phase["flops"].abs().max())

    @property
    def bytes_error(self) -> float:
        return float(self.per_phase[[f"bytes_{level}" for level in LEVELS]].abs().max().max())

    @property
    def time_at_roof_error(self) -> float:
        return float(self.per_phase["time_at_roof_s"].abs().max())


def check_copy(trace: Run, full: Run) -> CopyCheck:
    """The plan on ``trace`` and the per-phase relative errors of ``full`` rebuilt from its measured launches."""
    launches = trace.launches.sort_values("launch_id", kind="stable")
    kernels = launches[launches["category"] == "kernel"]
    report = full.launches.sort_values("launch_id", kind="stable")
    if len(kernels) != len(report):
        raise InputError(
            f"the trace has {len(kernels)} kernels, the report {len(report)} launches: not the same step",
            "give a trace and the ncu report of the same profiled step",
        )
    _check_same_launches(kernels, report)
    plan = plan_distinct_launches(launches)
    rebuilt_input = report.assign(launch_id=kernels["launch_id"].to_numpy())
    rebuilt = copy_counters(rebuilt_input, rebuilt_input.set_index("launch_id"), plan)
    rebuilt.index = report.index
    return CopyCheck(plan, _relative_errors(full, report, rebuilt))


# What must agree launch for launch: the kernel's name alone passes a trace of another batch size (its GEMMs
# and element-wise kernels keep their names; their grids and the ops' shapes change).
SAME_LAUNCH_COLUMNS = ("kernel", "grid", "block", "shapes")


def _check_same_launches(kernels: pd.DataFrame, report: pd.DataFrame) -> None:
    """That the trace's k-th kernel is the report's k-th launch: the same kernel, grid and block, and the same
    op shapes where both record them (an ncu report records none: its grids and blocks tell the step apart)."""
    for column in SAME_LAUNCH_COLUMNS:
        if column not in kernels or column not in report:
            continue
        mine, theirs = kernels[column], report[column]
        if column == "kernel":
            mine, theirs = mine.astype(str).map(function_name), theirs.astype(str).map(function_name)
        both = (mine.notna().to_numpy() & theirs.notna().to_numpy()) if column == "shapes" else True
        differ = both & (mine.astype(str).to_numpy() != theirs.astype(str).to_numpy())
        if differ.any():
            first = int(np.flatnonzero(differ)[0])
            raise InputError(
                f"launch {first} has {column} {mine.iloc[first]} in the trace and {theirs.iloc[first]} in the "
                f"report ({int(differ.sum())} launches differ): not the same step",
                "give a trace and the ncu report of the same profiled step (same model, batch and shapes)",
            )


def _relative_errors(full: Run, report: pd.DataFrame, rebuilt: pd.DataFrame) -> pd.DataFrame:
    roofs = run_roofs(full)
    pipes = load_metric_set().pipes_of(full.meta.cc or "")
    rows = {}
    for name, frame in (("full", report), ("rebuilt", rebuilt)):
        at_roof = roof_times(frame, roofs.per_launch.loc[report.index], pipes).time_at_roof
        totals = pd.DataFrame(
            {
                "phase": frame["phase"],
                "flops": frame[list(FLOP_QUANTITIES)].sum(axis=1, min_count=1),
                **{f"bytes_{level}": frame[f"bytes_{level}"] for level in LEVELS},
                "time_at_roof_s": at_roof,
            }
        )
        rows[name] = totals.groupby("phase").sum()
    reference = rows["full"]
    return (rows["rebuilt"] - reference) / reference.where(reference != 0)
