"""Hopper's own efficiencies (issue 24, item 1): fitted on the steps measured on an H100 and an H200, judged with
each of the two GPUs left out of the fit, and used by predict on a GPU of compute capability 9.0."""

from __future__ import annotations

import re
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
from tests.validation_page import assert_page_shows, page_figures


def visit_year(rows: pd.DataFrame) -> int:
    """The year of the visit that measured ``rows``, from their source (h100-sxm-device-2026-11-27-fifth)."""
    (year,) = {int(re.search(r"-(\d{4})-\d\d-\d\d-", source).group(1)) for source in rows["source"]}
    return year


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
    assert (hopper.factors[forward] <= bundled.error_for("forward").p90).mean() >= 0.875  # 21 of the 24
    # the validation page's paragraph: each kind's band (training's the sixth visit's, inference's each GPU left
    # out), how many inference passes one band for all 168 steps left out, and one pass no fit saw under both
    (train, train_steps), (inference, inference_steps) = bands["train"], bands["forward"]
    single = percentiles(hopper.factors)[1]
    figures = [train.p90, train_steps, train.median, inference.p90, inference_steps, inference.median]
    figures += [single, len(hopper.rows), (hopper.factors[forward] > single).sum(), forward.sum()]
    fifth = bench.timed_steps(bench.H200_FIFTH)
    example = fifth[
        (fifth["model"] == "efficientnet_v2_s")
        & (fifth["precision"] == "fp32")
        & (fifth["batch"] == 1)
        & (fifth["phases"] != "train")
    ].reset_index(drop=True)
    (sample,) = bench.samples(example)
    estimate_ms = estimated_step(sample, bundled) * 1e3
    figures += [example["batch"][0], sample.measured_s * 1e3, estimate_ms]
    for band in (single, inference.p90):
        figures += [band, estimate_ms / band, estimate_ms * band]
    assert_page_shows(page_figures("hopper-band"), figures, "the paragraph on Hopper's bands")


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
    # the validation page's paragraph: the efficiencies beside the published fit's, the error over all steps, then
    # per GPU left out on training at batch 32 and 128 and at batch 1, and inference (mostly the host's, whose
    # floor the two fits share, so about the same), then the shared H100 steps' (the first Hopper row of the table
    # and with the H100 left out)
    bench, published = estimate_error_bench(), load_estimate_model()
    figures = [float(bench.HOPPER_CC), len(rows)]
    figures += [hopper.model.efficiency[name] for name in OP_CLASSES]
    figures += [published.efficiency[name] for name in OP_CLASSES]
    figures += [*own, len(rows), *other]
    gpus = [(rows["gpu"] == gpu).to_numpy() for gpu in ("h100-sxm", "h200")]
    figures += sorted(rows.loc[training, "batch"].unique())
    for mine in gpus:
        figures += [*percentiles(hopper.factors[training & mine]), *percentiles(others[training & mine])]
    single = ((rows["phases"] == "train") & (rows["batch"] == 1)).to_numpy()
    figures += list(rows.loc[single, "batch"].unique())
    for mine in gpus:
        figures += [*percentiles(hopper.factors[single & mine]), (single & mine).sum()]
    inference = (rows["phases"] != "train").to_numpy()
    for mine in gpus:
        chosen = inference & mine
        figures += [np.median(hopper.factors[chosen]), chosen.sum(), np.median(others[chosen])]
    shared = (rows["source"] == bench.SHARED_H100_SOURCE).to_numpy()
    figures += [*percentiles(others[shared]), *bench.H100_GOAL, shared.sum()]
    figures += percentiles(bench.shared_h100_factors(hopper))
    assert_page_shows(page_figures("hopper-efficiencies"), figures, "the paragraph on Hopper's own efficiencies")


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
    assert own[0] < published[0] and own[1] < published[1]  # the page's figures: test_each_hopper_gpu_left_out_...


