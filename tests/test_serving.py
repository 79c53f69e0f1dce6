"""Serving traces (issue 47, item 2): a vLLM step split by its own range into prefill and decode requests, its
attention charged the KV cache it reads, and its fused MoE layers (``vllm::moe_forward``) counted.

The files are vLLM's piecewise-graph replay of gpt-oss-20b on an MI300X and the trace vLLM wrote while capturing
those graphs, from AMD-AGI/TraceLens (MIT), copied byte for byte into ../shared/fixtures/compiled/ (its README
gives the repository, paths, commit and blobs). Every expected figure below is counted from the JSON in the test:
the step's range, the ops' recorded shapes, types and concrete inputs."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from hroofline.analyze.serving import serving_steps
from hroofline.api.face import RunView
from hroofline.importers.kineto_links import range_phase
from hroofline.importers.trace_work import op_work
from hroofline.model.phases import parse_phase_option
from hroofline.work.serving_steps import serving_step
from tests.conftest import SHARED, need

COMPILED = SHARED / "fixtures" / "compiled"
REPLAY = COMPILED / "vllm-mi300x-piecewise-replay.json.gz"
CAPTURE = COMPILED / "vllm-mi300x-piecewise-capture.json.gz"
BF16_BYTES = 2  # "c10::BFloat16", as the ops' Input type says (checked below)
# gpt-oss-20b's config.json (huggingface.co/openai/gpt-oss-20b): what metrics/moe_models.toml assumes
GPT_OSS_20B_HIDDEN, GPT_OSS_20B_EXPERT_WIDTH = 2880, 2880


@cache
def _events(path: Path) -> list[dict[str, Any]]:
    return json.loads(gzip.decompress(need(path).read_bytes()))["traceEvents"]


def _ops(path: Path, name: str) -> list[dict[str, Any]]:
    return [e for e in _events(path) if e.get("cat") == "cpu_op" and e["name"] == name]


def _step_sums() -> dict[str, int]:
    """The replay's one step range, read with a pattern of this test's own (TraceLens' vLLM patch writes
    execute_{tokens}_context_{N}(sq..sk..sqsq..sqsk..)_generation_{M}(sq..sk..sqsq..sqsk..))."""
    (annotation,) = [e["name"] for e in _events(REPLAY) if e.get("cat") == "user_annotation"]
    numbers = [int(n) for n in re.findall(r"\d+", annotation)]
    keys = ("tokens", "c_n", "c_sq", "c_sk", "c_sqsq", "c_sqsk", "g_n", "g_sq", "g_sk", "g_sqsq", "g_sqsk")
    return dict(zip(keys, numbers, strict=True)) | {"name": annotation}  # type: ignore[dict-item]


@pytest.fixture(scope="module")
def imported(vllm_joined: tuple[str, Any]) -> tuple[str, Any]:
    """As a user imports it: the replay with its capture."""
    return vllm_joined


def test_vllms_step_range_gives_the_phase_batch_query_tokens_and_context() -> None:
    sums = _step_sums()
    step = serving_step(str(sums["name"]))
    assert step is not None and step.phase == "mixed" and range_phase(str(sums["name"])) == "mixed"
    assert (step.prefill.requests, step.decode.requests, step.batch) == (sums["c_n"], sums["g_n"], 46)
    assert (step.prefill.query_tokens, step.decode.query_tokens) == (sums["c_sq"], sums["g_sq"]) == (8155, 37)
    assert step.query_tokens == sums["tokens"] == 8192  # every scheduled token, the captured batch size
    assert (step.prefill.context_tokens, step.decode.context_tokens) == (sums["c_sk"], sums["g_sk"])
    # decode: one query token a request, so Σsq = Σsq² = requests and Σsq·sk = Σsk
    assert sums["g_sq"] == sums["g_sqsq"] == sums["g_n"] and sums["g_sqsk"] == sums["g_sk"]
    # vLLM's own range (no sums): phase, requests and tokens; no context
    for name, phase in (
        ("execute_context_2(14721)_generation_0(0)", "prefill"),
        ("execute_context_0(0)_generation_64(64)", "decode"),
        ("execute_context_2(6144)_generation_3(3)", "mixed"),
    ):
        native = serving_step(name)
        assert native is not None and native.phase == phase == range_phase(name) and native.context_tokens is None
    assert serving_step("execute_model") is None and parse_phase_option("decode") == "decode"


def test_vllms_attention_is_charged_its_query_key_pairs_and_the_kv_cache_it_reads() -> None:
    """One layer's vllm::unified_attention_with_output in the replay (run eagerly, between the graphs), with the
    step's range around it: causal pairs per request sq (sk - sq) + sq (sq + 1) / 2, summed."""
    sums = _step_sums()
    (attention, *rest) = _ops(REPLAY, "vllm::unified_attention_with_output")
    assert len(rest) == 23 and attention["args"]["Input type"][:3] == ["c10::BFloat16"] * 3
    (tokens, q_heads, dim), (_, kv_heads, _), (_, _, dim_v) = attention["args"]["Input Dims"][:3]
    assert (tokens, q_heads, kv_heads, dim, dim_v) == (8192, 64, 8, 64, 64)
    pairs = sum(sums[f"{g}_sqsk"] - sums[f"{g}_sqsq"] / 2 + sums[f"{g}_sq"] / 2 for g in ("c", "g"))
    work = op_work(attention["name"], attention["args"], (str(sums["name"]),))
    assert work is not None and work.flops == {"flops_fp16": 2 * pairs * q_heads * (dim + dim_v)}
    queries = tokens * q_heads * (dim + dim_v) * BF16_BYTES  # read, and the output written
    cache_read = (sums["c_sk"] + sums["g_sk"]) * kv_heads * (dim + dim_v) * BF16_BYTES
    assert work.bytes == queries + cache_read and work.matmul_flops == work.flops
    # without the step's sums (vLLM's own range, or none) the context is unknown, and so is the work
    assert op_work(attention["name"], attention["args"], ("execute_context_9(8155)_generation_37(37)",)) is None
    assert op_work(attention["name"], attention["args"]) is None


