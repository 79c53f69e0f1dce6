"""Imports check their numbers at the door and bound their memory (issue 27, items 3 and 5).

Each test runs ``hroofline`` on a real ncu CSV from ../shared with one value edited (or on a made-up hostile
file), and checks the exit code and the one line said on stderr. The numbers are checked in this process (its
main(), with what Python warns shown as stderr shows it); the hostile files' reading runs as a program, for the
child's own peak memory (``os.wait4``) under a cap on its address space.
"""

from __future__ import annotations

import csv as csv_module
import gzip
import io
import json
import lzma
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import SHARED, main_status, need

TIME_PASS = SHARED / "fixtures" / "h100" / "gemm-calibration-groups-time-pass.csv"  # 10 launches, H100
TENSOR_CSV = SHARED / "fixtures" / "ncu" / "rtx5090_dsocr_cutlass_bf16_gemm_metrics.csv"  # 1 launch, RTX 5090
TIME_DRAM_CSV = SHARED / "fixtures" / "ncu" / "v100_gene_dgdxy_time_dram.csv"  # 8 launches, V100
MB = 1e6


@dataclass
class Ran:
    code: int
    out: str
    err: str
    peak_mb: float


# The child runs the CLI's main() behind this prologue: its address space capped, so that a regression (reading
# /dev/zero to the end) fails the test with a MemoryError instead of taking the machine's memory, and its own
# peak RSS (VmHWM) written when main() returns. ``os.wait4``'s ru_maxrss is no measure in a test: Linux carries
# the parent's high-water mark over exec, so a child of a big pytest worker reports the worker's peak.
CHILD = """
import os, resource, sys
limit = int(os.environ["HROOFLINE_TEST_ADDRESS_SPACE"])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from hroofline.cli.main import main
code = main(sys.argv[1:])
status = open("/proc/self/status").read()
open(os.environ["HROOFLINE_TEST_PEAK"], "w").write(status.split("VmHWM:")[1].split()[0])
sys.exit(code)
"""
ADDRESS_SPACE_LIMIT = 6 << 30


def hroofline(*args: object, timeout: float = 120.0) -> Ran:
    """``hroofline ARGS`` in its own process: exit code, output, and its own peak RSS."""
    with tempfile.TemporaryDirectory() as folder, open(os.devnull, "rb") as stdin:
        out_path, err_path, peak_path = (Path(folder) / name for name in ("out", "err", "peak"))
        env = {**os.environ, "HROOFLINE_TEST_ADDRESS_SPACE": str(ADDRESS_SPACE_LIMIT)}
        env["HROOFLINE_TEST_PEAK"] = str(peak_path)
        with out_path.open("wb") as out, err_path.open("wb") as err:
            command = [sys.executable, "-c", CHILD, *map(str, args)]
            process = subprocess.Popen(command, stdin=stdin, stdout=out, stderr=err, env=env)
            deadline = time.monotonic() + timeout
            while process.poll() is None:
                if time.monotonic() > deadline:
                    process.kill()
                    process.wait()
                    pytest.fail(f"hroofline {' '.join(map(str, args))} ran past {timeout:.0f} s")
                time.sleep(0.05)
        peak = int(peak_path.read_text()) * 1024 / MB if peak_path.exists() else float("inf")
        return Ran(process.returncode, out_path.read_text(), err_path.read_text(), peak)


def hroofline_here(*args: object) -> Ran:
    """``hroofline ARGS`` by its main() in this process (a program's start, about a second, saved): exit code,
    output, and every warning Python raised written as stderr would show it (pytest would record them instead)."""
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(record=True) as raised, redirect_stdout(out), redirect_stderr(err):
        warnings.simplefilter("always")
        code = main_status([str(arg) for arg in args])
    shown = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in raised)
    return Ran(code, out.getvalue(), err.getvalue() + shown, math.nan)


def import_into(store: Path, source: Path, *extra: str) -> Ran:
    return hroofline_here("import", source, "--run", "r", "--store", store, *extra)


def import_as_program(store: Path, source: Path, *extra: str) -> Ran:
    return hroofline("import", source, "--run", "r", "--store", store, *extra)


