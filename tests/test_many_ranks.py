"""Many ranks: a folder of per-rank traces imported rank by rank (resumable), and the rank aggregation in DuckDB.

The ranks are synthesised by bench/rank_traces.py from a real trace: rank 0 of a 2-GPU DDP job
(../shared/fixtures/kineto/kineto_a100_ddp2_nccl_rank0.json.gz, from facebookresearch/HolisticTraceAnalysis, MIT),
cut to its ProfilerStep#5 and thinned to every 8th top-level op (collectives and the optimizer kept: 175 GPU
activities in forward, backward and optimizer), durations jittered by ±2 % and rank 2's compute kernels stretched
1.5×."""

from __future__ import annotations

import gzip
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from bench.rank_traces import BASE_TRACE, GPU_CATEGORIES, RankTemplate, base_step, is_compute_kernel, write_ranks
from hroofline.api.imports import ImportSettings
from hroofline.api.rank_import import RanksImported, import_rank, import_ranks
from hroofline.importers.build import ImportOptions, source_digest
from hroofline.store.rank_parts import parts_dir
from hroofline.store.rank_sql import RANKS_SQL, conformed, ranks_duckdb
from hroofline.store.reading import BrokenRun
from hroofline.store.runs import RunStore
from tests.conftest import SHARED, need

RANKS, STRAGGLER = 3, 2
MODIFIED_Z = 3.5 / 0.6745  # Iglewicz and Hoaglin: a modified z-score 0.6745 (x - median) / MAD above 3.5
MAD_FLOOR = 0.01  # of the median: the least MAD the rule takes


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ranks") / "traces"
    need(SHARED / "fixtures" / "kineto" / BASE_TRACE)
    write_ranks(RankTemplate(base_step(SHARED, keep_every=8)), folder, range(RANKS), RANKS, STRAGGLER)
    return folder


@dataclass
class Resumed:
    store: RunStore
    before: list[str]  # the store's runs after the kill
    broken: list[BrokenRun]  # what `hroofline runs` says of the killed import
    done: RanksImported


@pytest.fixture(scope="module")
def resumed(traces: Path) -> Resumed:
    """An import killed midway, then run again: as a kill leaves it, ranks 0 and 1 stored and rank 2's Parquet
    file cut off mid-write (its temporary file, never renamed into place); then the folder imported."""
    store = RunStore(traces.parent / "store")
    store.runs_dir.mkdir(parents=True)
    run_dir = store.run_dir("ranks")
    run_dir.mkdir()
    paths = sorted(traces.iterdir())
    for path in paths[:2]:
        assert import_rank(path, source_digest(path), run_dir, "ranks", ImportOptions()) is None
    (parts_dir(run_dir) / f".{source_digest(paths[2])}.0badc0de.parquet.tmp").write_bytes(b"PAR1\x00 cut off")
    before, broken = store.run_names(), store.readable_metas()[1]
    return Resumed(store, before, broken, import_ranks(store, "ranks", [traces], ImportSettings(), jobs=1))


def gpu_activities(path: Path) -> list[dict]:
    """Independently: the GPU activities of a trace file, as its JSON lists them."""
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]


def test_a_killed_import_keeps_its_stored_ranks_and_redoes_the_half_written_one(resumed: Resumed) -> None:
    assert resumed.before == []  # nothing committed at the kill: readers saw no run
    assert [(b.name, b.reason) for b in resumed.broken] == [
        ("ranks", "an import of its ranks was interrupted (2 ranks stored)")
    ]
    assert "run the same import again to resume" in resumed.broken[0].hint
    done = resumed.done
    assert (done.imported, done.resumed, done.half_written, done.already_in_run) == (1, 2, 1, 0)
    assert not parts_dir(resumed.store.run_dir("ranks")).exists()  # committed: the parts are gone


