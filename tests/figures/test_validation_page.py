"""The validation page's table of held-out errors (docs/validation.md, key ``held-out``), recomputed row by row from
the measured steps and compared with the page, figure by figure, to its printed rounding. A row the page adds, or a
figure that drifts from what the code computes now, fails here with the page's line (tests/test_validation_page.py,
in make test, checks that every row is one this file computes)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hroofline.analyze.calibrate import error_factors, estimated_step, percentiles
from hroofline.analyze.estimate import load_estimate_model
from tests.conftest import SHARED, estimate_error_bench, need
from tests.validation_page import assert_page_shows, page_figures, table_row

TABLE = "held-out"


def shows(label: str, *computed: float) -> None:
    assert_page_shows(table_row(TABLE, label), list(computed), f"the row {label!r}")


def nchw_kinds(figures: dict[str, tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """The figures of the rows' NCHW kinds of step in the page's order (training at batch 32 and 128, at batch 1,
    inference at batch 64, at batch 1): channels_last training has a row of its own."""
    kinds = ["training, batch 32 and 128", "training, batch 1", "inference, batch 64", "inference, batch 1"]
    return [figures[kind] for kind in kinds if kind in figures]


@pytest.fixture(scope="module")
def nvidia() -> tuple[pd.DataFrame, list]:
    rows = pd.read_csv(need(SHARED / "reference" / "published-step-times.csv"))
    return rows, estimate_error_bench().samples(rows)


@pytest.fixture(scope="module")
def timm() -> tuple[pd.DataFrame, list]:
    bench = estimate_error_bench()
    rows = pd.read_csv(bench.OTHER_SOURCE)
    return rows, bench.samples(rows)


@pytest.fixture(scope="module")
def hopper():
    return estimate_error_bench().hopper_fit(load_estimate_model().host_floor_s)


def test_the_published_fit_on_nvidias_and_timms_rows(nvidia, timm) -> None:
    bench, published = estimate_error_bench(), load_estimate_model()
    (rows, found), (other_rows, other) = nvidia, timm
    on_timm = error_factors(other, published)
    shows("another source, never fitted to", *percentiles(on_timm))
    groups = {
        label: rows[list(columns)].astype(str).agg(":".join, axis=1).tolist()
        for label, columns in bench.HELD_OUT.items()
    }
    by_table = bench.held_out(found, groups[bench.PER_TABLE_LABEL])
    shows("each NVIDIA table", *percentiles(by_table))
    forward = bench.inference_rows(rows, by_table, other_rows, on_timm)
    single = by_table[((rows["phases"] != "train") & (rows["batch"] == 1)).to_numpy()]
    assert len(forward) == 184 and len(single) == 8  # as the row says
    (median, p90), (single_median, single_p90) = percentiles(forward), percentiles(single)
    shows("inference on its own", median, single_median, p90, single_p90)
    by_gpu, own_host = bench.held_out(found, list(rows["gpu"])), bench.own_host_held_out(rows, found)
    (gpu_median, gpu_p90), (own_median, own_p90) = percentiles(by_gpu), percentiles(own_host.factors)
    shows("each NVIDIA GPU left out", gpu_median, own_median, gpu_p90, own_p90)
    by_model = percentiles(bench.held_out(found, list(rows["model"])))
    shows("each of NVIDIA's two models left out", *by_model)
    # the paragraph on the widest band: the band (each model left out), each GPU's own host floor (V100, T4, A100)
    # against the fit's, and each GPU left out with its own floor and with the others'
    floors_us = [own_host.floors_s[gpu] * 1e6 for gpu in ("v100-sxm2", "t4", "a100-80gb")]
    widest = [by_model[1], *floors_us, published.host_floor_s * 1e6, own_median, own_p90, gpu_median, gpu_p90]
    assert_page_shows(page_figures("widest-band"), widest, "the paragraph on the widest band")
    (nvidia_median, nvidia_p90) = percentiles(bench.bound_error_factors(found))
    (timm_median, timm_p90) = percentiles(bench.bound_error_factors(other))
    shows("the roofline bound alone", nvidia_median, timm_median, nvidia_p90, timm_p90)


def test_the_pages_definitions(nvidia, timm) -> None:
    """The opening's figures: the error factor's example (the table's first row) and the goals; the batch range of
    the steps the estimate is fitted to; the published steps measured faster than their bound, by how much, and
    which (their batch and GPUs)."""
    bench, published = estimate_error_bench(), load_estimate_model()
    (rows, found), (other_rows, other) = nvidia, timm
    example = percentiles(error_factors(other, published))
    goals = [bench.GOAL_MEDIAN, bench.GOAL_P90, *bench.H100_GOAL]
    assert_page_shows(page_figures("error-factor"), [*example, *goals], "the error factor's reading")
    batches = [rows["batch"].min(), rows["batch"].max()]
    assert_page_shows(page_figures("estimate"), batches, "the estimate's fitted steps")
    steps = pd.concat([rows, other_rows], ignore_index=True)
    bounds = np.array([sample.roof_s.sum() for sample in found + other])
    faster = bounds > steps["measured_s"].to_numpy()
    below = (1 - steps["measured_s"].to_numpy()[faster] / bounds[faster]) * 100  # % faster than the bound
    (batch,) = steps.loc[faster, "batch"].unique()
    gpus = sorted(int(gpu.removeprefix("rtx")) for gpu in steps.loc[faster, "gpu"].unique())
    figures = [faster.sum(), len(steps), below.min(), below.max(), batch, *gpus]
    assert_page_shows(page_figures("bound"), figures, "the steps faster than their bound")


def test_both_sources_each_model_left_out(nvidia, timm) -> None:
    (rows, found), (other_rows, other) = nvidia, timm
    pooled = estimate_error_bench().held_out(found + other, [*rows["model"], *other_rows["model"]])
    assert len(set(rows["model"]) | set(other_rows["model"])) == 58  # as the row says
    shows("both sources, each of the 58 models left out", *percentiles(pooled))


def test_the_published_fit_on_hopper_steps() -> None:
    bench, published = estimate_error_bench(), load_estimate_model()
    shared = bench.h100_rows()
    assert len(shared) == 24
    median, p90 = percentiles(error_factors(bench.samples(shared), published))
    shows("Hopper, never fitted to", median, p90, *bench.H100_GOAL)
    more = bench.timed_steps(bench.H100_MORE)
    ratios = np.array([estimated_step(s, published) / s.measured_s for s in bench.samples(more)])
    figures = bench.kind_figures(more, ratios)
    kinds = nchw_kinds(figures)
    shows("Hopper, five more models", *[k[0] for k in kinds], *[k[1] for k in kinds])
    # the paragraph below the table: which way the estimate leans on the shared fp32 steps and at batch 1
    fp32 = [s for s, precision in zip(bench.samples(shared), shared["precision"], strict=True) if precision == "fp32"]
    (single,) = more.loc[bench.step_kinds(more)["training, batch 1"], "batch"].unique()
    leaning = [np.median([estimated_step(s, published) / s.measured_s for s in fp32]), single]
    leaning += [figures[kind][2] for kind in ("training, batch 1", "inference, batch 1")]
    assert_page_shows(page_figures("h100-leaning"), leaning, "the paragraph on which way the estimate leans")
    channels_last = []
    for path in (bench.H100_MORE, bench.H200_STEPS):
        rows = bench.timed_steps(path)
        rows = rows[(rows["layout"] == "channels_last") & (rows["phases"] == "train") & (rows["batch"] > 1)]
        channels_last.append(percentiles(error_factors(bench.samples(rows.reset_index(drop=True)), published)))
        assert len(rows) == (4 if path == bench.H100_MORE else 12)  # as the row says
    (h100_median, h100_p90), (h200_median, h200_p90) = channels_last
    shows("Hopper, channels_last training steps", h100_median, h200_median, h100_p90, h200_p90)
    layouts = pd.read_csv(bench.H200_LAYOUTS)
    found = bench.samples(layouts)
    (median, p90), (own_median, own_p90) = (
        percentiles(error_factors(found, model)) for model in (published, published.for_cc(bench.HOPPER_CC))
    )
    shows("Hopper, 20 training steps at batch 128", median, own_median, p90, own_p90)


def test_hoppers_own_efficiencies(hopper) -> None:
    bench = estimate_error_bench()
    train = (hopper.rows["phases"] == "train").to_numpy()
    assert len(hopper.rows) == 168 and train.sum() == 144  # as the row says
    (median, p90), (train_median, train_p90), (forward_median, forward_p90) = (
        percentiles(factors) for factors in (hopper.factors, hopper.factors[train], hopper.factors[~train])
    )
    shows("Hopper's own efficiencies (below)", median, train_median, forward_median, p90, train_p90, forward_p90)
    shows("of them the 24 H100 training steps", *percentiles(bench.shared_h100_factors(hopper)))
    visits = (("Hopper's own efficiencies (what", bench.H200_FIFTH), ("the same eight models", bench.H100_SIXTH))
    for label, path in visits:
        rows = bench.timed_steps(path)
        ratios = np.array([estimated_step(s, hopper.model) / s.measured_s for s in bench.samples(rows)])
        kinds = nchw_kinds(bench.kind_figures(rows, ratios))
        shows(label, *[k[0] for k in kinds], *[k[1] for k in kinds])
