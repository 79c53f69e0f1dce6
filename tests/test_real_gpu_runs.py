"""What a real H100 and H200 showed on 2026-11-27 (tests/data/gpu-2026-11-27, its README says how each file was
made), checked on those files: the default profile mode (a trace pass, then ncu on one launch per signature)
joined launch by launch, its roofs, and the doctor's calibration with its copy."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import pandas as pd
import pytest

from hroofline.analyze.binding import MEASURED, RoofNotes, roof_table
from hroofline.analyze.kernels import KernelQuery
from hroofline.collect.distinct_launches import join_distinct, pair_measured, plan_distinct_launches
from hroofline.collect.ncu_top import function_name
from hroofline.errors import ProfilingError
from hroofline.importers.build import ImportOptions, import_source
from hroofline.importers.source import ImportedSource
from hroofline.model.run import PEAK_PREFIX, Run
from hroofline.roofs.catalog import resolve_gpu
from hroofline.roofs.ceilings import run_roofs
from hroofline.roofs.metricset import load_metric_set
from hroofline.store.runs import RunDefaults, RunStore
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "gpu-2026-11-27"
RESNET18 = DATA / "h100-resnet18-fp32-b32"
RESNET50_AMP = DATA / "h200-resnet50-amp-b32"
HIGHEST_CLOCK = 1.98e9  # H100 SXM and H200: metrics/gpus.toml [*.clock] default


def _unpacked(packed: Path, folder: Path) -> Path:
    plain = folder / packed.name.removesuffix(".xz")
    with lzma.open(packed) as source, plain.open("wb") as target:
        shutil.copyfileobj(source, target)
    return plain


def _passes(folder: Path, gpu: str, tmp: Path) -> tuple[ImportedSource, ImportedSource]:
    """The trace pass and the ncu pass of one profile, imported as `hroofline profile` imports them."""
    metric_set = load_metric_set()
    trace = import_source(_unpacked(folder / "trace.json.xz", tmp), ImportOptions(cpu_ops=False), metric_set)
    options = ImportOptions(phase=None, gpu=resolve_gpu(gpu), merge="launch")
    measured = import_source(_unpacked(folder / "profile.ncu-rep.xz", tmp), options, metric_set)
    return trace, measured


@pytest.fixture(scope="module")
def resnet18(tmp_path_factory: pytest.TempPathFactory) -> tuple[ImportedSource, ImportedSource]:
    return _passes(RESNET18, "h100-sxm", tmp_path_factory.mktemp("resnet18"))


@pytest.fixture(scope="module")
def resnet50_amp(tmp_path_factory: pytest.TempPathFactory) -> tuple[ImportedSource, ImportedSource]:
    return _passes(RESNET50_AMP, "h200", tmp_path_factory.mktemp("resnet50"))


def _stored(joined: ImportedSource, gpu: str, precision: str, tmp: Path) -> Run:
    store = RunStore(tmp / "store")
    store.replace_run("run", [joined], RunDefaults(gpu, precision, None))
    return store.load("run")


def test_the_plan_is_the_one_the_gpu_ran(resnet18: tuple[ImportedSource, ImportedSource]) -> None:
    """The trace pass replanned here chooses the op calls the workload marked on the H100."""
    trace, measured = resnet18
    plan = plan_distinct_launches(trace.launches)
    assert list(plan.calls) == json.loads((RESNET18 / "measure-calls.json").read_text())
    assert (plan.profiled, plan.launches, len(measured.launches)) == (176, 376, 176)


def test_mangled_kernel_names_pair_with_the_names_ncu_demangles(
    resnet18: tuple[ImportedSource, ImportedSource],
) -> None:
    """Kineto kept cuDNN's CUTLASS convolution names mangled, ncu demangled them: the same functions. On the H100
    the plain comparison stopped the profile at ncu's launch 86 ('the two passes ran different kernels')."""
    trace, measured = resnet18
    plan = plan_distinct_launches(trace.launches)
    planned = trace.launches.set_index("launch_id").loc[list(plan.measured), "kernel"].astype(str)
    mangled = [i for i, name in enumerate(planned) if name.startswith("_Z")]
    assert mangled == [85, 139, 170]
    ncu_names = measured.launches.sort_values("launch_id")["kernel"].astype(str)
    for position in mangled:
        theirs = ncu_names.iloc[position]
        assert theirs.startswith("void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::conv::kernel::ImplicitGemmConv")
        assert function_name(planned.iloc[position]) == function_name(theirs) == "cutlass__5x_cudnn::Kernel"
    # a kernel whose name differs still stops the join
    renamed = measured.launches.copy()
    index = renamed.sort_values("launch_id").index[85]
    renamed.loc[index, "kernel"] = "void cutlass__5x_cudnn::Other<int>(int)"
    with pytest.raises(ProfilingError, match="ncu's launch 86 of 176 is cutlass__5x_cudnn::Other"):
        pair_measured(trace.launches, renamed, plan)


