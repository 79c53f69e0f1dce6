"""Several ncu passes over the same launches, joined into one profile.

ncu users split a measurement into passes: Yang et al. ran the application once per metric, NERSC's
scripts once for time and DRAM and once for instruction counts, ``hroofline profile --passes groups`` once
per metric group. Such passes list the same launches (same kernel names, in the same order) and are
joined launch by launch; anything else is reported, never silently joined. ``--merge name`` instead sums
each metric per kernel name (rates are averaged) and joins those sums, which needs equal launch counts
per name.

Kernel time is taken from the pass that measured it without instruction metrics (counting instructions
inflates elapsed cycles, about 150x in one V100 run); the other passes' times are compared with it.
Rate-form metrics (``X.per_cycle_elapsed``, ``X.per_second``) are turned into counts within their own
pass, with that pass's cycles and time, before anything is joined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from hroofline.errors import MergeError
from hroofline.importers.checks import short_name
from hroofline.importers.raw import RawProfile
from hroofline.roofs.formulas import kernel_time, resolve_metric
from hroofline.roofs.metricset import MetricSet, other_prefix, strip_rate_suffix

INSTRUCTION_MARKERS = ("inst_executed", "ops_path_tensor")
# Joined per kernel name, these are averaged, not summed: rates, percentages, per-cycle peaks, device attributes.
_NOT_SUMMED = (".per_second", ".per_cycle_elapsed", ".per_cycle_active", ".pct", ".ratio", ".peak_sustained")
_ATTRIBUTE = "device__attribute_"
# A pass whose kernel time differs from the time pass's by more than this factor is reported.
TIME_TOLERANCE = 1.2


@dataclass(frozen=True)
class Pass:
    path: Path
    profile: RawProfile

    @property
    def name(self) -> str:
        return self.path.name


def same_launches(a: RawProfile, b: RawProfile) -> bool:
    """Whether two profiles list the same launches: the same kernel names in the same order."""
    return len(a.identity) == len(b.identity) and list(a.identity["kernel"]) == list(b.identity["kernel"])


def launch_difference(a: Pass, b: Pass) -> str:
    """Where two passes' launch sequences part, with the names cut so that the difference shows."""
    first, second = a.profile.identity.reset_index(drop=True), b.profile.identity.reset_index(drop=True)
    if len(first) != len(second):
        return f"{a.name} has {len(first)} launches, {b.name} has {len(second)}"
    differs = (first["launch_id"] != second["launch_id"]).to_numpy() | (
        first["kernel"].astype(str) != second["kernel"].astype(str)
    ).to_numpy()
    index = int(np.flatnonzero(differs)[0])
    name_a, name_b = _around_difference(str(first["kernel"][index]), str(second["kernel"][index]))
    return (
        f"launch {index + 1} is ID {first['launch_id'][index]} {name_a!r} in {a.name} "
        f"but ID {second['launch_id'][index]} {name_b!r} in {b.name}"
    )


