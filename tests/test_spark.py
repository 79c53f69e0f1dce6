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
    reason = None
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        reason = "PySpark is not installed (make test-spark installs it and a Java runtime)"
    else:
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            reason = "no Java runtime (make test-spark installs Debian's)"
    if reason:
        if os.environ.get("HROOFLINE_REQUIRE_SPARK") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return (
        SparkSession.builder.master("local[1]")
        .appName("hroofline-store")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )


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