def test_a_folder_of_ranks_is_one_run_of_every_launch_of_every_rank(resumed: Resumed, traces: Path) -> None:
    store = resumed.store
    run = store.load("ranks")
    assert [s.path for s in run.meta.sources] == [str(p) for p in sorted(traces.iterdir())]  # by rank
    assert run.meta.phases == ["forward", "backward", "optimizer"]
    for rank, path in enumerate(sorted(traces.iterdir())):
        activities = gpu_activities(path)
        launches = run.launches[run.launches["rank"] == rank]
        assert launches["launches"].sum() == len(activities)
        assert launches["time_s"].sum() == pytest.approx(sum(e["dur"] for e in activities) * 1e-6, rel=1e-12)
        assert set(launches["source"]) == {rank}
    # a second import of the folder adds nothing
    again = import_ranks(store, "ranks", [traces], ImportSettings(), jobs=1)
    assert (again.imported, again.already_in_run, len(again.meta.sources)) == (0, RANKS, RANKS)


def test_the_duckdb_aggregation_finds_the_planted_straggler_by_its_rule(resumed: Resumed, traces: Path) -> None:
    table = ranks_duckdb(resumed.store, "ranks")
    assert set(table["phase"]) == {"forward", "backward", "optimizer"}
    for phase, rows in table.groupby("phase"):
        compute = dict(zip(rows["rank"], rows["compute_s"], strict=True))
        median = statistics.median(compute.values())
        mad = statistics.median(abs(x - median) for x in compute.values())
        assert rows["median_compute_s"].iloc[0] == pytest.approx(median, rel=1e-12), phase
        assert rows["mad_compute_s"].iloc[0] == pytest.approx(mad, rel=1e-9), phase
        flagged = {r for r, x in compute.items() if x - median > MODIFIED_Z * max(mad, MAD_FLOOR * median)}
        assert set(rows.loc[rows["straggler"], "rank"]) == flagged == {STRAGGLER}, phase
        assert (rows["slowest_rank"] == STRAGGLER).all()
    # the straggler's compute, counted from its trace: its compute kernels are 1.5x the others' (±2 %)
    straggler = table[table["rank"] == STRAGGLER]
    others = table[table["rank"] != STRAGGLER]
    kernels = [e for e in gpu_activities(sorted(traces.iterdir())[STRAGGLER]) if is_compute_kernel(e)]
    assert straggler["compute_s"].sum() >= sum(e["dur"] for e in kernels) * 1e-6 * (1 - 1e-12)
    assert straggler["compute_s"].sum() / others.groupby("rank")["compute_s"].sum().mean() == pytest.approx(
        1.5, abs=0.05
    )


def test_a_rank_a_little_over_tied_ranks_is_no_straggler(tmp_path: Path) -> None:
    """Three ranks, two tied (MAD = 0): 3% over the median is jitter, 10% a straggler (the floor: 5.19% over). The
    SQL runs on launches written here, one launch per rank and phase."""
    import duckdb

    compute = {"tied_3pc": (1.0, 1.0, 1.03), "tied_10pc": (1.0, 1.0, 1.10), "spread": (1.0, 1.2, 3.0)}
    launches = pd.DataFrame(
        [
            {"rank": rank, "phase": phase, "time_s": time_s, "category": "kernel", "launches": 1}
            for phase, times in compute.items()
            for rank, time_s in enumerate(times)
        ]
    )
    connection = duckdb.connect(":memory:")
    connection.register("launches", launches)
    table = conformed(connection.execute(RANKS_SQL).df())
    connection.close()
    flagged = {phase: list(rows.loc[rows["straggler"], "rank"]) for phase, rows in table.groupby("phase")}
    for phase, times in compute.items():
        median = statistics.median(times)
        mad = statistics.median(abs(x - median) for x in times)
        expected = [r for r, x in enumerate(times) if x - median > MODIFIED_Z * max(mad, MAD_FLOOR * median)]
        assert flagged[phase] == expected, phase
    assert flagged == {"tied_3pc": [], "tied_10pc": [2], "spread": [2]}


def test_import_jobs_refuses_what_is_not_a_trace_in_one_line(cli, tmp_path: Path) -> None:
    report = tmp_path / "passes.csv"
    report.write_text("ID,Kernel Name\n")
    for argv, said in [
        ((report, "--jobs", "2"), "import --jobs takes PyTorch profiler traces"),
        ((tmp_path, "--jobs", "0"), "--jobs 0: give 1 or more worker processes"),
    ]:
        result = cli("import", *argv, "--run", "r")
        assert result.code == 2, result.err
        assert said in result.err and len(result.err.strip().splitlines()) == 1
    assert not cli.store.exists()  # refused before the store was made
