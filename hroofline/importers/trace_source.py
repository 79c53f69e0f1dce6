"""A Kineto trace as a source of a run: measured time per GPU activity, analytic work per op.

Every kernel, memcpy and memset of the trace is a launch with the duration the trace measured. Its work:

- where the trace holds CUPTI counter values per kernel (``cuda_profiler_range`` events), FLOPs from them,
  by the metric set's formulas (the same as for ncu);
- else the analytic work of the op that launched it (:mod:`hroofline.importers.trace_work`: the recorded
  shapes replayed on the meta device, as ``predict`` counts), divided among the op's kernels in proportion to
  their measured durations (the op's FLOPs among its tensor-core kernels where it has some: a split-K GEMM's
  reduction kernel does none of the multiply-adds); its bytes are the fewest the op must move, counted at HBM
  only;
- memsets write, and device-to-device copies read and write, the bytes the trace gives them; host copies
  move them once through HBM;
- communication kernels have their bus bytes (:mod:`hroofline.importers.collectives`) and no FLOPs.

Kernels whose op has no shapes or no formula have unknown work (null, never 0): their time counts, and the
source's notes give the share of kernel time with known work.
"""

from __future__ import annotations

import hashlib
import time as clock
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hroofline.errors import InputError
from hroofline.importers.collectives import bus_bytes, collective_name, is_communication
from hroofline.importers.kineto import GpuActivity, TraceEvents, device_description
from hroofline.importers.kineto_links import LaunchLink, link_activities, link_cpu_ops
from hroofline.layers import phase_label
from hroofline.metricset import FLOP_QUANTITIES, MetricSet
from hroofline.model import SourceInfo, conform_launches
from hroofline.roofline import KernelTime, derive_quantities

TIME_METHOD = "measured: kernel duration in the PyTorch profiler trace (CUPTI activity)"
CPU_TIME_METHOD = "measured: the op's duration in the PyTorch profiler trace (CPU ops that call no other op)"
COUNTER_TIME_METHOD = "not measured: CUPTI range profiling replays each kernel, its range time is not kernel time"
ANALYTIC_NOTE = (
    "FLOPs and bytes are analytic: each op's recorded shapes replayed on the meta device with predict's formulas, "
    "split over the op's kernels in proportion to their durations; bytes are the fewest the op must move, "
    "counted at HBM only (L1 and L2 not measured); times are measured"
)
FORMULAS = {
    "flops": "PyTorch FLOP formulas (torch.utils.flop_counter) and metrics/cpu_ops.toml on the op's recorded shapes",
    "bytes_hbm": "fewest bytes the launching op must move (each input read once, each output written once)",
}


@dataclass(frozen=True)
class TraceOptions:
    phase: str | None = None
    steps: frozenset[int] | None = None
    rank: int | None = None
    cpu_ops: bool = False  # a CPU-only trace: its innermost ops are the launches


@dataclass
class TraceSource:
    """What the import stage hands the store: the same fields as an ncu source."""

    info: SourceInfo
    launches: pd.DataFrame
    cc: str | None
    device_name: str | None


def trace_source(trace: TraceEvents, digest: str, options: TraceOptions, metric_set: MetricSet) -> TraceSource:
    if not trace.gpu and trace.counter_ranges:
        return _counter_source(trace, digest, options, metric_set)
    if not trace.gpu and options.cpu_ops:
        ops, links = link_cpu_ops(trace)
        trace.gpu = [GpuActivity(op.name, "kernel", op.start_s, op.end_s - op.start_s, None, {}) for op in ops]
    elif not trace.gpu:
        raise InputError(
            f"{trace.path}: a PyTorch profiler trace with no GPU kernels, copies or sets",
            "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]; a CPU-only trace has no kernels",
        )
    else:
        links = link_activities(trace, trace.gpu)
    keep = [i for i, link in enumerate(links) if options.steps is None or link.step in options.steps]
    if not keep:
        found = sorted({link.step for link in links if link.step is not None})
        raise InputError(
            f"{trace.path}: no kernels in the profiler steps asked for",
            f"the trace holds steps {', '.join(map(str, found))}" if found else "the trace marks no ProfilerStep",
        )
    activities = [trace.gpu[i] for i in keep]
    kept_links = [links[i] for i in keep]
    frame = _identity(trace, activities, kept_links, options)
    work = _work(activities, kept_links)
    frame = pd.concat([frame, work], axis=1)
    if options.cpu_ops:  # as the CPU recorder: the fewest bytes are a bound on traffic through L1
        frame = frame.rename(columns={"bytes_hbm": "bytes_l1"}).assign(device="cpu", time_method=CPU_TIME_METHOD)
        info = _info(trace, digest, frame, options, metric_set)
        return TraceSource(info=info, launches=conform_launches(frame), cc=None, device_name=None)
    name, cc = device_description(trace, _first_device(activities))
    info = _info(trace, digest, frame, options, metric_set)
    return TraceSource(info=info, launches=conform_launches(frame), cc=cc, device_name=name)


