"""The import pipeline: any real ncu output to the standard per-launch table.

``import_sources`` recognises each source by its content (a ``.ncu-rep`` report, a long or wide CSV, a
console log, each possibly gzip-compressed, or a folder of passes), reads it into a
:class:`~hroofline.importers.raw.RawProfile`, joins sources that are passes over the same launches, and
evaluates the metric formulas and the report's own roofs on each result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hroofline.errors import InputError, MergeError, UsageError
from hroofline.importers.checks import (
    failed_launch_warning,
    failed_launches,
    uncounted_tensor_work,
    uncounted_work_warning,
)
from hroofline.importers.graph_capture import captured_graphs
from hroofline.importers.inductor_provenance import CompiledGraph
from hroofline.importers.join import Pass, join_passes, launch_difference, measured_metrics, same_launches
from hroofline.importers.kineto import TraceEvents, looks_like_json, parse_trace
from hroofline.importers.metric_logs import folder_digest, folder_files, read_metric_logs
from hroofline.importers.named_gpu import check_named_gpu
from hroofline.importers.ncu_console import looks_like_console_log, read_ncu_console
from hroofline.importers.ncu_csv import NO_KERNELS, find_csv_header, read_ncu_csv
from hroofline.importers.ncu_rep import is_ncu_report, read_ncu_rep
from hroofline.importers.nsys import is_nsys_file, nsys_source, read_nsys
from hroofline.importers.nsys_sqlite import NsysTables
from hroofline.importers.nvtx import stack_label
from hroofline.importers.raw import (
    RawProfile,
    SourceData,
    check_head,
    decode_text,
    is_blank,
    read_source_data,
)
from hroofline.importers.source import ImportedSource
from hroofline.importers.source_hash import BLAKE3, file_entry, file_hash, files_hash
from hroofline.importers.trace_source import TraceOptions, trace_source
from hroofline.importers.values import check_values
from hroofline.model.layers import layer_from_ranges, phase_label
from hroofline.model.phases import phase_from_ranges
from hroofline.model.run import RAW_METRIC_PREFIX, SourceInfo, conform_launches
from hroofline.roofs.catalog import GpuName, gpu_from_display_name, refuse_for_ncu
from hroofline.roofs.formulas import Derived, derive_quantities, kernel_time
from hroofline.roofs.metricset import MetricSet, normalize_cc
from hroofline.roofs.rates import rates_for
from hroofline.roofs.report import RoofContext, report_roofs


@dataclass(frozen=True)
class ImportOptions:
    phase: str | None = None
    gpu: GpuName | None = None
    merge: str = "launch"
    steps: frozenset[int] | None = None  # traces: the profiler steps to import (all by default)
    rank: int | None = None  # traces: the rank, where the trace does not say
    cpu_ops: bool = False  # a CPU-only trace (hroofline's own, on the CPU): every op is a launch (self time)
    force_gpu: bool = False  # judge a report as ``gpu`` even where the device it states differs (SM count)
    captures: tuple[Path, ...] = ()  # traces replayed from CUDA graphs: the traces written while capturing them
    compiled: Mapping[str, CompiledGraph] | None = None  # traces: a compile log's graphs, for compiled layers
    hash_algorithm: str = BLAKE3  # of the sources' identities: the run's own (source_hash.run_algorithm)


# Sources that are a whole measurement each (a trace, an Nsight Systems export), never one pass of several.
WHOLE_MEASUREMENTS = (TraceEvents, NsysTables)


@dataclass(frozen=True)
class ReadSource:
    """One source as read, before its formulas run."""

    path: Path
    profile: RawProfile | TraceEvents | NsysTables
    digest: str
    files: list[dict[str, str]]


def source_digest(path: Path, algorithm: str = BLAKE3) -> str:
    """The identity of a source: its file's hash (``algorithm``), or a SHA-256 over a folder's files."""
    if path.is_dir():
        return folder_digest(folder_files(path))[0]
    return file_hash(path, algorithm)


def read_source(path: Path, options: ImportOptions, metric_set: MetricSet, digest: str | None = None) -> ReadSource:
    """The profile of a file or folder, with the source's identity and, for a folder, its files' hashes.

    A file's hash (``options.hash_algorithm``) is computed once, beside the parsing, unless the caller has it."""
    if path.is_dir():
        folder_sha256, files = folder_digest(folder_files(path))
        reader = _file_reader(metric_set)
        return ReadSource(path, read_metric_logs(path, options.merge, metric_set, reader), folder_sha256, files)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if is_nsys_file(path, _head(path)):
        return ReadSource(path, read_nsys(path), digest or file_hash(path, options.hash_algorithm), [])
    if digest is not None:
        return ReadSource(path, _read_file(read_source_data(path), path, metric_set), digest, [])
    # The file's hash in a thread beside the parse (it releases the GIL), read from the file in blocks.
    with ThreadPoolExecutor(max_workers=1) as pool:
        hashing = pool.submit(file_hash, path, options.hash_algorithm)
        try:
            profile = _read_file(read_source_data(path), path, metric_set)
        except BaseException:
            hashing.cancel()
            raise
        return ReadSource(path, profile, hashing.result(), [])


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(16)
    except OSError:
        return b""  # said by the reader that follows


