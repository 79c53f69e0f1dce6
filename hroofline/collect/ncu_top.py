"""``profile --backend ncu --kernels top:N``: ncu only where it pays.

A trace pass (:mod:`hroofline.collect.trace_backend`) measures every kernel of the profiled steps in
milliseconds; the N kernel names that take the most time are then profiled with ncu, and only their
functions (``--kernel-name-base function --kernel-name regex:(^|::)(f|g)$``, ``--launch-count`` = those
functions' launches in the trace's phases). ncu's counters replace the analytic work of those launches in
the trace's run, launch by launch in launch order within each function; every other kernel keeps its
measured time and analytic work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import pandas as pd

from hroofline.collect.workload import STEP_PHASES
from hroofline.errors import ProfilingError, UsageError
from hroofline.importers.source import ImportedSource
from hroofline.model.quantities import BYTE_QUANTITIES, FLOP_QUANTITIES, OP_QUANTITIES, ROOF_KEYS
from hroofline.model.run import (
    HIGHEST_CLOCK_NOTE,
    JOINED_KIND,
    PEAK_COLUMNS,
    PEAK_PREFIX,
    RAW_METRIC_PREFIX,
    conform_launches,
)

_TOP = re.compile(r"^top:(\d+)$")
# What ncu's counters give a launch, in place of the analytic work: all of it. FP16 FLOPs too, as ncu counts
# them (a packed half2 instruction once; the run's FP16 roof is halved for these launches to match): an op's
# analytic FLOPs, split over its kernels by time, would give a cuDNN helper kernel FP16 work it never does
# (an H200 resnet50 amp step: reduce_wgrad_nchw_helper "above" its FP16 roof with 1.4 GFLOP in 3.8 µs).
MEASURED_COLUMNS: tuple[str, ...] = (*FLOP_QUANTITIES, *OP_QUANTITIES, *BYTE_QUANTITIES)
_REGEX_SPECIAL = re.compile(r"([\\^$.|?*+()\[\]{}])")
_RETURN_TYPE = re.compile(r"^void\s+")
_SOURCE_NAME = re.compile(r"(\d+)")  # <source-name> ::= <length> <identifier>


@dataclass(frozen=True)
class KernelSelection:
    """The kernel names ncu profiles (the trace's names), the functions ncu is told to match, and how many
    launches of those functions the profiled phases hold."""

    names: tuple[str, ...]
    functions: tuple[str, ...]
    launches: int
    share: float  # of the trace's kernel time in the profiled phases


def parse_kernels_option(text: str) -> int:
    """'top:5' -> 5."""
    found = _TOP.match(text.strip())
    if not found or int(found.group(1)) < 1:
        raise UsageError(f"--kernels {text!r}: give top:N with N >= 1, e.g. --kernels top:5")
    return int(found.group(1))


def same_launches(mine: pd.DataFrame, theirs: pd.DataFrame) -> np.ndarray:
    """Position by position, whether two launch tables (a trace's and ncu's, in launch order) hold the same launch:
    the same function (:func:`function_name`), grid and block where both record them."""
    same = (
        mine["kernel"].astype(str).map(function_name).to_numpy()
        == theirs["kernel"].astype(str).map(function_name).to_numpy()
    )
    for column in ("grid", "block"):
        a, b = mine[column].astype("string").to_numpy(), theirs[column].astype("string").to_numpy()
        known = ~(pd.isna(a) | pd.isna(b))
        same &= ~known | (a == b)
    return same


@cache  # once per kernel name: a step repeats a few hundred names over thousands of launches
def function_name(kernel: str) -> str:
    """A kernel's function, qualified, without return type, template arguments or parameters: the part of
    its name that Kineto (GCC's demangler: ``<4, ...>``) and ncu (its own: ``<(int)4, ...>``) write alike.
    Kineto keeps a name GCC cannot demangle mangled (cuDNN's CUTLASS convolutions on an H100, whose names
    ncu demangles): its qualified name is read from the mangling itself."""
    if kernel.startswith("_Z"):
        return _mangled_function_name(kernel)
    name = _RETURN_TYPE.sub("", kernel.strip()).replace("(anonymous namespace)", "anonymous")
    name = name.replace("<unnamed>", "anonymous")  # ncu's spelling of the same namespace
    cut = min((i for i in (name.find("<"), name.find("(")) if i > 0), default=len(name))
    return name[:cut].strip()


def _mangled_function_name(mangled: str) -> str:
    """The qualified function of an Itanium-mangled name: ``_ZN17cutlass__5x_cudnn6KernelI...`` ->
    ``cutlass__5x_cudnn::Kernel``; the source names before the template arguments (``I``) or the end
    (``E``) of the nested name, an anonymous namespace (``_GLOBAL__N...``) as ``anonymous``."""
    rest = mangled[2:].removeprefix("L")  # internal linkage
    nested = rest.startswith("N")
    if nested:
        rest = rest[1:].lstrip("rVK")  # a member function's cv-qualifiers
    parts: list[str] = []
    if rest.startswith("St"):  # ::std::
        parts.append("std")
        rest = rest[2:]
    while rest:
        found = _SOURCE_NAME.match(rest)
        if found is None:
            break
        length = int(found.group(1))
        start = found.end()
        if length == 0 or start + length > len(rest):
            break
        part = rest[start : start + length]
        parts.append("anonymous" if part.startswith("_GLOBAL__N") else part)
        rest = rest[start + length :]
        if not nested:
            break
    return "::".join(parts) if parts else mangled


def top_kernel_names(launches: pd.DataFrame, count: int) -> KernelSelection:
    """The ``count`` compute-kernel names with the most measured time in the step's phases (what ncu's NVTX
    filter lets through)."""
    kernels = launches[(launches["category"] == "kernel") & launches["phase"].isin(STEP_PHASES)]
    times = kernels.groupby("kernel", observed=True)["time_s"].sum().sort_values(ascending=False, kind="stable")
    names = tuple(str(name) for name in times.index[:count])
    if not names:
        raise ProfilingError("the trace pass found no compute kernel in the step's phases: nothing for ncu to profile")
    functions = tuple(dict.fromkeys(function_name(name) for name in names))
    total = float(times.sum())
    matching = kernels["kernel"].astype(str).map(function_name).isin(functions)
    share = float(times.iloc[:count].sum()) / total if total > 0 else 0.0
    return KernelSelection(names, functions, launches=int(kernels.loc[matching, "launches"].sum()), share=share)


def literal_pattern(text: str) -> str:
    """A regular expression matching ``text`` exactly, escaping only the characters every regex flavour
    (ncu's included) treats as special."""
    return _REGEX_SPECIAL.sub(r"\\\1", text)


def kernel_filter_arguments(selection: KernelSelection) -> list[str]:
    """ncu matches the function names (``--kernel-name-base function``: no templates or parameters, which
    ncu and Kineto spell differently), by their last component, qualified or not."""
    last = dict.fromkeys(function.split("::")[-1] for function in selection.functions)
    alternatives = "|".join(literal_pattern(name) for name in last)
    return [
        "--kernel-name-base",
        "function",
        "--kernel-name",
        f"regex:(^|::)({alternatives})$",
        "--launch-count",
        str(selection.launches),
    ]


# Roofs that follow the SM clock (compute, L1); the L2 and HBM run on clocks of their own (an H100 report: the
# SM at 1.43-1.59 GHz, its L2 roof 12.9-13.1 TB/s throughout).
SM_CLOCK_ROOFS: frozenset[str] = frozenset(ROOF_KEYS) - {"l2", "hbm"}


def _known(clock_hz: float | None) -> bool:
    return clock_hz is not None and clock_hz > 0  # NaN is not a clock either


def at_top_clock(measured: pd.DataFrame, top_clock_hz: float | None) -> pd.DataFrame:
    """Launches ncu measured, with the report's roofs of each at the GPU's highest clock.

    ncu ran its launches at a locked SM clock (``--clock-control base``: 1.43-1.59 GHz on an H100, 1.30-1.50 on
    an H200), the trace's at whatever the GPU chose; the trace's times are judged, so the per-cycle peaks of
    the roofs that follow the SM clock (compute, L1) are taken at the highest clock the GPU runs at (an upper
    bound: no launch is put above a roof by a clock it did not run at). The L2 and HBM roofs run on clocks of
    their own and stay as ncu measured them. Without a known highest clock the report's roofs stay as they
    are (at ncu's clocks); a launch without a measured clock gets no compute or L1 roof of the report (the
    run's own, from the datasheet, where it has one)."""
    if not _known(top_clock_hz):
        return measured
    measured = measured.copy()
    clock = measured["clock_hz"].to_numpy(dtype=float)
    scale = np.where(clock > 0, top_clock_hz / np.where(clock > 0, clock, 1.0), np.nan)
    for key in SM_CLOCK_ROOFS:
        if PEAK_PREFIX + key in measured.columns:
            measured[PEAK_PREFIX + key] = measured[PEAK_PREFIX + key].to_numpy(dtype=float) * scale
    return measured


def roofs_at_top_clock(
    frame: pd.DataFrame, measured_roofs: dict[str, str], top_clock_hz: float | None
) -> dict[str, str]:
    """How the report's roofs that :func:`at_top_clock` gave the measured launches are made: the report's
    formula, compute and L1 at the highest clock where it is known."""
    clock = ""
    if _known(top_clock_hz):
        clock = f"; {HIGHEST_CLOCK_NOTE}, {top_clock_hz / 1e9:.3g} GHz (the trace's times ran unlocked)"
    return {
        key: formula + (clock if key in SM_CLOCK_ROOFS else "")
        for key, formula in measured_roofs.items()
        if PEAK_PREFIX + key in frame.columns and frame[PEAK_PREFIX + key].notna().any()
    }


def join_counters(
    trace: ImportedSource, measured: ImportedSource, selection: KernelSelection, top_clock_hz: float | None = None
) -> ImportedSource:
    """The trace's launches with ncu's counters on the launches of the selected functions in the step's
    phases: the k-th launch of a function in ncu's report is the k-th in the trace (launch order), checked by
    grid and block where both have them. A function whose launches do not pair so gets ncu's mean per launch
    on each, said in a warning. The trace's times stay (ncu ran at locked clocks and cold caches); the measured
    launches take the report's roofs, compute and L1 at ``top_clock_hz`` (the GPU's highest SM clock), as
    :func:`~hroofline.collect.distinct_launches.join_distinct` does."""
    frame = trace.launches.copy()
    counters = at_top_clock(measured.launches.sort_values("launch_id", kind="stable"), top_clock_hz)
    raw = [c for c in counters.columns if c.startswith(RAW_METRIC_PREFIX)]
    in_phases = frame["phase"].isin(STEP_PHASES) & (frame["category"] == "kernel")
    mine_functions = frame["kernel"].astype(str).map(function_name)
    their_functions = counters["kernel"].astype(str).map(function_name)
    warnings: list[str] = []
    joined = 0
    for function in selection.functions:
        mine = frame[in_phases & (mine_functions == function)].sort_values("launch_id", kind="stable").index
        theirs = counters[their_functions == function]
        if theirs.empty:
            warnings.append(f"ncu profiled no launch of {function}: its work stays analytic")
            continue
        columns = [c for c in (*MEASURED_COLUMNS, *raw, *PEAK_COLUMNS) if c in theirs.columns]
        for column in columns:
            if column not in frame.columns:
                frame[column] = np.nan
        if _pairs(frame.loc[mine], theirs):
            frame.loc[mine, columns] = theirs[columns].to_numpy(dtype=float)
        else:
            warnings.append(
                f"{function}: the trace holds {len(mine)} launches in the profiled phases, ncu profiled {len(theirs)}"
                " (or their grids differ): each trace launch gets ncu's mean per launch"
            )
            frame.loc[mine, columns] = np.tile(theirs[columns].mean().to_numpy(dtype=float), (len(mine), 1))
        frame.loc[mine, "work_op"] = pd.NA
        frame.loc[mine, "counters_from"] = frame.loc[mine, "launch_id"]  # ncu measured these launches themselves
        joined += len(mine)
    if not joined:
        raise ProfilingError(
            "ncu measured none of the chosen kernels' launches", "see the ncu log under the run's --out-dir"
        )
    note = (
        f"{joined} launches of {len(selection.functions)} kernel functions (the top {len(selection.names)} kernel "
        f"names, {100 * selection.share:.1f}% of kernel time) carry counters measured by ncu (FLOPs, "
        "bytes at L1, L2 and HBM; ncu's cache flushes make its HBM bytes an upper bound); the others keep their "
        "analytic work; times are the trace's"
    )
    return joined_source(trace, measured, frame, [note], warnings, top_clock_hz)


def joined_source(
    trace: ImportedSource,
    measured: ImportedSource,
    frame: pd.DataFrame,
    notes: list[str],
    warnings: list[str],
    top_clock_hz: float | None,
) -> ImportedSource:
    """The trace's source with ``frame`` (its launches, ncu's counters joined) as one source: both passes'
    formulas, notes and warnings, ncu's version and settings, and how the measured launches' roofs are made."""
    info = replace(
        trace.info,
        kind=JOINED_KIND,
        formulas_used={**trace.info.formulas_used, **measured.info.formulas_used},
        notes=[*trace.info.notes, *notes],
        warnings=[*trace.info.warnings, *measured.info.warnings, *warnings],
        ncu_version=measured.info.ncu_version,
        settings={**trace.info.settings, **{f"ncu_{k}": v for k, v in measured.info.settings.items()}},
        roofs={**trace.info.roofs, **roofs_at_top_clock(frame, measured.info.roofs, top_clock_hz)},
    )
    return replace(trace, info=info, launches=conform_launches(frame), cc=trace.cc or measured.cc)


def _pairs(mine: pd.DataFrame, theirs: pd.DataFrame) -> bool:
    """The same number of launches, with the same grid and block where both say."""
    if len(mine) != len(theirs):
        return False
    for column in ("grid", "block"):
        a, b = mine[column].astype("string").to_numpy(), theirs[column].astype("string").to_numpy()
        known = ~(pd.isna(a) | pd.isna(b))
        if (a[known] != b[known]).any():
            return False
    return True