def _first_device(activities: list[GpuActivity]) -> int | None:
    device = next((a.args.get("device") for a in activities if isinstance(a.args.get("device"), int)), None)
    return int(device) if device is not None else None


def _rank(trace: TraceEvents, options: TraceOptions) -> int:
    if options.rank is not None:
        return options.rank
    return trace.rank if trace.rank is not None else 0


def _dims(value: Any) -> str | None:
    if isinstance(value, list) and len(value) == 3 and all(isinstance(v, int | float) for v in value):
        return "(" + ", ".join(str(int(v)) for v in value) + ")"
    return None


def _shapes(link: LaunchLink) -> str | None:
    op = link.candidates[0] if link.candidates else link.op
    if op is None:
        return None
    dims = op.args.get("Input Dims", op.args.get("Input dims"))
    if not isinstance(dims, list):
        return None
    parts = ["x".join(map(str, d)) or "()" for d in dims if isinstance(d, list) and d and isinstance(d[0], int)]
    return ", ".join(parts) or None


def _identity(
    trace: TraceEvents, activities: list[GpuActivity], links: list[LaunchLink], options: TraceOptions
) -> pd.DataFrame:
    categories = [
        "communication" if a.category == "kernel" and is_communication(a.name) else a.category for a in activities
    ]
    phases = [link.phase or options.phase or "other" for link in links]
    layers: list[str | None] = [link.layer for link in links]
    if any(layers):
        layers = [layer or phase_label(phase) for layer, phase in zip(layers, phases, strict=True)]
    return pd.DataFrame(
        {
            "source": 0,
            "launch_id": np.arange(len(activities), dtype=np.int64),
            "kernel": [a.name for a in activities],
            "phase": phases,
            "nvtx": ["/".join(link.ranges) or None for link in links],
            "layer": layers,
            "shapes": [_shapes(link) for link in links],
            "grid": [_dims(a.args.get("grid")) for a in activities],
            "block": [_dims(a.args.get("block")) for a in activities],
            "device": [str(a.args["device"]) if a.args.get("device") is not None else None for a in activities],
            "cc": device_description(trace, _first_device(activities))[1],
            "stream": [str(a.args["stream"]) if a.args.get("stream") is not None else None for a in activities],
            "launches": 1,
            "op": [link.op.name if link.op else None for link in links],
            "category": categories,
            "rank": _rank(trace, options),
            "step": pd.array([link.step for link in links], dtype="Int64"),
            "time_s": [a.duration_s for a in activities],
            "time_method": TIME_METHOD,
        }
    )


def _work(activities: list[GpuActivity], links: list[LaunchLink]) -> pd.DataFrame:
    """Per activity: FLOPs per precision, fewest HBM bytes and link bytes (null where unknown)."""
    from hroofline.importers.trace_work import OpWork, op_work  # imports torch: only traces need it

    count = len(activities)
    columns: dict[str, Any] = {c: np.full(count, np.nan) for c in (*FLOP_QUANTITIES, "bytes_hbm", "bytes_link")}
    columns["work_op"] = np.full(count, None, dtype=object)
    kernels_of_op: dict[int, list[int]] = defaultdict(list)
    works: dict[int, OpWork] = {}
    for index, (activity, link) in enumerate(zip(activities, links, strict=True)):
        if activity.category in ("memcpy", "memset"):
            columns["bytes_hbm"][index] = _copy_bytes(activity)
            columns["flops_fp32"][index] = 0.0
        elif is_communication(activity.name):
            args = activity.args if collective_name(activity.args) else (link.op.args if link.op else {})
            link_bytes = bus_bytes(args)
            columns["bytes_link"][index] = link_bytes if link_bytes is not None else np.nan
        else:
            counted = next(((op, work) for op in link.candidates if (work := op_work(op.name, op.args))), None)
            if counted is not None:
                kernels_of_op[id(counted[0])].append(index)
                works[id(counted[0])] = counted[1]
    tensor = _tensor_core_kernels([a.name for a in activities])
    for key, indices in kernels_of_op.items():
        work = works[key]
        # FLOPs go to the op's tensor-core kernels where it has some (a split-K GEMM's reduction kernel does
        # none of the multiply-adds), else to all its kernels; FLOPs and bytes in proportion to durations.
        computing = [i for i in indices if tensor[i]] or indices
        flop_shares = dict(zip(computing, _duration_shares(activities, computing), strict=True))
        for share, index in zip(_duration_shares(activities, indices), indices, strict=True):
            for column in FLOP_QUANTITIES:
                columns[column][index] = 0.0
            for column, flops in work.flops.items():
                columns[column][index] = flops * flop_shares.get(index, 0.0)
            columns["bytes_hbm"][index] = work.bytes * share
            columns["work_op"][index] = work.main_op
    frame = pd.DataFrame(columns)
    return _route_tensor_work(frame, tensor, [a.name for a in activities])