def _file_reader(metric_set: MetricSet) -> Callable[[Path], RawProfile]:
    def read(path: Path) -> RawProfile:
        profile = _read_file(read_source_data(path), path, metric_set)
        if isinstance(profile, TraceEvents):
            raise InputError(f"{path}: a PyTorch profiler trace in a folder of ncu passes", "import it on its own")
        return profile

    return read


def _read_file(source: SourceData, path: Path, metric_set: MetricSet) -> RawProfile | TraceEvents:
    data = source.data
    if is_blank(data):
        raise InputError(f"{path}: the file is empty")
    if looks_like_json(data):
        return parse_trace(data, path)
    check_head(data, path)  # binary data that is no ncu report
    if is_ncu_report(data):
        profile = read_ncu_rep(data, str(path), metric_set, source.plain_path)
    elif find_csv_header(data) >= 0:
        profile = read_ncu_csv(data, str(path), source.plain_path)
    else:
        text = decode_text(data)
        if not looks_like_console_log(text):
            if NO_KERNELS.search(text):
                raise InputError(
                    f"{path}: ncu profiled no kernels in this run (the log says 'No kernels were profiled')"
                )
            raise InputError(f"{path}: not an ncu report, CSV export or console log")
        profile = read_ncu_console(text, str(path), metric_set.display_names)
    return check_values(profile, metric_set, str(path))


def import_source(
    path: Path, options: ImportOptions, metric_set: MetricSet, digest: str | None = None
) -> ImportedSource:
    """Read one source and compute its quantities; ``digest`` is the source's identity if already known."""
    return build_source(read_source(path, options, metric_set, digest), options, metric_set)


def import_sources(sources: list[ReadSource], options: ImportOptions, metric_set: MetricSet) -> list[ImportedSource]:
    """Sources of one import: passes over the same launches are joined, the rest stay apart."""
    return [build_source(group, options, metric_set) for group in group_passes(sources, options, metric_set)]


def group_passes(sources: list[ReadSource], options: ImportOptions, metric_set: MetricSet) -> list[ReadSource]:
    """Joins the sources that are passes over the same launches: the same kernel names in the same order,
    each measuring something the others did not. ``--merge name`` joins them all per kernel name."""
    if options.merge == "name" and len(sources) > 1:  # traces are never passes: they stay as they are
        traces = [s for s in sources if isinstance(s.profile, WHOLE_MEASUREMENTS)]
        passes = [s for s in sources if not isinstance(s.profile, WHOLE_MEASUREMENTS)]
        joined = [_joined(passes, options, metric_set)] if len(passes) > 1 else passes
        return joined + traces
    groups: list[list[ReadSource]] = []
    for source in sources:
        home = next((g for g in groups if _is_another_pass(g, source, metric_set)), None)
        if home is None:
            groups.append([source])
        else:
            home.append(source)
    return [group[0] if len(group) == 1 else _joined(group, options, metric_set) for group in groups]


