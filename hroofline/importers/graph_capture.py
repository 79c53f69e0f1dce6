"""Kernels replayed from CUDA (or HIP) graphs, linked to the ops that launched them when the graphs were captured.

A replayed kernel shares its ``cudaGraphLaunch``'s correlation: the replay's trace knows at most the op around the
graph launch (a compiled step's ``CompiledFunction``), not the op that launched the kernel. The trace
written while the graphs were captured (vLLM and SGLang write one) does: between a ``StreamBeginCapture`` and its
``StreamEndCapture`` each launch call on that thread adds a node, and the ops open around the call launched it.
Captured graphs are read from that trace in capture order, each as the sequence of its launch calls (kernels,
copies and sets) with the ops around them.

Each graph launch of the replay is matched to a captured graph by its activities in the order they ran: the same
count, copies to copies and sets to sets, the same kernel name where the capture's call names its kernel (ROCm's
do, CUDA's runtime events do not; on CUDA a Triton kernel's launch runs inside Inductor's event named after the
kernel, which names it) and the same grid and block where both traces record them. Several captured
graphs can hold the same sequence (vLLM's piecewise graphs, one per layer, captured and replayed in layer order),
so a launch takes the first match from the graph after the one the previous launch took, in capture order.
A matched kernel gets its node's link: its op and the ops around it (hence its work from their shapes), its
ranges, phase and layer; its launch time and profiler step stay the replay's. Each replay has copies of the
captured ops of its own, so that an op's work is counted once per replay, not split over all of them.

Kineto adds ``graph id`` and ``graph node id`` to a replayed kernel on CUDA 12 and later (libkineto's
``addGraphNodeTypedMetadata``), but records no node id at capture time; the match here is by launch order.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from hroofline.errors import InputError
from hroofline.importers.kineto import CpuEvent, GpuActivity, RuntimeCall, TraceEvents
from hroofline.importers.kineto_links import LaunchLink, link_calls

GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
CAPTURE_BEGINS = ("cudaStreamBeginCapture", "cuStreamBeginCapture", "hipStreamBeginCapture")
CAPTURE_ENDS = ("cudaStreamEndCapture", "cuStreamEndCapture", "hipStreamEndCapture")
TRITON_PREFIX = "triton_"  # Inductor's Triton kernels: triton_{poi,red,per,tem,for}_...
# A launch call's name says which graph node it adds: a kernel, a copy or a set. On CUDA, Kineto writes the runtime's
# cudaLaunchKernel, cudaLaunchKernelExC, cudaLaunchCooperativeKernel(MultiDevice), cudaMemcpy*/cudaMemset* calls and,
# of the driver's, cuLaunchKernel and cuLaunchKernelEx (Triton's) (libkineto's CuptiCbidRegistry); on ROCm
# hipLaunchKernel, hipModuleLaunchKernel, hipExtModuleLaunchKernel, hipMemcpyAsync.
NODE_KINDS = (
    ("LaunchKernel", "kernel"),
    ("LaunchCooperativeKernel", "kernel"),
    ("Memcpy", "memcpy"),
    ("Memset", "memset"),
)


@dataclass(frozen=True)
class Node:
    """One launch call made while a graph was captured."""

    category: str  # kernel, memcpy or memset
    kernel: str | None  # where the call names it (ROCm)
    grid: tuple[int, ...] | None
    block: tuple[int, ...] | None
    link: LaunchLink


@dataclass(frozen=True)
class CapturedGraph:
    path: str
    index: int  # its place in capture order within its file, from 0
    nodes: tuple[Node, ...]


@dataclass
class CaptureJoin:
    """The replay's links with the matched kernels' replaced by their capture's, and what matched, in one line."""

    links: list[LaunchLink]
    summary: str
    matched: frozenset[int]  # the activities (their indices) whose graph launch matched a captured graph


