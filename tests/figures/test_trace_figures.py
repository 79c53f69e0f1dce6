"""The validation page's figures of traces (docs/validation.md, keys ``graph-capture``, ``serving``, ``fp8-gemms``
and ``unrecorded-arguments``), recomputed and compared with the page figure by figure: vLLM's piecewise-graph replay
and its capture trace (AMD-AGI/TraceLens, MIT, copied into ../shared/fixtures/compiled/, its README names the blobs),
the H200's FP8 and grouped GEMM traces of tests/data/gpu-2026-11-28/low-precision (its README says how they were
made) and the Volta and recommender traces of ../shared/fixtures/kineto. Counts come from the raw JSON with the
helpers of the make-test tests (tests/test_graph_capture.py, test_serving.py, test_low_precision.py); shares, FLOPs
and bytes from the import as a user runs it."""

from __future__ import annotations

import gzip
import json
import lzma
import math
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from hroofline.analyze.serving import serving_steps
from hroofline.importers.kineto import parse_trace
from hroofline.importers.trace_source import TraceOptions, trace_source
from hroofline.roofs.catalog import resolve_gpu
from hroofline.roofs.ceilings import datasheet_ceilings
from hroofline.roofs.metricset import load_metric_set
from tests.conftest import REPO
from tests.validation_page import assert_page_shows, page_figures

# the ops whose work issue 47 made known (vLLM's fused MoE and Inductor's pad of its input, commit 78125ef; its
# attention and KV-cache write): before, 171 of the 413 kernels had known work (tests/test_graph_capture.py)
ISSUE_47_OPS = (
    "vllm::moe_forward",
    "triton_poi_fused_constant_pad_nd_moe_forward_0",
    "vllm::unified_attention_with_output",
    "_C_cache_ops::reshape_and_cache_flash",
)
LOW_PRECISION = REPO / "tests" / "data" / "gpu-2026-11-28" / "low-precision"
ELEMENT_BYTES = {"c10::BFloat16": 2, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1}


def _linked_and_known(launches: pd.DataFrame, without: tuple[str, ...] = ()) -> tuple[float, float]:
    """% of GPU time on an op, % of compute-kernel time with known work (less the kernels of ops ``without``)."""
    linked = launches.loc[launches["op"].notna(), "time_s"].sum() / launches["time_s"].sum()
    kernels = launches[launches["category"] == "kernel"]
    known = kernels["flops_fp32"].notna() & ~kernels["work_op"].isin(without)
    return 100 * linked, 100 * kernels.loc[known, "time_s"].sum() / kernels["time_s"].sum()


def test_a_graph_replay_joined_with_its_capture(vllm_joined: tuple[str, Any]) -> None:
    from tests.test_graph_capture import REPLAY, _capture_windows, _events, _graph_launches, _inside, _json_bytes

    launches = vllm_joined[1].launches
    plain = trace_source(parse_trace(_json_bytes(REPLAY), REPLAY), "plain", TraceOptions(), load_metric_set())
    joined_linked, joined_known = _linked_and_known(launches)
    plain_linked, plain_known = _linked_and_known(plain.launches)
    before_formulas = _linked_and_known(launches, ISSUE_47_OPS)[1]
    kernels_known = launches[(launches["category"] == "kernel") & launches["flops_fp32"].notna()]
    assert (~kernels_known["work_op"].isin(ISSUE_47_OPS)).sum() == 171
    gemms = [_inside(call, "aten::addmm") for window in _capture_windows() for call in window]
    dims = [gemm["args"]["Input Dims"] for gemm in gemms if gemm is not None]
    products = sum(m * k * n for _, (m, k), (_, n), *_ in dims)
    flops = [c for c in launches.columns if c.startswith("flops_") and c != "flops_tensor"]
    on_addmm = launches.loc[launches["op"] == "aten::addmm", flops].sum().sum()
    kernels = [a for a in _events(REPLAY) if a.get("cat") == "kernel"]
    moe = sum(
        activity["dur"]
        for launch, window in zip(_graph_launches(), _capture_windows(), strict=True)
        for activity, call in zip(launch, window, strict=True)
        if activity["cat"] == "kernel" and _inside(call, "vllm::moe_forward") is not None
    )
    computed = [
        joined_linked,
        plain_linked,
        joined_known,
        plain_known,
        before_formulas,
        float(len(dims)),
        on_addmm / products,  # FLOPs per multiply-add: the 2 of 2 M N K
        100 * moe / sum(kernel["dur"] for kernel in kernels),
    ]
    assert_page_shows(page_figures("graph-capture"), computed, "a graph replay joined with its capture")


