"""`hroofline doctor`: known work where it must be, on the shared H100 calibration reports; a sparse roof taken as
dense is caught; on a GPU machine (here a stand-in ncu replaying the real report) the calibration is profiled."""

from __future__ import annotations

import lzma
import os
import re
import shutil
import tomllib
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from hroofline.collect import calibration
from hroofline.roofs import rates
from hroofline.roofs.metricset import metrics_dir
from tests.conftest import REPO

CALIBRATIONS = ("gemm-calibration-base-clock", "gemm-calibration-no-clock-control")


def _rows(out: str) -> dict[tuple[str, str], list[str]]:
    """The doctor's table: (case, check) -> its cells."""
    rows = {}
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 6 and cells[0] in {c.name for c in calibration.CASES}:
            rows[(cells[0], cells[2])] = cells
    return rows


@pytest.mark.parametrize("report", CALIBRATIONS)
def test_doctor_passes_on_the_h100_calibrations(cli, h100_dir: Path, report: str) -> None:
    result = cli("doctor", "--report", h100_dir / f"{report}.ncu-rep")
    assert result.code == 0, result.err
    rows = _rows(result.out)
    for case in ("bf16", "fp16", "tf32", "fp64"):
        measured = float(rows[(case, "% of its roof")][3].rstrip("%"))
        assert 90 <= measured <= 97, case
        assert rows[(case, "bound by")][5] == "ok" and rows[(case, "FLOPs vs 2·M·N·K")][5] == "ok"
    assert 72 <= float(rows[("fp32", "% of its roof")][3].rstrip("%")) <= 82
    assert rows[("bf16", "FLOPs vs 2·M·N·K")][3] == "+1.6%"  # 320-wide tiles pad 8192 to 8320
    assert result.out.rstrip().endswith("all 17 checks passed")
    assert "not in this run" in result.out  # the shared reports hold no copy


NOT_CALIBRATIONS = (
    "h100/resnet34-fp32-b32-step.ncu-rep.xz",
    "h100/gpt2-amp-bf16-b8-s512-step.ncu-rep.xz",
    "h100/gpt2-amp-bf16-b8-s512-trace.json.xz",
    "ncu/titanv_cnn_conv_fp32_fullset.ncu-rep",  # Volta: no sparse tensor rate at all
    "deepcam/pt-O1-Adam-fw",  # DeepCAM's forward, a folder of metric logs
)


@pytest.mark.parametrize("report", NOT_CALIBRATIONS)
def test_doctor_refuses_a_report_that_is_no_calibration(cli, report: str) -> None:
    """Issue 45: a training step's large GEMMs were judged as calibration cases (resnet34: "tf32 35.9% of its
    roof FAILED", a sparse-rate hint, even on Volta). Refused in one line, before any table."""
    from tests.conftest import SHARED, need

    result = cli("doctor", "--report", need(SHARED / "fixtures" / report))
    assert result.code == 1 and not result.out
    (line,) = result.err.splitlines()
    assert "is not hroofline's calibration run: it has launches in phase" in line
    assert "how it knows: the calibration script's NVTX ranges and GEMM shapes" in line
    assert "hroofline doctor --keep DIR" in line and "sparse" not in line


def test_a_gemm_of_another_shape_is_no_calibration(h100_dir: Path) -> None:
    """The GEMM shapes: a forward-only run without layers whose GEMM does a 4096³ BF16 GEMM's work, not the
    calibration's 8192³ (8x less), is no calibration; a FLOP count off by 2x still is one (the FLOPs check
    judges it)."""
    from hroofline.analyze.doctor import case_of, not_calibration
    from hroofline.cli.doctor_cmd import _read_report, _run_of

    run = _run_of(_read_report(h100_dir / f"{CALIBRATIONS[0]}.ncu-rep", None, False), None)
    assert not_calibration(run) is None
    bf16 = run.launches.index[case_of(run.launches) == "bf16"][0]
    columns = [c for c in run.launches.columns if c.startswith("flops_")]
    answers = {}
    for factor in (1 / 8, 1 / 2):
        launches = run.launches.copy()
        launches.loc[bf16, columns] = launches.loc[bf16, columns] * factor
        answers[factor] = not_calibration(replace(run, launches=launches))
    assert answers[1 / 2] is None
    assert "1 of its 10 GEMMs do other work than the calibration's" in str(answers[1 / 8])
    assert "one does 140 GFLOP as a bf16 GEMM, not 2·8192³ = 1,100 GFLOP)" in str(answers[1 / 8])


def test_doctor_reads_a_compressed_report_as_it_travels() -> None:
    from tests.conftest import SHARED, need, run_program

    packed = need(SHARED / "fixtures" / "h100" / f"{CALIBRATIONS[1]}.ncu-rep.xz")
    result = run_program("doctor", "--report", packed)
    assert result.code == 0 and "all 17 checks passed" in result.out


