"""cuDNN's NCHW <-> NHWC conversions around the convolutions an NCHW model runs on tensor cores.

cuDNN's tensor-core convolution kernels work in NHWC; a model in PyTorch's default layout (NCHW) pays kernels
that convert each convolution's tensors there and back. The traced step counts what each convolution would
convert (:func:`hroofline.work.ops.nchw_conversions`); a prediction for a GPU where traces showed the
conversions gets a row of them after each such convolution, bounded like any op (its bytes at the HBM
bandwidth) and estimated at the cost measured on real traces (``metrics/layout_conversions.toml``). A model in
channels_last has none.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import pandas as pd

from hroofline.analyze.predict import Peaks, predict_times, to_tensor_cores
from hroofline.model.quantities import FLOP_QUANTITIES
from hroofline.roofs.metricset import metrics_dir
from hroofline.work.op_names import LAYOUT_CONVERSION_KERNELS


@dataclass(frozen=True)
class LayoutCost:
    """Where conversions are predicted, and what one row of them takes: ``kernel_s`` per conversion kernel plus
    its bytes at ``efficiency`` (by element size in bits) of the datasheet HBM bandwidth."""

    compute_capabilities: frozenset[str]
    kernel_s: float
    efficiency: dict[int, float]
    measured_on: str

    def row_times(self, bound_s: np.ndarray, bits: np.ndarray, kernels: np.ndarray) -> np.ndarray:
        """The estimated time of conversion rows from their bound, element size and kernel count."""
        efficiency = np.array([self.efficiency[int(b)] for b in bits]) if len(bits) else np.zeros(0)
        return kernels * self.kernel_s + bound_s / efficiency


@cache
def load_layout_cost() -> LayoutCost:
    data = tomllib.loads((metrics_dir() / "layout_conversions.toml").read_text())
    return LayoutCost(
        compute_capabilities=frozenset(data["compute_capabilities"]),
        kernel_s=float(data["kernel_s"]),
        efficiency={int(bits): float(value) for bits, value in data["efficiency"].items()},
        measured_on=str(data["measured_on"]),
    )


def conversion_bits(kernels: pd.Series) -> np.ndarray:
    """Per op, the element size of its layout conversions in bits; 0 for every other op."""
    bits = np.zeros(len(kernels), dtype=np.int64)
    for size, name in LAYOUT_CONVERSION_KERNELS.items():
        bits[kernels.eq(name).to_numpy()] = size
    return bits


@dataclass(frozen=True)
class ConvertedStep:
    launches: pd.DataFrame
    note: str | None  # what the prediction says about layout conversions, if anything


def with_layout_conversions(launches: pd.DataFrame, peaks: Peaks) -> ConvertedStep:
    """The ops (after :func:`~hroofline.analyze.predict.to_tensor_cores`), each convolution the precision mode
    runs on tensor cores in NCHW followed by a row of cuDNN's conversions of its tensors to NHWC and back
    (the trace's ``bytes_layout``): real kernels, memory-bound. Only on the GPUs where traces showed them."""
    if peaks.route is None or "bytes_layout" not in launches:
        return ConvertedStep(launches, None)
    converted = launches["bytes_layout"].fillna(0.0).gt(0) & launches["flops_" + peaks.route.roof].gt(0)
    if not converted.any():
        return ConvertedStep(launches, None)
    cost = load_layout_cost()
    if peaks.gpu.cc not in cost.compute_capabilities:
        return ConvertedStep(
            launches,
            f"NCHW: no layout conversions are counted on {peaks.gpu.name} (compute capability {peaks.gpu.cc}): no "
            "trace of one showed what cuDNN converts there (metrics/layout_conversions.toml)",
        )
    bits = 16 if peaks.route.source_column == "flops_fp16" else 32
    rows = launches[converted].copy()
    rows["kernel"] = LAYOUT_CONVERSION_KERNELS[bits]
    rows["bytes_hbm"] = rows["bytes_layout"]
    rows["launches"] = rows["layout_kernels"]
    rows[[c for c in FLOP_QUANTITIES if c in rows]] = 0.0
    rows[["bytes_layout", "layout_kernels"]] = 0
    if "depthwise" in rows:
        rows["depthwise"] = False  # the conversions are no convolution
    if "channel_elements" in rows:
        rows["channel_elements"] = 0  # nor a batch norm
    # each conversion row right after its convolution
    order = np.concatenate([np.arange(len(launches)) * 2, np.flatnonzero(converted.to_numpy()) * 2 + 1])
    out = pd.concat([launches, rows], ignore_index=True).iloc[np.argsort(order, kind="stable")]
    out["launch_id"] = range(len(out))
    return ConvertedStep(out.reset_index(drop=True), None)


@dataclass(frozen=True)
class ConversionShare:
    """A predicted step's layout conversions: how many, and what they take of it."""

    convolutions: int  # convolution ops with a row of conversions
    kernels: int
    bytes: float
    bound_s: float
    estimate_s: float


def predicted_ops(trace: pd.DataFrame, peaks: Peaks) -> ConvertedStep:
    """A traced step's ops as predicted on ``peaks``' GPU: work on the tensor cores its precision mode uses, cuDNN's
    layout conversions after their convolutions, and each op's time at roof (``time_bound_s``)."""
    converted = with_layout_conversions(to_tensor_cores(trace, peaks), peaks)
    return replace(converted, launches=predict_times(converted.launches, peaks))


@dataclass(frozen=True)
class StepLayout:
    """A predicted step's layout conversions, summed (None if it has none), and its traced ops per phase and in
    ``total``, without the conversion rows between them."""

    conversions: ConversionShare | None
    op_counts: dict[str, int]


def step_layout(launches: pd.DataFrame) -> StepLayout:
    """The conversion rows of a predicted step (:func:`with_layout_conversions`) and the traced ops around them."""
    is_conversion = conversion_bits(launches["kernel"]) > 0
    rows, ops = launches[is_conversion], launches[~is_conversion]
    share = None
    if not rows.empty:
        share = ConversionShare(
            convolutions=len(rows),
            kernels=int(rows["launches"].sum()),
            bytes=float(rows["bytes_hbm"].sum()),
            bound_s=float(rows["time_bound_s"].sum()),
            estimate_s=float(rows["time_s"].sum()),
        )
    counts = {str(phase): int(count) for phase, count in ops.groupby("phase").size().items()}
    return StepLayout(share, {**counts, "total": len(ops)})
