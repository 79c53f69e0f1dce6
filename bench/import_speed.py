"""Benchmark: importing a large long-format ncu CSV, against pyarrow just reading it.

Builds a long-format ("--page details") ncu CSV of 100,000 launches x 12 metrics (1.2 M rows) by
replicating the real rows of Yang et al.'s DeepCAM logs in ``../shared/fixtures/deepcam/pt-O1-Adam-fw``
with fresh consecutive launch IDs, every field quoted and a ``==PROF==`` line before the header, as ncu
writes it. Then, each in its own subprocess so that peak memory (max RSS) is per measurement:

* baseline: ``pyarrow.csv.read_csv`` on the file with default options (the preamble skipped), the
  time of that call alone, best of 3 (after one untimed read that puts the file in the page cache);
* hroofline: ``hroofline import FILE --run bench --store NEW_STORE --gpu v100`` via the CLI, wall
  time of the whole command (interpreter start, reading, formulas, writing the store), best of 3;
* hroofline in-process: ``import_source`` plus writing the run into a new store, best of 3.

The three take turns (pyarrow, CLI, in-process; --repeat rounds) so that a noisy machine hits them alike.

Targets (issue 27): the CLI's wall time (interpreter start-up, reading, formulas, writing the store) is at
most 2x the pyarrow read time, both measured in this one run, and the CLI's peak memory stays under 1 GB
(1,000 MB). The in-process import is printed beside them for information. The imported run must hold
100,000 launches. Prints a table and the ratios, then ``PASS`` or ``FAIL`` with the reasons; exits 1 on
FAIL. Beside each wall time the table has the CPU seconds (user + system, all threads) of the same runs and their
ratio, for information: on a machine that other jobs share, CPU time moves much less than wall time (the pyarrow
read's threads wait for the cores; under a load of 6 on 2 cores its wall time went from 1.6 s to 4.5 s).
Progress goes to stderr. ``--profile`` adds a cProfile of the in-process import (on stderr).

Run as ``make bench`` or ``.venv/bin/python bench/import_speed.py [--launches N] [--repeat N] [--profile]``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO.parent / "shared" / "fixtures" / "deepcam" / "pt-O1-Adam-fw"
BIN = Path(sys.executable).parent
HEADER_START = '"ID","Process ID",'
PREAMBLE = "==PROF== Connected to process 64848 (/usr/bin/python3.7)\n"
PREAMBLE_LINES = 1
METRICS_PER_LAUNCH = 12
MAX_RATIO = 2.0
MAX_PEAK_MB = 1000.0


@dataclass
class Measurement:
    label: str
    seconds: list[float]
    peak_mb: list[float]
    cpu_seconds: list[float] = field(default_factory=list)  # user + system, all threads

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def best_cpu(self) -> float:
        return min(self.cpu_seconds)

    @property
    def peak(self) -> float:
        return max(self.peak_mb)


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- building the input


def read_fixture_rows(folder: Path) -> tuple[list[str], dict[int, list[list[str]]]]:
    """The CSV header and, per launch ID, its rows from every ``out.<metric>.gz`` log."""
    files = sorted(folder.glob("out.*.gz"))
    if len(files) != METRICS_PER_LAUNCH:
        raise SystemExit(f"expected {METRICS_PER_LAUNCH} out.*.gz files in {folder}, found {len(files)}")
    header: list[str] = []
    by_launch: dict[int, list[list[str]]] = {}
    for path in files:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        start = text.find("\n" + HEADER_START)
        if start < 0:
            raise SystemExit(f"{path}: no ncu CSV header")
        reader = csv.reader(io.StringIO(text[start + 1 :]))
        header = next(reader)
        for row in reader:
            if row:
                by_launch.setdefault(int(row[0]), []).append(row)
    return header, by_launch


def quote(fields: Sequence[str]) -> str:
    return ",".join('"' + field.replace('"', '""') + '"' for field in fields)


def build_long_csv(path: Path, launches: int) -> int:
    """Write the benchmark CSV; return the number of data rows."""
    header, by_launch = read_fixture_rows(FIXTURE)
    metric_column = header.index("Metric Name")
    # Per real launch, its rows in ncu's order (by metric name) without the ID field: '"<rest>\n...'.
    templates: list[list[str]] = []
    for launch_id in sorted(by_launch):
        rows = sorted(by_launch[launch_id], key=lambda row: row[metric_column])
        if len(rows) != METRICS_PER_LAUNCH:
            raise SystemExit(f"launch {launch_id} has {len(rows)} metric rows, expected {METRICS_PER_LAUNCH}")
        # Each log comes from its own profiled process: give all rows of a launch the identity fields
        # (process ID, kernel time, ...) of its first row, as one ncu run writes them.
        identity = rows[0][1:metric_column]
        templates.append(["," + quote(identity + row[metric_column:]) + "\n" for row in rows])
    log(f"building {path}: {launches} launches from {len(templates)} real ones x {METRICS_PER_LAUNCH} metrics")
    rows_written = 0
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write(PREAMBLE)
        out.write(quote(header) + "\n")
        chunk: list[str] = []
        for launch_id in range(launches):
            id_field = f'"{launch_id}"'
            chunk.extend(id_field + rest for rest in templates[launch_id % len(templates)])
            if len(chunk) >= 120_000:
                out.write("".join(chunk))
                rows_written += len(chunk)
                chunk.clear()
        out.write("".join(chunk))
        rows_written += len(chunk)
        out.flush()
        os.fsync(out.fileno())  # so that write-back does not run during the timed reads
    return rows_written


# ---------------------------------------------------------------- workers (run in a subprocess)


def worker_pyarrow(path: Path) -> dict[str, object]:
    import pyarrow.csv as pacsv

    start, cpu_start = time.perf_counter(), time.process_time()
    table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(skip_rows=PREAMBLE_LINES))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {"seconds": seconds, "cpu_seconds": cpu, "rows": table.num_rows}


def worker_library(path: Path) -> dict[str, object]:
    """The import itself, in-process: read, formulas, and the atomic write of the run into a new store."""
    from hroofline.importers.build import ImportOptions, import_source
    from hroofline.roofs.catalog import resolve_gpu
    from hroofline.roofs.metricset import load_metric_set
    from hroofline.store.runs import RunStore

    with tempfile.TemporaryDirectory(prefix="hroofline-bench-") as store_dir:
        start, cpu_start = time.perf_counter(), time.process_time()
        imported = import_source(path, ImportOptions(gpu=resolve_gpu("v100")), load_metric_set())
        RunStore(Path(store_dir)).add_sources("bench", [imported], gpu="v100-sxm2")
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {"seconds": seconds, "cpu_seconds": cpu, "rows": len(imported.launches)}


def worker_profile(path: Path) -> dict[str, object]:
    import cProfile
    import pstats

    from hroofline.importers.build import ImportOptions, import_source
    from hroofline.roofs.catalog import resolve_gpu
    from hroofline.roofs.metricset import load_metric_set

    options, metric_set = ImportOptions(gpu=resolve_gpu("v100")), load_metric_set()
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(import_source, path, options, metric_set)
    seconds = time.perf_counter() - start
    stats = pstats.Stats(profiler, stream=sys.stderr)
    stats.sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(20)
    return {"seconds": seconds, "rows": 0}


WORKERS: dict[str, Callable[[Path], dict[str, object]]] = {
    "pyarrow": worker_pyarrow,
    "library": worker_library,
    "profile": worker_profile,
}


# ---------------------------------------------------------------- the parent


def run_child(command: Sequence[str], show_stderr: bool = False) -> tuple[float, float, str]:
    """Run a command; return its wall seconds, its peak RSS in MB (its own, by wait4) and its stdout."""
    seconds, peak, stdout, _ = run_child_with_cpu(command, show_stderr)
    return seconds, peak, stdout


def run_child_with_cpu(command: Sequence[str], show_stderr: bool = False) -> tuple[float, float, str, float]:
    """:func:`run_child`, and the command's CPU seconds (user + system, all threads, by wait4)."""
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=stdout, stderr=None if show_stderr else stderr, cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        if process.returncode != 0:
            sys.stderr.write(stderr.read().decode("utf-8", "replace"))
            raise SystemExit(f"FAIL: {' '.join(command)} exited with status {process.returncode}")
        cpu = usage.ru_utime + usage.ru_stime
        return seconds, usage.ru_maxrss * 1024 / 1e6, stdout.read().decode("utf-8", "replace"), cpu


