"""Whether hroofline's counters and roofs put known work where it must be (``hroofline doctor``).

A calibration run (:mod:`hroofline.collect.calibration`) holds launches whose work is known. Each launch is told
apart by the precision that does most of its work (a BF16 GEMM's FLOPs are BF16 tensor FLOPs; the copy has none
and moves a GiB or more), and its case's checks are:

- % of roof: cuBLAS reaches 85-95% of the dense tensor peak on these sizes, and 70-85% of the FP32 peak on the
  CUDA cores: a GEMM between ``ROOF_BANDS`` of its roof, bound by that roof (a GEMM at ~47% of a tensor roof
  has a roof twice too high: the 2:4-sparse rate taken as dense);
- FLOPs: within 2% below 2 x M x N x K and at most ``PADDING`` above it (cuBLAS's tiles pad a dimension to
  their width: 320-wide tiles pad 8192 to 8320, +1.6%);
- L1: a GEMM's operands reach its tensor cores through L1 or shared memory, so its L1 count, where known, is not
  below ``MIN_L1_SHARE`` of its L2 count (a count that is has missed them: Hopper's TMA past the t-stage);
- the copy: main-memory bytes within 5% of what it reads and writes.

A case the run does not hold (a GPU without BF16 tensor cores, a report made without the copy) is not
judged. Nothing here formats text: :mod:`hroofline.cli.doctor_cmd` does.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hroofline.analyze.binding import launch_roof_terms
from hroofline.model.quantities import ROOF_LABELS
from hroofline.model.run import Run
from hroofline.roofs.ceilings import RunRoofs
from hroofline.roofs.formulas import total_flops
from hroofline.roofs.metricset import load_metric_set
from hroofline.work.calibration import CASES, Case

# The FLOP column that does most of each GEMM case's work, and the roof it must be bound by.
CASE_COLUMNS: dict[str, str] = {
    "bf16": "flops_tensor_bf16",
    "fp16": "flops_tensor_fp16",
    "tf32": "flops_tensor_tf32",
    "fp32": "flops_fp32",
    "fp64": "flops_tensor_fp64",
}
ROOF_BANDS: dict[str, tuple[float, float]] = {
    "bf16": (80.0, 100.0),
    "fp16": (80.0, 100.0),
    "tf32": (80.0, 100.0),
    "fp64": (80.0, 100.0),
    "fp32": (65.0, 100.0),  # CUDA-core SGEMM: the H100's reaches 78%
}
FLOP_SHORTFALL = 0.02
PADDING = 0.05
COPY_TOLERANCE = 0.05
COPY_MINIMUM_BYTES = 1e9
FLOPS_HINT = "the FLOP counters or their formulas (metrics/hierarchical.toml) miscount this precision"
MIN_L1_SHARE = 0.5
PRESENT_HINT = (
    "the calibration ran it, but ncu recorded no launch of it (an operation that launches no kernel, such as "
    "cudaMemcpy, or one outside the profiled NVTX range)"
)
L1_HINT = (
    "the L1 count missed the operands (on Hopper the TMA moves them past l1tex__t_bytes): check the bytes_l1 "
    "formula for this architecture in metrics/hierarchical.toml and [l1_blind]"
)


@dataclass(frozen=True)
class Check:
    """One check: what was measured against what it must be. ``passed`` is None where the run does not hold
    the case."""

    case: str
    what: str  # "roof", "bound", "flops", "bytes"
    measured: float | str | None
    low: float | str | None
    high: float | None
    passed: bool | None
    hint: str = ""


@dataclass(frozen=True)
class Diagnosis:
    checks: list[Check]
    launches: dict[str, int]  # case -> launches found

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if check.passed is False]

    @property
    def passed(self) -> bool:
        return not self.failed and any(check.passed for check in self.checks)


def case_of(launches: pd.DataFrame) -> pd.Series:
    """Each launch's calibration case: the precision that does most of its FLOPs, 'copy' for a big move
    without FLOPs, None for anything else (a helper kernel)."""
    columns = list(CASE_COLUMNS.values())
    work = launches[columns].fillna(0.0)
    dominant = work.idxmax(axis=1).where(work.max(axis=1) > 1e9)
    by_column = {column: case for case, column in CASE_COLUMNS.items()}
    cases = dominant.map(by_column)
    fp64_cores = launches["flops_fp64"].fillna(0) > 1e9  # DGEMM on a GPU without FP64 tensor cores
    cases = cases.where(cases.notna() | ~fp64_cores, "fp64")
    copy = (total_flops(launches).fillna(0) == 0) & (launches["bytes_hbm"].fillna(0) >= COPY_MINIMUM_BYTES)
    return cases.where(~copy, "copy")


# A GEMM of a calibration run does its case's 2·M·N·K within this factor: far enough that a miscount (an FMA
# counted once, a sparse count) still reaches the FLOPs check, near enough that a model's GEMMs do not pass.
SHAPE_FACTOR = 4.0
CALIBRATION_PHASE = "forward"


def not_calibration(run: Run) -> str | None:
    """Why the run is no calibration run, or None where it is one. A calibration run is what the calibration
    script records: one profiled step in phase ``forward`` without module (layer) ranges (its NVTX ranges), whose
    GEMMs each do about their case's 2·M·N·K (its GEMM shapes: 8192³ or 4096³)."""
    launches = run.launches
    phases = sorted(set(launches["phase"].dropna().astype(str)) - {CALIBRATION_PHASE})
    if phases:
        return f"it has launches in phase {', '.join(phases)} (the calibration's are all in {CALIBRATION_PHASE})"
    if launches["layer"].notna().any():
        return "it has module (layer) ranges (the calibration has none)"
    cases = case_of(launches)
    sizes = {case.name: case for case in CASES if case.name != "copy"}
    gemms = cases.isin(list(sizes))
    if not gemms.any():
        return "it holds no GEMM of 1 GFLOP or more"
    wanted = cases[gemms].map(lambda name: sizes[name].flops)
    ratio = total_flops(launches)[gemms] / wanted
    off = ~ratio.between(1 / SHAPE_FACTOR, SHAPE_FACTOR)
    if off.any():
        first = off.idxmax()
        size = sizes[str(cases[first])].size
        return (
            f"{int(off.sum())} of its {int(gemms.sum())} GEMMs do other work than the calibration's (one does "
            f"{total_flops(launches)[first] / 1e9:.3g} GFLOP as a {cases[first]} GEMM, not 2·{size}³ = "
            f"{2 * size**3 / 1e9:,.0f} GFLOP)"
        )
    return None


