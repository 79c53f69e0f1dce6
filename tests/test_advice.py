"""Advice on real runs: the shared H100 resnet34 and GPT-2 steps, Yang et al.'s DeepCAM on a V100 (FP32 and
AMP): which rules fire, with which evidence, and what they can win; compare confirms the advice acted on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hroofline.analyze.advice.rules import advise, confirm_advice
from hroofline.store.runs import RunStore


def test_resnet34_on_h100_gets_channels_last(h100_runs_store: Path) -> None:
    run = RunStore(h100_runs_store).load("r34")
    findings = advise(run)
    rules = [f.rule.key for f in findings]
    assert "layout_conversions" in rules[:2]
    layout = findings[rules.index("layout_conversions")]
    names = [name for name, _ in layout.evidence.kernels]
    assert any("nchwToNhwcKernel" in n for n in names) and any("nhwcToNchwKernel" in n for n in names)
    # the conversions, counted here from the launches themselves: at least 10% of backward, and the win is theirs
    launches = run.launches
    conversions = launches["kernel"].astype(str).str.contains("nchwToNhwc|nhwcToNchw")
    backward = launches["phase"] == "backward"
    share = launches.loc[conversions & backward, "time_s"].sum() / launches.loc[backward, "time_s"].sum()
    assert share >= 0.10 and layout.evidence.phase_share["backward"] == pytest.approx(share)
    assert layout.win_s <= layout.evidence.time_s + 1e-12
    assert layout.evidence.time_s == pytest.approx(launches.loc[conversions, "time_s"].sum())
    assert "channels_last" in layout.code
    for finding in findings:
        assert 0 <= finding.win_s <= finding.upper_bound_s + 1e-12 <= finding.evidence.time_s + 2e-12


def test_gpt2_lm_head_fallback_with_the_dimension_to_pad(h100_runs_store: Path) -> None:
    store = RunStore(h100_runs_store)
    for name in ("gpt2-trace", "gpt2-ncu"):
        findings = {f.rule.key: f for f in advise(store.load(name))}
        fallback = findings["gemm_fallbacks"]
        assert [layer for layer, _ in fallback.evidence.layers] == ["lm_head"]
        assert all("cutlass_75" in kernel and "align1" in kernel for kernel, _ in fallback.evidence.kernels)
        assert fallback.evidence.roof_pct is not None and fallback.evidence.roof_pct < 20
        assert fallback.win_s <= fallback.upper_bound_s <= fallback.evidence.time_s
    trace = {f.rule.key: f for f in advise(store.load("gpt2-trace"))}
    assert trace["gemm_fallbacks"].detail["dimension"] == 50257 and trace["gemm_fallbacks"].detail["padded"] == 50304
    report = {f.rule.key: f for f in advise(store.load("gpt2-ncu"))}
    assert "dimension" not in report["gemm_fallbacks"].detail  # an ncu report records no shapes
    fusion = report["memory_bound_elementwise"]
    assert 0.1 < fusion.evidence.phase_share["backward"] < 0.5
    assert any("elementwise" in kernel for kernel, _ in fusion.evidence.kernels)


def test_advise_prints_evidence_change_and_win(cli, h100_runs_store: Path) -> None:
    out = cli("advise", "gpt2-trace", "--store", str(h100_runs_store)).out
    assert "dimension to pad: 50,257 (no multiple of 8 elements) -> 50,304" in out
    assert "layers: lm_head" in out and "can win:" in out and "estimate" in out
    data = json.loads(cli("advise", "r34", "--format", "json", "--store", str(h100_runs_store)).out)
    assert [f["rule"] for f in data["findings"]][:2].count("layout_conversions") == 1
    assert "hroofline advise r34" in cli("top", "r34", "--store", str(h100_runs_store)).out


def test_the_notebook_gets_the_same_advice(h100_runs_store: Path, tmp_path: Path) -> None:
    import hroofline

    table = hroofline.advise("r34", store=h100_runs_store)
    assert list(table["rule"]) == [f.rule.key for f in advise(RunStore(h100_runs_store).load("r34"))]
    assert table.equals(hroofline.load("r34", store=h100_runs_store).advise())
    page = hroofline.load("r34", store=h100_runs_store).report(tmp_path / "report")
    assert "What to change" in page.read_text() and "channels_last" in page.read_text()


def test_deepcam_fp32_gets_mixed_precision_and_compare_confirms_it(cli, deepcam_store: Path) -> None:
    store = RunStore(deepcam_store)
    findings = {f.rule.key: f for f in advise(store.load("deepcam-O0"))}
    tensor = findings["fp32_off_tensor_cores"]
    assert "mixed precision" in tensor.change and "autocast" in tensor.code  # a V100: no TF32
    assert tensor.evidence.step_share > 0.5 and {"convolution", "gemm"} <= set(tensor.detail["families"])
    (confirmed,) = [
        c
        for c in confirm_advice(store.load("deepcam-O0"), store.load("deepcam-O1"))
        if c.finding.rule.key == "fp32_off_tensor_cores"
    ]
    assert confirmed.confirmed and confirmed.detail["tensor_share"] > 0.5
    out = cli("compare", "deepcam-O0", "deepcam-O1", "--store", str(deepcam_store)).out
    assert "done: FP32 matrix products and convolutions on the FP32 units, off the tensor cores" in out
    # and the AMP run is not told to move FP32 work: its 16-bit kernels are not FP32 work
    assert "fp32_off_tensor_cores" not in {f.rule.key for f in advise(store.load("deepcam-O1"))}


def test_compare_judges_advice_only_on_the_same_model(cli, h100_runs_store: Path, deepcam_store: Path) -> None:
    """Issue 45 (10): resnet34 against GPT-2 said "done" for the NCHW -> NHWC advice (GPT-2 has no such
    conversions, so their time fell to 0). Two runs of one model share their layers (or kernel families): 2% of
    resnet34's time is on layers GPT-2 has; DeepCAM FP32 and AMP share 94% by family and are still judged."""
    from hroofline.analyze.compare import unlike_models

    store = RunStore(h100_runs_store)
    r34, gpt2 = store.load("r34"), store.load("gpt2-ncu")
    assert "of r34's time is on layers" in (unlike_models(r34, gpt2) or "")
    out = cli("compare", "r34", "gpt2-ncu", "--store", h100_runs_store).out
    assert "done:" not in out and "not seen:" not in out
    assert "advice for r34, not judged: gpt2-ncu is not the same model" in out
    assert "  not judged: NCHW to NHWC conversions around tensor-core convolutions" in out
    assert unlike_models(gpt2, store.load("gpt2-trace")) is None  # one step, traced and under ncu
    deepcam = RunStore(deepcam_store)
    assert unlike_models(deepcam.load("deepcam-O0"), deepcam.load("deepcam-O1")) is None


