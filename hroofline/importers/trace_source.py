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

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from hroofline.errors import InputError
from hroofline.importers.collectives import is_communication
from hroofline.importers.compiled_layers import with_compiled_layers
from hroofline.importers.graph_capture import CapturedGraph, graph_launches, join_capture
from hroofline.importers.inductor_provenance import CompiledGraph
from hroofline.importers.kineto import (
    GpuActivity,
    TraceEvents,
    device_description,
    device_memory,
    device_sms,
    input_dims,
)
from hroofline.importers.kineto_links import LaunchLink, link_activities, link_cpu_ops, process_ranges
from hroofline.importers.launch_signature import launch_signatures, op_calls
from hroofline.importers.named_gpu import check_named_gpu
from hroofline.importers.source import ImportedSource
from hroofline.model.layers import phase_label
from hroofline.model.run import GPUS_ON_HOST_SETTING, SourceInfo, conform_launches
from hroofline.roofs.catalog import GIB, GpuName, gpu_from_display_name, gpu_from_properties
from hroofline.roofs.formulas import KernelTime, derive_quantities
from hroofline.roofs.metricset import MetricSet
from hroofline.roofs.rates import DenseRates, rates_for
from hroofline.work.serving_steps import step_of

MARKED_CALLS_SETTING = "op_calls"  # present where op_call is hroofline's count, which an ncu pass can mark again
TIME_METHOD = "measured: kernel duration in the PyTorch profiler trace (CUPTI activity)"
CPU_TIME_METHOD = "measured: the op's self time in the PyTorch profiler trace (its duration less its child ops')"
COUNTER_TIME_METHOD = "not measured: CUPTI range profiling replays each kernel, its range time is not kernel time"
ANALYTIC_NOTE = (
    "FLOPs and bytes are analytic: each op's recorded shapes replayed on the meta device with predict's formulas, "
    "split over the op's kernels in proportion to their durations; bytes are the fewest the op must move, "
    "counted at HBM only (L1 and L2 not measured); times are measured"
)
CPU_TRACE_NOTE = (
    "no GPU activity in the trace: imported as a CPU run (--gpu cpu), every op a launch timed by its self time"
)
NO_SHAPES_WARNING = (
    "the trace recorded no op inputs (record_shapes=False): FLOPs and bytes are unknown, only times were "
    "measured; profile with record_shapes=True for the ops' work"
)
WORK_SOURCES = (
    "formula: the launching op's formulas on its recorded shapes; inductor: Inductor's kernel_num_gb and "
    "kernel_flop; tensors: a generated kernel's recorded tensors, each moved once; unknown: none applies"
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
    cpu_ops: bool = False  # a CPU-only trace: every op is a launch, with its self time
    gpu: GpuName | None = None  # the GPU that was profiled, where the user names it
    force_gpu: bool = False  # judge it as ``gpu`` even where the trace's device has another SM count
    captured: tuple[CapturedGraph, ...] = ()  # the graphs its graph launches replay, as captured (--capture)
    compiled: Mapping[str, CompiledGraph] | None = None  # a compile log's graphs: compiled kernels' layers


def trace_source(trace: TraceEvents, digest: str, options: TraceOptions, metric_set: MetricSet) -> ImportedSource:
    """The trace as a source, its device checked against ``options.gpu``."""
    result = _launches_of(trace, digest, options, metric_set)
    gpu = options.gpu
    if gpu is not None:
        if result.cc is not None and result.cc != gpu.cc:
            raise InputError(
                f"{trace.path}: --gpu {gpu.name} has compute capability {gpu.cc}, "
                f"but the trace's device{' ' + result.device_name if result.device_name else ''} has {result.cc}",
                "leave out --gpu or name the GPU that was profiled",
            )
        sms, memory = device_sms(trace, None), device_memory(trace, None)
        check_named_gpu(str(trace.path), result.device_name, sms, gpu, options.force_gpu, memory)
        result.cc = gpu.cc
        result.launches["cc"] = gpu.cc
    elif result.cc is not None and not (result.device_name and gpu_from_display_name(result.device_name)):
        # ROCm builds record an empty device name: the properties say which GPU it is
        name, unnamed = result.device_name, "the trace records no device name"
        found = _gpu_by_properties(trace, result.cc)
        if found is not None:
            gpu, sms, memory = found
            result.gpu = gpu.name
            units = "compute units" if gpu.vendor == "amd" else "SMs"
            result.info.notes.append(
                f"{f'the catalog does not know {name} by name' if name else unnamed}; judged as {gpu.name} by its "
                f"properties ({sms} {units}, {memory / GIB:.1f} GiB, compute capability {result.cc}); --gpu NAME "
                "overrides"
            )
        else:
            result.info.notes.append(
                f"{f'the catalog does not know {name}' if name else unnamed}: pass --gpu NAME to judge it against a "
                "GPU's roofs"
            )
    return result


def _gpu_by_properties(trace: TraceEvents, cc: str) -> tuple[GpuName, int, float] | None:
    """The catalog GPU the trace's first device is by its SM count, memory and compute capability."""
    sms, memory = device_sms(trace, None), device_memory(trace, None)
    if sms is None or memory is None:
        return None
    gpu = gpu_from_properties(cc, sms, memory)
    return (gpu, sms, memory) if gpu is not None else None


def _launches_of(trace: TraceEvents, digest: str, options: TraceOptions, metric_set: MetricSet) -> ImportedSource:
    if not trace.gpu and trace.counter_ranges:
        return _counter_source(trace, digest, options, metric_set)
    asked_for_cpu = options.cpu_ops
    cpu_ops = _recorded_on_cpu(trace, options)
    options = replace(options, cpu_ops=cpu_ops)
    if cpu_ops:
        ops, own_seconds, links = link_cpu_ops(trace)
        every = [
            GpuActivity(o.name, "kernel", o.start_s, own, None, {}) for o, own in zip(ops, own_seconds, strict=True)
        ]
    else:
        every, links = trace.gpu, link_activities(trace, trace.gpu)
    # the profiler steps asked for (a replayed kernel keeps its replay's step when joined to its capture)
    keep = [i for i, link in enumerate(links) if options.steps is None or link.step in options.steps]
    joined = join_capture(trace, every, links, list(options.captured), set(keep)) if options.captured else None
    if joined is not None:
        links = joined.links
    # launch_id is launch order (the JSON lists activities per stream, not in the order they were launched):
    # a kernel's runtime call, a CPU op's start
    keep.sort(key=lambda i: (every[i].start_s if options.cpu_ops else _launched_at(links[i], every[i]), i))
    if not keep:
        found = sorted({link.step for link in links if link.step is not None})
        raise InputError(
            f"{trace.path}: no kernels in the profiler steps asked for",
            f"the trace holds steps {', '.join(map(str, found))}" if found else "the trace marks no ProfilerStep",
        )
    activities = [every[i] for i in keep]
    kept_links = [links[i] for i in keep]
    name, cc = (None, None) if options.cpu_ops else device_description(trace, _first_device(activities))
    frame = _identity(trace, activities, kept_links, options, cc)
    from hroofline.importers.trace_split import activity_work  # imports torch: only traces need it
    from hroofline.importers.trace_work import work_assumptions

    gpu = options.gpu or (gpu_from_display_name(name) if name else None)
    if gpu is None and cc is not None:
        gpu = (_gpu_by_properties(trace, cc) or (None,))[0]
    rates = DenseRates() if options.cpu_ops else rates_for(gpu.cc if options.gpu else cc, gpu, name)
    frame = pd.concat([frame, activity_work(activities, kept_links, metric_set, rates)], axis=1)
    if options.cpu_ops:  # as the CPU recorder: the fewest bytes are a bound on traffic through L1
        frame = frame.rename(columns={"bytes_hbm": "bytes_l1"}).assign(device="cpu", time_method=CPU_TIME_METHOD)
    placed: tuple[list[str], list[str]] = ([], [])
    if options.compiled is not None:
        frame, *placed = with_compiled_layers(frame, kept_links, options.compiled)
    # a replayed kernel that no capture linked: its only link is the op around its graph launch, if any
    replayed = {} if options.cpu_ops else graph_launches(trace, activities)
    if joined is not None:
        linked_by_capture = {n for n, i in enumerate(keep) if i in joined.matched}
        replayed = {c: indices for c, indices in replayed.items() if indices[0] not in linked_by_capture}
    info = _info(trace, digest, frame, options, replayed)
    info.notes += work_assumptions(_counted_ops(kept_links, frame["work_op"]))
    if joined is not None:
        info.notes += [joined.summary, _unknown_ops_note(frame, kept_links)]
    info.notes += placed[0]
    info.warnings += [f"{trace.path}: {warning}" for warning in placed[1]]
    if cpu_ops and trace.host_name:
        info.settings["host"] = trace.host_name
    if cpu_ops and not asked_for_cpu:
        info.notes.insert(0, CPU_TRACE_NOTE)
    if op_calls(kept_links)[1]:
        info.settings[MARKED_CALLS_SETTING] = "hroofline's count of the profiled steps' ATen op calls"
    return ImportedSource(info=info, launches=conform_launches(frame), cc=cc, device_name=name, on_cpu=cpu_ops)


def _recorded_on_cpu(trace: TraceEvents, options: TraceOptions) -> bool:
    """Whether the trace is of ops that ran on the CPU (recorded with ProfilerActivity.CPU alone): then every op
    is a launch. A trace with GPU activity is a GPU's; one without is refused where it looks like a GPU's whose
    kernels are missing (CUDA runtime calls, or a GPU named with no --gpu cpu to say the model ran on the CPU)."""
    if trace.gpu:
        if options.cpu_ops:
            raise InputError(
                f"{trace.path}: --gpu cpu, but the trace holds {len(trace.gpu)} GPU kernels, copies or sets",
                "leave out --gpu cpu: the trace was recorded on a GPU",
            )
        return False
    if not any(not event.is_range for event in trace.cpu):
        raise InputError(
            f"{trace.path}: a PyTorch profiler trace with no GPU kernels and no CPU ops",
            "record the step inside `with torch.profiler.profile(...)`",
        )
    if options.cpu_ops:
        return True
    if options.gpu is not None:
        raise InputError(
            f"{trace.path}: --gpu {options.gpu.name}, but the trace holds no GPU kernels: it was recorded with "
            "the CPU activity alone",
            "import it without --gpu (or with --gpu cpu) if the model ran on the CPU; if it ran on the GPU, "
            "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
        )
    if trace.runtime:
        raise InputError(
            f"{trace.path}: CUDA runtime calls but no GPU kernels, copies or sets: the GPU's activity is missing",
            "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
        )
    if trace.devices:
        name = device_description(trace, None)[0] or "a GPU"
        raise InputError(
            f"{trace.path}: the trace names {name} but holds no GPU kernels: recorded without the CUDA activity?",
            "if the model ran on the CPU, import it with --gpu cpu; if it ran on the GPU, profile with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
        )
    return True


def _counted_ops(links: list[LaunchLink], work_ops: pd.Series) -> list[tuple[str, dict[str, Any]]]:
    """The ops whose work the launches carry (name, recorded arguments), each once."""
    counted: dict[int, tuple[str, dict[str, Any]]] = {}
    for link, work_op in zip(links, work_ops, strict=True):
        for op in link.candidates:
            if op.name == work_op:
                counted.setdefault(id(op), (op.name, op.args))
    return list(counted.values())


def _launched_at(link: LaunchLink, activity: GpuActivity) -> float:
    return link.launch_s if link.launch_s is not None else activity.start_s


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
    dims = input_dims(op.args)
    if dims is None:
        return None
    parts = ["x".join(map(str, d)) or "()" for d in dims if isinstance(d, list) and d and isinstance(d[0], int)]
    return ", ".join(parts) or None


def _identity(
    trace: TraceEvents,
    activities: list[GpuActivity],
    links: list[LaunchLink],
    options: TraceOptions,
    cc: str | None,
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
            "nvtx": [step.range_name if (step := step_of(link.ranges)) else None for link in links],
            "layer": layers,
            "shapes": [_shapes(link) for link in links],
            "grid": [_dims(a.args.get("grid")) for a in activities],
            "block": [_dims(a.args.get("block")) for a in activities],
            "device": [str(a.args["device"]) if a.args.get("device") is not None else None for a in activities],
            "cc": cc,
            "stream": [str(a.args["stream"]) if a.args.get("stream") is not None else None for a in activities],
            "launches": 1,
            "op": [link.op.name if link.op else None for link in links],
            "category": categories,
            "rank": _rank(trace, options),
            "step": pd.array([link.step for link in links], dtype="Int64"),
            "signature": launch_signatures(activities, links),
            "op_call": pd.array(op_calls(links)[0], dtype="Int64"),
            "time_s": [a.duration_s for a in activities],
            "start_s": None if options.cpu_ops else _starts(trace, activities),
            "time_method": TIME_METHOD,
        }
    )