def test_a_joined_run_has_every_roof_at_the_highest_clock(
    resnet18: tuple[ImportedSource, ImportedSource], tmp_path: Path
) -> None:
    """The report's roofs of each launch's measured launch, per cycle x 1.98 GHz (ncu ran at 1.41-1.59 GHz, the
    trace unlocked), HBM's as the report gives it: a hierarchical roofline, L1 and L2 included, for the default
    mode (it had the datasheet's roofs only, which give an H100 no L1 or L2)."""
    trace, measured = resnet18
    plan = plan_distinct_launches(trace.launches)
    joined = join_distinct(trace, measured, plan, HIGHEST_CLOCK)
    run = _stored(joined, "h100-sxm", "fp32", tmp_path)
    roofs = run_roofs(run)
    assert "highest clock (1.98 GHz)" in roofs.label and "datasheet" not in roofs.label
    carried = run.launches["counters_from"].notna()
    assert int(carried.sum()) == 376
    ncu = pair_measured(trace.launches, measured.launches, plan)  # by the trace launch each measured
    sources = run.launches.loc[carried, "counters_from"].astype(int).to_numpy()
    clock = ncu["clock_hz"]
    assert clock.between(1.40e9, 1.60e9).all()  # --clock-control base
    for key in ("l1", "fp32", "tensor_tf32"):  # they follow the SM clock
        expected = ncu.loc[sources, PEAK_PREFIX + key].to_numpy() * HIGHEST_CLOCK / ncu.loc[sources, "clock_hz"]
        assert roofs.per_launch.loc[carried, key].to_numpy() == pytest.approx(expected.to_numpy(), rel=1e-9)
    for key in ("l2", "hbm"):  # clocks of their own: as ncu measured them (the L2's 12.9-13.1 TB/s throughout)
        measured_roof = ncu.loc[sources, PEAK_PREFIX + key].to_numpy()
        assert roofs.per_launch.loc[carried, key].to_numpy() == pytest.approx(measured_roof, rel=1e-9)
    assert roofs.per_launch.loc[carried, "l2"].between(12.8e12, 13.2e12).all()
    # 128 B per cycle and SM of L1 writeback: 33.8 TB/s at 1.98 GHz
    assert roofs.per_launch.loc[carried, "l1"].median() == pytest.approx(128 * 132 * HIGHEST_CLOCK, rel=1e-6)
    notes = RoofNotes()
    roof_table(run, roofs, KernelQuery(), notes)
    assert not notes.missing_roofs
    # one launch, a memset with no counters (its bytes the trace's): data resident in L2, not ncu's cold count
    assert [(a.kernel, a.kind) for a in notes.above] == [("Memset (Device)", "resident")]


def test_cudnn_helpers_carry_ncu_fp16_flops_not_their_ops_share(
    resnet50_amp: tuple[ImportedSource, ImportedSource], tmp_path: Path
) -> None:
    """On the H200 resnet50 amp step, reduce_wgrad_nchw_helper kept its convolution's analytic FP16 FLOPs (1.4
    GFLOP in 3.8 µs) and sat above its FP16 roof. ncu's counters now replace every FLOP column; the FP16 roof of
    the launches carrying them is halved as for any ncu run (ncu counts a packed half2 instruction once)."""
    trace, measured = resnet50_amp
    plan = plan_distinct_launches(trace.launches)
    run = _stored(join_distinct(trace, measured, plan, HIGHEST_CLOCK), "h200", "amp", tmp_path)
    helpers = run.launches[run.launches["kernel"].astype(str).str.contains("reduce_wgrad_nchw_helper")]
    assert len(helpers) == 16
    ncu = pair_measured(trace.launches, measured.launches, plan)
    sources = helpers["counters_from"].astype(int)
    assert helpers["flops_fp16"].to_numpy() == pytest.approx(ncu.loc[sources, "flops_fp16"].to_numpy())
    assert helpers["flops_fp16"].max() < 1e8
    roofs = run_roofs(run)
    assert roofs.fp16_halved
    notes = RoofNotes()
    table = roof_table(run, roofs, KernelQuery(), notes)
    assert not [a for a in notes.above if a.kind == MEASURED], notes.above
    assert not notes.missing_roofs
    assert table["time_s"].sum() == pytest.approx(run.launches["time_s"].sum())


