"""The host's time per op by kind of op (hroofline/work/host_weights.py, metrics/host_cost.toml): measured on an
H100's host, each op's floor in the estimate."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pandas as pd
import pytest

from hroofline.analyze.estimate import OP_CLASSES, EstimateModel, estimate_times, op_kinds
from hroofline.analyze.layout import predicted_ops
from hroofline.analyze.predict import prediction_peaks
from hroofline.collect.meta_trace import trace_step
from hroofline.collect.workload import WorkloadConfig
from hroofline.roofs.catalog import resolve_gpu
from hroofline.roofs.metricset import metrics_dir
from hroofline.work.host_weights import EVEN_WEIGHTS, load_host_weights
from tests.conftest import REPO

DISPATCH = REPO / "tests" / "data" / "gpu-2026-11-27" / "h100-host-dispatch.json"


def test_the_seconds_are_the_h100_hosts_measurement() -> None:
    """metrics/host_cost.toml holds what tests/data/gpu-2026-11-27/step_times.py measured (float32, not autocast),
    to the four digits it keeps; the weights follow from them as its comment says."""
    measured = json.loads(DISPATCH.read_text())["fp32"]
    seconds = tomllib.loads((metrics_dir() / "host_cost.toml").read_text())["seconds_per_op"]
    assert seconds["elementwise"] == pytest.approx(
        [measured["add"], measured["relu"], measured["add_inplace"]], rel=5e-4
    )
    for kind, probe in (("convolution", "conv2d_3x3"), ("matmul", "linear"), ("batch_norm", "batch_norm_train")):
        assert seconds[kind] == pytest.approx(measured[probe], rel=5e-4)
    assert seconds["batch_norm_counter"] == pytest.approx(measured["add_inplace"], rel=5e-4)
    unit = np.mean([measured["add"], measured["relu"], measured["add_inplace"]])
    weights = load_host_weights()
    assert weights.convolution == pytest.approx(measured["conv2d_3x3"] / unit, rel=1e-3)  # 1.76
    assert weights.matmul == pytest.approx(measured["linear"] / unit, rel=1e-3)  # 1.85
    assert weights.batch_norm == pytest.approx(
        (measured["batch_norm_train"] - measured["add_inplace"]) / unit, rel=1e-3
    )
    assert (round(weights.convolution, 2), round(weights.matmul, 2), round(weights.batch_norm, 2)) == (1.76, 1.85, 3.24)


def test_each_traced_op_takes_its_kinds_weight() -> None:
    """ResNet-50's training step: its 53 convolutions forward and backward, 53 batch norms each way, the linear
    layer's product forward (addmm) and backward (two mm); every other op (ReLU, adds, batch norm's counter,
    pooling, the loss, the optimizer's) weighs 1."""
    launches = trace_step(WorkloadConfig("resnet50", 1, "fp32", "sgd", "meta"), "train")
    weights = pd.Series(load_host_weights().of(launches["kernel"]), index=launches.index)
    by_weight = launches.groupby(weights.round(2))["kernel"].agg(lambda k: dict(k.value_counts()))
    assert by_weight[1.76] == {"aten::convolution": 53, "aten::convolution_backward": 53}
    assert by_weight[3.24] == {"aten::native_batch_norm": 53, "aten::native_batch_norm_backward": 53}
    assert by_weight[1.85] == {"aten::mm": 2, "aten::addmm": 1}
    assert set(by_weight.index) == {1.0, 1.76, 1.85, 3.24}
    assert "aten::add_" in by_weight[1.0] and "aten::relu_" in by_weight[1.0]


def test_a_host_bound_step_takes_the_floor_times_its_weights() -> None:
    """With a floor far above every kernel's time the estimate is the floor times the sum of the weights; with
    even weights, the floor times the ops (the estimate before the weights)."""
    launches = trace_step(WorkloadConfig("efficientnet_b0", 1, "amp", "sgd", "meta"), "forward")
    ops = predicted_ops(launches, prediction_peaks(resolve_gpu("a100"), "amp")).launches
    floor = 1e-3
    model = EstimateModel(floor, dict.fromkeys(OP_CLASSES, 1.0))
    weighed = op_kinds(ops)
    assert estimate_times(ops["time_bound_s"].to_numpy(), weighed, model).sum() == pytest.approx(
        floor * weighed.host_weight.sum(), rel=1e-12
    )
    even = op_kinds(ops, EVEN_WEIGHTS)
    hosted = int(weighed.fitted().sum())  # a layout conversion runs inside its convolution's op: no host time
    assert estimate_times(ops["time_bound_s"].to_numpy(), even, model).sum() == pytest.approx(floor * hosted)
    # EfficientNet's many element-wise ops and autocast's casts: 354 ops, 526 element-wise ops' worth of host time
    assert hosted == 354 and weighed.host_weight.sum() == pytest.approx(526.2, abs=0.1)
