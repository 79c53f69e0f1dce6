"""Depthwise convolutions (one input channel per group, a kernel larger than 1x1) run on kernels of their own, far
below their roof: the estimate's fourth op class. Checked on the H200's torch.profiler traces
(tests/data/gpu-2026-11-27/h200-layouts) of ConvNeXt-T (7x7) and EfficientNet-B0 (3x3 and 5x5), AMP, batch 32."""

from __future__ import annotations

import json
import lzma
import math
from dataclasses import dataclass

import pytest

from hroofline.analyze.families import DEPTHWISE_FAMILY, kernel_family
from hroofline.analyze.predict import predict_times, prediction_peaks, to_tensor_cores
from hroofline.collect.meta_trace import trace_step
from hroofline.collect.workload import WorkloadConfig
from hroofline.roofs.catalog import resolve_gpu
from tests.conftest import REPO

LAYOUTS = REPO / "tests" / "data" / "gpu-2026-11-27" / "h200-layouts"


@dataclass(frozen=True)
class MeasuredDepthwise:
    """The kernels an H200 trace's depthwise convolution ops launched (found by the CUDA launch's correlation and
    the op's time on the same thread), and of their time, the part on kernels of the depthwise family."""

    ops: int
    kernels: int
    seconds: float
    named_seconds: float


def _weight(op: dict) -> list[int]:
    dims = op["args"]["Input Dims"]
    return dims[1] if op["name"] == "aten::_convolution" else dims[2]


def measured_depthwise(model: str, layout: str) -> MeasuredDepthwise:
    path = LAYOUTS / f"{model}-amp-b32-train-{layout}-trace.json.xz"
    events = json.loads(lzma.decompress(path.read_bytes()))["traceEvents"]
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    convolutions = [
        e
        for e in events
        if e.get("cat") == "cpu_op" and e["name"] in ("aten::_convolution", "aten::convolution_backward")
    ]
    depthwise = [
        c for c in convolutions if len(_weight(c)) == 4 and _weight(c)[1] == 1 and math.prod(_weight(c)[2:]) > 1
    ]
    kernels, seconds, named = 0, 0.0, 0.0
    for kernel in (e for e in events if e.get("cat") == "kernel"):
        launch = launches.get(kernel["args"]["correlation"])
        if launch is None:
            continue
        if any(c["tid"] == launch["tid"] and c["ts"] <= launch["ts"] <= c["ts"] + c["dur"] for c in depthwise):
            kernels += 1
            seconds += kernel["dur"] * 1e-6
            named += kernel["dur"] * 1e-6 * (kernel_family(kernel["name"]) == DEPTHWISE_FAMILY)
    return MeasuredDepthwise(len(depthwise), kernels, seconds, named)


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
