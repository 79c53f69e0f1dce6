"""Traces that record shapes but no argument values (PyTorch before 2.1 writes no ``Concrete Inputs``): an argument
whose value the trace does not give is not taken from the schema's default (the profiler records every argument,
passed or defaulted), and where the recorded tensors list every valid value, each is replayed. The traces are the
2021 Volta ResNet-50 and the 2022 recommender of ../shared/fixtures/kineto; every expected figure is counted here
from the records themselves."""

from __future__ import annotations

import gzip
import json
from functools import cache
from math import prod
from pathlib import Path
from typing import Any

import pytest

from hroofline.api import load
from hroofline.importers.trace_work import op_work
from tests.conftest import SHARED, need
from tests.shared_runs import KINETO_TRACES

FLOAT32 = 4  # bytes


@cache
def _records(key: str, name: str) -> tuple[dict[str, Any], ...]:
    """The distinct recorded arguments of the trace's calls of ``name``."""
    path = need(SHARED / "fixtures" / "kineto" / KINETO_TRACES[key])
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    calls = [e["args"] for e in events if e.get("name") == name]
    distinct = {json.dumps([a.get("Input Dims", a.get("Input dims")), a.get("Input type")]): a for a in calls}
    return tuple(distinct.values())


def _given(args: dict[str, Any], values: list[str]) -> dict[str, Any]:
    """The same record as a PyTorch 2.1+ trace writes it, with its argument values."""
    return {**args, "Concrete Inputs": values}


def test_convolutions_without_their_strides_have_unknown_work(kineto_store: Path) -> None:
    """The Volta trace records conv2d's stride, padding and dilation as present but without values. Its stem
    (7x7 on 224x224) is stride 2, padding 3: the schema's stride 1, padding 0 charged it 218x218 outputs, 3.8 times
    its work, and the step's forward convolutions 372.7 GFLOP against the 261.6 GFLOP that ResNet-50 does at batch
    32 (torch.utils.flop_counter on torchvision's model). Unknown is what the trace can say."""
    (stem,) = [a for a in _records("volta", "aten::conv2d") if a["Input dims"][1] == [64, 3, 7, 7]]
    assert "Concrete Inputs" not in stem and stem["Input dims"][3:6] == [[], [], []]
    assert op_work("aten::conv2d", stem) is None
    launches = load("volta", kineto_store).launches
    convolutions = launches[launches["op"] == "aten::cudnn_convolution"]
    assert len(convolutions) == 576 and convolutions.filter(like="flops_").isna().all().all()
    # with the values a 2.1+ trace records, the stem's work is known: 2 x 7 x 7 x 3 FLOPs per output element
    with_values = op_work("aten::conv2d", _given(stem, ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "1"]))
    assert with_values is not None and sum(with_values.flops.values()) == 2 * 7 * 7 * 3 * 32 * 64 * 112 * 112


def test_layer_norm_shape_from_its_weight() -> None:
    """normalized_shape is a trailing part of the input's shape that layer_norm checks against its weight's: only
    one is valid. The work equals that of the record with the weight's shape given, its bytes the input and output,
    weight and bias, and a mean and a reciprocal deviation per row, in float32."""
    records = _records("recsys", "aten::native_layer_norm")
    assert len(records) >= 3
    for args in records:
        shape, normalized = args["Input Dims"][0], args["Input Dims"][2]
        work = op_work("aten::native_layer_norm", args)
        assert work is not None
        assert work == op_work("aten::native_layer_norm", _given(args, ["", str(normalized), "", "", "1e-05"]))
        elements, rows = prod(shape), prod(shape) // prod(normalized)
        assert work.bytes == FLOAT32 * (2 * elements + 2 * prod(normalized) + 2 * rows)


def test_gather_on_one_axis_needs_no_dim() -> None:
    """A 1-D tensor has one axis: gather's and scatter_add_'s dim can only be 0. Bytes: the source, the index
    (int64) and the output (float32, the index's shape)."""
    args = _records("recsys", "aten::gather")[0]
    source, index = args["Input Dims"][0], args["Input Dims"][2]
    assert len(source) == 1
    work = op_work("aten::gather", args)
    assert work == op_work("aten::gather", _given(args, ["", "0", "", "False"]))
    assert work is not None and work.bytes == FLOAT32 * prod(source) + 8 * prod(index) + FLOAT32 * prod(index)
    scatter = _records("recsys", "aten::scatter_add_")[0]
    assert op_work("aten::scatter_add_", scatter) == op_work("aten::scatter_add_", _given(scatter, ["", "0", "", ""]))


def test_a_reduction_over_unrecorded_axes() -> None:
    """A sum over axes the trace does not say adds every element whichever they are; its bytes are the fewest of
    all the choices (the input read and one element written), as bytes are everywhere the fewest an op moves."""
    records = [
        a
        for a in _records("recsys", "aten::sum")
        if a["Input type"][:2] == ["float", ""] and len(a["Input Dims"][0]) > 1
    ]
    assert len(records) > 10
    for args in records:
        work = op_work("aten::sum", args)
        elements = prod(args["Input Dims"][0])
        assert work is not None and work.flops == {"flops_fp32": elements}
        assert work.bytes == FLOAT32 * (elements + 1)
        over_rows = op_work("aten::sum", _given(args, ["", "[0]", "False", ""]))
        columns = prod(args["Input Dims"][0][1:])
        assert over_rows is not None and over_rows.bytes == work.bytes + FLOAT32 * (columns - 1)
        assert over_rows.flops == work.flops


@pytest.mark.parametrize("key", ["volta", "recsys"])
def test_no_kernel_under_a_guess(kineto_store: Path, key: str) -> None:
    """Shares of compute-kernel time with known work on the two traces (25.5% and 58.9%; 46.7% and 56.0% when
    defaults filled unrecorded values and layer norms and 1-D gathers were unknown)."""
    launches = load(key, kineto_store).launches
    kernels = launches[launches["category"] == "kernel"]
    share = kernels.loc[kernels["flops_fp32"].notna(), "time_s"].sum() / kernels["time_s"].sum()
    assert share == pytest.approx({"volta": 0.255, "recsys": 0.589}[key], abs=0.002)
