"""The store read by Spark, for real: a local Spark session reads the launch files of a store holding a DeepCAM run
(ncu, three phases) and a PyTorch profiler trace run, and its per-run, per-phase launch counts and time sums are
those of `hroofline summary`.

Spark is big (PySpark from PyPI and a Java runtime): `make test-spark` installs both and runs this file (CI calls
it after `make test`). Without PySpark the test skips, and fails where HROOFLINE_REQUIRE_SPARK=1 (as
`make test-spark` sets)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest


def spark_session():  # type: ignore[no-untyped-def]
    need_spark()
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[1]")
        .appName("hroofline-store")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )


def need_spark() -> None:
    """Skips without PySpark or Java (fails where HROOFLINE_REQUIRE_SPARK=1, as make test-spark sets)."""
    reason = None
    try:
        import pyspark  # noqa: F401
    except ImportError:
        reason = "PySpark is not installed (make test-spark installs it and a Java runtime)"
    else:
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            reason = "no Java runtime (make test-spark installs Debian's)"
    if reason:
        if os.environ.get("HROOFLINE_REQUIRE_SPARK") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, deepcam_dir: Path) -> Path:
    from hroofline.cli.main import main
    from tests.conftest import SHARED, need

    trace = need(SHARED / "fixtures" / "kineto") / "kineto_volta_resnet50_tbplugin_worker0.json.gz"
    root = tmp_path_factory.mktemp("spark") / "store"
    for phase in ("fw", "bw", "opt"):
        argv = ["import", str(deepcam_dir / f"pt-O1-Adam-{phase}"), "--run", "deepcam", "--gpu", "v100"]
        assert main([*argv, "--phase", phase, "--store", str(root)]) == 0
    assert main(["import", str(trace), "--run", "resnet50-trace", "--store", str(root)]) == 0
    return root


def test_spark_reads_every_launch_of_every_run(store: Path, cli) -> None:
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        from pyspark.sql import functions as F

        # The launch files alone (each run's folder also holds its meta.json, which is not Parquet); their own
        # run column names the run, so no partition discovery is needed.
        launches = spark.read.parquet(str(store / "runs" / "run=*" / "launches-*.parquet"))
        rows = (
            launches.groupBy("run", "phase")
            .agg(F.sum("launches").alias("launches"), F.sum("time_s").alias("time_s"))
            .collect()
        )
    finally:
        spark.stop()
    by_spark = {(row["run"], row["phase"]): row for row in rows}
    expected = {}
    for run in ("deepcam", "resnet50-trace"):
        summary = json.loads(cli("summary", run, "--format", "json", "--store", store).out)
        expected.update({(run, phase): values for phase, values in summary["phases"].items()})
    assert set(by_spark) == set(expected)
    assert {run for run, _ in by_spark} == {"deepcam", "resnet50-trace"}
    for key, values in expected.items():
        # every launch: the trace's copies and sets are counted apart from its kernels
        assert by_spark[key]["launches"] == values["kernels"] + values.get("copies", 0), key
        assert by_spark[key]["time_s"] == pytest.approx(values["time_s"], rel=1e-9, abs=0), key
    # DeepCAM's three phases, and the trace's 9,564 kernels and 451 copies and sets
    assert sum(row["launches"] for row in rows) == 5081 + 10015


RANKS, STRAGGLER = 6, 4


@pytest.fixture(scope="module")
def rank_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six ranks synthesised from a real DDP trace (bench/rank_traces.py; the base is
    ../shared/fixtures/kineto/kineto_a100_ddp2_nccl_rank0.json.gz, from facebookresearch/HolisticTraceAnalysis), rank
    4 a planted straggler, imported by two worker processes (the parallel path of `import --jobs`)."""
    from bench.rank_traces import BASE_TRACE, RankTemplate, base_step, write_ranks
    from hroofline.cli.main import main
    from tests.conftest import SHARED, need

    need(SHARED / "fixtures" / "kineto" / BASE_TRACE)
    folder = tmp_path_factory.mktemp("ranks")
    write_ranks(RankTemplate(base_step(SHARED, keep_every=8)), folder / "traces", range(RANKS), RANKS, STRAGGLER)
    argv = ["import", str(folder / "traces"), "--run", "ranks", "--jobs", "2", "--store", str(folder / "store")]
    assert main(argv) == 0
    return folder / "store"


def test_spark_submit_of_the_shipped_module_equals_duckdb_to_the_last_digit(rank_store: Path) -> None:
    """The documented cluster route, on a local master: spark-submit of hroofline/store/spark_ranks.py gives the
    DuckDB query's rows exactly (every float equal, not approximately)."""
    import subprocess
    import sys

    import pandas as pd

    import hroofline.store.spark_ranks as module
    from hroofline.store.rank_sql import conformed, ranks_duckdb
    from hroofline.store.runs import RunStore

    need_spark()
    submit = Path(sys.executable).parent / "spark-submit"
    root = Path(__file__).resolve().parent.parent
    environment = {**os.environ, "PYTHONPATH": str(root), "PYSPARK_PYTHON": sys.executable}
    command = [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false", module.__file__]
    done = subprocess.run([*command, str(rank_store), "ranks"], capture_output=True, text=True, env=environment)
    assert done.returncode == 0, done.stderr[-2000:]
    by_spark = conformed(pd.DataFrame(json.loads(done.stdout.strip().splitlines()[-1])["rows"]))
    by_duckdb = ranks_duckdb(RunStore(rank_store), "ranks")
    assert len(by_duckdb) == RANKS * 3  # three phases
    pd.testing.assert_frame_equal(by_spark, by_duckdb, check_exact=True)
    assert set(by_duckdb.loc[by_duckdb["straggler"], "rank"]) == {STRAGGLER}


def test_hroofline_spark_ranks_prints_what_duckdb_computes(rank_store: Path, cli) -> None:
    need_spark()
    by_spark = json.loads(cli("spark", "ranks", rank_store, "ranks", "--format", "json").out)["rows"]
    by_duckdb = json.loads(cli("spark", "ranks", rank_store, "ranks", "--engine", "duckdb", "--format", "json").out)
    assert by_spark == by_duckdb["rows"]  # JSON floats written by repr: equal to the last digit
    table = cli("spark", "ranks", rank_store, "ranks", "--engine", "duckdb").out
    assert all(f"[{STRAGGLER}]" in line for line in table.splitlines()[1:])
