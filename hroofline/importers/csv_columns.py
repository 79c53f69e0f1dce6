"""The columns of ncu CSV exports, long and wide, as Arrow reads them: which are identity, which repeat (read
as dictionaries), and the per-launch identity table built from them without a Python object per cell."""

from __future__ import annotations

import csv
import io
import mmap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

import hroofline.importers.nvtx as nvtx
from hroofline.errors import InputError
from hroofline.importers.units import parse_numbers

IDENTITY_FIELDS = {
    "Kernel Name": "kernel",
    "Grid Size": "grid",
    "Block Size": "block",
    "Device": "device",
    "CC": "cc",
    "Stream": "stream",
}
NON_METRIC_FIELDS = {
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Kernel Time",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Section Name",
    "Metric Name",
    "Metric Unit",
    "Metric Value",
    "Rule Name",
    "Rule Type",
    "Rule Description",
    "Estimated Speedup Type",
    "Estimated Speedup",
    "Body Item Label",
}
# Few distinct values in many rows: parsed straight into dictionary arrays, which saves memory and time.
REPEATED_COLUMNS = {
    "Process ID",
    "Process Name",
    "Host Name",
    "Context",
    "Kernel Name",
    "Metric Name",
    "Metric Unit",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Stream",
}
DICTIONARY = pa.dictionary(pa.int32(), pa.string())
DISPLAY_NAME = "device__attribute_display_name"


@dataclass(frozen=True)
class CsvBody:
    """The CSV from its header line on: read from the plain file at an offset (pyarrow reads it in blocks, so
    nothing stays mapped), or from the decompressed bytes."""

    data: bytes | bytearray | mmap.mmap
    start: int
    plain_path: Path | None

    def open(self) -> pa.NativeFile:
        if self.plain_path is not None:
            handle = pa.OSFile(str(self.plain_path))
            handle.seek(self.start)
            return handle
        return pa.BufferReader(pa.py_buffer(self.data)[self.start :])

    def to_bytes(self) -> bytes:
        return bytes(self.data[self.start :])


def read_with_python_csv(body: bytes, header: list[str], where: str, long_format: bool) -> pa.Table:
    text = body.decode("utf-8", "replace")
    needed = header.index("Metric Value") + 1 if long_format else len(header)
    rows: list[list[str]] = []
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        next(reader)
        for fields in reader:
            if not fields:
                continue
            if len(fields) < needed:
                raise InputError(
                    f"{where}: CSV line {reader.line_num} has {len(fields)} fields where the header has "
                    f"{len(header)} (is the file truncated or not an ncu export?)"
                )
            rows.append((fields + [""] * len(header))[: len(header)])
    except csv.Error as error:
        raise InputError(f"{where}: malformed CSV at line {reader.line_num}: {error}") from None
    columns = list(zip(*rows, strict=False)) if rows else [()] * len(header)
    return pa.table({name: pa.array(list(col), pa.string()) for name, col in zip(header, columns, strict=False)})


def is_nvtx_column(name: str) -> bool:
    return "_Range:" in name


def column_types(names: list[str]) -> dict[str, pa.DataType]:
    return {n: DICTIONARY if n in REPEATED_COLUMNS or is_nvtx_column(n) else pa.string() for n in names}


