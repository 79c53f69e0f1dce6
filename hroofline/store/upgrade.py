"""Runs stored before schema 7, judged as today's imports judge them.

Two corrections need only what the store kept (each launch's quantities, clock and roofs, each source's
formulas): a compute roof a report gave that differs from the dense rate x the GPU's SMs x the launch's
clock by more than the tolerance (Hopper's tensor ``.peak_sustained`` is the 2:4-sparse rate) becomes the
dense one; an L1 count of a formula blind to TMA on the launch's architecture ([l1_blind] in
metrics/hierarchical.toml) becomes null where the rule says so. Each corrected source says what changed.
"""

from __future__ import annotations

import pandas as pd

from hroofline.errors import UsageError
from hroofline.model.quantities import COMPUTE_ROOFS
from hroofline.model.run import PEAK_PREFIX, RunMeta, SourceInfo
from hroofline.roofs.catalog import GpuName, gpu_from_display_name, resolve_gpu
from hroofline.roofs.formulas import l1_blind_launches
from hroofline.roofs.metricset import load_metric_set
from hroofline.roofs.rates import rates_for

DENSE_SCHEMA = 7


def upgrade_roofs(meta: RunMeta, launches: pd.DataFrame) -> pd.DataFrame:
    """``launches`` of a run written before schema 7, corrected; notes go to the sources that changed."""
    if meta.schema_version >= DENSE_SCHEMA or meta.predicted or launches.empty:
        return launches
    gpu = _stated_gpu(meta)
    out = launches.copy()
    for number, source in enumerate(meta.sources):
        rows = out.index[out["source"] == number]
        if source.kind == "analytic" or rows.empty:
            continue
        changed = _dense_peaks(out, rows, meta, gpu, source) + _blind_l1(out, rows, meta, source)
        if source.analytic_work:
            changed += "Its tensor work was routed by kernel names: import the trace again to route it by dtype."
        if changed:
            source.notes.append(f"imported before hroofline's schema {DENSE_SCHEMA}, corrected on reading: {changed}")
    return out


def _dense_peaks(out: pd.DataFrame, rows: pd.Index, meta: RunMeta, gpu: GpuName | None, source: SourceInfo) -> str:
    rates = rates_for(meta.cc, gpu, meta.device_name)
    if gpu is None or gpu.sms is None or rates.cc is None:
        return ""
    clock = out.loc[rows, "clock_hz"]
    fixed = []
    for key in COMPUTE_ROOFS:
        rate, column = rates.get(key), PEAK_PREFIX + key
        if rate is None or column not in out:
            continue
        dense = rate * gpu.sms * clock
        stored = out.loc[rows, column]
        wrong = ((stored / dense - 1).abs() > rates.tolerance).fillna(False)
        if wrong.any():
            out.loc[wrong[wrong].index, column] = dense[wrong]
            fixed.append(key)
            source.roofs[key] = (
                f"dense rate per SM per cycle (metrics/rates.toml) x {gpu.sms} SMs (the catalog's) x the launch's "
                f"SM clock (the report's {source.roofs.get(key, 'peak')} is not dense)"
            )
    return f"the report's {', '.join(fixed)} roofs were not the dense rates; now they are. " if fixed else ""


def _blind_l1(out: pd.DataFrame, rows: pd.Index, meta: RunMeta, source: SourceInfo) -> str:
    metric_set = load_metric_set()
    used = source.formulas_used.get("bytes_l1", "")
    formula = next((f for f in metric_set.formulas["bytes_l1"] if used.startswith(f.describe())), None)
    if formula is None or meta.arch not in formula.blind_on:
        return ""
    blind = l1_blind_launches(out.loc[rows], pd.DataFrame(index=rows), metric_set)
    if not blind.any():
        return ""
    out.loc[blind[blind].index, "bytes_l1"] = float("nan")
    return f"L1 unknown for {int(blind.sum())} launch(es) whose L1 count cannot see TMA traffic."


def _stated_gpu(meta: RunMeta) -> GpuName | None:
    """The catalog GPU the run names, else the one its device name matches."""
    if meta.gpu and meta.gpu != "cpu":
        try:
            return resolve_gpu(meta.gpu)
        except UsageError:
            return None
    return gpu_from_display_name(meta.device_name) if meta.device_name else None
