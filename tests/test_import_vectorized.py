"""The import's vectorized steps (bench/import_speed.py's 100,000 launches): first rows found in one pass, and the
raw-metrics map built without a Python string per key, against the same counted row by row in the test."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hroofline.importers.csv_columns import first_rows_by_code, first_rows_of_launches
from hroofline.store.format import launches_frame, launches_table
from hroofline.store.runs import RunStore

# A real A100 ncu "--page details" export of LLM GEMMs (TF32, DMMA, FP16), as tests/test_precision_roofs.py reads it.
A100_REPORT = Path(__file__).parent / "data" / "a100_llm_gemms_tf32_dmma_fp16_ncu_details.csv"


def test_first_rows_are_each_values_first_row() -> None:
    rng = np.random.default_rng(7)
    for rows, distinct in ((1, 1), (12, 3), (5_000, 40)):
        values = rng.integers(0, distinct, rows)
        first: dict[int, int] = {}
        for row, value in enumerate(values.tolist()):
            first.setdefault(value, row)
        assert first_rows_by_code(values).tolist() == [first[v] for v in sorted(first)]
    keys = np.array([5, 5, 9, 9, 5, 2, 2, 9])  # launches 5, 9 and 2, rows interleaved
    codes, firsts = first_rows_of_launches(keys)
    assert codes.tolist() == [0, 0, 1, 1, 0, 2, 2, 1] and firsts.tolist() == [0, 2, 5]


def test_raw_metrics_map_keeps_each_launchs_present_metrics(cli) -> None:
    assert cli("import", A100_REPORT, "--run", "a100").code == 0
    launches = RunStore(cli.store).load("a100").launches
    raw = [c for c in launches.columns if c.startswith("metric:")]
    launches.loc[0, raw[0]] = np.nan  # one metric missing on one launch: left out of its map
    table = launches_table(launches, "a100")
    maps = table.column("raw_metrics").to_pylist()
    for row, pairs in enumerate(maps):
        expected = {c.removeprefix("metric:"): launches.at[row, c] for c in raw if pd.notna(launches.at[row, c])}
        assert dict(pairs) == expected
    assert raw[0].removeprefix("metric:") not in dict(maps[0])
    back = launches_frame(table)
    pd.testing.assert_frame_equal(back[raw], launches[raw], check_like=True)
