"""The GPU catalog: required GPUs, SI peaks, agreement with the shared spec reference."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from hroofline.metricset import load_gpu_names, metrics_dir, resolve_gpu
from tests.conftest import SHARED, need, run_program

REQUIRED = [
    "v100-sxm2",
    "v100-pcie",
    "t4",
    "a100-40gb",
    "a100-80gb",
    "a10",
    "l4",
    "rtx3090",
    "rtx4090",
    "h100-sxm",
    "h100-pcie",
    "h200",
]
# catalog name -> first cell of its row in the reference's GPU spec table
REFERENCE_ROWS = {
    "v100-sxm2": "V100 SXM2 16/32 GB",
    "v100-pcie": "V100 PCIe 16/32 GB",
    "t4": "T4",
    "a100-40gb": "A100 SXM4 40 GB",
    "a100-80gb": "A100 SXM4 80 GB",
    "a10": "A10",
    "l4": "L4",
    "rtx3090": "RTX 3090",
    "rtx4090": "RTX 4090",
    "h100-sxm": "H100 SXM5 80 GB",
    "h100-pcie": "H100 PCIe 80 GB",
    "h200": "H200 SXM 141 GB",
}


@pytest.mark.parametrize("name", REQUIRED)
def test_required_gpus_have_sourced_peaks(name: str) -> None:
    gpu = load_gpu_names()[name]
    assert gpu.peak_source
    assert 1e12 < gpu.peaks["fp32"] < 1e14  # FLOP/s, decimal
    assert 1e11 < gpu.peaks["hbm"] < 1e13  # byte/s
    assert gpu.peaks["fp16"] >= gpu.peaks["fp32"]
    assert gpu.peaks["tensor_fp16"] > gpu.peaks["fp16"]


def test_peaks_agree_with_the_spec_reference() -> None:
    reference = need(SHARED / "reference" / "ncu-metrics-and-gpu-specs.md")
    rows = {}
    for line in reference.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 10:
            rows[cells[0]] = cells
    for name, row_name in REFERENCE_ROWS.items():
        cells = rows[row_name]
        fp32 = float(re.match(r"[\d.]+", cells[4]).group())  # TFLOP/s
        bandwidth = float(re.match(r"[\d.]+", cells[9]).group())  # GB/s
        gpu = load_gpu_names()[name]
        assert gpu.peaks["fp32"] == pytest.approx(fp32 * 1e12), name
        assert gpu.peaks["hbm"] == pytest.approx(bandwidth * 1e9), name


def test_yang_measured_ceilings_are_below_the_datasheet() -> None:
    data = tomllib.loads((metrics_dir() / "ceilings" / "v100-yang-ert.toml").read_text())
    ceilings = data["ceilings"]
    assert ceilings["hbm"] == 828.758e9 and ceilings["l2"] == 2996.77e9 and ceilings["l1"] == 14336e9
    assert ceilings["fp32"] == 15158.6e9 and ceilings["fp16"] == 29181.6e9 and ceilings["tensor_fp16"] == 106496e9
    peaks = resolve_gpu(data["gpu"]).peaks
    for name in ("hbm", "fp64", "fp32", "fp16", "tensor_fp16"):
        assert ceilings[name] < peaks[name], name
    assert ceilings["hbm"] < ceilings["l2"] < ceilings["l1"]


def test_gpus_command() -> None:
    table = run_program("gpus")
    assert table.code == 0 and "h200" in table.out and "4800" in table.out
    listed = json.loads(run_program("gpus", "--format", "json").out)
    v100 = next(g for g in listed if g["gpu"] == "v100-sxm2")
    assert v100["arch"] == "volta" and v100["peaks"]["fp32"] == 15.7e12 and "v100" in v100["aliases"]


def test_catalog_file_is_where_the_package_finds_it() -> None:
    assert metrics_dir() == Path(__file__).resolve().parent.parent / "metrics"


# SM counts from ../shared/reference/ncu-metrics-and-gpu-specs.md, Part 2.
SMS = {
    "v100-sxm2": 80,
    "v100-pcie": 80,
    "t4": 40,
    "a100-40gb": 108,
    "a100-80gb": 108,
    "a100-80gb-pcie": 108,
    "a10": 72,
    "l4": 58,
    "rtx3090": 82,
    "rtx4090": 128,
    "h100-sxm": 132,
    "h100-pcie": 114,
    "h200": 132,
}


@pytest.mark.parametrize("name", sorted(SMS))
def test_quoted_clocks_reproduce_the_fp32_peak(name: str) -> None:
    """The clock a peak is quoted at is what roofs are scaled from: SMs x FP32 lanes x 2 x that clock must
    give the datasheet's FP32 peak."""
    from hroofline.metricset import load_metric_set

    gpu = load_gpu_names()[name]
    lanes = load_metric_set().fp32_lanes[gpu.cc]
    clock = gpu.quoted_clock("fp32")
    assert clock is not None and gpu.quoted_clock("hbm") is None
    assert SMS[name] * lanes * 2 * clock == pytest.approx(gpu.peaks["fp32"], rel=0.01)


def test_h100_tensor_peaks_are_quoted_at_their_own_clock() -> None:

    h100 = load_gpu_names()["h100-sxm"]
    # 4096 dense FP16 FLOP per clock per SM (4 tensor cores), 132 SMs: 989.4 TFLOP/s at 1830 MHz, not 1980
    assert 132 * 4096 * h100.quoted_clock("tensor_fp16") == pytest.approx(h100.peaks["tensor_fp16"], rel=0.001)
    assert h100.quoted_clock("fp32") == 1980e6
