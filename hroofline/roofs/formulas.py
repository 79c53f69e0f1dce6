"""Roofline math as pure functions: raw ncu metrics in, SI quantities out.

Every number here comes from a formula in ``metrics/hierarchical.toml``; this module only evaluates
them. Conventions:

- A quantity that cannot be computed from what was measured is NaN (null), never 0.
- Within one formula, a term whose counter ncu reported as ``n/a`` (unsupported on that GPU) counts as
  0 as long as some other term of the formula has a value: an unsupported counter means that kind of
  instruction cannot occur there.
- Counts are preferred to rates: a formula whose metrics are all present as counts wins over an earlier
  formula that would need rate forms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hroofline.model.quantities import FLOP_QUANTITIES, OP_QUANTITIES, QUANTITIES, TENSOR_FLOP_QUANTITIES
from hroofline.roofs.metricset import Formula, MetricSet, other_prefix

TIME_FROM_DURATION = "gpu__time_duration.sum"
TIME_FROM_CYCLES = "sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second"


@dataclass
class KernelTime:
    seconds: pd.Series
    method: pd.Series
    clock_hz: pd.Series
    used: set[str] = field(default_factory=set)


def kernel_time(metrics: pd.DataFrame, metric_set: MetricSet) -> KernelTime:
    """Time per launch: gpu__time_duration.sum where present, else elapsed SM cycles / SM clock.

    ``clock_hz`` is the SM clock the launch ran at, where the source measured it."""
    names = metric_set.time
    nan = pd.Series(np.nan, index=metrics.index)
    used: set[str] = set()
    duration = _first_column(metrics, [names.duration])
    cycles = _first_column(metrics, [names.cycles, other_prefix(names.cycles)])
    clock = _first_column(metrics, [names.clock, other_prefix(names.clock), *metric_set.clocks.get("sm", ())])
    duration_s = metrics[duration] if duration else nan
    from_cycles = metrics[cycles] / metrics[clock] if cycles and clock else nan
    seconds = duration_s.where(duration_s.notna(), from_cycles)
    method = pd.Series(pd.NA, index=metrics.index, dtype="string")
    method[duration_s.notna()] = TIME_FROM_DURATION
    method[duration_s.isna() & from_cycles.notna()] = TIME_FROM_CYCLES
    if duration and duration_s.notna().any():
        used.add(duration)
    if cycles and clock and (duration_s.isna() & from_cycles.notna()).any():
        used.update({cycles, clock})
    clock_hz = metrics[clock] if clock else nan
    if clock:
        used.add(clock)
    return KernelTime(seconds=seconds.astype("float64"), method=method, clock_hz=clock_hz.astype("float64"), used=used)


@dataclass
class Derived:
    """The quantities of every launch, and how each was obtained."""

    quantities: pd.DataFrame
    formulas_used: dict[str, str]
    used_metrics: set[str]
    notes: list[str]
    level_roofs: dict[str, str] = field(default_factory=dict)  # level -> roof definition of its formula


def derive_quantities(metrics: pd.DataFrame, metric_set: MetricSet, arch: str | None, time: KernelTime) -> Derived:
    quantities = pd.DataFrame(index=metrics.index)
    formulas_used: dict[str, str] = {}
    level_roofs: dict[str, str] = {}
    used = set(time.used)
    chosen: dict[str, Formula] = {}
    for quantity in QUANTITIES:
        result = _evaluate_first(metric_set.formulas[quantity], metrics, arch, time)
        if result is None:
            quantities[quantity] = np.nan
            continue
        values, formula, columns, how = result
        quantities[quantity] = values
        chosen[quantity] = formula
        formulas_used[quantity] = formula.describe() + (f" [{how}]" if how else "")
        if formula.roof:
            level_roofs[quantity.removeprefix("bytes_")] = formula.roof
        used.update(columns)
    notes = _tensor_notes(metrics, arch, formulas_used)
    l1 = chosen.get("bytes_l1")
    if l1 is not None and arch in l1.blind_on:
        blind = l1_blind_launches(quantities, metrics, metric_set)
        if blind.any():
            quantities.loc[blind, "bytes_l1"] = np.nan
            notes.append(_blind_note(blind, time.seconds, l1, arch, metric_set))
    return Derived(quantities, formulas_used, used, notes, level_roofs)


def l1_blind_launches(quantities: pd.DataFrame, metrics: pd.DataFrame, metric_set: MetricSet) -> pd.Series:
    """Launches whose L1 count missed their operands ([l1_blind] in hierarchical.toml): tensor-core work or
    wgmma/TMA evidence, and an L1 count below a share of the L2 count (or no L2 count to check it against)."""
    blindness = metric_set.l1_blind
    work = quantities[[*TENSOR_FLOP_QUANTITIES, *OP_QUANTITIES]].fillna(0).gt(0).any(axis=1)
    evidence = pd.Series(False, index=quantities.index)
    for column in metrics.columns:
        if str(column).startswith(tuple(f"{m}." for m in blindness.evidence)):
            evidence |= metrics[column].fillna(0) > 0
    l1, l2 = quantities["bytes_l1"], quantities["bytes_l2"]
    short = (l1 < blindness.min_share_of_l2 * l2) | (l2.isna() & l1.notna())
    return (work | evidence) & short


def _blind_note(blind: pd.Series, seconds: pd.Series, formula: Formula, arch: str, metric_set: MetricSet) -> str:
    total = seconds.sum(min_count=1)
    share = f", {100 * seconds[blind].sum() / total:.1f}% of the time" if pd.notna(total) and total > 0 else ""
    how = (
        "the TMA and tcgen05's own shared-memory path"
        if arch == "blackwell"
        else "the TMA and wgmma; a profile by this hroofline counts them (l1tex__lsu_writeback_active)"
    )
    return (
        f"L1 unknown for {int(blind.sum())} launch(es){share}: on {arch.title()} their tensor-core operands move "
        f"past {formula.label.split(' (')[0]} (it counted under {metric_set.l1_blind.min_share_of_l2:.0%} of their "
        f"L2 bytes): they have no L1 intensity and L1 does not bound them. They move by {how}"
    )


def _tensor_notes(metrics: pd.DataFrame, arch: str | None, formulas_used: dict[str, str]) -> list[str]:
    has_pipe = _first_column(metrics, ["sm__inst_executed_pipe_tensor.sum", "smsp__inst_executed_pipe_tensor.sum"])
    if not has_pipe or any(q.startswith("flops_tensor") for q in formulas_used):
        return []
    if arch is None:
        return [
            "tensor-pipe instruction counts are present but the GPU architecture is unknown, so no tensor "
            "FLOPs were counted: import again with --gpu (x512 per instruction applies to Volta only)"
        ]
    return [
        f"sm__inst_executed_pipe_tensor.sum is not converted to FLOPs on {arch} (the x512 factor is Volta's); "
        "collect sm__ops_path_tensor_* instead"
    ]


def _evaluate_first(
    formulas: tuple[Formula, ...], metrics: pd.DataFrame, arch: str | None, time: KernelTime
) -> tuple[pd.Series, Formula, list[str], str] | None:
    for allow_rates in (False, True):
        for formula in formulas:
            if not formula.applies_to(arch):
                continue
            result = _evaluate(formula, metrics, time, allow_rates)
            if result is not None:
                values, columns, how = result
                return values, formula, columns, how
    return None


def _evaluate(
    formula: Formula, metrics: pd.DataFrame, time: KernelTime, allow_rates: bool
) -> tuple[pd.Series, list[str], str] | None:
    terms = dict(formula.terms)
    if formula.pattern:
        terms = {name: 1.0 for name in _pattern_metrics(formula.pattern, metrics.columns)}
        if not terms:
            return None
    parts: list[pd.Series] = []
    columns: list[str] = []
    hows: set[str] = set()
    for name, coefficient in terms.items():
        resolved = resolve_metric(metrics, name, time, allow_rates)
        if resolved is None:
            return None
        values, used, how = resolved
        parts.append(values * coefficient)
        columns.extend(used)
        if how:
            hows.add(how)
    total = pd.concat(parts, axis=1).sum(axis=1, min_count=1)
    return total, columns, "; ".join(sorted(hows))


_RATE = re.compile(r"\.(per_cycle_elapsed|per_second)$")
_SPARSITY = re.compile(r"_sparsity_(on|off)(?=\.sum$)")


def _pattern_metrics(pattern: str, columns: pd.Index) -> list[str]:
    """Count-form names of the metrics matching a pattern; a path's aggregate wins over its
    _sparsity_on/_off split."""
    bases = {_RATE.sub("", str(c)) for c in columns}
    matched = {b for b in bases if re.match(pattern, b)}
    aggregates = {b for b in matched if not _SPARSITY.search(b)}
    return sorted(b for b in matched if not (_SPARSITY.search(b) and _SPARSITY.sub("", b) in aggregates))


def resolve_metric(
    metrics: pd.DataFrame, name: str, time: KernelTime, allow_rates: bool = True
) -> tuple[pd.Series, list[str], str] | None:
    """One counter per launch, from its count or, if allowed, its rate form.

    Returns the values, the metric columns used, and a note on how (empty for a plain count).
    """
    candidates = [name, other_prefix(name)]
    for candidate in candidates:
        if candidate in metrics.columns:
            return metrics[candidate], [candidate], ""
    if not allow_rates:
        return None
    for candidate in candidates:
        rate = f"{candidate}.per_cycle_elapsed"
        if rate not in metrics.columns:
            continue
        unit = candidate.split("__", 1)[0]
        cycles = _first_column(metrics, [f"{unit}__cycles_elapsed.avg", other_prefix(f"{unit}__cycles_elapsed.avg")])
        if cycles:
            return metrics[rate] * metrics[cycles], [rate, cycles], f"{rate} x {cycles}"
        if time.clock_hz.notna().any():
            return (
                metrics[rate] * time.clock_hz * time.seconds,
                [rate],
                f"{rate} x SM clock x kernel time",
            )
    for candidate in candidates:
        rate = f"{candidate}.per_second"
        if rate in metrics.columns and time.seconds.notna().any():
            return metrics[rate] * time.seconds, [rate], f"{rate} x kernel time"
    return None


def _first_column(metrics: pd.DataFrame, names: list[str]) -> str | None:
    return next((n for n in names if n in metrics.columns), None)


# -- derived per-row figures used by the analysis -------------------------------------------------


def total_flops(frame: pd.DataFrame) -> pd.Series:
    """All FLOPs: FP64 + FP32 + FP16 + tensor (every input precision); null only when none was measured.

    Integer tensor operations are not FLOPs and stay out."""
    return frame[list(FLOP_QUANTITIES)].sum(axis=1, min_count=1)


def arithmetic_intensity(flops: pd.Series, nbytes: pd.Series) -> pd.Series:
    """FLOPs per byte; null where bytes are unmeasured or zero."""
    return flops / nbytes.where(nbytes > 0)


def flop_rate(flops: pd.Series, seconds: pd.Series) -> pd.Series:
    """Achieved FLOP/s."""
    return flops / seconds.where(seconds > 0)


__all__ = [
    "Derived",
    "KernelTime",
    "arithmetic_intensity",
    "derive_quantities",
    "flop_rate",
    "kernel_time",
    "resolve_metric",
    "total_flops",
]
