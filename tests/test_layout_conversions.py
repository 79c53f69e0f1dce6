"""cuDNN's NCHW <-> NHWC conversions around tensor-core convolutions: what the traced step counts, checked on
torch.profiler traces of NCHW and channels_last steps on an H200 (tests/data/gpu-2026-11-27/h200-layouts), the
cost metrics/layout_conversions.toml gives them, and predict's --channels-last."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from hroofline.analyze.advice.layout_conversions import conversion_kernels
from hroofline.analyze.layout import load_layout_cost, with_layout_conversions
from hroofline.analyze.predict import predict_times, prediction_peaks, to_tensor_cores
from hroofline.collect.meta_trace import trace_step
from hroofline.collect.workload import WorkloadConfig
from hroofline.importers.kineto import input_dims
from hroofline.roofs.catalog import resolve_gpu
from hroofline.work.op_names import LAYOUT_CONVERSION_KERNELS
from hroofline.work.ops import nchw_conversions
from tests.conftest import REPO, linked_kernels

LAYOUTS = REPO / "tests" / "data" / "gpu-2026-11-27" / "h200-layouts"
TRACE_NAME = re.compile(
    r"(?P<model>.+)-(?P<precision>amp|fp32)-b(?P<batch>\d+)-(?P<phases>train|forward)-(?P<layout>nchw|channels_last)"
)
CONVERSION_KERNELS = ("nchwToNhwc", "nhwcToNchw")
# Models whose larger-than-1x1 convolutions are patchify or stem ones (ConvNeXt's 4x4 and 2x2 of stride 4 and 2,
# EfficientNet's stem) and whose conversions are mostly around 1x1 and depthwise ones: the count misses them.
MOSTLY_UNCOUNTED = ("convnext_tiny", "efficientnet_b0")


@dataclass(frozen=True)
class LayoutTrace:
    name: str
    config: WorkloadConfig
    phases: str
    conversion_s: float  # every conversion kernel's time
    conversion_kernels: int
    spatial_conversion_kernels: int  # those launched by convolutions larger than 1x1 that are not depthwise


def _traces() -> list[Path]:
    return sorted(LAYOUTS.glob("*-trace.json.xz"))


@cache
def read_trace(path: Path) -> LayoutTrace:
    found = TRACE_NAME.fullmatch(path.name.removesuffix("-trace.json.xz"))
    assert found, path.name
    convolution_ops = ("aten::cudnn_convolution", "aten::convolution_backward")
    _, kernels = linked_kernels(path)
    total, count, spatial = 0.0, 0, 0
    for kernel in kernels:
        if not any(k in kernel.name for k in CONVERSION_KERNELS):
            continue
        total += kernel.seconds
        count += 1
        parent = next(op for op in kernel.ops if op.name in convolution_ops)
        weight = (input_dims(parent.args) or [])[1 if parent.name == "aten::cudnn_convolution" else 2]
        spatial += weight[2] * weight[3] > 1 and weight[1] > 1
    config = WorkloadConfig(
        found["model"],
        int(found["batch"]),
        found["precision"],
        "sgd",
        "meta",
        channels_last=found["layout"] == "channels_last",
    )
    return LayoutTrace(path.name, config, found["phases"], total, count, spatial)


@cache
def predicted_conversions(config: WorkloadConfig, phases: str, gpu: str = "h200") -> pd.DataFrame:
    peaks = prediction_peaks(resolve_gpu(gpu), config.precision)
    converted = with_layout_conversions(to_tensor_cores(trace_step(config, phases), peaks), peaks).launches
    ops = predict_times(converted, peaks)
    return ops[ops["kernel"].str.contains("nchwToNhwc/nhwcToNchw")]


def estimated_conversion_s(trace: LayoutTrace, gpu: str = "h200") -> float:
    """The conversion time metrics/layout_conversions.toml gives a traced step's counted conversions on ``gpu``."""
    predicted = predicted_conversions(trace.config, trace.phases, gpu)
    bits = np.full(len(predicted), 16 if trace.config.precision == "amp" else 32)
    rows = load_layout_cost().row_times(predicted["time_bound_s"].to_numpy(), bits, predicted["launches"].to_numpy())
    return float(rows.sum())


def nchw_traces() -> Iterator[LayoutTrace]:
    for path in _traces():
        trace = read_trace(path)
        if not trace.config.channels_last:
            yield trace


def test_the_folder_holds_both_layouts_of_every_step() -> None:
    names = [p.name for p in _traces()]
    assert len(names) == 26
    assert sorted(n.replace("channels_last", "nchw") for n in names) == sorted(n for n in names + names if "nchw" in n)


