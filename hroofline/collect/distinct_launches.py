"""``profile --backend ncu`` (default): ncu measures one launch per signature, the rest are copied.

Most launches of a training step repeat: GPT-2's twelve blocks run the same kernels on the same shapes. The
trace pass records every launch's signature (kernel, grid, block, its op and the op's recorded inputs:
:mod:`hroofline.importers.launch_signature`) and the op call that launched it (:mod:`hroofline.collect.
op_calls`). The plan chooses op calls so that every signature has a launch measured, fewest launches first:

- a signature's candidates are its launches whose trace time is within 10% of the signature's median time
  (not a first call slowed by cold caches), or the closest one;
- calls are chosen greedily by signatures covered per launch they make ncu profile (ncu measures all the
  kernels of a chosen call);
- each signature's counters come from its measured launch closest to its median time.

ncu then profiles exactly the launches of the chosen calls (``--nvtx-include hroofline@measure/``); each other
launch gets the counters (FLOPs, bytes per level) of its signature's measured launch, keeps its own time from
the trace, and records where its counters came from (``counters_from``). A launch whose signature has no
launch ncu can be told to measure (no op call: compiled code, a launch outside any ATen op) keeps its analytic
work, said in a note.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hroofline.collect.ncu_top import MEASURED_COLUMNS, at_top_clock, function_name, joined_source, same_launches
from hroofline.collect.op_calls import CALL_NVTX_PREFIX
from hroofline.collect.workload import STEP_PHASES
from hroofline.errors import ProfilingError
from hroofline.importers.source import ImportedSource
from hroofline.model.run import PEAK_COLUMNS, RAW_METRIC_PREFIX

# A copied launch whose trace time differs from its measured launch's by more than this may do other work.
TIME_MISMATCH = 0.2
# Below this share of the kernel time such mismatches are first calls and jitter: a note, not a warning.
MISMATCH_WARNING_SHARE = 0.01
_CANDIDATE_SPREAD = 0.1
_PROFILED_CATEGORIES = ("kernel", "communication")  # what ncu profiles: kernels, NCCL's included
_CALL_IN_STACK = rf"(?:^|/){CALL_NVTX_PREFIX}(\d+)(?:/|$)"


@dataclass(frozen=True)
class LaunchPlan:
    """What ncu is to measure and where every other launch's counters come from (launch ids of the trace)."""

    launches: int  # kernel launches in the step's phases
    signatures: int  # distinct signatures among them; a launch without one is its own
    calls: tuple[int, ...]  # the op calls ncu measures, ascending
    measured: tuple[int, ...]  # the launches of those calls, in launch order: what ncu profiles
    counters_from: dict[int, int]  # launch -> the measured launch whose counters it carries
    unplanned: int  # launches in the phases that get no measured counters

    @property
    def profiled(self) -> int:
        return len(self.measured)


