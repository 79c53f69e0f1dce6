"""`hroofline compare` on Yang et al.'s DeepCAM runs (FP32 against AMP O1), kernel families, and the
predicted-against-measured table."""

from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from hroofline.analyze.families import kernel_family


@pytest.mark.parametrize(
    ("names", "family"),
    [
        (
            [
                "volta_scudnn_128x64_relu_interior_nn_v1",
                "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_filter1x1_stg8_interior_nchw_nn_v1",
            ],
            "convolution",
        ),
        (
            [
                "void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3>(int)",
                "void cudnn::detail::implicit_convolve_sgemm<__half, __half, 512, 6, 8, 3>(int)",
            ],
            "convolution",
        ),
        (
            ["volta_sgemm_128x64_nt", "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", "sm80_xmma_gemm_f16f16_f16f32"],
            None,
        ),
        (
            [
                "void at::native::col2im_kernel<float, float>(long)",
                "void at::native::col2im_kernel<c10::Half, float>(long)",
            ],
            "col2im_kernel",
        ),
    ],
)
def test_kernel_families(names: list[str], family: str | None) -> None:
    families = {kernel_family(name) for name in names[:2]}
    assert len(families) == 1
    if family:
        assert families == {family}


def test_deepcam_amp_speedups(cli, deepcam_store: Path) -> None:
    result = cli("compare", "deepcam-O0", "deepcam-O1", "--format", "json", "--store", str(deepcam_store))
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["base"] == "deepcam-O0" and data["candidate"] == "deepcam-O1"
    phases = data["phases"]
    assert phases["forward"]["speedup"] == pytest.approx(1.64, abs=0.005)
    assert phases["backward"]["speedup"] == pytest.approx(1.75, abs=0.01)
    assert phases["optimizer"]["speedup"] == pytest.approx(1.00, abs=0.005)
    for phase in ("forward", "backward", "optimizer"):
        row = phases[phase]
        assert row["speedup"] == pytest.approx(row["base_time_s"] / row["candidate_time_s"])
    assert phases["forward"]["base_tensor_share"] == 0 and phases["forward"]["candidate_tensor_share"] > 0.8
    families = pd.DataFrame(data["families"])
    assert families["saved_s"].sum() == pytest.approx(
        phases["total"]["base_time_s"] - phases["total"]["candidate_time_s"]
    )
    biggest = families.iloc[0]
    assert biggest["family"] == "convolution" and biggest["phase"] == "backward"
    assert biggest["base_time_s"] > 0.25 and biggest["candidate_time_s"] > 0.125  # cuDNN changed algorithms
    # AMP's depthwise convolutions on cuDNN's c1_k1 kernels are matched with FP32's on PyTorch's own, not with
    # the dense convolutions
    depthwise = families[(families["family"] == "depthwise_convolution") & (families["phase"] == "backward")]
    assert len(depthwise) == 1 and depthwise["candidate_time_s"].iloc[0] > 0.025
    only_amp = families[families["status"] == "only in candidate"]
    assert "nchwtonhwckernel" in set(only_amp["family"])  # AMP's tensor cores want NHWC: layout transforms


def test_table_and_csv(cli, deepcam_store: Path) -> None:
    table = cli("compare", "deepcam-O0", "deepcam-O1", "-n", "3", "--store", str(deepcam_store))
    assert "1.64x" in table.out and "largest gains:" in table.out and "largest regressions:" in table.out
    csv = cli("compare", "deepcam-O0", "deepcam-O1", "--format", "csv", "--store", str(deepcam_store))
    frame = pd.read_csv(io.StringIO(csv.out)).set_index("phase")
    assert frame.loc["backward", "speedup"] == pytest.approx(1.754, abs=0.001)


