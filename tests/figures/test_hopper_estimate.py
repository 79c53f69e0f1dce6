"""Hopper's own efficiencies (issue 24, item 1): fitted on the steps measured on an H100 and an H200, judged with
each of the two GPUs left out of the fit, and used by predict on a GPU of compute capability 9.0."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from hroofline.analyze.calibrate import error_factors, estimated_step, percentiles
from hroofline.analyze.estimate import OP_CLASSES, EstimateModel, load_estimate_model, with_host_cost
from hroofline.collect.host_cost import probe_host_weight
from hroofline.model.host import step_kind
from hroofline.roofs.host_file import load_host_cost
from tests.conftest import estimate_error_bench


@pytest.fixture(scope="module")
def hopper():
    return estimate_error_bench().hopper_fit(load_estimate_model().host_floor_s)


def test_the_bundled_hopper_efficiencies_are_the_fit_to_the_hopper_steps(hopper) -> None:
    bundled = load_estimate_model().for_cc("9.0")
    assert set(hopper.rows["gpu"]) == {"h100-sxm", "h200"} and len(hopper.rows) == 168
    for name in OP_CLASSES:
        assert bundled.efficiency[name] == pytest.approx(hopper.model.efficiency[name], abs=0.005)
    assert bundled.error is not None and bundled.error.measured_on == hopper.measured_on
    assert (bundled.error.median, bundled.error.p90) == pytest.approx(percentiles(hopper.factors), abs=1e-4)
    assert bundled.host_floor_s == load_estimate_model().host_floor_s  # the host's, not the GPU's


def test_each_kind_of_hopper_step_has_the_band_of_its_widest_way(hopper) -> None:
    """predict's band for a Hopper step is its kind's (training steps, inference passes): of the ways the fit is judged
    (each GPU left out; the fifth and sixth visits' eight models no fit saw), the widest 90th percentile of that
    kind's steps, as the published fit's band is its widest way's. So about 90% or more of each way's steps of a
    kind are within their kind's band (21 of the 24 inference passes with each GPU left out). One band over all 168
    steps (x1.60) was too narrow for inference (15 of the 24 passes outside it); for training the widest way's 90th
    percentile (x1.54, the sixth visit's) is a little narrower than it."""
    bench = estimate_error_bench()
    ways = bench.hopper_ways(hopper)
    bands = bench.kind_bands(ways)
    bundled = load_estimate_model().for_cc("9.0")
    assert set(bundled.kind_errors) == set(bands) == {"train", "forward"}
    for kind, (band, _) in bands.items():
        stored = bundled.error_for(kind)
        assert (stored.median, stored.p90) == pytest.approx((band.median, band.p90), abs=1e-4)
        assert stored.measured_on == band.measured_on
    forward = ~(hopper.rows["phases"] == "train").to_numpy()
    # the validation page's table
    assert percentiles(hopper.factors[~forward]) == pytest.approx((1.11, 1.41), abs=0.005)
    assert percentiles(hopper.factors[forward]) == pytest.approx((1.75, 2.46), abs=0.005)
    assert (hopper.factors[forward] <= bundled.error_for("forward").p90).sum() == 21
    # the validation page's figures: training's band is the sixth visit's (39 steps on an H100), inference's each
    # GPU left out
    assert {kind: (round(band.median, 2), round(band.p90, 2), steps) for kind, (band, steps) in bands.items()} == {
        "train": (1.2, 1.54, 39),
        "forward": (1.75, 2.46, 24),
    }
    assert (hopper.factors[forward] > bundled.error.p90).mean() == pytest.approx(15 / 24)


def test_each_hopper_gpu_left_out_is_closer_than_the_published_fit(hopper) -> None:
    """On the H200's training steps (batch 32 and 128) with the efficiencies fitted on the H100's steps, and the
    other way round, the error is smaller than with the efficiencies fitted on V100, A100 and T4 (median and 90th
    percentile), and so over all 168 steps; batch 1 and inference are the host's, which both fits share."""
    published = load_estimate_model()
    rows = hopper.rows
    others = error_factors(hopper.samples, published)
    training = ((rows["phases"] == "train") & (rows["batch"] > 1)).to_numpy()
    for gpu in ("h100-sxm", "h200"):
        mine = training & (rows["gpu"] == gpu).to_numpy()
        own, other = percentiles(hopper.factors[mine]), percentiles(others[mine])
        assert own[0] < other[0] and own[1] < other[1], (gpu, own, other)
    own, other = percentiles(hopper.factors), percentiles(others)
    assert own[0] < other[0] and own[1] < other[1]
    # inference, mostly the host's (the two fits share its floor), comes out about the same (the validation page's
    # medians)
    inference = (rows["phases"] != "train").to_numpy()
    for gpu, medians in (("h100-sxm", (1.84, 1.79)), ("h200", (1.70, 1.70))):
        mine = inference & (rows["gpu"] == gpu).to_numpy()
        assert (np.median(hopper.factors[mine]), np.median(others[mine])) == pytest.approx(medians, abs=0.005)
    assert own == pytest.approx((1.16, 1.60), abs=0.005)  # the validation page's figures (docs/validation.md)
    assert other == pytest.approx((1.18, 1.77), abs=0.005)


def test_the_shared_h100_steps_left_out_of_the_fit_meet_the_goal(hopper) -> None:
    """Issue 24's protocol for the 24 H100 training steps of ../shared: left out of the fit that judges them. With
    Hopper's efficiencies fitted on the H200's steps alone, their error is within the goal (median x1.25, 90th
    percentile x1.6), and closer than with the efficiencies fitted on V100, A100 and T4 (x1.14 / x1.46)."""
    bench = estimate_error_bench()
    shared = hopper.rows["source"] == bench.SHARED_H100_SOURCE
    assert shared.sum() == 24 and set(hopper.rows.loc[shared, "gpu"]) == {"h100-sxm"}
    fitted_on = hopper.rows.loc[hopper.rows["gpu"] != "h100-sxm", "gpu"]
    assert set(fitted_on) == {"h200"}  # the other Hopper GPU: the fit that judges the H100's steps saw it alone
    own = percentiles(bench.shared_h100_factors(hopper))
    chosen = [sample for sample, mine in zip(hopper.samples, shared, strict=True) if mine]
    published = percentiles(error_factors(chosen, load_estimate_model()))
    assert own[0] <= bench.H100_GOAL[0] and own[1] <= bench.H100_GOAL[1]
    assert own[0] < published[0] and own[1] < published[1]
    assert own == pytest.approx((1.07, 1.39), abs=0.005)  # the validation page's figures (docs/validation.md)
    assert published == pytest.approx((1.14, 1.46), abs=0.005)


def test_depthwise_convolutions_on_hopper(hopper) -> None:
    """Hopper's steps say little of the depthwise efficiency: from 0.2 to 1.0 the fit's loss (mean squared log
    error) changes by under 1%. They ask for more than the H200's traces measured of the kernels (their bound 0.045
    to 0.169 of their time, tests/test_depthwise.py): at 0.07 the loss is 10% worse. The estimate sums each op's
    max(its host time, time), so a slow kernel, under which the host runs ahead, is charged twice (docs/validation.md).
    The 28 training steps with a depthwise convolution come to the validation page's x1.15 / x1.52 with each GPU
    left out."""
    own, samples = hopper.model, hopper.samples
    measured = np.array([sample.measured_s for sample in samples])

    def loss(depthwise: float) -> float:
        model = replace(load_estimate_model(), efficiency={**own.efficiency, "depthwise": depthwise})
        estimates = np.array([estimated_step(sample, model) for sample in samples])
        return float(np.mean(np.log(estimates / measured) ** 2))

    fitted = loss(own.efficiency["depthwise"])
    assert all(fitted <= loss(value) < 1.01 * fitted for value in (0.2, 0.3, 0.6, 1.0))
    assert 1.08 * fitted < loss(0.07) < 1.12 * fitted
    rows = hopper.rows
    depthwise = np.array([(sample.kinds.classes == OP_CLASSES.index("depthwise")).any() for sample in samples])
    assert set(rows.loc[depthwise, "model"]) == {"convnext_tiny", "efficientnet_b0", "mobilenet_v2"}
    training = ((rows["phases"] == "train") & (rows["batch"] > 1)).to_numpy() & depthwise
    assert training.sum() == 28
    assert percentiles(hopper.factors[training]) == pytest.approx((1.15, 1.52), abs=0.005)


def test_eight_models_predicts_fits_never_saw_on_another_h200(hopper) -> None:
    """The fifth visit's 80 steps of eight models that the fits behind predict never saw (h200-fifth/
    held-out-steps.csv: resnext50_32x4d, mobilenet_v3_large, convnext_small, efficientnet_v2_s, densenet169,
    swin_v2_t, regnet_x_3_2gf, alexnet), judged with the Hopper efficiencies predict uses: training at batch 32 and
    128 within issue 24's goal for the H100 (median x1.25, p90 x1.6); inference leans high (the host floor per op
    is a training step's). The host measured on that machine after the steps (`ceilings --measure`: 21.9 us per
    training op, within the third visit's 18.9 to 34.0) is about half what these models' batch-1 training steps
    took per op the estimate counts (26 to 63 us, median 43; the third visit's five models 24 to 40, median 33):
    with it only inference at batch 64 comes closer. The predicted peak memory of the training steps at batch 32
    and 128 is 0.89 to 1.00 of max_memory_allocated."""
    bench = estimate_error_bench()
    rows = bench.timed_steps(bench.H200_FIFTH)
    assert len(rows) == 80 and set(rows["gpu"]) == {"h200"} and set(rows["layout"]) == {"NCHW"}
    fitted_models = set(hopper.rows["model"]) | set(pd.read_csv(bench.PUBLISHED)["model"])
    assert not set(rows["model"]) & fitted_models  # neither fit behind predict saw these models
    found = bench.samples(rows)
    large = rows[(rows["phases"] == "train") & (rows["batch"] > 1)]
    peaks = [
        max(p.peak_bytes for p in bench.traced(r.model, r.batch, r.precision, "train", False).memory)
        for r in large.itertuples()
    ]
    memory = np.array(peaks) / large["memory_bytes"].to_numpy()
    assert len(memory) == 32 and memory.min() == pytest.approx(0.895, abs=0.005) and memory.max() < 1.0
    host = load_host_cost(bench.H200_FIFTH.with_name("h200-ceilings-measured.toml"))
    measured = [host.per_op(phases, precision) for phases in ("train", "forward") for precision in ("fp32", "amp")]
    assert measured == pytest.approx([21.92e-6, 21.35e-6, 17.62e-6, 26.69e-6], rel=1e-3)

    def per_op_s(samples: list) -> tuple[float, float, float]:
        """Of batch-1 training steps, the step's time over the ops the estimate counts: least, median, most."""
        seconds = np.array([sample.measured_s / sample.kinds.fitted().sum() for sample in samples])
        return float(seconds.min()), float(np.median(seconds)), float(seconds.max())

    batch_1 = ((rows["phases"] == "train") & (rows["batch"] == 1)).to_numpy()
    assert per_op_s([s for s, chosen in zip(found, batch_1, strict=True) if chosen]) == pytest.approx(
        (26.2e-6, 43.1e-6, 62.6e-6), abs=0.05e-6
    )
    third = bench.timed_steps(bench.H200_STEPS)
    third = third[(third["phases"] == "train") & (third["batch"] == 1)].reset_index(drop=True)
    assert per_op_s(bench.samples(third)) == pytest.approx((23.5e-6, 32.8e-6, 40.4e-6), abs=0.05e-6)

    def figures(models: list[EstimateModel]) -> dict[str, tuple[float, float, float]]:
        """Per kind of step: median and 90th-percentile error, median estimate/measured."""
        ratios = np.array([estimated_step(s, m) / s.measured_s for s, m in zip(found, models, strict=True)])
        return bench.kind_figures(rows, ratios)

    assert [chosen.sum() for chosen in bench.step_kinds(rows).values()] == [32, 16, 16, 16]
    fitted = figures([hopper.model] * len(found))
    assert fitted == {  # the validation page's figures (docs/validation.md)
        "training, batch 32 and 128": pytest.approx((1.19, 1.40, 0.86), abs=0.005),
        "training, batch 1": pytest.approx((1.19, 1.42, 0.90), abs=0.005),
        "inference, batch 64": pytest.approx((1.30, 1.87, 1.29), abs=0.005),
        "inference, batch 1": pytest.approx((1.26, 2.12, 1.24), abs=0.005),
    }
    median, p90, _ = fitted["training, batch 32 and 128"]
    assert median <= bench.H100_GOAL[0] and p90 <= bench.H100_GOAL[1]
    phases = ["train" if phase == "train" else "forward" for phase in rows["phases"]]
    measured_host = []
    for phase, precision in zip(phases, rows["precision"], strict=True):
        weight = probe_host_weight(step_kind(phase, precision), host.device)
        measured_host.append(with_host_cost(hopper.model, host, phase, precision, weight))
    assert figures(measured_host) == {
        "training, batch 32 and 128": pytest.approx((1.53, 2.01, 0.65), abs=0.005),
        "training, batch 1": pytest.approx((2.11, 2.555, 0.47), abs=0.005),
        "inference, batch 64": pytest.approx((1.15, 1.29, 0.88), abs=0.005),
        "inference, batch 1": pytest.approx((1.47, 2.76, 0.68), abs=0.005),
    }


def test_the_same_models_on_an_h100(hopper) -> None:
    """The sixth visit's 39 steps of the same eight models on an H100 (h100-sixth/held-out-steps.csv, the fifth
    visit's script until its budget ran out): training at batch 32 and 128 within the H100 goal."""
    bench = estimate_error_bench()
    rows = bench.timed_steps(bench.H100_SIXTH)
    assert len(rows) == 39 and set(rows["gpu"]) == {"h100-sxm"} and set(rows["phases"]) == {"train"}
    assert not set(rows["model"]) & set(hopper.rows["model"])
    ratios = np.array([estimated_step(s, hopper.model) / s.measured_s for s in bench.samples(rows)])
    counts = {kind: chosen.sum() for kind, chosen in bench.step_kinds(rows).items()}
    assert counts == {"training, batch 32 and 128": 32, "training, batch 1": 7}
    figures = bench.kind_figures(rows, ratios)
    assert figures == {  # median and 90th-percentile error, median estimate/measured (the validation page's)
        "training, batch 32 and 128": pytest.approx((1.15, 1.42, 0.88), abs=0.005),
        "training, batch 1": pytest.approx((1.35, 1.56, 0.74), abs=0.005),
    }
    median, p90, _ = figures["training, batch 32 and 128"]
    assert median <= bench.H100_GOAL[0] and p90 <= bench.H100_GOAL[1]
    # at batch 128 the H100 took 1.05 to 1.18 times the fifth visit's H200 time for the same step
    key = ["model", "precision", "batch", "phases"]
    both = rows.merge(bench.timed_steps(bench.H200_FIFTH), on=key, suffixes=("_h100", "_h200"))
    both = both[both["batch"] == 128]
    slower = both["measured_s_h100"] / both["measured_s_h200"]
    assert len(both) == 16 and (slower.min(), slower.max()) == pytest.approx((1.05, 1.18), abs=0.005)