def plan_distinct_launches(launches: pd.DataFrame) -> LaunchPlan:
    """The plan for a trace pass's launches (``signature``, ``op_call``, ``time_s`` per launch)."""
    frame = launches.sort_values("launch_id", kind="stable")
    kernels = frame[(frame["category"] == "kernel") & frame["phase"].isin(STEP_PHASES)]
    if kernels.empty:
        raise ProfilingError("the trace pass found no compute kernel in the step's phases: nothing for ncu to profile")
    ids = kernels["launch_id"].to_numpy(dtype=np.int64)
    keys = kernels["signature"].astype(object).where(kernels["signature"].notna(), ["#" + str(i) for i in ids])
    groups = pd.DataFrame(
        {"launch": ids, "key": keys.to_numpy(), "time": kernels["time_s"].to_numpy(dtype=float)},
    )
    groups["call"] = kernels["op_call"].to_numpy()
    median = groups.groupby("key")["time"].transform("median")
    groups["distance"] = (groups["time"] - median).abs()
    callable_ = groups["call"].notna()
    closest = groups[callable_].sort_values(["distance", "launch"]).groupby("key").head(1).index
    near = callable_ & (groups["distance"] <= _CANDIDATE_SPREAD * median)
    candidates = groups[near | groups.index.isin(closest)]
    profiled = frame[frame["category"].isin(_PROFILED_CATEGORIES) & frame["op_call"].notna()]
    size = profiled.groupby("op_call").size()
    chosen = _cover(candidates.groupby("call")["key"].agg(set).to_dict(), size.to_dict())
    measured = profiled[profiled["op_call"].isin(chosen)]
    if measured.empty:
        raise ProfilingError(
            "no kernel of the step was launched inside an op call hroofline can mark (compiled code?): nothing for "
            "ncu to measure once per signature",
            "profile with --every-launch",
        )
    measured_ids = set(measured["launch_id"].astype(int))
    in_measured = groups[groups["launch"].isin(measured_ids)]
    best = in_measured.sort_values(["distance", "launch"]).groupby("key")["launch"].first()
    counters_from = {
        int(launch): int(launch) if launch in measured_ids else int(best[key])
        for launch, key in zip(groups["launch"], groups["key"], strict=True)
        if launch in measured_ids or key in best.index
    }
    counters_from.update({i: i for i in measured_ids})
    return LaunchPlan(
        launches=len(groups),
        signatures=int(groups["key"].nunique()),
        calls=tuple(sorted(int(c) for c in chosen)),
        measured=tuple(int(i) for i in measured["launch_id"]),
        counters_from=counters_from,
        unplanned=int((~groups["launch"].isin(list(counters_from))).sum()),
    )


def _cover(keys_of_call: dict[int, set[str]], size: dict[int, int]) -> set[int]:
    """Calls covering every key they can, greedily by keys newly covered per launch profiled."""
    uncovered = set().union(*keys_of_call.values()) if keys_of_call else set()
    chosen: set[int] = set()
    while uncovered:
        call = max(
            (c for c in keys_of_call if keys_of_call[c] & uncovered),
            key=lambda c: (len(keys_of_call[c] & uncovered) / size.get(c, 1), -size.get(c, 1), -c),
        )
        chosen.add(call)
        uncovered -= keys_of_call[call]
    return chosen


