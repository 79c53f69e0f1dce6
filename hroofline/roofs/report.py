"""Roofs from the report itself: per launch, a per-cycle peak times the clock the launch ran at.

Nsight Compute stores, with each launch, the per-cycle peaks of its counters (``X.peak_sustained``), the
clock of each unit and the device's attributes (SM count, L2 slices, memory clock and bus width). That
is what ncu draws its own roofline from, for any GPU, and what hroofline uses before its catalog. The
definitions, and the order of the alternatives, are data: ``[roofs]`` and ``[clocks]`` in
``metrics/hierarchical.toml``, the dense rates per SM per cycle in ``metrics/rates.toml``. A compute roof
from peak metrics is checked against the dense rate x SMs x clock: ncu's tensor ``.peak_sustained`` on
Hopper is the 2:4-sparse rate, twice the dense one, so where the two differ by more than the table's
tolerance the rate is used and the import says so once. Pure functions: metrics in, ``peak_<key>``
columns out (FLOP/s or byte/s; null where the report cannot say).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hroofline.model.quantities import COMPUTE_ROOFS
from hroofline.model.run import PEAK_PREFIX
from hroofline.roofs.metricset import MetricSet, RoofAlternative, RoofDefinition, normalize_cc
from hroofline.roofs.rates import DenseRates

# Unit counts from device attributes, for peaks given per unit.
UNIT_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "sm": ("device__attribute_multiprocessor_count",),
    "l1tex": ("device__attribute_multiprocessor_count", "device__attribute_num_tex_per_multiprocessor"),
    "lts": ("device__attribute_l2s_count",),
}
MAX_CLOCK_ATTRIBUTE = "device__attribute_clock_rate"  # kHz: the GPU's maximum SM clock
MEMORY_CLOCK_ATTRIBUTE = "device__attribute_memory_clock_rate"  # kHz
BUS_WIDTH_ATTRIBUTE = "device__attribute_global_memory_bus_width"  # bits
KHZ = 1e3


@dataclass
class ReportRoofs:
    """``peaks``: one ``peak_<key>`` column per roof the report gives; ``how``: key -> its formula."""

    peaks: pd.DataFrame
    how: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # roof key -> (the report's median per SM per cycle, the dense rate) where they disagree
    disagreements: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class RoofContext:
    """What a roof needs beside the metrics: each launch's compute capability, the GPU's dense rates, and
    its SM count where the report has no device attributes (the catalog's)."""

    cc: pd.Series
    rates: DenseRates = field(default_factory=DenseRates)
    catalog_sms: int | None = None


def report_roofs(
    metrics: pd.DataFrame,
    metric_set: MetricSet,
    seconds: pd.Series,
    context: RoofContext,
    level_roofs: dict[str, str],
) -> ReportRoofs:
    """The roofs each launch's own metrics give. ``level_roofs`` names, per measured memory level, the
    roof definition that matches the formula its bytes came from; compute roofs are all tried."""
    clocks = _Clocks(metrics, metric_set, seconds)
    result = ReportRoofs(peaks=pd.DataFrame(index=metrics.index))
    definitions: list[RoofDefinition] = [d for d in metric_set.roofs.values() if d.key not in ("l1", "l2", "hbm")]
    definitions += [metric_set.roofs[name] for level, name in level_roofs.items() if name in metric_set.roofs]
    for definition in definitions:
        measured, how = _evaluate(definition, metrics, clocks, context, table=False)
        table, table_how = _evaluate(definition, metrics, clocks, context, table=True)
        if measured is None and _units(metrics, "sm") is None:
            # Without the report's own SM count a roof from the rates is the catalog's: the datasheet's
            # peaks (hroofline.roofs.ceilings) say it, with their sources.
            table = None
        values = _reconcile(definition.key, measured, table, metrics, clocks, context, result)
        if values is None:
            continue
        result.peaks[PEAK_PREFIX + definition.key] = values
        if measured is None or definition.key in result.disagreements:
            how = table_how if measured is None else f"{table_how} (the report's {how} is not dense)"
        elif table is not None and table.notna().any():
            how += f"; else {table_how}"
        result.how[definition.key] = how
    if result.how and clocks.sm_from_attribute:
        result.notes.append(
            "the report has no measured SM clock: its compute and L1 roofs are at the GPU's maximum clock "
            f"({MAX_CLOCK_ATTRIBUTE}), which the kernels may not have run at"
        )
    if result.disagreements:
        result.notes.append(_disagreement_note(result.disagreements, context.rates))
    return result


def _reconcile(
    key: str,
    measured: pd.Series | None,
    table: pd.Series | None,
    metrics: pd.DataFrame,
    clocks: _Clocks,
    context: RoofContext,
    result: ReportRoofs,
) -> pd.Series | None:
    """The report's roof where it agrees with the dense rate (or there is none), else the rate's."""
    if measured is None or table is None:
        return measured if table is None else table
    ratio = measured / table
    disagree = ((ratio - 1).abs() > context.rates.tolerance).fillna(False)
    if disagree.any():
        clock, _ = clocks.of("sm")
        sms = _sm_count(metrics, context)
        per_sm_cycle = (measured / clock / sms)[disagree].median()
        rate = context.rates.get(key)
        if rate is not None and np.isfinite(per_sm_cycle):
            result.disagreements[key] = (float(per_sm_cycle), rate)
    return table.where(disagree | measured.isna(), measured)


def _disagreement_note(disagreements: dict[str, tuple[float, float]], rates: DenseRates) -> str:
    parts = [f"{key} {report:,.0f} vs {rate:,.0f}" for key, (report, rate) in disagreements.items()]
    doubled = all(abs(report / rate - 2) < 0.05 for report, rate in disagreements.values())
    why = "twice the dense rate: ncu's .peak_sustained there is the 2:4-sparse rate; " if doubled else ""
    if any(report < rate for report, rate in disagreements.values()):
        why += (
            "where the report's is lower, the GPU may do less per SM than its architecture (GeForce half-rate FP32 "
            "accumulation, a cut model): add it to metrics/rates.toml [model]; "
        )
    return (
        f"the report's peaks differ from the dense rates by more than {rates.tolerance:.0%} (per SM per cycle, "
        f"report vs table: {', '.join(parts)}): {why}the dense rates of {rates.source.split(' (')[0]} are used "
        "(--ceilings FILE|GPU to judge against others)"
    )


def _evaluate(
    definition: RoofDefinition,
    metrics: pd.DataFrame,
    clocks: _Clocks,
    context: RoofContext,
    table: bool,
) -> tuple[pd.Series | None, str]:
    """The roof from the report's own alternatives, or (``table``) from the dense rate x SMs x clock."""
    clock, clock_how = clocks.of(definition.clock)
    combined = pd.Series(np.nan, index=metrics.index)
    hows: list[str] = []
    for alternative in definition.alternatives:
        if alternative.rate != table:
            continue
        per_cycle = _per_cycle(alternative, definition.key, metrics, context)
        if per_cycle is None:
            continue
        values = per_cycle if alternative.memory_bus else per_cycle * clock
        values = values.where(values > 0)  # a zero peak is a failed replay, not a roof
        fill = combined.isna() & values.notna()
        if fill.any():
            combined[fill] = values[fill]
            hows.append(alternative.describe(clock_how if not alternative.memory_bus else ""))
        if combined.notna().all():
            break
    if combined.isna().all():
        return None, ""
    return combined, "; else ".join(hows)


def _per_cycle(alternative: RoofAlternative, key: str, metrics: pd.DataFrame, context: RoofContext) -> pd.Series | None:
    if alternative.memory_bus:
        if MEMORY_CLOCK_ATTRIBUTE not in metrics or BUS_WIDTH_ATTRIBUTE not in metrics:
            return None
        # deviceQuery's formula: two transfers per memory clock over the bus, 8 bits a byte
        return metrics[MEMORY_CLOCK_ATTRIBUTE] * KHZ * 2 * metrics[BUS_WIDTH_ATTRIBUTE] / 8
    if alternative.rate:
        rate = context.rates.get(key) if key in COMPUTE_ROOFS else None
        sms = _sm_count(metrics, context)
        if rate is None or sms is None:
            return None
        # the rates are of the source's GPU: a launch of another compute capability has none
        launch_cc = context.cc.map(lambda c: normalize_cc(str(c)) if isinstance(c, str) else None)
        same_gpu = launch_cc.eq(context.rates.cc).fillna(False).to_numpy()
        return (pd.Series(sms, index=metrics.index, dtype=float) * rate).where(same_gpu)
    if alternative.per_cycle:
        if not all(name in metrics for name in alternative.per_cycle):
            return None
        total = sum((metrics[name] * coef for name, coef in alternative.per_cycle.items()), start=0.0)
        if alternative.units:
            units = _units(metrics, alternative.units)
            return None if units is None else total * units
        return total
    units = _units(metrics, alternative.units or "")
    return None if units is None or alternative.per_unit is None else units * alternative.per_unit


def _sm_count(metrics: pd.DataFrame, context: RoofContext) -> pd.Series | float | None:
    """SMs per launch from the device attributes, else the catalog's count."""
    sms = _units(metrics, "sm")
    if sms is not None and sms.notna().any():
        return sms.where(sms > 0, context.catalog_sms)
    return float(context.catalog_sms) if context.catalog_sms else None


def _units(metrics: pd.DataFrame, unit: str) -> pd.Series | None:
    names = UNIT_ATTRIBUTES.get(unit)
    if not names or not all(name in metrics for name in names):
        return None
    count = metrics[names[0]]
    for name in names[1:]:
        count = count * metrics[name]
    return count


class _Clocks:
    """Each unit's clock per launch (Hz), and how it was found."""

    def __init__(self, metrics: pd.DataFrame, metric_set: MetricSet, seconds: pd.Series) -> None:
        self.metrics = metrics
        self.metric_set = metric_set
        self.seconds = seconds.where(seconds > 0)
        self.sm_from_attribute = False
        self._cache: dict[str, tuple[pd.Series, str]] = {}

    def of(self, unit: str) -> tuple[pd.Series, str]:
        if unit not in self._cache:
            self._cache[unit] = self._find(unit)
        return self._cache[unit]

    def _find(self, unit: str) -> tuple[pd.Series, str]:
        metrics = self.metrics
        for name in self.metric_set.clocks.get(unit, ()):
            if name in metrics and metrics[name].notna().any():
                return metrics[name], name
        average = f"{unit}__cycles_elapsed.avg"
        if average in metrics and self.seconds.notna().any():
            return metrics[average] / self.seconds, f"{average} / kernel time"
        units = _units(metrics, unit)
        total = f"{unit}__cycles_elapsed.sum"
        if total in metrics and units is not None and self.seconds.notna().any():
            return metrics[total] / units / self.seconds, f"{total} / {unit} units / kernel time"
        if unit == "l1tex":
            clock, how = self.of("sm")
            return clock, f"SM clock ({how})"
        if unit == "sm" and MAX_CLOCK_ATTRIBUTE in metrics:
            self.sm_from_attribute = True
            return metrics[MAX_CLOCK_ATTRIBUTE] * KHZ, f"{MAX_CLOCK_ATTRIBUTE} (maximum, not measured)"
        if unit == "dram" and MEMORY_CLOCK_ATTRIBUTE in metrics:
            return metrics[MEMORY_CLOCK_ATTRIBUTE] * KHZ, f"{MEMORY_CLOCK_ATTRIBUTE} (maximum, not measured)"
        return pd.Series(np.nan, index=metrics.index), f"{unit} clock (not in the report)"