def test_the_kv_cache_write_moves_each_new_tokens_key_and_value() -> None:
    (write, *_) = _ops(CAPTURE, "_C_cache_ops::reshape_and_cache_flash")
    (key, value, key_cache, _, slots, *_) = write["args"]["Input Dims"]
    assert write["args"]["Input type"][:5] == ["c10::BFloat16"] * 4 + ["long int"]
    assert key_cache[2:] == key[1:]  # [blocks, block size, Hkv, D]: the cache holds the key's heads and width
    work = op_work(write["name"], write["args"])
    new = (math.prod(key) + math.prod(value)) * BF16_BYTES
    assert work is not None and work.flops == {"flops_fp32": 0.0}
    assert work.bytes == 2 * new + math.prod(slots) * 8  # read, written into the cache; int64 slot numbers


def test_vllms_moe_layer_is_counted_on_the_model_its_shapes_name() -> None:
    """What the capture trace records of a MoE layer: moe_forward's hidden states (padded) and router logits; the
    routing's top-k (TopK's concrete k), the unpadded hidden width (the pad kernel's input) and the experts'
    intermediate buffer. The formula reads the first from the op and assumes the rest from gpt-oss-20b's config:
    the trace's own figures agree with it."""
    moe = _ops(CAPTURE, "vllm::moe_forward")
    assert len(moe) == 24  # one a layer: gpt-oss-20b's 24
    (hidden, logits, *_) = moe[0]["args"]["Input Dims"]
    tokens, experts = hidden[0], logits[1]
    (top_k,) = {int(e["args"]["Concrete Inputs"][1]) for e in _events(CAPTURE) if e.get("name") == "TopK"}
    (unpadded,) = {
        e["args"]["Input Dims"][0][1] for e in _ops(CAPTURE, "triton_poi_fused_constant_pad_nd_moe_forward_0")
    }
    assert (tokens, hidden[1], experts, top_k, unpadded) == (8192, 3072, 32, 4, GPT_OSS_20B_HIDDEN)
    # the experts' intermediate buffer: tokens x top-k rows of the expert width, padded to a multiple of 128
    assert {tuple(e["args"]["Input Dims"][0]) for e in _ops(CAPTURE, "aten::flatten")} >= {
        (1, tokens * top_k, math.ceil(GPT_OSS_20B_EXPERT_WIDTH / 128) * 128)
    }
    work = op_work(moe[0]["name"], moe[0]["args"])
    d, f = GPT_OSS_20B_HIDDEN, GPT_OSS_20B_EXPERT_WIDTH
    flops = 2 * tokens * top_k * (d * 2 * f + f * d)  # gate and up, then down, per routed token
    assert work is not None and work.flops == {"flops_fp16": flops} and work.matmul_flops == work.flops
    weights = experts * (d * 2 * f + f * d) * 4.25 / 8  # MXFP4: 4 bits and an 8-bit scale per 32 elements
    biases = experts * (2 * f + d) * BF16_BYTES
    activations = 2 * tokens * hidden[1] * BF16_BYTES + tokens * experts * BF16_BYTES
    assert work.bytes == weights + biases + activations
    # a MoE of no listed model (64 experts) keeps its work unknown rather than borrow gpt-oss's sizes
    other = dict(moe[0]["args"], **{"Input Dims": [hidden, [tokens, 64], [], []]})
    assert op_work("vllm::moe_forward", other) is None


