"""Predicted memory against every memory row measured on the H100 of ../shared (24 training steps, 5 forward
passes). tests/test_memory.py checks the memory tracking itself, and three of these rows, in make test."""

from __future__ import annotations

import numpy as np

from tests.test_memory import h100_memory_rows, predicted_over_measured
from tests.validation_page import assert_page_shows, page_figures


def test_predicted_memory_holds_on_every_shared_h100_row() -> None:
    """The 24 training steps of ../shared/reference/h100-step-times.csv (six models, fp32 and amp, batch 32 and
    128): the predicted peak within 15% of torch.cuda.max_memory_allocated over the timed steps; and its 5
    forward passes at batch 256: the predicted forward retention within 15% of memory_allocated's growth. The
    validation page's figures (docs/validation.md, key hopper-memory): the training steps' least, most and median
    ratio, the forward passes' batch, least and most."""
    rows = h100_memory_rows()
    ratios = {
        (row.model, row.precision, row.batch, row.measured): predicted_over_measured(row)
        for row in rows.itertuples(index=False)
    }
    assert len(ratios) == 29
    off = {key: round(ratio, 3) for key, ratio in ratios.items() if not 0.85 <= ratio <= 1.15}
    assert not off, off
    steps = np.array([ratio for key, ratio in ratios.items() if key[3] == "step"])
    forward = np.array([ratio for key, ratio in ratios.items() if key[3] != "step"])
    (batch,) = {key[2] for key in ratios if key[3] != "step"}
    figures = [len(steps), steps.min(), steps.max(), np.median(steps), batch, forward.min(), forward.max()]
    assert_page_shows(page_figures("hopper-memory"), figures, "the predicted memory of the shared H100 rows")
