"""The layer of each kernel a torch.compile'd graph launches, read from the compilation's ``TORCH_TRACE`` log.

``TORCH_TRACE=DIR`` (or ``torch._logging`` structured tracing) writes, per compiled graph: Dynamo's graph, whose
inputs are named after their sources (``L['self']._modules['layer1']._modules['0']._modules['conv1']
._parameters['weight']`` -> ``L_self_modules_layer1_modules_0_modules_conv1_parameters_weight_``); AOTAutograd's
forward and backward graphs after Inductor's passes (``inductor_post_grad_graph``), each node under a
``# File: path:line in function, code: ...`` comment of the source line that made it; Inductor's output code, whose
``call`` launches each kernel under ``# Topologically Sorted Source Nodes: [...]`` (the post-grad nodes it
computes) and ``# [Provenance debug handles] NAME:N`` (N: the call's place in the graph); the kernels' Python stacks
(``inductor_provenance_tracking_kernel_stack_traces``); and the graph's FX cache key, which the profiler's
``## Call CompiledFxGraph KEY ##`` range names around the graph's launches.

A post-grad node's module, in this order (forward graph, then backward, which reads the forward's saved nodes):

1. a node reading a parameter or buffer belongs to its module; a backward node reading saved forward nodes of
   its own source line belongs to the module most of them are in (a gradient reading what its forward op saved);
2. else that of the nodes of its own source line it reads or is read by (a GEMM's reshaped input and output),
   else that of the nearest node of its line (before it, else after) -- either only where that module lies
   inside the node's bounds: the common ancestor of the modules of the nodes placed by 1 before and after it
   (it ran between their work, so inside that ancestor's forward; a line of a module class's code runs in every
   instance of the class);
3. else its bounds. A node before the first or after the last placed node runs in the compiled module's own
   code (``""``: the model's own).

A parameter shared by two modules (GPT-2's ``lm_head`` and ``wte``) is named after the first; a node on a line of
the compiled function itself that calls ``self.NAME(...)`` and reads a parameter of no module NAME belongs to NAME,
where the line's nodes read the parameters of that one module only (else the line is the caller's, printed for
every node of a model made of PyTorch's own modules, whose frames the stacks leave out).
A kernel fused from nodes of several modules goes to their common ancestor.
"""

from __future__ import annotations

import io
import json
import lzma
import re
import tarfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hroofline.errors import InputError

_GRAPH_ARTIFACTS = (
    "inductor_post_grad_graph",
    "inductor_output_code",
    "inductor_provenance_tracking_node_mappings",
    "inductor_provenance_tracking_kernel_stack_traces",
)
_ENTRY = re.compile(r"^[VIWEC]\d{4} [^{]*(\{.*\})\s*$")
_NODE = re.compile(r"^\s+(\w+)(?:: \"[^\"]*\")? = (.*)$")
_FILE = re.compile(r"^\s+# File: (.*?):(\d+) in (\w+), code: (.*)$")
_PLACEHOLDER = re.compile(r"(\w+): \"")
_IDENT = re.compile(r"(?<![\w.])[A-Za-z_]\w*")  # a name, not an attribute (the op in 'torch.ops.aten.mm')
_SOURCE_NODES = re.compile(r"# Topologically Sorted Source Nodes: \[([^\]]*)\]")
_HANDLE = re.compile(r"# \[Provenance debug handles\] (\S+):(\d+)\s*$")
_AOT_ID = re.compile(r"# AOT ID: \['(\d+)_(\w+)'\]")
_SELF_CALL = re.compile(r"\bself\.(\w+)\(")
_STACK_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\w+)\n\s*(.*)')


@dataclass
class CompiledCall:
    """One launch site of a compiled graph's ``call``, in launch order."""

    handle: str  # Inductor's debug handle, 'triton_poi_fused_relu_3' or 'extern_kernels.mm'
    op: str  # what the profiler names the call: the Triton kernel, or the ATen op ('aten::mm')
    layer: str | None  # module path ('' the compiled module's own code); None: no node placed


@dataclass
class CompiledGraph:
    """A compiled graph's launch sites, by its FX cache key."""

    key: str
    kind: str  # 'forward', 'backward' or 'inference' (AOTAutograd's graph)
    calls: list[CompiledCall] = field(default_factory=list)


