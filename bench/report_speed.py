"""Benchmark: the roof tables of a report's run section, with the run's terms made once (issue: analysis hot paths).

A run's section of ``hroofline report`` draws two roof tables per phase (the chart's kernels, the top layers)
and one over the whole run for its notes. Each table sums per-launch terms that do not depend on which launches
it selects: time at roof, utilisation against the run's dense peaks, the collectives' link terms. The report
makes them once per run (:func:`hroofline.analyze.binding.run_terms`); a table made without them makes its own.

On the sample prediction of ResNet-50 on a V100 (samples/store, in the repository; 524 launches in 3 phases):

* baseline: the section's tables each made with its own terms (``roof_table`` without ``known``), in this run;
* the same tables from one set of run terms, made inside the timing;
* the tables are checked equal, then the times: PASS when the shared terms take under 0.75x the baseline (0.57x
  to 0.60x on a 2-core machine under load, 2026-11-29).

Best of 5 each. Prints both times and their ratio, then PASS or FAIL; exits 1 on FAIL.

Run as ``make bench`` or ``.venv/bin/python bench/report_speed.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from hroofline.analyze.binding import RoofNotes, RunTerms, roof_table, run_terms
from hroofline.analyze.kernels import KernelQuery, phase_summary
from hroofline.model.run import Run
from hroofline.roofs.ceilings import RunRoofs, run_roofs
from hroofline.store.runs import RunStore

REPO = Path(__file__).resolve().parent.parent
RUN = "resnet50-amp-v100-predicted"
REPEAT = 5
LIMIT = 0.75  # shared terms against the baseline


def section_tables(run: Run, roofs: RunRoofs, known: Callable[[], RunTerms | None]) -> list[pd.DataFrame]:
    """The roof tables a report section draws: per phase its kernels and its layers, then the whole run's."""
    terms = known()
    queries = [
        KernelQuery(group_by=group, phase=phase)
        for phase in phase_summary(run)
        if phase != "total"
        for group in ("name", "layer")
    ]
    return [roof_table(run, roofs, query, RoofNotes(), terms) for query in [*queries, KernelQuery(group_by="name")]]


def best_of(make: Callable[[], list[pd.DataFrame]]) -> tuple[float, list[pd.DataFrame]]:
    best, tables = float("inf"), []
    for _ in range(REPEAT):
        start = time.perf_counter()
        tables = make()
        best = min(best, time.perf_counter() - start)
    return best, tables


def main() -> int:
    run = RunStore(REPO / "samples" / "store").load(RUN)
    roofs = run_roofs(run)
    baseline, expected = best_of(lambda: section_tables(run, roofs, lambda: None))
    shared, tables = best_of(lambda: section_tables(run, roofs, lambda: run_terms(run, roofs)))
    for made, wanted in zip(tables, expected, strict=True):
        pd.testing.assert_frame_equal(made, wanted)
    ratio = shared / baseline
    print(f"{len(expected)} roof tables of {RUN} ({len(run.launches)} launches)")
    print(f"{'baseline: each table its own terms':<40} {baseline:6.3f} s")
    print(f"{'the run terms made once':<40} {shared:6.3f} s  {ratio:5.2f}x baseline  limit {LIMIT:.2f}x")
    ok = ratio < LIMIT
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
