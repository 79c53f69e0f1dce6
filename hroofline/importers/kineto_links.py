"""Each GPU activity of a trace, linked to what launched it.

A kernel's ``correlation`` names the CUDA runtime call that launched it; the CPU ops and ranges open on that
call's thread at that moment are its stack (outermost first). From the stack come:

- the launching op: the innermost op (``aten::mm``);
- the ops whose work may be counted: those that are dispatchable operators (``namespace::name``) with
  recorded inputs, outermost first: the outermost one whose work can be known is counted, so that an
  ``aten::linear`` counts its ``addmm`` as ``predict`` does;
- the user ranges (``record_function``, ``## forward ##``), the phase they name, and the layer
  (hroofline's own ``hroofline.layer:`` ranges, or the op's ``Module Hierarchy``, or the ``nn.Module`` calls
  that ``with_stack=True`` records: :class:`ModuleLayers`);
- the phase, where no range names one: autograd's backward ops (``autograd::engine::evaluate_function``,
  ``...Backward0``) are backward, whatever their thread; else a phase range open in the process then (PyTorch's
  own ``Optimizer.step#SGD.step`` is one); else forward inside a forward pass that autograd recorded (see
  ``forward_passes``).

The ``ProfilerStep#N`` range open in the process at launch time is the launch's step.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass

from hroofline.importers.kineto import CpuEvent, GpuActivity, RuntimeCall, TraceEvents, input_dims
from hroofline.model.layers import COMPILED
from hroofline.model.phases import canonical_phase
from hroofline.work.serving_steps import serving_step

LAYER_RANGE_PREFIX = "hroofline.layer:"
# hroofline's count of the op calls of the profiled steps, one range per ATen op call (hroofline/collect/op_calls.py).
CALL_RANGE_PREFIX = "hroofline.call#"
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_DISPATCHABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*::[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?$")
_AUTOGRAD = re.compile(r"^autograd::engine::evaluate_function|Backward\d*$")
_RANGE_TOKENS = re.compile(r"[^A-Za-z0-9_]+")
_MODULE = re.compile(r"([A-Za-z0-9_]+)\(([^()]*)\)")
_COMPILED_GRAPH = re.compile(r"^## Call CompiledFxGraph (\w+) ##$")
COMPILED_WRAPPER = "OptimizedModule"  # torch.compile's module wrapper (torch._dynamo.eval_frame)


@dataclass
class LaunchLink:
    """What launched one GPU activity; ``None`` where the trace does not say."""

    launch_s: float | None  # when the runtime call was made
    op: CpuEvent | None  # innermost op
    candidates: tuple[CpuEvent, ...]  # dispatchable ops with recorded inputs, outermost first: whose work counts
    ranges: tuple[str, ...]
    phase: str | None
    step: int | None
    layer: str | None
    marked_call: int | None = None  # hroofline's number of the op call that launched it, where the trace marks it
    # in a torch.compile'd graph: its FX cache key, when that call of the graph began, and the op (a Triton
    # kernel's event, a library call's ATen op) the graph's code called: (key, graph start, op name, op start)
    compiled_call: tuple[str, float, str, float] | None = None


def range_phase(name: str) -> str | None:
    """The phase a range names: 'forward', '## backward ##', 'DistributedDataParallel.forward',
    'Optimizer.step#SGD.step', '## forward:pos_w ##', '[param|model|measure|forward]': by the whole name,
    else by its first or last word; a serving engine's step range (vLLM's
    'execute_context_2(14721)_generation_0(0)') by its requests: prefill, decode or mixed."""
    step = serving_step(name)
    if step is not None:
        return step.phase
    whole = canonical_phase(name.strip("# ").strip())
    if whole and whole != "other":
        return whole
    words = [w for w in _RANGE_TOKENS.split(name) if w]
    if not words:
        return None
    # A last word 'step' names the optimizer only after 'Optimizer' ('Optimizer.step#SGD.step', caught by the
    # first word): 'Trainer.step' is a whole training step.
    for word in (words[0], *([words[-1]] if words[-1].lower() != "step" else [])):
        phase = canonical_phase(word)
        if phase and phase != "other":
            return phase
    return None


def module_path(hierarchy: str) -> str | None:
    """'TOP(ResNet)::layer1(Sequential)::0(BasicBlock)' -> 'layer1.0' (the names, outermost first, without the
    top module)."""
    names = [name for name, _ in _MODULE.findall(hierarchy if isinstance(hierarchy, str) else "")]
    if names and names[0].lower() == "top":
        names = names[1:]
    return ".".join(names) or None


class _Intervals:
    """Named time intervals of a process; ``at(t)`` is the one that started last among those open at t."""

    def __init__(self, items: list[tuple[float, float, str]]) -> None:
        self.items = sorted(items)
        self.starts = [start for start, _, _ in self.items]
        # The latest end among the intervals up to each position: no earlier interval can still be open at t
        # once it is below t, which ends the scan back.
        self.reach: list[float] = []
        for _, end, _ in self.items:
            self.reach.append(max(end, self.reach[-1]) if self.reach else end)

    def at(self, time: float) -> str | None:
        position = bisect.bisect_right(self.starts, time) - 1
        while position >= 0 and self.reach[position] >= time:
            start, end, value = self.items[position]
            if start <= time <= end:
                return value
            position -= 1
        return None


def _stacks(events: list[CpuEvent], times: list[float]) -> list[list[CpuEvent]]:
    """The events open at each of ``times`` (sorted), outermost first: one sweep over the thread's events."""
    ordered = sorted(events, key=lambda e: (e.start_s, -e.end_s))
    stacks, open_events, position = [], [], 0
    for time in times:
        while position < len(ordered) and ordered[position].start_s <= time:
            event = ordered[position]
            open_events = [e for e in open_events if e.end_s >= event.start_s]
            open_events.append(event)
            position += 1
        open_events = [e for e in open_events if e.end_s >= time]
        stacks.append(list(open_events))
    return stacks