def captured_graphs(trace: TraceEvents) -> list[CapturedGraph]:
    """The graphs captured in ``trace``, in capture order; refused in one line where it captured none."""
    calls = sorted(trace.runtime.values(), key=lambda call: call.start_s)
    open_on: dict[tuple[str, str], list[RuntimeCall]] = {}
    windows: list[list[RuntimeCall]] = []
    for call in calls:
        if call.name.startswith(CAPTURE_BEGINS):
            open_on[call.thread] = []
        elif call.name.startswith(CAPTURE_ENDS):
            if call.thread in open_on:
                windows.append(open_on.pop(call.thread))
        elif call.thread in open_on and _node_kind(call.name) is not None:
            open_on[call.thread].append(call)
    if not any(windows):
        raise InputError(
            f"{trace.path}: --capture: the trace captured no CUDA graph (no launch between a StreamBeginCapture "
            "and its StreamEndCapture)",
            "pass the trace written while the graphs were captured (vLLM: the capture_traces folder)",
        )
    links = link_calls(trace, [call for window in windows for call in window])
    graphs, position = [], 0
    for window in windows:
        nodes = tuple(_node(call, links[position + i]) for i, call in enumerate(window))
        graphs.append(CapturedGraph(trace.path, len(graphs), nodes))
        position += len(window)
    return graphs


def _triton_kernel(link: LaunchLink) -> str | None:
    """The kernel a CUDA capture's launch call launched where the call names none but the op around it does:
    Inductor launches each Triton kernel inside an event named after it (the innermost op of every one of the 440
    Triton launches in tests/data/gpu-2026-11-28's compiled GPT-2 trace), so a replay of that node must be it."""
    op = link.op
    return op.name if op is not None and op.name.startswith(TRITON_PREFIX) else None


def _node_kind(name: str) -> str | None:
    return next((kind for fragment, kind in NODE_KINDS if fragment in name), None)


def _node(call: RuntimeCall, link: LaunchLink) -> Node:
    kernel = call.args.get("kernel")
    return Node(
        category=_node_kind(call.name) or "kernel",
        kernel=str(kernel) if isinstance(kernel, str) and kernel else _triton_kernel(link),
        grid=_dims(call.args.get("grid")),
        block=_dims(call.args.get("block")),
        link=link,
    )


