"""ncu CSV exports of any version from 2020 on.

Long ("details") format: one row per launch per metric, ``Metric Name, Metric Unit, Metric Value``.
Wide ("raw") format, ``--page raw --csv``: a header row, a units row, then one row per launch.
Either may follow the profiled program's own output and ``==PROF==`` lines, and rows may be ragged
(ncu 2021.2 leaves off the trailing rule columns) or hold quoted newlines (rule descriptions).
Parsing is done by pyarrow; Python's csv module takes over only for files pyarrow rejects.
"""

from __future__ import annotations

import csv
import mmap
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from hroofline.errors import InputError
from hroofline.importers.csv_columns import (
    DISPLAY_NAME,
    IDENTITY_FIELDS,
    CsvBody,
    column_types,
    dictionary_of,
    first_rows_by_code,
    first_rows_of_launches,
    int_column,
    is_nvtx_column,
    launch_identity,
    launch_keys,
    read_with_python_csv,
)
from hroofline.importers.ncu_csv_wide import read_wide
from hroofline.importers.raw import RawProfile, check_last_launch_complete
from hroofline.importers.units import parse_numbers_checked, unit_factors, uses_decimal_comma
from hroofline.importers.values import NON_FINITE, not_a_number

_HEADER = re.compile(rb'(?m)^"?ID"?,"?Process ID"?,')
NO_KERNELS = re.compile(r"(?m)^(==[A-Z]+==\s*)?No kernels were profiled")


def find_csv_header(data: bytes | bytearray | mmap.mmap) -> int:
    """Offset of the ncu CSV header line, or -1."""
    match = _HEADER.search(data)
    return match.start() if match else -1


def read_ncu_csv(data: bytes | bytearray | mmap.mmap, where: str, plain_path: Path | None = None) -> RawProfile:
    """A long or wide ncu CSV export; ``plain_path``: the file ``data`` maps, to be streamed from."""
    start = find_csv_header(data)
    if start < 0:
        raise InputError(f'{where}: no ncu CSV header (a line starting with "ID","Process ID")')
    header_end = data.find(b"\n", start)
    header_line = bytes(data[start : header_end if header_end >= 0 else len(data)])
    header = next(csv.reader([header_line.decode("utf-8", "replace").rstrip("\r")]))
    if "Body Item Label" in header:
        raise InputError(
            f"{where}: this is an ncu section export (a 'Body Item Label' column): it holds display labels, "
            "not per-kernel metrics",
            "export with 'ncu --import REPORT --csv --page raw' or '--page details' instead",
        )
    long_format = "Metric Name" in header
    body = CsvBody(data, start, plain_path)
    if len(data) > start and data[len(data) - 1 :] != b"\n":
        tail = bytes(data[max(start, len(data) - (1 << 20)) :])
        _check_last_row(tail, header, where, long_format)
        body = CsvBody(body.to_bytes() + b"\n", 0, None)
    if not long_format:
        return read_wide(body, header, where)
    table = _read_strings(body, header, where)
    if table.num_rows == 0:
        raise InputError(f"{where}: the CSV has a header but no kernel rows")
    return _long_profile(table, where)


# Columns of the long format that hroofline reads; the rest (process name, host, rules...) are skipped.
LONG_COLUMNS = {"ID", "Process ID", "Metric Name", "Metric Unit", "Metric Value", *IDENTITY_FIELDS}


def _read_strings(body: CsvBody, header: list[str], where: str) -> pa.Table:
    """The needed columns of a long CSV as strings. pyarrow first; Python's csv for ragged or odd files."""
    wanted = [n for n in header if n in LONG_COLUMNS or is_nvtx_column(n)]
    convert = pacsv.ConvertOptions(column_types=column_types(wanted), include_columns=wanted, strings_can_be_null=False)
    for newlines_in_values in (False, True):
        try:
            return pacsv.read_csv(
                body.open(),
                parse_options=pacsv.ParseOptions(newlines_in_values=newlines_in_values),
                convert_options=convert,
            )
        except (pa.ArrowInvalid, pa.ArrowKeyError):
            continue
    return read_with_python_csv(body.to_bytes(), header, where, long_format=True).select(wanted)


