"""A trace replayed from CUDA (HIP) graphs, joined with the trace written while the graphs were captured
(``hroofline import REPLAY --capture CAPTURE``, issue 46 item 3).

The files are vLLM's piecewise graphs on an MI300-class GPU, from AMD-AGI/TraceLens (MIT), copied byte for byte
into ../shared/fixtures/compiled (its README gives the paths and blob ids): the replay's kernels share their
``hipGraphLaunch``'s correlation; the capture trace's launch calls (``hipLaunchKernel``, ``hipModuleLaunchKernel``,
``hipExtModuleLaunchKernel``) carry the kernel's name, grid and block, inside the ops that made them. The
expected figures are counted here from the JSON on its own, not by hroofline's reader.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import hroofline.api as api
from hroofline.errors import InputError
from hroofline.importers.graph_capture import captured_graphs, graph_launches, join_capture
from hroofline.importers.kineto import parse_trace
from hroofline.importers.kineto_links import link_activities
from tests.conftest import SHARED, need, tree_digest

COMPILED = SHARED / "fixtures" / "compiled"
REPLAY = COMPILED / "vllm-mi300x-piecewise-replay.json.gz"
CAPTURE = COMPILED / "vllm-mi300x-piecewise-capture.json.gz"
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CALLS = ("hipLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyAsync")


@cache
def _json_bytes(path: Path) -> bytes:
    return gzip.decompress(need(path).read_bytes())


@cache
def _events(path: Path) -> list[dict[str, Any]]:
    return json.loads(_json_bytes(path))["traceEvents"]


def _graph_launches() -> list[list[dict[str, Any]]]:
    """The replay's graph launches in the order they were made, each its activities in the order they ran."""
    events = _events(REPLAY)
    launches = sorted(
        (e for e in events if e.get("cat") == "cuda_runtime" and e["name"] == "hipGraphLaunch"), key=lambda e: e["ts"]
    )
    activities = [e for e in events if e.get("cat") in GPU_CATEGORIES]
    return [
        sorted(
            (a for a in activities if a["args"].get("correlation") == g["args"]["correlation"]), key=lambda a: a["ts"]
        )
        for g in launches
    ]


def _capture_windows() -> list[list[dict[str, Any]]]:
    """The capture trace's launch calls between each hipStreamBeginCapture and its hipStreamEndCapture."""
    calls = sorted((e for e in _events(CAPTURE) if e.get("cat") == "cuda_runtime"), key=lambda e: e["ts"])
    windows: list[list[dict[str, Any]]] = []
    for call in calls:
        if call["name"] == "hipStreamBeginCapture":
            windows.append([])
        elif call["name"] == "hipStreamEndCapture":
            windows.append(None)  # type: ignore[arg-type]  # closed: what follows is outside any capture
        elif windows and windows[-1] is not None and call["name"] in LAUNCH_CALLS:
            windows[-1].append(call)
    return [w for w in windows if w is not None]


@cache
def _capture_ops(name: str) -> list[dict[str, Any]]:
    return [e for e in _events(CAPTURE) if e.get("cat") == "cpu_op" and e["name"] == name]