def _starts(trace: TraceEvents, activities: list[GpuActivity]) -> np.ndarray:
    """Each GPU activity's start, seconds from the file's earliest GPU activity (its rank's), from the trace's own
    stamps: the difference of two microsecond stamps is exact, so each start keeps the stamp's precision (a
    nanosecond at most), where seconds since the clock's epoch would add rounding of their own. A CPU trace's ops
    nest: none."""
    first = min(a.stamp for a in trace.gpu)
    return np.array([(a.stamp - first) * trace.seconds_per_unit for a in activities], dtype=np.float64)


def _info(
    trace: TraceEvents, digest: str, frame: pd.DataFrame, options: TraceOptions, replayed: dict[int, list[int]]
) -> SourceInfo:
    kernels = frame["category"] == "kernel"
    compute_time = float(frame.loc[kernels, "time_s"].sum())
    known = kernels & frame["flops_fp32"].notna()
    from_graphs = np.zeros(len(frame), dtype=bool)
    from_graphs[[i for indices in replayed.values() for i in indices]] = True
    linked = frame["op"].notna() & ~from_graphs
    total = float(frame["time_s"].sum())
    if options.cpu_ops:
        notes = [
            ANALYTIC_NOTE.replace("counted at HBM only (L1 and L2", "counted at L1 only (L2 and DRAM"),
            f"{_share(frame.loc[known, 'time_s'].sum(), compute_time)} of op time has known work "
            f"({int(known.sum())} of {int(kernels.sum())} ops, each timed by its self time); the rest (autograd's "
            "own bookkeeping, ops without shapes or formula) is shown as work unknown",
        ]
    else:
        notes = [
            ANALYTIC_NOTE,
            f"{_share(frame.loc[linked, 'time_s'].sum(), total)} of GPU time is linked to the CPU op that launched it",
            f"{_share(frame.loc[known, 'time_s'].sum(), compute_time)} of compute-kernel time has known work "
            f"({int(known.sum())} of {int(kernels.sum())} kernels); the rest is shown as work unknown",
        ]
    if compute_time > 0:
        by_source = frame.loc[kernels].groupby(frame.loc[kernels, "work_source"].fillna("unknown"))["time_s"].sum()
        shares = ", ".join(f"{source} {_share(t, compute_time)}" for source, t in by_source.sort_values()[::-1].items())
        notes.append(f"compute-kernel time by where its work came from ({WORK_SOURCES}): {shares}")
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
        "rank": str(_rank(trace, options)),
        "world_size": str(trace.world_size) if trace.world_size else "",
        # the GPUs the rank's process saw on its host (deviceProperties): where a collective's group spans hosts
        GPUS_ON_HOST_SETTING: str(len(trace.devices)) if trace.devices else "",
        "steps": ", ".join(map(str, steps)),
        **trace.cuda_versions,
    }
    warnings = [f"{trace.path}: {count} {why}" for why, count in trace.rejected.items()]
    if frame["shapes"].isna().all():  # record_shapes=False: no op has its inputs
        warnings.append(f"{trace.path}: {NO_SHAPES_WARNING}")
    if not frame["op"].notna().any() and not options.cpu_ops:
        warnings.append(f"{trace.path}: no kernel could be linked to a CPU op (the trace has no runtime events?)")
    if replayed:
        warnings.append(_graph_replay_warning(trace.path, frame, from_graphs, len(replayed), bool(options.captured)))
    if options.rank is None and trace.rank is None and not options.cpu_ops:
        notes.append("rank 0 assumed: the trace has no distributedInfo and its file name no rank (--rank N sets it)")
    formulas = {k.replace("bytes_hbm", "bytes_l1") if options.cpu_ops else k: v for k, v in FORMULAS.items()}
    return SourceInfo(
        path=trace.path,
        kind="kineto",
        source_hash=digest,
        launches=len(frame),
        formulas_used=formulas,
        time_methods={str(frame["time_method"].iloc[0]): len(frame)},
        settings={k: v for k, v in settings.items() if v},
        notes=notes,
        warnings=warnings,
        phase=options.phase,
    )


