"""The second visit's files (tests/data/gpu-2026-11-27: an H100's and an H200's profiles, the H200's doctor
calibration, the H100's host probe and step times), compared with the validation page (docs/validation.md, key
``second-visit``) figure by figure. tests/test_real_gpu_runs.py checks the behaviour on them in make test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from hroofline.analyze.binding import CO_BOUND
from hroofline.collect.distinct_launches import pair_measured, plan_distinct_launches
from hroofline.importers.build import ImportOptions, import_source
from hroofline.model.quantities import FLOP_QUANTITIES
from hroofline.model.run import PEAK_PREFIX
from hroofline.roofs.catalog import resolve_gpu
from hroofline.roofs.metricset import load_metric_set
from hroofline.work.calibration import CASES
from tests.test_memory import predicted_over_measured
from tests.test_real_gpu_runs import DATA, RESNET18, RESNET50_AMP, _passes, _unpacked
from tests.validation_page import assert_page_shows, page_figures


def _helper_flops_by_duration(launches: pd.DataFrame, name: str) -> tuple[float, float]:
    """The FLOPs and time of the helper kernel ``name`` that would get the most of its op's FLOPs were they split
    by duration over it and the kernels that compute (as before metrics/hierarchical.toml listed the helpers that
    do none of an op's multiply-adds: they get none now)."""
    flops = launches[[c for c in FLOP_QUANTITIES if c in launches]].fillna(0).sum(axis=1)
    shares = []
    for index in launches.index[launches["kernel"].astype(str).str.contains(name)]:
        op = launches["op_call"] == launches.at[index, "op_call"]
        assert flops[index] == 0
        computing = launches.loc[op & (flops > 0), "time_s"].sum()
        share = launches.at[index, "time_s"] / (computing + launches.at[index, "time_s"])
        shares.append((flops[op].sum() * share, launches.at[index, "time_s"]))
    return max(shares)


def doctor_figures(cli, tmp_path: Path) -> list[float]:
    """The H200's doctor calibration: how busy the L1 writeback path and the tensor pipe were in the BF16 and FP16
    GEMMs (%), the copy's bytes under its size (%), the size (GiB) and the checks that passed."""
    report = _unpacked(DATA / "h200-doctor-calibration.ncu-rep.xz", tmp_path)
    result = cli("doctor", "--report", report)
    assert result.code == 0, result.err
    checks = int(re.search(r"all (\d+) checks passed", result.out).group(1))  # type: ignore[union-attr]
    copy = next(line for line in result.out.splitlines() if line.startswith("copy"))
    under = -float(re.search(r"(-\d+\.\d+)%", copy).group(1))  # type: ignore[union-attr]
    size_gib = next(case.bytes for case in CASES if case.name == "copy") / 2**30  # what it reads and writes
    launches = import_source(report, ImportOptions(), load_metric_set()).launches
    l1, tensor = [], []
    for key in ("tensor_bf16", "tensor_fp16"):
        gemm = launches[launches["flops_" + key].fillna(0) > 0]
        tensor += list(100 * gemm["flops_" + key] / gemm[PEAK_PREFIX + key] / gemm["time_s"])
        l1 += list(100 * gemm["bytes_l1"] / gemm[PEAK_PREFIX + "l1"] / gemm["time_s"])
    return [min(l1), max(l1), min(tensor), max(tensor), 100 * CO_BOUND, under, size_gib, checks]


def test_the_page_shows_the_second_visits_figures(cli, tmp_path: Path) -> None:
    trace, measured = _passes(RESNET18, "h100-sxm", tmp_path)
    plan = plan_distinct_launches(trace.launches)
    clocks = pair_measured(trace.launches, measured.launches, plan)["clock_hz"] / 1e9
    (tmp_path / "resnet50").mkdir()
    amp_trace, amp_measured = _passes(RESNET50_AMP, "h200", tmp_path / "resnet50")
    amp_plan = plan_distinct_launches(amp_trace.launches)
    assert len(amp_measured.launches) == amp_plan.profiled
    launches = amp_trace.launches  # the trace pass: each kernel's share of its op's analytic FLOPs
    largest = _helper_flops_by_duration(launches, "reduce_wgrad_nchw_helper")
    h100, h200 = resolve_gpu("h100-sxm"), resolve_gpu("h200")
    assert h100.sms == h200.sms
    dispatch = json.loads((DATA / "h100-host-dispatch.json").read_text())["fp32"]
    small = [dispatch[op] * 1e6 for op in ("add", "relu", "add_inplace", "linear", "conv2d_3x3")]
    steps = pd.read_csv(DATA / "h100-step-times.csv")
    training = steps[(steps["phases"] == "train") & steps["batch"].isin([32, 128])].assign(measured="step")
    memory = [predicted_over_measured(row) for row in training.itertuples(index=False)]
    computed = [
        plan.profiled,
        plan.launches,
        amp_plan.launches,
        amp_plan.profiled,
        clocks.min(),
        clocks.max(),
        h100.clocks["default"] / 1e9,
        largest[0] / 1e9,
        largest[1] * 1e6,
        *doctor_figures(cli, tmp_path),
        h100.sms,
        min(small),
        max(small),
        dispatch["batch_norm_train"] * 1e6,
        32,
        128,
        min(memory),
        max(memory),
    ]
    assert_page_shows(page_figures("second-visit"), computed, "the second visit")