@dataclass
class _Placed:
    """The modules of a graph's nodes and inputs, their source lines, and which inputs are parameters."""

    modules: dict[str, str]
    lines: dict[str, tuple[str, int, str, str] | None]
    parameters: set[str]


@dataclass
class _Graph:
    """A post-grad FX graph as printed: nodes in order, each with its source line and the names it reads."""

    placeholders: list[str]
    nodes: list[str]
    line: dict[str, tuple[str, int, str, str] | None]  # (file, line, function, code)
    reads: dict[str, list[str]]


def layers_from_compile_log(path: Path | str) -> dict[str, CompiledGraph]:
    """The compiled graphs of a ``TORCH_TRACE`` log (a folder of logs, a .tar[.xz|.gz] of one, or one log file),
    by FX cache key, each call with the module it runs in."""
    entries = list(_entries(Path(path)))
    if not entries:
        raise InputError(f"{path}: no TORCH_TRACE log entries", "give the folder TORCH_TRACE=DIR wrote, or a tar of it")
    graphs: dict[str, CompiledGraph] = {}
    dynamo_inputs: dict[tuple, list[str]] = {}
    forwards: dict[tuple, _Placed] = {}  # (frame, AOT id) -> the forward graph's nodes, for its backward
    pending: dict[str, str] = {}
    for meta, payload in entries:
        compile_id = (meta.get("frame_id"), meta.get("frame_compile_id"))
        name = meta["artifact"]["name"] if "artifact" in meta else next(iter(_kinds(meta)), "")
        if name == "dynamo_output_graph":
            dynamo_inputs[compile_id] = _signature(payload)
        elif name in _GRAPH_ARTIFACTS:
            pending[name] = payload
        elif name.startswith("fx_graph_cache_") and "inductor_output_code" in pending:
            key = _json(payload).get("key")
            graph = _placed_graph(pending, dynamo_inputs.get(compile_id, []), forwards, compile_id)
            pending = {}
            if key:
                graph.key = key
                graphs[key] = graph
    if not graphs:
        raise InputError(
            f"{path}: no Inductor output code with its FX cache key in the log",
            "compile with Inductor (the default backend) under TORCH_TRACE=DIR",
        )
    if not any(graph.calls for graph in graphs.values()):
        raise InputError(
            f"{path}: the log's output code names no kernel's provenance ('# [Provenance debug handles]')",
            "compile again with INDUCTOR_PROVENANCE=1 set as well as TORCH_TRACE=DIR",
        )
    return graphs


def _entries(path: Path) -> Iterator[tuple[dict, str]]:
    for text in _log_texts(path):
        meta: dict | None = None
        payload: list[str] = []
        for line in text.splitlines():
            if line.startswith("\t"):
                payload.append(line[1:])
                continue
            match = _ENTRY.match(line)
            if match is None:
                continue
            if meta is not None:
                yield meta, "\n".join(payload)
            try:
                meta, payload = json.loads(match.group(1)), []
            except json.JSONDecodeError:
                meta, payload = None, []
        if meta is not None:
            yield meta, "\n".join(payload)


def _log_texts(path: Path) -> Iterator[str]:
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if path.is_dir():
        for file in sorted(path.rglob("*.log")):
            yield file.read_text(errors="replace")
        return
    if path.name.endswith((".tar", ".tar.xz", ".tar.gz", ".tgz")):
        try:
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    if member.isfile() and member.name.endswith(".log"):
                        handle = tar.extractfile(member)
                        if handle is not None:
                            yield io.TextIOWrapper(handle, errors="replace").read()
        except (tarfile.TarError, lzma.LZMAError, OSError) as error:
            raise InputError(f"{path}: not a readable tar of TORCH_TRACE logs ({error})") from None
        return
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", errors="replace") as handle:
        yield handle.read()


def _json(payload: str) -> dict:
    """A JSON artifact's payload; an empty or cut-off one (a log whose run was killed) as nothing."""
    try:
        value = json.loads(payload) if payload else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _kinds(meta: dict) -> list[str]:
    skip = {"frame_id", "frame_compile_id", "attempt", "has_payload", "rank", "compiled_autograd_id", "stack"}
    return [k for k in meta if k not in skip]


