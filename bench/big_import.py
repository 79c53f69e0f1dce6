"""Benchmark: a 1,000,000-launch wide ncu CSV, imported and summarised in bounded memory (issue 27).

Generates a wide ncu CSV (``ncu --page raw --csv``: a header row, a units row, one row per launch) from the
real column set: the identity columns (``ID`` ... ``CC``) and device attributes of the real ncu 2026.2 raw
export ``../shared/fixtures/ncu/rtxpro6000_bf16_proj_gemm_ncu2026_raw.csv`` (an RTX PRO 6000 Blackwell, its two
real kernels and their launch shapes), plus every metric the hierarchical metric set collects on Blackwell
(``metrics/hierarchical.toml`` ``[collect]``: common, roofs, blackwell), every field quoted and numbers with
thousands separators as ncu writes them. Values are plausible for those kernels and vary from launch to launch.

Then, each in its own subprocess so that peak memory (max RSS, by ``os.wait4``) is per measurement:

* ``hroofline import FILE --run big --store STORE``: wall time and peak RSS (limit 2 GB, 2,000 MB);
* ``hroofline summary big --store STORE``: wall time and peak RSS (limits 3 s and 1 GB, 1,000 MB).

Prints the figures and their ratios to the limits, then ``PASS`` or ``FAIL`` with the reasons; exits 1 on
FAIL. ``--launches N`` shrinks the run for a quick check (the limits stay those of the full run).

Run as ``make bench`` or ``.venv/bin/python bench/big_import.py [--launches N] [--workdir DIR]``.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_speed import BIN, in_workdir, log, quote, run_child  # the same child runs and log as import_speed

REPO = Path(__file__).resolve().parent.parent
RAW_CSV = REPO.parent / "shared" / "fixtures" / "ncu" / "rtxpro6000_bf16_proj_gemm_ncu2026_raw.csv"
METRICS_TOML = REPO / "metrics" / "hierarchical.toml"
HROOFLINE = BIN / "hroofline"
IDENTITY_COLUMNS = 11  # "ID" ... "CC" in ncu's raw page
DEVICE_ATTRIBUTES = (
    "device__attribute_clock_rate",
    "device__attribute_display_name",
    "device__attribute_global_memory_bus_width",
    "device__attribute_l2_cache_size",
    "device__attribute_l2s_count",
    "device__attribute_memory_clock_rate",
    "device__attribute_multiprocessor_count",
    "device__attribute_num_tex_per_multiprocessor",
)
VARIANTS = 97  # distinct value sets per kernel: launches repeat them with their own IDs
MAX_IMPORT_MB = 2000.0
MAX_SUMMARY_MB = 1000.0
MAX_SUMMARY_S = 3.0


# ---------------------------------------------------------------- building the input


def collected_metrics() -> list[str]:
    collect = tomllib.loads(METRICS_TOML.read_text())["collect"]
    return list(dict.fromkeys([*collect["common"], *collect["roofs"], *collect["blackwell"]]))


def unit_of(metric: str) -> str:
    if metric == "gpu__time_duration.sum":
        return "ns"
    if metric.endswith(".per_second"):
        return "cycle/nsecond"
    if "_bytes" in metric:
        return "byte/cycle" if metric.endswith(".peak_sustained") else "byte"
    if "cycles" in metric or "writeback_active" in metric:
        return "cycle"
    if "inst_executed" in metric:
        return "inst/cycle" if metric.endswith(".peak_sustained") else "inst"
    return ""


# Per-cycle peaks of the whole RTX PRO 6000 (188 SMs, 96 L2 slices) and unit clocks in cycle/nsecond.
PEAKS = {
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained": 376.0,
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained": 24064.0,
    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained": 24064.0,
    "dram__bytes.sum.peak_sustained": 1024.0,
    "lts__t_bytes.sum.peak_sustained": 6144.0,
    "l1tex__t_bytes.sum.peak_sustained": 24064.0,
    "l1tex__lsu_writeback_active.sum.peak_sustained": 188.0,
    "sm__cycles_elapsed.avg.per_second": 2.35,
    "dram__cycles_elapsed.avg.per_second": 1.75,
    "lts__cycles_elapsed.avg.per_second": 2.35,
    "l1tex__cycles_elapsed.avg.per_second": 2.35,
}


def ncu_number(value: float) -> str:
    """As ncu prints it: thousands separators, two decimals where the value is not whole."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def metric_value(metric: str, time_ns: float, gemm: bool, scale: float) -> str:
    if metric in PEAKS:
        return ncu_number(PEAKS[metric])
    cycles = time_ns * 2.35
    if metric == "gpu__time_duration.sum":
        return ncu_number(round(time_ns))
    if metric in ("sm__cycles_elapsed.avg", "l1tex__lsu_writeback_active.sum"):
        return ncu_number(round(cycles * (1.0 if "elapsed" in metric else 40.0), 2))
    if "tensor" in metric:
        return ncu_number(round(2.1e9 * scale)) if gemm and "bf16_dst_fp32" in metric else "0"
    if "inst_executed_op_f" in metric:
        return ncu_number(round((1.0e5 if gemm else 3.3e5) * scale))
    if "inst_executed_op" in metric:
        return "0"
    if metric == "dram__bytes.sum":
        return ncu_number(round(3.3e5 * scale))
    if metric == "lts__t_bytes.sum":
        return ncu_number(round((1.43e8 if gemm else 1.1e7) * scale))
    if metric == "l1tex__t_bytes.sum":
        return ncu_number(round((2.9e8 if gemm else 2.2e7) * scale))
    return "0"