def test_doctor_fails_where_the_tensor_roof_is_the_sparse_rate(
    cli, h100_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rates table that takes Hopper's sparse .peak_sustained at its word (its dense tensor rates doubled):
    the report's peaks then agree with it, and the GEMMs sit at half their roof."""
    table = tomllib.loads((metrics_dir() / "rates.toml").read_text())
    hopper = table["arch"]["9.0"]
    for key in list(hopper):
        if key.startswith("tensor_") and key != "tensor_fp64":
            hopper[key] *= 2
    monkeypatch.setattr(rates, "_table", lambda: table)
    result = cli("doctor", "--report", h100_dir / f"{CALIBRATIONS[0]}.ncu-rep")
    assert result.code == 1
    rows = _rows(result.out)
    assert float(rows[("bf16", "% of its roof")][3].rstrip("%")) == pytest.approx(46.9, abs=0.1)
    assert rows[("bf16", "% of its roof")][5] == "FAILED" and rows[("fp64", "% of its roof")][5] == "ok"
    failures = [line for line in result.err.splitlines() if line.startswith("hroofline: doctor:")]
    assert any("bf16 % of its roof failed" in line and "2:4-sparse rate taken as dense" in line for line in failures)
    # the doubled TF32 roof puts the GEMM at half of it: the roof check fails (L2 binds it as much: co-bound)
    assert any("tf32 % of its roof failed" in line for line in failures)


def test_doctor_fails_where_the_l1_count_misses_the_tma(cli, h100_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the rule that nulls a TMA-blind L1 count, the nvjet GEMMs keep their 49 kB: doctor says so."""
    from hroofline.roofs import formulas as roofline

    monkeypatch.setattr(roofline, "l1_blind_launches", lambda quantities, *_: quantities["bytes_l1"].isna())
    result = cli("doctor", "--report", h100_dir / f"{CALIBRATIONS[0]}.ncu-rep")
    assert result.code == 1
    rows = _rows(result.out)
    assert rows[("bf16", "L1 bytes vs L2")][5] == "FAILED" and rows[("fp32", "L1 bytes vs L2")][5] == "ok"
    assert any("bf16 L1 bytes vs L2 failed" in line and "TMA" in line for line in result.err.splitlines())


def test_the_copy_check_judges_main_memory_bytes(cli, h100_dir: Path) -> None:
    """The shared reports hold no copy: a copy launch added to the imported calibration, its bytes 2% and then
    10% above the 2 GiB it reads and writes."""
    from hroofline.analyze.doctor import diagnose
    from hroofline.cli.doctor_cmd import _read_report, _run_of
    from hroofline.roofs.ceilings import run_roofs

    run = _run_of(_read_report(h100_dir / f"{CALIBRATIONS[0]}.ncu-rep", None, False), None)
    copy = next(case for case in calibration.CASES if case.name == "copy")
    for factor, passed in ((1.02, True), (1.10, False)):
        row = run.launches.iloc[[0]].copy()
        row[[c for c in row.columns if c.startswith(("flops_", "ops_"))]] = 0.0
        row[["bytes_hbm", "time_s"]] = [copy.bytes * factor, 1e-3]
        with_copy = replace(run, launches=pd.concat([run.launches, row], ignore_index=True))
        (check,) = [c for c in diagnose(with_copy, run_roofs(with_copy)).checks if c.case == "copy"]
        assert check.passed is passed and check.measured == pytest.approx(100 * (factor - 1))


def test_doctor_without_a_gpu_says_to_check_a_report(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from hroofline.collect import preflight

    monkeypatch.setattr(preflight, "gpu_visible", lambda: False)
    result = cli("doctor")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "no NVIDIA GPU here" in result.err and "hroofline doctor --report FILE" in result.err


def test_doctor_profiles_the_calibration_on_a_gpu(
    cli, h100_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The GPU path end to end: preflight (this machine's GPU and SM count), ncu on the calibration script,
    import, checks. A stand-in ncu checks the command and replays the real report of this calibration, copy
    included, that `hroofline doctor --keep` made on an H200 (tests/data/gpu-2026-11-27)."""
    from hroofline.collect import preflight

    packed = REPO / "tests" / "data" / "gpu-2026-11-27" / "h200-doctor-calibration.ncu-rep.xz"
    report = tmp_path / "h200-calibration.ncu-rep"
    with lzma.open(packed) as source, report.open("wb") as target:
        shutil.copyfileobj(source, target)

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").symlink_to(REPO / "tests" / "standin" / "ncu")
    arguments = tmp_path / "ncu-arguments.txt"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HROOFLINE_STANDIN_REPORT", str(report))
    monkeypatch.setenv("HROOFLINE_STANDIN_ARGS", str(arguments))
    monkeypatch.setattr(preflight, "gpu_visible", lambda: True)
    monkeypatch.setattr(preflight, "visible_device", lambda: ("NVIDIA H200", 132))
    kept = tmp_path / "kept"
    result = cli("doctor", "--keep", kept)
    assert result.code == 0, result.err
    assert (
        "on h200 with" in result.err and "all 21 checks passed" in result.out and (kept / "profile.ncu-rep").is_file()
    )
    # the shared H100 report has no copy: profiled here, a case ncu recorded nothing of fails
    monkeypatch.setenv("HROOFLINE_STANDIN_REPORT", str(h100_dir / f"{CALIBRATIONS[0]}.ncu-rep"))
    monkeypatch.setattr(preflight, "visible_device", lambda: ("NVIDIA H100 80GB HBM3", 132))
    missing = cli("doctor")
    assert missing.code == 1 and "FAILED: none recorded" in missing.out
    assert "copy launches failed: the calibration ran it, but ncu recorded no launch of it" in missing.err
    command = arguments.read_text().splitlines()
    script = next(part for part in command if part.endswith(".py"))
    assert Path(script) == Path(calibration.__file__)
    assert command[command.index(script) + 1 :] == [case.name for case in calibration.CASES]
    # an H20 (78 SMs) named as an H100: refused before ncu runs
    monkeypatch.setattr(preflight, "visible_device", lambda: ("NVIDIA H20", 78))
    refused = cli("doctor", "--gpu", "h100")
    assert refused.code == 1 and "this machine's GPU is NVIDIA H20 (h20 in the catalog), not h100-sxm" in refused.err
    # a MIG slice the catalog cannot name: told apart by its SM count
    monkeypatch.setattr(preflight, "visible_device", lambda: ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", 60))
    sliced = cli("doctor", "--gpu", "h100")
    assert sliced.code == 1 and "with 60 SMs, not h100-sxm (132 SMs)" in sliced.err and "--force-gpu" in sliced.err