# A few of the H200's steps, each way the checks below go: a ResNet (counted exactly), RegNet (its grouped
# convolutions over-counted), ConvNeXt (its conversions mostly around convolutions the count leaves out), and a
# forward pass in float32. tests/figures/test_layout_conversions.py checks all 13 (make check-figures).
FEW_STEPS = (
    "resnet18-amp-b32-train",
    "regnet_y_1_6gf-amp-b32-train",
    "convnext_tiny-amp-b32-train",
    "resnet50-fp32-b64-forward",
)


def few_traces(layout: str) -> list[Path]:
    return [LAYOUTS / f"{step}-{layout}-trace.json.xz" for step in FEW_STEPS]


def test_channels_last_steps_launch_almost_no_conversion() -> None:
    assert_channels_last_launches_almost_no_conversion(few_traces("channels_last"))


def assert_channels_last_launches_almost_no_conversion(paths: list[Path]) -> None:
    """What --channels-last promises, on the GPU: in NHWC no convolution larger than 1x1 converts, and of the
    NCHW step's conversion time at most 15% is left (EfficientNet's depthwise and 1x1 ones), for most steps none."""
    for path in paths:
        trace = read_trace(path)
        assert trace.config.channels_last, path.name
        nchw = read_trace(path.with_name(path.name.replace("channels_last", "nchw")))
        assert trace.spatial_conversion_kernels == 0, trace.name
        assert trace.conversion_s <= 0.15 * nchw.conversion_s, trace.name
        assert predicted_conversions(trace.config, trace.phases).empty


@pytest.mark.parametrize("path", few_traces("nchw"), ids=lambda p: p.name[:-14])
def test_counted_conversions_match_the_kernels_cuDNN_launched(path: Path) -> None:
    assert_counted_conversions_match(path)


def assert_counted_conversions_match(path: Path) -> None:
    """Around the convolutions larger than 1x1 (not depthwise), the count of conversion kernels is what ran:
    within 7% for ResNets, DenseNet and VGG (exact for most), 32% over for RegNet's grouped convolutions."""
    trace = read_trace(path)
    predicted = predicted_conversions(trace.config, trace.phases)
    kernels = int(predicted["launches"].sum())
    if trace.config.arch in MOSTLY_UNCOUNTED:
        assert kernels <= 6 and trace.conversion_kernels >= 3
        return
    if trace.config.arch.startswith("regnet"):
        assert trace.spatial_conversion_kernels < kernels <= 1.35 * trace.spatial_conversion_kernels
    else:
        assert kernels == pytest.approx(trace.spatial_conversion_kernels, rel=0.07)
    assert kernels <= 1.07 * trace.conversion_kernels  # the 1x1 convolutions that convert are not counted


def layout_cost_fit() -> tuple[float, float, float]:
    """The conversions' cost from the H200 traces: the time per kernel and the share of the datasheet HBM
    bandwidth (16-bit, 32-bit) that make time = kernels x t + bytes / (bandwidth x share) fit each NCHW step's
    measured conversion time with the least squared relative error (the 11 steps of models whose conversions
    the count covers)."""
    hbm = resolve_gpu("h200").peaks["hbm"]
    rows, measured = [], []
    for trace in nchw_traces():
        if trace.config.arch in MOSTLY_UNCOUNTED:
            continue  # their conversions are mostly around convolutions the count leaves out
        predicted = predicted_conversions(trace.config, trace.phases)
        moved = float(predicted["bytes_hbm"].sum()) / hbm
        sixteen = trace.config.precision == "amp"
        rows.append([float(predicted["launches"].sum()), moved * sixteen, moved * (not sixteen)])
        measured.append(trace.conversion_s)
    terms = np.array(rows) / np.array(measured)[:, None]
    kernel_s, per_16, per_32 = np.linalg.lstsq(terms, np.ones(len(measured)), rcond=None)[0]
    return float(kernel_s), 1 / float(per_16), 1 / float(per_32)


def test_a_spatial_convolution_converts_input_weight_and_output_and_its_gradients() -> None:
    images = torch.empty(2, 8, 10, 10, device="meta")
    weight = torch.empty(16, 8, 3, 3, device="meta")
    out = torch.empty(2, 16, 8, 8, device="meta")
    forward_args = (images, weight, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    forward = nchw_conversions(torch.ops.aten.convolution.default, forward_args, out)
    assert forward.kernels == 3
    assert forward.bytes == 2 * 4 * (images.numel() + weight.numel() + out.numel())
    backward_args = (out, images, weight, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False])
    backward = nchw_conversions(torch.ops.aten.convolution_backward.default, backward_args, None)
    assert backward.kernels == 6  # input gradient: dy, w, dx; weight gradient: dy again, x, dw
    assert backward.bytes == 2 * 4 * (2 * out.numel() + 2 * images.numel() + 2 * weight.numel())
    weight_only = (*backward_args[:10], [False, True, False])
    assert nchw_conversions(torch.ops.aten.convolution_backward.default, weight_only, None).kernels == 3


