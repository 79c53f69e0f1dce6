"""Kernel tables and phase summaries of a run.

Sums keep "not measured" apart from zero: a sum over launches is null only when no launch measured the
quantity. Intensities and rates are computed from the sums (total FLOPs / total bytes), never averaged.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from hroofline.analyze.ranks import work_known_share
from hroofline.errors import HrooflineError, UsageError
from hroofline.model.layers import matches
from hroofline.model.quantities import (
    BYTE_QUANTITIES,
    COMPUTE_ROOF_OF,
    CORE_FLOP_QUANTITIES,
    OP_QUANTITIES,
    QUANTITIES,
    TENSOR_FLOP_QUANTITIES,
    UTILIZATION_COLUMNS,
)
from hroofline.model.run import LAUNCH_COLUMNS, PEAK_PREFIX, PHASES, PhaseMemory, Run, first_per_phase
from hroofline.roofs.formulas import arithmetic_intensity, flop_rate, total_flops

KERNEL_COLUMNS: tuple[str, ...] = (
    "kernel",
    "phase",
    "count",
    "time_s",
    "flops",
    *CORE_FLOP_QUANTITIES,
    "flops_tensor",
    *TENSOR_FLOP_QUANTITIES,
    *OP_QUANTITIES,
    *BYTE_QUANTITIES,
    "ai_l1",
    "ai_l2",
    "ai_hbm",
    "flop_rate",
)
# Per-precision tensor columns and integer operations: shown in text tables only where some row has them.
DETAIL_COLUMNS: tuple[str, ...] = (*TENSOR_FLOP_QUANTITIES, *OP_QUANTITIES)
SUMMED: tuple[str, ...] = ("time_s", *QUANTITIES, "flops_tensor")
SUMMARY_COLUMNS: tuple[str, ...] = (
    "time_s",
    "time_bound_s",
    "flops",
    "flops_tensor",
    *DETAIL_COLUMNS,
    "bytes_l1",
    "bytes_l2",
    "bytes_hbm",
    "kernels",
    "copies",
    "work_known",
    *UTILIZATION_COLUMNS,
    "communication_s",
    "bytes_link",
    "memory_peak_bytes",
    "memory_retained_bytes",
)
COPY_CATEGORIES: tuple[str, ...] = ("memcpy", "memset")  # a trace's copies and sets: counted apart from kernels
GROUPINGS: tuple[str, ...] = ("launch", "name", "layer")
# Per launch, where it ran: shown after the quantities.
LAUNCH_CONTEXT: tuple[str, ...] = (
    "layer",
    "op",
    "work_source",  # traces: where its work came from (formula, inductor, tensors, ...)
    "nvtx",
    "grid",
    "block",
    "shapes",
    "category",
    "rank",
    "step",
    "source",
    "launch_id",
)
NO_LAYER = "(no layer)"
# Collectives' columns (hroofline/analyze/communication.py makes them): shown only where some row has them.
LINK_COLUMNS: tuple[str, ...] = ("busbw_byte_per_s", "algbw_byte_per_s", "link_pct")


@dataclass(frozen=True)
class KernelQuery:
    """Which launches (phase; layer and NVTX range as globs) and how to group them: per launch, per kernel
    name within a phase, or per layer within a phase."""

    group_by: str = "launch"
    phase: str | None = None
    top: int | None = None
    sort: str = "time_s"
    layer: str | None = None
    nvtx: str | None = None


TIMED_FLOPS = "timed_flops"  # FLOPs of the launches that have a time: what FLOP/s is computed from


def phase_launches(run: Run, phase: str | None) -> pd.DataFrame:
    """The run's launches, or those of one phase."""
    return run.launches if not phase else run.launches[run.launches["phase"] == phase]


def has_layers(run: Run) -> bool:
    return bool(run.launches["layer"].notna().any())


def selected_launches(run: Run, query: KernelQuery) -> pd.DataFrame:
    """The launches a query asks for: its phase, layers matching ``query.layer`` (a glob, or a layer and
    everything below it) and NVTX stacks matching ``query.nvtx`` (a glob over 'outer/inner')."""
    launches = phase_launches(run, query.phase)
    if (query.layer or query.group_by == "layer") and not has_layers(run):
        raise HrooflineError(
            f"run {run.name!r} has no layers",
            "layers come from hroofline's profile and predict, and from NVTX ranges in imported reports",
        )
    if query.layer:
        pattern = query.layer
        launches = launches[_where(launches["layer"], lambda name: matches(name, pattern))]
    if query.nvtx:
        glob = query.nvtx if any(c in query.nvtx for c in "*?[") else f"*{query.nvtx}*"
        launches = launches[_where(launches["nvtx"], lambda stack: fnmatch.fnmatchcase(stack, glob))]
    if (query.layer or query.nvtx) and launches.empty:
        what = " and ".join(
            f"--{name} {value}" for name, value in (("layer", query.layer), ("nvtx", query.nvtx)) if value
        )
        known = sorted(set(run.launches["layer"].dropna().astype(str)))
        raise HrooflineError(
            f"no launch of run {run.name!r}{' in ' + query.phase if query.phase else ''} matches {what}",
            ("layers: " + ", ".join(known[:8]) + (", ..." if len(known) > 8 else "")) if known else None,
        )
    return launches


