"""Nsight Systems exports as a source of a run: every kernel, copy and set of every rank, through the trace path.

An export (``nsys export --type sqlite``; a ``.nsys-rep`` report is exported so on the fly where ``nsys`` is on
PATH) is read by :mod:`hroofline.importers.nsys_sqlite` and its NVTX ranges by :mod:`hroofline.importers.nsys_nvtx`
into one PyTorch-profiler-shaped trace per rank, and each is imported by the trace path
(:func:`~hroofline.importers.trace_source.trace_source`): the same links from a kernel to the runtime call of
its correlation id and the ops and ranges open on that call's thread, the same phases, layers, categories
(NCCL kernels are communication) and work formulas.

Ranks: one rank per (process, device) pair with GPU work, numbered by device, then process. Where each process
drives one GPU (torchrun's one process per GPU), that is one rank per GPU, the GPU's position among the export's
devices (its ``LOCAL_RANK`` on one node). A process that drives several GPUs is one rank per GPU it drives, each
with that device's activity and the process's runtime calls and NVTX ranges: wall time, idle time and overlap
(:mod:`hroofline.analyze.overlap`) are a GPU's, and two GPUs' intervals swept as one timeline would hide each
other's idle time.

Per launch, beyond the trace path's columns: ``time_s`` is end - start, ``start_s`` the start in seconds from the
earliest activity start of its rank in the export, and a kernel launched from a CUDA graph keeps the export's
``graphId`` and ``graphNodeId`` as the raw values ``metric:graphId`` and ``metric:graphNodeId``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from hroofline.errors import InputError, UsageError
from hroofline.importers.kineto import GpuActivity, TraceEvents
from hroofline.importers.nsys_nvtx import cpu_events
from hroofline.importers.nsys_sqlite import NANOSECOND, NsysTables, ProcessActivity, looks_like_sqlite, read_nsys_sqlite
from hroofline.importers.source import ImportedSource
from hroofline.importers.trace_source import ANALYTIC_NOTE, NO_SHAPES_WARNING, TraceOptions, trace_source
from hroofline.model.layers import phase_label
from hroofline.model.run import NSYS_KIND, RAW_METRIC_PREFIX, conform_launches
from hroofline.roofs.catalog import gpu_from_display_name
from hroofline.roofs.metricset import MetricSet

REPORT_SUFFIX = ".nsys-rep"
NSYS_TIME_METHOD = "measured: kernel duration in the Nsight Systems export (CUPTI activity, end - start)"
EXPORT_TIMEOUT_S = 3600
NO_SIZES_WARNING = (
    "the export's NVTX op ranges carry no sizes: FLOPs and bytes are unknown, only times were measured; profile "
    "under torch.autograd.profiler.emit_nvtx(record_shapes=True) for the ops' work"
)
ANALYTIC_PREFIX = ANALYTIC_NOTE.split(":", 1)[0]  # "FLOPs and bytes are analytic"
GRAPH_COLUMNS = {"graph_id": RAW_METRIC_PREFIX + "graphId", "graph_node_id": RAW_METRIC_PREFIX + "graphNodeId"}
RANK_RULE = (
    "one rank per GPU: per (process, device) pair with GPU work, numbered by device, then process (a process "
    "that drives several GPUs is one rank per GPU)"
)


def is_nsys_file(path: Path, head: bytes) -> bool:
    """A ``.nsys-rep`` report by its name, an SQLite export by its content."""
    return path.suffix == REPORT_SUFFIX or looks_like_sqlite(head)


def read_nsys(path: Path) -> NsysTables:
    """An export read; a report exported to SQLite first, in a folder that is removed after."""
    if path.suffix != REPORT_SUFFIX:
        return read_nsys_sqlite(path)
    nsys = shutil.which("nsys")
    if nsys is None:
        raise InputError(
            f"{path}: a Nsight Systems report, and no nsys on PATH to read it",
            f"export it with `nsys export --type sqlite --output {path.with_suffix('.sqlite')} {path}` and import "
            "the .sqlite",
        )
    with tempfile.TemporaryDirectory(prefix="hroofline-nsys-") as folder:
        exported = Path(folder) / (path.stem + ".sqlite")
        command = [nsys, "export", "--type", "sqlite", "--output", str(exported), str(path)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise InputError(f"{path}: nsys export did not run ({error})") from None
        if done.returncode != 0 or not exported.exists():
            said = (done.stderr or done.stdout).strip().splitlines()
            raise InputError(f"{path}: nsys export failed ({said[-1] if said else f'exit {done.returncode}'})")
        return read_nsys_sqlite(exported, shown=str(path))


def nsys_source(tables: NsysTables, digest: str, options: TraceOptions, metric_set: MetricSet) -> ImportedSource:
    """Every rank of the export as one source, its launches numbered rank after rank."""
    ranks = _per_device(tables.processes.values())
    if options.steps is not None:
        raise UsageError(f"{tables.path}: --steps: not for a Nsight Systems export", "import the whole export")
    if options.rank is not None and len(ranks) > 1:
        raise UsageError(
            f"{tables.path}: --rank: the export holds {len(ranks)} ranks ({RANK_RULE})", "leave out --rank"
        )
    options = _with_gpu(tables, options)
    parts: list[ImportedSource] = []
    with_sizes: dict[int, int] = {}  # per process: its ranges are read once per device it drives
    for number, process in enumerate(ranks):
        rank = options.rank if options.rank is not None else number
        trace, with_sizes[process.pid] = _rank_trace(tables, process, rank, len(ranks))
        imported = trace_source(trace, digest, replace(options, rank=rank), metric_set)
        parts.append(_with_start_and_graph(imported, trace.gpu))
    return _combined(tables, parts, ranks, sum(with_sizes.values()))


def _per_device(processes: Iterable[ProcessActivity]) -> list[ProcessActivity]:
    """One process activity per (process, device) pair: the device's GPU activity, the process's runtime calls and
    NVTX ranges; by device, then process."""
    pairs = [
        replace(process, gpu=[a for a in process.gpu if int(a.args["device"]) == device])
        for process in processes
        for device in process.devices
    ]
    return sorted(pairs, key=lambda p: (p.devices[0], p.pid))


def _with_gpu(tables: NsysTables, options: TraceOptions) -> TraceOptions:
    """The GPU: --gpu, else ``TARGET_INFO_GPU``'s devices (the trace path reads them), else the GPU that
    ``TARGET_INFO_SYSTEM_ENV`` names. Kernel names do not tell: cuBLAS runs ``sm80_`` kernels on an H100."""
    if options.gpu is not None or options.cpu_ops or tables.devices:
        return options
    named = gpu_from_display_name(tables.gpu_info) if tables.gpu_info else None
    if named is not None:
        return replace(options, gpu=named)
    said = (
        f"TARGET_INFO_SYSTEM_ENV names {tables.gpu_info!r}, not in the catalog"
        if tables.gpu_info
        else ("nor does TARGET_INFO_SYSTEM_ENV name one")
    )
    raise InputError(
        f"{tables.path}: the export has no TARGET_INFO_GPU table, {said}: give --gpu",
        "e.g. --gpu h100, see `hroofline gpus`; kernel names cannot tell: cuBLAS runs sm80_ kernels on an H100",
    )


def _rank_trace(tables: NsysTables, process: ProcessActivity, rank: int, ranks: int) -> tuple[TraceEvents, int]:
    """One process's activity as a trace; its activities in launch order (runtime call, then start), the order the
    trace path keeps, so that its launches and these activities stay row for row."""

    def launched(activity: GpuActivity) -> tuple[float, float]:
        call = process.runtime.get(activity.correlation) if activity.correlation is not None else None
        return (call.start_s if call is not None else activity.start_s, activity.start_s)

    events, with_sizes = cpu_events(process.nvtx)
    trace = TraceEvents(
        path=tables.path,
        schema=f"nsys {tables.schema_version or 'unknown'}",
        seconds_per_unit=NANOSECOND,
        gpu=sorted(process.gpu, key=launched),
        counter_ranges=[],
        cpu=events,
        runtime=process.runtime,
        devices=tables.devices,
        rank=rank,
        world_size=ranks,
    )
    return trace, with_sizes


def _with_start_and_graph(imported: ImportedSource, activities: list[GpuActivity]) -> ImportedSource:
    """``start_s`` from the rank's earliest activity start, and the CUDA graph ids, beside the trace path's columns."""
    frame = imported.launches
    if len(frame) != len(activities) or list(frame["kernel"]) != [a.name for a in activities]:
        raise InputError(f"{imported.info.path}: the launches and the export's activities do not match row for row")
    starts = np.array([a.start_s for a in activities])
    extra = {"start_s": starts - starts.min()}
    for key, column in GRAPH_COLUMNS.items():
        values = [a.args.get(key) for a in activities]
        if any(v is not None for v in values):
            extra[column] = np.array([np.nan if v is None else float(v) for v in values])
    imported.launches = frame.assign(**extra, time_method=NSYS_TIME_METHOD)
    return imported


def _combined(
    tables: NsysTables, parts: list[ImportedSource], ranks: list[ProcessActivity], with_sizes: int
) -> ImportedSource:
    offsets = np.cumsum([0] + [len(p.launches) for p in parts[:-1]])
    frame = pd.concat(
        [
            p.launches.assign(launch_id=p.launches["launch_id"] + offset)
            for p, offset in zip(parts, offsets, strict=True)
        ],
        ignore_index=True,
    )
    first = parts[0]
    info = replace(first.info, kind=NSYS_KIND, launches=len(frame), notes=[], warnings=[])
    info.time_methods = {NSYS_TIME_METHOD: len(frame)}
    info.settings = {
        "schema": tables.schema_version or "unknown",
        "nsys": tables.product_version or "unknown",
        "ranks": ", ".join(str(r) for r in sorted(frame["rank"].dropna().unique())),
        "world_size": str(len(ranks)),
        "rank_rule": RANK_RULE,
    }
    rank_notes = _rank_lines(parts, "notes")
    if not with_sizes:  # no shapes to replay: the trace path's note on analytic work would contradict the warning
        rank_notes = [line for line in rank_notes if not line.startswith(ANALYTIC_PREFIX)]
    info.notes = [*tables.notes, _ranks_note(ranks), nvtx_shares_note(frame), *rank_notes]
    if with_sizes:
        info.notes.append(
            f"{with_sizes} NVTX op ranges carry their inputs' sizes (emit_nvtx(record_shapes=True)); emit_nvtx "
            "records no dtypes: their tensors are taken as float32"
        )
    info.warnings = _rank_lines(parts, "warnings")
    if not with_sizes:
        info.warnings.append(f"{tables.path}: {NO_SIZES_WARNING}")
    return ImportedSource(info, conform_launches(frame), first.cc, first.device_name, gpu=first.gpu)


def _ranks_note(ranks: list[ProcessActivity]) -> str:
    shown = ", ".join(
        f"rank {n}: pid {p.pid & 0xFFFFFF} on device{'s' if len(p.devices) > 1 else ''} "
        f"{', '.join(map(str, p.devices))}"
        for n, p in enumerate(ranks)
    )
    return f"ranks: {RANK_RULE}: {shown}"


def nvtx_shares_note(frame: pd.DataFrame) -> str:
    """The shares of kernel time (compute and communication kernels) that NVTX gave a phase and a layer."""
    kernels = frame["category"].isin(["kernel", "communication"])
    total = float(frame.loc[kernels, "time_s"].sum())
    phased = kernels & (frame["phase"] != "other")
    outside = {phase_label(p) for p in ("forward", "backward", "optimizer", "other")}
    layered = kernels & frame["layer"].notna() & ~frame["layer"].isin(outside)
    phase_share = float(frame.loc[phased, "time_s"].sum()) / total if total > 0 else 0.0
    layer_share = float(frame.loc[layered, "time_s"].sum()) / total if total > 0 else 0.0
    return (
        f"NVTX gave {phase_share:.1%} of kernel time a phase and {layer_share:.1%} a layer (a module); the rest "
        "is phase other, or its phase's label as its layer"
    )


def _rank_lines(parts: list[ImportedSource], what: str) -> list[str]:
    """Each rank's notes (or warnings): once where every rank says the same, else per rank. The trace path's
    advice for a trace without shapes is a PyTorch profiler's: replaced by the export's own."""
    lines: list[str] = []
    per_rank = [[line for line in getattr(p.info, what) if NO_SHAPES_WARNING not in line] for p in parts]
    for line in per_rank[0]:
        if all(line in other for other in per_rank[1:]):
            lines.append(line)
    for rank, own in enumerate(per_rank):
        lines += [f"rank {rank}: {line}" for line in own if line not in lines]
    return lines
