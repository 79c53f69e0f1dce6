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
from tests.validation_page import assert_page_shows, page_figures


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
    """The validation page (docs/validation.md, key depthwise-nvidia): on NVIDIA's rows the depthwise efficiency is
    weakly determined. Moving it from the fitted value to anywhere between 0.4 and 0.8 changes the fit's loss (mean
    squared log error) by under 1% (at 1.0 by under 2%), and depthwise ops are a small share of any row's estimate
    (EfficientNet-B0's; ResNet-50 has none). The page's figures compared one by one."""
    bundled, samples = load_estimate_model(), nvidia[1]
    measured = np.array([sample.measured_s for sample in samples])

    def loss(depthwise: float) -> float:
        model = replace(bundled, efficiency={**bundled.efficiency, "depthwise": depthwise})
        estimates = np.array([estimated_step(sample, model) for sample in samples])
        return float(np.mean(np.log(estimates / measured) ** 2))

    fitted, flat, fastest = loss(bundled.efficiency["depthwise"]), np.linspace(0.4, 0.8, 5), 1.0
    changes = [(loss(value) / fitted - 1) * 100 for value in flat]  # %
    assert min(changes) >= 0 and max(changes) < 1
    at_fastest = (loss(fastest) / fitted - 1) * 100
    assert 1 < at_fastest < 2
    shares = []
    for sample in samples:
        times = estimate_times(sample.roof_s, sample.kinds, bundled)
        shares.append(times[sample.kinds.classes == DEPTHWISE_CLASS].sum() / times.sum())
    figures = [bundled.efficiency["depthwise"], flat[0], flat[-1], max(changes), fastest, at_fastest]
    assert_page_shows(page_figures("depthwise-nvidia"), [*figures, max(shares) * 100], "depthwise on NVIDIA's rows")


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
    under that way NVIDIA's forward rows are its 90th percentile and its training steps within it, and on timm,
    never fitted to, both kinds are narrower (docs/validation.md, key published-band, compared figure by figure).
    Hopper's differ (test_hopper_estimate)."""
    bench = estimate_error_bench()
    rows, samples = nvidia
    bundled = load_estimate_model()
    assert bundled.kind_errors == {} and bundled.error is not None
    by_model = bench.held_out(samples, list(rows["model"]))
    assert percentiles(by_model)[1] == pytest.approx(bundled.error.p90, abs=1e-4)
    forward = (rows["phases"] != "train").to_numpy()
    assert percentiles(by_model[forward])[1] == pytest.approx(bundled.error.p90, abs=0.001)
    assert percentiles(by_model[~forward])[1] < bundled.error.p90
    timm = error_factors(timm_samples, bundled)
    inference = (ROWS["phases"] != "train").to_numpy()
    found = (percentiles(timm[~inference])[1], percentiles(timm[inference])[1])
    assert max(found) < bundled.error.p90
    figures = [forward.sum(), percentiles(by_model[forward])[1], (~forward).sum(), percentiles(by_model[~forward])[1]]
    assert_page_shows(page_figures("published-band"), [*figures, *found], "the published fit's one band")


def test_which_way_the_estimate_leans_on_timms_tables(timm_samples: list) -> None:
    """The validation page's paragraph (docs/validation.md, key timm-leaning): per timm table, the median
    estimate/measured; on the RTX 4090's the estimate's 90th percentile against the bound's."""
    bench, bundled = estimate_error_bench(), load_estimate_model()
    leaning, p90 = {}, {}
    for source, table in ROWS.groupby("source", sort=False):
        mine = [timm_samples[i] for i in table.index]
        ratios = np.array([estimated_step(sample, bundled) for sample in mine]) / table["measured_s"].to_numpy()
        leaning[source] = float(np.median(ratios))
        p90[source] = (percentiles(np.maximum(ratios, 1 / ratios))[1], percentiles(bench.bound_error_factors(mine))[1])
    training = ROWS[ROWS["phases"] == "train"]
    (train_source,) = training["source"].unique()
    (version,) = training["setup"].str.extract(r"PyTorch (\d+\.\d+)")[0].unique()  # "... PyTorch 1.12, CUDA ..."
    forward = ROWS[ROWS["phases"] != "train"]
    figures = [float(version), leaning[train_source], forward["batch"].min(), forward["batch"].max()]
    for source, table in forward.groupby("source", sort=False):
        (gpu,) = table["gpu"].unique()
        figures += [leaning[source], int(gpu.removeprefix("rtx"))]
    (wider,) = [source for source, (estimate, bound) in p90.items() if estimate > bound]
    (gpu,) = ROWS.loc[ROWS["source"] == wider, "gpu"].unique()
    figures += [int(gpu.removeprefix("rtx")), *p90[wider]]
    assert_page_shows(page_figures("timm-leaning"), figures, "which way the estimate leans on timm's tables")


