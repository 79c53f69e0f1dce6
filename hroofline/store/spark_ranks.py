"""The rank aggregation of :mod:`hroofline.store.rank_sql` as a Spark job, on the same launches files.

On a cluster, with the store on shared storage (HDFS, S3, a shared file system)::

    spark-submit --py-files hroofline.zip "$(python -c 'import hroofline.store.spark_ranks as m; print(m.__file__)')" \\
        s3a://bucket/store RUN > ranks.json

It reads ``STORE/runs/run=RUN/``: on a local file system the launches file the run's ``meta.json`` names (its
committed data), elsewhere every ``launches-*.parquet`` there (an import's unfinished file is a hidden ``.tmp``).
It needs PySpark and this module (and :mod:`hroofline.store.rank_sql`, :mod:`hroofline.errors`), not pandas.
Prints one JSON object: ``{"run": RUN, "rows": [...]}``, a row per rank and phase
(:data:`~hroofline.store.rank_sql.RANK_COLUMNS`). ``hroofline spark ranks STORE RUN`` runs it on a local Spark.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hroofline.store.rank_sql import RANK_COLUMNS, RANKS_SQL

FILES = "launches-*.parquet"


def run_launch_files(store: str, run: str) -> list[str]:
    """The launches file(s) of run ``run`` of the store at ``store`` (a folder, or a URL Spark reads)."""
    folder = f"{store.rstrip('/')}/runs/run={run}"
    meta = Path(folder) / "meta.json"
    if "://" not in store and meta.is_file():
        return [str(Path(folder) / json.loads(meta.read_text())["launches_file"])]
    return [f"{folder}/{FILES}"]


def spark_rank_rows(spark: Any, paths: list[str]) -> list[dict[str, Any]]:
    """:data:`RANKS_SQL` over ``paths`` in the Spark session ``spark``: a row per rank and phase, in order."""
    spark.read.parquet(*paths).createOrReplaceTempView("launches")
    return [{column: row[column] for column in RANK_COLUMNS} for row in spark.sql(RANKS_SQL).collect()]


def local_spark(cores: int = 2) -> Any:
    """A Spark session on this machine (no UI), for ``hroofline spark`` and the tests."""
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("hroofline-ranks")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, cores)))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )


def main(argv: list[str] | None = None) -> int:
    """``spark-submit spark_ranks.py STORE RUN``: the aggregation as JSON on stdout, in the session Spark gives."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: spark-submit spark_ranks.py STORE RUN", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("hroofline-ranks").getOrCreate()
    try:
        rows = spark_rank_rows(spark, run_launch_files(args[0], args[1]))
    finally:
        spark.stop()
    print(json.dumps({"run": args[1], "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