def test_doctor_passes_the_h200_calibration_with_its_copy(cli, tmp_path: Path) -> None:
    """21 checks, the copy's bytes 0.9% under 2 GiB; the BF16 and FP16 GEMMs bound by their tensor roofs
    although the L1 writeback path is as busy (co-bound: 94.0-94.3% against 93.5-93.8%)."""
    report = _unpacked(DATA / "h200-doctor-calibration.ncu-rep.xz", tmp_path)
    result = cli("doctor", "--report", report)
    assert result.code == 0, result.err
    assert result.out.rstrip().endswith("all 21 checks passed")
    copy = next(line for line in result.out.splitlines() if line.startswith("copy"))
    assert "-0.9%" in copy and copy.endswith("ok")
    for case, roof in (("bf16", "BF16 tensor"), ("fp16", "FP16 tensor")):
        bound = next(line for line in result.out.splitlines() if line.startswith(case) and "bound by" in line)
        assert bound.split()[-3:-1] == roof.split() or roof in bound
    metric_set = load_metric_set()
    source = import_source(report, ImportOptions(), metric_set)
    launches = source.launches
    gemm = launches[launches["flops_tensor_bf16"].fillna(0) > 0]
    tensor_s = gemm["flops_tensor_bf16"] / gemm[PEAK_PREFIX + "tensor_bf16"]
    l1_s = gemm["bytes_l1"] / gemm[PEAK_PREFIX + "l1"]
    share = pd.DataFrame({"tensor": tensor_s / gemm["time_s"], "l1": l1_s / gemm["time_s"]})
    assert share["tensor"].between(0.93, 0.95).all() and share["l1"].between(0.93, 0.95).all()
    assert (share["l1"] > share["tensor"]).all()  # the L1 path is the busier by a hair: the co-bound rule names compute


def test_a_profile_named_for_an_h100_is_refused_on_an_h200() -> None:
    from hroofline.collect.preflight import check_device_is

    with pytest.raises(ProfilingError, match=r"NVIDIA H200 \(h200 in the catalog\), not h100-sxm"):
        check_device_is(resolve_gpu("h100-sxm"), "NVIDIA H200", 132)
    check_device_is(resolve_gpu("h100-sxm"), "NVIDIA H100 80GB HBM3", 132)
    check_device_is(resolve_gpu("h200"), "NVIDIA H200", 132)


def test_the_co_bound_rule_leaves_a_launch_above_its_roof_its_beaten_roof() -> None:
    """Compute 0.96 s and HBM 1.0 s at roof: at 1.2 s the launch is co-bound and named by its FP32 roof; at 0.97 s
    it beat the HBM roof, which stays its bound (the why of an above-roof note follows from it); the above launch
    counts as ncu-counted only where counters_from says so."""
    from hroofline.analyze.binding import launch_roof_terms
    from hroofline.model.quantities import COMPUTE_ROOF_OF, ROOF_KEYS

    columns = {column: [0.0, 0.0, 0.0] for column in COMPUTE_ROOF_OF}
    columns["flops_fp32"] = [0.96e12] * 3
    frame = pd.DataFrame(
        {**columns, "bytes_l1": [float("nan")] * 3, "bytes_l2": [float("nan")] * 3, "bytes_hbm": [1e12] * 3}
    )
    frame["time_s"] = [1.2, 0.97, 0.97]
    frame["counters_from"] = pd.array([None, None, 2], dtype="Int64")
    peaks = pd.DataFrame({key: [float("nan")] * 3 for key in ROOF_KEYS})
    peaks[["fp32", "hbm"]] = 1e12
    terms = launch_roof_terms(frame, peaks, (("fp32",),))
    assert terms["bound"].tolist() == ["FP32", "HBM", "HBM"]
    assert terms["above_roof"].tolist() == [0.0, 1.0, 1.0] and terms["above_counted"].tolist() == [0.0, 0.0, 1.0]
    assert terms["time_at_roof_s"].tolist() == pytest.approx([1.0, 1.0, 1.0])