def _duration_shares(activities: list[GpuActivity], indices: list[int]) -> np.ndarray:
    durations = np.array([activities[i].duration_s for i in indices])
    return durations / durations.sum() if durations.sum() > 0 else np.full(len(indices), 1 / len(indices))


def _tensor_core_kernels(kernels: list[str]) -> np.ndarray:
    """Which kernels run on the tensor cores, by name (the metric set's list of name fragments)."""
    from hroofline.metricset import load_metric_set

    hints = load_metric_set().tensor_hints
    return np.array([any(f in name.lower() for f in hints.float_names) for name in kernels], dtype=bool)


def _copy_bytes(activity: GpuActivity) -> float:
    size = activity.args.get("bytes")
    if size is None:
        return np.nan
    both_ends_on_device = "dtod" in activity.name.lower().replace(" ", "")
    return float(size) * (2.0 if both_ends_on_device else 1.0)


def _route_tensor_work(frame: pd.DataFrame, tensor: np.ndarray, kernels: list[str]) -> pd.DataFrame:
    """FLOPs of tensor-core kernels onto the tensor columns of their input precision: FP16 to
    ``flops_tensor_fp16`` (BF16 where the name says bf16), FP32 to TF32, FP64 to FP64."""
    names = pd.Series(kernels).str.lower()
    bf16 = names.str.contains("bf16").to_numpy()
    moves = (
        ("flops_fp16", "flops_tensor_fp16", tensor & ~bf16),
        ("flops_fp16", "flops_tensor_bf16", tensor & bf16),
        ("flops_fp32", "flops_tensor_tf32", tensor),
        ("flops_fp64", "flops_tensor_fp64", tensor),
    )
    for source, target, mask in moves:
        moving = mask & (frame[source].fillna(0.0).to_numpy() > 0)
        frame.loc[moving, target] = frame.loc[moving, source]
        frame.loc[moving, source] = 0.0
    return frame


