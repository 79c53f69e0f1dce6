"""Analytic bytes and FLOPs of ops a trace records in a form PyTorch's meta device does not run as the GPU did: a
tensor list (no dtype in the trace), dropout (one fused kernel, not its decomposition), the negative
log-likelihood (one log-probability read per target), a list whose shapes the profiler left out, cuDNN's batch
norm. Real traces: the H100 GPT-2 bf16 step of ../shared/fixtures/h100 (its README), whose 1,118 kernels an ncu
report of the same step measured, and the H100 ResNet-50 AMP step of tests/data/gpu-2026-11-27 (its README). Every
expected figure is counted here from the ops' recorded shapes."""

from __future__ import annotations

import json
import lzma
from functools import cache
from math import prod
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hroofline.api import load
from hroofline.importers.kineto import parse_trace
from hroofline.importers.trace_source import TraceOptions, trace_source
from hroofline.model.quantities import FLOP_QUANTITIES
from hroofline.roofs.metricset import load_metric_set
from tests.conftest import REPO, SHARED, need

GPT2 = SHARED / "fixtures" / "h100" / "gpt2-amp-bf16-b8-s512-trace.json.xz"
RESNET50 = REPO / "tests" / "data" / "gpu-2026-11-27" / "h100-resnet50-amp-b32-nchw-trace.json.xz"
BF16, FLOAT32, INT64, BOOL = 2, 4, 8, 1  # bytes an element


@cache
def _ops(path: Path, name: str) -> tuple[dict[str, Any], ...]:
    events = json.loads(lzma.decompress(need(path).read_bytes()))["traceEvents"]
    return tuple(e["args"] for e in events if e.get("cat") == "cpu_op" and e["name"] == name)


@cache
def _resnet50() -> pd.DataFrame:
    trace = parse_trace(lzma.decompress(RESNET50.read_bytes()), RESNET50)
    return trace_source(trace, "r50", TraceOptions(), load_metric_set()).launches


def _gpt2(h100_runs_store: Path) -> pd.DataFrame:
    return load("gpt2", h100_runs_store).launches


def test_a_concatenation_moves_its_elements_at_the_size_its_kernel_says(h100_runs_store: Path) -> None:
    """torch.cat's inputs are a list, recorded without a dtype; its kernel is instantiated per element size
    (CatArrayBatchedCopy<OpaqueType<2u>>: bf16). Each cat reads its inputs and writes them once: 0.755 GB in the
    step's 36 (1.510 GB when taken as float32)."""
    launches = _gpt2(h100_runs_store)
    cats = launches[launches["kernel"].str.contains("CatArrayBatchedCopy")]
    assert len(cats) == 36 and cats["kernel"].str.contains("OpaqueType<2u>").all()
    elements = sum(prod(shape) for args in _ops(GPT2, "aten::cat") for shape in args["Input Dims"][0])
    assert cats["bytes_hbm"].sum() == pytest.approx(2 * BF16 * elements, rel=1e-9)
    assert round(cats["bytes_hbm"].sum() / 1e9, 3) == 0.755


def test_dropout_is_its_fused_kernel(h100_runs_store: Path) -> None:
    """aten::dropout runs one kernel (fused_dropout_kernel_vec): its input read, its output and a one-byte mask
    written; on the meta device it decomposes into bernoulli_, div_ and mul (2.4 times the bytes in bf16)."""
    launches = _gpt2(h100_runs_store)
    kernels = launches[launches["kernel"].str.contains("fused_dropout_kernel")]
    assert len(kernels) == 25 and (kernels["work_op"] == "aten::native_dropout").all()
    expected = 0.0
    for args in _ops(GPT2, "aten::native_dropout"):
        size = {"c10::BFloat16": BF16, "float": FLOAT32}[args["Input type"][0]]
        expected += prod(args["Input Dims"][0]) * (2 * size + BOOL)
    assert kernels["bytes_hbm"].sum() == pytest.approx(expected, rel=1e-9)


def test_the_loss_reads_one_log_probability_per_target(h100_runs_store: Path) -> None:
    """nll_loss gathers one of the 50,257 log-probabilities of each of the 4,096 tokens; its backward writes the
    whole gradient (zeros, then a value per target) and reads the log-probabilities for their shape alone."""
    launches = _gpt2(h100_runs_store)
    (forward,) = _ops(GPT2, "aten::nll_loss_forward")
    (logits, target, *_) = forward["Input Dims"]
    on = launches.groupby("work_op")["bytes_hbm"].sum()  # each op's kernels (the backward's fill among them)
    gradient = prod(logits) * FLOAT32
    # forward, counted as the cross-entropy around both (named by its log-softmax): the log-softmax reads and
    # writes the logits once, the loss gathers one float32 per int64 target and writes its output and total weight
    gathered = prod(target) * (FLOAT32 + INT64) + 2 * FLOAT32
    assert on["aten::_log_softmax"] == pytest.approx(2 * gradient + gathered)
    assert on["aten::nll_loss_backward"] == pytest.approx(gradient + prod(target) * INT64 + 2 * FLOAT32)


