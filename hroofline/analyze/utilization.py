"""Model FLOPs utilisation (MFU) and memory bandwidth utilisation (MBU) of a run, its phases, kernels and layers.

Per group of launches (a phase, the run, a kernel name or a layer in a phase), over its launches that have a time:

- MFU = (sum over precisions p of model FLOPs_p / dense peak_p) / time: each precision's FLOPs at its own dense
  roof, at the clock its launches ran at, summed as time, over the time they took. With one precision it is
  FLOPs / (time x peak). Model FLOPs are the ops' analytic FLOPs (a trace's, a prediction's, the CPU recorder's:
  what the model's forward and backward must do).
- HFU, the same over hardware FLOPs: what ncu counted the kernels doing (padding, recomputation, masked work
  included).
- MBU = (sum of HBM bytes / HBM peak) / time.

A group with launches of both kinds of FLOPs has neither MFU nor HFU (one would leave the other's work out).
The peaks are each launch's dense compute roofs (:func:`hroofline.roofs.ceilings.run_roofs` without a
``--ceilings`` choice: dense rates per SM per cycle, ``metrics/rates.toml``, x SMs x the clock the launch ran
at), never the 2:4-sparse ones: sparse work is judged against its precision's dense peak. Which precisions there
are is the run's FLOP columns (``flops_<p>`` of :mod:`hroofline.model.quantities`): a new one plugs in by being
there. Integer tensor operations are no FLOPs and count in neither.

Time is the launches' summed GPU time (kernels, copies), not the step's wall time: idle gaps between kernels do
not count, so MFU over a wall-clock step is at most this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hroofline.analyze.communication import link_roofs, link_terms, with_link_columns
from hroofline.analyze.kernels import KernelQuery, kernel_table
from hroofline.errors import HrooflineError
from hroofline.model.quantities import COMPUTE_ROOF_OF, ROOF_LABELS, UTILIZATION_COLUMNS
from hroofline.model.run import JOINED_KIND, PEAK_COLUMNS, Run
from hroofline.roofs.ceilings import COUNTED_FP16_FACTOR, CPU, RunRoofs, run_gpu, run_roofs, weighted_median
from hroofline.roofs.rates import SPARSE_SUFFIX, rates_for

# Every FLOP column and the dense roof it is judged against (2:4-sparse work: its precision's dense roof).
FLOP_ROOFS: dict[str, str] = {
    column: key.removesuffix(SPARSE_SUFFIX) for column, key in COMPUTE_ROOF_OF.items() if column.startswith("flops_")
}
MODEL, HARDWARE = "model", "hardware"
# Per launch, summed per group; the utilisations are computed from the sums.
TERMS: tuple[str, ...] = (
    "utilized_time_s",  # the time of the launches that have one
    "model_flops",
    "hardware_flops",
    "model_time_at_peak_s",  # sum over precisions of model FLOPs / dense peak
    "hardware_time_at_peak_s",
    "hbm_time_at_peak_s",  # HBM bytes / HBM peak
    "model_launches",  # launches with model FLOPs (> 0)
    "hardware_launches",
    "unpriced_flops",  # FLOPs of a precision the GPU has no dense peak for: left out of MFU and HFU
    "hbm_launches",  # launches with HBM bytes and an HBM peak
    "hbm_unpriced_launches",
)
# The clock a denominator is at
MEASURED_CLOCK = "the clock the kernels ran at"
DATASHEET_CLOCK = "the datasheet's clock (the run measured none)"
ROOFS_CLOCK = "the clock its roofs are taken at"


@dataclass(frozen=True)
class PeakTerm:
    """One precision's part of the denominator: its dense peak and what it is made of."""

    key: str  # roof key: tensor_bf16, fp32, ...
    label: str  # BF16 tensor, FP32, ...
    flop_per_s: float  # the launches' time-weighted median peak
    per_sm_cycle: float | None  # metrics/rates.toml
    sms: int | None
    clock_hz: float | None  # peak / (rate x SMs)
    clock: str  # which clock: MEASURED_CLOCK, DATASHEET_CLOCK or ROOFS_CLOCK
    basis: str  # the FLOPs judged against it: model or hardware
    unit: str = "SM"  # what ``sms`` counts: the GPU's compute units by its vendor's name (SM, CU)


