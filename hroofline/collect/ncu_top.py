"""``profile --backend ncu --kernels top:N``: ncu only where it pays.

A trace pass (:mod:`hroofline.collect.trace_backend`) measures every kernel of the profiled steps in
milliseconds; the N kernel names that take the most time are then profiled with ncu, and only they
(``--kernel-name-base demangled --kernel-name regex:^(name|name)$``, ``--launch-count`` = their launches in
the trace's steps). ncu's counters replace the analytic work of those launches in the trace's run, launch by
launch in order within each name; every other kernel keeps its measured time and analytic work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from hroofline.errors import UsageError
from hroofline.importers import ImportedSource
from hroofline.metricset import BYTE_QUANTITIES, FLOP_QUANTITIES, OP_QUANTITIES
from hroofline.model import PEAK_PREFIX, RAW_METRIC_PREFIX, conform_launches

_TOP = re.compile(r"^top:(\d+)$")
# What ncu's counters give a launch, in place of the analytic work.
MEASURED_COLUMNS: tuple[str, ...] = (*FLOP_QUANTITIES, *OP_QUANTITIES, *BYTE_QUANTITIES)
_REGEX_SPECIAL = re.compile(r"([\\^$.|?*+()\[\]{}])")


@dataclass(frozen=True)
class KernelSelection:
    """The kernel names ncu profiles, and how many launches of them the profiled steps hold."""

    names: tuple[str, ...]
    launches: int
    share: float  # of the trace's kernel time


def parse_kernels_option(text: str) -> int:
    """'top:5' -> 5."""
    found = _TOP.match(text.strip())
    if not found or int(found.group(1)) < 1:
        raise UsageError(f"--kernels {text!r}: give top:N with N >= 1, e.g. --kernels top:5")
    return int(found.group(1))


def top_kernel_names(launches: pd.DataFrame, count: int) -> KernelSelection:
    """The ``count`` compute-kernel names with the most measured time."""
    kernels = launches[launches["category"] == "kernel"]
    times = kernels.groupby("kernel", observed=True)["time_s"].sum().sort_values(ascending=False, kind="stable")
    names = tuple(str(name) for name in times.index[:count])
    total = float(times.sum())
    chosen = kernels["kernel"].isin(names)
    share = float(times.iloc[:count].sum()) / total if total > 0 else 0.0
    return KernelSelection(names=names, launches=int(kernels.loc[chosen, "launches"].sum()), share=share)


def literal_pattern(text: str) -> str:
    """A regular expression matching ``text`` exactly, escaping only the characters every regex flavour
    (ncu's included) treats as special."""
    return _REGEX_SPECIAL.sub(r"\\\1", text)


def kernel_filter_arguments(selection: KernelSelection) -> list[str]:
    alternatives = "|".join(literal_pattern(name) for name in selection.names)
    return [
        "--kernel-name-base",
        "demangled",
        "--kernel-name",
        f"regex:^({alternatives})$",
        "--launch-count",
        str(selection.launches),
    ]


def join_counters(trace: ImportedSource, measured: ImportedSource, selection: KernelSelection) -> ImportedSource:
    """The trace's launches with ncu's counters on the launches of the selected names: the k-th launch of a
    name in ncu's report is the k-th of that name in the trace. A name whose launch counts differ gets ncu's
    mean per launch on each of its trace launches, said in a warning."""
    frame = trace.launches.copy()
    counters = measured.launches
    extra = [c for c in counters.columns if c.startswith((PEAK_PREFIX, RAW_METRIC_PREFIX))]
    notes, warnings = [], []
    joined = 0
    for name in selection.names:
        mine = frame.index[frame["kernel"] == name]
        theirs = counters[counters["kernel"] == name]
        if theirs.empty:
            warnings.append(f"ncu profiled no launch of {name!r}: its work stays analytic")
            continue
        columns = [c for c in (*MEASURED_COLUMNS, *extra) if c in theirs.columns]
        if len(theirs) == len(mine):
            values = theirs[columns].to_numpy(dtype=float)
        else:
            warnings.append(
                f"{name!r}: the trace holds {len(mine)} launches, ncu profiled {len(theirs)}: each trace launch "
                "gets ncu's mean per launch"
            )
            values = np.tile(theirs[columns].mean().to_numpy(dtype=float), (len(mine), 1))
        for column in columns:
            if column not in frame.columns:
                frame[column] = np.nan
        frame.loc[mine, columns] = values
        frame.loc[mine, "work_op"] = pd.NA
        joined += len(mine)
    share = f"{100 * selection.share:.1f}%"
    notes.append(
        f"{joined} launches of the top {len(selection.names)} kernel names ({share} of kernel time) carry counters "
        "measured by ncu (FLOPs, bytes at L1, L2 and HBM); the others keep their analytic work. Times are the "
        "trace's (no replay)"
    )
    info = replace(
        trace.info,
        kind="kineto+ncu",
        formulas_used={**trace.info.formulas_used, **measured.info.formulas_used},
        notes=[*trace.info.notes, *notes],
        warnings=[*trace.info.warnings, *measured.info.warnings, *warnings],
        ncu_version=measured.info.ncu_version,
        settings={**trace.info.settings, **{f"ncu_{k}": v for k, v in measured.info.settings.items()}},
    )
    return replace(trace, info=info, launches=conform_launches(frame), cc=trace.cc or measured.cc)