def test_the_imported_serving_step_has_its_phase_and_known_work(imported: tuple[str, Any]) -> None:
    """Before: 14.9% of compute-kernel time with known work, vllm::moe_forward 80.4% of it unknown; every launch in
    phase 'other'. Now 100.0% (411 of 413 kernels)."""
    said, run = imported
    launches = run.launches
    kernels = launches[launches["category"] == "kernel"]
    known = kernels.loc[kernels["flops_fp32"].notna(), "time_s"].sum() / kernels["time_s"].sum()
    assert known >= 0.90 and f"{100 * known:.1f}% of compute-kernel time has known work" in said
    assert "assumed from the model its shapes match: gpt-oss-20b" in said and "4 of 32 experts a token" in said
    assert "KV cache assumed in the key's dtype" in said
    assert set(launches["phase"]) == {"mixed"}  # the trace's one step has prefill and decode requests
    # the MoE layers' kernels carry their FLOPs: 24 layers of the formula's, checked above from the shapes
    moe = launches[launches["work_op"] == "vllm::moe_forward"]
    layer = 6 * 8192 * 4 * GPT_OSS_20B_HIDDEN * GPT_OSS_20B_EXPERT_WIDTH
    assert moe["flops_tensor_bf16"].sum() == pytest.approx(24 * layer, rel=1e-9)
    # Inductor's pad of the MoE's input (2880 -> 3072 columns): no FLOPs, its two recorded tensors moved once each
    pads = _ops(CAPTURE, "triton_poi_fused_constant_pad_nd_moe_forward_0")
    padded = launches[launches["kernel"] == pads[0]["name"]]
    assert len(padded) == len(pads) == 24 and (padded["flops_fp32"] == 0).all()
    moved = sum(math.prod(dims) * BF16_BYTES for pad in pads for dims in pad["args"]["Input Dims"][:2])
    assert padded["bytes_hbm"].sum() == pytest.approx(moved, rel=1e-12)


