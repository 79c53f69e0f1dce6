"""Kernel tables and phase summaries of a run.

Sums keep "not measured" apart from zero: a sum over launches is null only when no launch measured the
quantity. Intensities and rates are computed from the sums (total FLOPs / total bytes), never averaged.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hroofline.errors import UsageError
from hroofline.metricset import QUANTITIES
from hroofline.model import PHASES, Run
from hroofline.roofline import arithmetic_intensity, flop_rate, total_flops

KERNEL_COLUMNS: tuple[str, ...] = (
    "kernel",
    "phase",
    "count",
    "time_s",
    "flops",
    "flops_fp64",
    "flops_fp32",
    "flops_fp16",
    "flops_tensor",
    "bytes_l1",
    "bytes_l2",
    "bytes_hbm",
    "ai_l1",
    "ai_l2",
    "ai_hbm",
    "flop_rate",
)
SUMMED: tuple[str, ...] = ("time_s", *QUANTITIES)
SUMMARY_COLUMNS: tuple[str, ...] = ("time_s", "flops", "flops_tensor", "bytes_l1", "bytes_l2", "bytes_hbm", "kernels")


@dataclass(frozen=True)
class KernelQuery:
    group_by: str = "launch"
    phase: str | None = None
    top: int | None = None
    sort: str = "time_s"


def kernel_table(run: Run, query: KernelQuery) -> pd.DataFrame:
    if query.group_by not in ("launch", "name"):
        raise UsageError(f"--group-by must be launch or name, not {query.group_by!r}")
    launches = run.launches
    if query.phase:
        launches = launches[launches["phase"] == query.phase]
    if query.group_by == "name":
        table = _sum_by_name(launches)
    else:
        table = launches[["launch_id", "source", "kernel", "phase", "launches", *SUMMED]].rename(
            columns={"launches": "count"}
        )
    table = _with_derived(table)
    columns = list(KERNEL_COLUMNS) + (["source", "launch_id"] if query.group_by == "launch" else [])
    table = table[columns]
    if query.sort not in table.columns:
        raise UsageError(f"cannot sort by {query.sort!r}", "columns: " + ", ".join(table.columns))
    ascending = query.sort in ("kernel", "phase")
    table = table.sort_values(query.sort, ascending=ascending, na_position="last", kind="stable")
    if query.top is not None:
        table = table.head(query.top)
    return table.reset_index(drop=True)


def _sum_by_name(launches: pd.DataFrame) -> pd.DataFrame:
    grouped = launches.groupby(["phase", "kernel"], sort=False, observed=True, dropna=False)
    sums = grouped[list(SUMMED)].sum(min_count=1)
    sums["count"] = grouped["launches"].sum()
    return sums.reset_index()


def _with_derived(table: pd.DataFrame) -> pd.DataFrame:
    out = table.copy()
    out["flops"] = total_flops(out)
    for level in ("l1", "l2", "hbm"):
        out[f"ai_{level}"] = arithmetic_intensity(out["flops"], out[f"bytes_{level}"])
    out["flop_rate"] = flop_rate(out["flops"], out["time_s"])
    return out


def phase_summary(run: Run) -> dict[str, dict[str, float | int | None]]:
    """Per phase present (in canonical order) and 'total': time, FLOPs, tensor FLOPs, bytes, launches."""
    launches = run.launches
    result: dict[str, dict[str, float | int | None]] = {}
    for phase in PHASES:
        rows = launches[launches["phase"] == phase]
        if len(rows):
            result[phase] = _totals(rows)
    result["total"] = _totals(launches)
    return result


def _totals(rows: pd.DataFrame) -> dict[str, float | int | None]:
    sums = rows[list(SUMMED)].sum(min_count=1)
    flops = total_flops(sums.to_frame().T).iloc[0]
    values: dict[str, float | int | None] = {
        "time_s": _value(sums["time_s"]),
        "flops": _value(flops),
        "flops_tensor": _value(sums["flops_tensor"]),
        "bytes_l1": _value(sums["bytes_l1"]),
        "bytes_l2": _value(sums["bytes_l2"]),
        "bytes_hbm": _value(sums["bytes_hbm"]),
        "kernels": int(rows["launches"].sum()),
    }
    return values


def _value(number: object) -> float | None:
    return None if pd.isna(number) else float(number)  # type: ignore[arg-type]
