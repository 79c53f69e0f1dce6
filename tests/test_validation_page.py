"""Every figure of the validation page (docs/validation.md) is accounted for: each block of the page holding a
number is keyed (``<!-- figures: KEY -->``), and each key is here, CHECKED (a figure check under tests/figures/
reads the page and compares each of the block's figures with what it computes now); NOT_READ holds only what a
table's first cell describes, with why. Figures recorded once and not kept as files are on docs/records.md, which
no check reads. A new block of figures, a key no test knows,
or a table row no check computes fails here. Cheap: reads the page and the check's source (make test)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.validation_page import PAGE, keyed_blocks, page_blocks, table_row

FIGURES = Path(__file__).resolve().parent / "figures"
FIGURE_CHECKS = FIGURES / "test_validation_page.py"

HOPPER_CHECKS = FIGURES / "test_hopper_estimate.py"
TIMM_CHECKS = FIGURES / "test_timm_step_times.py"
GENERATION_CHECK = FIGURES / "test_generate.py"
TRACE_CHECKS = FIGURES / "test_trace_figures.py"

# Blocks whose figures a figure check (the file named) compares with the page one by one (each table row: its
# figures after the first cell; the first cell, what the row describes, is in NOT_READ below).
CHECKED = {
    "held-out": FIGURE_CHECKS,
    "widest-band": FIGURE_CHECKS,
    "sum-per-op-traces": FIGURES / "test_host_overlap.py",
    "layout-conversions": FIGURES / "test_layout_conversions.py",
    "batch-norm": FIGURES / "test_batch_norm.py",
    "host-probe-third-visit": FIGURES / "test_host_cost.py",
    "flops": FIGURES / "test_flops.py",
    "flops-reproduce": FIGURES / "test_flops.py",
    "gpt2-flops": FIGURES / "test_flops.py",
    "h100-gemms": FIGURES / "test_h100.py",
    "h100-findings": FIGURES / "test_h100.py",
    "host-probe": FIGURES / "test_host_cost.py",
    "signatures-accuracy": FIGURES / "test_collection_cost.py",
    "host-weights": FIGURES / "test_host_cost.py",
    "host-weights-readings": FIGURES / "test_host_cost.py",
    "fourth-visit": FIGURES / "test_layout_conversions.py",
    "third-visit": FIGURES / "test_host_cost.py",
    "second-visit": FIGURES / "test_real_gpu_runs.py",
    "signatures": FIGURES / "test_collection_cost.py",
    "large-runs": FIGURES / "test_large_runs.py",
    "benchmarks": FIGURES / "test_benchmarks.py",
    "compiled-layers": FIGURES / "test_compiled_figures.py",
    "compiled-ncu": FIGURES / "test_compiled_figures.py",
    "mfu": FIGURES / "test_mfu_figures.py",
    "error-factor": FIGURE_CHECKS,
    "estimate": FIGURE_CHECKS,
    "bound": FIGURE_CHECKS,
    "h100-leaning": FIGURE_CHECKS,
    "hopper-efficiencies": HOPPER_CHECKS,
    "hopper-memory": FIGURES / "test_memory.py",
    "hopper-band": HOPPER_CHECKS,
    "depthwise-hopper": HOPPER_CHECKS,
    "host-probe-fifth-visit": HOPPER_CHECKS,
    "fifth-visit": HOPPER_CHECKS,
    "sixth-visit": HOPPER_CHECKS,
    "published-band": TIMM_CHECKS,
    "depthwise-nvidia": TIMM_CHECKS,
    "timm-leaning": TIMM_CHECKS,
    "sum-per-op-fits": TIMM_CHECKS,
    "depthwise": FIGURES / "test_depthwise.py",
    "host-machines": FIGURES / "test_host_machines.py",
    "fifth-visit-traces": FIGURES / "test_visit_traces.py",
    "sixth-visit-traces": FIGURES / "test_visit_traces.py",
    "generate": GENERATION_CHECK,
    "generate-gap": GENERATION_CHECK,
    "generate-loop": GENERATION_CHECK,
    "generate-more": GENERATION_CHECK,
    "generate-summary": GENERATION_CHECK,
    "graph-capture": TRACE_CHECKS,
    "serving": TRACE_CHECKS,
    "fp8-gemms": TRACE_CHECKS,
    "unrecorded-arguments": TRACE_CHECKS,
    "deepcam": FIGURES / "test_deepcam_figures.py",
    "generate-setup": GENERATION_CHECK,
    "generate-loop-setup": GENERATION_CHECK,
    "h100": FIGURES / "test_h100.py",
}

# Blocks whose figures no test reads from the page, and why (the page's opening says so too).
NOT_READ = {
    "compare-gate": "recomputed by tests/figures/test_compare_gate_figures.py (0 false alarms and 5 catches of 5, "
    "asserted; the widest same-model change is timed on one loaded machine) and tests/test_compare_gate.py (the "
    "DeepCAM intervals' formula, make test)",
    "held-out": "the first column: counts of steps (asserted as literals beside the rows' figures), batch ranges, "
    "PyTorch versions and dates describing each row's steps",
    "generate-loop": "the first column: the model and batch each row predicts and measured",
    "generate-more": "the first column: the model and batch each row predicts and measured",
    "generate": "the first column: the model and batch each row predicts and measured (128 + 128 tokens, bf16)",
    "signatures": "the first column: what each step is (batch, tokens)",
    "h100-gemms": "the first column: the GEMMs' sizes (../shared/fixtures/h100/gemm_calibration.py's)",
    "mfu": "the first column: what each row is (the GEMM's size, its clock and roof, the step's batch)",
    "nsys-exports": "recomputed by tests/test_nsys.py against SQL on the exports, which keeps its own copy of the "
    "shares (51.2%, 94.9%) and counts",
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
