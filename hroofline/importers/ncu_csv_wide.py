"""Wide ncu CSV exports (``--page raw --csv``: a header row, a units row, one row per launch), read in batches.

pyarrow's streaming CSV reader hands over blocks of rows; each block's metric columns become float64 at once
(SI units, :func:`hroofline.importers.units.parse_numbers_checked`) and only the identity columns are kept as
Arrow (dictionary-encoded where they repeat), so a million-launch export never lives as a table of strings.
Whether a column was written with a decimal comma is decided from the first block that has a value with a
separator; blocks before it have none, so they read the same either way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from hroofline.errors import InputError
from hroofline.importers.csv_columns import (
    DISPLAY_NAME,
    IDENTITY_FIELDS,
    NON_METRIC_FIELDS,
    CsvBody,
    column_types,
    first_rows_of_launches,
    int_column,
    is_nvtx_column,
    launch_identity,
    launch_keys,
    read_with_python_csv,
)
from hroofline.importers.raw import RawProfile
from hroofline.importers.units import decimal_comma, parse_numbers_checked, unit_scale
from hroofline.importers.values import NON_FINITE, not_a_number

BLOCK_SIZE = 8 << 20  # bytes of CSV per batch: a few thousand launches


def read_wide(body: CsvBody, header: list[str], where: str) -> RawProfile:
    metric_columns = [c for c in header if c not in NON_METRIC_FIELDS and "Range" not in c and "__" in c]
    kept = [c for c in header if c in ("ID", "Process ID") or c in IDENTITY_FIELDS or is_nvtx_column(c)]
    wanted = list(dict.fromkeys(kept + metric_columns))
    convert = pacsv.ConvertOptions(column_types=column_types(wanted), include_columns=wanted, strings_can_be_null=False)
    for newlines_in_values in (False, True):
        reading = _Reading(kept, metric_columns, where)
        try:
            reader = pacsv.open_csv(
                body.open(),
                read_options=pacsv.ReadOptions(block_size=BLOCK_SIZE),
                parse_options=pacsv.ParseOptions(newlines_in_values=newlines_in_values),
                convert_options=convert,
            )
            for batch in reader:
                reading.add(batch)
        except (pa.ArrowInvalid, pa.ArrowKeyError):
            continue
        return reading.profile()
    table = read_with_python_csv(body.to_bytes(), header, where, long_format=False).select(wanted)
    reading = _Reading(kept, metric_columns, where)
    for batch in table.to_batches():
        reading.add(batch)
    return reading.profile()


class _Reading:
    """What the batches of one wide CSV add up to."""

    def __init__(self, kept: list[str], metric_columns: list[str], where: str) -> None:
        self.kept, self.metric_columns, self.where = kept, metric_columns, where
        self.units: dict[str, str] | None = None
        self.identity: list[pa.RecordBatch] = []
        self.blocks: list[np.ndarray] = []
        self.comma: dict[str, bool | None] = dict.fromkeys(metric_columns)
        self.rejected: dict[tuple[str, str], int] = {}
        self.unreadable: dict[str, int] = {}
        self.examples: dict[str, str] = {}
        self.device_name: str | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        if self.units is None:
            if batch.num_rows == 0:
                return
            self.units = {name: batch.column(name)[0].as_py() or "" for name in batch.schema.names}
            if self.units.get("ID", "") != "":
                raise InputError(f"{self.where}: a wide (--page raw) CSV needs its units row after the header")
            batch = batch.slice(1)
            if batch.num_rows and DISPLAY_NAME in batch.schema.names:
                self.device_name = batch.column(DISPLAY_NAME)[0].as_py() or None
        if batch.num_rows == 0:
            return
        self.identity.append(batch.select(self.kept))
        # one (metric x launch) block per batch: large enough to be given back to the system when joined
        block = np.empty((len(self.metric_columns), batch.num_rows))
        for index, name in enumerate(self.metric_columns):
            block[index] = self._numbers(name, batch.column(name))
        self.blocks.append(block)

    def _numbers(self, name: str, column: pa.Array) -> np.ndarray:
        if self.comma[name] is None:
            self.comma[name] = decimal_comma(column)
        parsed = parse_numbers_checked(column, bool(self.comma[name]))
        if parsed.non_finite is not None and (count := int(parsed.non_finite.sum())):
            self.rejected[(name, NON_FINITE)] = self.rejected.get((name, NON_FINITE), 0) + count
        if parsed.unreadable is not None and (count := int(parsed.unreadable.sum())):
            self.examples.setdefault(name, parsed.example or "")
            self.unreadable[name] = self.unreadable.get(name, 0) + count
        scale = unit_scale((self.units or {}).get(name) or "")
        return parsed.numbers * scale if scale != 1.0 else parsed.numbers

    def profile(self) -> RawProfile:
        if not self.identity:
            raise InputError(f"{self.where}: the CSV has a header but no kernel rows")
        table = pa.Table.from_batches(self.identity)
        self.identity.clear()
        launches = first_rows_of_launches(launch_keys(table))
        first_rows = launches[1] if launches is not None else None
        if first_rows is not None:
            table = table.take(pa.array(first_rows))
        identity = launch_identity(table, int_column(table["ID"], "ID"))
        matrix = np.empty((len(self.metric_columns), sum(b.shape[1] for b in self.blocks)))
        done = 0
        while self.blocks:  # each block freed as soon as it is copied: the values are never held twice
            block = self.blocks.pop(0)
            matrix[:, done : done + block.shape[1]] = block
            done += block.shape[1]
        if first_rows is not None:
            matrix = matrix[:, first_rows]
        # the transposed (launch x metric) view: pandas keeps the block as it is, one contiguous row per metric
        metrics = pd.DataFrame(matrix.T, columns=self.metric_columns, copy=False)
        units = {name: (self.units or {}).get(name) or "" for name in self.metric_columns}
        return RawProfile(
            kind="ncu-csv-wide",
            identity=identity,
            metrics=metrics,
            units=units,
            device_name=self.device_name,
            rejected={**self.rejected, **{(n, not_a_number(self.examples[n])): c for n, c in self.unreadable.items()}},
        )
