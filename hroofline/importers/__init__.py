"""Import stage: any real ncu output to the standard per-launch table.

``import_source`` recognises a source by its content (a ``.ncu-rep`` report, a long or wide CSV, a
console log, each possibly gzip-compressed, or a folder of one-metric-per-run logs), reads it into a
:class:`~hroofline.importers.raw.RawProfile`, and evaluates the metric formulas on it.
"""

from __future__ import annotations

import hashlib
import mmap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hroofline.errors import InputError
from hroofline.importers.metric_logs import folder_digest, folder_files, read_metric_logs
from hroofline.importers.ncu_console import looks_like_console_log, read_ncu_console
from hroofline.importers.ncu_csv import NO_KERNELS, find_csv_header, read_ncu_csv
from hroofline.importers.ncu_rep import is_ncu_report, read_ncu_rep
from hroofline.importers.nvtx import stack_label
from hroofline.importers.raw import (
    RawProfile,
    decode_text,
    gunzip_if_needed,
    is_blank,
    read_file_bytes,
    sha256_of_file,
)
from hroofline.metricset import GpuName, MetricSet, gpu_from_display_name, normalize_cc
from hroofline.model import RAW_METRIC_PREFIX, SourceInfo, conform_launches
from hroofline.phases import phase_from_ranges
from hroofline.roofline import Derived, derive_quantities, kernel_time


@dataclass(frozen=True)
class ImportOptions:
    phase: str | None = None
    gpu: GpuName | None = None
    merge: str = "launch"


@dataclass
class ImportedSource:
    info: SourceInfo
    launches: pd.DataFrame
    cc: str | None
    device_name: str | None


def source_digest(path: Path) -> str:
    """The identity of a source: its file's sha256, or one over a folder's files."""
    if path.is_dir():
        return folder_digest(folder_files(path))[0]
    return sha256_of_file(path)


def read_profile(
    path: Path, options: ImportOptions, metric_set: MetricSet, digest: str | None = None
) -> tuple[RawProfile, str, list[dict[str, str]]]:
    """The profile of a file or folder, the source's sha256 and, for a folder, its files' hashes.

    A file's sha256 is computed once, beside the parsing, unless the caller already has it."""
    if path.is_dir():
        folder_sha256, files = folder_digest(folder_files(path))
        return read_metric_logs(path, options.merge), folder_sha256, files
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    raw = read_file_bytes(path)
    if digest is not None:
        return _read_file(gunzip_if_needed(raw, path), path, metric_set), digest, []
    # hashlib releases the GIL on large buffers, so hashing overlaps the parse.
    with ThreadPoolExecutor(max_workers=1) as pool:
        hashing = pool.submit(lambda: hashlib.sha256(raw).hexdigest())
        profile = _read_file(gunzip_if_needed(raw, path), path, metric_set)
        return profile, hashing.result(), []


def _read_file(data: bytes | mmap.mmap, path: Path, metric_set: MetricSet) -> RawProfile:
    if is_blank(data):
        raise InputError(f"{path}: the file is empty")
    if is_ncu_report(data):
        return read_ncu_rep(data, str(path), metric_set)
    if b"\x00" in data[:4096]:
        raise InputError(f"{path}: not an ncu report, CSV export or console log (binary data)")
    if find_csv_header(data) >= 0:
        return read_ncu_csv(data, str(path))
    text = decode_text(data)
    if looks_like_console_log(text):
        return read_ncu_console(text, str(path))
    if NO_KERNELS.search(text):
        raise InputError(f"{path}: ncu profiled no kernels in this run (the log says 'No kernels were profiled')")
    raise InputError(f"{path}: not an ncu report, CSV export or console log")


def import_source(
    path: Path, options: ImportOptions, metric_set: MetricSet, digest: str | None = None
) -> ImportedSource:
    """Read one source and compute its quantities; ``digest`` is the source's sha256 if already known."""
    profile, digest, files = read_profile(path, options, metric_set, digest)
    cc = _compute_capability(profile, options, path)
    arch = metric_set.arch_of(cc)
    time = kernel_time(profile.metrics, metric_set)
    derived = derive_quantities(profile.metrics, metric_set, arch, time)
    if time.seconds.isna().all() and derived.quantities.isna().all().all():
        raise InputError(
            f"{path}: no usable per-kernel metrics: none of kernel time (gpu__time_duration.sum, or "
            "sm__cycles_elapsed.avg with .per_second), FLOP counts or bytes per memory level"
        )
    identity = profile.identity.reset_index(drop=True)
    launches = pd.DataFrame(
        {
            "source": 0,
            "launch_id": identity["launch_id"].astype("int64"),
            "kernel": identity["kernel"],
            "phase": [phase_from_ranges(r) or options.phase or "other" for r in identity["nvtx_ranges"]],
            "nvtx": [stack_label(r) or None for r in identity["nvtx_ranges"]],
            "grid": identity.get("grid"),
            "block": identity.get("block"),
            "device": identity.get("device"),
            "cc": identity.get("cc"),
            "stream": identity.get("stream"),
            "launches": identity.get("launches", 1),
            "time_s": time.seconds.reset_index(drop=True),
            "time_method": time.method.reset_index(drop=True),
            "clock_hz": time.clock_hz.reset_index(drop=True),
        }
    )
    launches = pd.concat([launches, derived.quantities.reset_index(drop=True)], axis=1)
    for name in sorted(derived.used_metrics):
        launches[RAW_METRIC_PREFIX + name] = profile.metrics[name].reset_index(drop=True)
    if cc and launches["cc"].isna().all():
        launches["cc"] = cc
    info = _source_info(path, digest, files, profile, options, derived)
    info.time_methods = {str(k): int(v) for k, v in time.method.value_counts().items()}
    return ImportedSource(info=info, launches=conform_launches(launches), cc=cc, device_name=profile.device_name)


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


def _source_info(
    path: Path,
    digest: str,
    files: list[dict[str, str]],
    profile: RawProfile,
    options: ImportOptions,
    derived: Derived,
) -> SourceInfo:
    extra = {name: unit or "" for name, unit in sorted(profile.units.items()) if name not in derived.used_metrics}
    return SourceInfo(
        path=str(path),
        kind=profile.kind,
        sha256=digest,
        launches=int(profile.identity["launches"].sum()) if "launches" in profile.identity else len(profile.identity),
        files=files,
        ncu_version=profile.ncu_version,
        phase=options.phase,
        formulas_used=derived.formulas_used,
        extra_metrics=extra,
        notes=list(profile.notes) + list(derived.notes),
    )