def dictionary_of(column: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    """One dictionary array for a string column, whether or not the reader dictionary-encoded it."""
    if isinstance(column, pa.ChunkedArray):
        if pa.types.is_dictionary(column.type) and column.num_chunks:
            chunks = column.unify_dictionaries().chunks
            indices = pa.concat_arrays([c.indices for c in chunks])
            return pa.DictionaryArray.from_arrays(indices, chunks[0].dictionary)
        column = column.combine_chunks() if column.num_chunks else pa.array([], pa.string())
    if pa.types.is_dictionary(column.type):
        return column
    return pc.dictionary_encode(column)


def launch_keys(table: pa.Table) -> np.ndarray:
    ids = int_column(table["ID"], "ID")
    if "Process ID" in table.column_names:
        # Launch IDs are per process; the dictionary code of the process id tells processes apart.
        process = dictionary_of(table["Process ID"]).indices.to_numpy(zero_copy_only=False)
        return process.astype(np.int64) * (1 << 40) + ids
    return ids


def int_column(column: pa.ChunkedArray | pa.Array, name: str) -> np.ndarray:
    try:
        return pc.cast(column, pa.int64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    numbers = parse_numbers(values, decimal_comma=False)
    if np.isnan(numbers).any():
        raise InputError(f"the {name!r} column holds something that is not a number")
    return numbers.astype(np.int64)


def first_rows_of_launches(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(launch of each row, first row of each launch) where a launch has several rows; None where each row is
    its own launch (the wide format), so that nothing needs to be taken."""
    codes, unique = pd.factorize(keys, sort=False)
    if len(unique) == len(keys):
        return None
    return codes, first_rows_of_codes(codes)


def first_rows_of_codes(codes: np.ndarray) -> np.ndarray:
    """The first row of each code, for codes numbered in the order they first appear (as ``pd.factorize``
    numbers them): the rows where the running maximum grows. One pass, where ``np.unique`` sorts (1.2 M rows)."""
    if not len(codes):
        return np.zeros(0, dtype=np.int64)
    running = np.maximum.accumulate(codes)
    return np.flatnonzero(np.diff(running, prepend=running[0] - 1) > 0)


def first_rows_by_code(codes: np.ndarray) -> np.ndarray:
    """The first row of each code present, in the order of the codes (``np.unique(codes, return_index=True)[1]``
    without sorting every row)."""
    appearance, present = pd.factorize(codes, sort=False)
    return first_rows_of_codes(appearance)[np.argsort(present, kind="stable")]


def launch_identity(table: pa.Table, launch_ids: np.ndarray) -> pd.DataFrame:
    """The identity columns of one row per launch: kernel, grid, ... as pandas strings backed by Arrow (no
    Python string per launch), ``nvtx_ranges`` a tuple per launch, parsed once per distinct cell."""
    frame = pd.DataFrame({"launch_id": launch_ids})
    for field_name, column in IDENTITY_FIELDS.items():
        if field_name in table.column_names:
            frame[column] = pd.arrays.ArrowStringArray(pc.cast(table[field_name], pa.string()))
        else:
            frame[column] = None
    frame["nvtx_ranges"] = _stacks(table)
    return frame


def _stacks(table: pa.Table) -> np.ndarray:
    """Each launch's NVTX ranges: push/pop then start/end, each cell parsed once per distinct value."""
    push_pop = next((c for c in table.column_names if "Push/Pop_Range" in c), None)
    start_end = next((c for c in table.column_names if "Start/Stop_Range" in c), None)
    rows = table.num_rows
    parsed: list[tuple[np.ndarray, list[tuple[str, ...]]]] = []
    for column, parse in ((push_pop, nvtx.push_pop_ranges), (start_end, nvtx.start_end_ranges)):
        if column is None:
            continue
        cells = dictionary_of(table[column])
        codes = pc.fill_null(cells.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        ranges = [parse(cell, column) for cell in cells.dictionary.to_pylist()] + [()]  # code -1: no cell
        parsed.append((codes, ranges))
    stacks = np.empty(rows, dtype=object)
    if not parsed:
        stacks[:] = [()] * rows
        return stacks
    combined = np.zeros(rows, dtype=np.int64)
    for codes, ranges in parsed:
        combined = combined * (len(ranges) + 1) + (codes + 1)
    distinct, inverse = np.unique(combined, return_inverse=True)
    values = np.empty(len(distinct), dtype=object)
    for index, code in enumerate(distinct.tolist()):
        stack: tuple[str, ...] = ()
        for _, ranges in reversed(parsed):
            code, part = divmod(code, len(ranges) + 1)
            stack = ranges[part - 1] + stack
        values[index] = stack
    stacks[:] = values[inverse.reshape(-1)]
    return stacks