def link_activities(trace: TraceEvents, activities: list[GpuActivity]) -> list[LaunchLink]:
    """One link per activity, in order."""
    return link_calls(
        trace, [trace.runtime.get(a.correlation) if a.correlation is not None else None for a in activities]
    )


def link_calls(trace: TraceEvents, calls: list[RuntimeCall | None]) -> list[LaunchLink]:
    """One link per runtime call of ``trace``, in order: the ops and ranges open on its thread when it was made
    (an empty link where the call is None)."""
    by_thread = _events_by_thread(trace)
    lookups = _lookups(trace)
    queries: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    for index, call in enumerate(calls):
        if call is not None:
            queries[call.thread].append((call.start_s, index))
    stack_of: dict[int, list[CpuEvent]] = {}
    for thread, points in queries.items():
        points.sort()
        for (_, index), stack in zip(points, _stacks(by_thread.get(thread, []), [t for t, _ in points]), strict=True):
            stack_of[index] = stack
    links = []
    for index, call in enumerate(calls):
        if call is None:
            links.append(LaunchLink(None, None, (), (), None, None, None, None))
            continue
        links.append(_link(call.start_s, call.thread, stack_of.get(index, []), lookups))
    return links


def _events_by_thread(trace: TraceEvents) -> dict[tuple[str, str], list[CpuEvent]]:
    return _events_by_thread_of(trace.cpu)


def _events_by_thread_of(events: list[CpuEvent]) -> dict[tuple[str, str], list[CpuEvent]]:
    by_thread: dict[tuple[str, str], list[CpuEvent]] = defaultdict(list)
    for event in events:
        by_thread[event.thread].append(event)
    return by_thread


def process_ranges(trace: TraceEvents) -> tuple[_Intervals, _Intervals, _Intervals]:
    """The process-wide ranges looked up by time: phases, profiler steps and hroofline's layer ranges."""
    ranges = [e for e in trace.cpu if e.is_range]
    phases = _Intervals([(e.start_s, e.end_s, p) for e in ranges if (p := range_phase(e.name))])
    steps = _Intervals([(e.start_s, e.end_s, m.group(1)) for e in ranges if (m := _STEP.match(e.name))])
    prefix = len(LAYER_RANGE_PREFIX)
    layers = [(e.start_s, e.end_s, e.name[prefix:]) for e in ranges if e.name.startswith(LAYER_RANGE_PREFIX)]
    return phases, steps, _Intervals(layers)


def forward_passes(trace: TraceEvents) -> _Intervals:
    """The forward passes of a trace, from autograd's own records, for traces whose ranges name no forward (a
    script profiled without ``record_function``). Each op records autograd's sequence number when it starts
    (``Sequence number``), and the backward op of the node an op created records the same number: the last op to
    start with a number a backward op has is the one that created that node, in a forward pass. A forward pass
    is the time from one such op's start to the last one's end, cut where a backward op or a phase range starts
    (a trace of several steps has one per step). Ops that ran before the pass's first node (loading a batch)
    stay outside it; a trace without backward ops (inference) or without sequence numbers (older PyTorch) has
    none."""
    ops = [e for e in trace.cpu if not e.is_range]
    differentiated = {n for e in ops if _AUTOGRAD.search(e.name) and (n := _sequence_number(e)) is not None}
    if not differentiated:
        return _Intervals([])
    creators = {number: op for number, op in _creating_ops(ops).items() if number in differentiated}
    cuts = sorted(
        e.start_s
        for e in trace.cpu
        if (e.is_range and range_phase(e.name)) or (not e.is_range and _AUTOGRAD.search(e.name))
    )
    passes: list[tuple[float, float, str]] = []
    previous = None
    for op in sorted(creators.values(), key=lambda e: e.start_s):
        cut = previous is None or bisect.bisect_right(cuts, op.start_s) > bisect.bisect_right(cuts, previous.start_s)
        if cut:
            passes.append((op.start_s, op.end_s, "forward"))
        else:
            start, end, _ = passes[-1]
            passes[-1] = (start, max(end, op.end_s), "forward")
        previous = op
    return _Intervals(passes)


