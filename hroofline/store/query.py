"""SQL over a store with DuckDB (embedded: no server).

Two tables are defined for a query:

- ``launches``: every run's launches, one row each, read straight from the Parquet file each run's
  metadata names (its committed data: a file left by an interrupted write is not read); the columns are
  in ``docs/guides/store.md``.
- ``runs``: one row per run, from its metadata: how it was collected (``kind``), GPU, precision, phases,
  sources, launches, ncu versions and dates.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from hroofline.errors import QueryError, StoreError
from hroofline.model.run import RunMeta
from hroofline.store.listing import RUN_LISTING_COLUMNS, listing_rows
from hroofline.store.reading import BrokenRun, StoreReader


def listing_frame(metas: Sequence[RunMeta]) -> pd.DataFrame:
    return pd.DataFrame(listing_rows(metas), columns=list(RUN_LISTING_COLUMNS))


def query_store(store: StoreReader, sql: str, left_out: list[BrokenRun] | None = None) -> pd.DataFrame:
    """The result of ``sql`` over the store's ``launches`` and ``runs`` tables. A run whose launches file cannot
    be read (truncated, not Parquet) is left out of both tables and added to ``left_out``, as ``hroofline runs``
    leaves out a run whose metadata cannot be read: one broken run never breaks a query of the others."""
    import duckdb
    import pyarrow.dataset
    import pyarrow.parquet

    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as error:
        raise QueryError(f"query failed: {_first_line(error)}", HINT) from None
    if len(statements) != 1:
        raise QueryError(
            f"the SQL holds {len(statements)} statements", "give one SELECT (or WITH ... SELECT) statement"
        )
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:  # EXPLAIN ANALYZE would run the statement it explains
        raise QueryError(
            f"query refused: {kind.name} is not a SELECT; queries only read the store", "give one SELECT statement"
        )
    committed = []
    for name in store.run_names():
        try:
            meta, path = store.committed(name)
        except StoreError:  # a broken run does not hide the others; `hroofline runs` names it
            continue
        try:
            pyarrow.parquet.read_metadata(path)  # the footer only: a truncated file has none
        except (OSError, pyarrow.ArrowException) as error:
            if left_out is not None:
                reason = f"its launches file {path.name} cannot be read ({_first_line(error)})"
                left_out.append(BrokenRun(name, reason, f"`hroofline rm {name}` removes it; import it again"))
            continue
        committed.append((meta, path))
    if not committed:
        raise StoreError(f"no runs in store {store.root}", "import or profile a run first")
    listing = listing_frame([meta for meta, _ in committed])
    # The files each run's metadata names, as an Arrow dataset (read lazily, columns and filters pushed down):
    # DuckDB would take each path as a pattern, and a store path with * ? [ in it would match other folders.
    files = pyarrow.dataset.dataset([str(path) for _, path in committed], format="parquet")
    connection = duckdb.connect(":memory:", config=READ_ONLY)
    try:
        connection.register("launches", files)
        connection.register("runs", listing)
        result = connection.execute(sql)
        if result is None or result.description is None:
            raise QueryError("the SQL returned no table", "give one SELECT (or WITH ... SELECT) statement")
        return result.df()
    except duckdb.PermissionException:
        raise QueryError(
            "query refused: it reads or writes files; queries see only the store's launches and runs tables", HINT
        ) from None
    except duckdb.Error as error:
        raise QueryError(f"query failed: {_first_line(error)}", HINT) from None
    finally:
        connection.close()


# A query sees the two tables and nothing else of the machine: no file readers (read_csv('/etc/...')), no COPY ... TO,
# ATTACH or INSTALL, and the settings locked so that SQL cannot turn this back on. A report server or notebook may
# pass a user's SQL through.
READ_ONLY = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "python_enable_replacements": False,  # no Python variable of this process is a table
    "lock_configuration": True,
}

HINT = "tables: launches (one row per launch), runs (one per run)"


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