def build_wide_csv(path: Path, launches: int) -> None:
    with RAW_CSV.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header, real_launches = rows[0], rows[2:]
    position = {name: i for i, name in enumerate(header)}
    metrics = collected_metrics()
    columns = header[:IDENTITY_COLUMNS] + list(DEVICE_ATTRIBUTES) + metrics
    units = [""] * IDENTITY_COLUMNS + [rows[1][position[a]] for a in DEVICE_ATTRIBUTES] + [unit_of(m) for m in metrics]
    templates = []  # per (kernel, variant): the row without its ID field, '"<pid>",...\n'
    for variant in range(VARIANTS):
        scale = 1.0 + variant / VARIANTS
        for real in real_launches:
            gemm = "gemm" in real[position["Kernel Name"]]
            time_ns = (31_328.0 if gemm else 5_536.0) * scale
            fields = real[1:IDENTITY_COLUMNS] + [real[position[a]] for a in DEVICE_ATTRIBUTES]
            fields += [metric_value(m, time_ns, gemm, scale) for m in metrics]
            templates.append("," + quote(fields) + "\n")
    log(f"building {path}: {launches} launches, {len(columns)} columns ({len(metrics)} metrics)")
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write(quote(columns) + "\n")
        out.write(quote(units) + "\n")
        chunk: list[str] = []
        for launch_id in range(launches):
            chunk.append(f'"{launch_id}"' + templates[launch_id % len(templates)])
            if len(chunk) >= 50_000:
                out.write("".join(chunk))
                chunk.clear()
        out.write("".join(chunk))
        out.flush()
        os.fsync(out.fileno())


# ---------------------------------------------------------------- measuring


def benchmark(args: argparse.Namespace, workdir: Path) -> int:
    if not RAW_CSV.is_file():
        print(f"FAIL: needs the real wide ncu CSV {RAW_CSV} (../shared beside the checkout)")
        return 1
    path = workdir / f"wide-{args.launches}.csv"
    start = time.perf_counter()
    build_wide_csv(path, args.launches)
    size_mb = path.stat().st_size / 1e6
    log(f"  {size_mb:.0f} MB in {time.perf_counter() - start:.1f} s")
    store = workdir / "store"
    shutil.rmtree(store, ignore_errors=True)
    log("hroofline import")
    import_s, import_mb, _ = run_child([str(HROOFLINE), "import", str(path), "--run", "big", "--store", str(store)])
    log(f"  {import_s:.2f} s, peak {import_mb:.0f} MB")
    log("hroofline summary")
    summary_s, summary_mb, output = run_child([str(HROOFLINE), "summary", "big", "--store", str(store)])
    log(f"  {summary_s:.2f} s, peak {summary_mb:.0f} MB")
    if args.show:
        print(output)
    print(f"input: {args.launches} launches, wide ncu CSV, {size_mb:.0f} MB")
    print(f"{'measurement':<20}{'s':>8}{'peak MB':>10}   limits")
    print(f"{'hroofline import':<20}{import_s:>8.2f}{import_mb:>10.0f}   peak {MAX_IMPORT_MB:.0f} MB")
    limits = f"{MAX_SUMMARY_S:.0f} s, {MAX_SUMMARY_MB:.0f} MB"
    print(f"{'hroofline summary':<20}{summary_s:>8.2f}{summary_mb:>10.0f}   {limits}")
    print(
        f"ratios to the limits: import memory {import_mb / MAX_IMPORT_MB:.2f}, summary memory "
        f"{summary_mb / MAX_SUMMARY_MB:.2f}, summary time {summary_s / MAX_SUMMARY_S:.2f} (each must be < 1)"
    )
    failures = []
    if import_mb >= MAX_IMPORT_MB:
        failures.append(f"the import peaks at {import_mb:.0f} MB (limit {MAX_IMPORT_MB:.0f} MB)")
    if summary_mb >= MAX_SUMMARY_MB:
        failures.append(f"summary peaks at {summary_mb:.0f} MB (limit {MAX_SUMMARY_MB:.0f} MB)")
    if summary_s >= MAX_SUMMARY_S:
        failures.append(f"summary takes {summary_s:.2f} s (limit {MAX_SUMMARY_S:.0f} s)")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("PASS")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", type=int, default=1_000_000, help="launches in the CSV (default 1000000)")
    parser.add_argument("--workdir", type=Path, help="keep the CSV and the store here (default: a temp dir, removed)")
    parser.add_argument("--show", action="store_true", help="print summary's output too")
    args = parser.parse_args(argv)
    return in_workdir(args.workdir, "hroofline-big-", lambda workdir: benchmark(args, workdir))


if __name__ == "__main__":
    sys.exit(main())