def _creating_ops(ops: list[CpuEvent]) -> dict[int, CpuEvent]:
    """Per autograd sequence number, the op that created the node: the last forward op to start with it."""
    creators: dict[int, CpuEvent] = {}
    for op in sorted(ops, key=lambda e: e.start_s):
        number = _sequence_number(op)
        if number is not None and not _AUTOGRAD.search(op.name):
            creators[number] = op
    return creators


def _sequence_number(op: CpuEvent) -> int | None:
    number = op.args.get("Sequence number")
    return number if isinstance(number, int) and not isinstance(number, bool) and number >= 0 else None


class ModuleLayers:
    """The layers of a trace recorded with ``with_stack=True``: each ``nn.Module`` call is an event named by its
    class and a per-class counter (``Linear_1``), nested as the calls were. A launch in one is on the path of those
    open around it on its thread, outermost first (``ResNet_0.Sequential_0.BasicBlock_1.Conv2d_0``: class names,
    as the trace has no attribute names). Backward runs in autograd's engine, outside any module call: a backward
    op takes the layer of the forward op that created its node (the last to start with its ``Sequence number``).
    A torch.compile'd model is one ``OptimizedModule`` call (Dynamo inlines the modules inside): the compiled
    region (:data:`hroofline.model.layers.COMPILED`), as ``profile --compile`` labels it."""

    def __init__(self, trace: TraceEvents) -> None:
        paths: dict[tuple[str, str], list[tuple[float, float, str]]] = defaultdict(list)
        for thread, events in _events_by_thread_of(trace.modules).items():
            stack: list[CpuEvent] = []
            for event in sorted(events, key=lambda e: (e.start_s, -e.end_s)):
                while stack and stack[-1].end_s < event.start_s:
                    stack.pop()
                stack.append(event)
                names = [e.name for e in stack]
                compiled = any(name.rsplit("_", 1)[0] == COMPILED_WRAPPER for name in names)
                paths[thread].append((event.start_s, event.end_s, COMPILED if compiled else ".".join(names)))
        self._at = {thread: _Intervals(items) for thread, items in paths.items()}
        self._created: dict[int, str] = {}
        if self._at:
            for number, op in _creating_ops([e for e in trace.cpu if not e.is_range]).items():
                if (layer := self._path(op.thread, op.start_s)) is not None:
                    self._created[number] = layer

    def _path(self, thread: tuple[str, str], time: float) -> str | None:
        intervals = self._at.get(thread)
        return intervals.at(time) if intervals is not None else None

    def layer(self, thread: tuple[str, str], time: float, ops: list[CpuEvent]) -> str | None:
        """The layer of a launch at ``time`` on ``thread`` inside ``ops`` (outermost first), or None."""
        if not self._at:
            return None
        found = self._path(thread, time)
        if found is not None:
            return found
        for op in reversed(ops):
            number = _sequence_number(op) if _AUTOGRAD.search(op.name) else None
            if number is not None:
                return self._created.get(number)
        return None


@dataclass(frozen=True)
class _Lookups:
    """What a launch is looked up in besides the events open on its thread."""

    phases: _Intervals
    steps: _Intervals
    layers: _Intervals  # hroofline's layer ranges
    forward: _Intervals
    modules: ModuleLayers


def _lookups(trace: TraceEvents) -> _Lookups:
    phases, steps, layers = process_ranges(trace)
    return _Lookups(phases, steps, layers, forward_passes(trace), ModuleLayers(trace))


