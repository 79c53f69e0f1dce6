"""Batch norm's time per channel on the GPU visits' traced steps: the rates measured again on another H200 and on an
H100, and the estimate of the 8 H200 training steps' batch norms in NCHW and channels_last against what their kernels
took (the validation page's figures, docs/validation.md). tests/test_batch_norm.py checks the rates and the estimate
itself in make test."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hroofline.analyze.batch_norm import load_channel_rate
from hroofline.analyze.estimate import EstimateModel, load_estimate_model
from tests.test_batch_norm import (
    GPU_DATA,
    TRAINING_STEPS,
    _estimated_batch_norms,
    channel_rates,
    measured_batch_norms,
)


def test_another_h200_and_an_h100_measure_the_same_rates() -> None:
    """The same 8 steps traced on another H200 (the fifth visit, h200-fifth/) give the rates within 1% forward and
    3% backward; on an H100 (the sixth, h100-sixth/) 1.66e9 and 0.72e9, 4.4% and 4.5% below the fourth visit's
    H200 traces (3.5% and 1.9% below the fifth's). The second visit's H100 trace of resnet50 amp gives that step's
    H200 rates within 1% and 4%. The two Hopper GPUs have 132 SMs each; no other generation was traced."""
    rate = load_channel_rate()
    fourth = channel_rates(TRAINING_STEPS)
    fifth = channel_rates([GPU_DATA / "h200-fifth" / p.name for p in TRAINING_STEPS])
    assert fifth[2] == (48, 48)
    assert fifth[0] == pytest.approx(rate.forward, rel=0.01) and fifth[1] == pytest.approx(rate.backward, rel=0.03)
    sixth = channel_rates([GPU_DATA / "h100-sixth" / p.name for p in TRAINING_STEPS])
    assert sixth[2] == (48, 48)
    assert (sixth[0], sixth[1]) == pytest.approx((1.656e9, 0.718e9), rel=0.001)
    assert (sixth[0] / fourth[0], sixth[1] / fourth[1]) == pytest.approx((0.956, 0.955), abs=0.0005)
    assert (sixth[0] / fifth[0], sixth[1] / fifth[1]) == pytest.approx((0.965, 0.981), abs=0.0005)
    h100 = channel_rates([GPU_DATA / "h100-resnet50-amp-b32-nchw-trace.json.xz"])
    h200 = channel_rates([p for p in TRAINING_STEPS if p.name.startswith("resnet50-amp")])
    assert h100[2] == h200[2] == (7, 7)
    assert h100[0] == pytest.approx(h200[0], rel=0.01) and h100[1] == pytest.approx(h200[1], rel=0.04)


def test_the_time_per_channel_is_what_nchw_batch_norms_took() -> None:
    """Of the 8 NCHW training steps on the H200, the batch norms' kernels took 1.7 to 8.2 ms; their bound (bytes at
    the HBM roof) is 9% to 30% of that, and max(bound, time per channel) 67% to 109%."""
    at_roof = EstimateModel(0.0, {"tensor": 1.0, "matmul_fp32": 1.0, "other": 1.0, "depthwise": 1.0})
    bounds, estimates = [], []
    for step in TRAINING_STEPS:
        measured = sum(seconds for *_, seconds in measured_batch_norms(step))
        bound, estimate = _estimated_batch_norms(step, at_roof)
        bounds.append(bound / measured)
        estimates.append(estimate / measured)
    assert (min(bounds), max(bounds)) == pytest.approx((0.09, 0.30), abs=0.005)
    assert (min(estimates), max(estimates)) == pytest.approx((0.67, 1.09), abs=0.005)


def test_channels_last_batch_norm_runs_below_the_efficiency_of_other() -> None:
    """NHWC batch norm stays in the class ``other``; at Hopper's fitted efficiency of it (0.73) the channels_last
    steps' batch norms are estimated at 0.37 to 0.68 of what their kernels took (docs/validation.md)."""
    on_hopper = replace(load_estimate_model().for_cc("9.0"), host_floor_s=0.0)
    assert on_hopper.efficiency["other"] == 0.73
    ratios = []
    for step in TRAINING_STEPS:
        nhwc = step.with_name(step.name.replace("-nchw-", "-channels_last-"))
        measured = sum(seconds for *_, seconds in measured_batch_norms(nhwc))
        ratios.append(_estimated_batch_norms(nhwc, on_hopper)[1] / measured)
    assert (min(ratios), max(ratios)) == pytest.approx((0.37, 0.68), abs=0.005)
