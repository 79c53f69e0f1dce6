"""cuDNN's layout conversions on every traced step of the GPU visits, and layout steps no trace saw: the count of
conversions against the kernels cuDNN launched on all 13 H200 steps, the measured cost (metrics/layout_conversions.toml)
as the fit to them, the same steps traced again on another H200 and on an H100, and the estimate's error on the 20 H200
steps at batch 128 of five models in NCHW and channels_last with predict's channels_last gain (the validation page's
figures, docs/validation.md). tests/test_layout_conversions.py checks the conversions on four of the steps in make
test."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from hroofline.analyze.batch_norm import NO_CHANNEL_LIMIT
from hroofline.analyze.calibrate import estimated_step
from hroofline.analyze.estimate import EstimateModel, load_estimate_model
from hroofline.analyze.layout import load_layout_cost
from hroofline.roofs.catalog import resolve_gpu
from hroofline.roofs.ceilings import load_ceilings_file
from hroofline.work.ops import nchw_conversions
from tests.conftest import estimate_error_bench, linked_kernels
from tests.test_layout_conversions import (
    LAYOUTS,
    MOSTLY_UNCOUNTED,
    _traces,
    assert_channels_last_launches_almost_no_conversion,
    assert_counted_conversions_match,
    estimated_conversion_s,
    layout_cost_fit,
    nchw_traces,
    read_trace,
)
from tests.validation_page import assert_page_shows, page_figures


@pytest.mark.parametrize("path", [p for p in _traces() if "-nchw-" in p.name], ids=lambda p: p.name[:-14])
def test_counted_conversions_match_the_kernels_cuDNN_launched(path: Path) -> None:
    assert_counted_conversions_match(path)


def test_channels_last_steps_launch_almost_no_conversion() -> None:
    assert_channels_last_launches_almost_no_conversion([p for p in _traces() if "-channels_last-" in p.name])


def test_the_measured_cost_is_the_fit_to_the_traces() -> None:
    kernel_s, share_16, share_32 = layout_cost_fit()
    cost = load_layout_cost()
    assert cost.kernel_s == pytest.approx(kernel_s, abs=0.05e-6)
    assert cost.efficiency == {16: pytest.approx(share_16, abs=0.005), 32: pytest.approx(share_32, abs=0.005)}
    assert cost.compute_capabilities == {"8.0", "9.0"}


def test_the_estimated_conversion_time_is_near_what_the_h200_measured() -> None:
    """Per NCHW step of ordinary convolutions, estimated against measured conversion time: within x1.5 (0.67 for
    ResNet-50, whose 1x1 convolutions convert too, to 1.29 for DenseNet)."""
    for trace in nchw_traces():
        if trace.config.arch in MOSTLY_UNCOUNTED:
            continue
        assert 1 / 1.5 < estimated_conversion_s(trace) / trace.conversion_s < 1.5, trace.name


def test_another_h200_launched_the_same_conversions() -> None:
    """The 11 NCHW training steps traced again on another H200 (the fifth visit, h200-fifth/): the same conversion
    kernels, in number and kind, taking within 2% of the time the fit above was made on."""
    again = sorted((LAYOUTS.parent / "h200-fifth").glob("*-nchw-trace.json.xz"))
    assert len(again) == 11
    for path in again:
        first, second = read_trace(LAYOUTS / path.name), read_trace(path)
        assert second.conversion_kernels == first.conversion_kernels, path.name
        assert second.spatial_conversion_kernels == first.spatial_conversion_kernels, path.name
        assert second.conversion_s == pytest.approx(first.conversion_s, rel=0.02), path.name


def h100_against_h200() -> tuple[dict[bool, list[float]], dict[str, list[float]]]:
    """The same 11 steps on an H100 (the sixth visit, h100-sixth/) as on the H200: the same conversion kernels, in
    number and kind; their H100 time over their H200 time, by float16 or not; and the estimate over the measured
    conversion time on each GPU, for the models whose conversions the count covers."""
    on_h100 = sorted((LAYOUTS.parent / "h100-sixth").glob("*-nchw-trace.json.xz"))
    assert len(on_h100) == 11
    slower: dict[bool, list[float]] = {True: [], False: []}  # by float16 or not
    estimated: dict[str, list[float]] = {"h100-sxm": [], "h200": []}
    for path in on_h100:
        h200, h100 = read_trace(LAYOUTS / path.name), read_trace(path)
        assert (h100.conversion_kernels, h100.spatial_conversion_kernels) == (
            h200.conversion_kernels,
            h200.spatial_conversion_kernels,
        ), path.name
        slower[h100.config.precision == "amp"].append(h100.conversion_s / h200.conversion_s)
        if h100.config.arch in MOSTLY_UNCOUNTED:
            continue
        for gpu, trace in (("h100-sxm", h100), ("h200", h200)):
            estimated[gpu].append(estimated_conversion_s(trace, gpu) / trace.conversion_s)
    return slower, estimated


def channels_last_gains(model: EstimateModel) -> tuple[pd.Series, pd.Series]:
    """The 20 steps at batch 128 of five models no trace saw (H200, NCHW and channels_last): predict's gain of
    channels_last under ``model``, and the measured one, per model and precision."""
    rows = pd.read_csv(LAYOUTS / "held-out-steps.csv")
    assert len(rows) == 20
    rows["estimate_s"] = [estimated_step(sample, model) for sample in estimate_error_bench().samples(rows)]
    by_layout = rows.pivot_table(index=["model", "precision"], columns="layout", values=["measured_s", "estimate_s"])
    measured = by_layout["measured_s"]["NCHW"] / by_layout["measured_s"]["channels_last"]
    predicted = by_layout["estimate_s"]["NCHW"] / by_layout["estimate_s"]["channels_last"]
    return predicted, measured


def test_held_out_layout_steps_and_what_channels_last_wins() -> None:
    """With NCHW batch norm's time per channel, predict's channels_last gain on the H200 is within x1.29 of the
    measured one on each of the 20 steps no trace saw."""
    predicted, measured = channels_last_gains(load_estimate_model().for_cc("9.0"))
    assert (predicted > 1).all() and (np.maximum(predicted / measured, measured / predicted) < 1.29).all()


def test_the_page_shows_the_layout_conversions_figures() -> None:
    """The validation page's paragraph on NCHW and --channels-last (docs/validation.md, key layout-conversions),
    figure by figure: the traces' conversions, the fitted cost, the channels_last gains and the H100 against the
    H200."""
    traces = list(nchw_traces())
    kernel_ms = [sum(k.seconds for k in linked_kernels(LAYOUTS / t.name)[1]) * 1e3 for t in traces]
    cost = load_layout_cost()
    fitted = [t for t in traces if t.config.arch not in MOSTLY_UNCOUNTED]
    on_h200 = load_estimate_model().for_cc("9.0")
    (predicted, measured), (alone, _) = (
        channels_last_gains(model) for model in (on_h200, replace(on_h200, channel_rate=NO_CHANNEL_LIMIT))
    )
    slower, estimated = h100_against_h200()
    h100_share = resolve_gpu("h100-sxm").peaks["hbm"] / resolve_gpu("h200").peaks["hbm"]
    h200_hbm = resolve_gpu("h200").peaks["hbm"]
    sustained = load_ceilings_file(LAYOUTS.parent / "h100-ceilings-measured.toml").peaks["hbm"]
    ratios = estimated["h100-sxm"] + estimated["h200"]
    computed = [
        len(traces),
        *spatial_convolution_kernels(),
        max(t.conversion_s for t in traces) * 1e3,
        min(kernel_ms),
        max(kernel_ms),
        *sorted(float(cc) for cc in cost.compute_capabilities),
        cost.kernel_s * 1e6,
        cost.efficiency[16],
        16,
        cost.efficiency[32],
        32,
        len(fitted),
        2 * len(predicted),
        predicted.min(),
        predicted.max(),
        measured.min(),
        measured.max(),
        alone.min(),
        alone.max(),
        h100_share,
        len(slower[True]) + len(slower[False]),
        min(slower[False]),
        max(slower[False]),
        min(slower[True]),
        max(slower[True]),
        1 / h100_share,
        h200_hbm * cost.efficiency[32] / 1e12,
        32,
        h200_hbm * cost.efficiency[16] / 1e12,
        16,
        sustained / 1e12,
        min(estimated["h100-sxm"]),
        max(estimated["h100-sxm"]),
        min(estimated["h200"]),
        max(estimated["h200"]),
        max(max(ratios), 1 / min(ratios)),
    ]
    assert_page_shows(page_figures("layout-conversions"), computed, "the paragraph on NCHW and --channels-last")


def spatial_convolution_kernels() -> tuple[int, int]:
    """The conversions the count gives a 3x3 convolution's forward pass (input, weight, output) and backward pass
    (both gradients)."""
    images, weight = torch.empty(2, 8, 10, 10, device="meta"), torch.empty(16, 8, 3, 3, device="meta")
    out = torch.empty(2, 16, 8, 8, device="meta")
    forward_args = (images, weight, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    backward_args = (out, images, weight, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False])
    forward = nchw_conversions(torch.ops.aten.convolution.default, forward_args, out)
    backward = nchw_conversions(torch.ops.aten.convolution_backward.default, backward_args, None)
    return forward.kernels, backward.kernels


def test_the_page_shows_the_fourth_visits_figures() -> None:
    """The fourth visit's traces and held-out steps (docs/validation.md, key fourth-visit): the NCHW steps'
    conversion time from ConvNeXt's to resnet18 fp32 at batch 128's, that step's kernel time, and what
    channels_last took off resnet34 amp at batch 128."""
    traces = sorted(nchw_traces(), key=lambda t: t.conversion_s)
    least, most = traces[0], traces[-1]
    assert least.config.arch == "convnext_tiny"
    assert (most.config.arch, most.config.precision) == ("resnet18", "fp32")
    most_kernels_s = sum(k.seconds for k in linked_kernels(LAYOUTS / most.name)[1])
    rows = pd.read_csv(LAYOUTS / "held-out-steps.csv")
    assert set(rows["batch"]) == {128}
    resnet34 = rows[(rows["model"] == "resnet34") & (rows["precision"] == "amp")].set_index("layout")["measured_s"]
    computed = [
        len(traces),
        least.conversion_s * 1e3,
        most.conversion_s * 1e3,
        most.config.batch_size,
        most_kernels_s * 1e3,
        len(rows),
        128,
        resnet34["NCHW"] * 1e3,
        resnet34["channels_last"] * 1e3,
    ]
    assert_page_shows(page_figures("fourth-visit"), computed, "the fourth visit")
