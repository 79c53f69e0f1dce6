"""The op calls of a profiled step are numbered alike in the trace pass (record_function ranges) and in the ncu
pass (NVTX marks): call n is the same op in both, so the calls a plan chooses from the trace are the ones the
ncu pass marks. Checked on the CPU, where both passes run for real (the ncu pass without ncu)."""

from __future__ import annotations

import json
from pathlib import Path

from hroofline.collect.module_tracking import LayerTracker
from hroofline.collect.op_calls import call_marks
from hroofline.collect.trace_backend import profile_trace
from hroofline.collect.workload import (
    NvtxLayerRanges,
    NvtxListener,
    PhaseMarks,
    TrainingStep,
    WorkloadConfig,
    run_profiled_steps,
)
from hroofline.importers.kineto_links import CALL_RANGE_PREFIX

CONFIG = WorkloadConfig("resnet18", batch_size=2, precision="fp32", device="cpu", input_shape=(3, 32, 32))


def _ops_in_call_ranges(trace_file: Path) -> dict[int, str]:
    """Per call range of the trace, the outermost op inside it (what the dispatch mode saw)."""
    events = [e for e in json.loads(trace_file.read_text())["traceEvents"] if e.get("ph") == "X"]
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))
    found = {}
    for marked in (e for e in events if str(e.get("name", "")).startswith(CALL_RANGE_PREFIX)):
        inside = (
            o for o in ops if o["tid"] == marked["tid"] and marked["ts"] <= o["ts"] <= marked["ts"] + marked["dur"]
        )
        first = next(inside, None)
        if first is not None:
            found[int(marked["name"][len(CALL_RANGE_PREFIX) :])] = first["name"]
    return found


def test_trace_and_ncu_passes_number_the_same_calls(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.json"
    source = profile_trace(CONFIG, 1, 1, trace_file, lambda _: None, mark_calls=True)
    in_trace = _ops_in_call_ranges(trace_file)
    assert len(in_trace) > 300 and "aten::convolution" in in_trace.values()
    # each op inside a call carries its number (on the CPU the ops above the mode, aten::linear, carry none)
    numbered = source.launches.dropna(subset=["op_call"])
    assert set(numbered["op_call"].astype(int)) == set(in_trace)
    # the ncu pass's workload on the CPU: NVTX phases and layers, the calls seen by the same dispatch mode
    seen: dict[int, str] = {}
    tracker = LayerTracker(listeners=[NvtxLayerRanges()])
    step = TrainingStep(CONFIG, PhaseMarks([NvtxListener(), tracker.phase_changed]), tracker)
    marks = call_marks(lambda number, name: seen.__setitem__(number, name))
    run_profiled_steps(step, 1, 1, cuda_profiler=False, tracker=tracker, marks=marks)
    assert len(seen) == max(in_trace) + 1
    assert all(seen[number] == name for number, name in in_trace.items())
    # backward's ops are counted too (autograd runs them under the same mode)
    assert any(name == "aten::convolution_backward" for name in seen.values())