def _info(
    trace: TraceEvents, digest: str, frame: pd.DataFrame, options: TraceOptions, metric_set: MetricSet
) -> SourceInfo:
    kernels = frame["category"] == "kernel"
    compute_time = float(frame.loc[kernels, "time_s"].sum())
    known = kernels & frame["flops_fp32"].notna()
    linked = frame["op"].notna()
    total = float(frame["time_s"].sum())
    if options.cpu_ops:
        notes = [
            ANALYTIC_NOTE.replace("counted at HBM only (L1 and L2", "counted at L1 only (L2 and DRAM"),
            f"{_share(frame.loc[known, 'time_s'].sum(), compute_time)} of op time has known work "
            f"({int(known.sum())} of {int(kernels.sum())} innermost ops); the rest is shown as work unknown",
        ]
    else:
        notes = [
            ANALYTIC_NOTE,
            f"{_share(frame.loc[linked, 'time_s'].sum(), total)} of GPU time is linked to the CPU op that launched it",
            f"{_share(frame.loc[known, 'time_s'].sum(), compute_time)} of compute-kernel time has known work "
            f"({int(known.sum())} of {int(kernels.sum())} kernels); the rest is shown as work unknown",
        ]
    communication = frame["category"] == "communication"
    if communication.any():
        with_bytes = communication & frame["bytes_link"].notna()
        share = _share(frame.loc[communication, "time_s"].sum(), total)
        notes.append(
            f"{int(communication.sum())} communication kernels ({share} of GPU time); "
            f"{int(with_bytes.sum())} with bus bytes from the collective's arguments"
        )
    steps = sorted(int(s) for s in frame["step"].dropna().unique())
    settings = {
        "schema": trace.schema,
        "time_unit": "ns" if trace.seconds_per_unit == 1e-9 else "us",
        "rank": str(_rank(trace, options)),
        "world_size": str(trace.world_size) if trace.world_size else "",
        "steps": ", ".join(map(str, steps)),
    }
    name, _ = device_description(trace, None)
    warnings = []
    if not linked.any():
        warnings.append(f"{trace.path}: no kernel could be linked to a CPU op (the trace has no runtime events?)")
    _ = metric_set, name
    formulas = {k.replace("bytes_hbm", "bytes_l1") if options.cpu_ops else k: v for k, v in FORMULAS.items()}
    return SourceInfo(
        path=trace.path,
        kind="kineto",
        sha256=digest,
        launches=len(frame),
        formulas_used=formulas,
        time_methods={str(frame["time_method"].iloc[0]): len(frame)},
        settings={k: v for k, v in settings.items() if v},
        notes=notes,
        warnings=warnings,
        phase=options.phase,
    )


def _share(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole > 0 else "n/a"


def _counter_source(trace: TraceEvents, digest: str, options: TraceOptions, metric_set: MetricSet) -> TraceSource:
    """CUPTI range profiling: one launch per range, FLOPs from its counters by the metric set's formulas, no time."""
    ranges = trace.counter_ranges
    metric_names = sorted({k for r in ranges for k, v in r.args.items() if isinstance(v, (int, float))})
    metrics = pd.DataFrame(
        {m: [float(r.args[m]) if m in r.args else np.nan for r in ranges] for m in metric_names}, dtype="float64"
    )
    name, cc = device_description(trace, None)
    arch = metric_set.arch_of(cc)
    no_time = pd.Series(np.nan, index=metrics.index)
    derived = derive_quantities(metrics, metric_set, arch, KernelTime(no_time, no_time.astype(object), no_time))
    links = link_activities(trace, ranges)
    phases = [_range_phase_by_time(trace, r.start_s) or options.phase or "other" for r in ranges]
    frame = pd.DataFrame(
        {
            "source": 0,
            "launch_id": np.arange(len(ranges), dtype=np.int64),
            "kernel": [r.name for r in ranges],
            "phase": phases,
            "nvtx": ["/".join(link.ranges) or None for link in links],
            "cc": cc,
            "launches": 1,
            "category": "kernel",
            "rank": _rank(trace, options),
            "time_s": np.nan,
            "time_method": COUNTER_TIME_METHOD,
        }
    )
    frame = pd.concat([frame, derived.quantities.reset_index(drop=True)], axis=1)
    info = SourceInfo(
        path=trace.path,
        kind="kineto+cupti",
        sha256=digest,
        launches=len(frame),
        formulas_used=derived.formulas_used,
        time_methods={COUNTER_TIME_METHOD: len(frame)},
        settings={"schema": trace.schema, "rank": str(_rank(trace, options))},
        notes=[
            "FLOPs are measured: CUPTI counter values per kernel (cuda_profiler_range events), by the metric set's "
            "formulas; the trace has no kernel events, and a range's duration is replay time, so kernel time is unknown"
        ],
        phase=options.phase,
    )
    return TraceSource(info=info, launches=conform_launches(frame), cc=cc, device_name=name)


def _range_phase_by_time(trace: TraceEvents, start: float) -> str | None:
    """The phase of a counter range: the innermost phase range open on the CPU when it started (replay is
    synchronous, so the launching range is still open)."""
    from hroofline.importers.kineto_links import range_phase

    best: tuple[float, str] | None = None
    for event in trace.cpu:
        phase = range_phase(event.name) if event.is_range else None
        if phase and event.start_s <= start <= event.end_s and (best is None or event.start_s > best[0]):
            best = (event.start_s, phase)
    return best[1] if best else None


def trace_digest(raw: bytes, path: Path) -> str:
    return hashlib.sha256(raw).hexdigest() if raw else hashlib.sha256(f"{path}{clock.time_ns()}".encode()).hexdigest()