def test_a_prediction_is_labelled_against_the_step_it_predicts(cli, h100_runs_store: Path, tmp_path: Path) -> None:
    """Issue 45 (10): the measured H100 resnet34 step against its prediction printed "speedup 0.80x" and "largest
    regressions": the report names its GPU only by device name, so the two looked like two GPUs. Now the
    estimated-versus-measured table (its FLOPs agree within 5%: the same step), sections measured over and under
    the estimate; a prediction for another GPU is marked predicted in the heading."""
    store = tmp_path / "store"
    shutil.copytree(h100_runs_store, store)
    for gpu, run in (("h100-sxm", "p34"), ("a100", "p34-a100")):
        argv = ("predict", "--arch", "resnet34", "--gpu", gpu, "--batch-size", "32", "--run", run, "--store", store)
        assert cli(*argv).code == 0
    same = cli("compare", "r34", "p34", "--store", store)
    assert same.out.startswith("p34 (estimated) versus r34 (measured)"), same.out
    assert "speedup" not in same.out and "gains" not in same.out and "regressions" not in same.out
    assert "measured over the estimate:" in same.out and "measured - estimated" in same.out
    # a batch norm estimated at 108 us against its kernel's 13.3 us: the estimate holds the op's launch cost
    assert "each at least the host's cost of launching it" in same.out
    phases = json.loads(cli("compare", "r34", "p34", "--format", "json", "--store", store).out)["phases"]
    assert phases["total"]["measured_over_estimated_flops"] == pytest.approx(1.0, abs=0.05)
    other = cli("compare", "r34", "p34-a100", "--store", store)
    assert other.out.startswith("r34 (base) -> p34-a100 (candidate, predicted)"), other.out
    assert "gpu: h100-sxm and a100" in other.out