def test_depthwise_convolutions_on_hopper(hopper) -> None:
    """Hopper's steps say little of the depthwise efficiency: from 0.2 to 1.0 the fit's loss (mean squared log
    error) changes by under 1%. They ask for more than the H200's traces measured of the kernels (their bound 0.045
    to 0.169 of their time, tests/test_depthwise.py): at 0.07 the loss is about 10% worse. The estimate sums each
    op's max(its host time, time), so a slow kernel, under which the host runs ahead, is charged twice. The figures
    of the validation page's paragraph (docs/validation.md, key depthwise-hopper): the fitted efficiency, the most
    the loss changes from 0.2 to 1.0 and at 0.07, the training steps with a depthwise convolution and their error
    with each GPU left out."""
    own, samples = hopper.model, hopper.samples
    measured = np.array([sample.measured_s for sample in samples])

    def loss(depthwise: float) -> float:
        model = replace(load_estimate_model(), efficiency={**own.efficiency, "depthwise": depthwise})
        estimates = np.array([estimated_step(sample, model) for sample in samples])
        return float(np.mean(np.log(estimates / measured) ** 2))

    fitted, flat, slow = loss(own.efficiency["depthwise"]), np.linspace(0.2, 1.0, 9), 0.07
    changes = [(loss(value) / fitted - 1) * 100 for value in flat]  # %
    assert min(changes) >= 0 and max(changes) < 1
    worse = (loss(slow) / fitted - 1) * 100
    assert 8 < worse < 12
    rows = hopper.rows
    depthwise = np.array([(sample.kinds.classes == OP_CLASSES.index("depthwise")).any() for sample in samples])
    assert set(rows.loc[depthwise, "model"]) == {"convnext_tiny", "efficientnet_b0", "mobilenet_v2"}
    training = ((rows["phases"] == "train") & (rows["batch"] > 1)).to_numpy() & depthwise
    figures = [own.efficiency["depthwise"], flat[0], flat[-1], max(changes), slow, worse, training.sum()]
    figures += [*sorted(rows.loc[training, "batch"].unique()), *percentiles(hopper.factors[training])]
    assert_page_shows(page_figures("depthwise-hopper"), figures, "the paragraph on depthwise convolutions on Hopper")


def test_eight_models_predicts_fits_never_saw_on_another_h200(hopper) -> None:
    """The fifth visit's 80 steps of eight models that the fits behind predict never saw (h200-fifth/
    held-out-steps.csv: resnext50_32x4d, mobilenet_v3_large, convnext_small, efficientnet_v2_s, densenet169,
    swin_v2_t, regnet_x_3_2gf, alexnet), judged with the Hopper efficiencies predict uses: training at batch 32 and
    128 within issue 24's goal for the H100 (median x1.25, p90 x1.6); inference leans high (the host floor per op
    is a training step's). The host measured on that machine after the steps (`ceilings --measure`, within what
    the third visit's three measurements read) is about half what these models' batch-1 training steps took per
    op the estimate counts: with it only inference at batch 64 comes closer. The predicted peak memory of the
    training steps at batch 32 and 128 is within 11% of max_memory_allocated, under it. The figures are the
    validation page's (docs/validation.md, keys fifth-visit and host-probe-fifth-visit), compared one by one."""
    bench = estimate_error_bench()
    rows = bench.timed_steps(bench.H200_FIFTH)
    assert set(rows["gpu"]) == {"h200"} and set(rows["layout"]) == {"NCHW"}
    fitted_models = set(hopper.rows["model"]) | set(pd.read_csv(bench.PUBLISHED)["model"])
    assert not set(rows["model"]) & fitted_models  # neither fit behind predict saw these models
    found = bench.samples(rows)
    large = rows[(rows["phases"] == "train") & (rows["batch"] > 1)]
    peaks = [
        max(p.peak_bytes for p in bench.traced(r.model, r.batch, r.precision, "train", False).memory)
        for r in large.itertuples()
    ]
    memory = np.array(peaks) / large["memory_bytes"].to_numpy()
    assert memory.min() > 0.85 and memory.max() < 1.0
    host = load_host_cost(bench.H200_FIFTH.with_name("h200-ceilings-measured.toml"))
    measured = [host.per_op(phases, precision) for phases in ("train", "forward") for precision in ("fp32", "amp")]

    def per_op_s(samples: list) -> list[float]:
        """Of batch-1 training steps, the step's time over the ops the estimate counts: least, most, median."""
        seconds = np.array([sample.measured_s / sample.kinds.fitted().sum() for sample in samples])
        return [float(seconds.min()), float(seconds.max()), float(np.median(seconds))]

    batch_1 = ((rows["phases"] == "train") & (rows["batch"] == 1)).to_numpy()
    fifth_per_op = per_op_s([s for s, chosen in zip(found, batch_1, strict=True) if chosen])
    third = bench.timed_steps(bench.H200_STEPS)
    third = third[(third["phases"] == "train") & (third["batch"] == 1)].reset_index(drop=True)
    third_per_op = per_op_s(bench.samples(third))
    # the third visit's three probes of its machine's host, per training op
    probes = [
        load_host_cost(bench.GPU_DATA / f"h200-ceilings-measured-{number}.toml").per_op("train", precision)
        for number in (1, 2, 3)
        for precision in ("fp32", "amp")
    ]
    assert min(probes) <= measured[0] <= max(probes) and measured[0] < fifth_per_op[0]

    def figures(models: list[EstimateModel]) -> dict[str, tuple[float, float, float]]:
        """Per kind of step: median and 90th-percentile error, median estimate/measured."""
        ratios = np.array([estimated_step(s, m) / s.measured_s for s, m in zip(found, models, strict=True)])
        return bench.kind_figures(rows, ratios)

    fitted = figures([hopper.model] * len(found))
    median, p90, _ = fitted["training, batch 32 and 128"]
    assert median <= bench.H100_GOAL[0] and p90 <= bench.H100_GOAL[1]
    phases = ["train" if phase == "train" else "forward" for phase in rows["phases"]]
    measured_host = []
    for phase, precision in zip(phases, rows["precision"], strict=True):
        weight = probe_host_weight(step_kind(phase, precision), host.device)
        measured_host.append(with_host_cost(hopper.model, host, phase, precision, weight))
    with_host = figures(measured_host)
    assert with_host["training, batch 32 and 128"][0] > median  # the measured host made training worse too

    kinds = bench.step_kinds(rows)
    large_train, single_train = fitted["training, batch 32 and 128"], fitted["training, batch 1"]
    large_forward, single_forward = fitted["inference, batch 64"], fitted["inference, batch 1"]
    year = visit_year(rows)
    shown = [year, len(rows)]
    shown += sorted(rows.loc[rows["phases"] == "train", "batch"].unique())
    shown += sorted(rows.loc[rows["phases"] != "train", "batch"].unique())
    shown += [*sorted(large["batch"].unique()), *large_train, *bench.H100_GOAL]
    shown += [*rows.loc[kinds["training, batch 1"], "batch"].unique(), *single_train[:2], *large_forward[:2]]
    shown += [*rows.loc[kinds["inference, batch 64"], "batch"].unique(), *single_forward[:2]]
    shown += [*rows.loc[kinds["inference, batch 1"], "batch"].unique(), large_forward[2], single_forward[2]]
    shown += [len(large), *sorted(large["batch"].unique()), memory.min(), memory.max()]
    shown += list(rows.loc[kinds["inference, batch 64"], "batch"].unique())  # where the measured host helped
    assert_page_shows(page_figures("fifth-visit"), shown, "the fifth visit's steps")
    shown = [value * 1e6 for value in measured]
    for kind in ("training, batch 1", "inference, batch 1", "inference, batch 64"):
        shown += [*rows.loc[kinds[kind], "batch"].unique(), fitted[kind][0], with_host[kind][0]]
    shown += [min(probes) * 1e6, max(probes) * 1e6]
    shown += [value * 1e6 for value in (*fifth_per_op, *third_per_op)]
    assert_page_shows(page_figures("host-probe-fifth-visit"), shown, "the host measured on the fifth visit")


