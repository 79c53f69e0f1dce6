"""ncu CSV exports of any version from 2020 on.

Long ("details") format: one row per launch per metric, ``Metric Name, Metric Unit, Metric Value``.
Wide ("raw") format, ``--page raw --csv``: a header row, a units row, then one row per launch.
Either may follow the profiled program's own output and ``==PROF==`` lines, and rows may be ragged
(ncu 2021.2 leaves off the trailing rule columns) or hold quoted newlines (rule descriptions).
Parsing is done by pyarrow; Python's csv module takes over only for files pyarrow rejects.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from hroofline.errors import InputError
from hroofline.importers import nvtx
from hroofline.importers.raw import RawProfile, check_last_launch_complete
from hroofline.importers.units import parse_numbers, unit_factors, unit_scale, uses_decimal_comma

_HEADER = re.compile(rb'(?m)^"?ID"?,"?Process ID"?,')
DISPLAY_NAME = "device__attribute_display_name"
NO_KERNELS = re.compile(r"(?m)^(==[A-Z]+==\s*)?No kernels were profiled")

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


def find_csv_header(data: bytes) -> int:
    """Offset of the ncu CSV header line, or -1."""
    match = _HEADER.search(data)
    return match.start() if match else -1


def read_ncu_csv(data: bytes, where: str) -> RawProfile:
    start = find_csv_header(data)
    if start < 0:
        raise InputError(f'{where}: no ncu CSV header (a line starting with "ID","Process ID")')
    header_end = data.find(b"\n", start)
    header_line = data[start : header_end if header_end >= 0 else len(data)]
    header = next(csv.reader([header_line.decode("utf-8", "replace").rstrip("\r")]))
    body = pa.py_buffer(data)[start:]  # zero-copy: the file can be hundreds of MB
    if "Body Item Label" in header:
        raise InputError(
            f"{where}: this is an ncu section export (a 'Body Item Label' column): it holds display labels, "
            "not per-kernel metrics",
            "export with 'ncu --import REPORT --csv --page raw' or '--page details' instead",
        )
    table = _read_strings(body, header, where, long_format="Metric Name" in header)
    if table.num_rows == 0:
        raise InputError(f"{where}: the CSV has a header but no kernel rows")
    if "Metric Name" in header:
        return _long_profile(table, where)
    return _wide_profile(table, where)


# Columns of the long format that hroofline reads; the rest (process name, host, rules...) are skipped.
LONG_COLUMNS = {"ID", "Process ID", "Metric Name", "Metric Unit", "Metric Value", *IDENTITY_FIELDS}
# Few distinct values in many rows: parsed straight into dictionary arrays, which saves memory and time.
REPEATED_COLUMNS = {
    "Process ID",
    "Kernel Name",
    "Metric Name",
    "Metric Unit",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Stream",
}
_DICTIONARY = pa.dictionary(pa.int32(), pa.string())


def _is_nvtx_column(name: str) -> bool:
    return "_Range:" in name


def _read_strings(body: pa.Buffer, header: list[str], where: str, long_format: bool) -> pa.Table:
    """The needed columns as strings. pyarrow first; Python's csv for ragged or odd files."""
    if body.size and body[body.size - 1 :].to_pybytes() != b"\n":
        body = pa.py_buffer(_check_last_row(body.to_pybytes(), header, where, long_format))
    wanted = [n for n in header if n in LONG_COLUMNS or _is_nvtx_column(n)] if long_format else header
    types = {n: _DICTIONARY if n in REPEATED_COLUMNS or _is_nvtx_column(n) else pa.string() for n in wanted}
    convert = pacsv.ConvertOptions(column_types=types, include_columns=wanted, strings_can_be_null=False)
    for newlines_in_values in (False, True):
        try:
            return pacsv.read_csv(
                pa.BufferReader(body),
                parse_options=pacsv.ParseOptions(newlines_in_values=newlines_in_values),
                convert_options=convert,
            )
        except (pa.ArrowInvalid, pa.ArrowKeyError):
            continue
    return _read_with_python_csv(body.to_pybytes(), header, where, long_format).select(wanted)


def _check_last_row(body: bytes, header: list[str], where: str, long_format: bool) -> bytes:
    last_line = body.rsplit(b"\n", 1)[-1].decode("utf-8", "replace")
    try:
        fields = next(csv.reader([last_line], strict=True))
    except (csv.Error, StopIteration):
        fields = []
    needed = header.index("Metric Value") + 1 if long_format else len(header)
    if last_line.count('"') % 2 == 1 or len(fields) < needed:
        raise InputError(f"{where}: the CSV ends in the middle of a row (is the file truncated?)")
    return body + b"\n"


def _read_with_python_csv(body: bytes, header: list[str], where: str, long_format: bool) -> pa.Table:
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


def _launch_keys(table: pa.Table) -> np.ndarray:
    ids = _int_column(table["ID"], "ID")
    if "Process ID" in table.column_names:
        # Launch IDs are per process; the dictionary code of the process id tells processes apart.
        process = dictionary_of(table["Process ID"]).indices.to_numpy(zero_copy_only=False)
        return process.astype(np.int64) * (1 << 40) + ids
    return ids


