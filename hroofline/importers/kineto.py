"""PyTorch profiler (Kineto) traces: the Chrome-trace JSON that ``torch.profiler`` writes, read into tables.

Two schemas are read: today's (categories ``kernel``, ``cpu_op``, ``cuda_runtime``, ``user_annotation``,
``gpu_memcpy``, ``gpu_memset``; ``Input Dims``) and the 2021 one (``Kernel``, ``Operator``, ``Runtime``,
``Memcpy``, ``Memset``; ``Input dims``, ``external id``). Timestamps and durations are microseconds in
every schema, as the Chrome trace format says: whole in 2021, to the nanosecond (``12.345``) today.
``displayTimeUnit`` (``ms``, or ``ns`` in Kineto builds with ``DISPLAY_TRACE_IN_NS``) only sets how a viewer
shows them: Kineto's ``output_json.cpp`` writes microseconds whatever it says. Everything here is in seconds;
linking kernels to their CPU ops is :mod:`hroofline.importers.kineto_links`.
"""

from __future__ import annotations

import json
import math
import mmap
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hroofline.errors import InputError

GPU_CATEGORIES: dict[str, str] = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
}
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "runtime", "cuda_driver"})
OP_CATEGORIES = frozenset({"cpu_op", "operator"})
ANNOTATION_CATEGORIES = frozenset({"user_annotation"})
COUNTER_RANGE_CATEGORY = "cuda_profiler_range"  # CUPTI range profiling: one range per kernel, with counters
PYTHON_CATEGORY = "python_function"  # with_stack=True: Python calls, an nn.Module's as "nn.Module: Linear_0"
MODULE_EVENT_PREFIX = "nn.Module: "
MICROSECOND = 1e-6  # the unit of ts and dur, whatever displayTimeUnit says
_RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)


@dataclass
class CpuEvent:
    """A CPU op or a user range (``record_function``, ``ProfilerStep#N``), on one thread."""

    name: str
    thread: tuple[str, str]
    start_s: float
    end_s: float
    is_range: bool
    args: dict[str, Any]


@dataclass
class GpuActivity:
    """A kernel, memcpy or memset as the GPU ran it; ``correlation`` names its launching runtime call."""

    name: str
    category: str
    start_s: float
    duration_s: float
    correlation: int | None
    args: dict[str, Any]
    stamp: float = math.nan  # ts as the trace wrote it (microseconds): differences of two are exact in float64


@dataclass
class RuntimeCall:
    thread: tuple[str, str]
    start_s: float
    name: str = ""  # cudaLaunchKernel, cudaGraphLaunch, hipExtModuleLaunchKernel, ...
    # ROCm's launch calls name their kernel, grid and block (``kernel``, ``grid``, ``block``); CUDA's do not
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class TraceEvents:
    """One trace file, parsed."""

    path: str
    schema: str  # "current" or "2021"
    seconds_per_unit: float
    gpu: list[GpuActivity]
    counter_ranges: list[GpuActivity]
    cpu: list[CpuEvent]
    runtime: dict[int, RuntimeCall]
    devices: dict[int, dict[str, Any]]
    rank: int | None
    world_size: int | None
    distributed: dict[str, Any] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)  # events whose ts or dur is unusable, by why
    host_name: str | None = None  # the machine that recorded it, where the trace says (torch 2.1 on)
    cuda_versions: dict[str, str] = field(default_factory=dict)  # cuda_runtime_version, cuda_driver_version: "13.0"
    modules: list[CpuEvent] = field(default_factory=list)  # with_stack's module calls, named "Linear_0"

    def reject(self, why: str) -> None:
        self.rejected[why] = self.rejected.get(why, 0) + 1


NEGATIVE_GPU = "GPU events had a negative duration: their time left unknown"
NEGATIVE_CPU = "CPU events had a negative duration: taken as 0, as Kineto does"
UNUSABLE = "events had a ts or dur that is not a finite number: left out"


