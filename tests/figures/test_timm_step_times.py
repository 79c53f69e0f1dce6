"""The bundled estimate, fitted to NVIDIA's published tables alone, judged on the second source of published step
times (bench/data/timm-step-times.csv, from timm's benchmark tables) that it never saw, and on NVIDIA's rows with
each table, GPU or model left out: the figures of the validation page (docs/validation.md). Also all 58 of timm's
models checked as torchvision's architectures, whose work hroofline counts as timm did (tests/test_timm_step_times.py
checks five of them in make test)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from hroofline.analyze.calibrate import error_factors, estimated_step, fit, percentiles
from hroofline.analyze.estimate import DEPTHWISE_CLASS, OP_CLASSES, estimate_times, load_estimate_model
from tests.conftest import SHARED, estimate_error_bench, host_overlap_bench, need
from tests.test_timm_step_times import MODELS, ROWS, assert_is_the_torchvision_architecture


@pytest.mark.parametrize("model", MODELS)
def test_each_model_is_the_torchvision_architecture(model: str) -> None:
    assert_is_the_torchvision_architecture(model)


@pytest.fixture(scope="module")
def timm_samples() -> list:
    return estimate_error_bench().samples(ROWS)


@pytest.fixture(scope="module")
def nvidia() -> tuple[pd.DataFrame, list]:
    rows = pd.read_csv(need(SHARED / "reference" / "published-step-times.csv"))
    return rows, estimate_error_bench().samples(rows)


def test_the_bundled_estimate_meets_the_goal_on_another_source(timm_samples: list) -> None:
    """Fitted to NVIDIA's tables, judged on timm's: median error factor <= 1.2 and 90th percentile <= 1.6, the
    issue's goal, and closer than the roofline bound alone."""
    bench = estimate_error_bench()
    samples = timm_samples
    median, p90 = percentiles(error_factors(samples, load_estimate_model()))
    assert median <= 1.2 and p90 <= 1.6
    bound_median, bound_p90 = percentiles(bench.bound_error_factors(samples))
    assert median < bound_median and p90 < bound_p90


def test_the_bundled_fit_saw_nvidias_rows_alone(nvidia: tuple[pd.DataFrame, list]) -> None:
    """The parameters in metrics/estimate.toml are the fit to NVIDIA's published rows, nothing else: timm's rows
    are a held-out test only."""
    refitted, bundled = fit(nvidia[1]), load_estimate_model()
    assert refitted.host_floor_s == pytest.approx(bundled.host_floor_s, rel=0.01)
    for name in OP_CLASSES:
        assert refitted.efficiency[name] == pytest.approx(bundled.efficiency[name], abs=0.005)


def test_nvidias_rows_say_little_of_depthwise_convolutions(nvidia: tuple[pd.DataFrame, list]) -> None:
    """The validation page (docs/validation.md): on NVIDIA's rows the depthwise efficiency is weakly determined. Moving
    it from the fitted value to anywhere between 0.4 and 0.8 changes the fit's loss (mean squared log error) by under 1%
    (at 1.0 by under 2%), and depthwise ops are at most 14% of any row's estimate (EfficientNet-B0's; ResNet-50 has
    none)."""
    bundled, samples = load_estimate_model(), nvidia[1]
    measured = np.array([sample.measured_s for sample in samples])

    def loss(depthwise: float) -> float:
        model = replace(bundled, efficiency={**bundled.efficiency, "depthwise": depthwise})
        estimates = np.array([estimated_step(sample, model) for sample in samples])
        return float(np.mean(np.log(estimates / measured) ** 2))

    fitted = loss(bundled.efficiency["depthwise"])
    assert all(fitted <= loss(value) < 1.01 * fitted for value in (0.4, 0.5, 0.7, 0.8))
    assert 1.01 * fitted < loss(1.0) < 1.02 * fitted
    shares = []
    for sample in samples:
        times = estimate_times(sample.roof_s, sample.kinds, bundled)
        shares.append(times[sample.kinds.classes == DEPTHWISE_CLASS].sum() / times.sum())
    assert 0.05 < max(shares) <= 0.14


def test_inference_has_its_own_held_out_check(nvidia: tuple[pd.DataFrame, list], timm_samples: list) -> None:
    """Forward-only rows the fit did not see (NVIDIA's forward tables, each left out of its fit; timm's inference
    tables, never fitted to) meet the goal on their own: the validation page's inference row."""
    bench = estimate_error_bench()
    rows, samples = nvidia
    columns = list(bench.HELD_OUT[bench.PER_TABLE_LABEL])
    groups = rows[columns].astype(str).agg(":".join, axis=1).tolist()
    by_table = bench.held_out(samples, groups)
    other = error_factors(timm_samples, load_estimate_model())
    forward = bench.inference_rows(rows, by_table, ROWS, other)
    assert len(forward) == (rows["phases"] != "train").sum() + (ROWS["phases"] != "train").sum() == 184
    median, p90 = percentiles(forward)
    assert median <= 1.2 and p90 <= 1.6
    assert (median, p90) == pytest.approx((1.18, 1.44), abs=0.005)  # the validation page's figures (docs/validation.md)


