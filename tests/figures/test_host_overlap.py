"""The validation page's paragraph on why the estimate sums host and GPU time per op (docs/validation.md, key
``sum-per-op-traces``), recomputed from the H200's 26 torch.profiler traces and compared with the page figure by
figure. tests/test_host_overlap.py checks the three ways of adding them up in make test."""

from __future__ import annotations

from tests.test_host_overlap import (
    TRACES,
    errors,
    host_bound,
    in_order_queue,
    max_of_sums,
    profiler_slowdown,
    recorded_step,
    sum_per_op,
)
from tests.validation_page import assert_page_shows, page_figures


def test_the_page_shows_how_host_and_gpu_time_add_up_on_the_h200_traces() -> None:
    host_bound_steps = sum(host_bound(recorded_step(path)) for path in TRACES)
    ways = (in_order_queue, max_of_sums, sum_per_op)
    computed = [
        len(TRACES),
        *(figure for way in ways for figure in errors(way)),
        profiler_slowdown(),
        host_bound_steps,
        len(TRACES) - host_bound_steps,
        *(figure for way in ways for figure in errors(way, only_mixed=True)),
    ]
    assert_page_shows(page_figures("sum-per-op-traces"), computed, "the sum per op on the H200's traces")
