"""The host's time per op measured beside the steps it served: the H200's host-bound steps judged with the fitted
host floor and with each of the three floors measured on that machine (the validation page's figures,
docs/validation.md), and `ceilings --measure` writing this machine's host table (15 s, so not in make test).
tests/test_host_cost.py checks the host files and predict's --host in make test."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hroofline.analyze.calibrate import percentiles
from hroofline.analyze.estimate import EstimateModel, load_estimate_model
from hroofline.collect.host_cost import (
    DEEP_BLOCKS,
    PROBE_BATCH,
    PROBE_WIDTH,
    SHALLOW_BLOCKS,
    probe_host_weight,
)
from hroofline.model.host import STEP_KINDS, HostCost, step_kind
from hroofline.roofs.host_file import load_host_cost
from hroofline.roofs.metricset import metrics_dir
from hroofline.work.host_weights import load_host_weights
from tests.conftest import REPO, estimate_error_bench
from tests.validation_page import assert_page_shows, page_figures

GPU_DATA = REPO / "tests" / "data" / "gpu-2026-11-27"


def test_host_bound_h200_steps_with_the_host_measured_beside_them() -> None:
    """The steps measured on the H200 in the call that measured the three host files (within two minutes on that
    machine), median error with the fitted floor and with each measured one, compared with the validation page's
    paragraph (docs/validation.md, key host-probe-third-visit): at batch 1 (host-bound, training and inference) the
    measured floor is closer for two of the three and farther for the third; at batch 32 (training) it is about as
    close with Hopper's own efficiencies and farther with all three under the published fit."""
    from hroofline.analyze.calibrate import estimated_step
    from hroofline.analyze.estimate import with_host_cost

    steps = pd.read_csv(GPU_DATA / "h200-host-bound-steps.csv")
    hosts = [load_host_cost(GPU_DATA / f"h200-ceilings-measured-{n}.toml") for n in (1, 2, 3)]

    by_batch = {batch: steps[steps["batch"] == batch].reset_index(drop=True) for batch in (1, 32)}
    samples = {batch: estimate_error_bench().samples(rows) for batch, rows in by_batch.items()}

    def medians(batch: int, fitted: EstimateModel) -> list[float]:
        rows = by_batch[batch]
        errors: list[list[float]] = [[], [], [], []]  # the fitted floor, then each measured one
        for row, sample in zip(rows.itertuples(index=False), samples[batch], strict=True):
            phases = "train" if row.phases == "train" else "forward"
            weight = probe_host_weight(step_kind(phases, row.precision), hosts[0].device)
            models = [fitted, *(with_host_cost(fitted, host, phases, row.precision, weight) for host in hosts)]
            for mine, model in zip(errors, models, strict=True):
                ratio = estimated_step(sample, model) / row.measured_s
                mine.append(max(ratio, 1 / ratio))
        assert len(rows) == {1: 16, 32: 22}[batch]
        return [percentiles(np.array(values))[0] for values in errors]

    published, hopper = load_estimate_model(), load_estimate_model().for_cc("9.0")
    computed = [16, *medians(1, published), 22, *medians(32, hopper), *medians(32, published)]
    assert_page_shows(page_figures("host-probe-third-visit"), computed, "the H200's host-bound steps")


def test_the_page_shows_the_probe_and_its_host_weights() -> None:
    """The validation page's paragraph on your host's time per op (docs/validation.md, key host-probe): the probe's
    shape, the mean host weight of its ops in each kind of step (on a GPU), and the default floors predict's
    ``host:`` line gives."""
    weights = [
        probe_host_weight(step_kind(phases, precision), "cuda")
        for phases in ("train", "forward")
        for precision in ("fp32", "amp")
    ]
    floors = load_host_weights().floors(load_estimate_model().host_floor_s)
    computed = [
        PROBE_WIDTH,
        SHALLOW_BLOCKS,
        DEEP_BLOCKS,
        PROBE_BATCH,
        *weights,
        floors["element-wise op"] * 1e6,
        floors["convolution"] * 1e6,
    ]
    assert_page_shows(page_figures("host-probe"), computed, "the paragraph on your host's time per op")