def _graph_replay_warning(
    path: str, frame: pd.DataFrame, from_graphs: np.ndarray, launches: int, captured: bool
) -> str:
    """One line saying how much GPU time was replayed from CUDA (or HIP) graphs that no capture linked (none was
    given, or ``captured``: the capture holds none of these graphs): every activity of a replay shares its graph
    launch's correlation, so it is linked at most to the op around the launch (a compiled step's
    ``CompiledFunction``), never to the op that launched it at capture, and none has work."""
    replayed = frame.loc[from_graphs]
    kernels = int(replayed["category"].isin(("kernel", "communication")).sum())
    others = len(replayed) - kernels
    what = f"{kernels} kernels" + (f" and {others} copies and sets" if others else "")
    around = replayed.groupby("op")["time_s"].sum().sort_values(ascending=False)
    inside = f" in {', '.join(around.index[:3])}{', ...' if len(around) > 3 else ''}" if len(around) else ""
    graphs, get = (
        ("graphs the capture does not hold", "the capture of these graphs too")
        if captured
        else ("graphs", "the trace written while the graphs were captured")
    )
    return (
        f"{path}: {_share(replayed['time_s'].sum(), frame['time_s'].sum())} of GPU time was replayed from CUDA "
        f"{graphs} ({what} under {launches} graph launches{inside}): a replayed kernel is not linked to the op that "
        f"launched it at capture, and its work is unknown; pass {get} (--capture FILE) for their ops and work"
    )