def _is_another_pass(group: list[ReadSource], source: ReadSource, metric_set: MetricSet) -> bool:
    """Whether ``source`` is one more pass over the launches of ``group``. Passes that measure other
    metrics over nearly the same launches, but not the same, disagree: that is refused, not appended."""
    first = group[0]
    if isinstance(source.profile, WHOLE_MEASUREMENTS) or isinstance(first.profile, WHOLE_MEASUREMENTS):
        return False  # a trace is a whole measurement (each rank's its own), never a pass
    measured = measured_metrics(source.profile, metric_set)
    if any(measured == measured_metrics(member.profile, metric_set) for member in group):
        return False  # the same measurement again (repeats): appended
    if same_launches(first.profile, source.profile):
        return True
    if _mostly_the_same_launches(first.profile, source.profile):
        a, b = Pass(first.path, first.profile), Pass(source.path, source.profile)
        raise MergeError(
            f"{first.path} and {source.path} look like passes over the same launches, but they disagree: "
            f"{launch_difference(a, b)}",
            "pass --merge name to join per-kernel-name sums, or import them separately to append",
        )
    return False


def _mostly_the_same_launches(a: RawProfile, b: RawProfile) -> bool:
    """Equal launch counts and at least half the kernel names equal, position by position."""
    if len(a.identity) != len(b.identity) or not len(a.identity):
        return False
    names_a, names_b = a.identity["kernel"].astype(str).to_numpy(), b.identity["kernel"].astype(str).to_numpy()
    return bool((names_a == names_b).mean() >= 0.5)


def _joined(group: list[ReadSource], options: ImportOptions, metric_set: MetricSet) -> ReadSource:
    passes = [Pass(s.path, s.profile) for s in group]
    where = " + ".join(str(s.path) for s in group)
    profile = join_passes(passes, options.merge, metric_set, where)
    files = [file_entry(str(s.path), s.digest) for s in group]
    return ReadSource(Path(where), profile, files_hash(files, options.hash_algorithm), files)


def build_source(source: ReadSource, options: ImportOptions, metric_set: MetricSet) -> ImportedSource:
    """The formulas, the report's roofs and the import's checks, on one source as read."""
    if isinstance(source.profile, TraceEvents):
        return _trace_source(source, source.profile, options, metric_set)
    if isinstance(source.profile, NsysTables):
        return _nsys_source(source, source.profile, options, metric_set)
    if options.captures:
        raise UsageError(
            f"{source.path}: --capture is for a PyTorch profiler trace replayed from CUDA graphs, not an ncu source",
            "import the ncu source without --capture",
        )
    path, profile = source.path, source.profile
    if options.gpu is not None:
        refuse_for_ncu(options.gpu, str(path))
    cc = _compute_capability(profile, options, path)
    arch = metric_set.arch_of(cc)
    time = kernel_time(profile.metrics, metric_set)
    derived = derive_quantities(profile.metrics, metric_set, arch, time)
    if time.seconds.isna().all() and derived.quantities.isna().all().all():
        raise InputError(
            f"{path}: no usable per-kernel metrics: none of kernel time (gpu__time_duration.sum, or "
            "sm__cycles_elapsed.avg with .per_second), FLOP counts or bytes per memory level"
        )
    per_launch = (profile.identity, profile.metrics, time.seconds, time.method, time.clock_hz, derived.quantities)
    identity, metrics, seconds, method, clock_hz, quantities = (x.reset_index(drop=True) for x in per_launch)
    warnings = list(profile.warnings)
    failed = failed_launches(seconds, quantities)
    if failed.any():
        warnings.append(failed_launch_warning(identity, metrics, failed, str(path)))
        identity, metrics, seconds, method, clock_hz, quantities = (
            x[~failed].reset_index(drop=True) for x in (identity, metrics, seconds, method, clock_hz, quantities)
        )
    launch_cc = identity["cc"] if "cc" in identity else pd.Series([None] * len(identity))
    launch_cc = launch_cc.where(launch_cc.notna(), cc)
    gpu = _source_gpu(profile, metrics, options, path)
    # categorical: the roofs' per-launch look-ups run once per distinct compute capability
    roof_cc = launch_cc.astype("category")
    context = RoofContext(roof_cc, rates_for(cc, gpu, profile.device_name), gpu.sms if gpu else None)
    roofs = report_roofs(metrics, metric_set, seconds, context, derived.level_roofs)
    phase, nvtx, layer = _stack_columns(identity["nvtx_ranges"], options.phase)
    launches = pd.DataFrame(
        {
            "source": 0,
            "launch_id": identity["launch_id"].astype("int64"),
            "kernel": identity["kernel"],
            "phase": phase,
            "nvtx": nvtx,
            "layer": layer,
            "grid": identity.get("grid"),
            "block": identity.get("block"),
            "device": identity.get("device"),
            "cc": launch_cc,
            "stream": identity.get("stream"),
            "launches": identity.get("launches", 1),
            "time_s": seconds,
            "time_method": method,
            "clock_hz": clock_hz,
        }
    )
    raw = pd.DataFrame({RAW_METRIC_PREFIX + name: metrics[name] for name in sorted(derived.used_metrics)})
    launches = pd.concat([launches, quantities, roofs.peaks, raw], axis=1)
    warnings += _tensor_warnings(identity, metrics, quantities, seconds, metric_set, arch, str(path))
    info = _source_info(source, options, derived, int(launches["launches"].sum()))
    info.time_methods = {str(k): int(v) for k, v in launches["time_method"].value_counts().items()}
    info.roofs = roofs.how
    info.notes += roofs.notes
    info.warnings = warnings
    return ImportedSource(info=info, launches=conform_launches(launches), cc=cc, device_name=profile.device_name)


