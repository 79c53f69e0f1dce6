"""The GPU catalog: required GPUs, SI peaks, agreement with the shared spec reference."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from hroofline.roofs.catalog import load_gpu_names, resolve_gpu
from hroofline.roofs.metricset import metrics_dir
from hroofline.roofs.rates import rates_for
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
    lines = table.out.splitlines()
    for name in ("h20", "h800", "gh200", "b200", "rtx5090"):
        (row,) = [line for line in lines if line.startswith(name + " ")]
        (source,) = [line for line in lines if line.startswith(f"  {name}: ")]
        assert row.split()[3].isdigit() and len(source) > 40, name
    h20 = next(g for g in listed if g["gpu"] == "h20")
    assert h20["sms"] == 78 and h20["peaks"]["tensor_bf16"] == 148e12 and "quarter" in h20["source"]
    assert "roofs from their own ncu reports only" in table.out and "  rtx4060-laptop (cc 8.9" in table.out


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


def test_sm_counts_are_the_references() -> None:
    for name, sms in SMS.items():
        assert load_gpu_names()[name].sms == sms, name


def _sourced(gpu, key: str) -> bool:
    """A peak read in a source at a clock read in a source: not computed from the rate it is checked against."""
    clock_key = key if key in gpu.clocks else "default"
    return key not in gpu.derived and clock_key not in gpu.derived


COMPUTE_KEYS = [
    (gpu.name, key)
    for gpu in load_gpu_names().values()
    for key in gpu.peaks
    if key not in ("hbm", "l1", "l2") and _sourced(gpu, key)
]


def test_most_peaks_are_sourced_and_checked() -> None:
    assert len(COMPUTE_KEYS) > 110
    assert ("b200", "fp32") in COMPUTE_KEYS and ("h20", "tensor_bf16") not in COMPUTE_KEYS


@pytest.mark.parametrize(("name", "key"), COMPUTE_KEYS)
def test_every_peak_is_its_dense_rate_times_sms_times_its_clock(name: str, key: str) -> None:
    """Two independent data files agree: the catalog's datasheet peak (metrics/gpus.toml) and the per-SM dense
    rate (metrics/rates.toml) x SMs x the clock the peak is quoted at, to 3% (peaks and clocks read in a source;
    those computed from a rate are marked derived and left out). A sparse peak typed as dense, a
    GeForce half rate missed or a wrong quoted clock shows here."""
    gpu = load_gpu_names()[name]
    rate = rates_for(gpu.cc, gpu).get(key)
    clock = gpu.quoted_clock(key)
    assert rate is not None and gpu.sms is not None and clock is not None, (name, key)
    assert rate * gpu.sms * clock == pytest.approx(gpu.peaks[key], rel=0.03), (name, key)
    assert gpu.quoted_clock("hbm") is None


def test_every_catalog_gpu_has_peaks_or_says_why_not() -> None:
    for gpu in load_gpu_names().values():
        assert gpu.sms, gpu.name
        if gpu.roofs_from_reports_only:
            assert not gpu.peaks, gpu.name
            continue
        assert (gpu.peak_source and gpu.peaks.get("fp32")) or gpu.name == "h20", gpu.name
        assert any(key.startswith("tensor_") for key in gpu.peaks), gpu.name


@pytest.mark.parametrize("name", ["h20", "h800", "gh200", "b200", "rtx5090"])
def test_new_gpus_have_dense_tensor_peaks_with_sources(name: str) -> None:
    gpu = load_gpu_names()[name]
    assert (gpu.peak_source and "tensor_bf16" in gpu.peaks) or "tensor_fp16" in gpu.peaks
    dense = rates_for(gpu.cc, gpu).get("tensor_fp16")
    assert dense is not None and gpu.peaks["tensor_fp16"] == pytest.approx(
        dense * gpu.sms * gpu.quoted_clock("tensor_fp16"), rel=0.03
    )


def test_h20_is_a_quarter_of_an_h100_per_sm() -> None:
    h100, h20 = (rates_for("9.0", load_gpu_names()[n]) for n in ("h100-sxm", "h20"))
    for key in ("tensor_tf32", "tensor_fp16", "tensor_bf16", "tensor_fp8", "tensor_int8"):
        assert h20.get(key) == h100.get(key) / 4, key
    assert h20.get("tensor_fp64") is None and h100.get("tensor_fp64") == 256
    # 148 TFLOP/s dense BF16 = 1,024 FLOP x 78 SMs x 1.853 GHz (the arithmetic)
    assert pytest.approx(load_gpu_names()["h20"].peaks["tensor_bf16"], rel=0.001) == 1024 * 78 * 1.853e9


def test_geforce_parts_accumulate_in_fp32_at_half_rate() -> None:
    from hroofline.roofs.rates import is_consumer

    gpus = load_gpu_names()
    assert rates_for("8.9", gpus["rtx4090"]).get("tensor_fp16") == 512
    assert rates_for("8.9", gpus["l4"]).get("tensor_fp16") == 1024
    assert is_consumer(None, "NVIDIA GeForce RTX 3060 Ti") and not is_consumer(None, "NVIDIA A10")
    assert rates_for("8.6", None, "NVIDIA GeForce RTX 3080").get("tensor_bf16") == 512
    assert rates_for("9.0").get("tensor_fp16_sparse") == 8192 and rates_for("9.0").get("tensor_fp64_sparse") is None


def test_h100_tensor_peaks_are_quoted_at_their_own_clock() -> None:

    h100 = load_gpu_names()["h100-sxm"]
    # 4096 dense FP16 FLOP per clock per SM (4 tensor cores), 132 SMs: 989.4 TFLOP/s at 1830 MHz, not 1980
    assert 132 * 4096 * h100.quoted_clock("tensor_fp16") == pytest.approx(h100.peaks["tensor_fp16"], rel=0.001)
    assert h100.quoted_clock("fp32") == 1980e6
