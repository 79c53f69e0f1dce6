"""MFU, HFU and MBU (hroofline/analyze/utilization.py) on real H100 data (../shared/fixtures/h100, recorded by
hroofline on an H100 SXM; see its README): cuBLAS GEMMs at their share of the dense roof, and a GPT-2 step's MFU
from hroofline's model FLOPs against the formula training logs use (nanoGPT's estimate_mfu, PaLM appendix B).

Expected values are computed here from first principles: the dense rates NVIDIA's H100 whitepaper gives per SM per
clock (4,096 BF16/FP16, 2,048 TF32, 256 FP64 tensor FLOP), 132 SMs, each launch's measured clock, and GPT-2's
configuration (Hugging Face's gpt2: 12 layers, d_model 768, 50,257 words, 1,024 positions).
"""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from hroofline.analyze.utilization import FLOP_ROOFS, MODEL, run_utilization
from hroofline.model.quantities import FLOP_QUANTITIES
from hroofline.model.run import PEAK_COLUMNS, Run
from hroofline.store.runs import RunStore

H100_SMS = 132
DENSE_PER_SM_CYCLE = {"flops_tensor_bf16": 4096, "flops_tensor_fp16": 4096, "flops_tensor_tf32": 2048}
TENSOR_BOUNDS = {"BF16 tensor", "FP16 tensor", "TF32 tensor"}
CALIBRATIONS = ("gemm-calibration-base-clock", "gemm-calibration-no-clock-control")


@pytest.mark.parametrize("report", CALIBRATIONS)
def test_each_cublas_gemm_is_at_its_share_of_the_dense_roof(cli, h100_runs_store: Path, report: str) -> None:
    result = cli("top", report, "-n", "20", "--format", "csv", "--store", str(h100_runs_store))
    assert result.code == 0, result.err
    top = pd.read_csv(io.StringIO(result.out))
    launches = RunStore(h100_runs_store).load(report).launches
    for row in top[top["bound"].isin(TENSOR_BOUNDS)].to_dict(orient="records"):
        mine = launches[launches["kernel"] == row["kernel"]]
        # by hand: each launch's tensor FLOPs over the dense roof at the clock it ran at, summed as time, over time
        at_roof = sum(mine[c] / (rate * H100_SMS * mine["clock_hz"]) for c, rate in DENSE_PER_SM_CYCLE.items()).sum()
        share = 100 * at_roof / mine["time_s"].sum()
        # ncu counted the hardware's FLOPs: that is HFU; the small FP32 epilogue work adds < 0.1 point
        assert row["hfu_pct"] == pytest.approx(share, abs=0.1), row["kernel"]
        assert row["hfu_pct"] == pytest.approx(row["roof_pct"], abs=0.1)  # compute-bound: its % of roof
        assert pd.isna(row["mfu_pct"])  # no model FLOPs in an ncu report: not guessed from the counters
        if row["bound"] == "BF16 tensor":
            assert 90 <= row["hfu_pct"] <= 97
            # model FLOPs, 2 M N K of its 8192³ GEMMs: the 320-wide tiles padded 8192 to 8320 for the hardware
            model = 100 * (2 * 8192**3 * len(mine)) / (mine["time_s"] * 4096 * H100_SMS * mine["clock_hz"]).sum()
            assert 1.01 < row["hfu_pct"] / model < 1.02
    assert len(top[top["bound"].isin(TENSOR_BOUNDS)]) == 3


def test_the_denominator_is_printed_once_with_its_clock(cli, h100_runs_store: Path) -> None:
    result = cli("top", CALIBRATIONS[0], "-n", "3", "--store", str(h100_runs_store))
    assert result.code == 0, result.err
    line = next(line for line in result.out.splitlines() if "BF16 tensor dense" in line)
    # 4,096 x 132 x 1.43 GHz = 773 TFLOP/s: the README's BF16 GEMM ran at 1.43 GHz under --clock-control base
    assert line.strip() == (
        "773 TFLOP/s BF16 tensor dense: 4,096 FLOP/SM/cycle × 132 SMs × 1.43 GHz, the clock the kernels ran at"
    )
    assert result.out.count("BF16 tensor dense") == 1 and result.out.startswith("roofs:")
    assert "HFU: hardware FLOPs" in result.out and "MBU: HBM bytes over the time at 3.35 TB/s" in result.out