SHOWN_SHARE = 0.001  # an op with unknown work under this share of compute-kernel time is counted, not named


def _unknown_ops_note(frame: pd.DataFrame, links: list[LaunchLink]) -> str:
    """The ops whose kernels have unknown work, each by its share of compute-kernel time: the outermost op that
    could be counted where the trace recorded one (``vllm::moe_forward``), else the launching op."""
    kernels = (frame["category"] == "kernel").to_numpy()
    compute_time = float(frame.loc[kernels, "time_s"].sum())
    unknown = kernels & frame["flops_fp32"].isna().to_numpy()
    names = [link.candidates[0].name if link.candidates else link.op.name if link.op else "no op" for link in links]
    by_op = frame.loc[unknown, "time_s"].groupby([n for n, u in zip(names, unknown, strict=True) if u]).sum()
    if by_op.empty:
        return "every compute kernel has known work"
    by_op = by_op.sort_values()[::-1]
    shown = by_op[by_op >= SHOWN_SHARE * compute_time]
    shares = ", ".join(f"{op} {_share(t, compute_time)}" for op, t in shown.items())
    if len(by_op) > len(shown):
        shares += f"{', ' if shares else ''}{len(by_op) - len(shown)} more ops under {SHOWN_SHARE:.1%} each"
    return f"compute-kernel time with unknown work, by the op that launched it (no formula, or no op): {shares}"