def _signature(graph_text: str) -> list[str]:
    """The input names of a printed graph's ``forward``, in order."""
    if "def forward(" not in graph_text:
        return []
    head = graph_text.split("def forward(", 1)[1].split("):\n", 1)[0]
    return [name for name in _PLACEHOLDER.findall(head) if name != "self"]


def parameter_module(dynamo_input: str) -> str | None:
    """The module path of a Dynamo graph input that is a parameter or buffer:
    'L_self_modules_layer1_modules_0_modules_conv1_parameters_weight_' -> 'layer1.0.conv1';
    'L_self_parameters_w_' -> '' (the compiled module's own); None for any other input ('L_x_')."""
    for kind in ("_parameters_", "_buffers_"):
        if kind in dynamo_input:
            owner = dynamo_input.rsplit(kind, 1)[0]
            return ".".join(owner.split("_modules_")[1:])
    return None


def _parse_graph(text: str) -> _Graph:
    placeholders = _signature(text)
    known = set(placeholders)
    graph = _Graph(placeholders, [], {}, {})
    line: tuple[str, int, str, str] | None = None
    for raw in text.splitlines():
        file = _FILE.match(raw)
        if file:
            line = (file.group(1), int(file.group(2)), file.group(3), file.group(4))
            continue
        node = _NODE.match(raw)
        if node is None:
            if not raw.strip():
                line = None
            continue
        name, rhs = node.groups()
        expression = rhs.split(";  ", 1)[0]
        expression = expression.split("(", 1)[1] if "(" in expression else expression  # the arguments
        graph.nodes.append(name)
        graph.line[name] = line
        graph.reads[name] = [t for t in dict.fromkeys(_IDENT.findall(expression)) if t in known]
        known.add(name)
    return graph


def _placed_graph(
    pending: dict[str, str], dynamo_inputs: list[str], forwards: dict[tuple, _Placed], compile_id: tuple
) -> CompiledGraph:
    code = pending["inductor_output_code"]
    kind_match = _AOT_ID.search(code)
    kind = kind_match.group(2) if kind_match else "inference"
    aot = (compile_id[0], kind_match.group(1) if kind_match else "")
    stacks = _json(pending.get("inductor_provenance_tracking_kernel_stack_traces", ""))
    mappings = _json(pending.get("inductor_provenance_tracking_node_mappings", ""))
    graph = _parse_graph(pending.get("inductor_post_grad_graph", ""))
    # the output code names a forward kernel's nodes by their pre-grad names; the mappings by post-grad ones
    post_nodes = mappings.get("cppCodeToPost", {})
    calls = [(handle, n, post_nodes.get(f"{handle}:{n}", nodes)) for handle, n, nodes in _calls(code)]
    _lines_from_stacks(graph, calls, stacks)
    if kind == "backward" and aot in forwards:
        before = forwards[aot]
    else:
        parameters = {}
        for index, placeholder in enumerate(graph.placeholders):
            if index < len(dynamo_inputs) and (module := parameter_module(dynamo_inputs[index])) is not None:
                parameters[placeholder] = module
        before = _Placed(parameters, {}, set(parameters))
    placed = place_nodes(graph, before, _own_lines(stacks))
    if kind == "forward":
        forwards[aot] = placed
    result = CompiledGraph("", kind)
    for handle, _, nodes in calls:
        layers = [placed.modules[n] for n in _own_nodes(handle, nodes) if n in placed.modules]
        result.calls.append(CompiledCall(handle, trace_op_name(handle), common_ancestor(layers) if layers else None))
    return result


def _lines_from_stacks(graph: _Graph, calls: list[tuple[str, int, list[str]]], stacks: dict[str, list[str]]) -> None:
    """Gives the nodes a graph prints without a source line (PyTorch 2.14's backward graphs print few) the line
    of their launch site's stack, where it has one: the innermost frame."""
    for handle, ordinal, nodes in calls:
        traces = stacks.get(f"{handle}:{ordinal}", [])
        frames = _STACK_FRAME.findall(traces[0]) if len(traces) == 1 else []
        if frames:
            file, line, function, code = frames[-1]
            for node in _own_nodes(handle, nodes):
                if node in graph.line and graph.line[node] is None:
                    graph.line[node] = (file, int(line), function, code.strip())