def test_an_adam_run_is_not_told_to_use_adamw(deepcam_store: Path) -> None:
    """DeepCAM's optimizer is Adam, per parameter: the change keeps its class (AdamW decays weights otherwise)."""
    (loops,) = [f for f in advise(RunStore(deepcam_store).load("deepcam-O0")) if f.rule.key == "optimizer_loops"]
    assert "torch.optim.Adam(" in loops.code and "fused=True" in loops.code
    assert "torch.optim.AdamW(" not in loops.code


def test_fp32_work_left_where_it_was_is_not_done(h100_runs_store: Path) -> None:
    """The H100's GEMM calibration at the base clock and without clock control: the same kernels, the FP32 SGEMM
    on the FP32 units in both (1.37e11 FLOPs a launch, none on tensor cores). Its advice was "done", 96% on
    tensor cores: the share of all the run's matrix products, the BF16, FP16, TF32 and FP64 ones on the tensor
    cores from the start. Done means the FP32 FLOPs found have left the FP32 units: 0% here."""
    store = RunStore(h100_runs_store)
    before, after = store.load("gemm-calibration-base-clock"), store.load("gemm-calibration-no-clock-control")
    (confirmation,) = [c for c in confirm_advice(before, after) if c.finding.rule.key == "fp32_off_tensor_cores"]
    sgemm = after.launches[after.launches["kernel"].str.contains("f32f32_f32f32")]
    assert (sgemm["flops_fp32"] > 0).all() and (sgemm["flops_tensor"].fillna(0) == 0).all()
    assert not confirmation.confirmed and confirmation.detail["tensor_share"] == 0.0


def test_the_fp32_win_leaves_the_memory_time(tmp_path: Path) -> None:
    """Moving a kernel's FLOPs to the tensor cores moves none of its bytes: the Titan V's hand-written convolution
    (L1-bound, 5.15 ms at its L1 roof) cannot win more than its time less its memory time at roof. The win was
    12.8 ms of its 13.0 ms (its FLOPs' time at the tensor roof alone)."""
    from hroofline.analyze.advice.base import advice_context
    from hroofline.cli.main import main
    from tests.conftest import SHARED, need

    report = need(SHARED / "fixtures" / "ncu" / "titanv_cnn_conv_fp32_fullset.ncu-rep")
    assert main(["import", str(report), "--run", "titanv", "--store", str(tmp_path)]) == 0
    run = RunStore(tmp_path).load("titanv")
    (finding,) = [f for f in advise(run) if f.rule.key == "fp32_off_tensor_cores"]
    context = advice_context(run)
    launches = context.launches
    chosen = launches[launches["kernel"].str.contains("conv_forward_kernel")]
    peaks = context.per_launch_peaks.loc[chosen.index]
    memory = (chosen["bytes_l1"] / peaks["l1"]).fillna(0.0)
    assert memory.sum() > 5e-3  # 5.15 ms at its L1 roof
    assert finding.win_s <= float((chosen["time_s"] - memory).sum()) + 1e-12
    assert finding.win_s < 0.8 * float(chosen["time_s"].sum())