def _around_difference(a: str, b: str, width: int = 60) -> tuple[str, str]:
    """Both names cut to about ``width`` characters around where they first differ."""
    if a == b or (len(a) <= width and len(b) <= width):
        return a, b
    start = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    begin = max(0, start - width // 3)

    def cut(text: str) -> str:
        piece = text[begin : begin + width]
        return ("..." if begin else "") + piece + ("..." if begin + width < len(text) else "")

    return cut(a), cut(b)


def measured_metrics(profile: RawProfile, metric_set: MetricSet) -> frozenset[str]:
    """The metrics a profile has values for that feed a quantity (time, FLOPs, bytes), in count form:
    what tells two passes apart. Device attributes and peaks are in every report and do not."""
    return frozenset(
        strip_rate_suffix(str(c))
        for c in profile.metrics.columns
        if metric_set.feeds_a_quantity(str(c)) and profile.metrics[c].notna().any()
    )


def join_passes(passes: list[Pass], merge: str, metric_set: MetricSet, where: str) -> RawProfile:
    """One profile from passes over the same launches (``merge='launch'``) or the same kernel names."""
    if len(passes) == 1:
        return passes[0].profile
    if merge == "name":
        return _join_by_name(passes, metric_set, where)
    reference = passes[0]
    for other in passes[1:]:
        if not same_launches(reference.profile, other.profile):
            raise MergeError(
                f"{where}: the passes disagree on the launch sequence: {launch_difference(reference, other)}",
                "pass --merge name to join per-kernel-name sums instead, or import them separately to append",
            )
    counted = [Pass(p.path, _rates_to_counts(p, metric_set)) for p in passes]
    time_names = _time_metrics(metric_set)
    order = _time_order(counted, time_names, metric_set)
    columns: dict[str, pd.Series] = {}
    units: dict[str, str] = {}
    for candidate in sorted(range(len(counted)), key=lambda i: (i not in order, order.index(i) if i in order else i)):
        pass_ = counted[candidate]
        for name in pass_.profile.metrics.columns:
            if _is_time_metric(name, time_names) and candidate != _first_with(counted, order, name):
                continue
            if name not in columns and pass_.profile.metrics[name].notna().any():
                columns[name] = pass_.profile.metrics[name].reset_index(drop=True)
                units[name] = pass_.profile.units.get(name, "")
    metrics = pd.DataFrame(columns, index=range(len(reference.profile.identity)))
    note = f"joined {len(passes)} passes launch by launch: {_names(passes)}"
    joined = _joined_profile(counted, _joined_identity(counted), metrics, units, note)
    _check_times(counted, joined, metric_set, time_names, order)
    return joined


def _names(passes: list[Pass], shown: int = 3) -> str:
    names = [p.name for p in passes]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _time_metrics(metric_set: MetricSet) -> set[str]:
    names = {metric_set.time.duration, metric_set.time.cycles, metric_set.time.clock}
    names |= {other_prefix(n) for n in names} | set(metric_set.clocks.get("sm", ()))
    return names


def _is_time_metric(name: str, time_names: set[str]) -> bool:
    """Kernel time, and every unit's elapsed cycles and clock: taken from the time pass only, since counting
    instructions inflates elapsed cycles (and so the clocks the report's roofs are drawn at)."""
    return name in time_names or "__cycles_elapsed" in name


def _has_duration(profile: RawProfile, metric_set: MetricSet) -> bool:
    """gpu__time_duration is measured in a replay pass of its own, clean even beside instruction metrics."""
    name = metric_set.time.duration
    return name in profile.metrics and bool(profile.metrics[name].notna().any())


def _counts_instructions(profile: RawProfile) -> bool:
    return any(marker in str(c) for c in profile.metrics.columns for marker in INSTRUCTION_MARKERS)


def _time_order(passes: list[Pass], time_names: set[str], metric_set: MetricSet) -> list[int]:
    """Passes that measured any time metric, best first: no instruction metrics, then fewest other metrics."""
    timed = [i for i, p in enumerate(passes) if any(n in p.profile.metrics for n in time_names)]

    def rank(index: int) -> tuple[bool, int, int]:
        metrics = passes[index].profile.metrics
        others = sum(1 for c in metrics.columns if not _is_time_metric(c, time_names) and metrics[c].notna().any())
        inflated = _counts_instructions(passes[index].profile) and not _has_duration(passes[index].profile, metric_set)
        return (inflated, others, index)

    return sorted(timed, key=rank)


def _first_with(passes: list[Pass], order: list[int], name: str) -> int | None:
    return next(
        (i for i in order if name in passes[i].profile.metrics and passes[i].profile.metrics[name].notna().any()), None
    )


def _rates_to_counts(pass_: Pass, metric_set: MetricSet) -> RawProfile:
    """Rate forms of quantity metrics turned into counts with the pass's own cycles and time. A rate the
    pass cannot convert (no cycles or time of its own) is left out, and said so: another pass's cycles
    would convert it wrongly."""
    profile = pass_.profile
    metrics = profile.metrics
    time = kernel_time(metrics, metric_set)
    converted: dict[str, pd.Series] = {}
    dropped: list[str] = []
    for column in metrics.columns:
        name = str(column)
        base = strip_rate_suffix(name)
        if base == name or base in metrics or "__cycles_elapsed" in base or not metric_set.feeds_a_quantity(name):
            continue
        resolved = resolve_metric(metrics, base, time, allow_rates=True)
        if resolved is not None and resolved[0].notna().any():
            converted[base] = resolved[0]
        elif metrics[name].notna().any():
            dropped.append(name)
    if not converted and not dropped:
        return profile
    kept = metrics.drop(columns=dropped)
    warnings = list(profile.warnings)
    if dropped:
        warnings.append(
            f"{pass_.name} holds {', '.join(dropped)} only as rates, with no elapsed cycles or kernel time of its "
            "own to turn them into counts: left out of the join"
        )
    return replace(
        profile,
        metrics=pd.concat([kept, pd.DataFrame(converted, index=metrics.index)], axis=1),
        units={**profile.units, **{name: "" for name in converted}},
        warnings=warnings,
    )


def _joined_identity(passes: list[Pass]) -> pd.DataFrame:
    identity = passes[0].profile.identity.reset_index(drop=True).copy()
    for other in passes[1:]:
        extra = other.profile.identity.reset_index(drop=True)
        for column in extra.columns:
            if column == "nvtx_ranges":
                empty = identity[column].map(lambda r: not r)
                identity.loc[empty, column] = extra.loc[empty, column]
            elif column in identity:
                identity[column] = identity[column].where(identity[column].notna(), extra[column])
            else:
                identity[column] = extra[column]
    return identity


def _check_times(
    passes: list[Pass], joined: RawProfile, metric_set: MetricSet, names: set[str], order: list[int]
) -> None:
    """Say which pass the time came from, and which passes timed the launches very differently."""
    if not order:
        return
    chosen = kernel_time(joined.metrics, metric_set).seconds
    time_pass = passes[order[0]]
    if chosen.isna().all():
        return
    suppliers = sorted({passes[i].name for n in names if (i := _first_with(passes, order, n)) is not None})
    joined.notes.append(
        f"kernel time from {' and '.join(suppliers)}: the pass(es) that measured it with the fewest other metrics"
    )
    if _counts_instructions(time_pass.profile) and not _has_duration(time_pass.profile, metric_set):
        joined.warnings.append(
            f"every pass that measured time also counted instructions, which inflates elapsed cycles: the kernel "
            f"time from {time_pass.name} may be too long"
        )
    for index in order[1:]:
        own = kernel_time(passes[index].profile.metrics, metric_set).seconds.reset_index(drop=True)
        both = own.notna() & chosen.notna()
        if not both.any():
            continue
        ratio = float(own[both].sum() / chosen[both].sum())
        if not math.isfinite(ratio) or max(ratio, 1 / ratio) <= TIME_TOLERANCE:
            continue
        why = " (counting instructions inflates elapsed cycles)" if _counts_instructions(passes[index].profile) else ""
        joined.warnings.append(
            f"{passes[index].name} timed these launches at {ratio:.3g}x the time of {time_pass.name}{why}; "
            f"kernel time comes from {time_pass.name}"
        )


def _join_by_name(passes: list[Pass], metric_set: MetricSet, where: str) -> RawProfile:
    counts_ref: pd.Series | None = None
    reference = passes[0]
    sums: list[pd.DataFrame] = []
    units: dict[str, str] = {}
    identity: pd.DataFrame | None = None
    time_names = _time_metrics(metric_set)
    passes = [Pass(p.path, _rates_to_counts(p, metric_set)) for p in passes]
    order = _time_order(passes, time_names, metric_set)
    for index, pass_ in enumerate(passes):
        profile = pass_.profile
        kernels = profile.identity["kernel"].reset_index(drop=True)
        counts = kernels.value_counts(sort=False)
        if counts_ref is None:
            counts_ref = counts
            identity = profile.identity.reset_index(drop=True).drop_duplicates("kernel").set_index("kernel")
        elif not counts.sort_index().equals(counts_ref.sort_index()):
            name = next(
                (k for k in counts_ref.index.union(counts.index) if counts_ref.get(k, 0) != counts.get(k, 0)), "?"
            )
            raise MergeError(
                f"{where}: --merge name needs the same launch count per kernel name in every file: "
                f"{short_name(str(name))!r} has {counts_ref.get(name, 0)} in {reference.name} and "
                f"{counts.get(name, 0)} in {pass_.name}"
            )
        metrics = profile.metrics.reset_index(drop=True)
        keep = [
            c for c in metrics.columns if not _is_time_metric(c, time_names) or _first_with(passes, order, c) == index
        ]
        grouped = metrics[keep].groupby(kernels, sort=False)
        averaged = [c for c in keep if c.startswith(_ATTRIBUTE) or any(m in c for m in _NOT_SUMMED)]
        counters = [c for c in keep if c not in averaged]
        sums.append(pd.concat([grouped[counters].sum(min_count=1), grouped[averaged].mean()], axis=1))
        for name, unit in profile.units.items():
            units.setdefault(name, unit)
    assert identity is not None and counts_ref is not None
    names = list(identity.index)
    combined = pd.concat([s.reindex(names).reset_index(drop=True) for s in sums], axis=1)
    combined = combined.loc[:, ~combined.columns.duplicated()]  # the same metric in two files: the first
    rows = identity.reset_index()
    rows["launches"] = [int(counts_ref[k]) for k in names]
    rows["launch_id"] = range(len(rows))
    note = f"joined {len(passes)} passes per kernel name (--merge name): one row per name"
    return _joined_profile(passes, rows, combined, units, note)


def _joined_profile(
    passes: list[Pass], identity: pd.DataFrame, metrics: pd.DataFrame, units: dict[str, str], note: str
) -> RawProfile:
    """The joined passes' profile: the first version and device name any pass gives, every pass's warnings."""
    return RawProfile(
        kind="ncu-passes",
        identity=identity,
        metrics=metrics,
        units=units,
        ncu_version=next((p.profile.ncu_version for p in passes if p.profile.ncu_version), None),
        device_name=next((p.profile.device_name for p in passes if p.profile.device_name), None),
        notes=[note],
        warnings=[w for p in passes for w in p.profile.warnings],
    )
