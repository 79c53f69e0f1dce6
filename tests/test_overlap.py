"""Wall time per rank of a multi-rank trace (hroofline/analyze/overlap.py), checked against an independent
interval computation on the trace's own JSON.

The two ranks are one profiler step (5) of the real DDP trace of ../shared/fixtures/kineto (rank 0 of a 2-GPU
A100 job, from facebookresearch/HolisticTraceAnalysis' tests/data/nccl_parser_config/nccl_data.json.gz;
PROVENANCE.md there) and a straggler made from it here: the same step as rank 1, its compute kernels 30% longer
and everything after each one later by what it grew (a monotone warp of the trace's clock, CPU events too, so
every event keeps its step).
"""

from __future__ import annotations

import bisect
import copy
import gzip
import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from hroofline.analyze.advice.rules import advise
from hroofline.analyze.overlap import ALL_PHASES, NO_START, run_overlap
from hroofline.api import load
from hroofline.cli.main import main
from hroofline.render.report import RunSection, report_page
from tests.conftest import SHARED, need

STRETCH = 1.3
STEP = 5  # of the trace's ProfilerStep#4-6: one is enough, and imports in a third of the time
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def _ddp_trace() -> dict[str, Any]:
    path = need(SHARED / "fixtures" / "kineto" / "kineto_a100_ddp2_nccl_rank0.json.gz")
    return json.loads(gzip.decompress(path.read_bytes()))


def _one_step(document: dict[str, Any], step: int) -> dict[str, Any]:
    """The trace cut to one profiler step, to import fast: the CPU events inside ProfilerStep#N's range and the GPU
    activities their runtime calls launched (the other events, metadata without a time, kept)."""
    events = document["traceEvents"]
    start, end = next((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == f"ProfilerStep#{step}")
    inside = {id(e) for e in events if "ts" in e and e.get("cat") not in GPU_CATEGORIES and start <= e["ts"] <= end}
    launched = {e["args"]["correlation"] for e in events if id(e) in inside and e.get("cat") == "cuda_runtime"}
    kept = [
        e
        for e in events
        if "ts" not in e
        or id(e) in inside
        or (e.get("cat") in GPU_CATEGORIES and e.get("args", {}).get("correlation") in launched)
    ]
    return {**document, "traceEvents": kept}


def _is_nccl(event: dict[str, Any]) -> bool:
    return event.get("cat") == "kernel" and "nccl" in event["name"].lower()


def _straggler(document: dict[str, Any], rank: int) -> dict[str, Any]:
    """The trace as rank ``rank``, its non-NCCL kernels STRETCH times longer and the clock after each kernel's
    start later by what the kernels before grew."""
    document = copy.deepcopy(document)
    document["distributedInfo"]["rank"] = rank
    events = [e for e in document["traceEvents"] if "ts" in e]
    grown = sorted((e for e in events if e.get("cat") == "kernel" and not _is_nccl(e)), key=lambda e: e["ts"])
    starts, extra = [e["ts"] for e in grown], [0.0]
    for event in grown:
        extra.append(extra[-1] + event["dur"] * (STRETCH - 1))

    def warp(stamp: float) -> float:
        return stamp + extra[bisect.bisect_left(starts, stamp)]

    for event in events:
        end = event["ts"] + event.get("dur", 0.0)
        event["ts"] = warp(event["ts"])
        if "dur" in event:
            event["dur"] = warp(end) - event["ts"]
    return document


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, dict[str, Any]]]:
    """A store with run 'ddp2' (rank 0 as recorded, rank 1 the straggler) and each rank's JSON."""
    folder = tmp_path_factory.mktemp("ranks")
    documents = {0: _one_step(_ddp_trace(), STEP)}
    documents[1] = _straggler(documents[0], 1)
    paths = []
    for rank, document in documents.items():
        paths.append(folder / f"rank{rank}.json")
        paths[-1].write_text(json.dumps(document))
    store = folder / "store"
    assert main(["import", *map(str, paths), "--run", "ddp2", "--store", str(store)]) == 0
    return store, documents


