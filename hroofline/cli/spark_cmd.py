"""``hroofline spark ranks STORE RUN``: the ranks of a run aggregated by Spark (or DuckDB) over the store's files
(``ranks`` is the one job there is: a positional choice, so that other jobs can join it)."""

from __future__ import annotations

import argparse

from hroofline.cli.common import write_out

HELP = """\
Aggregate the ranks of a run with Spark, over the store's Parquet files: per rank and phase its GPU time,
communication time, compute time (the rest) and launches; per phase the median and median absolute deviation
(MAD) of the ranks' compute time, the slowest rank, and the stragglers: ranks whose compute time exceeds the
median by more than 5.19 MAD (a modified z-score above 3.5), the MAD taken as at least 1% of the median (so that
ranks a little over tied ones are not flagged). One SQL text runs on Spark and on DuckDB
(--engine duckdb) and gives the same numbers to the last digit (times are summed as whole picoseconds).

This runs a local Spark (PySpark and a Java runtime: `make spark` installs them). On a cluster, submit the
module hroofline ships, with the store on shared storage (HDFS, S3, NFS):
  spark-submit --py-files hroofline.zip .../hroofline/store/spark_ranks.py s3a://bucket/store RUN
"""

EPILOG = """\
examples:
  hroofline spark ranks hroofline-runs ddp-1k                 # per phase: median, MAD, slowest rank, stragglers
  hroofline spark ranks hroofline-runs ddp-1k --format json   # every rank and phase
  hroofline spark ranks hroofline-runs ddp-1k --engine duckdb # the same numbers, without Spark
"""


def register(commands: argparse._SubParsersAction) -> None:
    ranks = commands.add_parser(
        "spark", description=HELP, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ranks.add_argument("job", choices=("ranks",), help="the job: ranks (the one there is)")
    ranks.add_argument("store", metavar="STORE", help="the store's folder (or a URL Spark reads: hdfs://, s3a://)")
    ranks.add_argument("run", metavar="RUN", help="the run whose ranks to aggregate")
    ranks.add_argument("--engine", choices=("spark", "duckdb"), default="spark", help="default: spark")
    ranks.add_argument("--cores", type=int, default=2, help="the local Spark's cores (default: 2)")
    ranks.add_argument(
        "--format", choices=("table", "json", "csv"), default="table", help="table: per phase; json, csv: per rank"
    )
    ranks.set_defaults(run_command=run_ranks)


def run_ranks(args: argparse.Namespace) -> int:
    from hroofline.api.ranks import phase_rows, rank_aggregation
    from hroofline.errors import UsageError
    from hroofline.render.text import render_frame, to_json

    if args.cores < 1:
        raise UsageError(f"--cores {args.cores}: give 1 or more")
    ranks = rank_aggregation(args.store, args.run, args.engine, args.cores)
    if args.format == "json":
        write_out(to_json({"run": args.run, "engine": args.engine, "rows": ranks.to_dict("records")}))
    elif args.format == "csv":
        write_out(render_frame(ranks, "csv"))
    else:
        write_out(render_frame(phase_rows(ranks), "table"))
    return 0