def summary(store: Path) -> dict:
    ran = hroofline_here("summary", "r", "--store", store, "--format", "json")
    assert ran.code == 0, ran.err
    return json.loads(ran.out)


def assert_refused(ran: Ran, expected: str) -> None:
    assert ran.code == 1, ran
    assert ran.err.count("\n") == 1, ran.err
    assert ran.err.startswith("hroofline: error: "), ran.err
    assert expected in ran.err, ran.err
    assert "Traceback" not in ran.err and "internal error" not in ran.err, ran.err


def lines_with(text: str, fragment: str) -> list[str]:
    return [line for line in text.splitlines() if fragment in line]


def edit_value(source: Path, metric: str, new: str, tmp_path: Path, count: int = 1) -> Path:
    """A copy of a long-format ncu CSV with the value of ``metric`` of its first ``count`` launches replaced."""
    pattern = re.compile(rf'("{re.escape(metric)}","[^"]*",)"[^"]*"')
    text, done = pattern.subn(rf'\1"{new}"', need(source).read_text(), count=count)
    assert done == count, f"{source} has fewer than {count} {metric} rows"
    path = tmp_path / f"edited-{source.name}"
    path.write_text(text)
    return path


def finite_totals(data: dict) -> list[float]:
    numbers = [v for v in data["total"].values() if isinstance(v, int | float)]
    assert all(math.isfinite(v) for v in numbers), data["total"]
    return numbers


# ---------------------------------------------------------------- numbers at the door


def test_a_negative_time_is_left_unknown_and_said(tmp_path: Path) -> None:
    source = edit_value(TIME_PASS, "gpu__time_duration.sum", "-4,878,591", tmp_path)
    ran = import_into(tmp_path / "store", source, "--gpu", "h100")
    assert ran.code == 0, ran.err
    said = lines_with(ran.err, "negative gpu__time_duration.sum")
    assert len(said) == 1, ran.err
    assert "1 launch had a negative gpu__time_duration.sum: left unknown" in said[0]
    data = summary(tmp_path / "store")
    assert data["total"]["time_s"] > 0
    assert all(v >= 0 for v in finite_totals(data))