def gpt2_nanogpt_params() -> int:
    """GPT-2 (124 M) parameters as nanoGPT's get_num_params counts them: every parameter but the position
    embeddings (the word embeddings count once: the LM head shares them)."""
    layers, d, vocab = 12, 768, 50257
    per_layer = (2 * d) + (d * 3 * d + 3 * d) + (d * d + d) + (2 * d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
    return vocab * d + layers * per_layer + 2 * d  # wte, the blocks (ln_1, attn, proj, ln_2, mlp), ln_f


def test_gpt2_step_mfu_two_ways(cli, h100_runs_store: Path) -> None:
    run = RunStore(h100_runs_store).load("gpt2")
    utilization = run_utilization(run)
    total = utilization.total
    assert total is not None and total.mfu is not None and total.hfu is None  # a trace: model FLOPs only
    # 6 N per token (forward 2 N, backward 4 N) + attention 12 x layers x seq x d_model (nanoGPT, PaLM), per token
    n = gpt2_nanogpt_params()
    assert n == 124_439_808 - 1024 * 768  # Hugging Face's gpt2 has 124,439,808 parameters, wpe 1024 x 768 of them
    tokens, layers, seq, d_model = 8 * 512, 12, 512, 768
    formula_flops = (6 * n + 12 * layers * seq * d_model) * tokens
    bf16_peak = 4096 * H100_SMS * 1.83e9  # the datasheet's clock: a trace measures none
    formula_mfu = formula_flops / (total.time_s * bf16_peak)
    assert total.mfu == pytest.approx(formula_mfu, rel=0.10)
    assert 0.05 < total.mfu < 0.15  # 9.7%: the LM head's align1 GEMMs and attention's small batches
    result = cli("summary", "gpt2", "--store", str(h100_runs_store))
    assert result.code == 0, result.err
    assert (
        "989 TFLOP/s BF16 tensor dense: 4,096 FLOP/SM/cycle × 132 SMs × 1.83 GHz, the datasheet's clock" in result.out
    )
    assert result.out.count("BF16 tensor dense") == 1
    table = next(line for line in result.out.splitlines() if line.startswith("phase"))
    assert "mfu_pct" in table and "mbu_pct" in table and "hfu_pct" not in table


def test_gpt2_hardware_flops_exceed_the_models(h100_runs_store: Path) -> None:
    """The same step under ncu: the kernels' counted FLOPs (HFU) against the trace's model FLOPs (MFU)."""
    store = RunStore(h100_runs_store)
    model = run_utilization(store.load("gpt2")).total
    hardware = run_utilization(store.load("gpt2-ncu")).total
    assert model is not None and hardware is not None and hardware.mfu is None and hardware.hfu is not None
    assert model.model_flops is not None and hardware.hardware_flops is not None
    assert 1.0 < hardware.hardware_flops / model.model_flops < 1.05  # 3.25 vs 3.18 TFLOP: padding, masked work


def test_a_run_without_gpu_or_peaks_says_why_it_has_no_mfu(h100_runs_store: Path) -> None:
    run = RunStore(h100_runs_store).load(CALIBRATIONS[0])
    bare = Run(replace(run.meta, gpu=None, device_name=None, cc=None), run.launches.drop(columns=list(PEAK_COLUMNS)))
    bare.launches[list(PEAK_COLUMNS)] = float("nan")
    utilization = run_utilization(bare)
    assert not utilization.groups and not utilization.peaks
    (reason,) = utilization.reasons
    assert reason.startswith("no MFU or MBU:") and "does not say which GPU it ran on" in reason


def test_every_flop_column_has_its_dense_roof() -> None:
    """New precisions plug in by their column: each FLOP quantity is priced, sparse work at the dense peak."""
    assert set(FLOP_ROOFS) == set(FLOP_QUANTITIES)
    assert FLOP_ROOFS["flops_tensor_bf16_sparse"] == "tensor_bf16" and FLOP_ROOFS["flops_tensor_fp8"] == "tensor_fp8"
    assert all(not key.endswith("_sparse") for key in FLOP_ROOFS.values())
    assert MODEL == "model"


def test_the_notebook_face_has_mfu_per_phase_kernel_and_layer(h100_runs_store: Path) -> None:
    from hroofline.api.face import RunView

    run = RunView.of(RunStore(h100_runs_store).load("gpt2"))
    total = run_utilization(run).total
    assert total is not None and run.mfu == total.mfu
    summary = run.summary()
    assert summary.loc["total", "mfu_pct"] == pytest.approx(100 * run.mfu)
    assert pd.isna(summary.loc["optimizer", "mfu_pct"])  # fused optimizer kernels: no known FLOPs
    top = run.top(n=3)
    gemm = top.iloc[0]  # the LM head's align1 GEMM: one precision, compute-bound, so MFU is its % of roof
    assert gemm["mfu_pct"] == pytest.approx(gemm["roof_pct"], abs=0.1) and pd.isna(gemm["hfu_pct"])
    layers = run.kernels(group_by="layer", phase="forward")
    assert layers["mfu_pct"].notna().any() and layers["mbu_pct"].notna().any()
    # a layer's MFU is its FLOPs at the BF16/FP32/FP16 peaks over its time: never above 100%
    assert layers["mfu_pct"].dropna().le(100).all()


def test_a_tiny_utilization_is_not_printed_as_none() -> None:
    from hroofline.render.text import cell_text

    # a small predicted CNN's MFU is 0.0007%: "0.0%" would read as no work at all
    assert cell_text(0.0007, "mfu_pct") == "< 0.05%" and cell_text(0.0, "mfu_pct") == "0.0%"
    assert cell_text(0.3, "hfu_pct") == "0.3%" and cell_text(0.0007, "roof_pct") == "0.0%"


def test_a_predictions_time_says_it_is_an_estimate(cli, tmp_path: Path) -> None:
    """A predicted run's times are the estimate (host floor included: resnet18's 32-image step comes to more
    than its roofline bound); its summary said they were the kernels' summed GPU time."""
    store = tmp_path / "store"
    assert cli("predict", "--arch", "resnet18", "--gpu", "h100-sxm", "--run", "p", "--store", store).code == 0
    summary = cli("summary", "p", "--store", store).out
    assert "the ops' estimated times" in summary and "summed GPU time" not in summary
