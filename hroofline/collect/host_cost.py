"""The host's cost per op on this machine: small models' steps, too small for their kernels to matter, timed.

Two probe networks (narrow ResNets: convolutions, batch norm, ReLU, residual adds, pooling, a linear layer; one
of 4 blocks, one of 24) on a batch of two 3x16x16 images run training steps (SGD with momentum, as ``predict``
assumes) and inference passes, without and with autocast. Their kernels take a few microseconds, so each step
lasts as long as the host takes to issue its ops. The host's seconds per op is the slope between the two:
(median step of the deep probe - median step of the shallow one) / (ops of the one - ops of the other), the ops
being those the estimate counts in the same steps traced on the meta device. Their steps alternate, so a
change in the machine's speed while it measures (a busy neighbour, a clock) falls on both. The slope leaves out
what a step costs besides its ops (the loss, the optimizer's Python, zero_grad), which a 4-block probe would
spread over its few ops. On a CUDA device the cost includes each kernel's launch; on the CPU it is PyTorch's
dispatch and the (tiny) CPU kernels, without a launch.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from functools import cache

import pandas as pd
import torch
from torch import nn

from hroofline.collect.meta_trace import trace_step
from hroofline.collect.workload import STEP_PHASES, TrainingStep, WorkloadConfig
from hroofline.errors import ProfilingError
from hroofline.model.host import LONGEST_OP_S, STEP_KINDS, HostCost
from hroofline.work.host_weights import load_host_weights

SHALLOW_BLOCKS, DEEP_BLOCKS = 4, 24
PROBES: dict[int, str] = {  # blocks -> model spec
    SHALLOW_BLOCKS: "hroofline.collect.host_cost:shallow_probe",
    DEEP_BLOCKS: "hroofline.collect.host_cost:deep_probe",
}
PROBE_BATCH = 2  # batch norm in training needs two samples
PROBE_SHAPE = (3, 16, 16)
PROBE_WIDTH = 8
WARMUP_STEPS = 5
ATTEMPTS = 3  # tries per kind of step before the host cost is given up as not measured


class _Block(nn.Module):
    """A ResNet basic block: conv, batch norm, ReLU, conv, batch norm, the input added, ReLU."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
        )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + x)


def probe_model(blocks: int) -> nn.Module:
    """A probe: a ResNet's kinds of op at a width of 8 channels, 10 classes."""
    return nn.Sequential(
        nn.Conv2d(PROBE_SHAPE[0], PROBE_WIDTH, 3, padding=1, bias=False),
        nn.BatchNorm2d(PROBE_WIDTH),
        nn.ReLU(inplace=True),
        *[_Block(PROBE_WIDTH) for _ in range(blocks)],
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(PROBE_WIDTH, 10),
    )


def shallow_probe() -> nn.Module:
    return probe_model(SHALLOW_BLOCKS)


def deep_probe() -> nn.Module:
    return probe_model(DEEP_BLOCKS)


def probe_description(steps: int) -> str:
    return (
        f"slope of the median of {steps} steps between a {SHALLOW_BLOCKS}- and a {DEEP_BLOCKS}-block ResNet "
        f"{PROBE_WIDTH} channels wide, batch {PROBE_BATCH} of {'x'.join(map(str, PROBE_SHAPE))}, "
        "per op predict counts in them"
    )


def _config(kind: str, device: str, blocks: int) -> tuple[WorkloadConfig, str]:
    """The probe's workload for a kind of step. On the CPU, autocast runs in bfloat16, its own 16-bit type:
    float16 convolutions there are computed slowly, not dispatched, and would time the arithmetic."""
    phases, precision = kind.split("_")
    if precision == "amp" and device == "cpu":
        precision = "amp-bf16"
    return WorkloadConfig(PROBES[blocks], PROBE_BATCH, precision, "sgd", device, input_shape=PROBE_SHAPE), phases


@cache
def _counted_kernels(kind: str, device: str, blocks: int) -> pd.Series:
    """The ATen names of the ops the estimate counts in one probe step of this kind, traced on the meta device."""
    config, phases = _config(kind, device, blocks)
    launches = trace_step(replace(config, device="meta"), phases)
    return launches.loc[launches["phase"].isin(STEP_PHASES), "kernel"]


def counted_ops(kind: str, device: str, blocks: int) -> int:
    """The ops the estimate counts in one probe step of this kind (what a prediction of it holds)."""
    return len(_counted_kernels(kind, device, blocks))


@cache
def probe_host_weight(kind: str, device: str) -> float:
    """The mean host weight (:mod:`hroofline.work.host_weights`) of the ops the deep probe has over the shallow
    one: a measured seconds per op over it is an element-wise op's host time, the estimate's host floor."""
    units = {blocks: float(load_host_weights().of(_counted_kernels(kind, device, blocks)).sum()) for blocks in PROBES}
    ops = {blocks: counted_ops(kind, device, blocks) for blocks in PROBES}
    return (units[DEEP_BLOCKS] - units[SHALLOW_BLOCKS]) / (ops[DEEP_BLOCKS] - ops[SHALLOW_BLOCKS])


def step_seconds(kind: str, device: str, steps: int) -> dict[int, float]:
    """Per probe (by blocks), the median wall time of one step of this kind, each step ended by a synchronize;
    the probes' steps alternate."""
    probes = {blocks: _config(kind, device, blocks) for blocks in PROBES}
    built = {blocks: TrainingStep(config) for blocks, (config, _) in probes.items()}
    runs = {blocks: step.infer if probes[blocks][1] == "forward" else step.run for blocks, step in built.items()}
    times: dict[int, list[float]] = {blocks: [] for blocks in PROBES}
    for number in range(WARMUP_STEPS + steps):
        for blocks, run in runs.items():
            started = time.perf_counter()
            run()
            built[blocks].synchronize()
            if number >= WARMUP_STEPS:
                times[blocks].append(time.perf_counter() - started)
    return {blocks: statistics.median(seconds) for blocks, seconds in times.items()}


def measure_host_cost(
    device: str, measured_on: str, steps: int = 30, progress: Callable[[str], None] | None = None
) -> HostCost:
    """Seconds per op for every kind of step (:data:`STEP_KINDS`) on ``device`` (cpu or cuda). A kind whose slope
    is not a host's (the deep probe no slower than the shallow one, or 10 ms per op or more: other work on the
    machine took over the timing) is measured again, up to :data:`ATTEMPTS` times in all."""
    shallow, deep = SHALLOW_BLOCKS, DEEP_BLOCKS
    per_op = {}
    for kind in STEP_KINDS:
        if progress is not None:
            progress(f"host cost per op: {kind.replace('_', ' ')} steps of the probe networks")
        ops = {blocks: counted_ops(kind, device, blocks) for blocks in PROBES}
        for _ in range(ATTEMPTS):
            seconds = step_seconds(kind, device, steps)
            slope = (seconds[deep] - seconds[shallow]) / (ops[deep] - ops[shallow])
            if 0 < slope < LONGEST_OP_S:
                break
        else:
            raise ProfilingError(
                f"host cost not measured: the {deep}- and {shallow}-block probes' {kind} steps took "
                f"{seconds[deep] * 1e3:.2f} ms and {seconds[shallow] * 1e3:.2f} ms, {slope * 1e6:.1f} µs per op "
                f"({ATTEMPTS} tries)",
                "measure again on a machine that is not busy",
            )
        per_op[kind] = slope
    return HostCost(per_op, device, measured_on, probe_description(steps))