def test_comparison_chart(cli, deepcam_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp.json"
    result = cli("compare", "deepcam-O0", "deepcam-O1", "--out", str(out), "--store", str(deepcam_store))
    assert result.code == 0 and "wrote" in result.err
    spec = json.loads(out.read_text())
    layers = spec["layer"]
    heads = next(layer for layer in layers if layer["mark"].get("shape") == "triangle-right")
    shafts = next(
        layer for layer in layers if layer["mark"]["type"] == "line" and layer["encoding"]["detail"]["field"] == "key"
    )
    rows = spec["datasets"][shafts["data"]["name"]]
    runs = {row["run"] for row in rows}
    assert runs == {"deepcam-O0", "deepcam-O1"}
    # one arrow per family that moved; a family that barely moved has its two dots and no arrow
    moved = [row for row in rows if row["moved"]]
    assert len(moved) == 2 * len(spec["datasets"][heads["data"]["name"]]) > 0
    assert "barely moved" in " ".join(spec["title"]["subtitle"])
    for key in {row["key"] for row in rows if not row["moved"]}:
        base, candidate = sorted((row for row in rows if row["key"] == key), key=lambda row: row["step"])
        assert abs(math.log10(candidate["ai"] / base["ai"])) < 0.15  # 10 px: under a sixth of a decade
        assert abs(math.log10(candidate["flop_rate"] / base["flop_rate"])) < 0.15
    png = tmp_path / "cmp.png"
    assert cli("compare", "deepcam-O0", "deepcam-O1", "--out", str(png), "--store", str(deepcam_store)).code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_predicted_against_measured(cli, tmp_path: Path, cpu_profile_args: list[str]) -> None:
    """The estimated-versus-measured table: a CPU run and its prediction (same model, same batch)."""
    store = str(tmp_path / "store")
    assert cli(*cpu_profile_args, "--run", "measured", "--store", store).code == 0
    assert (
        cli(
            "predict",
            "--arch",
            "resnet18",
            "--gpu",
            "v100",
            "--batch-size",
            "1",
            "--run",
            "predicted",
            "--store",
            store,
        ).code
        == 0
    )
    result = cli("compare", "predicted", "measured", "--format", "json", "--store", store)
    phases = json.loads(result.out)["phases"]
    # Same model, same batch, same analytic counts: the FLOPs agree; the times differ by machine.
    assert phases["forward"]["flops_ratio"] == pytest.approx(1.0, rel=1e-6)
    assert phases["backward"]["flops_ratio"] == pytest.approx(1.0, rel=1e-6)
    assert phases["forward"]["time_ratio"] > 1  # a 2-core CPU is slower than a V100's roofline


def test_compare_errors(cli, deepcam_store: Path) -> None:
    missing = cli("compare", "deepcam-O0", "nope", "--store", str(deepcam_store))
    assert missing.code == 1 and missing.err.count("\n") == 1
    bad = cli("compare", "deepcam-O0", "deepcam-O1", "--out", "x.pdf", "--store", str(deepcam_store))
    assert bad.code == 2


def test_report_with_comparison(cli, deepcam_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = cli(
        "report",
        "deepcam-O1",
        "--compare",
        "deepcam-O0",
        "deepcam-O1",
        "--out",
        str(out),
        "--store",
        str(deepcam_store),
    )
    assert result.code == 0 and "4 chart(s)" in result.err
    page = (out / "index.html").read_text()
    assert 'id="compare-1"' in page and "1.64x" in page
    # the comparison as sortable tables (numbers sort by value), not a text dump
    section = page.split('id="compare-1"', 1)[1]
    assert "<pre>" not in section and section.count('<table class="hr-table">') >= 3
    assert "<h3>largest gains</h3>" in section and re.search(r'data-value="1\.6\d*">1\.64x<', section)
    # each run's provenance one click away: its sources, checksums and the formula behind each quantity
    provenance = page.split("<details>", 1)[1].split("</details>", 1)[0]
    assert "pt-O1-Adam-fw" in provenance and "sm__inst_executed_pipe_tensor.sum" in provenance
    assert "sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second" in provenance  # how time was measured
    assert "clock control" in provenance


def test_runs_without_a_common_phase(cli, deepcam_dir: Path, deepcam_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert (
        cli(
            "import",
            str(deepcam_dir / "pt-O0-Adam-fw"),
            "--run",
            "fw",
            "--gpu",
            "v100",
            "--phase",
            "fw",
            store_dir=store,
        ).code
        == 0
    )
    assert (
        cli(
            "import",
            str(deepcam_dir / "pt-O1-Adam-bw"),
            "--run",
            "bw",
            "--gpu",
            "v100",
            "--phase",
            "bw",
            store_dir=store,
        ).code
        == 0
    )
    result = cli("compare", "fw", "bw", "--store", str(store))
    assert result.code == 1 and "no phase in common" in result.err and result.err.count("\n") == 1
    assert (
        cli(
            "import",
            str(deepcam_dir / "pt-O1-Adam-fw"),
            "--run",
            "bw",
            "--gpu",
            "v100",
            "--phase",
            "fw",
            store_dir=store,
        ).code
        == 0
    )
    shared = json.loads(cli("compare", "fw", "bw", "--format", "json", "--store", str(store)).out)
    assert set(shared["phases"]) == {"forward", "total"} and shared["phases_only_in_candidate"] == ["backward"]
    assert shared["phases"]["total"]["speedup"] == pytest.approx(shared["phases"]["forward"]["speedup"])


def test_nvtx_context_below_the_phase() -> None:
    from hroofline.analyze.compare import context_below_phase

    assert context_below_phase("train_step/forward") == ""  # the T4 trace: phase ranges only
    assert context_below_phase("step/forward/layer1/conv1") == "layer1/conv1"
    assert context_below_phase("forward/encoder/bwd") == ""  # the innermost phase name counts
    assert context_below_phase("") == "" and context_below_phase("setup/load") == ""


def test_phase_ranges_only_match_by_family_and_layer_ranges_by_layer(cli, ncu_dir: Path, tmp_path: Path) -> None:
    """The T4 trace tags phases only, so its kernels are matched by family; a run compared with itself
    has speedup 1 everywhere. Given layer ranges below the phase, the layer is part of the match."""
    store = tmp_path / "store"
    assert (
        cli(
            "import",
            str(ncu_dir / "t4_resnet18_trainstep_nvtx_details.csv"),
            "--run",
            "t4",
            "--gpu",
            "t4",
            store_dir=store,
        ).code
        == 0
    )
    data = json.loads(cli("compare", "t4", "t4", "--format", "json", "--store", str(store)).out)
    assert data["matched_on"] == "family"
    assert all(row["speedup"] == pytest.approx(1.0) for row in data["phases"].values())
    assert {row["status"] for row in data["families"]} == {"matched"}
    from dataclasses import replace

    from hroofline.analyze.compare import compare_runs
    from hroofline.store.runs import RunStore

    run = RunStore(store).load("t4")
    layered = run.launches.copy()
    layered["nvtx"] = [f"{stack}/layer{index % 3}" for index, stack in enumerate(layered["nvtx"].astype(str))]
    with_layers = replace(run, launches=layered)
    comparison = compare_runs(with_layers, with_layers)
    assert comparison.matched_on == "nvtx context and family"
    in_phases = comparison.families[comparison.families["phase"] != "other"]  # 'loss' is no phase range
    assert in_phases["family"].str.startswith(("layer0 · ", "layer1 · ", "layer2 · ")).all()


def test_fp16_counted_two_ways_is_said(cli, deepcam_store_copy: Path) -> None:
    """DeepCAM AMP (ncu counts a packed half2 instruction once) against a predicted AMP run (arithmetic)."""
    store = deepcam_store_copy
    assert (
        cli(
            "predict",
            "--arch",
            "resnet18",
            "--gpu",
            "v100",
            "--precision",
            "amp",
            "--batch-size",
            "2",
            "--run",
            "p",
            "--store",
            str(store),
        ).code
        == 0
    )
    result = cli("compare", "deepcam-O1", "p", "--store", str(store))
    assert result.code == 0 and "FP16 FLOPs are counted two ways" in result.out
    same = cli("compare", "deepcam-O0", "deepcam-O1", "--store", str(store))
    assert "counted two ways" not in same.out


def test_unrelated_runs_get_no_advice_verdict(cli, ncu_dir: Path, tmp_path: Path) -> None:
    """Issue 45 (10, 8): an A100 dropout run against an RTX 5090 GEMM said "done" for the element-wise advice (the
    GEMM run has no element-wise kernel: their time fell to 0); imported without --gpu, compare failed whole on the
    advice's missing roofs, naming --ceilings, which sets compare's chart only. Now the comparison is printed and
    the advice is listed "not judged", with why."""
    store = tmp_path / "store"
    files = (
        ("a100_dropout_fp64_nersc_metrics.csv", "a100-40gb"),
        ("rtx5090_dsocr_cutlass_bf16_gemm_metrics.csv", "rtx5090"),
    )
    for (name, gpu), run in zip(files, ("drop", "gemm"), strict=True):
        assert (
            cli("import", ncu_dir / name, "--run", run, "--phase", "forward", "--gpu", gpu, "--store", store).code == 0
        )
        assert cli("import", ncu_dir / name, "--run", f"{run}-bare", "--phase", "forward", "--store", store).code == 0
    said = cli("compare", "drop", "gemm", "--store", store)
    assert said.code == 0 and "done:" not in said.out and "not seen:" not in said.out, said.out
    assert (
        "advice for drop, not judged: gemm is not the same model (0% of drop's time is on kernel families" in said.out
    )
    assert "  not judged: element-wise, copy and normalisation kernels far below the memory roof" in said.out
    bare = cli("compare", "drop-bare", "gemm-bare", "--store", store)
    assert bare.code == 0 and "forward" in bare.out and "--ceilings" not in bare.out + bare.err, bare.err
    assert "advice for drop-bare: not judged: run 'drop-bare' has no roofs" in bare.out
    assert "hroofline import FILE --run drop-bare --replace --gpu NAME" in bare.out


def test_one_model_across_a_layout_change_is_judged(cli, tmp_path: Path) -> None:
    """The same-model check of issue 45 (10) fell back to kernel families for traces, which share only 38% across
    NCHW -> channels_last (a layout change replaces most kernels), so compare stopped confirming the very advice it
    gives. Traces are matched by the ops that launch their kernels: the H100 resnet50 AMP steps (tests/data/
    gpu-2026-11-27) are one model, and the NCHW conversions are done."""
    store = tmp_path / "store"
    data = Path(__file__).parent / "data" / "gpu-2026-11-27"
    for layout in ("nchw", "channels_last"):
        trace = data / f"h100-resnet50-amp-b32-{layout}-trace.json.xz"
        assert cli("import", trace, "--run", layout, "--gpu", "h100-sxm", "--store", store).code == 0
    said = cli("compare", "nchw", "channels_last", "--store", store)
    assert said.code == 0 and "not judged" not in said.out, said.out
    assert re.search(r"done: NCHW to NHWC conversions around tensor-core convolutions: \S+ ms -> 0 s", said.out)