def _link(time: float, thread: tuple[str, str], stack: list[CpuEvent], lookups: _Lookups) -> LaunchLink:
    phases, steps, layers, forward = lookups.phases, lookups.steps, lookups.layers, lookups.forward
    ops = [e for e in stack if not e.is_range]
    ranges = tuple(
        e.name for e in stack if e.is_range and not e.name.startswith((LAYER_RANGE_PREFIX, CALL_RANGE_PREFIX))
    )
    call = next((e.name for e in reversed(stack) if e.is_range and e.name.startswith(CALL_RANGE_PREFIX)), None)
    named = [p for p in map(range_phase, ranges) if p]
    if named:
        phase: str | None = named[-1]
    elif any(_AUTOGRAD.search(op.name) for op in ops):
        phase = "backward"
    else:
        phase = phases.at(time) or forward.at(time)
    candidates = tuple(op for op in ops if _DISPATCHABLE.match(op.name) and _has_inputs(op))
    layer = layers.at(time)
    if layer is None:
        layer = next((p for op in reversed(ops) if (p := module_path(op.args.get("Module Hierarchy", "")))), None)
    if layer is None:
        layer = lookups.modules.layer(thread, time, ops)
    step = steps.at(time)
    return LaunchLink(
        launch_s=time,
        op=ops[-1] if ops else None,
        candidates=candidates,
        ranges=ranges,
        phase=phase,
        step=int(step) if step is not None else None,
        layer=layer,
        marked_call=int(call[len(CALL_RANGE_PREFIX) :]) if call and call[len(CALL_RANGE_PREFIX) :].isdigit() else None,
        compiled_call=_compiled_call(stack),
    )


def _compiled_call(stack: list[CpuEvent]) -> tuple[str, float, str, float] | None:
    """The compiled graph a launch ran in (Inductor's ``## Call CompiledFxGraph KEY ##`` range) and the first op
    inside it: the graph's call that launched the kernel."""
    for index, event in enumerate(stack):
        match = _COMPILED_GRAPH.match(event.name) if event.is_range else None
        if match:
            op = next((e for e in stack[index + 1 :] if not e.is_range), None)
            return (match.group(1), event.start_s, op.name, op.start_s) if op is not None else None
    return None


def _has_inputs(op: CpuEvent) -> bool:
    """Whether the trace recorded the op's inputs (``record_shapes``): shapes, or types of 0-d tensors."""
    dims = input_dims(op.args)
    return dims is not None and (any(d for d in dims) or bool(op.args.get("Input type")))


def link_cpu_ops(trace: TraceEvents) -> tuple[list[CpuEvent], list[float], list[LaunchLink]]:
    """A CPU-only trace: every op with its self time (its duration less its child ops'), so that the ops'
    times add up to the step's without counting any twice, each linked like a kernel to the ops and ranges
    around it (its own name included), at its midpoint."""
    by_thread = _events_by_thread(trace)
    lookups = _lookups(trace)
    found: list[tuple[CpuEvent, float, list[CpuEvent]]] = []
    for events in by_thread.values():
        found += _ops_with_self_time(events)
    found.sort(key=lambda entry: entry[0].start_s)
    links = [_link((op.start_s + op.end_s) / 2, op.thread, chain, lookups) for op, _, chain in found]
    return [op for op, _, _ in found], [own for _, own, _ in found], links


def _ops_with_self_time(events: list[CpuEvent]) -> list[tuple[CpuEvent, float, list[CpuEvent]]]:
    """The ops of one thread, each with its self time and its enclosing ops and ranges, outermost first.
    Ops nest; ranges need not (a layer range opens inside one op and closes inside another), so ranges are
    looked up by time at each op's midpoint."""
    ops = sorted((e for e in events if not e.is_range), key=lambda e: (e.start_s, -e.end_s))
    children_s: dict[int, float] = defaultdict(float)
    chains: list[tuple[CpuEvent, list[CpuEvent]]] = []
    stack: list[CpuEvent] = []
    for op in ops:
        # an op that starts inside another is its child, even if it ends a little after it (rounding): only
        # the part inside the parent is taken from the parent's own time
        while stack and not (stack[-1].start_s <= op.start_s < stack[-1].end_s or op.start_s == stack[-1].start_s):
            stack.pop()
        if stack:
            children_s[id(stack[-1])] += max(min(op.end_s, stack[-1].end_s) - op.start_s, 0.0)
        stack.append(op)
        chains.append((op, list(stack)))
    middles = [(op.start_s + op.end_s) / 2 for op, _ in chains]
    order = sorted(range(len(chains)), key=middles.__getitem__)
    open_ranges = _stacks([e for e in events if e.is_range], [middles[i] for i in order])
    result: list[tuple[CpuEvent, float, list[CpuEvent]]] = []
    for index, ranges in zip(order, open_ranges, strict=True):
        op, chain = chains[index]
        own = max(op.end_s - op.start_s - children_s[id(op)], 0.0)
        result.append((op, own, sorted(ranges + chain, key=lambda e: (e.start_s, -e.end_s))))
    return result