def _trace_source(
    source: ReadSource, trace: TraceEvents, options: ImportOptions, metric_set: MetricSet
) -> ImportedSource:
    captured = tuple(graph for path in options.captures for graph in captured_graphs(_capture_trace(path)))
    trace_options = TraceOptions(
        options.phase,
        options.steps,
        options.rank,
        options.cpu_ops,
        options.gpu,
        options.force_gpu,
        captured,
        options.compiled,
    )
    if not options.captures:
        return trace_source(trace, source.digest, trace_options, metric_set)
    # the replay and its captures are one source: its identity is theirs together, each file listed
    files = [file_entry(str(source.path), source.digest)]
    files += [file_entry(str(path), file_hash(path, options.hash_algorithm)) for path in options.captures]
    imported = trace_source(trace, files_hash(files, options.hash_algorithm), trace_options, metric_set)
    imported.info.files = files
    return imported


def _nsys_source(
    source: ReadSource, tables: NsysTables, options: ImportOptions, metric_set: MetricSet
) -> ImportedSource:
    if options.captures or options.compiled is not None:
        flag = "--capture" if options.captures else "--compile-log"
        raise UsageError(f"{source.path}: {flag} is for PyTorch profiler traces, not a Nsight Systems export")
    trace_options = TraceOptions(
        options.phase, options.steps, options.rank, options.cpu_ops, options.gpu, options.force_gpu
    )
    return nsys_source(tables, source.digest, trace_options, metric_set)


def _capture_trace(path: Path) -> TraceEvents:
    """A capture trace, read as a trace; refused in one line where it is none."""
    if not path.exists():
        raise InputError(f"--capture {path}: no such file")
    data = read_source_data(path).data
    if is_blank(data) or not looks_like_json(data):
        raise InputError(f"--capture {path}: not a PyTorch profiler (Kineto) trace")
    return parse_trace(data, path)


def _stack_columns(stacks: pd.Series, phase: str | None) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Each launch's phase, NVTX label and layer from its range stack, worked out once per distinct stack."""
    values = stacks.to_numpy(dtype=object)
    try:
        codes, distinct = pd.factorize(values, use_na_sentinel=False)
    except TypeError:  # unhashable stacks (lists)
        codes, distinct = pd.factorize(stacks.map(lambda r: tuple(r) if r is not None else ()).to_numpy(object))
    ranges = [tuple(r) if isinstance(r, tuple | list) else () for r in distinct]
    phases = [phase_from_ranges(r) or phase or "other" for r in ranges]
    labels = [stack_label(r) or None for r in ranges]
    layers = _layers(ranges)

    def column(values: list[str | None]) -> pd.Series:
        return pd.Series(pd.array(values, dtype="string").take(codes))

    return column(phases), column(labels), column(layers)


