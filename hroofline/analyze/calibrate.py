"""Fitting the step-time estimate (:mod:`hroofline.analyze.estimate`) to measured step times.

Each sample is one measured step: its ops' times at roof and classes, and the time it took. The fit picks
the host floor and the class efficiencies that minimise the mean squared log error of the estimated
step times, by exhaustive search over a coarse grid and then a fine one around its best point (no optimiser
library, no local minimum): the error factor of a sample is max(estimate / measured, measured / estimate), so a
log error treats too fast and too slow alike.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hroofline.analyze.advice.layout_conversions import conversion_kernels
from hroofline.analyze.batch_norm import NO_CHANNEL_LIMIT, load_channel_rate, per_channel_kernels
from hroofline.analyze.estimate import (
    DEPTHWISE_CLASS,
    OP_CLASSES,
    OTHER_CLASS,
    EstimateModel,
    OpKinds,
    conversion_times,
    describe_efficiency,
    estimate_times,
)
from hroofline.analyze.families import DEPTHWISE_FAMILY, kernel_family
from hroofline.analyze.layout import LayoutCost, load_layout_cost
from hroofline.errors import UsageError
from hroofline.model.run import Run
from hroofline.roofs.formulas import total_flops

MATMUL_FAMILY = re.compile(r"gemm|convolution")  # kernel families that are matrix products
COARSE_FLOORS_S = np.arange(0.0, 100.01e-6, 2.5e-6)
COARSE_EFFICIENCIES = np.round(np.arange(0.05, 1.0001, 0.05), 2)


@dataclass(frozen=True)
class Sample:
    """One measured step (or forward pass) and the predicted ops it is estimated from."""

    key: str  # what it is, for leaving groups out: "source:model"
    roof_s: np.ndarray
    kinds: OpKinds
    measured_s: float


def estimated_step(sample: Sample, model: EstimateModel) -> float:
    return float(estimate_times(sample.roof_s, sample.kinds, model).sum())


def error_factors(samples: Sequence[Sample], model: EstimateModel) -> np.ndarray:
    estimates = np.array([estimated_step(s, model) for s in samples])
    measured = np.array([s.measured_s for s in samples])
    return np.maximum(estimates / measured, measured / estimates)


def bound_error_factors(samples: Sequence[Sample]) -> np.ndarray:
    """The error of the roofline bound itself (no floor, every class at its roof)."""
    at_roof = LayoutCost(frozenset(), 0.0, {16: 1.0, 32: 1.0}, "the roof")
    at_roof_model = EstimateModel(0.0, dict.fromkeys(OP_CLASSES, 1.0), layout=at_roof, channel_rate=NO_CHANNEL_LIMIT)
    return error_factors(samples, at_roof_model)


def fit(samples: Sequence[Sample], floor_s: float | None = None) -> EstimateModel:
    """The floor and efficiencies that fit ``samples`` best: every combination on a coarse grid (floor every
    2.5 us, efficiencies every 0.05), then every one on a fine grid around the best (0.5 us, 0.01). With
    ``floor_s`` the floor is that one and only the efficiencies are fitted."""
    if not samples:
        raise ValueError("no samples to fit")
    terms = [sample_terms(s) for s in samples]
    coarse = COARSE_FLOORS_S if floor_s is None else np.array([floor_s])
    floor, efficiency = _best(samples, terms, coarse, [COARSE_EFFICIENCIES] * len(OP_CLASSES))
    floors = np.clip(np.arange(floor - 2.5e-6, floor + 2.51e-6, 0.5e-6), 0.0, None) if floor_s is None else coarse
    fine = [np.round(np.clip(np.arange(e - 0.05, e + 0.0501, 0.01), 0.01, 1.0), 2) for e in efficiency]
    floor, efficiency = _best(samples, terms, np.unique(floors), [np.unique(f) for f in fine])
    fitted = dict(zip(OP_CLASSES, map(float, efficiency), strict=True))
    for number, name in enumerate(OP_CLASSES):
        if not any(mine.present[number] for mine in terms):  # no step shows it: the memory-bound rest's
            fitted[name] = fitted[OP_CLASSES[OTHER_CLASS]]
    return EstimateModel(float(floor), fitted)


@dataclass(frozen=True)
class ClassTimes:
    """One sample's ops of one class, as the fit sums them: times at roof of the ops whose time is that alone
    (sorted by time at roof over host weight), and of the ops with more, each with its time per channel (NCHW
    training batch norm: one block per channel, measured rate; else 0) and the layout conversions after it
    (measured cost, not fitted; else 0); each op's host weight beside it (its floor over the fitted one)."""

    alone: np.ndarray
    alone_weight: np.ndarray
    joined: np.ndarray
    joined_weight: np.ndarray
    channel_s: np.ndarray
    conversions_s: np.ndarray

    @property
    def present(self) -> bool:
        return bool(len(self.alone) or len(self.joined))