def test_a_queue_of_times_at_roof_predicts_worse_than_the_sum_per_op(
    nvidia: tuple[pd.DataFrame, list], timm_samples: list
) -> None:
    """The validation page's reason to keep the sum per op (issue 24, item 3; bench/host_overlap.py; docs/
    validation.md, key sum-per-op-fits, compared figure by figure): fitted the same way on NVIDIA's rows, an
    in-order queue of host and kernel times misses more of the steps left out (each model, GPU or table), of timm's
    and of the H100's than the estimate's sum of max(host time, kernel time) per op; the whole step as one stretch
    about as many as the queue. The bench's one-parameter search comes within 0.01 of the exhaustive fit's figures
    (the held-out table's)."""
    bench, estimate = host_overlap_bench(), estimate_error_bench()
    rows, samples = nvidia
    h100 = estimate.samples(estimate.h100_rows())
    groups = {
        label: rows[list(columns)].astype(str).agg(":".join, axis=1).tolist()
        for label, columns in estimate.HELD_OUT.items()
    }
    model, gpu = groups["each model (= source) left out"], groups["each GPU left out"]
    table = groups[estimate.PER_TABLE_LABEL]
    found: dict[str, list[float]] = {}
    for name in ("queue", "per op (hroofline)"):
        way = bench.WAYS[name]
        fitted = bench.fit(bench.laid_out(samples), way)
        found[name] = [
            *percentiles(bench.held_out(samples, model, way)),
            *percentiles(bench.factors(bench.laid_out(timm_samples), way, fitted)),
            *percentiles(bench.held_out(samples, gpu, way)),
            *percentiles(bench.held_out(samples, table, way)),
            *percentiles(bench.factors(bench.laid_out(h100), way, fitted)),
        ]
    queue, per_op = found["queue"], found["per op (hroofline)"]
    assert all(q >= p for q, p in zip(queue, per_op, strict=True))  # nowhere better
    bundled = load_estimate_model()
    exhaustive = [
        *percentiles(estimate.held_out(samples, model)),
        *percentiles(error_factors(timm_samples, bundled)),
        *percentiles(estimate.held_out(samples, gpu)),
        *percentiles(estimate.held_out(samples, table)),
        *percentiles(error_factors(h100, bundled)),
    ]
    whole = bench.WAYS["whole step"]
    whole_h100 = percentiles(bench.factors(bench.laid_out(h100), whole, bench.fit(bench.laid_out(samples), whole)))
    figures = [value for pair in zip(queue[::2], queue[1::2], per_op[::2], per_op[1::2], strict=True) for value in pair]
    figures += [*whole_h100, max(abs(b - e) for b, e in zip(per_op, exhaustive, strict=True))]
    # why: fitted on EfficientNet-B0's rows alone (mostly the host's), the queue's efficiencies are loose
    efficientnet = [sample for sample, name in zip(samples, rows["model"], strict=True) if name == "efficientnet_b0"]
    resnet = [sample for sample, name in zip(samples, rows["model"], strict=True) if name == "resnet50"]
    measured = np.array([sample.measured_s for sample in resnet])
    for name in ("queue", "per op (hroofline)"):
        way = bench.WAYS[name]
        fitted = bench.fit(bench.laid_out(efficientnet), way)
        estimates = way(bench.laid_out(resnet), fitted.floor_s, fitted.efficiency)
        figures += [fitted.efficiency[OP_CLASSES.index("tensor")], np.median(estimates / measured)]
    assert_page_shows(page_figures("sum-per-op-fits"), figures, "the fits of the three ways of adding up")
