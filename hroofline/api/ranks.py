"""The ranks of a run aggregated over its launches file (per rank and phase: time, communication, launches; per
phase: median, MAD, slowest rank, stragglers), by DuckDB on this machine or by Spark, with one SQL text
(:mod:`hroofline.store.rank_sql`): the same numbers from either."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from hroofline.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

ENGINES: tuple[str, ...] = ("spark", "duckdb")


def rank_aggregation(store: str | Path, run: str, engine: str = "duckdb", cores: int = 2) -> pd.DataFrame:
    """Run ``run`` of the store at ``store`` aggregated by ``engine``: a row per rank and phase
    (:data:`~hroofline.store.rank_sql.RANK_COLUMNS`). ``spark`` starts a local Spark of ``cores`` cores
    (``spark-submit`` of :mod:`hroofline.store.spark_ranks` runs the same on a cluster)."""
    from hroofline.store.rank_sql import conformed, ranks_duckdb
    from hroofline.store.reading import StoreReader

    if engine not in ENGINES:
        raise UsageError(f"engine {engine!r}: not one of {', '.join(ENGINES)}")
    remote = "://" in str(store)
    if remote and engine == "duckdb":
        raise UsageError(f"{store}: DuckDB reads a store on this machine; give a folder, or use Spark")
    reader = None if remote else StoreReader(Path(store))
    if engine == "duckdb" and reader is not None:
        return ranks_duckdb(reader, run)
    if reader is not None:
        reader.committed(run)  # an unknown run is said here, with the runs there are, not by Spark
    return conformed(_spark_rows(str(store), run, cores))


def _spark_rows(store: str, run: str, cores: int) -> pd.DataFrame:
    import pandas as pd

    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise UsageError("Spark: PySpark is not installed", "make spark installs it and a Java runtime") from None
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise UsageError("Spark: no Java runtime on PATH", "make spark installs Debian's")
    from hroofline.store.spark_ranks import local_spark, run_launch_files, spark_rank_rows

    spark = local_spark(cores)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        return pd.DataFrame(spark_rank_rows(spark, run_launch_files(store, run)))
    finally:
        spark.stop()


PHASE_COLUMNS = ("phase", "phase_ranks", "median_compute_s", "mad_compute_s", "slowest_rank")


def phase_rows(ranks: pd.DataFrame) -> pd.DataFrame:
    """Per phase of an aggregation: its ranks, median and MAD of compute time, slowest rank, and the stragglers
    (the ranks flagged, in order)."""
    phases = ranks.drop_duplicates("phase")[list(PHASE_COLUMNS)].reset_index(drop=True)
    flagged = ranks[ranks["straggler"]].groupby("phase")["rank"].apply(list)
    phases["stragglers"] = [flagged.get(phase, []) for phase in phases["phase"]]
    return phases
