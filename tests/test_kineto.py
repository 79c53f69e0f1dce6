"""PyTorch profiler (Kineto) traces: the real traces of ../shared/fixtures/kineto, checked against an
independent read of their JSON."""

from __future__ import annotations

import bisect
import gzip
import json
import shutil
from collections import defaultdict
from functools import cache
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest

from hroofline.api import load
from hroofline.importers.collectives import bus_bytes, is_communication
from hroofline.importers.kineto_links import module_path, range_phase
from hroofline.store.rank_sql import ranks_duckdb
from hroofline.store.runs import RunStore
from tests.conftest import SHARED, need, tree_digest
from tests.shared_runs import KINETO_TRACES

TRACES = KINETO_TRACES  # run name -> file of ../shared/fixtures/kineto, imported into kineto_store
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"}


def trace_path(key: str) -> Path:
    return need(SHARED / "fixtures" / "kineto" / TRACES[key])


@cache
def read_events(key: str) -> dict[str, Any]:
    """A trace's JSON, read once per worker: read only (fresh_events gives a copy to change)."""
    return fresh_events(key)


def fresh_events(key: str) -> dict[str, Any]:
    return json.loads(gzip.decompress(trace_path(key).read_bytes()))


def gpu_events(document: dict[str, Any]) -> list[dict[str, Any]]:
    events = document["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() in GPU_CATEGORIES]


def linked_share(document: dict[str, Any]) -> float:
    """Independently: the share of GPU time whose runtime call (same correlation) lies inside a CPU op on
    its own thread (not a user range: no ``user_annotation``, no ``ProfilerStep#N``)."""
    events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
    runtime = {
        e["args"]["correlation"]: e
        for e in events
        if str(e.get("cat", "")).lower() in ("cuda_runtime", "runtime") and "correlation" in e.get("args", {})
    }
    ops: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op" or (e.get("cat") == "Operator" and not e["name"].startswith("ProfilerStep#")):
            ops[(str(e["pid"]), str(e["tid"]))].append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    starts = {k: sorted(v) for k, v in ops.items()}
    # per thread, the latest end among the ops started so far: a call lies in an op when an op that started at or
    # before it ends at or after it
    latest_end = {k: list(accumulate((end for _, end in v), max)) for k, v in starts.items()}
    total = linked = 0.0
    for event in gpu_events(document):
        total += event["dur"]
        call = runtime.get(event["args"].get("correlation"))
        if call is None:
            continue
        thread = (str(call["pid"]), str(call["tid"]))
        upto = bisect.bisect_right(starts.get(thread, []), (call["ts"], float("inf")))
        if upto and latest_end[thread][upto - 1] >= call["ts"]:
            linked += event["dur"]
    return linked / total


@pytest.mark.parametrize("key", ["ddp", "recsys", "volta"])
def test_every_gpu_activity_with_its_measured_duration(kineto_store: Path, key: str) -> None:
    document = read_events(key)
    expected = gpu_events(document)
    run = load(key, kineto_store)
    launches = run.launches
    assert len(launches) == len(expected)
    kernels = [e for e in expected if str(e["cat"]).lower() == "kernel"]
    assert (launches["category"].isin(["kernel", "communication"])).sum() == len(kernels)
    assert launches["time_s"].sum() == pytest.approx(sum(e["dur"] for e in expected) * 1e-6, rel=1e-12)
    kernel_time = launches.loc[launches["category"].isin(["kernel", "communication"]), "time_s"].sum()
    assert kernel_time == pytest.approx(sum(e["dur"] for e in kernels) * 1e-6, rel=1e-12)
    assert run.meta.sources[0].kind == "kineto"


def test_launch_ids_are_launch_order(kineto_store: Path) -> None:
    """The JSON lists activities per stream; launch_id follows the runtime calls that launched them. In the
    DDP trace every activity has its call, so the whole sequence is known independently."""
    document = read_events("ddp")
    calls = {e["args"]["correlation"]: e["ts"] for e in document["traceEvents"] if e.get("cat") == "cuda_runtime"}
    activities = gpu_events(document)
    assert all(e["args"]["correlation"] in calls for e in activities)
    in_json_order = [e["name"] for e in activities]
    in_launch_order = [e["name"] for e in sorted(activities, key=lambda e: calls[e["args"]["correlation"]])]
    assert in_json_order != in_launch_order  # the JSON's order is not launch order
    launches = load("ddp", kineto_store).launches.sort_values("launch_id")
    assert list(launches["kernel"]) == in_launch_order


@pytest.mark.parametrize(("key", "rank"), [("ddp", 0), ("recsys", 3), ("volta", 0)])
def test_ranks(kineto_store: Path, key: str, rank: int) -> None:
    assert set(load(key, kineto_store).launches["rank"]) == {rank}


@pytest.mark.parametrize("key", ["ddp", "recsys", "volta"])
def test_share_of_time_linked_to_an_op(kineto_store: Path, key: str) -> None:
    launches = load(key, kineto_store).launches
    share = launches.loc[launches["op"].notna(), "time_s"].sum() / launches["time_s"].sum()
    assert share == pytest.approx(linked_share(read_events(key)), abs=1e-9)


def test_recsys_share_of_kernel_time_with_analytic_flops(kineto_store: Path) -> None:
    """The recsys trace recorded shapes: its aten ops get analytic work; fbgemm's ops and the NCCL
    kernels have none. 58.9% of compute-kernel time is the share found (54.4% before out= calls counted as their
    op: its aten::mul, nan_to_num and logical_and with out=; 56.0% before the arguments the 2022 trace records no
    value for were listed: its layer norms' normalized_shape from their weights, its gathers' dim on 1-D tensors);
    it can only be below the share of kernels launched under an op with shapes."""
    launches = load("recsys", kineto_store).launches
    kernels = launches[launches["category"] == "kernel"]
    known = kernels["flops_fp32"].notna()
    assert (known == kernels["bytes_hbm"].notna()).all()  # work is known whole or not at all
    share = kernels.loc[known, "time_s"].sum() / kernels["time_s"].sum()
    assert share == pytest.approx(0.589, abs=0.002)
    with_shapes = kernels["shapes"].notna()
    assert share <= kernels.loc[with_shapes, "time_s"].sum() / kernels["time_s"].sum()
    # Every aten::mm op of the trace that no aten::linear encloses (those count as the linear), independently:
    # 2 M N K FLOPs for (M x K) by (K x N), float32.
    document = read_events("recsys")
    ops = [e for e in document["traceEvents"] if e.get("cat") == "cpu_op"]
    linears = [(e["tid"], e["ts"], e["ts"] + e["dur"]) for e in ops if e["name"] == "aten::linear"]
    mm_ops = [
        e
        for e in ops
        if e["name"] == "aten::mm"
        and e["args"].get("Input type") == ["float", "float"]
        and not any(t == e["tid"] and a <= e["ts"] <= b for t, a, b in linears)
    ]
    expected = sum(2 * a[0] * a[1] * b[1] for e in mm_ops for a, b in [e["args"]["Input Dims"]])
    counted = kernels[kernels["work_op"] == "aten::mm"]
    flops = counted[["flops_fp32", "flops_tensor_tf32"]].fillna(0).sum().sum()
    assert len(mm_ops) > 100 and flops == pytest.approx(expected, rel=1e-12)


def test_alexnet_cupti_counters_are_measured_flops(kineto_store: Path) -> None:
    document = read_events("alexnet")
    ranges = [e for e in document["traceEvents"] if e.get("cat") == "cuda_profiler_range"]
    prefix = "smsp__sass_thread_inst_executed_op_"

    def total(kind: str) -> float:
        return float(
            sum(
                r["args"][f"{prefix}{kind}add_pred_on.sum"]
                + r["args"][f"{prefix}{kind}mul_pred_on.sum"]
                + 2 * r["args"][f"{prefix}{kind}fma_pred_on.sum"]
                for r in ranges
            )
        )

    run = load("alexnet", kineto_store)
    assert len(run.launches) == len(ranges) == 77
    assert run.launches["flops_fp32"].sum() == total("f") == pytest.approx(7.97e10, rel=1e-3)
    assert run.launches["flops_fp16"].sum() == total("h")
    assert run.launches["flops_fp64"].sum() == total("d") == 0
    assert run.launches["time_s"].isna().all()  # range time is replay time, not kernel time
    assert (run.launches["phase"] == "forward").sum() >= 76


def test_ddp_nccl_kernels_are_communication_per_phase(cli, kineto_store: Path) -> None:
    document = read_events("ddp")
    nccl = [e for e in gpu_events(document) if e["name"].startswith("ncclKernel")]
    launches = load("ddp", kineto_store).launches
    communication = launches[launches["category"] == "communication"]
    assert len(communication) == len(nccl) == 21
    assert communication["time_s"].sum() == pytest.approx(sum(e["dur"] for e in nccl) * 1e-6, rel=1e-12)
    per_phase = communication.groupby("phase")["time_s"].count().to_dict()
    assert per_phase == {"backward": 15, "forward": 6}  # DDP's gradient all-reduces; its start-up broadcasts
    # all-reduce over 2 ranks: 2 (n - 1) / n x elements x 4 bytes (float)
    first = next(e for e in nccl if "AllReduce" in e["name"])
    row = communication[communication["time_s"] == first["dur"] * 1e-6].iloc[0]
    assert row["bytes_link"] == first["args"]["In msg nelems"] * 4
    result = cli("summary", "ddp", "--format", "json", "--store", kineto_store)
    phases = json.loads(result.out)["phases"]
    assert phases["backward"]["communication_s"] == pytest.approx(per_phase_time("backward", nccl, document))
    assert phases["forward"]["communication_s"] == pytest.approx(per_phase_time("forward", nccl, document))


def per_phase_time(phase: str, kernels: list[dict[str, Any]], document: dict[str, Any]) -> float:
    """Independently: DDP's all-reduces run in backward, its broadcasts (start-up) in forward."""
    kind = "AllReduce" if phase == "backward" else "Broadcast"
    return sum(e["dur"] for e in kernels if kind in e["name"]) * 1e-6


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ranks 0 (ddp) and 3 (recsys) in one run, imported with --merge name, which joins ncu passes per kernel name
    and leaves traces (whole measurements) apart as without it: one import for the tests of both."""
    from hroofline.cli.main import main

    store = tmp_path_factory.mktemp("ranks") / "store"
    sources = [str(trace_path("ddp")), str(trace_path("recsys"))]
    assert main(["import", *sources, "--run", "ranks", "--gpu", "a100", "--merge", "name", "--store", str(store)]) == 0
    return store


def test_two_ranks_in_one_run(cli, two_ranks: Path) -> None:
    table = cli("summary", "ranks", "--by", "rank", "--format", "json", store_dir=two_ranks)
    data = json.loads(table.out)
    ranks = {row["key"] for row in data["rows"]}
    assert ranks == {0, 3}
    run = load("ranks", two_ranks)
    for row in data["rows"]:
        rows = run.launches[(run.launches["rank"] == row["key"]) & (run.launches["phase"] == row["phase"])]
        assert row["time_s"] == pytest.approx(rows["time_s"].sum(), rel=1e-12)
    backward = next(s for s in data["spread"] if s["phase"] == "backward")
    # compared outside communication: a fast rank waits for a slow one inside its collectives
    times = {r["key"]: r["time_s"] - r["communication_s"] for r in data["rows"] if r["phase"] == "backward"}
    assert backward["slowest_rank"] == max(times, key=times.get)
    assert backward["extra_s"] == pytest.approx(max(times.values()) - sum(times.values()) / 2, rel=1e-12)
    allreduce = next(c for c in data["communication"] if "AllReduce" in c["kernel"] and c["phase"] == "backward")
    rows = run.launches[
        (run.launches["kernel"] == allreduce["kernel"])
        & (run.launches["phase"] == "backward")
        & (run.launches["rank"] == allreduce["rank"])
    ]
    assert allreduce["launches"] == len(rows)
    timed = rows[rows["bytes_link"].notna()]
    assert allreduce["bus_byte_per_s"] == pytest.approx(timed["bytes_link"].sum() / timed["time_s"].sum(), rel=1e-12)
    assert allreduce["roof_byte_per_s"] == 300e9  # A100 SXM4: NVLink 3, 600 GB/s both directions
    assert allreduce["roof"] == "node"  # 2 ranks: within a node
    assert allreduce["roof_pct"] == pytest.approx(100 * allreduce["bus_byte_per_s"] / 300e9, rel=1e-12)
    # the table says the roof once, in SI, in its heading; no column of raw byte/s
    text = cli("summary", "ranks", "--by", "rank", store_dir=two_ranks).out
    assert "within a node NVLink 3 x12 300 GB/s" in text and "300,000,000,000" not in text
    launch_table = cli("kernels", "ranks", "--group-by", "launch", "--format", "csv", store_dir=two_ranks)
    assert "rank" in launch_table.out.splitlines()[0].split(",")
    check_rank_sql(RunStore(two_ranks), data)


def check_rank_sql(store: RunStore, data: dict[str, Any]) -> None:
    """The DuckDB aggregation of the run's ranks (hroofline.store.rank_sql) gives analyze/ranks.py's numbers:
    its time, communication and launches per rank and phase, and its median and slowest rank per phase."""
    table = ranks_duckdb(store, "ranks")
    launched = table[table["launches"] > 0]
    assert len(launched) == len(data["rows"])
    for row in data["rows"]:
        got = launched[(launched["rank"] == row["key"]) & (launched["phase"] == row["phase"])].iloc[0]
        assert got["time_s"] == pytest.approx(row["time_s"], rel=1e-12)
        assert got["communication_s"] == pytest.approx(row["communication_s"], rel=1e-12, abs=1e-15)
        assert got["launches"] == row["launches"]
    assert {s["phase"] for s in data["spread"]} == set(table["phase"])
    for spread in data["spread"]:
        rows = table[table["phase"] == spread["phase"]]
        assert rows["phase_ranks"].iloc[0] == spread["ranks"]
        assert rows["slowest_rank"].iloc[0] == spread["slowest_rank"]
        assert rows["median_compute_s"].iloc[0] == pytest.approx(spread["median_s"], rel=1e-12)
        assert rows["compute_s"].max() == pytest.approx(spread["slowest_s"], rel=1e-12)


def kernels_in_steps(document: dict[str, Any], numbers: list[int]) -> list[dict[str, Any]]:
    """Independently: the GPU events whose runtime call lies in one of the ProfilerStep#N ranges ``numbers``."""
    events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
    steps = {e["name"]: (e["ts"], e["ts"] + e["dur"]) for e in events if e["name"].startswith("ProfilerStep#")}
    runtime = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
    wanted = [steps[f"ProfilerStep#{n}"] for n in numbers]
    return [
        e for e in gpu_events(document) if any(a <= runtime.get(e["args"]["correlation"], -1) <= b for a, b in wanted)
    ]


def test_steps_pick_profiler_steps(cli) -> None:
    expected = kernels_in_steps(read_events("ddp"), [5, 6])
    assert cli("import", trace_path("ddp"), "--run", "two-steps", "--steps", "5-6").code == 0
    launches = load("two-steps", cli.store).launches
    assert len(launches) == len(expected)
    assert set(launches["step"]) == {5, 6}
    result = cli("import", trace_path("ddp"), "--run", "none", "--steps", "9")
    assert result.code == 1 and "holds steps 4, 5, 6" in result.err


def test_display_time_unit_does_not_change_the_unit(cli, kineto_store: Path, tmp_path: Path) -> None:
    """ts and dur are microseconds whatever displayTimeUnit says (Kineto writes "ns" in builds with
    DISPLAY_TRACE_IN_NS and still writes microseconds): the same trace imports to the same seconds."""
    document = fresh_events("ddp")
    assert document["displayTimeUnit"] == "ms"
    document["displayTimeUnit"] = "ns"
    relabelled = tmp_path / "ns.json"
    relabelled.write_text(json.dumps(document))
    assert cli("import", relabelled, "--run", "ns").code == 0
    a, b = load("ns", cli.store).launches, load("ddp", kineto_store).launches  # the trace as it is, imported once
    assert list(a["time_s"]) == list(b["time_s"])
    kernels = a.loc[a["category"].isin(["kernel", "communication"]), "time_s"].sum()
    assert kernels == pytest.approx(0.16253234, rel=1e-9)  # PROVENANCE: 2,700 kernels, 162.5 ms


@pytest.fixture
def store_with_trace(kineto_store: Path, tmp_path: Path) -> Path:
    """A copy of the session's store of traces (run ddp among them), for a test that imports into it."""
    store = tmp_path / "traces"
    shutil.copytree(kineto_store, store)
    return store


def _refused(cli, store: Path, source: Path, expected: str) -> None:
    before = tree_digest(store)
    for run in ("ddp", "fresh"):  # a run the store has, and a new one
        result = cli("import", source, "--run", run, store_dir=store)
        assert result.code == 1, result
        assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
        assert expected in result.err, result.err
        assert tree_digest(store) == before


def test_cut_gzip_trace(cli, store_with_trace: Path, tmp_path: Path) -> None:
    data = trace_path("ddp").read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    _refused(cli, store_with_trace, cut, "gzip data is truncated")


def test_cut_json_trace(cli, store_with_trace: Path, tmp_path: Path) -> None:
    text = gzip.decompress(trace_path("ddp").read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: len(text) // 3])
    _refused(cli, store_with_trace, cut, "is the file truncated")


def test_json_that_is_not_a_trace(cli, store_with_trace: Path, tmp_path: Path) -> None:
    other = tmp_path / "config.json"
    other.write_text(json.dumps({"model": "resnet18", "batch": 32}))
    _refused(cli, store_with_trace, other, "not a PyTorch profiler (Kineto) trace")


def test_trace_without_gpu_kernels(cli, store_with_trace: Path, tmp_path: Path) -> None:
    document = fresh_events("ddp")
    document["traceEvents"] = [
        e for e in document["traceEvents"] if str(e.get("cat", "")).lower() not in GPU_CATEGORIES | {"kernel"}
    ]
    cpu_only = tmp_path / "cpu_only.json"
    cpu_only.write_text(json.dumps(document))
    _refused(cli, store_with_trace, cpu_only, "no GPU kernels")


@pytest.mark.parametrize(
    ("name", "phase"),
    [
        ("## forward ##", "forward"),
        ("## backward ##", "backward"),
        ("DistributedDataParallel.forward", "forward"),
        ("Optimizer.step#SGD.step", "optimizer"),
        ("Optimizer.zero_grad#SGD.zero_grad", "optimizer"),
        ("## forward:pos_w ##", "forward"),
        ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", "forward"),
        ("ProfilerStep#4", None),
        ("Trainer.step", None),
        ("nccl:all_reduce", None),
        ("## all2all_data:lengths ##", None),
    ],
)
def test_range_phase(name: str, phase: str | None) -> None:
    assert range_phase(name) == phase


def test_communication_names_and_bus_bytes() -> None:
    assert is_communication("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    assert is_communication("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)")
    assert not is_communication("void at::native::vectorized_elementwise_kernel<4, float>")
    args = {"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "Group size": 8}
    assert bus_bytes({**args, "dtype": "Float"}) == 2 * 7 / 8 * 1000 * 4
    assert bus_bytes({**args, "dtype": "Float", "Collective name": "all_gather"}) == 7 / 8 * 1000 * 4
    assert bus_bytes({**args, "dtype": "BFloat16", "Collective name": "broadcast"}) == 1000 * 2
    gather = {**args, "Collective name": "all_gather", "In msg nelems": 125, "Out msg nelems": 1000, "dtype": "Half"}
    assert bus_bytes(gather) == 7 / 8 * 1000 * 2  # the gathered message, not one rank's part
    assert bus_bytes({**args, "dtype": "Float", "In msg nelems": "inf"}) is None
    assert bus_bytes({"Collective name": "allreduce"}) is None


def test_module_path() -> None:
    assert module_path("TOP(ResNet)::layer1(Sequential)::0(BasicBlock)::conv1(Conv2d)") == "layer1.0.conv1"
    assert module_path("") is None


def test_traces_are_never_joined_as_passes(two_ranks: Path) -> None:
    """--merge name joins ncu passes per kernel name; traces (whole measurements, one per rank) stay apart."""
    run = load("ranks", two_ranks)
    assert len(run.meta.sources) == 2
    assert len(run.launches) == len(gpu_events(read_events("ddp"))) + len(gpu_events(read_events("recsys")))


def test_charts_say_the_work_is_analytic(kineto_store: Path) -> None:
    spec = load("recsys", kineto_store).chart(phase="backward", ceilings="a100").to_dict()
    subtitle = " ".join(spec["title"]["subtitle"])
    assert "Time measured (PyTorch profiler); FLOPs and bytes analytic" in subtitle
    alexnet = load("alexnet", kineto_store)
    assert not any(source.analytic_work for source in alexnet.meta.sources)  # CUPTI counters: measured FLOPs


ROUTED = [
    # (op: convolution?, FLOP column, bf16, kernel name as traces record it, GPU cc, tensor column or None)
    (True, "flops_fp32", False, "ampere_scudnn_128x64_relu_medium_nn_v1", "8.0", None),
    (
        True,
        "flops_fp32",
        False,
        "void cudnn::cnn::wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>",
        "8.0",
        None,
    ),
    (True, "flops_fp32", False, "void at::native::conv_depthwise2d_forward_kernel<float>(...)", "9.0", None),
    (
        True,
        "flops_fp32",
        False,
        "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc",
        "8.0",
        "flops_tensor_tf32",
    ),
    (
        True,
        "flops_fp32",
        False,
        "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc",
        "9.0",
        "flops_tensor_tf32",
    ),
    (True, "flops_fp16", True, "void at::native::conv_depthwise2d_forward_kernel<c10::BFloat16>(...)", "9.0", None),
    (
        True,
        "flops_fp16",
        True,
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc",
        "9.0",
        "flops_tensor_bf16",
    ),
    (False, "flops_fp16", True, "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT", "9.0", "flops_tensor_bf16"),
    (False, "flops_fp16", False, "nvjet_sm90_hsh_320x128_64x3_1x2_h_bz_coopB_NNT", "9.0", "flops_tensor_fp16"),
    (False, "flops_fp16", False, "void gemv2T_kernel_val<int, int, __half, __half, float, 128, 16, 4, 4>", "9.0", None),
    (
        False,
        "flops_fp32",
        False,
        "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32",
        "9.0",
        "flops_tensor_tf32",
    ),
    (False, "flops_fp32", False, "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8", "9.0", None),
    (False, "flops_fp64", False, "sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize128x64x16", "9.0", "flops_tensor_fp64"),
    (False, "flops_fp16", True, "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8", "7.0", None),
]


@pytest.mark.parametrize(("convolution", "column", "bf16", "kernel", "cc", "expected"), ROUTED)
def test_trace_tensor_work_follows_dtype_gpu_and_kernel(
    convolution: bool, column: str, bf16: bool, kernel: str, cc: str, expected: str | None
) -> None:
    """Tensor-core use from the op's dtype and the GPU (its rates), with kernel names for what a dtype cannot say:
    cuDNN runs depthwise and small convolutions on the CUDA cores whatever the dtype; a float32 product is TF32
    only where its kernel says so; a V100 has no BF16 tensor cores."""
    from hroofline.importers.trace_split import KernelNames, tensor_column
    from hroofline.importers.trace_work import OpWork
    from hroofline.roofs.metricset import load_metric_set
    from hroofline.roofs.rates import rates_for

    work = OpWork(flops={column: 1e9}, bytes=0.0, bf16=bf16, matmul_flops={column: 1e9}, convolution=convolution)
    names = KernelNames([kernel.lower()], load_metric_set().tensor_hints)
    assert tensor_column(column, work, rates_for(cc), names, 0) == expected