def test_the_page_shows_the_host_weights_and_how_the_probe_reads() -> None:
    """The validation page's paragraphs on the host's time by kind of op (docs/validation.md, keys host-weights and
    host-weights-readings): metrics/host_cost.toml's seconds are the float32 section of the H100's host probe
    (h100-host-dispatch.json), the weights and floors the code takes from them, and the file's autocast section
    read the same way (a cast at an element-wise op's time)."""
    dispatch = json.loads((GPU_DATA / "h100-host-dispatch.json").read_text())
    single, autocast = dispatch["fp32"], dispatch["autocast_fp16"]
    kept = tomllib.loads((metrics_dir() / "host_cost.toml").read_text())
    seconds = kept["seconds_per_op"]
    element_wise = ("add", "relu", "add_inplace")
    assert seconds["elementwise"] == pytest.approx([single[op] for op in element_wise], rel=1e-3)
    assert [seconds["convolution"], seconds["matmul"], seconds["batch_norm"], seconds["batch_norm_counter"]] == (
        pytest.approx(
            [single["conv2d_3x3"], single["linear"], single["batch_norm_train"], single["add_inplace"]], rel=1e-3
        )
    )
    weights, floor = load_host_weights(), load_estimate_model().host_floor_s
    unit = float(np.mean(seconds["elementwise"]))
    calls = int(re.search(r"(\d+) each", kept["measured_on"]).group(1))  # type: ignore[union-attr]
    computed = [
        calls,
        unit * 1e6,
        seconds["convolution"] * 1e6,
        weights.convolution,
        seconds["matmul"] * 1e6,
        weights.matmul,
        (seconds["batch_norm"] - seconds["batch_norm_counter"]) * 1e6,
        weights.batch_norm,
        floor * 1e6,
        weights.floors(floor)["batch norm"] * 1e6,
    ]
    assert_page_shows(page_figures("host-weights"), computed, "the host's time by kind of op")
    cast = float(np.mean([autocast[op] for op in element_wise]))  # a cast taken at an element-wise op's time
    fp32_element_wise = [single[op] for op in element_wise]
    torch_version = re.match(r"(\d+\.\d+)", dispatch["info"]["torch"]).group(1)  # type: ignore[union-attr]
    computed = [
        cast * 1e6,
        unit * 1e6,
        autocast["conv2d_3x3"] * 1e6,
        autocast["batch_norm_train"] * 1e6,
        (autocast["conv2d_3x3"] - 2 * cast) / cast,  # the input's and the weight's casts
        (autocast["linear"] - cast) / cast,  # the input's cast: the parameters' are cached
        (autocast["batch_norm_train"] - autocast["add_inplace"]) / cast,
        single["batch_norm_train"] * 1e6,
        single["batch_norm_train"] / unit,
        floor * 1e6,
        floor / unit,
        min(fp32_element_wise) * 1e6,
        max(fp32_element_wise) * 1e6,
        float(torch_version),
    ]
    assert_page_shows(page_figures("host-weights-readings"), computed, "how the host probe reads")


def test_the_page_shows_the_third_visits_figures() -> None:
    """The third visit's files (docs/validation.md, key third-visit): the host's time per op of the three
    measurements, the batch-1 training steps on that machine and on the first call's, and the 78 steps' layouts."""
    hosts = [load_host_cost(GPU_DATA / f"h200-ceilings-measured-{n}.toml") for n in (1, 2, 3)]
    per_op_us = [host.seconds_per_op[kind] * 1e6 for kind in STEP_KINDS for host in hosts]
    assert list(STEP_KINDS) == ["train_fp32", "train_amp", "forward_fp32", "forward_amp"]  # the page's order
    host_bound = pd.read_csv(GPU_DATA / "h200-host-bound-steps.csv")
    steps = pd.read_csv(GPU_DATA / "h200-step-times.csv")
    single = [
        rows[(rows["batch"] == 1) & (rows["phases"] == "train")]["measured_s"] * 1e3 for rows in (host_bound, steps)
    ]
    assert len(single[0]) == len(single[1]) == 10
    layouts = steps.pivot_table(index=["model", "precision", "batch"], columns="layout", values="measured_s")
    convnext = (layouts.loc["convnext_tiny"]["NCHW"] / layouts.loc["convnext_tiny"]["channels_last"] - 1) * 100
    computed = [
        *per_op_us,
        single[0].min(),
        single[0].max(),
        single[1].min(),
        single[1].max(),
        (host_bound["batch"] == 1).sum(),
        (host_bound["batch"] == 32).sum(),
        len(steps),
        steps["batch"].min(),
        steps["batch"].max(),
        128,
        layouts.loc[("resnet50", "amp", 128), "NCHW"] * 1e3,
        layouts.loc[("resnet50", "amp", 128), "channels_last"] * 1e3,
        layouts.loc[("resnet18", "amp", 128), "NCHW"] * 1e3,
        layouts.loc[("resnet18", "amp", 128), "channels_last"] * 1e3,
        convnext.min(),
        convnext.max(),
    ]
    assert steps["model"].nunique() == 11  # all eleven models
    assert_page_shows(page_figures("third-visit"), computed, "the third visit")


def test_ceilings_measure_writes_the_host_table(cli, tmp_path: Path) -> None:
    out = tmp_path / "mine.toml"
    result = cli("ceilings", "--measure", "--quick", "--out", str(out))
    assert result.code == 0, result.err
    printed = dict(re.findall(r"^  (train_fp32|train_amp|forward_fp32|forward_amp) +([\d.]+ [µm]s)$", result.out, re.M))
    assert set(printed) == set(STEP_KINDS)
    table = tomllib.loads(out.read_text())["host"]
    assert table["device"] == "cpu" and "slope of the median of 10 steps" in table["probe"]
    cost: HostCost = load_host_cost(out)
    for kind, shown in printed.items():  # what it prints is what the file holds, to the digits printed
        value, unit = shown.split()
        assert float(value) * {"µs": 1e-6, "ms": 1e-3}[unit] == pytest.approx(cost.seconds_per_op[kind], rel=5e-3)
