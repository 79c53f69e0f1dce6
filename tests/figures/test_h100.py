"""What hroofline recorded on a real H100 (../shared/fixtures/h100: ncu reports and a trace made there, see its
README), imported as a user would and compared with the validation page (docs/validation.md, keys ``h100-gemms``
and ``h100-findings``) figure by figure. tests/test_h100.py checks the same files within bands in make test."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pandas as pd
import pytest

from hroofline.cli.main import main
from hroofline.roofs.catalog import resolve_gpu
from hroofline.roofs.ceilings import load_ceilings_file
from hroofline.store.runs import RunStore
from tests.conftest import REPO, SHARED
from tests.test_h100 import CALIBRATIONS
from tests.validation_page import assert_page_shows, page_figures, table_row

# ../shared/fixtures/h100/gemm_calibration.py: two square GEMMs per precision, each of this size
GEMM_SIZES = {"BF16 tensor": 8192, "FP16 tensor": 8192, "TF32 tensor": 8192, "FP64 tensor": 4096, "FP32": 4096}
ROWS = {
    "BF16 GEMM 8192³": "BF16 tensor",
    "FP16 GEMM 8192³": "FP16 tensor",
    "TF32 GEMM 8192³": "TF32 tensor",
    "FP64 GEMM 4096³ (DMMA)": "FP64 tensor",
    "FP32 GEMM 4096³ (CUDA cores)": "FP32",
}


def hroofline(*args: str) -> tuple[str, str]:
    """``hroofline ARGS`` in-process: what it prints on stdout and on stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert main(list(args)) == 0, err.getvalue()
    return out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def h100_store(h100_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The H100's reports and trace imported as a user would (no --gpu: the files say), with what each import
    said on stderr."""
    store = tmp_path_factory.mktemp("h100-figures")
    files = {name: f"{name}.ncu-rep" for name in (*CALIBRATIONS, "resnet34-fp32-b32-step")}
    files["gpt2-ncu"] = "gpt2-amp-bf16-b8-s512-step.ncu-rep"
    files["gpt2-trace"] = "gpt2-amp-bf16-b8-s512-trace.json"
    said = {
        name: hroofline("import", str(h100_dir / file), "--run", name, "--store", str(store))[1]
        for name, file in files.items()
    }
    return store, said


def top_table(store: Path, run: str) -> pd.DataFrame:
    """``hroofline top RUN --format csv``, by the roof each kernel is bound by."""
    out, _ = hroofline("top", run, "-n", "20", "--format", "csv", "--store", str(store))
    return pd.read_csv(io.StringIO(out)).set_index("bound")


@pytest.fixture(scope="module")
def calibrations(h100_store: tuple[Path, dict[str, str]]) -> dict[str, pd.DataFrame]:
    return {name: top_table(h100_store[0], name) for name in CALIBRATIONS}


def test_the_page_shows_the_cublas_gemms(calibrations: dict[str, pd.DataFrame]) -> None:
    base, free = (calibrations[name] for name in CALIBRATIONS)
    assert sorted(base.index) == sorted(free.index) == sorted(GEMM_SIZES)  # one kernel per precision
    for label, bound in ROWS.items():
        row = base.loc[bound]
        size = GEMM_SIZES[bound]
        flops = row["flop_rate"] * row["time_s"]
        beyond = 100 * (flops / (row["count"] * 2 * size**3) - 1)
        computed = [row["count"], row["roof_pct"], free.loc[bound, "roof_pct"], beyond]
        if label.startswith("BF16"):  # cuBLAS's tiles, as its kernel's name gives them, pad N to a whole tile
            tile = int(re.search(r"_(\d+)x\d+_", str(row["kernel"])).group(1))
            padded = -(-size // tile) * tile
            assert flops / (row["count"] * 2 * size * size * padded) == pytest.approx(1, rel=1e-3)
            computed += [tile, size, padded]
        assert_page_shows(table_row("h100-gemms", label), computed, f"the H100 GEMM row {label!r}")


def test_the_page_shows_what_the_h100_showed(
    h100_store: tuple[Path, dict[str, str]], calibrations: dict[str, pd.DataFrame]
) -> None:
    store, said = h100_store
    # the import's note: the report's peaks per SM per cycle against the dense rates
    note = next(line for line in said[CALIBRATIONS[0]].splitlines() if "differ from the dense rates" in line)
    peaks = {
        key: (int(a.replace(",", "")), int(b.replace(",", "")))
        for key, a, b in re.findall(r"(\w+) ([\d,]+) vs ([\d,]+)", note)
    }
    assert all(report == 2 * dense for report, dense in peaks.values())
    bf16 = calibrations[CALIBRATIONS[0]].loc["BF16 tensor"]
    at_sparse_roof = bf16["roof_pct"] * peaks["tensor_bf16"][1] / peaks["tensor_bf16"][0]
    launches = RunStore(store).load(CALIBRATIONS[0]).launches
    nvjet = launches[launches["kernel"].str.startswith("nvjet_sm90")].iloc[0]
    resnet34 = RunStore(store).load("resnet34-fp32-b32-step").launches
    totals = {
        run: json.loads(hroofline("summary", run, "--format", "json", "--store", str(store))[0])["total"]
        for run in ("gpt2-trace", "gpt2-ncu")
    }
    traced, counted = totals["gpt2-trace"], totals["gpt2-ncu"]
    before = load_ceilings_file(SHARED / "fixtures" / "h100" / "ceilings-measured.toml").peaks
    second = load_ceilings_file(REPO / "tests" / "data" / "gpu-2026-11-27" / "h100-ceilings-measured.toml").peaks
    computed = [
        peaks["tensor_bf16"][0],
        peaks["tensor_tf32"][0],
        peaks["tensor_int8"][0],
        at_sparse_roof,
        nvjet["metric:l1tex__t_bytes.sum"] / 1e3,
        nvjet[["flops_tensor_bf16", "flops_tensor_fp16"]].fillna(0).sum() / 1e12,
        launches["bytes_l1"].isna().sum(),
        len(launches),
        resnet34["bytes_l1"].isna().sum(),
        len(resnet34),
        traced["flops_tensor_bf16"] / 1e12,
        traced["flops"] / 1e12,
        100 * abs(traced["flops"] / counted["flops"] - 1),
        counted["flops"] / 1e12,
        resolve_gpu("h100-sxm").l2_bytes / 2**20,
        before["l2"] / 1e9,
        before["hbm"] / 1e9,
        second["l1"] / 1e12,
        second["l2"] / 1e12,
        second["hbm"] / 1e12,
        second["tensor_bf16"] / 1e12,
    ]
    assert peaks["tensor_fp16"] == peaks["tensor_bf16"] and peaks["tensor_fp8"] == peaks["tensor_int8"]
    assert_page_shows(page_figures("h100-findings"), computed, "what the H100 showed")


def test_the_h100s_software_and_cublas_band_are_its_readmes() -> None:
    """Key ``h100``: ncu's and PyTorch's versions and cuBLAS's known band as the README of the H100's files
    records them (written on the machine when the files were made)."""
    readme = (SHARED / "fixtures" / "h100" / "README.md").read_text(encoding="utf-8")
    ncu = re.search(r"Nsight Compute (\d+\.\d+)\.\d+", readme)
    torch = re.search(r"PyTorch (\d+\.\d+)\.\d+", readme)
    band = re.search(r"cuBLAS reaches about (\d+)-(\d+)% of the dense peak", readme)
    assert ncu and torch and band, "../shared/fixtures/h100/README.md no longer says its software or cuBLAS's band"
    computed = [float(ncu.group(1)), float(torch.group(1)), float(band.group(1))]
    assert_page_shows(page_figures("h100"), computed, "the H100's software and cuBLAS's band")