@dataclass(frozen=True)
class SampleTerms:
    """What the fit sums of one sample: its ops per class, and layout conversions with no op before them."""

    by_class: list[ClassTimes]
    standalone_s: float

    @property
    def present(self) -> tuple[bool, ...]:
        """Per class, whether the sample has ops of it (its estimate depends on that efficiency)."""
        return tuple(ops.present for ops in self.by_class)


def sample_terms(sample: Sample) -> SampleTerms:
    """What the fit sums of ``sample``, by class (:func:`grid_estimates` turns them into step times)."""
    kinds = sample.kinds
    rows = conversion_times(sample.roof_s, kinds, load_layout_cost())
    conversions = rows.by_op(len(kinds.classes))
    per_channel = kinds.channel_times(load_channel_rate())
    joined = per_channel > 0
    joined[rows.parent[~rows.alone]] = True
    found = []
    for number in range(len(OP_CLASSES)):
        mine = kinds.classes == number
        more, alone = mine & joined, mine & ~joined
        order = np.argsort(sample.roof_s[alone] / kinds.host_weight[alone], kind="stable")
        found.append(
            ClassTimes(
                sample.roof_s[alone][order],
                kinds.host_weight[alone][order],
                sample.roof_s[more],
                kinds.host_weight[more],
                per_channel[more],
                conversions[more],
            )
        )
    return SampleTerms(found, float(rows.seconds[rows.alone].sum()))


def _best(
    samples: Sequence[Sample], terms: list[SampleTerms], floors: np.ndarray, grids: list[np.ndarray]
) -> tuple[float, tuple[float, ...]]:
    """The grid point with the least mean squared log error: for each floor, all efficiency combinations at
    once (a sample's estimate is a sum of one term per class, each a function of that class's efficiency).
    ``terms`` holds each sample's ops per class (:func:`sample_terms`). Samples with ops of the same classes are
    summed over those classes' axes alone, then spread over the others."""
    alike: dict[tuple[bool, ...], list[int]] = {}
    for number, mine in enumerate(terms):
        alike.setdefault(mine.present, []).append(number)
    best: tuple[float, float, tuple[float, ...]] | None = None
    for floor in floors:
        loss = np.zeros([len(g) for g in grids])
        for members in alike.values():
            loss += sum(np.log(grid_estimates(terms[i], floor, grids) / samples[i].measured_s) ** 2 for i in members)
        index = np.unravel_index(int(np.argmin(loss)), loss.shape)
        value = float(loss[index])
        if best is None or value < best[0]:
            best = (value, float(floor), tuple(float(g[i]) for g, i in zip(grids, index, strict=True)))
    assert best is not None
    return best[1], best[2]


def grid_estimates(terms: SampleTerms, floor: float, grids: list[np.ndarray]) -> np.ndarray:
    """A sample's estimated step time (what :func:`estimated_step` sums op by op) at ``floor`` for every
    combination of the class efficiencies in ``grids``: an array indexed by each class's grid position, of
    length 1 along a class the sample has no op of (its estimate does not depend on that efficiency)."""
    estimate = np.full([1] * len(grids), terms.standalone_s)
    for number, (times, grid) in enumerate(zip(terms.by_class, grids, strict=True)):
        if terms.present[number]:
            shape = [1] * len(grids)
            shape[number] = len(grid)
            estimate = estimate + _class_term(times, floor, grid).reshape(shape)
    return estimate


def _class_term(ops: ClassTimes, floor: float, efficiencies: np.ndarray) -> np.ndarray:
    """Sum over a class's ops of max(floor x w, t / e), w an op's host weight, for every e (the ops with t / w at
    or below floor x e take their floor), and over its ops with more of max(floor x w, max(t / e, time per
    channel) + their layout conversions' time)."""
    kernels = np.maximum(ops.joined[:, None] / efficiencies[None, :], ops.channel_s[:, None])
    joined = np.maximum(floor * ops.joined_weight[:, None], kernels + ops.conversions_s[:, None]).sum(axis=0)
    times = ops.alone
    if not len(times):
        return joined
    below = np.searchsorted(times / ops.alone_weight, floor * efficiencies, side="right")
    floors = floor * np.concatenate([[0.0], np.cumsum(ops.alone_weight)])[below]
    above_sum = times.sum() - np.concatenate([[0.0], np.cumsum(times)])[below]
    return floors + above_sum / efficiencies + joined