def test_a_vllm_serving_step(vllm_joined: tuple[str, Any]) -> None:
    from tests.test_serving import CAPTURE, REPLAY, _events, _ops, _step_sums

    run, sums = vllm_joined[1], _step_sums()
    (row,) = serving_steps(run).to_dict("records")
    moe = _ops(CAPTURE, "vllm::moe_forward")
    (hidden, *_) = moe[0]["args"]["Input Dims"]
    (top_k,) = {int(e["args"]["Concrete Inputs"][1]) for e in _events(CAPTURE) if e.get("name") == "TopK"}
    (unpadded,) = {
        e["args"]["Input Dims"][0][1] for e in _ops(CAPTURE, "triton_poi_fused_constant_pad_nd_moe_forward_0")
    }
    # the experts' width is not in the trace: the import assumes gpt-oss-20b's (metrics/moe_models.toml)
    assumed = tomllib.loads((REPO / "metrics" / "moe_models.toml").read_text(encoding="utf-8"))["gpt-oss-20b"]
    width = assumed["intermediate_size"]
    moe_flops = run.launches.loc[run.launches["work_op"] == "vllm::moe_forward", "flops_tensor_bf16"].sum()
    per_product = moe_flops / len(moe) / (hidden[0] * top_k * unpadded * width)
    attention = _ops(REPLAY, "vllm::unified_attention_with_output")
    (_, kv_heads, dim), (_, _, dim_v) = attention[0]["args"]["Input Dims"][1:3]
    (element,) = {ELEMENT_BYTES[kind] for kind in attention[0]["args"]["Input type"][:3]}
    computed = [
        float(row["prefill_requests"]),
        float(row["prefill_query_tokens"]),
        float(row["prefill_context_tokens"]),
        float(row["decode_requests"]),
        float(row["decode_query_tokens"]),
        float(row["decode_context_tokens"]),
        float(len(moe)),
        moe_flops / 1e12,
        per_product,  # 2 FLOPs a multiply-add, 3 products (gate, up, down)
        float(hidden[0]),
        float(top_k),
        float(unpadded),
        float(width),
        row["decode_attention_bytes"] / 1e9,
        row["decode_kv_cache_bytes"] / 1e9,
        float(sums["g_sk"]),
        float(row["attention_layers"]),
        float(kv_heads),
        float(dim + dim_v),
        float(element),
    ]
    assert_page_shows(page_figures("serving"), computed, "a vLLM serving step")


@cache
def _h200(name: str) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """A low-precision H200 trace's events and its launches as imported."""
    path = LOW_PRECISION / name
    data = lzma.decompress(path.read_bytes())
    launches = trace_source(parse_trace(data, path), "h200", TraceOptions(), load_metric_set()).launches
    return json.loads(data)["traceEvents"], launches


def _kernel(events: list[dict[str, Any]], fragment: str) -> dict[str, Any]:
    (kernel,) = [e for e in events if e.get("cat") == "kernel" and fragment in e["name"]]
    return kernel


def _op_dims(events: list[dict[str, Any]], name: str) -> list[list[list[int]]]:
    return [e["args"]["Input Dims"] for e in _ops(events, name)]


def _ops(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("cat") == "cpu_op" and e["name"] == name]


def _gemm_launched_by(events: list[dict[str, Any]], op: dict[str, Any]) -> dict[str, Any]:
    """The kernel a runtime call made inside ``op`` (on its thread) launched, less the groups' preparation."""
    calls = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") == "cuda_runtime" and e["tid"] == op["tid"] and op["ts"] <= e["ts"] <= op["ts"] + op["dur"]
    }
    (kernel,) = [
        e
        for e in events
        if e.get("cat") == "kernel" and e["args"]["correlation"] in calls and "prepare_grouped" not in e["name"]
    ]
    return kernel