def _inside(call: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The CPU op named ``name`` open on the call's thread when it was made."""
    return next(
        (e for e in _capture_ops(name) if e["tid"] == call["tid"] and e["ts"] <= call["ts"] <= e["ts"] + e["dur"]),
        None,
    )


@pytest.fixture(scope="module")
def joined(vllm_joined: tuple[str, Any]) -> tuple[str, Any]:
    said, run = vllm_joined
    return said, run.launches


def test_each_graph_launch_is_its_captured_graph_by_kernel_names_in_capture_order() -> None:
    """The premise of the join, checked on the files alone: the 25 graph launches replay the 25 captured graphs
    in capture order, kernel for kernel by name (the replay records no grid or block on ROCm)."""
    launches, windows = _graph_launches(), _capture_windows()
    assert len(launches) == len(windows) == 25
    for replayed, captured in zip(launches, windows, strict=True):
        names = [a["name"] if a["cat"] == "kernel" else "copy" for a in replayed]
        assert names == [c["args"].get("kernel", "copy") for c in captured]
        assert all("grid" not in a["args"] for a in replayed)


def test_a_replay_joined_with_its_capture_has_its_kernels_ops_and_their_work(joined: tuple[str, Any]) -> None:
    """Before: 4.0% of GPU time linked to an op, 0.2% of compute-kernel time with known work, every GEMM unknown.
    Joined: every replayed kernel on the op that launched it at capture; the 72 GEMMs' FLOPs equal 2 M N K of the
    capture's aten::addmm shapes (each graph replayed once); the ops without a formula named with their share."""
    said, launches = joined
    activities = [e for e in _events(REPLAY) if e.get("cat") in GPU_CATEGORIES]
    total = sum(a["dur"] for a in activities)
    replayed = [a for launch in _graph_launches() for a in launch]
    assert (
        f"25 of 25 graph launches matched one of its 25 captured graphs by kernel names, {len(replayed)} kernels"
        in said
    )
    linked = launches.loc[launches["op"].notna(), "time_s"].sum() / launches["time_s"].sum()
    assert linked >= 0.95 and "100.0% of GPU time is linked to the CPU op that launched it" in said
    # docs/validation.md's; 14.9% (171 kernels) before vllm::moe_forward, vLLM's attention and KV-cache write had
    # formulas (issue 47; tests/test_serving.py checks their work)
    assert "100.0% of compute-kernel time has known work (411 of 413 kernels)" in said
    # the GEMMs: aten::addmm(bias [N], a [M, K], b [K, N]) at capture, 2 M N K each
    gemms = [_inside(c, "aten::addmm") for window in _capture_windows() for c in window]
    dims = [g["args"]["Input Dims"] for g in gemms if g is not None]
    expected = sum(2 * m * k * n for _, (m, k), (_, n), *_ in dims)
    flops = [c for c in launches.columns if c.startswith("flops_") and c != "flops_tensor"]
    # the work is the op vLLM wraps its GEMM in (vllm::rocm_unquantized_gemm, whose aten::addmm launched it)
    on_addmm = launches[launches["op"] == "aten::addmm"]
    assert set(on_addmm["work_op"]) == {"vllm::rocm_unquantized_gemm"}
    assert len(dims) == len(on_addmm) == 72
    assert on_addmm[flops].sum().sum() == pytest.approx(expected, rel=1e-9)
    # every kernel whose op has a formula has its work: the ATen GEMMs all have FLOPs
    assert launches.loc[launches["op"].isin(["aten::addmm", "aten::mm"]), "flops_fp32"].notna().all()
    # vllm::moe_forward: its kernels' share of kernel time, counted pairwise from the files, now with known work
    kernels = [a for a in activities if a["cat"] == "kernel"]
    moe = sum(
        a["dur"]
        for launch, window in zip(_graph_launches(), _capture_windows(), strict=True)
        for a, call in zip(launch, window, strict=True)
        if a["cat"] == "kernel" and _inside(call, "vllm::moe_forward") is not None
    )
    share = 100 * moe / sum(k["dur"] for k in kernels)
    on_moe = launches[launches["work_op"] == "vllm::moe_forward"]
    assert on_moe["time_s"].sum() / launches.loc[launches["category"] == "kernel", "time_s"].sum() == pytest.approx(
        share / 100, rel=1e-6
    )
    assert on_moe["flops_fp32"].notna().all() and "vllm::moe_forward" not in said.split("(no formula, or no op)")[1]
    assert round(share, 1) == 80.4 and sum(a["dur"] for a in replayed) / total > 0.95
    assert "replayed from CUDA graphs" not in said  # the warning is for a replay without its capture


def _without_last_launches(path: Path) -> Path:
    """The capture, less the last launch call of each captured graph: a capture of other graphs (gzip-compressed
    where ``path`` ends in .gz)."""
    events = list(_events(CAPTURE))
    last = {id(window[-1]) for window in _capture_windows()}
    kept = json.dumps({"traceEvents": [e for e in events if id(e) not in last]}).encode()
    path.write_bytes(gzip.compress(kept) if path.suffix == ".gz" else kept)
    return path


def test_a_capture_of_other_graphs_is_refused_in_one_line_and_nothing_is_stored(cli, tmp_path: Path) -> None:
    # without --capture: the one warning, which says how to get the ops
    plain = cli("import", need(REPLAY), "--run", "v")
    assert plain.code == 0
    (warning,) = [line for line in (plain.out + plain.err).splitlines() if "CUDA graphs" in line]
    assert "96.0% of GPU time was replayed from CUDA graphs" in warning and "(--capture FILE)" in warning
    # 3.9% known: the kernels launched outside the graphs, vLLM's attention and KV-cache write among them (0.2% before
    # their formulas, issue 47)
    assert "4.0% of GPU time is linked" in plain.err and "3.9% of compute-kernel time has known work" in plain.err
    before = tree_digest(cli.store)
    other = _without_last_launches(tmp_path / "other-capture.json.gz")
    result = cli("import", need(REPLAY), "--capture", other, "--run", "w")
    assert result.code == 1
    (line,) = result.err.strip().splitlines()
    assert "no graph launch matches a graph captured in" in line and "not the capture of this replay" in line
    assert "25 captured graphs hold 3 to 14 launches" in line
    # a trace that captured nothing, a capture that is no file: one line each, exit 1
    result = cli("import", need(REPLAY), "--capture", need(COMPILED / "hta-a100-compile-triton.json.gz"), "--run", "w")
    assert result.code == 1 and "the trace captured no CUDA graph" in result.err
    assert len(result.err.strip().splitlines()) == 1
    result = cli("import", need(REPLAY), "--capture", tmp_path / "missing.json.gz", "--run", "w")
    assert result.code == 1 and "--capture" in result.err and "no such file" in result.err
    # the replay held already without its capture: added with it, every kernel would count twice
    result = cli("import", need(REPLAY), "--capture", need(CAPTURE), "--run", "v")
    assert result.code == 2 and "holds it already, imported without --capture" in result.err
    assert tree_digest(cli.store) == before


def test_the_python_api_takes_the_capture_as_the_cli_does(tmp_path: Path) -> None:
    other = _without_last_launches(tmp_path / "other-capture.json.gz")
    with pytest.raises(InputError, match="not the capture of this replay"):
        api.import_run(need(REPLAY), "v", store=tmp_path / "store", capture=other)
    assert tree_digest(tmp_path / "store") == ""


def test_graphs_with_the_same_kernels_are_taken_in_capture_order() -> None:
    """23 of vLLM's piecewise graphs (one per layer) hold the same 15 kernels: each graph launch takes the next in
    capture order, so the k-th launch's kernels are on ops captured between the k-th hipStreamBeginCapture and
    its hipStreamEndCapture (their times read from the JSON here)."""
    replay, capture = parse_trace(_json_bytes(REPLAY), REPLAY), parse_trace(_json_bytes(CAPTURE), CAPTURE)
    joined = join_capture(replay, replay.gpu, link_activities(replay, replay.gpu), captured_graphs(capture))
    calls = sorted((e for e in _events(CAPTURE) if e.get("cat") == "cuda_runtime"), key=lambda e: e["ts"])
    begins = [e["ts"] * 1e-6 for e in calls if e["name"] == "hipStreamBeginCapture"]
    ends = [e["ts"] * 1e-6 for e in calls if e["name"] == "hipStreamEndCapture"]
    index = {id(activity): i for i, activity in enumerate(replay.gpu)}
    for k, launch in enumerate(graph_launches(replay, replay.gpu).values()):
        ops = [joined.links[index[id(replay.gpu[i])]].op for i in launch]
        assert all(op is not None and begins[k] < op.start_s < ends[k] for op in ops), k


def test_the_profiles_import_joins_the_warm_up_steps_capture() -> None:
    """What ``profile --compile reduce-overhead --backend trace`` does with the measured step's trace and its warm-up
    steps' (collect/trace_backend.import_collected_trace), on vLLM's replay and capture: joined, every graph launch
    matched and 100.0% of GPU time linked, both files the source's, no warning."""
    from hroofline.collect.trace_backend import import_collected_trace
    from hroofline.importers.build import ImportOptions

    replay, capture = need(REPLAY), need(CAPTURE)
    joined = import_collected_trace(replay, {"compile": "reduce-overhead"}, ImportOptions(), capture)
    replayed = [a for launch in _graph_launches() for a in launch]  # 25 launches, counted from the JSON
    matched = f"25 of 25 graph launches matched one of its 25 captured graphs by kernel names, {len(replayed)} kernels"
    assert any(matched in note for note in joined.info.notes), joined.info.notes
    assert "100.0% of GPU time is linked to the CPU op that launched it" in joined.info.notes
    assert joined.info.warnings == [] and joined.info.settings["compile"] == "reduce-overhead"
    assert [entry["name"] for entry in joined.info.files] == [str(replay), str(capture)]


def test_a_warm_up_capture_that_does_not_fit_is_left_out_with_one_warning(tmp_path: Path) -> None:
    """The same import with a capture that does not fit (HTA's A100 trace of a compiled function, which captured
    no graph; vLLM's capture less each graph's last launch, whose graphs no launch matches): the step imported as
    without it, its replay warning standing, plus one line with the join's refusal; never a failure."""
    from hroofline.collect.trace_backend import import_collected_trace
    from hroofline.importers.build import ImportOptions

    replay, settings = need(REPLAY), {"compile": "reduce-overhead"}
    plain = import_collected_trace(replay, settings, ImportOptions())
    (replay_warning,) = plain.info.warnings
    assert "96.0% of GPU time was replayed from CUDA graphs" in replay_warning
    hta = need(COMPILED / "hta-a100-compile-triton.json.gz")
    other = _without_last_launches(tmp_path / "other-capture.json")
    for unfit, refusal in (
        (hta, "the trace captured no CUDA graph (no launch between a StreamBeginCapture and its StreamEndCapture)"),
        (other, f"no graph launch matches a graph captured in {other.name} (the first replays "),
    ):
        fallback = import_collected_trace(replay, settings, ImportOptions(), unfit)
        assert fallback.info.warnings[0] == replay_warning and len(fallback.info.warnings) == 2
        line = fallback.info.warnings[1]
        assert line.startswith(
            f"the warm-up steps' trace {unfit.name} attributed no replayed kernel (it was left out): {refusal}"
        ), line
        assert "\n" not in line and str(COMPILED) not in line and len(line) < 300
        assert fallback.info.notes == plain.info.notes and fallback.info.files == []
        pd.testing.assert_frame_equal(fallback.launches, plain.launches)


# The launch calls a CUDA capture trace can hold, as Kineto names them (pytorch/kineto, libkineto/src/
# CuptiCbidRegistry.cpp: it writes every runtime call not on its blocklist, the kernel launches and the
# cudaMemcpy..cudaMemset2DAsync range marked as launches; of the driver's calls, cuLaunchKernel and cuLaunchKernelEx,
# Triton's), each with the graph node it adds; and calls made while capturing that add none.
CUDA_LAUNCH_CALLS = (
    ("cudaLaunchKernel", "kernel"),
    ("cudaLaunchKernelExC", "kernel"),
    ("cudaLaunchCooperativeKernel", "kernel"),
    ("cudaLaunchCooperativeKernelMultiDevice", "kernel"),
    ("cuLaunchKernel", "kernel"),
    ("cuLaunchKernelEx", "kernel"),
    ("cudaMemcpyAsync", "memcpy"),
    ("cudaMemcpy2DAsync", "memcpy"),
    ("cudaMemsetAsync", "memset"),
    ("cudaMemset2DAsync", "memset"),
)
NOT_NODES = ("cudaStreamGetCaptureInfo", "cudaStreamIsCapturing", "cudaEventRecord", "cudaFuncGetAttributes")


def test_a_cuda_captures_launch_calls_are_its_graph_nodes(tmp_path: Path) -> None:
    """A CUDA capture trace as Kineto writes it: between cudaStreamBeginCapture and cudaStreamEndCapture, inside
    one op, each launch call of :data:`CUDA_LAUNCH_CALLS` is a node of the captured graph, of its kind, in call
    order, linked to the op; the calls of :data:`NOT_NODES` are none (cudaLaunchCooperativeKernel was none before)."""
    calls = ["cudaStreamBeginCapture", *NOT_NODES, *(name for name, _ in CUDA_LAUNCH_CALLS), "cudaStreamEndCapture"]
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 100, "args": {}}
    ]
    for correlation, name in enumerate(calls, start=1):
        category = "cuda_driver" if name.startswith("cu") and not name.startswith("cuda") else "cuda_runtime"
        events.append(
            {
                **{"ph": "X", "cat": category, "name": name, "pid": 1, "tid": 1, "ts": correlation * 5, "dur": 1},
                "args": {"correlation": correlation},
            }
        )
    path = tmp_path / "capture.json"
    path.write_text(json.dumps({"traceEvents": events}))
    (graph,) = captured_graphs(parse_trace(path.read_bytes(), path))
    assert [node.category for node in graph.nodes] == [kind for _, kind in CUDA_LAUNCH_CALLS]
    assert all(node.link.op is not None and node.link.op.name == "aten::mm" for node in graph.nodes)
    assert all(node.kernel is None and node.grid is None for node in graph.nodes)  # CUDA's calls name none