def test_a_list_without_its_shapes_has_unknown_work() -> None:
    """The profiler leaves out the shapes of a list of over 30 tensors: AMP's unscale of ResNet-50's 161 gradients
    is recorded as [[], [], []], its work unknown (it was 12 bytes: the list taken as empty)."""
    (args, *_) = _ops(RESNET50, "aten::_amp_foreach_non_finite_check_and_unscale_")
    assert args["Input Dims"][0] == [] and args["Input type"][0] == "TensorList"
    launches = _resnet50()
    unscale = launches[launches["op"] == "aten::_amp_foreach_non_finite_check_and_unscale_"]
    assert len(unscale) >= 1 and unscale["bytes_hbm"].isna().all() and (unscale["work_source"] == "unknown").all()


def test_cudnn_batch_norm_does_its_arithmetic() -> None:
    """cuDNN's batch norm backward (two reductions and the input gradient: 9 FLOPs an element, as
    native_batch_norm_backward in metrics/cpu_ops.toml) had no FLOPs; forward 8 an element."""
    launches = _resnet50()
    flops = launches[list(FLOP_QUANTITIES)].fillna(0).sum(axis=1)
    for name, per_element in (("aten::cudnn_batch_norm_backward", 9), ("aten::cudnn_batch_norm", 8)):
        elements = sum(prod(args["Input Dims"][0]) for args in _ops(RESNET50, name))
        counted = flops[launches["work_op"] == name].sum()
        if name == "aten::cudnn_batch_norm":  # counted through the aten::batch_norm around it
            counted = flops[launches["op"] == name].sum()
        assert counted == pytest.approx(per_element * elements, rel=1e-9)


def test_above_the_hbm_roof_with_more_bytes_than_l2_holds(h100_runs_store: Path, tmp_path: Path) -> None:
    """A kernel group faster than its analytic bytes allow at HBM was put down to data left resident in L2, even
    where an L2 full of its data (50 MiB a launch) leaves more to come from HBM than its time allows (GPT-2's
    nll_loss_backward fill, 1.58 GB in 249 us before its bytes were mended): that is said apart. On the
    datasheet's roofs no GPT-2 kernel is; under an HBM roof set at 1 TB/s, some are."""
    from hroofline.analyze.binding import BEYOND_L2, RESIDENT
    from hroofline.analyze.kernels import KernelQuery
    from hroofline.api.outputs import top

    run = load("gpt2", h100_runs_store)
    grouped = KernelQuery(group_by="name")
    assert not [a for a in top(run, grouped).notes.above if a.kind == BEYOND_L2]
    (tmp_path / "low.toml").write_text('name = "low-hbm"\n[ceilings]\nhbm = 1.0e12\ntensor_bf16 = 989e12\n')
    above = top(run, grouped, str(tmp_path / "low.toml")).notes.above
    launches = run.launches
    l2 = 50 * 2**20
    kinds = {a.kind for a in above}
    assert kinds == {RESIDENT, BEYOND_L2}
    for record in above:
        group = launches[(launches["kernel"] == record.kernel) & (launches["phase"].astype(str) == record.phase)]
        fast = group[group["time_s"] < group["bytes_hbm"] / 1.0e12]  # HBM-bound here: no compute roof is closer
        assert len(fast) == record.launches_above
        rest_from_hbm = (fast["bytes_hbm"].sum() - l2 * len(fast)) / 1.0e12
        assert record.kind == (BEYOND_L2 if fast["time_s"].sum() < rest_from_hbm else RESIDENT)


def test_a_prediction_counts_dropout_as_its_fused_kernel(tmp_path: Path) -> None:
    """predict traces the model on the meta device, where dropout decomposes (bernoulli_, div_, mul); on a GPU it
    is one native_dropout kernel, as the traces above show: input read, output and mask written once."""
    import torch

    from hroofline.api import predict

    batch, width = 8, 256
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Dropout(0.1), torch.nn.Linear(width, 10))
    launches = predict(model, "h100-sxm", input_shape=(width,), batch_size=batch, store=tmp_path).launches
    assert not launches["kernel"].isin(["aten::bernoulli_", "aten::div_"]).any()
    forward = launches[(launches["kernel"] == "aten::native_dropout") & (launches["phase"] == "forward")]
    assert len(forward) == 1 and forward["bytes_hbm"].item() == batch * width * (2 * FLOAT32 + BOOL)
    assert (launches["kernel"] == "aten::native_dropout_backward").sum() == 1