def measure_worker(kind: str, path: Path, expected_rows: int, into: Measurement, attempt: int) -> None:
    """One run of an in-process worker: its own timing of the call, and the process's peak RSS."""
    _, peak, stdout = run_child([sys.executable, __file__, "--worker", kind, str(path)])
    result = json.loads(stdout.strip().splitlines()[-1])
    if result["rows"] != expected_rows:
        raise SystemExit(f"FAIL: {into.label} gave {result['rows']} rows, expected {expected_rows}")
    into.seconds.append(float(result["seconds"]))
    into.cpu_seconds.append(float(result["cpu_seconds"]))
    into.peak_mb.append(peak)
    log(f"  {into.label} #{attempt}: {into.seconds[-1]:.2f} s, cpu {into.cpu_seconds[-1]:.2f} s, peak {peak:.0f} MB")


def measure_cli(path: Path, workdir: Path, launches: int, into: Measurement, attempt: int) -> None:
    """One ``hroofline import`` into a new store: wall time and peak RSS of the whole command."""
    store = workdir / f"store-{attempt}"
    shutil.rmtree(store, ignore_errors=True)
    command = [str(BIN / "hroofline"), "import", str(path), "--run", "bench", "--store", str(store), "--gpu", "v100"]
    seconds, peak, _, cpu = run_child_with_cpu(command)
    into.seconds.append(seconds)
    into.cpu_seconds.append(cpu)
    into.peak_mb.append(peak)
    log(f"  {into.label} #{attempt}: {seconds:.2f} s, cpu {cpu:.2f} s, peak {peak:.0f} MB")
    if attempt == 1:
        check_store(store, launches)
    shutil.rmtree(store, ignore_errors=True)