def test_a_partial_join_leaves_the_launches_it_did_not_match_unlinked_and_says_so(tmp_path: Path) -> None:
    """vLLM's capture less the last launch call of its last graph (12 nodes, the only graph of its size): 24 of the
    25 graph launches match, the last replays a graph the capture does not hold. Its kernels keep no op that
    launched them: GPU time linked is 100% less their share, and one warning names it (counted from the JSON)."""
    from hroofline.collect.trace_backend import import_collected_trace
    from hroofline.importers.build import ImportOptions

    replay, events = need(REPLAY), _events(CAPTURE)
    dropped = id(_capture_windows()[-1][-1])
    capture = tmp_path / "capture.json"
    capture.write_text(json.dumps({"traceEvents": [e for e in events if id(e) != dropped]}))
    source = import_collected_trace(replay, {}, ImportOptions(), capture)
    activities = [e for e in _events(REPLAY) if e.get("cat") in GPU_CATEGORIES]
    last = _graph_launches()[-1]
    share = 100 * sum(a["dur"] for a in last) / sum(a["dur"] for a in activities)
    assert any("24 of 25 graph launches matched" in note for note in source.info.notes), source.info.notes
    assert f"{100 - share:.1f}% of GPU time is linked to the CPU op that launched it" in source.info.notes
    (warning,) = source.info.warnings
    assert (
        f"{share:.1f}% of GPU time was replayed from CUDA graphs the capture does not hold ({len(last)} kernels "
        "under 1 graph launches)" in warning
    )
    assert "pass the capture of these graphs too (--capture FILE)" in warning


