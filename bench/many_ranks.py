"""Benchmark: a thousand ranks, imported streaming and in parallel, and aggregated by DuckDB and by local Spark.

Synthesises ``--ranks N`` rank traces (``bench/rank_traces.py``: one profiler step of the real 2-GPU DDP trace in
``../shared/fixtures/kineto``, thinned to every 8th top-level CPU op of forward and backward with every collective
and the optimizer kept: 175 GPU activities in three phases, 7 of them NCCL, 59 kB gzipped per rank; durations
jittered ±2 %, rank N // 3 planted as a straggler with its compute kernels 1.5× longer), then:

* import: ``hroofline import DIR --run many --jobs J --store STORE`` in a subprocess; its wall time, throughput
  (launches/s, ranks/s) and peak memory: the largest peak RSS of any process of the import, the CLI process (its
  max RSS from ``getrusage(RUSAGE_CHILDREN)``) and each worker (its ``VmHWM`` in ``/proc``, the kernel's
  high-water mark of its RSS, read every 0.1 s while the import runs);
* DuckDB: :func:`hroofline.store.rank_sql.ranks_duckdb`, the aggregation query on the run, in this process;
* Spark (unless ``--no-spark``): the same SQL on a local Spark (``local[2]``) over the same launches file, the
  query's time with the session started (its start-up is printed apart);
* checks: the planted straggler flagged in every phase, and DuckDB's rows equal to Spark's to the last digit.

``--json`` prints one object with ``ranks``, ``launches``, ``import_s``, ``import_peak_bytes``, ``duckdb_s``,
``spark_s`` (null with ``--no-spark``), ``equal`` (null likewise) and more. Exits 1 when a check fails.

Run as ``.venv/bin/python bench/many_ranks.py --ranks 1000 [--jobs J] [--no-spark] [--json] [--workdir DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.rank_traces import RankTemplate, base_step, write_ranks  # noqa: E402

SHARED = REPO.parent / "shared"
RUN = "many"
KEEP_EVERY = 8  # a thinner step: 1,000 ranks import in minutes on two cores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="import workers (default: CPUs)")
    parser.add_argument("--no-spark", action="store_true", help="leave Spark out")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--workdir", type=Path, help="keep the traces and store here (default: a temporary folder)")
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="many-ranks-"))
    try:
        result = measure(args.ranks, args.jobs, not args.no_spark, work)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>24}  {value}")
    return 0 if result["straggler_found"] and result["equal"] is not False else 1


def measure(ranks: int, jobs: int, spark: bool, work: Path) -> dict[str, Any]:
    from hroofline.store.rank_sql import ranks_duckdb
    from hroofline.store.runs import RunStore

    straggler = ranks // 3
    log(f"synthesising {ranks} ranks into {work / 'traces'}")
    started = time.perf_counter()
    paths = write_ranks(RankTemplate(base_step(SHARED, KEEP_EVERY)), work / "traces", range(ranks), ranks, straggler)
    log(f"  {time.perf_counter() - started:.1f} s, {sum(p.stat().st_size for p in paths) / 1e6:.0f} MB")
    store_dir = work / "store"
    shutil.rmtree(store_dir, ignore_errors=True)
    import_s, cli_peak, worker_peak = run_import(work / "traces", store_dir, jobs)
    store = RunStore(store_dir)
    meta, launches_file = store.committed(RUN)
    launches = sum(source.launches for source in meta.sources)
    started = time.perf_counter()
    by_duckdb = ranks_duckdb(store, RUN)
    duckdb_s = time.perf_counter() - started
    flagged = set(by_duckdb.loc[by_duckdb["straggler"], "rank"])
    found = all(straggler in set(rows.loc[rows["straggler"], "rank"]) for _, rows in by_duckdb.groupby("phase"))
    spark_s = spark_start_s = equal = None
    if spark:
        spark_s, spark_start_s, equal = spark_figures(store_dir, by_duckdb)
    return {
        "ranks": ranks,
        "launches": launches,
        "import_s": round(import_s, 2),
        "import_peak_bytes": max(cli_peak, worker_peak),
        "import_peak_cli_bytes": cli_peak,
        "import_peak_worker_bytes": worker_peak,
        "jobs": jobs,
        "ranks_per_s": round(ranks / import_s, 2),
        "launches_per_s": round(launches / import_s),
        "trace_bytes_per_rank": round(sum(p.stat().st_size for p in paths) / ranks),
        "store_bytes": launches_file.stat().st_size,
        "duckdb_s": round(duckdb_s, 3),
        "spark_s": None if spark_s is None else round(spark_s, 3),
        "spark_start_s": None if spark_start_s is None else round(spark_start_s, 1),
        "equal": equal,
        "planted_straggler": straggler,
        "straggler_found": found,
        "ranks_flagged": len(flagged),
    }


def run_import(traces: Path, store: Path, jobs: int) -> tuple[float, int, int]:
    """The import's wall time, the CLI process's peak RSS and the largest worker's, in bytes."""
    command = [sys.executable, "-m", "hroofline", "import", str(traces), "--run", RUN, "--jobs", str(jobs)]
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    log(" ".join(command[2:]) + f" --store {store}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    process = subprocess.Popen([*command, "--store", str(store)], env=environment)
    worker_peak = 0
    while process.poll() is None:
        worker_peak = max(worker_peak, _descendants_peak(process.pid))
        time.sleep(0.1)
    elapsed = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"the import failed (exit {process.returncode})")
    cli_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux: kB
    if cli_peak <= before * 1024:
        log("note: an earlier child had a larger peak; the CLI's own is at most that")
    return elapsed, cli_peak, worker_peak


def _descendants_peak(pid: int) -> int:
    """The largest VmHWM (peak RSS) among the processes below ``pid``, in bytes."""
    import psutil

    peak = 0
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return 0
    for child in children:
        try:
            for line in Path(f"/proc/{child.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) * 1024)
        except OSError:
            continue
    return peak


def spark_figures(store: Path, by_duckdb: Any) -> tuple[float, float, bool]:
    """Spark's query time (session started), its start-up time, and whether its rows equal DuckDB's."""
    import pandas as pd

    from hroofline.store.rank_sql import conformed
    from hroofline.store.spark_ranks import local_spark, run_launch_files, spark_rank_rows

    started = time.perf_counter()
    spark = local_spark(2)
    spark.sparkContext.setLogLevel("ERROR")
    start_s = time.perf_counter() - started
    try:
        started = time.perf_counter()
        rows = spark_rank_rows(spark, run_launch_files(str(store), RUN))
        spark_s = time.perf_counter() - started
    finally:
        spark.stop()
    return spark_s, start_s, bool(conformed(pd.DataFrame(rows)).equals(by_duckdb))


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