def test_the_same_models_on_an_h100(hopper) -> None:
    """The sixth visit's steps of the same eight models on an H100 (h100-sixth/held-out-steps.csv, the fifth
    visit's script until its budget ran out): training at batch 32 and 128 within the H100 goal, and slower than
    on the fifth visit's H200 at batch 128. The figures are the validation page's (docs/validation.md, key
    sixth-visit), compared one by one."""
    bench = estimate_error_bench()
    rows = bench.timed_steps(bench.H100_SIXTH)
    assert set(rows["gpu"]) == {"h100-sxm"} and set(rows["phases"]) == {"train"}
    assert not set(rows["model"]) & set(hopper.rows["model"])
    ratios = np.array([estimated_step(s, hopper.model) / s.measured_s for s in bench.samples(rows)])
    kinds = bench.step_kinds(rows)
    assert list(kinds) == ["training, batch 32 and 128", "training, batch 1"]
    figures = bench.kind_figures(rows, ratios)
    median, p90, _ = figures["training, batch 32 and 128"]
    assert median <= bench.H100_GOAL[0] and p90 <= bench.H100_GOAL[1]
    key = ["model", "precision", "batch", "phases"]
    both = rows.merge(bench.timed_steps(bench.H200_FIFTH), on=key, suffixes=("_h100", "_h200"))
    (largest,) = {rows["batch"].max()}
    both = both[both["batch"] == largest]
    slower = both["measured_s_h100"] / both["measured_s_h200"]
    assert len(both) == 16 and slower.min() > 1
    large, single = (rows.loc[kinds[kind], "batch"] for kind in kinds)
    year = visit_year(rows)
    shown = [year, len(rows), *sorted(large.unique()), *single.unique(), len(single)]
    shown += [*figures["training, batch 32 and 128"][:2], *sorted(large.unique())]
    shown += [figures["training, batch 32 and 128"][2], *figures["training, batch 1"][:2], *single.unique()]
    shown += [figures["training, batch 1"][2], largest, slower.min(), slower.max()]
    assert_page_shows(page_figures("sixth-visit"), shown, "the sixth visit's steps")
