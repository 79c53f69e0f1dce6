"""The validation page's generation figures (docs/validation.md, keys ``generate``, ``generate-gap``,
``generate-loop`` and ``generate-more``): Hugging Face generation timed on an H200 (tests/data/gpu-2026-11-28/
generate-times.csv, made by generate_times.py there: random weights, bf16, greedy, 128 prompt + 128 new tokens;
and tests/data/gpu-2026-11-28b: a loop of the model alone, and generate of GPT-2 large and TinyLlama) beside what
``predict --generate`` gives now for the same requests, compared with the page figure by figure. Nothing here is
fitted to the measurement: the estimate's host floor and efficiencies come from metrics/estimate.toml and
metrics/host_cost.toml, fitted and measured on other steps."""

from __future__ import annotations

import pandas as pd
import pytest

import hroofline
from tests.conftest import REPO
from tests.validation_page import assert_page_shows, page_figures, table_row

MEASURED = REPO / "tests" / "data" / "gpu-2026-11-28" / "generate-times.csv"
LATER = REPO / "tests" / "data" / "gpu-2026-11-28b"  # the model alone, and generate of the two larger models
ROWS = {1: "GPT-2 at batch 1", 8: "GPT-2 at batch 8", 32: "GPT-2 at batch 32"}
LOOP_ROWS = {
    ("gpt2", 1): "hf:gpt2 at batch 1",
    ("gpt2", 8): "hf:gpt2 at batch 8",
    ("gpt2", 32): "hf:gpt2 at batch 32",
    ("tinyllama-1.1b", 1): "hf:tinyllama-1.1b at batch 1",
    ("tinyllama-1.1b", 8): "hf:tinyllama-1.1b at batch 8",
    ("tinyllama-1.1b", 32): "hf:tinyllama-1.1b at batch 32",
    ("gpt2-large", 1): "hf:gpt2-large at batch 1",
    ("gpt2-large", 8): "hf:gpt2-large at batch 8",
    ("gpt2-large", 32): "hf:gpt2-large at batch 32",
}


@pytest.fixture(scope="module")
def compared() -> list[tuple[pd.Series, object]]:
    measured = pd.read_csv(MEASURED)
    assert list(measured["batch"]) == [1, 8, 32]
    assert set(measured["prompt_tokens"]) == {128} and set(measured["new_tokens"]) == {128}
    return [
        (row, hroofline.predict_generation("hf:gpt2", "h200", 128, 128, int(row.batch)))
        for row in measured.itertuples(index=False)
    ]


# A table's columns, in the page's order: (measured or predicted, the row's column or the prediction's attribute,
# the factor to the page's unit).
GENERATE_COLUMNS = (
    ("measured", "ttft_s", 1e3),
    ("predicted", "ttft.estimate_s", 1e3),
    ("predicted", "ttft.bound_s", 1e6),
    ("measured", "tpot_s", 1e3),
    ("predicted", "tpot.estimate_s", 1e3),
    ("predicted", "tpot.bound_s", 1e6),
    ("measured", "tokens_per_s", 1),
    ("predicted", "tokens_per_s_estimate", 1),
    ("predicted", "tokens_per_s_bound", 1),
    ("predicted", "fit.held_bytes", 1e-6),
    ("measured", "peak_bytes", 1e-6),
)
LOOP_COLUMNS = (
    ("measured", "prefill_s", 1e3),
    ("predicted", "ttft.estimate_s", 1e3),
    ("predicted", "ttft.bound_s", 1e3),
    ("measured", "tpot_s", 1e3),
    ("predicted", "tpot.estimate_s", 1e3),
    ("predicted", "tpot.bound_s", 1e3),
)
MORE_COLUMNS = (
    ("measured", "ttft_s", 1e3),
    ("predicted", "ttft.estimate_s", 1e3),
    ("measured", "tpot_s", 1e3),
    ("predicted", "tpot.estimate_s", 1e3),
    ("measured", "tokens_per_s", 1),
    ("predicted", "tokens_per_s_estimate", 1),
    ("predicted", "fit.held_bytes", 1e-9),
    ("measured", "peak_bytes", 1e-9),
)


def shows_row(key: str, label: str, row: object, prediction: object, columns: tuple) -> None:
    figures = []
    for side, name, factor in columns:
        value = row if side == "measured" else prediction
        for part in name.split("."):
            value = getattr(value, part)
        figures.append(value * factor)
    assert_page_shows(table_row(key, label), figures, f"the row {label!r}")


def test_the_table_of_measured_and_predicted_generation(compared) -> None:
    for row, p in compared:
        shows_row("generate", ROWS[row.batch], row, p, GENERATE_COLUMNS)


