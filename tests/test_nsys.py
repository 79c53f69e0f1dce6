"""Nsight Systems exports (issue 43, point 3): the two real 2-GPU H100 exports of ../shared/fixtures/nsys (copied
from the public repository GindaChen/nsys-ai, MIT, tests/fixtures at 387e5a5; README.md there says what is in
them), each imported once per module and checked against SQL run on the export in the test."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import shutil
import sqlite3
import stat
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import pytest

from hroofline.api import load
from hroofline.importers.collectives import is_communication
from hroofline.importers.nsys_nvtx import parse_range
from tests.conftest import SHARED, Result, need

EXPORTS = {"fsdp": "h100-2gpu-1s.sqlite", "before": "h100-2gpu-before.sqlite"}
NS = 1e-9
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"


def export_path(key: str) -> Path:
    return need(SHARED / "fixtures" / "nsys" / EXPORTS[key])


def sql(path: Path, query: str) -> list[tuple]:
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as connection:
        return connection.execute(query).fetchall()


@pytest.fixture(scope="module")
def nsys_imports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Both exports imported into one store, and what each import wrote on stderr."""
    from hroofline.cli.main import main

    store = tmp_path_factory.mktemp("nsys") / "store"
    said: dict[str, str] = {}
    for key in EXPORTS:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            assert main(["import", str(export_path(key)), "--run", key, "--gpu", "h100", "--store", str(store)]) == 0
        said[key] = err.getvalue()
    return store, said


@pytest.fixture(scope="module")
def nsys_store(nsys_imports: tuple[Path, dict[str, str]]) -> Path:
    return nsys_imports[0]


@pytest.mark.parametrize("key", list(EXPORTS))
def test_both_ranks_with_every_kernel_copy_and_set_of_their_device(nsys_store: Path, key: str) -> None:
    """One rank per GPU (each process drives one): rank r is device r, with that device's kernels, copies and sets,
    each timed end - start."""
    path = export_path(key)
    launches = load(key, nsys_store).launches
    assert sorted(launches["rank"].unique()) == [0, 1]
    for table, categories in ((KERNELS, ["kernel", "communication"]), ("CUPTI_ACTIVITY_KIND_MEMCPY", ["memcpy"])):
        expected = dict(
            (d, (n, t))
            for d, n, t in sql(path, f"SELECT deviceId, COUNT(*), SUM(end - start) FROM {table} GROUP BY deviceId")
        )
        for device, (count, total_ns) in expected.items():
            mine = launches[(launches["rank"] == device) & launches["category"].isin(categories)]
            assert len(mine) == count
            assert set(mine["device"]) == {str(device)}
            assert mine["time_s"].sum() == pytest.approx(total_ns * NS, rel=1e-12)
    sets = dict(sql(path, "SELECT deviceId, COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET GROUP BY deviceId"))
    assert launches[launches["category"] == "memset"].groupby("rank").size().to_dict() == sets


@pytest.mark.parametrize("key", list(EXPORTS))
def test_start_s_counts_from_the_rank_first_activity(nsys_store: Path, key: str) -> None:
    path = export_path(key)
    launches = load(key, nsys_store).launches
    union = " UNION ALL ".join(
        f"SELECT deviceId, start FROM CUPTI_ACTIVITY_KIND_{t}" for t in ("KERNEL", "MEMCPY", "MEMSET")
    )
    for device, first, last in sql(path, f"SELECT deviceId, MIN(start), MAX(start) FROM ({union}) GROUP BY deviceId"):
        mine = launches.loc[launches["rank"] == device, "start_s"]
        assert mine.min() == 0.0
        assert mine.max() == pytest.approx((last - first) * NS, abs=1e-9)