def looks_like_json(data: bytes | mmap.mmap) -> bool:
    """JSON text (an object, or an array of objects): a trace, or a JSON file that is not one. Not ncu's console
    output, whose first line can be ``[3154732] bench@127.0.0.1`` (a process id in brackets)."""
    head = bytes(data[:64]).lstrip(b"\xef\xbb\xbf \t\r\n")
    if head[:1] == b"{":
        return True
    return head[:1] == b"[" and head[1:].lstrip(b" \t\r\n")[:1] in (b"{", b"]", b"")


def parse_trace(data: bytes | mmap.mmap, path: Path) -> TraceEvents:
    text = bytes(data)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        cut = error.pos >= len(text.rstrip()) - 1
        reason = "it ends early: is the file truncated?" if cut else f"{error.msg} at line {error.lineno}"
        raise InputError(f"{path}: not valid JSON ({reason})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not valid JSON (not UTF-8 text)") from None
    # Kineto writes an object with traceEvents; the Chrome trace format also allows a bare array of events.
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list) or not any(isinstance(e, dict) and "ph" in e for e in events[:1000]):
        raise InputError(f"{path}: JSON without a traceEvents list: not a PyTorch profiler (Kineto) trace")
    document = document if isinstance(document, dict) else {}
    unit = MICROSECOND
    trace = TraceEvents(
        path=str(path),
        schema="current",
        seconds_per_unit=unit,
        gpu=[],
        counter_ranges=[],
        cpu=[],
        runtime={},
        devices=_devices(document.get("deviceProperties")),
        rank=None,
        world_size=None,
    )
    _read_distributed(document.get("distributedInfo"), trace, path)
    host = document.get("host_name")
    trace.host_name = str(host) if isinstance(host, str) and host else None
    trace.cuda_versions = _cuda_versions(document)
    for event in events:
        if isinstance(event, dict) and event.get("ph") == "X":
            _add_event(event, trace)
    return trace


CUDA_VERSION_KEYS = ("cuda_runtime_version", "cuda_driver_version")


def _cuda_versions(document: dict[str, Any]) -> dict[str, str]:
    """The CUDA runtime and driver versions Kineto states, as CUDA encodes them (1000 x major + 10 x minor: 13000 is
    13.0), where the trace has them."""
    versions = {}
    for key in CUDA_VERSION_KEYS:
        number = _integer(document.get(key))
        if number is not None and number > 0:
            versions[key] = f"{number // 1000}.{number % 1000 // 10}"
    return versions


def _devices(properties: Any) -> dict[int, dict[str, Any]]:
    if not isinstance(properties, list):
        return {}
    return {i: p for p in properties if isinstance(p, dict) and (i := _integer(p.get("id"))) is not None}


def _read_distributed(info: Any, trace: TraceEvents, path: Path) -> None:
    if isinstance(info, dict) and _integer(info.get("rank")) is not None:
        trace.distributed = info
        trace.rank = _integer(info["rank"])
        trace.world_size = _integer(info.get("world_size"))
        return
    found = _RANK_IN_NAME.search(path.name)
    trace.rank = int(found.group(1)) if found else None


