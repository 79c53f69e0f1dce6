"""What collecting one launch per signature costs in accuracy, on the shared H100 GPT-2 step (../shared/fixtures/h100:
its trace and its full ncu report), compared with the validation page (docs/validation.md, key
``signatures-accuracy``) figure by figure: the launches, those ncu measures, the per-phase differences from the full
report (what bench/collection_cost.py prints) and the copy check's note. tests/test_distinct_launches.py holds them
to their goals in make test."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hroofline.api.collection_cost import check_copy
from hroofline.collect.distinct_launches import (
    MISMATCH_WARNING_SHARE,
    TIME_MISMATCH,
    plan_distinct_launches,
    time_mismatch,
)
from hroofline.importers.build import ImportOptions, import_source
from hroofline.roofs.metricset import load_metric_set
from hroofline.store.runs import RunDefaults, RunStore
from tests.test_distinct_launches import REPORT, TRACE
from tests.test_real_gpu_runs import RESNET18, RESNET50_AMP, _unpacked
from tests.validation_page import assert_page_shows, page_figures, table_row


def test_the_page_shows_each_steps_signatures(h100_dir: Path, tmp_path: Path) -> None:
    """The table of launches, signatures and ncu profiles (docs/validation.md, key signatures): each step's trace
    pass planned again, one launch per signature (the optimizer's tensor-list launches each their own)."""
    (tmp_path / "50").mkdir()
    traces = {
        "GPT-2 124M, bf16 AMP": h100_dir / TRACE,
        "resnet18, fp32, batch 32": _unpacked(RESNET18 / "trace.json.xz", tmp_path),
        "resnet50, amp, batch 32": _unpacked(RESNET50_AMP / "trace.json.xz", tmp_path / "50"),
    }
    for label, path in traces.items():
        launches = import_source(path, ImportOptions(cpu_ops=False), load_metric_set()).launches
        plan = plan_distinct_launches(launches)
        computed = [plan.launches, plan.signatures, plan.profiled, 100 * plan.profiled / plan.launches]
        assert_page_shows(table_row("signatures", label), computed, f"the signatures of {label!r}")


def test_the_page_shows_what_the_copy_costs_in_accuracy(h100_dir: Path, tmp_path: Path) -> None:
    store, metric_set = RunStore(tmp_path / "store"), load_metric_set()
    for run, name in (("trace", TRACE), ("report", REPORT)):
        store.replace_run(
            run, [import_source(h100_dir / name, ImportOptions(), metric_set)], RunDefaults(None, None, None)
        )
    trace = store.load("trace")
    check = check_copy(trace, store.load("report"))
    plan = plan_distinct_launches(trace.launches)
    frame = trace.launches.assign(
        counters_from=pd.array(trace.launches["launch_id"].map(plan.counters_from), dtype="Int64")
    )
    off, copied, share = time_mismatch(frame)
    computed = [
        check.plan.launches,
        check.plan.profiled,
        100 * check.flops_error,
        100 * check.bytes_error,
        100 * check.time_at_roof_error,
        100 * TIME_MISMATCH,
        100 * MISMATCH_WARNING_SHARE,
        off,
        copied,
        100 * share,
    ]
    assert_page_shows(page_figures("signatures-accuracy"), computed, "what the copy costs in accuracy")