def test_the_gap_paragraph(compared) -> None:
    """The measured decode steps are host-bound: hundreds of times the bound, about six times the estimate."""
    tpot = [row.tpot_s for row, _ in compared]
    bounds = [p.tpot.bound_s for _, p in compared]
    estimates = [p.tpot.estimate_s for _, p in compared]
    assert all(p.tpot.host_bound for _, p in compared)  # the estimate is the host floor at every batch
    over_bound = [m / b for m, b in zip(tpot, bounds, strict=True)]
    over_estimate = [m / e for m, e in zip(tpot, estimates, strict=True)]
    beside = [(m - e) * 1e3 for m, e in zip(tpot, estimates, strict=True)]
    ttft = [row.ttft_s / p.ttft.estimate_s for row, p in compared]
    memory = [100 * p.fit.held_bytes / row.peak_bytes for row, p in compared]
    shape = compared[0][1].shape
    loop = pd.read_csv(LATER / "decode-loop.csv")
    figures = [
        min(bounds) * 1e6,
        max(bounds) * 1e6,
        shape.read_weights * 2 / 1e6,
        min(over_bound),
        max(over_bound),
        shape.forward_ops,
        estimates[0] * 1e3,
        min(over_estimate),
        max(over_estimate),
        min(beside),
        max(beside),
        loop[loop["model"] == "gpt2"]["tpot_s"].min() * 1e3,
        loop[loop["model"] == "gpt2"]["tpot_s"].max() * 1e3,
        min(ttft),
        max(ttft),
        min(memory),
        max(memory),
    ]
    assert_page_shows(page_figures("generate-gap"), figures, "the paragraph on the gap")


def _predicted(row: object) -> object:
    return hroofline.predict_generation(f"hf:{row.model}", "h200", row.prompt_tokens, row.new_tokens, row.batch)


def test_the_model_alone() -> None:
    loop = pd.read_csv(LATER / "decode-loop.csv")
    assert len(loop) == len(LOOP_ROWS)
    for row in loop.itertuples(index=False):
        shows_row("generate-loop", LOOP_ROWS[(row.model, row.batch)], row, _predicted(row), LOOP_COLUMNS)


def test_generate_of_the_larger_models() -> None:
    measured = pd.read_csv(LATER / "generate-times.csv")
    assert len(measured) == 6
    for row in measured.itertuples(index=False):
        shows_row("generate-more", LOOP_ROWS[(row.model, row.batch)], row, _predicted(row), MORE_COLUMNS)


def test_the_summary_of_the_model_alone() -> None:
    """The paragraph after the loop's table: each decode step's TPOT over its bound, measured / estimate of TPOT
    and of the first token (least and most), and TinyLlama's ops per forward pass."""
    loop = pd.read_csv(LATER / "decode-loop.csv")
    predicted = [(row, _predicted(row)) for row in loop.itertuples(index=False)]
    over_bound = [row.tpot_s / p.tpot.bound_s for row, p in predicted]
    tpot = [row.tpot_s / p.tpot.estimate_s for row, p in predicted]
    first = [row.prefill_s / p.ttft.estimate_s for row, p in predicted]
    tinyllama = next(p for row, p in predicted if row.model == "tinyllama-1.1b")
    figures = [min(over_bound), max(over_bound), min(tpot), max(tpot), min(first), max(first)]
    figures.append(tinyllama.shape.forward_ops)
    assert_page_shows(page_figures("generate-summary"), figures, "the paragraph after the model alone")


def test_the_requests_shape_is_the_files() -> None:
    """Key ``generate-setup``: 128 prompt + 128 new tokens; TPOT is a 128-token call over its 127 later tokens."""
    measured = pd.read_csv(MEASURED)
    (prompt,), (new,) = measured["prompt_tokens"].unique(), measured["new_tokens"].unique()
    assert_page_shows(page_figures("generate-setup"), [prompt, new, new, new - 1], "the measured requests' shape")


def test_the_loops_shape_is_the_files() -> None:
    """Key ``generate-loop-setup``: 127 one-token passes after the prompt's; TinyLlama's 4 KV heads, as the
    config that built the measured model says (hroofline.collect.models.HF_CONFIGS, tests/data/gpu-2026-11-28b)."""
    from hroofline.collect.models import HF_CONFIGS

    loop = pd.read_csv(LATER / "decode-loop.csv")
    (new,) = loop["new_tokens"].unique()
    kv_heads = HF_CONFIGS["tinyllama-1.1b"][2]["num_key_value_heads"]
    assert_page_shows(page_figures("generate-loop-setup"), [new - 1, kv_heads], "the loop's shape")