def _dims(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return tuple(value)
    return None


def graph_launches(trace: TraceEvents, activities: list[GpuActivity]) -> dict[int, list[int]]:
    """Per graph launch (its correlation), the indices of the activities it replayed in the order they ran;
    the launches in the order they were made."""
    launches = {c: call for c, call in trace.runtime.items() if call.name.startswith(GRAPH_LAUNCHES)}
    replayed: dict[int, list[int]] = defaultdict(list)
    for index, activity in enumerate(activities):
        if activity.correlation in launches:
            replayed[activity.correlation].append(index)
    ordered = sorted(replayed, key=lambda c: launches[c].start_s)
    return {c: sorted(replayed[c], key=lambda i: (activities[i].start_s, i)) for c in ordered}


def join_capture(
    trace: TraceEvents,
    activities: list[GpuActivity],
    links: list[LaunchLink],
    graphs: list[CapturedGraph],
    counted: set[int] | None = None,
) -> CaptureJoin:
    """The replay's links, each replayed kernel's taken from the captured graph its graph launch matches; its
    summary over the ``counted`` activities (the profiler steps imported; all by default)."""
    launches = graph_launches(trace, activities)
    captures = ", ".join(sorted({g.path for g in graphs}))
    if not launches:
        raise InputError(
            f"{trace.path}: --capture {captures}, but the trace replays no CUDA graph (no cudaGraphLaunch with "
            "kernels)",
            "leave out --capture: every kernel of this trace is linked to its op already",
        )
    joined = list(links)
    matched: list[int] = []
    graph_used = -1  # the captured graph the previous launch took
    for indices in launches.values():
        found = _next_match(graphs, graph_used, [activities[i] for i in indices])
        if found is None:
            continue
        graph_used = found
        own: dict[int, CpuEvent] = {}  # this replay's copies of the captured ops
        for index, node in zip(indices, graphs[found].nodes, strict=True):
            joined[index] = _replayed_link(node.link, links[index], own)
        matched += indices
    if not matched:
        first = [activities[i] for i in next(iter(launches.values()))]
        raise InputError(
            f"{trace.path}: no graph launch matches a graph captured in {captures} (the first replays "
            f"{len(first)} activities from {first[0].name[:60]!r}; the {len(graphs)} captured graphs hold "
            f"{_sizes(graphs)} launches): not the capture of this replay",
            "pass the capture trace written by the run that was replayed",
        )
    if counted is None:
        counted = set(range(len(activities)))
    launches = {c: indices for c, indices in launches.items() if indices[0] in counted}  # a launch is in one step
    summary = _summary(activities, counted, launches, [i for i in matched if i in counted], graphs, captures)
    return CaptureJoin(joined, summary, frozenset(matched))


def _next_match(graphs: list[CapturedGraph], after: int, replayed: list[GpuActivity]) -> int | None:
    """The first captured graph after ``after`` (in capture order, wrapping round) whose nodes the replayed
    activities are, or None."""
    for step in range(1, len(graphs) + 1):
        position = (after + step) % len(graphs)
        if _same_launches(graphs[position].nodes, replayed):
            return position
    return None


def _same_launches(nodes: tuple[Node, ...], replayed: list[GpuActivity]) -> bool:
    if len(nodes) != len(replayed):
        return False
    for node, activity in zip(nodes, replayed, strict=True):
        if node.category != activity.category:
            return False
        if node.category == "kernel" and node.kernel is not None and node.kernel != activity.name:
            return False
        for recorded, dims in ((node.grid, activity.args.get("grid")), (node.block, activity.args.get("block"))):
            if recorded is not None and _dims(dims) is not None and recorded != _dims(dims):
                return False
    return True


def _replayed_link(captured: LaunchLink, replay: LaunchLink, own: dict[int, CpuEvent]) -> LaunchLink:
    """The captured node's link for one replay of it: its ops copied once per replay, its phase and layer the
    capture's (the replay's where the capture names none), its launch time and step the replay's, its ranges the
    replay's around the capture's."""

    def copy(op: CpuEvent) -> CpuEvent:
        return own.setdefault(id(op), replace(op))

    return replace(
        captured,
        launch_s=replay.launch_s,
        op=copy(captured.op) if captured.op is not None else None,
        candidates=tuple(copy(op) for op in captured.candidates),
        ranges=replay.ranges + captured.ranges,  # replayed inside the replay's ranges (a serving step's)
        phase=captured.phase or replay.phase,
        layer=captured.layer or replay.layer,
        step=replay.step,
        marked_call=None,
    )


def _sizes(graphs: list[CapturedGraph]) -> str:
    counts = sorted({len(g.nodes) for g in graphs})
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"


def _summary(
    activities: list[GpuActivity],
    counted: set[int],
    launches: dict[int, list[int]],
    matched: list[int],
    graphs: list[CapturedGraph],
    captures: str,
) -> str:
    total = _seconds(activities, counted)
    done = set(matched)
    left = [i for indices in launches.values() for i in indices if i not in done]
    unmatched = sum(1 for indices in launches.values() if indices[0] not in done)
    names = [node.kernel is not None for g in graphs for node in g.nodes if node.category == "kernel"]
    by_what = (
        "kernel names"
        if all(names)
        else "launch count and kind, and the Triton kernels' names"
        if any(names)
        else "launch count and kind (the capture names no kernels)"
    )
    if any(activities[i].args.get("grid") is not None for i in matched) and any(
        node.grid is not None for g in graphs for node in g.nodes
    ):
        by_what += ", grid and block"
    line = (
        f"graph replays joined with the capture {captures}: {len(launches) - unmatched} of "
        f"{len(launches)} graph launches matched one of its {len(graphs)} captured graphs by {by_what}, "
        f"{len(matched)} kernels ({_share(_seconds(activities, matched), total)} of GPU time) linked to the ops "
        "that launched them at capture"
    )
    if left:
        line += (
            f"; {unmatched} graph launches ({len(left)} kernels, "
            f"{_share(_seconds(activities, left), total)} of GPU time) matched no captured graph and stay unlinked"
        )
    return line


def _seconds(activities: list[GpuActivity], indices: Iterable[int]) -> float:
    return sum(activities[i].duration_s for i in indices if math.isfinite(activities[i].duration_s))


def _share(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole > 0 else "n/a"
