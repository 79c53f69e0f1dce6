"""The validation page's paragraph on hosts of one kind of machine (docs/validation.md, key host-machines), figure
by figure: the NCHW training steps at batch 32 timed on four H200 machines (tests/data/gpu-2026-11-27/, the third,
fourth and fifth visits' step files; tests/test_host_cost.py checks the same spread in make test)."""

from __future__ import annotations

from tests.test_host_cost import host_bound_timings
from tests.validation_page import assert_page_shows, page_figures


def test_a_host_bound_step_differs_between_machines_of_one_kind() -> None:
    timings = host_bound_timings()
    clean, after_profiler = timings.iloc[:, :2], timings.iloc[:, 2:]
    (batch,) = timings.index.get_level_values("batch").unique()
    vgg = timings.index.get_level_values("model") == "vgg16"  # long kernels: not the host's step
    spread = clean.max(axis=1) / clean.min(axis=1)
    slower = after_profiler.max(axis=1) / clean.min(axis=1)
    slowest = slower[~vgg].idxmax()  # DenseNet-121 amp's
    figures = [batch, spread[~vgg].min(), spread[~vgg].max(), (spread[vgg].max() - 1) * 100]
    figures += [spread[~vgg].max() ** 0.5, slower[~vgg].max()]  # one floor between the two: off by its root
    figures += [*(after_profiler.loc[slowest] * 1e3), *(clean.loc[slowest] * 1e3), (slower[vgg].max() - 1) * 100]
    assert_page_shows(page_figures("host-machines"), figures, "the hosts of machines of one kind")
