"""Batch norm in training over NCHW tensors runs one thread block per channel, so its time is about N x H x W over
one block's rate, not its bytes over the GPU's bandwidth (hroofline/analyze/batch_norm.py). Checked on the H200's
torch.profiler traces of 8 training steps in NCHW and channels_last (tests/data/gpu-2026-11-27/h200-layouts)."""

from __future__ import annotations

import re
from collections import defaultdict
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from hroofline.analyze.batch_norm import load_channel_rate
from hroofline.analyze.estimate import EstimateModel, estimate_times, load_estimate_model, op_kinds
from hroofline.analyze.layout import predicted_ops
from hroofline.analyze.predict import prediction_peaks
from hroofline.collect.meta_trace import trace_step
from hroofline.collect.workload import WorkloadConfig
from hroofline.importers.kineto import input_dims
from hroofline.model.numbers import si
from hroofline.roofs.catalog import resolve_gpu
from hroofline.work.host_weights import load_host_weights
from tests.conftest import REPO, linked_kernels

GPU_DATA = REPO / "tests" / "data" / "gpu-2026-11-27"
LAYOUTS = GPU_DATA / "h200-layouts"
NO_BATCH_NORM = ("convnext_tiny", "vgg16")  # layer norm; none
TRAINING_STEPS = [p for p in sorted(LAYOUTS.glob("*-train-nchw-trace.json.xz")) if not p.name.startswith(NO_BATCH_NORM)]
BATCH_NORMS = ("aten::cudnn_batch_norm", "aten::cudnn_batch_norm_backward")
FEW_CHANNELS = 64  # blocks for at most half of the H200's 132 SMs


