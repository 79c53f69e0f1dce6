"""The store as a dataset: Hive layout read by DuckDB as one table, `hroofline query`, and the migration of
stores written by an older hroofline."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hroofline.model.run import SCHEMA_VERSION
from hroofline.store.files import LAYOUT_VERSION
from hroofline.store.runs import RunStore
from tests.conftest import REPO, tree_digest

ACCEPTANCE_SQL = (
    "SELECT run, phase, sum(time_s) AS time_s FROM read_parquet('{store}/runs/**/*.parquet', hive_partitioning=true) "
    "GROUP BY ALL"
)


def _summary_times(cli, store: Path, run: str) -> dict[str, float]:
    phases = json.loads(cli("summary", run, "--format", "json", store_dir=store).out)["phases"]
    return {phase: row["time_s"] for phase, row in phases.items()}


def test_duckdb_reads_the_store_as_one_table(cli, deepcam_store: Path) -> None:
    store = RunStore(deepcam_store)
    assert sorted(p.name for p in store.runs_dir.iterdir()) == ["run=deepcam-O0", "run=deepcam-O1"]
    found = duckdb.sql(ACCEPTANCE_SQL.format(store=deepcam_store)).df()
    assert set(found["run"]) == {"deepcam-O0", "deepcam-O1"}
    for run in ("deepcam-O0", "deepcam-O1"):
        expected = _summary_times(cli, deepcam_store, run)
        mine = found[found["run"] == run].set_index("phase")["time_s"].to_dict()
        assert mine.keys() == expected.keys()
        for phase, seconds in expected.items():
            assert mine[phase] == pytest.approx(seconds, rel=1e-12)
    # every file has the same columns, raw metrics included: SELECT * needs no union_by_name
    everything = duckdb.sql(f"SELECT * FROM read_parquet('{deepcam_store}/runs/**/*.parquet')").df()
    assert len(everything) == sum(len(store.load(r).launches) for r in store.run_names())
    assert everything["raw_metrics"].map(len).gt(0).any()
    # the flops column is the total summary reports
    flops = duckdb.sql(
        f"SELECT sum(flops) FROM read_parquet('{deepcam_store}/runs/**/*.parquet') WHERE run = 'deepcam-O1'"
    ).fetchall()[0][0]
    total = json.loads(cli("summary", "deepcam-O1", "--format", "json", store_dir=deepcam_store).out)["total"]
    assert flops == pytest.approx(total["flops"], rel=1e-12)


def test_query_command_gives_the_summary_totals(cli, deepcam_store: Path) -> None:
    sql = "SELECT run, phase, sum(time_s) AS time_s FROM launches GROUP BY ALL ORDER BY ALL"
    result = cli("query", sql, "--format", "csv", store_dir=deepcam_store)
    assert result.code == 0, result.err
    rows = pd.read_csv(__import__("io").StringIO(result.out))
    expected = _summary_times(cli, deepcam_store, "deepcam-O1")
    mine = rows[rows["run"] == "deepcam-O1"].set_index("phase")["time_s"].to_dict()
    assert mine == pytest.approx(expected, rel=1e-12)
    table = cli("query", sql, store_dir=deepcam_store).out.splitlines()
    assert table[0].split() == ["run", "phase", "time_s"] and table[1].endswith(" ms")  # SI for people
    joined = cli(
        "query",
        "SELECT kind, gpu, count(*) AS n FROM launches JOIN runs USING (run) GROUP BY ALL",
        "--format",
        "json",
        store_dir=deepcam_store,
    )
    assert json.loads(joined.out) == [
        {
            "kind": "ncu",
            "gpu": "v100-sxm2",
            "n": sum(len(RunStore(deepcam_store).load(r).launches) for r in ("deepcam-O0", "deepcam-O1")),
        }
    ]


def test_query_errors_are_one_line(cli, tmp_path: Path, deepcam_store: Path) -> None:
    bad = cli("query", "SELECT nope FROM launches", store_dir=deepcam_store)
    assert bad.code == 1 and bad.err.count("\n") == 1 and "nope" in bad.err and "launches" in bad.err
    empty = cli("query", "SELECT 1", store_dir=tmp_path / "none")
    assert empty.code == 1 and "no store at" in empty.err and not (tmp_path / "none").exists()


def _legacy_run(root: Path, name: str, raw_metric: bool) -> pd.DataFrame:
    """A run as layout 1 (schema 5) wrote it: runs/NAME/, no run column, raw metrics as columns."""
    folder = root / "runs" / name
    folder.mkdir(parents=True)
    frame = pd.DataFrame(
        {
            "source": pd.Series([0, 0], dtype="int32"),
            "launch_id": [0, 1],
            "kernel": ["sgemm", "relu"],
            "phase": ["forward", "backward"],
            "launches": [1, 1],
            "time_s": [2e-3, 1e-3],
            "flops_fp32": [4e9, 1e6],
            "bytes_hbm": [1e8, 4e6],
        }
    )
    if raw_metric:
        frame["metric:dram__bytes.sum"] = [1e8, None]
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), folder / "launches-0123456789ab.parquet")
    meta = {
        "name": name,
        "schema_version": 5,
        "launches_file": "launches-0123456789ab.parquet",
        "sources": [],
        "gpu": "a100-40gb",
        "precision": "fp32",
        "created": "2025-01-01T00:00:00+00:00",
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    return frame


def test_an_old_store_is_migrated_on_first_use_and_still_reads(cli, tmp_path: Path) -> None:
    root = tmp_path / "old"
    first = _legacy_run(root, "first", raw_metric=True)
    _legacy_run(root, "second", raw_metric=False)
    listed = cli("runs", "--format", "json", store_dir=root)
    assert listed.code == 0 and "migrated 2 run(s)" in listed.err
    assert [row["run"] for row in json.loads(listed.out)] == ["first", "second"]
    assert sorted(p.name for p in (root / "runs").iterdir()) == ["run=first", "run=second"]
    assert json.loads((root / "store.json").read_text()) == {"layout": LAYOUT_VERSION, "schema_version": SCHEMA_VERSION}
    run = RunStore(root).load("first")
    assert run.launches["time_s"].tolist() == first["time_s"].tolist()
    assert run.launches["metric:dram__bytes.sum"].tolist()[0] == 1e8 and run.meta.phases == ["forward", "backward"]
    digest = tree_digest(root)
    again = cli("runs", store_dir=root)
    assert again.code == 0 and again.err == "" and tree_digest(root) == digest  # a current store is left alone
    sums = duckdb.sql(f"SELECT run, sum(time_s) FROM read_parquet('{root}/runs/**/*.parquet') GROUP BY ALL").fetchall()
    assert dict(sums) == pytest.approx({"first": 3e-3, "second": 3e-3})


def test_a_migration_stopped_halfway_goes_on(cli, tmp_path: Path) -> None:
    root = tmp_path / "old"
    _legacy_run(root, "first", raw_metric=False)
    _legacy_run(root, "second", raw_metric=False)
    assert cli("runs", store_dir=root).code == 0
    # as if stopped after moving "first" but before removing its old folder and writing store.json
    _legacy_run(root, "first", raw_metric=False)
    (root / "store.json").unlink()
    result = cli("runs", "--format", "json", store_dir=root)
    assert result.code == 0 and [row["run"] for row in json.loads(result.out)] == ["first", "second"]
    assert sorted(p.name for p in (root / "runs").iterdir()) == ["run=first", "run=second"]


def test_a_read_only_old_store_says_so(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hroofline.store.migration

    root = tmp_path / "old"
    _legacy_run(root, "first", raw_metric=False)
    digest = tree_digest(root)
    # as for a user without write access (the tests may run as root, who may write anywhere)
    monkeypatch.setattr(hroofline.store.migration.os, "access", lambda path, mode: mode != os.W_OK)
    result = cli("runs", store_dir=root)
    assert result.code == 1 and result.err.count("\n") == 1 and "read-only" in result.err
    assert tree_digest(root) == digest


def test_rename_moves_the_run_column_too(cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(REPO / "samples" / "store", store)
    assert cli("rename", "resnet50-fp32-v100-predicted", "r50", store_dir=store).code == 0
    runs = duckdb.sql(
        f"SELECT DISTINCT run FROM read_parquet('{store}/runs/run=r50/*.parquet', hive_partitioning=false)"
    ).fetchall()
    assert runs == [("r50",)] and not (store / "runs" / "run=resnet50-fp32-v100-predicted").exists()
    assert RunStore(store).load("r50").meta.name == "r50"


def test_the_schema_document_lists_every_column(deepcam_store: Path) -> None:
    """docs/guides/store.md documents each column the files hold."""
    document = (REPO / "docs" / "guides" / "store.md").read_text()
    files = list(RunStore(deepcam_store).runs_dir.glob("run=*/launches-*.parquet"))
    for column in pq.read_schema(files[0]).names:
        assert f"`{column}`" in document, column


def test_query_reads_only_the_store_asked_for(cli, tmp_path: Path) -> None:
    """A store path with glob characters in it reads that store alone, and an uncommitted launches file (an
    import killed before its commit) is not counted."""
    for name in ("q?m", "qXm"):
        shutil.copytree(REPO / "samples" / "store", tmp_path / name)
    store = tmp_path / "q?m"
    run_dir = store / "runs" / "run=resnet50-fp32-v100-predicted"
    launches = next(run_dir.glob("launches-*.parquet"))
    shutil.copy(launches, run_dir / "launches-000000000000.parquet")  # as left by a killed write
    sql = "SELECT run, count(*) AS n FROM launches GROUP BY run ORDER BY run"
    found = json.loads(cli("query", sql, "--format", "json", store_dir=store).out)
    expected = {name: len(RunStore(store).load(name).launches) for name in RunStore(store).run_names()}
    assert {row["run"]: row["n"] for row in found} == expected


def test_a_query_that_returns_no_table_is_one_line(cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(REPO / "samples" / "store", store)
    for sql in ("", "-- a comment", "SELECT 1; SELECT 2"):
        result = cli("query", sql, store_dir=store)
        assert result.code == 1 and result.err.count("\n") == 1 and "statement" in result.err, (sql, result.err)
    listed = cli("query", "SELECT [1, 2] AS l", "--format", "json", store_dir=store)
    assert json.loads(listed.out) == [{"l": [1, 2]}]


def test_leftover_working_folders_are_swept_by_the_next_write(cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(REPO / "samples" / "store", store)
    leftover = store / "runs" / ".renaming-r-0123abcd"  # a rename killed after copying the run
    shutil.copytree(store / "runs" / "run=resnet50-fp32-v100-predicted", leftover)
    recent = store / "runs" / ".removed-s-4567cdef"  # a removal that may still be under way
    recent.mkdir()
    hour_ago = __import__("time").time() - 3700
    os.utime(leftover, (hour_ago, hour_ago))
    assert cli("rename", "resnet50-amp-v100-predicted", "amp", store_dir=store).code == 0
    assert not leftover.exists() and recent.exists()


def test_an_old_layout_run_written_into_a_current_store_is_migrated_and_kept(cli, tmp_path: Path) -> None:
    """An older hroofline writing runs/NAME/ into a migrated store: the run is migrated on the next use; where a
    run of that name exists and differs, the old one is kept under another name, not deleted."""
    root = tmp_path / "store"
    _legacy_run(root, "first", raw_metric=False)
    assert cli("runs", store_dir=root).code == 0  # migrated: run=first
    later = _legacy_run(root, "second", raw_metric=True)
    clash = _legacy_run(root, "first", raw_metric=True)  # the same name, other data (another update time)
    meta = json.loads((root / "runs" / "first" / "meta.json").read_text())
    (root / "runs" / "first" / "meta.json").write_text(json.dumps({**meta, "updated": "2025-06-01T00:00:00+00:00"}))
    result = cli("runs", "--format", "json", store_dir=root)
    assert result.code == 0 and "first.old-layout" in result.err
    assert [row["run"] for row in json.loads(result.out)] == ["first", "first.old-layout", "second"]
    kept = RunStore(root).load("first.old-layout").launches
    assert kept["metric:dram__bytes.sum"].tolist()[0] == clash["metric:dram__bytes.sum"][0]
    assert RunStore(root).load("second").launches["time_s"].tolist() == later["time_s"].tolist()


def test_a_truncated_launches_file_leaves_out_its_run_only(cli, deepcam_store_copy: Path) -> None:
    """Issue 45 (9): one truncated Parquet file broke every query on launches, even one filtered to another run.
    The broken run is left out of both tables, named in one line on stderr; the other run's query is unchanged."""
    sql = "SELECT run, count(*) AS n, sum(time_s) AS time_s FROM launches WHERE run = 'deepcam-O1' GROUP BY run"
    before = cli("query", sql, "--format", "json", store_dir=deepcam_store_copy)
    assert before.code == 0, before.err
    (launches,) = (deepcam_store_copy / "runs" / "run=deepcam-O0").glob("launches-*.parquet")
    launches.write_bytes(launches.read_bytes()[: launches.stat().st_size // 2])  # an interrupted copy
    after = cli("query", sql, "--format", "json", store_dir=deepcam_store_copy)
    assert after.code == 0, after.err
    assert json.loads(after.out) == json.loads(before.out)
    (warning,) = after.err.strip().splitlines()
    assert "'deepcam-O0' left out" in warning and launches.name in warning and "hroofline rm deepcam-O0" in warning
    runs = cli("query", "SELECT run FROM runs", "--format", "json", store_dir=deepcam_store_copy)
    assert [row["run"] for row in json.loads(runs.out)] == ["deepcam-O1"]
    listed = cli("runs", "--format", "json", store_dir=deepcam_store_copy)  # `runs` names it too, the same way
    assert [row["run"] for row in json.loads(listed.out)] == ["deepcam-O1"]
    (line,) = listed.err.strip().splitlines()
    assert "'deepcam-O0' cannot be read" in line and "truncated or not Parquet" in line
