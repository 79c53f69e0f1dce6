"""Kernels named like a GEMM or convolution that do none of its multiply-adds: cuDNN's workspace clearing before an
xmma convolution, its split weight gradients' and CUTLASS's split-K reductions. A trace's op gives its FLOPs to the
kernels that compute (trace_split), so these get none, only their share of the op's bytes; given FLOPs, the
workspace clearing of the H200's compiled resnet50 step ran "faster than its compute roof" (8 launches, 19.5 us
against 41.3 us at the FP16 roof). Real H200 traces of tests/data (their READMEs say how they were made)."""

from __future__ import annotations

import lzma
import tomllib
from functools import cache

import pandas as pd
import pytest

from hroofline.importers.kineto import parse_trace
from hroofline.importers.trace_source import TraceOptions, trace_source
from hroofline.model.quantities import FLOP_QUANTITIES
from hroofline.roofs.metricset import load_metric_set
from tests.conftest import REPO

TRACES = {
    "resnet50-compiled": REPO / "tests" / "data" / "gpu-2026-11-28" / "traces" / "resnet50-bf16-compiled-trace.json.xz",
    "resnet50-eager": REPO / "tests" / "data" / "gpu-2026-11-28" / "traces" / "resnet50-bf16-eager-trace.json.xz",
    "convnext": REPO
    / "tests"
    / "data"
    / "gpu-2026-11-27"
    / "h200-fifth"
    / "convnext_tiny-amp-b32-train-nchw-trace.json.xz",
}
# what each helper's name says, as metrics/hierarchical.toml lists them (lower case)
HELPERS = ("init_device_workspace", "reduce_wgrad", "reducesplitk", "_nhwc_reduce")


@cache
def _launches(key: str) -> pd.DataFrame:
    path = TRACES[key]
    return trace_source(
        parse_trace(lzma.decompress(path.read_bytes()), path), key, TraceOptions(), load_metric_set()
    ).launches


def test_the_metric_set_lists_the_helpers() -> None:
    hints = tomllib.loads((REPO / "metrics" / "hierarchical.toml").read_text(encoding="utf-8"))["tensor_core_kernels"]
    assert set(HELPERS) <= set(hints["setup"])


@pytest.mark.parametrize("key", list(TRACES))
def test_helpers_get_bytes_and_no_flops(key: str) -> None:
    launches = _launches(key)
    names = launches["kernel"].str.lower()
    helpers = launches[
        names.apply(lambda name: any(h in name for h in HELPERS)) & (launches["work_source"] == "formula")
    ]
    assert len(helpers) >= 2
    assert (helpers[list(FLOP_QUANTITIES)].fillna(0).to_numpy() == 0).all()
    assert (helpers["bytes_hbm"] > 0).all()
    # each helper's op still has all its FLOPs: on the kernels launched with it that compute
    flops = launches[list(FLOP_QUANTITIES)].fillna(0).sum(axis=1)
    for op_call in helpers["op_call"].unique():
        assert flops[launches["op_call"] == op_call].sum() > 0


def test_no_kernel_of_the_compiled_step_beats_its_compute_roof(cli) -> None:
    imported = cli("import", TRACES["resnet50-compiled"], "--run", "r")
    assert imported.code == 0
    top = cli("top", "r", "--explain")
    assert top.code == 0 and "faster than their compute roof" not in top.err