def test_the_serving_steps_table_splits_the_step_and_charges_decode_its_kv_cache(imported: tuple[str, Any]) -> None:
    _, run = imported
    sums = _step_sums()
    (row,) = serving_steps(run).to_dict("records")
    assert (row["phase"], row["batch"], row["prefill_requests"], row["decode_requests"]) == (
        "mixed",
        sums["c_n"] + sums["g_n"],
        sums["c_n"],
        sums["g_n"],
    )
    assert (row["prefill_query_tokens"], row["decode_query_tokens"]) == (sums["c_sq"], sums["g_sq"])
    assert (row["prefill_context_tokens"], row["decode_context_tokens"]) == (sums["c_sk"], sums["g_sk"])
    kernels = [e for e in _events(REPLAY) if e.get("cat") == "kernel"]
    assert row["kernels"] == len(kernels) == 413
    activities = [e for e in _events(REPLAY) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert row["time_s"] == pytest.approx(sum(e["dur"] for e in activities) * 1e-6, rel=1e-9)
    attention = _ops(REPLAY, "vllm::unified_attention_with_output")
    layers, ((_, kv_heads, dim), (_, _, dim_v)) = len(attention), attention[0]["args"]["Input Dims"][1:3]
    kv_cache = sums["g_sk"] * layers * kv_heads * (dim + dim_v) * BF16_BYTES
    assert row["attention_layers"] == layers == 24
    assert row["decode_kv_cache_bytes"] == pytest.approx(kv_cache, rel=1e-12)
    assert row["decode_attention_bytes"] >= kv_cache  # and its queries and output besides
    decode_queries = sums["g_sq"] * layers * 64 * (dim + dim_v) * BF16_BYTES  # 64 query heads
    assert row["decode_attention_bytes"] == pytest.approx(kv_cache + decode_queries, rel=1e-9)
    assert row["work_known"] >= 0.90


def test_the_steps_command_and_the_api_show_the_same_steps(cli, imported: tuple[str, Any]) -> None:
    """`hroofline steps` as a user runs it (the replay without its capture: the step's range is the replay's own),
    RunView.serving_steps() on the joined run; a run without serving steps is refused in one line."""
    _, run = imported
    view = RunView.of(run).serving_steps()
    assert view.to_dict("records") == serving_steps(run).to_dict("records")
    assert cli("import", REPLAY, "--run", "plain").code == 0
    shown = cli("steps", "plain")
    header, row = shown.out.splitlines()
    assert shown.code == 0 and header.split()[:2] == ["step", "phase"] and row.split()[:3] == ["1", "mixed", "46"]
    (cells,) = csv.DictReader(io.StringIO(cli("steps", "plain", "--format", "csv").out))
    sums = _step_sums()
    assert cells["step"] == sums["name"] and (cells["phase"], cells["batch"]) == ("mixed", "46")
    assert (cells["prefill_requests"], cells["decode_requests"]) == (str(sums["c_n"]), str(sums["g_n"]))
    assert (cells["query_tokens"], cells["context_tokens"]) == ("8192", str(sums["c_sk"] + sums["g_sk"]))
    triton = need(COMPILED / "hta-a100-compile-triton.json.gz")
    assert cli("import", triton, "--run", "eager").code == 0
    refused = cli("steps", "eager")
    assert refused.code == 1 and refused.out == "" and len(refused.err.strip().splitlines()) == 1
    assert "run 'eager' has no serving steps" in refused.err


def test_the_serving_step_has_its_mbu_and_an_mfu_that_says_what_it_leaves_out(imported: tuple[str, Any]) -> None:
    """MBU per phase: HBM bytes over the time at the MI300X's 5.3 TB/s (its data sheet); MFU: the BF16 matrix work
    at 2,048 FLOP/CU/cycle x 304 CUs x 2.1 GHz (1,307.4 TFLOP/s), over the time. The RMSNorm and rotary kernels'
    vector FP16 work has no dense peak on the MI300X (AMD's sheet gives none): before, those 73 launches took the
    whole run's MFU away; now they are left out of it, and the reason names them and their share."""
    from hroofline.analyze.utilization import run_utilization

    _, run = imported
    launches = run.launches
    timed = launches[launches["time_s"].notna()]
    time_s = timed["time_s"].sum()
    utilization = run_utilization(run)
    mixed = utilization.groups["mixed"]
    assert mixed.mbu == pytest.approx(timed["bytes_hbm"].sum() / 5.3e12 / time_s, rel=1e-9)
    bf16 = timed["flops_tensor_bf16"].fillna(0).sum()
    assert mixed.mfu == pytest.approx(bf16 / (2048 * 304 * 2.1e9) / time_s, rel=1e-3)
    vector = timed["flops_fp16"].fillna(0).sum()
    assert 0 < vector < 1e-3 * bf16
    (reason,) = [r for r in utilization.reasons if "no dense peak" in r]
    every = timed[[c for c in timed.columns if c.startswith("flops_") and c != "flops_tensor"]].fillna(0).sum().sum()
    assert "(FP16)" in reason and f"{100 * vector / every:.2g}%" in reason
    # the denominator in AMD's words: compute units, not NVIDIA's SMs
    from hroofline.render.utilization import utilization_lines

    (bf16_line,) = [line for line in utilization_lines(utilization) if "BF16 tensor dense" in line]
    assert "2,048 FLOP/CU/cycle × 304 CUs × 2.1 GHz" in bf16_line, bf16_line
