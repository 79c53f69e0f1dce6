"""Benchmark: how a step's host time and GPU time add up in the estimate (issue 24, item 3).

hroofline's estimate charges each op max(its host time, its kernel time) and sums the ops. Issue 24 proposed
max(GPU time, host time) over stretches of ops instead, so that a GPU-bound step is not charged for the host
that runs ahead under its long kernels. This fits three ways of adding them up on the same data, each with its
own host floor and four class efficiencies (each op's kernel time: its time at roof over its class's efficiency,
NCHW batch norm's time per channel and cuDNN's layout conversions as in the estimate):

- per op: the sum over ops of max(the op's host time, kernel time), what ``predict`` does;
- queue: the host issues op i when its host times up to i have passed and the GPU runs its kernels after the
  previous op's, the step ending when the last kernel does (max over stretches ending at the last op of host +
  GPU time);
- whole step: max(sum of the kernel times, sum of the host times), one stretch.

An op's host time is the floor (an element-wise op's) times its kind's measured host weight, as in the estimate.

Each is fitted as bench/estimate_error.py fits the estimate (mean squared log error, on NVIDIA's published rows;
efficiencies every 0.05 then 0.01, floors every 2.5 us then 0.5 us) but by a search along one parameter at a
time (the queue and the max are not sums over classes, so the estimate's exhaustive grid does not apply), and
judged the same ways: each published table, GPU or model left out, timm's steps, and the shared H100 steps, with
no Hopper step in any fit. Prints median and 90th-percentile error factor max(est/meas, meas/est) of each.

With measured kernel times the queue is the better account of a step (tests/test_host_overlap.py, on the H200's
traces); this benchmark asks which predicts better from times at roof.

Run as ``make bench`` or ``.venv/bin/python bench/host_overlap.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import estimate_error  # the bench beside this one: its data and its tracing

from hroofline.analyze.batch_norm import load_channel_rate
from hroofline.analyze.calibrate import Sample
from hroofline.analyze.estimate import OP_CLASSES, OTHER_CLASS, conversion_times
from hroofline.analyze.layout import load_layout_cost

COARSE = (np.arange(0.0, 100.01e-6, 2.5e-6), np.round(np.arange(0.05, 1.0001, 0.05), 2))
FINE_STEPS = (0.5e-6, 0.01)
NO_HOST = len(OP_CLASSES)  # the class of a layout conversion with no op before it: GPU time, no host time


@dataclass(frozen=True)
class Steps:
    """Measured steps' ops laid end to end, in the order the host issues them (one row per op that takes host
    time, and per layout conversion with no op before it)."""

    roof_s: np.ndarray
    classes: np.ndarray  # index in OP_CLASSES, or NO_HOST
    host_weight: np.ndarray  # the op's host time over an element-wise op's (the floor); 0 for NO_HOST
    channel_s: np.ndarray  # NCHW training batch norm's time per channel, else 0
    conversions_s: np.ndarray  # the layout conversions the op's kernels include (measured cost, not fitted)
    step: np.ndarray  # which step each row belongs to
    starts: np.ndarray  # each step's first row
    measured_s: np.ndarray

    @property
    def present(self) -> np.ndarray:
        """Per class, whether any step has an op of it."""
        return np.array([np.any(self.classes == number) for number in range(len(OP_CLASSES))])


def laid_out(samples: Sequence[Sample]) -> Steps:
    layout, rate = load_layout_cost(), load_channel_rate()
    parts: list[tuple[np.ndarray, ...]] = []
    for number, sample in enumerate(samples):
        kinds = sample.kinds
        rows = conversion_times(sample.roof_s, kinds, layout)
        conversions = rows.by_op(len(kinds.classes))
        conversions[rows.rows[rows.alone]] = rows.seconds[rows.alone]  # a conversion with no op before it: its own
        fitted = kinds.fitted()
        kept = fitted.copy()
        kept[rows.rows[rows.alone]] = True
        if not kept.any():
            raise ValueError(f"step {sample.key} has no op to estimate")
        classes = np.where(fitted, kinds.classes, NO_HOST)
        roof = np.where(fitted, sample.roof_s, 0.0)
        parts.append(
            (
                roof[kept],
                classes[kept],
                kinds.host_weight[kept],
                kinds.channel_times(rate)[kept],
                conversions[kept],
                np.full(kept.sum(), number),
            )
        )
    roof, classes, weight, channel, conversions, step = (np.concatenate(column) for column in zip(*parts, strict=True))
    starts = np.flatnonzero(np.r_[True, step[1:] != step[:-1]])
    measured = np.array([s.measured_s for s in samples])
    return Steps(roof, classes, weight, channel, conversions, step, starts, measured)


def kernel_times(steps: Steps, efficiency: np.ndarray) -> np.ndarray:
    per_class = np.r_[efficiency, 1.0][steps.classes]
    return np.maximum(steps.roof_s / per_class, steps.channel_s) + steps.conversions_s


def per_op(steps: Steps, floor_s: float, efficiency: np.ndarray) -> np.ndarray:
    kernels = kernel_times(steps, efficiency)
    return np.add.reduceat(np.maximum(floor_s * steps.host_weight, kernels), steps.starts)


def queue(steps: Steps, floor_s: float, efficiency: np.ndarray) -> np.ndarray:
    """The last kernel's end: max over ops k of (when the host issues k) + (the kernel time of k and after)."""
    kernels = kernel_times(steps, efficiency)
    hosted = np.cumsum(steps.host_weight)
    issued = floor_s * (hosted - np.r_[0, hosted][steps.starts][steps.step])
    done = np.cumsum(kernels)
    before = done - kernels - np.r_[0, done][steps.starts][steps.step]
    after = np.add.reduceat(kernels, steps.starts)[steps.step] - before
    return np.maximum.reduceat(issued + after, steps.starts)


