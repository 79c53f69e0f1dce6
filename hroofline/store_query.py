"""SQL over a store with DuckDB (embedded: no server), and the store's list of runs as a table.

Two tables are defined for a query:

- ``launches``: every run's launches, one row each, read straight from the Parquet files
  (``runs/run=*/launches-*.parquet``, Hive partitioning; columns in ``docs/store.md``).
- ``runs``: one row per run, from its metadata: how it was collected (``kind``), GPU, precision, phases,
  sources, launches, ncu versions and dates.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from hroofline.errors import QueryError, StoreError
from hroofline.store import RUN_FOLDER_PREFIX, RunStore

RUN_LISTING_COLUMNS: tuple[str, ...] = (
    "run",
    "kind",
    "gpu",
    "cc",
    "arch",
    "precision",
    "phases",
    "sources",
    "launches",
    "ncu",
    "created",
    "updated",
)


def run_listing(store: RunStore) -> pd.DataFrame:
    """One row per run, from the runs' metadata alone (no launches are read)."""
    rows: list[dict[str, Any]] = []
    for name in store.run_names():
        meta = store.load_meta(name)
        rows.append(
            {
                "run": name,
                "kind": "+".join(dict.fromkeys(source.collection for source in meta.sources)) or None,
                "gpu": meta.gpu or meta.device_name,
                "cc": meta.cc,
                "arch": meta.arch,
                "precision": meta.precision,
                "phases": ",".join(meta.phases) or None,
                "sources": len(meta.sources),
                "launches": sum(s.launches for s in meta.sources),
                "ncu": ", ".join(meta.ncu_versions) or None,
                "created": meta.created,
                "updated": meta.updated,
            }
        )
    return pd.DataFrame(rows, columns=list(RUN_LISTING_COLUMNS))


def launches_glob(store: RunStore) -> str:
    return str(store.runs_dir / f"{RUN_FOLDER_PREFIX}*" / "launches-*.parquet")


def query_store(store: RunStore, sql: str) -> pd.DataFrame:
    """The result of ``sql`` over the store's ``launches`` and ``runs`` tables."""
    import duckdb

    listing = run_listing(store)
    if listing.empty:
        raise StoreError(f"no runs in store {store.root}", "import or profile a run first")
    connection = duckdb.connect(":memory:")
    try:
        files = launches_glob(store).replace("'", "''")  # a SQL string literal; views take no parameters
        connection.execute(
            f"CREATE VIEW launches AS SELECT * FROM read_parquet('{files}', hive_partitioning = true, "
            "hive_types = {'run': VARCHAR})"
        )
        connection.register("runs", listing)
        return connection.execute(sql).df()
    except duckdb.Error as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise QueryError(
            f"query failed: {first}", "tables: launches (one row per launch), runs (one per run)"
        ) from None
    finally:
        connection.close()