def percentiles(factors: np.ndarray) -> tuple[float, float]:
    """(median, 90th percentile) of error factors."""
    return float(np.median(factors)), float(np.percentile(factors, 90))


@dataclass(frozen=True)
class ClassShare:
    """One op class of a measured run: its launches' bound (datasheet roofs, HBM) and measured kernel time."""

    launches: int
    bound_s: float
    measured_s: float


@dataclass(frozen=True)
class RunCalibration:
    model: EstimateModel
    classes: dict[str, ClassShare]
    gpu: str
    measured: tuple[str, ...]  # the classes whose efficiency the run gave


MIN_CLASS_SHARE = 0.02  # a class with less of the run's kernel time keeps the bundled efficiency


def measured_classes(launches: pd.DataFrame) -> np.ndarray:
    """Per measured launch, its op class: a depthwise convolution kernel, tensor-core work, a matrix product or
    convolution kernel (by its family's name), or the rest."""
    tensor = launches["flops_tensor"].fillna(0.0).to_numpy() > 0
    families = launches["kernel"].astype(str).map(kernel_family)
    matmul = families.map(lambda family: bool(MATMUL_FAMILY.search(family))).to_numpy()
    depthwise = (families == DEPTHWISE_FAMILY).to_numpy()
    return np.where(depthwise, DEPTHWISE_CLASS, np.where(tensor, 0, np.where(matmul, 1, 2)))


def calibrate_on_run(run: Run, base: EstimateModel) -> RunCalibration:
    """Efficiencies measured on a run of yours: per op class, the bound of its kernels (FLOPs per precision and
    HBM bytes at the datasheet peaks of the run's GPU, as predict bounds an op) over their measured time. The
    host floor stays ``base``'s: kernel times do not show what the host spends between kernels."""
    from hroofline.analyze.predict import predict_times, prediction_peaks
    from hroofline.roofs.ceilings import run_gpu

    gpu = run_gpu(run.meta)
    if gpu is None or not gpu.peaks:
        raise UsageError(
            f"run {run.name!r} ran on no catalog GPU with datasheet peaks", "calibrate on a run measured on a GPU"
        )
    base = base.for_cc(gpu.cc)  # a class the run has too little of keeps its generation's efficiency
    if any(source.kind == "analytic" for source in run.meta.sources):
        raise UsageError(f"run {run.name!r} is a prediction", "calibrate on a measured run (profile or import)")
    launches = run.launches
    timed = launches["time_s"].gt(0) & (total_flops(launches).gt(0) | launches["bytes_hbm"].gt(0))
    if not timed.any():
        raise UsageError(f"run {run.name!r} has no kernel with a time and FLOPs or HBM bytes to calibrate on")
    # cuDNN's layout conversions and NCHW training batch norm: a prediction costs them at their own measured
    # rates, not at a class's efficiency
    kernels = launches["kernel"].astype(str)
    chosen = launches[timed & ~conversion_kernels(kernels) & ~per_channel_kernels(kernels)]
    bounds = predict_times(chosen, prediction_peaks(gpu, "fp32-strict"))["time_bound_s"].to_numpy()
    classes = measured_classes(chosen)
    measured = chosen["time_s"].to_numpy()
    shares = {}
    efficiency = dict(base.efficiency)
    calibrated = []
    for number, name in enumerate(OP_CLASSES):
        mine = classes == number
        share = ClassShare(int(mine.sum()), float(bounds[mine].sum()), float(measured[mine].sum()))
        shares[name] = share
        if share.measured_s > MIN_CLASS_SHARE * measured.sum() and share.bound_s > 0:
            efficiency[name] = round(min(1.0, share.bound_s / share.measured_s), 3)
            calibrated.append(name)
    described = describe_efficiency(efficiency)
    model = EstimateModel(
        host_floor_s=base.host_floor_s,
        efficiency=efficiency,
        source=f"calibrated on run {run.name} ({gpu.name}): {described}; host floor as bundled",
    )
    return RunCalibration(model, shares, gpu.name, tuple(calibrated))
