"""What hroofline recorded on a real H100 (../shared/fixtures/h100: ncu reports and a trace made there, see its
README), imported as a user would and compared with the validation page (docs/validation.md, keys ``h100-gemms``
and ``h100-findings``) figure by figure. tests/test_h100.py checks the same files within bands in make test."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd
import pytest

from hroofline.cli.main import main
from tests.test_h100 import CALIBRATIONS
from tests.validation_page import assert_page_shows, table_row

# ../shared/fixtures/h100/gemm_calibration.py: two square GEMMs per precision, each of this size
GEMM_SIZES = {"BF16 tensor": 8192, "FP16 tensor": 8192, "TF32 tensor": 8192, "FP64 tensor": 4096, "FP32": 4096}
ROWS = {
    "BF16 GEMM 8192³": "BF16 tensor",
    "FP16 GEMM 8192³": "FP16 tensor",
    "TF32 GEMM 8192³": "TF32 tensor",
    "FP64 GEMM 4096³ (DMMA)": "FP64 tensor",
    "FP32 GEMM 4096³ (CUDA cores)": "FP32",
}


def top_table(store: Path, run: str) -> pd.DataFrame:
    """``hroofline top RUN --format csv``, by the roof each kernel is bound by."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdout", out)
        assert main(["top", run, "-n", "20", "--format", "csv", "--store", str(store)]) == 0
    return pd.read_csv(io.StringIO(out.getvalue())).set_index("bound")


@pytest.fixture(scope="module")
def calibrations(h100_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    store = tmp_path_factory.mktemp("h100-gemms")
    for name in CALIBRATIONS:
        assert main(["import", str(h100_dir / f"{name}.ncu-rep"), "--run", name, "--store", str(store)]) == 0
    return {name: top_table(store, name) for name in CALIBRATIONS}


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
