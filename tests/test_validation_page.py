"""Every figure of the validation page (docs/validation.md) is accounted for: each block of the page holding a
number is keyed (``<!-- figures: KEY -->``), and each key is here, either CHECKED (a figure check reads the page and
compares each of the block's figures with what it computes now, tests/figures/test_validation_page.py) or, with
why, NOT_READ (recomputed by the tests named, which keep their own copy of the figures, or recorded: measured on a
lent GPU, timed on one machine, or the figures of an earlier version). A new block of figures, a key no test knows,
or a table row no check computes fails here. Cheap: reads the page and the check's source (make test)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.validation_page import PAGE, keyed_blocks, page_blocks, table_row

FIGURE_CHECKS = Path(__file__).resolve().parent / "figures" / "test_validation_page.py"

# Blocks whose figures a figure check compares with the page one by one (each table row: its figures after the
# first cell; the first cell, what the row describes, is in NOT_READ below).
CHECKED = {"held-out": FIGURE_CHECKS, "widest-band": FIGURE_CHECKS}

# Blocks whose figures no test reads from the page, and why (the page's opening says so too).
RECORDED = "recorded, not recomputed"
NOT_READ = {
    "held-out": "the first column: counts of steps (asserted as literals beside the rows' figures), batch ranges, "
    "PyTorch versions and dates describing each row's steps",
    "error-factor": "the reading's example (the table's first row) and the goals (x1.2 / x1.6; the H100's, "
    "bench/estimate_error.py H100_GOAL), not measurements",
    "deepcam": "the tolerances tests/test_deepcam.py holds every kernel to (make test)",
    "bound": "the steps faster than their bound: bench/estimate_error.py lists them, no test reads the page",
    "estimate": "the batch range of NVIDIA's published tables (../shared/reference/published-step-times.csv)",
    "h100-leaning": "medians of estimate/measured, now and before two changes (history), not read from the page",
    "hopper-efficiencies": "tests/figures/test_hopper_estimate.py and test_memory.py recompute these with their own "
    "copy; x1.254 / x1.61 are an earlier version's",
    "hopper-band": "tests/figures/test_hopper_estimate.py and test_timm_step_times.py recompute the bands with their "
    "own copy; the EfficientNet-V2-S example's times are " + RECORDED + " (an H200's)",
    "depthwise": "kernel times " + RECORDED + " (H200 traces, tests/test_depthwise.py); the fits' losses and errors "
    "recomputed by tests/figures/test_hopper_estimate.py and test_timm_step_times.py with their own copy",
    "timm-leaning": "leaning and per-GPU figures on timm's rows printed by bench/estimate_error.py, not read",
    "host-weights": "the probe's times " + RECORDED + " (an H100's host, tests/data/gpu-2026-11-27/"
    "h100-host-dispatch.json); before/after figures of the fit, the before ones an earlier version's (history)",
    "host-weights-readings": "readings of the probe tried once from a scratch patch of the bench (not kept): "
    + RECORDED,
    "sum-per-op-traces": "tests/test_host_overlap.py recomputes these with its own copy (make test)",
    "sum-per-op-fits": "bench/host_overlap.py's figures; tests/figures/test_timm_step_times.py recomputes some "
    "with its own copy",
    "host-probe": "the probe's shape and the host weights' means (hroofline/collect/host_cost.py); the default "
    "floor's line as predict prints it",
    "host-probe-third-visit": "tests/figures/test_host_cost.py recomputes these with its own copy; the earlier "
    "ones are history",
    "host-probe-fifth-visit": "tests/figures/test_hopper_estimate.py and test_host_cost.py recompute these with "
    "their own copy; the probe's and the steps' times are " + RECORDED + " (H200s)",
    "layout-conversions": "tests/test_layout_conversions.py and tests/figures/test_layout_conversions.py recompute "
    "these with their own copy; kernel times " + RECORDED + " (H100 and H200 traces)",
    "batch-norm": "tests/test_batch_norm.py and tests/figures/test_batch_norm.py recompute these with their own "
    "copy; the rates " + RECORDED + " (H200 traces); before/after figures are history",
    "flops-reproduce": "the batch size of the memory check",
    "flops": "tests/test_predict.py and tests/figures/test_memory.py recompute these with their own copy; the "
    "course report's are " + RECORDED,
    "gpt2-flops": "tests/test_predict.py recomputes these with its own copy",
    "graph-capture": "tests/test_graph_capture.py recomputes these with its own copy (make test)",
    "signatures": RECORDED + ": launches measured under ncu on an H100 and an H200 (estimates so marked)",
    "signatures-estimates": RECORDED + " (a CPU trace of resnet34 and the H100's launches)",
    "signatures-accuracy": "bench/collection_cost.py's figures on the shared H100 GPT-2 step (make bench)",
    "h100": RECORDED + ": the H100's software and what ran on it",
    "h100-gemms": "tests/test_h100.py recomputes these from the shared reports with its own copy (make test)",
    "mfu": "tests/test_utilization.py recomputes these from the shared H100 files with its own copy (make test)",
    "h100-findings": "tests/test_h100.py checks these on the shared files with its own copy; the measured "
    "ceilings are " + RECORDED,
    "second-visit": RECORDED + " (an H100 and an H200); tests/test_real_gpu_runs.py checks them on the files",
    "third-visit": RECORDED + " (an H200); the estimates recomputed by tests/figures/test_host_cost.py with its "
    "own copy",
    "fourth-visit": RECORDED + " (an H200); the estimates recomputed by tests/figures/test_layout_conversions.py "
    "with its own copy",
    "fifth-visit": RECORDED + " (an H200); the estimates recomputed by tests/figures/test_hopper_estimate.py with "
    "its own copy",
    "sixth-visit": RECORDED + " (an H100); the estimates recomputed by tests/figures/test_hopper_estimate.py and "
    "test_batch_norm.py with their own copy",
    "large-runs": RECORDED + ": make bench's times and memory on a 2-core machine",
    "benchmarks": "make bench's goals, and the held-out table's figures repeated (checked equal to the table's here)",
}


def test_every_block_of_figures_is_keyed_and_known() -> None:
    blocks = page_blocks(PAGE.read_text(encoding="utf-8"))
    for block in blocks:
        if block.figures:
            assert block.key is not None, (
                f"{PAGE.name}:{block.first}: figures ({block.figures[0].text}, ...) under no "
                "'<!-- figures: KEY -->' line: key the block and add it to tests/test_validation_page.py"
            )
        if block.key is not None:
            assert block.key in CHECKED or block.key in NOT_READ, (
                f"{PAGE.name}:{block.first}: the key {block.key!r} is neither checked nor listed as not read "
                "(tests/test_validation_page.py)"
            )
    keys = [block.key for block in blocks if block.key is not None]
    assert len(keys) == len(set(keys)), f"{PAGE.name}: a key used twice"
    missing = (set(CHECKED) | set(NOT_READ)) - set(keys)
    assert not missing, f"{PAGE.name}: keys not on the page: {sorted(missing)}"


def test_every_checked_block_and_table_row_is_computed() -> None:
    """Each checked block is one its figure check reads (its key a string there), and each row of a checked table
    one it names (it compares the row's figures, and fails where the row is missing or named twice)."""
    for key, check in CHECKED.items():
        labels = [
            node.value
            for node in ast.walk(ast.parse(check.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        ]
        block = keyed_blocks()[key]
        if not block.lines[0].startswith("|"):
            assert key in labels, f"{PAGE.name}:{block.first}: {check.name} does not read the block {key!r}"
            continue
        rows = [(block.first + i, line) for i, line in enumerate(block.lines[2:], 2) if line.startswith("|")]
        for number, line in rows:
            first_cell = line.split("|")[1].strip()
            named = [label for label in labels if len(label) >= 12 and first_cell.startswith(label)]
            assert named, f"{PAGE.name}:{number}: no figure check computes the row {first_cell[:60]!r} ({check.name})"
            assert table_row(key, named[0])


def test_the_benchmarks_block_repeats_the_tables_figures() -> None:
    """The Benchmarks section's held-out figures are the table's (which the figure check compares with the code)."""
    table = [figure.text for figure in keyed_blocks()["held-out"].figures]
    repeated = [figure for figure in keyed_blocks()["benchmarks"].figures if figure.text.startswith("x")]
    goal = repeated[-2:]  # x1.2 / x1.6, the goal
    for figure in repeated[:-2]:
        assert figure.text in table, f"{PAGE.name}:{figure.line}: {figure.text} is no figure of the held-out table"
    assert [figure.value for figure in goal] == [1.2, 1.6]