def _merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def _intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Length of the overlap of two merged interval lists (two pointers)."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def independent_steps(document: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Per ProfilerStep#N: a GPU activity is in the step whose CPU range holds its runtime call (same correlation);
    wall = last end - first start; compute / hidden / exposed / idle from the merged intervals, seconds from the
    file's first GPU activity."""
    events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
    steps = [
        (e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1]))
        for e in events
        if e["name"].startswith("ProfilerStep#")
    ]
    calls = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
    per_step: dict[int, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    first = min(e["ts"] for e in events if e.get("cat") in GPU_CATEGORIES)  # microseconds: differences are exact
    for event in events:
        if event.get("cat") not in GPU_CATEGORIES:
            continue
        called = calls.get(event["args"].get("correlation"))
        step = next((n for a, b, n in steps if called is not None and a <= called <= b), None)
        if step is not None:
            kind = "communication" if _is_nccl(event) else "other"
            start = (event["ts"] - first) * 1e-6
            per_step[step][kind].append((start, start + event["dur"] * 1e-6))
    figures = {}
    for step, kinds in per_step.items():
        other, comm = _merged(kinds["other"]), _merged(kinds["communication"])
        both = _intersection(other, comm)
        every = kinds["other"] + kinds["communication"]
        wall = max(b for _, b in every) - min(a for a, _ in every)
        figures[step] = {
            "wall_s": wall,
            "compute_s": _length(other) - both,
            "communication_hidden_s": both,
            "communication_exposed_s": _length(comm) - both,
            "idle_s": wall - (_length(other) + _length(comm) - both),
        }
    return figures


FIGURES = ("compute_s", "communication_hidden_s", "communication_exposed_s", "idle_s")


def test_each_rank_steps_parts_add_up_to_its_wall_time_and_match_an_independent_sweep(ranks) -> None:
    store, documents = ranks
    overlap = load("ddp2", store).wall_time()  # the notebook's face of run_overlap
    assert overlap.unknown is None and {r.rank for r in overlap.ranks} == {0, 1}
    for row in overlap.rows + overlap.ranks + overlap.rank_phases:
        parts = sum(getattr(row, name) for name in FIGURES)
        assert parts == pytest.approx(row.wall_s, rel=1e-9), row
        assert min(getattr(row, name) for name in FIGURES) >= 0, row
    for rank, document in documents.items():
        expected = independent_steps(document)
        found = {r.step: r for r in overlap.rows if r.rank == rank and r.phase == ALL_PHASES}
        assert sorted(found) == sorted(expected) == [STEP]
        for step, figures in expected.items():
            for name, value in figures.items():  # 1 ns: the trace's own resolution
                assert getattr(found[step], name) == pytest.approx(value, abs=1e-9), (rank, step, name)
    # the real rank: communication no compute hides is 4.9% of its step (10.4 of 213.5 ms)
    real = independent_steps(documents[0])[STEP]
    assert 10.3e-3 < real["communication_exposed_s"] < 10.5e-3 and 213e-3 < real["wall_s"] < 214e-3


def test_the_straggler_is_the_critical_rank_and_its_lag_is_its_own_compute(ranks) -> None:
    store, documents = ranks
    overlap = run_overlap(load("ddp2", store))
    steps = [c for c in overlap.critical if c.phase == ALL_PHASES]
    assert [c.step for c in steps] == [STEP]
    real = independent_steps(documents[0])
    for critical in overlap.critical:
        assert (critical.critical_rank, critical.median_rank, critical.ranks) == (1, 0, 2), critical
        difference = critical.lag_s - critical.waiting_caused_s
        assert difference == pytest.approx(critical.wall_difference_s, rel=1e-9, abs=1e-12)
    for critical in steps:
        # the warp adds 30% of each compute kernel's time and nothing else: its compute kernels run one at a time
        # (one stream) and beside copies never, so its own work grows by 30% of its compute kernels' sum (to 0.1 us
        # in 11.6 ms: each warped stamp rounds to the float64 microseconds' ~1 ns)
        kernels = _compute_kernel_seconds(documents[0], critical.step)
        assert critical.lag_s == pytest.approx((STRETCH - 1) * kernels, rel=1e-5)
        # the two traces are copies, not a synchronous job: the median rank does not wait for the warped one
        assert abs(critical.waiting_caused_s) < 1e-7
        assert critical.wall_difference_s == pytest.approx(critical.lag_s, abs=1e-7)
        own = real[critical.step]["compute_s"] + real[critical.step]["communication_hidden_s"]
        assert critical.median_own_work_s == pytest.approx(own, abs=1e-9)


def _compute_kernel_seconds(document: dict[str, Any], step: int) -> float:
    events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
    bounds = next((e["ts"], e["ts"] + e["dur"]) for e in events if e["name"] == f"ProfilerStep#{step}")
    calls = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
    return 1e-6 * sum(
        e["dur"]
        for e in events
        if e.get("cat") == "kernel"
        and not _is_nccl(e)
        and bounds[0] <= calls.get(e["args"].get("correlation"), -1.0) <= bounds[1]
    )


def test_summary_by_rank_gives_each_ranks_wall_time_in_json_and_table(ranks, capsys) -> None:
    store, documents = ranks
    assert main(["summary", "ddp2", "--by", "rank", "--format", "json", "--store", str(store)]) == 0
    data = json.loads(capsys.readouterr().out)
    by_rank = {row["rank"]: row for row in data["ranks"]}
    for rank, document in documents.items():
        expected = independent_steps(document)
        for name in ("wall_s", *FIGURES):
            assert by_rank[rank][name] == pytest.approx(sum(f[name] for f in expected.values()), abs=3e-9)
    assert [c["critical_rank"] for c in data["critical"] if c["phase"] == ALL_PHASES] == [1]
    assert main(["summary", "ddp2", "--by", "rank", "--store", str(store)]) == 0
    table = capsys.readouterr().out
    assert "wall time per rank" in table and "critical rank" in table
    # the spread table's slowest_s and median_s are time outside communication kernels, and its heading says so
    # (main's said "GPU time"); the straggler (rank 1, its compute kernels 30% longer) is the slowest in each phase
    assert "slowest rank per phase (by its GPU time outside communication kernels" in table
    assert "(GPU time;" not in table
    spread = table.split("slowest rank per phase", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    assert spread and all(line.split()[2] == "1" for line in spread)


def test_advise_names_the_exposed_communication_with_what_hiding_it_can_win(ranks) -> None:
    store, documents = ranks
    found = {f.rule.key: f for f in advise(load("ddp2", store))}
    finding = found["exposed_communication"]
    steps = [figures for document in documents.values() for figures in independent_steps(document).values()]
    exposed = sum(f["communication_exposed_s"] for f in steps)  # 20.9 ms: 10.4 ms per rank
    assert finding.evidence.time_s == pytest.approx(exposed, abs=1e-8)
    assert finding.win_s == pytest.approx(
        sum(min(f["communication_exposed_s"], f["compute_s"]) for f in steps), abs=1e-8
    )
    assert finding.evidence.launches == 2 * 7  # the step's NCCL kernels, once per rank


def test_a_store_written_before_start_times_reads_them_as_unknown(ranks, tmp_path: Path, capsys) -> None:
    """A schema-8 store (no start_s column) is migrated on first use; its runs have no wall time, and say so."""
    import pyarrow.parquet as pq

    store = tmp_path / "old"
    shutil.copytree(ranks[0], store)
    folder = store / "runs" / "run=ddp2"
    for file in folder.glob("launches-*.parquet"):
        table = pq.read_table(file)
        pq.write_table(table.drop_columns(["start_s"]), file)
    for meta in (folder / "meta.json", store / "store.json"):
        data = json.loads(meta.read_text())
        meta.write_text(json.dumps({**data, "schema_version": 8}))
    run = load("ddp2", store)
    assert run.launches["start_s"].isna().all() and len(run.launches) == 2 * 1258
    assert run_overlap(run).unknown == NO_START
    assert main(["summary", "ddp2", "--by", "rank", "--format", "json", "--store", str(store)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ranks"] == [] and data["wall_unknown"] == NO_START
    assert main(["summary", "ddp2", "--by", "rank", "--store", str(store)]) == 0
    assert "wall time unknown" in capsys.readouterr().out


def test_chart_and_report_draw_each_ranks_wall_time_as_a_stacked_bar(ranks, tmp_path: Path) -> None:
    store, documents = ranks
    out = tmp_path / "ranks.json"
    assert main(["chart", "ddp2", "--by", "rank", "--out", str(out), "--store", str(store)]) == 0
    spec = json.loads(out.read_text())
    rows = [row for values in spec["datasets"].values() for row in values]
    for rank, document in documents.items():
        parts = [row["seconds"] for row in rows if row["rank"] == f"rank {rank}"]
        expected = independent_steps(document)[STEP]
        assert len(parts) == 4 and sum(parts) == pytest.approx(expected["wall_s"] * 1e3, abs=1e-6)  # ms
    # the report's page of a run of several ranks has the bars and the tables (the whole report takes seconds)
    section = RunSection(name="ddp2", facts=[], summary={}, phases=[], overlap=run_overlap(load("ddp2", store)))
    page = report_page("ranks", [section])
    assert "ddp2 · wall time per rank" in page and 'id="ranks-1"' in page and "critical rank" in page