def fsdp_shares(path: Path) -> tuple[float, float]:
    """Independently, by SQL and a walk: the share of kernel time whose runtime call (same process, same
    correlation id) was made inside an FSDP module's forward, from ``FSDP::pre_forward (M)``'s start to the next
    ``FSDP::post_forward (M)``'s end in that process. With no other phase or module ranges in these exports, that
    share is both the phase's and the layer's."""
    hooks = sql(
        path,
        "SELECT globalTid >> 24, start, end, text FROM NVTX_EVENTS WHERE text LIKE 'FSDP::pre_forward (%' "
        "OR text LIKE 'FSDP::post_forward (%' ORDER BY start",
    )
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    opened: dict[tuple[int, str], int] = {}
    for pid, start, end, text in hooks:
        module = text.split(" (", 1)[1].rsplit(")", 1)[0]
        if text.startswith("FSDP::pre_forward"):
            opened.setdefault((pid, module), start)
        elif (pid, module) in opened:
            spans[pid].append((opened.pop((pid, module)), end))
    kernels = sql(
        path,
        f"SELECT k.end - k.start, r.globalTid >> 24, r.start FROM {KERNELS} k LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId AND r.globalTid >> 24 = k.globalPid >> 24",
    )
    total = sum(duration for duration, _, _ in kernels)
    inside = sum(
        duration
        for duration, pid, call in kernels
        if call is not None and any(start <= call <= end for start, end in spans[pid])
    )
    return inside / total, inside / total


@pytest.mark.parametrize("key", list(EXPORTS))
def test_nvtx_gives_phases_and_layers_as_sql_finds_them(nsys_store: Path, key: str) -> None:
    """Measured: 51.2% of kernel time of the FSDP export has phase and layer from NVTX (the rest was launched by
    runtime calls the export does not hold: 905 of 1,721 kernels per device), 94.9% of the other's."""
    run = load(key, nsys_store)
    launches = run.launches
    kernels = launches[launches["category"].isin(["kernel", "communication"])]
    total = kernels["time_s"].sum()
    phase_share = kernels.loc[kernels["phase"] == "forward", "time_s"].sum() / total
    layered = kernels["layer"].notna() & ~kernels["layer"].str.startswith("<")
    layer_share = kernels.loc[layered, "time_s"].sum() / total
    expected_phase, expected_layer = fsdp_shares(export_path(key))
    assert phase_share == pytest.approx(expected_phase, abs=1e-9)
    assert layer_share == pytest.approx(expected_layer, abs=1e-9)
    assert set(kernels["phase"]) <= {"forward", "other"}
    assert {"fsdp": 0.512, "before": 0.949}[key] == pytest.approx(phase_share, abs=0.0005)
    note = next(n for n in run.meta.sources[0].notes if n.startswith("NVTX gave"))
    assert f"{phase_share:.1%} of kernel time a phase and {layer_share:.1%} a layer" in note
    if key == "fsdp":
        assert "encoder.block.14.layer.1" in set(kernels["layer"])
        unlinked = sql(
            export_path(key),
            f"SELECT k.deviceId, COUNT(*) FROM {KERNELS} k WHERE NOT EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME "
            "r WHERE r.correlationId = k.correlationId AND r.globalTid >> 24 = k.globalPid >> 24) GROUP BY 1",
        )
        assert unlinked == [(0, 905), (1, 905)]


def test_communication_kernels_are_found_per_rank(nsys_store: Path) -> None:
    path = export_path("before")
    names = dict(sql(path, "SELECT id, value FROM StringIds"))
    expected: dict[int, int] = defaultdict(int)
    for device, name in sql(path, f"SELECT deviceId, demangledName FROM {KERNELS}"):
        expected[device] += names[name].startswith("ncclDevKernel")
    launches = load("before", nsys_store).launches
    found = launches[launches["category"] == "communication"]
    assert found.groupby("rank").size().to_dict() == dict(expected) == {0: 33, 1: 33}
    assert found["kernel"].map(is_communication).all()