def check_store(store: Path, launches: int) -> None:
    command = [str(BIN / "hroofline"), "summary", "bench", "--store", str(store), "--format", "json"]
    _, _, stdout = run_child(command)
    kernels = json.loads(stdout)["total"]["kernels"]
    if kernels != launches:
        raise SystemExit(f"FAIL: the imported run has {kernels} launches, expected {launches}")
    log(f"  check: the imported run has {kernels} launches")


def report(baseline: Measurement, cli: Measurement, library: Measurement) -> list[str]:
    """Print the table; return the reasons for failing (empty on success)."""
    rows = [("measurement", "best s", "x pyarrow", "best cpu s", "cpu x pyarrow", "peak MB")]
    for item in (baseline, cli, library):
        times = (item.best, item.best / baseline.best, item.best_cpu, item.best_cpu / baseline.best_cpu)
        rows.append((item.label, *(f"{value:.2f}" for value in times), f"{item.peak:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join([row[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True)])
        )
    # The measure: what a user waits for (the whole command) against a plain pyarrow read of the file.
    ratio = cli.best / baseline.best
    print(f"ratio hroofline import (CLI wall) / pyarrow read: {ratio:.2f} (target <= {MAX_RATIO:.1f})")
    print(f"ratio of the in-process import: {library.best / baseline.best:.2f} (for information)")
    # CPU seconds (all threads) move less than wall seconds when other jobs share the cores: for information.
    print(f"ratio of CPU time, hroofline import (CLI) / pyarrow read: {cli.best_cpu / baseline.best_cpu:.2f}")
    print(f"peak memory of hroofline import (CLI): {cli.peak:.0f} MB (target < {MAX_PEAK_MB:.0f} MB)")
    failures = []
    if ratio > MAX_RATIO:
        failures.append(f"hroofline import takes {ratio:.2f}x the pyarrow read time (limit {MAX_RATIO:.1f}x)")
    if cli.peak >= MAX_PEAK_MB:
        failures.append(f"hroofline import peaks at {cli.peak:.0f} MB (limit {MAX_PEAK_MB:.0f} MB)")
    return failures


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", type=int, default=100_000, help="launches in the CSV (default 100000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement, the best counts (default 3)")
    parser.add_argument("--workdir", type=Path, help="keep the CSV and stores here (default: a temp dir, removed)")
    parser.add_argument("--profile", action="store_true", help="also cProfile the in-process import (to stderr)")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("path", nargs="?", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def benchmark(args: argparse.Namespace, workdir: Path) -> int:
    if not FIXTURE.is_dir():
        print(f"FAIL: needs the DeepCAM data in {FIXTURE}")
        return 1
    path = workdir / f"long-{args.launches}x{METRICS_PER_LAUNCH}.csv"
    start = time.perf_counter()
    rows = build_long_csv(path, args.launches)
    log(f"  {rows} rows, {path.stat().st_size / 1e6:.0f} MB, in {time.perf_counter() - start:.1f} s")
    # An untimed read first, so that every timed run finds the file in the page cache; then the three
    # measurements take turns, so that the machine's ups and downs hit them alike.
    log("warm-up read (untimed)")
    run_child([sys.executable, __file__, "--worker", "pyarrow", str(path)])
    baseline = Measurement("pyarrow.csv.read_csv", [], [])
    cli = Measurement("hroofline import (CLI, wall)", [], [])
    library = Measurement("hroofline import (in-process)", [], [])
    for attempt in range(1, args.repeat + 1):
        log(f"round {attempt} of {args.repeat}")
        measure_worker("pyarrow", path, rows, baseline, attempt)
        measure_cli(path, workdir, args.launches, cli, attempt)
        measure_worker("library", path, args.launches, library, attempt)
    if args.profile:
        log("cProfile of import_source")
        run_child([sys.executable, __file__, "--worker", "profile", str(path)], show_stderr=True)
    print(
        f"input: {rows} rows ({args.launches} launches x {METRICS_PER_LAUNCH} metrics), "
        f"{path.stat().st_size / 1e6:.0f} MB; best of {args.repeat}"
    )
    failures = report(baseline, cli, library)
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("PASS")
    return 0


def in_workdir(workdir: Path | None, prefix: str, run: Callable[[Path], int]) -> int:
    """``run`` in ``workdir`` (kept), or in a temporary folder removed afterwards."""
    if workdir:
        workdir.mkdir(parents=True, exist_ok=True)
        return run(workdir)
    with tempfile.TemporaryDirectory(prefix=prefix) as temporary:
        return run(Path(temporary))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        result = WORKERS[args.worker](args.path)
        print(json.dumps(result))
        return 0
    return in_workdir(args.workdir, "hroofline-bench-", lambda workdir: benchmark(args, workdir))


if __name__ == "__main__":
    sys.exit(main())
