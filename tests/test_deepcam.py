"""Acceptance: Yang et al.'s DeepCAM V100 data reproduces the authors' own processed tables.

The authors' tables (authors-processed/fp32-<cfg>-<phase>.csv) were computed independently of
hroofline from the same raw one-metric-per-run logs; see ../shared/fixtures/deepcam/PROVENANCE.md.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import DEEPCAM_CONFIGS as CONFIGS

PHASE_NAMES = {"fw": "forward", "bw": "backward", "opt": "optimizer"}


def _our_table(cli, store: Path, cfg: str, phase: str) -> pd.DataFrame:
    result = cli(
        "kernels", f"deepcam-{cfg}", "--group-by", "name", "--phase", phase, "--format", "csv", store_dir=store
    )
    assert result.code == 0, result.err
    return pd.read_csv(io.StringIO(result.out)).set_index("kernel")


@pytest.mark.parametrize(("cfg", "phase"), CONFIGS)
def test_kernel_table_matches_authors(cli, deepcam_store: Path, deepcam_dir: Path, cfg: str, phase: str) -> None:
    ours = _our_table(cli, deepcam_store, cfg, phase)
    authors = pd.read_csv(deepcam_dir / "authors-processed" / f"fp32-{cfg}-Adam-{phase}.csv").set_index("Kernel Name")

    assert sorted(ours.index) == sorted(authors.index)
    assert (ours["phase"] == PHASE_NAMES[phase]).all()
    ours = ours.loc[authors.index]
    assert (ours["count"] == authors["Count"]).all()

    exact = {
        "flops": authors["all FLOPs"],
        "flops_tensor": authors["TC FLOPs"],
        "bytes_hbm": authors["dram__bytes.sum"],
        "bytes_l2": authors["lts__t_bytes.sum"],
        "bytes_l1": authors["l1tex__t_bytes.sum"],
    }
    for column, expected in exact.items():
        relative = (ours[column] - expected).abs() / expected.abs().where(expected != 0, 1.0)
        assert relative.max() < 1e-9, f"{column}: worst {relative.idxmax()} off by {relative.max():.2e}"

    # Precision split, from the authors' raw instruction sums with Yang's formulas (FMA = 2 FLOPs).
    fp32 = (
        authors["sm__sass_thread_inst_executed_op_fadd_pred_on.sum"]
        + authors["sm__sass_thread_inst_executed_op_fmul_pred_on.sum"]
        + 2 * authors["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"]
    )
    fp16 = (
        authors["sm__sass_thread_inst_executed_op_hadd_pred_on.sum"]
        + authors["sm__sass_thread_inst_executed_op_hmul_pred_on.sum"]
        + 2 * authors["sm__sass_thread_inst_executed_op_hfma_pred_on.sum"]
    )
    assert (ours["flops_fp32"] == fp32).all()
    assert (ours["flops_fp16"] == fp16).all()
    # The DeepCAM runs collected no FP64 counters: unmeasured, not zero.
    assert ours["flops_fp64"].isna().all()

    # The authors' time is sum(cycles) / mean(clock) per name; ours sums cycles / clock per launch.
    time_error = (ours["time_s"] - authors["Time"]).abs() / authors["Time"]
    assert time_error.max() < 0.01, f"time off by {time_error.max():.3%} for {time_error.idxmax()}"

    # Intensities follow from the sums.
    ai = ours["ai_hbm"].where(ours["flops"] > 0)
    expected_ai = (authors["all FLOPs"] / authors["dram__bytes.sum"]).where(authors["all FLOPs"] > 0)
    assert np.allclose(ai.to_numpy(), expected_ai.to_numpy(), rtol=1e-9, atol=0, equal_nan=True)


def test_phase_totals(cli, deepcam_store: Path) -> None:
    import json

    expected_ms = {
        "O0": {"forward": 170.5, "backward": 400.6, "optimizer": 17.0},
        "O1": {"forward": 104.2, "backward": 228.3, "optimizer": 17.0},
    }
    for cfg, phases in expected_ms.items():
        result = cli("summary", f"deepcam-{cfg}", "--format", "json", store_dir=deepcam_store)
        summary = json.loads(result.out)
        assert summary["run"] == f"deepcam-{cfg}"
        assert list(summary["phases"]) == ["forward", "backward", "optimizer"]
        for phase, ms in phases.items():
            # Published to 0.1 ms from per-name times; per-launch sums differ by up to 0.4%.
            assert summary["phases"][phase]["time_s"] * 1e3 == pytest.approx(ms, rel=4e-3)
        assert summary["total"]["kernels"] == sum(p["kernels"] for p in summary["phases"].values())
    o1 = json.loads(cli("summary", "deepcam-O1", "--format", "json", store_dir=deepcam_store).out)
    o0 = json.loads(cli("summary", "deepcam-O0", "--format", "json", store_dir=deepcam_store).out)
    # Mixed precision moves the convolutions to the tensor cores; FP32 uses none.
    assert o0["total"]["flops_tensor"] == 0
    assert o1["phases"]["forward"]["flops_tensor"] > 0.8 * o1["phases"]["forward"]["flops"]


def test_merge_by_name_reproduces_authors_time_exactly(cli, deepcam_dir: Path) -> None:
    """--merge name joins per-name sums: time becomes sum(cycles) / mean(clock), the authors' own."""
    result = cli(
        "import", deepcam_dir / "pt-O1-Adam-fw", "--run", "byname", "--gpu", "v100", "--phase", "fw", "--merge", "name"
    )
    assert result.code == 0, result.err
    table = pd.read_csv(io.StringIO(cli("kernels", "byname", "--group-by", "name", "--format", "csv").out))
    authors = pd.read_csv(deepcam_dir / "authors-processed" / "fp32-O1-Adam-fw.csv")
    merged = table.set_index("kernel").loc[authors["Kernel Name"]]
    assert (merged["count"].to_numpy() == authors["Count"].to_numpy()).all()
    assert merged["time_s"].to_numpy() == pytest.approx(authors["Time"].to_numpy(), rel=1e-9)
