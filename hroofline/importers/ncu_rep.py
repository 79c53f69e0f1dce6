"""Binary ``.ncu-rep`` reports, read with NVIDIA's ``ncu_report`` module (PyPI ``ncu-report``, no GPU).

``ncu_report`` loads a truncated report without complaint and simply returns fewer kernels, so the
file's framing is checked first: after the 4-byte magic ``NVR\\0`` a report is a chain of messages,
each a little-endian u32 length and that many bytes, which must end exactly at the end of the file.
"""

from __future__ import annotations

import mmap
import re
import struct
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hroofline.errors import InputError
from hroofline.importers.raw import NCU_REPORT_MAGIC, RawProfile
from hroofline.importers.units import unit_scale
from hroofline.roofs.metricset import MetricSet

# The ncu version that wrote a report is stored as a string property named "Nsight Compute Target"
# (reports from ncu 2020.2 on; older ones do not carry it).
_VERSION = re.compile(rb"Nsight Compute Target[\x00-\x1f].{0,2}?(\d{4}\.\d+\.\d+)", re.DOTALL)


def is_ncu_report(data: bytes | bytearray | mmap.mmap) -> bool:
    return data[:4] == NCU_REPORT_MAGIC


def check_framing(data: bytes | bytearray | mmap.mmap, where: str) -> None:
    offset, size = 4, len(data)
    while offset + 4 <= size:
        (length,) = struct.unpack_from("<I", data, offset)
        offset += 4 + length
    if offset != size:
        raise InputError(f"{where}: the .ncu-rep report is truncated or corrupt (its last block is incomplete)")


def read_ncu_rep(
    data: bytes | bytearray | mmap.mmap, where: str, metric_set: MetricSet, plain_path: Path | None = None
) -> RawProfile:
    """A report's launches; ``plain_path``: the uncompressed file ``data`` maps, loaded where it is (no copy)."""
    check_framing(data, where)
    try:
        import ncu_report
    except ImportError:
        raise InputError(
            f"{where}: reading .ncu-rep needs NVIDIA's ncu_report module", "pip install ncu-report"
        ) from None
    if plain_path is not None and plain_path.name.endswith(".ncu-rep"):
        profile = _load(ncu_report, plain_path, where, metric_set)
    elif Path("/proc/self/fd").is_dir():
        # ncu_report opens paths only: a compressed report is written out decompressed, to a file with no name
        # (Linux's O_TMPFILE), opened by its descriptor's path, so that a killed import leaves nothing behind.
        with tempfile.TemporaryFile(prefix="hroofline-", suffix=".ncu-rep") as handle:
            handle.write(data)
            handle.flush()
            profile = _load(ncu_report, Path(f"/proc/self/fd/{handle.fileno()}"), where, metric_set)
    else:
        with tempfile.TemporaryDirectory(prefix="hroofline-") as folder:
            path = Path(folder) / "report.ncu-rep"
            path.write_bytes(data)
            profile = _load(ncu_report, path, where, metric_set)
    version = _VERSION.search(data)
    profile.ncu_version = version.group(1).decode() if version else None
    return profile


def _load(ncu_report: Any, path: Path, where: str, metric_set: MetricSet) -> RawProfile:
    try:
        context = ncu_report.load_report(str(path))
    except Exception as error:  # the SWIG layer raises plain Exceptions
        raise InputError(f"{where}: ncu_report cannot load the report ({error})") from None
    return _profile_from_context(context, where, metric_set)


def _profile_from_context(context: Any, where: str, metric_set: MetricSet) -> RawProfile:
    identities: list[dict[str, object]] = []
    rows: list[dict[str, float]] = []
    units: dict[str, str] = {}
    device_name = None
    launch_index = 0
    for range_index in range(context.num_ranges()):
        report_range = context.range_by_idx(range_index)
        for action_index in range(report_range.num_actions()):
            action = report_range.action_by_idx(action_index)
            _refuse_whole_workloads(action, where)
            identities.append(_identity(action, launch_index))
            launch_index += 1
            values: dict[str, float] = {}
            for name in action.metric_names():
                if not metric_set.feeds_a_formula(name):
                    units.setdefault(name, "")
                    continue
                metric = action.metric_by_name(name)
                value = metric.value()
                if isinstance(value, (int, float)):
                    unit = metric.unit() or ""
                    # ncu_report returns values in the metric's own unit (ns for durations).
                    values[name] = float(value) * unit_scale(unit)
                    units[name] = unit
            rows.append(values)
            device_name = device_name or _string_metric(action, "device__attribute_display_name")
    if not identities:
        raise InputError(f"{where}: the report holds no kernel launches")
    return RawProfile(
        kind="ncu-rep",
        identity=pd.DataFrame(identities),
        metrics=pd.DataFrame(rows, index=range(len(rows))).astype(np.float64),
        units=units,
        device_name=device_name,
    )


# What a result measured when it is not one kernel (ncu_report's IAction.WorkloadType_*): its counters are the
# sum over many kernels, which a roofline of kernels would misread as one.
_WHOLE_WORKLOADS = {
    "WorkloadType_GRAPH": "a whole CUDA graph (ncu --graph-profiling graph); collect with --graph-profiling node, "
    "as hroofline profile does, to measure each of its kernels",
    "WorkloadType_RANGE": "a whole range (ncu --replay-mode range or app-range); collect per kernel instead",
    "WorkloadType_CMDLIST": "a whole command list; collect per kernel instead",
}


def _refuse_whole_workloads(action: Any, where: str) -> None:
    kind = getattr(action, "workload_type", None)
    if kind is None:  # ncu_report before workloads other than kernels existed
        return
    found = kind()
    for name, what in _WHOLE_WORKLOADS.items():
        if found == getattr(action, name, object()):
            raise InputError(f"{where}: the report measured {what} (result {action.name()!r}), not kernels")


def _identity(action: Any, index: int) -> dict[str, object]:
    ranges: tuple[str, ...] = ()
    state = action.nvtx_state()
    if state is not None:
        for domain_id in state.domains():
            domain = state.domain_by_id(domain_id)
            ranges += tuple(domain.push_pop_ranges()) + tuple(domain.start_end_ranges())
    major = _number_metric(action, "device__attribute_compute_capability_major")
    minor = _number_metric(action, "device__attribute_compute_capability_minor")
    return {
        "launch_id": index,
        "kernel": action.name(action.NameBase_DEMANGLED),
        "grid": _dims(action, "launch__grid_dim", "launch__grid_size"),
        "block": _dims(action, "launch__block_dim", "launch__block_size"),
        "device": _int_text(_number_metric(action, "device__attribute_device_index")),
        "cc": f"{int(major)}.{int(minor)}" if major is not None and minor is not None else None,
        "stream": _int_text(_number_metric(action, "launch__stream_id")),
        "nvtx_ranges": ranges,
    }


def _dims(action: Any, prefix: str, total_name: str) -> str | None:
    parts = [_number_metric(action, f"{prefix}_{axis}") for axis in "xyz"]
    if all(p is not None for p in parts):
        return "(" + ", ".join(str(int(p)) for p in parts if p is not None) + ")"
    return _int_text(_number_metric(action, total_name))


def _number_metric(action: Any, name: str) -> float | None:
    metric = action.metric_by_name(name)
    if metric is None:
        return None
    value = metric.value()
    return float(value) if isinstance(value, (int, float)) else None


def _string_metric(action: Any, name: str) -> str | None:
    metric = action.metric_by_name(name)
    return metric.as_string() if metric is not None else None


def _int_text(value: float | None) -> str | None:
    return None if value is None else str(int(value))