def test_a_negative_tensor_count_is_left_unknown_and_said(tmp_path: Path) -> None:
    source = edit_value(TENSOR_CSV, "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "-12,532,580,352", tmp_path)
    ran = import_into(tmp_path / "store", source)
    assert ran.code == 0, ran.err
    said = lines_with(ran.err, "negative sm__ops_path_tensor_src_bf16_dst_fp32.sum")
    assert len(said) == 1 and "1 launch had" in said[0] and "left unknown" in said[0], ran.err
    data = summary(tmp_path / "store")
    assert data["total"]["flops_tensor_bf16"] is None  # unknown, not -12.5 TFLOP
    assert all(v >= 0 for v in finite_totals(data))


def test_huge_values_do_not_overflow_the_totals(tmp_path: Path) -> None:
    source = edit_value(TIME_DRAM_CSV, "dram__bytes.sum", "1e308", tmp_path, count=3)
    ran = import_into(tmp_path / "store", source, "--gpu", "v100")
    assert ran.code == 0, ran.err
    said = lines_with(ran.err, "dram__bytes.sum")
    assert len(said) == 1, ran.err
    assert "3 launches had an implausibly large dram__bytes.sum (over 1e21): left unknown" in said[0]
    assert "RuntimeWarning" not in ran.err and "overflow" not in ran.err
    data = summary(tmp_path / "store")
    finite_totals(data)
    assert 0 < data["total"]["bytes_hbm"] < 1e21


def test_a_time_that_is_no_number_is_said(tmp_path: Path) -> None:
    source = edit_value(TIME_PASS, "gpu__time_duration.sum", "abc", tmp_path, count=2)
    ran = import_into(tmp_path / "store", source, "--gpu", "h100")
    assert ran.code == 0, ran.err
    said = lines_with(ran.err, "gpu__time_duration.sum")
    assert len(said) == 1, ran.err
    assert "2 launches had a non-numeric gpu__time_duration.sum ('abc'): left unknown" in said[0]


def test_inf_text_is_said(tmp_path: Path) -> None:
    source = edit_value(TIME_DRAM_CSV, "dram__bytes.sum", "inf", tmp_path)
    ran = import_into(tmp_path / "store", source, "--gpu", "v100")
    assert ran.code == 0, ran.err
    said = lines_with(ran.err, "1 launch had a non-finite dram__bytes.sum (inf or nan): left unknown")
    assert len(said) == 1, ran.err
    finite_totals(summary(tmp_path / "store"))


def test_a_file_where_nothing_valid_remains_is_refused(tmp_path: Path) -> None:
    text = need(TIME_DRAM_CSV).read_text()
    broken = re.sub(r'("(?:dram__bytes\.sum|sm__cycles_elapsed\.avg[.a-z_]*)","[^"]*",)"([^"]*)"', r'\1"-\2"', text)
    source = tmp_path / "all-negative.csv"
    source.write_text(broken)
    ran = import_into(tmp_path / "store", source, "--gpu", "v100")
    assert_refused(ran, "no valid time, FLOP or byte count remains")
    assert "8 launches had a negative dram__bytes.sum" in ran.err
    assert not (tmp_path / "store" / "run=r").exists()


# ---------------------------------------------------------------- bounded reading


def test_a_gzip_bomb_is_refused_in_little_memory(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.csv.gz"
    # 1 GB of zeros, about 1 MB compressed: one member of 1 MB written 1,000 times (gzip reads concatenated
    # members as one stream), not 1 GB compressed here
    bomb.write_bytes(gzip.compress(bytes(1 << 20), compresslevel=9) * 1000)
    assert bomb.stat().st_size < 1.1 * MB
    ran = import_as_program(tmp_path / "store", bomb)
    assert_refused(ran, "binary data")
    assert ran.peak_mb < 1000, f"peak {ran.peak_mb:.0f} MB"


def test_decompression_stops_at_its_limit(tmp_path: Path) -> None:
    """Text that expands past 1,000x its compressed size (and past 256 MB) is refused, not held."""
    bomb = tmp_path / "bomb.csv.xz"
    # 320 MB of text, under 100 KB compressed: one stream of 1 MB written 320 times (xz reads concatenated streams)
    bomb.write_bytes(lzma.compress(b"a" * (1 << 20), preset=1) * 320)
    ran = import_as_program(tmp_path / "store", bomb)
    assert_refused(ran, "refused as a decompression bomb")
    assert ran.peak_mb < 1000, f"peak {ran.peak_mb:.0f} MB"


def test_an_endless_source_is_refused(tmp_path: Path) -> None:
    ran = hroofline("import", "/dev/zero", "--run", "r", "--store", tmp_path / "store", timeout=60)
    assert_refused(ran, "not a regular file")
    assert ran.peak_mb < 1000, f"peak {ran.peak_mb:.0f} MB"


def test_compressed_real_sources_still_import(tmp_path: Path) -> None:
    """The real gzip logs (50-87x) and the shared .ncu-rep.xz reports open within the bounds."""
    folder = need(SHARED / "fixtures" / "deepcam" / "pt-O1-Adam-opt")  # the most compressed logs
    ran = import_as_program(tmp_path / "store", folder, "--gpu", "v100", "--phase", "opt")
    assert ran.code == 0, ran.err
    report = need(SHARED / "fixtures" / "h100" / "gemm-calibration-base-clock.ncu-rep.xz")
    ran = hroofline("import", report, "--run", "gemm", "--store", tmp_path / "store")
    assert ran.code == 0, ran.err


def test_a_trace_with_broken_durations_says_so(tmp_path: Path) -> None:
    """A profiler trace whose kernel has a negative duration, and another event a duration that is no number: the
    kernel's time is left unknown and the event left out, each counted in one line; the rest imports."""
    trace_path = need(SHARED / "fixtures" / "kineto" / "kineto_a100_ddp2_nccl_rank0.json.gz")
    document = json.loads(gzip.decompress(trace_path.read_bytes()))
    kernels = [e for e in document["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"]
    kernels[0]["dur"] = -5
    kernels[1]["dur"] = "abc"
    source = tmp_path / "broken_rank0.json"
    source.write_text(json.dumps(document))
    ran = import_into(tmp_path / "store", source, "--gpu", "a100")
    assert ran.code == 0, ran.err
    assert len(lines_with(ran.err, "1 GPU events had a negative duration: their time left unknown")) == 1, ran.err
    assert len(lines_with(ran.err, "1 events had a ts or dur that is not a finite number: left out")) == 1, ran.err
    data = summary(tmp_path / "store")
    whole = tmp_path / "whole_rank0.json"
    whole.write_bytes(gzip.decompress(trace_path.read_bytes()))
    assert import_into(tmp_path / "whole", whole, "--gpu", "a100").code == 0
    before = summary(tmp_path / "whole")
    assert data["total"]["kernels"] == before["total"]["kernels"] - 1  # the event with no duration left out
    assert 0 < data["total"]["time_s"] < before["total"]["time_s"]  # the kernel of unknown time not summed


@pytest.mark.parametrize(
    ("name", "gpu"), [("rtx3070_manual_nvtx_daxpy.ncu-rep", "rtx3070"), ("v100_gene_dgdxy_time_dram.csv", "v100")]
)
def test_zstd_compressed_sources_import_as_the_plain_file(tmp_path: Path, name: str, gpu: str) -> None:
    """``.ncu-rep.zst`` (and any zstd file) opens as .gz and .xz do: the same run as from the plain file."""
    import pyarrow as pa

    plain = need(SHARED / "fixtures" / "ncu" / name)
    packed = tmp_path / f"{name}.zst"
    with pa.CompressedOutputStream(str(packed), "zstd") as stream:
        stream.write(plain.read_bytes())
    assert packed.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    assert import_into(tmp_path / "plain", plain, "--gpu", gpu).code == 0
    ran = import_into(tmp_path / "packed", packed, "--gpu", gpu)
    assert ran.code == 0, ran.err
    plain_totals, packed_totals = summary(tmp_path / "plain")["total"], summary(tmp_path / "packed")["total"]
    assert packed_totals == plain_totals and packed_totals["kernels"] > 0


def test_a_console_log_that_starts_with_a_process_line_imports(tmp_path: Path) -> None:
    """ncu's console output saved with `> log` can begin with `[3154732] bench@127.0.0.1`: not JSON, a log."""
    plain = need(SHARED / "fixtures" / "ncu" / "a100_vgg11_train_ncu_console.txt")
    prefixed = tmp_path / "log.txt"
    prefixed.write_text("[3154732] bench@127.0.0.1\n" + plain.read_text())
    assert import_into(tmp_path / "plain", plain).code == 0
    ran = import_into(tmp_path / "prefixed", prefixed)
    assert ran.code == 0, ran.err
    assert summary(tmp_path / "prefixed")["total"] == summary(tmp_path / "plain")["total"]


def test_launches_with_only_unused_metrics_are_said_as_such(tmp_path: Path) -> None:
    """A launch that holds only metrics hroofline does not use (another section, another ncu run pasted in) is
    left out with what it held named, not as a launch with no values (a failed replay)."""
    lines = need(TIME_DRAM_CSV).read_text().splitlines()
    last = next(csv_module.reader([lines[-1]]))
    header = next(csv_module.reader([lines[0]]))
    last[header.index("ID")] = "999"
    last[header.index("Metric Name")] = "smsp__warp_issue_stalled_barrier_per_warp_active.pct"
    last[header.index("Metric Unit")] = "%"
    last[header.index("Metric Value")] = "12.5"
    source = tmp_path / "pasted.csv"
    pasted = ",".join(f'"{field}"' for field in last)  # first: a short last launch reads as a truncated file
    source.write_text("\n".join([lines[0], pasted, *lines[1:]]) + "\n")
    ran = import_into(tmp_path / "store", source, "--gpu", "v100")
    assert ran.code == 0, ran.err
    said = lines_with(ran.err, "hold only metrics that give no time, FLOPs or bytes")
    assert len(said) == 1 and "smsp__warp_issue_stalled_barrier_per_warp_active.pct" in said[0], ran.err
    assert "failed replay" not in ran.err
    assert summary(tmp_path / "store")["total"]["kernels"] == 8
