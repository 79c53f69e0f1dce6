"""The process's last traced steps (hroofline/collect/recent_steps.py): a model predicted on a second GPU is not
traced again, and gives the launches a fresh trace gives."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest

import hroofline
from hroofline.collect import meta_trace, recent_steps
from hroofline.collect.meta_trace import StepTrace
from hroofline.collect.recent_steps import RecentSteps, keeps
from hroofline.collect.workload import WorkloadConfig


@pytest.fixture
def traced_configs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, str]]:
    """An empty memo of this test's own, and every call of the tracing function, counted."""
    monkeypatch.setattr(recent_steps, "RECENT_STEPS", RecentSteps(recent_steps.RECENT_STEPS_KEPT))
    calls: list[tuple[str, int, str]] = []
    trace = meta_trace.trace_step_memory

    def counted(config: WorkloadConfig, phases: str = "train") -> StepTrace:
        calls.append((config.arch, config.batch_size, phases))
        return trace(config, phases)

    monkeypatch.setattr(meta_trace, "trace_step_memory", counted)
    return calls


def test_a_second_gpu_reuses_the_step_traced_for_the_first(traced_configs: list[tuple[str, int, str]]) -> None:
    on_a100 = hroofline.predict("alexnet", "a100", batch_size=2)
    assert traced_configs == [("alexnet", 2, "train")]  # fits an A100 at batch 2: no other batch traced
    kept = recent_steps.RECENT_STEPS.get((WorkloadConfig("alexnet", 2, device="meta"), "train"))
    assert kept is not None and len(recent_steps.RECENT_STEPS) == 1
    as_traced = copy.deepcopy(kept)

    on_h100 = hroofline.predict("alexnet", "h100-sxm", batch_size=2)
    assert len(traced_configs) == 1  # not traced again
    assert not on_h100.launches["time_bound_s"].equals(on_a100.launches["time_bound_s"])  # another GPU's roofs
    # the kept step is read, never changed, by the predictions that share it
    pd.testing.assert_frame_equal(kept.launches, as_traced.launches)
    assert kept.memory == as_traced.memory

    recent_steps.RECENT_STEPS.clear()
    fresh = hroofline.predict("alexnet", "h100-sxm", batch_size=2)
    assert len(traced_configs) == 2
    pd.testing.assert_frame_equal(on_h100.launches, fresh.launches)
    assert on_h100.fit == fresh.fit


def test_other_phases_or_batch_sizes_are_traced(traced_configs: list[tuple[str, int, str]]) -> None:
    hroofline.predict("alexnet", "a100", batch_size=2)
    hroofline.predict("alexnet", "a100", batch_size=2, phases="forward")
    hroofline.predict("alexnet", "a100", batch_size=3)
    hroofline.predict("alexnet", "v100", batch_size=3, phases="forward")
    assert traced_configs == [("alexnet", batch, phases) for batch in (2, 3) for phases in ("train", "forward")]


def test_the_least_recently_used_step_goes_first() -> None:
    memo = RecentSteps(2)
    steps = {batch: StepTrace(pd.DataFrame({"batch": [batch]}), []) for batch in (1, 2, 3)}
    keys = {batch: (WorkloadConfig("alexnet", batch), "train") for batch in steps}
    memo.keep(keys[1], steps[1])
    memo.keep(keys[2], steps[2])
    assert memo.get(keys[1]) is steps[1]  # 1 used last: 2 is the least recently used
    memo.keep(keys[3], steps[3])
    assert len(memo) == 2 and memo.get(keys[2]) is None
    assert memo.get(keys[1]) is steps[1] and memo.get(keys[3]) is steps[3]


def test_only_models_fixed_within_the_process_are_kept(tmp_path: Path) -> None:
    assert keeps(WorkloadConfig("resnet18")) and keeps(WorkloadConfig("hf:gpt2", seq_len=8))
    # a factory in a file may be edited between two predictions in a notebook
    assert not keeps(WorkloadConfig(f"{tmp_path / 'net.py'}:build"))


def test_a_step_traced_under_another_default_dtype_is_neither_kept_nor_reused(
    traced_configs: list[tuple[str, int, str]],
) -> None:
    """The key leaves torch's default dtype out, and the model built depends on it: under float64 every prediction
    traces its own step."""
    import torch

    config = WorkloadConfig("alexnet", 2, device="meta")
    assert keeps(config)
    torch.set_default_dtype(torch.float64)
    try:
        assert not keeps(config)
        hroofline.predict("alexnet", "a100", batch_size=2)
        hroofline.predict("alexnet", "h100", batch_size=2)
    finally:
        torch.set_default_dtype(torch.float32)
    assert traced_configs == [("alexnet", 2, "train")] * 2 and len(recent_steps.RECENT_STEPS) == 0