def _int_column(column: pa.ChunkedArray | pa.Array, name: str) -> np.ndarray:
    try:
        return pc.cast(column, pa.int64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    numbers = parse_numbers(values, decimal_comma=False)
    if np.isnan(numbers).any():
        raise InputError(f"the {name!r} column holds something that is not a number")
    return numbers.astype(np.int64)


def _identity(table: pa.Table, first_rows: np.ndarray, launch_ids: np.ndarray) -> pd.DataFrame:
    wanted = [c for c in table.column_names if c in IDENTITY_FIELDS or "_Range:" in c]
    picked = table.select(wanted).take(pa.array(first_rows))
    frame = pd.DataFrame({"launch_id": launch_ids})
    for field_name, column in IDENTITY_FIELDS.items():
        if field_name in picked.column_names:
            frame[column] = picked[field_name].to_pylist()
        else:
            frame[column] = None
    push_pop = next((c for c in picked.column_names if "Push/Pop_Range" in c), None)
    start_end = next((c for c in picked.column_names if "Start/Stop_Range" in c), None)
    stacks = []
    for i in range(picked.num_rows):
        ranges = nvtx.push_pop_ranges(picked[push_pop][i].as_py(), push_pop) if push_pop else ()
        ranges += nvtx.start_end_ranges(picked[start_end][i].as_py(), start_end) if start_end else ()
        stacks.append(ranges)
    frame["nvtx_ranges"] = stacks
    return frame


def _long_profile(table: pa.Table, where: str) -> RawProfile:
    names = dictionary_of(table["Metric Name"])
    trimmed = [n.strip() for n in names.dictionary.to_pylist()]
    unique_names = list(dict.fromkeys(n for n in trimmed if n))
    if not unique_names:
        raise InputError(f"{where}: the CSV has rule rows but no metric values")
    position = {n: i for i, n in enumerate(unique_names)}
    remap = np.array([position.get(n, -1) for n in trimmed], dtype=np.int64)
    metric_codes = remap[names.indices.to_numpy(zero_copy_only=False)]
    keep = metric_codes >= 0
    if not keep.all():  # rule rows carry no metric
        table, metric_codes = table.filter(pa.array(keep)), metric_codes[keep]
    metric_names = unique_names
    keys = _launch_keys(table)
    launch_codes, unique_keys = pd.factorize(keys, sort=False)
    check_last_launch_complete(list(np.bincount(launch_codes)), where, "metric rows")
    device_name = _string_metric(table, metric_codes, metric_names, DISPLAY_NAME)
    numbers = _numbers(table["Metric Value"])
    units = dictionary_of(table["Metric Unit"])
    values = numbers * unit_factors(units)

    matrix = np.full((len(unique_keys), len(metric_names)), np.nan)
    # Reversed so that the first row of a (launch, metric) pair wins when ncu repeats a metric.
    matrix[launch_codes[::-1], metric_codes[::-1]] = values[::-1]
    first_rows = np.unique(launch_codes, return_index=True)[1]
    launch_ids = _int_column(table["ID"].take(pa.array(first_rows)), "ID")
    identity = _identity(table, first_rows, launch_ids)
    metrics = pd.DataFrame(matrix, columns=metric_names)
    first_metric_rows = np.unique(metric_codes, return_index=True)[1]
    first_units = units.take(pa.array(first_metric_rows)).to_pylist()
    return RawProfile(
        kind="ncu-csv-long",
        identity=identity,
        metrics=metrics,
        units=dict(zip(metric_names, first_units, strict=True)),
        device_name=device_name,
    )


def _string_metric(table: pa.Table, metric_codes: np.ndarray, metric_names: list[str], name: str) -> str | None:
    """The first value of a text metric (such as the device's display name) in a long CSV."""
    if name not in metric_names:
        return None
    row = int(np.flatnonzero(metric_codes == metric_names.index(name))[0])
    value = table["Metric Value"][row].as_py()
    return str(value).strip() or None if value is not None else None


def _numbers(column: pa.ChunkedArray) -> np.ndarray:
    """Metric values as floats: a plain cast when ncu printed plain numbers, else the careful parse."""
    try:
        return pc.cast(column, pa.float64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = column.combine_chunks()
        return parse_numbers(values, uses_decimal_comma(values))


def _wide_profile(table: pa.Table, where: str) -> RawProfile:
    units_row = {name: table[name][0].as_py() for name in table.column_names}
    if units_row.get("ID", "") != "":
        raise InputError(f"{where}: a wide (--page raw) CSV needs its units row after the header")
    table = table.slice(1)
    if table.num_rows == 0:
        raise InputError(f"{where}: the CSV has a header but no kernel rows")
    keys = _launch_keys(table)
    launch_codes, _ = pd.factorize(keys, sort=False)
    first_rows = np.unique(launch_codes, return_index=True)[1]
    launch_ids = _int_column(table["ID"].take(pa.array(first_rows)), "ID")
    identity = _identity(table, first_rows, launch_ids)
    metric_columns = [c for c in table.column_names if c not in NON_METRIC_FIELDS and "Range" not in c and "__" in c]
    picked = table.take(pa.array(first_rows))
    device_name = picked[DISPLAY_NAME][0].as_py() if DISPLAY_NAME in picked.column_names and len(picked) else None
    data = {}
    for name in metric_columns:
        column = picked[name].combine_chunks()
        data[name] = parse_numbers(column, uses_decimal_comma(column)) * unit_scale(units_row.get(name) or "")
    metrics = pd.DataFrame(data, index=range(len(first_rows)))
    units = {name: units_row.get(name) or "" for name in metric_columns}
    return RawProfile(
        kind="ncu-csv-wide", identity=identity, metrics=metrics, units=units, device_name=device_name or None
    )
