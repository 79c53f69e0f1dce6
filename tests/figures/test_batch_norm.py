"""Batch norm's time per channel on the GPU visits' traced steps, compared with the validation page's paragraph on it
(docs/validation.md, key ``batch-norm``) figure by figure: the rates the H200's traces give, and again on another
H200 and on an H100; the channels_last kernels against the NCHW ones; the small layers' kernels; predict's
``batch norm:`` line; and the estimate of the 8 H200 training steps' batch norms in NCHW and channels_last against
what their kernels took. tests/test_batch_norm.py checks the rates and the estimate itself in make test."""

from __future__ import annotations

from dataclasses import replace

import pytest

import hroofline
from hroofline.analyze.batch_norm import load_channel_rate
from hroofline.analyze.estimate import EstimateModel, load_estimate_model
from hroofline.importers.kineto import input_dims
from hroofline.roofs.catalog import resolve_gpu
from tests.conftest import linked_kernels
from tests.test_batch_norm import (
    FEW_CHANNELS,
    GPU_DATA,
    TRAINING_STEPS,
    _estimated_batch_norms,
    channel_rates,
    measured_batch_norms,
)
from tests.validation_page import assert_page_shows, page_figures


def other_traces_rates() -> list[float]:
    """The same 8 steps traced on an H100 (the sixth visit, h100-sixth/) and on another H200 (the fifth,
    h200-fifth/): how much lower their rates are than the fourth visit's H200 traces and than the stored rates
    (%, forward and backward). The second visit's H100 trace of resnet50 amp gives that step's H200 rates within
    1% and 4%. The two Hopper GPUs have 132 SMs each; no other generation was traced."""
    rate = load_channel_rate()
    fourth = channel_rates(TRAINING_STEPS)
    fifth = channel_rates([GPU_DATA / "h200-fifth" / p.name for p in TRAINING_STEPS])
    sixth = channel_rates([GPU_DATA / "h100-sixth" / p.name for p in TRAINING_STEPS])
    assert fifth[2] == sixth[2] == (48, 48)
    h100 = channel_rates([GPU_DATA / "h100-resnet50-amp-b32-nchw-trace.json.xz"])
    h200 = channel_rates([p for p in TRAINING_STEPS if p.name.startswith("resnet50-amp")])
    assert h100[2] == h200[2] == (7, 7)
    assert h100[0] == pytest.approx(h200[0], rel=0.01) and h100[1] == pytest.approx(h200[1], rel=0.04)
    return [
        100 * (1 - sixth[0] / fourth[0]),
        100 * (1 - sixth[1] / fourth[1]),
        100 * (1 - fifth[0] / rate.forward),
        100 * (1 - fifth[1] / rate.backward),
    ]


def float16_below_float32() -> list[float]:
    """resnet18's and resnet50's float16 steps' forward rate below their float32 ones' (%): per byte it would be
    half."""
    below = []
    for model in ("resnet18", "resnet50"):
        half, single = (
            channel_rates([p for p in TRAINING_STEPS if p.name.startswith(f"{model}-{precision}")])[0]
            for precision in ("amp", "fp32")
        )
        below.append(100 * (1 - half / single))
    return below


def channels_last_speedups() -> list[float]:
    """The layers of few channels in NHWC against NCHW, per step: their NCHW kernels' time over their NHWC ones'."""
    speedups = []
    for step in TRAINING_STEPS:
        nhwc = step.with_name(step.name.replace("-nchw-", "-channels_last-"))
        few = [
            sum(s for name, channels, _, s in measured_batch_norms(path) if channels <= FEW_CHANNELS)
            for path in (step, nhwc)
        ]
        speedups.append(few[0] / few[1])
    return speedups


def single_read_sizes() -> tuple[int, int]:
    """The largest H x W whose batch norm ran on cuDNN's *_singleread* kernels in the batch-32 steps."""
    sizes = {
        tuple((input_dims(op.args) or [[]])[0][2:4])
        for path in TRAINING_STEPS
        if "-b32-" in path.name
        for kernel in linked_kernels(path)[1]
        if "singleread" in kernel.name.lower()
        for op in kernel.ops
        if "batch_norm" in op.name
    }
    return max(sizes)  # type: ignore[return-value]


def nchw_estimates() -> tuple[list[float], list[float], list[float]]:
    """The 8 NCHW training steps: their batch norms' kernel time (ms), their bound and max(bound, time per channel)
    over it (%)."""
    at_roof = EstimateModel(0.0, {"tensor": 1.0, "matmul_fp32": 1.0, "other": 1.0, "depthwise": 1.0})
    took, bounds, estimates = [], [], []
    for step in TRAINING_STEPS:
        measured = sum(seconds for *_, seconds in measured_batch_norms(step))
        bound, estimate = _estimated_batch_norms(step, at_roof)
        took.append(measured * 1e3)
        bounds.append(100 * bound / measured)
        estimates.append(100 * estimate / measured)
    return took, bounds, estimates


def channels_last_estimates() -> tuple[float, list[float]]:
    """NHWC batch norm stays in the class ``other``: Hopper's fitted efficiency of it, and the channels_last steps'
    batch norms estimated at it over what their kernels took."""
    on_hopper = replace(load_estimate_model().for_cc("9.0"), host_floor_s=0.0)
    ratios = []
    for step in TRAINING_STEPS:
        nhwc = step.with_name(step.name.replace("-nchw-", "-channels_last-"))
        measured = sum(seconds for *_, seconds in measured_batch_norms(nhwc))
        ratios.append(_estimated_batch_norms(nhwc, on_hopper)[1] / measured)
    return on_hopper.efficiency["other"], ratios


def test_the_page_shows_the_batch_norm_figures() -> None:
    rate = load_channel_rate()
    lines = []
    for gpu in ("a100", "v100"):  # what predict's `batch norm:` line says for resnet50 amp at batch 32
        view = hroofline.predict("resnet50", gpu, precision="amp", batch_size=32).view
        lines += [view.batch_norm.added_s * 1e6, view.step.estimate_s * 1e3]
    took, bounds, estimates = nchw_estimates()
    other, ratios = channels_last_estimates()
    speedups = channels_last_speedups()
    computed = [
        FEW_CHANNELS,
        FEW_CHANNELS,
        resolve_gpu("h200").sms,
        FEW_CHANNELS,
        rate.forward / 1e9,
        rate.backward / 1e9,
        *float16_below_float32(),
        min(speedups),
        max(speedups),
        len(TRAINING_STEPS),
        *other_traces_rates(),
        *single_read_sizes(),
        32,
        32,
        *lines,
        len(TRAINING_STEPS),
        min(took),
        max(took),
        min(bounds),
        max(bounds),
        min(estimates),
        max(estimates),
        other,
        min(ratios),
        max(ratios),
    ]
    assert_page_shows(page_figures("batch-norm"), computed, "the paragraph on batch norm over NCHW")
