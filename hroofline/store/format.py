"""A run's launches as a Parquet table: the store's schema, documented in ``docs/guides/store.md``.

Every launches file of every run has the same columns, so that DuckDB, Polars or Spark read a whole store
as one table without ``union_by_name``:

- ``run``: the run's name. The run's folder (``runs/run=NAME``) says it too, Hive-style, for engines that
  take partitions from paths; the column serves those that do not.
- the launch columns of :data:`hroofline.model.LAUNCH_COLUMNS`, in that order, with ``flops`` after
  ``flops_tensor``: all FLOPs, :func:`hroofline.roofs.formulas.total_flops` (what ``summary`` sums), so that SQL
  needs no formula. It is derived, and not read back.
- ``raw_metrics``: the raw ncu metrics that fed a formula, a map from metric name to value. Runs keep
  different metrics; one map column instead of one column each keeps the schema the same for all runs.

The file's key-value metadata says the schema version (``hroofline.schema_version``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from hroofline.model.run import LAUNCH_COLUMNS, RAW_METRIC_PREFIX, SCHEMA_VERSION
from hroofline.roofs.formulas import total_flops

RUN_COLUMN = "run"
TOTAL_FLOPS_COLUMN = "flops"
RAW_METRICS_COLUMN = "raw_metrics"
SCHEMA_VERSION_KEY = b"hroofline.schema_version"
_RAW_METRICS_TYPE = pa.map_(pa.string(), pa.float64())


def launches_table(launches: pd.DataFrame, run: str) -> pa.Table:
    """The Parquet table of a run's launches (conformed: :func:`hroofline.model.conform_launches`)."""
    raw = [c for c in launches.columns if c.startswith(RAW_METRIC_PREFIX)]
    table = pa.Table.from_pandas(launches[list(LAUNCH_COLUMNS)], preserve_index=False)
    table = table.add_column(0, RUN_COLUMN, pa.array([run] * len(launches), pa.string()))
    flops = pa.array(total_flops(launches).to_numpy(dtype="float64"), pa.float64(), from_pandas=True)
    table = table.add_column(table.column_names.index("flops_tensor") + 1, TOTAL_FLOPS_COLUMN, flops)
    table = table.append_column(RAW_METRICS_COLUMN, _raw_metrics_map(launches[raw]))
    metadata = {**(table.schema.metadata or {}), SCHEMA_VERSION_KEY: str(SCHEMA_VERSION).encode()}
    return table.replace_schema_metadata(metadata)


def launches_frame(table: pa.Table) -> pd.DataFrame:
    """A run's launches from its table, raw metrics as ``metric:NAME`` columns again; tables written before
    schema 6 (no ``run``, raw metrics as columns) read as they are."""
    derived = (RUN_COLUMN, TOTAL_FLOPS_COLUMN, RAW_METRICS_COLUMN)
    frame = table.drop_columns([c for c in derived if c in table.column_names]).to_pandas()
    if RAW_METRICS_COLUMN not in table.column_names:
        return frame
    raw = _raw_metrics_columns(table.column(RAW_METRICS_COLUMN))
    return pd.concat([frame, raw], axis=1) if len(raw.columns) else frame


def _raw_metrics_map(raw: pd.DataFrame) -> pa.Array:
    """One map per row: each raw metric the row has a value for (missing ones are left out)."""
    values = raw.to_numpy(dtype="float64")
    present = ~np.isnan(values)
    offsets = np.concatenate([[0], np.cumsum(present.sum(axis=1))]).astype("int32")
    names = pa.array([c[len(RAW_METRIC_PREFIX) :] for c in raw.columns], pa.string())
    # each key taken from the names by its column's index in Arrow: no Python string per key (1.2 M of them for
    # 100,000 launches of 12 metrics)
    columns = np.broadcast_to(np.arange(len(raw.columns), dtype=np.int32), values.shape)[present]
    keys, items = names.take(pa.array(columns)), pa.array(values[present], pa.float64())
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items, type=_RAW_METRICS_TYPE)


def _raw_metrics_columns(column: pa.ChunkedArray) -> pd.DataFrame:
    maps = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    offsets = maps.offsets.to_numpy()
    row = np.repeat(np.arange(len(maps)), np.diff(offsets))
    start, end = offsets[0], offsets[-1]
    keys = maps.keys.to_numpy(zero_copy_only=False)[start:end]
    values = maps.items.to_numpy(zero_copy_only=False)[start:end]
    codes, names = pd.factorize(keys, sort=True)
    filled = np.full((len(maps), len(names)), np.nan)
    filled[row, codes] = values
    return pd.DataFrame(filled, columns=[RAW_METRIC_PREFIX + str(n) for n in names])