def small_copy(tmp_path: Path, seconds: float = 0.05) -> Path:
    """A writable copy of the FSDP export cut to its first ``seconds`` of activity, for tests that change it."""
    copy = tmp_path / "small.sqlite"
    shutil.copyfile(export_path("fsdp"), copy)
    copy.chmod(stat.S_IRUSR | stat.S_IWUSR)
    with sqlite3.connect(copy) as connection:
        (first,) = connection.execute(f"SELECT MIN(start) FROM {KERNELS}").fetchone()
        cut = first + int(seconds / NS)
        for table in (KERNELS, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            connection.execute(f"DELETE FROM {table} WHERE start > ?", (cut,))
    return copy


def test_a_missing_table_is_one_line_and_stores_nothing(cli, tmp_path: Path) -> None:
    copy = small_copy(tmp_path)
    with sqlite3.connect(copy) as connection:
        connection.execute(f"DROP TABLE {KERNELS}")
    result: Result = cli("import", copy, "--run", "cut", "--gpu", "h100")
    assert result.code == 1
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert f"no {KERNELS} table" in result.err
    assert not (cli.store / "runs").exists() or not any((cli.store / "runs").iterdir())


def test_an_export_that_names_no_gpu_asks_for_gpu(cli, tmp_path: Path) -> None:
    result: Result = cli("import", small_copy(tmp_path), "--run", "x")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "no TARGET_INFO_GPU table" in result.err and "give --gpu" in result.err


def test_a_report_without_nsys_on_path_says_how_to_export_it(cli, tmp_path: Path, monkeypatch) -> None:
    report = tmp_path / "profile.nsys-rep"
    report.write_bytes(b"not read")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result: Result = cli("import", report, "--run", "r", "--gpu", "h100")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "nsys export --type sqlite" in result.err


def test_a_report_is_exported_on_the_fly_where_nsys_is_on_path(cli, tmp_path: Path, monkeypatch) -> None:
    """A stand-in nsys that writes the export asked for (the small copy) where --output says."""
    copy = small_copy(tmp_path)
    tools = tmp_path / "bin"
    tools.mkdir()
    fake = tools / "nsys"
    fake.write_text(
        f'#!/bin/sh\n[ "$1" = export ] || exit 9\nwhile [ "$1" != --output ]; do shift; done\ncp {copy} "$2"\n'
    )
    fake.chmod(0o755)
    report = tmp_path / "profile.nsys-rep"
    report.write_bytes(b"a report")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    result: Result = cli("import", report, "--run", "r", "--gpu", "h100")
    assert result.code == 0, result.err
    (kernels,) = sql(copy, f"SELECT COUNT(*) FROM {KERNELS}")[0]
    launches = load("r", cli.store).launches
    assert launches["category"].isin(["kernel", "communication"]).sum() == kernels


def test_parse_range_reads_emit_nvtx_fields() -> None:
    parsed = parse_range("aten::mm, seq = 12, op_id = 345, sizes = [[8, 16], [16, 4]], input_op_ids = [(340,0)]")
    assert (parsed.name, parsed.sequence, parsed.sizes) == ("aten::mm", 12, [[8, 16], [16, 4]])
    assert parse_range("FSDP::pre_forward (encoder.block.1), op_id = 9").name == "FSDP::pre_forward (encoder.block.1)"
    assert parse_range("ncclSend").sizes is None


M, K, N = 512, 1024, 4096  # put in by this test: neither shared export recorded sizes (record_shapes was off)


def test_recorded_sizes_give_the_work_formulas_and_graph_ids_are_kept(cli, tmp_path: Path) -> None:
    """The small copy with sizes on its aten::mm ranges (as emit_nvtx(record_shapes=True) writes them) and CUDA graph
    ids on its kernels: each aten::mm call's kernels carry 2·M·N·K FLOPs, counted by hand; summary, top and chart
    run on the run."""
    copy = small_copy(tmp_path, seconds=0.5)
    with sqlite3.connect(copy) as connection:
        connection.execute(
            f"UPDATE NVTX_EVENTS SET text = text || ', sizes = [[{M}, {K}], [{K}, {N}]]' WHERE text LIKE 'aten::mm, %'"
        )
        connection.execute(f"UPDATE {KERNELS} SET graphId = 7, graphNodeId = rowid WHERE deviceId = 0")
    calls = sql(
        copy,
        f"SELECT COUNT(DISTINCT n.rowid) FROM NVTX_EVENTS n JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        f"ON r.globalTid = n.globalTid AND r.start BETWEEN n.start AND n.end JOIN {KERNELS} k "
        "ON k.correlationId = r.correlationId AND k.globalPid >> 24 = r.globalTid >> 24 "
        "WHERE n.text LIKE 'aten::mm, %'",
    )[0][0]
    assert calls > 0
    result: Result = cli("import", copy, "--run", "sized", "--gpu", "h100")
    assert result.code == 0, result.err
    launches = load("sized", cli.store).launches
    mm = launches[launches["work_op"] == "aten::mm"]
    flops = mm[[c for c in launches.columns if c.startswith("flops_") and c != "flops_tensor"]].sum().sum()
    assert flops == pytest.approx(calls * 2 * M * N * K, rel=1e-9)
    kernels = launches["category"].isin(["kernel", "communication"])
    nodes = launches.loc[kernels & (launches["rank"] == 0), "metric:graphNodeId"]
    (count,) = sql(copy, f"SELECT COUNT(*) FROM {KERNELS} WHERE deviceId = 0")[0]
    assert nodes.notna().all() and nodes.nunique() == len(nodes) == count
    assert set(launches.loc[kernels & (launches["rank"] == 0), "metric:graphId"]) == {7.0}
    assert launches.loc[~kernels | (launches["rank"] == 1), "metric:graphId"].isna().all()
    summary = cli("summary", "sized", "--by", "rank", "--format", "json")
    assert summary.code == 0 and {row["key"] for row in json.loads(summary.out)["rows"]} == {0, 1}
    assert cli("top", "sized").code == 0
    chart = cli("chart", "sized", "--out", tmp_path / "sized.json")
    assert chart.code == 0, chart.err
    assert (tmp_path / "sized.json").stat().st_size > 0


def test_target_info_gpu_names_the_gpu_and_a_named_gpu_is_checked_against_it(cli, tmp_path: Path) -> None:
    """The small copy given the TARGET_INFO_GPU table an nsys export of an H100 SXM has (id, name, compute
    capability, SM count, memory): the run has its device and roofs without --gpu, and --gpu h100-pcie (114 SMs)
    is refused."""
    copy = small_copy(tmp_path)
    with sqlite3.connect(copy) as connection:
        connection.execute(
            "CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, computeMajor INTEGER, computeMinor INTEGER, "
            "smCount INTEGER, totalMemory INTEGER)"
        )
        for device in (0, 1):
            connection.execute(
                "INSERT INTO TARGET_INFO_GPU VALUES (?, 'NVIDIA H100 80GB HBM3', 9, 0, 132, 85520809984)", (device,)
            )
    assert cli("import", copy, "--run", "named").code == 0
    run = load("named", cli.store)
    assert run.meta.device_name == "NVIDIA H100 80GB HBM3" and set(run.launches["cc"]) == {"9.0"}
    assert cli("top", "named").code == 0  # top refuses a run without roofs
    refused = cli("import", copy, "--run", "pcie", "--gpu", "h100-pcie")
    assert refused.code == 1 and refused.err.count("\n") == 1, refused.err
    assert "132 SMs" in refused.err


def test_the_users_own_ranges_name_phases_before_fsdp_hooks(cli, tmp_path: Path) -> None:
    """A range of the user's own (``record_function("optimizer")`` under emit_nvtx) around the calls of each thread
    that launched device 0's kernels: each of those kernels is optimizer; device 1's keep their FSDP forward."""
    copy = small_copy(tmp_path, seconds=0.5)
    with sqlite3.connect(copy) as connection:
        threads = connection.execute(
            f"SELECT r.globalTid, MIN(r.start), MAX(r.end) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN {KERNELS} k "
            "ON k.correlationId = r.correlationId AND k.globalPid >> 24 = r.globalTid >> 24 WHERE k.deviceId = 0 "
            "GROUP BY r.globalTid"
        ).fetchall()
        for thread, first, last in threads:
            connection.execute(
                "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, ?, ?)",
                (first - 1, last + 1, "optimizer, op_id = 1", thread),
            )
    assert cli("import", copy, "--run", "own", "--gpu", "h100").code == 0
    launches = load("own", cli.store).launches
    linked = launches["op"].notna() & (launches["category"] == "kernel")
    assert set(launches.loc[linked & (launches["rank"] == 0), "phase"]) == {"optimizer"}
    assert "forward" in set(launches.loc[linked & (launches["rank"] == 1), "phase"])


# Wall time (issue 43, point 1) on the same exports: per rank, compute, communication hidden and exposed, and idle
# sum to the rank's wall time, and each equals a sweep over the export's own kernel, copy and set intervals written
# here, from SQL, not through hroofline's importer or hroofline/analyze/overlap.py.
ACTIVITY_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def _intervals(path: Path) -> dict[int, list[tuple[int, int, bool]]]:
    """Per device: (start, end, is communication) of every activity, in ns; NCCL kernels by their names."""
    found: dict[int, list[tuple[int, int, bool]]] = {}
    names = dict(sql(path, "SELECT id, value FROM StringIds"))
    for table in ACTIVITY_TABLES:
        name_column = "shortName" if table.endswith("KERNEL") else None
        columns = f"deviceId, start, end{', ' + name_column if name_column else ''}"
        for row in sql(path, f"SELECT {columns} FROM {table}"):
            nccl = name_column is not None and str(names.get(row[3], "")).lower().startswith("nccl")
            found.setdefault(row[0], []).append((row[1], row[2], nccl))
    return found


def _sweep(intervals: list[tuple[int, int, bool]]) -> dict[str, float]:
    """Between each two consecutive interval ends: who runs (compute, communication, both, nothing)."""
    edges = sorted({t for start, end, _ in intervals for t in (start, end)})
    parts = {"compute_s": 0, "communication_hidden_s": 0, "communication_exposed_s": 0, "idle_s": 0}
    for left, right in pairwise(edges):
        running = [nccl for start, end, nccl in intervals if start <= left and end >= right]
        compute, communication = any(not n for n in running), any(running)
        key = (
            ("communication_hidden_s" if communication else "compute_s")
            if compute
            else ("communication_exposed_s" if communication else "idle_s")
        )
        parts[key] += right - left
    result = {key: value * NS for key, value in parts.items()}
    result["wall_s"] = (edges[-1] - edges[0]) * NS
    return result


@functools.cache
def swept_devices(key: str) -> dict[int, dict[str, float]]:
    """Per device of an export: :func:`_sweep` of its intervals (once per test session: the sweep is slow)."""
    return {device: _sweep(intervals) for device, intervals in _intervals(export_path(key)).items()}


@pytest.mark.parametrize("key", list(EXPORTS))
def test_each_ranks_wall_time_is_its_parts_and_a_sweep_of_the_exports_intervals(
    cli, nsys_store: Path, key: str
) -> None:
    result = cli("summary", key, "--by", "rank", "--format", "json", store_dir=nsys_store)
    assert result.code == 0, result.err
    ranks = {row["rank"]: row for row in json.loads(result.out)["ranks"]}
    expected = swept_devices(key)
    assert sorted(ranks) == sorted(expected) == [0, 1]  # one rank per GPU: rank r drives device r
    for rank, row in ranks.items():
        parts = row["compute_s"] + row["communication_hidden_s"] + row["communication_exposed_s"] + row["idle_s"]
        assert parts == pytest.approx(row["wall_s"], rel=0.01)
        for name, value in expected[rank].items():
            assert row[name] == pytest.approx(value, rel=1e-6, abs=2e-9), (key, rank, name)


def one_process_on_two_gpus(tmp_path: Path) -> Path:
    """The small copy with device 1's process folded into device 0's: its activities, runtime calls (correlation
    ids moved past the other's, so each kernel keeps its own call) and NVTX ranges now carry device 0's process id:
    one process driving two GPUs, both busy at once. Runtime calls and ranges after the last activity are cut."""
    copy = small_copy(tmp_path, seconds=0.02)
    ((first,), (second,)) = sql(copy, f"SELECT DISTINCT globalPid >> 24 FROM {KERNELS} ORDER BY deviceId")
    shift, moved = (second - first) << 24, 1 << 40
    with sqlite3.connect(copy) as connection:
        (last,) = connection.execute(f"SELECT MAX(end) FROM {KERNELS}").fetchone()
        for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"):
            connection.execute(f"DELETE FROM {table} WHERE start > ?", (last,))
        for table in ACTIVITY_TABLES:
            connection.execute(
                f"UPDATE {table} SET globalPid = globalPid - ?, correlationId = correlationId + ? "
                "WHERE globalPid >> 24 = ?",
                (shift, moved, second),
            )
        connection.execute(
            "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = globalTid - ?, correlationId = correlationId + ? "
            "WHERE globalTid >> 24 = ?",
            (shift, moved, second),
        )
        connection.execute(
            "UPDATE NVTX_EVENTS SET globalTid = globalTid - ? WHERE globalTid >> 24 = ?", (shift, second)
        )
    assert sql(copy, f"SELECT DISTINCT deviceId, globalPid >> 24 FROM {KERNELS} ORDER BY 1") == [(0, first), (1, first)]
    return copy


def test_a_process_driving_two_gpus_is_one_rank_per_gpu_each_swept_on_its_own(cli, tmp_path: Path) -> None:
    """Each GPU's wall time, parts and idle are its own intervals' (the sweep above, per device), not the union of
    both GPUs' intervals as one timeline (which hid each GPU's idle time behind the other's work)."""
    copy = one_process_on_two_gpus(tmp_path)
    assert cli("import", copy, "--run", "folded", "--gpu", "h100").code == 0
    result = cli("summary", "folded", "--by", "rank", "--format", "json")
    assert result.code == 0, result.err
    ranks = {row["rank"]: row for row in json.loads(result.out)["ranks"]}
    by_device = _intervals(copy)
    expected = {device: _sweep(intervals) for device, intervals in by_device.items()}
    assert sorted(ranks) == sorted(expected) == [0, 1]
    for rank, row in ranks.items():
        for name, value in expected[rank].items():
            assert row[name] == pytest.approx(value, rel=1e-6, abs=2e-9), (rank, name)
    both = _sweep([i for intervals in by_device.values() for i in intervals])
    assert both["idle_s"] < 0.5 * min(e["idle_s"] for e in expected.values())  # what one timeline of both showed


def test_the_critical_ranks_lag_is_its_own_work_over_the_median_ranks_and_the_others_wait_it_out(
    cli, nsys_store: Path
) -> None:
    """The 'before' export is a synchronous 2-GPU job: its walls differ by a few ms, and the rank with more own work
    makes the other wait in its collectives. Its lag (own work over the median rank's, which of two is the other
    rank) and the waiting it causes (the other's exposed communication and idle over its own) come from the
    per-device sweep of the export's intervals above."""
    result = cli("summary", "before", "--by", "rank", "--format", "json", store_dir=nsys_store)
    assert result.code == 0, result.err
    (row,) = [c for c in json.loads(result.out)["critical"] if c["phase"] == "all"]
    swept = swept_devices("before")
    own = {d: s["compute_s"] + s["communication_hidden_s"] for d, s in swept.items()}
    critical = max(own, key=lambda d: (own[d], -d))
    (median,) = set(own) - {critical}
    waiting = {d: s["communication_exposed_s"] + s["idle_s"] for d, s in swept.items()}
    assert (row["critical_rank"], row["median_rank"]) == (critical, median)
    assert row["lag_s"] == pytest.approx(own[critical] - own[median], abs=2e-9)
    assert row["waiting_caused_s"] == pytest.approx(waiting[median] - waiting[critical], abs=2e-9)
    assert row["wall_difference_s"] == pytest.approx(swept[critical]["wall_s"] - swept[median]["wall_s"], abs=2e-9)
    assert row["lag_s"] > 0 and row["waiting_caused_s"] > 0
    # measured: rank 1's own work 259.047 ms, rank 0's 256.645 ms: lag 2.402 ms, waiting caused 3.589 ms, walls
    # -1.187 ms apart (the wall difference, which main printed as the lag)
    assert (critical, round(row["lag_s"] * 1e3, 3), round(row["waiting_caused_s"] * 1e3, 3)) == (1, 2.402, 3.589)


def test_an_export_without_sizes_says_so_once_and_promises_no_analytic_work(
    nsys_imports: tuple[Path, dict[str, str]],
) -> None:
    """The 'before' export's emit_nvtx ranges recorded no shapes: stderr warns of it, and no note says FLOPs and
    bytes are analytic from replayed shapes."""
    err = nsys_imports[1]["before"]
    assert err.count("carry no sizes") == 1
    assert "FLOPs and bytes are analytic" not in err
    assert "note: ranks: one rank per GPU" in err  # the other notes stay


def test_an_export_of_another_schema_major_is_refused_in_one_line(cli, tmp_path: Path) -> None:
    """Schema 3.x is read; an export whose META_DATA_EXPORT says 4.0.0 is refused before anything is stored."""
    copy = small_copy(tmp_path)
    with sqlite3.connect(copy) as connection:
        connection.execute("UPDATE META_DATA_EXPORT SET value = '4.0.0' WHERE name = 'EXPORT_SCHEMA_VERSION'")
    result: Result = cli("import", copy, "--run", "future", "--gpu", "h100")
    assert result.code == 1
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert "export schema 4.0.0: hroofline reads schema 3.x" in result.err
    assert not (cli.store / "runs").exists() or not any((cli.store / "runs").iterdir())
