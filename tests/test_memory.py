"""Memory per phase: tensor storages tracked at the dispatcher, against hand counts and measured GPU memory."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from hroofline.analyze.memory_fit import USABLE_SHARE, memory_fit
from hroofline.collect.memory_tracking import CUDA_BLOCK_BYTES, StepTensors, StorageLiveness
from hroofline.collect.meta_trace import trace_step_memory
from hroofline.collect.workload import WorkloadConfig
from hroofline.roofs.catalog import resolve_gpu
from tests.conftest import SHARED, estimate_error_bench, need

COURSE_REPORT = "background/004_247ed1562cabaee4.txt"


def _blocks(nbytes: int) -> int:
    return -(-nbytes // CUDA_BLOCK_BYTES) * CUDA_BLOCK_BYTES


def test_liveness_counts_what_autograd_keeps() -> None:
    """Linear -> ReLU -> Linear, batch 64, on the CPU: forward keeps ReLU's output (saved by ReLU and the
    second Linear) and the scalar loss; the first Linear's output is a temporary, freed once ReLU ran."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    x = torch.randn(64, 1024)
    held = StepTensors(list(model.parameters()), [], [], [x])
    liveness = StorageLiveness(held, lambda: [p.grad for p in model.parameters()])
    hidden = 64 * 1024 * 4
    with liveness:
        liveness.listen("forward", True)
        loss = model(x).square().mean()
        liveness.listen("forward", False)
        liveness.listen("backward", True)
        loss.backward()
        liveness.listen("backward", False)
    forward, backward = liveness.phases
    weights = sum(_blocks(p.numel() * 4) for p in model.parameters())
    assert forward.start_bytes == weights + hidden
    assert forward.peak_by_category["temporaries"] >= hidden  # the first Linear's output, at ReLU
    # kept: ReLU's output, the second Linear's output (square saves its input), the loss; the square itself is
    # freed (mean saves no tensor)
    kept = hidden + _blocks(64 * 10 * 4) + _blocks(4)
    assert forward.retained_bytes == kept
    assert forward.end_by_category["activations"] == kept
    # backward frees what forward kept and leaves one gradient per parameter
    assert backward.end_by_category["gradients"] == weights
    assert backward.end_by_category["activations"] == _blocks(4)  # the loss lives on in `loss`
    assert backward.retained_bytes == weights - kept + _blocks(4)


def _course_table() -> dict[str, int]:
    """The course report's A100 table: bytes torch.cuda.memory_allocated grew by over one forward pass."""
    text = need(SHARED / COURSE_REPORT).read_text()
    a100 = text[text.index("NVIDIA A100-SXM4-40GB :") : text.index("NVIDIA Tesla T4:")]
    return {m[1]: int(m[2]) for m in re.finditer(r"\*\*(\w+)\*\*\s*\|\s*\d+\s*\|\s*(\d+)\s*\|", a100)}


@pytest.mark.parametrize("arch", ["resnet18", "alexnet", "vgg16"])
def test_forward_memory_matches_the_course_measurements(arch: str) -> None:
    measured = _course_table()[arch]
    trace = trace_step_memory(WorkloadConfig(arch, 256), "train")
    forward = next(m for m in trace.memory if m.phase == "forward")
    assert forward.retained_bytes == pytest.approx(measured, rel=0.015)