def test_a_cuda_captures_triton_launch_is_named_by_the_event_around_it(tmp_path: Path) -> None:
    """On CUDA a capture's launch calls name no kernel, but Inductor launches a Triton kernel inside an event named
    after it: that node is named, so a replay of another kernel there does not match it; other nodes stay unnamed."""
    triton = "triton_poi_fused_add_0"
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "cpu_op", "name": triton, "pid": 1, "tid": 1, "ts": 10, "dur": 10, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 30, "dur": 10, "args": {}},
    ]
    calls = [
        ("cudaStreamBeginCapture", 5),
        ("cuLaunchKernel", 15),
        ("cudaLaunchKernel", 35),
        ("cudaStreamEndCapture", 50),
    ]
    for correlation, (name, ts) in enumerate(calls, start=1):
        category = "cuda_driver" if name == "cuLaunchKernel" else "cuda_runtime"
        events.append(
            {"ph": "X", "cat": category, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1}
            | {"args": {"correlation": correlation}}
        )
    path = tmp_path / "capture.json"
    path.write_text(json.dumps({"traceEvents": events}))
    (graph,) = captured_graphs(parse_trace(path.read_bytes(), path))
    assert [node.kernel for node in graph.nodes] == [triton, None]


def test_the_join_counts_the_profiler_steps_imported(tmp_path: Path) -> None:
    """A replay of two profiler steps, each one cudaGraphLaunch of the captured graph (one GEMM in aten::mm),
    imported with --steps 1: the join's line counts that step's launch and GPU time only (it said 2 of 2)."""
    from hroofline.importers.build import ImportOptions, import_source
    from hroofline.roofs.metricset import load_metric_set

    def x(cat: str, name: str, ts: int, dur: int, **args: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}

    capture = tmp_path / "capture.json"
    capture.write_text(
        json.dumps(
            {
                "traceEvents": [
                    x("cpu_op", "aten::mm", 10, 10, **{"Input Dims": [[8, 8], [8, 8]], "Input type": ["float"] * 2}),
                    x("cuda_runtime", "cudaStreamBeginCapture", 5, 1, correlation=1),
                    x("cuda_runtime", "cudaLaunchKernel", 12, 1, correlation=2),
                    x("cuda_runtime", "cudaStreamEndCapture", 30, 1, correlation=3),
                ]
            }
        )
    )
    replay_events = []
    for step, start in ((1, 100), (2, 200)):
        replay_events += [
            x("user_annotation", f"ProfilerStep#{step}", start, 90),
            x("cuda_runtime", "cudaGraphLaunch", start + 5, 1, correlation=step * 10),
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": start + 10, "dur": 5 * step}
            | {"args": {"correlation": step * 10, "device": 0, "stream": 7}},
        ]
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps({"traceEvents": replay_events}))
    options = ImportOptions(steps=frozenset({1}), captures=(capture,))
    source = import_source(replay, options, load_metric_set())
    (line,) = [note for note in source.info.notes if note.startswith("graph replays joined")]
    assert "1 of 1 graph launches matched" in line and "1 kernels (100.0% of GPU time)" in line, line
    assert source.launches["work_op"].tolist() == ["aten::mm"] and source.launches["flops_fp32"].tolist() == [1024.0]