def kernel_table(run: Run, query: KernelQuery, extra: pd.DataFrame | None = None) -> pd.DataFrame:
    """Launches, or their sums per kernel name within a phase. ``extra`` (indexed like the run's
    launches) adds columns that are summed the same way; they come after the standard columns."""
    if query.group_by not in GROUPINGS:
        raise UsageError(f"--group-by must be launch, name or layer, not {query.group_by!r}")
    launches = selected_launches(run, query)
    extra_columns = list(extra.columns) if extra is not None else []
    if extra is not None:
        launches = launches.join(extra)
    # A launch without a time (a source that timed only some) adds FLOPs but no seconds: FLOP/s is taken
    # over the timed launches only, never as all FLOPs over part of the time.
    launches = launches.assign(**{TIMED_FLOPS: total_flops(launches).where(launches["time_s"].notna())})
    summed = [*SUMMED, TIMED_FLOPS, *extra_columns]
    if query.group_by == "name":
        table = _sum_by(launches, ["phase", "kernel"], summed)
    elif query.group_by == "layer":
        launches = launches.assign(layer=launches["layer"].astype("string").fillna(NO_LAYER))
        table = _sum_by(launches, ["phase", "layer"], summed)
        longest = _longest_kernel(launches)
        table["kernel"] = [
            longest.get((str(p), str(lay))) for p, lay in zip(table["phase"], table["layer"], strict=True)
        ]
    else:
        table = launches[[*LAUNCH_CONTEXT, "kernel", "phase", "launches", *summed]].rename(
            columns={"launches": "count"}
        )
    table = _with_derived(table)
    columns = _columns(query.group_by) + extra_columns
    table = table[columns]
    if query.sort not in table.columns:
        raise UsageError(f"cannot sort by {query.sort!r}", "columns: " + ", ".join(table.columns))
    ascending = query.sort in (
        "kernel",
        "phase",
        "layer",
        "op",
        "nvtx",
        "shapes",
        "grid",
        "block",
        "category",
        "rank",
        "step",
        "source",
        "launch_id",
    )
    table = table.sort_values(query.sort, ascending=ascending, na_position="last", kind="stable")
    if query.top is not None:
        table = table.head(query.top)
    return table.reset_index(drop=True)


def _where(column: pd.Series, wanted: Callable[[str], bool]) -> pd.Series:
    """Rows whose value is wanted, asking once per distinct value (layers and stacks repeat)."""
    values = column.astype("string")
    chosen = [value for value in values.dropna().unique() if wanted(str(value))]
    return values.isin(chosen).fillna(False).astype(bool)


def _columns(group_by: str) -> list[str]:
    if group_by == "layer":  # the layer first; ``kernel`` is its kernel with the most time
        return ["layer", *KERNEL_COLUMNS[1:3], "kernel", *KERNEL_COLUMNS[3:]]
    if group_by == "launch":
        return [*KERNEL_COLUMNS, *LAUNCH_CONTEXT]
    return list(KERNEL_COLUMNS)


def _sum_by(launches: pd.DataFrame, keys: list[str], summed: list[str]) -> pd.DataFrame:
    grouped = launches.groupby(keys, sort=False, observed=True, dropna=False)
    sums = grouped[summed].sum(min_count=1)
    sums["count"] = grouped["launches"].sum()
    return sums.reset_index()