def test_each_gpu_left_out_is_off_by_its_systems_host(nvidia: tuple[pd.DataFrame, list]) -> None:
    """The validation page (docs/validation.md): each GPU left out of the fit misses its steps by x1.28 / x1.62 (median
    / p90), and by x1.08 / x1.30 with the host floor its own rows fit (in-sample), the efficiencies still the other
    GPUs'. The three systems' hosts differ: 18.0 us per element-wise op (A100), 30.5 us (V100), 30.0 us (T4)."""
    bench = estimate_error_bench()
    rows, samples = nvidia
    own = bench.own_host_held_out(rows, samples)
    assert {gpu: round(floor * 1e6, 1) for gpu, floor in own.floors_s.items()} == {
        "a100-80gb": 18.0,
        "t4": 30.0,
        "v100-sxm2": 30.5,
    }
    assert percentiles(own.factors) == pytest.approx((1.081, 1.296), abs=0.001)
    others = bench.held_out(samples, list(rows["gpu"]))
    assert percentiles(others) == pytest.approx((1.276, 1.615), abs=0.001)


def test_one_band_serves_both_kinds_of_step_before_hopper(
    nvidia: tuple[pd.DataFrame, list], timm_samples: list
) -> None:
    """The published fit's band (each model left out, its widest way) is one for training steps and inference passes:
    under that way NVIDIA's 72 forward rows are its 90th percentile and its 10 training steps within it, and on timm,
    never fitted to, both kinds are narrower (docs/validation.md). Hopper's differ (test_hopper_estimate)."""
    bench = estimate_error_bench()
    rows, samples = nvidia
    bundled = load_estimate_model()
    assert bundled.kind_errors == {} and bundled.error is not None
    by_model = bench.held_out(samples, list(rows["model"]))
    assert percentiles(by_model)[1] == pytest.approx(bundled.error.p90, abs=1e-4)
    forward = (rows["phases"] != "train").to_numpy()
    assert (forward.sum(), (~forward).sum()) == (72, 10)
    assert percentiles(by_model[forward])[1] == pytest.approx(1.616, abs=0.001)
    assert round(percentiles(by_model[~forward])[1], 2) == 1.38
    timm = error_factors(timm_samples, bundled)
    inference = (ROWS["phases"] != "train").to_numpy()
    found = (percentiles(timm[~inference])[1], percentiles(timm[inference])[1])
    assert found == pytest.approx((1.462, 1.442), abs=0.001)
    assert max(found) < bundled.error.p90


def test_a_queue_of_times_at_roof_predicts_worse_than_the_sum_per_op(
    nvidia: tuple[pd.DataFrame, list], timm_samples: list
) -> None:
    """The validation page's reason to keep the sum per op (issue 24, item 3; bench/host_overlap.py): fitted the same
    way on NVIDIA's rows, an in-order queue of host and kernel times misses more of timm's steps and of each model left
    out than the estimate's sum of max(host time, kernel time) per op."""
    bench = host_overlap_bench()
    rows, samples = nvidia
    found: dict[str, tuple[float, ...]] = {}
    for name in ("per op (hroofline)", "queue"):
        way = bench.WAYS[name]
        fitted = bench.fit(bench.laid_out(samples), way)
        timm = percentiles(bench.factors(bench.laid_out(timm_samples), way, fitted))
        found[name] = (*timm, *percentiles(bench.held_out(samples, list(rows["model"]), way)))
    assert found["per op (hroofline)"] == pytest.approx((1.163, 1.446, 1.217, 1.616), abs=0.001)
    assert found["queue"] == pytest.approx((1.218, 1.662, 1.342, 1.787), abs=0.001)
    # why: fitted on EfficientNet-B0's rows alone (mostly the host's), the queue's efficiencies are loose
    efficientnet = [sample for sample, model in zip(samples, rows["model"], strict=True) if model == "efficientnet_b0"]
    resnet = [sample for sample, model in zip(samples, rows["model"], strict=True) if model == "resnet50"]
    measured = np.array([sample.measured_s for sample in resnet])
    for name, tensor, leaning in (("per op (hroofline)", 0.50, 0.98), ("queue", 0.22, 1.29)):
        way = bench.WAYS[name]
        fitted = bench.fit(bench.laid_out(efficientnet), way)
        estimates = way(bench.laid_out(resnet), fitted.floor_s, fitted.efficiency)
        assert fitted.efficiency[0] == pytest.approx(tensor, abs=0.001)
        assert np.median(estimates / measured) == pytest.approx(leaning, abs=0.005)