def write_measure_calls(plan: LaunchPlan, path: Path) -> Path:
    """The calls file the workload's ``--measure-calls`` reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(list(plan.calls)) + "\n")
    return path


def copy_counters(
    frame: pd.DataFrame, counters: pd.DataFrame, plan: LaunchPlan, also: tuple[str, ...] = ()
) -> pd.DataFrame:
    """``frame``'s launches with the measured counters of ``counters`` (indexed by the launch they belong
    to), and its columns ``also`` (the report's roofs), on every launch the plan gives a source, and
    ``counters_from`` saying which."""
    out = frame.copy()
    raw = [c for c in counters.columns if c.startswith(RAW_METRIC_PREFIX)]
    columns = [c for c in (*MEASURED_COLUMNS, *raw, *also) if c in counters.columns]
    for column in columns:
        if column not in out.columns:
            out[column] = np.nan
    rows = out["launch_id"].astype(int).map(plan.counters_from)
    has = rows.notna()
    sources = rows[has].astype(int).to_numpy()
    out.loc[has, columns] = counters.loc[sources, columns].to_numpy(dtype=float)
    out["counters_from"] = pd.array(rows, dtype="Int64")
    out.loc[has, "work_op"] = pd.NA
    return out


def pair_measured(trace: pd.DataFrame, measured: pd.DataFrame, plan: LaunchPlan) -> pd.DataFrame:
    """ncu's results indexed by the trace launch each measured: the k-th result is the k-th planned launch,
    checked by function name, grid and block."""
    results = measured.sort_values("launch_id", kind="stable").reset_index(drop=True)
    planned = trace.set_index("launch_id").loc[list(plan.measured)]
    if len(results) != len(planned):
        raise ProfilingError(
            f"ncu measured {len(results)} launches where the plan expected {plan.profiled}: the op calls of the "
            "trace pass and the ncu pass did not line up",
            "profile again with --every-launch (ncu measures each launch, no plan)",
        )
    same = same_launches(planned, results)
    calls = results["nvtx"].astype("string").str.extract(_CALL_IN_STACK, expand=False)
    if calls.notna().all():  # ncu recorded the call#n range each launch ran in: the same call as planned?
        same &= calls.astype(int).to_numpy() == planned["op_call"].astype(int).to_numpy()
    if not same.all():
        first = int(np.flatnonzero(~same)[0])
        theirs, mine = (function_name(str(t["kernel"].iloc[first])) for t in (results, planned))
        raise ProfilingError(
            f"ncu's launch {first + 1} of {len(results)} is {theirs} {results['grid'].iloc[first]} (op call "
            f"{calls.iloc[first] if pd.notna(calls.iloc[first]) else '?'}), the plan expected {mine} "
            f"{planned['grid'].iloc[first]} (op call {planned['op_call'].iloc[first]}): the two passes ran different "
            "kernels",
            "profile again with --every-launch (cudnn.benchmark or data-dependent kernels differ between runs)",
        )
    return results.set_index(pd.Index(plan.measured, name="launch"))


def join_distinct(
    trace: ImportedSource, measured: ImportedSource, plan: LaunchPlan, top_clock_hz: float | None = None
) -> ImportedSource:
    """The trace's run with ncu's counters measured on the planned launches and copied to the rest, and
    their report roofs at ``top_clock_hz`` (the GPU's highest SM clock, where known)."""
    counters = at_top_clock(pair_measured(trace.launches, measured.launches, plan), top_clock_hz)
    frame = copy_counters(trace.launches, counters, plan, tuple(PEAK_COLUMNS))
    notes = [provenance_note(plan)]
    warnings: list[str] = []
    mismatch = time_mismatch(frame)
    if mismatch is not None:
        (warnings if mismatch[2] > MISMATCH_WARNING_SHARE else notes).append(mismatch_line(*mismatch))
    return joined_source(trace, measured, frame, notes, warnings, top_clock_hz)


def provenance_note(plan: LaunchPlan) -> str:
    copied = len(plan.counters_from) - plan.profiled
    note = (
        f"{plan.profiled:,} of {plan.launches:,} launches measured by ncu ({plan.signatures:,} signatures), "
        f"{copied:,} copied from identical launches (same kernel, grid, block, op and op inputs); times are the "
        "trace's (FLOPs, bytes at L1, L2 and HBM from ncu, whose cache flushes make HBM bytes an upper "
        "bound)"
    )
    if plan.unplanned:
        note += f"; {plan.unplanned:,} launches outside any op call keep their analytic work"
    return note


def time_mismatch(frame: pd.DataFrame) -> tuple[int, int, float] | None:
    """(copied launches whose time is more than 20% off their measured launch's, copied launches, share of
    kernel time they take), None where no copied launch is that far off."""
    source = frame["counters_from"]
    copied = source.notna() & (source != frame["launch_id"])
    if not copied.any():
        return None
    times = frame.set_index("launch_id")["time_s"]
    own = frame.loc[copied, "time_s"].to_numpy(dtype=float)
    theirs = times.loc[source[copied].astype(int)].to_numpy(dtype=float)
    off = np.abs(own - theirs) > TIME_MISMATCH * theirs
    if not off.any():
        return None
    kernel_time = float(frame.loc[frame["category"] == "kernel", "time_s"].sum())
    share = float(own[off].sum()) / kernel_time if kernel_time > 0 else 0.0
    return int(off.sum()), int(copied.sum()), share


def mismatch_line(off: int, copied: int, share: float) -> str:
    line = (
        f"{off} of {copied} copied launches ({100 * share:.1f}% of kernel time) ran more than "
        f"{TIME_MISMATCH:.0%} longer or shorter than the launch measured for them"
    )
    if share > MISMATCH_WARNING_SHARE:
        return line + ": their signature may miss what changes their work; profile with --every-launch to measure each"
    return line + " (first calls and cold caches, under 1% of the time)"