def diagnose(run: Run, roofs: RunRoofs, profiled: tuple[str, ...] = ()) -> Diagnosis:
    """The checks of every calibration case the run holds; a case in ``profiled`` (the calibration ran it
    under ncu here) that the run lacks fails: ncu recorded none of its launches."""
    launches = run.launches
    cases = case_of(launches)
    pipes = load_metric_set().pipes_of(run.meta.cc)
    table = launch_roof_terms(launches, roofs.per_launch.loc[launches.index], pipes).assign(time_s=launches["time_s"])
    checks: list[Check] = []
    found: dict[str, int] = {}
    for case in CASES:
        rows = launches.index[cases == case.name]
        found[case.name] = len(rows)
        if not len(rows):
            ran = case.name in profiled
            hint = PRESENT_HINT if ran else ""
            checks.append(Check(case.name, "present", 0 if ran else None, None, None, False if ran else None, hint))
            continue
        if case.name == "copy":
            checks.append(_copy_check(case, launches.loc[rows, "bytes_hbm"]))
            continue
        checks += _gemm_checks(case, launches.loc[rows], table.loc[rows])
    return Diagnosis(checks, found)


def _gemm_checks(case: Case, launches: pd.DataFrame, table: pd.DataFrame) -> list[Check]:
    low, high = ROOF_BANDS[case.name]
    at_roof = float(100 * table["time_at_roof_s"].sum() / table["time_s"].sum())
    roof_ok = low <= at_roof <= high
    hint = "" if roof_ok else _roof_hint(at_roof, low, high)
    bound = table["bound"].mode().iloc[0] if table["bound"].notna().any() else None
    wanted = _expected_bound(case, launches)
    flops = total_flops(launches) / case.flops - 1
    worst = float(flops.iloc[(flops - PADDING / 2).abs().argmax()])
    flops_ok = bool(flops.between(-FLOP_SHORTFALL, PADDING).all())
    return [
        Check(case.name, "roof", at_roof, low, high, roof_ok, hint),
        _l1_check(case, launches),
        Check(case.name, "bound", bound, wanted, None, bound == wanted, "" if bound == wanted else _bound_hint()),
        Check(
            case.name,
            "flops",
            100 * worst,
            -100 * FLOP_SHORTFALL,
            100 * PADDING,
            flops_ok,
            "" if flops_ok else FLOPS_HINT,
        ),
    ]


def _l1_check(case: Case, launches: pd.DataFrame) -> Check:
    l1, l2 = launches["bytes_l1"].sum(min_count=1), launches["bytes_l2"].sum(min_count=1)
    if pd.isna(l1) or pd.isna(l2) or l2 <= 0:
        return Check(case.name, "l1", "unknown", 100 * MIN_L1_SHARE, None, None)
    share = float(100 * l1 / l2)
    passed = share >= 100 * MIN_L1_SHARE
    return Check(case.name, "l1", share, 100 * MIN_L1_SHARE, None, passed, "" if passed else L1_HINT)


def _expected_bound(case: Case, launches: pd.DataFrame) -> str:
    if case.name == "fp64" and (launches["flops_tensor_fp64"].fillna(0) <= 0).all():
        return ROOF_LABELS["fp64"]
    key = CASE_COLUMNS[case.name].removeprefix("flops_")
    return ROOF_LABELS[key]


def _roof_hint(at_roof: float, low: float, high: float) -> str:
    if at_roof > high:
        return "above its roof: the roof is too low (the clock, the rate in metrics/rates.toml) or the FLOPs too many"
    if 0.4 * low <= at_roof <= 0.6 * high:
        return (
            "about half of what cuBLAS reaches: its roof is twice too high, the 2:4-sparse rate taken as dense; "
            "check this GPU's dense rate in metrics/rates.toml and the report's .peak_sustained"
        )
    return "far below what cuBLAS reaches: check the roof (metrics/rates.toml, the clock) and that the GPU was idle"


def _bound_hint() -> str:
    return "a GEMM of this size is compute-bound: a memory roof binding it means a compute roof too high"


def _copy_check(case: Case, nbytes: pd.Series) -> Check:
    errors = nbytes / case.bytes - 1
    worst = float(errors.iloc[errors.abs().argmax()])  # signed: fewer bytes than moved reads -
    passed = abs(worst) <= COPY_TOLERANCE
    hint = "" if passed else "the DRAM byte counter or its formula (metrics/hierarchical.toml bytes_hbm) miscounts"
    return Check(case.name, "bytes", 100 * worst, 0.0, 100 * COPY_TOLERANCE, passed, hint)
