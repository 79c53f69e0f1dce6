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
from tests.validation_page import assert_page_shows, page_figures


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