def _check_last_row(tail: bytes, header: list[str], where: str, long_format: bool) -> None:
    last_line = tail.rsplit(b"\n", 1)[-1].decode("utf-8", "replace")
    try:
        fields = next(csv.reader([last_line], strict=True))
    except (csv.Error, StopIteration):
        fields = []
    needed = header.index("Metric Value") + 1 if long_format else len(header)
    if last_line.count('"') % 2 == 1 or len(fields) < needed:
        raise InputError(f"{where}: the CSV ends in the middle of a row (is the file truncated?)")


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
    keys = launch_keys(table)
    launches = first_rows_of_launches(keys)
    launch_codes, first_rows = launches if launches is not None else (np.arange(len(keys)), np.arange(len(keys)))
    check_last_launch_complete(list(np.bincount(launch_codes)), where, "metric rows")
    device_name = _string_metric(table, metric_codes, metric_names, DISPLAY_NAME)
    numbers, rejected = _numbers(table["Metric Value"], metric_codes, metric_names)
    units = dictionary_of(table["Metric Unit"])
    values = numbers * unit_factors(units)

    matrix = np.full((len(first_rows), len(metric_names)), np.nan)
    # Reversed so that the first row of a (launch, metric) pair wins when ncu repeats a metric.
    matrix[launch_codes[::-1], metric_codes[::-1]] = values[::-1]
    first = table.select([c for c in table.column_names if c in IDENTITY_FIELDS or c == "ID" or is_nvtx_column(c)])
    first = first.take(pa.array(first_rows))
    identity = launch_identity(first, int_column(first["ID"], "ID"))
    metrics = pd.DataFrame(matrix, columns=metric_names)
    first_metric_rows = first_rows_by_code(metric_codes)
    first_units = units.take(pa.array(first_metric_rows)).to_pylist()
    return RawProfile(
        kind="ncu-csv-long",
        identity=identity,
        metrics=metrics,
        units=dict(zip(metric_names, first_units, strict=True)),
        device_name=device_name,
        rejected=rejected,
    )


def _string_metric(table: pa.Table, metric_codes: np.ndarray, metric_names: list[str], name: str) -> str | None:
    """The first value of a text metric (such as the device's display name) in a long CSV."""
    if name not in metric_names:
        return None
    row = int(np.flatnonzero(metric_codes == metric_names.index(name))[0])
    value = table["Metric Value"][row].as_py()
    return str(value).strip() or None if value is not None else None


def _numbers(
    column: pa.ChunkedArray, metric_codes: np.ndarray, metric_names: list[str]
) -> tuple[np.ndarray, dict[tuple[str, str], int]]:
    """Metric values as floats (a plain cast when ncu printed plain numbers, else the careful parse), and the
    rows per metric whose text was no number."""
    try:
        return pc.cast(column, pa.float64()).to_numpy(), {}
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = column.combine_chunks()
    parsed = parse_numbers_checked(values, uses_decimal_comma(values))
    rejected: dict[tuple[str, str], int] = {}
    if parsed.non_finite is not None:
        counts = np.bincount(metric_codes[parsed.non_finite], minlength=len(metric_names))
        rejected.update({(metric_names[c], NON_FINITE): int(counts[c]) for c in np.flatnonzero(counts)})
    if parsed.unreadable is not None:
        rows = np.flatnonzero(parsed.unreadable)
        codes, first = np.unique(metric_codes[rows], return_index=True)
        counts = np.bincount(metric_codes[rows], minlength=len(metric_names))
        for code, row in zip(codes.tolist(), rows[first].tolist(), strict=True):
            example = str(values[row].as_py()).strip()
            rejected[(metric_names[code], not_a_number(example))] = int(counts[code])
    return parsed.numbers, rejected
