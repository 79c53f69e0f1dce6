"""A step-time estimate beside the roofline bound: what a predicted step should take, with its error.

The bound is each op's time at roof (:mod:`hroofline.analyze.predict`). Real steps are slower: eager PyTorch
spends tens of microseconds per op on the host, and kernels reach only part of their roof, a part that
depends on the kind of work. The estimate of one op is

    max(host floor x host weight of its kind, time at roof / efficiency of its class)

The floor is an element-wise op's host time; a convolution, a matrix product and a batch norm cost the host a
measured multiple of it (:mod:`hroofline.work.host_weights`). The efficiencies have four classes: matrix
products and convolutions on the tensor cores, the same on the FP32 units, everything else (memory-bound
element-wise work, reductions, normalisation), and depthwise convolutions, which run on kernels of their own far
below their roof. The floor and the four efficiencies are fitted to measured step times
(:mod:`hroofline.analyze.calibrate`; a class no fitted step has an op of takes the efficiency of ``other``), and
live with the error they showed on measurements left out of the fit in ``metrics/estimate.toml``.

cuDNN's layout conversions around an NCHW convolution on tensor cores (:mod:`hroofline.analyze.layout`) are
kernels launched inside their convolution's op: no host floor of their own, and a cost measured on real
traces, not fitted: a fixed time per kernel plus their bytes at a share of the HBM bandwidth. A batch norm in
training over NCHW tensors runs one thread block per channel (:mod:`hroofline.analyze.batch_norm`): its kernels
take the elements of one channel over a block's measured rate where that is longer than their class's estimate.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from hroofline.analyze.batch_norm import NO_CHANNEL_LIMIT, ChannelRate, load_channel_rate
from hroofline.analyze.layout import LayoutCost, conversion_bits, load_layout_cost
from hroofline.analyze.predict import MATMUL_OPS
from hroofline.model.host import HostCost, step_phase
from hroofline.model.quantities import TENSOR_FLOP_QUANTITIES
from hroofline.roofs.metricset import metrics_dir
from hroofline.work.host_weights import HostWeights, load_host_weights
from hroofline.work.op_names import CONVOLUTION_OPS

OP_CLASSES: tuple[str, ...] = ("tensor", "matmul_fp32", "other", "depthwise")  # fitted, each at least the floor
OTHER_CLASS = OP_CLASSES.index("other")  # a class the fitted steps have no op of takes its efficiency
DEPTHWISE_CLASS = OP_CLASSES.index("depthwise")
LAYOUT_CLASS = len(OP_CLASSES)  # cuDNN's layout conversions: measured cost, no floor
FITTED_HOST = "fitted"  # EstimateModel.host_source of the bundled floor
# Every step the estimate was fitted or checked on (its efficiencies, host floor and batch norm's rate:
# metrics/estimate.toml, host_cost.toml, batch_norm.toml) ran on this vendor's GPUs.
FITTED_VENDOR = "nvidia"


@dataclass(frozen=True)
class ErrorBand:
    """The error factor max(estimate/measured, measured/estimate) of measured steps left out of the fit."""

    median: float
    p90: float  # 90% of those steps were within this factor of their estimate
    measured_on: str  # which steps: the error holds for steps like these


@dataclass(frozen=True)
class EstimateModel:
    """The fitted parameters of the estimate, and the error they showed on data left out of the fit."""

    host_floor_s: float  # an element-wise op's; other kinds of op take a measured multiple (work/host_weights.py)
    efficiency: dict[str, float]  # per op class, in (0, 1]
    error: ErrorBand | None = None  # on all the held-out steps
    kind_errors: dict[str, ErrorBand] = field(default_factory=dict)  # by kind of step (phases), where they differ
    source: str = ""
    host_source: str = FITTED_HOST  # where host_floor_s comes from: the fit, or a measurement (HostCost.describe)
    layout: LayoutCost = field(default_factory=load_layout_cost)  # measured, not fitted
    channel_rate: ChannelRate = field(default_factory=load_channel_rate)  # measured, not fitted
    generations: dict[str, GenerationFit] = field(default_factory=dict)  # by compute capability

    def for_cc(self, cc: str | None) -> EstimateModel:
        """The estimate for a GPU of compute capability ``cc``: its generation's efficiencies and error, where the
        fit has them (the host floor stays: it is the host's)."""
        own = self.generations.get(cc or "")
        if own is None:
            return self
        return replace(
            self, efficiency=dict(own.efficiency), error=own.error, kind_errors=dict(own.kind_errors), source=own.source
        )

    def error_for(self, phases: str) -> ErrorBand | None:
        """The held-out error of steps of this kind (``train`` or ``forward``): their own where the fit's held-out
        steps of that kind showed one, else that of all its held-out steps."""
        return self.kind_errors.get(step_phase(phases), self.error)


@dataclass(frozen=True)
class GenerationFit:
    """Efficiencies fitted on one GPU generation's measured steps, and the error they showed on steps of that
    generation left out of their fit."""

    efficiency: dict[str, float]
    error: ErrorBand | None
    kind_errors: dict[str, ErrorBand]  # training steps' ("train") and forward passes' ("forward"), where they differ
    source: str


@dataclass(frozen=True)
class OpKinds:
    """What the estimate needs to know of each op besides its time at roof."""

    classes: np.ndarray  # index in OP_CLASSES, or LAYOUT_CLASS
    conversion_bits: np.ndarray  # element size of a layout-conversion row, 0 for the rest
    kernels: np.ndarray  # kernels the row stands for
    parent: np.ndarray  # of a layout-conversion row, the row of its convolution (the one before it), else -1
    channel_elements: np.ndarray  # of a batch norm in training over NCHW, the elements of one channel, else 0
    backward: np.ndarray  # the op is a backward one (its kernels' rate per channel differs)
    host_weight: np.ndarray  # its host time over an element-wise op's (measured per kind of op; 0: a conversion)

    def channel_times(self, rate: ChannelRate) -> np.ndarray:
        """Per op, the time of its kernels at one block per channel (NCHW training batch norm), or 0."""
        return rate.times(self.channel_elements, self.backward)

    def floors(self, host_floor_s: float) -> np.ndarray:
        """Per op, its host time: the floor (an element-wise op's) times its kind's weight."""
        return host_floor_s * self.host_weight

    def fitted(self) -> np.ndarray:
        """The ops whose class the fit sets (and the host floor holds): all but the layout conversions."""
        return self.classes != LAYOUT_CLASS


def op_kinds(launches: pd.DataFrame, host_weights: HostWeights | None = None) -> OpKinds:
    """Per op, its class (:data:`OP_CLASSES`, or a layout conversion), what a conversion row stands for, and its
    host weight (``host_weights``, by default the measured ones)."""
    tensor_columns = [c for c in TENSOR_FLOP_QUANTITIES if c in launches]
    on_tensor_cores = launches[tensor_columns].fillna(0.0).sum(axis=1).to_numpy() > 0
    matmul = launches["kernel"].isin(MATMUL_OPS).to_numpy()
    depthwise = launches["depthwise"].fillna(False).to_numpy(dtype=bool) if "depthwise" in launches else False
    bits = conversion_bits(launches["kernel"])
    classes = np.where(on_tensor_cores, 0, np.where(matmul, 1, 2))
    classes = np.where(bits > 0, LAYOUT_CLASS, np.where(depthwise, DEPTHWISE_CLASS, classes))
    counts = launches["launches"] if "launches" in launches else pd.Series(1.0, index=launches.index)
    kernels = counts.fillna(1).to_numpy(dtype=np.float64)
    # a conversion row follows its convolution (with_layout_conversions puts it there)
    after_a_convolution = np.concatenate([[False], launches["kernel"].isin(CONVOLUTION_OPS).to_numpy()[:-1]])
    rows = np.arange(len(classes))
    parent = np.where((classes == LAYOUT_CLASS) & after_a_convolution, rows - 1, -1)
    elements = launches["channel_elements"] if "channel_elements" in launches else pd.Series(0.0, index=launches.index)
    backward = launches["kernel"].str.contains("backward", regex=False).fillna(False).to_numpy(dtype=bool)
    # a layout conversion's kernels run inside its convolution's op: no host time of their own
    weighed = load_host_weights() if host_weights is None else host_weights
    weights = np.where(bits > 0, 0.0, weighed.of(launches["kernel"]))
    return OpKinds(classes, bits, kernels, parent, elements.fillna(0).to_numpy(dtype=np.float64), backward, weights)


@dataclass(frozen=True)
class ConversionTimes:
    """A step's layout-conversion rows: where they are, their convolution's row (-1: no op before it to share the
    host's time with), and their own estimated time (measured cost, not fitted)."""

    rows: np.ndarray
    parent: np.ndarray
    seconds: np.ndarray

    @property
    def alone(self) -> np.ndarray:
        return self.parent < 0

    def by_op(self, ops: int) -> np.ndarray:
        """Of each of a step's ``ops`` rows, the time of the layout conversions after it (0 for the rest)."""
        seconds = np.zeros(ops)
        np.add.at(seconds, self.parent[~self.alone], self.seconds[~self.alone])
        return seconds


def conversion_times(roof_s: np.ndarray, kinds: OpKinds, layout: LayoutCost) -> ConversionTimes:
    rows = np.flatnonzero(~kinds.fitted())
    seconds = layout.row_times(roof_s[rows], kinds.conversion_bits[rows], kinds.kernels[rows])
    return ConversionTimes(rows, kinds.parent[rows], seconds)


def estimate_times(roof_s: np.ndarray, kinds: OpKinds, model: EstimateModel) -> np.ndarray:
    """Each op's estimated time from its time at roof and its kind.

    A layout-conversion row's kernels run inside its convolution's op: the two take max(the op's host floor, its
    kernels + the conversions), so the row holds what the conversions add to the op's estimate, nothing where
    the host's floor hides them."""
    fitted = kinds.fitted()
    efficiency = np.array([model.efficiency[c] for c in OP_CLASSES])
    kernel_time = np.zeros(len(roof_s))
    kernel_time[fitted] = roof_s[fitted] / efficiency[kinds.classes[fitted]]
    kernel_time = np.maximum(kernel_time, kinds.channel_times(model.channel_rate))
    floors = kinds.floors(model.host_floor_s)
    times = np.where(fitted, np.maximum(floors, kernel_time), 0.0)
    conversions = conversion_times(roof_s, kinds, model.layout)
    op = np.where(conversions.alone, 0, conversions.parent)
    together = np.maximum(floors[op], kernel_time[op] + conversions.seconds) - times[op]
    times[conversions.rows] = np.where(conversions.alone, conversions.seconds, together)
    return times


@dataclass(frozen=True)
class PerChannelShare:
    """A predicted step's NCHW training batch norms (one thread block per channel): how many, and what their time
    per channel adds to the step's estimate over their class's efficiency alone."""

    ops: int
    added_s: float


def per_channel_share(launches: pd.DataFrame, model: EstimateModel) -> PerChannelShare | None:
    """What NCHW batch norm's time per channel adds to the estimate of predicted ``launches`` (:func:`with_estimate`
    by ``model``); None without such ops (channels_last, inference, no batch norm)."""
    kinds = op_kinds(launches)
    marked = kinds.channel_elements > 0
    if not marked.any():
        return None
    alone = estimate_times(launches["time_bound_s"].to_numpy(), kinds, replace(model, channel_rate=NO_CHANNEL_LIMIT))
    return PerChannelShare(int(marked.sum()), float(launches["time_s"].sum() - alone.sum()))


def describe_efficiency(efficiency: dict[str, float]) -> str:
    """``tensor 0.90, matmul_fp32 1.00, other 0.56, depthwise 0.56``: the efficiency of each op class."""
    return ", ".join(f"{name} {efficiency[name]:.2f}" for name in OP_CLASSES)


def describe_host_weights(weights: HostWeights) -> str:
    """``1 an element-wise op, 1.76 a convolution, 1.85 a matrix product, 3.24 a batch norm, measured on ...``."""
    return (
        f"1 an element-wise op, {weights.convolution:.2f} a convolution, {weights.matmul:.2f} a matrix product, "
        f"{weights.batch_norm:.2f} a batch norm, measured on {weights.measured_on}"
    )


def estimate_method(model: EstimateModel) -> str:
    efficiency = describe_efficiency(model.efficiency)
    host = "fitted" if model.host_source == FITTED_HOST else "measured"
    layout = ", ".join(f"{value:.3g} ({bits}-bit)" for bits, value in model.layout.efficiency.items())
    rate = model.channel_rate
    return (
        f"estimated: max(host floor {model.host_floor_s * 1e6:.1f} us ({host}) x the op's host weight "
        f"({describe_host_weights(load_host_weights())}), time at roof / efficiency of the "
        f"op's class: {efficiency}); cuDNN's layout conversions: {model.layout.kernel_s * 1e6:.3g} us per kernel + "
        f"time at roof / {layout} (measured); NCHW batch norm in training: the longer of that and N*H*W / "
        f"{rate.forward / 1e9:.3g} G (forward) or {rate.backward / 1e9:.3g} G (backward) elements/s (one thread "
        f"block per channel, measured), {model.source}"
    )


def with_host_cost(
    model: EstimateModel, host: HostCost, phases: str, precision: str, probe_weight: float
) -> EstimateModel:
    """The estimate with the host floor measured on a machine (``ceilings --measure``) instead of the fitted one:
    the probe's seconds per op over ``probe_weight``, the mean host weight of its ops
    (:func:`hroofline.collect.host_cost.probe_host_weight`), is an element-wise op's."""
    per_op = host.per_op(phases, precision)
    source = f"{host.describe(phases, precision)}: {per_op * 1e6:.1f} us per probe op / their mean weight "
    source += f"{probe_weight:.2f}"
    return replace(model, host_floor_s=per_op / probe_weight, host_source=source)


def with_estimate(launches: pd.DataFrame, model: EstimateModel) -> pd.DataFrame:
    """Predicted ops with ``time_s`` the estimate; ``time_bound_s`` keeps the roofline bound."""
    out = launches.copy()
    out["time_s"] = estimate_times(out["time_bound_s"].to_numpy(), op_kinds(out), model)
    out["time_method"] = estimate_method(model)
    return out


BAND_KINDS: tuple[str, ...] = ("train", "forward")  # step_phase's: training steps, inference passes
BAND_KEYS = ("median", "p90", "measured_on")


def error_bands(table: dict[str, Any]) -> tuple[ErrorBand | None, dict[str, ErrorBand]]:
    """A ``held_out_error`` table of metrics/estimate.toml: its band over all its steps (None without one), and
    those of its sub-tables per kind of step (:data:`BAND_KINDS`). A key or sub-table of another name, or a
    sub-table without all of :data:`BAND_KEYS`, is refused: a mistyped kind would otherwise print the wrong band."""
    unknown = sorted(set(table) - set(BAND_KEYS) - set(BAND_KINDS))
    if unknown:
        raise ValueError(f"held_out_error has no {', '.join(unknown)} (it holds {', '.join(BAND_KEYS + BAND_KINDS)})")
    kinds = {}
    for kind in BAND_KINDS:
        entry = table.get(kind)
        if entry is None:
            continue
        if not isinstance(entry, dict) or set(entry) != set(BAND_KEYS):
            raise ValueError(f"held_out_error.{kind} must be a table of {', '.join(BAND_KEYS)}")
        kinds[kind] = _band(entry)
    if "median" not in table and "p90" not in table:
        return None, kinds
    if "median" not in table or "p90" not in table:
        raise ValueError("held_out_error needs both median and p90, or neither")
    return _band(table), kinds


def _band(entry: dict[str, Any]) -> ErrorBand:
    return ErrorBand(float(entry["median"]), float(entry["p90"]), str(entry.get("measured_on", "")))


@cache
def load_estimate_model() -> EstimateModel:
    data = tomllib.loads((metrics_dir() / "estimate.toml").read_text())
    fit = data["fit"]
    generations = {}
    for cc, table in data.get("generation", {}).items():
        error, kind_errors = error_bands(table.get("held_out_error", {}))
        efficiency = {c: float(table["efficiency"][c]) for c in OP_CLASSES}
        generations[cc] = GenerationFit(efficiency, error, kind_errors, str(table["source"]))
    error, kind_errors = error_bands(data.get("held_out_error", {}))
    return EstimateModel(
        host_floor_s=float(fit["host_floor_s"]),
        efficiency={c: float(fit["efficiency"][c]) for c in OP_CLASSES},
        error=error,
        kind_errors=kind_errors,
        source=str(data.get("source", "")),
        generations=generations,
    )


@dataclass(frozen=True)
class StepTime:
    """A predicted step (or forward pass): bound and estimate, the estimate's error band, and throughput."""

    bound_s: float
    estimate_s: float
    error: ErrorBand | None  # the held-out error of steps of its kind; None: not known
    items: float  # samples (or tokens) per step
    unit: str  # "images", "tokens" or "samples"
    host_measured: bool = False  # the estimate takes a measured host floor; the error was the fitted floor's
    not_validated_for: str = ""  # the kind of model the error band was not measured on ("transformers"); "": it was

    @property
    def error_factor(self) -> float | None:
        """90% of held-out steps like this one were within this factor of their estimate."""
        return self.error.p90 if self.error else None

    @property
    def error_measured_on(self) -> str:
        """Which steps: the error holds for steps like these."""
        return self.error.measured_on if self.error else ""

    @property
    def low_s(self) -> float | None:
        return self.estimate_s / self.error_factor if self.error_factor else None

    @property
    def high_s(self) -> float | None:
        return self.estimate_s * self.error_factor if self.error_factor else None

    def throughput(self, seconds: float | None) -> float | None:
        """Items per second at ``seconds`` per step."""
        return self.items / seconds if seconds else None


def step_time(
    launches: pd.DataFrame, model: EstimateModel, items: float, unit: str, phases: str, not_validated_for: str = ""
) -> StepTime:
    """The step's bound and estimate, with the held-out error of steps of its kind (``phases``); the band was
    measured on torchvision models' steps, and ``not_validated_for`` names the kind of model it says nothing of."""
    return StepTime(
        bound_s=float(launches["time_bound_s"].sum()),
        estimate_s=float(launches["time_s"].sum()),
        error=model.error_for(phases),
        items=items,
        unit=unit,
        host_measured=model.host_source != FITTED_HOST,
        not_validated_for=not_validated_for,
    )