def _own_nodes(handle: str, nodes: list[str]) -> list[str]:
    """A library call's nodes are those of its op ('convolution_backward_3' of aten::convolution_backward): its
    source nodes list the nodes of the Triton kernels that feed it too. A Triton kernel's are all it lists."""
    if handle.startswith(("triton_", "cpp_")):
        return nodes
    op = trace_op_name(handle).removeprefix("aten::")
    own = [n for n in nodes if re.fullmatch(rf"{re.escape(op)}(_\w+)?", n)]  # mm_3, addmm_default
    return own or nodes


def _own_lines(stacks: dict[str, list[str]]) -> set[tuple[str, int]]:
    """The source lines of the compiled function itself: the kernels' stacks one frame deep."""
    lines = set()
    for traces in stacks.values():
        for trace in traces:
            frames = _STACK_FRAME.findall(trace)
            if len(frames) == 1:
                lines.add((frames[0][0], int(frames[0][1])))
    return lines


def place_nodes(graph: _Graph, before: _Placed, own_lines: set[tuple[str, int]]) -> _Placed:
    """Each node's module by the rules of this module's docstring; ``before``: what the graph's inputs are
    (parameters, and a backward graph's saved forward nodes) and their modules and source lines."""
    modules: dict[str, str] = {}
    lines = {**before.lines, **graph.line}
    owners_on_line: dict[tuple[str, int, str, str] | None, set[str]] = {}
    for name in graph.nodes:
        read = {before.modules[r] for r in graph.reads[name] if r in before.parameters}
        owners_on_line.setdefault(graph.line[name], set()).update(read)
    for name in graph.nodes:  # 1. parameters read, else saved forward nodes of its own line
        line = graph.line[name]
        parameters = [
            _shared_parameter_owner(before.modules[r], line, own_lines, len(owners_on_line[line]))
            for r in graph.reads[name]
            if r in before.parameters
        ]
        saved = [
            before.modules[r]
            for r in graph.reads[name]
            if r in before.modules and line is not None and lines.get(r) == line
        ]
        if parameters or saved:
            modules[name] = common_ancestor(parameters) if parameters else _most_read(saved)
    neighbours: dict[str, list[str]] = {name: [] for name in graph.nodes}  # data flow within one source line
    for name in graph.nodes:
        for read in graph.reads[name]:
            # a node printed without a source line (a view, a transpose) links to any line
            if read not in neighbours or not graph.reads[read]:  # a constant, read anywhere, links nothing
                continue
            if graph.line[read] == graph.line[name] or graph.line[read] is None or graph.line[name] is None:
                neighbours[name].append(read)
                neighbours[read].append(name)
    order = {name: index for index, name in enumerate(graph.nodes)}
    bounds = _bounds(graph.nodes, modules)
    _spread(list(modules), neighbours, modules, bounds)  # 2. along each line's data flow
    by_line: dict[tuple, list[str]] = {}
    for name in graph.nodes:
        if name in modules and graph.line[name] is not None:
            by_line.setdefault(graph.line[name], []).append(name)
    for name in graph.nodes:  # 2. the nearest node of its line, before it else after, inside its bounds
        line = graph.line[name]
        if name in modules or line not in by_line:
            continue
        same = sorted(by_line[line], key=lambda n: (order[n] > order[name], abs(order[n] - order[name])))
        inside = [n for n in same if _within(modules[n], bounds[name])]
        if inside:
            modules[name] = modules[inside[0]]
            _spread([name], neighbours, modules, bounds)
    for name in graph.nodes:  # 3. between the placed nodes around it, with the rest of its line's data flow
        if name in modules:
            continue
        modules[name] = bounds[name]
        _spread([name], neighbours, modules, bounds)
    return _Placed({**before.modules, **modules}, lines, before.parameters)


