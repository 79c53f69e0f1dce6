"""CUDA (not HIP) graph replays in real compiled steps without their capture trace (issue 46 (3)): the import says
in one warning how much GPU time was replayed, of which kernels and copies, inside which ops, and does not count a
replayed kernel as linked to the op that launched it. The traces are HolisticTraceAnalysis's (tests/data/
hta-cuda-graphs/README.md says where from); every expected figure is counted here from the JSON itself."""

from __future__ import annotations

import json
import lzma
import re
from functools import cache
from pathlib import Path

import pytest

from hroofline.importers.build import ImportOptions, import_source
from hroofline.importers.source import ImportedSource
from hroofline.roofs.metricset import load_metric_set
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "hta-cuda-graphs"
GPU = ("kernel", "gpu_memcpy", "gpu_memset")
# each file with one profiler step, to keep the test fast: the V100's shortest, the A100's fourth
TRACES = [("v100-compiled-cudagraphs-rank1.json.xz", 1012), ("a100-compiled-cudagraphs-rank0.json.xz", 553)]


@cache
def _imported(name: str, step: int) -> ImportedSource:
    return import_source(DATA / name, ImportOptions(steps=frozenset({step})), load_metric_set())


def _counted(path: Path, step: int) -> dict[str, object]:
    """The step's GPU activities (those whose runtime call falls in ProfilerStep#step) and, of them, those that
    share a cudaGraphLaunch's correlation; the innermost CPU op around each graph launch, on its thread."""
    events = json.loads(lzma.decompress(path.read_bytes()))["traceEvents"]
    (window,) = [e for e in events if e.get("name") == f"ProfilerStep#{step}"]
    inside = lambda e: window["ts"] <= e["ts"] <= window["ts"] + window["dur"]  # noqa: E731
    runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    launches = {c: e for c, e in runtime.items() if e["name"].startswith("cudaGraphLaunch") and inside(e)}
    gpu = [e for e in events if e.get("cat") in GPU and inside(runtime.get(e["args"].get("correlation"), {"ts": -1}))]
    replayed = [e for e in gpu if e["args"]["correlation"] in launches]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    around = set()
    for launch in launches.values():
        enclosing = [o for o in ops if o["tid"] == launch["tid"] and o["ts"] <= launch["ts"] <= o["ts"] + o["dur"]]
        around.add(min(enclosing, key=lambda o: o["dur"])["name"])
    return {
        "share": 100 * sum(e["dur"] for e in replayed) / sum(e["dur"] for e in gpu),
        "kernels": sum(e["cat"] == "kernel" for e in replayed),
        "copies": sum(e["cat"] != "kernel" for e in replayed),
        "launches": len(launches),
        "around": around,
    }


@pytest.mark.parametrize(("name", "step"), TRACES)
def test_a_compiled_step_replayed_from_cuda_graphs_says_what_was_replayed(name: str, step: int) -> None:
    counted = _counted(DATA / name, step)
    assert counted["launches"] and counted["kernels"] and counted["copies"]  # V100 744 and 97 under 2, A100 27, 42, 14
    source = _imported(name, step)
    (said,) = [w for w in source.info.warnings if "replayed from CUDA graphs" in w]
    assert (
        f"{counted['share']:.1f}% of GPU time was replayed from CUDA graphs ({counted['kernels']} kernels and "
        f"{counted['copies']} copies and sets under {counted['launches']} graph launches in " in said
    )
    named = re.search(r"graph launches in ([^)]*)\)", said).group(1).split(", ")
    assert set(named) == counted["around"] == {"CompiledFunction", "CompiledFunctionBackward"}
    assert "not linked to the op that launched it at capture" in said and "(--capture FILE)" in said
    # a replayed kernel's only link is the op around its graph launch: not counted as linked
    (linked,) = [n for n in source.info.notes if "of GPU time is linked to the CPU op" in n]
    assert float(linked.split("%")[0]) <= 100 - counted["share"]


def test_a_step_replayed_whole_from_a_graph_is_said_once_with_its_collective_as_a_kernel(tmp_path: Path) -> None:
    """Every activity replayed by one cudaGraphLaunch inside CompiledFunction: one GEMM, one NCCL all-reduce (a
    kernel, not a copy) and a memset. One warning of the replay; not also "no kernel could be linked" (each has
    the op around its launch), and no GPU time counted as linked to the op that launched it."""
    gpu = [("volta_sgemm_128x64_nn", "kernel", 10), ("ncclKernel_AllReduce_RING_LL_Sum_float", "kernel", 20)]
    gpu += [("Memset (Device)", "gpu_memset", 30)]
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "CompiledFunction", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 2, "dur": 1}
        | {"args": {"correlation": 7}},
    ]
    events += [
        {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 5}
        | {"args": {"correlation": 7, "device": 0, "stream": 7}}
        for name, cat, ts in gpu
    ]
    path = tmp_path / "replay.json"
    path.write_text(json.dumps({"traceEvents": events}))
    source = import_source(path, ImportOptions(), load_metric_set())
    assert not any("no kernel could be linked" in w for w in source.info.warnings)  # main before: it was said
    (warning,) = [w for w in source.info.warnings if "CUDA graphs" in w]
    assert "100.0% of GPU time was replayed from CUDA graphs (2 kernels and 1 copies and sets under 1 graph " in warning
    assert "launches in CompiledFunction)" in warning
    assert "0.0% of GPU time is linked to the CPU op that launched it" in source.info.notes