@pytest.mark.parametrize(
    "images, weight",
    [
        ((2, 8, 10, 10), (16, 8, 1, 1)),  # 1x1: cuDNN runs most on NCHW
        ((2, 8, 10, 10), (8, 1, 3, 3)),  # depthwise
        ((2, 8, 10), (16, 8, 3)),  # 1-D
    ],
)
def test_no_conversion_is_counted_for_other_convolutions(images: tuple[int, ...], weight: tuple[int, ...]) -> None:
    x, w = torch.empty(images, device="meta"), torch.empty(weight, device="meta")
    args = (x, w, None, [1], [0], [1], False, [0], 1)
    assert nchw_conversions(torch.ops.aten.convolution.default, args, x).kernels == 0


def test_channels_last_tensors_need_no_conversion() -> None:
    x = torch.empty(2, 8, 10, 10, device="meta").contiguous(memory_format=torch.channels_last)
    w = torch.empty(16, 8, 3, 3, device="meta").contiguous(memory_format=torch.channels_last)
    args = (x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert nchw_conversions(torch.ops.aten.convolution.default, args, x).kernels == 0


def test_the_predicted_rows_are_what_advice_finds_in_a_measured_run() -> None:
    """A predicted conversion row carries the name advice and calibrate --run match in measured runs (by
    metrics/advice.toml's patterns), so both read one as a conversion; a convolution that converts inside its
    own kernel is none."""
    predicted = pd.Series(list(LAYOUT_CONVERSION_KERNELS.values()))
    assert conversion_kernels(predicted).all()
    inside = "volta_fp16_s884cudnn_fp16_128x128_ldg8_dgrad_f2f_exp_small_nhwc2nchw_tt_v1"
    assert not conversion_kernels(pd.Series([inside])).any()


def test_conversions_are_predicted_only_where_traces_showed_them() -> None:
    config = WorkloadConfig("resnet18", 8, "amp", "sgd", "meta")
    assert not predicted_conversions(config, "train", "h100-sxm").empty
    assert not predicted_conversions(config, "train", "a100-80gb").empty
    assert predicted_conversions(config, "train", "rtx4090").empty  # no trace of one
    strict = WorkloadConfig("resnet18", 8, "fp32-strict", "sgd", "meta")
    assert predicted_conversions(strict, "train", "h100-sxm").empty  # no tensor cores, no NHWC kernels


def test_predict_says_what_the_conversions_cost_and_channels_last_drops_them(cli, tmp_path: Path) -> None:
    import hroofline
    from hroofline.store.runs import RunStore

    store = tmp_path / "store"
    args = ("predict", "--arch", "resnet50", "--gpu", "h100", "--precision", "amp", "--store", store)
    nchw, nhwc = cli(*args), cli(*args, "--channels-last")
    assert nchw.code == 0 and nhwc.code == 0, nchw.err + nhwc.err
    assert nchw.out.startswith("resnet50-amp-h100-sxm-predicted: ")
    assert nhwc.out.startswith("resnet50-amp-h100-sxm-channels-last-predicted: ")
    assert "layout: NCHW: cuDNN converts the tensors of 34 convolution ops to NHWC and back, 150 kernels" in nchw.out
    assert "--channels-last removes them" in nchw.out
    assert "layout: channels_last (NHWC): cuDNN's tensor-core convolutions need no layout conversion" in nhwc.out
    runs = RunStore(store)
    with_conversions = runs.load("resnet50-amp-h100-sxm-predicted").launches
    without = runs.load("resnet50-amp-h100-sxm-channels-last-predicted").launches
    rows = with_conversions["kernel"].str.contains("nchwToNhwc/nhwcToNchw")
    assert rows.sum() == 34 and with_conversions.loc[rows, "launches"].sum() == 150
    assert not without["kernel"].str.contains("nchwToNhwc").any()
    # The same ops otherwise, but for two small ones of channels_last's own (the pooled gradient restrided in the
    # backward pass, new_zeros and copy_, as a GPU's trace shows them). The steps differ by the conversions, those
    # two, and in the estimate by NCHW batch norm's time per channel (a thread block per channel).
    key = ["kernel", "phase", "shapes"]
    extra = without.merge(with_conversions[key].drop_duplicates(), on=key, how="left", indicator=True)
    extra = extra[extra["_merge"] == "left_only"]
    assert sorted(extra["kernel"]) == ["aten::copy_", "aten::new_zeros"] and set(extra["phase"]) == {"backward"}
    norms = with_conversions["kernel"].str.contains("batch_norm"), without["kernel"].str.contains("batch_norm")
    held = with_conversions.loc[norms[0], "time_s"].to_numpy() - without.loc[norms[1], "time_s"].to_numpy()
    assert len(held) == 106 and (held >= 0).all() and (held > 0).sum() >= 10
    for column, norms_differ in (("time_bound_s", 0.0), ("time_s", held.sum())):
        difference = with_conversions[column].sum() - without[column].sum()
        expected = with_conversions.loc[rows, column].sum() - extra[column].sum() + norms_differ
        assert difference == pytest.approx(expected, rel=1e-9)
    assert runs.load("resnet50-amp-h100-sxm-predicted").meta.sources[0].settings["layout"] == "NCHW"
    name = "resnet50-amp-h100-sxm-channels-last-predicted"
    api = hroofline.predict("resnet50", gpu="h100", precision="amp", channels_last=True, run=name, store=tmp_path / "a")
    assert api.describe() == nhwc.out


def test_channels_last_is_refused_for_token_ids(cli, tmp_path: Path) -> None:
    args = ("--arch", "resnet18", "--gpu", "h100", "--seq-len", "16", "--channels-last", "--store", tmp_path)
    result = cli("predict", *args)
    assert result.code == 2 and result.out == ""
    assert result.err.count("\n") == 1 and "--channels-last is for images" in result.err


def test_the_profiled_workload_runs_in_channels_last() -> None:
    from hroofline.collect.ncu_command import NcuSettings, workload_command
    from hroofline.collect.workload import TrainingStep

    config = WorkloadConfig("resnet18", 2, "fp32", "sgd", "cpu", channels_last=True)
    assert "--channels-last" in workload_command(config, NcuSettings(warmup=1, steps=1))
    assert "--channels-last" not in workload_command(WorkloadConfig("resnet18", 2), NcuSettings(warmup=1, steps=1))
    step = TrainingStep(config)
    assert step.images.is_contiguous(memory_format=torch.channels_last) and not step.images.is_contiguous()
    assert step.model.conv1.weight.is_contiguous(memory_format=torch.channels_last)


def test_mixed_ambiguous_and_transposed_convolutions() -> None:
    """A weight in channels_last makes cuDNN's convolution NHWC even on an NCHW input; a 1x1 image is laid out
    both ways (PyTorch's contiguous NCHW); a transposed convolution is not counted."""
    conv = torch.ops.aten.convolution.default
    nchw = torch.empty(2, 8, 10, 10, device="meta")
    weight = torch.empty(16, 8, 3, 3, device="meta")
    nhwc_weight = weight.contiguous(memory_format=torch.channels_last)
    args = (nchw, nhwc_weight, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert nchw_conversions(conv, args, nchw).kernels == 0
    one_pixel = torch.empty(2, 8, 1, 1, device="meta")  # contiguous in both layouts
    assert nchw_conversions(conv, (one_pixel, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), nchw).kernels
    transposed = (nchw, torch.empty(8, 16, 3, 3, device="meta"), None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1)
    assert nchw_conversions(conv, transposed, nchw).kernels == 0


def test_channels_last_is_refused_for_what_is_no_image(cli, tmp_path: Path) -> None:
    # a torchvision model refuses a shape other than C,H,W itself; a factory's model may take any
    for args in (("--model", "hf:gpt2"), ("--model", "torchvision.models:resnet18", "--input-shape", "3,32")):
        result = cli("predict", *args, "--gpu", "h100", "--channels-last", "--store", tmp_path)
        assert result.code == 2 and result.out == "" and result.err.count("\n") == 1, result.err
        assert "--channels-last is for images" in result.err and "tracing" not in result.err


def test_conversions_the_host_hides_are_said_so(cli, tmp_path: Path) -> None:
    """At batch 1 each convolution and its conversions take less than the host's floor: they add nothing."""
    args = ("--arch", "resnet18", "--gpu", "h100", "--batch-size", "1", "--phases", "forward", "--precision", "amp")
    result = cli("predict", *args, "--store", tmp_path)
    assert result.code == 0, result.err
    line = next(line for line in result.out.splitlines() if line.startswith("layout: NCHW"))
    assert "17 convolution ops" in line and "51 kernels" in line
    assert "the host's time per op hides them in the inference's estimate of" in line