@dataclass(frozen=True)
class Utilization:
    """A group's MFU, HFU and MBU (fractions; None: not known, the run's ``reasons`` say why) and its FLOPs."""

    time_s: float | None
    model_flops: float | None
    hardware_flops: float | None
    mfu: float | None
    hfu: float | None
    mbu: float | None


@dataclass
class RunUtilization:
    """Per phase and ``total``: the utilisations; the denominator's terms; why any is missing."""

    groups: dict[str, Utilization] = field(default_factory=dict)
    peaks: list[PeakTerm] = field(default_factory=list)
    hbm_byte_per_s: float | None = None
    reasons: list[str] = field(default_factory=list)
    estimated: bool = False  # a prediction's: its times are estimates (roof bound and host floor), not measured

    @property
    def total(self) -> Utilization | None:
        return self.groups.get("total")


def dense_roofs(run: Run) -> RunRoofs | str:
    """The run's own roofs, dense, at its launches' clocks; or why it has none to take MFU against."""
    if run.meta.gpu == CPU:
        return "its roofs are ceilings measured on a CPU, not a GPU's dense peaks"
    if run.meta.ceilings:
        return f"its roofs are a set of ceilings ({run.meta.ceilings.get('label', 'measured')}), not dense peaks"
    unread = [c for c in PEAK_COLUMNS if c not in run.launches]  # a run read in part (summary's columns)
    if unread:
        run = Run(run.meta, run.launches.assign(**dict.fromkeys(unread, float("nan"))))
    try:
        return run_roofs(run)
    except HrooflineError as error:
        return error.message


def flop_basis(run: Run) -> pd.Series:
    """Per launch: whether its FLOPs are the model's (analytic, from the ops' shapes) or the hardware's (counted)."""
    launches = run.launches
    counted = {i for i, source in enumerate(run.meta.sources) if source.counted_work}
    joined = {i for i, source in enumerate(run.meta.sources) if source.kind == JOINED_KIND}
    hardware = launches["source"].isin(counted)
    if "counters_from" in launches:  # a trace joined with ncu's counters: those launches carry ncu's FLOPs
        hardware |= launches["source"].isin(joined) & launches["counters_from"].notna()
    return pd.Series(MODEL, index=launches.index).where(~hardware.fillna(False).astype(bool), HARDWARE)


def _values(column: pd.Series) -> np.ndarray:
    return column.to_numpy(dtype="float64", na_value=np.nan)


def _without_peak(work: np.ndarray, peak: np.ndarray) -> np.ndarray:
    """Launches with work (``work``, per launch) in a precision with no dense peak on their GPU (``peak`` NaN: e.g.
    vector FP16 on an AMD GPU, whose data sheet gives no rate)."""
    return (work > 0) & np.isnan(peak)