def _most_read(modules: list[str]) -> str:
    """The module most of a node's saved inputs come from: a gradient reads its forward op's saved outputs, and
    maybe a tensor made once and read by every instance (GPT-2's attention mask); a tie, their common ancestor."""
    counts = Counter(modules).most_common()
    tied = [module for module, count in counts if count == counts[0][1]]
    return tied[0] if len(tied) == 1 else common_ancestor(tied)


def _bounds(nodes: list[str], modules: dict[str, str]) -> dict[str, str]:
    """Each unplaced node's sure module: the common ancestor of the placed nodes before and after it (it ran
    between their work); the compiled module's own ('') before the first or after the last."""
    bounds: dict[str, str] = {}
    previous: str | None = None
    waiting: list[str] = []
    for name in nodes:
        if name not in modules:
            waiting.append(name)
            continue
        for unplaced in waiting:
            bounds[unplaced] = common_ancestor([previous, modules[name]]) if previous is not None else ""
        waiting, previous = [], modules[name]
    bounds.update(dict.fromkeys(waiting, ""))
    return bounds


def _within(module: str, bound: str) -> bool:
    return not bound or module == bound or module.startswith(bound + ".")


def _spread(
    seeds: list[str], neighbours: dict[str, list[str]], modules: dict[str, str], bounds: dict[str, str]
) -> None:
    """Places the unplaced nodes reachable from ``seeds`` along ``neighbours`` on the module of the seed that
    reaches them first (breadth first), where it lies inside their bounds (a mask every block's attention reads
    on one line of shared code links the blocks, but each block's attention runs inside its own block)."""
    queue = list(seeds)
    for name in queue:
        for other in neighbours.get(name, []):
            if other not in modules and _within(modules[name], bounds.get(other, "")):
                modules[other] = modules[name]
                queue.append(other)


def _shared_parameter_owner(module: str, line: tuple[str, int, str, str] | None, own: set, owners: int) -> str:
    """A parameter's module, or, read on a line of the compiled function calling ``self.NAME(`` where NAME is
    no module of the parameter's path, NAME (a tied weight, named after its first module) -- where the line reads
    the parameters of that one module only (``owners``): a line whose nodes read those of several is no one
    module's call but the caller's, printed for every node when all the model's code is PyTorch's own (an
    ``nn.Sequential`` of ``nn.Linear``; the stacks leave PyTorch's frames out)."""
    if line is None or owners != 1:
        return module
    called = _SELF_CALL.findall(line[3])
    if not called or any(name in module.split(".") for name in called):
        return module
    if (line[0], line[1]) in own and len(called) == 1:
        return called[0]
    return module


def common_ancestor(modules: list[str]) -> str:
    """The deepest module path above all of ``modules`` ('' the root): ['a.b.c', 'a.b.d'] -> 'a.b'."""
    parts = [m.split(".") if m else [] for m in modules]
    shared: list[str] = []
    for column in zip(*parts, strict=False):
        if len(set(column)) != 1:
            break
        shared.append(column[0])
    return ".".join(shared)


def _calls(code: str) -> list[tuple[str, int, list[str]]]:
    """The output code's launch sites in order: (debug handle, its number, the nodes it computes)."""
    body = code.rsplit("def call(self, args)", 1)[-1] if "def call(self, args)" in code else code
    calls: list[tuple[int, str, list[str]]] = []
    nodes: list[str] = []
    for raw in body.splitlines():
        source = _SOURCE_NODES.search(raw)
        if source:
            nodes = [n.strip() for n in source.group(1).split(",") if n.strip()]
            continue
        handle = _HANDLE.search(raw)
        if handle:
            calls.append((int(handle.group(2)), handle.group(1), nodes))
            nodes = []
    calls.sort()
    return [(handle, ordinal, nodes) for ordinal, handle, nodes in calls]


def trace_op_name(handle: str) -> str:
    """What the profiler names a launch site: a generated kernel by its name, a library call by its ATen op
    ('extern_kernels.mm' -> 'aten::mm'; 'torch.ops.aten.convolution_backward.default' -> its ATen op)."""
    if handle.startswith(("triton_", "cpp_")):  # generated kernels: their own name
        return handle
    parts = [p for p in handle.split(".") if p not in ("extern_kernels", "torch", "ops", "aten")]
    return f"aten::{parts[0]}" if parts else handle
