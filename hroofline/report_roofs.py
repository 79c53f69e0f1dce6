"""Roofs from the report itself: per launch, a per-cycle peak times the clock the launch ran at.

Nsight Compute stores, with each launch, the per-cycle peaks of its counters (``X.peak_sustained``), the
clock of each unit and the device's attributes (SM count, L2 slices, memory clock and bus width). That
is what ncu draws its own roofline from, for any GPU, and what hroofline uses before its catalog. The
definitions, and the order of the alternatives, are data: ``[roofs]``, ``[clocks]`` and ``[fp32_lanes]``
in ``metrics/hierarchical.toml``. Pure functions: metrics in, ``peak_<key>`` columns out (FLOP/s or
byte/s; null where the report cannot say).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hroofline.metricset import MetricSet, RoofAlternative, RoofDefinition, normalize_cc
from hroofline.model import PEAK_PREFIX

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


def report_roofs(
    metrics: pd.DataFrame,
    metric_set: MetricSet,
    seconds: pd.Series,
    cc: pd.Series,
    level_roofs: dict[str, str],
) -> ReportRoofs:
    """The roofs each launch's own metrics give. ``level_roofs`` names, per measured memory level, the
    roof definition that matches the formula its bytes came from; compute roofs are all tried."""
    clocks = _Clocks(metrics, metric_set, seconds)
    result = ReportRoofs(peaks=pd.DataFrame(index=metrics.index))
    definitions: list[RoofDefinition] = [d for d in metric_set.roofs.values() if d.key not in ("l1", "l2", "hbm")]
    definitions += [metric_set.roofs[name] for level, name in level_roofs.items() if name in metric_set.roofs]
    for definition in definitions:
        values, how = _evaluate(definition, metrics, metric_set, clocks, cc)
        if values is None:
            continue
        result.peaks[PEAK_PREFIX + definition.key] = values
        result.how[definition.key] = how
    if result.how and clocks.sm_from_attribute:
        result.notes.append(
            "the report has no measured SM clock: its compute and L1 roofs are at the GPU's maximum clock "
            f"({MAX_CLOCK_ATTRIBUTE}), which the kernels may not have run at"
        )
    return result


def _evaluate(
    definition: RoofDefinition,
    metrics: pd.DataFrame,
    metric_set: MetricSet,
    clocks: _Clocks,
    cc: pd.Series,
) -> tuple[pd.Series | None, str]:
    clock, clock_how = clocks.of(definition.clock)
    combined = pd.Series(np.nan, index=metrics.index)
    hows: list[str] = []
    for alternative in definition.alternatives:
        per_cycle = _per_cycle(alternative, metrics, metric_set, cc)
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


def _per_cycle(
    alternative: RoofAlternative, metrics: pd.DataFrame, metric_set: MetricSet, cc: pd.Series
) -> pd.Series | None:
    if alternative.memory_bus:
        if MEMORY_CLOCK_ATTRIBUTE not in metrics or BUS_WIDTH_ATTRIBUTE not in metrics:
            return None
        # deviceQuery's formula: two transfers per memory clock over the bus, 8 bits a byte
        return metrics[MEMORY_CLOCK_ATTRIBUTE] * KHZ * 2 * metrics[BUS_WIDTH_ATTRIBUTE] / 8
    if alternative.lanes:
        sms = _units(metrics, "sm")
        if sms is None:
            return None
        lanes = cc.map(lambda c: metric_set.fp32_lanes.get(normalize_cc(str(c))) if isinstance(c, str) else None)
        return sms * pd.to_numeric(lanes, errors="coerce") * alternative.factor
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
