"""A trace and an ncu report of the same step, imported together: joined launch for launch, never added.

``hroofline profile`` makes such a pair itself (a trace pass, then ncu over the same step); a user may bring
both files (the shared GPT-2 step: a trace and an ncu report whose 1,118 launches match one to one, in order).
Added, the run would hold every launch twice (twice the step's time). Joined, the k-th launch ncu profiled is the
k-th kernel the trace holds, checked by function name, grid and block: the trace keeps its times (unlocked
clocks, warm caches) and its ops and shapes, ncu's counters replace their analytic work, as
:func:`~hroofline.collect.ncu_top.join_counters` does for the launches ``--kernels top:N`` measured.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hroofline.collect.ncu_top import MEASURED_COLUMNS, at_top_clock, function_name, joined_source, same_launches
from hroofline.errors import MergeError
from hroofline.importers.source import ImportedSource
from hroofline.importers.source_hash import file_entry
from hroofline.model.run import JOINED_KIND, PEAK_COLUMNS, RAW_METRIC_PREFIX, SourceInfo
from hroofline.roofs.catalog import GpuName, gpu_from_display_name

PROFILED_CATEGORIES = ("kernel", "communication")  # what ncu profiles of a trace's activities


def highest_clock(gpu: GpuName) -> float | None:
    """The highest SM clock the GPU runs at (its datasheet's), where the measured launches' roofs are taken."""
    return max(gpu.clocks.values(), default=None)


def is_trace(info: SourceInfo) -> bool:
    """A trace without counters (a trace already joined with ncu's is not joined again)."""
    return info.kind == "kineto"


def is_report(info: SourceInfo) -> bool:
    """An ncu report, its passes or its logs."""
    return info.kind.startswith("ncu")


def is_joined(info: SourceInfo) -> bool:
    """A trace joined with ncu's counters: both halves of a step."""
    return info.kind == JOINED_KIND


def _kernels(launches: pd.DataFrame) -> pd.DataFrame:
    """A trace's launches that ncu would profile, in launch order."""
    category = launches["category"] if "category" in launches else pd.Series(pd.NA, index=launches.index)
    kernels = launches[category.isna() | category.isin(PROFILED_CATEGORIES)]  # an ncu report's have none
    return kernels.sort_values("launch_id", kind="stable")


def _functions(launches: pd.DataFrame) -> np.ndarray:
    return launches["kernel"].astype(str).map(function_name).to_numpy()


def same_step(trace: pd.DataFrame, report: pd.DataFrame) -> bool:
    """Whether a trace's and a report's launches are of one step: as many kernels, at least half of them the same
    function at the same place."""
    mine, theirs = _kernels(trace), _kernels(report)
    if len(mine) != len(theirs) or not len(mine):
        return False
    return bool((_functions(mine) == _functions(theirs)).mean() >= 0.5)


def join_step(trace: ImportedSource, report: ImportedSource, top_clock_hz: float | None) -> ImportedSource:
    """The trace with the report's counters, launch for launch; refused where a launch does not pair (another
    function, grid or block at the same place)."""
    frame = trace.launches.copy()
    mine = _kernels(frame)
    theirs = at_top_clock(report.launches.sort_values("launch_id", kind="stable"), top_clock_hz)
    same = same_launches(mine, theirs)
    if not same.all():
        k = int(np.flatnonzero(~same)[0])
        raise MergeError(
            f"{trace.info.path} and {report.info.path} are one step ({len(mine):,} launches each) but launch {k + 1} "
            f"differs: {_functions(mine)[k]} {mine['grid'].iloc[k]} in the trace, {_functions(theirs)[k]} "
            f"{theirs['grid'].iloc[k]} in the report",
            "import them into two runs (they are not the same launches)",
        )
    raw = [c for c in theirs.columns if c.startswith(RAW_METRIC_PREFIX)]
    columns = [c for c in (*MEASURED_COLUMNS, *raw, *PEAK_COLUMNS) if c in theirs.columns]
    for column in columns:
        if column not in frame.columns:
            frame[column] = np.nan
    frame.loc[mine.index, columns] = theirs[columns].to_numpy(dtype=float)
    frame.loc[mine.index, "work_op"] = pd.NA
    if "work_source" in frame.columns:
        frame.loc[mine.index, "work_source"] = "ncu"  # measured counters, no longer the trace's estimate
    frame.loc[mine.index, "counters_from"] = frame.loc[mine.index, "launch_id"]
    note = (
        f"{len(mine):,} launches joined with {report.info.path}'s, one to one in launch order (same function, grid "
        "and block): FLOPs and bytes at L1, L2 and HBM from ncu (its cache flushes make HBM bytes an upper bound), "
        f"times from {trace.info.path}"
    )
    joined = joined_source(trace, report, frame, [note], [], top_clock_hz)
    halves = (info.files or [file_entry(info.path, info.source_hash)] for info in (trace.info, report.info))
    joined.info.files = [file for half in halves for file in half]  # where both came from
    return joined


def join_same_steps(sources: list[ImportedSource], gpu: GpuName | None) -> list[ImportedSource]:
    """``sources`` with each trace and ncu report of the same step joined into one source (the trace's place)."""
    partner: dict[int, int] = {}  # trace -> report, by position
    for t, trace in enumerate(sources):
        if not is_trace(trace.info):
            continue
        taken = set(partner.values())
        found = (
            r
            for r, s in enumerate(sources)
            if r not in taken and is_report(s.info) and same_step(trace.launches, s.launches)
        )
        r = next(found, None)
        if r is not None:
            partner[t] = r
    joined: list[ImportedSource] = []
    for i, source in enumerate(sources):
        if i in partner:
            known = gpu or (gpu_from_display_name(source.device_name) if source.device_name else None)
            joined.append(join_step(source, sources[partner[i]], highest_clock(known) if known else None))
        elif i not in partner.values():
            joined.append(source)
    return joined