def _share(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole > 0 else "n/a"


def _counter_source(trace: TraceEvents, digest: str, options: TraceOptions, metric_set: MetricSet) -> ImportedSource:
    """CUPTI range profiling: one launch per range, FLOPs from its counters by the metric set's formulas, no time."""
    if options.steps is not None:
        raise InputError(f"{trace.path}: --steps: a CUPTI range-profiling trace marks no ProfilerStep")
    ranges = trace.counter_ranges
    metric_names = sorted({k for r in ranges for k, v in r.args.items() if isinstance(v, (int, float))})
    metrics = pd.DataFrame(
        {m: [float(r.args[m]) if m in r.args else np.nan for r in ranges] for m in metric_names}, dtype="float64"
    )
    name, cc = device_description(trace, None)
    arch = metric_set.arch_of(cc)
    no_time = pd.Series(np.nan, index=metrics.index)
    derived = derive_quantities(metrics, metric_set, arch, KernelTime(no_time, no_time.astype(object), no_time))
    # Replay is synchronous: the phase range that launched a kernel is still open when its range starts.
    phases_at, _, _ = process_ranges(trace)
    phases = [phases_at.at(r.start_s) or options.phase or "other" for r in ranges]
    frame = pd.DataFrame(
        {
            "source": 0,
            "launch_id": np.arange(len(ranges), dtype=np.int64),
            "kernel": [r.name for r in ranges],
            "phase": phases,
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
        source_hash=digest,
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
    return ImportedSource(info=info, launches=conform_launches(frame), cc=cc, device_name=name)