def _layers(stacks: list[tuple[str, ...]]) -> list[str | None]:
    """Each stack's layer: the innermost NVTX range that is no phase (hroofline's module ranges, or any a
    user set). Where some launches of the source have one, the others get the label of their phase
    (backward outside modules is autograd's, ...); a source with no such range has no layers."""
    layers = [layer_from_ranges(ranges) for ranges in stacks]
    if not any(layers):
        return layers
    return [layer or phase_label(phase_from_ranges(r) or "other") for layer, r in zip(layers, stacks, strict=True)]


def _tensor_warnings(
    identity: pd.DataFrame,
    metrics: pd.DataFrame,
    quantities: pd.DataFrame,
    seconds: pd.Series,
    metric_set: MetricSet,
    arch: str | None,
    where: str,
) -> list[str]:
    found = uncounted_tensor_work(identity["kernel"], metrics, quantities, seconds, metric_set)
    wanted = [m for m in metric_set.collect.get(arch or "", ()) if "tensor" in m] if arch else []
    warnings = []
    for work in found:
        to_collect = [m for m in wanted if ("_int" in m) == (work.kind == "integer")]
        if "(" in work.kind:  # one precision: its own path
            precision = work.kind.split("(")[1].rstrip(")").lower()
            to_collect = [m for m in to_collect if precision in m]
        warnings.append(uncounted_work_warning(work, where, to_collect))
    return warnings


SM_COUNT = "device__attribute_multiprocessor_count"


def _source_gpu(profile: RawProfile, metrics: pd.DataFrame, options: ImportOptions, path: Path) -> GpuName | None:
    """The catalog GPU of a source: ``--gpu`` where given, else the one the report states. A report whose
    device (name, SM count) is another GPU than the named one is refused unless ``force_gpu``: its roofs would be
    another GPU's."""
    stated = gpu_from_display_name(profile.device_name) if profile.device_name else None
    named = options.gpu
    if named is None:
        return stated
    counts = metrics[SM_COUNT].dropna() if SM_COUNT in metrics else pd.Series(dtype=float)
    sms = int(counts.iloc[0]) if len(counts) else (stated.sms if stated is not None else None)
    check_named_gpu(str(path), profile.device_name, sms, named, options.force_gpu)
    return named


def _compute_capability(profile: RawProfile, options: ImportOptions, path: Path) -> str | None:
    in_file = profile.identity["cc"].dropna() if "cc" in profile.identity else pd.Series(dtype=object)
    file_cc = normalize_cc(str(in_file.iloc[0])) if len(in_file) else None
    if file_cc is None and profile.device_name:
        known = gpu_from_display_name(profile.device_name)
        file_cc = known.cc if known else None
    if options.gpu is None:
        return file_cc
    if file_cc is not None and file_cc != options.gpu.cc:
        raise InputError(
            f"{path}: --gpu {options.gpu.name} has compute capability {options.gpu.cc}, "
            f"but the profiled device has {file_cc}",
            "leave out --gpu or name the GPU that was profiled",
        )
    return options.gpu.cc


def _source_info(source: ReadSource, options: ImportOptions, derived: Derived, launches: int) -> SourceInfo:
    profile = source.profile
    extra = {name: unit or "" for name, unit in sorted(profile.units.items()) if name not in derived.used_metrics}
    return SourceInfo(
        path=str(source.path),
        kind=profile.kind,
        source_hash=source.digest,
        launches=launches,
        files=source.files,
        ncu_version=profile.ncu_version,
        phase=options.phase,
        formulas_used=derived.formulas_used,
        extra_metrics=extra,
        notes=list(profile.notes) + list(derived.notes),
    )