def test_vgg16_training_does_not_fit_a_t4(cli, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    argv = ["predict", "--arch", "vgg16", "--gpu", "t4", "--batch-size", "256", "--run", "vgg", "--store", store]
    result = cli(*argv)
    assert result.code == 0, result.err
    found = re.search(r"DOES NOT FIT the t4 .*largest batch that fits: (\d+) \(traced\)", result.out)
    assert found, result.out
    largest = int(found[1])
    usable = resolve_gpu("t4").memory_bytes * USABLE_SHARE
    peak = max(m.peak_bytes for m in trace_step_memory(WorkloadConfig("vgg16", largest), "train").memory)
    assert peak <= usable
    over = max(m.peak_bytes for m in trace_step_memory(WorkloadConfig("vgg16", largest + 8), "train").memory)
    assert over > usable  # the answer is the largest to within a few samples
    summary = json.loads(cli("summary", "vgg", "--format", "json", "--store", store).out)
    forward = summary["phases"]["forward"]
    assert forward["memory_retained_bytes"] == pytest.approx(18.6e9, rel=0.01)
    assert summary["total"]["memory_peak_bytes"] > resolve_gpu("t4").memory_bytes


def test_the_fit_line_solves_from_the_peak_split() -> None:
    trace = trace_step_memory(WorkloadConfig("resnet18", 64), "train")
    fit = memory_fit("t4", resolve_gpu("t4").memory_bytes, trace.memory, 64)
    assert fit.fits and not fit.largest_batch_traced
    at_largest = max(m.peak_bytes for m in trace_step_memory(WorkloadConfig("resnet18", fit.largest_batch)).memory)
    assert at_largest == pytest.approx(fit.usable_bytes, rel=0.02)


def test_a_gpu_profile_reads_the_memory_its_workload_wrote(tmp_path: Path) -> None:
    """The workload writes each phase's CUDA memory (torch.cuda.memory_stats) beside the ncu report; profile
    attaches it to the run. No GPU here: the record is written as the workload writes it, from PhaseMemory."""
    from dataclasses import asdict

    from hroofline.collect.memory_tracking import write_memory
    from hroofline.collect.ncu_backend import with_measured_memory
    from hroofline.collect.ncu_command import NcuSettings, workload_command
    from hroofline.importers.source import ImportedSource
    from hroofline.model.run import CUDA_MEMORY_METHOD, PhaseMemory, SourceInfo

    record = tmp_path / "memory.json"
    command = workload_command(WorkloadConfig("resnet18", 8), NcuSettings(warmup=1, steps=2), True, record)
    assert command[-2:] == ["--memory-out", str(record)]
    phases = [
        PhaseMemory(phase, 1e9, 2e9 + i, 1e9 + i, CUDA_MEMORY_METHOD) for i, phase in enumerate(["forward", "backward"])
    ]
    write_memory(record, [*phases, PhaseMemory("forward", 0, 9e9, 0, CUDA_MEMORY_METHOD)])  # a second step's
    source = ImportedSource(SourceInfo("x", "ncu-rep", "0", 0), launches=None, cc="7.0", device_name=None)
    attached = with_measured_memory(source, record).info.memory
    assert [asdict(m) for m in attached] == [asdict(m) for m in phases]
    assert with_measured_memory(source, tmp_path / "none.json").info.memory == []


def h100_memory_rows() -> pd.DataFrame:
    """../shared/reference/h100-step-times.csv: 24 training steps with their peak memory (max_memory_allocated over
    the timed steps), 5 forward passes at batch 256 with memory_allocated's growth across them."""
    return pd.read_csv(need(SHARED / "reference" / "h100-step-times.csv"))


def predicted_over_measured(row: Any) -> float:
    """A row's predicted memory over its measured: a training step's peak, or a forward pass's retention."""
    trace = estimate_error_bench().traced(row.model, int(row.batch), row.precision, "train", False)
    if row.measured == "step":
        predicted = max(phase.peak_bytes for phase in trace.memory)
    else:
        predicted = next(phase for phase in trace.memory if phase.phase == "forward").retained_bytes
    return predicted / row.memory_bytes


def test_predicted_memory_holds_on_a_few_shared_h100_rows() -> None:
    """Three of the H100's memory rows (tests/figures/test_memory.py checks all 29): ResNet-18's training steps at
    batch 32 in FP32 and AMP, the predicted peak within 15% of max_memory_allocated; its forward pass at batch 256,
    the predicted retention within 15% of memory_allocated's growth."""
    rows = h100_memory_rows()
    rows = rows[(rows["model"] == "resnet18") & rows["batch"].isin([32, 256])]
    assert sorted(zip(rows["precision"], rows["batch"], strict=True)) == [("amp", 32), ("fp32", 32), ("fp32", 256)]
    ratios = {(row.precision, row.batch): round(predicted_over_measured(row), 3) for row in rows.itertuples()}
    assert all(0.85 <= ratio <= 1.15 for ratio in ratios.values()), ratios