def test_fp8_gemms_of_an_h200_trace_on_their_roof() -> None:
    events, launches = _h200("h200-trace.json.xz")
    subclass_events, subclass = _h200("float8-subclass-h200-trace.json.xz")
    version = (LOW_PRECISION / "log.txt").read_text(encoding="utf-8").split()[0]  # record.py's torch.__version__
    roofs = datasheet_ceilings(resolve_gpu("h200"))
    fp8_roof, bf16_roof = roofs.peak("tensor_fp8"), roofs.peak("tensor_bf16")

    def on_roof(fragment: str, column: str, roof: float, of: pd.DataFrame, kernels: list[dict[str, Any]]) -> list:
        """The kernel's time (µs, the file's) and % of its roof (the import's FLOPs over that time)."""
        (flops,) = of.loc[of["kernel"].str.contains(fragment, regex=False), column]
        seconds = _kernel(kernels, fragment)["dur"] * 1e-6
        return [seconds * 1e6, 100 * flops / seconds / roof]

    per_tensor, rowwise, mixed = _op_dims(events, "aten::_scaled_mm")
    (m, k), (_, n) = per_tensor[:2]
    assert rowwise[:2] == per_tensor[:2]  # "the rowwise-scaled one": the same product
    (m2, k2), (_, n2) = mixed[:2]
    scaled = launches.loc[launches["kernel"].str.contains("nvjet_sm90_qqtst_144x128"), "flops_tensor_fp8"].item()
    (batched_op,) = [op for op in _ops(events, "aten::_grouped_mm") if len(op["args"]["Input Dims"][0]) == 3]
    batched = batched_op["args"]["Input Dims"]
    (groups, rows, inner), (_, _, columns) = batched[:2]
    grouped = launches[launches["kernel"].str.contains("GemmUniversal") & (launches["work_source"] == "formula")]
    batched_seconds = _gemm_launched_by(events, batched_op)["dur"] * 1e-6
    subclass_fp8 = subclass.loc[subclass["kernel"].str.contains("nvjet_sm90_qqtst"), "flops_tensor_fp8"].item()
    computed = [
        float(".".join(version.split(".")[:2])),
        scaled / (m * n * k),  # the 2 of 2 M N K
        scaled / 1e9,
        float(m),
        float(n),
        float(k),
        *on_roof("nvjet_sm90_qqtst_144x128", "flops_tensor_fp8", fp8_roof, launches, events),
        fp8_roof / 1e12,
        scaled / fp8_roof * 1e6,
        *on_roof("nvjet_sm90_qqtst_128x128", "flops_tensor_fp8", fp8_roof, launches, events),
        float(m2),
        float(k2),
        float(n2),
        *on_roof("nvjet_sm90_rqsss", "flops_tensor_fp8", fp8_roof, launches, events),
        float(groups),
        float(rows),
        float(inner),
        float(batched[1][0]),
        float(batched[1][1]),
        float(columns),
        grouped["flops_tensor_bf16"].item() / batched_seconds / 1e12,
        subclass_fp8 / 1e9,
        *on_roof("nvjet_sm90_qqtst", "flops_tensor_fp8", fp8_roof, subclass, subclass_events),
        *on_roof("nvjet_sm90_tst", "flops_tensor_bf16", bf16_roof, subclass, subclass_events),
    ]
    assert math.isclose(grouped["flops_tensor_bf16"].item(), 2 * groups * rows * inner * columns)
    assert_page_shows(page_figures("fp8-gemms"), computed, "FP8 GEMMs of an H200 trace on their roof")


def test_arguments_a_trace_did_not_record(kineto_store: Path) -> None:
    """The 2021 Volta ResNet-50 and 2022 recommender traces of ../shared/fixtures/kineto (no Concrete Inputs):
    what conv2d's schema defaults would charge a step, against FlopCounterMode on torchvision's ResNet-50; the
    shares of compute-kernel time with known work as imported."""
    import torch
    import torchvision
    from torch.utils.flop_counter import FlopCounterMode

    from hroofline.api import load
    from hroofline.importers.trace_work import op_work
    from tests.conftest import SHARED, need
    from tests.shared_runs import KINETO_TRACES

    path = need(SHARED / "fixtures" / "kineto" / KINETO_TRACES["volta"])
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    convolutions = [e["args"] for e in events if e.get("name") == "aten::conv2d"]
    defaults = ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"]  # conv2d's stride, padding, dilation, groups
    charged = [op_work("aten::conv2d", {**args, "Concrete Inputs": defaults}) for args in convolutions]
    per_step = sum(sum(work.flops.values()) for work in charged if work is not None) / len(steps)
    (batch,) = {args["Input dims"][0][0] for args in convolutions if args["Input dims"][1][1] == 3}
    with FlopCounterMode(display=False) as counter:
        torchvision.models.resnet50().to("meta")(torch.empty(batch, 3, 224, 224, device="meta"))
    computed = [
        per_step / 1e9,
        counter.get_flop_counts()["Global"][torch.ops.aten.convolution] / 1e9,
        float(batch),
        _linked_and_known(load("volta", kineto_store).launches)[1],
        _linked_and_known(load("recsys", kineto_store).launches)[1],
    ]
    assert_page_shows(page_figures("unrecorded-arguments"), computed, "arguments a trace did not record")