@cache
def measured_batch_norms(path: Path) -> list[tuple[str, int, int, float]]:
    """Each batch norm op of a trace: its name, channels, N x H x W and its kernels' time."""
    seconds: dict[tuple[str, float], float] = defaultdict(float)
    shape: dict[tuple[str, float], list[int]] = {}
    for kernel in linked_kernels(path)[1]:
        op = next((o for o in kernel.ops if o.name in BATCH_NORMS), None)
        if op is not None:
            key = (op.name, op.start_s)
            seconds[key] += kernel.seconds
            shape[key] = (input_dims(op.args) or [[]])[0]
    return [
        (name, dims[1], int(np.prod(dims)) // dims[1], seconds[name, start]) for (name, start), dims in shape.items()
    ]


def channel_rates(paths: list[Path]) -> tuple[float, float, tuple[int, int]]:
    """(forward, backward, (forward ops, backward ops)): over the batch norms of at most 64 channels, their
    N x H x W over their kernels' time."""
    rates, counts = [], []
    for backward in (False, True):
        found = [
            (elements, seconds)
            for path in paths
            for name, channels, elements, seconds in measured_batch_norms(path)
            if name.endswith("backward") == backward and channels <= FEW_CHANNELS
        ]
        rates.append(sum(e for e, _ in found) / sum(s for _, s in found))
        counts.append(len(found))
    return rates[0], rates[1], (counts[0], counts[1])


def test_the_rates_are_what_the_h200_measured() -> None:
    """metrics/batch_norm.toml holds the rates the traces give, and they are rates per element, not per byte (per
    byte float16's would be half float32's): forward, resnet18's and resnet50's float16 steps gave 1.56e9 and
    1.63e9 against float32's 1.74e9 and 1.86e9 (10.4% and 12.4% less); backward, float16 is faster per element."""
    rate = load_channel_rate()
    forward, backward, ops = channel_rates(TRAINING_STEPS)
    assert len(TRAINING_STEPS) == 8 and ops == (48, 48)
    assert not any(measured_batch_norms(p) for p in LAYOUTS.glob("*-train-nchw-*") if p not in TRAINING_STEPS)
    assert rate.forward == pytest.approx(forward, rel=0.005) and rate.backward == pytest.approx(backward, rel=0.005)
    for model in ("resnet18", "resnet50"):
        half, single = (
            channel_rates([p for p in TRAINING_STEPS if p.name.startswith(f"{model}-{precision}")])[0]
            for precision in ("amp", "fp32")
        )
        assert 0.85 < half / single < 0.90


def test_channels_last_kernels_are_not_held_to_a_block_per_channel() -> None:
    """The same layers of few channels in NHWC (batchnorm_*_nhwc_semiPersist) ran 3.7 to 7.3 times as fast."""
    for step in TRAINING_STEPS:
        nhwc = step.with_name(step.name.replace("-nchw-", "-channels_last-"))
        few = [
            sum(s for name, channels, _, s in measured_batch_norms(path) if channels <= FEW_CHANNELS)
            for path in (step, nhwc)
        ]
        assert 3.5 < few[0] / few[1] < 7.5, step.name


def test_the_trace_marks_training_batch_norms_over_nchw() -> None:
    """resnet18's 20 batch norms, forward and backward, carry N x H x W in training NCHW; none in channels_last
    (on the meta device too: a convolution's output keeps its input's layout, as cuDNN's does) or in inference."""
    config = WorkloadConfig("resnet18", 8, "amp", "sgd", "meta")
    step = trace_step(config, "train")
    norms = step[step["kernel"].str.contains("batch_norm")]
    assert len(norms) == 40 and set(norms["kernel"]) == {"aten::native_batch_norm", "aten::native_batch_norm_backward"}
    first = norms["shapes"].str.extract(r"^(\d+)x(\d+)x(\d+)x(\d+)").astype(int)
    assert (norms["channel_elements"] == first[0] * first[2] * first[3]).all()
    assert set(norms["channel_elements"]) == {8 * 112 * 112, 8 * 56 * 56, 8 * 28 * 28, 8 * 14 * 14, 8 * 7 * 7}
    assert step.loc[~step.index.isin(norms.index), "channel_elements"].eq(0).all()
    nhwc = trace_step(WorkloadConfig("resnet18", 8, "amp", "sgd", "meta", channels_last=True), "train")
    assert nhwc["kernel"].str.contains("batch_norm").sum() == 40 and nhwc["channel_elements"].eq(0).all()
    # ShuffleNet's channel split feeds an NCHW-strided slice to a 1x1 convolution whose weight is channels_last:
    # cuDNN (PyTorch's suggest_memory_format) still gives channels_last
    shuffle = trace_step(WorkloadConfig("shufflenet_v2_x1_0", 2, "amp", "sgd", "meta", channels_last=True), "train")
    assert shuffle["kernel"].str.contains("batch_norm").sum() == 112 and shuffle["channel_elements"].eq(0).all()
    assert trace_step(config, "forward")["channel_elements"].eq(0).all()


def _estimated_batch_norms(path: Path, model: EstimateModel) -> tuple[float, float]:
    """A traced step's batch norms on an H200: their bound and their estimate (kernels only)."""
    name, precision, batch = re.match(r"(.+)-(amp|fp32)-b(\d+)-train", path.name).groups()  # type: ignore[union-attr]
    peaks = prediction_peaks(resolve_gpu("h200"), precision)
    config = WorkloadConfig(name, int(batch), precision, "sgd", "meta", channels_last="channels_last" in path.name)
    ops = predicted_ops(trace_step(config, "train"), peaks).launches
    norms = ops["kernel"].str.contains("batch_norm").to_numpy()
    roof = ops["time_bound_s"].to_numpy()
    return float(roof[norms].sum()), float(estimate_times(roof, op_kinds(ops), model)[norms].sum())


def test_the_estimate_holds_each_op_to_its_time_per_channel() -> None:
    peaks = prediction_peaks(resolve_gpu("h200"), "amp")
    ops = predicted_ops(trace_step(WorkloadConfig("resnet18", 32, "amp", "sgd", "meta"), "train"), peaks).launches
    roof, kinds = ops["time_bound_s"].to_numpy(), op_kinds(ops)
    model = EstimateModel(20e-6, {"tensor": 0.5, "matmul_fp32": 0.5, "other": 0.5, "depthwise": 0.1})
    rate = load_channel_rate()
    per_channel = ops["channel_elements"].to_numpy() / np.where(
        ops["kernel"].str.endswith("_backward"), rate.backward, rate.forward
    )
    norms = ops["kernel"].str.contains("batch_norm").to_numpy()
    floor = 20e-6 * load_host_weights().batch_norm  # a batch norm's host time
    expected = np.maximum(floor, np.maximum(roof / 0.5, per_channel))
    assert estimate_times(roof, kinds, model)[norms] == pytest.approx(expected[norms], rel=1e-12)
    assert (per_channel[norms] > roof[norms] / 0.5).sum() >= 10  # on an H200 the channels, not the bandwidth, set them


def test_predict_says_what_nchw_batch_norm_adds(cli, tmp_path: Path) -> None:
    """resnet50 amp on an A100: a `batch norm:` line gives the 106 ops and what their time per channel adds, the
    sum over those ops of max(floor, bound / efficiency, N*H*W / rate) - max(floor, bound / efficiency) (the
    stored run's own rows, the bundled fit); channels_last has no such line, nor has inference."""
    from hroofline.store.runs import RunStore

    store = tmp_path / "store"
    args = ("predict", "--arch", "resnet50", "--gpu", "a100", "--precision", "amp", "--store", store)
    nchw, nhwc = cli(*args), cli(*args, "--channels-last")
    inference = cli(*args, "--phases", "forward", "--run", "forward")
    assert nchw.code == nhwc.code == inference.code == 0, nchw.err + nhwc.err + inference.err
    assert "batch norm:" not in nhwc.out and "batch norm:" not in inference.out
    line = next(text for text in nchw.out.splitlines() if text.startswith("batch norm: "))
    launches = RunStore(store).load("resnet50-amp-a100-40gb-predicted").launches
    model = load_estimate_model()
    rate = load_channel_rate()
    norms = launches[launches["kernel"].str.contains("batch_norm")]
    dims = norms["shapes"].str.extract(r"^(\d+)x(\d+)x(\d+)x(\d+)").astype(float)
    per_channel = (
        dims[0] * dims[2] * dims[3] / np.where(norms["kernel"].str.endswith("_backward"), rate.backward, rate.forward)
    )
    floor = model.host_floor_s * load_host_weights().batch_norm
    own = np.maximum(floor, norms["time_bound_s"] / model.efficiency["other"])
    added = float((np.maximum(own, per_channel) - own).sum())
    assert len(norms) == 106 and added > 0
    assert (
        f"cuDNN runs the 106 batch norm ops of training one thread block per channel; that adds {si(added, 's')}"
        in line
    )
    assert line.endswith("--channels-last spreads them over the GPU")