def _longest_kernel(launches: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per phase and layer, the kernel name with the most time in it."""
    times = launches.groupby(["phase", "layer", "kernel"], observed=True)["time_s"].sum(min_count=1).fillna(0.0)
    if times.empty:
        return {}
    best = times.groupby(level=[0, 1], observed=True).idxmax()
    return {(str(key[0]), str(key[1])): str(triple[2]) for key, triple in best.items()}


def _with_derived(table: pd.DataFrame) -> pd.DataFrame:
    out = table.copy()
    out["flops"] = total_flops(out)
    for level in ("l1", "l2", "hbm"):
        out[f"ai_{level}"] = arithmetic_intensity(out["flops"], out[f"bytes_{level}"])
    out["flop_rate"] = flop_rate(out[TIMED_FLOPS], out["time_s"])
    return out.drop(columns=[TIMED_FLOPS])


def shown_columns(table: pd.DataFrame) -> pd.DataFrame:
    """For people: the per-precision tensor and integer columns only where some row is non-zero (the
    total, flops_tensor, still says 0 or not measured); MFU, HFU and MBU only where some row has one (a trace has
    model FLOPs, an ncu report hardware FLOPs); a collective's busbw, algbw and % of link roof only where some row
    is one."""
    empty = [c for c in DETAIL_COLUMNS if c in table and not (table[c].fillna(0) != 0).any()]
    empty += [c for c in (*UTILIZATION_COLUMNS, *LINK_COLUMNS) if c in table and table[c].isna().all()]
    return table.drop(columns=empty)


def empty_detail_columns(summary: dict[str, dict[str, float | int | None]]) -> set[str]:
    """The per-precision columns of a phase summary that no phase has a non-zero value for."""
    return {c for c in DETAIL_COLUMNS if not any(values.get(c) for values in summary.values())}


# What the phase summary reads of a run: what it sums and how it tells phases, kernels and copied counters apart;
# not the names or the raw ncu metrics, which are most of a large run's memory.
SUMMARY_READS: tuple[str, ...] = (
    *SUMMED,
    "work_source",
    "time_bound_s",
    "bytes_link",
    "collective",  # each collective kind's algbw and busbw (hroofline/analyze/communication.py)
    "bytes_message",
    "group_size",
    "launches",
    "launch_id",
    "counters_from",
    "phase",
    "category",
    "source",  # which launches' FLOPs are the model's and which the hardware's (MFU, HFU)
    "clock_hz",  # the roofs MFU and MBU are taken against: the dense FLOP roofs and HBM's
    *dict.fromkeys(
        PEAK_PREFIX + k.removesuffix("_sparse") for c, k in COMPUTE_ROOF_OF.items() if c.startswith("flops_")
    ),
    PEAK_PREFIX + "hbm",
)
# What :func:`_totals` reads of a phase's launches.
TOTALS_READS: tuple[str, ...] = (*dict.fromkeys((*SUMMED, "time_bound_s", "category", "launches", "bytes_link")),)
# What rankings of kernels and layers read: every launch column, not the raw ncu metrics behind them.
RANKING_READS: tuple[str, ...] = tuple(LAUNCH_COLUMNS)


def phase_summary(run: Run) -> dict[str, dict[str, float | int | None]]:
    """Per phase present (in canonical order) and 'total': time, FLOPs (tensor FLOPs per input
    precision, integer tensor operations), bytes, launches."""
    launches = run.launches
    trace = bool(launches["category"].notna().any())  # what share of the time has known work
    communicates = bool((launches["category"] == "communication").any())
    memory = phase_memory(run)
    result: dict[str, dict[str, float | int | None]] = {}
    phases = launches["phase"]
    totalled = launches[list(TOTALS_READS)]  # a phase's rows copy only these, not the run's every column
    for phase in PHASES:
        rows = totalled[phases == phase]
        if len(rows):
            result[phase] = _totals(rows, trace, communicates)
            if phase in memory:
                result[phase]["memory_peak_bytes"] = memory[phase].peak_bytes
                result[phase]["memory_retained_bytes"] = memory[phase].retained_bytes
    result["total"] = _totals(totalled, trace, communicates)
    if memory:
        result["total"]["memory_peak_bytes"] = max(m.peak_bytes for m in memory.values())
        result["total"]["memory_retained_bytes"] = sum(m.retained_bytes for m in memory.values())
    return result


def phase_memory(run: Run) -> dict[str, PhaseMemory]:
    """Each phase's memory, from the first source that recorded it (predicted or measured)."""
    recorded = first_per_phase([memory for source in run.meta.sources for memory in source.memory])
    return {memory.phase: memory for memory in recorded}


def _totals(rows: pd.DataFrame, trace: bool = False, communicates: bool = False) -> dict[str, float | int | None]:
    sums = rows[list(SUMMED)].sum(min_count=1)
    flops = total_flops(sums.to_frame().T).iloc[0]
    values: dict[str, float | int | None] = {"time_s": _value(sums["time_s"]), "flops": _value(flops)}
    if rows["time_bound_s"].notna().any():  # a prediction: time_s is its estimate, this its roofline bound
        values["time_bound_s"] = float(rows["time_bound_s"].sum())
    for column in ("flops_tensor", *DETAIL_COLUMNS, *BYTE_QUANTITIES):
        values[column] = _value(sums[column])
    copies = rows["category"].isin(COPY_CATEGORIES)  # a trace's memcpys and memsets are no kernels
    values["kernels"] = int(rows.loc[~copies, "launches"].sum())
    if trace:
        values["copies"] = int(rows.loc[copies, "launches"].sum())
    if trace:
        values["work_known"] = work_known_share(rows)
    if communicates:
        communication = rows["category"] == "communication"
        values["communication_s"] = float(rows.loc[communication, "time_s"].sum())
        values["bytes_link"] = _value(rows.loc[communication, "bytes_link"].sum(min_count=1))
    return values


def _value(number: object) -> float | None:
    return None if pd.isna(number) else float(number)  # type: ignore[arg-type]