def launch_terms(run: Run, roofs: RunRoofs) -> pd.DataFrame:
    """Per launch, the summable terms of its utilisations (:data:`TERMS`)."""
    launches = run.launches
    peaks = roofs.per_launch.loc[launches.index]
    timed = launches["time_s"].notna()
    # On arrays: the same sums in the same order, without pandas' cost per operation (15 FLOP columns, 6 each)
    at_peak_values = np.zeros(len(launches))
    flops_values = np.zeros(len(launches))
    unpriced_values = np.zeros(len(launches))
    for column, key in FLOP_ROOFS.items():
        given = _values(launches[column])
        work = np.where(np.isnan(given), 0.0, given)
        peak = _values(peaks[key])
        no_peak = _without_peak(work, peak)
        unpriced_values += np.where(no_peak, work, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            seconds_at_peak = work / peak
        at_peak_values += np.where((work > 0) & ~no_peak & ~np.isnan(seconds_at_peak), seconds_at_peak, 0.0)
        flops_values += np.where(~no_peak, work, 0.0)
    at_peak = pd.Series(at_peak_values, index=launches.index)
    flops = pd.Series(flops_values, index=launches.index)
    unpriced = pd.Series(unpriced_values, index=launches.index)
    has_flops = launches[list(FLOP_ROOFS)].notna().any(axis=1)
    basis = flop_basis(run)
    terms = pd.DataFrame(index=launches.index)
    terms["utilized_time_s"] = launches["time_s"].where(timed)
    for kind in (MODEL, HARDWARE):
        mine = timed & (basis == kind) & has_flops
        terms[f"{kind}_flops"] = flops.where(mine)
        terms[f"{kind}_time_at_peak_s"] = at_peak.where(mine)
        terms[f"{kind}_launches"] = (mine & (flops > 0)).astype(float)
    terms["unpriced_flops"] = unpriced.where(timed, 0.0)
    hbm = launches["bytes_hbm"]
    priced = hbm.notna() & peaks["hbm"].notna() & timed
    terms["hbm_time_at_peak_s"] = (hbm / peaks["hbm"]).where(priced)
    terms["hbm_launches"] = priced.astype(float)
    terms["hbm_unpriced_launches"] = (timed & (hbm.fillna(0) > 0) & peaks["hbm"].isna()).astype(float)
    return terms


def with_utilization(table: pd.DataFrame) -> pd.DataFrame:
    """A table of summed :data:`TERMS` (per group) with ``mfu_pct``, ``hfu_pct`` and ``mbu_pct``; the terms
    dropped."""
    out = table.copy()
    seconds = out["utilized_time_s"].where(out["utilized_time_s"] > 0)
    mixed = (out["model_launches"] > 0) & (out["hardware_launches"] > 0)
    for kind, column in ((MODEL, "mfu_pct"), (HARDWARE, "hfu_pct")):
        known = out[f"{kind}_flops"].notna() & ~mixed
        out[column] = (100.0 * out[f"{kind}_time_at_peak_s"].fillna(0.0) / seconds).where(known)
    out["mbu_pct"] = (100.0 * out["hbm_time_at_peak_s"] / seconds).where(
        (out["hbm_launches"] > 0) & (out["hbm_unpriced_launches"] == 0)
    )
    return out.drop(columns=[c for c in TERMS if c in out.columns])


def kernel_utilization(run: Run) -> pd.DataFrame | None:
    """Per launch, the terms to sum per kernel or layer (``kernel_table``'s ``extra``); None where the run has no
    dense roofs."""
    roofs = dense_roofs(run)
    return None if isinstance(roofs, str) else launch_terms(run, roofs)


def utilization_table(run: Run, query: KernelQuery) -> pd.DataFrame:
    """``kernel_table``'s rows (launches, kernel names or layers) with their MFU, HFU and MBU (null without dense
    roofs) and, for collectives, their bus and algorithm bandwidth and % of link roof."""
    terms = kernel_utilization(run)
    links = link_terms(run, link_roofs(run))  # collectives: busbw, algbw and % of their link roof
    if terms is None:
        table = kernel_table(run, query, links).assign(**{c: float("nan") for c in UTILIZATION_COLUMNS})
        return with_link_columns(table)
    return with_link_columns(with_utilization(kernel_table(run, query, terms.join(links))))


def run_utilization(run: Run) -> RunUtilization:
    """Per phase (in the run's order) and in total: MFU, HFU and MBU; the denominator; why any is missing."""
    roofs = dense_roofs(run)
    result = RunUtilization(estimated=run.meta.predicted)
    if isinstance(roofs, str):
        result.reasons.append(f"no MFU or MBU: {roofs}")
        return result
    terms = launch_terms(run, roofs)
    phases = run.launches["phase"].astype("string").fillna("other")
    sums = terms.groupby(phases, sort=False).sum(min_count=1)
    sums.loc["total"] = terms.sum(min_count=1)
    finished = with_utilization(sums)
    for name, row in finished.iterrows():
        result.groups[str(name)] = Utilization(
            time_s=_number(sums.loc[name, "utilized_time_s"]),
            model_flops=_number(sums.loc[name, "model_flops"]),
            hardware_flops=_number(sums.loc[name, "hardware_flops"]),
            mfu=_fraction(row["mfu_pct"]),
            hfu=_fraction(row["hfu_pct"]),
            mbu=_fraction(row["mbu_pct"]),
        )
    result.peaks = _peak_terms(run, roofs)
    result.hbm_byte_per_s = _median_peak(run, roofs, "hbm", run.launches["bytes_hbm"].fillna(0) > 0)
    result.reasons = _reasons(run, terms, roofs)
    return result


def summary_with_utilization(
    summary: dict[str, dict[str, float | int | None]], utilization: RunUtilization
) -> dict[str, dict[str, float | int | None]]:
    """A phase summary (:func:`hroofline.analyze.kernels.phase_summary`) with each phase's ``mfu_pct``,
    ``hfu_pct`` and ``mbu_pct`` (None: not known)."""
    out = {}
    for phase, values in summary.items():
        group = utilization.groups.get(phase)
        shares = (group.mfu, group.hfu, group.mbu) if group is not None else (None, None, None)
        out[phase] = {
            **values,
            **{c: None if v is None else 100.0 * v for c, v in zip(UTILIZATION_COLUMNS, shares, strict=True)},
        }
    return out


def _peak_terms(run: Run, roofs: RunRoofs) -> list[PeakTerm]:
    """Per precision the run's timed launches do work in (each FLOP basis apart): its dense peak, rate, SMs and
    clock."""
    launches = run.launches
    gpu = run_gpu(run.meta)
    rates = rates_for(run.meta.cc, gpu, run.meta.device_name)
    basis = flop_basis(run)
    terms = []
    for kind in (MODEL, HARDWARE):
        keys = dict.fromkeys(
            key for column, key in FLOP_ROOFS.items() if (launches[column].fillna(0)[basis == kind] > 0).any()
        )
        for key in keys:
            working = (basis == kind) & pd.concat(
                [launches[c].fillna(0) > 0 for c, k in FLOP_ROOFS.items() if k == key], axis=1
            ).any(axis=1)
            peak = _median_peak(run, roofs, key, working)
            if peak is None:
                continue
            rate = rates.get(key)
            if rate and key == "fp16" and kind == HARDWARE and roofs.fp16_halved:
                rate *= COUNTED_FP16_FACTOR  # ncu counts a packed half2 instruction once: its roof is halved to match
            sms = gpu.sms if gpu is not None else None
            clock = peak / (rate * sms) if rate and sms else None
            measured = weighted_median(launches.loc[working, "clock_hz"], launches.loc[working, "time_s"])
            unit = gpu.compute_unit if gpu is not None else "SM"
            clocked = _which_clock(clock, measured)
            terms.append(PeakTerm(key, ROOF_LABELS[key], peak, rate, sms, clock, clocked, kind, unit))
    return terms


def _which_clock(clock: float | None, measured: float | None) -> str:
    if measured is None:
        return DATASHEET_CLOCK
    if clock is not None and abs(clock / measured - 1) <= 0.01:
        return MEASURED_CLOCK
    return ROOFS_CLOCK  # a trace joined with ncu's counters: roofs at the GPU's highest clock


def _median_peak(run: Run, roofs: RunRoofs, key: str, working: pd.Series) -> float | None:
    rows = run.launches[working & run.launches["time_s"].notna()]
    if rows.empty:
        return None
    return weighted_median(roofs.per_launch.loc[rows.index, key], rows["time_s"])


def _reasons(run: Run, terms: pd.DataFrame, roofs: RunRoofs) -> list[str]:
    """Why the run's total has no MFU, HFU or MBU, or what they leave out, in sentences."""
    reasons = []
    unpriced = terms["unpriced_flops"].sum()
    if unpriced > 0:
        launches, peaks = run.launches, roofs.per_launch.loc[run.launches.index]
        labels = [
            ROOF_LABELS[key]
            for column, key in FLOP_ROOFS.items()
            if _without_peak(_values(launches[column]), _values(peaks[key])).any()
        ]
        share = unpriced / (unpriced + terms["model_flops"].sum() + terms["hardware_flops"].sum())
        reasons.append(
            f"{100 * share:.2g}% of the FLOPs ({', '.join(dict.fromkeys(labels))}) are in a precision this GPU has "
            "no dense peak for: left out of MFU and HFU, which are lower bounds by that much"
        )
    if terms["model_launches"].sum() and terms["hardware_launches"].sum():
        reasons.append("model and hardware FLOPs are on different launches: no MFU or HFU where they mix")
    if not (terms["hbm_launches"].sum()):
        reasons.append("no HBM bytes with an HBM peak: no MBU")
    if run.launches["time_s"].isna().all():
        reasons.append("no kernel times: no MFU or MBU")
    return reasons


def _number(value: object) -> float | None:
    return None if pd.isna(value) else float(value)  # type: ignore[arg-type]


def _fraction(pct: object) -> float | None:
    return None if pd.isna(pct) else float(pct) / 100.0  # type: ignore[arg-type]