def _add_event(event: dict[str, Any], trace: TraceEvents) -> None:
    category = str(event.get("cat", ""))
    lowered = category.lower()
    args = event.get("args")
    args = args if isinstance(args, dict) else {}
    unit = trace.seconds_per_unit
    try:
        stamp, length = float(event["ts"]), float(event.get("dur", 0.0))
        start, duration = stamp * unit, length * unit
    except (KeyError, TypeError, ValueError):
        if "ts" in event:
            trace.reject(UNUSABLE)
        return
    if not (math.isfinite(start) and math.isfinite(duration)):
        trace.reject(UNUSABLE)
        return
    if duration < 0:  # counted and said: a kernel's time unknown, a CPU range clamped to 0 as Kineto does
        trace.reject(NEGATIVE_GPU if lowered in GPU_CATEGORIES else NEGATIVE_CPU)
        duration = math.nan if lowered in GPU_CATEGORIES else 0.0
    if category in ("Kernel", "Operator", "Runtime", "Memcpy", "Memset"):
        trace.schema = "2021"
    if lowered in GPU_CATEGORIES:
        name, kind = str(event.get("name", "")), GPU_CATEGORIES[lowered]
        trace.gpu.append(GpuActivity(name, kind, start, duration, _integer(args.get("correlation")), args, stamp))
    elif lowered == COUNTER_RANGE_CATEGORY:
        trace.counter_ranges.append(GpuActivity(str(event.get("name", "")), "kernel", start, duration, None, args))
    elif lowered in RUNTIME_CATEGORIES:
        correlation = _integer(args.get("correlation"))
        if correlation is not None:
            trace.runtime[correlation] = RuntimeCall(_thread(event), start, str(event.get("name", "")), args)
    elif lowered == PYTHON_CATEGORY and str(event.get("name", "")).startswith(MODULE_EVENT_PREFIX):
        end = (stamp + max(length, 0.0)) * unit
        name = str(event["name"])[len(MODULE_EVENT_PREFIX) :]
        trace.modules.append(CpuEvent(name, _thread(event), start, end, True, {}))
    elif lowered in OP_CATEGORIES or lowered in ANNOTATION_CATEGORIES:
        name = str(event.get("name", ""))
        is_range = lowered in ANNOTATION_CATEGORIES or (category == "Operator" and is_user_range_name(name))
        # the end from the trace's own units: epoch-microsecond stamps have too few digits left for ts + dur
        # in seconds to keep a child inside its parent
        end = (stamp + max(length, 0.0)) * unit
        trace.cpu.append(CpuEvent(name, _thread(event), start, end, is_range, args))


def _integer(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _thread(event: dict[str, Any]) -> tuple[str, str]:
    return str(event.get("pid")), str(event.get("tid"))


# CPU events without a namespace that are ops rather than user ranges.
_OPS_WITHOUT_NAMESPACE = frozenset({"record_param_comms", "detach"})
_AUTOGRAD_NODE = re.compile(r"Backward\d*$")


def is_user_range_name(name: str) -> bool:
    """The 2021 schema writes ``record_function`` ranges as operators: they are the names without a
    ``namespace::`` (``ProfilerStep#5``, ``## forward ##``, ``Optimizer.step#SGD.step``) that are no
    autograd node (``AddmmBackward``)."""
    return "::" not in name and name not in _OPS_WITHOUT_NAMESPACE and not _AUTOGRAD_NODE.search(name)


def input_dims(args: dict[str, Any]) -> list[Any] | None:
    """An op's recorded input shapes (``record_shapes``): ``Input Dims`` today, ``Input dims`` in 2021."""
    dims = args.get("Input Dims", args.get("Input dims"))
    return dims if isinstance(dims, list) else None


def device_sms(trace: TraceEvents, device: int | None) -> int | None:
    """The SM count of a GPU of the trace's ``deviceProperties``, where it says."""
    count = _device_number(trace, device, "numSms")
    return int(count) if count is not None else None


def device_memory(trace: TraceEvents, device: int | None) -> float | None:
    """The device memory (bytes) of a GPU of the trace's ``deviceProperties``, where it says."""
    return _device_number(trace, device, "totalGlobalMem")


def _device_number(trace: TraceEvents, device: int | None, key: str) -> float | None:
    properties = trace.devices.get(device if device is not None else -1) or next(iter(trace.devices.values()), None)
    value = properties.get(key) if properties else None
    return float(value) if isinstance(value, int | float) else None


def device_description(trace: TraceEvents, device: int | None) -> tuple[str | None, str | None]:
    """(name, compute capability) of a GPU of the trace's ``deviceProperties``."""
    properties = trace.devices.get(device if device is not None else -1) or next(iter(trace.devices.values()), None)
    if not properties:
        return None, None
    major, minor = properties.get("computeMajor"), properties.get("computeMinor")
    cc = f"{major}.{minor}" if major is not None and minor is not None else None
    return properties.get("name"), cc
