"""Benchmark: the roofline chart of a run of 100,000 launches, against just reading that run.

Builds a run of 100,000 launches by importing the long-format CSV that ``bench/import_speed.py`` makes
from the real DeepCAM rows (``../shared/fixtures/deepcam/pt-O1-Adam-fw``), then, each best of 3:

* baseline: ``pyarrow.parquet.read_table`` of the run's launches file (the data any chart must read);
* hroofline in-process: load the run, group it per kernel name and phase, place it against its roofs,
  build the Altair spec and write the self-contained HTML;
* hroofline CLI: ``hroofline chart RUN --out chart.html`` wall time, interpreter start-up included.

Targets (from the issue): the HTML chart is under 5 MB and the CLI takes under 10 s. Prints the times, the
ratios to the baseline, the file size, then ``PASS`` or ``FAIL``; exits 1 on FAIL.

Run as ``make bench`` or ``.venv/bin/python bench/chart_scale.py [--launches N] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_speed import FIXTURE, build_long_csv, log

BIN = Path(sys.executable).parent
MAX_HTML_BYTES = 5_000_000
MAX_CLI_SECONDS = 10.0
RUN = "bench"


def best_of(repeat: int, action: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def chart_in_process(store: Path, out: Path) -> None:
    from hroofline.cli.main import main

    if main(["chart", RUN, "--out", str(out), "--store", str(store)]) != 0:
        raise SystemExit("hroofline chart failed")


def chart_cli(store: Path, out: Path) -> None:
    subprocess.run(
        [str(BIN / "hroofline"), "chart", RUN, "--out", str(out), "--store", str(store)],
        check=True,
        capture_output=True,
    )


def benchmark(launches: int, repeat: int, workdir: Path) -> int:
    if not FIXTURE.is_dir():
        print(f"FAIL: needs the DeepCAM data in {FIXTURE}", file=sys.stderr)
        return 1
    source = workdir / "launches.csv"
    store = workdir / "store"
    log(f"building a {launches:,}-launch CSV from {FIXTURE}")
    build_long_csv(source, launches)
    log("importing it")
    subprocess.run(
        [
            str(BIN / "hroofline"),
            "import",
            str(source),
            "--run",
            RUN,
            "--gpu",
            "v100",
            "--phase",
            "forward",
            "--store",
            str(store),
        ],
        check=True,
        capture_output=True,
    )
    source.unlink()
    launches_file = next((store / "runs" / f"run={RUN}").glob("launches-*.parquet"))
    rows = pq.read_metadata(launches_file).num_rows
    if rows != launches:
        print(f"FAIL: the run holds {rows} launches, not {launches}", file=sys.stderr)
        return 1
    html = workdir / "chart.html"
    log("timing")
    baseline = best_of(repeat, lambda: pq.read_table(launches_file))
    in_process = best_of(repeat, lambda: chart_in_process(store, html))
    cli = best_of(repeat, lambda: chart_cli(store, html))
    size = html.stat().st_size
    print(f"run: {rows:,} launches, parquet {launches_file.stat().st_size / 1e6:.1f} MB")
    print(f"{'baseline: pyarrow.parquet.read_table':<44} {baseline:8.3f} s")
    print(f"{'hroofline chart, in-process':<44} {in_process:8.3f} s   ratio {in_process / baseline:7.1f}")
    print(f"{'hroofline chart, CLI wall time':<44} {cli:8.3f} s   ratio {cli / baseline:7.1f}")
    print(f"{'HTML size':<44} {size / 1e6:8.2f} MB")
    failures = []
    if size >= MAX_HTML_BYTES:
        failures.append(f"HTML is {size / 1e6:.2f} MB, not under {MAX_HTML_BYTES / 1e6:.0f} MB")
    if cli >= MAX_CLI_SECONDS:
        failures.append(f"CLI took {cli:.2f} s, not under {MAX_CLI_SECONDS:.0f} s")
    print("FAIL: " + "; ".join(failures) if failures else "PASS: under 5 MB and under 10 s")
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hroofline-chart-bench-") as folder:
        return benchmark(args.launches, args.repeat, Path(folder))


if __name__ == "__main__":
    sys.exit(main())
