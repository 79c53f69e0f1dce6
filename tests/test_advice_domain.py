"""What advise judges and what it refuses (issue 45): every phase of the step (``other`` too), a GPU outside the
catalog against its file's own roofs (not as a CPU), padding advice only where a dimension of a matrix product is
misaligned, no finding that can win nothing, and a predicted run said not judged (tests/test_predict.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hroofline.analyze.advice.base import advice_context
from hroofline.analyze.advice.rules import advise
from hroofline.store.runs import RunStore
from tests.conftest import REPO, SHARED, need

GPU_DATA = REPO / "tests" / "data" / "gpu-2026-11-27"
NCU = SHARED / "fixtures" / "ncu"
# name -> (file, import options)
RUNS = {
    "dropout": (NCU / "a100_dropout_fp64_nersc_metrics.csv", ()),  # imported without --phase: all 'other'
    "vgg16": (GPU_DATA / "h100-sixth" / "vgg16-fp32-b32-train-nchw-trace.json.xz", ()),  # no forward range
    "r50-amp": (GPU_DATA / "h100-resnet50-amp-b32-nchw-trace.json.xz", ()),
    "rtx-pro-6000": (NCU / "rtxpro6000_bf16_proj_gemm_ncu2026_raw.csv", ()),
    "a40": (NCU / "a40_ece408_lenet_conv_basicset.ncu-rep", ()),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, h100_dir: Path) -> RunStore:
    from hroofline.cli.main import main

    folder = tmp_path_factory.mktemp("advice-domain") / "store"
    runs = {**RUNS, "calibration": (h100_dir / "gemm-calibration-base-clock.ncu-rep", ())}
    for name, (path, options) in runs.items():
        assert main(["import", str(need(path)), "--run", name, *options, "--store", str(folder)]) == 0
    return RunStore(folder)


def _kernel_time(run_launches, pattern: str) -> float:
    kernels = run_launches["kernel"].astype(str)
    return float(run_launches.loc[kernels.str.contains(pattern, regex=False), "time_s"].sum())


def test_phase_other_is_judged_with_the_step(store: RunStore, cli) -> None:
    """A report imported without --phase is all 'other': its dropout kernels under half their roof (30% of its
    time, counted here from the launches) are found; a trace whose forward has no range has it found (from
    autograd's sequence numbers, tests/test_trace_phases.py) and in the step."""
    dropout = store.load("dropout")
    assert set(dropout.launches["phase"]) == {"other"}
    (fusion,) = [f for f in advise(dropout, "a100") if f.rule.key == "memory_bound_elementwise"]
    judged = advice_context(dropout, "a100").launches  # with each launch's time at the A100's roofs
    below_half = judged[judged["time_at_roof_s"] < 0.5 * judged["time_s"]]
    expected = _kernel_time(below_half, "fused_dropout_kernel")
    assert expected > 1e-3 and fusion.evidence.time_s == pytest.approx(expected)
    assert fusion.evidence.step_share == pytest.approx(expected / dropout.launches["time_s"].sum())
    assert fusion.evidence.phase_share["other"] == pytest.approx(fusion.evidence.step_share)
    out = cli("advise", "dropout", "--ceilings", "a100", "--store", str(store.root)).out
    assert "of other" in out and "no advice" not in out

    vgg = store.load("vgg16")
    launches = vgg.launches
    forward = float(launches.loc[(launches["phase"] == "forward") & (launches["category"] == "kernel"), "time_s"].sum())
    assert forward > 5e-3  # the forward, outside any range
    context = advice_context(vgg)
    kernels = launches[launches["category"] == "kernel"]
    assert context.step_time_s == pytest.approx(float(kernels["time_s"].sum()))
    layout = {f.rule.key: f for f in advise(vgg)}["layout_conversions"]
    conversions = _kernel_time(kernels, "nchwToNhwc") + _kernel_time(kernels, "nhwcToNchw")
    assert layout.evidence.time_s == pytest.approx(conversions)
    assert "forward" in layout.evidence.phase_time_s


def test_padding_is_advised_only_where_a_dimension_of_a_product_is_misaligned(store: RunStore) -> None:
    """The calibration's 4096^3 FP32 SGEMM (sm80 ffma, aligna4: nothing to pad) gets TF32, not padding; the
    resnet50 AMP trace's sm80/cutlass_80 kernels under cuDNN convolutions (a 1x1 convolution's GEMM, whose 14 is
    the feature map's side) are no matrix product to pad; no finding can win nothing."""
    calibration = {f.rule.key: f for f in advise(store.load("calibration"))}
    assert "gemm_fallbacks" not in calibration
    tf32 = calibration["fp32_off_tensor_cores"]
    assert any("sm80_xmma_gemm_f32f32" in kernel and "ffma" in kernel for kernel, _ in tf32.evidence.kernels)
    assert "set_float32_matmul_precision" in tf32.code

    r50 = store.load("r50-amp")
    launches = r50.launches
    under_convolutions = launches["op"].astype(str).str.contains("conv") & launches["kernel"].astype(str).str.contains(
        "cutlass_80|sm80_"
    )
    assert under_convolutions.any()  # what the rule took for fallback matrix products before
    assert "gemm_fallbacks" not in {f.rule.key for f in advise(r50)}

    for name in ("vgg16", "r50-amp", "calibration"):
        for finding in advise(store.load(name)):
            assert finding.win_s > 0, (name, finding.rule.key)


def test_a_gpu_outside_the_catalog_is_judged_against_its_files_roofs(store: RunStore, cli) -> None:
    """The RTX PRO 6000 (85% of its time in a BF16 GEMM) and the A40 are in no catalog: GPU runs all the same,
    with the compute capability and the roofs their files give."""
    for name, cc in (("rtx-pro-6000", 12.0), ("a40", 8.6)):
        run = store.load(name)
        context = advice_context(run)
        assert context.gpu is None and context.on_gpu and context.cc == cc
        own = run.launches.loc[context.launches.index, "peak_fp32"]  # the file's own peaks, and no other
        assert own.notna().all() and context.per_launch_peaks["fp32"].tolist() == own.tolist()
        from hroofline.analyze.advice.rules import ON_GPU, advice_scope

        assert advice_scope(run) == ON_GPU
        out = cli("advise", name, "--store", str(store.root)).out
        assert "CPU" not in out and name in out
