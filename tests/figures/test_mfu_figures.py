"""The validation page's MFU table (docs/validation.md, key ``mfu``), recomputed from the shared H100 files as
tests/test_utilization.py computes them (make test checks the behaviour; this compares the page's figures, row by
row, to their printed rounding)."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd

from hroofline.analyze.utilization import run_utilization
from hroofline.store.runs import RunStore
from tests.test_utilization import CALIBRATIONS, DENSE_PER_SM_CYCLE, H100_SMS, gpt2_nanogpt_params
from tests.validation_page import assert_page_shows, table_row

TABLE = "mfu"
TILE = 320  # the width cuBLAS's BF16 kernel tiles N with (its name: ..._320x...); as the row says


def shows(label: str, *computed: float) -> None:
    assert_page_shows(table_row(TABLE, label), list(computed), f"the row {label!r}")


def test_the_mfu_table(cli, h100_runs_store: Path) -> None:
    result = cli("top", CALIBRATIONS[0], "-n", "20", "--format", "csv", "--store", str(h100_runs_store))
    assert result.code == 0, result.err
    top = pd.read_csv(io.StringIO(result.out))
    gemm = top[top["bound"] == "BF16 tensor"].iloc[0]
    launches = RunStore(h100_runs_store).load(CALIBRATIONS[0]).launches
    mine = launches[launches["kernel"] == gemm["kernel"]]
    at_roof = sum(mine[c] / (rate * H100_SMS * mine["clock_hz"]) for c, rate in DENSE_PER_SM_CYCLE.items()).sum()
    shows("cuBLAS BF16 8192³ GEMM", gemm["hfu_pct"], 100 * at_roof / mine["time_s"].sum())
    model = 100 * (2 * 8192**3 * len(mine)) / (mine["time_s"] * 4096 * H100_SMS * mine["clock_hz"]).sum()
    padded = math.ceil(8192 / TILE) * TILE
    shows("the same GEMM over its model FLOPs", model, TILE, 8192, padded, 100 * (gemm["hfu_pct"] / model - 1))
    store = RunStore(h100_runs_store)
    step = run_utilization(store.load("gpt2")).total
    hardware = run_utilization(store.load("gpt2-ncu")).total
    assert step is not None and step.mfu is not None and hardware is not None
    n, layers, seq, d_model, tokens = gpt2_nanogpt_params(), 12, 512, 768, 8 * 512
    formula = (6 * n + 12 * layers * seq * d_model) * tokens / (step.time_s * 4096 * H100_SMS * 1.83e9)
    shows("GPT-2 step (trace", 100 * step.mfu, 100 * formula, 6, n / 1e6, 12, layers, seq, d_model, tokens)
    model_flops, hardware_flops = step.model_flops, hardware.hardware_flops
    assert model_flops is not None and hardware_flops is not None
    shows(
        "the same step's model FLOPs",
        model_flops / 1e12,
        hardware_flops / 1e12,
        100 * (hardware_flops / model_flops - 1),
    )