def whole_step(steps: Steps, floor_s: float, efficiency: np.ndarray) -> np.ndarray:
    kernels = np.add.reduceat(kernel_times(steps, efficiency), steps.starts)
    return np.maximum(kernels, floor_s * np.add.reduceat(steps.host_weight, steps.starts))


Aggregate = Callable[[Steps, float, np.ndarray], np.ndarray]
WAYS: dict[str, Aggregate] = {"per op (hroofline)": per_op, "queue": queue, "whole step": whole_step}


@dataclass(frozen=True)
class Fitted:
    floor_s: float
    efficiency: np.ndarray


def loss(steps: Steps, way: Aggregate, floor_s: float, efficiency: np.ndarray) -> float:
    return float(np.mean(np.log(way(steps, floor_s, efficiency) / steps.measured_s) ** 2))


def fit(steps: Steps, way: Aggregate) -> Fitted:
    """Least mean squared log error, one parameter at a time until none moves, on the coarse grids and then
    on fine ones around the coarse best. Classes no step has take ``other``'s efficiency."""
    floors, efficiencies = COARSE
    floor, efficiency = _search(steps, way, (40e-6, np.array([0.8, 0.8, 0.6, 0.6])), floors, lambda _: efficiencies)
    floors = np.clip(np.arange(floor - 2.5e-6, floor + 2.51e-6, FINE_STEPS[0]), 0.0, None)
    offsets = np.round(np.arange(-0.05, 0.0501, FINE_STEPS[1]), 2)
    coarse = efficiency.copy()
    floor, efficiency = _search(
        steps, way, (floor, efficiency), floors, lambda number: np.clip(coarse[number] + offsets, 0.01, 1.0)
    )
    return Fitted(floor, np.where(steps.present, efficiency, efficiency[OTHER_CLASS]))


def _search(
    steps: Steps,
    way: Aggregate,
    start: tuple[float, np.ndarray],
    floors: np.ndarray,
    grid: Callable[[int], np.ndarray],
) -> tuple[float, np.ndarray]:
    """From ``start``, the floor among ``floors`` and each present class's efficiency among ``grid(class)`` that
    lower the loss most, one at a time, until none does."""
    floor, efficiency = start
    best = loss(steps, way, floor, efficiency)
    moved = True
    while moved:
        moved = False
        found = [loss(steps, way, f, efficiency) for f in floors]
        if min(found) < best - 1e-15:
            best, floor, moved = min(found), float(floors[int(np.argmin(found))]), True
        for number in np.flatnonzero(steps.present):
            values = grid(int(number))
            trials = [loss(steps, way, floor, _with(efficiency, number, v)) for v in values]
            if min(trials) < best - 1e-15:
                best, moved = min(trials), True
                efficiency = _with(efficiency, number, float(values[int(np.argmin(trials))]))
    return floor, efficiency


def _with(efficiency: np.ndarray, number: int, value: float) -> np.ndarray:
    changed = efficiency.copy()
    changed[number] = value
    return changed


def factors(steps: Steps, way: Aggregate, fitted: Fitted) -> np.ndarray:
    estimates = way(steps, fitted.floor_s, fitted.efficiency)
    return np.maximum(estimates / steps.measured_s, steps.measured_s / estimates)


def held_out(samples: Sequence[Sample], groups: Sequence[str], way: Aggregate) -> np.ndarray:
    found = np.empty(len(samples))
    for group in sorted(set(groups)):
        mine = [number for number, g in enumerate(groups) if g == group]
        rest = [s for s, g in zip(samples, groups, strict=True) if g != group]
        found[mine] = factors(laid_out([samples[i] for i in mine]), way, fit(laid_out(rest), way))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    if not estimate_error.PUBLISHED.exists():
        print(f"skipped: {estimate_error.PUBLISHED} not found (../shared beside the checkout)")
        return 0
    started = time.perf_counter()
    rows, other_rows, h100 = (
        pd.read_csv(estimate_error.PUBLISHED),
        pd.read_csv(estimate_error.OTHER_SOURCE),
        estimate_error.h100_rows(),
    )
    published, other, hopper = (estimate_error.samples(table) for table in (rows, other_rows, h100))
    print(f"{len(published)} published steps (fitted), {len(other)} timm and {len(hopper)} H100 steps (judged only)")
    print(f"traced in {time.perf_counter() - started:.0f} s; error factor max(est/meas, meas/est):")
    for name, way in WAYS.items():
        fitted = fit(laid_out(published), way)
        efficiency = ", ".join(f"{c} {e:.2f}" for c, e in zip(OP_CLASSES, fitted.efficiency, strict=True))
        print(f"{name}: host floor {fitted.floor_s * 1e6:.1f} us, {efficiency}")
        for label, columns in estimate_error.HELD_OUT.items():
            groups = rows[list(columns)].astype(str).agg(":".join, axis=1).tolist()
            print(estimate_error._line(label, held_out(published, groups, way)))
        print(estimate_error._line("timm, never fitted to", factors(laid_out(other), way, fitted)))
        print(estimate_error._line("H100 training steps, never fitted to", factors(laid_out(hopper), way, fitted)))
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
