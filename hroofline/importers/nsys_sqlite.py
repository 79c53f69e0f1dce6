"""Nsight Systems SQLite exports (``nsys export --type sqlite``): the tables hroofline reads, checked and read.

What is read, per process (a process is the pid part of the export's serialized ``globalPid``/``globalTid``,
``id >> 24``, as the export's own documentation packs them):

- ``CUPTI_ACTIVITY_KIND_KERNEL``, ``_MEMCPY``, ``_MEMSET``: each activity's device, stream, start and end (ns),
  correlation id, and a kernel's grid, block and CUDA graph ids (``graphId``, ``graphNodeId``); names through
  ``StringIds``;
- ``CUPTI_ACTIVITY_KIND_RUNTIME``: the runtime (or driver) call each correlation id names, on its thread;
- ``NVTX_EVENTS``: push/pop and start/end ranges (marks have no end and are left out);
- ``TARGET_INFO_GPU`` (name, compute capability, SM count, memory per device) where the export has it, and
  ``TARGET_INFO_SYSTEM_ENV``'s ``GpuInfo`` else.

The kernel table and ``StringIds`` are required; nsys leaves out the table of an activity that did not happen
(no memset, no NVTX), so the others may be missing: said in a note where that loses links or phases. The export's
schema version (``META_DATA_EXPORT``) must be of major version 3, the one read here (tested on 3.25.0).
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hroofline.errors import InputError
from hroofline.importers.kineto import GpuActivity, RuntimeCall

NANOSECOND = 1e-9
SCHEMA_MAJOR = 3  # the export schema read here: nsys 2023 to 2026 (3.25.0 tested)
SQLITE_MAGIC = b"SQLite format 3\x00"
THREAD_BITS = 24  # a serialized global id: the pid above the low 24 bits (the thread id)
PUSH_POP, START_END = 59, 60  # ENUM_NSYS_EVENT_TYPE: NvtxPushPopRange, NvtxStartEndRange

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPYS = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSETS = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
STRINGS = "StringIds"
_ACTIVITY = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid")
COLUMNS: dict[str, tuple[str, ...]] = {
    KERNELS: (*_ACTIVITY, "shortName", "demangledName", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"),
    MEMCPYS: (*_ACTIVITY, "bytes", "copyKind"),
    MEMSETS: (*_ACTIVITY, "bytes"),
    RUNTIME: ("start", "end", "globalTid", "correlationId", "nameId"),
    NVTX: ("start", "end", "eventType", "text", "textId", "globalTid"),
    STRINGS: ("id", "value"),
}
REQUIRED = (STRINGS, KERNELS)
MISSING_NOTES = {
    RUNTIME: f"no {RUNTIME} table: no kernel is linked to the op that launched it (profile with --trace=cuda)",
    NVTX: f"no {NVTX} table: no phases, layers or ops from NVTX ranges (profile with --trace=nvtx and "
    "torch.autograd.profiler.emit_nvtx())",
}
# ENUM_CUDA_MEMCPY_OPER ids, written as the PyTorch profiler names its copies ("Memcpy HtoD")
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH"}
COPY_KINDS |= {10: "PtoP", 11: "HtoD (unified)", 12: "DtoH (unified)", 13: "DtoD (unified)"}


@dataclass
class NvtxRange:
    text: str
    thread: tuple[str, str]  # (pid, serialized thread id), as the runtime calls' threads
    start_s: float
    end_s: float


@dataclass
class ProcessActivity:
    """What one process did: the GPU activities it launched, its runtime calls by correlation id, its NVTX ranges."""

    pid: int
    gpu: list[GpuActivity] = field(default_factory=list)
    runtime: dict[int, RuntimeCall] = field(default_factory=dict)
    nvtx: list[NvtxRange] = field(default_factory=list)

    @property
    def devices(self) -> list[int]:
        return sorted({int(a.args["device"]) for a in self.gpu})


ProcessOf = Callable[[int], ProcessActivity]  # a process's activity, by a global id of it (its pid's or a thread's)


@dataclass
class NsysTables:
    """One export, read: per process, and what the export says of itself."""

    path: str
    schema_version: str | None
    product_version: str | None
    processes: dict[int, ProcessActivity]
    devices: dict[int, dict[str, Any]]  # by device id: name, computeMajor/Minor, numSms, totalGlobalMem (Kineto's keys)
    gpu_info: str | None  # TARGET_INFO_SYSTEM_ENV's GpuInfo, where it names a GPU
    notes: list[str] = field(default_factory=list)


def looks_like_sqlite(data: bytes | Any) -> bool:
    return bytes(data[: len(SQLITE_MAGIC)]) == SQLITE_MAGIC


def read_nsys_sqlite(path: Path, shown: str | None = None) -> NsysTables:
    """The export at ``path`` read, its tables and columns checked first; ``shown`` names it in messages (the
    report it was exported from)."""
    where = shown or str(path)
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as error:
        raise InputError(f"{where}: cannot open the SQLite file ({error})") from None
    try:
        return _read(connection, where)
    except sqlite3.DatabaseError as error:
        raise InputError(f"{where}: not a readable SQLite database ({error})") from None
    finally:
        connection.close()


def _read(connection: sqlite3.Connection, where: str) -> NsysTables:
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables & {STRINGS, KERNELS, "META_DATA_EXPORT"}:
        raise InputError(f"{where}: a SQLite file that is no Nsight Systems export (no {STRINGS} or {KERNELS} table)")
    meta = _export_meta(connection, tables)
    version = meta.get("EXPORT_SCHEMA_VERSION")
    _check_version(version, where)
    missing = [t for t in REQUIRED if t not in tables]
    if missing:
        raise InputError(
            f"{where}: the Nsight Systems export has no {' or '.join(missing)} table: "
            + ("no GPU kernels were traced" if KERNELS in missing else "its names cannot be read"),
            "profile with nsys profile --trace=cuda and export again with nsys export --type sqlite",
        )
    for table in [t for t in COLUMNS if t in tables]:
        _check_columns(connection, table, where)
    strings = dict(connection.execute(f"SELECT id, value FROM {STRINGS}"))
    processes: dict[int, ProcessActivity] = {}

    def process(global_id: int) -> ProcessActivity:
        pid = int(global_id) >> THREAD_BITS
        return processes.setdefault(pid, ProcessActivity(pid))

    _read_kernels(connection, strings, process)
    if MEMCPYS in tables:
        _read_copies(connection, process)
    if MEMSETS in tables:
        _read_sets(connection, process)
    if not any(p.gpu for p in processes.values()):
        raise InputError(f"{where}: the export's {KERNELS} table is empty: no GPU kernels were traced")
    if RUNTIME in tables:
        _read_runtime(connection, strings, process)
    if NVTX in tables:
        _read_nvtx(connection, strings, process)
    notes = [MISSING_NOTES[t] for t in (RUNTIME, NVTX) if t not in tables]
    return NsysTables(
        path=where,
        schema_version=version,
        product_version=meta.get("EXPORT_PRODUCT_VERSION"),
        processes={pid: p for pid, p in sorted(processes.items()) if p.gpu},
        devices=_devices(connection, tables),
        gpu_info=_gpu_info(connection, tables),
        notes=notes,
    )


def _export_meta(connection: sqlite3.Connection, tables: set[str]) -> dict[str, str]:
    if "META_DATA_EXPORT" not in tables:
        return {}
    return {str(k): str(v) for k, v in connection.execute("SELECT name, value FROM META_DATA_EXPORT")}


def _check_version(version: str | None, where: str) -> None:
    """Major version 3 is read; an export without the version (before nsys 2021) is read where its columns are."""
    if version is None:
        return
    major = version.split(".")[0]
    if major != str(SCHEMA_MAJOR):
        raise InputError(
            f"{where}: Nsight Systems export schema {version}: hroofline reads schema {SCHEMA_MAJOR}.x "
            "(tested on 3.25.0, nsys 2026.2)",
            "export it with an nsys whose schema is 3.x",
        )


def _check_columns(connection: sqlite3.Connection, table: str, where: str) -> None:
    present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
    missing = [c for c in COLUMNS[table] if c not in present]
    if missing:
        raise InputError(
            f"{where}: the export's {table} table has no {', '.join(missing)} column: an nsys export schema "
            "hroofline does not read"
        )


def _thread(global_tid: int) -> tuple[str, str]:
    return str(int(global_tid) >> THREAD_BITS), str(global_tid)


def _seconds(ns: int) -> float:
    return ns * NANOSECOND


def _read_kernels(connection: sqlite3.Connection, strings: dict[int, str], process: ProcessOf) -> None:
    present = {row[1] for row in connection.execute(f"PRAGMA table_info({KERNELS})")}
    graph = ", ".join(c if c in present else "NULL" for c in ("graphId", "graphNodeId"))
    query = f"SELECT {', '.join(COLUMNS[KERNELS])}, {graph} FROM {KERNELS}"
    for row in connection.execute(query):
        start, end, device, stream, correlation, pid, short, demangled, gx, gy, gz, bx, by, bz, graph_id, node = row
        # the demangled name with its templates, as the PyTorch profiler names kernels; the short one else
        name = strings.get(demangled) or strings.get(short) or f"kernel {short}"
        args: dict[str, Any] = {"device": device, "stream": stream, "grid": [gx, gy, gz], "block": [bx, by, bz]}
        if graph_id is not None or node is not None:
            args |= {"graph_id": graph_id, "graph_node_id": node}
        activity = GpuActivity(name, "kernel", _seconds(start), _seconds(end - start), correlation, args)
        process(pid).gpu.append(activity)


def _read_copies(connection: sqlite3.Connection, process: ProcessOf) -> None:
    for row in connection.execute(f"SELECT {', '.join(COLUMNS[MEMCPYS])} FROM {MEMCPYS}"):
        start, end, device, stream, correlation, pid, size, kind = row
        name = f"Memcpy {COPY_KINDS.get(kind, 'unknown')}"
        args = {"device": device, "stream": stream, "bytes": size}
        process(pid).gpu.append(GpuActivity(name, "memcpy", _seconds(start), _seconds(end - start), correlation, args))


def _read_sets(connection: sqlite3.Connection, process: ProcessOf) -> None:
    for row in connection.execute(f"SELECT {', '.join(COLUMNS[MEMSETS])} FROM {MEMSETS}"):
        start, end, device, stream, correlation, pid, size = row
        args = {"device": device, "stream": stream, "bytes": size}
        activity = GpuActivity("Memset (Device)", "memset", _seconds(start), _seconds(end - start), correlation, args)
        process(pid).gpu.append(activity)


def _read_runtime(connection: sqlite3.Connection, strings: dict[int, str], process: ProcessOf) -> None:
    """Each correlation id's call: the earliest call that carries it (a runtime launch, around the driver call
    nsys may record with the same id)."""
    found: dict[int, dict[int, tuple[int, RuntimeCall]]] = defaultdict(dict)
    for start, _end, thread, correlation, name_id in connection.execute(
        f"SELECT {', '.join(COLUMNS[RUNTIME])} FROM {RUNTIME} WHERE correlationId IS NOT NULL"
    ):
        calls = found[int(thread) >> THREAD_BITS]
        if correlation not in calls or start < calls[correlation][0]:
            call = RuntimeCall(_thread(thread), _seconds(start), strings.get(name_id, ""))
            calls[correlation] = (start, call)
    for pid, calls in found.items():
        process(pid << THREAD_BITS).runtime = {c: call for c, (_, call) in calls.items()}


def _read_nvtx(connection: sqlite3.Connection, strings: dict[int, str], process: ProcessOf) -> None:
    query = f"SELECT {', '.join(COLUMNS[NVTX])} FROM {NVTX} WHERE end IS NOT NULL AND eventType IN (?, ?)"
    for start, end, _type, text, text_id, thread in connection.execute(query, (PUSH_POP, START_END)):
        name = text if text is not None else strings.get(text_id)
        if name and thread is not None and end >= start:
            process(thread).nvtx.append(NvtxRange(name, _thread(thread), _seconds(start), _seconds(end)))


def _devices(connection: sqlite3.Connection, tables: set[str]) -> dict[int, dict[str, Any]]:
    """``TARGET_INFO_GPU``'s devices, under the keys of the PyTorch profiler's ``deviceProperties``."""
    if "TARGET_INFO_GPU" not in tables:
        return {}
    present = {row[1] for row in connection.execute("PRAGMA table_info(TARGET_INFO_GPU)")}
    keys = {
        "name": "name",
        "computeMajor": "computeMajor",
        "computeMinor": "computeMinor",
        "smCount": "numSms",
        "totalMemory": "totalGlobalMem",
    }
    wanted = [c for c in keys if c in present]
    if "id" not in present or not wanted:
        return {}
    rows = connection.execute(f"SELECT id, {', '.join(wanted)} FROM TARGET_INFO_GPU")
    return {int(row[0]): {keys[c]: v for c, v in zip(wanted, row[1:], strict=True)} for row in rows}


def _gpu_info(connection: sqlite3.Connection, tables: set[str]) -> str | None:
    """The GPU name ``TARGET_INFO_SYSTEM_ENV``'s ``GpuInfo`` JSON gives, where it gives one (often ``{}``)."""
    if "TARGET_INFO_SYSTEM_ENV" not in tables:
        return None
    row = connection.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'GpuInfo' LIMIT 1").fetchone()
    try:
        info = json.loads(row[0]) if row and row[0] else {}
    except (TypeError, ValueError):
        return None
    gpus = info.get("gpus") or info.get("items") if isinstance(info, dict) else None
    first = gpus[0] if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict) else info
    name = first.get("name") if isinstance(first, dict) else None
    return str(name) if name else None
