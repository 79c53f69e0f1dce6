"""Depthwise convolutions (one input channel per group, a kernel larger than 1x1) run on kernels of their own, far
below their roof: the estimate's fourth op class. Checked on the H200's torch.profiler traces
(tests/data/gpu-2026-11-27/h200-layouts) of ConvNeXt-T (7x7) and EfficientNet-B0 (3x3 and 5x5), AMP, batch 32."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from hroofline.analyze.families import DEPTHWISE_FAMILY, kernel_family
from hroofline.analyze.predict import predict_times, prediction_peaks, to_tensor_cores
from hroofline.collect.meta_trace import trace_step
from hroofline.collect.workload import WorkloadConfig
from hroofline.importers.kineto import CpuEvent, input_dims
from hroofline.roofs.catalog import resolve_gpu
from tests.conftest import REPO, linked_kernels

LAYOUTS = REPO / "tests" / "data" / "gpu-2026-11-27" / "h200-layouts"


CONVOLUTION_CALLS = ("aten::_convolution", "aten::convolution_backward")


@dataclass(frozen=True)
class MeasuredDepthwise:
    """The kernels an H200 trace's depthwise convolution ops launched, and of their time, the part on kernels of
    the depthwise family."""

    ops: int
    kernels: int
    seconds: float
    named_seconds: float


def _is_depthwise(op: CpuEvent) -> bool:
    if op.name not in CONVOLUTION_CALLS:
        return False
    dims = input_dims(op.args) or []
    weight = dims[1 if op.name == "aten::_convolution" else 2]
    return len(weight) == 4 and weight[1] == 1 and math.prod(weight[2:]) > 1


def measured_depthwise(model: str, layout: str) -> MeasuredDepthwise:
    trace, kernels = linked_kernels(LAYOUTS / f"{model}-amp-b32-train-{layout}-trace.json.xz")
    mine = [k for k in kernels if any(_is_depthwise(op) for op in k.ops)]
    named = sum(k.seconds for k in mine if kernel_family(k.name) == DEPTHWISE_FAMILY)
    ops = sum(_is_depthwise(op) for op in trace.cpu)
    return MeasuredDepthwise(ops, len(mine), sum(k.seconds for k in mine), named)


def predicted_depthwise(model: str, channels_last: bool) -> tuple[int, float]:
    """The traced step's depthwise ops (forward and backward) and their bound on an H200."""
    config = WorkloadConfig(model, 32, "amp", "sgd", "meta", channels_last=channels_last)
    peaks = prediction_peaks(resolve_gpu("h200"), "amp")
    ops = predict_times(to_tensor_cores(trace_step(config, "train"), peaks), peaks)
    ops = ops[ops["phase"].isin(["forward", "backward"])]
    return int(ops["depthwise"].sum()), float(ops.loc[ops["depthwise"], "time_bound_s"].sum())


@pytest.mark.parametrize(
    ("model", "layout", "convolutions", "share", "named"),
    [
        ("convnext_tiny", "nchw", 18, 0.045, 0.80),
        ("convnext_tiny", "channels_last", 18, 0.045, 0.80),
        ("efficientnet_b0", "nchw", 16, 0.073, 0.79),
        ("efficientnet_b0", "channels_last", 16, 0.169, 1.0),
    ],
)
def test_depthwise_ops_take_many_times_their_bound(
    model: str, layout: str, convolutions: int, share: float, named: float
) -> None:
    """Each depthwise convolution is one op forward and one backward in the trace and in the H200's; the kernels
    those ops launched took 6 to 22 times the ops' bound (bound / measured time: 0.045 to 0.169). Most of that time
    is on kernels the depthwise family names (cuDNN's c1_k1 ones, PyTorch's conv_depthwise2d, xmma's depthwise);
    the rest is ConvNeXt's bias (element-wise and reduction kernels) and, in EfficientNet's NCHW step, layout
    conversions and cuDNN kernels grouped convolutions share."""
    ops, bound_s = predicted_depthwise(model, layout == "channels_last")
    measured = measured_depthwise(model, layout)
    assert ops == measured.ops == 2 * convolutions
    assert measured.kernels >= 2 * convolutions  # forward and backward: one kernel or more each
    assert bound_s / measured.seconds == pytest.approx(share, abs=0.001)
    assert measured.named_seconds / measured.seconds == pytest.approx(named, abs=0.005)
